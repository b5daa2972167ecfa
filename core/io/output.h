/*
 * output.h - writing a result as text.
 *
 * tsv:   one pair a line, KEY<TAB>VALUE.  String keys are written raw except
 *        backslash, tab, newline and carriage return, written \\ \t \n \r.
 * csv:   one pair a record, KEY,VALUE, records ending in CRLF (RFC 4180), no
 *        header.  A key holding a comma, a double quote, CR or LF is quoted,
 *        its quotes doubled; other bytes, UTF-8 or not, are written raw.
 * json:  one JSON array of {"key": K, "value": V} objects, one a line;
 *        string keys are JSON strings: ", \ and control characters
 *        escaped, valid UTF-8 written as is, and every byte XX that is
 *        not part of valid UTF-8 written \udcXX, a lone low surrogate,
 *        as Python's surrogateescape error handler decodes it.  Valid text
 *        never holds a surrogate, so two different keys never write the
 *        same string, and the bytes come back exactly (Python:
 *        json.loads(s).encode("utf-8", "surrogateescape")); a strict
 *        parser may refuse a lone surrogate or replace it with U+FFFD.
 *        Infinities and NaNs, which JSON cannot spell as numbers, are
 *        strings ("inf", "-inf", "nan").
 * jsonl: the same objects, one a line, with no enclosing array (JSON Lines).
 *
 * Every format writes integers in decimal, exactly, and floats with the
 * fewest significant digits that read back (strtof, strtod) to the same
 * bits, so "0.1" and not "0.100000001"; infinities as inf and -inf, and
 * every NaN, whatever its sign bit and payload, as nan.  CPU and GPU runs
 * share this writer.
 *
 * soren_output_open writes to a temporary file .NAME.soren-tmp.PID beside
 * the destination NAME (PID: the writer's) and soren_output_commit renames
 * it into place, so a failed or interrupted run leaves nothing (signals.h
 * removes it on a signal).  Opening removes the temporary files of NAME
 * that processes no longer running left (killed by SIGKILL), never a live
 * one's.  Replacing a file keeps its mode; a file the user may not write
 * is refused, not replaced.  A symbolic link is followed to its final
 * target, which is replaced (or created, where the link dangles), so the
 * link keeps pointing at the new contents.  A rename gives the destination
 * a new inode: other hard links to the old file keep the old contents.  A
 * destination of NULL or "-" is standard output; an existing destination
 * that is not a regular file (/dev/null, a FIFO) is written in place.
 * Write errors are SOREN_EIO naming the destination (and, for EFBIG, the
 * file size limit).
 */
#ifndef SOREN_OUTPUT_H
#define SOREN_OUTPUT_H

#include <stdio.h>

#include "../base/result.h"
#include "../error.h"

typedef enum soren_format {
    SOREN_FORMAT_TSV = 0,
    SOREN_FORMAT_CSV,
    SOREN_FORMAT_JSON,
    SOREN_FORMAT_JSONL
} soren_format;

/* The names --format accepts, space-separated, in soren_format order. */
extern const char soren_format_names[];
/* Parses a format name; returns 0 and sets *out, or -1 if name is unknown. */
int soren_format_parse(const char *name, soren_format *out);

typedef struct soren_output {
    FILE *file;
    char *path;     /* destination as given, NULL for stdout */
    char *target;   /* the file path names, its symbolic links followed */
    char *tmp_path; /* temporary file while open */
} soren_output;

soren_status soren_output_open(soren_output *o, const char *path, soren_error *err);
soren_status soren_output_write(soren_output *o, const soren_result *r, soren_format fmt,
                                soren_error *err);
/* Writes to fd (duplicated: the caller keeps its own) as it is, with no
 * temporary file; name (NULL: "standard output") is what messages call it.
 * The resident host writes its clients' outputs so: the client made the
 * temporary file and renames it once the run succeeded. */
soren_status soren_output_open_fd(soren_output *o, int fd, const char *name, soren_error *err);
/* Flushes, closes and renames the temporary file into place. */
soren_status soren_output_commit(soren_output *o, soren_error *err);
/* Closes and removes the temporary file; safe after commit and on a zeroed o. */
void soren_output_abort(soren_output *o);

/* v in decimal, written to end at buf's end: returns its first digit.
 * Async-signal-safe (signal handlers format with it). */
#define SOREN_U64_DIGITS 20
const char *soren__u64_digits(char buf[SOREN_U64_DIGITS], uint64_t v);

/* The temporary file currently open, or NULL: signal handlers unlink it. */
const char *soren_output_pending_path(void);

#endif /* SOREN_OUTPUT_H */
