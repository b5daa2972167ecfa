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

/* Record i of a sample of n out of total records (i < n <= total): spread
 * evenly, the same on the CPU and the GPU, without 64-bit overflow. */
SOREN__INLINE uint64_t soren__sample_record(uint64_t i, uint64_t n, uint64_t total)
{
    return i * (total / n) + (i * (total % n)) / n;
}

#endif /* SOREN_ENGINE_SKETCH_H */
