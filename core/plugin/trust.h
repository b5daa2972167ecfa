/*
 * trust.h - whether a plugin's files may be trusted to run.
 *
 * Loading a plugin runs its code with the user's rights, so, as ssh does
 * with a key file, Soren refuses a plugin whose folder, manifest or library
 * others than the file's owner can change: group or world write permission
 * (the mode bits; ACLs are not consulted).  The owner and root may write.
 * The user can override the check (--allow-insecure-plugin-dirs).
 */
#ifndef SOREN_TRUST_H
#define SOREN_TRUST_H

#include "../error.h"

/* How strictly plugins are checked. */
typedef enum soren_trust {
    SOREN_TRUST_CHECK = 0, /* refuse group- or world-writable plugin files */
    SOREN_TRUST_ANY        /* --allow-insecure-plugin-dirs */
} soren_trust;

/* Refuses the manifest's folder, the manifest and the library (library_path
 * may be NULL when it has not been resolved yet) if others than their owner
 * may write to them.  The error gives the path, its mode and the fix. */
soren_status soren_trust_plugin(const char *manifest_path, const char *library_path,
                                soren_trust trust, soren_error *err);

#endif /* SOREN_TRUST_H */
