/*
 * engine.cu - the GPU engine's host side (see engine.h), and the device code
 * that does not depend on a plugin's functions: line splitting, compaction,
 * grouping, ordering and packing.
 */
#include <soren/soren.h>

#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <thrust/iterator/counting_iterator.h>

extern "C" {
#include "../cpu/cpu.h"
#include "engine.h"
}

namespace {

/* ---- Device code -------------------------------------------------------- */

/* A line starts at 0 and after every '\n' (a start at the very end is no
 * line: the input ended with a newline). */
struct line_start {
    const uint8_t *input;
    __device__ bool operator()(uint64_t i) const { return i == 0 || input[i - 1] == '\n'; }
};

struct slot_used {
    const unsigned long long *slots;
    __device__ bool operator()(uint64_t i) const { return slots[i] != 0; }
};

/* The key's size as stored in the key space. */
__device__ inline uint32_t key_size_of(const uint8_t *keys, uint32_t ref)
{
    return *(const uint32_t *)(keys + ((uint64_t)ref << 2));
}

__device__ inline const uint8_t *key_bytes_of(const uint8_t *keys, uint32_t ref)
{
    return keys + ((uint64_t)ref << 2) + 4;
}

__device__ inline bool same_key(const uint8_t *keys, uint32_t a, uint32_t b)
{
    uint32_t n = key_size_of(keys, a);
    if (n != key_size_of(keys, b))
        return false;
    const uint8_t *pa = key_bytes_of(keys, a), *pb = key_bytes_of(keys, b);
    for (uint32_t i = 0; i < n; i++)
        if (pa[i] != pb[i])
            return false;
    return true;
}

/* Byte-string order, as the CPU engine's: memcmp, then the shorter first. */
struct string_key_less {
    const uint8_t *keys;
    const uint32_t *refs;
    __device__ bool operator()(uint32_t a, uint32_t b) const
    {
        uint32_t ra = refs[a], rb = refs[b];
        uint32_t na = key_size_of(keys, ra), nb = key_size_of(keys, rb);
        const uint8_t *pa = key_bytes_of(keys, ra), *pb = key_bytes_of(keys, rb);
        uint32_t n = na < nb ? na : nb;
        for (uint32_t i = 0; i < n; i++)
            if (pa[i] != pb[i])
                return pa[i] < pb[i];
        return na < nb;
    }
};

/* An unsigned integer that sorts as the typed value does: integers
 * numerically, floats in IEEE total order (-0 before +0, NaNs at the ends by
 * sign), the CPU engine's order. */
__device__ inline uint64_t ordered_bits(uint32_t type, const uint8_t *p)
{
    switch (type) {
    case SOREN_TYPE_U32:
    case SOREN_TYPE_INDEX: return *(const uint32_t *)p;
    case SOREN_TYPE_U64: return *(const uint64_t *)p;
    case SOREN_TYPE_I64: return *(const uint64_t *)p ^ (1ull << 63);
    case SOREN_TYPE_F32: {
        uint32_t b = *(const uint32_t *)p;
        return (b & 0x80000000u) ? (uint32_t)~b : (b | 0x80000000u);
    }
    case SOREN_TYPE_F64: {
        uint64_t b = *(const uint64_t *)p;
        return (b & (1ull << 63)) ? ~b : (b | (1ull << 63));
    }
    }
    return 0;
}

__global__ void line_end_kernel(uint64_t *starts, const unsigned long long *count,
                                const uint8_t *input, uint64_t size)
{
    /* The sentinel makes record i = [starts[i], starts[i+1] - 1) hold for
     * the last line too, newline-terminated or not. */
    starts[*count] = size + (input[size - 1] == '\n' ? 0 : 1);
}

__global__ void gather_slots_kernel(const uint64_t *used, uint64_t n,
                                    const unsigned long long *slots, const uint8_t *slot_values,
                                    uint32_t value_size, uint32_t *refs, uint8_t *values)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t i = used[j];
        refs[j] = (uint32_t)slots[i];
        memcpy(values + j * value_size, slot_values + i * value_size, value_size);
    }
}

__global__ void iota_kernel(uint32_t *perm, uint64_t n)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x)
        perm[j] = (uint32_t)j;
}

/* Sort keys for the radix sorts: a typed key, or a value (inverted for a
 * descending order), of entry perm[j]. */
__global__ void key_bits_kernel(const uint32_t *perm, uint64_t n, const uint32_t *refs,
                                const uint8_t *keys, uint32_t key_type, uint64_t *bits)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x)
        bits[j] = ordered_bits(key_type, key_bytes_of(keys, refs[perm[j]]));
}

__global__ void value_bits_kernel(const uint32_t *perm, uint64_t n, const uint8_t *values,
                                  uint32_t value_size, uint32_t value_type, bool descending,
                                  uint64_t *bits)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t b = ordered_bits(value_type, values + (uint64_t)perm[j] * value_size);
        bits[j] = descending ? ~b : b;
    }
}

/* After a sort by key: run_head[j] = 1 where sorted entry j starts a run of
 * equal keys. */
__global__ void run_heads_kernel(const uint32_t *perm, uint64_t n, const uint32_t *refs,
                                 const uint8_t *keys, uint64_t *run_head)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x) {
        run_head[j] = j == 0 || !same_key(keys, refs[perm[j - 1]], refs[perm[j]]);
    }
}

/* Scatters each pair's run index (the inclusive scan of the heads, minus
 * one) to the pair, and the run's key to the run. */
__global__ void run_targets_kernel(const uint32_t *perm, uint64_t n, const uint64_t *run_scan,
                                   const uint64_t *run_head, const uint32_t *refs,
                                   uint64_t *target, uint32_t *run_refs)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t run = run_scan[j] - 1;
        target[perm[j]] = run;
        if (run_head[j])
            run_refs[run] = refs[perm[j]];
    }
}

