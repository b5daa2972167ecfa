/* Inputs larger than a device memory budget, cut into chunks (--device-memory).
 * The planner (soren_input_chunks) on seeded random lines and fixed records
 * for many chunk sizes: the chunks tile each input exactly, begin on record
 * starts, reach chunk_bytes unless they end their input and go no further
 * than the first record start past it, count their bytes in the whole input
 * (base), and give the same records as the whole input.  Then soren-host end
 * to end: wordcount, grep, histogram, pageviewcount, stringmatch and
 * invertedindex over inputs four times the budget give the CPU engine's
 * output without a budget byte for byte, with --explain's "chunks" (checked
 * against share/explain.schema.json) and -v's line agreeing; first cuts that
 * fall inside a record, at a record's end, before a '\n' and inside a UTF-8
 * character; records longer than a chunk; budgets of a few bytes; and the
 * usage errors of --device-memory.  Each run on --device cpu, and as a GPU
 * twin on --device gpu (skipped, saying why, where no GPU is usable).
 * Inputs are seeded, 4 MB or $SOREN_TEST_MB megabytes if that is less. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datagen.h"
#include "engine/both.h"
#include "engine/chunks.h"
#include "gpu/device.h"
#include "io/input.h"
#include "jschema.h"
#include "testutil.h"

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
    dir = NULL;
}

TestSuite(stream, .init = setup, .fini = teardown, .timeout = 600);

static size_t test_bytes(void)
{
    size_t bytes = tu_test_bytes(4);
    return bytes < (4u << 20) ? bytes : 4u << 20;
}

static char *in_dir(const char *name)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
    return p;
}

static void require_gpu(void)
{
    char why[256] = "";
    if (soren_device_count(why, sizeof why) == 0)
        cr_skip_test("no usable GPU (%s): the GPU twins run from the GPU bundle on a GPU host",
                     why);
}

/* ---- The planner ---------------------------------------------------------- */

static soren_stage_spec lines_spec(void)
{
    return (soren_stage_spec){.job_name = "t", .input_format = SOREN_INPUT_LINES};
}

static soren_stage_spec fixed_spec(uint64_t record_size)
{
    return (soren_stage_spec){.job_name = "t", .input_format = SOREN_INPUT_FIXED,
                              .record_size = record_size};
}

static int is_record_start(const soren_stage_spec *spec, const soren_input *in, uint64_t at)
{
    if (at == 0 || at == in->size)
        return 1;
    if (spec->input_format == SOREN_INPUT_LINES)
        return in->data[at - 1] == '\n';
    return at % spec->record_size == 0;
}

/* Plans inputs with chunk_bytes and checks the plan against the rules of
 * soren_input_chunks; returns the chunk count. */
static size_t check_plan(const soren_stage_spec *spec, const soren_input *in, size_t n,
                         uint64_t chunk_bytes, const char *what)
{
    soren_input *chunks = NULL;
    size_t count = 12345;
    uint64_t largest = 12345;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_input_chunks(spec, in, n, chunk_bytes, &chunks, &count, &largest, &err),
                 SOREN_OK, "%s, chunk_bytes %llu: %s", what, (unsigned long long)chunk_bytes,
                 err.text);
    uint64_t c_bytes = chunk_bytes ? chunk_bytes : 1; /* "at least 1" */
    size_t k = 0;
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++) {
        const soren_input *whole = &in[i];
        size_t first = k;
        uint64_t off = 0;
        do {
            cr_assert_lt(k, count, "%s, chunk_bytes %llu: input %zu is covered only up to "
                         "byte %llu of %llu by %zu chunks", what,
                         (unsigned long long)chunk_bytes, i, (unsigned long long)off,
                         (unsigned long long)whole->size, count);
            const soren_input *c = &chunks[k];
            uint64_t end = off + c->size;
            cr_assert_eq(c->base, whole->base + off, "%s, chunk_bytes %llu: chunk %zu (input "
                         "%zu, byte %llu) has base %llu, want %llu", what,
                         (unsigned long long)chunk_bytes, k, i, (unsigned long long)off,
                         (unsigned long long)c->base,
                         (unsigned long long)(whole->base + off));
            cr_assert(c->data == (whole->data ? whole->data + off : NULL),
                      "%s, chunk_bytes %llu: chunk %zu does not continue where chunk %zu "
                      "ended (input %zu, byte %llu)", what, (unsigned long long)chunk_bytes, k,
                      k - 1, i, (unsigned long long)off);
            cr_assert_str_eq(c->path, whole->path, "%s: chunk %zu's path", what, k);
            cr_assert(c->file_dev == whole->file_dev && c->file_ino == whole->file_ino,
                      "%s: chunk %zu's file", what, k);
            cr_assert_eq(c->on_device, 0);
            cr_assert_leq(end, whole->size, "%s, chunk_bytes %llu: chunk %zu runs past its "
                          "input (%llu > %llu)", what, (unsigned long long)chunk_bytes, k,
                          (unsigned long long)end, (unsigned long long)whole->size);
            cr_assert(c->size > 0 || whole->size == 0, "%s, chunk_bytes %llu: chunk %zu is "
                      "empty in a non-empty input", what, (unsigned long long)chunk_bytes, k);
            cr_assert(is_record_start(spec, whole, off), "%s, chunk_bytes %llu: chunk %zu "
                      "begins at byte %llu, not on a record start", what,
                      (unsigned long long)chunk_bytes, k, (unsigned long long)off);
            if (end < whole->size) {
                /* Not the last of its input: at least chunk_bytes, and no
                 * further than the first record start at or after that. */
                cr_assert_geq(c->size, c_bytes, "%s, chunk_bytes %llu: chunk %zu has %llu "
                              "bytes and is not the last of its input", what,
                              (unsigned long long)chunk_bytes, k, (unsigned long long)c->size);
                for (uint64_t p = off + c_bytes; p < end; p++)
                    cr_assert(!is_record_start(spec, whole, p), "%s, chunk_bytes %llu: chunk "
                              "%zu [%llu, %llu) goes past the record start %llu", what,
                              (unsigned long long)chunk_bytes, k, (unsigned long long)off,
                              (unsigned long long)end, (unsigned long long)p);
            }
            if (c->size > max)
                max = c->size;
            off = end;
            k++;
        } while (off < whole->size);
        if (whole->size <= c_bytes)
            cr_assert_eq(k - first, 1, "%s, chunk_bytes %llu: input %zu of %llu bytes made %zu "
                         "chunks, want 1", what, (unsigned long long)chunk_bytes, i,
                         (unsigned long long)whole->size, k - first);

        /* The chunks' records are the whole input's, with the same offsets
         * and indexes. */
        soren_records all;
        soren_records_init_input(&all, spec, whole, 0, whole->size);
        soren_record want, got;
        size_t records = 0;
        for (size_t j = first; j < k; j++) {
            soren_records part;
            soren_records_init_input(&part, spec, &chunks[j], 0, chunks[j].size);
            while (soren_records_next(&part, &got)) {
                cr_assert(soren_records_next(&all, &want), "%s, chunk_bytes %llu: chunk %zu "
                          "has more records than its input", what,
                          (unsigned long long)chunk_bytes, j);
                cr_assert(got.data == want.data && got.size == want.size &&
                              got.offset == want.offset && got.index == want.index,
                          "%s, chunk_bytes %llu: record %zu (chunk %zu): offset %llu size %llu "
                          "index %llu, want offset %llu size %llu index %llu", what,
                          (unsigned long long)chunk_bytes, records, j,
                          (unsigned long long)got.offset, (unsigned long long)got.size,
                          (unsigned long long)got.index, (unsigned long long)want.offset,
                          (unsigned long long)want.size, (unsigned long long)want.index);
                records++;
            }
        }
        cr_assert(!soren_records_next(&all, &want), "%s, chunk_bytes %llu: input %zu's record "
                  "at offset %llu is in no chunk", what, (unsigned long long)chunk_bytes, i,
                  (unsigned long long)want.offset);
    }
    cr_assert_eq(k, count, "%s, chunk_bytes %llu: count %zu, the inputs have %zu chunks", what,
                 (unsigned long long)chunk_bytes, count, k);
    cr_assert_eq(largest, max, "%s, chunk_bytes %llu: largest %llu, want %llu", what,
                 (unsigned long long)chunk_bytes, (unsigned long long)largest,
                 (unsigned long long)max);
    cr_assert(count == 0 ? chunks == NULL : chunks != NULL);
    soren_input_chunks_free(chunks, count);
    return count;
}

