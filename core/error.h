/*
 * error.h - filling a soren_error (the type and codes are public, in
 * soren/error.h).  The first failure wins: later calls on a set error keep
 * the original text, so cleanup paths cannot overwrite the cause.
 */
#ifndef SOREN_ERROR_H
#define SOREN_ERROR_H

#include <stddef.h>

#include <soren/error.h>

/* Records a failure unless err already holds one; returns code. */
soren_status soren_error_set(soren_error *err, soren_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Like soren_error_set, appending ": strerror(errnum)". */
soren_status soren_error_errno(soren_error *err, soren_status code, int errnum, const char *fmt,
                               ...) __attribute__((format(printf, 4, 5)));


#endif /* SOREN_ERROR_H */