__global__ void key_sizes_kernel(const uint32_t *perm, uint64_t n, const uint32_t *refs,
                                 const uint8_t *keys, uint64_t *sizes)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x)
        sizes[j] = key_size_of(keys, refs[perm[j]]);
}

/* The final packed layout of a soren_result: keys back to back at their
 * scanned offsets, values in order. */
__global__ void pack_kernel(const uint32_t *perm, uint64_t n, const uint32_t *refs,
                            const uint8_t *keys, const uint64_t *offsets,
                            const uint8_t *values, uint32_t value_size, uint8_t *out_keys,
                            uint8_t *out_values)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t ref = refs[perm[j]];
        memcpy(out_keys + offsets[j], key_bytes_of(keys, ref), key_size_of(keys, ref));
        memcpy(out_values + j * value_size, values + (uint64_t)perm[j] * value_size, value_size);
    }
}

/* ---- Host side ----------------------------------------------------------- */

/* Everything one run allocated on the device; gpu_run_destroy frees it all. */
struct gpu_run {
    const soren_stage_spec *spec;
    const soren_gpu_options *opt;
    const soren_gpu_stage *gpu;
    soren_variant variant; /* resolved: never AUTO */
    soren_error *err;
    const char *phase;
    cudaStream_t stream;
    int grid; /* blocks for the engine's own grid-stride kernels */

    uint8_t *input;
    uint64_t *line_starts;
    uint8_t *keys;
    uint64_t keys_capacity;
    unsigned long long *counters; /* keys_used, pairs_used, status, bad_key, selected */
    unsigned long long *slots;
    uint8_t *slot_values;
    uint64_t slot_count;
    uint32_t *pair_keys;
    uint8_t *pair_values;
    uint64_t pair_capacity;
    unsigned long long *record_pairs, *record_key_bytes;
    void *temp;
    size_t temp_size;
    void *param_blocks[SOREN_MAX_PARAMS];
    soren_params params;

    /* the merged list: n entries of (key ref, value), in perm order */
    uint32_t *refs;
    uint8_t *values;
    uint32_t *perm, *perm_alt;
    uint64_t *bits, *bits_alt;
    uint64_t n;

    cudaEvent_t mark[7];

    /* pinned host buffers the input passes through on its way up; staged[b]
     * is recorded once staging[b]'s copy to the device has been issued */
    uint8_t *staging[2];
    uint64_t staging_size;
    cudaEvent_t staged[2];
    unsigned copy_threads;
};

enum { KEYS_USED = 0, PAIRS_USED, STATUS, BAD_KEY, SELECTED, COUNTER_COUNT };

soren_status cuda_fail(gpu_run *r, cudaError_t rc, const char *call, int line)
{
    /* Clear the sticky error so later calls (the frees) report their own. */
    (void)cudaGetLastError();
    if (rc == cudaErrorMemoryAllocation)
        return soren_error_set(r->err, SOREN_EDEVICE, "%s: out of device memory during %s (%s)",
                               r->spec->job_name, r->phase, call);
    return soren_error_set(r->err, SOREN_EDEVICE, "%s: CUDA error during %s: %s (%s) in %s at %s:%d",
                           r->spec->job_name, r->phase, cudaGetErrorString(rc),
                           cudaGetErrorName(rc), call, __FILE__, line);
}

