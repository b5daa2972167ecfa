#include "loader.h"

#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfcheck.h"
#include "sha256.h"

/* The library's real path, refused if it is missing or leaves the manifest's
 * folder (a symlink pointing elsewhere included). */
static soren_status resolve_library(const soren_manifest *m, char **out, soren_error *err)
{
    char *joined = NULL;
    if (asprintf(&joined, "%s/%s", m->dir, m->library) < 0)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    char *real = realpath(joined, NULL);
    int saved = errno;
    char *real_dir = realpath(m->dir, NULL);
    soren_status rc = SOREN_OK;
    if (!real) {
        rc = soren_error_errno(err, SOREN_EPLUGIN, saved,
                               "%s: $.library: cannot open %s (build the plugin, or install "
                               "NAME.so beside NAME.json)", m->path, joined);
    } else if (!real_dir) {
        rc = soren_error_errno(err, SOREN_EPLUGIN, errno, "%s: cannot resolve its folder %s",
                               m->path, m->dir);
    } else {
        size_t n = strlen(real_dir);
        int inside = strncmp(real, real_dir, n) == 0 && (real[n] == '/' || n == 1);
        if (!inside)
            rc = soren_error_set(err, SOREN_EPLUGIN,
                                 "%s: $.library: \"%s\" resolves to %s, outside the manifest's "
                                 "folder %s; a plugin's library must live beside its manifest",
                                 m->path, m->library, real, real_dir);
    }
    free(joined);
    free(real_dir);
    if (rc != SOREN_OK)
        free(real);
    else
        *out = real;
    return rc;
}

static soren_status verify_digest(const soren_manifest *m, int fd, const char *lib,
                                  soren_error *err)
{
    if (!m->sha256)
        return SOREN_OK;
    char hex[65];
    soren_status rc = soren_sha256_fd(fd, lib, hex, err);
    if (rc != SOREN_OK)
        return rc;
    if (strcmp(hex, m->sha256) != 0)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s: $.sha256 expects %s but the SHA-256 of %s is %s; the library "
                               "was changed or replaced: reinstall the plugin, or pin the new "
                               "library's digest if you built it", m->path, m->sha256, lib, hex);
    return SOREN_OK;
}

/* The last part of a path. */
static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The embedded copy must say what the side-car says, its sha256 pin aside
 * (soren_manifest_matches): a plugin rebuilt without its new manifest (or
 * the reverse) is caught here, not by a wrong result. */
static soren_status check_embedded(const soren_plugin *p, soren_error *err)
{
    const char *text = p->table->manifest;
    const char *begin = text ? strstr(text, SOREN_MANIFEST_BEGIN) : NULL;
    const char *body = begin ? begin + strlen(SOREN_MANIFEST_BEGIN) : NULL;
    const char *end = body ? strstr(body, SOREN_MANIFEST_END) : NULL;
    if (!end)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s: the library has no embedded manifest between the SOREN "
                               "MANIFEST markers: rebuild it with build-aux/embed-manifest",
                               p->library_path);
    if (!soren_manifest_matches(p->manifest, body, (size_t)(end - body)))
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s: the manifest embedded in %s differs from %s (a stale pair): "
                               "rebuild the plugin, or install %s and %s together",
                               p->manifest->path, p->library_path, p->manifest->path,
                               base_name(p->library_path), base_name(p->manifest->path));
    return SOREN_OK;
}

static const char *combine_name(uint32_t op)
{
    switch (op) {
    case SOREN_COMBINE_NONE: return "none";
    case SOREN_COMBINE_SUM: return "sum";
    case SOREN_COMBINE_MIN: return "min";
    case SOREN_COMBINE_MAX: return "max";
    case SOREN_COMBINE_COUNT: return "count";
    case SOREN_COMBINE_USER: return "function";
    }
    return "unknown";
}

static const char *reduce_name(soren_reduce_kind k)
{
    return k == SOREN_REDUCE_FUNCTION ? "function" : k == SOREN_REDUCE_COMBINE ? "combine" : "none";
}

/* The types the compiled stage assumes: an unset key is a string key, an
 * unset value is the built-in combine's type. */
