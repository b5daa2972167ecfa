/*
 * soren-gen - seeded, deterministic inputs for Soren's jobs and benchmarks:
 * the same seed gives the same bytes on any machine.
 *
 *   soren-gen text --size SIZE [--vocab N] [--exponent S] [--seed N] [-o FILE]
 *       Zipf-distributed words (word i is drawn with weight 1/(i+1)^S), about
 *       12 words a line.  Word i is i written in base 26 with letters, so the
 *       most frequent words are the shortest, as in natural text.
 *   soren-gen rgb --size SIZE [--colours N] [--seed N] [-o FILE]
 *       Raw 24-bit RGB pixels (SIZE rounded down to whole pixels): uniform,
 *       or drawn from N random colours (a low-entropy image).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static const char usage_text[] =
    "Usage: soren-gen text --size SIZE [--vocab N] [--exponent S] [--seed N] [-o FILE]\n"
    "       soren-gen rgb --size SIZE [--colours N] [--seed N] [-o FILE]\n"
    "\n"
    "Write seeded, deterministic input data (the same seed gives the same bytes).\n"
    "\n"
    "  text     Zipf-distributed words, about 12 a line (default vocabulary\n"
    "           1000000 words, exponent 1.0)\n"
    "  rgb      raw 24-bit RGB pixels, uniform or from --colours N colours\n"
    "\n"
    "  -s, --size SIZE      bytes to write; K, M, G suffixes (powers of 1024)\n"
    "      --vocab N        distinct words (text)\n"
    "      --exponent S     Zipf exponent (text)\n"
    "      --colours N      number of distinct colours; 0 for uniform (rgb)\n"
    "      --seed N         random seed (default 1)\n"
    "  -o, --output FILE    write to FILE instead of standard output\n"
    "  -h, --help           show this help\n"
    "  -V, --version        show the version\n";

typedef struct gen_options {
    uint64_t size, vocab, colours, seed;
    double exponent;
    const char *output;
} gen_options;

static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double next_unit(uint64_t *state) { return (double)(next_random(state) >> 11) * 0x1p-53; }

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "soren-gen: %s%s%s\nTry 'soren-gen --help'.\n", what, arg ? arg : "",
            arg ? "\"" : "");
    return 2;
}

static int parse_count(const char *text, uint64_t *out, int sizes)
{
    char *end = NULL;
    errno = 0;
    if (!*text || *text == '-')
        return 0;
    unsigned long long n = strtoull(text, &end, 10);
    unsigned shift = 0;
    if (sizes && (*end == 'K' || *end == 'k'))
        shift = 10;
    else if (sizes && (*end == 'M' || *end == 'm'))
        shift = 20;
    else if (sizes && (*end == 'G' || *end == 'g'))
        shift = 30;
    if (shift)
        end++;
    if (errno || *end || n > (UINT64_MAX >> shift))
        return 0;
    *out = (uint64_t)n << shift;
    return 1;
}

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

/* Word i spelled in base 26: a, b, ..., z, ba, bb, ... */
static size_t spell(uint64_t i, char *out)
{
    char tmp[16];
    size_t n = 0;
    do {
        tmp[n++] = (char)('a' + i % 26);
        i /= 26;
    } while (i);
    for (size_t k = 0; k < n; k++)
        out[k] = tmp[n - 1 - k];
    return n;
}

static int gen_text(const gen_options *o, sink *s)
{
    double *cdf = malloc(o->vocab * sizeof *cdf);
    if (!cdf) {
        fprintf(stderr, "soren-gen: out of memory for a vocabulary of %llu words\n",
                (unsigned long long)o->vocab);
        return 1;
    }
    double total = 0;
    for (uint64_t i = 0; i < o->vocab; i++)
        cdf[i] = total += pow((double)(i + 1), -o->exponent);
    uint64_t rng = o->seed, written = 0, on_line = 0;
    char word[20];
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
        size_t n = spell(lo, word);
        word[n++] = ++on_line % 12 == 0 ? '\n' : ' ';
        if (written + n > o->size)
            n = (size_t)(o->size - written);
        sink_put(s, word, n);
        written += n;
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

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"size", required_argument, 0, 's'},   {"vocab", required_argument, 0, 'w'},
        {"exponent", required_argument, 0, 'e'}, {"colours", required_argument, 0, 'c'},
        {"seed", required_argument, 0, 'r'},   {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},         {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    gen_options o = {.vocab = 1000000, .seed = 1, .exponent = 1.0};
    int have_size = 0, opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":s:o:hV", options, NULL)) != -1) {
        char *end = NULL;
        switch (opt) {
        case 's':
            if (!parse_count(optarg, &o.size, 1))
                return usage_error("--size: expected a size such as 100M, got \"", optarg);
            have_size = 1;
            break;
        case 'w':
            if (!parse_count(optarg, &o.vocab, 0) || o.vocab == 0)
                return usage_error("--vocab: expected a positive count, got \"", optarg);
            break;
        case 'c':
            if (!parse_count(optarg, &o.colours, 0))
                return usage_error("--colours: expected a count, got \"", optarg);
            break;
        case 'r':
            if (!parse_count(optarg, &o.seed, 0))
                return usage_error("--seed: expected a number, got \"", optarg);
            break;
        case 'e':
            o.exponent = strtod(optarg, &end);
            if (!*optarg || *end || !(o.exponent >= 0 && o.exponent <= 10))
                return usage_error("--exponent: expected a number from 0 to 10, got \"", optarg);
            break;
        case 'o': o.output = optarg; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case 'V': printf("soren-gen %s\n", PACKAGE_VERSION); return 0;
        case ':': return usage_error("option needs a value: ", argv[optind - 1]);
        default: return usage_error("unknown option ", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return usage_error("expected one kind of data: text or rgb", NULL);
    const char *kind = argv[optind];
    if (strcmp(kind, "text") != 0 && strcmp(kind, "rgb") != 0)
        return usage_error("unknown kind of data (text or rgb): \"", kind);
    if (!have_size)
        return usage_error("--size is required", NULL);

    static sink s;
    s.f = o.output ? fopen(o.output, "wb") : stdout;
    if (!s.f) {
        fprintf(stderr, "soren-gen: cannot write %s: %s\n", o.output, strerror(errno));
        return 1;
    }
    int rc = strcmp(kind, "text") == 0 ? gen_text(&o, &s) : gen_rgb(&o, &s);
    int close_rc = sink_close(&s, o.output ? o.output : "standard output");
    return rc ? rc : close_rc;
}
