/*
 * map.cuh - the map kernels of the GPU engine's variants, with the plugin's
 * functions inlined into them.
 *
 * One thread runs map over one record at a time (a grid-stride loop; a
 * warp's records of a step are first copied into shared memory where the
 * launcher gives room, see load_tile), and soren_emit delivers each pair as
 * the launch's variant says:
 *   hash        find or claim the key's slot in the global table (linear
 *               probing; a slot is claimed by atomicCAS of (hash, key ref))
 *               and fold the value into the slot's accumulator; where the
 *               launch has shared memory (shared_bytes), keys of up
 *               to 12 bytes go through a per-block table there that caches
 *               (key, global slot) and folds values, flushed into the global
 *               table when the block ends; a key whose entry is taken (one
 *               probe: CACHE_PROBES) goes to the global table directly;
 *   block       the same per-block table, sized by the host to hold the
 *               whole (small) key set: one kernel serves both, hash's table
 *               caching the frequent keys of many;
 *   dense       index keys: fold into a per-block array indexed by the key
 *               (shared memory where it fits), flushed at the block's end;
 *   direct      store the key once in the key space and the pair at an
 *               index claimed with atomicAdd (no counting pass);
 *   sort count  count the record's pairs and key bytes (Mars MAP_COUNT);
 *   sort write  write them at the record's scanned offsets (Mars MAP);
 *   monitor     map a sample of the records, count pairs and key bytes and
 *               sketch the keys, store nothing;
 *   group       hash for a reduce without a combine: find or claim the key's
 *               slot, append the pair with the slot's key ref;
 *   reduce      run the stage's reduce over groups of values (the "records"
 *               of this launch) and append its pairs as direct does.
 * An emit that cannot be applied because a region is full sets a status
 * bit; its thread records where it stopped (the record and how many of its
 * emits were applied) and every thread stops at its next record.  The host
 * grows the region and launches again: each thread goes on from where it
 * stopped, skipping the emits already applied, so no pair is lost or
 * applied twice.  A key that breaks the manifest's rules stops the run.
 */
#ifndef SOREN_ENGINE_MAP_CUH
#define SOREN_ENGINE_MAP_CUH

#include <cooperative_groups.h>
#include <cooperative_groups/scan.h>
#include <soren/engine/abi.h>
#include <soren/engine/combine.cuh>
#include <soren/engine/sketch.h>
#include <soren/soren.h>