static soren_type stage_key(const soren_stage *s)
{
    return s->key ? (soren_type)s->key : SOREN_TYPE_STRING;
}

static soren_type stage_value(const soren_stage *s)
{
    return s->value ? (soren_type)s->value : (soren_type)s->combine.type;
}

/* The SDK's name for type t, e.g. SOREN_TYPE_U32, in buf. */
static const char *type_constant(soren_type t, char *buf, size_t size)
{
    int n = snprintf(buf, size, "SOREN_TYPE_%s", soren_type_name(t));
    for (int i = (int)strlen("SOREN_TYPE_"); i < n && (size_t)i < size; i++)
        if (buf[i] >= 'a' && buf[i] <= 'z')
            buf[i] = (char)(buf[i] - 'a' + 'A');
    return buf;
}

/* Stage i of the library against stage i of the manifest.  Messages name
 * the stage where the job has more than one. */
static soren_status check_stage(const soren_plugin *p, size_t i, soren_error *err)
{
    const soren_manifest *m = p->manifest;
    const soren_stage *s = &p->table->stages[i];
    const soren_manifest_stage want = soren_manifest_stage_at(m, i);
    const char *lib = p->library_path;
    char where[32] = "";
    if (soren_manifest_stages(m) > 1)
        snprintf(where, sizeof where, "stage %zu: ", i + 1);

    if (!s->map)
        return soren_error_set(err, SOREN_EPLUGIN, "%s: stage %zu has no map function", lib,
                               i + 1);
    char constant[32];
    if (stage_key(s) != want.key.type)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s: %skey type: the library was built for %s, %s says %s: change "
                               "the manifest's key type to %s, or set `.key = %s` in SOREN_STAGE "
                               "and rebuild", lib, where, soren_type_name(stage_key(s)), m->path,
                               soren_type_name(want.key.type), soren_type_name(stage_key(s)),
                               type_constant(want.key.type, constant, sizeof constant));
    if (stage_value(s) != want.value.type)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s: %svalue type: the library was built for %s, %s says %s: "
                               "change the manifest's value type to %s, or set `.value = %s` "
                               "(and a combine of that type) in SOREN_STAGE and rebuild",
                               lib, where, soren_type_name(stage_value(s)), m->path,
                               soren_type_name(want.value.type), soren_type_name(stage_value(s)),
                               type_constant(want.value.type, constant, sizeof constant));
    if (s->combine.op != (uint32_t)want.combine)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s: %scombine: the library has %s, %s says %s", lib, where,
                               combine_name(s->combine.op), m->path, combine_name(want.combine));
    if (s->combine.op == SOREN_COMBINE_USER && (!s->combine.fn || !s->combine.identity))
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s: %sa user combine needs both a function and an identity "
                               "(SOREN_COMBINE_FN(fn, &identity))", lib, where);
    if ((s->reduce != NULL) != (want.reduce == SOREN_REDUCE_FUNCTION))
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s: %sreduce: the library %s a reduce function, %s says \"%s\"",
                               lib, where, s->reduce ? "has" : "has no", m->path,
                               reduce_name(want.reduce));
    return SOREN_OK;
}

static soren_status check_table(const soren_plugin *p, soren_error *err)
{
    const soren_plugin_table *t = p->table;
    const soren_manifest *m = p->manifest;
    const char *lib = p->library_path;

    if (t->abi_major != SOREN_ABI_MAJOR)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s: built for plugin ABI %u.%u, this soren-host loads ABI %d.x: "
                               "%s", lib, t->abi_major, t->abi_minor, SOREN_ABI_MAJOR,
                               t->abi_major > SOREN_ABI_MAJOR ? "upgrade soren-host"
                                                              : "rebuild the plugin");
    if (t->size < sizeof(soren_plugin_table))
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s: its plugin table is %u bytes, ABI %d.%d needs at least %zu: "
                               "the library is corrupt or was built with a broken SDK", lib,
                               t->size, SOREN_ABI_MAJOR, SOREN_ABI_MINOR,
                               sizeof(soren_plugin_table));
    if (!t->name || strcmp(t->name, m->name) != 0)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s: the library is job \"%s\" but %s names \"%s\"", lib,
                               t->name ? t->name : "(null)", m->path, m->name);
    soren_status rc = check_embedded(p, err);
    if (rc != SOREN_OK)
        return rc;
    size_t stages = soren_manifest_stages(m);
    if (t->stage_count != stages || !t->stages)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s: the library has %u stage%s, %s describes %zu", lib,
                               t->stage_count, t->stage_count == 1 ? "" : "s", m->path, stages);
    for (size_t i = 0; i < stages; i++) {
        rc = check_stage(p, i, err);
        if (rc != SOREN_OK)
            return rc;
    }
    return SOREN_OK;
}

