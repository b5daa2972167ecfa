/*
 * soren-gen - seeded, deterministic inputs for Soren's jobs and benchmarks:
 * the same seed gives the same bytes on any machine.
 *
 *   text      Zipf-distributed words (word i is drawn with weight 1/(i+1)^S)
 *             with the word and line lengths of documentation text; word i
 *             is spelled the same wherever it is drawn.
 *   rgb       raw 24-bit RGB pixels: uniform, or drawn from N random colours.
 *   weblog    web log lines URL<TAB>IP<TAB>cookie (Page View Count and Rank).
 *   matrix    a float32 matrix, row-major (Matrix Multiplication).
 *   features  document feature vectors, float32 (Similarity Score).
 *   points    float32 points around seeded centres (k-means), or the
 *             first of them as k-means centroids (float64 sums and counts).
 *   html      HTML pages with <a href="..."> links (Inverted Index).
 *   svm       two-class examples in LibSVM's text format with the shapes of
 *             the SVM paper's data sets, from a seeded model per data set
 *             (SVM training and classification, against LibSVM).
 *
 * Every generator draws from splitmix64 with integer arithmetic only (text's
 * Zipf table aside: it uses pow(), and glibc's is the same everywhere we
 * run; text's word and line lengths come from integer quantile tables), and
 * writes floats as the little-endian bits of values built exactly from
 * integers (multiples of 1/8), so no libm or rounding mode can change a
 * byte; svm's values are multiples of 1/256, written in decimal from their
 * integers, exactly.  The small grid also keeps the jobs' float arithmetic
 * exact where it matters: a matrix product of these values sums exactly in float32 for inner
 * dimensions up to 16384, in any order, so its reference is exact too.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "number.h"

static const char usage_text[] =
    "Usage: soren-gen KIND [OPTIONS]\n"
    "\n"
    "Write seeded, deterministic input data: the same kind, options and seed give\n"
    "the same bytes on any machine.  Floats are float32, little-endian, row-major.\n"
    "\n"
    "Kinds:\n"
    "  text      Zipf-distributed words with the word and line lengths of\n"
    "            documentation text (--size; --vocab, default 1000000,\n"
    "            --exponent, default 1.0, --word-length, default 7.4,\n"
    "            --line-length, default 38)\n"
    "  rgb       raw 24-bit RGB pixels, uniform or from --colours N colours (--size)\n"
    "  weblog    lines URL<TAB>IP<TAB>cookie, whole lines up to --size bytes; URLs\n"
    "            skewed towards the first of --urls (default 10000), IPs from a\n"
    "            pool of --ips (default 65536), --dup-rate of the lines (default\n"
    "            0.1) an exact copy of a recent line\n"
    "  matrix    a --rows x --cols float32 matrix, values multiples of 1/8 in\n"
    "            [-4, 4) (never all zero)\n"
    "  features  --docs vectors of --dims float32 features, multiples of 1/8 in\n"
    "            [0, 4), about a quarter of them zero, none all zero\n"
    "  points    --count points of --dims float32 coordinates around --clusters\n"
    "            (default 8) seeded centres (multiples of 1/8: centres in\n"
    "            [-64, 64), points within 4 of their centre); with --centroids K\n"
    "            the first K of them as kmeans's centroids instead: per point its\n"
    "            coordinates and the count 1, float64\n"
    "  html      HTML pages, --links-per-page (default 8) <a href=\"URL\"> links\n"
    "            each to one of --urls targets (default 10000): --pages N pages,\n"
    "            or whole pages up to --size bytes\n"
    "  svm       two-class examples in LibSVM's text format (\"+1 3:1 8:0.5 ...\")\n"
    "            with the shape of a data set of the SVM paper, --preset adult,\n"
    "            web, usps, face or mnist: its training set (or the first --rows\n"
    "            of it), or with --test a test set from the same model (a fifth\n"
    "            as many rows, or --rows); --print-params prints the paper's C\n"
    "            and gamma for it instead, as \"C GAMMA\"\n"
    "\n"
    "Options:\n"
    "  -s, --size SIZE      bytes to write (text, rgb, weblog, html); K, M, G\n"
    "                       suffixes (powers of 1024)\n"
    "      --vocab N        distinct words (text)\n"
    "      --exponent S     Zipf exponent, 0 to 10 (text)\n"
    "      --word-length MEAN\n"
    "                       mean word length in bytes, 1 to 30 (text)\n"
    "      --line-length MEDIAN\n"
    "                       median line length in bytes, 1 to 100000 (text)\n"
    "      --colours N      number of distinct colours; 0 for uniform (rgb)\n"
    "      --urls N         distinct URLs (weblog), link targets (html)\n"
    "      --ips N          size of the IP address pool (weblog)\n"
    "      --dup-rate R     fraction of lines that repeat a recent line, 0 to 1\n"
    "                       (weblog)\n"
    "      --rows N, --cols N\n"
    "                       matrix shape (matrix); --rows: examples (svm)\n"
    "      --test           write the test set instead of the training set (svm)\n"
    "      --print-params   print the preset's C and gamma, nothing else (svm)\n"
    "      --docs N         documents (features)\n"
    "      --dims N         features per document (features), coordinates per\n"
    "                       point (points)\n"
    "      --count N        points (points)\n"
    "      --clusters K     centres the points are drawn around (points)\n"
    "      --centroids K    write the first K points as k-means centroids (points;\n"
    "                       at most --count where both are given)\n"
    "      --pages N        pages (html)\n"
    "      --links-per-page N\n"
    "                       links in each page (html)\n"
    "      --preset NAME    the sizes of a paper's data sets for KIND; options\n"
    "                       given as well win.  soren-small, soren-medium,\n"
    "                       soren-big: the Soren paper's Table 2 (text 10M, 50M,\n"
    "                       100M; rgb 3M, 6M, 10M; weblog 5M, 40M, 65M; matrix\n"
    "                       500, 1000, 2000 square).  mars-small, mars-medium,\n"
    "                       mars-large: the Mars paper's Table 4 (text 32M, 64M,\n"
    "                       128M; html 16M, 32M, 64M; features 512, 1024, 2048\n"
    "                       documents of 128 dimensions; matrix 512, 1024, 2048\n"
    "                       square; weblog 32M, 64M, 96M).  A preset without a\n"
    "                       size for KIND is an error.  adult, web, usps, face,\n"
    "                       mnist: the SVM paper's Table 2 (svm, which needs\n"
    "                       one: adult 32561 x 123, web 49749 x 300, usps 7291\n"
    "                       x 256, face 6977 x 381, mnist 60000 x 784).\n"
    "      --seed N         random seed (default 1)\n"
    "  -o, --output FILE    write to FILE instead of standard output\n"
    "  -h, --help           show this help\n"
    "  -V, --version        show the version\n"
    "\n"
    "Exit status: 0 success, 1 write error or out of memory, 2 usage error.\n";

/* ---- Options ------------------------------------------------------------- */

