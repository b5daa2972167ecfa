/* registry.c - the plugins a resident host keeps loaded. */
#include "registry.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* What a file was when its plugin was loaded: a change means a rebuild. */
typedef struct file_mark {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} file_mark;

/* A job's GPU sessions, kept between its runs under the key that says which
 * job it is (soren_loaded_take_sessions). */
typedef struct session_set {
    struct session_set *next;
    char *key;
    soren_gpu_session *stage[SOREN_RUN_SESSIONS];
} session_set;

/* The most sets a plugin keeps idle; the least recently used go first. */
enum { IDLE_SETS_MAX = 8 };

struct soren_loaded {
    soren_loaded *next;   /* in the registry's list, while current */
    soren_plugin *plugin;
    char *manifest_path;
    file_mark manifest, library;
    unsigned users;       /* jobs holding it, plus one while current */
    int current;
    unsigned running;     /* jobs holding it */
    session_set *idle;    /* sessions no job is using */
    uint64_t last_bytes;  /* the last run's input (0: none yet) ... */
    uint64_t last_pairs;  /* ... and the pairs its first stage left */
};

struct soren_registry {
    pthread_mutex_t lock;
    soren_loaded *list;   /* the current plugins */
    char *copy_dir;
};

static void mark(const char *path, file_mark *m)
{
    struct stat st;
    memset(m, 0, sizeof *m);
    if (stat(path, &st) == 0) {
        m->dev = st.st_dev;
        m->ino = st.st_ino;
        m->size = st.st_size;
        m->mtime = st.st_mtim;
    }
}