namespace soren {

enum { EMIT_RECORD = 0, EMIT_PAIRS, EMIT_KEY_BYTES, EMIT_STAGE, EMIT_SKIP, EMIT_FAILED };

/* How far a key probes the per-block table before it goes to the global
 * table.  block's table holds every key it can: a key that finds no room
 * within BLOCK_PROBES goes to the global table on every emit, so fewer
 * probes slow a small key set down.  hash's table is a cache of the keys a
 * block met first, which the rest of a large key set miss, and each probe
 * of a miss is a dependent read of shared memory on a diverged path: a key
 * is cached at its home entry or not at all.  bench/results/h100/
 * per-block-tables.md has the figures for each probe count. */
enum { BLOCK_PROBES = 8, CACHE_PROBES = 1 };

constexpr unsigned long long TAG_MASK = 0xffffffff00000000ull;

/* What soren_emit reaches from a kernel: the launch's arguments, its
 * variant (a compile-time constant of each kernel, so the emit path of the
 * other variants is compiled away) and, for a per-block table (hash, block)
 * or array (dense), this block's shared memory. */
struct emit_ctx {
    const soren_gpu_map_args *a;
    uint32_t variant;                /* soren_gpu_variant */
    unsigned long long *block_slots; /* tag | (global slot + 1); 0 is free; NULL: no table */
    uint4 *block_keys;               /* size + 1 (0 until written), first 12 bytes */
    void *block_values;              /* the table's values; dense: key_count values */
    uint8_t *present;                /* dense: a byte per key, 1 once the block emitted it */
    uint32_t block_mask;             /* the table's entries - 1 (a power of two) */
    bool dense_in_block;             /* dense: the array is block_values (a constant of each
                                        dense kernel, so its emits test nothing for it) */
    bool dense_fold;                 /* dense, the global array: a warp's emits to one key
                                        fold first (warp_fold; a constant likewise) */
};

/* Bytes [off, off + 4) of a key of n bytes as a little-endian word, zero
 * padded: the unit the key space stores and compares.  The fixed trip count
 * keeps a warp's lanes together whatever their keys' lengths. */
__device__ inline uint32_t key_word(const uint8_t *k, uint32_t n, uint32_t off)
{
    uint32_t w = 0;
#pragma unroll
    for (uint32_t i = 0; i < 4; i++)
        if (off + i < n)
            w |= (uint32_t)k[off + i] << (8 * i);
    return w;
}

/* The key ref of index key i, stored by the host for the dense variant at
 * byte 4 + 8 i. */
__device__ inline uint32_t dense_ref(uint64_t i) { return (uint32_t)(1 + 2 * i); }

/* Writes a key as the key space holds it (soren__key_footprint): its size
 * and its bytes, zero padded to 16, in 16-byte stores at a 16-aligned
 * offset. */
__device__ inline void store_key(const soren_gpu_map_args *a, uint64_t offset, const uint8_t *k,
                                 uint32_t n)
{
    uint4 *dst = (uint4 *)(a->keys + offset);
    dst[0] = make_uint4(n, key_word(k, n, 0), key_word(k, n, 4), key_word(k, n, 8));
    for (uint32_t off = 12, i = 1; off < n; off += 16, i++)
        dst[i] = make_uint4(key_word(k, n, off), key_word(k, n, off + 4),
                            key_word(k, n, off + 8), key_word(k, n, off + 12));
}

/* atomicAdd(counter, v) for the threads of a warp that call it together:
 * one atomic for them all, each thread's share at its place in lane order.
 * A counter that every emit bumps (direct's pair and key space) otherwise
 * serialises them all at one L2 address. */
__device__ inline unsigned long long warp_atomic_add(unsigned long long *counter,
                                                     unsigned long long v)
{
    cooperative_groups::coalesced_group g = cooperative_groups::coalesced_threads();
    unsigned long long before = cooperative_groups::exclusive_scan(g, v);
    unsigned long long base = 0;
    if (g.thread_rank() == g.size() - 1)
        base = atomicAdd(counter, before + v);
    return g.shfl(base, g.size() - 1) + before;
}

/* Copies the key into the key space at offset, which the caller claimed
 * for its footprint; returns its ref, or 0 when the key space is full.
 * Other threads may not see the bytes yet: one that publishes the ref to
 * them fences first (fill_slot); direct's refs are read after the launch. */
__device__ inline uint32_t store_claimed_key(const soren_gpu_map_args *a, uint64_t offset,
                                             const uint8_t *k, uint32_t n)
{
    if (offset + soren__key_footprint(n) > a->keys_capacity || (offset >> 2) > 0xffffffffull) {
        atomicOr(a->status, SOREN_GPU_KEYS_FULL);
        return 0;
    }
    store_key(a, offset, k, n);
    return (uint32_t)(offset >> 2);
}

/* Does the stored key `ref` equal k?  One 16-byte load reads its size and
 * first 12 bytes (most keys); the stored padding is zero, as key_word pads.
 * Stored keys are read through L2 only (ld.cg): a line of the key space may
 * sit in this SM's L1 from before another SM wrote the key. */
__device__ inline bool key_equals(const soren_gpu_map_args *a, uint32_t ref, const uint8_t *k,
                                  uint32_t n)
{
    const uint4 *stored = (const uint4 *)(a->keys + ((uint64_t)ref << 2));
    uint4 w = __ldcg(stored);
    if (w.x != n || w.y != key_word(k, n, 0) || w.z != key_word(k, n, 4) ||
        w.w != key_word(k, n, 8))
        return false;
    for (uint32_t off = 12, i = 1; off < n; off += 16, i++) {
        w = __ldcg(stored + i);
        if (w.x != key_word(k, n, off) || w.y != key_word(k, n, off + 4) ||
            w.z != key_word(k, n, off + 8) || w.w != key_word(k, n, off + 12))
            return false;
    }
    return true;
}

/* Checks a key against the manifest's rules (the CPU engine applies the
 * same ones); the first bad key is recorded as (rule << 56) | detail. */
template <uint32_t KeyType>
__device__ inline bool key_ok(const soren_gpu_map_args *a, const void *key, uint32_t n)
{
    unsigned long long bad = 0;
    if (KeyType == SOREN_TYPE_STRING) {
        if (n > a->key_max_size)
            bad = (1ull << 56) | n;
    } else if (n != (KeyType == SOREN_TYPE_U32 || KeyType == SOREN_TYPE_F32 ||
                             KeyType == SOREN_TYPE_INDEX
                         ? 4u
                         : 8u)) {
        bad = (2ull << 56) | n;
    } else if (KeyType == SOREN_TYPE_INDEX && *(const uint32_t *)key >= a->key_count) {
        bad = (3ull << 56) | *(const uint32_t *)key;
    }
    if (!bad)
        return true;
    atomicCAS(a->bad_key, 0ull, bad);
    atomicOr(a->status, SOREN_GPU_BAD_KEY);
    return false;
}

/* Sleeps about ns nanoseconds where the device can (sm_70 on). */
__device__ inline void pause_ns(unsigned ns)
{
#if __CUDA_ARCH__ >= 700
    __nanosleep(ns);
#else
    (void)ns;
#endif
}

/* The ref of a global slot that a thread has reserved for a new key and
 * is storing the key's bytes for: no key's (see SOREN_GPU_SLOT_NO_KEY). */
constexpr uint32_t PENDING_REF = 0xffffffffu;

/* Stores key k for slot i, which this thread reserved: the key's bytes,
 * then its ref in the slot.  Where the key space is full, the slot keeps
 * SOREN_GPU_SLOT_NO_KEY: freeing it would break the probe chain of a key
 * stored past it meanwhile, and the next lookup would store that key
 * twice. */
__device__ inline int64_t fill_slot(const soren_gpu_map_args *a, uint64_t i,
                                    unsigned long long tag, const uint8_t *k, uint32_t n)
{
    /* A new key: rare, so a plain atomic (the warp's scan would cost the
     * hash kernel registers on every emit's path). */
    uint64_t offset = atomicAdd(a->keys_used, (unsigned long long)soren__key_footprint(n));
    uint32_t ref = store_claimed_key(a, offset, k, n);
    /* The bytes must be visible before the ref that publishes them. */
    __threadfence();
    atomicExch(&a->slots[i], tag | (ref ? ref : SOREN_GPU_SLOT_NO_KEY));
    return ref ? (int64_t)i : -1;
}

/* The slot of key k (hash h) in the global table, claimed if the key is new;
 * -1 when the table or the key space is full (status says which).  A new
 * key's empty slot is reserved first (its tag, PENDING_REF) and counted,
 * then the key is stored: a thread that brings the same key meanwhile waits
 * for the ref.  Reserving before counting counts each new key once: were
 * claims counted before the reservation, a thousand blocks that meet the
 * same few new keys at once would count each of them a thousand times, and
 * the table would look full.  No new key is reserved once slots_used is at slot_limit. */
__device__ inline int64_t hash_slot(const soren_gpu_map_args *a, const uint8_t *k, uint32_t n,
                                    uint64_t h)
{
    const unsigned long long tag = h & TAG_MASK;
    const uint64_t mask = a->slot_count - 1;
    volatile unsigned long long *slots = a->slots;
    uint64_t i = h & mask;
    for (uint64_t probe = 0; probe < a->slot_count;) {
        unsigned long long seen = __ldcg(&a->slots[i]);
        if (seen == 0) {
            if (*(volatile unsigned long long *)a->slots_used >= a->slot_limit) {
                atomicOr(a->status, SOREN_GPU_TABLE_FULL);
                return -1;
            }
            if ((seen = atomicCAS(&a->slots[i], 0ull, tag | PENDING_REF)) == 0) {
                atomicAdd(a->slots_used, 1ull);
                return fill_slot(a, i, tag, k, n);
            }
        }
        if ((seen & TAG_MASK) == tag) {
            /* Backing off: at a launch's start every block meets the same
             * few new keys, and a spin of reads at the L2 delays the owner's
             * write. */
            for (unsigned pause = 32; (uint32_t)seen == PENDING_REF; seen = slots[i]) {
                pause_ns(pause);
                pause = pause < 1024 ? 2 * pause : pause;
            }
            if ((uint32_t)seen == SOREN_GPU_SLOT_NO_KEY) {
                /* kept for a key of this tag, this one or not: ours now */
                if (atomicCAS(&a->slots[i], seen, tag | PENDING_REF) == seen)
                    return fill_slot(a, i, tag, k, n);
                continue; /* another thread's now: look again */
            }
            if (key_equals(a, (uint32_t)seen, k, n))
                return (int64_t)i;
        }
        probe++;
        i = (i + 1) & mask;
    }
    atomicOr(a->status, SOREN_GPU_TABLE_FULL);
    return -1;
}

template <uint32_t Op, uint32_t VType, soren_combine_fn *UserFn>
__device__ inline bool hash_insert(const soren_gpu_map_args *a, const uint8_t *k, uint32_t n,
                                   uint64_t h, const void *v)
{
    int64_t i = hash_slot(a, k, n, h);
    if (i < 0)
        return false;
    combine_into<Op, VType, UserFn>((uint8_t *)a->slot_values + i * a->value_size, v);
    return true;
}

/* Through the per-block table: the key's entry holds its global slot
 * (claimed on the block's first sight of the key), its size and first 12
 * bytes, and a value that folds in shared memory until the block flushes
 * it.  A key of up to 12 bytes that the block has seen compares in shared
 * memory alone: the frequent keys of a skewed set never touch the global
 * table again.  Crowded keys go to the global table. */
template <uint32_t Op, uint32_t VType, soren_combine_fn *UserFn>
__device__ inline bool block_insert(const emit_ctx *c, const uint8_t *k, uint32_t n,
                                    uint64_t h, const void *v)
{
    const soren_gpu_map_args *a = c->a;
    const unsigned long long tag = h & TAG_MASK;
    /* size + 1: a written entry's first word is never 0 */
    const uint4 prefix = make_uint4(n + 1, key_word(k, n, 0), key_word(k, n, 4), key_word(k, n, 8));
    uint8_t *values = (uint8_t *)c->block_values;
    int64_t g = -1;
    uint32_t i = (uint32_t)(h >> 16) & c->block_mask;
    const int probes = a->variant == SOREN_GPU_BLOCK ? BLOCK_PROBES : CACHE_PROBES;
    for (int probe = 0; probe < probes; probe++, i = (i + 1) & c->block_mask) {
        /* Other threads of the block claim and fill entries while this one
         * reads them, with no barrier between: every access is atomic. */
        unsigned long long seen = atomic_read(&c->block_slots[i]);
        unsigned int *entry = (unsigned int *)&c->block_keys[i];
        if (seen == 0) {
            if (g < 0 && (g = hash_slot(a, k, n, h)) < 0)
                return false;
            seen = atomicCAS(&c->block_slots[i], 0ull, tag | (unsigned long long)(g + 1));
            if (seen == 0) {
                /* The entry is ours: its bytes first, the size word that
                 * says they are there last. */
                atomicExch(&entry[1], prefix.y);
                atomicExch(&entry[2], prefix.z);
                atomicExch(&entry[3], prefix.w);
                __threadfence_block();
                atomicExch(&entry[0], prefix.x);
                combine_into<Op, VType, UserFn>(values + i * a->value_size, v);
                return true;
            }
        }
        if ((seen & TAG_MASK) != tag)
            continue;
        uint64_t other = (seen & 0xffffffffull) - 1;
        bool same;
        if (g >= 0) {
            same = other == (uint64_t)g;
        } else {
            /* Another thread claimed the entry: wait for its bytes (it
             * writes them right after its claim). */
            uint32_t size1;
            while ((size1 = atomic_read(&entry[0])) == 0)
                ;
            __threadfence_block(); /* the bytes were written before the size */
            same = size1 == prefix.x && atomic_read(&entry[1]) == prefix.y &&
                   atomic_read(&entry[2]) == prefix.z && atomic_read(&entry[3]) == prefix.w &&
                   (n <= 12 || key_equals(a, (uint32_t)__ldcg(&a->slots[other]), k, n));
        }
        if (same) {
            combine_into<Op, VType, UserFn>(values + i * a->value_size, v);
            return true;
        }
    }
    /* The block's table is crowded around this key: go to the global one. */
    if (g < 0 && (g = hash_slot(a, k, n, h)) < 0)
        return false;
    combine_into<Op, VType, UserFn>((uint8_t *)a->slot_values + g * a->value_size, v);
    return true;
}

/* The combine a fold applies: what the stage's combine merges partial
 * results with, so a partial count adds instead of counting as one. */
template <uint32_t Op>
constexpr uint32_t fold_op = Op == SOREN_COMBINE_COUNT ? (uint32_t)SOREN_COMBINE_SUM : Op;

/* Whether the values a warp emits to one key at once may be folded into
 * one before the atomic: integer sums, counts, minima and maxima, whose
 * result is the same in any order.  (A float sum's rounding and a float
 * minimum's choice between -0 and +0 depend on the order; a user's combine
 * is the user's.) */
template <uint32_t Op, uint32_t VType>
constexpr bool warp_foldable =
    (VType == SOREN_TYPE_U32 || VType == SOREN_TYPE_U64 || VType == SOREN_TYPE_I64) &&
    (Op == SOREN_COMBINE_SUM || Op == SOREN_COMBINE_COUNT || Op == SOREN_COMBINE_MIN ||
     Op == SOREN_COMBINE_MAX);

/* The lanes of a warp that emit key together fold their values into the
 * first of them, in a tree over their ranks; returns whether this lane is
 * that first one, which then holds the fold (a count: how many emitted).
 * Atomics on one address of global memory serialise: 32,561 tasks each
 * offering themselves to the same two keys of a dense array (an SVM step
 * choosing its pair) took 47 us of an H100's time, a warp's fold each 1.4.
 * A launch of fewer than FOLD_RECORDS_MIN records takes the kernel that
 * does not fold (dense_kernel_for): its atomics wait behind the map's own
 * work, and an SVM step of 7,291 tasks gained nothing from folding (it
 * was 4% slower: bench/results/h100/svm.md). */
enum : uint64_t { FOLD_RECORDS_MIN = 16384 };

template <uint32_t Op, typename T>
__device__ inline bool warp_fold(uint32_t key, T *value)
{
    const unsigned lane = threadIdx.x & 31;
    const unsigned same = __match_any_sync(__activemask(), key);
    if (same == 1u << lane)
        return true;
    const unsigned rank = __popc(same & ((1u << lane) - 1)), size = __popc(same);
    if constexpr (Op == SOREN_COMBINE_COUNT) {
        *value = (T)size;
    } else {
        for (unsigned step = 1; step < size; step *= 2) {
            /* every lane of the group shuffles; rank r takes r + step's fold */
            const bool takes = rank % (2 * step) == 0 && rank + step < size;
            const T other =
                __shfl_sync(same, *value, takes ? __fns(same, 0, rank + step + 1) : lane);
            if (takes)
                *value = Op == SOREN_COMBINE_MIN   ? (other < *value ? other : *value)
                         : Op == SOREN_COMBINE_MAX ? (other > *value ? other : *value)
                                                   : (T)(*value + other);
        }
    }
    return rank == 0;
}

/* The dense variant: the key is its slot, in the block's array (InBlock)
 * or the global one.  Presence is a plain byte store: every writer stores
 * the same 1, so no atomic is needed.  (Storing only where the combine
 * found the identity, a key's first emit, would spare the stores but make
 * the atomic return its value, which serialises a warp's emits to one key:
 * four times slower on a picture's uniform areas.)  Values are typed, so
 * their address is the key times a constant size.  In the global array a
 * warp's emits to one key are folded first where the kernel does
 * (emit_ctx.dense_fold: warp_fold); the block's array in shared memory
 * takes its atomics as they come. */
template <uint32_t Op, uint32_t VType, soren_combine_fn *UserFn, bool InBlock>
__device__ inline void dense_insert(const emit_ctx *c, uint32_t key, const void *v)
{
    typedef typename value_of<VType>::type T;
    const soren_gpu_map_args *a = c->a;
    if constexpr (InBlock) {
        combine_into<Op, VType, UserFn>((T *)c->block_values + key, v);
        c->present[key] = 1;
    } else {
        T *slot = (T *)a->slot_values + key;
        if constexpr (warp_foldable<Op, VType>) {
            if (c->dense_fold) {
                T value = *(const T *)v;
                if (!warp_fold<Op>(key, &value))
                    return;
                /* a count's fold is how many emitted: a partial count, which adds */
                combine_into<fold_op<Op>, VType, UserFn>(slot, &value);
            } else {
                combine_into<Op, VType, UserFn>(slot, v);
            }
        } else {
            combine_into<Op, VType, UserFn>(slot, v);
        }
        if (__ldcg(&a->slots[key]) == 0)
            a->slots[key] = dense_ref(key);
    }
}

__device__ inline void store_value(void *dst, const void *v, uint32_t size)
{
    if (size == 4)
        *(uint32_t *)dst = *(const uint32_t *)v;
    else
        *(uint64_t *)dst = *(const uint64_t *)v;
}

/* Appends the pair (key ref, value) at an index claimed with atomicAdd. */
__device__ inline bool append_pair(const soren_gpu_map_args *a, uint32_t ref, const void *v)
{
    unsigned long long idx = warp_atomic_add(a->pairs_used, 1ull);
    if (idx >= a->pair_capacity) {
        atomicOr(a->status, SOREN_GPU_PAIRS_FULL);
        return false;
    }
    a->pair_keys[idx] = ref;
    store_value((uint8_t *)a->pair_values + idx * a->value_size, v, a->value_size);
    return true;
}

/* Direct, and the pairs of a reduce: each pair with its own copy of its key. */
__device__ inline bool direct_append(const soren_gpu_map_args *a, const uint8_t *k, uint32_t n,
                                     const void *v)
{
    uint32_t ref = store_claimed_key(a, warp_atomic_add(a->keys_used, soren__key_footprint(n)),
                                     k, n);
    return ref && append_pair(a, ref, v);
}

/* Hash for a reduce without a combine: the table stores each key once and
 * the pair refers to the table's copy, so grouping sorts 32-bit refs instead
 * of comparing key bytes.  A slot claimed for a pair that then finds the pair
 * space full stays claimed: the resumed emit finds it. */
__device__ inline bool group_append(const soren_gpu_map_args *a, const uint8_t *k, uint32_t n,
                                    const void *v)
{
    int64_t i = hash_slot(a, k, n, soren__key_hash(k, n));
    return i >= 0 && append_pair(a, (uint32_t)__ldcg(&a->slots[i]), v);
}

/* Mars pass 2: the record's pairs and keys go right after the previous
 * records', at offsets the host scanned from pass 1's counts.  During this
 * pass *pairs_used and *keys_used hold where this input's pairs and keys
 * start (earlier inputs' come first). */
__device__ inline void sort_write(soren_emitter *e, const soren_gpu_map_args *a,
                                  const uint8_t *k, uint32_t n, const void *v)
{
    uint64_t r = e->state[EMIT_RECORD];
    uint64_t idx = *a->pairs_used + a->record_pairs[r] + e->state[EMIT_PAIRS];
    uint64_t offset = *a->keys_used + a->record_key_bytes[r] + e->state[EMIT_KEY_BYTES];
    store_key(a, offset, k, n);
    a->pair_keys[idx] = (uint32_t)(offset >> 2);
    store_value((uint8_t *)a->pair_values + idx * a->value_size, v, a->value_size);
}

/* The compile-time facts of stage I of a plugin's stage table. */
template <const auto &Desc, uint32_t I> struct stage_traits {
    static constexpr soren_map_fn *map = Desc[I].map;
    static constexpr uint32_t key_type = Desc[I].key ? Desc[I].key : (uint32_t)SOREN_TYPE_STRING;
    static constexpr uint32_t value_type = Desc[I].value ? Desc[I].value : Desc[I].combine.type;
    static constexpr uint32_t op = Desc[I].combine.op;
    static constexpr soren_combine_fn *user_combine = Desc[I].combine.fn;
    static constexpr soren_reduce_fn *reduce = Desc[I].reduce;
};

/* Emits a pair of stage I, combining with Op (the stage's own, or fold_op
 * of it where the records are partial results). */
template <const auto &Desc, uint32_t I, uint32_t Op = stage_traits<Desc, I>::op>
__device__ inline void emit_stage(soren_emitter *e, const void *key, uint32_t n, const void *v)
{
    typedef stage_traits<Desc, I> S;
    const emit_ctx *c = (const emit_ctx *)e->ctx;
    const soren_gpu_map_args *a = c->a;
    const uint8_t *k = (const uint8_t *)key;
    /* After a failed emit the record's later emits wait for the resume. */
    if (e->state[EMIT_FAILED])
        return;
    if (c->variant == SOREN_GPU_DENSE) {
        /* A dense launch never stops for room, so never resumes: its emits
         * keep no count.  A bad key is recorded (key_ok) and skipped: the
         * run fails on it, whatever the launch goes on to add. */
        if constexpr (S::key_type == SOREN_TYPE_INDEX) {
            if (!key_ok<S::key_type>(a, key, n))
                return;
            const uint32_t index = *(const uint32_t *)key;
            if (c->dense_in_block)
                dense_insert<Op, S::value_type, S::user_combine, true>(c, index, v);
            else
                dense_insert<Op, S::value_type, S::user_combine, false>(c, index, v);
        }
        return;
    }
    bool applied = true;
    if (e->state[EMIT_PAIRS] < e->state[EMIT_SKIP]) {
        /* applied by the launch that stopped on this record */
    } else if (c->variant == SOREN_GPU_MONITOR) {
        /* Most emits repeat a key whose rank the register already holds:
         * a load spares the atomic (and its serialisation on the few
         * registers a skewed key set hits).  Registers only grow, so a
         * stale cached value can cost an atomic but never skip one. */
        uint64_t h = soren__key_hash(k, n);
        unsigned int *reg = &a->sketch[soren__sketch_register(h)];
        unsigned int rank = soren__sketch_rank(h);
        if (*reg < rank)
            atomicMax(reg, rank);
    } else if (!key_ok<S::key_type>(a, key, n)) {
        applied = false;
    } else {
        switch (c->variant) {
        case SOREN_GPU_HASH: {
            const uint64_t h = soren__key_hash(k, n);
            /* A key of another part of the key space waits for its pass. */
            if ((uint32_t)(h >> 32) - a->key_first > a->key_last - a->key_first)
                break;
            /* A hash launch's table caches the keys it can compare without
             * leaving the SM; a block launch's holds every key of its set. */
            applied = c->block_slots && (n <= 12 || a->variant == SOREN_GPU_BLOCK)
                          ? block_insert<Op, S::value_type, S::user_combine>(c, k, n, h, v)
                          : hash_insert<Op, S::value_type, S::user_combine>(a, k, n, h, v);
            break;
        }
        case SOREN_GPU_DIRECT:
        case SOREN_GPU_REDUCE:
            applied = direct_append(a, k, n, v);
            break;
        case SOREN_GPU_GROUP:
            applied = group_append(a, k, n, v);
            break;
        case SOREN_GPU_SORT_WRITE:
            sort_write(e, a, k, n, v);
            break;
        }
    }
    if (!applied) {
        e->state[EMIT_FAILED] = 1;
        return;
    }
    e->state[EMIT_PAIRS]++;
    /* Only the sort variant's offsets and monitoring read the key bytes. */
    if (c->variant == SOREN_GPU_SORT_COUNT || c->variant == SOREN_GPU_SORT_WRITE ||
        c->variant == SOREN_GPU_MONITOR)
        e->state[EMIT_KEY_BYTES] += soren__key_footprint(n);
}

template <const auto &Desc, uint32_t Count, uint32_t I = 0>
__device__ __forceinline__ void emit_any(soren_emitter *e, const void *key, uint32_t n,
                                         const void *v)
{
    if constexpr (I < Count) {
        if (e->state[EMIT_STAGE] == I)
            emit_stage<Desc, I>(e, key, n, v);
        else
            emit_any<Desc, Count, I + 1>(e, key, n, v);
    }
}

/* Shared memory of a hash (block) or dense launch that has some: its table
 * or array, set to empty and to the combine's identity. */
template <uint32_t V, typename T>
__device__ inline void shared_setup(emit_ctx *c, const soren_gpu_map_args &a, T identity,
                                    unsigned long long *shared)
{
    if constexpr (V == SOREN_GPU_HASH) {
        /* SOREN_GPU_BLOCK_BYTES an entry: claim, size and prefix; then the
         * values.  The host sizes it to a power of two of entries. */
        const uint32_t entries = a.shared_bytes / (SOREN_GPU_BLOCK_BYTES + sizeof(T));
        c->block_mask = entries - 1;
        c->block_slots = shared;
        c->block_keys = (uint4 *)(shared + entries);
        c->block_values = c->block_keys + entries;
        for (uint32_t i = threadIdx.x; i < entries; i += blockDim.x) {
            c->block_slots[i] = 0;
            c->block_keys[i] = make_uint4(0, 0, 0, 0);
            ((T *)c->block_values)[i] = identity;
        }
    } else if (a.shared_bytes) {
        c->block_values = shared;
        c->present = (uint8_t *)shared + ((a.key_count * sizeof(T) + 7) & ~7ull);
        for (uint64_t i = threadIdx.x; i < a.key_count; i += blockDim.x) {
            ((T *)c->block_values)[i] = identity;
            c->present[i] = 0;
        }
    }
    __syncthreads();
}

/* Folds the block's shared table or array into the global table: its
 * values are partial results of the stage's combine Op, so a count's add. */
template <uint32_t V, uint32_t Op, uint32_t VType, soren_combine_fn *UserFn>
__device__ inline void shared_flush(const emit_ctx *c, const soren_gpu_map_args &a)
{
    __syncthreads();
    const uint32_t vs = a.value_size;
    constexpr uint32_t Fold = fold_op<Op>;
    if constexpr (V == SOREN_GPU_HASH) {
        for (uint32_t i = threadIdx.x; i <= c->block_mask; i += blockDim.x) {
            unsigned long long s = c->block_slots[i];
            if (s)
                combine_into<Fold, VType, UserFn>(
                    (uint8_t *)a.slot_values + ((s & 0xffffffffull) - 1) * vs,
                    (const uint8_t *)c->block_values + i * vs);
        }
    } else if (c->present) {
        for (uint64_t key = threadIdx.x; key < a.key_count; key += blockDim.x) {
            if (!c->present[key])
                continue;
            combine_into<Fold, VType, UserFn>((uint8_t *)a.slot_values + key * vs,
                                              (const uint8_t *)c->block_values + key * vs);
            if (__ldcg(&a.slots[key]) == 0)
                a.slots[key] = dense_ref(key);
        }
    }
}

/* Record r of the input, as the CPU engine makes it for each format: its
 * offset and index counted in the whole input where the input is a slice
 * (record_base), its data in the slice.  Format, where not 0, is the
 * input's format known at compile time. */
template <uint32_t Format = 0>
__device__ inline soren_record record_of(const soren_gpu_map_args &a, uint64_t r)
{
    soren_record rec;
    const uint64_t base = a.record_base;
    switch (Format ? Format : a.input_format) {
    case SOREN_GPU_FIXED: /* a slice starts on a record */
        rec.data = a.input + r * a.record_size;
        rec.size = a.record_size;
        rec.offset = base + r * a.record_size;
        rec.index = base / a.record_size + r;
        break;
    case SOREN_GPU_INDEX: /* a task known by its number: no data */
        rec.data = nullptr;
        rec.size = 0;
        rec.offset = rec.index = base + r;
        break;
    case SOREN_GPU_PAIRS: /* the previous stage's pair r: key bytes, then the value */
        rec.data = a.input + a.line_starts[r];
        rec.size = a.line_starts[r + 1] - a.line_starts[r];
        rec.offset = rec.index = base + r;
        break;
    default:
        rec.data = a.input + a.line_starts[r];
        rec.size = a.line_starts[r + 1] - 1 - a.line_starts[r];
        rec.offset = rec.index = base + a.line_starts[r];
    }
    return rec;
}

/* Where record r's bytes start in the input (lines, pairs); for r =
 * record_count, the input's end (a last line without its '\n' ends at
 * input_size, one before line_starts[record_count]). */
__device__ inline uint64_t record_start(const soren_gpu_map_args &a, uint64_t r)
{
    return a.line_starts[r] < a.input_size ? a.line_starts[r] : a.input_size;
}

/* A warp's records, copied to shared memory: input bytes [from, from + n)
 * lie at bytes + (from & 15), so that the copy reads whole aligned 16-byte
 * words.  bytes is NULL where the records are read in place. */
struct record_tile {
    uint8_t *bytes;
    uint64_t from;
};

/* Copies input bytes [from, to) into tile (capacity bytes, 16-aligned) and
 * returns it, or an empty tile where they do not fit.  Map then reads its
 * record, and the emits read the keys that point into it, from shared
 * memory, where the input is read once, coalesced.  The size threads that
 * share the tile call it together, each with its rank; the launcher gives a
 * tile only to a 16-aligned input, so the first word read starts inside
 * it. */
__device__ inline record_tile load_tile(const soren_gpu_map_args &a, uint8_t *tile,
                                        uint32_t capacity, uint64_t from, uint64_t to,
                                        uint32_t rank, uint32_t size)
{
    const uint32_t head = (uint32_t)(from & 15);
    if (to - from + head > capacity)
        return record_tile{nullptr, 0};
    const uint8_t *start = a.input + (from - head);
    const uint64_t words = (to - from + head) / 16;
#pragma unroll 1
    for (uint64_t i = rank; i < words; i += size)
        ((uint4 *)tile)[i] = __ldg((const uint4 *)start + i);
#pragma unroll 1
    for (uint64_t i = words * 16 + rank; i < to - from + head; i += size)
        tile[i] = start[i];
    return record_tile{tile, from - head};
}

/* Record r, its data in the tile where the block has one. */
__device__ inline soren_record tiled_record_of(const soren_gpu_map_args &a, uint64_t r,
                                               record_tile t)
{
    soren_record rec = record_of(a, r);
    if (t.bytes)
        rec.data = t.bytes + (uint64_t)(rec.data - a.input - t.from);
    return rec;
}

/* A folded record (fold_pairs): a pair as a distributed run's ranks send
 * it, the key's bytes then the value's, emitted as it is and combined with
 * fold_op.  The value, and a key of up to 8 bytes (typed keys are), are
 * copied out: a record may start at any byte, and emits read them as
 * words. */
template <const auto &Desc, uint32_t I>
__device__ inline void emit_folded(soren_emitter *e, const soren_record &rec,
                                   uint32_t value_size)
{
    const uint32_t n = (uint32_t)rec.size - value_size;
    unsigned long long value = 0, word = 0;
    memcpy(&value, rec.data + n, value_size);
    const void *key = rec.data;
    if (n <= sizeof word) {
        memcpy(&word, rec.data, n);
        key = &word;
    }
    emit_stage<Desc, I, fold_op<stage_traits<Desc, I>::op>>(e, key, n, &value);
}

/* Reduce over group g: its key as the key space holds it, its values
 * packed (the host sorted them, as the CPU engine does). */
template <soren_reduce_fn *Reduce>
__device__ inline void reduce_group(soren_emitter *e, const soren_gpu_map_args &a, uint64_t g)
{
    const uint8_t *stored = a.keys + ((uint64_t)a.group_refs[g] << 2);
    const uint32_t size = *(const uint32_t *)stored;
    /* The key space aligns keys to 4 bytes at least: an 8-byte typed key is
     * copied out so that reduce may read it as a uint64_t. */
    uint64_t aligned = 0;
    const void *key = stored + 4;
    if (size <= sizeof aligned) {
        memcpy(&aligned, stored + 4, size);
        key = &aligned;
    }
    uint64_t first = a.group_start ? a.group_start[g] : g;
    uint64_t n = a.group_start ? a.group_start[g + 1] - first : 1;
    Reduce(e, key, size, (const uint8_t *)a.group_values + first * a.value_size, (uint32_t)n,
           &a.params);
}

/* Whether a variant maps the input's records in order, a warp's threads
 * the consecutive records of one step of the grid-stride loop, so that a
 * warp's records may be read from a tile (monitor samples records, reduce
 * maps groups).  dense's keys are indexes, which records of bytes rarely
 * carry (histogram's are 3-byte pixels, never tiled): the tiled loop would
 * cost its kernel registers, and half its resident blocks, for nothing. */
__host__ __device__ constexpr bool tiles_records(uint32_t variant)
{
    return variant != SOREN_GPU_MONITOR && variant != SOREN_GPU_REDUCE &&
           variant != SOREN_GPU_DENSE;
}

/* The identity a launch's shared values start from: the combine's, or a
 * user combine's, whose bits the launcher passed in a.identity. */
template <uint32_t Op, uint32_t VType>
__device__ inline typename value_of<VType>::type launch_identity(const soren_gpu_map_args &a)
{
    typedef typename value_of<VType>::type T;
    typedef typename value_of<VType>::word W;
    if constexpr (Op == SOREN_COMBINE_USER)
        return value_from<T, W>((W)a.identity);
    else
        return identity<Op, VType>();
}

/* The map launch of variant V (a soren_gpu_variant): one thread a record in
 * a grid-stride loop.  Each variant is its own kernel, so a launch carries
 * only its own emit path (fewer registers, no branch on the variant per
 * emit).  Threads do not poll for another thread's overflow: a thread stops
 * at its own first emit that cannot be applied, and one whose emits all
 * apply has useful work to finish.  Where the launcher gives a tile
 * (tile_bytes of shared memory after the table's, an equal part for each
 * warp), each step copies the warp's records into its part first; a thread
 * that stopped still takes part in the copies.  A resuming launch reads
 * records in place: its threads go on from different steps.  Fold: the
 * records are pairs emitted as they are (fold_pairs), a kernel of its own
 * so that the map's carries nothing of it. */
template <const auto &Desc, uint32_t I, uint32_t V, bool Fold = false>
__global__ void map_kernel(const __grid_constant__ soren_gpu_map_args a, uint32_t tile_bytes)
{
    typedef stage_traits<Desc, I> S;
    typedef typename value_of<S::value_type>::type T;
    constexpr soren_map_fn *map = S::map;
    constexpr bool monitor = V == SOREN_GPU_MONITOR;
    constexpr uint32_t op = Fold ? fold_op<S::op> : S::op;
    extern __shared__ __align__(16) unsigned long long shared[];

    emit_ctx c = {&a, V, nullptr, nullptr, nullptr, nullptr, 0, false, false};
    const bool shared_table = V == SOREN_GPU_HASH && a.shared_bytes;
    if (shared_table)
        shared_setup<V, T>(&c, a, launch_identity<op, S::value_type>(a), shared);

    const uint64_t count = monitor ? a.sample_count : a.record_count;
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    unsigned long long stopped_at = SOREN_GPU_RESUME_DONE, applied = 0;
    unsigned long long pairs = 0, key_bytes = 0, bytes = 0; /* monitor */
    /* Maps record j, its first `skip` emits already applied; false when an
     * emit could not be applied (stopped_at and applied then say where). */
    auto map_one = [&](uint64_t j, uint64_t skip, record_tile tile) -> bool {
        uint64_t r = monitor ? soren__sample_record(j, count, a.record_count) : j;
        soren_emitter e;
        e.emit = 0;
        e.ctx = &c;
        e.state[EMIT_RECORD] = r;
        e.state[EMIT_PAIRS] = 0;
        e.state[EMIT_KEY_BYTES] = 0;
        e.state[EMIT_STAGE] = I;
        e.state[EMIT_SKIP] = skip;
        e.state[EMIT_FAILED] = 0;
        if constexpr (V == SOREN_GPU_REDUCE) {
            if constexpr (S::reduce != nullptr)
                reduce_group<S::reduce>(&e, a, r);
        } else {
            soren_record rec = tiled_record_of(a, r, tile);
            if constexpr (Fold)
                emit_folded<Desc, I>(&e, rec, a.value_size);
            else
                map(&e, &rec, &a.params);
            if constexpr (monitor)
                bytes += rec.size + (a.input_format == SOREN_GPU_LINES);
        }
        if (e.state[EMIT_FAILED]) {
            stopped_at = j;
            applied = e.state[EMIT_PAIRS];
            return false;
        }
        if constexpr (V == SOREN_GPU_SORT_COUNT) {
            a.record_pairs[r] = e.state[EMIT_PAIRS];
            a.record_key_bytes[r] = e.state[EMIT_KEY_BYTES];
        }
        if constexpr (monitor) {
            pairs += e.state[EMIT_PAIRS];
            key_bytes += e.state[EMIT_KEY_BYTES];
        }
        return true;
    };
    const record_tile in_place = {nullptr, 0};
    bool going = true;
    if (tiles_records(V) && tile_bytes && !a.resuming) {
        /* Each warp copies its records of a step into its own part of the
         * tile and waits for its own lanes only: a long line holds up the
         * 32 threads that share its step, not the block.  Blocks are whole
         * warps (the occupancy query's sizes are). */
        const uint32_t lane = threadIdx.x & 31;
        const uint32_t warp_bytes = tile_bytes / (blockDim.x / 32);
        uint8_t *tile = (uint8_t *)shared + ((a.shared_bytes + 15) & ~15u) +
                        (threadIdx.x / 32) * warp_bytes;
        for (uint64_t first = tid - lane; first < count; first += stride) {
            const uint64_t end = first + 32 < count ? first + 32 : count;
            __syncwarp(); /* the step before is done with the tile */
            record_tile t = load_tile(a, tile, warp_bytes, record_start(a, first),
                                      record_start(a, end), lane, 32);
            __syncwarp();
            if (going && first + lane < end)
                going = map_one(first + lane, 0, t);
        }
    } else {
        uint64_t j = tid;
        if (a.resuming) {
            /* Only the record a thread stopped on has emits to skip: it
             * runs apart, so the loop below compiles with nothing to skip. */
            j = a.resume[tid].record;
            if (j < count) {
                going = map_one(j, a.resume[tid].applied, in_place);
                j += stride;
            }
        }
        for (; going && j < count; j += stride)
            going = map_one(j, 0, in_place);
    }
    if (a.resume)
        a.resume[tid] = soren_gpu_resume{stopped_at, applied};
    if constexpr (monitor) {
        if (bytes) {
            atomicAdd(&a.sample_counts[0], pairs);
            atomicAdd(&a.sample_counts[1], key_bytes);
            atomicAdd(&a.sample_counts[2], bytes);
        }
    }
    if (shared_table)
        shared_flush<V, op, S::value_type, S::user_combine>(&c, a);
}

/* Record r of a dense launch, rec, through the stage's map: inlined, so
 * that the emits know their variant at compile time. */
template <const auto &Desc, uint32_t I>
__device__ __forceinline__ void dense_map(const soren_gpu_map_args &a, emit_ctx *c,
                                          const soren_record &rec, uint64_t r)
{
    soren_emitter e;
    e.emit = 0;
    e.ctx = c;
    e.state[EMIT_RECORD] = r;
    e.state[EMIT_PAIRS] = 0;
    e.state[EMIT_KEY_BYTES] = 0;
    e.state[EMIT_STAGE] = I;
    e.state[EMIT_SKIP] = 0;
    e.state[EMIT_FAILED] = 0;
    stage_traits<Desc, I>::map(&e, &rec, &a.params);
}

/* The dense variant's records, Format (where not 0) their format known at
 * compile time: one thread a record in a grid-stride loop, read in place
 * (tiles_records).  A dense launch never stops: not for room, and not at a
 * bad key, which fails the run (emit_stage). */
template <const auto &Desc, uint32_t I, uint32_t Format>
__device__ inline void dense_records(const soren_gpu_map_args &a, emit_ctx *c)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t r = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; r < a.record_count;
         r += stride)
        dense_map<Desc, I>(a, c, record_of<Format>(a, r), r);
}

