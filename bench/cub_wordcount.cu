/*
 * cub_wordcount.cu - wordcount written directly against CUB, not through
 * Soren: the baseline that Soren's wordcount is measured against.
 *
 *   cub-wordcount INPUT OUTPUT [--runs N]
 *
 * INPUT is copied once into device memory; then N timed runs (after one
 * warm-up) of the whole device pipeline over the resident bytes:
 *
 *   tokenize   cub::DeviceSelect::If over byte offsets: the start of every word
 *   hash       one thread per word: a 64-bit hash of its bytes (xxHash64's
 *              rounds and avalanche)
 *   sort       cub::DeviceRadixSort::SortPairs, hash -> word start
 *   reduce     cub::DeviceReduce::ReduceByKey over equal hashes: the count and
 *              the first start of each distinct word
 *   recover    one thread per distinct word: its length, from its first start
 *   copy_back  the distinct words (start, count, length) to pinned host memory
 *
 * Each phase is timed with CUDA events on one stream; a run is the first
 * event to the last, copy back included.  Outside the timed region OUTPUT is
 * written as `soren-host run wordcount INPUT` writes it: `word<TAB>count`,
 * ordered by the word's bytes (memcmp, the shorter first on a tie), the
 * word escaped as core/io/output.c escapes TSV keys, so `cmp` against
 * Soren's output must pass.
 *
 * Words are told apart by their 64-bit hash alone.  Two distinct words with
 * one hash would be counted as one (the later one missing from OUTPUT), and
 * the `cmp` against Soren would show it; with a million distinct words the
 * chance is about 1e6^2 / 2^65, 3e-8.
 *
 * A word is a maximal run of bytes that are not ASCII whitespace (space,
 * \t, \n, \v, \f, \r), the rule of sdk/soren/text.h; \n is whitespace, so
 * no word spans lines and the text needs no splitting into lines.
 *
 * stdout gets one JSON line:
 *   {"program":"cub-wordcount","input_bytes":..,"words":..,"unique":..,
 *    "runs_ms":[..],"median_ms":..,"phases_of":"median run",
 *    "phases_ms":{"tokenize":..,"hash":..,"sort":..,"reduce":..,"recover":..,"copy_back":..}}
 * with the phases of the run whose time is the median.
 */
#include "common.cuh"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

static const char usage_text[] =
    "Counts the words of INPUT with a CUB pipeline on the GPU (the baseline for Soren's\n"
    "wordcount) and writes OUTPUT as `soren-host run wordcount INPUT` does.  Times --runs N\n"
    "runs (default 5) after a warm-up and prints one JSON line on standard output.\n";

/* ---- Device code ------------------------------------------------------------------ */

