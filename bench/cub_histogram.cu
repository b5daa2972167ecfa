/*
 * cub_histogram.cu - the RGB histogram written directly against CUB, not
 * through Soren: the baseline that Soren's histogram job is measured against.
 *
 *   cub-histogram INPUT OUTPUT [--runs N]
 *
 * INPUT is raw 24-bit RGB pixels (soren-gen rgb): three bytes a pixel, no
 * alpha.  It is copied once into device memory; then N timed runs (after
 * one warm-up) of cub::DeviceHistogram::MultiHistogramEven<3, 3> (three
 * channels, all three counted) with 256 bins of width 1 per channel over
 * the resident bytes, and the copy of the 768 counts back to pinned host
 * memory, each phase timed with CUDA events.
 *
 * OUTPUT is then written as `soren-host run histogram INPUT` writes it:
 * `bin<TAB>count` for every non-zero bin in bin order, bins 0-255 red,
 * 256-511 green, 512-767 blue, counts as decimal u32.  An INPUT whose size
 * is not a multiple of 3 is refused, as Soren refuses it.
 *
 * stdout gets one JSON line:
 *   {"program":"cub-histogram","input_bytes":..,"pixels":..,"nonzero_bins":..,
 *    "runs_ms":[..],"median_ms":..,"phases_of":"median run",
 *    "phases_ms":{"histogram":..,"copy_back":..}}
 */
#include "common.cuh"

#include <cub/device/device_histogram.cuh>

static const char usage_text[] =
    "Counts the R, G and B values of the 24-bit pixels of INPUT with\n"
    "cub::DeviceHistogram::MultiHistogramEven (the baseline for Soren's histogram) and\n"
    "writes OUTPUT as `soren-host run histogram INPUT` does.  Times --runs N runs (default\n"
    "5) after a warm-up and prints one JSON line on standard output.\n";

enum { CHANNELS = 3, BINS = 256 };
enum { PH_HISTOGRAM, PH_COPY_BACK, PH_COUNT };
static const char *const phase_names[PH_COUNT] = {"histogram", "copy_back"};

struct histogram_gpu {
    const uint8_t *pixels;
    int64_t count;        /* pixels */
    unsigned *counts;     /* CHANNELS * BINS, channel after channel */
    unsigned *h_counts;   /* pinned */
    void *temp;
    size_t temp_bytes;
    cudaStream_t stream;
    cudaEvent_t ev[PH_COUNT + 1];
};

/* The one CUB call, for sizing (temp NULL) and for the runs.  Levels are
 * int: 257 levels from 0 to 256 give 256 bins of width 1 per channel, so
 * bin = sample.  CUB reads the interleaved RGB bytes as they lie and keeps
 * per-block privatized counters, then adds them to d_histogram; it zeroes
 * d_histogram itself, so runs need no memset. */
static cudaError_t histogram_call(histogram_gpu &h, void *temp, size_t &temp_bytes)
{
    ::cuda::std::array<unsigned *, CHANNELS> out{h.counts, h.counts + BINS, h.counts + 2 * BINS};
    ::cuda::std::array<int, CHANNELS> levels{BINS + 1, BINS + 1, BINS + 1};
    ::cuda::std::array<int, CHANNELS> lower{0, 0, 0};
    ::cuda::std::array<int, CHANNELS> upper{BINS, BINS, BINS};
    return cub::DeviceHistogram::MultiHistogramEven<CHANNELS, CHANNELS>(
        temp, temp_bytes, h.pixels, out, levels, lower, upper, h.count, h.stream);
}

static void histogram_setup(histogram_gpu &h, const uint8_t *host_pixels, uint64_t size)
{
    memset(&h, 0, sizeof h);
    CK(cudaStreamCreateWithFlags(&h.stream, cudaStreamNonBlocking));
    for (int i = 0; i <= PH_COUNT; i++)
        CK(cudaEventCreate(&h.ev[i]));
    uint8_t *d = NULL;
    CK(cudaMalloc((void **)&d, size));
    CK(cudaMemcpyAsync(d, host_pixels, size, cudaMemcpyHostToDevice, h.stream));
    h.pixels = d;
    h.count = (int64_t)(size / CHANNELS);
    CK(cudaMalloc((void **)&h.counts, CHANNELS * BINS * sizeof(unsigned)));
    CK(cudaMallocHost((void **)&h.h_counts, CHANNELS * BINS * sizeof(unsigned)));
    CK(histogram_call(h, NULL, h.temp_bytes));
    CK(cudaMalloc(&h.temp, std::max<size_t>(h.temp_bytes, 1)));
    CK(cudaStreamSynchronize(h.stream));
}

