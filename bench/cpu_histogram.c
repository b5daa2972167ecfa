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
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* MAP_POPULATE */
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

static int usage(void)
{
    fprintf(stderr, "usage: cpu-histogram [--threads N] FILE\n");
    return 2;
}

int main(int argc, char **argv)
{
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            char *end;
            threads = strtol(argv[++i], &end, 10);
            if (*end || threads < 1 || threads > 4096) {
                fprintf(stderr, "cpu-histogram: --threads takes 1 to 4096, not %s\n", argv[i]);
                return 2;
            }
        } else if (!path && argv[i][0] != '-') {
            path = argv[i];
        } else {
            return usage();
        }
    }
    if (!path)
        return usage();
    if (threads < 1)
        threads = 1;

    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "cpu-histogram: cannot read %s: %s\n", path, strerror(errno));
        return 1;
    }
    uint64_t pixels = (uint64_t)st.st_size / 3;
    const uint8_t *data = NULL;
    if (st.st_size > 0) {
        data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (data == MAP_FAILED) {
            fprintf(stderr, "cpu-histogram: cannot map %s: %s\n", path, strerror(errno));
            return 1;
        }
    }
    close(fd);

    share *shares = calloc((size_t)threads, sizeof *shares);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    if (!shares || !tid) {
        fprintf(stderr, "cpu-histogram: out of memory for %ld threads\n", threads);
        return 1;
    }
    for (long t = 0; t < threads; t++) {
        uint64_t first = pixels * (uint64_t)t / (uint64_t)threads;
        uint64_t last = pixels * (uint64_t)(t + 1) / (uint64_t)threads;
        shares[t].pixels = data + first * 3;
        shares[t].count = last - first;
    }
    for (long t = 1; t < threads; t++)
        if (pthread_create(&tid[t], NULL, count_share, &shares[t]) != 0) {
            fprintf(stderr, "cpu-histogram: cannot start thread %ld\n", t);
            return 1;
        }
    count_share(&shares[0]);
    for (long t = 1; t < threads; t++)
        pthread_join(tid[t], NULL);

    for (int k = 0; k < BINS; k++) {
        uint64_t n = 0;
        for (long t = 0; t < threads; t++)
            n += shares[t].bins[k];
        if (n)
            printf("%d\t%" PRIu32 "\n", k, (uint32_t)n);
    }
    free(shares);
    free(tid);
    if (data)
        munmap((void *)data, (size_t)st.st_size);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "cpu-histogram: cannot write the output: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
