/* soren-gen: every kind gives the same bytes for the same seed (a digest of
 * its output is fixed here, so a change to any generator, or a machine that
 * computes differently, fails), other bytes for another seed, the sizes its
 * options and presets ask for, and usage errors for what does not apply. */
#include <criterion/criterion.h>
#include <math.h>
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
    expect_digest("text --size 64K --vocab 5000", UINT64_C(0x7d90a3c93bb04154));
    expect_digest("rgb --size 30000 --colours 12", UINT64_C(0xb3ef981344d80697));
    expect_digest("weblog --size 64K --urls 300 --ips 500 --dup-rate 0.25",
                  UINT64_C(0x06b2a5f47e55140f));
    expect_digest("matrix --rows 37 --cols 53", UINT64_C(0x3f2d8ef8d5fd34bd));
    expect_digest("features --docs 40 --dims 16", UINT64_C(0x1e5adf604cad921d));
    expect_digest("points --count 500 --dims 3 --clusters 5", UINT64_C(0x0e84da38da2fe177));
    expect_digest("points --dims 3 --centroids 40 --clusters 5", UINT64_C(0x25caae498afa983b));
    expect_digest("html --pages 20 --links-per-page 5 --urls 200", UINT64_C(0x26043031a73ac383));
    expect_digest("svm --preset adult --rows 40", UINT64_C(0xdfc91312a24fe4e8));
    expect_digest("svm --preset adult --rows 40 --test", UINT64_C(0xd90b523a83c9a2f7));
    expect_digest("svm --preset web --rows 40", UINT64_C(0xf2db54ad2f95cdcf));
    expect_digest("svm --preset web --rows 40 --test", UINT64_C(0x9c1de191643de476));
    expect_digest("svm --preset usps --rows 40", UINT64_C(0x3a71458ceac5f988));
    expect_digest("svm --preset usps --rows 40 --test", UINT64_C(0x7755f38e7a90d48b));
    expect_digest("svm --preset face --rows 40", UINT64_C(0x77e2e3212b837531));
    expect_digest("svm --preset face --rows 40 --test", UINT64_C(0x3cefbd24704592ff));
    expect_digest("svm --preset mnist --rows 40", UINT64_C(0xc162cb1dc59cdb09));
    expect_digest("svm --preset mnist --rows 40 --test", UINT64_C(0xa17e09d59d617ed3));
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

/* Word and line lengths of text: words as runs of letters, lines without
 * their newline, blank ones counted. */
typedef struct text_shape {
    double word_mean, over12; /* bytes; the share of words over 12 bytes */
    size_t line_median, line_longest, lines;
} text_shape;

static int by_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static text_shape shape_of(const char *args)
{
    size_t n = 0;
    char *t = generate(args, 5, &n);
    size_t *lines = malloc((n + 1) * sizeof *lines);
    cr_assert(lines);
    text_shape sh = {0};
    size_t words = 0, letters = 0, over = 0, start = 0, word = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] != ' ' && t[i] != '\n' && (t[i] < 'a' || t[i] > 'z'))
            cr_assert_fail("soren-gen %s: byte %zu is 0x%02x", args, i, (unsigned char)t[i]);
        if (t[i] >= 'a' && t[i] <= 'z') {
            word++;
            continue;
        }
        if (word) {
            words++;
            letters += word;
            over += word > 12;
        }
        word = 0;
        if (t[i] == '\n') {
            lines[sh.lines++] = i - start;
            start = i + 1;
        }
    }
    cr_assert(words > 0 && sh.lines > 0, "soren-gen %s: no words or lines", args);
    qsort(lines, sh.lines, sizeof *lines, by_size);
    sh.word_mean = (double)letters / (double)words;
    sh.over12 = (double)over / (double)words;
    sh.line_median = lines[sh.lines / 2];
    sh.line_longest = lines[sh.lines - 1];
    free(lines);
    free(t);
    return sh;
}

/* text has the word and line lengths of documentation text (words of 7.4
 * bytes on average, some over 12; lines of median 38 with a long tail), and
 * --word-length and --line-length move them. */
Test(gen, text_lengths)
{
    text_shape d = shape_of("text --size 2M");
    cr_expect(d.word_mean > 7.2 && d.word_mean < 7.6, "word mean %.2f", d.word_mean);
    cr_expect(d.over12 > 0.12 && d.over12 < 0.17, "words over 12 bytes: %.3f", d.over12);
    cr_expect(d.line_median >= 36 && d.line_median <= 40, "line median %zu", d.line_median);
    cr_expect(d.line_longest > 1000, "longest line %zu", d.line_longest);
    text_shape w = shape_of("text --size 2M --word-length 5 --line-length 90");
    cr_expect(w.word_mean > 4.8 && w.word_mean < 5.3, "word mean %.2f", w.word_mean);
    cr_expect(w.over12 < 0.06, "words over 12 bytes: %.3f", w.over12);
    cr_expect(w.line_median >= 86 && w.line_median <= 94, "line median %zu", w.line_median);
}