typedef enum kind { TEXT, RGB, WEBLOG, MATRIX, FEATURES, POINTS, HTML, SVM, KIND_COUNT } kind;

static const char *const kind_names[KIND_COUNT] = {"text",     "rgb",    "weblog", "matrix",
                                                   "features", "points", "html",   "svm"};

/* The options but --preset, --seed, --output, --help and --version, as bits:
 * each kind accepts some of them. */
enum {
    O_SIZE = 1 << 0, O_VOCAB = 1 << 1, O_EXPONENT = 1 << 2, O_COLOURS = 1 << 3,
    O_URLS = 1 << 4, O_IPS = 1 << 5, O_DUP_RATE = 1 << 6, O_ROWS = 1 << 7, O_COLS = 1 << 8,
    O_DOCS = 1 << 9, O_DIMS = 1 << 10, O_COUNT = 1 << 11, O_CLUSTERS = 1 << 12,
    O_PAGES = 1 << 13, O_LINKS = 1 << 14, O_CENTROIDS = 1 << 15, O_TEST = 1 << 16,
    O_PARAMS = 1 << 17, O_WORD_LENGTH = 1 << 18, O_LINE_LENGTH = 1 << 19
};

static const unsigned kind_options[KIND_COUNT] = {
    [TEXT] = O_SIZE | O_VOCAB | O_EXPONENT | O_WORD_LENGTH | O_LINE_LENGTH,
    [RGB] = O_SIZE | O_COLOURS,
    [WEBLOG] = O_SIZE | O_URLS | O_IPS | O_DUP_RATE,
    [MATRIX] = O_ROWS | O_COLS,
    [FEATURES] = O_DOCS | O_DIMS,
    [POINTS] = O_COUNT | O_DIMS | O_CLUSTERS | O_CENTROIDS,
    [HTML] = O_SIZE | O_URLS | O_PAGES | O_LINKS,
    [SVM] = O_ROWS | O_TEST | O_PARAMS,
};

typedef struct gen_options {
    unsigned given; /* O_* bits set on the command line or by the preset */
    uint64_t size, vocab, colours, seed;
    double exponent;
    uint64_t urls, ips;
    uint32_t dup_ppm; /* --dup-rate in parts per million */
    uint64_t word_mean;   /* --word-length, in 1/100 byte */
    uint64_t line_median; /* --line-length, bytes */
    uint64_t rows, cols, docs, dims, count, clusters, pages, links, centroids;
    const struct svm_preset *svm; /* svm's --preset */
    const char *output;
} gen_options;

#define MIB (UINT64_C(1) << 20)

/* The papers' data sets (Soren Table 2, Mars Table 4), per kind; 0: the
 * paper has none of that kind.  "MB" is read as MiB, as --size reads M. */
typedef struct preset {
    const char *name;
    uint64_t text, rgb, weblog, html; /* bytes */
    uint64_t matrix;                  /* rows = cols */
    uint64_t docs, dims;              /* features */
} preset;

static const preset presets[] = {
    {"soren-small", 10 * MIB, 3 * MIB, 5 * MIB, 0, 500, 0, 0},
    {"soren-medium", 50 * MIB, 6 * MIB, 40 * MIB, 0, 1000, 0, 0},
    {"soren-big", 100 * MIB, 10 * MIB, 65 * MIB, 0, 2000, 0, 0},
    {"mars-small", 32 * MIB, 0, 32 * MIB, 16 * MIB, 512, 512, 128},
    {"mars-medium", 64 * MIB, 0, 64 * MIB, 32 * MIB, 1024, 1024, 128},
    {"mars-large", 128 * MIB, 0, 96 * MIB, 64 * MIB, 2048, 2048, 128},
};

/* How an svm preset's examples are made (see "svm" below). */
typedef enum svm_form {
    SVM_GROUPS, /* one-hot groups: one feature set in each (Adult's encoding) */
    SVM_BITS,   /* binary features */
    SVM_PIXELS  /* grey levels, multiples of 1/256 */
} svm_form;

/* The SVM paper's data sets (Catanzaro, Sundaram and Keutzer 2008, Table 2):
 * their shapes, the C and gamma the paper trained them with, and the
 * parameters of the seeded model that stands in for each. */
typedef struct svm_preset {
    const char *name;
    uint64_t rows;         /* training rows; --test writes a fifth as many */
    unsigned features;
    const char *c, *gamma; /* as --print-params writes them */
    svm_form form;
    int lo;                /* the least value, in 1/256; the greatest is 1 */
    unsigned prototypes;   /* per class */
    unsigned ink;          /* per mille: bits set, pixels not at lo */
    unsigned redraw;       /* per mille: features (groups) an example redraws */
    unsigned jitter;       /* pixels: noise amplitude, in 1/256 */
    unsigned flip;         /* per mille: labels flipped */
} svm_preset;

static const svm_preset svm_presets[] = {
    /* name, rows, features, C, gamma, form, lo, prototypes, ink, redraw, jitter, flip */
    {"adult", 32561, 123, "100", "0.5", SVM_GROUPS, 0, 20, 0, 300, 0, 20},
    {"web", 49749, 300, "64", "7.8125", SVM_BITS, 0, 50, 40, 30, 0, 20},
    {"usps", 7291, 256, "10", "0.00390625", SVM_PIXELS, -256, 5, 500, 100, 64, 20},
    {"face", 6977, 381, "10", "0.125", SVM_PIXELS, 0, 5, 1000, 20, 24, 20},
    {"mnist", 60000, 784, "10", "0.125", SVM_PIXELS, 0, 5, 190, 10, 24, 20},
};

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "soren-gen: %s%s%s\nTry 'soren-gen --help'.\n", what, arg ? arg : "",
            arg ? "\"" : "");
    return 2;
}

/* A count, or with sizes a size that may end in K, M or G, read as
 * soren-host reads its numbers (number.h: decimal, no leading zeros). */
static int parse_count(const char *text, uint64_t *out, int sizes)
{
    soren_number n;
    if (soren_number_parse(text, SOREN_NUMBER_U64, sizes ? SOREN_NUMBER_SUFFIX : 0, &n, NULL,
                           0) != 0)
        return 0;
    *out = n.u64;
    return 1;
}

