/*
 * search.h - where plugins are found.
 *
 * A job is named by path (anything with a '/' or ending in .json or .so) or
 * by name, searched in order in: the --plugin-path folders, the folders of
 * $SOREN_PLUGIN_PATH (colon-separated), $XDG_DATA_HOME/soren/plugins
 * (default ~/.local/share/soren/plugins), and the installed
 * $(pkgdatadir)/plugins.  A plugin is NAME.json beside the library it names.
 * Listing reads manifests only; nothing is loaded.
 */
#ifndef SOREN_SEARCH_H
#define SOREN_SEARCH_H

#include <stddef.h>

#include "../error.h"
#include "loader.h"
#include "manifest.h"
#include "trust.h"

typedef struct soren_search_path {
    char **dirs;
    size_t count;
} soren_search_path;

/* Builds the search path; extra (may be NULL) are --plugin-path values, each
 * possibly colon-separated. */
soren_status soren_search_path_init(soren_search_path *sp, const char *const *extra,
                                    size_t extra_count, soren_error *err);
void soren_search_path_destroy(soren_search_path *sp);

/* Resolves a job's name or path to its manifest's path (malloc'd): the one
 * way a name is found, for every command.  A name is NAME.json in the first
 * folder of the path that has one; a file there that cannot be opened is
 * an error, never passed over for a later folder.  A path is taken as it
 * is, NAME.so standing for the NAME.json beside it and a folder FOLDER/ for
 * FOLDER/FOLDER.json (a plugin folder as `soren-host new` makes it).  The
 * manifest is not read: soren_plugin_manifest_load and soren_plugin_open
 * (loader.h) do. */
soren_status soren_plugin_resolve(const soren_search_path *sp, const char *job,
                                  char **manifest_path, soren_error *err);

/* One entry of a listing: m is NULL when the manifest is broken or
 * refused (read as soren_plugin_manifest_load reads it, and the library's
 * trust checked by path), and then error says why.  shadowed_by names the
 * manifest that soren_plugin_resolve finds for m's name when that is
 * another one, earlier in the path, or is NULL. */
typedef struct soren_plugin_entry {
    const char *manifest_path;
    const soren_manifest *m;
    const soren_error *error;
    const char *shadowed_by;
} soren_plugin_entry;

typedef void soren_plugin_visit_fn(void *ctx, const soren_plugin_entry *entry);

/* Calls visit for every *.json in every folder of the path (folders in path
 * order, files by name).  A missing folder is skipped; a broken manifest, or
 * one that trust refuses, is visited with its error and never stops the
 * listing. */
soren_status soren_plugin_list(const soren_search_path *sp, soren_trust trust,
                               soren_plugin_visit_fn *visit, void *ctx, soren_error *err);

#endif /* SOREN_SEARCH_H */
