/*
 * staging.cu - host inputs on their way to the device: pinned staging
 * pieces filled by copy threads that run on from one input into the next,
 * inputs in chunks sent into the second input buffer while the map reads
 * the first, the faults that stop an upload; the job's parameters; the
 * input buffer and the record index, and the splitting of a `lines` input
 * into records.
 */
#include "run.h"

#include <cub/device/device_scan.cuh>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

namespace soren__gpu {

/* Copies the parameters up, into the blocks of the run before where they
 * fit (a session's runs change parameters, rarely their sizes); one whose
 * version is the one the block holds is there already.  A scratch
 * parameter's block is zeroed instead: the host's bytes are zeros too. */
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
        if (r->spec->scratch_params >> i & 1) {
            CUDA_TRY(r, cudaMemsetAsync(r->in.param_blocks[i], 0, host->size[i], r->stream));
        } else {
            const void *from = host->data[i];
            if (host->size[i] <= PARAM_STAGING_BYTES - staged) {
                from = memcpy(r->param_staging + staged, host->data[i], host->size[i]);
                staged += host->size[i];
            }
            CUDA_TRY(r, cudaMemcpyAsync(r->in.param_blocks[i], from, host->size[i],
                                        cudaMemcpyHostToDevice, r->stream));
        }
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
    unsigned threads = soren_gpu_copy_threads();
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

/* The run's error for an input whose upload stopped on f. */
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

static uint8_t *buffer_of(gpu_run *r, int b) { return b ? r->in.input_alt : r->in.input; }

/* Where input k's bytes go: the buffer of its parity when piped, else the
 * first. */
static int slot_of(const input_feed *f, size_t k) { return f->piped ? (int)(k % 2) : 0; }

static bool input_issued(const input_feed *f, size_t k)
{
    return k < f->opened && f->issued[slot_of(f, k)] == f->inputs[k].size;
}

/* Hands out the next piece of the open inputs up to input `last`, under the
 * lock: false when there is none left to read. */
static bool take_piece(input_feed *f, size_t last, size_t *k, uint64_t *off, uint64_t *n)
{
    while (f->next_input < f->opened && f->next_offset == f->inputs[f->next_input].size) {
        f->next_input++;
        f->next_offset = 0;
    }
    if (f->stop || f->next_input >= f->opened || f->next_input > last)
        return false;
    *k = f->next_input;
    *off = f->next_offset;
    const uint64_t left = f->inputs[*k].size - *off;
    *n = left < STAGING_PIECE ? left : STAGING_PIECE;
    f->next_offset += *n;
    return true;
}

/* The first fault stops every copy thread; the main thread finds it in
 * feed_wait.  Under the lock. */
static void feed_fault(input_feed *f, size_t k, const upload_fault *fault)
{
    if (!f->stop) {
        f->fault = *fault;
        f->fault_input = k;
    }
    f->stop = true;
    pthread_cond_broadcast(&f->changed);
}

/* Queues the copy of pinned piece i (at buf), n bytes of input k at off,
 * under the lock, so that the events bracketing input k's copies come
 * before its first and after its last in the stream's order (other inputs'
 * copies may fall between: they are harmless there). */
static bool issue_piece(input_feed *f, unsigned i, const uint8_t *buf, size_t k, uint64_t off,
                        uint64_t n, upload_fault *fault)
{
    gpu_run *r = f->r;
    const int b = slot_of(f, k);
    cudaStream_t stream = f->piped ? r->in.copy_stream : r->stream;
    fault->call = "cudaEventRecord(upload_began)";
    if (f->piped && f->issued[b] == 0 &&
        (fault->rc = cudaEventRecord(r->in.upload_began[b], stream)) != cudaSuccess)
        return false;
    fault->call = "cudaMemcpyAsync(input)";
    if ((fault->rc = cudaMemcpyAsync(buffer_of(r, b) + off, buf, n, cudaMemcpyHostToDevice,
                                     stream)) != cudaSuccess)
        return false;
    fault->call = "cudaEventRecord(staged)";
    if ((fault->rc = cudaEventRecord(r->in.staged[i], stream)) != cudaSuccess)
        return false;
    f->issued[b] += n;
    if (f->issued[b] < f->inputs[k].size)
        return true;
    fault->call = "cudaEventRecord(uploaded)";
    if (f->piped && (fault->rc = cudaEventRecord(r->in.uploaded[b], stream)) != cudaSuccess)
        return false;
    pthread_cond_broadcast(&f->changed);
    return true;
}

/* Stages pieces of the inputs up to `last` into copy thread t's two pinned
 * pieces in turn until none is left to read; called and returns with the
 * lock held.  The read runs outside the lock; the piece's previous copy
 * must be on the device first. */
static void stage_pieces(input_feed *f, unsigned t, size_t last)
{
    gpu_run *r = f->r;
    size_t k;
    uint64_t off, n;
    while (take_piece(f, last, &k, &off, &n)) {
        const unsigned i = 2 * t + f->turn[t];
        f->turn[t] ^= 1;
        const int fd = f->fd[slot_of(f, k)];
        pthread_mutex_unlock(&f->lock);
        upload_fault fault = NO_FAULT;
        uint8_t *buf = r->in.pieces + (uint64_t)i * STAGING_PIECE;
        fault.call = "cudaEventSynchronize(staged)";
        if ((fault.rc = cudaEventSynchronize(r->in.staged[i])) == cudaSuccess) {
            if (fd < 0)
                memcpy(buf, f->inputs[k].data + off, n);
            else
                fault.read_errno = soren_input_pread(fd, &f->inputs[k], off, buf, n);
        }
        pthread_mutex_lock(&f->lock);
        if (!upload_faulted(&fault) && !f->stop && issue_piece(f, i, buf, k, off, n, &fault))
            soren_progress_add(f->progress, n);
        if (upload_faulted(&fault))
            feed_fault(f, k, &fault);
    }
}

static void *copy_thread_main(void *arg)
{
    copy_thread *c = (copy_thread *)arg;
    input_feed *f = c->f;
    upload_fault fault = NO_FAULT;
    fault.call = "cudaSetDevice";
    fault.rc = cudaSetDevice(f->r->opt->device);
    pthread_mutex_lock(&f->lock);
    if (upload_faulted(&fault))
        feed_fault(f, 0, &fault);
    while (!f->stop) {
        stage_pieces(f, c->t, SIZE_MAX);
        if (!f->stop && f->next_input >= f->count)
            break;
        if (!f->stop)
            pthread_cond_wait(&f->changed, &f->lock);
    }
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

/* Starts the copy threads that take inputs' pieces as they are opened
 * (feed_open), on the run's copy stream into buffer k % 2 where piped,
 * else on its stream into the first buffer.  A copy from the page cache is
 * bound by the host's memory, which one thread does not saturate
 * (bench/results/h100/staging.md), and the threads run on from one input
 * into the next: restarting them at each would leave the copy engine idle
 * while they wait for their first reads.  A mapped file's bytes are read
 * from the file, as fast as from the mapping: the mapping's pages stay
 * untouched, so the kernel neither maps them now nor unmaps them at munmap.
 * With no thread started (or none needed), feed_wait reads on the caller's
 * thread. */
void feed_start(gpu_run *r, input_feed *f, const soren_input *inputs, size_t count, bool piped)
{
    *f = input_feed{};
    f->r = r;
    f->inputs = inputs;
    f->count = count;
    f->piped = piped;
    f->progress = piped ? NULL : r->opt->progress;
    f->fd[0] = f->fd[1] = -1;
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->changed, NULL);
    /* no more threads than the inputs have pieces: a session's staging
     * keeps the threads of its largest input, and a small one needs few */
    uint64_t pieces = 0;
    for (size_t k = 0; k < count; k++)
        pieces += (inputs[k].size + STAGING_PIECE - 1) / STAGING_PIECE;
    const unsigned threads = pieces < r->in.copy_threads ? (unsigned)pieces : r->in.copy_threads;
    for (unsigned t = 0; t < threads; t++) {
        f->threads[t] = copy_thread{f, t};
        if (pthread_create(&f->thread_ids[t], NULL, copy_thread_main, &f->threads[t]) != 0)
            break;
        f->started++;
    }
}

/* Lets the copy threads read input k (its buffer's last reader is done). */
void feed_open(input_feed *f, size_t k)
{
    pthread_mutex_lock(&f->lock);
    const int b = slot_of(f, k);
    if (f->fd[b] >= 0)
        close(f->fd[b]);
    f->fd[b] = f->inputs[k].size ? soren_input_reopen(&f->inputs[k]) : -1;
    f->issued[b] = 0;
    f->opened = k + 1;
    if (f->inputs[k].size == 0 && f->piped) {
        cudaStream_t stream = f->r->in.copy_stream;
        upload_fault fault = NO_FAULT;
        fault.call = "cudaEventRecord(uploaded)";
        if ((fault.rc = cudaEventRecord(f->r->in.upload_began[b], stream)) != cudaSuccess ||
            (fault.rc = cudaEventRecord(f->r->in.uploaded[b], stream)) != cudaSuccess)
            feed_fault(f, k, &fault);
    }
    pthread_cond_broadcast(&f->changed);
    pthread_mutex_unlock(&f->lock);
}

/* Waits until every copy of input k has been queued (not landed: the
 * stream orders what reads it after them). */
soren_status feed_wait(input_feed *f, size_t k)
{
    pthread_mutex_lock(&f->lock);
    while (!input_issued(f, k) && !f->stop) {
        if (f->started == 0)
            stage_pieces(f, 0, k);
        else
            pthread_cond_wait(&f->changed, &f->lock);
    }
    const bool issued = input_issued(f, k);
    pthread_mutex_unlock(&f->lock);
    /* before feed_stop, only a fault stops the feed */
    return issued ? SOREN_OK
                  : upload_failed(f->r, &f->inputs[f->fault_input], &f->fault, __FILE__, __LINE__);
}

/* Stops the copy threads once their pieces in hand are queued (a failed or
 * stopped pass leaves the rest unread) and closes the inputs' files. */
void feed_stop(input_feed *f)
{
    pthread_mutex_lock(&f->lock);
    f->stop = true;
    pthread_cond_broadcast(&f->changed);
    pthread_mutex_unlock(&f->lock);
    for (unsigned t = 0; t < f->started; t++)
        pthread_join(f->thread_ids[t], NULL);
    for (int b = 0; b < 2; b++)
        if (f->fd[b] >= 0)
            close(f->fd[b]);
    pthread_cond_destroy(&f->changed);
    pthread_mutex_destroy(&f->lock);
}

/* Copies an input to the device on the run's stream, and a pairs input's
 * record starts (index input has nothing to copy; pairs that an earlier
 * stage left on the device, only their starts, within the device). */
soren_status upload_input(gpu_run *r, const soren_input *in)
{
    r->in.cur_input = in->on_device ? in->data : r->in.input;
    r->in.cur_base = in->base;
    if (r->spec->input_format == SOREN_INPUT_PAIRS && in->device_starts)
        CUDA_TRY(r, cudaMemcpyAsync(r->in.line_starts, in->device_starts, (in->count + 1) * 8,
                                    cudaMemcpyDeviceToDevice, r->stream));
    if (r->spec->input_format == SOREN_INPUT_INDEX || in->on_device)
        return SOREN_OK;
    if (r->spec->input_format == SOREN_INPUT_PAIRS)
        CUDA_TRY(r, cudaMemcpyAsync(r->in.line_starts, in->starts, (in->count + 1) * 8,
                                    cudaMemcpyHostToDevice, r->stream));
    if (in->size == 0)
        return SOREN_OK;
    input_feed f;
    feed_start(r, &f, in, 1, false);
    feed_open(&f, 0);
    soren_status st = feed_wait(&f, 0);
    feed_stop(&f);
    return st;
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

/* Input i's bytes on the device, in buffer i % 2, and, where the pass
 * goes on (more), input i + 1's on their way up into the other: its last
 * reader, the map of input i - 1, has finished (map_pass waits for each
 * map but the last).  The copy threads read on from input i into input
 * i + 1. */
soren_status upload_next(gpu_run *r, input_feed *f, size_t i, bool more)
{
    if (i == 0)
        feed_open(f, 0);
    if (more)
        feed_open(f, i + 1);
    soren_status st = feed_wait(f, i);
    if (st != SOREN_OK)
        return st;
    soren_progress_add(r->opt->progress, f->inputs[i].size);
    if (soren_progress_check(r->opt->progress, r->spec->job_name, r->err) != SOREN_OK)
        return r->err->code;
    CUDA_TRY(r, cudaStreamWaitEvent(r->stream, r->in.uploaded[i % 2], 0));
    r->in.cur_input = buffer_of(r, (int)(i % 2));
    r->in.cur_base = f->inputs[i].base;
    return SOREN_OK;
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

extern "C" unsigned soren_gpu_copy_threads(void)
{
    const unsigned cpus = soren_cpu_count(), most = soren__gpu::COPY_THREADS_MAX;
    return cpus < most ? cpus : most;
}
