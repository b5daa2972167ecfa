/*
 * limits.cu - the hardware limits the benchmark report divides by, measured
 * in the same run as the jobs (make bench).
 *
 *   bench-limits [--json]
 *
 * Medians of 9 timed repetitions, after one warm-up, each one cudaMemcpyAsync
 * between two CUDA events on one stream:
 *
 *   d2d            a 4 GiB device-to-device copy; GB/s counts the bytes read
 *                  plus the bytes written (2 x size / time), as the report's
 *                  fractions assume
 *   h2d pinned     1 GiB host-to-device from cudaHostAlloc'd memory
 *   h2d pageable   1 GiB host-to-device from malloc'd memory, touched first
 *                  (the driver stages it through its own pinned buffers)
 *   d2h pinned     1 GiB device-to-host into cudaHostAlloc'd memory
 *
 * GB/s are 1e9 bytes a second.  The theoretical memory bandwidth comes from
 * the memory clock and bus width attributes (2 transfers a clock); null if
 * the driver does not report them.
 *
 * With --json, stdout gets only one JSON line:
 *   {"program":"bench-limits","d2d_gbps":..,"h2d_pinned_gbps":..,
 *    "h2d_pageable_gbps":..,"d2h_pinned_gbps":..,"gpu":"<name>","sms":..,
 *    "driver":<cudaDriverGetVersion>,"runtime":<cudaRuntimeGetVersion>,
 *    "mem_theoretical_gbps":..,"d2d_bytes":..,"host_bytes":..,"reps":9}
 * without it, the same figures as lines of text.
 */
#include "common.cuh"

enum { REPS = 9 };
static const uint64_t GiB = 1ull << 30;

struct limits_ctx {
    cudaStream_t stream;
    cudaEvent_t start, stop;
};

/* The median GB/s of REPS copies of `bytes` from src to dst, after one
 * warm-up; `counted` is the bytes each copy is credited with. */
static double copy_gbps(limits_ctx &c, void *dst, const void *src, uint64_t bytes,
                        cudaMemcpyKind kind, double counted)
{
    std::vector<double> gbps;
    for (int r = -1; r < REPS; r++) {
        CK(cudaEventRecord(c.start, c.stream));
        CK(cudaMemcpyAsync(dst, src, bytes, kind, c.stream));
        CK(cudaEventRecord(c.stop, c.stream));
        CK(cudaEventSynchronize(c.stop));
        double ms = bench_elapsed_ms(c.start, c.stop);
        if (r >= 0)
            gbps.push_back(counted / (ms * 1e-3) / 1e9);
    }
    return bench_median(gbps);
}

/* The device-to-device size: 4 GiB, halved while two buffers of it do not
 * fit in free memory with 1 GiB to spare. */
static uint64_t d2d_size(void)
{
    size_t free_b = 0, total_b = 0;
    CK(cudaMemGetInfo(&free_b, &total_b));
    uint64_t size = 4 * GiB;
    while (size > 64ull << 20 && 2 * size + GiB > free_b)
        size /= 2;
    return size;
}

/* 2 x memory clock (kHz) x bus width (bits) / 8, in GB/s; < 0 if unknown. */
static double theoretical_gbps(int dev)
{
    int clock_khz = 0, bus_bits = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: clear it */
        return -1;
    }
    if (clock_khz <= 0 || bus_bits <= 0)
        return -1;
    return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", (unsigned char)*s);
        else
            putchar(*s);
    }
    putchar('"');
}

int main(int argc, char **argv)
{
    bench_program = "bench-limits";
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: bench-limits [--json]\nMeasures device-to-device, pinned and pageable "
                   "host-to-device and pinned device-to-host copy bandwidth (medians of %d).\n",
                   REPS);
            return 0;
        } else {
            bench_die("unknown argument %s (usage: bench-limits [--json])", argv[i]);
        }
    }

    int dev = 0, driver = 0, runtime = 0;
    CK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    CK(cudaDriverGetVersion(&driver));
    CK(cudaRuntimeGetVersion(&runtime));

    limits_ctx c;
    CK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&c.start));
    CK(cudaEventCreate(&c.stop));

    uint64_t dsize = d2d_size(), hsize = GiB;
    void *d_a = NULL, *d_b = NULL, *pinned = NULL;
    CK(cudaMalloc(&d_a, dsize));
    CK(cudaMalloc(&d_b, dsize));
    CK(cudaMemsetAsync(d_a, 1, dsize, c.stream));
    CK(cudaHostAlloc(&pinned, hsize, cudaHostAllocDefault));
    memset(pinned, 1, hsize);
    uint8_t *pageable = (uint8_t *)malloc(hsize);
    if (!pageable)
        bench_die("out of memory: malloc of %" PRIu64 " bytes", hsize);
    memset(pageable, 1, hsize); /* touched: every page is mapped before the copy */

    double d2d = copy_gbps(c, d_b, d_a, dsize, cudaMemcpyDeviceToDevice, 2.0 * dsize);
    double h2d_pinned = copy_gbps(c, d_a, pinned, hsize, cudaMemcpyHostToDevice, (double)hsize);
    double h2d_pageable =
        copy_gbps(c, d_a, pageable, hsize, cudaMemcpyHostToDevice, (double)hsize);
    double d2h_pinned = copy_gbps(c, pinned, d_a, hsize, cudaMemcpyDeviceToHost, (double)hsize);
    double theory = theoretical_gbps(dev);

    if (json) {
        printf("{\"program\":\"bench-limits\",\"d2d_gbps\":%.1f,\"h2d_pinned_gbps\":%.2f,"
               "\"h2d_pageable_gbps\":%.2f,\"d2h_pinned_gbps\":%.2f,\"gpu\":",
               d2d, h2d_pinned, h2d_pageable, d2h_pinned);
        json_string(prop.name);
        printf(",\"sms\":%d,\"driver\":%d,\"runtime\":%d,\"mem_theoretical_gbps\":",
               prop.multiProcessorCount, driver, runtime);
        if (theory > 0)
            printf("%.1f", theory);
        else
            printf("null");
        printf(",\"d2d_bytes\":%" PRIu64 ",\"host_bytes\":%" PRIu64 ",\"reps\":%d}\n", dsize,
               hsize, REPS);
    } else {
        printf("%s, %d SMs, driver %d, runtime %d; medians of %d copies\n", prop.name,
               prop.multiProcessorCount, driver, runtime, REPS);
        printf("device to device (%" PRIu64 " MiB): %8.1f GB/s, bytes read plus written\n",
               dsize >> 20, d2d);
        printf("host to device, pinned   (%" PRIu64 " MiB): %6.2f GB/s\n", hsize >> 20, h2d_pinned);
        printf("host to device, pageable (%" PRIu64 " MiB): %6.2f GB/s\n", hsize >> 20,
               h2d_pageable);
        printf("device to host, pinned   (%" PRIu64 " MiB): %6.2f GB/s\n", hsize >> 20, d2h_pinned);
        if (theory > 0)
            printf("theoretical memory bandwidth: %.1f GB/s (memory clock x bus width x 2)\n",
                   theory);
        else
            printf("theoretical memory bandwidth: not reported by this driver\n");
    }
    fflush(stdout);

    free(pageable);
    CK(cudaFreeHost(pinned));
    CK(cudaFree(d_a));
    CK(cudaFree(d_b));
    CK(cudaEventDestroy(c.start));
    CK(cudaEventDestroy(c.stop));
    CK(cudaStreamDestroy(c.stream));
    return 0;
}