static int same_mark(const file_mark *a, const file_mark *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

soren_registry *soren_registry_new(const char *copy_dir)
{
    soren_registry *r = calloc(1, sizeof *r);
    if (!r || !(r->copy_dir = strdup(copy_dir))) {
        free(r);
        return NULL;
    }
    pthread_mutex_init(&r->lock, NULL);
    return r;
}

static void set_free(session_set *s)
{
    for (size_t i = 0; i < SOREN_RUN_SESSIONS; i++)
        soren_gpu_session_free(s->stage[i]);
    free(s->key);
    free(s);
}

static void close_loaded(soren_loaded *l)
{
    while (l->idle) {
        session_set *s = l->idle;
        l->idle = s->next;
        set_free(s);
    }
    soren_plugin_close(l->plugin);
    free(l->manifest_path);
    free(l);
}

/* Drops one user (the lock held); *closing gets l where that was the last. */
static void drop(soren_loaded *l, soren_loaded **closing)
{
    *closing = --l->users == 0 ? l : NULL;
}

void soren_registry_free(soren_registry *r)
{
    if (!r)
        return;
    while (r->list) {
        soren_loaded *l = r->list;
        r->list = l->next;
        close_loaded(l);
    }
    pthread_mutex_destroy(&r->lock);
    free(r->copy_dir);
    free(r);
}

/* Takes l out of the list (the lock held); it closes once its jobs end. */
static void retire(soren_registry *r, soren_loaded *l, soren_loaded **closing)
{
    for (soren_loaded **at = &r->list; *at; at = &(*at)->next)
        if (*at == l) {
            *at = l->next;
            break;
        }
    l->current = 0;
    drop(l, closing);
}

static soren_loaded *find(soren_registry *r, const char *name)
{
    for (soren_loaded *l = r->list; l; l = l->next)
        if (strcmp(l->plugin->manifest->name, name) == 0)
            return l;
    return NULL;
}

/* Opens manifest_path and makes it the current plugin of its name, with
 * extra users beside the registry's own. */
static soren_status load(soren_registry *r, const char *manifest_path, soren_trust trust,
                         unsigned extra, soren_loaded **out, soren_error *err)
{
    soren_loaded *l = calloc(1, sizeof *l);
    if (!l || !(l->manifest_path = strdup(manifest_path))) {
        free(l);
        return soren_error_set(err, SOREN_ENOMEM, "out of memory loading %s", manifest_path);
    }
    /* Marked before opening: a rebuild during the open shows as a change. */
    mark(manifest_path, &l->manifest);
    soren_status rc = soren_plugin_open_copy(manifest_path, trust, r->copy_dir, &l->plugin, err);
    if (rc != SOREN_OK) {
        free(l->manifest_path);
        free(l);
        return rc;
    }
    mark(l->plugin->library_path, &l->library);
    l->current = 1;
    l->users = 1 + extra;
    l->running = extra;
    soren_loaded *closing = NULL;
    pthread_mutex_lock(&r->lock);
    soren_loaded *old = find(r, l->plugin->manifest->name);
    if (old)
        retire(r, old, &closing);
    l->next = r->list;
    r->list = l;
    pthread_mutex_unlock(&r->lock);
    if (closing)
        close_loaded(closing);
    *out = l;
    return SOREN_OK;
}

soren_status soren_registry_load(soren_registry *r, const char *manifest_path,
                                 soren_trust trust, soren_error *err)
{
    soren_loaded *l = NULL;
    return load(r, manifest_path, trust, 0, &l, err);
}

soren_status soren_registry_unload(soren_registry *r, const char *name, soren_error *err)
{
    soren_loaded *closing = NULL;
    pthread_mutex_lock(&r->lock);
    soren_loaded *l = find(r, name);
    if (l)
        retire(r, l, &closing);
    pthread_mutex_unlock(&r->lock);
    if (!l)
        return soren_error_set(err, SOREN_EPLUGIN, "no plugin called %s is loaded "
                               "(soren-host ps lists those that are)", name);
    if (closing)
        close_loaded(closing);
    return SOREN_OK;
}

soren_status soren_registry_acquire(soren_registry *r, const char *manifest_path,
                                    soren_trust trust, soren_loaded **out, soren_error *err)
{
    pthread_mutex_lock(&r->lock);
    for (soren_loaded *l = r->list; l; l = l->next) {
        if (strcmp(l->manifest_path, manifest_path) != 0)
            continue;
        file_mark now_manifest, now_library;
        mark(manifest_path, &now_manifest);
        mark(l->plugin->library_path, &now_library);
        if (!same_mark(&now_manifest, &l->manifest) || !same_mark(&now_library, &l->library))
            break; /* rebuilt: load it again */
        l->users++;
        l->running++;
        pthread_mutex_unlock(&r->lock);
        *out = l;
        return SOREN_OK;
    }
    pthread_mutex_unlock(&r->lock);
    return load(r, manifest_path, trust, 1, out, err);
}

void soren_registry_release(soren_registry *r, soren_loaded *l)
{
    soren_loaded *closing = NULL;
    pthread_mutex_lock(&r->lock);
    l->running--;
    drop(l, &closing);
    pthread_mutex_unlock(&r->lock);
    if (closing)
        close_loaded(closing);
}

const soren_plugin *soren_loaded_plugin(const soren_loaded *l)
{
    return l->plugin;
}

void soren_loaded_last_run(soren_registry *r, soren_loaded *l, uint64_t *bytes, uint64_t *pairs)
{
    pthread_mutex_lock(&r->lock);
    *bytes = l->last_bytes;
    *pairs = l->last_pairs;
    pthread_mutex_unlock(&r->lock);
}

void soren_loaded_note_run(soren_registry *r, soren_loaded *l, uint64_t bytes, uint64_t pairs)
{
    pthread_mutex_lock(&r->lock);
    l->last_bytes = bytes;
    l->last_pairs = pairs;
    pthread_mutex_unlock(&r->lock);
}

/* Takes the set under key from the idle list, else the least recently used
 * one (the lock held), or NULL where there is none. */
static session_set *take_idle(soren_loaded *l, const char *key)
{
    session_set **last = NULL;
    for (session_set **at = &l->idle; *at; at = &(*at)->next) {
        if (strcmp((*at)->key, key) == 0) {
            session_set *s = *at;
            *at = s->next;
            return s;
        }
        last = at;
    }
    if (!last)
        return NULL;
    session_set *s = *last;
    *last = NULL;
    return s;
}

soren_gpu_session **soren_loaded_take_sessions(soren_registry *r, soren_loaded *l,
                                              const char *key)
{
    if (!key)
        return NULL;
    pthread_mutex_lock(&r->lock);
    session_set *s = take_idle(l, key);
    pthread_mutex_unlock(&r->lock);
    if (s && strcmp(s->key, key) != 0) {
        /* Another job's: this one renews its sessions, which keeps their
         * streams, pinned buffers and device blocks. */
        char *own = strdup(key);
        if (!own) {
            set_free(s);
            return NULL;
        }
        free(s->key);
        s->key = own;
        for (size_t i = 0; i < SOREN_RUN_SESSIONS; i++)
            if (s->stage[i])
                soren_gpu_session_forget(s->stage[i]);
    }
    if (!s && (s = calloc(1, sizeof *s)) != NULL && !(s->key = strdup(key))) {
        free(s);
        s = NULL;
    }
    return s ? s->stage : NULL;
}

void soren_loaded_give_sessions(soren_registry *r, soren_loaded *l, soren_gpu_session **set)
{
    if (!set)
        return;
    session_set *s = (session_set *)((char *)set - offsetof(session_set, stage));
    session_set *old = NULL;
    pthread_mutex_lock(&r->lock);
    s->next = l->idle;
    l->idle = s;
    size_t kept = 0;
    for (session_set **at = &l->idle; *at; at = &(*at)->next)
        if (++kept == IDLE_SETS_MAX) {
            old = (*at)->next;
            (*at)->next = NULL;
            break;
        }
    pthread_mutex_unlock(&r->lock);
    while (old) {
        session_set *next = old->next;
        set_free(old);
        old = next;
    }
}

void soren_registry_drop_idle_sessions(soren_registry *r)
{
    session_set *drop = NULL;
    pthread_mutex_lock(&r->lock);
    for (soren_loaded *l = r->list; l; l = l->next)
        while (l->idle) {
            session_set *s = l->idle;
            l->idle = s->next;
            s->next = drop;
            drop = s;
        }
    pthread_mutex_unlock(&r->lock);
    while (drop) {
        session_set *next = drop->next;
        set_free(drop);
        drop = next;
    }
}

void soren_registry_print(soren_registry *r, FILE *f)
{
    pthread_mutex_lock(&r->lock);
    for (soren_loaded *l = r->list; l; l = l->next) {
        unsigned kept = 0;
        for (const session_set *s = l->idle; s; s = s->next)
            kept++;
        fprintf(f, "  %-16s %-8s %u job%s running, GPU sessions of %u kept  %s (library %s)\n",
                l->plugin->manifest->name, l->plugin->manifest->version, l->running,
                l->running == 1 ? "" : "s", kept, l->manifest_path, l->plugin->library_path);
    }
    if (!r->list)
        fprintf(f, "  (none)\n");
    pthread_mutex_unlock(&r->lock);
}
