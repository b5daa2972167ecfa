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

/* Up to 8 bytes of a key as a little-endian word, zero-padded.  The loop has
 * a fixed trip count, so on the GPU the lanes of a warp hashing keys of
 * different lengths stay together (the byte loads are predicated). */
SOREN__INLINE uint64_t soren__key_word(const uint8_t *p, uint32_t n)
{
    uint64_t w = 0;
    for (uint32_t i = 0; i < 8; i++)
        if (i < n)
            w |= (uint64_t)p[i] << (8 * i);
    return w;
}

/* The key hash: 8 bytes a step, each word multiplied in and the state
 * rotated, then the 64-bit finalizer of MurmurHash3, so every input bit
 * reaches the low bits (the table's index) and the high ones (the sketch's
 * register and rank, the slots' tags).  One multiply per 8 bytes keeps the
 * dependent chain short on the GPU, where FNV's multiply per byte did not. */
SOREN__INLINE uint64_t soren__key_hash(const uint8_t *p, uint32_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)n * 0xc2b2ae3d27d4eb4full);
    for (uint32_t i = 0; i < n; i += 8) {
        uint64_t w = soren__key_word(p + i, n - i) * 0x87c37b91114253d5ull;
        h ^= (w << 31) | (w >> 33);
        h = ((h << 27) | (h >> 37)) * 5 + 0x52dce729ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

/* The GPU key space stores a key as a 4-byte size, then its bytes, zero
 * padded to a multiple of 16: one 16-byte load reads the size and the first
 * 12 bytes, so most keys compare in one load.  Monitoring counts keys this
 * way on both engines, and the key space is projected from it. */
#define SOREN_KEY_ALIGN 16
SOREN__INLINE uint64_t soren__key_footprint(uint32_t n)
{
    return (4ull + n + SOREN_KEY_ALIGN - 1) & ~(uint64_t)(SOREN_KEY_ALIGN - 1);
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
