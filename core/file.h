/*
 * file.h - reading a whole file into memory: manifests, parameter files
 * (name=@file), the kit's templates, standard input.  One reader, so that
 * every file is refused the same way and every message names the file, what
 * is wrong and what to do.
 *
 * A path is opened without waiting (O_NONBLOCK: a FIFO with no writer is
 * refused at once, not waited on) and must be a regular file of at most
 * rules->max bytes: a FIFO could keep the run waiting for a writer, a device
 * such as /dev/zero would be read until memory runs out.  A descriptor is
 * read to its end, never past rules->max bytes, so a file that grows while
 * it is read is refused too.  The bytes come back NUL-terminated (the NUL
 * not counted), owned by the caller (free).
 */
#ifndef SOREN_FILE_H
#define SOREN_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct soren_file_rules {
    const char *what;          /* what the file is, in messages: "a manifest" */
    uint64_t max;              /* the most bytes it may hold */
    const char *context;       /* put before every message ("grep: --param p=@f: "), or NULL */
    const char *kind_fix;      /* what to do with one that is not a regular file, or NULL */
    const char *size_fix;      /* what to do with one over max, or NULL */
    soren_status kind_code;    /* the code refusing one that is not a regular file */
    soren_status size_code;    /* the code refusing one over max */
    soren_status read_code;    /* the code of a failing read (and open, but see named) */
    /* The path was named by the user: one that is missing or not theirs to
     * read is a usage error (SOREN_EUSAGE), the system failing is not. */
    int named;
    /* Told of the bytes of each read, for progress (NULL: nobody). */
    void (*on_read)(void *arg, size_t bytes);
    void *on_read_arg;
} soren_file_rules;

/* Opens path for reading (*fd: close it) as the rules say, refusing a
 * folder, anything else that is not a regular file, and a file over
 * rules->max bytes before a byte is read. */
soren_status soren__file_open(const char *path, const soren_file_rules *rules, int *fd,
                              soren_error *err);

/* Reads fd (found at path, or "standard input") to its end into *out, of
 * *size bytes: at most rules->max. */
soren_status soren__file_read_fd(int fd, const char *path, const soren_file_rules *rules,
                                 char **out, size_t *size, soren_error *err);

/* soren__file_open, then soren__file_read_fd; size may be NULL. */
soren_status soren__file_read(const char *path, const soren_file_rules *rules, char **out,
                              size_t *size, soren_error *err);

#endif /* SOREN_FILE_H */
