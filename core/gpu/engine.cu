/*
 * engine.cu - the GPU engine's host side (see engine.h), and the device code
 * that does not depend on a plugin's functions: line splitting, compaction,
 * grouping, ordering and packing.
 */
#include <soren/engine/abi.h>

#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_select.cuh>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <thrust/iterator/counting_iterator.h>
#include <unistd.h>

extern "C" {
#include "../cpu/cpu.h"
#include "../cpu/internal.h"
#include "engine.h"
}

namespace {

/* ---- Device code -------------------------------------------------------- */

/* The engine's counters: one device array, which a run starts fresh. */
enum {
    KEYS_USED = 0,
    PAIRS_USED,
    STATUS,
    BAD_KEY,
    SELECTED,
    SLOTS_USED,
    SAMPLE_PAIRS, /* then SAMPLE_KEY_BYTES, SAMPLE_BYTES: soren_gpu_map_args.sample_counts */
    SAMPLE_KEY_BYTES,
    SAMPLE_BYTES,
    COUNTER_COUNT
};

/* A slot that holds a key: not empty, and not kept for a key whose bytes
 * found the key space full (SOREN_GPU_SLOT_NO_KEY, before a resume). */
__device__ inline bool holds_key(unsigned long long slot)
{
    return slot != 0 && (uint32_t)slot != SOREN_GPU_SLOT_NO_KEY;
}

struct slot_used {
    const unsigned long long *slots;
    __device__ bool operator()(uint64_t i) const { return holds_key(slots[i]); }
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

/* Byte-string order of two stored keys, as the CPU engine's: memcmp, then
 * the shorter first.  Keys sit in the key space zero padded to 16 bytes
 * (soren__key_footprint), so they compare a 4-byte word at a time; the
 * first differing byte of a word is its lowest (little-endian). */
__device__ inline int key_compare(const uint8_t *keys, uint32_t a, uint32_t b)
{
    const uint32_t *pa = (const uint32_t *)(keys + ((uint64_t)a << 2));
    const uint32_t *pb = (const uint32_t *)(keys + ((uint64_t)b << 2));
    uint32_t na = pa[0], nb = pb[0], n = na < nb ? na : nb;
    for (uint32_t off = 0, w = 1; off < n; off += 4, w++) {
        uint32_t diff = pa[w] ^ pb[w];
        if (n - off < 4) /* past the shorter key: padding against bytes */
            diff &= (1u << (8 * (n - off))) - 1;
        if (diff) {
            uint32_t shift = (uint32_t)(__ffs(diff) - 1) & ~7u;
            return ((pa[w] >> shift) & 0xff) < ((pb[w] >> shift) & 0xff) ? -1 : 1;
        }
    }
    return na < nb ? -1 : na > nb;
}

__device__ inline bool same_key(const uint8_t *keys, uint32_t a, uint32_t b)
{
    return key_compare(keys, a, b) == 0;
}

struct string_key_less {
    const uint8_t *keys;
    const uint32_t *refs;
    __device__ bool operator()(uint32_t a, uint32_t b) const
    {
        return key_compare(keys, refs[a], refs[b]) < 0;
    }
};

/* An unsigned integer that sorts as the typed value does: integers
 * numerically, floats in IEEE total order (-0 before +0, NaNs at the ends by
 * sign), the CPU engine's order. */
__device__ inline uint64_t ordered_bits(uint32_t type, const uint8_t *p)
{
    /* Keys sit 4-byte aligned in the key space: copy 8-byte ones out. */
    uint32_t b32;
    uint64_t b64;
    memcpy(&b32, p, 4);
    if (type != SOREN_TYPE_U32 && type != SOREN_TYPE_INDEX && type != SOREN_TYPE_F32)
        memcpy(&b64, p, 8);
    switch (type) {
    case SOREN_TYPE_U32:
    case SOREN_TYPE_INDEX: return b32;
    case SOREN_TYPE_U64: return b64;
    case SOREN_TYPE_I64: return b64 ^ (1ull << 63);
    case SOREN_TYPE_F32: return (b32 & 0x80000000u) ? (uint32_t)~b32 : (b32 | 0x80000000u);
    case SOREN_TYPE_F64: return (b64 & (1ull << 63)) ? ~b64 : (b64 | (1ull << 63));
    }
    return 0;
}

__global__ void line_end_kernel(uint64_t *starts, uint64_t count, const uint8_t *input,
                                uint64_t size)
{
    starts[count] = size + (input[size - 1] == '\n' ? 0 : 1);
}

/* Line splitting.  A line starts at 0 and after every '\n' but one that
 * ends the input.  Each block takes tiles of SPLIT_TILE bytes and each
 * thread 16 of them, read as one aligned uint4 (the input buffer is padded
 * to 16 bytes): the count pass keeps the newlines of each tile, a scan
 * gives each tile its first record, and the write pass puts every line
 * start at its place, a block scan ordering the threads of a tile.  Two
 * reads of the input at full width cost less than one select over single
 * bytes. */
enum { SPLIT_THREADS = 256, SPLIT_TILE = SPLIT_THREADS * 16 };

/* The newlines among bytes [at, at + 16) that are below limit, as a mask
 * of bit i for byte at + i.  A whole 16-byte load where the input has the
 * bytes (every one but the last, partial one: a caller's device input is
 * not padded), single bytes for the rest. */
__device__ inline uint32_t newline_mask(const uint8_t *input, uint64_t at, uint64_t size,
                                        uint64_t limit)
{
    uint32_t mask = 0;
    if (at + 16 <= size) {
        uint4 v = *(const uint4 *)(input + at);
        uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int w = 0; w < 4; w++) {
            /* 0x80 in each byte that equals '\n' (exact: no borrow between bytes) */
            uint32_t x = words[w] ^ 0x0a0a0a0au;
            uint32_t zero = ~(((x & 0x7f7f7f7fu) + 0x7f7f7f7fu) | x | 0x7f7f7f7fu);
#pragma unroll
            for (int b = 0; b < 4; b++)
                mask |= ((zero >> (8 * b + 7)) & 1u) << (4 * w + b);
        }
    } else {
        for (uint64_t i = at; i < size; i++)
            mask |= (uint32_t)(input[i] == '\n') << (i - at);
    }
    if (at + 16 > limit)
        mask &= limit > at ? (1u << (limit - at)) - 1 : 0;
    return mask;
}

/* limit: the newlines that start a line are those before size - 1.
 * tile_counts[tiles] is set to 0: the scan over tiles + 1 counts reads it,
 * and makes it the total. */
__global__ void split_count_kernel(const uint8_t *input, uint64_t size, uint64_t tiles,
                                   uint64_t *tile_counts)
{
    typedef cub::BlockReduce<uint32_t, SPLIT_THREADS> reduce;
    __shared__ typename reduce::TempStorage temp;
    if (blockIdx.x == 0 && threadIdx.x == 0)
        tile_counts[tiles] = 0;
    for (uint64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        uint64_t at = t * SPLIT_TILE + threadIdx.x * 16ull;
        uint32_t n = at < size - 1 ? __popc(newline_mask(input, at, size, size - 1)) : 0;
        uint32_t total = reduce(temp).Sum(n);
        if (threadIdx.x == 0)
            tile_counts[t] = total;
        __syncthreads();
    }
}

/* tile_first[t]: the exclusive scan of the counts; starts[0] = 0 and the
 * line after the k-th newline starts at starts[1 + k]. */
__global__ void split_write_kernel(const uint8_t *input, uint64_t size, uint64_t tiles,
                                   const uint64_t *tile_first, uint64_t *starts)
{
    typedef cub::BlockScan<uint32_t, SPLIT_THREADS> scan;
    __shared__ typename scan::TempStorage temp;
    if (blockIdx.x == 0 && threadIdx.x == 0)
        starts[0] = 0;
    for (uint64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        uint64_t at = t * SPLIT_TILE + threadIdx.x * 16ull;
        uint32_t mask = at < size - 1 ? newline_mask(input, at, size, size - 1) : 0, before = 0;
        scan(temp).ExclusiveSum((uint32_t)__popc(mask), before);
        uint64_t k = 1 + tile_first[t] + before;
        for (; mask; mask &= mask - 1)
            starts[k++] = at + (uint64_t)__ffs(mask); /* the byte after the newline */
        __syncthreads();
    }
}

/* Takes the used slots' keys and values into the list and leaves the
 * slots empty again (0, and the identity value), so that a session's next
 * run need not clear the whole table. */
__global__ void gather_slots_kernel(const uint64_t *used, uint64_t n, unsigned long long *slots,
                                    uint8_t *slot_values, const uint8_t *identity,
                                    uint32_t value_size, uint32_t *refs, uint8_t *values)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t i = used[j];
        refs[j] = (uint32_t)slots[i];
        slots[i] = 0;
        memcpy(values + j * value_size, slot_values + i * value_size, value_size);
        memcpy(slot_values + i * value_size, identity, value_size);
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
 * equal keys.  by_ref: the refs are the hash table's, one per key, so equal
 * keys have equal refs. */
__global__ void run_heads_kernel(const uint32_t *perm, uint64_t n, const uint32_t *refs,
                                 const uint8_t *keys, bool by_ref, uint64_t *run_head)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t a = j ? refs[perm[j - 1]] : 0, b = refs[perm[j]];
        run_head[j] = j == 0 || (by_ref ? a != b : !same_key(keys, a, b));
    }
}

/* Sort keys that group the table's refs (their order means nothing). */
__global__ void ref_bits_kernel(const uint32_t *perm, uint64_t n, const uint32_t *refs,
                                uint64_t *bits)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x)
        bits[j] = refs[perm[j]];
}

/* The groups of a reduce, from pairs sorted by key: each run of equal keys
 * is a group, starting at its first sorted entry; the values are gathered
 * in sorted order, so each group's lie together. */
__global__ void groups_kernel(const uint32_t *perm, uint64_t n, const uint64_t *run_scan,
                              const uint64_t *run_head, const uint32_t *refs,
                              const uint8_t *values, uint32_t value_size, uint32_t *group_refs,
                              uint64_t *group_start, uint8_t *group_values)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x) {
        if (run_head[j]) {
            group_refs[run_scan[j] - 1] = refs[perm[j]];
            group_start[run_scan[j] - 1] = j;
        }
        memcpy(group_values + j * value_size, values + (uint64_t)perm[j] * value_size,
               value_size);
    }
}

/* The most values a group has (reduce takes a 32-bit count). */
__global__ void largest_group_kernel(const uint64_t *group_start, uint64_t groups,
                                     unsigned long long *largest)
{
    unsigned long long mine = 0;
    for (uint64_t g = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; g < groups;
         g += (uint64_t)gridDim.x * blockDim.x) {
        unsigned long long n = group_start[g + 1] - group_start[g];
        mine = n > mine ? n : mine;
    }
    atomicMax(largest, mine);
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
 * offsets, values in order.  Keys of one size (typed keys: key_size) are at
 * multiples of it, which the kernel writes; other keys at offsets scanned
 * from their sizes. */
__global__ void pack_kernel(const uint32_t *perm, uint64_t n, const uint32_t *refs,
                            const uint8_t *keys, uint32_t key_size, uint64_t *offsets,
                            const uint8_t *values, uint32_t value_size, uint8_t *out_keys,
                            uint8_t *out_values)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t ref = refs[perm[j]];
        if (key_size) {
            offsets[j] = j * key_size;
            if (j == n - 1)
                offsets[n] = n * key_size;
        }
        memcpy(out_keys + offsets[j], key_bytes_of(keys, ref), key_size_of(keys, ref));
        memcpy(out_values + j * value_size, values + (uint64_t)perm[j] * value_size, value_size);
    }
}

/* A re-run's result in one wait (one_wait): one block merges, orders and
 * packs a table of up to SMALL_KEYS keys, into the device's packed arrays
 * and into the host's pinned readback buffer at once, where the counters go
 * first (SELECTED: the keys), then the keys and the values, and leaves
 * the table empty and the counters fresh for the next run.  Where the
 * launch stopped (status) or the table holds more keys, only the counters
 * go: the table stays as it is, for the usual way. */
enum { SMALL_THREADS = 1024, SMALL_ITEMS = 2, SMALL_KEYS = SMALL_THREADS * SMALL_ITEMS };

struct small_result_args {
    unsigned long long *slots;
    uint8_t *slot_values;
    uint64_t slot_count;
    const uint8_t *keys, *identity;
    uint32_t key_type, key_size, value_type, value_size;
    uint32_t order; /* soren_order */
    unsigned long long *counters;
    uint8_t *packed_keys, *packed_values; /* SMALL_KEYS entries */
    uint64_t *packed_offsets;             /* SMALL_KEYS + 1 */
    uint8_t *host;                        /* the readback buffer, mapped */
};

__global__ void __launch_bounds__(SMALL_THREADS) small_result_kernel(small_result_args a)
{
    typedef cub::BlockScan<uint32_t, SMALL_THREADS> scan;
    typedef cub::BlockRadixSort<uint64_t, SMALL_THREADS, SMALL_ITEMS, uint32_t> sort;
    __shared__ union {
        typename scan::TempStorage scan;
        typename sort::TempStorage sort;
    } temp;
    __shared__ uint32_t used[SMALL_KEYS]; /* the used slots, in slot order */
    __shared__ uint32_t total;
    if (threadIdx.x == 0)
        total = 0;
    __syncthreads();
    for (uint64_t base = 0; base < a.slot_count; base += SMALL_THREADS) {
        const uint64_t i = base + threadIdx.x;
        uint32_t flag = i < a.slot_count && holds_key(a.slots[i]), before = 0, sum = 0;
        scan(temp.scan).ExclusiveSum(flag, before, sum);
        if (flag && total + before < SMALL_KEYS)
            used[total + before] = (uint32_t)i;
        __syncthreads();
        if (threadIdx.x == 0)
            total += sum;
        __syncthreads();
    }
    const uint32_t n = total;
    unsigned long long *host_counters = (unsigned long long *)a.host;
    if (threadIdx.x < COUNTER_COUNT)
        host_counters[threadIdx.x] = threadIdx.x == SELECTED ? n : a.counters[threadIdx.x];
    if (n > SMALL_KEYS || a.counters[STATUS] != 0)
        return;
    /* Blocked: thread t holds ranks t * SMALL_ITEMS + j, before and after
     * each sort; unused entries sort last, behind any of the same bits.  A
     * sort reads only the bits the type has: each 4 bits is a pass. */
    uint64_t bits[SMALL_ITEMS];
    uint32_t entry[SMALL_ITEMS];
    for (int j = 0; j < SMALL_ITEMS; j++) {
        entry[j] = threadIdx.x * SMALL_ITEMS + j;
        bits[j] = entry[j] < n ? ordered_bits(a.key_type,
                                              key_bytes_of(a.keys, (uint32_t)a.slots[used[entry[j]]]))
                               : ~0ull;
    }
    if (a.order != SOREN_ORDER_NONE)
        sort(temp.sort).Sort(bits, entry, 0, 8 * a.key_size);
    if (a.order == SOREN_ORDER_VALUE_DESC || a.order == SOREN_ORDER_VALUE_ASC) {
        __syncthreads();
        for (int j = 0; j < SMALL_ITEMS; j++) {
            if (entry[j] >= n) {
                bits[j] = ~0ull;
                continue;
            }
            const uint64_t b = ordered_bits(a.value_type, a.slot_values + (uint64_t)used[entry[j]] *
                                                                                a.value_size);
            bits[j] = a.order == SOREN_ORDER_VALUE_DESC ? ~b : b;
        }
        sort(temp.sort).Sort(bits, entry, 0, 8 * a.value_size);
    }
    uint8_t *host_keys = a.host + COUNTER_COUNT * 8, *host_values = host_keys + n * a.key_size;
    for (int j = 0; j < SMALL_ITEMS; j++) {
        const uint32_t rank = threadIdx.x * SMALL_ITEMS + j;
        if (rank >= n)
            continue;
        const uint32_t slot = used[entry[j]];
        const uint8_t *key = key_bytes_of(a.keys, (uint32_t)a.slots[slot]);
        const uint8_t *value = a.slot_values + (uint64_t)slot * a.value_size;
        memcpy(a.packed_keys + rank * a.key_size, key, a.key_size);
        memcpy(host_keys + rank * a.key_size, key, a.key_size);
        memcpy(a.packed_values + rank * a.value_size, value, a.value_size);
        memcpy(host_values + rank * a.value_size, value, a.value_size);
        a.packed_offsets[rank + 1] = (uint64_t)(rank + 1) * a.key_size;
    }
    if (threadIdx.x == 0)
        a.packed_offsets[0] = 0;
    __syncthreads(); /* every slot read before the slots are emptied for the next run */
    for (uint32_t e = threadIdx.x; e < n; e += SMALL_THREADS) {
        a.slots[used[e]] = 0;
        memcpy(a.slot_values + (uint64_t)used[e] * a.value_size, a.identity, a.value_size);
    }
    if (threadIdx.x < COUNTER_COUNT) /* as session_start's fresh_counters */
        a.counters[threadIdx.x] = threadIdx.x == KEYS_USED ? SOREN_KEY_ALIGN : 0;
}