__host__ __device__ inline bool wc_is_space(uint8_t c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* The resident text, passed by value to kernels and functors.  Off is
 * uint32_t for inputs under 4 GiB (half the bytes of 64-bit offsets to
 * sort and move), uint64_t above. */
template <typename Off>
struct text_ref {
    const uint8_t *bytes;
    Off size;
};

/* Byte i starts a word.  CUB's select hands consecutive offsets to
 * consecutive threads, so a warp's two loads (i and i - 1) fall in the same
 * one or two 128-byte lines: each byte comes from DRAM once, the second
 * load from L1. */
template <typename Off>
struct is_word_start {
    text_ref<Off> text;
    __host__ __device__ bool operator()(Off i) const
    {
        return !wc_is_space(text.bytes[i]) && (i == 0 || wc_is_space(text.bytes[i - 1]));
    }
};

/* The same predicate as a number, for counting the words once at set-up. */
template <typename Off>
struct word_start_count {
    text_ref<Off> text;
    __host__ __device__ uint64_t operator()(Off i) const
    {
        return is_word_start<Off>{text}(i) ? 1 : 0;
    }
};

/* xxHash64's constants, round and avalanche (public domain, Yann Collet). */
static constexpr uint64_t XXH_P1 = 0x9E3779B185EBCA87ull, XXH_P2 = 0xC2B2AE3D27D4EB4Full,
                          XXH_P3 = 0x165667B19E3779F9ull, XXH_P4 = 0x85EBCA77C2B2AE63ull,
                          XXH_P5 = 0x27D4EB2F165667C5ull;

__host__ __device__ __forceinline__ uint64_t xxh_rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

__host__ __device__ __forceinline__ uint64_t xxh_fold(uint64_t h, uint64_t lane)
{
    uint64_t k = xxh_rotl(lane * XXH_P2, 31) * XXH_P1;
    return xxh_rotl(h ^ k, 27) * XXH_P1 + XXH_P4;
}

/* The word at start: its bytes taken 8 at a time, little-endian, into a
 * lane folded in as xxHash64 folds 8-byte blocks; the length and a
 * zero-padded last lane make words of different lengths differ. */
template <typename Off>
__host__ __device__ uint64_t hash_word(text_ref<Off> text, Off start)
{
    uint64_t h = XXH_P5, lane = 0;
    unsigned k = 0;
    Off i = start;
    for (; i < text.size; i++) {
        uint8_t c = text.bytes[i];
        if (wc_is_space(c))
            break;
        lane |= (uint64_t)c << (8 * k);
        if (++k == 8) {
            h = xxh_fold(h, lane);
            lane = 0;
            k = 0;
        }
    }
    h += (uint64_t)(i - start);
    if (k)
        h = xxh_fold(h, lane);
    h ^= h >> 33;
    h *= XXH_P2;
    h ^= h >> 29;
    h *= XXH_P3;
    h ^= h >> 32;
    return h;
}

/* One thread per word.  The 32 threads of a warp hash 32 neighbouring
 * words, so each step's byte loads fall within a few hundred contiguous
 * bytes (a handful of L1 lines) and the text streams from DRAM about once;
 * the hashes are written coalesced. */
template <typename Off>
__global__ void hash_words(text_ref<Off> text, const Off *starts, uint64_t words,
                           uint64_t *hashes)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t w = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; w < words; w += stride)
        hashes[w] = hash_word(text, starts[w]);
}

/* One distinct word: the start of its first occurrence and its count. */
template <typename Off>
struct word_run {
    Off start;
    uint32_t count; /* u32, as Soren's wordcount sums */
};

/* Each sorted word as one occurrence of itself. */
template <typename Off>
struct one_occurrence {
    __host__ __device__ word_run<Off> operator()(Off start) const
    {
        return word_run<Off>{start, 1};
    }
};

/* ReduceByKey's operator: the smallest start (the radix sort is stable and
 * the starts went in ascending, so it is also the first in the run) and
 * the sum of the counts; both associative, as CUB requires. */
template <typename Off>
struct first_and_count {
    __host__ __device__ word_run<Off> operator()(const word_run<Off> &a,
                                                 const word_run<Off> &b) const
    {
        return word_run<Off>{a.start < b.start ? a.start : b.start, a.count + b.count};
    }
};

/* One thread per distinct word: scan from its start to the next space.
 * The starts are scattered over the text (first occurrences), so these
 * loads are not coalesced; there are only as many as distinct words. The
 * count of runs is read on the device, so the host need not wait for it. */
template <typename Off>
__global__ void word_lengths(text_ref<Off> text, const word_run<Off> *runs,
                             const int64_t *num_runs, Off *lengths)
{
    uint64_t n = (uint64_t)*num_runs;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t r = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; r < n; r += stride) {
        Off i = runs[r].start, j = i;
        while (j < text.size && !wc_is_space(text.bytes[j]))
            j++;
        lengths[r] = j - i;
    }
}

/* ---- The pipeline (host side) ----------------------------------------------------- */