/* A decimal number as an integer count of 10^-decimals, read from its digits
 * so that no float rounding decides a byte: with 6 decimals "0.1" is 100000;
 * digits past the last decimal are refused rather than rounded, and so is a
 * value over max (in the same units). */
static int parse_fixed(const char *text, unsigned decimals, uint64_t max, uint64_t *out)
{
    const char *p = text;
    uint64_t whole = 0, frac = 0, unit = 1;
    unsigned places = 0;
    for (unsigned i = 0; i < decimals; i++)
        unit *= 10;
    if (*p < '0' || *p > '9')
        return 0;
    while (*p >= '0' && *p <= '9' && whole <= max / unit)
        whole = whole * 10 + (uint64_t)(*p++ - '0');
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++) {
            if (places == decimals)
                return 0;
            frac = frac * 10 + (uint64_t)(*p - '0');
            places++;
        }
    if (*p)
        return 0;
    while (places++ < decimals)
        frac *= 10;
    if (whole > max / unit || whole * unit + frac > max)
        return 0;
    *out = whole * unit + frac;
    return 1;
}

/* A fraction from 0 to 1 as parts per million: "0.1" is 100000. */
static int parse_ppm(const char *text, uint32_t *out)
{
    uint64_t ppm;
    if (!parse_fixed(text, 6, 1000000, &ppm))
        return 0;
    *out = (uint32_t)ppm;
    return 1;
}

/* Sets *field to value unless its option was given. */
static void set_preset(gen_options *o, unsigned bit, uint64_t *field, uint64_t value)
{
    if (o->given & bit)
        return;
    *field = value;
    o->given |= bit;
}

/* svm's presets are the SVM paper's data sets; --rows, where given, wins. */
static int apply_svm_preset(const char *name, gen_options *o)
{
    for (size_t i = 0; i < sizeof svm_presets / sizeof svm_presets[0]; i++)
        if (strcmp(svm_presets[i].name, name) == 0)
            o->svm = &svm_presets[i];
    if (!o->svm)
        return usage_error("--preset: svm expects adult, web, usps, face or mnist, got \"", name);
    return -1;
}

/* Fills the kind's sizes from the preset where the command line left them. */
static int apply_preset(const char *name, kind k, gen_options *o)
{
    if (k == SVM)
        return apply_svm_preset(name, o);
    const preset *ps = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0)
            ps = &presets[i];
    for (size_t i = 0; i < sizeof svm_presets / sizeof svm_presets[0]; i++)
        if (strcmp(svm_presets[i].name, name) == 0) {
            fprintf(stderr, "soren-gen: --preset %s is a data set of the SVM paper, for svm; "
                    "%s takes soren-small, soren-medium, soren-big, mars-small, mars-medium "
                    "or mars-large\nTry 'soren-gen --help'.\n", name, kind_names[k]);
            return 2;
        }
    if (!ps)
        return usage_error("--preset: expected soren-small, soren-medium, soren-big, "
                           "mars-small, mars-medium or mars-large, got \"", name);
    uint64_t bytes = k == TEXT ? ps->text : k == RGB ? ps->rgb : k == WEBLOG ? ps->weblog
                   : k == HTML ? ps->html : 0;
    int has = bytes || (k == MATRIX && ps->matrix) || (k == FEATURES && ps->docs);
    if (!has) {
        fprintf(stderr, "soren-gen: --preset %s has no %s data set (%s); give its sizes "
                "instead\nTry 'soren-gen --help'.\n", name, kind_names[k],
                strncmp(name, "soren", 5) == 0
                    ? "the Soren paper's Table 2 has text, rgb, weblog and matrix"
                    : "the Mars paper's Table 4 has text, html, features, matrix and weblog");
        return 2;
    }
    /* html's --pages is its other way to say how much. */
    if (bytes && !(o->given & (O_SIZE | O_PAGES)))
        set_preset(o, O_SIZE, &o->size, bytes);
    if (k == MATRIX) {
        set_preset(o, O_ROWS, &o->rows, ps->matrix);
        set_preset(o, O_COLS, &o->cols, ps->matrix);
    }
    if (k == FEATURES) {
        set_preset(o, O_DOCS, &o->docs, ps->docs);
        set_preset(o, O_DIMS, &o->dims, ps->dims);
    }
    return -1;
}

/* ---- Output -------------------------------------------------------------- */

/* Buffered output that reports the first write error. */
typedef struct sink {
    FILE *f;
    char buf[1 << 16];
    size_t used;
    int failed;
} sink;

static void sink_put(sink *s, const void *p, size_t n)
{
    if (s->used + n > sizeof s->buf) {
        if (fwrite(s->buf, 1, s->used, s->f) != s->used)
            s->failed = 1;
        s->used = 0;
    }
    memcpy(s->buf + s->used, p, n);
    s->used += n;
}

/* A float32 as its bits, least significant byte first. */
static void sink_f32(sink *s, float x)
{
    uint32_t bits;
    memcpy(&bits, &x, 4);
    uint8_t b[4] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16),
                    (uint8_t)(bits >> 24)};
    sink_put(s, b, 4);
}

/* A float64 as its bits, least significant byte first. */
static void sink_f64(sink *s, double x)
{
    uint64_t bits;
    memcpy(&bits, &x, 8);
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(bits >> (8 * i));
    sink_put(s, b, 8);
}

static int sink_close(sink *s, const char *name)
{
    if (s->used && fwrite(s->buf, 1, s->used, s->f) != s->used)
        s->failed = 1;
    if (fflush(s->f) != 0)
        s->failed = 1;
    if (s->f != stdout && fclose(s->f) != 0)
        s->failed = 1;
    if (s->failed) {
        fprintf(stderr, "soren-gen: error writing %s: %s\n", name, strerror(errno));
        return 1;
    }
    return 0;
}

static int out_of_memory(const char *what)
{
    fprintf(stderr, "soren-gen: out of memory for %s\n", what);
    return 1;
}

/* ---- Random numbers ------------------------------------------------------- */

static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double next_unit(uint64_t *state) { return (double)(next_random(state) >> 11) * 0x1p-53; }

/* Uniform in [0, n), n >= 1 (the modulo bias is below 2^-40 for n < 2^24). */
static uint64_t below(uint64_t *state, uint64_t n) { return next_random(state) % n; }

/* In [0, n), skewed towards 0: n * x^3 for x uniform in [0, 1), in integers
 * (x has 21 bits, x^3 63).  Item 0 is drawn about 10^4 times as often as
 * the middle one. */