/* ---- Host side ----------------------------------------------------------- */

enum { MARKS = 9 }; /* upload, split, monitor, map, merge, reduce, order, download, end */

/* Host inputs go up through pinned pieces of STAGING_PIECE bytes, copied
 * into by up to COPY_THREADS_MAX threads, two pieces each (stage_up):
 * 64 MiB pinned in all.  Larger pieces copy no faster and take longer to
 * pin.  Registering the mapped file with the driver instead
 * (cudaHostRegister) would pin every page of it, slower than the staging
 * threads copy (bench-staging measures both), and can hang, the host
 * thread spinning with the GPU idle, on a file rewritten in place just
 * before the run. */
enum { STAGING_PIECE = 2 << 20, COPY_THREADS_MAX = 16 };

/* A device block of a session's pool (see dev_alloc). */
struct pool_block {
    void *p;
    uint64_t size;
    bool used;
};

/* Everything the runs of a stage allocated on the device; gpu_run_destroy
 * frees it all.  One soren-host run uses it once; a session (the library's
 * soren_job_run, again and again) keeps it from run to run. */
struct gpu_run {
    const soren_stage_spec *spec;
    const soren_gpu_options *opt;
    const soren_gpu_stage *gpu;
    soren_variant variant; /* resolved: never AUTO */
    soren_error *err;
    const char *phase;
    const char *emitter; /* "map" or "reduce": who emits in the launch under way */
    cudaStream_t stream;
    int grid; /* blocks for the engine's own grid-stride kernels */

    uint8_t *input;
    uint64_t *line_starts;
    uint64_t *tile_first;       /* split_lines: each tile's first line, kept (a free would
                                   wait for the next input's copies) */
    uint64_t tile_capacity;
    uint8_t *keys;
    uint64_t keys_capacity;
    unsigned long long *counters; /* keys_used, pairs_used, status, bad_key, selected */
    /* pinned host memory (see READBACK_BYTES): the counters as the host last
     * read them, the fresh counters a run starts from, a small result, and
     * small parameters on their way up (PARAM_STAGING_BYTES) */
    unsigned long long *host_counters, *fresh_counters;
    uint8_t *readback, *param_staging;
    uint8_t *readback_on_device; /* readback, as the device addresses it */
    unsigned long long *slots;
    uint8_t *slot_values;
    uint64_t slot_count;
    uint64_t slot_limit;        /* claims allowed before the table counts as full */
    soren_gpu_resume *resume;   /* hash, block, direct: where each thread stopped */
    uint64_t max_threads;       /* resume entries: every thread the device can hold */
    uint32_t dense_shared;      /* dense: shared bytes per block (0: arrays in global memory) */
    uint32_t block_slots;       /* hash and block: per-block table entries (0: none) */
    uint8_t *identity;          /* the combine's identity value, for emptied slots */
    /* Under a device memory budget a table that would outgrow it folds the
     * key space a part at a time, one pass over the inputs each: the part
     * now (soren_gpu_map_args.key_first, key_last), whether its pass
     * stopped because the part's keys did not fit (it begins again on half
     * the part), and the finished parts' pairs. */
    uint32_t key_first, key_last;
    bool narrowed;
    soren_result parts;
    uint64_t *part_ends; /* where each finished part's pairs end in parts */
    size_t part_ends_cap;
    unsigned int *sketch;       /* monitor: SOREN_SKETCH_REGISTERS ranks */
    uint64_t sample_count;
    soren_explain *x;
    uint32_t *pair_keys;
    uint8_t *pair_values;
    uint64_t pair_capacity;
    unsigned long long *record_pairs, *record_key_bytes;
    void *temp;
    size_t temp_size;
    void *param_blocks[SOREN_MAX_PARAMS];
    soren_params params;

    /* reduce: groups of values, each with its key (see soren_gpu_map_args) */
    uint32_t *group_refs;
    uint64_t *group_start;
    uint8_t *group_values;

    /* the merged list: n entries of (key ref, value), in perm order */
    uint32_t *refs;
    uint8_t *values;
    uint32_t *perm, *perm_alt;
    uint64_t *bits, *bits_alt;
    uint64_t n;

    cudaEvent_t mark[MARKS];

    /* the pinned pieces the input passes through on its way up: copy
     * thread t fills pieces 2t and 2t + 1 in turn; staged[i] is recorded
     * once piece i's copy to the device has been issued */
    uint8_t *staging;
    cudaEvent_t staged[2 * COPY_THREADS_MAX];
    unsigned copy_threads;

    /* Inputs in chunks (or several host inputs of lines or fixed records)
     * go up through two device buffers, input and input_alt: the next on
     * copy_stream, by an uploader thread, while split and map read the
     * other on stream.  uploaded[b] and upload_began[b] bracket buffer b's
     * copy; began marks the run's start, for the chunks' timeline. */
    uint8_t *input_alt;
    uint64_t input_alt_capacity;
    cudaStream_t copy_stream;
    cudaEvent_t upload_began[2], uploaded[2], began;

    /* A session keeps the device blocks a run frees for the next run, so
     * that a run of the same shape allocates nothing; a single run frees
     * them at once. */
    bool pooled;
    pool_block *pool;
    size_t pool_count, pool_cap;

    /* What a session's later runs reuse, and how large it is. */
    int runs;                                /* runs completed */
    uint64_t input_capacity;                 /* bytes of input */
    uint64_t record_capacity;                /* records line_starts (and the sort
                                                variant's record arrays) can hold */
    uint64_t param_capacity[SOREN_MAX_PARAMS];
    uint64_t param_version[SOREN_MAX_PARAMS]; /* the version each block holds (0: none) */
    const uint8_t *cur_input;                /* this launch's input: input, or the
                                                caller's device memory */
    uint64_t cur_base;                       /* its place in the whole (soren_input.base) */
    soren_metrics first_metrics;             /* the first run's sample, sizes and */
    soren_projection first_projection;       /* rule (a static string), which */
    const char *first_rule;                  /* later runs report */
    uint64_t map_pair_capacity;              /* the map's pair space, before a reduce's */
    /* the last run's result packed on the device: keys back to back at
     * packed_offsets, values in order; kept until the next run */
    uint8_t *packed_keys, *packed_values;
    uint64_t *packed_offsets;
    uint64_t packed_n, packed_key_bytes;
    /* The last map launch's arguments, for its resumes.  A re-run in one
     * wait (one_wait) leaves its last launch unread (leave_unread). */
    soren_gpu_map_args launch;
    bool leave_unread;
    uint64_t last_keys;  /* the keys the last run's table held */
    bool counters_fresh; /* the last run left the counters as a run starts them */
};

/* A result of up to this many bytes comes back through the run's pinned
 * readback buffer: its copies then run without the host, which waits once.
 * A copy into pageable memory waits for itself, several times a run, and
 * a re-run's time is mostly such waits.  A larger result is copied straight
 * into its arrays, where the copy's own time dwarfs the waits. */
enum { READBACK_BYTES = 1 << 20 };

/* Changed parameters of up to this many bytes in all go up through pinned
 * memory: a copy from pageable memory costs the host 20 to 30 us even for
 * a few bytes (a k-means re-run's centroids).  A run ends waiting for the
 * stream, so the next run finds the buffer free. */
enum { PARAM_STAGING_BYTES = 64 << 10 };

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

/* Gives the pool's free blocks back to the device; returns how many. */
size_t pool_release_free(gpu_run *r)
{
    size_t kept = 0, released = 0;
    for (size_t i = 0; i < r->pool_count; i++) {
        if (r->pool[i].used) {
            r->pool[kept++] = r->pool[i];
        } else {
            cudaFree(r->pool[i].p);
            released++;
        }
    }
    r->pool_count = kept;
    return released;
}

/* A free pooled block of at least bytes and at most twice as many (a small
 * need must not hold a large block), or NULL. */
void *pool_take(gpu_run *r, uint64_t bytes)
{
    for (size_t i = 0; i < r->pool_count; i++) {
        pool_block *b = &r->pool[i];
        if (!b->used && b->size >= bytes && b->size <= 2 * bytes + (1u << 20)) {
            b->used = true;
            return b->p;
        }
    }
    return NULL;
}

/* Allocates bytes of device memory for what, naming it on failure: from
 * the pool where a session has a block that fits. */