#define CUDA_TRY(r, call)                                                                  \
    do {                                                                                   \
        cudaError_t rc_ = (cudaError_t)(call);                                             \
        if (rc_ != cudaSuccess)                                                            \
            return cuda_fail(r, rc_, #call, __LINE__);                                     \
    } while (0)

/* Allocates bytes of device memory for what, naming it on failure. */
soren_status dev_alloc(gpu_run *r, void **p, uint64_t bytes, const char *what)
{
    *p = NULL;
    cudaError_t rc = cudaMalloc(p, bytes ? bytes : 1);
    if (rc == cudaSuccess)
        return SOREN_OK;
    (void)cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    return soren_error_set(r->err, SOREN_EDEVICE,
                           "%s: out of device memory: %s needs %llu bytes, %llu of %llu are free "
                           "(%s)", r->spec->job_name, what, (unsigned long long)bytes,
                           (unsigned long long)free_bytes, (unsigned long long)total,
                           cudaGetErrorString(rc));
}

#define ALLOC(r, ptr, bytes, what)                                                         \
    do {                                                                                   \
        soren_status st_ = dev_alloc(r, (void **)&(ptr), (bytes), (what));                 \
        if (st_ != SOREN_OK)                                                               \
            return st_;                                                                    \
    } while (0)

void dev_free(void *p)
{
    if (p)
        cudaFree(p);
}

void gpu_run_destroy(gpu_run *r)
{
    /* Copies from the staging buffers may still be in flight after an error. */
    if (r->stream)
        (void)cudaStreamSynchronize(r->stream);
    void *owned[] = {r->input,       r->line_starts, r->keys,         r->counters,
                     r->slots,       r->slot_values, r->pair_keys,    r->pair_values,
                     r->record_pairs, r->record_key_bytes, r->temp,   r->refs,
                     r->values,      r->perm,        r->perm_alt,     r->bits,
                     r->bits_alt};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        dev_free(owned[i]);
    for (int i = 0; i < SOREN_MAX_PARAMS; i++)
        dev_free(r->param_blocks[i]);
    for (int i = 0; i < 7; i++)
        if (r->mark[i])
            cudaEventDestroy(r->mark[i]);
    for (int b = 0; b < 2; b++) {
        if (r->staging[b])
            cudaFreeHost(r->staging[b]);
        if (r->staged[b])
            cudaEventDestroy(r->staged[b]);
    }
    if (r->stream)
        cudaStreamDestroy(r->stream);
}

/* CUB's temporary storage, grown on demand and kept for the run. */
soren_status temp_reserve(gpu_run *r, size_t bytes)
{
    if (bytes <= r->temp_size)
        return SOREN_OK;
    dev_free(r->temp);
    r->temp = NULL;
    r->temp_size = 0;
    ALLOC(r, r->temp, bytes, "sort and scan scratch space");
    r->temp_size = bytes;
    return SOREN_OK;
}

/* Runs a CUB algorithm twice: once to size its scratch space, once for real. */
#define CUB_RUN(r, fn, ...)                                                                \
    do {                                                                                   \
        size_t need_ = 0;                                                                  \
        CUDA_TRY(r, fn(NULL, need_, __VA_ARGS__, r->stream));                              \
        soren_status st_ = temp_reserve(r, need_);                                         \
        if (st_ != SOREN_OK)                                                               \
            return st_;                                                                    \
        CUDA_TRY(r, fn(r->temp, need_, __VA_ARGS__, r->stream));                           \
    } while (0)

uint64_t next_pow2(uint64_t x)
{
    uint64_t p = 1;
    while (p < x)
        p <<= 1;
    return p;
}

soren_status upload_params(gpu_run *r, const soren_params *host)
{
    r->params = *host;
    for (uint32_t i = 0; i < host->count && i < SOREN_MAX_PARAMS; i++) {
        if (!host->data[i])
            continue;
        ALLOC(r, r->param_blocks[i], host->size[i], "a job parameter");
        CUDA_TRY(r, cudaMemcpyAsync(r->param_blocks[i], host->data[i], host->size[i],
                                    cudaMemcpyHostToDevice, r->stream));
        r->params.data[i] = r->param_blocks[i];
    }
    return SOREN_OK;
}

/* The input goes up in chunks through two pinned staging buffers: the host
 * threads fill one while the copy engine drains the other.  Registering the
 * mapped file with the driver instead (cudaHostRegister) ran at 1.5 GB/s for
 * a 1 GiB file, and hung, the host thread spinning with the GPU idle, on a
 * file rewritten in place just before the run. */
enum { STAGING_CHUNK = 32 << 20, COPY_THREADS_MAX = 8, COPY_PART_MIN = 1 << 20 };

struct copy_part {
    uint8_t *dst;
    const uint8_t *src;
    size_t size;
};

void *copy_part_main(void *arg)
{
    copy_part *p = (copy_part *)arg;
    memcpy(p->dst, p->src, p->size);
    return NULL;
}

/* memcpy over up to `threads` threads: the source is a file mapping whose
 * page faults cost more than the copy, and they resolve in parallel.  A
 * thread that cannot be started leaves its part to the caller. */
void parallel_copy(uint8_t *dst, const uint8_t *src, size_t size, unsigned threads)
{
    pthread_t tid[COPY_THREADS_MAX];
    copy_part part[COPY_THREADS_MAX];
    bool started[COPY_THREADS_MAX] = {false};
    if (threads > size / COPY_PART_MIN)
        threads = size / COPY_PART_MIN ? (unsigned)(size / COPY_PART_MIN) : 1;
    size_t per = (size + threads - 1) / threads;
    for (unsigned t = 0; t < threads; t++) {
        size_t begin = t * per < size ? t * per : size;
        size_t end = begin + per < size ? begin + per : size;
        part[t] = {dst + begin, src + begin, end - begin};
        if (t > 0)
            started[t] = pthread_create(&tid[t], NULL, copy_part_main, &part[t]) == 0;
    }
    for (unsigned t = 0; t < threads; t++)
        if (!started[t])
            copy_part_main(&part[t]);
    for (unsigned t = 1; t < threads; t++)
        if (started[t])
            pthread_join(tid[t], NULL);
}

/* Pinned staging for inputs of up to `largest` bytes. */
soren_status alloc_staging(gpu_run *r, uint64_t largest)
{
    r->staging_size = largest < STAGING_CHUNK ? largest : STAGING_CHUNK;
    unsigned cpus = soren_cpu_count();
    r->copy_threads = cpus < COPY_THREADS_MAX ? cpus : COPY_THREADS_MAX;
    for (int b = 0; b < 2 && r->staging_size > 0; b++) {
        cudaError_t rc = cudaHostAlloc((void **)&r->staging[b], r->staging_size,
                                       cudaHostAllocDefault);
        if (rc != cudaSuccess) {
            r->staging[b] = NULL;
            (void)cudaGetLastError();
            return soren_error_set(r->err, SOREN_EDEVICE, "%s: cannot allocate %llu bytes of "
                                   "pinned host memory to stage the input (%s); check the "
                                   "locked-memory limit (ulimit -l)", r->spec->job_name,
                                   (unsigned long long)r->staging_size, cudaGetErrorString(rc));
        }
        CUDA_TRY(r, cudaEventCreateWithFlags(&r->staged[b], cudaEventDisableTiming));
    }
    return SOREN_OK;
}

/* Copies an input to the device, a chunk at a time. */
soren_status upload_input(gpu_run *r, const soren_input *in)
{
    uint64_t k = 0;
    for (uint64_t off = 0; off < in->size; off += r->staging_size, k++) {
        int b = (int)(k % 2);
        uint64_t n = in->size - off < r->staging_size ? in->size - off : r->staging_size;
        /* The buffer's previous chunk must be on the device before refilling. */
        CUDA_TRY(r, cudaEventSynchronize(r->staged[b]));
        parallel_copy(r->staging[b], in->data + off, n, r->copy_threads);
        CUDA_TRY(r, cudaMemcpyAsync(r->input + off, r->staging[b], n, cudaMemcpyHostToDevice,
                                    r->stream));
        CUDA_TRY(r, cudaEventRecord(r->staged[b], r->stream));
    }
    return SOREN_OK;
}

/* Finds the records of a `lines` input on the device; returns their number. */
soren_status split_lines(gpu_run *r, uint64_t size, uint64_t *count)
{
    *count = 0;
    if (size == 0)
        return SOREN_OK;
    thrust::counting_iterator<uint64_t> positions(0);
    unsigned long long *selected = r->counters + SELECTED;
    CUB_RUN(r, cub::DeviceSelect::If, positions, r->line_starts, selected, (int64_t)size,
            line_start{r->input});
    line_end_kernel<<<1, 1, 0, r->stream>>>(r->line_starts, selected, r->input, size);
    CUDA_TRY(r, cudaGetLastError());
    unsigned long long n = 0;
    CUDA_TRY(r, cudaMemcpyAsync(&n, selected, sizeof n, cudaMemcpyDeviceToHost, r->stream));
    CUDA_TRY(r, cudaStreamSynchronize(r->stream));
    *count = n;
    return SOREN_OK;
}

void fill_args(gpu_run *r, soren_gpu_map_args *a, uint32_t variant, uint64_t size,
               uint64_t records)
{
    const soren_stage_spec *s = r->spec;
    memset(a, 0, sizeof *a);
    a->variant = variant;
    a->input_format = s->input_format == SOREN_INPUT_FIXED ? SOREN_GPU_FIXED : SOREN_GPU_LINES;
    a->input = r->input;
    a->input_size = size;
    a->line_starts = r->line_starts;
    a->record_count = records;
    a->record_size = s->record_size;
    a->params = r->params;
    a->key_type = s->key_type;
    a->key_max_size = s->key_max_size;
    a->key_count = s->key_count;
    a->value_size = (uint32_t)s->value_size;
    a->value_type = s->value_type;
    a->combine = s->combine;
    a->keys = r->keys;
    a->keys_capacity = r->keys_capacity;
    a->keys_used = r->counters + KEYS_USED;
    a->slots = r->slots;
    a->slot_count = r->slot_count;
    a->slot_values = r->slot_values;
    a->pair_keys = r->pair_keys;
    a->pair_values = r->pair_values;
    a->pair_capacity = r->pair_capacity;
    a->pairs_used = r->counters + PAIRS_USED;
    a->record_pairs = r->record_pairs;
    a->record_key_bytes = r->record_key_bytes;
    a->status = (unsigned int *)(r->counters + STATUS);
    a->bad_key = r->counters + BAD_KEY;
}

/* Turns the status bits of a finished launch into an error. */
soren_status check_status(gpu_run *r)
{
    unsigned long long c[COUNTER_COUNT];
    CUDA_TRY(r, cudaMemcpyAsync(c, r->counters, sizeof c, cudaMemcpyDeviceToHost, r->stream));
    CUDA_TRY(r, cudaStreamSynchronize(r->stream));
    unsigned status = (unsigned)c[STATUS];
    const char *job = r->spec->job_name;
    if (status & SOREN_GPU_BAD_KEY) {
        unsigned rule = (unsigned)(c[BAD_KEY] >> 56);
        unsigned long long detail = c[BAD_KEY] & ((1ull << 56) - 1);
        if (rule == 1)
            return soren_error_set(r->err, SOREN_EJOB, "%s: map emitted a key of %llu bytes; "
                                   "the manifest allows at most %u (key.max_size)", job, detail,
                                   r->spec->key_max_size);
        if (rule == 2)
            return soren_error_set(r->err, SOREN_EJOB, "%s: map emitted a %s key of %llu "
                                   "bytes; a %s key is %zu bytes", job,
                                   soren_type_name(r->spec->key_type), detail,
                                   soren_type_name(r->spec->key_type),
                                   soren_type_size(r->spec->key_type));
        return soren_error_set(r->err, SOREN_EJOB, "%s: map emitted index key %llu; the "
                               "manifest's key.count is %llu (keys 0 to %llu)", job, detail,
                               (unsigned long long)r->spec->key_count,
                               (unsigned long long)r->spec->key_count - 1);
    }
    if (status & SOREN_GPU_TABLE_FULL)
        return soren_error_set(r->err, SOREN_EJOB, "%s: the hash table is full (%llu slots); "
                               "rerun with --table-slots %llu or more", job,
                               (unsigned long long)r->slot_count,
                               (unsigned long long)r->slot_count * 2);
    if (status & SOREN_GPU_KEYS_FULL)
        return soren_error_set(r->err, SOREN_EJOB, "%s: the key space is full (%llu bytes); "
                               "rerun with --key-bytes %llu or more", job,
                               (unsigned long long)r->keys_capacity,
                               (unsigned long long)r->keys_capacity * 2);
    if (status & SOREN_GPU_PAIRS_FULL)
        return soren_error_set(r->err, SOREN_EJOB, "%s: the pair space is full (%llu pairs); "
                               "rerun with --pair-slots %llu or more", job,
                               (unsigned long long)r->pair_capacity,
                               (unsigned long long)r->pair_capacity * 2);
    return SOREN_OK;
}

soren_status launch_map(gpu_run *r, uint32_t variant, uint64_t size, uint64_t records)
{
    soren_gpu_map_args a;
    fill_args(r, &a, variant, size, records);
    CUDA_TRY(r, r->gpu->map(&a, r->stream));
    return check_status(r);
}

/* The Mars layout for one input: count, scan, then write at the offsets. */
soren_status map_sort(gpu_run *r, uint64_t size, uint64_t records)
{
    soren_status st = launch_map(r, SOREN_GPU_SORT_COUNT, size, records);
    if (st != SOREN_OK || records == 0)
        return st;
    uint64_t last[2];
    CUDA_TRY(r, cudaMemcpyAsync(&last[0], r->record_pairs + records - 1, 8,
                                cudaMemcpyDeviceToHost, r->stream));
    CUDA_TRY(r, cudaMemcpyAsync(&last[1], r->record_key_bytes + records - 1, 8,
                                cudaMemcpyDeviceToHost, r->stream));
    CUB_RUN(r, cub::DeviceScan::ExclusiveSum, r->record_pairs, r->record_pairs, (int64_t)records);
    CUB_RUN(r, cub::DeviceScan::ExclusiveSum, r->record_key_bytes, r->record_key_bytes,
            (int64_t)records);
    unsigned long long used[2], scanned[2];
    CUDA_TRY(r, cudaMemcpyAsync(used, r->counters, sizeof used, cudaMemcpyDeviceToHost,
                                r->stream));
    CUDA_TRY(r, cudaMemcpyAsync(&scanned[0], r->record_pairs + records - 1, 8,
                                cudaMemcpyDeviceToHost, r->stream));
    CUDA_TRY(r, cudaMemcpyAsync(&scanned[1], r->record_key_bytes + records - 1, 8,
                                cudaMemcpyDeviceToHost, r->stream));
    CUDA_TRY(r, cudaStreamSynchronize(r->stream));
    uint64_t pairs = scanned[0] + last[0], key_bytes = scanned[1] + last[1];
    /* Pass 1 sized everything exactly: a shortfall is a sizing bug to report
     * with the sizes, not an overflow to survive. */
    if (used[PAIRS_USED] + pairs > r->pair_capacity)
        return soren_error_set(r->err, SOREN_EJOB, "%s: the pair space is full (%llu pairs, "
                               "%llu needed); rerun with --pair-slots %llu", r->spec->job_name,
                               (unsigned long long)r->pair_capacity,
                               (unsigned long long)(used[PAIRS_USED] + pairs),
                               (unsigned long long)(used[PAIRS_USED] + pairs));
    if (used[KEYS_USED] + key_bytes > r->keys_capacity)
        return soren_error_set(r->err, SOREN_EJOB, "%s: the key space is full (%llu bytes, "
                               "%llu needed); rerun with --key-bytes %llu", r->spec->job_name,
                               (unsigned long long)r->keys_capacity,
                               (unsigned long long)(used[KEYS_USED] + key_bytes),
                               (unsigned long long)(used[KEYS_USED] + key_bytes));
    st = launch_map(r, SOREN_GPU_SORT_WRITE, size, records);
    if (st != SOREN_OK)
        return st;
    used[PAIRS_USED] += pairs;
    used[KEYS_USED] += key_bytes;
    CUDA_TRY(r, cudaMemcpyAsync(r->counters, used, sizeof used, cudaMemcpyHostToDevice,
                                r->stream));
    return SOREN_OK;
}

/* Sizes the regions from the options or from generous defaults for the
 * inputs' total and largest sizes, and allocates them. */
soren_status allocate_regions(gpu_run *r, uint64_t total, uint64_t largest)
{
    const soren_stage_spec *s = r->spec;
    const soren_gpu_options *o = r->opt;
    uint64_t max_records = s->input_format == SOREN_INPUT_FIXED ? largest / s->record_size
                                                                 : largest;
    ALLOC(r, r->input, largest, "the input");
    if (s->input_format == SOREN_INPUT_LINES)
        ALLOC(r, r->line_starts, (largest + 2) * sizeof(uint64_t), "the line index");
    ALLOC(r, r->counters, COUNTER_COUNT * sizeof(unsigned long long), "the engine's counters");
    CUDA_TRY(r, cudaMemsetAsync(r->counters, 0, COUNTER_COUNT * sizeof(unsigned long long),
                                r->stream));
    /* Offset 0 of the key space is reserved: key ref 0 means "none". */
    unsigned long long first_key = 4;
    CUDA_TRY(r, cudaMemcpyAsync(r->counters + KEYS_USED, &first_key, sizeof first_key,
                                cudaMemcpyHostToDevice, r->stream));

    /* Each distinct key takes at most 4 bytes of size and 3 of padding more
     * than it took in the input, with at least one separator byte: 4x the
     * input holds them; a pair per input byte covers the jobs in tree. */
    uint64_t vs = s->value_size;
    if (r->variant == SOREN_VARIANT_HASH) {
        r->keys_capacity = o->key_bytes ? o->key_bytes : 4 * total + (1 << 20);
        r->slot_count = next_pow2(o->table_slots ? o->table_slots
                                                 : (total / 4 > (1 << 16) ? total / 4 : 1 << 16));
        ALLOC(r, r->slots, r->slot_count * sizeof(unsigned long long), "the hash table");
        ALLOC(r, r->slot_values, r->slot_count * vs, "the hash table's values");
        CUDA_TRY(r, cudaMemsetAsync(r->slots, 0, r->slot_count * sizeof(unsigned long long),
                                    r->stream));
        CUDA_TRY(r, r->gpu->fill_identity(r->slot_values, r->slot_count, r->stream));
    } else {
        /* Each pair keeps its own copy of its key (at most 8 bytes of key
         * space per input byte for the jobs in tree).  The sort variant's
         * count pass checks these bounds before it writes anything. */
        uint64_t default_pairs = total + (1 << 16);
        r->pair_capacity = o->pair_slots ? o->pair_slots : default_pairs;
        r->keys_capacity = o->key_bytes ? o->key_bytes : 8 * default_pairs + (1 << 20);
    }
    if (r->variant == SOREN_VARIANT_SORT) {
        ALLOC(r, r->record_pairs, (max_records + 1) * 8, "the per-record pair counts");
        ALLOC(r, r->record_key_bytes, (max_records + 1) * 8, "the per-record key sizes");
    }
    if (r->keys_capacity > (16ull << 30))
        r->keys_capacity = 16ull << 30; /* key refs are 32-bit multiples of 4 */
    ALLOC(r, r->keys, r->keys_capacity, "the key space");
    if (r->variant != SOREN_VARIANT_HASH) {
        ALLOC(r, r->pair_keys, r->pair_capacity * sizeof(uint32_t), "the pair keys");
        ALLOC(r, r->pair_values, r->pair_capacity * vs, "the pair values");
    }
    return SOREN_OK;
}

#define GRID(r) (r)->grid, 256, 0, (r)->stream

/* Hash: the used slots, compacted by a parallel select, are the list. */
soren_status merge_table(gpu_run *r)
{
    uint32_t vs = (uint32_t)r->spec->value_size;
    uint64_t *used = NULL;
    ALLOC(r, used, r->slot_count * sizeof(uint64_t), "the list of used slots");
    thrust::counting_iterator<uint64_t> slots(0);
    soren_status st = SOREN_OK;
    do {
        size_t need = 0;
        cudaError_t rc = cub::DeviceSelect::If(NULL, need, slots, used, r->counters + SELECTED,
                                               (int64_t)r->slot_count, slot_used{r->slots},
                                               r->stream);
        if (rc == cudaSuccess && (st = temp_reserve(r, need)) == SOREN_OK)
            rc = cub::DeviceSelect::If(r->temp, need, slots, used, r->counters + SELECTED,
                                       (int64_t)r->slot_count, slot_used{r->slots}, r->stream);
        unsigned long long n = 0;
        if (rc == cudaSuccess && st == SOREN_OK)
            rc = cudaMemcpyAsync(&n, r->counters + SELECTED, sizeof n, cudaMemcpyDeviceToHost,
                                 r->stream);
        if (rc == cudaSuccess && st == SOREN_OK)
            rc = cudaStreamSynchronize(r->stream);
        if (rc != cudaSuccess) {
            st = cuda_fail(r, rc, "compacting the hash table", __LINE__);
            break;
        }
        if (st != SOREN_OK)
            break;
        r->n = n;
        if ((st = dev_alloc(r, (void **)&r->refs, n * 4, "the merged keys")) != SOREN_OK ||
            (st = dev_alloc(r, (void **)&r->values, n * vs, "the merged values")) != SOREN_OK)
            break;
        gather_slots_kernel<<<GRID(r)>>>(used, n, r->slots, r->slot_values, vs, r->refs,
                                         r->values);
        if ((rc = cudaGetLastError()) != cudaSuccess)
            st = cuda_fail(r, rc, "gather_slots_kernel", __LINE__);
    } while (0);
    dev_free(used);
    return st;
}

soren_status alloc_order_buffers(gpu_run *r)
{
    ALLOC(r, r->perm, r->n * 4, "the sort order");
    ALLOC(r, r->perm_alt, r->n * 4, "the sort order");
    ALLOC(r, r->bits, r->n * 8, "the sort keys");
    ALLOC(r, r->bits_alt, r->n * 8, "the sort keys");
    iota_kernel<<<GRID(r)>>>(r->perm, r->n);
    CUDA_TRY(r, cudaGetLastError());
    return SOREN_OK;
}

/* Stable radix sort of perm by bits (filled for the current perm). */
soren_status radix_perm(gpu_run *r)
{
    cub::DoubleBuffer<uint64_t> keys(r->bits, r->bits_alt);
    cub::DoubleBuffer<uint32_t> perm(r->perm, r->perm_alt);
    CUB_RUN(r, cub::DeviceRadixSort::SortPairs, keys, perm, (int64_t)r->n, 0, 64);
    if (perm.Current() != r->perm) {
        uint32_t *t = r->perm;
        r->perm = r->perm_alt;
        r->perm_alt = t;
    }
    if (keys.Current() != r->bits) {
        uint64_t *t = r->bits;
        r->bits = r->bits_alt;
        r->bits_alt = t;
    }
    return SOREN_OK;
}

/* Stable sort of perm by key. */
soren_status sort_by_key(gpu_run *r)
{
    if (r->spec->key_type == SOREN_TYPE_STRING) {
        CUB_RUN(r, cub::DeviceMergeSort::StableSortKeys, r->perm, (int64_t)r->n,
                string_key_less{r->keys, r->refs});
        return SOREN_OK;
    }
    key_bits_kernel<<<GRID(r)>>>(r->perm, r->n, r->refs, r->keys, r->spec->key_type, r->bits);
    CUDA_TRY(r, cudaGetLastError());
    return radix_perm(r);
}

soren_status sort_by_value(gpu_run *r, bool descending)
{
    value_bits_kernel<<<GRID(r)>>>(r->perm, r->n, r->values, (uint32_t)r->spec->value_size,
                                   r->spec->value_type, descending, r->bits);
    CUDA_TRY(r, cudaGetLastError());
    return radix_perm(r);
}

/* Direct and sort: every pair is in the pair space.  With a combine, sort
 * them by key and fold each run of equal keys into one accumulator. */
soren_status merge_pairs(gpu_run *r)
{
    unsigned long long used = 0;
    CUDA_TRY(r, cudaMemcpyAsync(&used, r->counters + PAIRS_USED, sizeof used,
                                cudaMemcpyDeviceToHost, r->stream));
    CUDA_TRY(r, cudaStreamSynchronize(r->stream));
    r->n = used;
    r->refs = r->pair_keys;
    r->values = r->pair_values;
    r->pair_keys = NULL; /* now owned as the list */
    r->pair_values = NULL;
    if (r->spec->combine == SOREN_COMBINE_NONE || r->n == 0)
        return SOREN_OK;

    soren_status st = alloc_order_buffers(r);
    if (st == SOREN_OK)
        st = sort_by_key(r);
    if (st != SOREN_OK)
        return st;
    /* bits and bits_alt are free again: heads, then their running count. */
    run_heads_kernel<<<GRID(r)>>>(r->perm, r->n, r->refs, r->keys, r->bits);
    CUDA_TRY(r, cudaGetLastError());
    CUB_RUN(r, cub::DeviceScan::InclusiveSum, r->bits, r->bits_alt, (int64_t)r->n);
    uint64_t runs = 0;
    CUDA_TRY(r, cudaMemcpyAsync(&runs, r->bits_alt + r->n - 1, 8, cudaMemcpyDeviceToHost,
                                r->stream));
    CUDA_TRY(r, cudaStreamSynchronize(r->stream));

    uint64_t *target = NULL;
    uint32_t *run_refs = NULL;
    uint8_t *run_values = NULL;
    uint32_t vs = (uint32_t)r->spec->value_size;
    st = dev_alloc(r, (void **)&target, r->n * 8, "the run of each pair");
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&run_refs, runs * 4, "the merged keys");
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&run_values, runs * vs, "the merged values");
    cudaError_t rc = cudaSuccess;
    if (st == SOREN_OK) {
        run_targets_kernel<<<GRID(r)>>>(r->perm, r->n, r->bits_alt, r->bits, r->refs, target,
                                        run_refs);
        rc = cudaGetLastError();
    }
    if (st == SOREN_OK && rc == cudaSuccess)
        rc = (cudaError_t)r->gpu->fill_identity(run_values, runs, r->stream);
    if (st == SOREN_OK && rc == cudaSuccess) {
        soren_gpu_combine_args c = {r->values, target, run_values, r->n};
        rc = (cudaError_t)r->gpu->combine(&c, r->stream);
    }
    if (st == SOREN_OK && rc != cudaSuccess)
        st = cuda_fail(r, rc, "combining runs of equal keys", __LINE__);
    dev_free(target);
    if (st != SOREN_OK) {
        dev_free(run_refs);
        dev_free(run_values);
        return st;
    }
    /* The runs, already in key order, are the list now. */
    dev_free(r->refs);
    dev_free(r->values);
    r->refs = run_refs;
    r->values = run_values;
    r->n = runs;
    iota_kernel<<<GRID(r)>>>(r->perm, r->n);
    CUDA_TRY(r, cudaGetLastError());
    return SOREN_OK;
}