static uint64_t skewed(uint64_t *state, uint64_t n)
{
    uint64_t x = next_random(state) >> 43;
    unsigned __int128 cube = (unsigned __int128)(x * x * x) * n;
    return (uint64_t)(cube >> 63);
}

/* A multiple of 1/8 in [lo/8, hi/8): exact in float32. */
static float eighths(uint64_t *state, int64_t lo, int64_t hi)
{
    return (float)(lo + (int64_t)below(state, (uint64_t)(hi - lo))) / 8.0f;
}

/* ---- text and rgb ---------------------------------------------------------- */

/* A length distribution as its quantile function: knot i says that a share
 * of share/10^7 of the draws is at most length/16 bytes long, linearly
 * between knots.  Drawing u uniform in [0, 10^7) and reading the function
 * there draws from the distribution in integers only. */
typedef struct knot {
    uint32_t share;  /* cumulative, in 1/10^7; the last is 10^7 */
    uint32_t length; /* in 1/16 byte */
} knot;

#define SHARES 10000000u

/* Word lengths like those of English documentation text, as shares of the vocabulary
 * (a word's length is a function of its rank, below): median 6 bytes, the
 * longest 30, a mean of 7.66 over the vocabulary.  Drawn by Zipf at the
 * default --vocab and --exponent, where the one-letter first rank is 7% of
 * the words, the words written average 7.22 bytes; --word-length scales the
 * lengths by MEAN/7.22, so the default 7.4 writes words of 7.4 bytes on
 * average, 14.7% of them over 12, the longest 31. */
static const knot word_knots[] = {
    {0, 16},        {300000, 32},   {1000000, 48},  {2200000, 64},  {3400000, 80},
    {4600000, 96},  {5800000, 112}, {6850000, 128}, {7750000, 160}, {8700000, 208},
    {9450000, 272}, {9900000, 400}, {10000000, 480},
};

/* Line lengths like those of prose documentation, without the newline: 8%
 * blank, median 38 bytes, 99th percentile 133, and a heavy tail: one line in
 * 10^5 is over 4 KiB, the longest 10,485 bytes. */
static const knot line_knots[] = {
    {0, 0},           {800000, 0},        {800001, 16},       {2500000, 288},
    {5000000, 608},   {7500000, 960},     {9000000, 1216},    {9700000, 1600},
    {9900000, 2128},  {9990000, 6400},    {9999000, 24576},   {9999900, 65536},
    {10000000, 167760},
};

#define WORD_KNOTS_MEAN 722 /* what word_knots average, written at the defaults, 1/100 byte */
#define WORD_MEAN 740       /* --word-length's default: they are scaled to it */
#define LINE_MEDIAN 38  /* line_knots' median, bytes: --line-length */
#define WORD_LENGTH_MAX 30    /* --word-length's greatest mean */
#define LINE_LENGTH_MAX 100000 /* --line-length's greatest median */

/* The quantile function at u in [0, 10^7), times num/den, in whole bytes. */
static uint64_t quantile(const knot *k, size_t knots, uint64_t u, uint64_t num, uint64_t den)
{
    size_t i = 1;
    while (i + 1 < knots && k[i].share <= u)
        i++;
    uint64_t span = k[i].share - k[i - 1].share;
    uint64_t at = u < k[i - 1].share ? 0 : u - k[i - 1].share;
    if (at > span)
        at = span;
    uint64_t sixteenths = k[i - 1].length * span + (k[i].length - k[i - 1].length) * at;
    return (sixteenths * num / den + 8 * span) / (16 * span);
}

#define WORD_MAX 128 /* letters: the longest word --word-length 30 can draw */
#define WORD_FULL 13 /* letters in base 26 that hold any rank below 26^13 */

/* Word `rank` spelled with n letters (at least the letters rank needs in
 * base 26): the last up to 13 letters are rank times an odd constant, not a
 * multiple of 13, modulo 26^13 (or 26^n), so one-to-one among the ranks of
 * one length; the letters before them come from a hash of the rank.  The
 * same rank is the same word wherever it is drawn, for every seed. */
static void spell(uint64_t rank, size_t n, char *out)
{
    size_t full = n < WORD_FULL ? n : WORD_FULL;
    uint64_t modulus = 1;
    for (size_t k = 0; k < full; k++)
        modulus *= 26;
    uint64_t v = (uint64_t)((unsigned __int128)rank * 0x9e3779b97f4a7c15ull % modulus);
    for (size_t k = n; k > n - full; k--, v /= 26)
        out[k - 1] = (char)('a' + v % 26);
    uint64_t h = rank;
    for (size_t k = 0; k < n - full; k++)
        out[k] = (char)('a' + next_random(&h) % 26);
}

/* The length of word `rank`: the word quantile at a point of the golden-ratio
 * sequence (rank times 2^64/phi, modulo 2^64), so that the most frequent
 * ranks spread over the whole distribution rather than falling where one
 * hash would put them; rank 0 is the shortest.  Never fewer letters than
 * base 26 needs to tell the rank from the others. */
static size_t word_length(const gen_options *o, uint64_t rank)
{
    uint64_t point = rank * 0x9e3779b97f4a7c15ull;
    uint64_t u = (uint64_t)((unsigned __int128)point * SHARES >> 64);
    uint64_t n = quantile(word_knots, sizeof word_knots / sizeof word_knots[0], u,
                          o->word_mean, WORD_KNOTS_MEAN);
    size_t least = 1;
    for (uint64_t r = rank / 26; r; r /= 26)
        least++;
    if (n > WORD_MAX)
        n = WORD_MAX;
    return n < least ? least : (size_t)n;
}

/* Puts what of n bytes fits under the --size limit. */
static void put_upto(sink *s, const char *p, size_t n, uint64_t *written, uint64_t size)
{
    if (*written + n > size)
        n = (size_t)(size - *written);
    sink_put(s, p, n);
    *written += n;
}

/* Zipf-drawn words on lines of drawn lengths: a line takes words while the
 * middle of the next one falls within its length, so lines come out about
 * as long as drawn; a line drawn 0 is blank. */