soren_status dev_alloc(gpu_run *r, void **p, uint64_t bytes, const char *what)
{
    bytes = bytes ? bytes : 1;
    if (r->pooled && (*p = pool_take(r, bytes)) != NULL)
        return SOREN_OK;
    *p = NULL;
    if (r->pooled && r->pool_count == r->pool_cap) {
        size_t cap = r->pool_cap ? 2 * r->pool_cap : 64;
        pool_block *grown = (pool_block *)realloc(r->pool, cap * sizeof *grown);
        if (!grown)
            return soren_error_set(r->err, SOREN_ENOMEM, "%s: out of host memory for the "
                                   "device memory pool", r->spec->job_name);
        r->pool = grown;
        r->pool_cap = cap;
    }
    cudaError_t rc = cudaMalloc(p, bytes);
    if (rc != cudaSuccess && r->pooled && pool_release_free(r) > 0) {
        /* the pool held what the device needs now */
        (void)cudaGetLastError();
        rc = cudaMalloc(p, bytes);
    }
    if (rc == cudaSuccess) {
        if (r->pooled)
            r->pool[r->pool_count++] = pool_block{*p, bytes, true};
        return SOREN_OK;
    }
    *p = NULL;
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

/* Frees a block dev_alloc gave: back to the pool in a session (the stream
 * orders its next use after every use already queued), at once otherwise. */
void dev_free(gpu_run *r, void *p)
{
    if (!p)
        return;
    if (r->pooled)
        for (size_t i = 0; i < r->pool_count; i++)
            if (r->pool[i].p == p) {
                r->pool[i].used = false;
                return;
            }
    cudaFree(p);
}

void gpu_run_destroy(gpu_run *r)
{
    /* Copies from the staging buffers may still be in flight after an error. */
    if (r->stream)
        (void)cudaStreamSynchronize(r->stream);
    if (r->copy_stream)
        (void)cudaStreamSynchronize(r->copy_stream);
    void *owned[] = {r->input,       r->input_alt,   r->line_starts,  r->tile_first,
                     r->keys,        r->counters,
                     r->resume,      r->sketch,
                     r->slots,       r->slot_values, r->pair_keys,    r->pair_values,
                     r->record_pairs, r->record_key_bytes, r->temp,   r->refs,
                     r->values,      r->perm,        r->perm_alt,     r->bits,
                     r->bits_alt,    r->group_refs,  r->group_start,  r->group_values,
                     r->packed_keys, r->packed_values, r->packed_offsets, r->identity};
    soren_result_destroy(&r->parts);
    free(r->part_ends);
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        dev_free(r, owned[i]);
    for (int i = 0; i < SOREN_MAX_PARAMS; i++)
        dev_free(r, r->param_blocks[i]);
    pool_release_free(r);
    free(r->pool);
    for (int i = 0; i < MARKS; i++)
        if (r->mark[i])
            cudaEventDestroy(r->mark[i]);
    if (r->staging)
        cudaFreeHost(r->staging);
    for (int i = 0; i < 2 * COPY_THREADS_MAX; i++)
        if (r->staged[i])
            cudaEventDestroy(r->staged[i]);
    for (int b = 0; b < 2; b++) {
        cudaEvent_t events[] = {r->upload_began[b], r->uploaded[b]};
        for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
            if (events[i])
                cudaEventDestroy(events[i]);
    }
    if (r->host_counters)
        cudaFreeHost(r->host_counters);
    if (r->began)
        cudaEventDestroy(r->began);
    if (r->copy_stream)
        cudaStreamDestroy(r->copy_stream);
    if (r->stream)
        cudaStreamDestroy(r->stream);
}

/* A reduce without a combine groups the map's pairs by key (group_pairs)
 * instead of merging a table of one value per key (merge_table). */
bool groups_pairs(const soren_stage_spec *s)
{
    return s->reduce == SOREN_REDUCE_FUNCTION && s->combine == SOREN_COMBINE_NONE;
}

/* The host waits for the device: for the stream's work so far, or for
 * mark i.  explain's "waits" counts them: a re-run's overhead beyond its
 * kernels is mostly waits. */
soren_status wait_stream(gpu_run *r)
{
    r->x->waits++;
    CUDA_TRY(r, cudaStreamSynchronize(r->stream));
    return SOREN_OK;
}

soren_status wait_mark(gpu_run *r, int i)
{
    r->x->waits++;
    CUDA_TRY(r, cudaEventSynchronize(r->mark[i]));
    return SOREN_OK;
}

#define WAIT_STREAM(r)                                                                     \
    do {                                                                                   \
        soren_status st_ = wait_stream(r);                                                 \
        if (st_ != SOREN_OK)                                                               \
            return st_;                                                                    \
    } while (0)

/* The counters as they stand once the stream's work so far is done. */
soren_status read_counters(gpu_run *r, unsigned long long *c)
{
    CUDA_TRY(r, cudaMemcpyAsync(r->host_counters, r->counters, COUNTER_COUNT * sizeof *c,
                                cudaMemcpyDeviceToHost, r->stream));
    WAIT_STREAM(r);
    memcpy(c, r->host_counters, COUNTER_COUNT * sizeof *c);
    return SOREN_OK;
}

/* CUB's temporary storage, grown on demand and kept for the run. */
soren_status temp_reserve(gpu_run *r, size_t bytes)
{
    if (bytes <= r->temp_size)
        return SOREN_OK;
    dev_free(r, r->temp);
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

/* Copies the parameters up, into the blocks of the run before where they
 * fit (a session's runs change parameters, rarely their sizes); one whose
 * version is the one the block holds is there already. */
soren_status upload_params(gpu_run *r, const soren_params *host, const uint64_t *versions)
{
    uint64_t staged = 0;
    r->params = *host;
    for (uint32_t i = 0; i < host->count && i < SOREN_MAX_PARAMS; i++) {
        r->params.data[i] = NULL;
        if (!host->data[i])
            continue;
        const uint64_t version = versions ? versions[i] : 0;
        if (version && version == r->param_version[i] && r->param_blocks[i]) {
            r->params.data[i] = r->param_blocks[i];
            continue;
        }
        r->param_version[i] = 0;
        if (host->size[i] > r->param_capacity[i] || !r->param_blocks[i]) {
            dev_free(r, r->param_blocks[i]);
            r->param_blocks[i] = NULL;
            r->param_capacity[i] = 0;
            ALLOC(r, r->param_blocks[i], host->size[i], "a job parameter");
            r->param_capacity[i] = host->size[i];
        }
        const void *from = host->data[i];
        if (host->size[i] <= PARAM_STAGING_BYTES - staged) {
            from = memcpy(r->param_staging + staged, host->data[i], host->size[i]);
            staged += host->size[i];
        }
        CUDA_TRY(r, cudaMemcpyAsync(r->param_blocks[i], from, host->size[i],
                                    cudaMemcpyHostToDevice, r->stream));
        r->params.data[i] = r->param_blocks[i];
        r->param_version[i] = version;
    }
    return SOREN_OK;
}

/* The bytes of an input that go to the device (index input has none), and
 * an upper bound of its records. */
uint64_t data_bytes(const soren_stage_spec *s, const soren_input *in)
{
    return s->input_format == SOREN_INPUT_INDEX ? 0 : in->size;
}

uint64_t records_at_most(const soren_stage_spec *s, const soren_input *in)
{
    switch (s->input_format) {
    case SOREN_INPUT_FIXED: return in->size / s->record_size;
    case SOREN_INPUT_PAIRS: return in->count;
    default: return in->size; /* index: the tasks; lines: at most one a byte */
    }
}

/* Pinned staging, where a run has host input (largest: the most bytes of
 * one): two pieces for each copy thread, whatever the input's size (kept by
 * a session: pinning host memory costs milliseconds). */
soren_status alloc_staging(gpu_run *r, uint64_t largest)
{
    if (largest == 0 || r->staging)
        return SOREN_OK;
    unsigned cpus = soren_cpu_count();
    r->copy_threads = cpus < COPY_THREADS_MAX ? cpus : COPY_THREADS_MAX;
    uint64_t size = 2ull * r->copy_threads * STAGING_PIECE;
    cudaError_t rc = cudaHostAlloc((void **)&r->staging, size, cudaHostAllocDefault);
    if (rc != cudaSuccess) {
        r->staging = NULL;
        (void)cudaGetLastError();
        return soren_error_set(r->err, SOREN_EDEVICE, "%s: cannot allocate %llu bytes of "
                               "pinned host memory to stage the input (%s); check the "
                               "locked-memory limit (ulimit -l)", r->spec->job_name,
                               (unsigned long long)size, cudaGetErrorString(rc));
    }
    for (unsigned i = 0; i < 2 * r->copy_threads; i++)
        if (!r->staged[i])
            CUDA_TRY(r, cudaEventCreateWithFlags(&r->staged[i], cudaEventDisableTiming));
    return SOREN_OK;
}

/* What stopped a stage_up: a CUDA call (rc, call), or reading the input's
 * file (read_errno; ENODATA: it ended before its mapped size). */
struct upload_fault {
    cudaError_t rc;
    int read_errno;
    const char *call;
};

const upload_fault NO_FAULT = {cudaSuccess, 0, ""};

bool upload_faulted(const upload_fault *f) { return f->rc != cudaSuccess || f->read_errno; }

/* The run's error for a stage_up that stopped on f. */
soren_status upload_failed(gpu_run *r, const soren_input *in, const upload_fault *f, int line)
{
    if (f->read_errno == ENODATA)
        return soren_error_set(r->err, SOREN_EINPUT, "%s: input %s ended before byte %llu: "
                               "it shrank during the run", r->spec->job_name, in->path,
                               (unsigned long long)(in->file_offset + in->size));
    if (f->read_errno)
        return soren_error_set(r->err, SOREN_EINPUT, "%s: cannot read input %s: %s",
                               r->spec->job_name, in->path, strerror(f->read_errno));
    return cuda_fail(r, f->rc, f->call, line);
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

void *stager_main(void *arg)
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
        uint8_t *buf = r->staging + (uint64_t)i * piece;
        /* The piece's previous copy must be on the device before refilling. */
        f->call = "cudaEventSynchronize(staged)";
        if ((f->rc = cudaEventSynchronize(r->staged[i])) != cudaSuccess)
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
        if ((f->rc = cudaEventRecord(r->staged[i], g->stream)) != cudaSuccess)
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
 * (bench-staging on the H100 host: 7.4 GB/s from one thread, 50.6 from 16,
 * the bus 54.5).  A mapped file's bytes are read from the file, as fast
 * (50.6 GB/s either way with the copies to the device): the mapping's pages
 * stay untouched, so the kernel neither maps them now nor unmaps them at
 * munmap.  Every copy has been queued on stream when it returns true; else
 * *f says what failed.  Touches nothing but the pinned pieces and their
 * events, so an uploader thread may run it. */
bool stage_up(gpu_run *r, const soren_input *in, uint8_t *dst, cudaStream_t stream,
              soren_progress *progress, upload_fault *f)
{
    *f = NO_FAULT;
    if (in->size == 0)
        return true;
    const int fd = soren_input_reopen(in);
    std::atomic<uint64_t> next{0};
    stager g[COPY_THREADS_MAX];
    uint64_t pieces = (in->size + STAGING_PIECE - 1) / STAGING_PIECE;
    unsigned threads = pieces < r->copy_threads ? (unsigned)pieces : r->copy_threads;
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
    r->cur_input = in->on_device ? in->data : r->input;
    r->cur_base = in->base;
    if (r->spec->input_format == SOREN_INPUT_INDEX || in->on_device)
        return SOREN_OK;
    if (r->spec->input_format == SOREN_INPUT_PAIRS)
        CUDA_TRY(r, cudaMemcpyAsync(r->line_starts, in->starts, (in->count + 1) * 8,
                                    cudaMemcpyHostToDevice, r->stream));
    upload_fault f;
    return stage_up(r, in, r->input, r->stream, r->opt->progress, &f)
               ? SOREN_OK
               : upload_failed(r, in, &f, __LINE__);
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

/* One input on its way up into buffer b by an uploader thread. */
struct uploader {
    gpu_run *r;
    const soren_input *in;
    int b;
    pthread_t thread;
    bool running;
    upload_fault fault;
};

uint8_t *buffer_of(gpu_run *r, int b) { return b ? r->input_alt : r->input; }

void *uploader_main(void *arg)
{
    uploader *u = (uploader *)arg;
    gpu_run *r = u->r;
    upload_fault *f = &u->fault;
    f->call = "cudaSetDevice";
    if ((f->rc = cudaSetDevice(r->opt->device)) != cudaSuccess)
        return NULL;
    f->call = "cudaEventRecord(upload_began)";
    if ((f->rc = cudaEventRecord(r->upload_began[u->b], r->copy_stream)) != cudaSuccess)
        return NULL;
    if (stage_up(r, u->in, buffer_of(r, u->b), r->copy_stream, NULL, f)) {
        f->call = "cudaEventRecord(uploaded)";
        f->rc = cudaEventRecord(r->uploaded[u->b], r->copy_stream);
    }
    return NULL;
}

/* Starts sending in into buffer b (its last reader, the map of the input
 * before the one in the other buffer, has finished: map waits for its
 * kernels).  A thread that cannot be started leaves the copy to the
 * caller, here. */
void upload_start(gpu_run *r, uploader *u, const soren_input *in, int b)
{
    *u = (uploader){r, in, b, pthread_t(), false, NO_FAULT};
    u->running = pthread_create(&u->thread, NULL, uploader_main, u) == 0;
    if (!u->running)
        uploader_main(u);
}

/* Waits for the uploader's copies to be issued, then makes the run's stream
 * wait for them to land: what reads buffer b next runs after. */
soren_status upload_finish(gpu_run *r, uploader *u)
{
    if (u->running)
        pthread_join(u->thread, NULL);
    u->running = false;
    if (upload_faulted(&u->fault))
        return upload_failed(r, u->in, &u->fault, __LINE__);
    soren_progress_add(r->opt->progress, u->in->size);
    if (soren_progress_check(r->opt->progress, r->spec->job_name, r->err) != SOREN_OK)
        return r->err->code;
    CUDA_TRY(r, cudaStreamWaitEvent(r->stream, r->uploaded[u->b], 0));
    r->cur_input = buffer_of(r, u->b);
    r->cur_base = u->in->base;
    return SOREN_OK;
}

/* The copy stream, its events and the second buffer, once. */
soren_status pipeline_setup(gpu_run *r)
{
    if (!r->copy_stream)
        CUDA_TRY(r, cudaStreamCreateWithFlags(&r->copy_stream, cudaStreamNonBlocking));
    for (int b = 0; b < 2; b++) {
        if (!r->upload_began[b])
            CUDA_TRY(r, cudaEventCreate(&r->upload_began[b]));
        if (!r->uploaded[b])
            CUDA_TRY(r, cudaEventCreate(&r->uploaded[b]));
    }
    /* as large as the first (session_inputs sized it) */
    if (r->input_alt_capacity < r->input_capacity) {
        dev_free(r, r->input_alt);
        r->input_alt = NULL;
        r->input_alt_capacity = 0;
        ALLOC(r, r->input_alt, (r->input_capacity + 15) & ~15ull, "the second input buffer");
        r->input_alt_capacity = r->input_capacity;
    }
    if (!r->began)
        CUDA_TRY(r, cudaEventCreate(&r->began));
    CUDA_TRY(r, cudaEventRecord(r->began, r->stream));
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

float elapsed_between(cudaEvent_t from, cudaEvent_t to)
{
    float ms = 0;
    return cudaEventElapsedTime(&ms, from, to) == cudaSuccess ? ms : 0;
}

/* Grows the record index (lines and pairs input) and the sort variant's
 * per-record counts, once it has them, to hold `records` records; each
 * input refills them, so nothing is kept. */
soren_status ensure_records(gpu_run *r, uint64_t records)
{
    const soren_stage_spec *s = r->spec;
    const bool indexed = s->input_format == SOREN_INPUT_LINES ||
                         s->input_format == SOREN_INPUT_PAIRS;
    if (records <= r->record_capacity && (r->line_starts || !indexed))
        return SOREN_OK;
    if (indexed) {
        dev_free(r, r->line_starts);
        r->line_starts = NULL;
        ALLOC(r, r->line_starts, (records + 2) * sizeof(uint64_t), "the record index");
    }
    unsigned long long **arrays[] = {&r->record_pairs, &r->record_key_bytes};
    for (int i = 0; i < 2; i++) {
        if (!*arrays[i])
            continue;
        dev_free(r, *arrays[i]);
        *arrays[i] = NULL;
        ALLOC(r, *arrays[i], (records + 1) * 8, "the per-record counts");
    }
    r->record_capacity = records;
    return SOREN_OK;
}

/* Finds the records of a `lines` input on the device; returns their number. */
soren_status split_lines(gpu_run *r, uint64_t size, uint64_t *count)
{
    *count = 0;
    if (size == 0)
        return SOREN_OK;
    uint64_t tiles = (size + SPLIT_TILE - 1) / SPLIT_TILE;
    if (tiles > r->tile_capacity) {
        dev_free(r, r->tile_first);
        r->tile_first = NULL;
        r->tile_capacity = 0;
        ALLOC(r, r->tile_first, (tiles + 1) * sizeof(uint64_t),
              "the line counts of the input's tiles");
        r->tile_capacity = tiles;
    }
    uint64_t *tile_first = r->tile_first;
    soren_status st = SOREN_OK;
    cudaError_t rc = cudaSuccess;
    unsigned grid = (unsigned)(tiles < (uint64_t)r->grid ? tiles : (uint64_t)r->grid);
    uint64_t lines = 0;
    do {
        split_count_kernel<<<grid, SPLIT_THREADS, 0, r->stream>>>(r->cur_input, size, tiles,
                                                                    tile_first);
        if ((rc = cudaGetLastError()) != cudaSuccess)
            break;
        size_t need = 0;
        if ((rc = cub::DeviceScan::ExclusiveSum(NULL, need, tile_first, tile_first,
                                                (int64_t)tiles + 1, r->stream)) != cudaSuccess)
            break;
        if ((st = temp_reserve(r, need)) != SOREN_OK)
            break;
        /* tile_first[tiles] is scanned too: it becomes the total. */
        if ((rc = cub::DeviceScan::ExclusiveSum(r->temp, need, tile_first, tile_first,
                                                (int64_t)tiles + 1, r->stream)) != cudaSuccess)
            break;
        /* The total sizes the record index exactly: a bound from the bytes
         * would take eight times the input. */
        if ((rc = cudaMemcpyAsync(&lines, tile_first + tiles, sizeof lines,
                                  cudaMemcpyDeviceToHost, r->stream)) != cudaSuccess)
            break;
        if ((st = wait_stream(r)) != SOREN_OK || (st = ensure_records(r, lines + 1)) != SOREN_OK)
            break;
        split_write_kernel<<<grid, SPLIT_THREADS, 0, r->stream>>>(r->cur_input, size, tiles,
                                                                    tile_first, r->line_starts);
        rc = cudaGetLastError();
    } while (0);
    if (rc != cudaSuccess)
        return cuda_fail(r, rc, "splitting the input into lines", __LINE__);
    if (st != SOREN_OK)
        return st;
    /* one record before the first newline, and one after each */
    *count = lines + 1;
    /* The sentinel makes record i = [starts[i], starts[i+1] - 1) hold for
     * the last line too, newline-terminated or not. */
    line_end_kernel<<<1, 1, 0, r->stream>>>(r->line_starts, *count, r->cur_input, size);
    CUDA_TRY(r, cudaGetLastError());
    return SOREN_OK;
}

void fill_args(gpu_run *r, soren_gpu_map_args *a, uint32_t variant, uint64_t size,
               uint64_t records)
{
    const soren_stage_spec *s = r->spec;
    memset(a, 0, sizeof *a);
    a->variant = variant;
    a->input_format = s->input_format == SOREN_INPUT_FIXED   ? SOREN_GPU_FIXED
                    : s->input_format == SOREN_INPUT_INDEX   ? SOREN_GPU_INDEX
                    : s->input_format == SOREN_INPUT_PAIRS   ? SOREN_GPU_PAIRS
                                                             : SOREN_GPU_LINES;
    a->input = r->cur_input;
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
    a->slots_used = r->counters + SLOTS_USED;
    a->slot_limit = r->slot_limit;
    a->pair_keys = r->pair_keys;
    a->pair_values = r->pair_values;
    a->pair_capacity = r->pair_capacity;
    a->pairs_used = r->counters + PAIRS_USED;
    a->record_pairs = r->record_pairs;
    a->record_key_bytes = r->record_key_bytes;
    a->status = (unsigned int *)(r->counters + STATUS);
    a->bad_key = r->counters + BAD_KEY;
    a->max_threads = r->max_threads;
    if (variant == SOREN_GPU_HASH || variant == SOREN_GPU_BLOCK || variant == SOREN_GPU_DIRECT ||
        variant == SOREN_GPU_GROUP || variant == SOREN_GPU_REDUCE)
        a->resume = r->resume;
    if (variant == SOREN_GPU_HASH || variant == SOREN_GPU_BLOCK)
        a->shared_bytes = r->block_slots * (SOREN_GPU_BLOCK_BYTES + (uint32_t)s->value_size);
    if (variant == SOREN_GPU_DENSE)
        a->shared_bytes = r->dense_shared;
    a->sample_count = r->sample_count;
    a->sample_counts = r->counters + SAMPLE_PAIRS;
    a->sketch = r->sketch;
    a->group_refs = r->group_refs;
    a->group_start = r->group_start;
    a->group_values = r->group_values;
    /* reduce numbers groups, not records */
    a->record_base = variant == SOREN_GPU_REDUCE ? 0 : r->cur_base;
    a->key_first = r->key_first;
    a->key_last = r->key_last;
}

/* A bad key recorded by a launch, in the CPU engine's words: the launch
 * kept the key's size, or an index key's value, which is all the check
 * reads. */
soren_status bad_key_error(gpu_run *r, unsigned long long bad)
{
    unsigned long long detail = bad & ((1ull << 56) - 1);
    uint32_t len = (uint32_t)detail, index = (uint32_t)detail;
    if ((bad >> 56) == 3)
        len = 4;
    if (soren__key_refused(r->spec, soren_type_size(r->spec->key_type), r->emitter, &index, len,
                           r->err))
        return r->err->code;
    return soren_error_set(r->err, SOREN_EJOB, "%s: %s emitted a key the manifest does not "
                           "allow (%#llx)", r->spec->job_name, r->emitter, bad);
}

__global__ void count_used_kernel(const unsigned long long *slots, uint64_t n,
                                  unsigned long long *used)
{
    unsigned long long mine = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        mine += slots[i] != 0;
    if (mine)
        atomicAdd(used, mine);
}

/* Moves every slot that holds a key into the new table (keys are unique, so
 * no comparisons), with its value; a slot kept for a key (the key space was
 * full) stays behind, its key coming again when the launch resumes. */
__global__ void rehash_kernel(const unsigned long long *old_slots, const uint8_t *old_values,
                              uint64_t old_count, unsigned long long *slots, uint8_t *values,
                              uint64_t count, uint32_t value_size, const uint8_t *keys)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < old_count;
         i += (uint64_t)gridDim.x * blockDim.x) {
        unsigned long long s = old_slots[i];
        if (!holds_key(s))
            continue; /* a kept slot's key comes again when the launch resumes */
        uint32_t ref = (uint32_t)s;
        uint64_t h = soren__key_hash(key_bytes_of(keys, ref), key_size_of(keys, ref));
        uint64_t j = h & (count - 1);
        while (atomicCAS(&slots[j], 0ull, s) != 0)
            j = (j + 1) & (count - 1);
        memcpy(values + j * value_size, old_values + i * value_size, value_size);
    }
}

/* The dense variant's keys: index i at byte 4 + 8 i of the key space. */
__global__ void dense_keys_kernel(uint8_t *keys, uint64_t count)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < count;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t *k = (uint32_t *)(keys + 4 + 8 * i);
        k[0] = 4;
        k[1] = (uint32_t)i;
    }
}

#define GRID(r) (r)->grid, 256, 0, (r)->stream

/* The device bytes of a table of slot_count slots and their values. */
uint64_t table_bytes(const gpu_run *r, uint64_t slot_count)
{
    return slot_count * (8 + r->spec->value_size);
}

/* A table of slot_count empty slots (and identity values) for the hash and
 * block variants; a claim past slot_limit counts as full. */
soren_status alloc_table(gpu_run *r, uint64_t slot_count, unsigned long long **slots,
                         uint8_t **values)
{
    *slots = NULL;
    *values = NULL;
    soren_status st = dev_alloc(r, (void **)slots, slot_count * 8, "the hash table");
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)values, slot_count * r->spec->value_size,
                       "the hash table's values");
    if (st != SOREN_OK) {
        dev_free(r, *slots);
        *slots = NULL;
        return st;
    }
    CUDA_TRY(r, cudaMemsetAsync(*slots, 0, slot_count * 8, r->stream));
    CUDA_TRY(r, r->gpu->fill_identity(*values, slot_count, r->stream));
    return SOREN_OK;
}

