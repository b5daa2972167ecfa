/*
 * kernels.cu - the GPU engine's device code that does not depend on a
 * plugin's functions, and the launchers the engine's other files queue it
 * with (see kernels.cuh).
 */
#include "kernels.cuh"

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

extern "C" {
#include "../plugin/manifest.h" /* soren_order */
}

namespace soren__gpu {

namespace {

__global__ void line_end_kernel(uint64_t *starts, uint64_t count, const uint8_t *input,
                                uint64_t size)
{
    starts[count] = size + (input[size - 1] == '\n' ? 0 : 1);
}

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

/* Bytes [8 w, 8 w + 8) of each key as a big-endian word, zero past the
 * key's end: words that sort as the bytes do (memcmp). */
__global__ void key_word_kernel(const uint32_t *perm, uint64_t n, const uint32_t *refs,
                                const uint8_t *keys, uint32_t w, uint64_t *bits)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t ref = refs[perm[j]];
        const uint8_t *k = key_bytes_of(keys, ref);
        const uint32_t size = key_size_of(keys, ref);
        uint64_t word = 0;
        for (uint32_t b = 8 * w; b < 8 * w + 8; b++)
            word = word << 8 | (b < size ? k[b] : 0u);
        bits[j] = word;
    }
}

/* The final packed layout of a soren_result: keys back to back at their
 * offsets, values in order.  Keys of one size (typed keys: key_size) are at
 * multiples of it, which the kernel writes; other keys at offsets scanned
 * from their sizes.  Without out_values, the pairs as a later stage's input
 * instead (a pairs input, as soren_input_pairs lays it out on the host):
 * pair j's key at its key offset plus j values, its value right after, and
 * the n + 1 offsets rewritten as the pairs' starts, the last the end. */
__global__ void pack_kernel(const uint32_t *perm, uint64_t n, const uint32_t *refs,
                            const uint8_t *keys, uint32_t key_size, uint64_t *offsets,
                            const uint8_t *values, uint32_t value_size, uint8_t *out_keys,
                            uint8_t *out_values)
{
    const uint32_t pair_values = out_values ? 0 : value_size; /* value bytes before a key */
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t ref = refs[perm[j]];
        const uint32_t size = key_size_of(keys, ref);
        const uint64_t at = (key_size ? j * key_size : offsets[j]) + j * pair_values;
        const uint8_t *value = values + (uint64_t)perm[j] * value_size;
        memcpy(out_keys + at, key_bytes_of(keys, ref), size);
        memcpy(out_values ? out_values + j * value_size : out_keys + at + size, value,
               value_size);
        offsets[j] = at;
        if (j == n - 1) /* the one thread that reads and writes offsets[n] */
            offsets[n] = (key_size ? n * key_size : offsets[n]) + n * pair_values;
    }
}

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

} /* namespace */

void launch_line_end(cudaStream_t stream, uint64_t *starts, uint64_t count, const uint8_t *input,
                     uint64_t size)
{
    line_end_kernel<<<1, 1, 0, stream>>>(starts, count, input, size);
}

void launch_split_count(unsigned grid, cudaStream_t stream, const uint8_t *input, uint64_t size,
                        uint64_t tiles, uint64_t *tile_counts)
{
    split_count_kernel<<<grid, SPLIT_THREADS, 0, stream>>>(input, size, tiles, tile_counts);
}

void launch_split_write(unsigned grid, cudaStream_t stream, const uint8_t *input, uint64_t size,
                        uint64_t tiles, const uint64_t *tile_first, uint64_t *starts)
{
    split_write_kernel<<<grid, SPLIT_THREADS, 0, stream>>>(input, size, tiles, tile_first, starts);
}

void launch_gather_slots(int grid, cudaStream_t stream, const uint64_t *used, uint64_t n,
                         unsigned long long *slots, uint8_t *slot_values,
                         const uint8_t *identity, uint32_t value_size, uint32_t *refs,
                         uint8_t *values)
{
    gather_slots_kernel<<<grid, GRID_THREADS, 0, stream>>>(used, n, slots, slot_values, identity,
                                                           value_size, refs, values);
}

void launch_iota(int grid, cudaStream_t stream, uint32_t *perm, uint64_t n)
{
    iota_kernel<<<grid, GRID_THREADS, 0, stream>>>(perm, n);
}