static void histogram_teardown(histogram_gpu &h)
{
    CK(cudaFree((void *)h.pixels));
    CK(cudaFree(h.counts));
    CK(cudaFree(h.temp));
    CK(cudaFreeHost(h.h_counts));
    for (int i = 0; i <= PH_COUNT; i++)
        CK(cudaEventDestroy(h.ev[i]));
    CK(cudaStreamDestroy(h.stream));
}

static void histogram_run(histogram_gpu &h, double *phase_ms, double *total_ms)
{
    CK(cudaEventRecord(h.ev[0], h.stream));
    size_t tb = h.temp_bytes;
    CK_CUB(histogram_call(h, h.temp, tb), h.stream);
    CK(cudaEventRecord(h.ev[1], h.stream));
    CK(cudaMemcpyAsync(h.h_counts, h.counts, CHANNELS * BINS * sizeof(unsigned),
                       cudaMemcpyDeviceToHost, h.stream));
    CK(cudaEventRecord(h.ev[2], h.stream));
    CK(cudaEventSynchronize(h.ev[2]));
    for (int p = 0; p < PH_COUNT; p++)
        phase_ms[p] = bench_elapsed_ms(h.ev[p], h.ev[p + 1]);
    *total_ms = bench_elapsed_ms(h.ev[0], h.ev[PH_COUNT]);
}

/* Each channel's counts add up to the pixels (mod 2^32, as u32 counters
 * wrap past 4 G pixels, Soren's u32 sum too). */
static void check_counts(const histogram_gpu &h)
{
    for (int c = 0; c < CHANNELS; c++) {
        uint32_t sum = 0;
        for (int b = 0; b < BINS; b++)
            sum += h.h_counts[c * BINS + b];
        if (sum != (uint32_t)h.count)
            bench_die("channel %d counts %" PRIu32 " pixels, not %" PRId64, c, sum, h.count);
    }
}

static int write_output(const char *path, const histogram_gpu &h)
{
    FILE *f = bench_open_output(path);
    int nonzero = 0;
    for (int bin = 0; bin < CHANNELS * BINS; bin++) {
        if (h.h_counts[bin] == 0)
            continue;
        fprintf(f, "%d\t%u\n", bin, h.h_counts[bin]);
        nonzero++;
    }
    bench_close_output(f, path);
    return nonzero;
}

int main(int argc, char **argv)
{
    bench_program = "cub-histogram";
    bench_args a = bench_parse_args(argc, argv, usage_text);
    uint64_t size = 0;
    uint8_t *pixels = bench_read_pinned(a.input, &size);
    if (size % CHANNELS != 0)
        bench_die("%s: size %" PRIu64 " is not a multiple of the pixel size 3", a.input, size);

    histogram_gpu h;
    histogram_setup(h, pixels, size);
    double phases[PH_COUNT], total;
    histogram_run(h, phases, &total);
    std::vector<double> runs_ms(a.runs);
    std::vector<std::vector<double>> run_phases(a.runs, std::vector<double>(PH_COUNT));
    for (int r = 0; r < a.runs; r++)
        histogram_run(h, run_phases[r].data(), &runs_ms[r]);
    check_counts(h);
    int nonzero = write_output(a.output, h);

    printf("{\"program\":\"cub-histogram\",\"input_bytes\":%" PRIu64 ",\"pixels\":%" PRId64
           ",\"nonzero_bins\":%d,\"runs_ms\":",
           size, h.count, nonzero);
    bench_json_ms_list(runs_ms);
    printf(",\"median_ms\":%.4f,\"phases_of\":\"median run\",\"phases_ms\":{",
           bench_median(runs_ms));
    const double *ph = run_phases[bench_median_run(runs_ms)].data();
    for (int p = 0; p < PH_COUNT; p++)
        printf("%s\"%s\":%.4f", p ? "," : "", phase_names[p], ph[p]);
    printf("}}\n");
    fflush(stdout);

    histogram_teardown(h);
    CK(cudaFreeHost(pixels));
    return 0;
}