/* Seeded lines: empty ones, short ones (some bytes of UTF-8), and, where
 * long_line is not 0, one line of long_line bytes at a random place (its
 * start in *long_at).  The last line ends in '\n' only with trailing_nl. */
static uint8_t *random_lines(uint64_t seed, size_t target, size_t long_line, int trailing_nl,
                             size_t *size, size_t *long_at)
{
    static const char alphabet[] = "abcdeth xyz\t\r.\xc3\xa9\xe6\x97\xa5";
    uint64_t rng = seed;
    uint8_t *buf = malloc(target + long_line + 64);
    cr_assert_not_null(buf);
    size_t n = 0, long_pos = long_line ? tu_rand_below(&rng, target / 2) : (size_t)-1;
    *long_at = (size_t)-1;
    while (n < target) {
        if (long_line && n >= long_pos && *long_at == (size_t)-1) {
            *long_at = n;
            for (size_t j = 0; j < long_line; j++)
                buf[n++] = (uint8_t)alphabet[tu_rand_below(&rng, sizeof alphabet - 1)];
        } else if (tu_rand_below(&rng, 10) < 3) {
            /* an empty line */
        } else {
            size_t len = 1 + tu_rand_below(&rng, 40);
            for (size_t j = 0; j < len; j++)
                buf[n++] = (uint8_t)alphabet[tu_rand_below(&rng, sizeof alphabet - 1)];
        }
        buf[n++] = '\n';
    }
    if (!trailing_nl) {
        memcpy(buf + n, "last line", 9);
        n += 9;
    }
    *size = n;
    return buf;
}

static const uint64_t chunk_sizes[] = {1, 2, 3, 7, 64, 1000};

Test(stream, planner_lines_tile_the_input)
{
    for (uint64_t seed = 1; seed <= 8; seed++) {
        int trailing_nl = seed % 2;
        size_t long_line = seed <= 4 ? 3000 : 0;
        size_t size = 0, long_at = 0;
        uint8_t *buf = random_lines(seed * 7919, 4000 + 500 * seed, long_line, trailing_nl,
                                    &size, &long_at);
        cr_assert_eq(buf[size - 1] == '\n', trailing_nl);
        soren_stage_spec spec = lines_spec();
        soren_input in;
        soren_input_wrap(&in, "lines", buf, size);
        /* as a mapped file's: its chunks read it (soren_input_pread) */
        in.file_dev = seed;
        in.file_ino = 1000 + seed;
        char what[128];
        snprintf(what, sizeof what, "seed %llu (%zu bytes, %s newline at the end%s)",
                 (unsigned long long)seed, size, trailing_nl ? "a" : "no",
                 long_line ? ", a line of 3000 bytes" : "");
        for (size_t j = 0; j < sizeof chunk_sizes / sizeof chunk_sizes[0]; j++) {
            uint64_t c = chunk_sizes[j];
            size_t count = check_plan(&spec, &in, 1, c, what);
            cr_assert_gt(count, 1, "%s: chunk_bytes %llu gave one chunk", what,
                         (unsigned long long)c);
            cr_assert_leq(count, (size + c - 1) / c);
        }
        for (uint64_t c = size - 1; c <= size + 1; c++)
            check_plan(&spec, &in, 1, c, what);
        cr_assert_eq(check_plan(&spec, &in, 1, size, what), 1);
        cr_assert_eq(check_plan(&spec, &in, 1, (uint64_t)1 << 40, what), 1);
        /* chunk_bytes 0 plans as 1. */
        cr_assert_eq(check_plan(&spec, &in, 1, 0, what), check_plan(&spec, &in, 1, 1, what));

        if (long_line) {
            /* The chunk that holds the long line is longer than chunk_bytes,
             * and ends right after it. */
            soren_input *chunks = NULL;
            size_t count = 0;
            uint64_t largest = 0;
            soren_error err;
            soren_error_clear(&err);
            cr_assert_eq(soren_input_chunks(&spec, &in, 1, 1000, &chunks, &count, &largest,
                                            &err), SOREN_OK, "%s", err.text);
            int found = 0;
            for (size_t k = 0; k < count; k++) {
                uint64_t off = chunks[k].base, end = off + chunks[k].size;
                if (off <= long_at && long_at < end) {
                    found = 1;
                    cr_expect_gt(chunks[k].size, 1000, "%s: the 3000-byte line at %zu is in "
                                 "chunk %zu of %llu bytes", what, long_at, k,
                                 (unsigned long long)chunks[k].size);
                    cr_expect_eq(end, long_at + long_line + 1, "%s: the chunk of the "
                                 "3000-byte line at %zu ends at %llu", what, long_at,
                                 (unsigned long long)end);
                }
            }
            cr_assert(found, "%s: no chunk holds byte %zu", what, long_at);
            cr_expect_geq(largest, 3001, "%s: largest %llu", what, (unsigned long long)largest);
            soren_input_chunks_free(chunks, count);
        }
        soren_input_close(&in);
        free(buf);
    }
}

Test(stream, planner_small_line_cases)
{
    static const char *const cases[] = {"\n", "\n\n\n", "abc", "a\nb", "a\nb\n", "\n\nxyz",
                                        "abcdef\n\n\ng", "\xc3\xa9\xc3\xa9\n\xe6\x97\xa5"};
    soren_stage_spec spec = lines_spec();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        soren_input in;
        soren_input_wrap(&in, "small", cases[i], strlen(cases[i]));
        char what[64];
        snprintf(what, sizeof what, "case %zu", i);
        for (uint64_t c = 0; c <= 12; c++)
            check_plan(&spec, &in, 1, c, what);
        soren_input_close(&in);
    }
    /* Every line its own chunk at chunk_bytes 1, an empty one too. */
    soren_input in;
    soren_input_wrap(&in, "small", "\n\nab\n", 5);
    soren_input *chunks = NULL;
    size_t count = 0;
    uint64_t largest = 0;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_input_chunks(&spec, &in, 1, 1, &chunks, &count, &largest, &err), SOREN_OK);
    cr_assert_eq(count, 3, "\"\\n\\nab\\n\" at chunk_bytes 1: %zu chunks, want 3", count);
    cr_expect_eq(chunks[0].size, 1);
    cr_expect_eq(chunks[1].size, 1);
    cr_expect_eq(chunks[2].size, 3);
    cr_expect_eq(chunks[2].base, 2);
    cr_expect_eq(largest, 3);
    soren_input_chunks_free(chunks, count);
    soren_input_close(&in);
}

Test(stream, planner_line_longer_than_a_chunk_at_the_start)
{
    /* A 3000-byte line first: chunk 0 is that line and its '\n', no more. */
    size_t size = 3001 + 2000;
    uint8_t *buf = malloc(size);
    cr_assert_not_null(buf);
    memset(buf, 'x', 3000);
    buf[3000] = '\n';
    for (size_t i = 3001; i < size; i++)
        buf[i] = i % 10 == 0 ? '\n' : 'y';
    soren_stage_spec spec = lines_spec();
    soren_input in;
    soren_input_wrap(&in, "long", buf, size);
    check_plan(&spec, &in, 1, 1000, "a long first line");
    soren_input *chunks = NULL;
    size_t count = 0;
    uint64_t largest = 0;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_input_chunks(&spec, &in, 1, 1000, &chunks, &count, &largest, &err),
                 SOREN_OK);
    cr_assert_geq(count, 2);
    cr_expect_eq(chunks[0].size, 3001, "the long line's chunk has %llu bytes, want 3001",
                 (unsigned long long)chunks[0].size);
    cr_expect_eq(chunks[1].base, 3001);
    cr_expect_eq(largest, 3001);
    soren_input_chunks_free(chunks, count);
    soren_input_close(&in);
    free(buf);
}