/* Fixed records of Size bytes (1 to 4), a group of them a thread at a
 * time, read as 4-byte words (a group ends on a word: 4 records of 1 or 3
 * bytes, 2 of 2, 1 of 4): the map then reads their bytes from registers, at
 * offsets known at compile time.  Read in place, such records cost a load
 * for every byte a map reads (histogram's three a pixel); read so, a load a
 * word (3 for 4 pixels).  The records before the first that
 * starts on a word, and after the last whole group, are read in place; all
 * of them where none starts on a word. */
template <uint32_t Size> constexpr uint32_t small_group = Size % 4 == 0 ? 1 : Size % 2 == 0 ? 2 : 4;

template <const auto &Desc, uint32_t I, uint32_t Size>
__device__ inline void dense_small_records(const soren_gpu_map_args &a, emit_ctx *c)
{
    constexpr uint32_t GROUP = small_group<Size>, WORDS = GROUP * Size / 4;
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t count = a.record_count;
    uint64_t head = 0;
    while (head < GROUP && ((uintptr_t)(a.input + head * Size) & 3))
        head++;
    if (head == GROUP || head > count)
        head = count;
    const uint64_t groups = (count - head) / GROUP;
    const uint64_t tail = head + groups * GROUP;
    for (uint64_t g = tid; g < groups; g += stride) {
        const uint64_t first = head + g * GROUP;
        const uint32_t *from = (const uint32_t *)(a.input + first * Size);
        uint32_t words[WORDS];
#pragma unroll
        for (uint32_t w = 0; w < WORDS; w++)
            words[w] = __ldg(from + w);
#pragma unroll
        for (uint32_t k = 0; k < GROUP; k++) {
            soren_record rec;
            rec.data = (const uint8_t *)words + k * Size;
            rec.size = Size;
            rec.offset = a.record_base + (first + k) * Size;
            rec.index = a.record_base / Size + first + k;
            dense_map<Desc, I>(a, c, rec, first + k);
        }
    }
    const uint64_t rest = head + (count - tail);
    for (uint64_t j = tid; j < rest; j += stride) {
        const uint64_t r = j < head ? j : tail + (j - head);
        dense_map<Desc, I>(a, c, record_of<SOREN_GPU_FIXED>(a, r), r);
    }
}