enum { PH_TOKENIZE, PH_HASH, PH_SORT, PH_REDUCE, PH_RECOVER, PH_COPY_BACK, PH_COUNT };
static const char *const phase_names[PH_COUNT] = {"tokenize", "hash", "sort",
                                                   "reduce",   "recover", "copy_back"};

/* The device buffers, sized from the input's word count (counted once at
 * set-up), and the pinned host buffers the distinct words come back to. */
template <typename Off>
struct wordcount_gpu {
    text_ref<Off> text;
    uint64_t words;
    Off *starts, *starts_alt;
    uint64_t *hashes, *hashes_alt;
    word_run<Off> *runs;
    Off *lengths;
    int64_t *counts; /* [0] words selected, [1] distinct words */
    void *temp;
    size_t temp_bytes;
    bench_shape hash_shape, length_shape;
    cudaStream_t stream;
    cudaEvent_t ev[PH_COUNT + 1];
    /* pinned host */
    int64_t *h_counts;
    word_run<Off> *h_runs;
    Off *h_lengths;
    uint64_t h_capacity;
};

template <typename Off>
static uint64_t count_words(text_ref<Off> text, cudaStream_t s)
{
    auto flags = thrust::make_transform_iterator(thrust::counting_iterator<Off>(0),
                                                 word_start_count<Off>{text});
    uint64_t *d_sum = NULL, words = 0;
    void *temp = NULL;
    size_t temp_bytes = 0;
    CK(cudaMalloc((void **)&d_sum, sizeof *d_sum));
    CK(cub::DeviceReduce::Sum(temp, temp_bytes, flags, d_sum, (int64_t)text.size, s));
    CK(cudaMalloc(&temp, temp_bytes));
    CK_CUB(cub::DeviceReduce::Sum(temp, temp_bytes, flags, d_sum, (int64_t)text.size, s), s);
    CK(cudaMemcpyAsync(&words, d_sum, sizeof words, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaFree(temp));
    CK(cudaFree(d_sum));
    return words;
}

static void *device_alloc(uint64_t count, size_t size, const char *what)
{
    void *p = NULL;
    size_t bytes = (size_t)std::max<uint64_t>(count, 1) * size;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess)
        bench_die("cudaMalloc of %zu bytes for %s failed: %s", bytes, what, cudaGetErrorString(e));
    return p;
}

/* The largest temporary storage any of the three CUB calls asks for: one
 * buffer serves them all, since they run one after the other. */
template <typename Off>
static size_t temp_bytes_needed(wordcount_gpu<Off> &g)
{
    size_t need = 0, b = 0;
    CK(cub::DeviceSelect::If(NULL, b, thrust::counting_iterator<Off>(0), g.starts,
                             g.counts, (int64_t)g.text.size, is_word_start<Off>{g.text},
                             g.stream));
    need = std::max(need, b);
    cub::DoubleBuffer<uint64_t> keys(g.hashes, g.hashes_alt);
    cub::DoubleBuffer<Off> vals(g.starts, g.starts_alt);
    b = 0;
    CK(cub::DeviceRadixSort::SortPairs(NULL, b, keys, vals, (int64_t)g.words, 0, 64, g.stream));
    need = std::max(need, b);
    b = 0;
    CK(cub::DeviceReduce::ReduceByKey(
        NULL, b, g.hashes, g.hashes_alt,
        thrust::make_transform_iterator(g.starts, one_occurrence<Off>{}), g.runs, g.counts + 1,
        first_and_count<Off>{}, (int64_t)g.words, g.stream));
    return std::max(need, b);
}