static int gen_text(const gen_options *o, sink *s)
{
    double *cdf = malloc(o->vocab * sizeof *cdf);
    if (!cdf)
        return out_of_memory("the vocabulary");
    double total = 0;
    for (uint64_t i = 0; i < o->vocab; i++)
        cdf[i] = total += pow((double)(i + 1), -o->exponent);
    uint64_t rng = o->seed, written = 0, on_line = 0, line = 0;
    int fresh = 1; /* the next line's length is still to be drawn */
    char word[WORD_MAX + 1];
    while (written < o->size) {
        double u = next_unit(&rng) * total;
        uint64_t lo = 0, hi = o->vocab - 1;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t len = word_length(o, lo), n = 0;
        for (;;) {
            if (fresh)
                line = quantile(line_knots, sizeof line_knots / sizeof line_knots[0],
                                below(&rng, SHARES), o->line_median, LINE_MEDIAN);
            fresh = 0;
            if (on_line == 0 && line > 0)
                break;
            if (on_line > 0 && on_line + 1 + len / 2 <= line) {
                word[n++] = ' ';
                break;
            }
            put_upto(s, "\n", 1, &written, o->size);
            on_line = 0;
            fresh = 1;
        }
        spell(lo, len, word + n);
        n += len;
        on_line += n;
        put_upto(s, word, n, &written, o->size);
    }
    free(cdf);
    return 0;
}

static int gen_rgb(const gen_options *o, sink *s)
{
    uint64_t rng = o->seed;
    uint8_t palette[3 * 256];
    uint64_t colours = o->colours > 256 ? 256 : o->colours;
    for (size_t i = 0; i < sizeof palette; i++)
        palette[i] = (uint8_t)next_random(&rng);
    for (uint64_t p = 0; p < o->size / 3; p++) {
        uint64_t r = next_random(&rng);
        uint8_t px[3] = {(uint8_t)r, (uint8_t)(r >> 8), (uint8_t)(r >> 16)};
        if (colours)
            memcpy(px, palette + 3 * (r % colours), 3);
        sink_put(s, px, 3);
    }
    return 0;
}

/* ---- weblog ------------------------------------------------------------------ */

/* URL number u, the same for every seed: the runs of one job compare. */
static int weblog_url(uint64_t u, char *out, size_t size)
{
    return snprintf(out, size, "http://www.site%llu.com/page/%llu.html",
                    (unsigned long long)(u % 97), (unsigned long long)u);
}

/* IP number j of the pool: j times an odd constant, plus a seeded offset,
 * modulo 2^32, is one-to-one, so a pool of N gives N distinct addresses. */
static int weblog_ip(uint64_t j, uint32_t offset, char *out, size_t size)
{
    uint32_t a = (uint32_t)j * 0x9e3779b1u + offset;
    return snprintf(out, size, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255,
                    a & 255);
}

#define WEBLOG_RECENT 1024 /* a duplicate copies one of the last this many lines */

typedef struct log_entry {
    uint64_t url, ip, cookie;
} log_entry;

static int gen_weblog(const gen_options *o, sink *s)
{
    uint64_t rng = o->seed;
    uint32_t ip_offset = (uint32_t)next_random(&rng);
    log_entry recent[WEBLOG_RECENT];
    uint64_t lines = 0, written = 0;
    char line[256];
    for (;;) {
        log_entry e;
        uint64_t r = below(&rng, 1000000);
        if (lines > 0 && r < o->dup_ppm) {
            uint64_t back = below(&rng, lines < WEBLOG_RECENT ? lines : WEBLOG_RECENT);
            e = recent[(lines - 1 - back) % WEBLOG_RECENT];
        } else {
            e.url = skewed(&rng, o->urls);
            e.ip = below(&rng, o->ips);
            e.cookie = next_random(&rng);
        }
        int n = weblog_url(e.url, line, sizeof line);
        line[n++] = '\t';
        n += weblog_ip(e.ip, ip_offset, line + n, sizeof line - (size_t)n);
        n += snprintf(line + n, sizeof line - (size_t)n, "\t%016llx\n",
                      (unsigned long long)e.cookie);
        if (written + (uint64_t)n > o->size)
            break;
        sink_put(s, line, (size_t)n);
        written += (uint64_t)n;
        recent[lines++ % WEBLOG_RECENT] = e;
    }
    return 0;
}

/* ---- matrix, features, points ---------------------------------------------- */

static int gen_matrix(const gen_options *o, sink *s)
{
    uint64_t rng = o->seed, n = o->rows * o->cols;
    for (uint64_t i = 0; i < n; i++) {
        float x = eighths(&rng, -32, 32);
        /* The first value is never 0, so no matrix is all zeros. */
        if (i == 0 && x == 0.0f)
            x = 0.125f;
        sink_f32(s, x);
    }
    return 0;
}

/* Term weights: a quarter of the features are absent (0), the rest
 * multiples of 1/8 in (0, 4); every document has a non-zero one, so every
 * cosine is defined. */
static int gen_features(const gen_options *o, sink *s)
{
    uint64_t rng = o->seed;
    for (uint64_t d = 0; d < o->docs; d++) {
        uint64_t forced = below(&rng, o->dims);
        for (uint64_t k = 0; k < o->dims; k++) {
            int absent = below(&rng, 4) == 0 && k != forced;
            sink_f32(s, absent ? 0.0f : eighths(&rng, 1, 32));
        }
    }
    return 0;
}

/* The points; with --centroids K the first K of them (the same draws, so
 * the same points as those of any --count of the seed) in the layout of
 * kmeans's centroids parameter and output: per point its coordinates, then
 * its count, 1, all float64. */
static int gen_points(const gen_options *o, sink *s)
{
    uint64_t rng = o->seed;
    int centroids = (o->given & O_CENTROIDS) != 0;
    uint64_t n = centroids ? o->centroids : o->count;
    if (o->clusters > SIZE_MAX / sizeof(float) / o->dims)
        return out_of_memory("the centres");
    float *centres = malloc(o->clusters * o->dims * sizeof *centres);
    if (!centres)
        return out_of_memory("the centres");
    for (uint64_t i = 0; i < o->clusters * o->dims; i++)
        centres[i] = eighths(&rng, -512, 512);
    for (uint64_t p = 0; p < n; p++) {
        const float *c = centres + below(&rng, o->clusters) * o->dims;
        for (uint64_t k = 0; k < o->dims; k++) {
            float x = c[k] + eighths(&rng, -32, 32);
            if (centroids)
                sink_f64(s, x);
            else
                sink_f32(s, x);
        }
        if (centroids)
            sink_f64(s, 1.0);
    }
    free(centres);
    return 0;
}

/* ---- html ------------------------------------------------------------------- */

static const char *const html_words[] = {"the", "page", "of", "data", "map", "reduce", "gpu",
                                         "and", "link", "index", "to", "a", "web", "log"};
#define HTML_WORDS (sizeof html_words / sizeof html_words[0])

