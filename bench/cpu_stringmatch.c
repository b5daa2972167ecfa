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
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem, memrchr, MAP_POPULATE */
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

static int usage(void)
{
    fprintf(stderr, "usage: cpu-stringmatch [--threads N] PATTERN FILE\n");
    return 2;
}

int main(int argc, char **argv)
{
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    const char *args[2] = {NULL, NULL};
    int nargs = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            char *end;
            threads = strtol(argv[++i], &end, 10);
            if (*end || threads < 1 || threads > 4096) {
                fprintf(stderr, "cpu-stringmatch: --threads takes 1 to 4096, not %s\n",
                        argv[i]);
                return 2;
            }
        } else if (nargs < 2) {
            args[nargs++] = argv[i];
        } else {
            return usage();
        }
    }
    if (nargs != 2)
        return usage();
    if (threads < 1)
        threads = 1;
    const char *pattern = args[0], *path = args[1];
    size_t m = strlen(pattern);

    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "cpu-stringmatch: cannot read %s: %s\n", path, strerror(errno));
        return 1;
    }
    uint64_t size = (uint64_t)st.st_size;
    const uint8_t *data = (const uint8_t *)"";
    if (size > 0) {
        data = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (data == MAP_FAILED) {
            fprintf(stderr, "cpu-stringmatch: cannot map %s: %s\n", path, strerror(errno));
            return 1;
        }
    }
    close(fd);

    share *shares = calloc((size_t)threads, sizeof *shares);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    if (!shares || !tid) {
        fprintf(stderr, "cpu-stringmatch: out of memory for %ld threads\n", threads);
        return 1;
    }
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
    for (long t = 1; t < threads; t++)
        if (pthread_create(&tid[t], NULL, search_share, &shares[t]) != 0) {
            fprintf(stderr, "cpu-stringmatch: cannot start thread %ld\n", t);
            return 1;
        }
    search_share(&shares[0]);
    for (long t = 1; t < threads; t++)
        pthread_join(tid[t], NULL);

    for (long t = 0; t < threads; t++) {
        if (shares[t].failed) {
            fprintf(stderr, "cpu-stringmatch: out of memory for the matches\n");
            return 1;
        }
        for (uint64_t k = 0; k < shares[t].count; k++)
            printf("%" PRIu64 "\t%" PRIu64 "\n", shares[t].pairs[2 * k],
                   shares[t].pairs[2 * k + 1]);
        free(shares[t].pairs);
    }
    free(shares);
    free(tid);
    if (size > 0)
        munmap((void *)data, (size_t)size);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "cpu-stringmatch: cannot write the output: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
