/*
 * cpu_histogram.c - the CPU baseline of the histogram plugin: plain C and
 * pthreads, no Soren.
 *
 *   cpu-histogram [--threads N] FILE
 *
 * FILE is raw 24-bit RGB (a trailing partial pixel is ignored).  Each thread
 * counts its contiguous share of the pixels into its own 768 counters (bins
 * 0-255 red, 256-511 green, 512-767 blue, as plugins/histogram numbers
 * them); the main thread adds the threads' counters.  The output is
 * `soren-host run histogram --device cpu`'s: "BIN\tCOUNT" for every bin
 * some pixel falls in, in bin order, counts as u32 (wrapping, as the
 * plugin's sum does), so tests/cpu-baselines.sh compares the two byte for
 * byte; bench/results/cpu/histogram.md times them.
 */
#include "cpu_baseline.h"

#include <inttypes.h>

#define BINS 768

typedef struct share {
    const uint8_t *pixels;
    uint64_t count;        /* pixels of this share */
    uint64_t bins[BINS];
} share;

static void *count_share(void *arg)
{
    share *s = arg;
    /* Three arrays, one per channel: each pixel's three increments go to
     * different cache lines, so they do not wait on each other. */
    uint64_t *r = s->bins, *g = s->bins + 256, *b = s->bins + 512;
    const uint8_t *p = s->pixels;
    for (uint64_t i = 0; i < s->count; i++, p += 3) {
        r[p[0]]++;
        g[p[1]]++;
        b[p[2]]++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    static const char name[] = "cpu-histogram";
    const char *path;
    long threads;
    baseline_args(argc, argv, name, "FILE", 1, &path, &threads);
    uint64_t size;
    const uint8_t *data = baseline_map(name, path, &size);
    uint64_t pixels = size / 3;

    share *shares = baseline_calloc(name, (size_t)threads, sizeof *shares, "the threads");
    for (long t = 0; t < threads; t++) {
        uint64_t first = pixels * (uint64_t)t / (uint64_t)threads;
        uint64_t last = pixels * (uint64_t)(t + 1) / (uint64_t)threads;
        shares[t].pixels = data + first * 3;
        shares[t].count = last - first;
    }
    baseline_run(name, threads, count_share, shares, sizeof *shares);

    for (int k = 0; k < BINS; k++) {
        uint64_t n = 0;
        for (long t = 0; t < threads; t++)
            n += shares[t].bins[k];
        if (n)
            printf("%d\t%" PRIu32 "\n", k, (uint32_t)n);
    }
    free(shares);
    baseline_unmap(data, size);
    return baseline_done(name);
}