/* The dense variant's map launch, InBlock where its array lies in the
 * block's shared memory, Small the size of its fixed records where they
 * are read in groups (dense_small_records; a kernel for each size, whose
 * code the compiler can keep whole).  Its own kernel, apart from
 * map_kernel's resumes and tiles, with the array's place and fixed records
 * known at compile time, so that each emit carries the key's check, the
 * combine and the presence store and little else (histogram's map issues
 * an instruction for every few bytes it reads). */
template <const auto &Desc, uint32_t I, bool InBlock, uint32_t Small, bool Fold = false>
__global__ void dense_kernel(const __grid_constant__ soren_gpu_map_args a, uint32_t)
{
    typedef stage_traits<Desc, I> S;
    typedef typename value_of<S::value_type>::type T;
    extern __shared__ __align__(16) unsigned long long shared[];

    emit_ctx c = {&a, SOREN_GPU_DENSE, nullptr, nullptr, nullptr, nullptr, 0, InBlock, Fold};
    if constexpr (InBlock)
        shared_setup<SOREN_GPU_DENSE, T>(&c, a, launch_identity<S::op, S::value_type>(a), shared);
    if constexpr (Small != 0)
        dense_small_records<Desc, I, Small>(a, &c);
    else if (a.input_format == SOREN_GPU_FIXED)
        dense_records<Desc, I, SOREN_GPU_FIXED>(a, &c);
    else
        dense_records<Desc, I, 0>(a, &c);
    if constexpr (InBlock)
        shared_flush<SOREN_GPU_DENSE, S::op, S::value_type, S::user_combine>(&c, a);
}