Test(stream, planner_fixed_records_of_three)
{
    /* Random bytes, '\n' among them: fixed records do not care. */
    size_t size = 3 * 3001;
    uint8_t *buf = malloc(size);
    cr_assert_not_null(buf);
    uint64_t rng = 77;
    for (size_t i = 0; i < size; i++)
        buf[i] = (uint8_t)(tu_rand_below(&rng, 4) == 0 ? '\n' : tu_rand(&rng));
    soren_stage_spec spec = fixed_spec(3);
    soren_input in;
    soren_input_wrap(&in, "pixels", buf, size);
    static const uint64_t sizes[] = {1000, 1, 2, 4, 5, 3, 999, 1001, 9003, 9004};
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        uint64_t c = sizes[j];
        check_plan(&spec, &in, 1, c, "3-byte records");
        soren_input *chunks = NULL;
        size_t count = 0;
        uint64_t largest = 0;
        soren_error err;
        soren_error_clear(&err);
        cr_assert_eq(soren_input_chunks(&spec, &in, 1, c, &chunks, &count, &largest, &err),
                     SOREN_OK);
        uint64_t per = (c + 2) / 3 * 3; /* chunk_bytes rounded up to whole records */
        cr_assert_eq(count, (size + per - 1) / per, "chunk_bytes %llu: %zu chunks",
                     (unsigned long long)c, count);
        for (size_t k = 0; k < count; k++) {
            cr_assert_eq(chunks[k].base % 3, 0, "chunk_bytes %llu: chunk %zu starts at %llu",
                         (unsigned long long)c, k, (unsigned long long)chunks[k].base);
            cr_assert_eq(chunks[k].size % 3, 0, "chunk_bytes %llu: chunk %zu has %llu bytes",
                         (unsigned long long)c, k, (unsigned long long)chunks[k].size);
            if (k + 1 < count)
                cr_assert_eq(chunks[k].size, per, "chunk_bytes %llu: chunk %zu has %llu bytes",
                             (unsigned long long)c, k, (unsigned long long)chunks[k].size);
        }
        soren_input_chunks_free(chunks, count);
    }
    soren_input_close(&in);
    free(buf);
}

Test(stream, planner_empty_input_is_one_empty_chunk)
{
    soren_stage_spec specs[] = {lines_spec(), fixed_spec(3)};
    for (size_t s = 0; s < 2; s++) {
        soren_input in;
        soren_input_wrap(&in, "empty", NULL, 0);
        in.base = 42;
        soren_input *chunks = NULL;
        size_t count = 0;
        uint64_t largest = 99;
        soren_error err;
        soren_error_clear(&err);
        cr_assert_eq(soren_input_chunks(&specs[s], &in, 1, 1000, &chunks, &count, &largest,
                                        &err), SOREN_OK);
        cr_assert_eq(count, 1, "an empty input made %zu chunks", count);
        cr_expect_eq(chunks[0].size, 0);
        cr_expect_null(chunks[0].data);
        cr_expect_eq(chunks[0].base, 42);
        cr_expect_eq(largest, 0);
        soren_input_chunks_free(chunks, count);
        check_plan(&specs[s], &in, 1, 1, "an empty input");
        soren_input_close(&in);
    }
    /* No inputs: no chunks. */
    soren_stage_spec spec = lines_spec();
    soren_input *chunks = (soren_input *)&spec;
    size_t count = 7;
    uint64_t largest = 7;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_input_chunks(&spec, NULL, 0, 1000, &chunks, &count, &largest, &err),
                 SOREN_OK);
    cr_expect_null(chunks);
    cr_expect_eq(count, 0);
    cr_expect_eq(largest, 0);
    soren_input_chunks_free(chunks, count);
}

Test(stream, planner_several_inputs_keep_their_bases)
{
    size_t na = 0, nc = 0, at = 0;
    uint8_t *a = random_lines(101, 5000, 0, 1, &na, &at);
    uint8_t *c = random_lines(103, 7000, 2000, 0, &nc, &at);
    soren_stage_spec spec = lines_spec();
    soren_input in[4];
    soren_input_wrap(&in[0], "a", a, na);
    soren_input_wrap(&in[1], "b", NULL, 0);
    soren_input_wrap(&in[2], "c", c, nc);
    soren_input_wrap(&in[3], "d", "x", 1);
    const uint64_t base = ((uint64_t)1 << 33) + 5; /* a slice of a large input */
    in[2].base = base;
    for (size_t j = 0; j < sizeof chunk_sizes / sizeof chunk_sizes[0]; j++) {
        uint64_t cb = chunk_sizes[j];
        check_plan(&spec, in, 4, cb, "four inputs");
        soren_input *chunks = NULL;
        size_t count = 0;
        uint64_t largest = 0;
        soren_error err;
        soren_error_clear(&err);
        cr_assert_eq(soren_input_chunks(&spec, in, 4, cb, &chunks, &count, &largest, &err),
                     SOREN_OK);
        /* Input c's chunks count from its base, in order, with its path. */
        size_t seen = 0;
        uint64_t next = base;
        for (size_t k = 0; k < count; k++) {
            if (strcmp(chunks[k].path, "c") != 0)
                continue;
            cr_assert_eq(chunks[k].base, next, "chunk_bytes %llu: chunk %zu of c has base "
                         "%llu, want %llu", (unsigned long long)cb, k,
                         (unsigned long long)chunks[k].base, (unsigned long long)next);
            next += chunks[k].size;
            seen++;
        }
        cr_assert_gt(seen, 1, "chunk_bytes %llu: input c made %zu chunks", (unsigned long long)cb,
                     seen);
        cr_assert_eq(next, base + nc);
        cr_assert_str_eq(chunks[count - 1].path, "d");
        cr_assert_eq(chunks[count - 1].base, 0);
        soren_input_chunks_free(chunks, count);
    }
    check_plan(&spec, in, 4, 1 << 20, "four small inputs");
    /* Fixed records with a base of whole records. */
    soren_stage_spec fixed = fixed_spec(3);
    uint8_t rec[300];
    for (size_t i = 0; i < sizeof rec; i++)
        rec[i] = (uint8_t)(i * 7);
    soren_input f[2];
    soren_input_wrap(&f[0], "p", rec, 150);
    soren_input_wrap(&f[1], "q", rec + 150, 150);
    f[1].base = 3000000;
    for (uint64_t cb = 1; cb <= 40; cb += 13)
        check_plan(&fixed, f, 2, cb, "two fixed inputs");
    for (size_t i = 0; i < 4; i++)
        soren_input_close(&in[i]);
    soren_input_close(&f[0]);
    soren_input_close(&f[1]);
    free(a);
    free(c);
}

/* ---- soren-host end to end ------------------------------------------------ */

/* The --explain object: the last line of stderr that starts with '{'. */
static json_t *explain_of(const char *err, const char *what)
{
    const char *brace = NULL;
    for (const char *p = err; (p = strchr(p, '{')) != NULL; p++)
        if (p == err || p[-1] == '\n')
            brace = p;
    cr_assert_not_null(brace, "%s: no --explain output in: %s", what, err);
    json_error_t why;
    json_t *x = json_loads(brace, JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &why);
    cr_assert_not_null(x, "%s: --explain output is not JSON (%s): %s", what, why.text, brace);
    json_t *schema = tu_explain_schema();
    char reason[512];
    cr_assert(js_validate(schema, x, reason, sizeof reason), "%s: --explain: %s", what, reason);
    json_decref(schema);
    return x;
}

static uint64_t chunk_field(const json_t *x, const char *key, const char *what)
{
    const json_t *v = json_object_get(json_object_get(x, "chunks"), key);
    cr_assert(json_is_integer(v), "%s: chunks.%s is not an integer", what, key);
    return (uint64_t)json_integer_value(v);
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "stat %s", path);
    return (uint64_t)st.st_size;
}

/* "'a' 'b'" for a NULL-terminated list of paths (static buffer). */
static const char *quoted(const char *const *paths)
{
    static char buf[8192];
    buf[0] = '\0';
    for (; *paths; paths++) {
        strcat(buf, " '");
        strcat(buf, *paths);
        strcat(buf, "'");
    }
    return buf;
}