/* Largest sizes the engine's 32-bit references allow. */
static const uint64_t KEY_SPACE_MAX = 16ull << 30; /* key refs count 4-byte units */
static const uint64_t TABLE_SLOTS_MAX = 1ull << 31; /* block entries hold slot + 1 in 32 bits */

soren_status grow_table(gpu_run *r)
{
    uint64_t count = r->slot_count * 2;
    if (count > TABLE_SLOTS_MAX)
        return soren_error_set(r->err, SOREN_EJOB, "%s: the hash table cannot grow past %llu "
                               "slots", r->spec->job_name, (unsigned long long)TABLE_SLOTS_MAX);
    unsigned long long *slots = NULL;
    uint8_t *values = NULL;
    soren_status st = alloc_table(r, count, &slots, &values);
    if (st != SOREN_OK)
        return st;
    rehash_kernel<<<GRID(r)>>>(r->slots, r->slot_values, r->slot_count, slots, values, count,
                               (uint32_t)r->spec->value_size, r->keys);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) {
        dev_free(r, slots);
        dev_free(r, values);
        return cuda_fail(r, rc, "rehash_kernel", __LINE__);
    }
    st = soren_explain_overflow(r->x, "table", r->slot_count, count, r->err);
    /* The stream orders the frees after the rehash. */
    dev_free(r, r->slots);
    dev_free(r, r->slot_values);
    r->slots = slots;
    r->slot_values = values;
    r->slot_count = count;
    r->slot_limit = count - count / 4;
    return st;
}

/* Grows a region of used bytes to new_size, keeping its content. */
soren_status grow_region(gpu_run *r, void **region, uint64_t used, uint64_t new_size,
                         const char *what)
{
    void *bigger = NULL;
    soren_status st = dev_alloc(r, &bigger, new_size, what);
    if (st != SOREN_OK)
        return st;
    cudaError_t rc = used ? cudaMemcpyAsync(bigger, *region, used, cudaMemcpyDeviceToDevice,
                                            r->stream)
                          : cudaSuccess;
    if (rc != cudaSuccess) {
        dev_free(r, bigger);
        return cuda_fail(r, rc, "cudaMemcpyAsync", __LINE__);
    }
    dev_free(r, *region);
    *region = bigger;
    return SOREN_OK;
}

soren_status grow_keys(gpu_run *r, uint64_t used, uint64_t need)
{
    uint64_t size = r->keys_capacity;
    while (size < need)
        size *= 2;
    if (size > KEY_SPACE_MAX)
        size = KEY_SPACE_MAX;
    if (size <= r->keys_capacity || size < need)
        return soren_error_set(r->err, SOREN_EJOB, "%s: the key space cannot grow past %llu "
                               "bytes (key references are 32-bit)", r->spec->job_name,
                               (unsigned long long)KEY_SPACE_MAX);
    soren_status st = grow_region(r, (void **)&r->keys, used, size, "the key space");
    if (st == SOREN_OK)
        st = soren_explain_overflow(r->x, "keys", r->keys_capacity, size, r->err);
    if (st == SOREN_OK)
        r->keys_capacity = size;
    return st;
}

soren_status grow_pairs(gpu_run *r, uint64_t used, uint64_t need)
{
    uint64_t count = r->pair_capacity ? r->pair_capacity : 1;
    while (count < need)
        count *= 2;
    uint32_t vs = (uint32_t)r->spec->value_size;
    soren_status st = grow_region(r, (void **)&r->pair_keys, used * 4, count * 4, "the pair keys");
    if (st == SOREN_OK)
        st = grow_region(r, (void **)&r->pair_values, used * vs, count * vs, "the pair values");
    if (st == SOREN_OK)
        st = soren_explain_overflow(r->x, "pairs", r->pair_capacity, count, r->err);
    if (st == SOREN_OK)
        r->pair_capacity = count;
    return st;
}

/* The counters for a stopped launch's resume: the key and pair space used
 * as given, no status, no slots counted (grow_after_overflow counts those a
 * table keeps). */
cudaError_t restart_counters(gpu_run *r, uint64_t keys_used, uint64_t pairs_used)
{
    unsigned long long reset[SLOTS_USED + 1] = {keys_used, pairs_used, 0, 0, 0, 0};
    return cudaMemcpyAsync(r->counters, reset, sizeof reset, cudaMemcpyHostToDevice, r->stream);
}

/* After a launch stopped on a full region: grow what ran out, and set the
 * counters to what the launch really used (claims past a region's end
 * failed, and their threads will claim again). */
soren_status grow_after_overflow(gpu_run *r, const unsigned long long *c)
{
    unsigned status = (unsigned)c[STATUS];
    uint64_t keys_used = c[KEYS_USED] < r->keys_capacity ? c[KEYS_USED] : r->keys_capacity;
    uint64_t pairs_used = c[PAIRS_USED] < r->pair_capacity ? c[PAIRS_USED] : r->pair_capacity;
    soren_status st = SOREN_OK;
    if (status & SOREN_GPU_TABLE_FULL)
        st = grow_table(r);
    if (st == SOREN_OK && (status & SOREN_GPU_KEYS_FULL))
        st = grow_keys(r, keys_used, r->keys_capacity * 2);
    if (st == SOREN_OK && (status & SOREN_GPU_PAIRS_FULL))
        st = grow_pairs(r, pairs_used, r->pair_capacity * 2);
    if (st != SOREN_OK)
        return st;
    CUDA_TRY(r, restart_counters(r, keys_used, pairs_used));
    /* Count the slots taken, those kept for a key that comes again among
     * them (a grown table has none): plugins before ABI 1.5 counted the
     * claims that lost a race, or found the key space full. */
    if (r->slots) {
        count_used_kernel<<<GRID(r)>>>(r->slots, r->slot_count, r->counters + SLOTS_USED);
        CUDA_TRY(r, cudaGetLastError());
    }
    return SOREN_OK;
}

/* The whole key space, as soren_gpu_map_args.key_first and key_last. */
const uint32_t KEY_LAST = 0xffffffffu;

/* Whether this pass folds every key (no part of the key space waits). */
bool whole_key_space(const gpu_run *r) { return r->key_first == 0 && r->key_last == KEY_LAST; }

/* Whether a full table folds half its part of the key space instead of
 * growing: under a device memory budget, where growing would take the
 * table and the key space past half of it (the input's chunks take the
 * other half), for a table that folds values (hash, block) and holds at
 * least NARROW_MIN_KEYS keys.  Regions too small for that many grow past
 * the budget instead: halving the part again and again would not make a
 * key fit, and every narrower part costs a pass (budgets of a few bytes
 * would take billions). */
bool narrowing_due(const gpu_run *r, const unsigned long long *c)
{
    enum { NARROW_MIN_KEYS = 256 };
    const uint64_t budget = r->opt->device_memory;
    const unsigned status = (unsigned)c[STATUS];
    if (!budget || !r->slots || r->spec->combine == SOREN_COMBINE_NONE ||
        (r->variant != SOREN_VARIANT_HASH && r->variant != SOREN_VARIANT_BLOCK) ||
        !(status & (SOREN_GPU_TABLE_FULL | SOREN_GPU_KEYS_FULL)) ||
        c[SLOTS_USED] < NARROW_MIN_KEYS || r->key_first == r->key_last)
        return false;
    const uint64_t slots = r->slot_count * (status & SOREN_GPU_TABLE_FULL ? 2 : 1);
    const uint64_t table = table_bytes(r, slots);
    const uint64_t keys = r->keys_capacity * (status & SOREN_GPU_KEYS_FULL ? 2 : 1);
    return table + keys > budget / 2;
}

/* Halves the part of the key space the stopped pass folds: session_run
 * empties the table and maps the inputs again for the first half, the
 * second half's keys wait for a later pass. */
soren_status narrow_key_range(gpu_run *r)
{
    if (r->spec->code->gpu->abi_minor < 6)
        return soren_error_set(r->err, SOREN_EPLUGIN, "%s: its table outgrew --device-memory "
                               "%llu bytes, and its device code predates plugin ABI 1.6, which "
                               "folds the key space a part at a time; rebuild it with this "
                               "Soren's SDK, or give it more device memory",
                               r->spec->job_name, (unsigned long long)r->opt->device_memory);
    r->key_last = r->key_first + (r->key_last - r->key_first) / 2;
    r->narrowed = true;
    r->x->narrowings++;
    return SOREN_OK;
}

/* Every slot of the table (or dense array) empty, its value the identity. */
soren_status empty_slots(gpu_run *r)
{
    CUDA_TRY(r, cudaMemsetAsync(r->slots, 0, r->slot_count * 8, r->stream));
    CUDA_TRY(r, r->gpu->fill_identity(r->slot_values, r->slot_count, r->stream));
    return SOREN_OK;
}

/* The table and the key space empty again, for a pass that begins anew on
 * a narrower part of the key space. */
soren_status empty_table(gpu_run *r)
{
    soren_status st = empty_slots(r);
    if (st == SOREN_OK)
        CUDA_TRY(r, restart_counters(r, SOREN_KEY_ALIGN, 0));
    return st;
}

/* Resumes the launch in r->launch, whose counters c the host has read,
 * after each stop for room (growing a region), until it has mapped
 * everything or its pass is to begin again on half its part of the key
 * space (r->narrowed). */