/* Puts the list in the stage's order (the CPU engine's, see result.h). */
soren_status order_list(gpu_run *r, bool key_sorted)
{
    if (r->n == 0)
        return SOREN_OK;
    soren_status st = SOREN_OK;
    if (!r->perm)
        st = alloc_order_buffers(r);
    if (st != SOREN_OK)
        return st;
    bool unique_keys = r->spec->combine != SOREN_COMBINE_NONE;
    switch (r->spec->order) {
    case SOREN_ORDER_NONE:
        break;
    case SOREN_ORDER_KEY:
        /* Map-only pairs may share a key: ties by value, so sort by value
         * first and rely on the key sort being stable. */
        if (!unique_keys)
            st = sort_by_value(r, false);
        if (st == SOREN_OK && !key_sorted)
            st = sort_by_key(r);
        break;
    case SOREN_ORDER_VALUE_DESC:
    case SOREN_ORDER_VALUE_ASC:
        if (!unique_keys)
            st = sort_by_value(r, false);
        if (st == SOREN_OK && !key_sorted)
            st = sort_by_key(r);
        if (st == SOREN_OK)
            st = sort_by_value(r, r->spec->order == SOREN_ORDER_VALUE_DESC);
        break;
    }
    if (st == SOREN_OK && r->spec->limit && r->n > r->spec->limit)
        r->n = r->spec->limit;
    return st;
}