static void expect_same_file(const char *got_path, const char *want_path, const char *what)
{
    size_t got_n = 0, want_n = 0;
    char *got = tu_read(got_path, &got_n);
    char *want = tu_read(want_path, &want_n);
    if (got_n != want_n || memcmp(got, want, got_n) != 0) {
        char *diff = NULL;
        tu_runf(&diff, NULL, "diff '%s' '%s' | head -8", want_path, got_path);
        cr_assert_fail("%s: output differs from the CPU engine's without a budget (%zu vs %zu "
                       "bytes):\n%s", what, got_n, want_n, diff);
    }
    free(got);
    free(want);
}

/* Runs job over inputs on the CPU engine without a budget (the reference,
 * which must have pairs), then on device with --device-memory budget,
 * --explain and -v: the same bytes, the report valid against the schema
 * with "chunks" for that budget (when the input is larger than a quarter of
 * it; none otherwise), and -v's line agreeing.  Returns the report. */
static json_t *expect_streamed(const char *job, const char *args, const char *const *inputs,
                               uint64_t budget, const char *device, const char *what)
{
    char *ref = in_dir("ref.tsv"), *out = in_dir("got.tsv");
    char *err = NULL;
    int rc = tu_runf(NULL, &err, "'%s' run %s %s --device cpu -o '%s'%s", tu_host(), job, args,
                     ref, quoted(inputs));
    cr_assert_eq(rc, 0, "%s: the reference run: exit %d: %s", what, rc, err);
    free(err);
    size_t ref_n = 0;
    char *ref_text = tu_read(ref, &ref_n);
    cr_assert(ref_n > 0 && strchr(ref_text, '\n'), "%s: the reference output is empty", what);
    free(ref_text);

    rc = tu_runf(NULL, &err, "'%s' run %s %s --device %s --device-memory %llu --explain -v "
                 "-o '%s'%s", tu_host(), job, args, device, (unsigned long long)budget, out,
                 quoted(inputs));
    cr_assert_eq(rc, 0, "%s: --device %s --device-memory %llu: exit %d: %s", what, device,
                 (unsigned long long)budget, rc, err);
    json_t *x = explain_of(err, what);
    cr_assert_str_eq(json_string_value(json_object_get(x, "device")), device,
                     "%s: the run's device", what);

    uint64_t total = 0, biggest = 0;
    for (const char *const *p = inputs; *p; p++) {
        uint64_t n = file_size(*p);
        total += n;
        if (n > biggest)
            biggest = n;
    }
    uint64_t chunk = budget / 4 ? budget / 4 : 1;
    const char *line = strstr(err, "soren-host: input: ");
    if (biggest <= chunk) {
        cr_assert_null(json_object_get(x, "chunks"), "%s: \"chunks\" in --explain though the "
                       "input (%llu bytes) fits in a chunk of %llu", what,
                       (unsigned long long)biggest, (unsigned long long)chunk);
        cr_assert_null(line, "%s: -v says %s though nothing was cut", what, line);
    } else {
        cr_assert_not_null(json_object_get(x, "chunks"), "%s: no \"chunks\" in --explain for "
                           "%llu bytes of input and a budget of %llu", what,
                           (unsigned long long)total, (unsigned long long)budget);
        uint64_t count = chunk_field(x, "count", what), largest = chunk_field(x, "largest", what);
        cr_assert_eq(chunk_field(x, "budget", what), budget, "%s: chunks.budget", what);
        cr_assert_eq(chunk_field(x, "chunk_bytes", what), chunk, "%s: chunks.chunk_bytes", what);
        cr_assert_geq(count, 1, "%s", what);
        cr_assert_leq(largest, biggest, "%s: chunks.largest %llu is more than an input",
                      what, (unsigned long long)largest);
        cr_assert_geq(largest, chunk, "%s: chunks.largest %llu, chunk_bytes %llu", what,
                      (unsigned long long)largest, (unsigned long long)chunk);
        cr_assert_not_null(line, "%s: no 'soren-host: input:' line with -v: %s", what, err);
        char want[256];
        snprintf(want, sizeof want, "soren-host: input: %llu chunks of about %llu bytes (the "
                 "largest %llu) for a device memory budget of %llu bytes\n",
                 (unsigned long long)count, (unsigned long long)chunk,
                 (unsigned long long)largest, (unsigned long long)budget);
        cr_assert(strncmp(line, want, strlen(want)) == 0, "%s: -v says\n%.*s\nwant\n%s", what,
                  (int)strcspn(line, "\n"), line, want);
    }
    free(err);
    char what2[512];
    snprintf(what2, sizeof what2, "%s (--device %s --device-memory %llu)", what, device,
             (unsigned long long)budget);
    expect_same_file(out, ref, what2);
    free(ref);
    free(out);
    return x;
}

/* expect_streamed where the budget cuts the input into more than one chunk
 * and no more than the input's bytes over chunk_bytes, rounded up. */
static void expect_cut(const char *job, const char *args, const char *const *inputs,
                       uint64_t budget, const char *device, const char *what)
{
    json_t *x = expect_streamed(job, args, inputs, budget, device, what);
    uint64_t total = 0;
    for (const char *const *p = inputs; *p; p++)
        total += file_size(*p);
    uint64_t chunk = budget / 4, count = chunk_field(x, "count", what);
    cr_assert_gt(count, 1, "%s: %llu bytes, budget %llu: %llu chunk", what,
                 (unsigned long long)total, (unsigned long long)budget,
                 (unsigned long long)count);
    cr_assert_leq(count, (total + chunk - 1) / chunk + 1, "%s: %llu chunks of %llu for %llu "
                  "bytes", what, (unsigned long long)count, (unsigned long long)chunk,
                  (unsigned long long)total);
    json_decref(x);
}

/* Runs soren-gen ARGS -o dir/name; returns the path (malloc'd). */
static char *gen(const char *name, const char *args)
{
    char *path = in_dir(name);
    tu_gen(path, args);
    return path;
}