void launch_key_bits(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                     const uint32_t *refs, const uint8_t *keys, uint32_t key_type,
                     uint64_t *bits)
{
    key_bits_kernel<<<grid, GRID_THREADS, 0, stream>>>(perm, n, refs, keys, key_type, bits);
}

void launch_value_bits(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                       const uint8_t *values, uint32_t value_size, uint32_t value_type,
                       bool descending, uint64_t *bits)
{
    value_bits_kernel<<<grid, GRID_THREADS, 0, stream>>>(perm, n, values, value_size, value_type,
                                                         descending, bits);
}

void launch_run_heads(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                      const uint32_t *refs, const uint8_t *keys, bool by_ref,
                      uint64_t *run_head)
{
    run_heads_kernel<<<grid, GRID_THREADS, 0, stream>>>(perm, n, refs, keys, by_ref, run_head);
}

void launch_ref_bits(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                     const uint32_t *refs, uint64_t *bits)
{
    ref_bits_kernel<<<grid, GRID_THREADS, 0, stream>>>(perm, n, refs, bits);
}

void launch_groups(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                   const uint64_t *run_scan, const uint64_t *run_head, const uint32_t *refs,
                   const uint8_t *values, uint32_t value_size, uint32_t *group_refs,
                   uint64_t *group_start, uint8_t *group_values)
{
    groups_kernel<<<grid, GRID_THREADS, 0, stream>>>(perm, n, run_scan, run_head, refs, values,
                                                     value_size, group_refs, group_start,
                                                     group_values);
}

void launch_largest_group(int grid, cudaStream_t stream, const uint64_t *group_start,
                          uint64_t groups, unsigned long long *largest)
{
    largest_group_kernel<<<grid, GRID_THREADS, 0, stream>>>(group_start, groups, largest);
}

void launch_run_targets(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                        const uint64_t *run_scan, const uint64_t *run_head,
                        const uint32_t *refs, uint64_t *target, uint32_t *run_refs)
{
    run_targets_kernel<<<grid, GRID_THREADS, 0, stream>>>(perm, n, run_scan, run_head, refs,
                                                          target, run_refs);
}

void launch_key_word(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                     const uint32_t *refs, const uint8_t *keys, uint32_t w, uint64_t *bits)
{
    key_word_kernel<<<grid, GRID_THREADS, 0, stream>>>(perm, n, refs, keys, w, bits);
}

void launch_key_sizes(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                      const uint32_t *refs, const uint8_t *keys, uint64_t *sizes)
{
    key_sizes_kernel<<<grid, GRID_THREADS, 0, stream>>>(perm, n, refs, keys, sizes);
}

void launch_pack(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                 const uint32_t *refs, const uint8_t *keys, uint32_t key_size,
                 uint64_t *offsets, const uint8_t *values, uint32_t value_size,
                 uint8_t *out_keys, uint8_t *out_values)
{
    pack_kernel<<<grid, GRID_THREADS, 0, stream>>>(perm, n, refs, keys, key_size, offsets, values,
                                                   value_size, out_keys, out_values);
}

void launch_small_result(cudaStream_t stream, const small_result_args &a)
{
    small_result_kernel<<<1, SMALL_THREADS, 0, stream>>>(a);
}

void launch_count_used(int grid, cudaStream_t stream, const unsigned long long *slots,
                       uint64_t n, unsigned long long *used)
{
    count_used_kernel<<<grid, GRID_THREADS, 0, stream>>>(slots, n, used);
}

void launch_rehash(int grid, cudaStream_t stream, const unsigned long long *old_slots,
                   const uint8_t *old_values, uint64_t old_count, unsigned long long *slots,
                   uint8_t *values, uint64_t count, uint32_t value_size, const uint8_t *keys)
{
    rehash_kernel<<<grid, GRID_THREADS, 0, stream>>>(old_slots, old_values, old_count, slots,
                                                     values, count, value_size, keys);
}

void launch_dense_keys(int grid, cudaStream_t stream, uint8_t *keys, uint64_t count)
{
    dense_keys_kernel<<<grid, GRID_THREADS, 0, stream>>>(keys, count);
}

} /* namespace soren__gpu */