template <typename Off>
static void wordcount_setup(wordcount_gpu<Off> &g, const uint8_t *host_text, uint64_t size)
{
    memset(&g, 0, sizeof g);
    CK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    for (int i = 0; i <= PH_COUNT; i++)
        CK(cudaEventCreate(&g.ev[i]));
    uint8_t *bytes = (uint8_t *)device_alloc(size, 1, "the input");
    CK(cudaMemcpyAsync(bytes, host_text, size, cudaMemcpyHostToDevice, g.stream));
    g.text.bytes = bytes;
    g.text.size = (Off)size;
    g.words = count_words(g.text, g.stream);

    g.starts = (Off *)device_alloc(g.words, sizeof(Off), "word starts");
    g.starts_alt = (Off *)device_alloc(g.words, sizeof(Off), "sorted word starts");
    g.hashes = (uint64_t *)device_alloc(g.words, 8, "word hashes");
    g.hashes_alt = (uint64_t *)device_alloc(g.words, 8, "sorted word hashes");
    g.runs = (word_run<Off> *)device_alloc(g.words, sizeof(word_run<Off>), "distinct words");
    g.lengths = (Off *)device_alloc(g.words, sizeof(Off), "word lengths");
    g.counts = (int64_t *)device_alloc(2, sizeof(int64_t), "counts");
    g.temp_bytes = temp_bytes_needed(g);
    g.temp = device_alloc(g.temp_bytes, 1, "CUB's temporary storage");
    g.hash_shape = bench_shape_for(hash_words<Off>, g.words);
    g.length_shape = bench_shape_for(word_lengths<Off>, g.words);
    CK(cudaMallocHost((void **)&g.h_counts, 2 * sizeof(int64_t)));
    CK(cudaStreamSynchronize(g.stream));
}

template <typename Off>
static void wordcount_teardown(wordcount_gpu<Off> &g)
{
    CK(cudaFree((void *)g.text.bytes));
    CK(cudaFree(g.starts));
    CK(cudaFree(g.starts_alt));
    CK(cudaFree(g.hashes));
    CK(cudaFree(g.hashes_alt));
    CK(cudaFree(g.runs));
    CK(cudaFree(g.lengths));
    CK(cudaFree(g.counts));
    CK(cudaFree(g.temp));
    CK(cudaFreeHost(g.h_counts));
    CK(cudaFreeHost(g.h_runs));
    CK(cudaFreeHost(g.h_lengths));
    for (int i = 0; i <= PH_COUNT; i++)
        CK(cudaEventDestroy(g.ev[i]));
    CK(cudaStreamDestroy(g.stream));
}

/* Pinned room for `unique` distinct words.  The count is known only after
 * a run, so the warm-up sizes these; a timed run never allocates. */
template <typename Off>
static void grow_host(wordcount_gpu<Off> &g, uint64_t unique)
{
    CK(cudaFreeHost(g.h_runs));
    CK(cudaFreeHost(g.h_lengths));
    uint64_t n = std::max<uint64_t>(unique, 1);
    CK(cudaMallocHost((void **)&g.h_runs, n * sizeof(word_run<Off>)));
    CK(cudaMallocHost((void **)&g.h_lengths, n * sizeof(Off)));
    g.h_capacity = n;
}

/* One run of the device pipeline; phase_ms gets each phase's milliseconds
 * and the result is the run's.  Returns the number of distinct words. */