/* Declares NAME_cpu and NAME_gpu running body(device). */
#define TWINS(name)                                                                            \
    Test(stream, name##_cpu) { name("cpu"); }                                                  \
    Test(stream, name##_gpu)                                                                   \
    {                                                                                          \
        require_gpu();                                                                         \
        name("gpu");                                                                           \
    }

static void wordcount(const char *device)
{
    char *text = in_dir("text");
    size_t bytes = test_bytes();
    dg_text(text, bytes, 1001);
    const char *inputs[] = {text, NULL};
    expect_cut("wordcount", "", inputs, file_size(text) / 4, device, "wordcount");
    free(text);
}
TWINS(wordcount)

static void grep_utf8(const char *device)
{
    char *text = in_dir("text");
    dg_text(text, test_bytes(), 1002);
    const char *inputs[] = {text, NULL};
    expect_cut("grep", "--param 'pattern=\xc3\xa9|th'", inputs, file_size(text) / 4, device,
               "grep \xc3\xa9|th");
    free(text);
}
TWINS(grep_utf8)

static void histogram(const char *device)
{
    char *pixels = in_dir("pixels.rgb");
    dg_rgb(pixels, test_bytes() / 3, 1003);
    uint64_t size = file_size(pixels), budget = size / 4;
    while ((budget / 4) % 3 == 0)
        budget += 4;
    cr_assert_neq((budget / 4) % 3, 0);
    const char *inputs[] = {pixels, NULL};
    json_t *x = expect_streamed("histogram", "", inputs, budget, device, "histogram");
    /* Chunks of whole pixels: chunk_bytes rounded up to a multiple of 3. */
    uint64_t per = (budget / 4 + 2) / 3 * 3;
    cr_assert_eq(chunk_field(x, "count", "histogram"), (size + per - 1) / per);
    cr_assert_eq(chunk_field(x, "largest", "histogram"), per);
    json_decref(x);
    free(pixels);
}
TWINS(histogram)

static void pageviewcount(const char *device)
{
    char args[128];
    snprintf(args, sizeof args, "weblog --size %zu --urls 20000 --ips 5000 --seed 1004",
             test_bytes());
    char *log = gen("log", args);
    const char *inputs[] = {log, NULL};
    expect_cut("pageviewcount", "", inputs, file_size(log) / 4, device, "pageviewcount");
    free(log);
}
TWINS(pageviewcount)

static void stringmatch(const char *device)
{
    char *text = in_dir("text"), *more = in_dir("more");
    dg_text(text, test_bytes(), 1005);
    dg_text(more, test_bytes() / 2, 1006);
    const char *one[] = {text, NULL};
    expect_cut("stringmatch", "--param pattern=th", one, file_size(text) / 4, device,
               "stringmatch");
    /* Two inputs: each one's chunks count from its place in the whole. */
    const char *two[] = {text, more, NULL};
    expect_cut("stringmatch", "--param pattern=th", two, file_size(text) / 4, device,
               "stringmatch over two inputs");
    free(text);
    free(more);
}
TWINS(stringmatch)

static void invertedindex(const char *device)
{
    char args[128];
    snprintf(args, sizeof args, "html --size %zu --urls 3000 --seed 1007", test_bytes());
    char *html = gen("pages.html", args);
    const char *inputs[] = {html, NULL};
    expect_cut("invertedindex", "", inputs, file_size(html) / 4, device, "invertedindex");
    free(html);
}
TWINS(invertedindex)

/* ---- Where the first cut falls -------------------------------------------- */

enum { CUT_INSIDE, CUT_AT_END, CUT_BEFORE_NEWLINE, CUT_IN_UTF8, CUT_KINDS };
static const char *const cut_names[] = {"inside a record", "at a record's end",
                                        "right before a '\\n'", "inside a UTF-8 character"};

static int cut_kind(const uint8_t *t, uint64_t c)
{
    if (t[c - 1] == '\n')
        return CUT_AT_END;
    if (t[c] == '\n')
        return CUT_BEFORE_NEWLINE;
    if (t[c] >= 0x80 && t[c] <= 0xBF)
        return CUT_IN_UTF8;
    return CUT_INSIDE;
}

static void boundaries(const char *device)
{
    char *text = in_dir("text");
    size_t bytes = test_bytes() / 4;
    dg_text(text, bytes, 1008);
    size_t n = 0;
    uint8_t *t = (uint8_t *)tu_read(text, &n);
    const char *inputs[] = {text, NULL};
    /* For each kind, the first chunk size C from a few starting points
     * where byte C (the first nominal cut) is of that kind. */
    const uint64_t starts[] = {n / 64, n / 16, n / 5};
    for (int kind = 0; kind < CUT_KINDS; kind++) {
        for (size_t s = 0; s < 3; s++) {
            uint64_t c = starts[s];
            while (c < n / 2 && cut_kind(t, c) != kind)
                c++;
            cr_assert_lt(c, n / 2, "no chunk size from %llu cuts %s: the test data has "
                         "no such place", (unsigned long long)starts[s], cut_names[kind]);
            char what[128];
            snprintf(what, sizeof what, "wordcount, chunks of %llu bytes, the first cut %s",
                     (unsigned long long)c, cut_names[kind]);
            json_t *x = expect_streamed("wordcount", "", inputs, 4 * c, device, what);
            cr_assert_eq(chunk_field(x, "chunk_bytes", what), c);
            cr_assert_gt(chunk_field(x, "count", what), 1, "%s", what);
            json_decref(x);
        }
    }
    free(t);
    free(text);
}
TWINS(boundaries)

/* ---- Records longer than a chunk ------------------------------------------ */

static void long_record(const char *device)
{
    /* One line of about 1 MB: one chunk, larger than chunk_bytes. */
    char *line = in_dir("line");
    dg_text_shape(line, (size_t)1 << 20, DG_NO_NEWLINE, 1009);
    uint64_t n = file_size(line);
    const char *one[] = {line, NULL};
    json_t *x = expect_streamed("wordcount", "", one, 64 << 10, device, "one line of 1 MB");
    cr_assert_eq(chunk_field(x, "chunk_bytes", "one line"), 16 << 10);
    cr_assert_eq(chunk_field(x, "count", "one line"), 1);
    cr_assert_eq(chunk_field(x, "largest", "one line"), n, "the line's chunk holds %llu bytes",
                 (unsigned long long)n);
    cr_assert_gt(n, 16 << 10);
    json_decref(x);

    /* Text, a line of about 200 KB, text: many chunks, the line's the
     * largest. */
    char *part = in_dir("part"), *mixed = in_dir("mixed");
    FILE *f = fopen(mixed, "wb");
    cr_assert_not_null(f);
    uint64_t longest = 0;
    for (int i = 0; i < 3; i++) {
        if (i == 1)
            dg_text_shape(part, 200 << 10, DG_NO_NEWLINE, 1010);
        else
            dg_text(part, 300 << 10, 1011 + (uint64_t)i);
        size_t pn = 0;
        char *p = tu_read(part, &pn);
        cr_assert_eq(fwrite(p, 1, pn, f), pn);
        if (i < 2)
            fputc('\n', f);
        if (i == 1)
            longest = pn + 1;
        free(p);
    }
    fclose(f);
    const char *inputs[] = {mixed, NULL};
    x = expect_streamed("wordcount", "", inputs, 64 << 10, device,
                        "text with a line of 200 KB");
    cr_assert_gt(chunk_field(x, "count", "mixed"), 10);
    cr_assert_geq(chunk_field(x, "largest", "mixed"), longest, "chunks.largest %llu, the long "
                  "line has %llu bytes", (unsigned long long)chunk_field(x, "largest", "mixed"),
                  (unsigned long long)longest);
    cr_assert_gt(chunk_field(x, "largest", "mixed"), chunk_field(x, "chunk_bytes", "mixed"));
    json_decref(x);
    free(part);
    free(mixed);
    free(line);
}
TWINS(long_record)

/* ---- Budgets of a few bytes, and budgets larger than the input ------------ */

static void tiny_budgets(const char *device)
{
    char *text = in_dir("text");
    dg_text(text, 16 << 10, 1014);
    size_t n = 0;
    char *t = tu_read(text, &n);
    uint64_t lines = n && t[n - 1] != '\n';
    for (size_t i = 0; i < n; i++)
        lines += t[i] == '\n';
    free(t);
    const char *inputs[] = {text, NULL};
    /* Budgets under 8 give chunks of one byte: every line its own chunk. */
    static const uint64_t tiny[] = {1, 3, 4, 7};
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "wordcount, a budget of %llu bytes",
                 (unsigned long long)tiny[i]);
        json_t *x = expect_streamed("wordcount", "", inputs, tiny[i], device, what);
        cr_assert_eq(chunk_field(x, "chunk_bytes", what), 1);
        cr_assert_eq(chunk_field(x, "count", what), lines, "%s: %llu chunks for %llu lines",
                     what, (unsigned long long)chunk_field(x, "count", what),
                     (unsigned long long)lines);
        json_decref(x);
    }
    json_decref(expect_streamed("wordcount", "", inputs, 28, device, "a budget of 28 bytes"));
    json_decref(expect_streamed("stringmatch", "--param pattern=e", inputs, 8, device,
                                "stringmatch, a budget of 8 bytes"));

    /* Pixels at a budget of 4: a chunk a pixel. */
    char *pixels = in_dir("pixels.rgb");
    dg_rgb(pixels, 3000, 1015);
    const char *rgb[] = {pixels, NULL};
    json_t *x = expect_streamed("histogram", "", rgb, 4, device, "histogram, a budget of 4");
    cr_assert_eq(chunk_field(x, "count", "histogram"), 3000);
    cr_assert_eq(chunk_field(x, "largest", "histogram"), 3);
    json_decref(x);

    /* A budget whose quarter holds the input cuts nothing: no "chunks". */
    json_decref(expect_streamed("wordcount", "", inputs, 4 * file_size(text), device,
                                "a budget of 4x the input"));
    json_decref(expect_streamed("wordcount", "", inputs, (uint64_t)1 << 40, device,
                                "a budget of 1 TB"));
    free(pixels);
    free(text);
}
TWINS(tiny_budgets)

/* ---- The table under a budget ---------------------------------------------- */

/* Runs job over input on the CPU engine (the reference), then with flags,
 * --explain and -v, and expects the same output: returns the second run's
 * report, and its standard error in *log (the caller frees both). */
