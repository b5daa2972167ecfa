/*
 * staging.cu - how fast a file in the page cache reaches the device, by each
 * way of getting it there (the ceiling of chunked input).
 *
 *   bench-staging FILE [--threads LIST] [--chunk SIZE] [--devices N] [--json]
 *
 * FILE is read once first, so its pages are in the page cache.  Each way
 * moves the whole file (medians of 3 passes, after one warm-up), by T host
 * threads (each of --threads LIST, default "1,2,4,8,16"):
 *
 *   mmap         the file mapped; each thread memcpys its next chunk into
 *                one of its two pinned buffers, nothing goes to the device
 *   pread        the same, reading with pread instead of the mapping
 *   mmap+h2d     mmap, and each filled buffer goes to the device with
 *                cudaMemcpyAsync on the thread's stream while the thread
 *                fills its other buffer
 *   pread+h2d    the same with pread
 *   anon         memcpy from anonymous memory already touched (the host's
 *                copy bandwidth, pinned destination), no device
 *   register     (once, not per T) cudaHostRegister of the mapping, 256 MiB
 *                at a time, then cudaMemcpyAsync straight from it, then
 *                cudaHostUnregister: the file's pages go up without a host
 *                copy, for the price of pinning them
 *
 * and what pinning the staging memory costs: 2 x T chunks by cudaHostAlloc,
 * as one allocation, as 2 x T from one thread, and as 2 from each of T
 * threads at once (the largest T; milliseconds, the allocations freed
 * between).
 *
 * Chunks (--chunk, default 8M) are handed out in order from one counter, so
 * threads take the file front to back together.  With --devices N the
 * threads take turns over the first N GPUs (thread i copies to GPU i mod N),
 * as a run over several GPUs stages its slices at once: the h2d ways then
 * measure what the host moves to all of them.  GB/s are 1e9 bytes a second
 * of the file's size.  With --json, stdout gets only one JSON line.
 */
#include "common.cuh"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <sys/mman.h>

enum { PASSES = 3, REGISTER_PIECE = 256 << 20 };

enum way { WAY_MMAP, WAY_PREAD, WAY_MMAP_H2D, WAY_PREAD_H2D, WAY_ANON, WAY_COUNT };
static const char *way_names[WAY_COUNT] = {"mmap", "pread", "mmap+h2d", "pread+h2d", "anon"};

struct source {
    int fd;
    const uint8_t *map;  /* the file, mapped */
    uint8_t *anon;       /* a touched copy of its size */
    uint64_t size;
    std::vector<uint8_t *> dev; /* the file's size on each GPU */
    uint64_t chunk;
};

/* One thread's two pinned buffers, GPU, stream and events. */
struct worker {
    int device;
    uint8_t *buf[2];
    cudaStream_t stream;
    cudaEvent_t done[2];
};

static double now_s(void)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static void fill(const source &s, way w, uint8_t *dst, uint64_t off, uint64_t n)
{
    if (w == WAY_PREAD || w == WAY_PREAD_H2D) {
        for (uint64_t got = 0; got < n;) {
            ssize_t k = pread(s.fd, dst + got, n - got, (off_t)(off + got));
            if (k <= 0)
                bench_die("pread: %s", k < 0 ? strerror(errno) : "short file");
            got += (uint64_t)k;
        }
    } else {
        memcpy(dst, (w == WAY_ANON ? s.anon : s.map) + off, n);
    }
}

static void worker_main(const source &s, way w, worker &k, std::atomic<uint64_t> &next)
{
    bool h2d = w == WAY_MMAP_H2D || w == WAY_PREAD_H2D;
    CK(cudaSetDevice(k.device));
    for (int i = 0;; i ^= 1) {
        uint64_t off = next.fetch_add(s.chunk);
        if (off >= s.size)
            break;
        uint64_t n = std::min(s.chunk, s.size - off);
        if (h2d)
            CK(cudaEventSynchronize(k.done[i]));
        fill(s, w, k.buf[i], off, n);
        if (h2d) {
            CK(cudaMemcpyAsync(s.dev[k.device] + off, k.buf[i], n, cudaMemcpyHostToDevice,
                               k.stream));
            CK(cudaEventRecord(k.done[i], k.stream));
        }
    }
    if (h2d)
        CK(cudaStreamSynchronize(k.stream));
}