/* Packs the ordered list into out's host arrays. */
soren_status download(gpu_run *r, soren_result *out)
{
    uint64_t n = r->n;
    uint32_t vs = (uint32_t)r->spec->value_size;
    out->count = 0;
    if (n == 0)
        return SOREN_OK;
    uint64_t *offsets = r->bits; /* the sort keys are spent: reuse them */
    key_sizes_kernel<<<GRID(r)>>>(r->perm, n, r->refs, r->keys, r->bits_alt);
    CUDA_TRY(r, cudaGetLastError());
    CUB_RUN(r, cub::DeviceScan::ExclusiveSum, r->bits_alt, offsets, (int64_t)n);
    uint64_t last_offset = 0, last_size = 0;
    CUDA_TRY(r, cudaMemcpyAsync(&last_offset, offsets + n - 1, 8, cudaMemcpyDeviceToHost,
                                r->stream));
    CUDA_TRY(r, cudaMemcpyAsync(&last_size, r->bits_alt + n - 1, 8, cudaMemcpyDeviceToHost,
                                r->stream));
    CUDA_TRY(r, cudaStreamSynchronize(r->stream));
    uint64_t key_total = last_offset + last_size;

    uint8_t *d_keys = NULL, *d_values = NULL;
    soren_status st = dev_alloc(r, (void **)&d_keys, key_total, "the packed keys");
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&d_values, n * vs, "the packed values");
    uint8_t *h_keys = (uint8_t *)malloc(key_total ? key_total : 1);
    uint64_t *h_offsets = (uint64_t *)malloc((n + 1) * 8);
    uint8_t *h_values = (uint8_t *)malloc(n * vs);
    if (st == SOREN_OK && (!h_keys || !h_offsets || !h_values))
        st = soren_error_set(r->err, SOREN_ENOMEM, "%s: out of host memory for %llu results",
                             r->spec->job_name, (unsigned long long)n);
    cudaError_t rc = cudaSuccess;
    if (st == SOREN_OK) {
        pack_kernel<<<GRID(r)>>>(r->perm, n, r->refs, r->keys, offsets, r->values, vs, d_keys,
                                 d_values);
        rc = cudaGetLastError();
        if (rc == cudaSuccess)
            rc = cudaMemcpyAsync(h_keys, d_keys, key_total, cudaMemcpyDeviceToHost, r->stream);
        if (rc == cudaSuccess)
            rc = cudaMemcpyAsync(h_offsets, offsets, n * 8, cudaMemcpyDeviceToHost, r->stream);
        if (rc == cudaSuccess)
            rc = cudaMemcpyAsync(h_values, d_values, n * vs, cudaMemcpyDeviceToHost, r->stream);
        if (rc == cudaSuccess)
            rc = cudaStreamSynchronize(r->stream);
        if (rc != cudaSuccess)
            st = cuda_fail(r, rc, "copying the result back", __LINE__);
    }
    dev_free(d_keys);
    dev_free(d_values);
    if (st != SOREN_OK) {
        free(h_keys);
        free(h_offsets);
        free(h_values);
        return st;
    }
    h_offsets[n] = key_total;
    soren_result_destroy(out);
    out->count = n;
    out->key_bytes = h_keys;
    out->key_offset = h_offsets;
    out->values = h_values;
    return SOREN_OK;
}