/* The name a manifest is found by is its file's name less ".json"; a
 * manifest whose $.name says otherwise would make one name mean two plugins
 * (the one found and the one listed), so it is refused. */
static soren_status check_file_name(const soren_manifest *m, soren_error *err)
{
    const char *file = base_name(m->path);
    size_t n = strlen(file), k = strlen(m->name);
    if (n == k + 5 && strncmp(file, m->name, k) == 0 && strcmp(file + k, ".json") == 0)
        return SOREN_OK;
    return soren_error_set(err, SOREN_EMANIFEST,
                           "%s: $.name is \"%s\" but the file is %s: a plugin is found by its "
                           "file's name, so the two must agree: rename the file %s.json or set "
                           "$.name to the file's name", m->path, m->name, file, m->name);
}

soren_status soren_plugin_manifest_load(const char *path, soren_trust trust,
                                        soren_manifest **out, soren_error *err)
{
    int fd;
    *out = NULL;
    soren_status rc = soren_manifest_open(path, &fd, err);
    if (rc != SOREN_OK)
        return rc;
    rc = soren_trust_file(fd, path, "manifest", trust, err);
    if (rc == SOREN_OK)
        rc = soren_manifest_read(fd, path, out, err);
    close(fd);
    if (rc == SOREN_OK && (rc = check_file_name(*out, err)) != SOREN_OK) {
        soren_manifest_free(*out);
        *out = NULL;
    }
    return rc;
}

/* A copy of the library open on fd (lib names it), made in folder dir
 * under a name never used before in this process, in *copy (malloc'd).
 * Loading the copy, never the library, is what makes a rebuilt library
 * load as the new code while the old one is loaded: the dynamic loader
 * hands back a library already loaded under the same name or file, and
 * one that holds unique symbols is never unloaded. */
