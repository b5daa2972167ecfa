/*
 * datagen.h - seeded inputs for the job suites (test_jobs on the CPU
 * engine, test_gpu on the GPU), so both check the same kinds of text.
 */
#ifndef SOREN_DATAGEN_H
#define SOREN_DATAGEN_H

#include <stddef.h>
#include <stdint.h>

/* Zipf-like text of about bytes bytes: ASCII words, UTF-8 words,
 * backslashes, punctuation and bytes that are not UTF-8; every ASCII
 * whitespace separator; a last line without a newline. */
void dg_text(const char *path, size_t bytes, uint64_t seed);

/* Adversarial text shapes for the GPU variants. */
typedef enum dg_shape {
    DG_ONE_KEY,       /* one word repeated */
    DG_DISTINCT,      /* every word distinct */
    DG_LONG_WORDS,    /* words of 10 KB */
    DG_EMPTY_LINES,   /* mostly empty lines */
    DG_NO_NEWLINE,    /* one long line, no newline at all */
    DG_LONG_AMONG_SHORT /* short lines, one of about 4,000 a line of 128 KB: a GPU
                           block's records that hold it overflow its record tile */
} dg_shape;
void dg_text_shape(const char *path, size_t bytes, dg_shape shape, uint64_t seed);

/* Raw RGB pixels: skewed channels (some bins stay empty). */
void dg_rgb(const char *path, size_t pixels, uint64_t seed);

/* Records of 8 bytes, a u32 key below `keys` and a random u32 value: the
 * input of the test jobs kvmedian and kvscale (tests/plugins). */
void dg_kv32(const char *path, size_t records, uint32_t keys, uint64_t seed);

#endif /* SOREN_DATAGEN_H */
