#include "search.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../nearest.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static soren_status push_dir(soren_search_path *sp, const char *dir, size_t len,
                             soren_error *err)
{
    if (len == 0)
        return SOREN_OK; /* "a::b" or a trailing ':' names no folder */
    /* A folder named twice is searched once, where it first comes. */
    for (size_t i = 0; i < sp->count; i++)
        if (strlen(sp->dirs[i]) == len && strncmp(sp->dirs[i], dir, len) == 0)
            return SOREN_OK;
    char **grown = realloc(sp->dirs, (sp->count + 1) * sizeof *grown);
    if (!grown)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory building the plugin path");
    sp->dirs = grown;
    if (!(sp->dirs[sp->count] = strndup(dir, len)))
        return soren_error_set(err, SOREN_ENOMEM, "out of memory building the plugin path");
    sp->count++;
    return SOREN_OK;
}

static soren_status push_list(soren_search_path *sp, const char *list, soren_error *err)
{
    while (list && *list) {
        const char *colon = strchr(list, ':');
        size_t len = colon ? (size_t)(colon - list) : strlen(list);
        soren_status rc = push_dir(sp, list, len, err);
        if (rc != SOREN_OK)
            return rc;
        list = colon ? colon + 1 : NULL;
    }
    return SOREN_OK;
}

soren_status soren_search_path_init(soren_search_path *sp, const char *const *extra,
                                    size_t extra_count, soren_error *err)
{
    sp->dirs = NULL;
    sp->count = 0;
    soren_status rc = SOREN_OK;
    for (size_t i = 0; i < extra_count && rc == SOREN_OK; i++)
        rc = push_list(sp, extra[i], err);
    if (rc == SOREN_OK)
        rc = push_list(sp, getenv("SOREN_PLUGIN_PATH"), err);

    char user_dir[4096] = "";
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(user_dir, sizeof user_dir, "%s/soren/plugins", xdg);
    else if (home && *home)
        snprintf(user_dir, sizeof user_dir, "%s/.local/share/soren/plugins", home);
    if (rc == SOREN_OK)
        rc = push_dir(sp, user_dir, strlen(user_dir), err);
    if (rc == SOREN_OK)
        rc = push_dir(sp, SOREN_PLUGINDIR, strlen(SOREN_PLUGINDIR), err);
    if (rc != SOREN_OK)
        soren_search_path_destroy(sp);
    return rc;
}

void soren_search_path_destroy(soren_search_path *sp)
{
    for (size_t i = 0; i < sp->count; i++)
        free(sp->dirs[i]);
    free(sp->dirs);
    sp->dirs = NULL;
    sp->count = 0;
}

/* 1 if path opens for reading, 0 if nothing is there; -1 (errno set) if
 * something is there that does not open, which must not be passed over for
 * a plugin of the same name in a later folder.  O_NONBLOCK: a FIFO is
 * found (and refused by the manifest's reader), not waited on. */
static int probe_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
    close(fd);
    return 1;
}

/* A plugin named by its folder (as `soren-host new` makes it): FOLDER/NAME.json,
 * NAME the folder's own name, in *manifest_path. */
static soren_status resolve_folder(const char *job, char **manifest_path, soren_error *err)
{
    size_t n = strlen(job);
    while (n > 1 && job[n - 1] == '/')
        n--;
    const char *name = job + n;
    while (name > job && name[-1] != '/')
        name--;
    int k = (int)(job + n - name);
    if (asprintf(manifest_path, "%.*s/%.*s.json", (int)n, job, k, name) < 0) {
        *manifest_path = NULL;
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    }
    if (probe_file(*manifest_path) != 0)
        return SOREN_OK; /* there, or there and unreadable: the reader says why */
    soren_status rc = soren_error_set(err, SOREN_EPLUGIN,
                                      "%s is a folder without %.*s.json: a plugin's folder holds "
                                      "NAME.json and NAME.so, NAME the folder's name (as "
                                      "`soren-host new NAME` makes it)", job, k, name);
    free(*manifest_path);
    *manifest_path = NULL;
    return rc;
}