static json_t *run_beside_cpu(const char *job, const char *args, const char *input,
                              const char *flags, const char *what, char **log)
{
    char *ref = in_dir("ref.tsv"), *out = in_dir("got.tsv"), *err = NULL;
    int rc = tu_runf(NULL, &err, "'%s' run %s %s --device cpu -o '%s' '%s'", tu_host(), job,
                     args, ref, input);
    cr_assert_eq(rc, 0, "%s: the reference run: exit %d: %s", what, rc, err);
    free(err);
    rc = tu_runf(NULL, log, "'%s' run %s %s %s --explain -v -o '%s' '%s'", tu_host(), job, args,
                 flags, out, input);
    cr_assert_eq(rc, 0, "%s: exit %d: %s", what, rc, *log);
    expect_same_file(out, ref, what);
    free(ref);
    free(out);
    return explain_of(*log, what);
}

/* On the GPU a table that would grow, with its key space, past half the
 * budget folds the key space a part at a time, a pass over the input each:
 * a pass whose part does not fit begins again on half of it, and the parts'
 * ordered pairs are merged in host memory at the end.  The same output
 * as the CPU engine, and --explain and -v say how many parts.  The table
 * starts tiny so that it grows, then narrows, many times. */
static void expect_key_parts(const char *job, const char *args, const char *input,
                             uint64_t budget, const char *what)
{
    char flags[128], *err = NULL;
    snprintf(flags, sizeof flags, "--device gpu --device-memory %llu --table-slots 256 "
             "--key-bytes 4K", (unsigned long long)budget);
    json_t *x = run_beside_cpu(job, args, input, flags, what, &err);
    json_int_t parts = json_integer_value(json_object_get(x, "key_parts"));
    json_int_t narrowings = json_integer_value(json_object_get(x, "narrowings"));
    cr_expect_geq(parts, 2, "%s: %lld parts of the key space under a budget of %llu", what,
                  (long long)parts, (unsigned long long)budget);
    cr_expect_geq(narrowings, 1, "%s: %lld parts, but no pass began again on half its part",
                  what, (long long)parts);
    cr_expect(strstr(err, "the table folded the key space in") != NULL,
              "%s: -v does not say it: %s", what, err);
    json_decref(x);
    free(err);
}

Test(stream, table_folds_key_space_in_parts_gpu)
{
    require_gpu();
    char *text = gen("text", "text --size 4M --vocab 300000 --seed 1016");
    char *log = gen("log", "weblog --size 4M --urls 200000 --ips 50000 --seed 1017");
    const uint64_t budget = 2 << 20;
    expect_key_parts("wordcount", "--engine hash", text, budget, "wordcount, hash");
    expect_key_parts("wordcount", "--engine block", text, budget, "wordcount, block");
    expect_key_parts("wordcount", "--top 20", text, budget, "wordcount --top 20 (auto)");
    expect_key_parts("pageviewcount", "", log, budget, "pageviewcount (two stages)");
    /* kvscale reduces after its combine: each part's keys are whole, and
     * the GPU reduces them part by part. */
    char *kv = in_dir("kv"), kvscale[4096];
    dg_kv32(kv, (4u << 20) / 8, 200000, 1018);
    snprintf(kvscale, sizeof kvscale, "%s/stage/test-plugins/kvscale.json", tu_builddir());
    expect_key_parts(kvscale, "", kv, budget, "kvscale (a combine, then a reduce)");
    free(kv);
    free(text);
    free(log);
}

/* Without a budget, an input larger than 256 MiB still goes to the GPU in
 * chunks of at most 256 MiB, each copied up while the map reads the one
 * before: the same output as the CPU engine. */
Test(stream, large_input_goes_in_chunks_without_a_budget_gpu)
{
    require_gpu();
    char *text = gen("text", "text --size 300M --vocab 300000 --seed 1021");
    char *err = NULL;
    json_t *x = run_beside_cpu("wordcount", "", text, "--device gpu", "wordcount, 300 MiB", &err);
    uint64_t count = chunk_field(x, "count", "wordcount, 300 MiB");
    uint64_t chunk = chunk_field(x, "chunk_bytes", "wordcount, 300 MiB");
    cr_expect_eq(chunk, 256u << 20, "chunks of %llu bytes", (unsigned long long)chunk);
    cr_expect_eq(count, 2, "%llu chunks of 300 MiB", (unsigned long long)count);
    json_decref(x);
    free(err);
    free(text);
}

/* ---- Co-processing: --device both ----------------------------------------- */

/* Plans input under --device both with a device memory budget and checks
 * that the pieces tile it on record starts, counting from its base, each
 * but the last reaching `piece` bytes and ending at the first line start
 * past it; returns the piece count. */
static size_t check_both_plan(const soren_input *in, uint64_t budget, uint64_t piece,
                              const char *what)
{
    soren_stage_spec spec = lines_spec();
    soren_run_options o;
    soren_run_options_init(&o);
    o.device = SOREN_DEVICE_BOTH;
    o.device_memory = budget;
    soren_input *pieces = NULL;
    size_t count = 0;
    soren_chunking c;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren__plan_chunks(&spec, &o, SOREN_DEVICE_GPU, in, 1, &pieces, &count, &c,
                                    &err), SOREN_OK, "%s: %s", what, err.text);
    cr_assert_not_null(pieces, "%s: the input was not cut", what);
    cr_expect_eq(c.chunk_bytes, piece, "%s: pieces of %llu bytes, want %llu", what,
                 (unsigned long long)c.chunk_bytes, (unsigned long long)piece);
    uint64_t off = 0;
    for (size_t k = 0; k < count; k++) {
        cr_assert(pieces[k].data == in->data + off && pieces[k].base == off,
                  "%s: piece %zu does not begin at byte %llu", what, k,
                  (unsigned long long)off);
        cr_assert(is_record_start(&spec, in, off), "%s: piece %zu begins inside a line", what,
                  k);
        off += pieces[k].size;
        if (k + 1 < count)
            cr_expect_eq(off, soren_record_boundary(&spec, in, off - pieces[k].size + piece),
                         "%s: piece %zu ends at byte %llu", what, k, (unsigned long long)off);
    }
    cr_assert_eq(off, in->size, "%s: the pieces cover %llu of %llu bytes", what,
                 (unsigned long long)off, (unsigned long long)in->size);
    soren_input_chunks_free(pieces, count);
    return count;
}

/* --device both: BOTH_PIECES pieces, or pieces of the GPU's chunk where
 * that is smaller, or of BOTH_PIECE_MIN bytes where a piece would be
 * smaller. */
Test(stream, both_plan_cuts_pieces_for_the_engines_to_take)
{
    size_t size = 0, at = 0;
    uint8_t *buf = random_lines(211, 24u << 20, 0, 1, &size, &at);
    soren_input in;
    soren_input_wrap(&in, "text", buf, size);
    const uint64_t sixteenth = (size + BOTH_PIECES - 1) / BOTH_PIECES;
    size_t n = check_both_plan(&in, UINT64_C(4) << 30, sixteenth, "24 MiB");
    cr_expect(n == BOTH_PIECES || n == BOTH_PIECES - 1, "24 MiB: %zu pieces", n);
    /* a budget of 4 MiB: chunks of 1 MiB */
    check_both_plan(&in, 4u << 20, 1u << 20, "24 MiB under a budget of 4 MiB");
    in.size = soren_record_boundary(&(soren_stage_spec){.input_format = SOREN_INPUT_LINES}, &in,
                                    3u << 20);
    n = check_both_plan(&in, UINT64_C(4) << 30, BOTH_PIECE_MIN, "3 MiB");
    cr_expect(n == 3 || n == 4, "3 MiB: %zu pieces of at least 1 MiB", n);
    free(buf);
}

/* The GPU asks for piece i at now_ms, its upload and compute times so far
 * those given, with no fold to pay for. */
static int gpu_asks(soren_both_queue *q, size_t i, double now_ms, double upload_ms,
                    double compute_ms)
{
    soren_both_gpu_state g = {now_ms, upload_ms, compute_ms, 0};
    return soren__both_gpu_take(q, i, &g);
}

static void queue_pieces(soren_input *pieces, size_t count, uint64_t size)
{
    for (size_t k = 0; k < count; k++)
        soren_input_wrap(&pieces[k], "piece", NULL, size);
}

