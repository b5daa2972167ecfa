/*
 * testutil.h - small helpers shared by the Criterion suites.
 *
 * Tests find the build through $SOREN_BUILDDIR and $SOREN_SRCDIR (set by
 * `make check`; the GPU bundle's runner sets them too).  Random data comes
 * from tu_rand with a fixed seed, so every run sees the same bytes.
 */
#ifndef SOREN_TESTUTIL_H
#define SOREN_TESTUTIL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* $SOREN_BUILDDIR / $SOREN_SRCDIR, or "." when unset. */
const char *tu_builddir(void);
const char *tu_srcdir(void);
/* Path of the soren-host program under test (static buffer). */
const char *tu_host(void);

/* A new empty directory under $TMPDIR (malloc'd path); tu_rmtree removes it. */
char *tu_mkdtemp(void);
void tu_rmtree(const char *path);

/* Writes or reads a whole file; both abort the test (cr_assert) on failure.
 * tu_read NUL-terminates the returned buffer; size may be NULL. */
void tu_write(const char *path, const void *data, size_t size);
char *tu_read(const char *path, size_t *size);

/* Runs `/bin/sh -c cmd`, capturing standard output and standard error into
 * malloc'd NUL-terminated strings (either may be NULL to discard).  Returns
 * the exit status, or 128+N for a death by signal N. */
int tu_run(const char *cmd, char **out, char **err);
/* printf-style wrapper around tu_run. */
int tu_runf(char **out, char **err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Runs the build's soren-gen ARGS -o path; aborts the test on failure. */
void tu_gen(const char *path, const char *args);

/* share/explain.schema.json of the source tree, parsed (duplicate keys
 * refused); aborts the test where it cannot be read.  The caller
 * json_decref's it. */
json_t *tu_explain_schema(void);

/* The suites' input size: $SOREN_TEST_MB megabytes where it is set (at
 * least one), else default_mb. */
size_t tu_test_bytes(long default_mb);

/* Lines of every length from 1 to keys, each length reps times, the
 * lengths interleaved (malloc'd, *size bytes): slowmap counts lines by
 * their length, so keys distinct u32 keys, a count the job cannot know
 * before its map. */
char *tu_lines_of_lengths(uint32_t keys, uint32_t reps, size_t *size);

/* splitmix64: deterministic, seedable. */
uint64_t tu_rand(uint64_t *state);
/* Uniform in [0, n). */
uint64_t tu_rand_below(uint64_t *state, uint64_t n);
/* A float in [-1, 1) with all 24 bits of its mantissa drawn. */
float tu_rand_float(uint64_t *state);

#endif /* SOREN_TESTUTIL_H */