/* The dense kernel for a launch's array and records: small fixed records
 * read in groups where the array lies in the block, where an emit costs
 * least and the loads weigh most (in the global array's kernel too, the
 * map's copies would add as much again to a plugin's code); the global
 * array's emits folded by the warp in a launch of FOLD_RECORDS_MIN records
 * or more. */
template <const auto &Desc, uint32_t I>
__host__ inline void (*dense_kernel_for(const soren_gpu_map_args &a))(soren_gpu_map_args, uint32_t)
{
    typedef stage_traits<Desc, I> S;
    if (!a.shared_bytes)
        return a.record_count >= FOLD_RECORDS_MIN
                   ? dense_kernel<Desc, I, false, 0, warp_foldable<S::op, S::value_type>>
                   : dense_kernel<Desc, I, false, 0>;
    if (a.input_format == SOREN_GPU_FIXED) {
        switch (a.record_size) {
        case 1: return dense_kernel<Desc, I, true, 1>;
        case 2: return dense_kernel<Desc, I, true, 2>;
        case 3: return dense_kernel<Desc, I, true, 3>;
        case 4: return dense_kernel<Desc, I, true, 4>;
        }
    }
    return dense_kernel<Desc, I, true, 0>;
}

/* The map kernel of a launch's variant; NULL for a variant that does not
 * apply to the stage (the host never asks for one), so that no plugin
 * compiles kernels it cannot use.  A fold (fold_pairs) has monitoring and
 * hash, for a stage with a combine (a count's partial counts add) and keys
 * other than index keys (which fold on the CPU: there are few of them). */