/* Without the CPU engine asking, the GPU takes every piece; a piece is the
 * GPU's again when asked again; once the GPU is done the CPU engine gets
 * nothing. */
Test(stream, both_queue_gpu_takes_what_nobody_took)
{
    soren_input pieces[12];
    queue_pieces(pieces, 12, 100);
    soren_both_queue q;
    soren__both_queue_init(&q, pieces, 12);
    for (size_t i = 1; i < 12; i++)
        cr_expect(gpu_asks(&q, i, 10.0 * (double)i, 1.0 * (double)i, 5.0 * (double)i),
                  "piece %zu refused", i);
    cr_expect(gpu_asks(&q, 5, 200, 20, 100), "piece 5, asked again, refused");
    size_t k = 99;
    cr_expect_eq(soren__both_cpu_take(&q, 0, &k), SOREN_BOTH_NO);
    soren__both_gpu_done(&q);
    cr_expect_eq(soren__both_cpu_take(&q, 0, &k), SOREN_BOTH_NO);
    cr_expect_eq(k, 99);
    soren__both_queue_destroy(&q);
}

/* The CPU engine waits for the GPU's rate and bound; where the GPU's map
 * bounds its run, it needs its own rate, then takes pieces from the back
 * while it would map each before the GPU is done with the pieces in front
 * of it.  The GPU is refused the first piece the CPU engine took, and the
 * CPU engine takes nothing after that. */
Test(stream, both_queue_cpu_takes_from_the_back_while_it_pays)
{
    soren_input pieces[20];
    queue_pieces(pieces, 20, 100);
    soren_both_queue q;
    soren__both_queue_init(&q, pieces, 20);
    size_t k = 99;
    cr_expect_eq(soren__both_cpu_take(&q, 0, &k), SOREN_BOTH_LATER, "a piece before the GPU's "
                 "rate");
    cr_expect(gpu_asks(&q, 1, 0, 0, 0));
    cr_expect(gpu_asks(&q, 2, 10, 4, 6)); /* piece 0 mapped */
    cr_expect_eq(soren__both_cpu_take(&q, 0, &k), SOREN_BOTH_LATER);
    /* piece 1 mapped: 100 bytes in 10 ms, 3 ms of upload and 9 of compute */
    cr_expect(gpu_asks(&q, 3, 20, 7, 15));
    cr_expect_eq(soren__both_cpu_take(&q, 0, &k), SOREN_BOTH_MEASURE);
    /* 100 bytes at 1 a ms: 100 ms, before the GPU's pieces 4 .. 18 (150 ms) */
    cr_assert_eq(soren__both_cpu_take(&q, 1, &k), SOREN_BOTH_YES, "no first piece");
    cr_expect_eq(k, 19);
    /* 100 bytes at 1 a ms: 100 ms, before the GPU's pieces 4 .. 17 (140 ms) */
    cr_assert_eq(soren__both_cpu_take(&q, 1, &k), SOREN_BOTH_YES);
    cr_expect_eq(k, 18);
    /* at 0.5 a ms: 200 ms, after pieces 4 .. 16 (130 ms) */
    cr_expect_eq(soren__both_cpu_take(&q, 0.5, &k), SOREN_BOTH_NO);
    cr_expect_eq(k, 18);
    /* at 10 a ms it pays while the GPU's pieces ahead take over 10 ms */
    size_t taken = 0;
    while (soren__both_cpu_take(&q, 10, &k) == SOREN_BOTH_YES) {
        cr_expect_eq(k, 17 - taken, "piece %zu, want %zu", k, 17 - taken);
        taken++;
    }
    cr_expect_eq(q.cpu_first, 6, "the CPU engine's pieces begin at %zu, want 6", q.cpu_first);
    cr_expect(gpu_asks(&q, 4, 30, 10, 24));
    cr_expect(gpu_asks(&q, 5, 40, 13, 33));
    cr_expect_not(gpu_asks(&q, 6, 50, 16, 42), "the GPU took the CPU engine's piece");
    cr_expect_eq(soren__both_cpu_take(&q, 100, &k), SOREN_BOTH_NO);
    soren__both_queue_destroy(&q);
}

/* Beside a GPU whose upload bounds its run the CPU engine takes nothing:
 * it would read its pieces from the memory the copy threads read. */
Test(stream, both_queue_cpu_leaves_an_upload_bound_gpu_alone)
{
    soren_input pieces[20];
    queue_pieces(pieces, 20, 100);
    soren_both_queue q;
    soren__both_queue_init(&q, pieces, 20);
    size_t k = 99;
    for (size_t i = 1; i < 10; i++) {
        /* 10 ms of upload and 6 of compute a piece */
        cr_expect(gpu_asks(&q, i, 10.0 * (double)i, 10.0 * (double)i, 6.0 * (double)i));
        cr_expect_eq(soren__both_cpu_take(&q, 1000, &k), SOREN_BOTH_LATER, "after piece %zu", i);
    }
    soren__both_gpu_done(&q);
    soren__both_wait(&q); /* returns: the GPU is done */
    cr_expect_eq(soren__both_cpu_take(&q, 1000, &k), SOREN_BOTH_NO);
    cr_expect_eq(k, 99);
    soren__both_queue_destroy(&q);
}

/* The CPU engine's first piece brings a fold: it takes none where sharing
 * the rest would save less than the fold costs. */
Test(stream, both_queue_cpu_share_pays_for_the_fold)
{
    soren_input pieces[20];
    queue_pieces(pieces, 20, 100);
    for (int fold = 0; fold < 2; fold++) {
        soren_both_queue q;
        soren__both_queue_init(&q, pieces, 20);
        /* a map-bound GPU at 10 bytes a ms; sharing the 1,600 bytes left
         * with a CPU engine at 10 a ms saves 80 ms */
        for (size_t i = 1; i < 4; i++) {
            soren_both_gpu_state g = {10.0 * (double)i, 1.0 * (double)i, 8.0 * (double)i,
                                      fold ? 80 : 79};
            cr_expect(soren__both_gpu_take(&q, i, &g));
        }
        size_t k = 99;
        cr_expect_eq(soren__both_cpu_take(&q, 10, &k), fold ? SOREN_BOTH_NO : SOREN_BOTH_YES,
                     "a fold of %d ms", fold ? 80 : 79);
        soren__both_queue_destroy(&q);
    }
}

/* Under SOREN_BOTH_PROBE_LEAST pieces the CPU engine takes none. */
Test(stream, both_queue_few_pieces_stay_on_the_gpu)
{
    soren_input pieces[SOREN_BOTH_PROBE_LEAST - 1];
    queue_pieces(pieces, SOREN_BOTH_PROBE_LEAST - 1, 100);
    soren_both_queue q;
    soren__both_queue_init(&q, pieces, SOREN_BOTH_PROBE_LEAST - 1);
    for (size_t i = 1; i < 4; i++)
        cr_expect(gpu_asks(&q, i, 10.0 * (double)i, 1.0 * (double)i, 5.0 * (double)i));
    size_t k = 99;
    cr_expect_eq(soren__both_cpu_take(&q, 0, &k), SOREN_BOTH_NO);
    soren__both_queue_destroy(&q);
}

typedef struct queue_race {
    soren_both_queue *q;
    size_t cpu_taken;
    int cpu_twice;
    uint8_t *owner; /* 1: the GPU's, 2: the CPU engine's */
} queue_race;

static void *race_cpu(void *arg)
{
    queue_race *r = arg;
    size_t k;
    soren_both_take t;
    while ((t = soren__both_cpu_take(r->q, 50, &k)) != SOREN_BOTH_NO) {
        if (t == SOREN_BOTH_LATER) {
            soren__both_wait(r->q);
            continue;
        }
        r->cpu_twice |= r->owner[k] != 0;
        r->owner[k] = 2;
        r->cpu_taken++;
    }
    return NULL;
}

/* The GPU and the CPU engine asking at once: every piece is taken once,
 * the GPU's a prefix and the CPU engine's the rest. */
