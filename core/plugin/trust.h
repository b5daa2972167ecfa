/*
 * trust.h - whether a plugin's files may be trusted to run.
 *
 * Loading a plugin runs its code with the user's rights, so Soren applies
 * OpenSSH's rule for key files (StrictModes): the manifest, the library and
 * every folder above them up to / must be owned by root or by the user
 * running Soren, and writable by no one else (no group or world write
 * permission; ACLs are not consulted).  A sticky folder owned by root, such
 * as /tmp, may be among the folders: there no one can rename or delete
 * another user's files, and the files themselves are still checked.  A
 * folder owned by another user, or one that others may write to, would let
 * them replace the plugin (rename the folder away and put theirs in its
 * place), so it is refused with its path and the fix.  The user can
 * override the check (--allow-insecure-plugin-dirs).
 *
 * The files are checked on the descriptor that is then read (fstat), so the
 * file checked is the file read or loaded; the folders are checked by path,
 * resolved (symlinks followed) to the folders that really hold the file.
 */
#ifndef SOREN_TRUST_H
#define SOREN_TRUST_H

#include "../error.h"

/* How strictly plugins are checked. */
typedef enum soren_trust {
    SOREN_TRUST_CHECK = 0, /* refuse files others can change */
    SOREN_TRUST_ANY        /* --allow-insecure-plugin-dirs */
} soren_trust;

/* Refuses the open file fd, found at path, unless it and every folder above
 * it pass the rule above; what says which file it is in the message
 * ("manifest", "library").  Nothing is checked when trust is
 * SOREN_TRUST_ANY. */
soren_status soren_trust_file(int fd, const char *path, const char *what, soren_trust trust,
                              soren_error *err);

/* The same for a file named by path only (a listing's library, which is not
 * opened). */
soren_status soren_trust_path(const char *path, const char *what, soren_trust trust,
                              soren_error *err);

#endif /* SOREN_TRUST_H */