template <const auto &Desc, uint32_t I>
__host__ inline void (*map_kernel_for(const soren_gpu_map_args &a))(soren_gpu_map_args, uint32_t)
{
    typedef stage_traits<Desc, I> S;
    constexpr bool combines = S::op != SOREN_COMBINE_NONE;
    const uint32_t variant = a.variant;
    if (a.fold_pairs) {
        if constexpr (combines && S::key_type != SOREN_TYPE_INDEX) {
            if (variant == SOREN_GPU_MONITOR)
                return map_kernel<Desc, I, SOREN_GPU_MONITOR, true>;
            if (variant == SOREN_GPU_HASH)
                return map_kernel<Desc, I, SOREN_GPU_HASH, true>;
        }
        return nullptr;
    }
    switch (variant) {
    case SOREN_GPU_MONITOR: return map_kernel<Desc, I, SOREN_GPU_MONITOR>;
    case SOREN_GPU_DIRECT: return map_kernel<Desc, I, SOREN_GPU_DIRECT>;
    case SOREN_GPU_SORT_COUNT: return map_kernel<Desc, I, SOREN_GPU_SORT_COUNT>;
    case SOREN_GPU_SORT_WRITE: return map_kernel<Desc, I, SOREN_GPU_SORT_WRITE>;
    case SOREN_GPU_HASH:
        if constexpr (combines)
            return map_kernel<Desc, I, SOREN_GPU_HASH>;
        break;
    case SOREN_GPU_BLOCK: /* a hash launch whose per-block table holds the key set */
        if constexpr (combines)
            return map_kernel<Desc, I, SOREN_GPU_HASH>;
        break;
    case SOREN_GPU_DENSE:
        if constexpr (combines && S::key_type == SOREN_TYPE_INDEX)
            return dense_kernel_for<Desc, I>(a);
        break;
    case SOREN_GPU_GROUP:
        if constexpr (!combines && S::reduce != nullptr)
            return map_kernel<Desc, I, SOREN_GPU_GROUP>;
        break;
    case SOREN_GPU_REDUCE:
        if constexpr (S::reduce != nullptr)
            return map_kernel<Desc, I, SOREN_GPU_REDUCE>;
        break;
    }
    return nullptr;
}

template <const auto &Desc, uint32_t I>
__global__ void combine_kernel(const __grid_constant__ soren_gpu_combine_args a,
                               uint32_t value_size)
{
    typedef stage_traits<Desc, I> S;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += stride)
        combine_into<S::op, S::value_type, S::user_combine>(
            (uint8_t *)a.accumulators + a.target[i] * value_size,
            (const uint8_t *)a.values + i * value_size);
}

template <const auto &Desc, uint32_t I>
__global__ void identity_kernel(void *values, uint64_t count,
                                typename value_of<stage_traits<Desc, I>::value_type>::type user)
{
    typedef stage_traits<Desc, I> S;
    typedef typename value_of<S::value_type>::type T;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
        ((T *)values)[i] = S::op == SOREN_COMBINE_USER ? user : identity<S::op, S::value_type>();
}

} /* namespace soren */

#endif /* SOREN_ENGINE_MAP_CUH */