Test(stream, both_queue_hands_each_piece_out_once)
{
    enum { N = 4000 };
    soren_input *pieces = calloc(N, sizeof *pieces);
    uint8_t *owner = calloc(N, 1);
    cr_assert(pieces && owner);
    for (int round = 0; round < 20; round++) {
        queue_pieces(pieces, N, 1000);
        memset(owner, 0, N);
        soren_both_queue q;
        soren__both_queue_init(&q, pieces, N);
        queue_race r = {.q = &q, .owner = owner};
        pthread_t tid;
        cr_assert_eq(pthread_create(&tid, NULL, race_cpu, &r), 0);
        owner[0] = 1;
        size_t gpu = 1;
        /* a map-bound GPU, a piece in 1 + round ms */
        for (size_t i = 1;
             i < N && gpu_asks(&q, i, (double)i * (1 + round), (double)i, 2.0 * (double)i); i++)
            gpu++;
        soren__both_gpu_done(&q);
        pthread_join(tid, NULL);
        for (size_t i = 1; i < gpu; i++)
            cr_assert_eq(owner[i], 0, "round %d: piece %zu is the GPU's and the CPU engine's",
                         round, i);
        cr_assert_not(r.cpu_twice, "round %d: a piece went to the CPU engine twice", round);
        cr_assert_eq(gpu + r.cpu_taken, N, "round %d: the GPU took %zu pieces and the CPU "
                     "engine %zu of %d", round, gpu, r.cpu_taken, N);
        cr_assert_eq(q.gpu_end, q.cpu_first, "round %d", round);
        soren__both_queue_destroy(&q);
    }
    free(pieces);
    free(owner);
}



/* Stage 1 shared between the GPU and the CPU engine: the same output as the
 * CPU engine alone, and --explain says how the input was shared.  Two
 * CPU-engine threads beside the GPU, whatever the host's CPUs.  Where
 * cpu_takes, the GPU's map bounds its run, so the CPU engine takes at
 * least its first piece and its pairs are folded with the GPU's; else it
 * may take none, and then no fold runs unless the stage's reduce function
 * or limit needs one. */
static void expect_shared(const char *job, const char *args, const char *input,
                          const char *flags, int cpu_takes, const char *what)
{
    char *err = NULL, both[256];
    snprintf(both, sizeof both, "--device both --threads 2 %s", flags);
    json_t *x = run_beside_cpu(job, args, input, both, what, &err);
    json_t *shared = json_object_get(x, "coprocessing");
    cr_assert_not_null(shared, "%s: no \"coprocessing\" in --explain: %s", what, err);
    json_int_t gpu = json_integer_value(json_object_get(shared, "gpu_bytes"));
    json_int_t cpu = json_integer_value(json_object_get(shared, "cpu_bytes"));
    json_int_t pieces = json_integer_value(json_object_get(shared, "pieces"));
    json_int_t cpu_pieces = json_integer_value(json_object_get(shared, "cpu_pieces"));
    const char *fold = json_string_value(json_object_get(shared, "fold"));
    cr_assert_not_null(fold, "%s: no \"fold\" in \"coprocessing\"", what);
    cr_expect_eq((uint64_t)(gpu + cpu), file_size(input), "%s: %lld + %lld bytes shared of %llu",
                 what, (long long)gpu, (long long)cpu, (unsigned long long)file_size(input));
    cr_expect(gpu > 0 && cpu_pieces < pieces, "%s: the GPU mapped %lld bytes, the CPU engine "
              "took %lld of %lld pieces", what, (long long)gpu, (long long)cpu_pieces,
              (long long)pieces);
    cr_expect((cpu_pieces > 0) == (cpu > 0), "%s: the CPU engine took %lld pieces of %lld "
              "bytes", what, (long long)cpu_pieces, (long long)cpu);
    if (cpu_takes)
        cr_expect_geq(cpu_pieces, 1, "%s: the GPU's map bounds its run, and yet the CPU engine "
                      "took no piece", what);
    if (cpu_pieces > 0)
        cr_expect(strcmp(fold, "gpu") == 0 || strcmp(fold, "cpu") == 0, "%s: the CPU engine "
                  "took %lld pieces and the fold ran on %s", what, (long long)cpu_pieces, fold);
    cr_expect(strstr(err, "--device both: the GPU mapped") != NULL, "%s: -v does not say how "
              "the input was shared: %s", what, err);
    json_decref(x);
    free(err);
}

Test(stream, both_engines_equal_the_cpu_engine_gpu)
{
    require_gpu();
    /* 24 MiB: one chunk, cut into 16 pieces, records cut inside multi-byte words */
    char *text = gen("text", "text --size 24M --vocab 300000 --seed 1018");
    char *log = gen("log", "weblog --size 24M --urls 200000 --ips 50000 --seed 1019");
    char *pixels = in_dir("pixels.rgb");
    dg_rgb(pixels, 12 << 20, 1020);
    expect_shared("wordcount", "", text, "", 0, "wordcount");
    expect_shared("wordcount", "--top 20", text, "", 0, "wordcount --top 20");
    expect_shared("grep", "--param 'pattern=^th.*ing'", text, "", 0, "grep");
    expect_shared("histogram", "", pixels, "", 0, "histogram");
    expect_shared("pageviewcount", "", log, "", 0, "pageviewcount (two stages)");
    /* chunks of 2 MiB, and a table that folds the key space in parts: the
     * GPU's later passes map the pieces its first pass took */
    expect_shared("wordcount", "", text, "--device-memory 8M --table-slots 256 --key-bytes 4K",
                  0, "wordcount in parts of the key space");
    /* a GPU map slowed down (slowmap: a few milliseconds a line), which
     * bounds the GPU's run: the CPU engine takes pieces beside it */
    char slowmap[4096];
    snprintf(slowmap, sizeof slowmap, "'%s/stage/test-plugins/slowmap.json'", tu_builddir());
    expect_shared(slowmap, "--param cycles=8000000", text, "", 1, "slowmap");
    free(text);
    free(log);
    free(pixels);
}

/* Without a GPU, --device both is an error that says why, as --device gpu is. */
Test(stream, both_without_a_gpu_says_why)
{
    char why[256] = "";
    if (soren_device_count(why, sizeof why) > 0)
        cr_skip_test("a GPU is usable here: this checks the error without one");
    char *text = in_dir("text");
    tu_write(text, "a b\n", 4);
    char *err = NULL;
    int rc = tu_runf(NULL, &err, "'%s' run wordcount '%s' --device both -o /dev/null", tu_host(),
                     text);
    cr_expect_eq(rc, 1, "--device both without a GPU: exit %d, want 1: %s", rc, err);
    cr_expect(strstr(err, "--device both: no usable GPU") != NULL, "the message: %s", err);
    free(err);
    free(text);
}

/* ---- Usage errors ---------------------------------------------------------- */

Test(stream, device_memory_usage_errors)
{
    char *text = in_dir("text");
    tu_write(text, "a b\n", 4);
    static const char *const bad[] = {"0", "-5", "12Q", "''", "1.5G", "17179869184G", "0K",
                                      "G"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *err = NULL;
        int rc = tu_runf(NULL, &err, "'%s' run wordcount '%s' --device cpu --device-memory %s "
                         "-o /dev/null", tu_host(), text, bad[i]);
        cr_expect_eq(rc, 2, "--device-memory %s: exit %d, want 2 (usage): %s", bad[i], rc, err);
        cr_expect(strstr(err, "--device-memory") != NULL, "--device-memory %s: the message does "
                  "not name the option: %s", bad[i], err);
        free(err);
    }
    char *err = NULL;
    int rc = tu_runf(NULL, &err, "'%s' run wordcount '%s' --device cpu --device-memory",
                     tu_host(), text);
    cr_expect_eq(rc, 2, "--device-memory without a size: exit %d, want 2: %s", rc, err);
    cr_expect(strstr(err, "device-memory") != NULL, "no size: %s", err);
    free(err);
    /* Suffixes are accepted. */
    rc = tu_runf(NULL, &err, "'%s' run wordcount '%s' --device cpu --device-memory 1k "
                 "-o /dev/null && '%s' run wordcount '%s' --device cpu --device-memory 2G "
                 "-o /dev/null", tu_host(), text, tu_host(), text);
    cr_expect_eq(rc, 0, "--device-memory 1k, 2G: exit %d: %s", rc, err);
    free(err);
    free(text);
}
