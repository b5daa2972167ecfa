/* trust.c - refusing plugin files that others can change (see trust.h). */
#include "trust.h"

#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* SOREN_EPLUGIN if others than path's owner may write to it.  A path that
 * cannot be examined is left to the code that opens it, whose error is
 * clearer. */
static soren_status trust_path(const char *path, const char *what, soren_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0 || !(st.st_mode & (S_IWGRP | S_IWOTH)))
        return SOREN_OK;
    return soren_error_set(err, SOREN_EPLUGIN,
                           "refusing the plugin: its %s %s has mode %04o, so others than its "
                           "owner can change the code Soren would run; fix it with `chmod go-w "
                           "%s`, or pass --allow-insecure-plugin-dirs to load it anyway",
                           what, path, (unsigned)(st.st_mode & 07777), path);
}

soren_status soren_trust_plugin(const char *manifest_path, const char *library_path,
                                soren_trust trust, soren_error *err)
{
    if (trust == SOREN_TRUST_ANY)
        return SOREN_OK;
    char *copy = strdup(manifest_path);
    if (!copy)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    soren_status rc = trust_path(dirname(copy), "folder", err);
    free(copy);
    if (rc == SOREN_OK)
        rc = trust_path(manifest_path, "manifest", err);
    if (rc == SOREN_OK && library_path)
        rc = trust_path(library_path, "library", err);
    return rc;
}