soren_status finish_launch(gpu_run *r, unsigned long long *c)
{
    /* Each resume at least doubles a region: this many cover any size. */
    enum { RESUMES_MAX = 64 };
    soren_gpu_map_args *a = &r->launch;
    for (unsigned resumes = 0;; resumes++) {
        unsigned status = (unsigned)c[STATUS];
        if (status & SOREN_GPU_BAD_KEY)
            return bad_key_error(r, c[BAD_KEY]);
        if (!(status & SOREN_GPU_OVERFLOW))
            return SOREN_OK;
        if (narrowing_due(r, c))
            return narrow_key_range(r);
        soren_status st;
        if (resumes == RESUMES_MAX) {
            return soren_error_set(r->err, SOREN_EJOB, "%s: map still overflows after %d "
                                   "resumes; this is a bug in Soren, please report it",
                                   r->spec->job_name, (int)RESUMES_MAX);
        } else {
            st = grow_after_overflow(r, c);
        }
        if (st != SOREN_OK)
            return st;
        fill_args(r, a, a->variant, a->input_size, a->record_count);
        a->resuming = 1;
        CUDA_TRY(r, r->gpu->map(a, r->stream));
        if ((st = read_counters(r, c)) != SOREN_OK)
            return st;
    }
}

/* Launches map over one input's records, growing regions and resuming
 * until every record is done (or its part of the key space is halved). */
soren_status launch_map(gpu_run *r, uint32_t variant, uint64_t size, uint64_t records)
{
    fill_args(r, &r->launch, variant, size, records);
    CUDA_TRY(r, r->gpu->map(&r->launch, r->stream));
    /* A dense array holds every key and no key bytes: its launch cannot
     * stop for room, and merge_table reads a bad key's status with the
     * merged count, so the host need not wait here.  A re-run in one wait
     * reads the status with its result. */
    if (r->leave_unread || (variant == SOREN_GPU_DENSE && !groups_pairs(r->spec)))
        return SOREN_OK;
    unsigned long long c[COUNTER_COUNT];
    soren_status st = read_counters(r, c);
    return st == SOREN_OK ? finish_launch(r, c) : st;
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
    WAIT_STREAM(r);
    uint64_t pairs = scanned[0] + last[0], key_bytes = scanned[1] + last[1];
    /* Pass 1 counted exactly: grow to fit before writing. */
    if (used[PAIRS_USED] + pairs > r->pair_capacity &&
        (st = grow_pairs(r, used[PAIRS_USED], used[PAIRS_USED] + pairs)) != SOREN_OK)
        return st;
    if (used[KEYS_USED] + key_bytes > r->keys_capacity &&
        (st = grow_keys(r, used[KEYS_USED], used[KEYS_USED] + key_bytes)) != SOREN_OK)
        return st;
    st = launch_map(r, SOREN_GPU_SORT_WRITE, size, records);
    if (st != SOREN_OK)
        return st;
    used[PAIRS_USED] += pairs;
    used[KEYS_USED] += key_bytes;
    CUDA_TRY(r, cudaMemcpyAsync(r->counters, used, sizeof used, cudaMemcpyHostToDevice,
                                r->stream));
    return SOREN_OK;
}

/* What every run of the stage needs, once: the counters, the resume
 * points, monitoring's registers. */
soren_status session_start(gpu_run *r)
{
    ALLOC(r, r->counters, COUNTER_COUNT * sizeof(unsigned long long), "the engine's counters");
    const size_t counter_bytes = COUNTER_COUNT * sizeof(unsigned long long);
    cudaError_t rc = cudaMallocHost((void **)&r->host_counters,
                                    2 * counter_bytes + READBACK_BYTES + PARAM_STAGING_BYTES);
    if (rc != cudaSuccess) {
        r->host_counters = NULL;
        return cuda_fail(r, rc, "cudaMallocHost(the counters', the result's and the "
                         "parameters' pinned buffer)", __LINE__);
    }
    r->fresh_counters = r->host_counters + COUNTER_COUNT;
    r->readback = (uint8_t *)(r->fresh_counters + COUNTER_COUNT);
    r->param_staging = r->readback + READBACK_BYTES;
    CUDA_TRY(r, cudaHostGetDevicePointer((void **)&r->readback_on_device, r->readback, 0));
    /* the first key unit reserved (key ref 0 means "none"; keys start
     * SOREN_KEY_ALIGN-aligned) */
    memset(r->fresh_counters, 0, counter_bytes);
    r->fresh_counters[KEYS_USED] = SOREN_KEY_ALIGN;
    int sms = 0, per_sm = 0;
    CUDA_TRY(r, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, r->opt->device));
    CUDA_TRY(r, cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor,
                                       r->opt->device));
    r->max_threads = (uint64_t)sms * (uint64_t)per_sm;
    ALLOC(r, r->resume, r->max_threads * sizeof(soren_gpu_resume), "the resume points");
    /* Monitoring's registers, here with the rest of the setup so that the
     * monitor phase times only the sample. */
    ALLOC(r, r->sketch, SOREN_SKETCH_REGISTERS * sizeof(unsigned int), "the key sketch");
    CUDA_TRY(r, cudaMemsetAsync(r->sketch, 0, SOREN_SKETCH_REGISTERS * sizeof(unsigned int),
                                r->stream));
    return SOREN_OK;
}

/* Sets the counters as a run starts them (from pinned memory that never
 * changes: the copy need not wait). */
soren_status counters_reset(gpu_run *r)
{
    if (r->counters_fresh) { /* a run in one wait left them so */
        r->counters_fresh = false;
        return SOREN_OK;
    }
    CUDA_TRY(r, cudaMemcpyAsync(r->counters, r->fresh_counters,
                                COUNTER_COUNT * sizeof(unsigned long long),
                                cudaMemcpyHostToDevice, r->stream));
    return SOREN_OK;
}

/* Grows what this run's inputs need beyond what earlier runs had: the
 * input buffer (host inputs; largest: the most bytes of one) and the
 * record index (records: the most records of one), which split_lines
 * sizes for lines input once it has counted them. */
soren_status session_inputs(gpu_run *r, uint64_t largest, uint64_t records)
{
    const soren_stage_spec *s = r->spec;
    if (s->input_format != SOREN_INPUT_INDEX && largest > r->input_capacity) {
        dev_free(r, r->input);
        r->input = NULL;
        r->input_capacity = 0;
        /* padded to 16 bytes: the splitter reads whole uint4s */
        ALLOC(r, r->input, (largest + 15) & ~15ull, "the input");
        r->input_capacity = largest;
    }
    return s->input_format == SOREN_INPUT_LINES ? SOREN_OK : ensure_records(r, records);
}

/* The entries of a hash or block launch's per-block table: block's holds
 * its few keys, hash's caches the frequent short keys of many, so that they
 * fold in shared memory instead of waiting on the global table (1.8x on
 * wordcount's Zipf text: bench/results/block-tables-*.md).  Both take the
 * largest size by default: a table sized to a few keys (64 entries for a
 * rare grep) was no faster, and made k-means 2x slower, its more resident
 * blocks flushing the same 24 keys into the global table.  Plugins built
 * before ABI 1.4 have a fixed block table and none for hash. */
uint32_t block_table_entries(gpu_run *r)
{
    const soren_gpu_options *o = r->opt;
    if (r->spec->combine == SOREN_COMBINE_NONE)
        return 0; /* grouping for a reduce: nothing to fold */
    if (r->spec->code->gpu->abi_minor < 4)
        return r->variant == SOREN_VARIANT_BLOCK ? SOREN_GPU_BLOCK_SLOTS : 0;
    if (o->block_slots == SOREN_GPU_NO_BLOCK_TABLE)
        return 0; /* straight into the global table, block's launch too */
    uint64_t want = o->block_slots ? o->block_slots : SOREN_GPU_BLOCK_SLOTS;
    return (uint32_t)next_pow2(want < SOREN_GPU_BLOCK_SLOTS ? want : SOREN_GPU_BLOCK_SLOTS);
}

/* Sizes the table, key space and pair space from the options (initial
 * sizes: they grow on overflow) or the projection, and allocates them. */
soren_status allocate_regions(gpu_run *r)
{
    const soren_stage_spec *s = r->spec;
    const soren_gpu_options *o = r->opt;
    const soren_projection *p = &r->x->projection;
    const soren_metrics *m = &r->x->metrics;
    switch (r->variant) {
    case SOREN_VARIANT_DENSE: {
        /* No hashing: slot i holds key i, whose bytes the host stores. */
        uint64_t k = s->key_count, vs = s->value_size;
        r->slot_count = k;
        r->keys_capacity = 4 + 8 * k;
        ALLOC(r, r->slots, k * 8, "the dense array");
        ALLOC(r, r->slot_values, k * vs, "the dense array's values");
        soren_status st = empty_slots(r);
        if (st != SOREN_OK)
            return st;
        ALLOC(r, r->keys, r->keys_capacity, "the key space");
        dense_keys_kernel<<<GRID(r)>>>(r->keys, k);
        CUDA_TRY(r, cudaGetLastError());
        /* the values, then a presence byte per key (soren/engine/map.cuh) */
        uint64_t shared = ((k * vs + 7) & ~7ull) + ((k + 7) & ~7ull);
        r->dense_shared = shared <= (48u << 10) ? (uint32_t)shared : 0;
        return SOREN_OK;
    }
    case SOREN_VARIANT_HASH:
    case SOREN_VARIANT_BLOCK: {
        r->block_slots = block_table_entries(r);
        r->x->block_slots = r->block_slots;
        uint64_t slots = next_pow2(o->table_slots ? o->table_slots : p->table_slots);
        r->keys_capacity = o->key_bytes ? o->key_bytes : p->key_space;
        if (o->device_memory && s->combine != SOREN_COMBINE_NONE) {
            /* Under a budget the projection may not have it all: a quarter
             * of the budget each for the table and the key space, which
             * then fold part of the key space (narrowing_due) rather than
             * grow past half of it. */
            const uint64_t quarter = o->device_memory / 4;
            while (slots > 1024 && table_bytes(r, slots) > quarter)
                slots /= 2;
            if (r->keys_capacity > quarter)
                r->keys_capacity = quarter;
        }
        if (slots > TABLE_SLOTS_MAX)
            slots = TABLE_SLOTS_MAX;
        r->slot_count = slots < 2 ? 2 : slots;
        r->slot_limit = r->slot_count - r->slot_count / 4;
        soren_status st = alloc_table(r, r->slot_count, &r->slots, &r->slot_values);
        if (st != SOREN_OK)
            return st;
        if (s->combine == SOREN_COMBINE_NONE) {
            /* grouping for a reduce: the pairs refer to the table's keys */
            r->pair_capacity = o->pair_slots ? o->pair_slots : p->pair_slots;
            ALLOC(r, r->pair_keys, r->pair_capacity * sizeof(uint32_t), "the pair keys");
            ALLOC(r, r->pair_values, r->pair_capacity * s->value_size, "the pair values");
        }
        break;
    }
    default: {
        /* Each pair keeps its own copy of its key. */
        r->pair_capacity = o->pair_slots ? o->pair_slots : p->pair_slots;
        uint64_t per_pair = m->ran && m->pairs ? (m->key_bytes + m->pairs - 1) / m->pairs
                                                 : soren__key_footprint(8);
        r->keys_capacity = o->key_bytes ? o->key_bytes
                                        : r->pair_capacity * per_pair + (1 << 20);
        if (r->variant == SOREN_VARIANT_SORT) {
            /* as many as the record index holds; ensure_records grows both */
            ALLOC(r, r->record_pairs, (r->record_capacity + 1) * 8, "the per-record pair counts");
            ALLOC(r, r->record_key_bytes, (r->record_capacity + 1) * 8,
                  "the per-record key sizes");
        }
        ALLOC(r, r->pair_keys, r->pair_capacity * sizeof(uint32_t), "the pair keys");
        ALLOC(r, r->pair_values, r->pair_capacity * s->value_size, "the pair values");
    }
    }
    if (r->keys_capacity > KEY_SPACE_MAX)
        r->keys_capacity = KEY_SPACE_MAX;
    if (r->keys_capacity < 64)
        r->keys_capacity = 64;
    /* A whole number of key units: after an overflow the bytes used are cut
     * back to the capacity, and the next key must start aligned. */
    r->keys_capacity = (r->keys_capacity + SOREN_KEY_ALIGN - 1) & ~(uint64_t)(SOREN_KEY_ALIGN - 1);
    ALLOC(r, r->keys, r->keys_capacity, "the key space");
    return SOREN_OK;
}

/* The distinct keys that the sketch's ranks, a word each as the device
 * keeps them, estimate. */
uint64_t estimate_of_ranks(const unsigned int *ranks)
{
    uint8_t registers[SOREN_SKETCH_REGISTERS];
    for (unsigned i = 0; i < SOREN_SKETCH_REGISTERS; i++)
        registers[i] = (uint8_t)ranks[i];
    return soren_sketch_estimate(registers);
}

/* Initial monitoring over the first input, on the device already: map a
 * sample of its records without storing pairs, and fill the metrics for the
 * whole input (other inputs are assumed to look like the first). */
soren_status monitor(gpu_run *r, uint64_t size, uint64_t records, uint64_t total)
{
    soren_metrics *m = &r->x->metrics;
    m->fraction = r->opt->sample;
    m->total_bytes = total;
    m->total_records = size ? (uint64_t)((double)records * ((double)total / (double)size)) : 0;
    /* Index keys with a combine run dense, sized by the key count: the
     * manifest decides all that the metrics would, so there is nothing to
     * sample (unless there are more keys than dense numbers). */
    soren_variant v = r->opt->variant;
    bool dense = r->spec->key_type == SOREN_TYPE_INDEX && r->spec->combine != SOREN_COMBINE_NONE &&
                 r->spec->key_count <= SOREN_DENSE_KEYS_MAX &&
                 (v == SOREN_VARIANT_AUTO || v == SOREN_VARIANT_DENSE);
    const uint64_t sample = dense ? 0 : soren_sample_size(records, size, r->opt->sample);
    if (sample == 0)
        return SOREN_OK;
    /* First a sample half as large, spread over the same input, for its
     * distinct keys alone: how fast they grow (soren_project). */
    unsigned int ranks[SOREN_SKETCH_REGISTERS];
    m->half_distinct_keys = 0;
    r->sample_count = sample / 2;
    if (r->sample_count) {
        soren_status st = launch_map(r, SOREN_GPU_MONITOR, size, records);
        if (st != SOREN_OK)
            return st;
        CUDA_TRY(r, cudaMemcpyAsync(ranks, r->sketch, sizeof ranks, cudaMemcpyDeviceToHost,
                                    r->stream));
        CUDA_TRY(r, cudaMemsetAsync(r->sketch, 0, sizeof ranks, r->stream));
        if ((st = counters_reset(r)) != SOREN_OK)
            return st;
        WAIT_STREAM(r);
        m->half_distinct_keys = estimate_of_ranks(ranks);
    }
    r->sample_count = sample;
    soren_status st = launch_map(r, SOREN_GPU_MONITOR, size, records);
    if (st != SOREN_OK)
        return st;
    unsigned long long c[COUNTER_COUNT];
    CUDA_TRY(r, cudaMemcpyAsync(c, r->counters, sizeof c, cudaMemcpyDeviceToHost, r->stream));
    CUDA_TRY(r, cudaMemcpyAsync(ranks, r->sketch, sizeof ranks, cudaMemcpyDeviceToHost,
                                r->stream));
    WAIT_STREAM(r);
    m->ran = 1;
    m->sampled_records = r->sample_count;
    m->sampled_bytes = c[SAMPLE_BYTES];
    m->pairs = c[SAMPLE_PAIRS];
    m->key_bytes = c[SAMPLE_KEY_BYTES];
    m->value_bytes = m->pairs * r->spec->value_size;
    m->distinct_keys = estimate_of_ranks(ranks);
    return SOREN_OK;
}

