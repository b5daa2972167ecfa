/*
 * error.h - status codes and error reports.
 *
 * Every fallible function returns a soren_status (0 or a negative code) and,
 * on failure, fills the caller's soren_error with one sentence that says what
 * failed, where (file, JSON path, plugin, phase) and, where it helps, what to
 * do.  The first failure wins: later calls on a set error keep the original
 * text, so cleanup paths cannot overwrite the cause.
 */
#ifndef SOREN_ERROR_H
#define SOREN_ERROR_H

#include <stddef.h>

typedef enum soren_status {
    SOREN_OK = 0,
    SOREN_EUSAGE = -1,    /* bad command line or parameter value */
    SOREN_EMANIFEST = -2, /* manifest missing, malformed or invalid */
    SOREN_EPLUGIN = -3,   /* plugin not found, not loadable, or disagrees with its manifest */
    SOREN_EINPUT = -4,    /* input unreadable or not in the declared format */
    SOREN_EIO = -5,       /* reading or writing a file failed */
    SOREN_ENOMEM = -6,    /* host memory exhausted */
    SOREN_EDEVICE = -7,   /* no usable GPU, or a CUDA call failed */
    SOREN_EJOB = -8       /* the job failed while running */
} soren_status;

typedef struct soren_error {
    soren_status code;
    char text[1024];
} soren_error;

/* Clears err (it may be NULL everywhere below). */
void soren_error_clear(soren_error *err);

/* Records a failure unless err already holds one; returns code. */
soren_status soren_error_set(soren_error *err, soren_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Like soren_error_set, appending ": strerror(errnum)". */
soren_status soren_error_errno(soren_error *err, soren_status code, int errnum, const char *fmt,
                               ...) __attribute__((format(printf, 4, 5)));

/* A short stable name for a status ("manifest", "plugin", ...). */
const char *soren_status_name(soren_status code);

/* The process exit code for a status: 0 ok, 2 usage, 1 everything else. */
int soren_status_exit_code(soren_status code);

#endif /* SOREN_ERROR_H */
