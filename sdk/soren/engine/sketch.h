/*
 * sketch.h - the key hash every engine uses, and the HyperLogLog registers
 * initial monitoring estimates distinct keys with.  Compiled by C (the CPU
 * engine) and by CUDA (the plugins' device code), so both count the same way.
 *
 * A sketch has SOREN_SKETCH_REGISTERS registers; a key's hash picks the
 * register with its top SOREN_SKETCH_BITS bits, and the register keeps the
 * largest rank seen (1 + the leading zeros of the remaining bits).
 */
#ifndef SOREN_ENGINE_SKETCH_H
#define SOREN_ENGINE_SKETCH_H

#include <soren/soren.h>

#define SOREN_SKETCH_BITS 12
#define SOREN_SKETCH_REGISTERS (1u << SOREN_SKETCH_BITS)

/* FNV-1a over the bytes, then a 64-bit finalizer: FNV leaves the high bits
 * weak, and the table uses the low bits, the sketch and the slot tags the
 * high ones. */
SOREN__INLINE uint64_t soren__key_hash(const uint8_t *p, uint32_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

SOREN__INLINE uint32_t soren__sketch_register(uint64_t h)
{
    return (uint32_t)(h >> (64 - SOREN_SKETCH_BITS));
}

SOREN__INLINE uint32_t soren__sketch_rank(uint64_t h)
{
    uint64_t rest = h << SOREN_SKETCH_BITS;
    if (rest == 0)
        return 64 - SOREN_SKETCH_BITS + 1;
#if defined(__CUDA_ARCH__)
    return (uint32_t)__clzll((long long)rest) + 1;
#else
    return (uint32_t)__builtin_clzll(rest) + 1;
#endif
}

/* Item i of n spread evenly over [0, total) (i < n <= total), without
 * 64-bit overflow. */
SOREN__INLINE uint64_t soren__spread(uint64_t i, uint64_t n, uint64_t total)
{
    return i * (total / n) + (i * (total % n)) / n;
}

/* The sample takes runs of this many consecutive records: neighbouring
 * threads of a warp then read neighbouring records, as they do in map,
 * where single records spread over the input cost the GPU several times
 * their bytes. */
#define SOREN_SAMPLE_RUN 32

/* Record i of a sample of n out of total records (i < n <= total), the same
 * on the CPU and the GPU: runs of SOREN_SAMPLE_RUN records at whole-run
 * positions spread evenly, or single records spread evenly where the sample
 * is too dense for whole runs. */
SOREN__INLINE uint64_t soren__sample_record(uint64_t i, uint64_t n, uint64_t total)
{
    uint64_t runs = (n + SOREN_SAMPLE_RUN - 1) / SOREN_SAMPLE_RUN;
    uint64_t chunks = total / SOREN_SAMPLE_RUN;
    if (runs > chunks)
        return soren__spread(i, n, total);
    return soren__spread(i / SOREN_SAMPLE_RUN, runs, chunks) * SOREN_SAMPLE_RUN +
           i % SOREN_SAMPLE_RUN;
}

#endif /* SOREN_ENGINE_SKETCH_H */