/* The variant: as forced, or chosen from the metrics; then the projection. */
soren_status configure(gpu_run *r)
{
    const soren_stage_spec *s = r->spec;
    soren_explain *x = r->x;
    if (r->opt->variant == SOREN_VARIANT_AUTO) {
        x->rule = soren_choose(s, &x->metrics, r->opt->small_keys, 1, &r->variant);
    } else {
        r->variant = r->opt->variant;
        x->rule = "forced with --engine";
    }
    /* Without a combine, hash can only group values for a reduce function;
     * block and dense have nothing to fold. */
    bool grouping = s->reduce == SOREN_REDUCE_FUNCTION;
    if (s->combine == SOREN_COMBINE_NONE &&
        ((r->variant == SOREN_VARIANT_HASH && !grouping) || r->variant == SOREN_VARIANT_BLOCK ||
         r->variant == SOREN_VARIANT_DENSE))
        return soren_error_set(r->err, SOREN_EUSAGE, "--engine %s: %s has no combine to fold "
                               "values with; use %s", soren_variant_name(r->variant),
                               s->job_name, grouping ? "hash, direct or sort" : "direct or sort");
    if (r->variant == SOREN_VARIANT_DENSE && s->key_type != SOREN_TYPE_INDEX)
        return soren_error_set(r->err, SOREN_EUSAGE, "--engine dense: %s's keys are not index "
                               "keys (the manifest's key.type index with a count)", s->job_name);
    if (r->variant == SOREN_VARIANT_DENSE && s->key_count > SOREN_DENSE_KEYS_MAX)
        return soren_error_set(r->err, SOREN_EUSAGE, "--engine dense: %s has %llu index keys, "
                               "more than the dense variant numbers (%llu: its key refs are 32 "
                               "bits); use hash or block", s->job_name,
                               (unsigned long long)s->key_count,
                               (unsigned long long)SOREN_DENSE_KEYS_MAX);
    x->variant = r->variant;
    soren_project(s, &x->metrics, &x->projection);
    return SOREN_OK;
}



/* The indices of the table's used slots, in slot order, into used (room
 * for every slot); their count goes to the counters' SELECTED. */
soren_status select_used(gpu_run *r, uint64_t *used)
{
    thrust::counting_iterator<uint64_t> slots(0);
    CUB_RUN(r, cub::DeviceSelect::If, slots, used, r->counters + SELECTED, (int64_t)r->slot_count,
            slot_used{r->slots});
    return SOREN_OK;
}

/* The combine's identity value on the device, which emptied slots get. */
soren_status ensure_identity(gpu_run *r)
{
    if (r->identity)
        return SOREN_OK;
    ALLOC(r, r->identity, r->spec->value_size, "the identity value");
    CUDA_TRY(r, r->gpu->fill_identity(r->identity, 1, r->stream));
    return SOREN_OK;
}

/* Hash, block, dense: the used slots, compacted by a parallel select, are
 * the list. */
soren_status merge_table(gpu_run *r)
{
    uint32_t vs = (uint32_t)r->spec->value_size;
    uint64_t *used = NULL;
    ALLOC(r, used, r->slot_count * sizeof(uint64_t), "the list of used slots");
    soren_status st = select_used(r, used);
    unsigned long long c[COUNTER_COUNT];
    if (st == SOREN_OK)
        st = read_counters(r, c);
    /* a dense launch's status, read here (launch_map) */
    if (st == SOREN_OK && (c[STATUS] & SOREN_GPU_BAD_KEY))
        st = bad_key_error(r, c[BAD_KEY]);
    uint64_t n = st == SOREN_OK ? c[SELECTED] : 0;
    r->n = r->last_keys = n;
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&r->refs, n * 4, "the merged keys");
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&r->values, n * vs, "the merged values");
    if (st == SOREN_OK)
        st = ensure_identity(r);
    if (st == SOREN_OK) {
        gather_slots_kernel<<<GRID(r)>>>(used, n, r->slots, r->slot_values, r->identity, vs,
                                         r->refs, r->values);
        cudaError_t rc = cudaGetLastError();
        if (rc != cudaSuccess)
            st = cuda_fail(r, rc, "gather_slots_kernel", __LINE__);
    }
    dev_free(r, used);
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

/* Stable radix sort of perm by the low end_bit bits of bits (filled for the
 * current perm). */
soren_status radix_perm(gpu_run *r, int end_bit)
{
    cub::DoubleBuffer<uint64_t> keys(r->bits, r->bits_alt);
    cub::DoubleBuffer<uint32_t> perm(r->perm, r->perm_alt);
    CUB_RUN(r, cub::DeviceRadixSort::SortPairs, keys, perm, (int64_t)r->n, 0, end_bit);
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
    return radix_perm(r, 64);
}

soren_status sort_by_value(gpu_run *r, bool descending)
{
    value_bits_kernel<<<GRID(r)>>>(r->perm, r->n, r->values, (uint32_t)r->spec->value_size,
                                   r->spec->value_type, descending, r->bits);
    CUDA_TRY(r, cudaGetLastError());
    return radix_perm(r, 64);
}

/* The pair space becomes the list (its keys stay in the key space). */
soren_status take_pairs(gpu_run *r)
{
    unsigned long long c[COUNTER_COUNT];
    soren_status st = read_counters(r, c);
    if (st != SOREN_OK)
        return st;
    r->n = c[PAIRS_USED];
    r->refs = r->pair_keys;
    r->values = r->pair_values;
    r->pair_keys = NULL;
    r->pair_values = NULL;
    return SOREN_OK;
}

/* The order buffers are sized for the list: drop them when it changes. */
void free_order_buffers(gpu_run *r)
{
    uint64_t **bits[] = {&r->bits, &r->bits_alt};
    uint32_t **perms[] = {&r->perm, &r->perm_alt};
    for (int i = 0; i < 2; i++) {
        dev_free(r, *bits[i]);
        *bits[i] = NULL;
        dev_free(r, *perms[i]);
        *perms[i] = NULL;
    }
}

/* Sorted list entry j starts a run of equal keys: bits[j] = 1; bits_alt
 * gets their running count, and *runs the number of runs. */
soren_status find_runs(gpu_run *r, bool by_ref, uint64_t *runs)
{
    run_heads_kernel<<<GRID(r)>>>(r->perm, r->n, r->refs, r->keys, by_ref, r->bits);
    CUDA_TRY(r, cudaGetLastError());
    CUB_RUN(r, cub::DeviceScan::InclusiveSum, r->bits, r->bits_alt, (int64_t)r->n);
    CUDA_TRY(r, cudaMemcpyAsync(runs, r->bits_alt + r->n - 1, 8, cudaMemcpyDeviceToHost,
                                r->stream));
    WAIT_STREAM(r);
    return SOREN_OK;
}

/* Direct and sort: every pair is in the pair space.  With a combine, sort
 * them by key and fold each run of equal keys into one accumulator. */
soren_status merge_pairs(gpu_run *r)
{
    soren_status st = take_pairs(r);
    if (st != SOREN_OK || r->spec->combine == SOREN_COMBINE_NONE || r->n == 0)
        return st;
    st = alloc_order_buffers(r);
    if (st == SOREN_OK)
        st = sort_by_key(r);
    uint64_t runs = 0;
    if (st == SOREN_OK)
        st = find_runs(r, false, &runs);
    if (st != SOREN_OK)
        return st;
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
    dev_free(r, target);
    if (st != SOREN_OK) {
        dev_free(r, run_refs);
        dev_free(r, run_values);
        return st;
    }
    /* The runs, already in key order, are the list now. */
    dev_free(r, r->refs);
    dev_free(r, r->values);
    r->refs = run_refs;
    r->values = run_values;
    r->n = runs;
    iota_kernel<<<GRID(r)>>>(r->perm, r->n);
    CUDA_TRY(r, cudaGetLastError());
    return SOREN_OK;
}

/* Stable sort of perm by the hash table's key refs. */
soren_status sort_by_ref(gpu_run *r)
{
    ref_bits_kernel<<<GRID(r)>>>(r->perm, r->n, r->refs, r->bits);
    CUDA_TRY(r, cudaGetLastError());
    return radix_perm(r, 32);
}

/* A reduce without a combine: the pairs, grouped by key, become groups
 * (group_refs, group_start, group_values; r->n counts them).  Within a
 * group the values are in the CPU engine's order: sort by value first, then
 * stably by key.  The hash variant's pairs carry the table's refs, which
 * group as they are; the others compare key bytes. */
soren_status group_pairs(gpu_run *r)
{
    soren_status st = take_pairs(r);
    if (st != SOREN_OK || r->n == 0)
        return st;
    const bool by_ref = r->variant == SOREN_VARIANT_HASH;
    const uint32_t vs = (uint32_t)r->spec->value_size;
    uint64_t groups = 0, pairs = r->n;
    if ((st = alloc_order_buffers(r)) == SOREN_OK && (st = sort_by_value(r, false)) == SOREN_OK)
        st = by_ref ? sort_by_ref(r) : sort_by_key(r);
    if (st == SOREN_OK)
        st = find_runs(r, by_ref, &groups);
    if (st != SOREN_OK)
        return st;
    ALLOC(r, r->group_refs, groups * 4, "the keys of the groups");
    ALLOC(r, r->group_start, (groups + 1) * 8, "the starts of the groups");
    ALLOC(r, r->group_values, pairs * vs, "the grouped values");
    groups_kernel<<<GRID(r)>>>(r->perm, pairs, r->bits_alt, r->bits, r->refs, r->values, vs,
                               r->group_refs, r->group_start, r->group_values);
    CUDA_TRY(r, cudaGetLastError());
    CUDA_TRY(r, cudaMemcpyAsync(r->group_start + groups, &pairs, 8, cudaMemcpyHostToDevice,
                                r->stream));
    if (pairs > UINT32_MAX) {
        unsigned long long largest = 0;
        CUDA_TRY(r, cudaMemsetAsync(r->counters + SELECTED, 0, 8, r->stream));
        largest_group_kernel<<<GRID(r)>>>(r->group_start, groups, r->counters + SELECTED);
        CUDA_TRY(r, cudaGetLastError());
        CUDA_TRY(r, cudaMemcpyAsync(&largest, r->counters + SELECTED, 8,
                                    cudaMemcpyDeviceToHost, r->stream));
        WAIT_STREAM(r);
        if (largest > UINT32_MAX)
            return soren_error_set(r->err, SOREN_EJOB, "%s: a key has %llu values; reduce "
                                   "takes at most %u at a time", r->spec->job_name, largest,
                                   UINT32_MAX);
    }
    /* The stream orders the frees after the gather. */
    dev_free(r, r->refs);
    dev_free(r, r->values);
    r->refs = NULL;
    r->values = NULL;
    free_order_buffers(r);
    r->n = groups;
    return SOREN_OK;
}

/* Runs the stage's reduce over the groups (after a combine, each list
 * entry is a group of one value) into a fresh pair space, which becomes the
 * list.  The reduce launch grows and resumes on overflow as map does. */
