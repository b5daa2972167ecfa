/*
 * loader.h - loading a plugin and checking that it agrees with its manifest.
 *
 * soren_plugin_open(NAME.json):
 *   1. reads and validates the manifest;
 *   2. resolves the library inside the manifest's folder (symlinks resolved:
 *      a library that ends up outside the folder is refused), and refuses a
 *      folder, manifest or library that others can write to (trust.h);
 *   3. verifies the library's SHA-256 when the manifest gives one;
 *   4. dlopen(RTLD_NOW | RTLD_LOCAL), copying dlerror() at once;
 *   5. finds soren_plugin_v1 and checks the ABI major version and the table
 *      size;
 *   6. checks the embedded manifest equals the side-car byte for byte;
 *   7. checks the name, stages, key and value types, combine and reduce
 *      against the manifest.
 * Each failure is its own SOREN_EPLUGIN (or SOREN_EMANIFEST) error naming
 * both sides.
 */
#ifndef SOREN_LOADER_H
#define SOREN_LOADER_H

#include "../error.h"
#include "manifest.h"
#include "trust.h"
#include <soren/soren.h>

typedef struct soren_plugin {
    soren_manifest *manifest;
    char *library_path; /* resolved, absolute */
    void *handle;       /* dlopen handle */
    const soren_plugin_table *table;
} soren_plugin;

soren_status soren_plugin_open(const char *manifest_path, soren_trust trust, soren_plugin **out,
                               soren_error *err);
/* The same, loading a private copy of the library made in copy_dir (a
 * folder only this user can write) rather than the library itself, so that
 * a library rebuilt at the same path loads as the new code while the old
 * one is still loaded (the resident host).  copy_dir NULL: the library. */
soren_status soren_plugin_open_copy(const char *manifest_path, soren_trust trust,
                                    const char *copy_dir, soren_plugin **out, soren_error *err);
/* Closes the library and frees p (NULL is fine). */
void soren_plugin_close(soren_plugin *p);

#endif /* SOREN_LOADER_H */