/* Appends up to 12 words of text to buf at *n. */
static void html_text(uint64_t *rng, char *buf, size_t size, int *n)
{
    uint64_t words = 1 + below(rng, 12);
    for (uint64_t w = 0; w < words; w++)
        *n += snprintf(buf + *n, size - (size_t)*n, "%s%s", w ? " " : "",
                       html_words[below(rng, HTML_WORDS)]);
}

/* One page: a title line, then lines of text with a link in most of them
 * (some lines hold two), links-per-page links in all. */
static size_t html_page(const gen_options *o, uint64_t *rng, uint64_t page, char **buf,
                        size_t *cap)
{
    size_t need = 256 + o->links * 320;
    if (*cap < need) {
        char *bigger = realloc(*buf, need);
        if (!bigger)
            return 0;
        *buf = bigger;
        *cap = need;
    }
    char *b = *buf;
    int n = snprintf(b, *cap, "<html><head><title>page %llu</title></head><body>\n",
                     (unsigned long long)page);
    for (uint64_t l = 0; l < o->links;) {
        n += snprintf(b + n, *cap - (size_t)n, "<p>");
        html_text(rng, b, *cap, &n);
        uint64_t on_line = l + 1 < o->links && below(rng, 4) == 0 ? 2 : 1;
        for (uint64_t k = 0; k < on_line; k++, l++) {
            n += snprintf(b + n, *cap - (size_t)n, " <a href=\"");
            n += weblog_url(skewed(rng, o->urls), b + n, *cap - (size_t)n);
            n += snprintf(b + n, *cap - (size_t)n, "\">");
            html_text(rng, b, *cap, &n);
            n += snprintf(b + n, *cap - (size_t)n, "</a>");
        }
        n += snprintf(b + n, *cap - (size_t)n, "</p>\n");
    }
    n += snprintf(b + n, *cap - (size_t)n, "</body></html>\n");
    return (size_t)n;
}

static int gen_html(const gen_options *o, sink *s)
{
    uint64_t rng = o->seed, written = 0;
    char *buf = NULL;
    size_t cap = 0;
    int by_size = !(o->given & O_PAGES);
    for (uint64_t page = 0; by_size || page < o->pages; page++) {
        size_t n = html_page(o, &rng, page, &buf, &cap);
        if (n == 0) {
            free(buf);
            return out_of_memory("a page");
        }
        if (by_size && written + n > o->size)
            break;
        sink_put(s, buf, n);
        written += n;
    }
    free(buf);
    return 0;
}

/* ---- svm -------------------------------------------------------------------------- */

/* Adult's 123 features as LibSVM's a9a encodes them: 14 attributes one-hot
 * (the continuous ones in bins), one feature set in each. */
static const unsigned adult_groups[] = {5, 8, 5, 16, 5, 7, 14, 6, 5, 2, 2, 2, 5, 41};
#define ADULT_GROUPS (sizeof adult_groups / sizeof adult_groups[0])

/* One preset's seeded model, shared by its training and test rows: the
 * background distribution of every feature, and the prototypes of each
 * class, drawn from it.  Values are in 1/256. */
typedef struct svm_model {
    const svm_preset *p;
    uint32_t *odds;  /* groups: the weight of each value; bits: the chance of
                        being set, in 1/65536 */
    int16_t *protos; /* class c's prototype j at (c * prototypes + j) * features */
} svm_model;

/* A value of feature k from its background distribution (bits, pixels). */
static int16_t svm_background(const svm_model *m, uint64_t *rng, unsigned k)
{
    const svm_preset *p = m->p;
    if (p->form == SVM_BITS)
        return below(rng, 65536) < m->odds[k] ? 256 : 0;
    if (below(rng, 1000) >= p->ink)
        return (int16_t)p->lo;
    return (int16_t)(p->lo + 1 + (int)below(rng, (uint64_t)(256 - p->lo)));
}

/* Sets one value of the group at features [first, first + n), by weight. */
static void svm_group(const svm_model *m, uint64_t *rng, unsigned first, unsigned n,
                      int16_t *x)
{
    uint64_t total = 0;
    for (unsigned v = 0; v < n; v++)
        total += m->odds[first + v];
    uint64_t u = below(rng, total);
    unsigned v = 0;
    while (u >= m->odds[first + v])
        u -= m->odds[first + v++];
    memset(x + first, 0, n * sizeof *x);
    x[first + v] = 256;
}

/* Redraws each feature (group) of x from the background with probability
 * per mille; with per_mille 1000, draws x afresh. */
static void svm_redraw(const svm_model *m, uint64_t *rng, unsigned per_mille, int16_t *x)
{
    if (m->p->form == SVM_GROUPS) {
        for (unsigned g = 0, first = 0; g < ADULT_GROUPS; first += adult_groups[g++])
            if (below(rng, 1000) < per_mille)
                svm_group(m, rng, first, adult_groups[g], x);
        return;
    }
    for (unsigned k = 0; k < m->p->features; k++)
        if (below(rng, 1000) < per_mille)
            x[k] = svm_background(m, rng, k);
}

static void svm_model_free(svm_model *m)
{
    free(m->odds);
    free(m->protos);
}

/* Draws the model from the seed itself (rows come from streams of it). */
static int svm_model_init(svm_model *m, const svm_preset *p, uint64_t seed)
{
    uint64_t rng = seed;
    size_t protos = 2 * (size_t)p->prototypes;
    m->p = p;
    m->odds = calloc(p->features, sizeof *m->odds);
    m->protos = calloc(protos * p->features, sizeof *m->protos);
    if (!m->odds || !m->protos) {
        svm_model_free(m);
        return 0;
    }
    /* Group values weigh 1 to 128 (a few of each group are common, as in
     * Adult); bits are set with chances spread evenly from 0 to 2 * ink. */
    for (unsigned k = 0; k < p->features; k++)
        m->odds[k] = p->form == SVM_GROUPS ? 1u << below(&rng, 8)
                                           : (uint32_t)below(&rng, 2 * p->ink * 65536 / 1000 + 1);
    for (size_t j = 0; j < protos; j++)
        svm_redraw(m, &rng, 1000, m->protos + j * p->features);
    return 1;
}

/* Triangular noise of up to jitter either way on every pixel not at lo,
 * kept within (lo, 1]. */
static void svm_jitter(const svm_preset *p, uint64_t *rng, int16_t *x)
{
    int a = (int)p->jitter;
    for (unsigned k = 0; k < p->features; k++) {
        if (x[k] == p->lo)
            continue;
        int v = x[k] + (int)below(rng, (uint64_t)a + 1) + (int)below(rng, (uint64_t)a + 1) - a;
        x[k] = (int16_t)(v <= p->lo ? p->lo + 1 : v > 256 ? 256 : v);
    }
}