soren_status reduce_list(gpu_run *r)
{
    uint64_t groups = r->n;
    if (!r->group_refs) {
        r->group_refs = r->refs;
        r->group_values = r->values;
        r->refs = NULL;
        r->values = NULL;
    }
    free_order_buffers(r);
    r->emitter = "reduce";
    dev_free(r, r->pair_keys);
    dev_free(r, r->pair_values);
    r->pair_keys = NULL;
    r->pair_values = NULL;
    r->map_pair_capacity = r->pair_capacity;
    r->pair_capacity = r->opt->pair_slots ? r->opt->pair_slots : groups + groups / 4 + 1024;
    ALLOC(r, r->pair_keys, r->pair_capacity * sizeof(uint32_t), "the pair keys");
    ALLOC(r, r->pair_values, r->pair_capacity * r->spec->value_size, "the pair values");
    CUDA_TRY(r, cudaMemsetAsync(r->counters + PAIRS_USED, 0, 8, r->stream));
    soren_status st = launch_map(r, SOREN_GPU_REDUCE, 0, groups);
    if (st != SOREN_OK)
        return st;
    void **spent[] = {(void **)&r->group_refs, (void **)&r->group_start,
                      (void **)&r->group_values};
    for (int i = 0; i < 3; i++) {
        dev_free(r, *spent[i]);
        *spent[i] = NULL;
    }
    return take_pairs(r);
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
    /* A combine leaves one pair per key; a reduce may emit any pairs. */
    bool unique_keys = r->spec->combine != SOREN_COMBINE_NONE &&
                       r->spec->reduce != SOREN_REDUCE_FUNCTION;
    switch (r->spec->order) {
    case SOREN_ORDER_NONE:
        break;
    case SOREN_ORDER_KEY:
        /* Pairs may share a key: ties by value, so sort by value first and
         * rely on the key sort being stable. */
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

/* The last run's packed result, spent. */
void free_packed(gpu_run *r)
{
    void **packed[] = {(void **)&r->packed_keys, (void **)&r->packed_values,
                       (void **)&r->packed_offsets};
    for (int i = 0; i < 3; i++) {
        dev_free(r, *packed[i]);
        *packed[i] = NULL;
    }
    r->packed_n = r->packed_key_bytes = 0;
}

/* Packs the ordered list on the device as a soren_result lays it out (keys
 * back to back at their offsets, values in order), into packed_*, which a
 * session keeps until its next run. */
soren_status pack_result(gpu_run *r)
{
    free_packed(r);
    uint64_t n = r->n;
    uint32_t vs = (uint32_t)r->spec->value_size;
    r->packed_n = n;
    if (n == 0)
        return SOREN_OK;
    ALLOC(r, r->packed_offsets, (n + 1) * 8, "the result's key offsets");
    /* Typed keys have one size: their offsets need no scan, and the host
     * knows their total without asking the device. */
    const uint32_t key_size = (uint32_t)soren_type_size((soren_type)r->spec->key_type);
    if (key_size) {
        r->packed_key_bytes = n * key_size;
    } else {
        key_sizes_kernel<<<GRID(r)>>>(r->perm, n, r->refs, r->keys, r->bits_alt);
        CUDA_TRY(r, cudaGetLastError());
        CUB_RUN(r, cub::DeviceScan::ExclusiveSum, r->bits_alt, r->packed_offsets, (int64_t)n);
        uint64_t last_offset = 0, last_size = 0;
        CUDA_TRY(r, cudaMemcpyAsync(&last_offset, r->packed_offsets + n - 1, 8,
                                    cudaMemcpyDeviceToHost, r->stream));
        CUDA_TRY(r, cudaMemcpyAsync(&last_size, r->bits_alt + n - 1, 8, cudaMemcpyDeviceToHost,
                                    r->stream));
        WAIT_STREAM(r);
        r->packed_key_bytes = last_offset + last_size;
        CUDA_TRY(r, cudaMemcpyAsync(r->packed_offsets + n, &r->packed_key_bytes, 8,
                                    cudaMemcpyHostToDevice, r->stream));
    }
    ALLOC(r, r->packed_keys, r->packed_key_bytes, "the result's keys");
    ALLOC(r, r->packed_values, n * vs, "the result's values");
    pack_kernel<<<GRID(r)>>>(r->perm, n, r->refs, r->keys, key_size, r->packed_offsets,
                             r->values, vs, r->packed_keys, r->packed_values);
    CUDA_TRY(r, cudaGetLastError());
    return SOREN_OK;
}

/* out takes n pairs from host memory: keys back to back (key_total bytes)
 * at offsets (n + 1 of them; NULL: keys of key_size bytes each), and the
 * values. */
soren_status take_host_pairs(gpu_run *r, soren_result *out, uint64_t n, const uint8_t *keys,
                             uint64_t key_total, const uint64_t *offsets, uint32_t key_size,
                             const uint8_t *values)
{
    const uint64_t vs = r->spec->value_size;
    soren_result_destroy(out);
    if (n == 0)
        return SOREN_OK;
    uint8_t *k = (uint8_t *)malloc(key_total ? key_total : 1), *v = (uint8_t *)malloc(n * vs);
    uint64_t *o = (uint64_t *)malloc((n + 1) * 8);
    if (!k || !v || !o) {
        free(k);
        free(v);
        free(o);
        return soren_error_set(r->err, SOREN_ENOMEM, "%s: out of host memory for %llu results",
                               r->spec->job_name, (unsigned long long)n);
    }
    memcpy(k, keys, key_total);
    memcpy(v, values, n * vs);
    for (uint64_t i = 0; i <= n; i++)
        o[i] = offsets ? offsets[i] : i * key_size;
    out->count = n;
    out->key_bytes = k;
    out->key_offset = o;
    out->values = v;
    return SOREN_OK;
}

/* Copies the packed result into out's host arrays, and records mark 8 (the
 * end of the download) once the copies are issued.  A small result comes
 * through the pinned readback buffer, so that the host waits once, on the
 * mark. */
soren_status copy_result(gpu_run *r, soren_result *out)
{
    uint64_t n = r->packed_n, key_total = r->packed_key_bytes;
    uint32_t vs = (uint32_t)r->spec->value_size;
    uint64_t sizes[3] = {key_total, n ? (n + 1) * 8 : 0, n * vs};
    const void *from[3] = {r->packed_keys, r->packed_offsets, r->packed_values};
    if (sizes[0] + sizes[1] + sizes[2] <= READBACK_BYTES) {
        for (uint64_t i = 0, at = 0; i < 3 && n; at += sizes[i], i++)
            CUDA_TRY(r, cudaMemcpyAsync(r->readback + at, from[i], sizes[i],
                                        cudaMemcpyDeviceToHost, r->stream));
        CUDA_TRY(r, cudaEventRecord(r->mark[8], r->stream));
        soren_status st = wait_mark(r, 8);
        if (st != SOREN_OK)
            return st;
        const uint8_t *at = r->readback;
        return take_host_pairs(r, out, n, at, key_total, (const uint64_t *)(at + sizes[0]), 0,
                               at + sizes[0] + sizes[1]);
    }
    /* Too large for the readback buffer: straight into the result's arrays,
     * whose copies dwarf the waits. */
    void *to[3] = {NULL, NULL, NULL};
    soren_status st = SOREN_OK;
    for (int i = 0; i < 3; i++)
        if (!(to[i] = malloc(sizes[i] ? sizes[i] : 1)))
            st = soren_error_set(r->err, SOREN_ENOMEM, "%s: out of host memory for %llu "
                                 "results", r->spec->job_name, (unsigned long long)n);
    cudaError_t rc = cudaSuccess;
    for (int i = 0; i < 3 && st == SOREN_OK && rc == cudaSuccess; i++)
        rc = cudaMemcpyAsync(to[i], from[i], sizes[i], cudaMemcpyDeviceToHost, r->stream);
    if (st == SOREN_OK && rc == cudaSuccess)
        rc = cudaEventRecord(r->mark[8], r->stream);
    if (st == SOREN_OK && rc != cudaSuccess)
        st = cuda_fail(r, rc, "copying the result back", __LINE__);
    if (st == SOREN_OK)
        st = wait_mark(r, 8);
    if (st != SOREN_OK) {
        for (int i = 0; i < 3; i++)
            free(to[i]);
        return st;
    }
    soren_result_destroy(out);
    out->count = n;
    out->key_bytes = (uint8_t *)to[0];
    out->key_offset = (uint64_t *)to[1];
    out->values = (uint8_t *)to[2];
    return SOREN_OK;
}

/* The list and its order buffers, spent once the result is packed. */
void release_list(gpu_run *r)
{
    void **spent[] = {(void **)&r->refs,        (void **)&r->values,
                      (void **)&r->group_refs,  (void **)&r->group_start,
                      (void **)&r->group_values};
    for (size_t i = 0; i < sizeof spent / sizeof spent[0]; i++) {
        dev_free(r, *spent[i]);
        *spent[i] = NULL;
    }
    free_order_buffers(r);
    r->n = 0;
}

/* A later run of a session: the first run's variant and the regions as
 * they grew, emptied (the counters, the table or dense array back to empty
 * slots and the identity), and the pair space again where the last run
 * handed it to its list; the first run's sample and sizes reported. */
soren_status session_reset(gpu_run *r)
{
    /* merge_table emptied the slots it took; grouping leaves its slots
     * claimed (a run that failed left its session unusable) */
    if (r->slots && groups_pairs(r->spec)) {
        soren_status st = empty_slots(r);
        if (st != SOREN_OK)
            return st;
    }
    bool pairs = r->variant == SOREN_VARIANT_DIRECT || r->variant == SOREN_VARIANT_SORT ||
                 (r->variant == SOREN_VARIANT_HASH && r->spec->combine == SOREN_COMBINE_NONE);
    if (pairs && !r->pair_keys) {
        if (r->map_pair_capacity)
            r->pair_capacity = r->map_pair_capacity;
        ALLOC(r, r->pair_keys, r->pair_capacity * sizeof(uint32_t), "the pair keys");
        ALLOC(r, r->pair_values, r->pair_capacity * r->spec->value_size, "the pair values");
    }
    soren_explain *x = r->x;
    x->metrics = r->first_metrics;
    x->projection = r->first_projection;
    x->variant = r->variant;
    x->rule = r->first_rule;
    x->block_slots = r->block_slots;
    return SOREN_OK;
}

/* Marks the start of a phase on the stream (for its time) and names it for
 * errors and the progress line (where the host waits on the device). */
soren_status mark(gpu_run *r, int i, const char *phase, const char *progress_phase)
{
    r->phase = phase;
    if (progress_phase)
        soren_progress_phase(r->opt->progress, progress_phase, 0);
    CUDA_TRY(r, cudaEventRecord(r->mark[i], r->stream));
    return SOREN_OK;
}

float elapsed(gpu_run *r, int from, int to)
{
    return elapsed_between(r->mark[from], r->mark[to]);
}

/* Adds input i's phases to the run's times, its marks 0 to 4 done (piped,
 * the copy engine's time, beside split and map's). */
void add_input_times(gpu_run *r, bool piped, size_t i)
{
    soren_phase_times *ms = &r->x->ms;
    ms->upload += piped ? elapsed_between(r->upload_began[i % 2], r->uploaded[i % 2])
                        : elapsed(r, 0, 1);
    ms->split += elapsed(r, 1, 2);
    ms->monitor += elapsed(r, 2, 3);
    ms->map += elapsed(r, 3, 4);
}

/* Maps one input with the chosen variant. */
soren_status map_input(gpu_run *r, uint64_t size, uint64_t records)
{
    switch (r->variant) {
    case SOREN_VARIANT_HASH:
        return launch_map(r, r->spec->combine == SOREN_COMBINE_NONE ? SOREN_GPU_GROUP
                                                                    : SOREN_GPU_HASH,
                          size, records);
    case SOREN_VARIANT_BLOCK: return launch_map(r, SOREN_GPU_BLOCK, size, records);
    case SOREN_VARIANT_DENSE: return launch_map(r, SOREN_GPU_DENSE, size, records);
    case SOREN_VARIANT_DIRECT: return launch_map(r, SOREN_GPU_DIRECT, size, records);
    default: return map_sort(r, size, records);
    }
}

/* Merges the table or the pairs, reduces, orders, packs and copies the
 * result into out (marks 4 to 8): each step as large as the list, whose
 * size the host reads. */
soren_status result_after_map(gpu_run *r, soren_result *out)
{
    const soren_stage_spec *s = r->spec;
    soren_status st = mark(r, 4, "merge", "merge");
    const bool reducing = s->reduce == SOREN_REDUCE_FUNCTION;
    bool key_sorted = false;
    if (st == SOREN_OK) {
        if (groups_pairs(s)) {
            st = group_pairs(r);
        } else if (r->slots) {
            st = merge_table(r);
            /* dense: slot i is key i, and the select keeps the slots' order */
            key_sorted = r->variant == SOREN_VARIANT_DENSE;
        } else {
            st = merge_pairs(r);
            key_sorted = s->combine != SOREN_COMBINE_NONE;
        }
    }
    if (st == SOREN_OK && (st = mark(r, 5, "reduce", reducing ? "reduce" : NULL)) == SOREN_OK &&
        reducing && r->n) {
        st = reduce_list(r);
        key_sorted = false;
    }
    if (st == SOREN_OK && (st = mark(r, 6, "ordering", "order")) == SOREN_OK)
        st = order_list(r, key_sorted);
    if (st == SOREN_OK && (st = mark(r, 7, "copying the result back", "download")) == SOREN_OK)
        st = pack_result(r);
    if (st == SOREN_OK)
        st = copy_result(r, out); /* ends with mark 8: every mark is done */
    return st;
}

static_assert(COUNTER_COUNT * 8 + SMALL_KEYS * 16 <= READBACK_BYTES,
              "a re-run in one wait comes back through the readback buffer");

/* Whether this run waits for the GPU once (waits are most of a re-run's
 * overhead beyond its kernels): a later run of a table variant that folds
 * values (hash, block, dense) into typed keys, with no reduce function,
 * whose run before had at most SMALL_KEYS keys.  Its last map launch goes
 * unread, and one block does the rest (result_in_one_wait). */
bool one_wait(const gpu_run *r)
{
    const soren_stage_spec *s = r->spec;
    return r->runs > 0 && r->slots && s->combine != SOREN_COMBINE_NONE &&
           s->reduce != SOREN_REDUCE_FUNCTION && soren_type_size((soren_type)s->key_type) &&
           r->last_keys <= SMALL_KEYS && whole_key_space(r);
}

/* The merge, order, packing and copy of a re-run in one wait: one block
 * (small_result_kernel) queued behind the last map launch, unread, writes
 * the counters and the ordered pairs into the pinned readback buffer, and
 * the host waits once.  Where the launch stopped for room, or the table
 * held more than SMALL_KEYS keys, the table is as the launch left it:
 * *again says so (the launch resumed), and the caller takes the result the
 * usual way. */
soren_status result_in_one_wait(gpu_run *r, soren_result *out, bool *again)
{
    const soren_stage_spec *s = r->spec;
    const uint32_t vs = (uint32_t)s->value_size;
    const uint32_t key_size = (uint32_t)soren_type_size((soren_type)s->key_type);
    /* one kernel is the merge; the phases after it take no time */
    soren_status st = mark(r, 4, "merge", "merge");
    if (st == SOREN_OK)
        st = ensure_identity(r);
    free_packed(r);
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&r->packed_keys, SMALL_KEYS * key_size, "the result's keys");
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&r->packed_values, SMALL_KEYS * vs, "the result's values");
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&r->packed_offsets, (SMALL_KEYS + 1) * 8,
                       "the result's key offsets");
    if (st != SOREN_OK)
        return st;
    small_result_args a = {r->slots,
                           r->slot_values,
                           r->slot_count,
                           r->keys,
                           r->identity,
                           (uint32_t)s->key_type,
                           key_size,
                           (uint32_t)s->value_type,
                           vs,
                           (uint32_t)s->order,
                           r->counters,
                           r->packed_keys,
                           r->packed_values,
                           r->packed_offsets,
                           r->readback_on_device};
    small_result_kernel<<<1, SMALL_THREADS, 0, r->stream>>>(a);
    CUDA_TRY(r, cudaGetLastError());
    if ((st = mark(r, 5, "reduce", NULL)) != SOREN_OK ||
        (st = mark(r, 6, "ordering", "order")) != SOREN_OK ||
        (st = mark(r, 7, "copying the result back", "download")) != SOREN_OK ||
        (st = mark(r, 8, "copying the result back", NULL)) != SOREN_OK ||
        (st = wait_mark(r, 8)) != SOREN_OK)
        return st;
    unsigned long long c[COUNTER_COUNT];
    memcpy(c, r->readback, sizeof c);
    if (c[STATUS] & SOREN_GPU_BAD_KEY)
        return bad_key_error(r, c[BAD_KEY]);
    if ((c[STATUS] & SOREN_GPU_OVERFLOW) || c[SELECTED] > SMALL_KEYS) {
        *again = true;
        free_packed(r);
        return finish_launch(r, c);
    }
    const uint64_t n = c[SELECTED];
    r->last_keys = n;
    r->counters_fresh = true;
    r->packed_n = s->limit && n > s->limit ? s->limit : n;
    r->packed_key_bytes = r->packed_n * key_size;
    if (r->packed_n == 0)
        free_packed(r); /* as an empty list leaves them */
    const uint8_t *keys = r->readback + COUNTER_COUNT * 8;
    return take_host_pairs(r, out, r->packed_n, keys, r->packed_key_bytes, NULL, key_size,
                           keys + n * key_size);
}

/* Maps every input once (a pass) for the part of the key space in
 * r->key_first .. key_last, the first input sampled and the variant chosen
 * first where sampling; stops after the input whose map halved the part
 * (r->narrowed).  Inputs go up one after another, or pipelined (the next
 * on its way up while the map reads this one). */
