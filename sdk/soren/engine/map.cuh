/*
 * map.cuh - the map kernels of the GPU engine's variants, with the plugin's
 * functions inlined into them.
 *
 * One thread runs map over one record at a time (a grid-stride loop), and
 * soren_emit delivers each pair as the launch's variant says:
 *   hash        find or claim the key's slot in the global table (linear
 *               probing; a slot is claimed by atomicCAS of (hash, key ref))
 *               and fold the value into the slot's accumulator;
 *   direct      store the key once in the key space and the pair at an
 *               index claimed with atomicAdd (no counting pass);
 *   sort count  count the record's pairs and key bytes (Mars MAP_COUNT);
 *   sort write  write them at the record's scanned offsets (Mars MAP).
 * A key that breaks the manifest's rules, or a region that runs out, sets a
 * status bit; the host reports it.
 */
#ifndef SOREN_ENGINE_MAP_CUH
#define SOREN_ENGINE_MAP_CUH

#include <soren/engine/combine.cuh>
#include <soren/soren.h>

namespace soren {

enum { EMIT_RECORD = 0, EMIT_PAIRS, EMIT_KEY_BYTES, EMIT_STAGE };

__device__ inline uint64_t hash_key(const uint8_t *p, uint32_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    /* FNV leaves the high bits weak; the slot index uses the low bits and
     * the tag the high ones, so mix both. */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

/* Bytes a key of n bytes occupies in the key space: its size, then its
 * bytes, padded to 4. */
__device__ inline uint64_t key_footprint(uint32_t n) { return (4ull + n + 3) & ~3ull; }

__device__ inline void store_key(const soren_gpu_map_args *a, uint64_t offset, const uint8_t *k,
                                 uint32_t n)
{
    uint8_t *dst = a->keys + offset;
    *(uint32_t *)dst = n;
    for (uint32_t i = 0; i < n; i++)
        dst[4 + i] = k[i];
}

/* Copies the key into the key space; returns its ref, or 0 when full. */
__device__ inline uint32_t alloc_key(const soren_gpu_map_args *a, const uint8_t *k, uint32_t n)
{
    uint64_t need = key_footprint(n);
    uint64_t offset = atomicAdd(a->keys_used, (unsigned long long)need);
    if (offset + need > a->keys_capacity || (offset >> 2) > 0xffffffffull) {
        atomicOr(a->status, SOREN_GPU_KEYS_FULL);
        return 0;
    }
    store_key(a, offset, k, n);
    /* The bytes must be visible before the ref that publishes them. */
    __threadfence();
    return (uint32_t)(offset >> 2);
}

/* Does the stored key `ref` equal k?  Stored keys are read through L2 only
 * (ld.cg): a line of the key space may sit in this SM's L1 from before
 * another SM wrote the key. */
__device__ inline bool key_equals(const soren_gpu_map_args *a, uint32_t ref, const uint8_t *k,
                                  uint32_t n)
{
    const uint8_t *stored = a->keys + ((uint64_t)ref << 2);
    if (__ldcg((const unsigned int *)stored) != n)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if ((uint8_t)__ldcg((const unsigned char *)stored + 4 + i) != k[i])
            return false;
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

template <uint32_t Op, uint32_t VType, soren_combine_fn *UserFn>
__device__ inline void hash_insert(const soren_gpu_map_args *a, const uint8_t *k, uint32_t n,
                                   const void *v)
{
    uint64_t h = hash_key(k, n);
    unsigned long long tag = h & 0xffffffff00000000ull;
    uint64_t mask = a->slot_count - 1;
    uint32_t ref = 0;
    uint64_t i = h & mask;
    for (uint64_t probe = 0; probe < a->slot_count; probe++, i = (i + 1) & mask) {
        unsigned long long seen = __ldcg(&a->slots[i]);
        if (seen == 0) {
            /* Claim the slot with our key (stored once, on first need). */
            if (!ref && !(ref = alloc_key(a, k, n)))
                return;
            seen = atomicCAS(&a->slots[i], 0ull, tag | ref);
            if (seen == 0) {
                combine_into<Op, VType, UserFn>((uint8_t *)a->slot_values + i * a->value_size, v);
                return;
            }
        }
        if ((seen & 0xffffffff00000000ull) == tag && key_equals(a, (uint32_t)seen, k, n)) {
            combine_into<Op, VType, UserFn>((uint8_t *)a->slot_values + i * a->value_size, v);
            return;
        }
    }
    atomicOr(a->status, SOREN_GPU_TABLE_FULL);
}

__device__ inline void store_value(void *dst, const void *v, uint32_t size)
{
    if (size == 4)
        *(uint32_t *)dst = *(const uint32_t *)v;
    else
        *(uint64_t *)dst = *(const uint64_t *)v;
}

__device__ inline void direct_append(const soren_gpu_map_args *a, const uint8_t *k, uint32_t n,
                                     const void *v)
{
    uint32_t ref = alloc_key(a, k, n);
    if (!ref)
        return;
    unsigned long long idx = atomicAdd(a->pairs_used, 1ull);
    if (idx >= a->pair_capacity) {
        atomicOr(a->status, SOREN_GPU_PAIRS_FULL);
        return;
    }
    a->pair_keys[idx] = ref;
    store_value((uint8_t *)a->pair_values + idx * a->value_size, v, a->value_size);
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
};

template <const auto &Desc, uint32_t I>
__device__ inline void emit_stage(soren_emitter *e, const void *key, uint32_t n, const void *v)
{
    typedef stage_traits<Desc, I> S;
    const soren_gpu_map_args *a = (const soren_gpu_map_args *)e->ctx;
    if (!key_ok<S::key_type>(a, key, n))
        return;
    const uint8_t *k = (const uint8_t *)key;
    switch (a->variant) {
    case SOREN_GPU_HASH:
        hash_insert<S::op, S::value_type, S::user_combine>(a, k, n, v);
        break;
    case SOREN_GPU_DIRECT:
        direct_append(a, k, n, v);
        break;
    case SOREN_GPU_SORT_WRITE:
        sort_write(e, a, k, n, v);
        break;
    }
    e->state[EMIT_PAIRS]++;
    e->state[EMIT_KEY_BYTES] += key_footprint(n);
}

template <const auto &Desc, uint32_t Count, uint32_t I = 0>
__device__ inline void emit_any(soren_emitter *e, const void *key, uint32_t n, const void *v)
{
    if constexpr (I < Count) {
        if (e->state[EMIT_STAGE] == I)
            emit_stage<Desc, I>(e, key, n, v);
        else
            emit_any<Desc, Count, I + 1>(e, key, n, v);
    }
}

template <const auto &Desc, uint32_t I>
__global__ void map_kernel(const __grid_constant__ soren_gpu_map_args a)
{
    constexpr soren_map_fn *map = stage_traits<Desc, I>::map;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t r = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; r < a.record_count;
         r += stride) {
        soren_record rec;
        if (a.input_format == SOREN_GPU_FIXED) {
            rec.offset = r * a.record_size;
            rec.size = a.record_size;
            rec.index = r;
        } else {
            rec.offset = a.line_starts[r];
            rec.size = a.line_starts[r + 1] - 1 - rec.offset;
            rec.index = rec.offset;
        }
        rec.data = a.input + rec.offset;
        soren_emitter e;
        e.emit = 0;
        e.ctx = (void *)&a;
        e.state[EMIT_RECORD] = r;
        e.state[EMIT_PAIRS] = 0;
        e.state[EMIT_KEY_BYTES] = 0;
        e.state[EMIT_STAGE] = I;
        map(&e, &rec, &a.params);
        if (a.variant == SOREN_GPU_SORT_COUNT) {
            a.record_pairs[r] = e.state[EMIT_PAIRS];
            a.record_key_bytes[r] = e.state[EMIT_KEY_BYTES];
        }
        /* Stop early once a region is full or a key was refused: the run
         * fails, so the rest of the work would be wasted. */
        if (*(volatile unsigned int *)a.status)
            break;
    }
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
