#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a file that is not a regular one is, for the message refusing it. */
static const char *kind_of(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a pipe or FIFO";
    if (S_ISSOCK(mode))
        return "a socket";
    return "a device";
}

/* rules->max for a message: "256 MiB", or "1000 bytes" where it is not a
 * whole number of MiB. */
static void cap_text(const soren_file_rules *r, char *buf, size_t size)
{
    if (r->max >= (1u << 20) && r->max % (1u << 20) == 0)
        snprintf(buf, size, "%llu MiB", (unsigned long long)(r->max >> 20));
    else
        snprintf(buf, size, "%llu bytes", (unsigned long long)r->max);
}

static const char *context(const soren_file_rules *r)
{
    return r->context ? r->context : "";
}

/* ": fix", or "" when there is none. */
static const char *sep(const char *fix)
{
    return fix ? ": " : "";
}

/* The code of a failing open: see soren_file_rules.named. */
static soren_status open_code(const soren_file_rules *r, int e)
{
    if (e == ENOMEM)
        return SOREN_ENOMEM;
    if (r->named && (e == ENOENT || e == ENOTDIR || e == EACCES || e == EISDIR || e == ELOOP ||
                     e == ENAMETOOLONG))
        return SOREN_EUSAGE;
    return r->read_code;
}

static soren_status over_cap(const char *path, const soren_file_rules *r, uint64_t size,
                             soren_error *err)
{
    char cap[32];
    cap_text(r, cap, sizeof cap);
    return soren_error_set(err, r->size_code, "%s%s holds %llu bytes, more than %s may have "
                           "(%s)%s%s", context(r), path, (unsigned long long)size, r->what, cap,
                           sep(r->size_fix), r->size_fix ? r->size_fix : "");
}

soren_status soren__file_open(const char *path, const soren_file_rules *r, int *fd,
                              soren_error *err)
{
    *fd = -1;
    int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0) {
        int e = errno;
        return soren_error_errno(err, open_code(r, e), e, "%scannot read %s", context(r), path);
    }
    struct stat st;
    soren_status rc = SOREN_OK;
    if (fstat(f, &st) != 0)
        rc = soren_error_errno(err, r->read_code, errno, "%scannot read %s", context(r), path);
    else if (!S_ISREG(st.st_mode))
        rc = soren_error_set(err, r->kind_code, "%s%s is %s, not a regular file%s%s",
                             context(r), path, kind_of(st.st_mode), sep(r->kind_fix),
                             r->kind_fix ? r->kind_fix : "");
    else if ((uint64_t)st.st_size > r->max)
        rc = over_cap(path, r, (uint64_t)st.st_size, err);
    /* The file is a regular one: reads block as they always would. */
    else if (fcntl(f, F_SETFL, fcntl(f, F_GETFL) & ~O_NONBLOCK) != 0)
        rc = soren_error_errno(err, r->read_code, errno, "%scannot read %s", context(r), path);
    if (rc != SOREN_OK) {
        close(f);
        return rc;
    }
    *fd = f;
    return SOREN_OK;
}

soren_status soren__file_read_fd(int fd, const char *path, const soren_file_rules *r,
                                 char **out, size_t *size, soren_error *err)
{
    /* One byte more than the cap is read, to tell a file at the cap from
     * one past it; the buffer has room for the NUL besides. */
    uint64_t limit = r->max < SIZE_MAX - 2 ? r->max + 1 : SIZE_MAX - 1;
    size_t cap = 1 << 16, n = 0;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 &&
        (uint64_t)st.st_size < limit)
        cap = (size_t)st.st_size + 1; /* the +1 sees the end without growing */
    if (cap > limit)
        cap = (size_t)limit;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf)
            return soren_error_set(err, SOREN_ENOMEM, "%sout of memory reading %s (%zu bytes)",
                                   context(r), path, cap);
        if (n == cap) {
            if (cap == limit)
                break;
            size_t grown = (uint64_t)cap * 2 > limit ? (size_t)limit : cap * 2;
            char *bigger = realloc(buf, grown + 1);
            if (!bigger)
                free(buf);
            buf = bigger;
            cap = grown;
            continue;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int e = errno;
            free(buf);
            return soren_error_errno(err, r->read_code, e, "%scannot read %s", context(r), path);
        }
        if (got == 0)
            break;
        n += (size_t)got;
        if (r->on_read)
            r->on_read(r->on_read_arg, (size_t)got);
    }
    if (n > r->max) {
        free(buf);
        char cap_words[32];
        cap_text(r, cap_words, sizeof cap_words);
        return soren_error_set(err, r->size_code, "%s%s grew past the %s %s may have while it "
                               "was read", context(r), path, cap_words, r->what);
    }
    buf[n] = '\0';
    *out = buf;
    if (size)
        *size = n;
    return SOREN_OK;
}

soren_status soren__file_read(const char *path, const soren_file_rules *r, char **out,
                              size_t *size, soren_error *err)
{
    int fd;
    soren_status rc = soren__file_open(path, r, &fd, err);
    if (rc != SOREN_OK)
        return rc;
    rc = soren__file_read_fd(fd, path, r, out, size, err);
    close(fd);
    return rc;
}