soren_status map_pass(gpu_run *r, const soren_input *inputs, size_t input_count, bool piped,
                      bool sampling, uint64_t total)
{
    const soren_stage_spec *s = r->spec;
    r->narrowed = false;
    soren_status st = SOREN_OK;
    uploader up = {};
    for (size_t i = 0; st == SOREN_OK && i < input_count; i++) {
        const soren_input *in = &inputs[i];
        uint64_t records = records_at_most(s, in);
        soren_progress_phase(r->opt->progress, "upload", in->on_device ? 0 : data_bytes(s, in));
        if ((st = mark(r, 0, "upload", NULL)) == SOREN_OK)
            st = piped ? upload_next(r, &up, inputs, input_count, i) : upload_input(r, in);
        if (st == SOREN_OK && (st = mark(r, 1, "record splitting", "split")) == SOREN_OK &&
            s->input_format == SOREN_INPUT_LINES)
            st = split_lines(r, in->size, &records);
        const bool sampled = sampling && i == 0;
        if (st == SOREN_OK &&
            (st = mark(r, 2, "monitoring", sampled ? "monitor" : NULL)) == SOREN_OK && sampled)
            st = monitor(r, in->size, records, total);
        /* Choosing the variant and allocating its regions count as map's. */
        if (st == SOREN_OK && (st = mark(r, 3, "map", "map")) == SOREN_OK && sampled) {
            st = configure(r);
            if (st == SOREN_OK)
                st = allocate_regions(r);
        }
        r->leave_unread = i + 1 == input_count && one_wait(r);
        if (st == SOREN_OK)
            st = map_input(r, in->size, records);
        /* The next input reuses the marks: its times are read now.  The
         * last input's are read with the result, mark 4 then the merge's
         * start, so that the host need not wait between map and merge. */
        if (st == SOREN_OK && (i + 1 < input_count || r->narrowed) &&
            (st = mark(r, 4, "map", NULL)) == SOREN_OK && (st = wait_mark(r, 4)) == SOREN_OK)
            add_input_times(r, piped, i);
        if (r->narrowed)
            break;
    }
    if (up.running) /* a failed or stopped pass: the next input's copies must end first */
        pthread_join(up.thread, NULL);
    return st;
}

/* The result of a pass into part: in one wait where that serves, else the
 * usual way (which may halve the pass's part of the key space, when the
 * launch left unread had stopped for room); the times of the last input
 * and of the result phases added to the run's. */
soren_status pass_result(gpu_run *r, size_t input_count, bool piped, soren_result *part)
{
    const bool quick = r->leave_unread;
    r->leave_unread = false;
    bool again = false;
    soren_status st = SOREN_OK;
    if (quick)
        st = result_in_one_wait(r, part, &again);
    if (st == SOREN_OK && !r->narrowed && (!quick || again))
        st = result_after_map(r, part);
    if (st != SOREN_OK || r->narrowed)
        return st;
    soren_phase_times *ms = &r->x->ms;
    if (input_count)
        add_input_times(r, piped, input_count - 1);
    if (piped)
        r->x->chunks.inputs_ms = elapsed_between(r->began, r->mark[4]);
    ms->merge += elapsed(r, 4, 5);
    ms->reduce += elapsed(r, 5, 6);
    ms->sort += elapsed(r, 6, 7);
    ms->download += elapsed(r, 7, 8);
    release_list(r);
    return SOREN_OK;
}

/* Appends a finished part's pairs (emptying part) to the run's parts. */
soren_status add_part(gpu_run *r, soren_result *part)
{
    const size_t i = (size_t)r->x->key_parts - 1;
    if (i >= r->part_ends_cap) {
        size_t cap = r->part_ends_cap ? 2 * r->part_ends_cap : 16;
        uint64_t *ends = (uint64_t *)realloc(r->part_ends, cap * sizeof *ends);
        if (!ends)
            return soren_error_set(r->err, SOREN_ENOMEM, "out of memory keeping %zu parts of "
                                   "the key space", cap);
        r->part_ends = ends;
        r->part_ends_cap = cap;
    }
    soren_status st = soren_result_append_all(&r->parts, part, r->err);
    soren_result_destroy(part);
    r->part_ends[i] = r->parts.count;
    return st;
}

/* Every part's pairs, each part in the stage's order (and within its
 * limit), merged into out in that order: the host's share of ordering. */
soren_status join_parts(gpu_run *r, soren_result *out)
{
    const soren_stage_spec *s = r->spec;
    soren_progress_phase(r->opt->progress, "order", 0);
    auto began = std::chrono::steady_clock::now();
    soren_status st = soren_result_merge_runs(&r->parts, r->part_ends, (size_t)r->x->key_parts,
                                              s->order, s->limit, r->err);
    r->x->ms.sort += std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() -
                                                              began).count();
    if (st != SOREN_OK)
        return st;
    soren_result_destroy(out);
    *out = r->parts;
    soren_result_init(&r->parts, s);
    return SOREN_OK;
}

/* What a run that has its result keeps for the next run of its session. */
void session_done(gpu_run *r, bool first)
{
    if (first) {
        r->first_metrics = r->x->metrics;
        r->first_projection = r->x->projection;
        r->first_rule = r->x->rule;
    }
    r->runs++;
}

/* One run over the inputs (host inputs go up through the staging buffers;
 * a caller's device input is read where it is): the result is packed on
 * the device and copied into out.  The first run of a session sets up,
 * monitors, chooses and sizes; later runs reuse all of it.  A table that
 * would outgrow the device memory budget folds the key space a part at a
 * time, a pass over the inputs each (narrowing_due), and the parts'
 * ordered pairs are merged on the host (join_parts). */
soren_status session_run(gpu_run *r, const soren_input *inputs, size_t input_count,
                         const soren_params *params, const uint64_t *param_versions,
                         soren_result *out)
{
    const soren_stage_spec *s = r->spec;
    const bool first = r->runs == 0;
    uint64_t total = 0, largest = 0, most_records = 0;
    for (size_t i = 0; i < input_count; i++) {
        if (inputs[i].base && s->code->gpu->abi_minor < 3)
            return soren_error_set(r->err, SOREN_EPLUGIN, "%s: its device code predates plugin "
                                   "ABI 1.3 and cannot number the records of part of the whole "
                                   "input (an input after the first, a chunk under a device "
                                   "memory budget, an MPI rank's share); rebuild it with this Soren's SDK, or run it with "
                                   "--device cpu", s->job_name);
        total += inputs[i].size;
        uint64_t bytes = inputs[i].on_device ? 0 : data_bytes(s, &inputs[i]);
        uint64_t records = records_at_most(s, &inputs[i]);
        largest = bytes > largest ? bytes : largest;
        most_records = records > most_records ? records : most_records;
    }
    r->phase = "setup";
    r->emitter = "map";
    soren_result_destroy(&r->parts);
    soren_result_init(&r->parts, s);
    r->key_first = 0;
    r->key_last = KEY_LAST;
    r->x->key_parts = r->x->narrowings = r->x->waits = 0;
    /* a session may run from another thread than its first run's */
    int device = -1;
    CUDA_TRY(r, cudaGetDevice(&device));
    if (device != r->opt->device)
        CUDA_TRY(r, cudaSetDevice(r->opt->device));
    soren_status st = SOREN_OK;
    if (first) {
        CUDA_TRY(r, cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
        for (int i = 0; i < MARKS; i++)
            CUDA_TRY(r, cudaEventCreate(&r->mark[i]));
        int sms = 0;
        CUDA_TRY(r, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, r->opt->device));
        r->grid = sms * 8;
        st = session_start(r);
    }
    if (st == SOREN_OK)
        st = upload_params(r, params, param_versions);
    if (st == SOREN_OK)
        st = counters_reset(r);
    if (st == SOREN_OK)
        st = session_inputs(r, largest, most_records);
    if (st == SOREN_OK)
        st = alloc_staging(r, largest);
    if (st == SOREN_OK && !first)
        st = session_reset(r);
    const bool piped = pipelined(s, inputs, input_count);
    if (st == SOREN_OK && piped)
        st = pipeline_setup(r);
    soren_result part;
    soren_result_init(&part, s);
    for (bool sampling = first; st == SOREN_OK; sampling = false) {
        st = map_pass(r, inputs, input_count, piped, sampling, total);
        if (st == SOREN_OK && input_count == 0 && sampling)
            st = configure(r); /* no input: nothing to monitor, an empty result */
        if (st == SOREN_OK && input_count == 0 && sampling)
            st = allocate_regions(r);
        if (st == SOREN_OK && !r->narrowed)
            st = pass_result(r, input_count, piped, &part);
        if (st == SOREN_OK && r->narrowed) {
            st = empty_table(r);
            continue;
        }
        if (st != SOREN_OK)
            break;
        r->x->key_parts++;
        if (whole_key_space(r)) {
            soren_result_destroy(out);
            *out = part; /* the whole key space in one pass */
            session_done(r, first);
            return SOREN_OK;
        }
        if ((st = add_part(r, &part)) != SOREN_OK)
            break;
        if (r->key_last == KEY_LAST) {
            if ((st = join_parts(r, out)) == SOREN_OK)
                session_done(r, first);
            return st;
        }
        /* The next part as wide as this one, which fitted. */
        const uint64_t width = (uint64_t)r->key_last - r->key_first;
        r->key_first = r->key_last + 1;
        r->key_last = KEY_LAST - r->key_first > width ? (uint32_t)(r->key_first + width) : KEY_LAST;
        CUDA_TRY(r, restart_counters(r, SOREN_KEY_ALIGN, 0));
    }
    soren_result_destroy(&part);
    release_list(r);
    return st;
}

} /* namespace */

extern "C" const char *soren_gpu_unsupported(const soren_stage_spec *spec)
{
    if (spec->code->gpu == NULL)
        return "the plugin was built without device code";
    if (spec->code->gpu->abi_minor < 1)
        return "the plugin's device code predates plugin ABI 1.1 (monitoring, block and dense "
               "launches, resume after overflow); rebuild it with this Soren's SDK";
    if ((spec->reduce == SOREN_REDUCE_FUNCTION || spec->input_format == SOREN_INPUT_INDEX ||
         spec->input_format == SOREN_INPUT_PAIRS) &&
        spec->code->gpu->abi_minor < 2)
        return "the plugin's device code predates plugin ABI 1.2 (reduce, index and pairs "
               "input on the GPU); rebuild it with this Soren's SDK";
    return NULL;
}

/* A session is a gpu_run that outlives its runs, with its own copies of
 * the stage and the options it was made for. */
struct soren_gpu_session {
    soren_stage_spec spec;
    soren_gpu_options opt;
    gpu_run run;
    int failed; /* a run failed: the device state is not to be trusted */
};

static void session_init(soren_gpu_session *s, const soren_stage_spec *spec,
                         const soren_gpu_options *opt, bool pooled)
{
    memset(s, 0, sizeof *s);
    s->spec = *spec;
    s->opt = *opt;
    s->run.spec = &s->spec;
    s->run.opt = &s->opt;
    s->run.gpu = spec->code->gpu;
    s->run.pooled = pooled;
}

extern "C" soren_status soren_gpu_session_new(const soren_stage_spec *spec,
                                              const soren_gpu_options *opt,
                                              soren_gpu_session **out, soren_error *err)
{
    *out = NULL;
    const char *why = soren_gpu_unsupported(spec);
    if (why)
        return soren_error_set(err, SOREN_EDEVICE, "%s: cannot run on the GPU: %s",
                               spec->job_name, why);
    soren_gpu_session *s = (soren_gpu_session *)malloc(sizeof *s);
    if (!s)
        return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory", spec->job_name);
    session_init(s, spec, opt, true);
    *out = s;
    return SOREN_OK;
}

extern "C" int soren_gpu_session_fits(const soren_gpu_session *s, const soren_stage_spec *spec,
                                      const soren_gpu_options *opt)
{
    /* A stage or options that changed (a key count from the parameters, a
     * forced variant, the order) need a session of their own. */
    const soren_stage_spec *a = &s->spec;
    bool same_stage = a->job_name == spec->job_name && a->code == spec->code &&
                      a->input_format == spec->input_format &&
                      a->record_size == spec->record_size && a->task_count == spec->task_count &&
                      a->key_type == spec->key_type && a->key_max_size == spec->key_max_size &&
                      a->key_count == spec->key_count && a->value_type == spec->value_type &&
                      a->value_size == spec->value_size && a->combine == spec->combine &&
                      a->reduce == spec->reduce && a->order == spec->order &&
                      a->limit == spec->limit;
    return !s->failed && same_stage &&
           s->opt.variant == opt->variant && s->opt.device == opt->device &&
           s->opt.table_slots == opt->table_slots && s->opt.key_bytes == opt->key_bytes &&
           s->opt.pair_slots == opt->pair_slots && s->opt.block_slots == opt->block_slots &&
           s->opt.device_memory == opt->device_memory &&
           s->opt.small_keys == opt->small_keys &&
           s->opt.sample == opt->sample;
}

extern "C" soren_status soren_gpu_session_run(soren_gpu_session *s, const soren_input *inputs,
                                              size_t input_count, const soren_params *params,
                                              const uint64_t *param_versions,
                                              soren_progress *progress, soren_result *out,
                                              soren_explain *x, soren_error *err)
{
    x->device = "gpu";
    if (s->failed)
        return soren_error_set(err, SOREN_EDEVICE, "%s: an earlier run of this job failed on "
                               "the GPU; make the job again", s->spec.job_name);
    s->opt.progress = progress;
    s->run.err = err;
    s->run.x = x;
    soren_status st = session_run(&s->run, inputs, input_count, params, param_versions, out);
    if (st != SOREN_OK)
        s->failed = 1;
    return st;
}

extern "C" void soren_gpu_session_pairs(const soren_gpu_session *s, soren_pairs *out)
{
    out->count = s->run.packed_n;
    out->key_bytes = s->run.packed_keys;
    out->key_offset = s->run.packed_offsets;
    out->values = s->run.packed_values;
}

extern "C" void soren_gpu_session_free(soren_gpu_session *s)
{
    if (!s)
        return;
    gpu_run_destroy(&s->run);
    free(s);
}

extern "C" soren_status soren_gpu_run(const soren_stage_spec *spec, const soren_input *inputs,
                                      size_t input_count, const soren_params *params,
                                      const soren_gpu_options *opt, soren_result *out,
                                      soren_explain *x, soren_error *err)
{
    x->device = "gpu";
    const char *why = soren_gpu_unsupported(spec);
    if (why)
        return soren_error_set(err, SOREN_EDEVICE, "%s: cannot run on the GPU: %s",
                               spec->job_name, why);
    /* One run: what it frees goes back to the device at once. */
    soren_gpu_session s;
    session_init(&s, spec, opt, false);
    s.run.err = err;
    s.run.x = x;
    soren_status st = session_run(&s.run, inputs, input_count, params, NULL, out);
    gpu_run_destroy(&s.run);
    return st;
}