/* GB/s of one pass of way w by threads threads. */
static double pass_gbps(const source &s, way w, std::vector<worker> &ws, unsigned threads)
{
    std::atomic<uint64_t> next{0};
    std::vector<std::thread> t;
    double t0 = now_s();
    for (unsigned i = 0; i < threads; i++)
        t.emplace_back(worker_main, std::cref(s), w, std::ref(ws[i]), std::ref(next));
    for (auto &x : t)
        x.join();
    return s.size / (now_s() - t0) / 1e9;
}

/* Register, copy, unregister, REGISTER_PIECE at a time; returns GB/s of the
 * whole and stores the registering's share in *register_gbps. */
static double register_gbps(const source &s, cudaStream_t stream, double *register_only)
{
    double reg = 0, t0 = now_s();
    for (uint64_t off = 0; off < s.size; off += REGISTER_PIECE) {
        uint64_t n = std::min<uint64_t>(REGISTER_PIECE, s.size - off);
        double r0 = now_s();
        CK(cudaHostRegister((void *)(s.map + off), n, cudaHostRegisterReadOnly));
        reg += now_s() - r0;
        CK(cudaMemcpyAsync(s.dev[0] + off, s.map + off, n, cudaMemcpyHostToDevice, stream));
        CK(cudaStreamSynchronize(stream));
        CK(cudaHostUnregister((void *)(s.map + off)));
    }
    *register_only = s.size / reg / 1e9;
    return s.size / (now_s() - t0) / 1e9;
}

/* "8M" or "8": mebibytes, 1 to 1024. */
static uint64_t parse_mib(const char *text)
{
    char *end;
    unsigned long x = strtoul(text, &end, 10);
    if (end == text || (*end && strcmp(end, "M") != 0) || x == 0 || x > 1024)
        bench_die("--chunk: expected mebibytes such as 8M (1 to 1024), got %s", text);
    return (uint64_t)x << 20;
}

/* Milliseconds to pin `count` buffers of `bytes` from `threads` threads
 * (count a multiple of threads), then free them. */
static double pin_ms(uint64_t bytes, unsigned count, unsigned threads)
{
    std::vector<void *> bufs(count);
    double t0 = now_s();
    std::vector<std::thread> t;
    for (unsigned i = 0; i < threads; i++)
        t.emplace_back([&, i] {
            for (unsigned j = i; j < count; j += threads)
                CK(cudaHostAlloc(&bufs[j], bytes, cudaHostAllocDefault));
        });
    for (auto &x : t)
        x.join();
    double ms = (now_s() - t0) * 1e3;
    for (void *b : bufs)
        CK(cudaFreeHost(b));
    return ms;
}

static std::vector<unsigned> parse_list(const char *text)
{
    std::vector<unsigned> v;
    for (const char *p = text; *p;) {
        char *end;
        unsigned long x = strtoul(p, &end, 10);
        if (end == p || x == 0 || x > 256)
            bench_die("--threads: expected numbers 1 to 256 separated by commas, got %s", text);
        v.push_back((unsigned)x);
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            bench_die("--threads: expected numbers separated by commas, got %s", text);
    }
    return v;
}