static soren_status unknown_name(const soren_search_path *sp, const char *job,
                                 soren_error *err);

soren_status soren_plugin_resolve(const soren_search_path *sp, const char *job,
                                  char **manifest_path, soren_error *err)
{
    *manifest_path = NULL;
    struct stat st;
    int is_json = ends_with(job, ".json"), is_so = ends_with(job, ".so");
    int is_cu = ends_with(job, ".cu");
    /* A folder named as a manifest or a library is no plugin's folder, and
     * is refused as what it is. */
    if (strchr(job, '/') && !is_json && !is_so && stat(job, &st) == 0 && S_ISDIR(st.st_mode))
        return resolve_folder(job, manifest_path, err);
    if (is_json || is_so || is_cu) {
        /* A path: NAME.so and NAME.cu stand for the NAME.json beside them. */
        size_t n = strlen(job), stem = is_json ? n : n - 3; /* ".so", ".cu" */
        char *path = malloc(stem + 6);
        if (!path)
            return soren_error_set(err, SOREN_ENOMEM, "out of memory");
        snprintf(path, stem + 6, "%.*s%s", (int)stem, job, is_json ? "" : ".json");
        *manifest_path = path;
        return SOREN_OK;
    }
    if (strchr(job, '/')) {
        if (stat(job, &st) != 0)
            return soren_error_errno(err, SOREN_EPLUGIN, errno, "cannot read %s", job);
        return soren_error_set(err, SOREN_EPLUGIN,
                               "%s is not a plugin: name one by its name, NAME.json, NAME.so, "
                               "NAME.cu (the NAME.json beside it) or its folder", job);
    }

    for (size_t i = 0; i < sp->count; i++) {
        char *path = NULL;
        if (asprintf(&path, "%s/%s.json", sp->dirs[i], job) < 0)
            return soren_error_set(err, SOREN_ENOMEM, "out of memory");
        int found = probe_file(path);
        if (found < 0) {
            int e = errno;
            soren_status rc = soren_error_errno(err, e == ENOMEM ? SOREN_ENOMEM : SOREN_EPLUGIN,
                                                e, "cannot read %s", path);
            free(path);
            return rc;
        }
        if (found) {
            *manifest_path = path;
            return SOREN_OK;
        }
        free(path);
    }
    return unknown_name(sp, job, err);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.json file names of dir, sorted; NULL with *count 0 when the folder
 * cannot be read (a missing folder is not an error). */
static soren_status list_manifests(const char *dir, char ***names, size_t *count,
                                   soren_error *err)
{
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return SOREN_OK;
    struct dirent *de;
    soren_status rc = SOREN_OK;
    while ((de = readdir(d)) && rc == SOREN_OK) {
        if (!ends_with(de->d_name, ".json") || de->d_name[0] == '.')
            continue;
        char **grown = realloc(*names, (*count + 1) * sizeof *grown);
        if (!grown || !(grown[*count] = strdup(de->d_name))) {
            if (grown)
                *names = grown;
            rc = soren_error_set(err, SOREN_ENOMEM, "out of memory listing %s", dir);
            break;
        }
        *names = grown;
        (*count)++;
    }
    closedir(d);
    if (*count)
        qsort(*names, *count, sizeof **names, by_name);
    return rc;
}

/* The error for a name no folder of the path has: the folders searched,
 * and the nearest name they hold where one is close. */
static soren_status unknown_name(const soren_search_path *sp, const char *job,
                                 soren_error *err)
{
    char searched[2048] = "";
    size_t used = 0;
    char **known = NULL;
    size_t known_count = 0;
    soren_status rc = SOREN_OK;
    for (size_t i = 0; i < sp->count && rc == SOREN_OK; i++) {
        if (used < sizeof searched)
            used += (size_t)snprintf(searched + used, sizeof searched - used, "%s%s",
                                     i ? ", " : "", sp->dirs[i]);
        char **names = NULL;
        size_t count = 0;
        rc = list_manifests(sp->dirs[i], &names, &count, err);
        char **grown = count ? realloc(known, (known_count + count) * sizeof *known) : known;
        if (count && !grown) {
            rc = soren_error_set(err, SOREN_ENOMEM, "out of memory");
            grown = known;
        }
        known = grown;
        for (size_t j = 0; j < count; j++) {
            if (rc == SOREN_OK) {
                names[j][strlen(names[j]) - 5] = '\0'; /* less ".json" */
                known[known_count++] = names[j];
            } else {
                free(names[j]);
            }
        }
        free(names);
    }
    const char *nearest =
        rc == SOREN_OK ? soren__nearest(job, (const char *const *)known, known_count) : NULL;
    char hint[128] = "";
    if (nearest)
        snprintf(hint, sizeof hint, "did you mean \"%.64s\"? ", nearest);
    if (rc == SOREN_OK)
        rc = soren_error_set(err, SOREN_EPLUGIN,
                             "no plugin named \"%s\" in the plugin path (%s); %s`soren-host "
                             "list` shows the plugins found, --plugin-path DIR adds a folder",
                             job, searched, hint);
    for (size_t j = 0; j < known_count; j++)
        free(known[j]);
    free(known);
    return rc;
}

/* The trust check of a listed plugin's library, as the manifest names it
 * (listing resolves nothing); the manifest was checked when it was read. */
static soren_status refuse_untrusted(const soren_manifest *m, soren_trust trust,
                                     soren_error *err)
{
    char *library = NULL;
    if (asprintf(&library, "%s/%s", m->dir, m->library) < 0)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    soren_status rc = soren_trust_path(library, "library", trust, err);
    free(library);
    return rc;
}

/* The listing of the manifest at path: *m as the loader reads it (NULL,
 * why saying why, when it is broken or refused), and *shadowed_by, the
 * manifest that soren_plugin_resolve finds for its name when that is
 * another (malloc'd, else NULL): list, info, check and run find a name the
 * same way. */
static void list_one(const soren_search_path *sp, const char *path, soren_trust trust,
                     soren_manifest **m, char **shadowed_by, soren_error *why)
{
    *shadowed_by = NULL;
    if (soren_plugin_manifest_load(path, trust, m, why) != SOREN_OK)
        return;
    char *found = NULL;
    soren_status rc = refuse_untrusted(*m, trust, why);
    if (rc == SOREN_OK)
        rc = soren_plugin_resolve(sp, (*m)->name, &found, why);
    if (rc != SOREN_OK) {
        soren_manifest_free(*m);
        *m = NULL;
    } else if (strcmp(found, path) != 0) {
        *shadowed_by = found;
        found = NULL;
    }
    free(found);
}

soren_status soren_plugin_list(const soren_search_path *sp, soren_trust trust,
                               soren_plugin_visit_fn *visit, void *ctx, soren_error *err)
{
    soren_status rc = SOREN_OK;
    for (size_t i = 0; i < sp->count && rc == SOREN_OK; i++) {
        char **names = NULL;
        size_t count = 0;
        rc = list_manifests(sp->dirs[i], &names, &count, err);
        for (size_t j = 0; j < count && rc == SOREN_OK; j++) {
            char *path = NULL;
            if (asprintf(&path, "%s/%s", sp->dirs[i], names[j]) < 0) {
                rc = soren_error_set(err, SOREN_ENOMEM, "out of memory");
                break;
            }
            soren_manifest *m = NULL;
            char *shadowed_by = NULL;
            soren_error why;
            soren_error_clear(&why);
            list_one(sp, path, trust, &m, &shadowed_by, &why);
            if (why.code == SOREN_ENOMEM)
                rc = soren_error_set(err, SOREN_ENOMEM, "%s", why.text);
            soren_plugin_entry entry = {path, m, &why, shadowed_by};
            if (rc == SOREN_OK)
                visit(ctx, &entry);
            free(shadowed_by);
            soren_manifest_free(m);
            free(path);
        }
        for (size_t j = 0; j < count; j++)
            free(names[j]);
        free(names);
    }
    return rc;
}