/* One example: a class, one of its prototypes, some features redrawn,
 * pixels jittered; its label flipped with probability flip per mille. */
static int svm_example(const svm_model *m, uint64_t *rng, int16_t *x)
{
    const svm_preset *p = m->p;
    uint64_t c = below(rng, 2), j = below(rng, p->prototypes);
    memcpy(x, m->protos + (c * p->prototypes + j) * p->features, p->features * sizeof *x);
    svm_redraw(m, rng, p->redraw, x);
    if (p->form == SVM_PIXELS)
        svm_jitter(p, rng, x);
    int plus = c == 1, flipped = below(rng, 1000) < p->flip;
    return plus != flipped ? 1 : -1;
}

/* v/256 in decimal, exactly and with the fewest digits (1/256 is
 * 0.00390625, so eight places always do). */
static int format_256ths(int v, char *out)
{
    unsigned a = (unsigned)(v < 0 ? -v : v), frac = a % 256 * 390625u, places = 8;
    int n = sprintf(out, "%s%u", v < 0 ? "-" : "", a / 256);
    if (!frac)
        return n;
    for (; frac % 10 == 0; frac /= 10)
        places--;
    return n + sprintf(out + n, ".%0*u", (int)places, frac);
}

/* LABEL INDEX:VALUE ..., indices from 1, zeros left out. */
static void svm_line(sink *s, int label, const int16_t *x, unsigned features)
{
    char item[32];
    sink_put(s, label > 0 ? "+1" : "-1", 2);
    for (unsigned k = 0; k < features; k++)
        if (x[k]) {
            int n = sprintf(item, " %u:", k + 1);
            n += format_256ths(x[k], item + n);
            sink_put(s, item, (size_t)n);
        }
    sink_put(s, "\n", 1);
}

/* Stream n of the seed: the training rows are stream 1, the test rows 2. */
static uint64_t svm_stream(uint64_t seed, uint64_t n)
{
    uint64_t state = seed ^ n * 0xd6e8feb86659fd93ull;
    return next_random(&state);
}

static int gen_svm(const gen_options *o, sink *s)
{
    const svm_preset *p = o->svm;
    if (o->given & O_PARAMS) {
        char line[64];
        sink_put(s, line, (size_t)snprintf(line, sizeof line, "%s %s\n", p->c, p->gamma));
        return 0;
    }
    int test = (o->given & O_TEST) != 0;
    uint64_t rows = o->given & O_ROWS ? o->rows : test ? p->rows / 5 : p->rows;
    uint64_t rng = svm_stream(o->seed, test ? 2 : 1);
    svm_model m;
    int16_t *x = malloc(p->features * sizeof *x);
    if (!x || !svm_model_init(&m, p, o->seed)) {
        free(x);
        return out_of_memory("the model");
    }
    for (uint64_t r = 0; r < rows; r++) {
        int label = svm_example(&m, &rng, x);
        svm_line(s, label, x, p->features);
    }
    svm_model_free(&m);
    free(x);
    return 0;
}

/* ---- main ---------------------------------------------------------------------- */

/* The sizes a kind needs, and the defaults of the others. */
static int check_sizes(kind k, gen_options *o)
{
    static const struct {
        kind k;
        unsigned need;
        const char *text;
    } needs[] = {
        {TEXT, O_SIZE, "text needs --size (or --preset)"},
        {RGB, O_SIZE, "rgb needs --size (or --preset)"},
        {WEBLOG, O_SIZE, "weblog needs --size (or --preset)"},
        {MATRIX, O_ROWS | O_COLS, "matrix needs --rows and --cols (or --preset)"},
        {FEATURES, O_DOCS | O_DIMS, "features needs --docs and --dims (or --preset)"},
        {POINTS, O_DIMS, "points needs --dims, and --count or --centroids"},
    };
    for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++)
        if (needs[i].k == k && (o->given & needs[i].need) != needs[i].need)
            return usage_error(needs[i].text, NULL);
    if (k == POINTS && !(o->given & (O_COUNT | O_CENTROIDS)))
        return usage_error("points needs --dims, and --count or --centroids", NULL);
    if (k == POINTS && (o->given & O_COUNT) && (o->given & O_CENTROIDS) &&
        o->centroids > o->count)
        return usage_error("--centroids K writes the first K of the --count points: give K at "
                           "most --count", NULL);
    if (k == HTML && !(o->given & (O_SIZE | O_PAGES)))
        return usage_error("html needs --pages or --size (or --preset)", NULL);
    if (k == HTML && (o->given & O_SIZE) && (o->given & O_PAGES))
        return usage_error("html takes --pages or --size, not both", NULL);
    if (k == SVM && !o->svm)
        return usage_error("svm needs --preset adult, web, usps, face or mnist", NULL);
    if (k == SVM && (o->given & O_PARAMS) && (o->given & (O_ROWS | O_TEST)))
        return usage_error("--print-params prints the preset's C and gamma only: leave out "
                           "--rows and --test", NULL);
    return -1;
}

static const struct option long_options[] = {
    {"size", required_argument, 0, 's'},      {"vocab", required_argument, 0, 'w'},
    {"exponent", required_argument, 0, 'e'},  {"colours", required_argument, 0, 'c'},
    {"urls", required_argument, 0, 'U'},      {"ips", required_argument, 0, 'I'},
    {"dup-rate", required_argument, 0, 'D'},  {"rows", required_argument, 0, 'R'},
    {"cols", required_argument, 0, 'C'},      {"docs", required_argument, 0, 'N'},
    {"dims", required_argument, 0, 'd'},      {"count", required_argument, 0, 'n'},
    {"clusters", required_argument, 0, 'k'},  {"pages", required_argument, 0, 'p'},
    {"centroids", required_argument, 0, 'K'},
    {"word-length", required_argument, 0, 'A'}, {"line-length", required_argument, 0, 'B'},
    {"links-per-page", required_argument, 0, 'L'},
    {"test", no_argument, 0, 't'},            {"print-params", no_argument, 0, 'P'},
    {"preset", required_argument, 0, 'T'},    {"seed", required_argument, 0, 'r'},
    {"output", required_argument, 0, 'o'},    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, 'V'},         {0, 0, 0, 0}};

/* The O_* bit of a counted option's letter, where it stores its value, and
 * whether 0 is allowed. */