int main(int argc, char **argv)
{
    bench_program = "bench-staging";
    const char *path = NULL, *list = "1,2,4,8,16";
    uint64_t chunk = 8 << 20;
    int json = 0, devices = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            list = argv[++i];
        else if (strcmp(argv[i], "--chunk") == 0 && i + 1 < argc)
            chunk = parse_mib(argv[++i]);
        else if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc)
            devices = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else
            bench_die("unknown argument %s (usage: bench-staging FILE [--threads LIST] "
                      "[--chunk SIZE] [--devices N] [--json])", argv[i]);
    }
    if (!path)
        bench_die("usage: bench-staging FILE [--threads LIST] [--chunk SIZE] [--devices N] "
                  "[--json]");
    int gpus = 0;
    CK(cudaGetDeviceCount(&gpus));
    if (devices < 1 || devices > gpus)
        bench_die("--devices: expected 1 to %d (the GPUs of this host), got %d", gpus, devices);
    std::vector<unsigned> threads = parse_list(list);
    unsigned most = *std::max_element(threads.begin(), threads.end());

    source s = {};
    s.fd = open(path, O_RDONLY);
    struct stat st;
    if (s.fd < 0 || fstat(s.fd, &st) != 0 || st.st_size == 0)
        bench_die("%s: cannot read it, or it is empty", path);
    s.size = (uint64_t)st.st_size;
    s.chunk = chunk;
    s.map = (const uint8_t *)mmap(NULL, s.size, PROT_READ, MAP_SHARED, s.fd, 0);
    if (s.map == MAP_FAILED)
        bench_die("%s: mmap: %s", path, strerror(errno));
    s.anon = (uint8_t *)malloc(s.size);
    if (!s.anon)
        bench_die("out of memory: malloc of %" PRIu64 " bytes", s.size);
    memcpy(s.anon, s.map, s.size); /* also pulls the file into the page cache */
    s.dev.resize((size_t)devices);
    for (int d = 0; d < devices; d++) {
        CK(cudaSetDevice(d));
        CK(cudaMalloc(&s.dev[d], s.size));
    }
    CK(cudaSetDevice(0));

    CK(cudaFree(0)); /* the context, before timing the pinning */
    double pin_one = pin_ms(2ull * most * chunk, 1, 1), pin_serial = pin_ms(chunk, 2 * most, 1),
           pin_threads = pin_ms(chunk, 2 * most, most);
    std::vector<worker> ws(most);
    for (unsigned i = 0; i < most; i++) {
        worker &k = ws[i];
        k.device = (int)(i % (unsigned)devices);
        CK(cudaSetDevice(k.device));
        for (int b = 0; b < 2; b++) {
            CK(cudaHostAlloc(&k.buf[b], chunk, cudaHostAllocDefault));
            memset(k.buf[b], 1, chunk);
            CK(cudaEventCreateWithFlags(&k.done[b], cudaEventDisableTiming));
        }
        CK(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
    }
    CK(cudaSetDevice(0));

    std::vector<std::vector<double>> gbps(WAY_COUNT, std::vector<double>(threads.size()));
    for (int w = 0; w < WAY_COUNT; w++)
        for (size_t i = 0; i < threads.size(); i++) {
            std::vector<double> g;
            for (int p = -1; p < PASSES; p++) {
                double x = pass_gbps(s, (way)w, ws, threads[i]);
                if (p >= 0)
                    g.push_back(x);
            }
            gbps[w][i] = bench_median(g);
        }
    double reg_only = 0, reg = register_gbps(s, ws[0].stream, &reg_only);

    if (json) {
        printf("{\"program\":\"bench-staging\",\"bytes\":%" PRIu64 ",\"chunk\":%" PRIu64
               ",\"devices\":%d,\"threads\":[", s.size, chunk, devices);
        for (size_t i = 0; i < threads.size(); i++)
            printf("%s%u", i ? "," : "", threads[i]);
        printf("]");
        for (int w = 0; w < WAY_COUNT; w++) {
            printf(",\"%s_gbps\":[", way_names[w]);
            for (size_t i = 0; i < threads.size(); i++)
                printf("%s%.2f", i ? "," : "", gbps[w][i]);
            printf("]");
        }
        printf(",\"register_gbps\":%.2f,\"register_only_gbps\":%.2f,\"pin_one_ms\":%.2f,"
               "\"pin_serial_ms\":%.2f,\"pin_threads_ms\":%.2f}\n", reg, reg_only, pin_one,
               pin_serial, pin_threads);
    } else {
        printf("%s, %.2f GiB from the page cache, chunks of %" PRIu64 " MiB, to %d GPU%s; "
               "medians of %d, GB/s\n\n| way |", path, s.size / (double)(1 << 30), chunk >> 20,
               devices, devices > 1 ? "s" : "", PASSES);
        for (unsigned t : threads)
            printf(" %u thr |", t);
        printf("\n|---|");
        for (size_t i = 0; i < threads.size(); i++)
            printf("---|");
        printf("\n");
        for (int w = 0; w < WAY_COUNT; w++) {
            printf("| %s |", way_names[w]);
            for (size_t i = 0; i < threads.size(); i++)
                printf(" %.2f |", gbps[w][i]);
            printf("\n");
        }
        printf("\nregister, copy, unregister (%d MiB at a time): %.2f GB/s; registering alone "
               "%.2f GB/s\n", REGISTER_PIECE >> 20, reg, reg_only);
        printf("pinning %u x %" PRIu64 " MiB: %.1f ms as one allocation, %.1f ms one by one, "
               "%.1f ms from %u threads\n", 2 * most, chunk >> 20, pin_one, pin_serial,
               pin_threads, most);
    }
    fflush(stdout);
    return 0;
}
