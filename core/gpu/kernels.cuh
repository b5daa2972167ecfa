/*
 * kernels.cuh - the GPU engine's device code that does not depend on a
 * plugin's functions: the engine's counters, stored keys and their order,
 * and the launchers of kernels.cu (line splitting, compaction, gathering
 * slots, sort keys, grouping, packing, a re-run's result in one block, a
 * table's growth).
 *
 * Without relocatable device code a kernel is launched from the file that
 * defines it: the engine's other files call the launch_* functions here,
 * which queue one launch on the stream they are given and leave its error
 * to the caller's cudaGetLastError.  Grid-stride launches take GRID_THREADS
 * threads a block.  The __device__ helpers below are inline, a copy in each
 * file that uses them (CUB's algorithms take the functors).
 */
#ifndef SOREN_GPU_KERNELS_CUH
#define SOREN_GPU_KERNELS_CUH

#include <soren/engine/abi.h>

#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

namespace soren__gpu {

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

/* Threads a block of the engine's grid-stride kernels. */
enum { GRID_THREADS = 256 };

/* Line splitting.  A line starts at 0 and after every '\n' but one that
 * ends the input.  Each block takes tiles of SPLIT_TILE bytes and each
 * thread 16 of them, read as one aligned uint4 (the input buffer is padded
 * to 16 bytes): the count pass keeps the newlines of each tile, a scan
 * gives each tile its first record, and the write pass puts every line
 * start at its place, a block scan ordering the threads of a tile.  Two
 * reads of the input at full width cost less than one select over single
 * bytes. */
enum { SPLIT_THREADS = 256, SPLIT_TILE = SPLIT_THREADS * 16 };

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

/* ---- Launchers (kernels.cu) ---------------------------------------------- */

void launch_line_end(cudaStream_t stream, uint64_t *starts, uint64_t count, const uint8_t *input,
                     uint64_t size);
void launch_split_count(unsigned grid, cudaStream_t stream, const uint8_t *input, uint64_t size,
                        uint64_t tiles, uint64_t *tile_counts);
void launch_split_write(unsigned grid, cudaStream_t stream, const uint8_t *input, uint64_t size,
                        uint64_t tiles, const uint64_t *tile_first, uint64_t *starts);
void launch_gather_slots(int grid, cudaStream_t stream, const uint64_t *used, uint64_t n,
                         unsigned long long *slots, uint8_t *slot_values,
                         const uint8_t *identity, uint32_t value_size, uint32_t *refs,
                         uint8_t *values);
void launch_iota(int grid, cudaStream_t stream, uint32_t *perm, uint64_t n);
void launch_key_bits(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                     const uint32_t *refs, const uint8_t *keys, uint32_t key_type,
                     uint64_t *bits);
void launch_value_bits(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                       const uint8_t *values, uint32_t value_size, uint32_t value_type,
                       bool descending, uint64_t *bits);
void launch_run_heads(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                      const uint32_t *refs, const uint8_t *keys, bool by_ref,
                      uint64_t *run_head);
void launch_ref_bits(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                     const uint32_t *refs, uint64_t *bits);
void launch_groups(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                   const uint64_t *run_scan, const uint64_t *run_head, const uint32_t *refs,
                   const uint8_t *values, uint32_t value_size, uint32_t *group_refs,
                   uint64_t *group_start, uint8_t *group_values);
void launch_largest_group(int grid, cudaStream_t stream, const uint64_t *group_start,
                          uint64_t groups, unsigned long long *largest);
void launch_run_targets(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                        const uint64_t *run_scan, const uint64_t *run_head,
                        const uint32_t *refs, uint64_t *target, uint32_t *run_refs);
void launch_key_word(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                     const uint32_t *refs, const uint8_t *keys, uint32_t w, uint64_t *bits);
void launch_key_sizes(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                      const uint32_t *refs, const uint8_t *keys, uint64_t *sizes);
void launch_pack(int grid, cudaStream_t stream, const uint32_t *perm, uint64_t n,
                 const uint32_t *refs, const uint8_t *keys, uint32_t key_size,
                 uint64_t *offsets, const uint8_t *values, uint32_t value_size,
                 uint8_t *out_keys, uint8_t *out_values);
void launch_small_result(cudaStream_t stream, const small_result_args &a);
void launch_count_used(int grid, cudaStream_t stream, const unsigned long long *slots,
                       uint64_t n, unsigned long long *used);
void launch_rehash(int grid, cudaStream_t stream, const unsigned long long *old_slots,
                   const uint8_t *old_values, uint64_t old_count, unsigned long long *slots,
                   uint8_t *values, uint64_t count, uint32_t value_size, const uint8_t *keys);
void launch_dense_keys(int grid, cudaStream_t stream, uint8_t *keys, uint64_t count);

} /* namespace soren__gpu */

#endif /* SOREN_GPU_KERNELS_CUH */
