/* The CPU engine and what surrounds it: input mapping and records, the
 * engine's modes against plain C references, key checks, result ordering,
 * the progress counters, and the tsv, csv, json and jsonl writers.  Stage specs are built by hand here; the
 * word-count data is $SOREN_TEST_MB megabytes (default 20) of seeded text. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "base/adapt.h"
#include "base/progress.h"
#include "base/result.h"
#include "engine/iterate.h"
#include "io/input.h"
#include "io/output.h"
#include "testutil.h"
#include <soren/find.h>
#include <soren/text.h>

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}

TestSuite(engine, .init = setup, .fini = teardown, .timeout = 120);

static size_t test_bytes(void) { return tu_test_bytes(20); }

static char *path_in_dir(const char *name)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
    return p;
}

static soren_stage_spec make_spec(const char *job, const soren_stage *code,
                                  soren_input_format fmt, soren_type key, soren_type value,
                                  soren_combine_op combine, soren_reduce_kind reduce)
{
    return (soren_stage_spec){
        .job_name = job,
        .code = code,
        .input_format = fmt,
        .key_type = key,
        .key_max_size = key == SOREN_TYPE_STRING ? 65536 : (uint32_t)soren_type_size(key),
        .value_type = value,
        .value_size = soren_type_size(value),
        .combine = combine,
        .reduce = reduce,
        .order = SOREN_ORDER_KEY,
    };
}

/* Runs spec over one buffer; the result is left unordered. */
static soren_status run_on(const soren_stage_spec *spec, const void *data, size_t size,
                           unsigned threads, uint64_t chunk, soren_result *res, soren_error *err)
{
    soren_input in;
    soren_input_wrap(&in, "buf", data, size);
    soren_cpu_options opt = {.threads = threads, .chunk_bytes = chunk};
    soren_result_init(res, spec);
    soren_error_clear(err);
    soren_status rc = soren_cpu_run(spec, &in, 1, NULL, &opt, res, err);
    soren_input_close(&in);
    return rc;
}

/* The result written as text, through a memory stream. */
static char *render(const soren_result *r, soren_format fmt)
{
    char *text = NULL;
    size_t size = 0;
    soren_output o = {.file = open_memstream(&text, &size)};
    cr_assert_not_null(o.file);
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_output_write(&o, r, fmt, &err), SOREN_OK, "%s", err.text);
    fclose(o.file);
    return text;
}

static void expect_same_result(const soren_result *a, const soren_result *b, const char *what)
{
    cr_assert_eq(a->count, b->count, "%s: %llu pairs, expected %llu", what,
                 (unsigned long long)a->count, (unsigned long long)b->count);
    if (!a->count)
        return;
    cr_assert(memcmp(a->key_offset, b->key_offset, (a->count + 1) * 8) == 0, "%s: keys differ",
              what);
    cr_assert(memcmp(a->key_bytes, b->key_bytes, a->key_offset[a->count]) == 0,
              "%s: key bytes differ", what);
    cr_assert(memcmp(a->values, b->values, a->count * a->value_size) == 0,
              "%s: values differ", what);
}

/* ---- Records ------------------------------------------------------------- */

typedef struct rec {
    uint64_t offset, size, index;
} rec;

static size_t collect(const soren_stage_spec *spec, const uint8_t *buf, uint64_t n,
                      uint64_t begin, uint64_t end, rec *out, size_t at)
{
    soren_records it;
    soren_record r;
    soren_records_init(&it, spec, buf, n, begin, end);
    while (soren_records_next(&it, &r)) {
        cr_assert_eq(r.data, buf + r.offset);
        out[at++] = (rec){r.offset, r.size, r.index};
    }
    return at;
}

