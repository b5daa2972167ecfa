/*
 * common.cuh - what the CUB baselines and bench-limits share: the one
 * checking macro, reading a file into pinned memory, the command line,
 * launch shapes from the device, medians and the JSON line.
 *
 * These programs are not Soren: they are written directly against the CUDA
 * runtime and CUB so that `make bench` can compare Soren's jobs with them.
 * A failure prints the call, the file and the line, and exits 1: the first
 * run on a GPU host must say what went wrong, not time a broken pipeline.
 * Kernels run asynchronously, so an error inside one surfaces at a later
 * call; SOREN_BENCH_SYNC=1 synchronizes after every launch (slower, for
 * finding the kernel that failed).
 */
#ifndef SOREN_BENCH_COMMON_CUH
#define SOREN_BENCH_COMMON_CUH

#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *bench_program = "bench";

/* ---- Failing loudly --------------------------------------------------------- */

static inline void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static inline void bench_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", bench_program);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static inline void bench_check(cudaError_t e, const char *call, const char *file, int line)
{
    if (e != cudaSuccess)
        bench_die("%s:%d: %s failed: %s (%s)", file, line, call, cudaGetErrorName(e),
                  cudaGetErrorString(e));
}

/* Every CUDA runtime call and every CUB call goes through CK. */
#define CK(call) bench_check((call), #call, __FILE__, __LINE__)

static inline int bench_sync_each(void)
{
    static int v = -1;
    if (v < 0) {
        const char *s = getenv("SOREN_BENCH_SYNC");
        v = s && *s && strcmp(s, "0") != 0;
    }
    return v;
}

/* After each kernel launch: the launch error now, and with SOREN_BENCH_SYNC
 * the kernel's own error, both named after the kernel. */
static inline void bench_check_launch(const char *kernel, cudaStream_t stream, const char *file,
                               int line)
{
    bench_check(cudaGetLastError(), kernel, file, line);
    if (bench_sync_each())
        bench_check(cudaStreamSynchronize(stream), kernel, file, line);
}
#define CK_LAUNCH(kernel, stream) bench_check_launch(kernel " <<<...>>>", (stream), __FILE__, __LINE__)

/* A CUB call: checked, then with SOREN_BENCH_SYNC run to its end. */
#define CK_CUB(call, stream)                                                                     \
    do {                                                                                     \
        bench_check((call), #call, __FILE__, __LINE__);                                      \
        if (bench_sync_each())                                                               \
            bench_check(cudaStreamSynchronize(stream), #call, __FILE__, __LINE__);           \
    } while (0)

/* ---- The command line: INPUT OUTPUT [--runs N] -------------------------------- */

struct bench_args {
    const char *input;
    const char *output;
    int runs;
};

static inline void bench_usage(FILE *f, const char *what)
{
    fprintf(f, "usage: %s INPUT OUTPUT [--runs N]\n%s", bench_program, what);
}

static inline bench_args bench_parse_args(int argc, char **argv, const char *what)
{
    bench_args a = {NULL, NULL, 5};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            bench_usage(stdout, what);
            exit(0);
        } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            long n = strtol(argv[++i], &end, 10);
            if (errno || *end || n < 1 || n > 1000)
                bench_die("--runs %s: give a whole number from 1 to 1000", argv[i]);
            a.runs = (int)n;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            bench_usage(stderr, what);
            bench_die("unknown option %s", argv[i]);
        } else if (!a.input) {
            a.input = argv[i];
        } else if (!a.output) {
            a.output = argv[i];
        } else {
            bench_usage(stderr, what);
            bench_die("too many arguments (%s)", argv[i]);
        }
    }
    if (!a.output) {
        bench_usage(stderr, what);
        exit(2);
    }
    return a;
}

/* ---- Input -------------------------------------------------------------------- */

/* Reads the whole file into pinned host memory (cudaMallocHost), from which
 * the one upload runs at full PCIe speed and the output is written. */
static inline uint8_t *bench_read_pinned(const char *path, uint64_t *size)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        bench_die("cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        bench_die("%s: not a regular file", path);
    uint64_t n = (uint64_t)st.st_size;
    if (n == 0)
        bench_die("%s is empty: nothing to measure", path);
    uint8_t *buf = NULL;
    CK(cudaMallocHost((void **)&buf, n));
    uint64_t done = 0;
    while (done < n) {
        ssize_t got = read(fd, buf + done, (size_t)std::min<uint64_t>(n - done, 1u << 30));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            bench_die("reading %s: %s", path, got < 0 ? strerror(errno) : "file shrank");
        done += (uint64_t)got;
    }
    close(fd);
    *size = n;
    return buf;
}

/* ---- Launch shapes ---------------------------------------------------------------- */

struct bench_shape {
    int grid, block;
};

/* The block size that gives the kernel the best occupancy, and a grid of
 * at most as many blocks as the device holds at once (the kernels loop
 * grid-stride over the rest), never more than the items need. */
template <typename Kernel>
static inline bench_shape bench_shape_for(Kernel kernel, uint64_t items)
{
    int min_grid = 0, block = 0;
    CK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, kernel, 0, 0));
    uint64_t need = (items + (uint64_t)block - 1) / (uint64_t)block;
    bench_shape s;
    s.block = block;
    s.grid = (int)std::max<uint64_t>(1, std::min<uint64_t>(need, (uint64_t)min_grid));
    return s;
}

/* ---- Timing and the report -------------------------------------------------------- */

/* The median of v; for an even count the mean of the two middle values. */
static inline double bench_median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The run whose time is the median (for an even count, the faster of the
 * two middle runs): its phase times are the ones reported. */
static inline size_t bench_median_run(const std::vector<double> &v)
{
    std::vector<size_t> idx(v.size());
    for (size_t i = 0; i < idx.size(); i++)
        idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    return idx[(idx.size() - 1) / 2];
}

static inline float bench_elapsed_ms(cudaEvent_t from, cudaEvent_t to)
{
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, from, to));
    return ms;
}

static inline void bench_json_ms_list(const std::vector<double> &v)
{
    putchar('[');
    for (size_t i = 0; i < v.size(); i++)
        printf("%s%.4f", i ? "," : "", v[i]);
    putchar(']');
}

/* ---- Output ------------------------------------------------------------------------- */

static inline FILE *bench_open_output(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        bench_die("cannot write %s: %s", path, strerror(errno));
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    return f;
}

static inline void bench_close_output(FILE *f, const char *path)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        bench_die("writing %s: %s", path, strerror(errno ? errno : EIO));
}

#endif /* SOREN_BENCH_COMMON_CUH */