static int counted_option(int opt, gen_options *o, unsigned *bit, uint64_t **dst, int *zero_ok)
{
    static const struct {
        int opt;
        unsigned bit;
        size_t field;
        int zero_ok;
    } table[] = {
        {'w', O_VOCAB, offsetof(gen_options, vocab), 0},
        {'c', O_COLOURS, offsetof(gen_options, colours), 1},
        {'U', O_URLS, offsetof(gen_options, urls), 0},
        {'I', O_IPS, offsetof(gen_options, ips), 0},
        {'R', O_ROWS, offsetof(gen_options, rows), 0},
        {'C', O_COLS, offsetof(gen_options, cols), 0},
        {'N', O_DOCS, offsetof(gen_options, docs), 0},
        {'d', O_DIMS, offsetof(gen_options, dims), 0},
        {'n', O_COUNT, offsetof(gen_options, count), 0},
        {'k', O_CLUSTERS, offsetof(gen_options, clusters), 0},
        {'p', O_PAGES, offsetof(gen_options, pages), 0},
        {'L', O_LINKS, offsetof(gen_options, links), 0},
        {'K', O_CENTROIDS, offsetof(gen_options, centroids), 0},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].opt == opt) {
            *bit = table[i].bit;
            *dst = (uint64_t *)((char *)o + table[i].field);
            *zero_ok = table[i].zero_ok;
            return 1;
        }
    return 0;
}

/* The name of an O_* bit's option, for "does not apply" errors. */
static const char *option_name(unsigned bit)
{
    static const char *const names[] = {"--size", "--vocab", "--exponent", "--colours",
                                        "--urls", "--ips", "--dup-rate", "--rows", "--cols",
                                        "--docs", "--dims", "--count", "--clusters", "--pages",
                                        "--links-per-page", "--centroids", "--test",
                                        "--print-params", "--word-length", "--line-length"};
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (bit == 1u << i)
            return names[i];
    return "?";
}

static int parse_options(int argc, char **argv, gen_options *o, const char **preset_name)
{
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":s:o:hV", long_options, NULL)) != -1) {
        unsigned bit;
        uint64_t *dst;
        int zero_ok;
        soren_number number;
        if (counted_option(opt, o, &bit, &dst, &zero_ok)) {
            if (!parse_count(optarg, dst, 0) || (!zero_ok && *dst == 0))
                return usage_error(zero_ok ? "expected a count, got \""
                                           : "expected a positive count, got \"", optarg);
            o->given |= bit;
            continue;
        }
        switch (opt) {
        case 's':
            if (!parse_count(optarg, &o->size, 1))
                return usage_error("--size: expected a size such as 100M, got \"", optarg);
            o->given |= O_SIZE;
            break;
        case 'e':
            if (soren_number_parse(optarg, SOREN_NUMBER_F64, 0, &number, NULL, 0) != 0 ||
                !(number.f64 >= 0 && number.f64 <= 10))
                return usage_error("--exponent: expected a number from 0 to 10, got \"", optarg);
            o->exponent = number.f64;
            o->given |= O_EXPONENT;
            break;
        case 'D':
            if (!parse_ppm(optarg, &o->dup_ppm))
                return usage_error("--dup-rate: expected a fraction from 0 to 1 with at most "
                                   "6 decimals, got \"", optarg);
            o->given |= O_DUP_RATE;
            break;
        case 'A':
            if (!parse_fixed(optarg, 2, 100 * WORD_LENGTH_MAX, &o->word_mean) ||
                o->word_mean < 100)
                return usage_error("--word-length: expected a mean from 1 to 30 bytes with at "
                                   "most 2 decimals, got \"", optarg);
            o->given |= O_WORD_LENGTH;
            break;
        case 'B':
            if (!parse_count(optarg, &o->line_median, 0) || o->line_median == 0 ||
                o->line_median > LINE_LENGTH_MAX)
                return usage_error("--line-length: expected a median from 1 to 100000 bytes, "
                                   "got \"", optarg);
            o->given |= O_LINE_LENGTH;
            break;
        case 'T': *preset_name = optarg; break;
        case 't': o->given |= O_TEST; break;
        case 'P': o->given |= O_PARAMS; break;
        case 'r':
            if (!parse_count(optarg, &o->seed, 0))
                return usage_error("--seed: expected a number, got \"", optarg);
            break;
        case 'o': o->output = optarg; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case 'V': printf("soren-gen %s\n", PACKAGE_VERSION); return 0;
        case ':': return usage_error("option needs a value: ", argv[optind - 1]);
        default: return usage_error("unknown option ", argv[optind - 1]);
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    gen_options o = {.vocab = 1000000, .seed = 1, .exponent = 1.0, .urls = 10000,
                     .word_mean = WORD_MEAN, .line_median = LINE_MEDIAN,
                     .ips = 65536, .dup_ppm = 100000, .clusters = 8, .links = 8};
    const char *preset_name = NULL;
    int rc = parse_options(argc, argv, &o, &preset_name);
    if (rc >= 0)
        return rc;
    if (optind != argc - 1)
        return usage_error("expected one kind of data: text, rgb, weblog, matrix, features, "
                           "points, html or svm", NULL);
    kind k = KIND_COUNT;
    for (int i = 0; i < KIND_COUNT; i++)
        if (strcmp(argv[optind], kind_names[i]) == 0)
            k = (kind)i;
    if (k == KIND_COUNT)
        return usage_error("unknown kind of data (text, rgb, weblog, matrix, features, points, "
                           "html or svm): \"", argv[optind]);
    unsigned stray = o.given & ~kind_options[k];
    if (stray) {
        fprintf(stderr, "soren-gen: %s does not apply to %s\nTry 'soren-gen --help'.\n",
                option_name(stray & -stray), kind_names[k]);
        return 2;
    }
    if (preset_name && (rc = apply_preset(preset_name, k, &o)) >= 0)
        return rc;
    if ((rc = check_sizes(k, &o)) >= 0)
        return rc;

    static int (*const generators[KIND_COUNT])(const gen_options *, sink *) = {
        gen_text, gen_rgb, gen_weblog, gen_matrix, gen_features, gen_points, gen_html, gen_svm};
    static sink s;
    s.f = o.output ? fopen(o.output, "wb") : stdout;
    if (!s.f) {
        fprintf(stderr, "soren-gen: cannot write %s: %s\n", o.output, strerror(errno));
        return 1;
    }
    rc = generators[k](&o, &s);
    int close_rc = sink_close(&s, o.output ? o.output : "standard output");
    /* A failed run must not leave a file that looks whole. */
    if ((rc || close_rc) && o.output)
        remove(o.output);
    return rc ? rc : close_rc;
}
