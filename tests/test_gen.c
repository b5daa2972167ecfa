/* soren-gen: every kind gives the same bytes for the same seed (a digest of
 * its output is fixed here, so a change to any generator, or a machine that
 * computes differently, fails), other bytes for another seed, the sizes its
 * options and presets ask for, and usage errors for what does not apply. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}

TestSuite(gen, .init = setup, .fini = teardown, .timeout = 120);

/* FNV-1a, 64 bits. */
static uint64_t fnv1a(const char *p, size_t n)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

/* Runs soren-gen ARGS --seed SEED -o FILE; returns the output (size in *n). */
static char *generate(const char *args, uint64_t seed, size_t *n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/out", dir);
    char *err = NULL;
    int rc = tu_runf(NULL, &err, "'%s/soren-gen' %s --seed %llu -o '%s'", tu_builddir(), args,
                     (unsigned long long)seed, path);
    cr_assert_eq(rc, 0, "soren-gen %s: exit %d: %s", args, rc, err);
    free(err);
    return tu_read(path, n);
}

static void expect_digest(const char *args, uint64_t want)
{
    size_t n1 = 0, n2 = 0, n3 = 0;
    char *a = generate(args, 7, &n1);
    char *b = generate(args, 7, &n2);
    char *c = generate(args, 8, &n3);
    cr_assert_gt(n1, 0, "soren-gen %s wrote nothing", args);
    cr_expect(n1 == n2 && memcmp(a, b, n1) == 0, "soren-gen %s: two runs with seed 7 differ",
              args);
    cr_expect(n1 != n3 || memcmp(a, c, n1) != 0, "soren-gen %s: seeds 7 and 8 give the same "
              "bytes", args);
    uint64_t got = fnv1a(a, n1);
    cr_expect_eq(got, want, "soren-gen %s --seed 7: digest 0x%016llx, expected 0x%016llx",
                 args, (unsigned long long)got, (unsigned long long)want);
    free(a);
    free(b);
    free(c);
}

Test(gen, same_seed_same_bytes)
{
    expect_digest("text --size 64K --vocab 5000", UINT64_C(0xe9a4f144677e5e8b));
    expect_digest("rgb --size 30000 --colours 12", UINT64_C(0xb3ef981344d80697));
    expect_digest("weblog --size 64K --urls 300 --ips 500 --dup-rate 0.25",
                  UINT64_C(0x06b2a5f47e55140f));
    expect_digest("matrix --rows 37 --cols 53", UINT64_C(0x3f2d8ef8d5fd34bd));
    expect_digest("features --docs 40 --dims 16", UINT64_C(0x1e5adf604cad921d));
    expect_digest("points --count 500 --dims 3 --clusters 5", UINT64_C(0x0e84da38da2fe177));
    expect_digest("points --dims 3 --centroids 40 --clusters 5", UINT64_C(0x25caae498afa983b));
    expect_digest("html --pages 20 --links-per-page 5 --urls 200", UINT64_C(0x26043031a73ac383));
}

/* The bytes a run writes, by its options or its preset. */
static size_t size_of(const char *args)
{
    size_t n = 0;
    free(generate(args, 1, &n));
    return n;
}

Test(gen, sizes_and_presets)
{
    cr_expect_eq(size_of("matrix --rows 3 --cols 5"), 3 * 5 * 4);
    cr_expect_eq(size_of("features --docs 7 --dims 9"), 7 * 9 * 4);
    cr_expect_eq(size_of("points --count 11 --dims 2"), 11 * 2 * 4);
    cr_expect_eq(size_of("points --dims 2 --centroids 5"), 5 * 3 * 8);
    cr_expect_eq(size_of("rgb --size 1000"), 999);
    cr_expect_eq(size_of("text --size 4K"), 4096);
    /* Whole lines and whole pages, as close to --size as they come. */
    size_t weblog = size_of("weblog --size 100K");
    cr_expect(weblog <= 100 << 10 && weblog > (100 << 10) - 128, "weblog: %zu bytes", weblog);
    size_t html = size_of("html --size 100K");
    cr_expect(html <= 100 << 10 && html > (100 << 10) - 4096, "html: %zu bytes", html);
    /* The papers' tables. */
    cr_expect_eq(size_of("matrix --preset soren-small"), 500 * 500 * 4);
    cr_expect_eq(size_of("matrix --preset mars-small"), 512 * 512 * 4);
    cr_expect_eq(size_of("matrix --preset mars-small --rows 2"), 2 * 512 * 4);
    cr_expect_eq(size_of("features --preset mars-small"), 512 * 128 * 4);
    cr_expect_eq(size_of("rgb --preset soren-small"), 3 << 20);
    cr_expect_eq(size_of("text --preset soren-small"), 10 << 20);
    weblog = size_of("weblog --preset soren-small");
    cr_expect(weblog <= 5 << 20 && weblog > (5 << 20) - 128, "weblog: %zu bytes", weblog);
}

/* Every line is URL<TAB>IP<TAB>16 hex digits; --dup-rate 1 repeats the
 * first line only, 0 gives (almost surely) no repeated line. */
