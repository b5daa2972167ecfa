/* trust.c - refusing plugin files that others can change (see trust.h). */
#include "trust.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The name of user uid, or its number when it has none. */
static const char *user_name(uid_t uid, char *buf, size_t size)
{
    struct passwd pw, *found = NULL;
    char scratch[1024];
    if (getpwuid_r(uid, &pw, scratch, sizeof scratch, &found) == 0 && found)
        snprintf(buf, size, "%s", found->pw_name);
    else
        snprintf(buf, size, "%u", (unsigned)uid);
    return buf;
}

/* The rule for one file or folder: owned by root or by us, and writable by
 * no one else, unless it is a sticky folder owned by root. */
static soren_status check_one(const struct stat *st, const char *path, const char *what,
                              soren_error *err)
{
    uid_t me = geteuid();
    if (st->st_uid != 0 && st->st_uid != me) {
        char owner[64], user[64];
        user_name(st->st_uid, owner, sizeof owner);
        return soren_error_set(err, SOREN_EPLUGIN,
                               "refusing the plugin: %s %s is owned by user %s, neither you nor "
                               "root, so that user can change the code Soren would run; fix it "
                               "with `chown %s %s` if you trust what it holds, or pass "
                               "--allow-insecure-plugin-dirs to load it anyway",
                               what, path, owner, user_name(me, user, sizeof user), path);
    }
    int sticky_root = S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX) && st->st_uid == 0;
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !sticky_root)
        return soren_error_set(err, SOREN_EPLUGIN,
                               "refusing the plugin: %s %s has mode %04o, so others than its "
                               "owner can change the code Soren would run; fix it with `chmod "
                               "go-w %s`, or pass --allow-insecure-plugin-dirs to load it anyway",
                               what, path, (unsigned)(st->st_mode & 07777), path);
    return SOREN_OK;
}

/* The rule for every folder above real, a resolved path, up to /. */
static soren_status check_folders(char *real, soren_error *err)
{
    const char *what = "its folder";
    for (char *slash = strrchr(real, '/'); slash; slash = strrchr(real, '/')) {
        const char *folder = real;
        if (slash == real)
            folder = "/";
        else
            *slash = '\0';
        struct stat st;
        if (stat(folder, &st) != 0)
            return soren_error_errno(err, SOREN_EPLUGIN, errno,
                                     "refusing the plugin: cannot examine %s %s", what, folder);
        soren_status rc = check_one(&st, folder, what, err);
        if (rc != SOREN_OK || slash == real)
            return rc;
        what = "the enclosing folder";
    }
    return SOREN_OK;
}

/* The file (its status st) and its folders, named by their resolved path. */
static soren_status check_chain(const struct stat *st, const char *path, const char *what,
                                soren_error *err)
{
    char *real = realpath(path, NULL);
    if (!real)
        return soren_error_errno(err, errno == ENOMEM ? SOREN_ENOMEM : SOREN_EPLUGIN, errno,
                                 "refusing the plugin: cannot resolve %s %s", what, path);
    soren_status rc = check_one(st, real, what, err);
    if (rc == SOREN_OK)
        rc = check_folders(real, err);
    free(real);
    return rc;
}

soren_status soren_trust_file(int fd, const char *path, const char *what, soren_trust trust,
                              soren_error *err)
{
    if (trust == SOREN_TRUST_ANY)
        return SOREN_OK;
    char role[32];
    snprintf(role, sizeof role, "its %s", what);
    struct stat st;
    if (fstat(fd, &st) != 0)
        return soren_error_errno(err, SOREN_EPLUGIN, errno, "refusing the plugin: cannot "
                                 "examine %s %s", role, path);
    return check_chain(&st, path, role, err);
}

soren_status soren_trust_path(const char *path, const char *what, soren_trust trust,
                              soren_error *err)
{
    if (trust == SOREN_TRUST_ANY)
        return SOREN_OK;
    char role[32];
    snprintf(role, sizeof role, "its %s", what);
    struct stat st;
    /* A file that is not there is left to the code that opens it, whose
     * error says more. */
    if (stat(path, &st) != 0)
        return SOREN_OK;
    return check_chain(&st, path, role, err);
}
