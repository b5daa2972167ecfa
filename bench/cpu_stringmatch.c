/*
 * cpu_stringmatch.c - the CPU baseline of the stringmatch plugin: plain C
 * and pthreads, no Soren.
 *
 *   cpu-stringmatch [--threads N] PATTERN FILE
 *
 * Every byte offset where PATTERN starts in FILE (overlapping matches all
 * count), with the offset of the line it is in, as plugins/stringmatch
 * finds them: a line ends before its '\n', so a pattern holding '\n' and
 * an empty one match nothing.  Each thread searches its contiguous share
 * of the offsets with memmem, reading up to strlen(PATTERN) - 1 bytes past
 * it; the shares are printed in order, which is the key order.  The output
 * is `soren-host run stringmatch --device cpu -p pattern=PATTERN`'s:
 * "OFFSET\tLINE", so tests/cpu-baselines.sh compares them byte for byte.
 */
#include "cpu_baseline.h"

#include <inttypes.h>

typedef struct share {
    const uint8_t *data;
    uint64_t size;           /* of the whole file */
    uint64_t first, last;    /* matches starting in [first, last) */
    const uint8_t *pattern;
    size_t pattern_size;
    uint64_t *pairs;         /* offset, line; count of each */
    uint64_t count, cap;
    int failed;
} share;

static void *search_share(void *arg)
{
    share *s = arg;
    const uint8_t *d = s->data;
    size_t m = s->pattern_size;
    if (s->first >= s->last || m > s->size)
        return NULL;
    /* The line of the share's first offset; then each match moves it on
     * past the newlines between the previous match and this one. */
    const uint8_t *nl = s->first ? memrchr(d, '\n', (size_t)s->first) : NULL;
    uint64_t line = nl ? (uint64_t)(nl - d) + 1 : 0, scanned = s->first;
    uint64_t stop = s->last + m - 1 < s->size ? s->last + m - 1 : s->size;
    uint64_t at = s->first;
    for (;;) {
        const uint8_t *hit = memmem(d + at, (size_t)(stop - at), s->pattern, m);
        if (!hit)
            break;
        uint64_t i = (uint64_t)(hit - d);
        if (i >= s->last)
            break;
        nl = memrchr(d + scanned, '\n', (size_t)(i - scanned));
        if (nl)
            line = (uint64_t)(nl - d) + 1;
        scanned = i;
        if (s->count == s->cap) {
            uint64_t cap = s->cap ? s->cap * 2 : 4096;
            uint64_t *p = realloc(s->pairs, cap * 2 * sizeof *p);
            if (!p) {
                s->failed = 1;
                return NULL;
            }
            s->pairs = p;
            s->cap = cap;
        }
        s->pairs[2 * s->count] = i;
        s->pairs[2 * s->count + 1] = line;
        s->count++;
        at = i + 1;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    static const char name[] = "cpu-stringmatch";
    const char *args[2];
    long threads;
    baseline_args(argc, argv, name, "PATTERN FILE", 2, args, &threads);
    const char *pattern = args[0];
    size_t m = strlen(pattern);
    uint64_t size;
    const uint8_t *data = baseline_map(name, args[1], &size);

    share *shares = baseline_calloc(name, (size_t)threads, sizeof *shares, "the threads");
    int none = m == 0 || memchr(pattern, '\n', m) != NULL;
    for (long t = 0; t < threads; t++)
        shares[t] = (share){
            .data = data,
            .size = size,
            .first = none ? 0 : size * (uint64_t)t / (uint64_t)threads,
            .last = none ? 0 : size * (uint64_t)(t + 1) / (uint64_t)threads,
            .pattern = (const uint8_t *)pattern,
            .pattern_size = m,
        };
    baseline_run(name, threads, search_share, shares, sizeof *shares);

    for (long t = 0; t < threads; t++) {
        if (shares[t].failed) {
            fprintf(stderr, "%s: out of memory for the matches\n", name);
            return 1;
        }
        for (uint64_t k = 0; k < shares[t].count; k++)
            printf("%" PRIu64 "\t%" PRIu64 "\n", shares[t].pairs[2 * k],
                   shares[t].pairs[2 * k + 1]);
        free(shares[t].pairs);
    }
    free(shares);
    baseline_unmap(data, size);
    return baseline_done(name);
}
