/*
 * loader.h - loading a plugin and checking that it agrees with its manifest.
 *
 * soren_plugin_open(NAME.json):
 *   1. opens the manifest (a regular file of at most SOREN_MANIFEST_MAX_SIZE
 *      bytes), refuses it unless it and its folders are trusted (trust.h),
 *      reads and validates it, and refuses a $.name that is not the file's
 *      name less ".json";
 *   2. resolves the library inside the manifest's folder (symlinks resolved:
 *      a library that ends up outside the folder is refused);
 *   3. opens the library and, on that descriptor, refuses it unless it and
 *      its folders are trusted, checks its ELF headers and its SHA-256 when
 *      the manifest pins one ($.sha256);
 *   4. dlopen(RTLD_NOW | RTLD_LOCAL) of that same descriptor
 *      (/proc/self/fd/N), copying dlerror() at once;
 *   5. finds soren_plugin_v1 and checks the ABI major version and the table
 *      size;
 *   6. checks the embedded manifest says what the side-car says, the
 *      side-car's $.sha256 aside (soren_manifest_matches);
 *   7. checks the name, stages, key and value types, combine and reduce
 *      against the manifest.
 * Each failure is its own SOREN_EPLUGIN (or SOREN_EMANIFEST) error naming
 * both sides.
 */
#ifndef SOREN_LOADER_H
#define SOREN_LOADER_H

#include <sys/types.h>

#include "../error.h"
#include "manifest.h"
#include "trust.h"
#include <soren/soren.h>

typedef struct soren_plugin {
    soren_manifest *manifest;
    char *library_path; /* resolved, absolute */
    void *handle;       /* dlopen handle */
    /* The library's file, where it was loaded from its own file (not a
     * copy): loader.c's table of loaded files holds it. */
    int entered;
    dev_t file_dev;
    ino_t file_ino;
    const soren_plugin_table *table;
} soren_plugin;

/* Step 1 alone, for what reads a plugin's manifest without loading it
 * (list, info): *out owns the manifest on success. */
soren_status soren_plugin_manifest_load(const char *path, soren_trust trust,
                                        soren_manifest **out, soren_error *err);

soren_status soren_plugin_open(const char *manifest_path, soren_trust trust, soren_plugin **out,
                               soren_error *err);
/* The same, loading a private copy of the library made in copy_dir (a
 * folder only this user can write) rather than the library itself, so that
 * a library rebuilt at the same path loads as the new code while the old
 * one is still loaded (the resident host).  copy_dir NULL: the library. */
soren_status soren_plugin_open_copy(const char *manifest_path, soren_trust trust,
                                    const char *copy_dir, soren_plugin **out, soren_error *err);
/* Steps 1 and 2 alone: a plugin whose library is not loaded (table NULL),
 * for a program whose jobs may run in the resident host, which loads it. */
soren_status soren_plugin_open_unloaded(const char *manifest_path, soren_trust trust,
                                        soren_plugin **out, soren_error *err);
/* Steps 3 to 7 for a plugin opened unloaded (copy_dir as for
 * soren_plugin_open_copy); where one fails, p stays unloaded. */
soren_status soren_plugin_load(soren_plugin *p, soren_trust trust, const char *copy_dir,
                               soren_error *err);
/* Closes the library and frees p (NULL is fine). */
void soren_plugin_close(soren_plugin *p);

#endif /* SOREN_LOADER_H */