soren_status mark(gpu_run *r, int i, const char *phase)
{
    r->phase = phase;
    CUDA_TRY(r, cudaEventRecord(r->mark[i], r->stream));
    return SOREN_OK;
}

soren_status run_all(gpu_run *r, const soren_input *inputs, size_t input_count,
                     const soren_params *params, soren_result *out, soren_explain *x)
{
    uint64_t total = 0, largest = 0;
    for (size_t i = 0; i < input_count; i++) {
        total += inputs[i].size;
        if (inputs[i].size > largest)
            largest = inputs[i].size;
    }
    r->phase = "setup";
    CUDA_TRY(r, cudaSetDevice(0));
    CUDA_TRY(r, cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
    for (int i = 0; i < 7; i++)
        CUDA_TRY(r, cudaEventCreate(&r->mark[i]));
    int sms = 0;
    CUDA_TRY(r, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    r->grid = sms * 8;

    soren_status st = upload_params(r, params);
    if (st == SOREN_OK)
        st = allocate_regions(r, total, largest);
    if (st == SOREN_OK)
        st = alloc_staging(r, largest);
    float upload = 0, split = 0, map = 0;
    for (size_t i = 0; st == SOREN_OK && i < input_count; i++) {
        const soren_input *in = &inputs[i];
        uint64_t records = in->size / (r->spec->record_size ? r->spec->record_size : 1);
        if ((st = mark(r, 0, "upload")) == SOREN_OK)
            st = upload_input(r, in);
        if (st == SOREN_OK && (st = mark(r, 1, "record splitting")) == SOREN_OK &&
            r->spec->input_format == SOREN_INPUT_LINES)
            st = split_lines(r, in->size, &records);
        if (st == SOREN_OK && (st = mark(r, 2, "map")) == SOREN_OK) {
            if (r->variant == SOREN_VARIANT_HASH)
                st = launch_map(r, SOREN_GPU_HASH, in->size, records);
            else if (r->variant == SOREN_VARIANT_DIRECT)
                st = launch_map(r, SOREN_GPU_DIRECT, in->size, records);
            else
                st = map_sort(r, in->size, records);
        }
        if (st == SOREN_OK && (st = mark(r, 3, "map")) == SOREN_OK) {
            float ms[3] = {0, 0, 0};
            CUDA_TRY(r, cudaEventSynchronize(r->mark[3]));
            for (int k = 0; k < 3; k++)
                CUDA_TRY(r, cudaEventElapsedTime(&ms[k], r->mark[k], r->mark[k + 1]));
            upload += ms[0];
            split += ms[1];
            map += ms[2];
        }
    }
    if (st == SOREN_OK)
        st = mark(r, 3, "merge");
    bool key_sorted = false;
    if (st == SOREN_OK) {
        if (r->variant == SOREN_VARIANT_HASH) {
            st = merge_table(r);
        } else {
            st = merge_pairs(r);
            key_sorted = r->spec->combine != SOREN_COMBINE_NONE;
        }
    }
    if (st == SOREN_OK && (st = mark(r, 4, "ordering")) == SOREN_OK)
        st = order_list(r, key_sorted);
    if (st == SOREN_OK && (st = mark(r, 5, "copying the result back")) == SOREN_OK)
        st = download(r, out);
    if (st == SOREN_OK && (st = mark(r, 6, "copying the result back")) == SOREN_OK) {
        CUDA_TRY(r, cudaEventSynchronize(r->mark[6]));
        float merge = 0, order = 0, download = 0;
        CUDA_TRY(r, cudaEventElapsedTime(&merge, r->mark[3], r->mark[4]));
        CUDA_TRY(r, cudaEventElapsedTime(&order, r->mark[4], r->mark[5]));
        CUDA_TRY(r, cudaEventElapsedTime(&download, r->mark[5], r->mark[6]));
        x->ms.upload = upload;
        x->ms.split = split;
        x->ms.map = map;
        x->ms.merge = merge;
        x->ms.sort = order;
        x->ms.download = download;
    }
    return st;
}

} /* namespace */

extern "C" const char *soren_gpu_unsupported(const soren_stage_spec *spec)
{
    if (spec->input_format != SOREN_INPUT_LINES && spec->input_format != SOREN_INPUT_FIXED)
        return "the GPU engine reads lines and fixed input only";
    if (spec->reduce == SOREN_REDUCE_FUNCTION)
        return "reduce functions run on the CPU engine only in this release";
    if (spec->code->gpu == NULL)
        return "the plugin was built without device code";
    return NULL;
}

extern "C" soren_status soren_gpu_run(const soren_stage_spec *spec, const soren_input *inputs,
                                      size_t input_count, const soren_params *params,
                                      const soren_gpu_options *opt, soren_result *out,
                                      soren_explain *x, soren_error *err)
{
    const char *why = soren_gpu_unsupported(spec);
    if (why)
        return soren_error_set(err, SOREN_EDEVICE, "%s: cannot run on the GPU: %s",
                               spec->job_name, why);
    gpu_run r;
    memset(&r, 0, sizeof r);
    r.spec = spec;
    r.opt = opt;
    r.gpu = spec->code->gpu;
    r.err = err;
    r.variant = opt->variant;
    if (r.variant == SOREN_VARIANT_AUTO)
        r.variant = spec->combine == SOREN_COMBINE_NONE && spec->reduce == SOREN_REDUCE_NONE
                        ? SOREN_VARIANT_DIRECT
                        : SOREN_VARIANT_HASH;
    x->device = "gpu";
    x->variant = r.variant;
    soren_status st = run_all(&r, inputs, input_count, params, out, x);
    gpu_run_destroy(&r);
    return st;
}