template <typename Off>
static uint64_t wordcount_run(wordcount_gpu<Off> &g, bool warm_up, double *phase_ms,
                              double *total_ms)
{
    cudaStream_t s = g.stream;
    size_t tb;
    CK(cudaEventRecord(g.ev[0], s));

    tb = g.temp_bytes;
    CK_CUB(cub::DeviceSelect::If(g.temp, tb, thrust::counting_iterator<Off>(0), g.starts,
                                 g.counts, (int64_t)g.text.size, is_word_start<Off>{g.text}, s),
           s);
    CK(cudaEventRecord(g.ev[1], s));

    hash_words<Off><<<g.hash_shape.grid, g.hash_shape.block, 0, s>>>(g.text, g.starts, g.words,
                                                                       g.hashes);
    CK_LAUNCH("hash_words", s);
    CK(cudaEventRecord(g.ev[2], s));

    /* Fresh double buffers each run: the sort leaves its result in either. */
    cub::DoubleBuffer<uint64_t> keys(g.hashes, g.hashes_alt);
    cub::DoubleBuffer<Off> vals(g.starts, g.starts_alt);
    tb = g.temp_bytes;
    CK_CUB(cub::DeviceRadixSort::SortPairs(g.temp, tb, keys, vals, (int64_t)g.words, 0, 64, s), s);
    CK(cudaEventRecord(g.ev[3], s));

    /* The distinct hashes themselves are not needed: they go to the sort's
     * other key buffer, free now. */
    tb = g.temp_bytes;
    CK_CUB(cub::DeviceReduce::ReduceByKey(
               g.temp, tb, keys.Current(), keys.Alternate(),
               thrust::make_transform_iterator(vals.Current(), one_occurrence<Off>{}), g.runs,
               g.counts + 1, first_and_count<Off>{}, (int64_t)g.words, s),
           s);
    CK(cudaEventRecord(g.ev[4], s));

    word_lengths<Off><<<g.length_shape.grid, g.length_shape.block, 0, s>>>(g.text, g.runs,
                                                                             g.counts + 1,
                                                                             g.lengths);
    CK_LAUNCH("word_lengths", s);
    CK(cudaEventRecord(g.ev[5], s));

    /* The host must know how many distinct words there are before it can
     * copy them: this wait is part of copy_back. */
    CK(cudaMemcpyAsync(g.h_counts, g.counts, 2 * sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    if ((uint64_t)g.h_counts[0] != g.words)
        bench_die("the select found %" PRId64 " words, the set-up count %" PRIu64
                  ": the tokenizer is wrong", g.h_counts[0], g.words);
    uint64_t unique = (uint64_t)g.h_counts[1];
    if (unique > g.words || (unique == 0 && g.words > 0))
        bench_die("ReduceByKey found %" PRIu64 " distinct words among %" PRIu64, unique, g.words);
    if (unique > g.h_capacity) {
        if (!warm_up)
            bench_die("%" PRIu64 " distinct words now, %" PRIu64 " in the warm-up", unique,
                      g.h_capacity);
        grow_host(g, unique);
    }
    if (unique) {
        CK(cudaMemcpyAsync(g.h_runs, g.runs, unique * sizeof *g.h_runs, cudaMemcpyDeviceToHost,
                           s));
        CK(cudaMemcpyAsync(g.h_lengths, g.lengths, unique * sizeof *g.h_lengths,
                           cudaMemcpyDeviceToHost, s));
    }
    CK(cudaEventRecord(g.ev[6], s));
    CK(cudaEventSynchronize(g.ev[6]));

    for (int p = 0; p < PH_COUNT; p++)
        phase_ms[p] = bench_elapsed_ms(g.ev[p], g.ev[p + 1]);
    *total_ms = bench_elapsed_ms(g.ev[0], g.ev[PH_COUNT]);
    return unique;
}

/* ---- Checks and output (outside the timed region) --------------------------------- */

/* Every word counted once: the counts add up to the words. */
template <typename Off>
static void check_counts(const wordcount_gpu<Off> &g, uint64_t unique)
{
    uint64_t sum = 0;
    for (uint64_t r = 0; r < unique; r++) {
        sum += g.h_runs[r].count;
        if (g.h_lengths[r] == 0)
            bench_die("distinct word %" PRIu64 " has length 0", r);
    }
    if (sum != g.words && g.words < UINT32_MAX)
        bench_die("the counts add up to %" PRIu64 ", not the %" PRIu64 " words", sum, g.words);
}

/* A word as core/io/output.c writes a TSV key: backslash, tab, newline and
 * CR escaped (only the backslash can occur in a word). */
static void write_tsv_word(FILE *f, const uint8_t *s, uint64_t n)
{
    uint64_t run = 0;
    for (uint64_t i = 0; i < n; i++) {
        char esc;
        switch (s[i]) {
        case '\\': esc = '\\'; break;
        case '\t': esc = 't'; break;
        case '\n': esc = 'n'; break;
        case '\r': esc = 'r'; break;
        default: continue;
        }
        fwrite(s + run, 1, (size_t)(i - run), f);
        fputc('\\', f);
        fputc(esc, f);
        run = i + 1;
    }
    fwrite(s + run, 1, (size_t)(n - run), f);
}

/* OUTPUT as soren-host writes it: by the word's bytes, memcmp order, the
 * shorter first where one is a prefix of the other. */
template <typename Off>
static void write_output(const char *path, const uint8_t *text, const wordcount_gpu<Off> &g,
                         uint64_t unique)
{
    std::vector<uint64_t> order(unique);
    for (uint64_t r = 0; r < unique; r++)
        order[r] = r;
    const word_run<Off> *runs = g.h_runs;
    const Off *lengths = g.h_lengths;
    std::sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) {
        uint64_t la = lengths[a], lb = lengths[b];
        int c = memcmp(text + runs[a].start, text + runs[b].start, (size_t)std::min(la, lb));
        return c ? c < 0 : la < lb;
    });
    FILE *f = bench_open_output(path);
    for (uint64_t r : order) {
        write_tsv_word(f, text + runs[r].start, lengths[r]);
        fprintf(f, "\t%" PRIu32 "\n", runs[r].count);
    }
    bench_close_output(f, path);
}