Test(engine, lines_records)
{
    soren_stage_spec spec = make_spec("t", NULL, SOREN_INPUT_LINES, SOREN_TYPE_STRING,
                                      SOREN_TYPE_U32, SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    rec got[16];
    const uint8_t *b = (const uint8_t *)"a\n\nb\r\ncd";
    size_t n = collect(&spec, b, 8, 0, 8, got, 0);
    cr_assert_eq(n, 4);
    rec want[] = {{0, 1, 0}, {2, 0, 2}, {3, 2, 3}, {6, 2, 6}};
    cr_assert(memcmp(got, want, sizeof want) == 0);
    /* A trailing newline ends the last line; it does not start another. */
    cr_assert_eq(collect(&spec, (const uint8_t *)"x\n", 2, 0, 2, got, 0), 1);
    cr_assert_eq(got[0].size, 1);
    cr_assert_eq(collect(&spec, (const uint8_t *)"\n", 1, 0, 1, got, 0), 1);
    cr_assert_eq(got[0].size, 0);
    cr_assert_eq(collect(&spec, (const uint8_t *)"\n\n", 2, 0, 2, got, 0), 2);
    cr_assert_eq(collect(&spec, NULL, 0, 0, 0, got, 0), 0);
    cr_assert_eq(collect(&spec, (const uint8_t *)"\r", 1, 0, 1, got, 0), 1);
    cr_assert_eq(got[0].size, 1);
}

Test(engine, lines_ranges_cut_anywhere)
{
    static const char *const bufs[] = {"", "a", "a\n", "\n", "\n\n\n", "ab\ncd\n\nef",
                                       "a\r\nbb\n\nccc\n", "\n\nx\n\ny"};
    soren_stage_spec spec = make_spec("t", NULL, SOREN_INPUT_LINES, SOREN_TYPE_STRING,
                                      SOREN_TYPE_U32, SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) {
        const uint8_t *b = (const uint8_t *)bufs[k];
        uint64_t n = strlen(bufs[k]);
        rec whole[32], part[32];
        size_t count = collect(&spec, b, n, 0, n, whole, 0);
        for (uint64_t c1 = 0; c1 <= n; c1++) {
            for (uint64_t c2 = c1; c2 <= n; c2++) {
                size_t m = collect(&spec, b, n, 0, c1, part, 0);
                m = collect(&spec, b, n, c1, c2, part, m);
                m = collect(&spec, b, n, c2, n, part, m);
                cr_assert_eq(m, count, "buffer %zu cut at %llu, %llu: %zu records, want %zu", k,
                             (unsigned long long)c1, (unsigned long long)c2, m, count);
                cr_assert(memcmp(part, whole, count * sizeof *whole) == 0,
                          "buffer %zu cut at %llu, %llu", k, (unsigned long long)c1,
                          (unsigned long long)c2);
            }
        }
    }
}

/* Lines as a byte-by-byte loop finds them, over buffers longer than the
 * 64-byte blocks the iterator scans (lines within a block, across blocks,
 * longer than one, a last line without its '\n', a tail under a block),
 * each cut into three ranges anywhere. */
Test(engine, lines_of_long_buffers_as_a_byte_loop_finds_them)
{
    soren_stage_spec spec = make_spec("t", NULL, SOREN_INPUT_LINES, SOREN_TYPE_STRING,
                                      SOREN_TYPE_U32, SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    uint64_t seed = 71;
    static rec got[1024], want[1024];
    uint8_t b[700];
    for (int round = 0; round < 400; round++) {
        const uint64_t n = tu_rand_below(&seed, sizeof b + 1);
        /* one line end in 2, in 20 or in 200 bytes */
        const uint64_t sparse = round % 3 == 0 ? 2 : round % 3 == 1 ? 20 : 200;
        for (uint64_t i = 0; i < n; i++)
            b[i] = tu_rand_below(&seed, sparse) == 0 ? '\n' : (uint8_t)('a' + i % 26);
        size_t lines = 0;
        for (uint64_t start = 0; start < n;) {
            uint64_t end = start;
            while (end < n && b[end] != '\n')
                end++;
            want[lines++] = (rec){start, end - start, start};
            start = end + 1;
        }
        const uint64_t c1 = tu_rand_below(&seed, n + 1), c2 = c1 + tu_rand_below(&seed, n - c1 + 1);
        size_t m = collect(&spec, b, n, 0, c1, got, 0);
        m = collect(&spec, b, n, c1, c2, got, m);
        m = collect(&spec, b, n, c2, n, got, m);
        cr_assert_eq(m, lines, "round %d, %llu bytes cut at %llu, %llu: %zu lines, want %zu",
                     round, (unsigned long long)n, (unsigned long long)c1,
                     (unsigned long long)c2, m, lines);
        cr_assert(memcmp(got, want, lines * sizeof *want) == 0, "round %d", round);
    }
}

Test(engine, fixed_records)
{
    soren_stage_spec spec = make_spec("t", NULL, SOREN_INPUT_FIXED, SOREN_TYPE_STRING,
                                      SOREN_TYPE_U32, SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    spec.record_size = 3;
    uint8_t b[12];
    for (int i = 0; i < 12; i++)
        b[i] = (uint8_t)i;
    rec whole[8], part[8];
    cr_assert_eq(collect(&spec, b, 12, 0, 12, whole, 0), 4);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(whole[i].offset, (uint64_t)i * 3);
        cr_assert_eq(whole[i].size, 3);
        cr_assert_eq(whole[i].index, (uint64_t)i);
    }
    for (uint64_t c = 0; c <= 12; c++) {
        size_t m = collect(&spec, b, 12, 0, c, part, 0);
        m = collect(&spec, b, 12, c, 12, part, m);
        cr_assert_eq(m, 4);
        cr_assert(memcmp(part, whole, sizeof part[0] * 4) == 0);
    }
    /* A truncated last record is not a record (soren_input_check refuses it). */
    cr_assert_eq(collect(&spec, b, 11, 0, 11, whole, 0), 3);
}

/* ---- Input files --------------------------------------------------------- */

static void expect_open_error(const char *path, const char *text)
{
    soren_input in;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_input_open(&in, path, &err), SOREN_EINPUT, "%s", path);
    cr_assert_str_eq(err.text, text);
    cr_assert_null(in.path);
    soren_input_close(&in); /* safe on a failed open */
}

Test(engine, input_errors)
{
    char *missing = path_in_dir("missing.txt");
    char *want = NULL;
    cr_assert(asprintf(&want, "cannot read input %s: No such file or directory", missing) > 0);
    expect_open_error(missing, want);
    free(want);

    cr_assert(asprintf(&want, "input %s is a directory, not a regular file", dir) > 0);
    expect_open_error(dir, want);
    free(want);

    char *fifo = path_in_dir("fifo");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert(asprintf(&want,
                       "input %s is not a regular file (pipes, sockets and devices cannot be "
                       "mapped; redirect it to standard input instead)",
                       fifo) > 0);
    expect_open_error(fifo, want);
    free(want);

    if (geteuid() != 0) {
        char *locked = path_in_dir("locked.txt");
        tu_write(locked, "x", 1);
        cr_assert_eq(chmod(locked, 0), 0);
        cr_assert(asprintf(&want, "cannot read input %s: Permission denied", locked) > 0);
        expect_open_error(locked, want);
        free(want);
        free(locked);
    }
    free(fifo);
    free(missing);
}

Test(engine, input_files_and_check)
{
    char *path = path_in_dir("in.rgb");
    tu_write(path, "abcdefghij", 10);
    soren_input in;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_input_open(&in, path, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(in.size, 10);
    cr_assert(memcmp(in.data, "abcdefghij", 10) == 0);
    cr_assert_str_eq(in.path, path);

    soren_stage_spec spec = make_spec("t", NULL, SOREN_INPUT_FIXED, SOREN_TYPE_STRING,
                                      SOREN_TYPE_U32, SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    spec.record_size = 5;
    cr_assert_eq(soren_input_check(&in, &spec, &err), SOREN_OK);
    spec.record_size = 3;
    cr_assert_eq(soren_input_check(&in, &spec, &err), SOREN_EINPUT);
    char *want = NULL;
    cr_assert(asprintf(&want,
                       "%s: size 10 is not a multiple of the record size 3 (the last record is "
                       "truncated)",
                       path) > 0);
    cr_assert_str_eq(err.text, want);
    free(want);
    spec.input_format = SOREN_INPUT_LINES;
    soren_error_clear(&err);
    cr_assert_eq(soren_input_check(&in, &spec, &err), SOREN_OK);
    soren_input_close(&in);
    cr_assert_null(in.data);

    /* An empty file maps to nothing, and is no error. */
    tu_write(path, "", 0);
    cr_assert_eq(soren_input_open(&in, path, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(in.size, 0);
    cr_assert_null(in.data);
    cr_assert_null(in.mapping);
    soren_input_close(&in);
    free(path);
}

/* A mapped file's bytes read from the file (the GPU engine's staging):
 * equal to the mapping's, a slice's from its own place in the file; a file
 * replaced under the path, or one that shrank, is never read as the input. */
Test(engine, input_file_read_again)
{
    enum { SIZE = 100003 };
    char *path = path_in_dir("in.bin"), *other = path_in_dir("other.bin");
    uint8_t *bytes = malloc(SIZE), *got = malloc(SIZE);
    cr_assert(bytes && got);
    uint64_t seed = 41;
    for (size_t i = 0; i < SIZE; i++)
        bytes[i] = (uint8_t)tu_rand(&seed);
    tu_write(path, bytes, SIZE);
    soren_input in, slice, wrapped;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_input_open(&in, path, &err), SOREN_OK, "%s", err.text);
    cr_assert_neq(in.file_ino, 0);

    int fd = soren_input_reopen(&in);
    cr_assert_geq(fd, 0);
    cr_assert_eq(soren_input_pread(fd, &in, 0, got, SIZE), 0);
    cr_assert(memcmp(got, in.data, SIZE) == 0);
    soren_input_slice(&slice, &in, 4099, 70001);
    cr_assert_eq(slice.base, 4099);
    cr_assert_eq(slice.file_ino, in.file_ino);
    cr_assert_eq(soren_input_pread(fd, &slice, 17, got, slice.size - 17), 0);
    cr_assert(memcmp(got, bytes + 4099 + 17, slice.size - 17) == 0);
    close(fd);

    soren_input_wrap(&wrapped, "(memory input)", bytes, SIZE);
    cr_assert_eq(soren_input_reopen(&wrapped), -1, "no file behind it");
    soren_input_close(&wrapped);

    /* Another file renamed over the path: the mapping holds the input. */
    tu_write(other, bytes, SIZE);
    cr_assert_eq(rename(other, path), 0);
    cr_assert_eq(soren_input_reopen(&in), -1);
    cr_assert_eq(soren_input_reopen(&slice), -1);
    soren_input_close(&slice);
    soren_input_close(&in);

    /* A file that shrank after it was mapped ends early: ENODATA. */
    cr_assert_eq(soren_input_open(&in, path, &err), SOREN_OK, "%s", err.text);
    fd = soren_input_reopen(&in);
    cr_assert_geq(fd, 0);
    cr_assert_eq(truncate(path, SIZE / 2), 0);
    cr_assert_eq(soren_input_pread(fd, &in, 0, got, SIZE), ENODATA);
    close(fd);
    soren_input_close(&in);
    free(bytes);
    free(got);
    free(path);
    free(other);
}

/* Files laid end to end: records of any chunk of them count their offset
 * (and fixed records their index) in the concatenation, while reading a
 * chunk back from its file (the GPU engine's staging) reads at its place in
 * that file. */
Test(engine, inputs_laid_end_to_end)
{
    enum { FILES = 3, RS = 6 };
    static const uint64_t sizes[FILES] = {6 * 1001, 0, 6 * 777};
    uint8_t whole[6 * 1001 + 6 * 777];
    uint64_t seed = 43;
    for (size_t i = 0; i < sizeof whole; i++)
        whole[i] = (uint8_t)tu_rand(&seed);
    soren_input in[FILES];
    soren_error err;
    soren_error_clear(&err);
    uint64_t at = 0;
    for (size_t f = 0; f < FILES; f++) {
        char name[32];
        snprintf(name, sizeof name, "laid%zu.bin", f);
        char *path = path_in_dir(name);
        tu_write(path, whole + at, sizes[f]);
        cr_assert_eq(soren_input_open(&in[f], path, &err), SOREN_OK, "%s", err.text);
        free(path);
        at += sizes[f];
    }
    soren_input_lay_out(in, FILES);
    cr_assert_eq(in[2].base, sizes[0] + sizes[1]);
    cr_assert_eq(in[2].file_offset, 0);
    soren_stage_spec spec = make_spec("t", NULL, SOREN_INPUT_FIXED, SOREN_TYPE_STRING,
                                      SOREN_TYPE_U32, SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    spec.record_size = RS;
    soren_input *chunks = NULL;
    size_t count = 0;
    uint64_t largest = 0;
    cr_assert_eq(soren_input_chunks(&spec, in, FILES, 1000, &chunks, &count, &largest, &err),
                 SOREN_OK, "%s", err.text);
    cr_assert_gt(count, 4);
    uint64_t next = 0;
    uint8_t got[2048];
    for (size_t k = 0; k < count; k++) {
        const soren_input *c = &chunks[k];
        soren_records it;
        soren_record r;
        soren_records_init_input(&it, &spec, c, 0, c->size);
        while (soren_records_next(&it, &r)) {
            cr_assert_eq(r.offset, next, "chunk %zu: a record at %llu, want %llu", k,
                         (unsigned long long)r.offset, (unsigned long long)next);
            cr_assert_eq(r.index, next / RS);
            cr_assert(memcmp(r.data, whole + next, RS) == 0);
            next += RS;
        }
        if (c->size == 0) /* the empty file: no mapping, nothing to read */
            continue;
        cr_assert_leq(c->size, sizeof got);
        int fd = soren_input_reopen(c);
        cr_assert_geq(fd, 0);
        cr_assert_eq(soren_input_pread(fd, c, 0, got, c->size), 0, "chunk %zu", k);
        cr_assert(memcmp(got, whole + c->base, c->size) == 0, "chunk %zu: file bytes at %llu",
                  k, (unsigned long long)c->file_offset);
        close(fd);
    }
    cr_assert_eq(next, sizeof whole);
    soren_input_chunks_free(chunks, count);
    for (size_t f = 0; f < FILES; f++)
        soren_input_close(&in[f]);
}

/* ---- Word count against a plain C reference ------------------------------- */

static void wc_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    const uint32_t one = 1;
    uint64_t pos = 0, start, len;
    while (soren_next_word(r->data, r->size, &pos, &start, &len))
        soren_emit(e, r->data + start, soren_key_size(len), &one);
}

static const soren_stage wc_code = {.map = wc_map, .combine = SOREN_SUM_U32};

static soren_stage_spec wc_spec(void)
{
    return make_spec("wordcount", &wc_code, SOREN_INPUT_LINES, SOREN_TYPE_STRING,
                     SOREN_TYPE_U32, SOREN_COMBINE_SUM, SOREN_REDUCE_COMBINE);
}

/* Zipf-like text over a vocabulary of ASCII, UTF-8 and non-UTF-8 words. */
static uint8_t *make_text(size_t size, uint64_t seed)
{
    static const char *const pieces[] = {"a", "b", "c", "th", "ing", "x", "Q", "7", "-", "\\",
                                         "\xc3\xa9", "\xff", "\x80", "z", "o", "e"};
    static const char *const seps[] = {" ", " ", " ", "\n", "\t", "\r\n", "  ", "\n\n", "\f"};
    uint64_t rng = seed;
    enum { VOCAB = 20000 };
    char (*words)[48] = calloc(VOCAB, sizeof *words);
    cr_assert_not_null(words);
    for (size_t i = 0; i < VOCAB; i++) {
        size_t parts = 1 + tu_rand_below(&rng, 5);
        for (size_t j = 0; j < parts; j++)
            strcat(words[i], pieces[tu_rand_below(&rng, sizeof pieces / sizeof *pieces)]);
    }
    uint8_t *text = malloc(size);
    cr_assert_not_null(text);
    size_t at = 0;
    while (at < size) {
        uint64_t r = tu_rand(&rng);
        const char *w = words[(r & 0xffff) % (1 + (r >> 16) % VOCAB)];
        const char *s = seps[(r >> 48) % (sizeof seps / sizeof *seps)];
        for (const char *q = w; *q && at < size; q++)
            text[at++] = (uint8_t)*q;
        for (const char *q = s; *q && at < size; q++)
            text[at++] = (uint8_t)*q;
    }
    free(words);
    return text;
}

typedef struct word {
    const uint8_t *p;
    uint32_t n;
} word;

static int word_cmp(const void *a, const void *b)
{
    const word *x = a, *y = b;
    uint32_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static int ref_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Counts words with a loop and a sort, into a result in key order. */
static void wordcount_reference(const uint8_t *text, size_t size, soren_result *ref)
{
    size_t cap = size / 2 + 1, n = 0;
    word *w = malloc(cap * sizeof *w);
    cr_assert_not_null(w);
    for (size_t i = 0; i < size;) {
        while (i < size && ref_space(text[i]))
            i++;
        size_t s = i;
        while (i < size && !ref_space(text[i]))
            i++;
        if (i > s)
            w[n++] = (word){text + s, (uint32_t)(i - s)};
    }
    qsort(w, n, sizeof *w, word_cmp);
    soren_stage_spec spec = wc_spec();
    soren_result_init(ref, &spec);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && word_cmp(&w[i], &w[j]) == 0)
            j++;
        uint32_t count = (uint32_t)(j - i);
        cr_assert_eq(soren_result_append(ref, w[i].p, w[i].n, &count, NULL), SOREN_OK);
        i = j;
    }
    free(w);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* soren/find.h against comparing at every position: random patterns and
 * texts over alphabets of 1 to 3 letters, where patterns overlap themselves
 * and their periods show (the cases where a skipping search can skip an
 * occurrence); patterns of up to 24 bytes, on both sides of the size the
 * host scans for first. */
Test(engine, find_equals_every_position)
{
    uint64_t state = 71;
    uint8_t x[24], y[64];
    uint64_t got[64];
    for (int round = 0; round < 200000; round++) {
        uint64_t letters = 1 + tu_rand_below(&state, 3);
        uint64_t m = tu_rand_below(&state, sizeof x + 1), n = tu_rand_below(&state, sizeof y + 1);
        for (uint64_t i = 0; i < m; i++)
            x[i] = (uint8_t)('a' + tu_rand_below(&state, letters));
        for (uint64_t i = 0; i < n; i++)
            y[i] = (uint8_t)('a' + tu_rand_below(&state, letters));
        soren_find f;
        soren_find_init(&f, x, m, y, n);
        size_t found = 0;
        for (uint64_t at; found < 64 && soren_find_next(&f, &at);)
            got[found++] = at;
        size_t k = 0;
        for (uint64_t j = 0; m && j + m <= n; j++) {
            if (memcmp(x, y + j, m) != 0)
                continue;
            cr_assert(k < found && got[k] == j, "%.*s in %.*s: occurrence %zu at %llu not "
                      "found", (int)m, (const char *)x, (int)n, (const char *)y, k,
                      (unsigned long long)j);
            k++;
        }
        cr_assert_eq(found, k, "%.*s in %.*s: %zu found, %zu there", (int)m, (const char *)x,
                     (int)n, (const char *)y, found, k);
    }
}

Test(engine, wordcount_equals_reference, .timeout = 300)
{
    size_t size = test_bytes();
    uint8_t *text = make_text(size, 42);
    soren_result ref;
    wordcount_reference(text, size, &ref);
    cr_assert_gt(ref.count, 1000);
    soren_stage_spec spec = wc_spec();
    static const unsigned threads[] = {1, 2, 7};
    for (size_t i = 0; i < 3; i++) {
        soren_result res;
        soren_error err;
        cr_assert_eq(run_on(&spec, text, size, threads[i], 4096, &res, &err), SOREN_OK, "%s",
                     err.text);
        cr_assert_eq(soren_result_order(&res, SOREN_ORDER_KEY, 0, &err), SOREN_OK);
        char what[64];
        snprintf(what, sizeof what, "%u threads, 4 KiB chunks", threads[i]);
        expect_same_result(&res, &ref, what);
        soren_result_destroy(&res);
    }
    /* Default chunks, 2 threads: the number to compare with other engines. */
    soren_result res;
    soren_error err;
    double t0 = now();
    cr_assert_eq(run_on(&spec, text, size, 2, 0, &res, &err), SOREN_OK, "%s", err.text);
    double t1 = now();
    cr_assert_eq(soren_result_order(&res, SOREN_ORDER_KEY, 0, &err), SOREN_OK);
    expect_same_result(&res, &ref, "2 threads, default chunks");
    fprintf(stderr, "test_engine: wordcount, %.1f MB, 2 threads: %.3f s, %.0f MB/s\n",
            size / 1e6, t1 - t0, size / 1e6 / (t1 - t0));
    soren_result_destroy(&res);
    soren_result_destroy(&ref);
    free(text);
}

/* Runs already in an order, merged (soren_result_merge_runs, how the GPU
 * joins the parts of a key space it folded a part at a time), equal what
 * ordering all the pairs gives: wordcount's pairs cut into runs by a hash
 * of the key (the first run empty), each run ordered and limited, for
 * each order, with and without a limit, and one run. */
Test(engine, merged_runs_equal_one_order)
{
    const size_t size = 1 << 20;
    uint8_t *text = make_text(size, 7);
    soren_stage_spec spec = wc_spec();
    soren_result all;
    soren_error err;
    cr_assert_eq(run_on(&spec, text, size, 2, 0, &all, &err), SOREN_OK, "%s", err.text);
    cr_assert_gt(all.count, 1000);
    static const soren_order orders[] = {SOREN_ORDER_KEY, SOREN_ORDER_VALUE_DESC,
                                         SOREN_ORDER_VALUE_ASC};
    static const uint64_t limits[] = {0, 7};
    static const size_t run_counts[] = {1, 2, 8};
    for (size_t o = 0; o < 3; o++) {
        for (size_t l = 0; l < 2; l++) {
            for (size_t c = 0; c < 3; c++) {
                const size_t runs = run_counts[c];
                soren_result part[8], joined, want;
                uint64_t ends[8];
                soren_result_init(&joined, &spec);
                soren_result_init(&want, &spec);
                for (size_t i = 0; i < runs; i++)
                    soren_result_init(&part[i], &spec);
                for (uint64_t i = 0; i < all.count; i++) {
                    const uint8_t *k = all.key_bytes + all.key_offset[i];
                    uint32_t n = (uint32_t)(all.key_offset[i + 1] - all.key_offset[i]);
                    uint32_t h = 2166136261u;
                    for (uint32_t j = 0; j < n; j++)
                        h = (h ^ k[j]) * 16777619u;
                    size_t run = runs == 1 ? 0 : 1 + h % (runs - 1);
                    const uint8_t *v = all.values + i * all.value_size;
                    cr_assert_eq(soren_result_append(&part[run], k, n, v, &err), SOREN_OK);
                    cr_assert_eq(soren_result_append(&want, k, n, v, &err), SOREN_OK);
                }
                for (size_t i = 0; i < runs; i++) {
                    cr_assert_eq(soren_result_order(&part[i], orders[o], limits[l], &err),
                                 SOREN_OK);
                    cr_assert_eq(soren_result_append_all(&joined, &part[i], &err), SOREN_OK);
                    ends[i] = joined.count;
                    soren_result_destroy(&part[i]);
                }
                cr_assert_eq(soren_result_merge_runs(&joined, ends, runs, orders[o], limits[l],
                                                     &err),
                             SOREN_OK, "%s", err.text);
                cr_assert_eq(soren_result_order(&want, orders[o], limits[l], &err), SOREN_OK);
                char what[96];
                snprintf(what, sizeof what, "order %d, limit %llu, %zu runs", (int)orders[o],
                         (unsigned long long)limits[l], runs);
                expect_same_result(&joined, &want, what);
                soren_result_destroy(&joined);
                soren_result_destroy(&want);
            }
        }
    }
    soren_result_destroy(&all);
    free(text);
}

/* Keys and values of the key-order test, for its reference sort. */
typedef struct ref_pair {
    uint8_t key[24];
    uint32_t size, value;
} ref_pair;

static int ref_pair_compare(const void *a, const void *b)
{
    const ref_pair *x = a, *y = b;
    uint32_t n = x->size < y->size ? x->size : y->size;
    int c = n ? memcmp(x->key, y->key, n) : 0;
    if (c)
        return c;
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return (x->value > y->value) - (x->value < y->value);
}

/* String keys in key order equal a plain sort by bytes, then length, then
 * value: keys of 0 to 20 bytes from 0x00, 'a', 'b' and 0xff, so that many
 * share their first 8 bytes, some differ only past them or only in length
 * ("ab" and "ab\0"), and some repeat with other values. */
Test(engine, string_keys_in_key_order_equal_a_plain_sort)
{
    static const uint8_t alphabet[] = {0x00, 'a', 'b', 0xff};
    const size_t n = 20000;
    ref_pair *ref = calloc(n, sizeof *ref);
    cr_assert_not_null(ref);
    soren_stage_spec spec = wc_spec();
    soren_result res;
    soren_result_init(&res, &spec);
    soren_error err;
    soren_error_clear(&err);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        ref[i].size = (uint32_t)(rng >> 33) % 21;
        for (uint32_t b = 0; b < ref[i].size; b++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            ref[i].key[b] = alphabet[(rng >> 40) % 4];
        }
        ref[i].value = (uint32_t)(rng >> 50) % 5;
        cr_assert_eq(soren_result_append(&res, ref[i].key, ref[i].size, &ref[i].value, &err),
                     SOREN_OK);
    }
    qsort(ref, n, sizeof *ref, ref_pair_compare);
    cr_assert_eq(soren_result_order(&res, SOREN_ORDER_KEY, 0, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(res.count, n);
    for (size_t i = 0; i < n; i++) {
        uint64_t size = res.key_offset[i + 1] - res.key_offset[i];
        uint32_t value;
        memcpy(&value, res.values + i * res.value_size, sizeof value);
        cr_assert(size == ref[i].size &&
                      memcmp(res.key_bytes + res.key_offset[i], ref[i].key, size) == 0 &&
                      value == ref[i].value,
                  "pair %zu differs from the plain sort", i);
    }
    soren_result_destroy(&res);
    free(ref);
}

Test(engine, wordcount_over_several_inputs)
{
    /* A line never spans two inputs: "b" ends one and "a" starts the next. */
    soren_stage_spec spec = wc_spec();
    soren_input in[3];
    soren_input_wrap(&in[0], "one", "x b", 3);
    soren_input_wrap(&in[1], "two", "", 0);
    soren_input_wrap(&in[2], "three", "a x", 3);
    soren_result res;
    soren_result_init(&res, &spec);
    soren_error err;
    soren_error_clear(&err);
    soren_cpu_options opt = {.threads = 2, .chunk_bytes = 1};
    cr_assert_eq(soren_cpu_run(&spec, in, 3, NULL, &opt, &res, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_result_order(&res, SOREN_ORDER_KEY, 0, &err), SOREN_OK);
    char *text = render(&res, SOREN_FORMAT_TSV);
    cr_assert_str_eq(text, "a\t1\nb\t1\nx\t2\n");
    free(text);
    soren_result_destroy(&res);
    for (int i = 0; i < 3; i++)
        soren_input_close(&in[i]);
}

Test(engine, empty_input)
{
    soren_stage_spec spec = wc_spec();
    soren_result res;
    soren_error err;
    cr_assert_eq(run_on(&spec, NULL, 0, 4, 0, &res, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(res.count, 0);
    cr_assert_eq(run_on(&spec, "\n \n\t", 4, 4, 1, &res, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(res.count, 0);
    cr_assert_eq(soren_result_order(&res, SOREN_ORDER_KEY, 5, &err), SOREN_OK);
    char *text = render(&res, SOREN_FORMAT_JSON);
    cr_assert_str_eq(text, "[]\n");
    free(text);
    /* No inputs at all. */
    soren_result_init(&res, &spec);
    soren_cpu_options opt = {0};
    cr_assert_eq(soren_cpu_run(&spec, NULL, 0, NULL, &opt, &res, &err), SOREN_OK);
    cr_assert_eq(res.count, 0);
    soren_result_destroy(&res);
}

/* ---- Built-in combines over every type ------------------------------------ */

/* Records of 12 bytes: a u32 key, then 8 bytes whose first value_size bytes
 * are the value. */
static void kv_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    soren_emit(e, r->data, 4, r->data + 4);
}

typedef union num {
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    uint8_t bytes[8];
} num;

static num random_num(uint64_t *rng, soren_type t, int small)
{
    num v;
    memset(&v, 0, sizeof v);
    uint64_t r = tu_rand(rng);
    int64_t s = (int64_t)tu_rand_below(rng, 2001) - 1000; /* exact in every type */
    switch (t) {
    case SOREN_TYPE_U32: v.u32 = small ? (uint32_t)(s + 1000) : (uint32_t)r; break;
    case SOREN_TYPE_U64: v.u64 = small ? (uint64_t)(s + 1000) : r; break;
    case SOREN_TYPE_I64: v.i64 = small ? s : (int64_t)r; break;
    case SOREN_TYPE_F32: v.f32 = small ? (float)s : (float)((int64_t)r) / 1e9f; break;
    case SOREN_TYPE_F64: v.f64 = small ? (double)s : (double)(int64_t)r / 1e7; break;
    default: break;
    }
    return v;
}

/* acc op= v in type t, plainly: the reference. */
static void ref_fold(soren_combine_op op, soren_type t, num *acc, num v, int first)
{
#define REF_CASE(T, f)                                                                   \
    case T:                                                                              \
        if (op == SOREN_COMBINE_COUNT)                                                   \
            acc->f = first ? 1 : acc->f + 1;                                             \
        else if (first)                                                                  \
            acc->f = v.f;                                                                \
        else if (op == SOREN_COMBINE_SUM)                                                \
            acc->f = acc->f + v.f;                                                       \
        else if (op == SOREN_COMBINE_MIN)                                                \
            acc->f = v.f < acc->f ? v.f : acc->f;                                        \
        else                                                                             \
            acc->f = v.f > acc->f ? v.f : acc->f;                                        \
        break;
    switch (t) {
        REF_CASE(SOREN_TYPE_U32, u32)
        REF_CASE(SOREN_TYPE_U64, u64)
        REF_CASE(SOREN_TYPE_F32, f32)
        REF_CASE(SOREN_TYPE_F64, f64)
    case SOREN_TYPE_I64: /* wraps like the engine, without signed overflow */
        if (op == SOREN_COMBINE_COUNT)
            acc->i64 = first ? 1 : acc->i64 + 1;
        else if (first)
            acc->i64 = v.i64;
        else if (op == SOREN_COMBINE_SUM)
            acc->u64 = acc->u64 + v.u64;
        else if (op == SOREN_COMBINE_MIN)
            acc->i64 = v.i64 < acc->i64 ? v.i64 : acc->i64;
        else
            acc->i64 = v.i64 > acc->i64 ? v.i64 : acc->i64;
        break;
    default:
        break;
    }
#undef REF_CASE
}

Test(engine, builtin_combines_over_every_type)
{
    static const soren_type types[] = {SOREN_TYPE_U32, SOREN_TYPE_U64, SOREN_TYPE_I64,
                                       SOREN_TYPE_F32, SOREN_TYPE_F64};
    static const soren_combine_op ops[] = {SOREN_COMBINE_SUM, SOREN_COMBINE_MIN,
                                           SOREN_COMBINE_MAX, SOREN_COMBINE_COUNT};
    enum { RECORDS = 20000, KEYS = 37 };
    uint8_t *data = malloc(RECORDS * 12);
    cr_assert_not_null(data);
    for (size_t ti = 0; ti < 5; ti++) {
        for (size_t oi = 0; oi < 4; oi++) {
            soren_type t = types[ti];
            soren_combine_op op = ops[oi];
            /* Float sums take small integers so that any order adds exactly. */
            int small = op == SOREN_COMBINE_SUM &&
                        (t == SOREN_TYPE_F32 || t == SOREN_TYPE_F64);
            uint64_t rng = 1000 + ti * 10 + oi;
            num ref[KEYS];
            int seen[KEYS] = {0};
            for (size_t i = 0; i < RECORDS; i++) {
                uint32_t k = (uint32_t)tu_rand_below(&rng, KEYS);
                num v = random_num(&rng, t, small);
                memcpy(data + i * 12, &k, 4);
                memcpy(data + i * 12 + 4, v.bytes, 8);
                ref_fold(op, t, &ref[k], v, !seen[k]);
                seen[k] = 1;
            }
            soren_stage code = {.map = kv_map,
                                .combine = {op, t, NULL, NULL}};
            soren_stage_spec spec = make_spec("combine", &code, SOREN_INPUT_FIXED,
                                              SOREN_TYPE_U32, t, op, SOREN_REDUCE_COMBINE);
            spec.record_size = 12;
            soren_result res;
            soren_error err;
            cr_assert_eq(run_on(&spec, data, RECORDS * 12, 3, 1000, &res, &err), SOREN_OK,
                         "%s", err.text);
            cr_assert_eq(soren_result_order(&res, SOREN_ORDER_KEY, 0, &err), SOREN_OK);
            cr_assert_eq(res.count, KEYS);
            for (uint32_t k = 0; k < KEYS; k++) {
                uint32_t key;
                memcpy(&key, res.key_bytes + res.key_offset[k], 4);
                cr_assert_eq(key, k);
                cr_assert(memcmp(res.values + k * res.value_size, ref[k].bytes,
                                 res.value_size) == 0,
                          "%s over %s, key %u", op == SOREN_COMBINE_SUM   ? "sum"
                                                : op == SOREN_COMBINE_MIN ? "min"
                                                : op == SOREN_COMBINE_MAX ? "max"
                                                                          : "count",
                          soren_type_name(t), k);
            }
            soren_result_destroy(&res);
        }
    }
    free(data);
}

Test(engine, float_min_max_ignore_nan_and_order_zeros)
{
    /* Key 0: NaNs, zeros of both signs and 3; key 1: NaNs only. */
    const double v0[] = {NAN, 0.0, 3.0, -0.0, -NAN, 0.0, 2.0, NAN};
    uint8_t data[10 * 12];
    for (int i = 0; i < 10; i++) {
        uint32_t k = i < 8 ? 0 : 1;
        double v = i < 8 ? v0[i] : NAN;
        memcpy(data + i * 12, &k, 4);
        memcpy(data + i * 12 + 4, &v, 8);
    }
    soren_combine_op ops[] = {SOREN_COMBINE_MIN, SOREN_COMBINE_MAX};
    for (int o = 0; o < 2; o++) {
        soren_stage code = {.map = kv_map, .combine = {ops[o], SOREN_TYPE_F64, NULL, NULL}};
        soren_stage_spec spec = make_spec("minmax", &code, SOREN_INPUT_FIXED, SOREN_TYPE_U32,
                                          SOREN_TYPE_F64, ops[o], SOREN_REDUCE_COMBINE);
        spec.record_size = 12;
        for (unsigned threads = 1; threads <= 3; threads++) {
            soren_result res;
            soren_error err;
            cr_assert_eq(run_on(&spec, data, sizeof data, threads, 12, &res, &err), SOREN_OK,
                         "%s", err.text);
            cr_assert_eq(soren_result_order(&res, SOREN_ORDER_KEY, 0, &err), SOREN_OK);
            char *text = render(&res, SOREN_FORMAT_TSV);
            cr_assert_str_eq(text, o == 0 ? "0\t-0\n1\tnan\n" : "0\t3\n1\tnan\n");
            free(text);
            soren_result_destroy(&res);
        }
    }
}

/* A user combine: products of odd numbers mod 2^64 (associative,
 * commutative, identity 1). */
static void product(void *acc, const void *v)
{
    uint64_t a, b;
    memcpy(&a, acc, 8);
    memcpy(&b, v, 8);
    a *= b;
    memcpy(acc, &a, 8);
}

static const uint64_t product_identity = 1;

Test(engine, user_combine)
{
    enum { RECORDS = 30000, KEYS = 101 };
    uint8_t *data = malloc(RECORDS * 12);
    cr_assert_not_null(data);
    uint64_t rng = 7, ref[KEYS];
    for (int k = 0; k < KEYS; k++)
        ref[k] = 1;
    for (size_t i = 0; i < RECORDS; i++) {
        uint32_t k = (uint32_t)tu_rand_below(&rng, KEYS);
        uint64_t v = tu_rand(&rng) | 1;
        memcpy(data + i * 12, &k, 4);
        memcpy(data + i * 12 + 4, &v, 8);
        ref[k] *= v;
    }
    soren_stage code = {.map = kv_map, .combine = SOREN_COMBINE_FN(product, &product_identity)};
    soren_stage_spec spec = make_spec("user", &code, SOREN_INPUT_FIXED, SOREN_TYPE_U32,
                                      SOREN_TYPE_U64, SOREN_COMBINE_USER, SOREN_REDUCE_COMBINE);
    spec.record_size = 12;
    for (unsigned threads = 1; threads <= 4; threads += 3) {
        soren_result res;
        soren_error err;
        cr_assert_eq(run_on(&spec, data, RECORDS * 12, threads, 600, &res, &err), SOREN_OK,
                     "%s", err.text);
        cr_assert_eq(soren_result_order(&res, SOREN_ORDER_KEY, 0, &err), SOREN_OK);
        cr_assert_eq(res.count, KEYS);
        for (uint32_t k = 0; k < KEYS; k++) {
            uint64_t v;
            memcpy(&v, res.values + k * 8, 8);
            cr_assert_eq(v, ref[k], "key %u", k);
        }
        soren_result_destroy(&res);
    }
    free(data);
}

/* ---- Reduce -------------------------------------------------------------- */

/* Records of 8 bytes: a u32 key and a u32 value.  The reduce emits (key, n)
 * and (key + 1000, smallest value), or value 0xffffffff when the values
 * did not arrive sorted. */
static void reduce_count_min(soren_emitter *e, const void *key, uint32_t key_size,
                             const void *values, uint32_t n, const soren_params *p)
{
    (void)p;
    (void)key_size;
    uint32_t k, first, prev = 0, out = n;
    memcpy(&k, key, 4);
    memcpy(&first, values, 4);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v;
        memcpy(&v, (const uint8_t *)values + i * 4, 4);
        if (i && v < prev)
            out = 0xffffffffu;
        prev = v;
    }
    soren_emit(e, &k, 4, &out);
    k += 1000;
    soren_emit(e, &k, 4, &first);
}

/* With a combine: n must be 1; emits (key, 2 * combined). */
static void reduce_double(soren_emitter *e, const void *key, uint32_t key_size,
                          const void *values, uint32_t n, const soren_params *p)
{
    (void)p;
    uint32_t v;
    memcpy(&v, values, 4);
    v = n == 1 ? 2 * v : 0xffffffffu;
    soren_emit(e, key, key_size, &v);
}

static void kv32_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    soren_emit(e, r->data, 4, r->data + 4);
}

static uint8_t *kv32_data(size_t records, uint32_t keys, uint32_t *count, uint32_t *min,
                          uint32_t *sum)
{
    uint8_t *data = malloc(records * 8);
    cr_assert_not_null(data);
    uint64_t rng = 99;
    for (uint32_t k = 0; k < keys; k++) {
        count[k] = sum[k] = 0;
        min[k] = UINT32_MAX;
    }
    for (size_t i = 0; i < records; i++) {
        uint32_t k = (uint32_t)tu_rand_below(&rng, keys), v = (uint32_t)tu_rand(&rng) >> 8;
        memcpy(data + i * 8, &k, 4);
        memcpy(data + i * 8 + 4, &v, 4);
        count[k]++;
        sum[k] += v;
        min[k] = v < min[k] ? v : min[k];
    }
    return data;
}

Test(engine, reduce_without_and_with_combine)
{
    enum { RECORDS = 50000, KEYS = 300 };
    uint32_t count[KEYS], min[KEYS], sum[KEYS];
    uint8_t *data = kv32_data(RECORDS, KEYS, count, min, sum);

    soren_stage code = {.map = kv32_map, .reduce = reduce_count_min};
    soren_stage_spec spec = make_spec("reduce", &code, SOREN_INPUT_FIXED, SOREN_TYPE_U32,
                                      SOREN_TYPE_U32, SOREN_COMBINE_NONE, SOREN_REDUCE_FUNCTION);
    spec.record_size = 8;
    for (unsigned threads = 1; threads <= 5; threads += 4) {
        soren_result res;
        soren_error err;
        cr_assert_eq(run_on(&spec, data, RECORDS * 8, threads, 800, &res, &err), SOREN_OK,
                     "%s", err.text);
        cr_assert_eq(soren_result_order(&res, SOREN_ORDER_KEY, 0, &err), SOREN_OK);
        cr_assert_eq(res.count, 2 * KEYS);
        for (uint32_t i = 0; i < 2 * KEYS; i++) {
            uint32_t k, v;
            memcpy(&k, res.key_bytes + res.key_offset[i], 4);
            memcpy(&v, res.values + i * 4, 4);
            if (i < KEYS) {
                cr_assert_eq(k, i);
                cr_assert_eq(v, count[i], "key %u: %u values (or unsorted), want %u", k, v,
                             count[i]);
            } else {
                cr_assert_eq(k, i - KEYS + 1000);
                cr_assert_eq(v, min[i - KEYS]);
            }
        }
        soren_result_destroy(&res);
    }

    soren_stage code2 = {.map = kv32_map, .combine = SOREN_SUM_U32, .reduce = reduce_double};
    spec = make_spec("reduce", &code2, SOREN_INPUT_FIXED, SOREN_TYPE_U32, SOREN_TYPE_U32,
                     SOREN_COMBINE_SUM, SOREN_REDUCE_FUNCTION);
    spec.record_size = 8;
    soren_result res;
    soren_error err;
    cr_assert_eq(run_on(&spec, data, RECORDS * 8, 3, 800, &res, &err), SOREN_OK, "%s",
                 err.text);
    cr_assert_eq(soren_result_order(&res, SOREN_ORDER_KEY, 0, &err), SOREN_OK);
    cr_assert_eq(res.count, KEYS);
    for (uint32_t i = 0; i < KEYS; i++) {
        uint32_t v;
        memcpy(&v, res.values + i * 4, 4);
        cr_assert_eq(v, 2 * sum[i], "key %u", i);
    }
    soren_result_destroy(&res);
    free(data);
}

/* ---- First table sizes and growth ---------------------------------------- */

/* Runs spec over data with opt, the result in key order. */
static void run_opt(const soren_stage_spec *spec, const void *data, size_t size,
                    const soren_cpu_options *opt, soren_result *res)
{
    soren_input in;
    soren_input_wrap(&in, "buf", data, size);
    soren_result_init(res, spec);
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_cpu_run(spec, &in, 1, NULL, opt, res, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_result_order(res, SOREN_ORDER_KEY, 0, &err), SOREN_OK, "%s", err.text);
    soren_input_close(&in);
}

/* Every reported growth doubles a table that started at first slots. */
static void expect_growths(const soren_explain *x, uint64_t first, size_t at_least,
                           const char *what)
{
    cr_expect_geq(x->overflow_count, at_least, "%s: %zu growths", what, x->overflow_count);
    for (size_t i = 0; i < x->overflow_count; i++) {
        const soren_overflow *o = &x->overflows[i];
        cr_expect_str_eq(o->region, "table", "%s", what);
        cr_expect_eq(o->new_size, 2 * o->old_size, "%s: growth %zu", what, i);
        cr_expect_geq(o->old_size, first, "%s: growth %zu", what, i);
        cr_expect_eq(o->old_size & (o->old_size - 1), 0, "%s: %llu slots", what,
                     (unsigned long long)o->old_size);
    }
}

/* The first size of the map tables changes how often they grow, never the
 * result: combine, collect (reduce without a combine) and with a projection. */
Test(engine, tables_grow_from_any_first_size)
{
    size_t size = 1 << 20;
    uint8_t *text = make_text(size, 77);
    soren_stage_spec spec = wc_spec();
    soren_result ref;
    run_opt(&spec, text, size, &(soren_cpu_options){.threads = 3}, &ref);
    cr_assert_gt(ref.count, 5000);
    static const uint64_t forced[] = {1, 16, 1000, 1u << 30};
    for (size_t f = 0; f < sizeof forced / sizeof forced[0]; f++) {
        for (unsigned threads = 1; threads <= 4; threads += 3) {
            soren_explain x = {0};
            x.job = "wordcount";
            soren_cpu_options opt = {.threads = threads, .chunk_bytes = 65536,
                                     .table_slots = forced[f], .explain = &x};
            soren_result res;
            run_opt(&spec, text, size, &opt, &res);
            char what[96];
            snprintf(what, sizeof what, "--table-slots %llu, %u threads",
                     (unsigned long long)forced[f], threads);
            expect_same_result(&res, &ref, what);
            /* 1 and 16 round up to 8 and 16 slots, and grow past the keys:
             * at least the growths of one thread (how the chunks spread over
             * the threads is the scheduler's). */
            if (forced[f] <= 16)
                expect_growths(&x, 8, 9, what);
            if (forced[f] == 1u << 30)
                cr_expect_eq(x.overflow_count, 0, "%s: capped at 2^20 slots, no growth", what);
            cr_expect_gt(x.ms.map, 0, "%s: map time", what);
            soren_result_destroy(&res);
            soren_explain_destroy(&x);
        }
    }
    /* Sized from a projection: enough keys, no growth. */
    soren_explain x = {0};
    soren_result res;
    run_opt(&spec, text, size,
            &(soren_cpu_options){.threads = 2, .distinct_keys = 2 * ref.count, .explain = &x},
            &res);
    expect_same_result(&res, &ref, "sized from the projection");
    cr_expect_eq(x.overflow_count, 0, "%zu growths", x.overflow_count);
    soren_result_destroy(&res);
    soren_explain_destroy(&x);
    soren_result_destroy(&ref);
    free(text);

    /* Collect mode: the values of each key, grouped, through tiny tables. */
    enum { RECORDS = 40000, KEYS = 3000 };
    uint32_t count[KEYS], min[KEYS], sum[KEYS];
    uint8_t *data = kv32_data(RECORDS, KEYS, count, min, sum);
    soren_stage code = {.map = kv32_map, .reduce = reduce_count_min};
    spec = make_spec("reduce", &code, SOREN_INPUT_FIXED, SOREN_TYPE_U32, SOREN_TYPE_U32,
                     SOREN_COMBINE_NONE, SOREN_REDUCE_FUNCTION);
    spec.record_size = 8;
    run_opt(&spec, data, RECORDS * 8, &(soren_cpu_options){.threads = 2}, &ref);
    x = (soren_explain){0};
    run_opt(&spec, data, RECORDS * 8,
            &(soren_cpu_options){.threads = 2, .chunk_bytes = 800, .table_slots = 8,
                                 .explain = &x},
            &res);
    expect_same_result(&res, &ref, "collect mode from 8 slots");
    expect_growths(&x, 8, 8, "collect mode from 8 slots");
    cr_expect_geq(x.ms.reduce, 0);
    soren_result_destroy(&res);
    soren_explain_destroy(&x);
    soren_result_destroy(&ref);
    free(data);
}

/* ---- Keys of every length, through the tables ----------------------------- */

/* Records of KEYREC_SIZE bytes: the key's length (0 to KEYREC_MAX), its
 * bytes, then a u64 value at KEYREC_VALUE. */
enum { KEYREC_MAX = 40, KEYREC_VALUE = 44, KEYREC_SIZE = 52 };

static void keyrec_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    soren_emit(e, r->data + 1, r->data[0], r->data + KEYREC_VALUE);
}

/* An order-sensitive fold: acc * 1000003 + v, wrapping. */
static void polynomial(void *acc, const void *v)
{
    uint64_t a, b;
    memcpy(&a, acc, 8);
    memcpy(&b, v, 8);
    a = a * 1000003u + b;
    memcpy(acc, &a, 8);
}

static const uint64_t polynomial_identity = 0;

/* records records whose keys are prefixes of a few random stems (so many
 * keys equal each other up to any length, the 16 bytes an entry holds
 * among them), lengths 0 to KEYREC_MAX, most near 16, drawn from about
 * distinct keys; values random. */
static uint8_t *keyrec_data(size_t records, size_t distinct, uint64_t seed)
{
    enum { STEMS = 4 };
    static const uint8_t alphabet[] = {'a', 'b', 0, 0xff};
    uint64_t rng = seed;
    uint8_t stems[STEMS][KEYREC_MAX];
    for (size_t s = 0; s < STEMS; s++)
        for (size_t j = 0; j < KEYREC_MAX; j++)
            stems[s][j] = alphabet[tu_rand_below(&rng, 4)];
    uint8_t *data = calloc(records, KEYREC_SIZE);
    cr_assert_not_null(data);
    for (size_t i = 0; i < records; i++) {
        uint8_t *r = data + i * KEYREC_SIZE;
        /* Key number k: its stem, its length and a tag of 4 bytes at a
         * place set by k, so that keys differ anywhere, also only past
         * byte 16. */
        uint64_t k = tu_rand_below(&rng, distinct);
        uint64_t h = k * UINT64_C(0x9e3779b97f4a7c15);
        uint8_t len = (uint8_t)((h >> 8) % 4 ? 12 + (h >> 16) % 10 : (h >> 16) % (KEYREC_MAX + 1));
        r[0] = len;
        memcpy(r + 1, stems[k % STEMS], len);
        if (len >= 4) {
            size_t at = (h >> 24) % (len - 3);
            uint32_t tag = (uint32_t)(k / STEMS);
            memcpy(r + 1 + at, &tag, 4);
        }
        uint64_t v = tu_rand(&rng);
        memcpy(r + KEYREC_VALUE, &v, 8);
    }
    return data;
}

typedef struct keyrec_ref {
    const uint8_t *rec;
    size_t at; /* the record's number, so that equal keys keep input order */
} keyrec_ref;

static int keyrec_cmp(const void *a, const void *b)
{
    const keyrec_ref *x = a, *y = b;
    word wx = {x->rec + 1, x->rec[0]}, wy = {y->rec + 1, y->rec[0]};
    int c = word_cmp(&wx, &wy);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* The records folded per key by a sort and a loop, in key order: the sum,
 * the maximum or (polynomial) the order-sensitive fold of each key's
 * values in input order. */
static void keyrec_reference(const uint8_t *data, size_t records, soren_combine_op op,
                             soren_result *ref)
{
    keyrec_ref *refs = malloc(records * sizeof *refs);
    cr_assert_not_null(refs);
    for (size_t i = 0; i < records; i++)
        refs[i] = (keyrec_ref){data + i * KEYREC_SIZE, i};
    qsort(refs, records, sizeof *refs, keyrec_cmp);
    soren_stage_spec spec = make_spec("keys", NULL, SOREN_INPUT_FIXED, SOREN_TYPE_STRING,
                                      SOREN_TYPE_U64, op, SOREN_REDUCE_COMBINE);
    soren_result_init(ref, &spec);
    for (size_t i = 0; i < records;) {
        const uint8_t *r = refs[i].rec;
        uint64_t acc = op == SOREN_COMBINE_USER ? polynomial_identity : 0;
        size_t j = i;
        for (; j < records && word_cmp(&(word){r + 1, r[0]},
                                       &(word){refs[j].rec + 1, refs[j].rec[0]}) == 0;
             j++) {
            uint64_t v;
            memcpy(&v, refs[j].rec + KEYREC_VALUE, 8);
            if (op == SOREN_COMBINE_SUM)
                acc += v;
            else if (op == SOREN_COMBINE_MAX)
                acc = j == i || v > acc ? v : acc;
            else
                polynomial(&acc, &v);
        }
        cr_assert_eq(soren_result_append(ref, r + 1, r[0], &acc, NULL), SOREN_OK);
        i = j;
    }
    free(refs);
}

/* Keys of 0 to 40 bytes, many equal up to the 16 bytes an entry holds
 * inline, through tables that start at 8 slots and grow many times, equal
 * a sort and a loop: an integer sum (added in the emitter), a maximum
 * (the combine's function) at 1, 2 and 5 threads, small chunks and the
 * default.  The same keys grouping 200000 records into 5000 keys. */
Test(engine, keys_of_every_length_equal_a_plain_fold)
{
    static const size_t distinct[] = {150000, 5000};
    static const soren_combine_op ops[] = {SOREN_COMBINE_SUM, SOREN_COMBINE_MAX};
    enum { RECORDS = 200000 };
    for (size_t d = 0; d < 2; d++) {
        uint8_t *data = keyrec_data(RECORDS, distinct[d], 31 + d);
        for (size_t o = 0; o < 2; o++) {
            soren_result ref;
            keyrec_reference(data, RECORDS, ops[o], &ref);
            if (d == 0)
                cr_assert_gt(ref.count, 100000, "%llu keys", (unsigned long long)ref.count);
            soren_stage code = {.map = keyrec_map, .combine = {ops[o], SOREN_TYPE_U64, NULL, NULL}};
            soren_stage_spec spec = make_spec("keys", &code, SOREN_INPUT_FIXED, SOREN_TYPE_STRING,
                                              SOREN_TYPE_U64, ops[o], SOREN_REDUCE_COMBINE);
            spec.record_size = KEYREC_SIZE;
            static const unsigned threads[] = {1, 2, 5};
            static const uint64_t chunks[] = {KEYREC_SIZE * 1000, 0};
            for (size_t t = 0; t < 3; t++) {
                for (size_t c = 0; c < 2; c++) {
                    uint64_t chunk = chunks[c];
                    soren_explain x = {0};
                    x.job = "keys";
                    soren_result res;
                    run_opt(&spec, data, (size_t)RECORDS * KEYREC_SIZE,
                            &(soren_cpu_options){.threads = threads[t], .chunk_bytes = chunk,
                                                 .table_slots = 8, .explain = &x},
                            &res);
                    char what[96];
                    snprintf(what, sizeof what, "%zu keys, %s, %u threads, %s chunks",
                             (size_t)ref.count, ops[o] == SOREN_COMBINE_SUM ? "sum" : "max",
                             threads[t], chunk ? "52 kB" : "default");
                    expect_same_result(&res, &ref, what);
                    expect_growths(&x, 8, 9, what);
                    soren_result_destroy(&res);
                    soren_explain_destroy(&x);
                }
            }
            soren_result_destroy(&ref);
        }
        free(data);
    }
}

/* Each key's values fold into its entry in the order map emitted them,
 * short keys (which wait to be folded) and long ones (which do not)
 * interleaved: one thread, chunks of 20 records and whole, a table large
 * enough that short keys wait, an order-sensitive combine, over 40 keys (so
 * that a key's pairs wait together) and 3000, equal to folding every key's
 * values in input order. */
Test(engine, combine_folds_in_emit_order)
{
    enum { RECORDS = 100000 };
    static const size_t distinct[] = {40, 3000};
    static const uint64_t chunks[] = {20 * KEYREC_SIZE, (uint64_t)RECORDS * KEYREC_SIZE};
    for (size_t d = 0; d < 2; d++) {
        uint8_t *data = keyrec_data(RECORDS, distinct[d], 47 + d);
        soren_result ref;
        keyrec_reference(data, RECORDS, SOREN_COMBINE_USER, &ref);
        soren_stage code = {.map = keyrec_map,
                            .combine = SOREN_COMBINE_FN(polynomial, &polynomial_identity)};
        soren_stage_spec spec =
            make_spec("keys", &code, SOREN_INPUT_FIXED, SOREN_TYPE_STRING, SOREN_TYPE_U64,
                      SOREN_COMBINE_USER, SOREN_REDUCE_COMBINE);
        spec.record_size = KEYREC_SIZE;
        for (size_t c = 0; c < 2; c++) {
            soren_result res;
            run_opt(&spec, data, (size_t)RECORDS * KEYREC_SIZE,
                    &(soren_cpu_options){.threads = 1, .chunk_bytes = chunks[c],
                                         .table_slots = 1u << 16},
                    &res);
            char what[64];
            snprintf(what, sizeof what, "%zu keys, %s", (size_t)ref.count,
                     c ? "one chunk" : "chunks of 20 records");
            expect_same_result(&res, &ref, what);
            soren_result_destroy(&res);
        }
        soren_result_destroy(&ref);
        free(data);
    }
}

/* ---- Map-only ------------------------------------------------------------ */

static void line_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    uint64_t offset = r->offset;
    soren_emit(e, r->data, (uint32_t)r->size, &offset);
}

Test(engine, map_only_keeps_input_order)
{
    enum { LINES = 20000 };
    char *text = malloc(LINES * 8);
    cr_assert_not_null(text);
    size_t n = 0;
    for (int i = 0; i < LINES; i++)
        n += (size_t)sprintf(text + n, "%d\n", (i * 7919) % LINES);
    soren_stage code = {.map = line_map};
    soren_stage_spec spec = make_spec("lines", &code, SOREN_INPUT_LINES, SOREN_TYPE_STRING,
                                      SOREN_TYPE_U64, SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    soren_result res;
    soren_error err;
    cr_assert_eq(run_on(&spec, text, n, 4, 64, &res, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(res.count, LINES);
    /* Unordered (order none), the pairs come in input order. */
    uint64_t expect = 0;
    for (uint64_t i = 0; i < res.count; i++) {
        uint64_t off;
        memcpy(&off, res.values + i * 8, 8);
        cr_assert_eq(off, expect, "pair %llu", (unsigned long long)i);
        uint64_t len = res.key_offset[i + 1] - res.key_offset[i];
        cr_assert(memcmp(res.key_bytes + res.key_offset[i], text + off, len) == 0);
        expect = off + len + 1;
    }
    /* Duplicated keys stay; order key sorts them, ties by value. */
    cr_assert_eq(soren_result_order(&res, SOREN_ORDER_KEY, 3, &err), SOREN_OK);
    cr_assert_eq(res.count, 3);
    char *out = render(&res, SOREN_FORMAT_TSV);
    uint64_t o0 = 0, o1 = 0, o2 = 0;
    cr_assert_eq(sscanf(out, "0\t%lu\n1\t%lu\n10\t%lu\n", &o0, &o1, &o2), 3, "%s", out);
    free(out);
    soren_result_destroy(&res);
    free(text);
}

/* ---- Keys the manifest does not allow ------------------------------------- */

static void whole_line_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    const uint32_t one = 1;
    soren_emit(e, r->data, (uint32_t)r->size, &one);
}

static void expect_job_error(const soren_stage_spec *spec, const void *data, size_t size,
                             const char *text)
{
    for (unsigned threads = 1; threads <= 3; threads += 2) {
        soren_result res;
        soren_error err;
        cr_assert_eq(run_on(spec, data, size, threads, 64, &res, &err), SOREN_EJOB);
        cr_assert_str_eq(err.text, text);
        cr_assert_eq(res.count, 0);
        soren_result_destroy(&res);
    }
}

Test(engine, key_errors)
{
    /* Too long a string key (the limit is key.max_size). */
    char *big = malloc(70001);
    cr_assert_not_null(big);
    memset(big, 'w', 70000);
    big[70000] = '\n';
    soren_stage code = {.map = whole_line_map, .combine = SOREN_SUM_U32};
    soren_stage_spec spec = make_spec("wordcount", &code, SOREN_INPUT_LINES, SOREN_TYPE_STRING,
                                      SOREN_TYPE_U32, SOREN_COMBINE_SUM, SOREN_REDUCE_COMBINE);
    expect_job_error(&spec, big, 70001,
                     "wordcount: map emitted a key of 70000 bytes (mapping buf at byte 0); the "
                     "manifest allows at most 65536 (key.max_size)");
    /* The message names the input and the offset of the record mapped. */
    spec.key_max_size = 3;
    expect_job_error(&spec, "ab\nabc\nabcd\nabc", 15,
                     "wordcount: map emitted a key of 4 bytes (mapping buf at byte 7); the "
                     "manifest allows at most 3 (key.max_size)");
    /* Map-only, too. */
    spec.combine = SOREN_COMBINE_NONE;
    spec.reduce = SOREN_REDUCE_NONE;
    expect_job_error(&spec, "abcd", 4,
                     "wordcount: map emitted a key of 4 bytes (mapping buf at byte 0); the "
                     "manifest allows at most 3 (key.max_size)");
    free(big);

    /* A typed key of the wrong size. */
    spec = make_spec("typed", &code, SOREN_INPUT_FIXED, SOREN_TYPE_U32, SOREN_TYPE_U32,
                     SOREN_COMBINE_SUM, SOREN_REDUCE_COMBINE);
    spec.record_size = 8;
    expect_job_error(&spec, "12345678", 8,
                     "typed: map emitted a key of 8 bytes; key.type u32 has 4-byte keys");

    /* An index key out of range. */
    spec = make_spec("hist", &code, SOREN_INPUT_FIXED, SOREN_TYPE_INDEX, SOREN_TYPE_U32,
                     SOREN_COMBINE_SUM, SOREN_REDUCE_COMBINE);
    spec.record_size = 4;
    spec.key_count = 768;
    uint32_t keys[64];
    for (int i = 0; i < 64; i++)
        keys[i] = (uint32_t)i * 12;
    keys[63] = 768;
    expect_job_error(&spec, keys, sizeof keys,
                     "hist: map emitted the index key 768; the manifest allows 0 to 767 "
                     "(key.count 768)");
    keys[63] = 767;
    soren_result res;
    soren_error err;
    cr_assert_eq(run_on(&spec, keys, sizeof keys, 2, 16, &res, &err), SOREN_OK, "%s",
                 err.text);
    cr_assert_eq(res.count, 64);
    soren_result_destroy(&res);

    /* What reduce emits is checked the same way. */
    uint32_t count[10], min[10], sum[10];
    uint8_t *data = kv32_data(1000, 10, count, min, sum);
    soren_stage rcode = {.map = kv32_map, .reduce = reduce_count_min};
    spec = make_spec("red", &rcode, SOREN_INPUT_FIXED, SOREN_TYPE_INDEX, SOREN_TYPE_U32,
                     SOREN_COMBINE_NONE, SOREN_REDUCE_FUNCTION);
    spec.record_size = 8;
    spec.key_count = 1009; /* only key 9's second pair is out of range */
    expect_job_error(&spec, data, 8000,
                     "red: reduce emitted the index key 1009; the manifest allows 0 to 1008 "
                     "(key.count 1009)");
    free(data);
}

/* ---- Ordering ------------------------------------------------------------ */

static void append_str(soren_result *r, const char *key, uint32_t value)
{
    cr_assert_eq(soren_result_append(r, key, (uint32_t)strlen(key), &value, NULL), SOREN_OK);
}

/* append_all keeps the destination's pairs and adds the source's after
 * them, keys of any length (the empty one too) and values intact. */
Test(engine, result_append_all_concatenates)
{
    soren_stage_spec spec = wc_spec();
    soren_result a, b;
    soren_result_init(&a, &spec);
    soren_result_init(&b, &spec);
    cr_assert_eq(soren_result_append_all(&a, &b, NULL), SOREN_OK, "an empty source");
    cr_assert_eq(a.count, 0);
    append_str(&a, "first", 11);
    append_str(&b, "", 22);
    append_str(&b, "a longer key than the others", 33);
    append_str(&b, "x", 44);
    cr_assert_eq(soren_result_append_all(&a, &b, NULL), SOREN_OK);
    const char *keys[] = {"first", "", "a longer key than the others", "x"};
    const uint32_t values[] = {11, 22, 33, 44};
    cr_assert_eq(a.count, 4);
    for (uint64_t i = 0; i < 4; i++) {
        uint64_t n = a.key_offset[i + 1] - a.key_offset[i];
        cr_expect_eq(n, strlen(keys[i]), "pair %llu's key size", (unsigned long long)i);
        cr_expect(memcmp(a.key_bytes + a.key_offset[i], keys[i], n) == 0, "pair %llu's key",
                  (unsigned long long)i);
        uint32_t v;
        memcpy(&v, a.values + i * a.value_size, sizeof v);
        cr_expect_eq(v, values[i], "pair %llu's value", (unsigned long long)i);
    }
    cr_assert_eq(b.count, 3, "the source is left as it was");
    soren_result_destroy(&a);
    soren_result_destroy(&b);
}

Test(engine, order_modes_and_limit)
{
    soren_stage_spec spec = wc_spec();
    soren_result r;
    soren_error err;
    soren_error_clear(&err);
    const char *keys[] = {"b", "ab", "a", "", "abc", "b\xff", "B"};
    const uint32_t vals[] = {3, 1, 3, 2, 1, 0, 7};
    const char *by_key = "\t2\nB\t7\na\t3\nab\t1\nabc\t1\nb\t3\nb\xff\t0\n";
    const char *desc = "B\t7\na\t3\nb\t3\n\t2\nab\t1\nabc\t1\nb\xff\t0\n";
    const char *asc = "b\xff\t0\nab\t1\nabc\t1\n\t2\na\t3\nb\t3\nB\t7\n";
    struct {
        soren_order order;
        uint64_t limit;
        const char *want;
    } cases[] = {{SOREN_ORDER_KEY, 0, by_key},        {SOREN_ORDER_VALUE_DESC, 0, desc},
                 {SOREN_ORDER_VALUE_ASC, 0, asc},     {SOREN_ORDER_VALUE_DESC, 3, NULL},
                 {SOREN_ORDER_KEY, 1, "\t2\n"},       {SOREN_ORDER_KEY, 100, by_key},
                 {SOREN_ORDER_NONE, 2, "b\t3\nab\t1\n"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        soren_result_init(&r, &spec);
        for (size_t i = 0; i < 7; i++)
            append_str(&r, keys[i], vals[i]);
        cr_assert_eq(soren_result_order(&r, cases[c].order, cases[c].limit, &err), SOREN_OK);
        char *text = render(&r, SOREN_FORMAT_TSV);
        if (cases[c].want)
            cr_assert_str_eq(text, cases[c].want, "case %zu", c);
        else
            cr_assert_str_eq(text, "B\t7\na\t3\nb\t3\n");
        free(text);
        soren_result_destroy(&r);
    }
}

Test(engine, order_top_n_equals_full_sort)
{
    /* A short limit takes the selection path; it must agree with a sort. */
    soren_stage_spec spec = make_spec("t", NULL, SOREN_INPUT_LINES, SOREN_TYPE_U64,
                                      SOREN_TYPE_F64, SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    soren_order orders[] = {SOREN_ORDER_KEY, SOREN_ORDER_VALUE_DESC, SOREN_ORDER_VALUE_ASC};
    for (int o = 0; o < 3; o++) {
        soren_result a, b;
        soren_result_init(&a, &spec);
        soren_result_init(&b, &spec);
        uint64_t rng = 5;
        for (int i = 0; i < 5000; i++) {
            uint64_t k = tu_rand_below(&rng, 300);
            double v = (double)tu_rand_below(&rng, 50) - 25; /* many ties */
            cr_assert_eq(soren_result_append(&a, &k, 8, &v, NULL), SOREN_OK);
            cr_assert_eq(soren_result_append(&b, &k, 8, &v, NULL), SOREN_OK);
        }
        soren_error err;
        cr_assert_eq(soren_result_order(&a, orders[o], 17, &err), SOREN_OK);
        cr_assert_eq(soren_result_order(&b, orders[o], 0, &err), SOREN_OK);
        b.count = 17;
        expect_same_result(&a, &b, "top 17");
        soren_result_destroy(&a);
        soren_result_destroy(&b);
    }
}

Test(engine, float_and_integer_keys_order)
{
    soren_stage_spec spec = make_spec("t", NULL, SOREN_INPUT_LINES, SOREN_TYPE_F64,
                                      SOREN_TYPE_I64, SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    soren_result r;
    soren_result_init(&r, &spec);
    double keys[] = {1.5, -0.0, 0.0, -INFINITY, NAN, -NAN, INFINITY, -2.25, 1e-310};
    for (int i = 0; i < 9; i++) {
        int64_t v = -i;
        cr_assert_eq(soren_result_append(&r, &keys[i], 8, &v, NULL), SOREN_OK);
    }
    soren_error err;
    cr_assert_eq(soren_result_order(&r, SOREN_ORDER_KEY, 0, &err), SOREN_OK);
    char *text = render(&r, SOREN_FORMAT_TSV);
    /* -NaN (value -5) orders first and NaN (-4) last; both are written nan. */
    cr_assert_str_eq(text, "nan\t-5\n-inf\t-3\n-2.25\t-7\n-0\t-1\n0\t-2\n"
                           "1e-310\t-8\n1.5\t0\ninf\t-6\nnan\t-4\n");
    free(text);
    cr_assert_lt(soren_key_compare(SOREN_TYPE_I64, (const uint8_t *)&(int64_t){-1}, 8,
                                   (const uint8_t *)&(int64_t){1}, 8), 0);
    cr_assert_gt(soren_key_compare(SOREN_TYPE_U64, (const uint8_t *)&(uint64_t){UINT64_MAX}, 8,
                                   (const uint8_t *)&(uint64_t){1}, 8), 0);
    cr_assert_lt(soren_value_compare(SOREN_TYPE_F32, &(float){-0.0f}, &(float){0.0f}), 0);
    cr_assert_eq(soren_value_compare(SOREN_TYPE_U32, &(uint32_t){4}, &(uint32_t){4}), 0);
    soren_result_destroy(&r);
}

/* Pairs that come in key order stay as they are; one pair out of place
 * anywhere (first, last, between equal keys) is sorted as a plain sort
 * would; value orders sort what is in key order. */
Test(engine, pairs_in_order_stay_and_others_are_sorted)
{
    soren_stage_spec spec = make_spec("t", NULL, SOREN_INPUT_LINES, SOREN_TYPE_U64,
                                      SOREN_TYPE_U64, SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    enum { N = 1000 };
    uint64_t keys[N], values[N], rng = 97;
    for (size_t i = 0; i < N; i++) {
        keys[i] = i / 3 * 5; /* ascending, each key three times */
        values[i] = tu_rand_below(&rng, 1000);
    }
    /* equal keys in order of value, as the key order has them */
    for (size_t i = 0; i + 2 < N; i += 3)
        for (size_t a = i; a < i + 3; a++)
            for (size_t b = a + 1; b < i + 3; b++)
                if (values[b] < values[a]) {
                    uint64_t t = values[a];
                    values[a] = values[b];
                    values[b] = t;
                }
    static const size_t moved[] = {N, 0, N - 1, 400, 401};
    for (size_t m = 0; m < sizeof moved / sizeof moved[0]; m++) {
        for (int order = 0; order < 2; order++) {
            soren_result r;
            soren_result_init(&r, &spec);
            uint64_t pk[N][2]; /* the pairs as a plain array, for the reference sort */
            for (size_t i = 0; i < N; i++) {
                /* pair moved[m] gets the largest key (or, 401, the smallest value) */
                pk[i][0] = i == moved[m] && i != 401 ? UINT64_MAX : keys[i];
                pk[i][1] = i == moved[m] && i == 401 ? 0 : values[i];
                cr_assert_eq(soren_result_append(&r, &pk[i][0], 8, &pk[i][1], NULL), SOREN_OK);
            }
            soren_order o = order ? SOREN_ORDER_VALUE_DESC : SOREN_ORDER_KEY;
            soren_error err;
            cr_assert_eq(soren_result_order(&r, o, 0, &err), SOREN_OK, "%s", err.text);
            for (size_t i = 1; i < N; i++)
                for (size_t j = i; j > 0; j--) {
                    uint64_t *a = pk[j - 1], *b = pk[j];
                    int later = order ? (b[1] > a[1] || (b[1] == a[1] && b[0] < a[0]))
                                      : (b[0] < a[0] || (b[0] == a[0] && b[1] < a[1]));
                    if (!later)
                        break;
                    uint64_t t0 = a[0], t1 = a[1];
                    a[0] = b[0], a[1] = b[1], b[0] = t0, b[1] = t1;
                }
            for (size_t i = 0; i < N; i++) {
                uint64_t k, v;
                memcpy(&k, r.key_bytes + r.key_offset[i], 8);
                memcpy(&v, r.values + i * 8, 8);
                cr_assert(k == pk[i][0] && v == pk[i][1], "pair %zu moved, order %d: pair %zu "
                          "is (%llu, %llu), want (%llu, %llu)", moved[m], order, i,
                          (unsigned long long)k, (unsigned long long)v,
                          (unsigned long long)pk[i][0], (unsigned long long)pk[i][1]);
            }
            soren_result_destroy(&r);
        }
    }
}

/* ---- Iteration ------------------------------------------------------------- */

/* A result of n pairs (keys[i], values[i]) of the given types. */
static void iterate_result(soren_result *r, soren_type key, soren_type value, const void *keys,
                           const void *values, size_t n)
{
    soren_stage_spec spec = make_spec("t", NULL, SOREN_INPUT_FIXED, key, value,
                                      SOREN_COMBINE_SUM, SOREN_REDUCE_COMBINE);
    soren_result_init(r, &spec);
    size_t ks = soren_type_size(key), vs = soren_type_size(value);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(soren_result_append(r, (const uint8_t *)keys + i * ks, (uint32_t)ks,
                                         (const uint8_t *)values + i * vs, NULL), SOREN_OK);
}

/* --iterate's feed: pair (i, v) overwrites element i, other elements keep
 * their bytes, no byte changed means converged; comparing writes nothing;
 * a key past the end (a partial element counts as none) is an error that
 * names it and the size and leaves the bytes alone, or, comparing, a
 * change; keys that are not element numbers are refused. */
Test(engine, iterate_feed_overwrites_elements)
{
    soren_result r;
    soren_error err = {0};
    int changed = -1;
    const uint32_t keys[] = {2, 0};
    const double values[] = {3.0, 1.5};
    double data[4] = {9, 9, 9, 9};
    iterate_result(&r, SOREN_TYPE_U32, SOREN_TYPE_F64, keys, values, 2);
    cr_assert_eq(soren_iterate_feed(&r, (uint8_t *)data, sizeof data, "t: parameter c", 0,
                                    &changed, &err), SOREN_OK);
    cr_expect_eq(changed, 1);
    cr_expect(data[0] == 9 && data[2] == 9, "comparing wrote");
    cr_assert_eq(soren_iterate_feed(&r, (uint8_t *)data, sizeof data, "t: parameter c", 1,
                                    &changed, &err), SOREN_OK);
    cr_expect_eq(changed, 1);
    cr_expect(data[0] == 1.5 && data[1] == 9 && data[2] == 3.0 && data[3] == 9,
              "after the feed: %g %g %g %g", data[0], data[1], data[2], data[3]);
    for (int write = 0; write <= 1; write++) {
        cr_assert_eq(soren_iterate_feed(&r, (uint8_t *)data, sizeof data, "t: parameter c",
                                        write, &changed, &err), SOREN_OK);
        cr_expect_eq(changed, 0, "the same output again changed the parameter (write %d)", write);
    }
    soren_result_destroy(&r);

    /* Key 3 needs bytes 24 .. 31 of 30: past the end. */
    const uint32_t past[] = {0, 3};
    double before[4] = {9, 9, 9, 9};
    memcpy(data, before, sizeof data);
    iterate_result(&r, SOREN_TYPE_U32, SOREN_TYPE_F64, past, values, 2);
    cr_expect_eq(soren_iterate_feed(&r, (uint8_t *)data, 30, "t: parameter c", 1, &changed,
                                    &err), SOREN_EJOB);
    cr_expect_str_eq(err.text, "t: parameter c: the output's key 3 is past the parameter's end "
                     "(30 bytes: 3 elements of 8 bytes), so it cannot be fed to the next run");
    cr_expect(memcmp(data, before, sizeof data) == 0, "a failed feed wrote");
    cr_assert_eq(soren_iterate_feed(&r, (uint8_t *)data, 30, "t: parameter c", 0, &changed,
                                    &err), SOREN_OK);
    cr_expect_eq(changed, 1, "comparing: a key past the end is a change");
    soren_result_destroy(&r);

    /* u64 and index keys, 4-byte values. */
    const uint64_t wide[] = {1};
    const uint32_t narrow[] = {3};
    const uint32_t v32[] = {7};
    uint32_t elements[4] = {0, 0, 0, 0};
    iterate_result(&r, SOREN_TYPE_U64, SOREN_TYPE_U32, wide, v32, 1);
    cr_assert_eq(soren_iterate_feed(&r, (uint8_t *)elements, sizeof elements, "t", 1, &changed,
                                    &err), SOREN_OK);
    soren_result_destroy(&r);
    iterate_result(&r, SOREN_TYPE_INDEX, SOREN_TYPE_U32, narrow, v32, 1);
    cr_assert_eq(soren_iterate_feed(&r, (uint8_t *)elements, sizeof elements, "t", 1, &changed,
                                    &err), SOREN_OK);
    cr_expect(elements[0] == 0 && elements[1] == 7 && elements[2] == 0 && elements[3] == 7);
    soren_result_destroy(&r);

    iterate_result(&r, SOREN_TYPE_F32, SOREN_TYPE_U32, v32, v32, 1);
    soren_error_clear(&err);
    cr_expect_eq(soren_iterate_feed(&r, (uint8_t *)elements, sizeof elements, "t", 1, &changed,
                                    &err), SOREN_EJOB);
    cr_expect(strstr(err.text, "keys are of type f32") != NULL, "%s", err.text);
    soren_result_destroy(&r);
}

/* ---- Writers ------------------------------------------------------------- */

Test(engine, tsv_and_json_text)
{
    soren_stage_spec spec = wc_spec();
    soren_result r;
    soren_result_init(&r, &spec);
    append_str(&r, "a\\b\tc\nd\re", 1);
    append_str(&r, "q\"uote\x01\x7f", 2);
    append_str(&r, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 3); /* é € 😀 */
    append_str(&r, "\xff\xc3(\xe2\x82\xed\xa0\x80\xc0\xaf\xf4\x90\x80\x80", 4);
    append_str(&r, "", 5);
    char *tsv = render(&r, SOREN_FORMAT_TSV);
    cr_assert_str_eq(tsv, "a\\\\b\\tc\\nd\\re\t1\n"
                          "q\"uote\x01\x7f\t2\n"
                          "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\t3\n"
                          "\xff\xc3(\xe2\x82\xed\xa0\x80\xc0\xaf\xf4\x90\x80\x80\t4\n"
                          "\t5\n");
    free(tsv);
    char *json = render(&r, SOREN_FORMAT_JSON);
    cr_assert_str_eq(json,
                     "[\n"
                     "{\"key\": \"a\\\\b\\u0009c\\u000ad\\u000de\", \"value\": 1},\n"
                     "{\"key\": \"q\\\"uote\\u0001\x7f\", \"value\": 2},\n"
                     "{\"key\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", \"value\": 3},\n"
                     "{\"key\": \"\\udcff\\udcc3(\\udce2\\udc82\\udced\\udca0\\udc80\\udcc0"
                     "\\udcaf\\udcf4\\udc90\\udc80\\udc80\", \"value\": 4},\n"
                     "{\"key\": \"\", \"value\": 5}\n"
                     "]\n");
    free(json);
    soren_result_destroy(&r);

    /* Typed keys and values are numbers. */
    spec = make_spec("t", NULL, SOREN_INPUT_LINES, SOREN_TYPE_I64, SOREN_TYPE_U64,
                     SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    soren_result_init(&r, &spec);
    int64_t k = INT64_MIN;
    uint64_t v = UINT64_MAX;
    cr_assert_eq(soren_result_append(&r, &k, 8, &v, NULL), SOREN_OK);
    tsv = render(&r, SOREN_FORMAT_TSV);
    cr_assert_str_eq(tsv, "-9223372036854775808\t18446744073709551615\n");
    json = render(&r, SOREN_FORMAT_JSON);
    cr_assert_str_eq(json, "[\n{\"key\": -9223372036854775808, \"value\": "
                           "18446744073709551615}\n]\n");
    free(tsv);
    free(json);
    soren_result_destroy(&r);
}

Test(engine, floats_round_trip)
{
    float f[] = {0.1f, 1.5f, -0.0f, 1e-45f, 3.40282347e38f, 1.0f / 3, 16777217.0f, -2.5e-7f};
    double d[] = {0.1, 1.5, -0.0, 5e-324, 1.7976931348623157e308, 1.0 / 3, M_PI, -1e100};
    soren_stage_spec spec = make_spec("t", NULL, SOREN_INPUT_LINES, SOREN_TYPE_F32,
                                      SOREN_TYPE_F64, SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    soren_result r;
    soren_result_init(&r, &spec);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(soren_result_append(&r, &f[i], 4, &d[i], NULL), SOREN_OK);
    char *text = render(&r, SOREN_FORMAT_TSV);
    char *line = text;
    for (int i = 0; i < 8; i++) {
        char *end;
        float fk = strtof(line, &end);
        cr_assert_eq(*end, '\t');
        double dv = strtod(end + 1, &end);
        cr_assert_eq(*end, '\n');
        cr_assert(memcmp(&fk, &f[i], 4) == 0, "f32 %d: %.9g", i, (double)f[i]);
        cr_assert(memcmp(&dv, &d[i], 8) == 0, "f64 %d: %.17g", i, d[i]);
        line = end + 1;
    }
    /* The fewest digits that read back: 0.1, not 0.100000001. */
    const char *head = "0.1\t0.1\n1.5\t1.5\n-0\t-0\n1e-45\t5e-324\n"
                       "3.4028235e+38\t1.7976931348623157e+308\n"
                       "0.33333334\t0.3333333333333333\n";
    cr_assert_eq(strncmp(text, head, strlen(head)), 0, "%s", text);
    free(text);
    /* JSON has no infinities or NaNs: they are written as strings. */
    soren_result_destroy(&r);
    soren_result_init(&r, &spec);
    float fi = INFINITY;
    double dn = NAN;
    cr_assert_eq(soren_result_append(&r, &fi, 4, &dn, NULL), SOREN_OK);
    text = render(&r, SOREN_FORMAT_JSON);
    cr_assert_str_eq(text, "[\n{\"key\": \"inf\", \"value\": \"nan\"}\n]\n");
    free(text);
    soren_result_destroy(&r);
}

/* Every NaN is written nan ("nan" in JSON), whatever its sign bit and
 * payload: x86 makes inf - inf a NaN with the sign bit set, which %g
 * writes "-nan", and a GPU may make the other. */
Test(engine, every_nan_is_nan)
{
    static const uint32_t f32_bits[] = {0xffc00000u, 0x7fc00000u, 0x7f800001u, 0xff800001u};
    static const uint64_t f64_bits[] = {0xfff8000000000000u, 0x7ff8000000000000u,
                                        0x7ff0000000000001u, 0xfff0000000000001u};
    soren_stage_spec spec = make_spec("t", NULL, SOREN_INPUT_LINES, SOREN_TYPE_F32,
                                      SOREN_TYPE_F64, SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    soren_result r;
    soren_result_init(&r, &spec);
    for (int i = 0; i < 4; i++) {
        float k;
        double v;
        memcpy(&k, &f32_bits[i], 4);
        memcpy(&v, &f64_bits[i], 8);
        cr_assert(isnan(k) && isnan(v));
        cr_assert_eq(soren_result_append(&r, &k, 4, &v, NULL), SOREN_OK);
    }
    float neg_inf = -INFINITY;
    double pos_inf = INFINITY;
    cr_assert_eq(soren_result_append(&r, &neg_inf, 4, &pos_inf, NULL), SOREN_OK);
    static const struct {
        soren_format format;
        const char *line, *last;
    } want[] = {
        {SOREN_FORMAT_TSV, "nan\tnan\n", "-inf\tinf\n"},
        {SOREN_FORMAT_CSV, "nan,nan\r\n", "-inf,inf\r\n"},
        {SOREN_FORMAT_JSONL, "{\"key\": \"nan\", \"value\": \"nan\"}\n",
         "{\"key\": \"-inf\", \"value\": \"inf\"}\n"},
    };
    for (size_t f = 0; f < sizeof want / sizeof want[0]; f++) {
        char expected[512] = "";
        for (int i = 0; i < 4; i++)
            strcat(expected, want[f].line);
        strcat(expected, want[f].last);
        char *text = render(&r, want[f].format);
        cr_expect_str_eq(text, expected, "format %d", (int)want[f].format);
        free(text);
    }
    char *json = render(&r, SOREN_FORMAT_JSON);
    cr_expect_str_eq(json, "[\n{\"key\": \"nan\", \"value\": \"nan\"},\n"
                           "{\"key\": \"nan\", \"value\": \"nan\"},\n"
                           "{\"key\": \"nan\", \"value\": \"nan\"},\n"
                           "{\"key\": \"nan\", \"value\": \"nan\"},\n"
                           "{\"key\": \"-inf\", \"value\": \"inf\"}\n]\n");
    free(json);
    soren_result_destroy(&r);
}

Test(engine, csv_and_jsonl_text)
{
    soren_stage_spec spec = wc_spec();
    soren_result r;
    soren_result_init(&r, &spec);
    append_str(&r, "plain", 1);
    append_str(&r, "a,b", 2);
    append_str(&r, "say \"hi\"", 3);
    append_str(&r, "cr\rlf\n", 4);
    append_str(&r, "tab\tback\\slash", 5);
    append_str(&r, "\xff\xfe\xc3\xa9", 6);
    append_str(&r, "", 7);
    append_str(&r, "\"", 8);
    char *csv = render(&r, SOREN_FORMAT_CSV);
    /* RFC 4180: quoted only where a comma, a quote, CR or LF is; quotes
     * doubled; tabs, backslashes and any other bytes as they are. */
    cr_assert_str_eq(csv, "plain,1\r\n"
                          "\"a,b\",2\r\n"
                          "\"say \"\"hi\"\"\",3\r\n"
                          "\"cr\rlf\n\",4\r\n"
                          "tab\tback\\slash,5\r\n"
                          "\xff\xfe\xc3\xa9,6\r\n"
                          ",7\r\n"
                          "\"\"\"\",8\r\n");
    free(csv);
    char *jsonl = render(&r, SOREN_FORMAT_JSONL);
    cr_assert_str_eq(jsonl, "{\"key\": \"plain\", \"value\": 1}\n"
                            "{\"key\": \"a,b\", \"value\": 2}\n"
                            "{\"key\": \"say \\\"hi\\\"\", \"value\": 3}\n"
                            "{\"key\": \"cr\\u000dlf\\u000a\", \"value\": 4}\n"
                            "{\"key\": \"tab\\u0009back\\\\slash\", \"value\": 5}\n"
                            "{\"key\": \"\\udcff\\udcfe\xc3\xa9\", \"value\": 6}\n"
                            "{\"key\": \"\", \"value\": 7}\n"
                            "{\"key\": \"\\\"\", \"value\": 8}\n");
    free(jsonl);
    soren_result_destroy(&r);

    /* No pairs: nothing at all, except json's empty array. */
    soren_result_init(&r, &spec);
    const soren_format empty_formats[] = {SOREN_FORMAT_TSV, SOREN_FORMAT_CSV,
                                          SOREN_FORMAT_JSONL};
    for (size_t i = 0; i < 3; i++) {
        char *text = render(&r, empty_formats[i]);
        cr_assert_str_eq(text, "", "format %d", (int)empty_formats[i]);
        free(text);
    }
    char *json = render(&r, SOREN_FORMAT_JSON);
    cr_assert_str_eq(json, "[]\n");
    free(json);

    /* Typed keys are numbers in every format, never quoted. */
    spec = make_spec("t", NULL, SOREN_INPUT_LINES, SOREN_TYPE_U64, SOREN_TYPE_I64,
                     SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    soren_result_init(&r, &spec);
    uint64_t k = UINT64_MAX;
    int64_t v = INT64_MIN;
    cr_assert_eq(soren_result_append(&r, &k, 8, &v, NULL), SOREN_OK);
    csv = render(&r, SOREN_FORMAT_CSV);
    cr_assert_str_eq(csv, "18446744073709551615,-9223372036854775808\r\n");
    jsonl = render(&r, SOREN_FORMAT_JSONL);
    cr_assert_str_eq(jsonl, "{\"key\": 18446744073709551615, \"value\": "
                            "-9223372036854775808}\n");
    free(csv);
    free(jsonl);
    soren_result_destroy(&r);
}

/* In JSON a byte outside valid UTF-8 is \udcXX, a lone low surrogate that
 * valid text never writes: the Latin-1 key "to Bj\xf6rn" and the UTF-8
 * "to Björn" stay apart, and Python's surrogateescape gives back every
 * key's bytes from json and jsonl alike (every byte from 1 to 255 alone,
 * and broken sequences among valid ones). */
Test(engine, json_keys_keep_their_bytes)
{
    soren_stage_spec spec = wc_spec();
    soren_result r;
    soren_result_init(&r, &spec);
    append_str(&r, "to Bj\xf6rn", 1);
    append_str(&r, "to Bj\xc3\xb6rn", 2);
    char *jsonl = render(&r, SOREN_FORMAT_JSONL);
    cr_assert_str_eq(jsonl, "{\"key\": \"to Bj\\udcf6rn\", \"value\": 1}\n"
                            "{\"key\": \"to Bj\xc3\xb6rn\", \"value\": 2}\n");
    free(jsonl);
    for (int c = 1; c < 256; c++) {
        char key[2] = {(char)c, '\0'};
        append_str(&r, key, (uint32_t)c);
    }
    append_str(&r, "\xe2\x82\xac\xe2\x82(\xf0\x9f\x98\x80\xed\xa0\x80\xc0\xaf\xf4\x90\x80\x80", 0);
    append_str(&r, "\xc3", 0);

    if (tu_runf(NULL, NULL, "command -v python3 >/dev/null") != 0)
        cr_skip_test("python3 is not installed: the round trip through Python is not checked");
    /* Each key's bytes in hex, one a line, as Python reads them back. */
    char *want = NULL;
    size_t want_size = 0;
    FILE *f = open_memstream(&want, &want_size);
    cr_assert_not_null(f);
    for (uint64_t i = 0; i < r.count; i++) {
        for (uint64_t b = r.key_offset[i]; b < r.key_offset[i + 1]; b++)
            fprintf(f, "%02x", r.key_bytes[b]);
        fputc('\n', f);
    }
    fclose(f);
    static const char *const script =
        "import json, sys\n"
        "text = open(sys.argv[1], encoding='utf-8').read()\n"
        "pairs = json.loads(text) if sys.argv[2] == 'json' else "
        "[json.loads(line) for line in text.splitlines()]\n"
        "for p in pairs:\n"
        "    print(p['key'].encode('utf-8', 'surrogateescape').hex())\n";
    char script_path[4096];
    snprintf(script_path, sizeof script_path, "%s/keys.py", dir);
    tu_write(script_path, script, strlen(script));
    const soren_format formats[] = {SOREN_FORMAT_JSON, SOREN_FORMAT_JSONL};
    for (int i = 0; i < 2; i++) {
        const char *name = i ? "jsonl" : "json";
        char *text = render(&r, formats[i]), path[4096];
        snprintf(path, sizeof path, "%s/keys.%s", dir, name);
        tu_write(path, text, strlen(text));
        free(text);
        char *out = NULL, *err = NULL;
        int rc = tu_runf(&out, &err, "python3 '%s' '%s' %s", script_path, path, name);
        cr_expect_eq(rc, 0, "%s: python3 failed: %s", name, err);
        cr_expect_str_eq(out, want, "%s: the keys Python reads back differ", name);
        free(out);
        free(err);
    }
    free(want);
    soren_result_destroy(&r);
}

Test(engine, format_and_order_names)
{
    static const char *const formats[] = {"tsv", "csv", "json", "jsonl"};
    for (int i = 0; i < 4; i++) {
        soren_format f = SOREN_FORMAT_JSONL;
        cr_assert_eq(soren_format_parse(formats[i], &f), 0, "%s", formats[i]);
        cr_assert_eq((int)f, i);
        cr_assert(strstr(soren_format_names, formats[i]) != NULL);
    }
    soren_format f;
    cr_assert_eq(soren_format_parse("xml", &f), -1);
    cr_assert_eq(soren_format_parse("JSON", &f), -1);
    static const char *const orders[] = {"key", "value_desc", "value_asc", "none"};
    for (int i = 0; i < 4; i++) {
        soren_order o = SOREN_ORDER_NONE;
        cr_assert_eq(soren_order_parse(orders[i], &o), 0, "%s", orders[i]);
        cr_assert_eq((int)o, i);
        cr_assert(strstr(soren_order_names, orders[i]) != NULL);
    }
    soren_order o;
    cr_assert_eq(soren_order_parse("value", &o), -1);
}

/* The text of one number field, from p up to the separator that ends it. */
static const char *number_end(const char *p)
{
    while (*p && *p != '\t' && *p != ',' && *p != '}' && *p != '\r' && *p != '\n')
        p++;
    return p;
}

/* Significant digits of the number in [p, end): its mantissa's digits from
 * the first non-zero one to the last ("0.00120" and "1200" have 2). */
static int significant_digits(const char *p, const char *end)
{
    const char *first = NULL, *last = NULL;
    int n = 0, counted = 0;
    for (const char *q = p; q < end && *q != 'e'; q++) {
        if (*q < '0' || *q > '9')
            continue;
        if (*q != '0') {
            if (!first)
                first = q;
            last = q;
        }
    }
    for (const char *q = first; first && q <= last; q++)
        if (*q >= '0' && *q <= '9')
            n++, counted = 1;
    return counted ? n : 1;
}

/* 1 if the number with one significant digit less than the written text
 * reads back to the same bits: then the writer did not use the fewest. */
static int has_shorter_form(const char *p, const char *end, double v, int is_f32)
{
    int n = significant_digits(p, end);
    if (n <= 1)
        return 0;
    char shorter[400]; /* %.Ng of a double can be 300 digits and more */
    snprintf(shorter, sizeof shorter, "%.*g", n - 1, v);
    if (is_f32) {
        float want = (float)v, back = strtof(shorter, NULL);
        return memcmp(&want, &back, 4) == 0;
    }
    double back = strtod(shorter, NULL);
    return memcmp(&v, &back, 8) == 0;
}

/* Every float read back from every format, bit for bit, and written with
 * the fewest digits: one digit less would read back as another number. */
Test(engine, floats_round_trip_in_every_format_with_fewest_digits)
{
    soren_stage_spec spec = make_spec("t", NULL, SOREN_INPUT_LINES, SOREN_TYPE_F32,
                                      SOREN_TYPE_F64, SOREN_COMBINE_NONE, SOREN_REDUCE_NONE);
    soren_result r;
    soren_result_init(&r, &spec);
    uint64_t rng = 12;
    /* 20,000 numbers at the default test size, a thousand a megabyte */
    const int N = (int)(test_bytes() >> 20) * 1000;
    float *f = malloc(N * sizeof *f);
    double *d = malloc(N * sizeof *d);
    cr_assert(f && d);
    for (int i = 0; i < N; i++) {
        /* Random bits (every exponent), short decimals, and integers. */
        do {
            uint32_t fb = (uint32_t)tu_rand(&rng);
            uint64_t db = tu_rand(&rng);
            memcpy(&f[i], &fb, 4);
            memcpy(&d[i], &db, 8);
            if (i % 3 == 1) {
                f[i] = (float)((double)tu_rand_below(&rng, 2000001) - 1000000) / 1000;
                d[i] = ((double)tu_rand_below(&rng, 2000001) - 1000000) / 1000;
            } else if (i % 3 == 2) {
                f[i] = (float)tu_rand_below(&rng, 1u << 24);
                d[i] = (double)(tu_rand(&rng) >> 11);
            }
        } while (!isfinite(f[i]) || !isfinite(d[i]));
        cr_assert_eq(soren_result_append(&r, &f[i], 4, &d[i], NULL), SOREN_OK);
    }
    const soren_format formats[] = {SOREN_FORMAT_TSV, SOREN_FORMAT_CSV, SOREN_FORMAT_JSON,
                                    SOREN_FORMAT_JSONL};
    for (size_t fi = 0; fi < 4; fi++) {
        int json = formats[fi] == SOREN_FORMAT_JSON || formats[fi] == SOREN_FORMAT_JSONL;
        char *text = render(&r, formats[fi]);
        const char *p = text;
        for (int i = 0; i < N; i++) {
            if (json) {
                p = strstr(p, "\"key\": ");
                cr_assert_not_null(p, "format %d, pair %d", (int)formats[fi], i);
                p += 7;
            }
            const char *kend = number_end(p);
            char *end;
            float fk = strtof(p, &end);
            cr_assert_eq(end, kend, "format %d, pair %d: \"%.30s\"", (int)formats[fi], i, p);
            cr_assert(memcmp(&fk, &f[i], 4) == 0, "format %d: f32 %.9g read back as %.9g",
                      (int)formats[fi], (double)f[i], (double)fk);
            cr_assert(!has_shorter_form(p, kend, f[i], 1), "f32 %.*s is not the shortest",
                      (int)(kend - p), p);
            const char *v = json ? strstr(kend, "\"value\": ") + 9 : kend + 1;
            const char *vend = number_end(v);
            double dv = strtod(v, &end);
            cr_assert_eq(end, vend, "format %d, pair %d: \"%.30s\"", (int)formats[fi], i, v);
            cr_assert(memcmp(&dv, &d[i], 8) == 0, "format %d: f64 %.17g read back as %.17g",
                      (int)formats[fi], d[i], dv);
            cr_assert(!has_shorter_form(v, vend, d[i], 0), "f64 %.*s is not the shortest",
                      (int)(vend - v), v);
            for (p = vend; *p == '\r' || *p == '\n';)
                p++;
        }
        free(text);
    }
    free(f);
    free(d);
    soren_result_destroy(&r);
}

/* The progress counters take any order of calls, and NULL, without
 * drawing anything before the first phase; soren_progress_say wipes the
 * line before its message. */
Test(engine, progress_line_on_a_stream)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    cr_assert_not_null(f);
    soren_error err;
    soren_error_clear(&err);
    soren_progress *p = soren_progress_new(f, 1, &err);
    cr_assert_not_null(p, "%s", err.text);
    soren_progress_add(p, 10); /* before any phase: counted, not drawn */
    soren_progress_phase(p, "map", 4u << 20);
    soren_progress_add(p, 1u << 20);
    struct timespec pause = {0, 250 * 1000 * 1000};
    nanosleep(&pause, NULL);
    soren_progress_say(p, "soren-host: a message\n");
    soren_progress_phase(p, "merge", 0);
    nanosleep(&pause, NULL);
    soren_progress_end(p);
    soren_progress_end(p); /* idempotent */
    soren_progress_phase(p, "late", 1); /* after the end: nothing drawn */
    nanosleep(&(struct timespec){0, 150 * 1000 * 1000}, NULL);
    soren_progress_free(p);
    fclose(f);
    cr_assert(strncmp(text, "\rsoren-host: map ", 17) == 0, "%s", text);
    cr_assert(strstr(text, " of 4.0 MiB (") != NULL, "%s", text);
    cr_assert(strstr(text, "map 1.0 MiB of 4.0 MiB (25%), ") != NULL, "%s", text);
    cr_assert(strstr(text, " left") != NULL, "%s", text);
    /* The message starts on a wiped line: spaces over the frame, then \r. */
    const char *msg = strstr(text, "soren-host: a message\n");
    cr_assert_not_null(msg, "%s", text);
    cr_assert(msg > text && msg[-1] == '\r' && msg[-2] == ' ', "%s", text);
    cr_assert(strstr(text, "soren-host: merge, 0:00 elapsed") != NULL, "%s", text);
    cr_assert(strstr(text, "late") == NULL, "%s", text);
    /* It ends wiped: spaces and a carriage return. */
    cr_assert(size >= 2 && text[size - 1] == '\r' && text[size - 2] == ' ', "%s", text);
    free(text);
    soren_progress_free(NULL);
    soren_progress_phase(NULL, "x", 1);
    soren_progress_add(NULL, 1);
    soren_progress_end(NULL);
}

/* The CPU engine reports its phases and every byte it maps. */
Test(engine, cpu_engine_reports_its_bytes)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    cr_assert_not_null(f);
    soren_progress *p = soren_progress_new(f, 1, NULL);
    cr_assert_not_null(p);
    size_t n = 3u << 20;
    uint8_t *data = make_text(n, 5);
    soren_stage_spec spec = wc_spec();
    soren_input in;
    soren_input_wrap(&in, "buf", data, n);
    soren_cpu_options opt = {.threads = 2, .chunk_bytes = 65536, .progress = p};
    soren_result res;
    soren_result_init(&res, &spec);
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_cpu_run(&spec, &in, 1, NULL, &opt, &res, &err), SOREN_OK, "%s",
                 err.text);
    /* The last frame drawn may be any phase; the counter says it all. */
    soren_progress_phase(p, "check", 0);
    soren_progress_end(p);
    soren_progress_free(p);
    fclose(f);
    cr_assert(strstr(text, "soren-host: map ") != NULL, "%s", text);
    cr_assert(strstr(text, " of 3.0 MiB") != NULL, "%s", text);
    free(text);
    soren_result_destroy(&res);
    soren_input_close(&in);
    free(data);
}

static int count_entries(const char *path)
{
    DIR *d = opendir(path);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

Test(engine, output_temp_file_abort_and_commit)
{
    soren_stage_spec spec = wc_spec();
    soren_result r;
    soren_result_init(&r, &spec);
    append_str(&r, "w", 9);
    char *dest = path_in_dir("out.tsv");
    soren_output o;
    soren_error err;
    soren_error_clear(&err);

    /* Abort: nothing is left. */
    cr_assert_eq(soren_output_open(&o, dest, &err), SOREN_OK, "%s", err.text);
    const char *pending = soren_output_pending_path();
    cr_assert_not_null(pending);
    /* Hidden beside the destination, named for it and this process. */
    char *want = NULL;
    cr_assert(asprintf(&want, "%s/.out.tsv.soren-tmp.%ld", dir, (long)getpid()) > 0);
    cr_assert_str_eq(pending, want);
    free(want);
    cr_assert_eq(access(pending, F_OK), 0);
    char *tmp = strdup(pending);
    cr_assert_eq(soren_output_write(&o, &r, SOREN_FORMAT_TSV, &err), SOREN_OK);
    soren_output_abort(&o);
    cr_assert_null(soren_output_pending_path());
    cr_assert_neq(access(tmp, F_OK), 0);
    cr_assert_eq(count_entries(dir), 0);
    soren_output_abort(&o); /* twice is fine */
    free(tmp);

    /* Commit: the file appears whole, with the mode open(2) would give. */
    cr_assert_eq(soren_output_open(&o, dest, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_output_write(&o, &r, SOREN_FORMAT_TSV, &err), SOREN_OK);
    cr_assert_neq(access(dest, F_OK), 0, "visible before commit");
    cr_assert_eq(soren_output_commit(&o, &err), SOREN_OK, "%s", err.text);
    cr_assert_null(soren_output_pending_path());
    soren_output_abort(&o); /* after commit: no effect */
    char *text = tu_read(dest, NULL);
    cr_assert_str_eq(text, "w\t9\n");
    free(text);
    cr_assert_eq(count_entries(dir), 1);
    struct stat st;
    cr_assert_eq(stat(dest, &st), 0);
    mode_t mask = umask(0);
    umask(mask);
    cr_assert_eq(st.st_mode & 0777, 0666 & ~mask);

    /* A destination that is a directory, or in a missing folder. */
    cr_assert_eq(soren_output_open(&o, dir, &err), SOREN_EIO);
    soren_error_clear(&err);
    char *nowhere = path_in_dir("no/such/out.tsv");
    cr_assert_eq(soren_output_open(&o, nowhere, &err), SOREN_EIO);
    cr_assert(strstr(err.text, nowhere) != NULL, "%s", err.text);
    free(nowhere);
    free(dest);
    soren_result_destroy(&r);
}

Test(engine, output_write_errors_name_the_destination)
{
    if (access("/dev/full", W_OK) != 0)
        cr_skip_test("no /dev/full here");
    soren_stage_spec spec = wc_spec();
    soren_result r;
    soren_result_init(&r, &spec);
    append_str(&r, "w", 9);
    soren_output o;
    soren_error err;
    soren_error_clear(&err);
    /* A device is written in place (no temporary file beside it). */
    cr_assert_eq(soren_output_open(&o, "/dev/full", &err), SOREN_OK, "%s", err.text);
    cr_assert_null(soren_output_pending_path());
    soren_status rc = soren_output_write(&o, &r, SOREN_FORMAT_TSV, &err);
    if (rc == SOREN_OK)
        rc = soren_output_commit(&o, &err);
    else
        soren_output_abort(&o);
    cr_assert_eq(rc, SOREN_EIO);
    cr_assert_str_eq(err.text, "writing output /dev/full: No space left on device");
    soren_result_destroy(&r);
}

Test(engine, output_through_a_symbolic_link)
{
    soren_stage_spec spec = wc_spec();
    soren_result r;
    soren_result_init(&r, &spec);
    append_str(&r, "v", 1);
    char *target = path_in_dir("target.tsv"), *link = path_in_dir("link.tsv");
    tu_write(target, "old\n", 4);
    cr_assert_eq(symlink("target.tsv", link), 0);
    soren_output o;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_output_open(&o, link, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_output_write(&o, &r, SOREN_FORMAT_TSV, &err), SOREN_OK);
    cr_assert_eq(soren_output_commit(&o, &err), SOREN_OK, "%s", err.text);
    struct stat st;
    cr_assert_eq(lstat(link, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "the link was replaced");
    char *text = tu_read(target, NULL);
    cr_assert_str_eq(text, "v\t1\n");
    free(text);
    cr_assert_eq(count_entries(dir), 2);
    free(target);
    free(link);
    soren_result_destroy(&r);
}

/* ---- Dense index keys ---------------------------------------------------- */

/* Runs spec through the dense arrays into *dense (key order) and through
 * the tables: both must give the same bytes, keys pairs. */
static void run_dense_and_hash(const soren_stage_spec *spec, const void *data, size_t size,
                               unsigned threads, uint64_t chunk, uint64_t keys,
                               soren_result *dense)
{
    cr_assert(soren_cpu_dense(spec, threads));
    soren_cpu_options opt = {.threads = threads, .chunk_bytes = chunk};
    soren_result hash;
    run_opt(spec, data, size, &opt, dense);
    opt.hash_only = 1;
    run_opt(spec, data, size, &opt, &hash);
    expect_same_result(dense, &hash, "dense and hash");
    cr_assert_eq(dense->count, keys);
    soren_result_destroy(&hash);
}

/* Index keys under key.count fold into per-thread arrays where they fit:
 * the same bytes as the tables (hash_only), for every builtin combine, a
 * reduce after the combine, any thread count and chunk size; keys no
 * record emits (300 .. key_count-1) appear in neither. */
Test(engine, dense_index_keys_equal_the_tables)
{
    enum { RECORDS = 50000, KEYS = 300 };
    uint32_t count[KEYS], min[KEYS], sum[KEYS];
    uint8_t *data = kv32_data(RECORDS, KEYS, count, min, sum);
    const soren_combine_op ops[] = {SOREN_COMBINE_SUM, SOREN_COMBINE_COUNT, SOREN_COMBINE_MIN,
                                    SOREN_COMBINE_MAX};
    soren_stage code = {.map = kv32_map};
    soren_stage reduced = {.map = kv32_map, .combine = SOREN_SUM_U32, .reduce = reduce_double};
    for (size_t o = 0; o <= sizeof ops / sizeof *ops; o++) {
        int with_reduce = o == sizeof ops / sizeof *ops;
        soren_stage_spec spec =
            make_spec("dense", with_reduce ? &reduced : &code, SOREN_INPUT_FIXED,
                      SOREN_TYPE_INDEX, SOREN_TYPE_U32, with_reduce ? SOREN_COMBINE_SUM : ops[o],
                      with_reduce ? SOREN_REDUCE_FUNCTION : SOREN_REDUCE_COMBINE);
        spec.record_size = 8;
        spec.key_count = 1000;
        for (unsigned threads = 1; threads <= 7; threads += 3) {
            for (uint64_t chunk = 800; chunk <= 80000; chunk *= 100) {
                soren_result dense;
                run_dense_and_hash(&spec, data, RECORDS * 8, threads, chunk, KEYS, &dense);
                for (uint32_t k = 0; k < KEYS; k++) {
                    uint32_t key, v;
                    memcpy(&key, dense.key_bytes + dense.key_offset[k], 4);
                    memcpy(&v, dense.values + k * 4, 4);
                    uint32_t want = with_reduce                       ? 2 * sum[k]
                                    : ops[o] == SOREN_COMBINE_SUM   ? sum[k]
                                    : ops[o] == SOREN_COMBINE_COUNT ? count[k]
                                    : ops[o] == SOREN_COMBINE_MIN   ? min[k]
                                                                    : v;
                    cr_assert_eq(key, k);
                    cr_assert_eq(v, want, "combine %zu, %u threads: key %u", o, threads, k);
                }
                soren_result_destroy(&dense);
            }
        }
    }
    free(data);
}

static void kv32_map_u64(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    uint32_t v;
    memcpy(&v, r->data + 4, 4);
    uint64_t wide = v;
    soren_emit(e, r->data, 4, &wide);
}

/* 64-bit sums take the dense arrays' own adder: the tables' bytes too. */
Test(engine, dense_u64_sums_equal_the_tables)
{
    enum { RECORDS = 50000, KEYS = 300 };
    uint32_t count[KEYS], min[KEYS], sum[KEYS];
    uint8_t *data = kv32_data(RECORDS, KEYS, count, min, sum);
    soren_stage code = {.map = kv32_map_u64};
    soren_stage_spec spec = make_spec("dense", &code, SOREN_INPUT_FIXED, SOREN_TYPE_INDEX,
                                      SOREN_TYPE_U64, SOREN_COMBINE_SUM, SOREN_REDUCE_COMBINE);
    spec.record_size = 8;
    spec.key_count = 1000;
    soren_result dense;
    run_dense_and_hash(&spec, data, RECORDS * 8, 3, 800, KEYS, &dense);
    for (uint32_t k = 0; k < KEYS; k++) {
        uint64_t v;
        memcpy(&v, dense.values + k * 8, 8);
        cr_assert_eq((uint32_t)v, sum[k], "key %u", k);
    }
    soren_result_destroy(&dense);
    free(data);
}

/* The arrays are taken only for index keys with a combine, and only while
 * every thread's accumulators and flags stay within 64 MiB. */
Test(engine, dense_only_where_the_arrays_fit)
{
    soren_stage code = {.map = kv32_map};
    soren_stage_spec spec = make_spec("dense", &code, SOREN_INPUT_FIXED, SOREN_TYPE_INDEX,
                                      SOREN_TYPE_U32, SOREN_COMBINE_SUM, SOREN_REDUCE_COMBINE);
    spec.key_count = 768;
    cr_assert(soren_cpu_dense(&spec, 16));
    spec.key_count = 1u << 20; /* 5 MiB a thread */
    cr_assert(soren_cpu_dense(&spec, 12));
    cr_assert_not(soren_cpu_dense(&spec, 13));
    spec.key_count = 0;
    cr_assert_not(soren_cpu_dense(&spec, 1));
    spec.key_count = 768;
    spec.combine = SOREN_COMBINE_NONE;
    spec.reduce = SOREN_REDUCE_FUNCTION;
    cr_assert_not(soren_cpu_dense(&spec, 1));
    spec = make_spec("dense", &code, SOREN_INPUT_FIXED, SOREN_TYPE_U32, SOREN_TYPE_U32,
                     SOREN_COMBINE_SUM, SOREN_REDUCE_COMBINE);
    cr_assert_not(soren_cpu_dense(&spec, 1));
}