/* A word is a function of its rank: a vocabulary of 3000 drawn uniformly
 * (--exponent 0) some 250000 times (the last line, which --size may cut in a
 * word, left out) gives exactly 3000 distinct words, no more
 * (a rank spelled two ways) and no fewer (two ranks spelled alike). */
Test(gen, text_one_spelling_a_rank)
{
    char *out = NULL;
    cr_assert_eq(tu_runf(&out, NULL, "'%s/soren-gen' text --size 2M --vocab 3000 --exponent 0 "
                         "--seed 4 | sed '$d' | tr ' ' '\\n' | grep -v '^$' | LC_ALL=C sort -u | "
                         "wc -l",
                         tu_builddir()), 0);
    cr_expect_eq(strtol(out, NULL, 10), 3000, "distinct words: %s", out);
    free(out);
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

/* ---- svm ---------------------------------------------------------------------- */

/* The SVM paper's data sets as svm's presets shape them. */
typedef struct svm_shape {
    const char *preset;
    unsigned features;
    double lo;             /* the least value; the greatest is 1 */
    int binary;            /* every value is 1 */
    double set_lo, set_hi; /* features given a row, on average */
} svm_shape;

static const svm_shape svm_shapes[] = {
    {"adult", 123, 1.0, 1, 14, 14},
    {"web", 300, 1.0, 1, 8, 16},
    {"usps", 256, -1.0, 0, 200, 256},
    {"face", 381, 0.0, 0, 381, 381},
    {"mnist", 784, 0.0, 0, 0.15 * 784, 0.24 * 784},
};
#define SVM_SHAPES (sizeof svm_shapes / sizeof svm_shapes[0])

/* Adult's one-hot groups (LibSVM's a9a): one feature of each is set. */
static const unsigned adult_groups[] = {5, 8, 5, 16, 5, 7, 14, 6, 5, 2, 2, 2, 5, 41};
#define ADULT_GROUPS (sizeof adult_groups / sizeof adult_groups[0])

static unsigned adult_group_of(unsigned long index)
{
    unsigned g = 0;
    for (unsigned long last = adult_groups[0]; index > last; last += adult_groups[++g])
        ;
    return g;
}

/* A value on the 1/256 grid, not 0, within [lo, 1], written exactly with
 * the fewest digits: as %.8f writes it (exact for the grid), less trailing
 * zeros. */
static int svm_value_ok(const char *text, size_t n, double lo)
{
    char *end = NULL, canon[32];
    double v = strtod(text, &end);
    if (end != text + n || v == 0 || v < lo || v > 1 || v * 256 != floor(v * 256))
        return 0;
    int len = snprintf(canon, sizeof canon, "%.8f", v);
    while (canon[len - 1] == '0')
        len--;
    if (canon[len - 1] == '.')
        len--;
    return (size_t)len == n && memcmp(canon, text, n) == 0;
}

typedef struct svm_counts {
    size_t lines, items, plus;
} svm_counts;

/* Checks one line "+1|-1 INDEX:VALUE ...": indices increasing from 1 up to
 * the preset's features, values as svm_value_ok says; for adult, one
 * feature in each group. */
static void check_svm_line(const char *what, size_t number, char *line, const svm_shape *sh,
                           svm_counts *c)
{
    unsigned groups[ADULT_GROUPS] = {0};
    int adult = strcmp(sh->preset, "adult") == 0;
    cr_assert(strncmp(line, "+1", 2) == 0 || strncmp(line, "-1", 2) == 0,
              "%s: line %zu: label is not +1 or -1: %.20s", what, number, line);
    c->plus += line[0] == '+';
    unsigned long prev = 0;
    for (char *p = line + 2; *p;) {
        char *colon = NULL;
        unsigned long index = *p == ' ' ? strtoul(p + 1, &colon, 10) : 0;
        cr_assert(colon && *colon == ':' && index > prev && index <= sh->features,
                  "%s: line %zu: bad or unordered index at \"%.20s\"", what, number, p);
        char *value = colon + 1;
        size_t n = strcspn(value, " ");
        cr_assert(svm_value_ok(value, n, sh->lo) && (!sh->binary || (n == 1 && *value == '1')),
                  "%s: line %zu, index %lu: bad value \"%.*s\"", what, number, index, (int)n,
                  value);
        if (adult)
            groups[adult_group_of(index)]++;
        prev = index;
        c->items++;
        p = value + n;
    }
    for (unsigned g = 0; adult && g < ADULT_GROUPS; g++)
        cr_assert_eq(groups[g], 1, "%s: line %zu: %u features of group %u set", what, number,
                     groups[g], g);
}

static svm_counts check_svm_lines(const char *what, char *text, const svm_shape *sh)
{
    svm_counts c = {0, 0, 0};
    for (char *line = text; *line; c.lines++) {
        char *eol = strchr(line, '\n');
        cr_assert(eol, "%s: the last line has no newline", what);
        *eol = 0;
        check_svm_line(what, c.lines + 1, line, sh, &c);
        line = eol + 1;
    }
    return c;
}

/* Every line of every preset, training and test set, is LibSVM's format
 * with the preset's shape: labels +1 and -1 about as often, indices from 1
 * increasing up to its features, values on its grid and range, the number
 * of features given a row as the data set has them. */
Test(gen, svm_lines_have_the_shape)
{
    for (size_t i = 0; i < SVM_SHAPES; i++)
        for (int test = 0; test <= 1; test++) {
            const svm_shape *sh = &svm_shapes[i];
            char args[128];
            snprintf(args, sizeof args, "svm --preset %s --rows 300%s", sh->preset,
                     test ? " --test" : "");
            char *out = generate(args, 3, NULL);
            svm_counts c = check_svm_lines(args, out, sh);
            cr_expect_eq(c.lines, 300, "%s: %zu lines", args, c.lines);
            cr_expect(c.plus > 100 && c.plus < 200, "%s: %zu of 300 labels +1", args, c.plus);
            double set = (double)c.items / (double)c.lines;
            cr_expect(set >= sh->set_lo && set <= sh->set_hi, "%s: %.1f features a row", args,
                      set);
            free(out);
        }
}

static size_t lines_of(const char *args, uint64_t seed)
{
    size_t n = 0, lines = 0;
    char *out = generate(args, seed, &n);
    for (size_t i = 0; i < n; i++)
        lines += out[i] == '\n';
    free(out);
    return lines;
}

/* The paper's training rows, a fifth as many test rows; --rows N gives the
 * first N rows of either, and the test set is not the training set. */
Test(gen, svm_rows_and_test_set)
{
    cr_expect_eq(lines_of("svm --preset adult", 1), 32561);
    cr_expect_eq(lines_of("svm --preset adult --test", 1), 6512);
    cr_expect_eq(lines_of("svm --preset face --test", 1), 1395);
    cr_expect_eq(lines_of("svm --preset mnist --test --rows 7", 1), 7);
    for (int test = 0; test <= 1; test++) {
        size_t n_few = 0, n_more = 0;
        char *few = generate(test ? "svm --preset usps --rows 50 --test"
                                  : "svm --preset usps --rows 50", 4, &n_few);
        char *more = generate(test ? "svm --preset usps --rows 120 --test"
                                   : "svm --preset usps --rows 120", 4, &n_more);
        cr_expect(n_few < n_more && memcmp(few, more, n_few) == 0,
                  "usps%s: --rows 50 is not the start of --rows 120", test ? " --test" : "");
        free(few);
        free(more);
    }
    for (size_t i = 0; i < SVM_SHAPES; i++) {
        char args[128];
        size_t n_train = 0, n_test = 0;
        snprintf(args, sizeof args, "svm --preset %s --rows 30", svm_shapes[i].preset);
        char *train = generate(args, 5, &n_train);
        strcat(args, " --test");
        char *test = generate(args, 5, &n_test);
        cr_expect(n_train != n_test || memcmp(train, test, n_train) != 0,
                  "%s: the test set is the training set", args);
        free(train);
        free(test);
    }
}

/* --print-params: the SVM paper's C and gamma, for scripts. */
Test(gen, svm_print_params)
{
    static const char *const want[][2] = {{"adult", "100 0.5\n"},     {"web", "64 7.8125\n"},
                                          {"usps", "10 0.00390625\n"}, {"face", "10 0.125\n"},
                                          {"mnist", "10 0.125\n"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char *out = NULL;
        cr_assert_eq(tu_runf(&out, NULL, "'%s/soren-gen' svm --preset %s --print-params",
                             tu_builddir(), want[i][0]),
                     0);
        cr_expect_str_eq(out, want[i][1], "%s", want[i][0]);
        free(out);
    }
}

/* LibSVM reads every preset and learns it: trained with the paper's C and
 * gamma on 1000 rows, it labels 500 test rows far better than chance (the
 * classes are equally likely; 2% of the labels are flipped) and keeps some
 * but not most of the rows as support vectors. */
Test(gen, svm_libsvm_learns_it)
{
    if (tu_run("command -v svm-train && command -v svm-predict", NULL, NULL) != 0)
        cr_skip_test("svm-train and svm-predict not found (Debian: apt-get install "
                     "libsvm-tools): LibSVM's check of the svm data is skipped");
    for (size_t i = 0; i < SVM_SHAPES; i++) {
        const char *preset = svm_shapes[i].preset;
        char *out = NULL, *err = NULL;
        int rc = tu_runf(&out, &err,
                         "cd '%s' && gen='%s/soren-gen' && "
                         "$gen svm --preset %s --rows 1000 >train && "
                         "$gen svm --preset %s --rows 500 --test >test && "
                         "set -- $($gen svm --preset %s --print-params) && "
                         "svm-train -q -c $1 -g $2 train model && "
                         "svm-predict test model predicted && "
                         "awk '/^total_sv/ { print \"support vectors:\", $2 }' model",
                         dir, tu_builddir(), preset, preset, preset);
        cr_assert_eq(rc, 0, "%s: LibSVM failed (%d): %s%s", preset, rc, out, err);
        unsigned right = 0, total = 0, svs = 0;
        const char *acc = strstr(out, "Accuracy = ");
        const char *sv = strstr(out, "support vectors:");
        cr_assert(acc && strchr(acc, '(') && sv, "%s: no accuracy or model in: %s", preset, out);
        cr_assert_eq(sscanf(strchr(acc, '('), "(%u/%u)", &right, &total), 2);
        cr_assert_eq(sscanf(sv, "support vectors: %u", &svs), 1);
        /* Well above chance, and support vectors from a few percent to most of
         * the rows: the SVM paper's own data sets keep 9% (USPS) to 73%
         * (MNIST) of their rows as support vectors. */
        cr_expect(total == 500 && right >= 350, "%s: LibSVM labels %u of %u test rows right",
                  preset, right, total);
        cr_expect(svs >= 50 && svs <= 950, "%s: %u of 1000 rows are support vectors", preset,
                  svs);
        free(out);
        free(err);
    }
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
    expect_usage_error("svm --rows 5", "svm needs --preset adult, web, usps, face or mnist");
    expect_usage_error("svm --preset iris", "svm expects adult, web, usps, face or mnist");
    expect_usage_error("svm --preset adult --size 1K", "--size does not apply to svm");
    expect_usage_error("svm --preset usps --rows 0", "expected a positive count");
    expect_usage_error("svm --preset web --print-params --rows 5", "leave out --rows and --test");
    expect_usage_error("svm --preset web --test --print-params", "leave out --rows and --test");
    expect_usage_error("matrix --rows 2 --cols 2 --test", "--test does not apply to matrix");
    expect_usage_error("text --size 1K --print-params", "--print-params does not apply to text");
    expect_usage_error("matrix --preset mnist", "mnist is a data set of the SVM paper, for svm");
    expect_usage_error("svm --preset soren-small", "svm expects adult");
    /* Numbers are decimal, as soren-host reads them: no leading zero or
     * space, no 0x. */
    expect_usage_error("text --size 010K", "--size: expected a size such as 100M, got \"010K\"");
    expect_usage_error("text --size ' 1K'", "--size: expected a size");
    expect_usage_error("matrix --rows 0x4 --cols 2", "expected a positive count, got \"0x4\"");
    expect_usage_error("text --size 1K --exponent ' 1'", "--exponent: expected a number");
    expect_usage_error("text --size 1K --word-length 0.5", "--word-length: expected a mean");
    expect_usage_error("text --size 1K --word-length 31", "--word-length: expected a mean");
    expect_usage_error("text --size 1K --word-length 7.444", "--word-length: expected a mean");
    expect_usage_error("text --size 1K --line-length 0", "--line-length: expected a median");
    expect_usage_error("text --size 1K --line-length 100001", "--line-length: expected a median");
    expect_usage_error("rgb --size 1K --line-length 40", "--line-length does not apply to rgb");
}

Test(gen, help_names_every_kind_and_option)
{
    char *out = NULL;
    cr_assert_eq(tu_runf(&out, NULL, "'%s/soren-gen' --help", tu_builddir()), 0);
    static const char *const words[] = {
        "text", "rgb", "weblog", "matrix", "features", "points", "html", "--size", "--vocab",
        "--exponent", "--colours", "--urls", "--ips", "--dup-rate", "--rows", "--cols",
        "--docs", "--dims", "--count", "--clusters", "--centroids", "--pages",
        "--links-per-page", "--word-length", "--line-length",
        "--preset", "soren-small", "soren-medium", "soren-big", "mars-small", "mars-medium",
        "mars-large", "svm", "--test", "--print-params", "adult", "web", "usps", "face",
        "mnist", "--seed", "--output", "--help", "--version"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        cr_expect(strstr(out, words[i]) != NULL, "--help does not mention %s", words[i]);
    free(out);
}