static soren_status copy_library(int fd, const char *lib, const char *dir, char **copy,
                                 soren_error *err)
{
    static atomic_uint_fast64_t copies;
    uint64_t n = atomic_fetch_add(&copies, 1);
    const char *base = base_name(lib);
    size_t size = strlen(dir) + strlen(base) + 48;
    *copy = malloc(size);
    if (!*copy)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    snprintf(*copy, size, "%s/%ld-%llu-%s", dir, (long)getpid(), (unsigned long long)n, base);
    int to = open(*copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
    soren_status rc = SOREN_OK;
    if (to < 0) {
        rc = soren_error_errno(err, SOREN_EPLUGIN, errno, "cannot copy %s to %s to load it",
                               lib, *copy);
    } else {
        char buf[1 << 16];
        off_t at = 0;
        ssize_t got;
        while ((got = pread(fd, buf, sizeof buf, at)) > 0 || (got < 0 && errno == EINTR)) {
            if (got < 0)
                continue;
            if (write(to, buf, (size_t)got) != got) {
                got = -1;
                break;
            }
            at += got;
        }
        if (got < 0)
            rc = soren_error_errno(err, SOREN_EPLUGIN, errno ? errno : EIO,
                                   "cannot copy %s to %s to load it", lib, *copy);
        if (close(to) != 0 && rc == SOREN_OK)
            rc = soren_error_errno(err, SOREN_EPLUGIN, errno,
                                   "cannot copy %s to %s to load it", lib, *copy);
    }
    if (rc != SOREN_OK) {
        if (to >= 0)
            unlink(*copy);
        free(*copy);
        *copy = NULL;
    }
    return rc;
}

/* dlopen of the file open on fd, by its name /proc/self/fd/N.  glibc takes
 * an object already loaded under the same name for the one asked for, and a
 * library that dlclose leaves resident (one with unique symbols) keeps the
 * name of a descriptor since closed and reused; so a name that an object
 * other than this file holds is passed over for a duplicate descriptor of
 * another number.  *held is the descriptor the library was loaded through,
 * to keep open while it is; -1 when it is loaded by path, where /proc is not
 * mounted.  NULL (dlerror set) if it fails. */
static void *dlopen_fd(int fd, const char *path, int *held)
{
    *held = -1;
    for (int tries = 0, f = fd; tries < 16; tries++) {
        char name[64];
        snprintf(name, sizeof name, "/proc/self/fd/%d", f);
        if (f == fd && access(name, R_OK) != 0)
            return dlopen(path, RTLD_NOW | RTLD_LOCAL);
        void *resident = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
        struct link_map *lm = NULL;
        int taken = resident && dlinfo(resident, RTLD_DI_LINKMAP, &lm) == 0 && lm &&
                    strcmp(lm->l_name, name) == 0;
        if (resident)
            dlclose(resident);
        if (!taken) {
            void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
            if (h)
                *held = f;
            else if (f != fd)
                close(f);
            return h;
        }
        int next = fcntl(fd, F_DUPFD_CLOEXEC, f + 1);
        if (f != fd)
            close(f);
        if (next < 0)
            break;
        f = next;
    }
    /* Every name tried is taken: the path it is. */
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

/* The libraries loaded from their own files (not copies), one entry a
 * file.  Each is loaded once, by the name /proc/self/fd/N of a descriptor
 * the entry holds, and opened again by that name alone: the dynamic loader
 * would take a second descriptor's name as one more name of the same
 * library, and hand the library out for whatever file that descriptor
 * number names next.  A library with device code is kept (see
 * keep_device_code) with its entry and descriptor until the process ends. */
typedef struct loaded_file {
    dev_t dev;
    ino_t ino;
    int fd;         /* names the library; -1 where it was loaded by path */
    unsigned users; /* soren_plugins open on it */
    int kept;
    char name[64];
} loaded_file;

static pthread_mutex_t loaded_lock = PTHREAD_MUTEX_INITIALIZER;
static loaded_file *loaded_files;
static size_t loaded_count, loaded_cap;

static loaded_file *loaded_find(dev_t dev, ino_t ino)
{
    for (size_t i = 0; i < loaded_count; i++)
        if (loaded_files[i].dev == dev && loaded_files[i].ino == ino)
            return &loaded_files[i];
    return NULL;
}

/* The failure of a dlopen of lib, in dlerror's words, read at once.  The
 * SDK's SOREN_PLUGIN refers to the manifest that the kit embeds, so a
 * library built without it lacks that symbol: the message says how to
 * build one. */
static soren_status dlopen_failed(const char *lib, soren_error *err)
{
    const char *why = dlerror();
    const char *file = base_name(lib);
    size_t stem = strlen(file);
    if (stem > 3 && strcmp(file + stem - 3, ".so") == 0)
        stem -= 3;
    if (why && strstr(why, "undefined symbol: soren__embedded_manifest"))
        return soren_error_set(err, SOREN_EPLUGIN,
                               "cannot load %s: %s; %s was not built with Soren's plugin kit, "
                               "which embeds the manifest into the library: build it with "
                               "`make` and a Makefile that includes plugin.mk (`soren-host "
                               "new` writes one), or compile in the C source that "
                               "`embed-manifest %.*s.json` writes",
                               lib, why, file, (int)stem, file);
    return soren_error_set(err, SOREN_EPLUGIN, "cannot load %s: %s", lib,
                           why ? why : "unknown dlopen error");
}

/* dlopen of the library open on fd (lib names it) into *handle: again by
 * its entry's name where the file is loaded, else through fd, entered in
 * the table.  Under loaded_lock. */
static soren_status dlopen_entered(int fd, const char *lib, void **handle, loaded_file **entry,
                                   soren_error *err)
{
    struct stat st;
    *handle = NULL;
    *entry = NULL;
    if (fstat(fd, &st) != 0)
        return soren_error_errno(err, SOREN_EPLUGIN, errno, "cannot examine %s", lib);
    loaded_file *e = loaded_find(st.st_dev, st.st_ino);
    if (!e && loaded_count == loaded_cap) {
        size_t cap = loaded_cap ? 2 * loaded_cap : 8;
        loaded_file *more = realloc(loaded_files, cap * sizeof *more);
        if (!more)
            return soren_error_set(err, SOREN_ENOMEM, "out of memory loading %s", lib);
        loaded_files = more;
        loaded_cap = cap;
    }
    int held = -1;
    dlerror();
    *handle = e ? dlopen(e->fd >= 0 ? e->name : lib, RTLD_NOW | RTLD_LOCAL)
                : dlopen_fd(fd, lib, &held);
    if (!*handle)
        return dlopen_failed(lib, err);
    if (e) {
        e->users++;
    } else {
        e = &loaded_files[loaded_count++];
        *e = (loaded_file){.dev = st.st_dev, .ino = st.st_ino, .fd = held, .users = 1};
        if (held >= 0)
            snprintf(e->name, sizeof e->name, "/proc/self/fd/%d", held);
    }
    *entry = e;
    return SOREN_OK;
}

/* One user of the library of (dev, ino) fewer: the entry and its
 * descriptor go with the last, unless the library is kept. */
static void loaded_leave(dev_t dev, ino_t ino)
{
    pthread_mutex_lock(&loaded_lock);
    loaded_file *e = loaded_find(dev, ino);
    if (e && --e->users == 0 && !e->kept) {
        if (e->fd >= 0)
            close(e->fd);
        *e = loaded_files[--loaded_count];
    }
    pthread_mutex_unlock(&loaded_lock);
}

/* Opens the library at its resolved path, checks it (trust, ELF headers,
 * digest) on that descriptor and loads the same file through it: the file
 * checked is the file loaded, even if the path is changed meanwhile.  The
 * descriptor stays open while the library is loaded, so that its name
 * (/proc/self/fd/N, which tools such as debuggers read) names it.  Where
 * /proc is not mounted, the library is loaded by its path. */
static soren_status load_library(soren_plugin *p, soren_trust trust, const char *copy_dir,
                                 soren_error *err)
{
    const char *lib = p->library_path;
    /* O_NONBLOCK: a FIFO is refused by the ELF check, not waited on. */
    int fd = open(lib, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    /* Kept open, it must not take the place of a closed standard stream,
     * which a run would then read or write. */
    if (fd >= 0 && fd <= STDERR_FILENO) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
        close(fd);
        fd = high;
    }
    if (fd < 0) {
        int e = errno;
        return soren_error_errno(err, e == ENOMEM ? SOREN_ENOMEM : SOREN_EPLUGIN, e,
                                 "cannot read %s", lib);
    }
    soren_status rc = soren_trust_file(fd, lib, "library", trust, err);
    if (rc == SOREN_OK)
        rc = soren__elf_check(fd, lib, err);
    if (rc == SOREN_OK)
        rc = verify_digest(p->manifest, fd, lib, err);
    char *copy = NULL;
    if (rc == SOREN_OK && copy_dir)
        rc = copy_library(fd, lib, copy_dir, &copy, err);
    int fd_held = 0;
    if (rc == SOREN_OK && copy) {
        dlerror();
        p->handle = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
        if (!p->handle)
            rc = dlopen_failed(lib, err);
    } else if (rc == SOREN_OK) {
        loaded_file *e = NULL;
        pthread_mutex_lock(&loaded_lock);
        rc = dlopen_entered(fd, lib, &p->handle, &e, err);
        if (e) {
            p->entered = 1;
            p->file_dev = e->dev;
            p->file_ino = e->ino;
            fd_held = e->fd == fd;
        }
        pthread_mutex_unlock(&loaded_lock);
    }
    /* Loaded, the copy needs no name: the mapping holds it. */
    if (copy)
        unlink(copy);
    free(copy);
    if (!fd_held)
        close(fd);
    return rc;
}

/* A plugin with device code stays loaded until the process ends: the CUDA
 * runtime registers a library's device code when it is loaded and drops it
 * when it is unloaded, and device code loaded again into the same process
 * after that (the same plugin opened anew) crashed the CUDA driver at its
 * first kernel.  A rebuilt plugin still loads as new code: it is another
 * file, or, through a host, another private copy. */
static soren_status keep_device_code(soren_plugin *p, soren_error *err)
{
    int device_code = 0;
    for (uint32_t i = 0; i < p->table->stage_count; i++)
        device_code |= p->table->stages[i].gpu != NULL;
    if (!device_code)
        return SOREN_OK;
    struct link_map *lm = NULL;
    void *kept = NULL;
    if (dlinfo(p->handle, RTLD_DI_LINKMAP, &lm) == 0 && lm)
        kept = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    if (!kept) {
        const char *why = dlerror();
        return soren_error_set(err, SOREN_EPLUGIN, "%s: cannot keep its device code loaded: %s",
                               p->library_path, why ? why : "the loaded library is not found");
    }
    dlclose(kept); /* the flag stays; the handle was one reference more */
    if (p->entered) {
        pthread_mutex_lock(&loaded_lock);
        loaded_file *e = loaded_find(p->file_dev, p->file_ino);
        if (e)
            e->kept = 1;
        pthread_mutex_unlock(&loaded_lock);
    }
    return SOREN_OK;
}

soren_status soren_plugin_open(const char *manifest_path, soren_trust trust, soren_plugin **out,
                               soren_error *err)
{
    return soren_plugin_open_copy(manifest_path, trust, NULL, out, err);
}

soren_status soren_plugin_open_unloaded(const char *manifest_path, soren_trust trust,
                                        soren_plugin **out, soren_error *err)
{
    *out = NULL;
    soren_plugin *p = calloc(1, sizeof *p);
    if (!p)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    soren_status rc = soren_plugin_manifest_load(manifest_path, trust, &p->manifest, err);
    if (rc == SOREN_OK)
        rc = resolve_library(p->manifest, &p->library_path, err);
    if (rc != SOREN_OK) {
        soren_plugin_close(p);
        return rc;
    }
    *out = p;
    return SOREN_OK;
}

/* What loading put in p taken back: p is unloaded again. */
static void unload(soren_plugin *p)
{
    if (p->handle)
        dlclose(p->handle);
    if (p->entered)
        loaded_leave(p->file_dev, p->file_ino);
    p->handle = NULL;
    p->entered = 0;
    p->table = NULL;
}

soren_status soren_plugin_load(soren_plugin *p, soren_trust trust, const char *copy_dir,
                               soren_error *err)
{
    soren_status rc = load_library(p, trust, copy_dir, err);
    if (rc == SOREN_OK) {
        dlerror();
        p->table = dlsym(p->handle, SOREN_PLUGIN_SYMBOL);
        if (!p->table) {
            const char *why = dlerror();
            rc = soren_error_set(err, SOREN_EPLUGIN,
                                 "%s: no symbol %s (%s): not a Soren plugin, or one built for "
                                 "another ABI; rebuild it against this SDK (soren.h ABI %d.%d)",
                                 p->library_path, SOREN_PLUGIN_SYMBOL,
                                 why ? why : "its value is NULL", SOREN_ABI_MAJOR,
                                 SOREN_ABI_MINOR);
        }
    }
    if (rc == SOREN_OK)
        rc = check_table(p, err);
    if (rc == SOREN_OK)
        rc = keep_device_code(p, err);
    if (rc != SOREN_OK)
        unload(p);
    return rc;
}

soren_status soren_plugin_open_copy(const char *manifest_path, soren_trust trust,
                                    const char *copy_dir, soren_plugin **out, soren_error *err)
{
    soren_status rc = soren_plugin_open_unloaded(manifest_path, trust, out, err);
    if (rc == SOREN_OK && (rc = soren_plugin_load(*out, trust, copy_dir, err)) != SOREN_OK) {
        soren_plugin_close(*out);
        *out = NULL;
    }
    return rc;
}

void soren_plugin_close(soren_plugin *p)
{
    if (!p)
        return;
    unload(p);
    free(p->library_path);
    soren_manifest_free(p->manifest);
    free(p);
}
