/*
 * error.h - what every fallible call of libsoren returns.
 *
 * A call returns a soren_status (SOREN_OK, or a negative code) and, on
 * failure, fills the caller's soren_error with one sentence that says what
 * failed, where (file, JSON path, plugin, phase) and, where it helps, what
 * to do.  The first failure wins: once an error is set, later failures
 * (cleanup on the way out) keep the original text.  Every call accepts a
 * NULL soren_error.
 */
#ifndef SOREN_ERROR_API_H
#define SOREN_ERROR_API_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum soren_status {
    SOREN_OK = 0,
    SOREN_EUSAGE = -1,    /* bad argument, option or parameter value */
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

/* Empties err, so that the next failure is recorded. */
void soren_error_clear(soren_error *err);

/* A short stable name of a status: "ok", "usage", "manifest", "plugin",
 * "input", "io", "memory", "device", "job". */
const char *soren_status_name(soren_status code);

/* The exit status a program should end with: 0 for SOREN_OK, 2 for
 * SOREN_EUSAGE, 1 for every other failure (soren-host's convention). */
int soren_status_exit_code(soren_status code);

#ifdef __cplusplus
}
#endif

#endif /* SOREN_ERROR_API_H */
