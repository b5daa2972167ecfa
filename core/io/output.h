/*
 * output.h - writing a result as text.
 *
 * tsv:  one pair a line, KEY<TAB>VALUE.  String keys are written raw except
 *       backslash, tab, newline and carriage return, written \\ \t \n \r.
 *       Integers in decimal; floats with enough digits to read back to the
 *       same value ("%.9g" for f32, "%.17g" for f64).
 * json: one JSON array of {"key": K, "value": V} objects, one a line;
 *       string keys are JSON strings (", \ and control characters escaped,
 *       bytes that are not part of valid UTF-8 written \u00XX); infinities
 *       and NaNs, which JSON cannot spell as numbers, are strings ("inf").
 *
 * soren_output_open writes to a temporary file DEST.XXXXXX beside the
 * destination and soren_output_commit renames it into place, so a failed run
 * leaves nothing.  A destination of NULL or "-" is standard output; an
 * existing destination that is not a regular file (/dev/null, a FIFO) is
 * written in place.  Write errors are SOREN_EIO naming the destination.
 */
#ifndef SOREN_OUTPUT_H
#define SOREN_OUTPUT_H

#include <stdio.h>

#include "../engine/result.h"
#include "../error.h"

typedef enum soren_format { SOREN_FORMAT_TSV = 0, SOREN_FORMAT_JSON } soren_format;

typedef struct soren_output {
    FILE *file;
    char *path;     /* final destination, NULL for stdout */
    char *tmp_path; /* temporary file while open */
} soren_output;

soren_status soren_output_open(soren_output *o, const char *path, soren_error *err);
soren_status soren_output_write(soren_output *o, const soren_result *r, soren_format fmt,
                                soren_error *err);
/* Flushes, closes and renames the temporary file into place. */
soren_status soren_output_commit(soren_output *o, soren_error *err);
/* Closes and removes the temporary file; safe after commit and on a zeroed o. */
void soren_output_abort(soren_output *o);

/* The temporary file currently open, or NULL: signal handlers unlink it. */
const char *soren_output_pending_path(void);

#endif /* SOREN_OUTPUT_H */