static void print_json(uint64_t input_bytes, uint64_t words, uint64_t unique,
                       const std::vector<double> &runs_ms, const double *phases)
{
    printf("{\"program\":\"cub-wordcount\",\"input_bytes\":%" PRIu64 ",\"words\":%" PRIu64
           ",\"unique\":%" PRIu64 ",\"runs_ms\":",
           input_bytes, words, unique);
    bench_json_ms_list(runs_ms);
    printf(",\"median_ms\":%.4f,\"phases_of\":\"median run\",\"phases_ms\":{",
           bench_median(runs_ms));
    for (int p = 0; p < PH_COUNT; p++)
        printf("%s\"%s\":%.4f", p ? "," : "", phase_names[p], phases[p]);
    printf("}}\n");
    fflush(stdout);
}

template <typename Off>
static void wordcount_main(const bench_args &a, const uint8_t *text, uint64_t size)
{
    wordcount_gpu<Off> g;
    wordcount_setup(g, text, size);
    fprintf(stderr, "cub-wordcount: %" PRIu64 " bytes, %" PRIu64 " words, %zu-byte offsets\n",
            size, g.words, sizeof(Off));

    double phases[PH_COUNT], total;
    uint64_t unique = wordcount_run(g, true, phases, &total);
    std::vector<double> runs_ms(a.runs);
    std::vector<std::vector<double>> run_phases(a.runs, std::vector<double>(PH_COUNT));
    for (int r = 0; r < a.runs; r++) {
        uint64_t u = wordcount_run(g, false, run_phases[r].data(), &runs_ms[r]);
        if (u != unique)
            bench_die("run %d found %" PRIu64 " distinct words, the warm-up %" PRIu64, r + 1, u,
                      unique);
    }
    check_counts(g, unique);
    write_output(a.output, text, g, unique);
    print_json(size, g.words, unique, runs_ms, run_phases[bench_median_run(runs_ms)].data());
    wordcount_teardown(g);
}

int main(int argc, char **argv)
{
    bench_program = "cub-wordcount";
    bench_args a = bench_parse_args(argc, argv, usage_text);
    uint64_t size = 0;
    uint8_t *text = bench_read_pinned(a.input, &size);
    if (size <= UINT32_MAX)
        wordcount_main<uint32_t>(a, text, size);
    else
        wordcount_main<uint64_t>(a, text, size);
    CK(cudaFreeHost(text));
    return 0;
}