Test(gen, weblog_lines)
{
    char *out = NULL;
    cr_assert_eq(tu_runf(&out, NULL, "'%s/soren-gen' weblog --size 200K --seed 3 | "
                         "LC_ALL=C grep -cvE '^http://[a-z0-9./]+\t[0-9]+\\.[0-9]+\\.[0-9]+"
                         "\\.[0-9]+\t[0-9a-f]{16}$'", tu_builddir()), 1);
    cr_expect_str_eq(out, "0\n");
    free(out);
    cr_assert_eq(tu_runf(&out, NULL, "'%s/soren-gen' weblog --size 20K --dup-rate 1 | sort -u "
                         "| wc -l", tu_builddir()), 0);
    cr_expect_str_eq(out, "1\n");
    free(out);
    cr_assert_eq(tu_runf(&out, NULL, "'%s/soren-gen' weblog --size 200K --dup-rate 0 | sort | "
                         "uniq -d | wc -l", tu_builddir()), 0);
    cr_expect_str_eq(out, "0\n");
    free(out);
}

/* No generated float is outside its grid, and no matrix, vector or point
 * set is all zeros. */
Test(gen, floats_on_their_grid)
{
    static const struct {
        const char *args;
        float lo, hi;
    } cases[] = {
        {"matrix --rows 64 --cols 64", -4.0f, 4.0f},
        {"features --docs 64 --dims 32", 0.0f, 4.0f},
        {"points --count 1000 --dims 4 --clusters 3", -68.0f, 68.0f},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t n = 0;
        char *bytes = generate(cases[c].args, 5, &n);
        size_t nonzero = 0;
        for (size_t i = 0; i + 4 <= n; i += 4) {
            float x;
            memcpy(&x, bytes + i, 4);
            cr_assert(x >= cases[c].lo && x < cases[c].hi && x * 8.0f == (float)(int)(x * 8.0f),
                      "%s: value %zu is %g", cases[c].args, i / 4, (double)x);
            nonzero += x != 0.0f;
        }
        cr_expect_gt(nonzero, n / 8, "%s: %zu of %zu values are not zero", cases[c].args,
                     nonzero, n / 4);
        free(bytes);
    }
}

/* --centroids K writes the first K points of the seed, each as its
 * coordinates and the count 1 in float64: kmeans's centroids layout. */
Test(gen, centroids_are_the_first_points)
{
    size_t np = 0, nc = 0;
    char *points = generate("points --count 100 --dims 4 --clusters 3", 9, &np);
    char *centroids = generate("points --count 100 --dims 4 --clusters 3 --centroids 10", 9, &nc);
    cr_assert_eq(np, 100 * 4 * 4);
    cr_assert_eq(nc, 10 * 5 * 8);
    for (size_t p = 0; p < 10; p++)
        for (size_t j = 0; j <= 4; j++) {
            float x = 1.0f;
            double c;
            if (j < 4)
                memcpy(&x, points + (p * 4 + j) * 4, 4);
            memcpy(&c, centroids + (p * 5 + j) * 8, 8);
            cr_expect(c == (double)x, "centroid %zu, element %zu: %g, expected %g", p, j, c,
                      (double)x);
        }
    free(points);
    free(centroids);
}

static void expect_usage_error(const char *args, const char *words)
{
    char *err = NULL;
    int rc = tu_runf(NULL, &err, "'%s/soren-gen' %s", tu_builddir(), args);
    cr_expect_eq(rc, 2, "soren-gen %s: exit %d", args, rc);
    cr_expect(strstr(err, words) != NULL, "soren-gen %s: \"%s\" not in: %s", args, words, err);
    free(err);
}

Test(gen, usage_errors)
{
    expect_usage_error("rgb --size 1K --urls 5", "--urls does not apply to rgb");
    expect_usage_error("html --preset soren-big", "--preset soren-big has no html data set");
    expect_usage_error("points --preset mars-large", "has no points data set");
    expect_usage_error("matrix --preset paper", "--preset: expected soren-small");
    expect_usage_error("matrix --rows 4", "matrix needs --rows and --cols");
    expect_usage_error("html --pages 3 --size 1K", "not both");
    expect_usage_error("weblog --size 1K --dup-rate 1.5", "--dup-rate");
    expect_usage_error("weblog --size 1K --dup-rate 0.0000001", "--dup-rate");
    expect_usage_error("points --count 5 --dims 0", "expected a positive count");
    expect_usage_error("points --dims 3", "points needs --dims, and --count or --centroids");
    expect_usage_error("points --count 3 --dims 2 --centroids 4", "give K at most --count");
    expect_usage_error("matrix --rows 2 --cols 2 --centroids 1", "--centroids does not apply");
    expect_usage_error("pictures --size 1K", "unknown kind of data");
}

Test(gen, help_names_every_kind_and_option)
{
    char *out = NULL;
    cr_assert_eq(tu_runf(&out, NULL, "'%s/soren-gen' --help", tu_builddir()), 0);
    static const char *const words[] = {
        "text", "rgb", "weblog", "matrix", "features", "points", "html", "--size", "--vocab",
        "--exponent", "--colours", "--urls", "--ips", "--dup-rate", "--rows", "--cols",
        "--docs", "--dims", "--count", "--clusters", "--centroids", "--pages",
        "--links-per-page",
        "--preset", "soren-small", "soren-medium", "soren-big", "mars-small", "mars-medium",
        "mars-large", "--seed", "--output", "--help", "--version"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        cr_expect(strstr(out, words[i]) != NULL, "--help does not mention %s", words[i]);
    free(out);
}
