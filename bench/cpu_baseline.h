/*
 * cpu_baseline.h - what the CPU baselines (bench/cpu_*.c) share: their
 * command line (--threads N, then their operands), the input file mapped
 * whole, running one function per thread over an array of shares, and
 * the check that the output was written.  Plain C and pthreads, no Soren.
 * Each helper prints its failure as "NAME: what" and exits.
 */
#ifndef BENCH_CPU_BASELINE_H
#define BENCH_CPU_BASELINE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem, memrchr, MAP_POPULATE */
#endif
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads [--threads N] and exactly nargs operands into args; *threads is
 * every online CPU unless given.  Exits 2 with usage on anything else. */
static void baseline_args(int argc, char **argv, const char *name, const char *usage,
                          int nargs, const char **args, long *threads)
{
    *threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (*threads < 1)
        *threads = 1;
    int got = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            char *end;
            *threads = strtol(argv[++i], &end, 10);
            if (*end || *threads < 1 || *threads > 4096) {
                fprintf(stderr, "%s: --threads takes 1 to 4096, not %s\n", name, argv[i]);
                exit(2);
            }
        } else if (got < nargs) {
            args[got++] = argv[i];
        } else {
            got = nargs + 1;
            break;
        }
    }
    if (got != nargs) {
        fprintf(stderr, "usage: %s [--threads N] %s\n", name, usage);
        exit(2);
    }
}

/* The operand text as a u32 (what names it in the message); exits 2 if it
 * is not one. */
static inline uint32_t baseline_u32(const char *name, const char *what, const char *text)
{
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end || !*text || v > UINT32_MAX) {
        fprintf(stderr, "%s: %s is a u32, not %s\n", name, what, text);
        exit(2);
    }
    return (uint32_t)v;
}

/* The file at path, mapped read-only and read in (an empty file: a valid
 * pointer to no bytes); *size its bytes.  baseline_unmap releases it. */
static const uint8_t *baseline_map(const char *name, const char *path, uint64_t *size)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "%s: cannot read %s: %s\n", name, path, strerror(errno));
        exit(1);
    }
    *size = (uint64_t)st.st_size;
    const uint8_t *data = (const uint8_t *)"";
    if (*size > 0) {
        data = mmap(NULL, (size_t)*size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (data == MAP_FAILED) {
            fprintf(stderr, "%s: cannot map %s: %s\n", name, path, strerror(errno));
            exit(1);
        }
    }
    close(fd);
    return data;
}

static void baseline_unmap(const uint8_t *data, uint64_t size)
{
    if (size > 0)
        munmap((void *)data, (size_t)size);
}

/* Runs fn on shares[0 .. threads) (stride bytes apart), shares[0] in the
 * calling thread, and waits for all of them. */
static void baseline_run(const char *name, long threads, void *(*fn)(void *), void *shares,
                         size_t stride)
{
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    if (!tid) {
        fprintf(stderr, "%s: out of memory for %ld threads\n", name, threads);
        exit(1);
    }
    for (long t = 1; t < threads; t++)
        if (pthread_create(&tid[t], NULL, fn, (char *)shares + (size_t)t * stride) != 0) {
            fprintf(stderr, "%s: cannot start thread %ld\n", name, t);
            exit(1);
        }
    fn(shares);
    for (long t = 1; t < threads; t++)
        pthread_join(tid[t], NULL);
    free(tid);
}

/* calloc, or exit saying what the memory was for. */
static void *baseline_calloc(const char *name, size_t n, size_t size, const char *what)
{
    void *p = calloc(n, size);
    if (!p) {
        fprintf(stderr, "%s: out of memory for %s\n", name, what);
        exit(1);
    }
    return p;
}

/* Prints v as soren-host writes an f32 (is_f32) or f64 value: the fewest
 * significant digits of %g, from FLT_DIG (DBL_DIG) up, or from 1 for a
 * subnormal, that read back to the same bits; inf, -inf, and nan for every
 * NaN. */
static inline void baseline_print_float(double v, int is_f32)
{
    if (isnan(v)) {
        fputs("nan", stdout);
        return;
    }
    if (isinf(v)) {
        fputs(v < 0 ? "-inf" : "inf", stdout);
        return;
    }
    char buf[64];
    int subnormal = fabs(v) < (is_f32 ? FLT_MIN : DBL_MIN);
    int last = is_f32 ? 9 : 17;
    for (int digits = subnormal ? 1 : is_f32 ? FLT_DIG : DBL_DIG; digits <= last; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (is_f32 ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, stdout);
}

/* The exit status once the output is written: 1 if writing failed. */
static int baseline_done(const char *name)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: cannot write the output: %s\n", name, strerror(errno));
        return 1;
    }
    return 0;
}

#endif /* BENCH_CPU_BASELINE_H */
