/*
 * staging.cu - host inputs on their way to the device: pinned staging
 * pieces filled by stager threads, inputs in chunks sent by an uploader
 * thread into the second input buffer while the map reads the first, the
 * faults that stop an upload; the job's parameters; the input buffer and
 * the record index, and the splitting of a `lines` input into records.
 */
#include "run.h"

#include <cub/device/device_scan.cuh>

#include <atomic>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

namespace soren__gpu {

/* Copies the parameters up, into the blocks of the run before where they
 * fit (a session's runs change parameters, rarely their sizes); one whose
 * version is the one the block holds is there already. */
soren_status upload_params(gpu_run *r, const soren_params *host, const uint64_t *versions)
{
    uint64_t staged = 0;
    r->in.params = *host;
    for (uint32_t i = 0; i < host->count && i < SOREN_MAX_PARAMS; i++) {
        r->in.params.data[i] = NULL;
        if (!host->data[i])
            continue;
        const uint64_t version = versions ? versions[i] : 0;
        if (version && version == r->in.param_version[i] && r->in.param_blocks[i]) {
            r->in.params.data[i] = r->in.param_blocks[i];
            continue;
        }
        r->in.param_version[i] = 0;
        if (host->size[i] > r->in.param_capacity[i] || !r->in.param_blocks[i]) {
            dev_free(r, r->in.param_blocks[i]);
            r->in.param_blocks[i] = NULL;
            r->in.param_capacity[i] = 0;
            ALLOC(r, r->in.param_blocks[i], host->size[i], "a job parameter");
            r->in.param_capacity[i] = host->size[i];
        }
        const void *from = host->data[i];
        if (host->size[i] <= PARAM_STAGING_BYTES - staged) {
            from = memcpy(r->param_staging + staged, host->data[i], host->size[i]);
            staged += host->size[i];
        }
        CUDA_TRY(r, cudaMemcpyAsync(r->in.param_blocks[i], from, host->size[i],
                                    cudaMemcpyHostToDevice, r->stream));
        r->in.params.data[i] = r->in.param_blocks[i];
        r->in.param_version[i] = version;
    }
    return SOREN_OK;
}

/* Pinned staging, where a run has host input (largest: the most bytes of
 * one): two pieces for each copy thread, and no more threads than the
 * largest input has pieces.  A session keeps it (pinning host memory costs
 * milliseconds, and a process's pinnings wait for each other), and pins
 * more where a later run's input has work for more threads. */
soren_status alloc_staging(gpu_run *r, uint64_t largest)
{
    if (largest == 0)
        return SOREN_OK;
    unsigned cpus = soren_cpu_count(), threads = cpus < COPY_THREADS_MAX ? cpus : COPY_THREADS_MAX;
    uint64_t pieces = (largest + STAGING_PIECE - 1) / STAGING_PIECE;
    if (pieces < threads)
        threads = (unsigned)pieces;
    if (r->in.pieces && r->in.copy_threads >= threads)
        return SOREN_OK;
    if (r->in.pieces)
        cudaFreeHost(r->in.pieces);
    r->in.pieces = NULL;
    r->in.copy_threads = threads;
    uint64_t size = 2ull * r->in.copy_threads * STAGING_PIECE;
    cudaError_t rc = cudaHostAlloc((void **)&r->in.pieces, size, cudaHostAllocDefault);
    if (rc != cudaSuccess) {
        r->in.pieces = NULL;
        (void)cudaGetLastError();
        return soren_error_set(r->err, SOREN_EDEVICE, "%s: cannot allocate %llu bytes of "
                               "pinned host memory to stage the input (%s); check the "
                               "locked-memory limit (ulimit -l)", r->spec->job_name,
                               (unsigned long long)size, cudaGetErrorString(rc));
    }
    for (unsigned i = 0; i < 2 * r->in.copy_threads; i++)
        if (!r->in.staged[i])
            CUDA_TRY(r, cudaEventCreateWithFlags(&r->in.staged[i], cudaEventDisableTiming));
    return SOREN_OK;
}

const upload_fault NO_FAULT = {cudaSuccess, 0, ""};

static bool upload_faulted(const upload_fault *f) { return f->rc != cudaSuccess || f->read_errno; }

/* The run's error for a stage_up that stopped on f. */
static soren_status upload_failed(gpu_run *r, const soren_input *in, const upload_fault *f,
                                  const char *file, int line)
{
    if (f->read_errno == ENODATA)
        return soren_error_set(r->err, SOREN_EINPUT, "%s: input %s ended before byte %llu: "
                               "it shrank during the run", r->spec->job_name, in->path,
                               (unsigned long long)(in->file_offset + in->size));
    if (f->read_errno)
        return soren_error_set(r->err, SOREN_EINPUT, "%s: cannot read input %s: %s",
                               r->spec->job_name, in->path, strerror(f->read_errno));
    return cuda_fail(r, f->rc, f->call, file, line);
}

/* One copy thread of stage_up: takes the input's next piece (next counts
 * the bytes handed out), reads it into one of its two pinned pieces and
 * queues that piece's copy to the device, then fills the other while the
 * copy engine drains it.  The first fault stops every thread (next jumps
 * past the end). */
struct stager {
    gpu_run *r;
    const soren_input *in;
    int fd; /* the input's file (soren_input_reopen), or -1: copy from data */
    uint8_t *dst;
    cudaStream_t stream;
    std::atomic<uint64_t> *next;
    soren_progress *progress;
    unsigned t;
    pthread_t thread;
    bool running;
    upload_fault fault;
};

static void *stager_main(void *arg)
{
    stager *g = (stager *)arg;
    gpu_run *r = g->r;
    upload_fault *f = &g->fault;
    const uint64_t piece = STAGING_PIECE, size = g->in->size;
    f->call = "cudaSetDevice";
    if (g->t > 0 && (f->rc = cudaSetDevice(r->opt->device)) != cudaSuccess) {
        g->next->store(UINT64_MAX / 2);
        return NULL;
    }
    for (unsigned k = 0;; k ^= 1) {
        uint64_t off = g->next->fetch_add(piece);
        /* after a fault another thread pushed next far past the end */
        if (off >= size)
            break;
        uint64_t n = size - off < piece ? size - off : piece;
        unsigned i = 2 * g->t + k;
        uint8_t *buf = r->in.pieces + (uint64_t)i * piece;
        /* The piece's previous copy must be on the device before refilling. */
        f->call = "cudaEventSynchronize(staged)";
        if ((f->rc = cudaEventSynchronize(r->in.staged[i])) != cudaSuccess)
            break;
        if (g->fd < 0)
            memcpy(buf, g->in->data + off, n);
        else if ((f->read_errno = soren_input_pread(g->fd, g->in, off, buf, n)) != 0)
            break;
        f->call = "cudaMemcpyAsync(input)";
        if ((f->rc = cudaMemcpyAsync(g->dst + off, buf, n, cudaMemcpyHostToDevice,
                                     g->stream)) != cudaSuccess)
            break;
        f->call = "cudaEventRecord(staged)";
        if ((f->rc = cudaEventRecord(r->in.staged[i], g->stream)) != cudaSuccess)
            break;
        soren_progress_add(g->progress, n);
    }
    if (upload_faulted(f))
        g->next->store(UINT64_MAX / 2);
    return NULL;
}

/* Copies a host input's bytes to dst on stream through the pinned pieces,
 * by up to copy_threads threads (the caller is one): a copy from the page
 * cache is bound by the host's memory, which one thread does not saturate
 * (bench/results/h100/staging.md).  A mapped file's bytes are read from
 * the file, as fast as from the mapping: the mapping's pages stay
 * untouched, so the kernel neither maps them now nor unmaps them at
 * munmap.  Every copy has been queued on stream when it returns true; else
 * *f says what failed.  Touches nothing but the pinned pieces and their
 * events, so an uploader thread may run it. */
static bool stage_up(gpu_run *r, const soren_input *in, uint8_t *dst, cudaStream_t stream,
                     soren_progress *progress, upload_fault *f)
{
    *f = NO_FAULT;
    if (in->size == 0)
        return true;
    const int fd = soren_input_reopen(in);
    std::atomic<uint64_t> next{0};
    stager g[COPY_THREADS_MAX];
    uint64_t pieces = (in->size + STAGING_PIECE - 1) / STAGING_PIECE;
    unsigned threads = pieces < r->in.copy_threads ? (unsigned)pieces : r->in.copy_threads;
    for (unsigned t = 0; t < threads; t++) {
        g[t] = {r, in, fd, dst, stream, &next, progress, t, pthread_t(), false, NO_FAULT};
        if (t > 0)
            g[t].running = pthread_create(&g[t].thread, NULL, stager_main, &g[t]) == 0;
    }
    /* A thread that could not be started leaves its pieces to the others. */
    stager_main(&g[0]);
    for (unsigned t = 0; t < threads; t++) {
        if (g[t].running)
            pthread_join(g[t].thread, NULL);
        if (!upload_faulted(f) && upload_faulted(&g[t].fault))
            *f = g[t].fault;
    }
    if (fd >= 0)
        close(fd);
    return !upload_faulted(f);
}

/* Copies an input to the device on the run's stream, and a pairs input's
 * record starts (index input has nothing to copy). */
soren_status upload_input(gpu_run *r, const soren_input *in)
{
    r->in.cur_input = in->on_device ? in->data : r->in.input;
    r->in.cur_base = in->base;
    if (r->spec->input_format == SOREN_INPUT_INDEX || in->on_device)
        return SOREN_OK;
    if (r->spec->input_format == SOREN_INPUT_PAIRS)
        CUDA_TRY(r, cudaMemcpyAsync(r->in.line_starts, in->starts, (in->count + 1) * 8,
                                    cudaMemcpyHostToDevice, r->stream));
    upload_fault f;
    return stage_up(r, in, r->in.input, r->stream, r->opt->progress, &f)
               ? SOREN_OK
               : upload_failed(r, in, &f, __FILE__, __LINE__);
}

/* ---- Inputs in chunks: the next goes up while the map reads this one ----- */

/* 1 if the inputs go up through both buffers, overlapping the maps: two
 * or more host inputs of lines or fixed records (one has nothing to
 * overlap with; a pairs input's record starts share the record index). */
bool pipelined(const soren_stage_spec *s, const soren_input *inputs, size_t n)
{
    if (n < 2 || (s->input_format != SOREN_INPUT_LINES && s->input_format != SOREN_INPUT_FIXED))
        return false;
    for (size_t i = 0; i < n; i++)
        if (inputs[i].on_device)
            return false;
    return true;
}

static uint8_t *buffer_of(gpu_run *r, int b) { return b ? r->in.input_alt : r->in.input; }

static void *uploader_main(void *arg)
{
    uploader *u = (uploader *)arg;
    gpu_run *r = u->r;
    upload_fault *f = &u->fault;
    f->call = "cudaSetDevice";
    if ((f->rc = cudaSetDevice(r->opt->device)) != cudaSuccess)
        return NULL;
    f->call = "cudaEventRecord(upload_began)";
    if ((f->rc = cudaEventRecord(r->in.upload_began[u->b], r->in.copy_stream)) != cudaSuccess)
        return NULL;
    if (stage_up(r, u->in, buffer_of(r, u->b), r->in.copy_stream, NULL, f)) {
        f->call = "cudaEventRecord(uploaded)";
        f->rc = cudaEventRecord(r->in.uploaded[u->b], r->in.copy_stream);
    }
    return NULL;
}

/* Starts sending in into buffer b (its last reader, the map of the input
 * before the one in the other buffer, has finished: map waits for its
 * kernels).  A thread that cannot be started leaves the copy to the
 * caller, here. */
static void upload_start(gpu_run *r, uploader *u, const soren_input *in, int b)
{
    *u = (uploader){r, in, b, pthread_t(), false, NO_FAULT};
    u->running = pthread_create(&u->thread, NULL, uploader_main, u) == 0;
    if (!u->running)
        uploader_main(u);
}

/* Waits for the uploader's copies to be issued, then makes the run's stream
 * wait for them to land: what reads buffer b next runs after. */
static soren_status upload_finish(gpu_run *r, uploader *u)
{
    if (u->running)
        pthread_join(u->thread, NULL);
    u->running = false;
    if (upload_faulted(&u->fault))
        return upload_failed(r, u->in, &u->fault, __FILE__, __LINE__);
    soren_progress_add(r->opt->progress, u->in->size);
    if (soren_progress_check(r->opt->progress, r->spec->job_name, r->err) != SOREN_OK)
        return r->err->code;
    CUDA_TRY(r, cudaStreamWaitEvent(r->stream, r->in.uploaded[u->b], 0));
    r->in.cur_input = buffer_of(r, u->b);
    r->in.cur_base = u->in->base;
    return SOREN_OK;
}

/* The copy stream, its events and the second buffer, once. */
soren_status pipeline_setup(gpu_run *r)
{
    if (!r->in.copy_stream)
        CUDA_TRY(r, cudaStreamCreateWithFlags(&r->in.copy_stream, cudaStreamNonBlocking));
    for (int b = 0; b < 2; b++) {
        if (!r->in.upload_began[b])
            CUDA_TRY(r, cudaEventCreate(&r->in.upload_began[b]));
        if (!r->in.uploaded[b])
            CUDA_TRY(r, cudaEventCreate(&r->in.uploaded[b]));
    }
    /* as large as the first (session_inputs sized it) */
    if (r->in.input_alt_capacity < r->in.input_capacity) {
        dev_free(r, r->in.input_alt);
        r->in.input_alt = NULL;
        r->in.input_alt_capacity = 0;
        ALLOC(r, r->in.input_alt, (r->in.input_capacity + 15) & ~15ull, "the second input buffer");
        r->in.input_alt_capacity = r->in.input_capacity;
    }
    if (!r->in.began)
        CUDA_TRY(r, cudaEventCreate(&r->in.began));
    CUDA_TRY(r, cudaEventRecord(r->in.began, r->stream));
    return SOREN_OK;
}

/* Input i's bytes on the device, in buffer i % 2, and input i + 1's on
 * their way up into the other. */
soren_status upload_next(gpu_run *r, uploader *up, const soren_input *inputs, size_t n, size_t i)
{
    if (i == 0)
        upload_start(r, up, &inputs[0], 0);
    soren_status st = upload_finish(r, up);
    if (st == SOREN_OK && i + 1 < n)
        upload_start(r, up, &inputs[i + 1], (int)((i + 1) % 2));
    return st;
}

/* Grows the record index (lines and pairs input) and the sort variant's
 * per-record counts, once it has them, to hold `records` records; each
 * input refills them, so nothing is kept. */
static soren_status ensure_records(gpu_run *r, uint64_t records)
{
    const soren_stage_spec *s = r->spec;
    const bool indexed = s->input_format == SOREN_INPUT_LINES ||
                         s->input_format == SOREN_INPUT_PAIRS;
    if (records <= r->in.record_capacity && (r->in.line_starts || !indexed))
        return SOREN_OK;
    if (indexed) {
        dev_free(r, r->in.line_starts);
        r->in.line_starts = NULL;
        ALLOC(r, r->in.line_starts, (records + 2) * sizeof(uint64_t), "the record index");
    }
    unsigned long long **arrays[] = {&r->reg.record_pairs, &r->reg.record_key_bytes};
    for (int i = 0; i < 2; i++) {
        if (!*arrays[i])
            continue;
        dev_free(r, *arrays[i]);
        *arrays[i] = NULL;
        ALLOC(r, *arrays[i], (records + 1) * 8, "the per-record counts");
    }
    r->in.record_capacity = records;
    return SOREN_OK;
}

/* Grows what this run's inputs need beyond what earlier runs had: the
 * input buffer (host inputs; largest: the most bytes of one) and the
 * record index (records: the most records of one), which split_lines
 * sizes for lines input once it has counted them. */
soren_status session_inputs(gpu_run *r, uint64_t largest, uint64_t records)
{
    const soren_stage_spec *s = r->spec;
    if (s->input_format != SOREN_INPUT_INDEX && largest > r->in.input_capacity) {
        dev_free(r, r->in.input);
        r->in.input = NULL;
        r->in.input_capacity = 0;
        /* padded to 16 bytes: the splitter reads whole uint4s */
        ALLOC(r, r->in.input, (largest + 15) & ~15ull, "the input");
        r->in.input_capacity = largest;
    }
    return s->input_format == SOREN_INPUT_LINES ? SOREN_OK : ensure_records(r, records);
}

/* Finds the records of a `lines` input on the device; returns their number. */
soren_status split_lines(gpu_run *r, uint64_t size, uint64_t *count)
{
    *count = 0;
    if (size == 0)
        return SOREN_OK;
    uint64_t tiles = (size + SPLIT_TILE - 1) / SPLIT_TILE;
    if (tiles > r->in.tile_capacity) {
        dev_free(r, r->in.tile_first);
        r->in.tile_first = NULL;
        r->in.tile_capacity = 0;
        ALLOC(r, r->in.tile_first, (tiles + 1) * sizeof(uint64_t),
              "the line counts of the input's tiles");
        r->in.tile_capacity = tiles;
    }
    uint64_t *tile_first = r->in.tile_first;
    soren_status st = SOREN_OK;
    cudaError_t rc = cudaSuccess;
    unsigned grid = (unsigned)(tiles < (uint64_t)r->grid ? tiles : (uint64_t)r->grid);
    uint64_t lines = 0;
    do {
        launch_split_count(grid, r->stream, r->in.cur_input, size, tiles, tile_first);
        if ((rc = cudaGetLastError()) != cudaSuccess)
            break;
        size_t need = 0;
        if ((rc = cub::DeviceScan::ExclusiveSum(NULL, need, tile_first, tile_first,
                                                (int64_t)tiles + 1, r->stream)) != cudaSuccess)
            break;
        if ((st = temp_reserve(r, need)) != SOREN_OK)
            break;
        /* tile_first[tiles] is scanned too: it becomes the total. */
        if ((rc = cub::DeviceScan::ExclusiveSum(r->pool.temp, need, tile_first, tile_first,
                                                (int64_t)tiles + 1, r->stream)) != cudaSuccess)
            break;
        /* The total sizes the record index exactly: a bound from the bytes
         * would take eight times the input. */
        if ((rc = cudaMemcpyAsync(&lines, tile_first + tiles, sizeof lines,
                                  cudaMemcpyDeviceToHost, r->stream)) != cudaSuccess)
            break;
        if ((st = wait_stream(r)) != SOREN_OK || (st = ensure_records(r, lines + 1)) != SOREN_OK)
            break;
        launch_split_write(grid, r->stream, r->in.cur_input, size, tiles, tile_first,
                           r->in.line_starts);
        rc = cudaGetLastError();
    } while (0);
    if (rc != cudaSuccess)
        return cuda_fail(r, rc, "splitting the input into lines", __FILE__, __LINE__);
    if (st != SOREN_OK)
        return st;
    /* one record before the first newline, and one after each */
    *count = lines + 1;
    /* The sentinel makes record i = [starts[i], starts[i+1] - 1) hold for
     * the last line too, newline-terminated or not. */
    launch_line_end(r->stream, r->in.line_starts, *count, r->in.cur_input, size);
    CUDA_TRY(r, cudaGetLastError());
    return SOREN_OK;
}

} /* namespace soren__gpu */
