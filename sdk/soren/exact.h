/*
 * exact.h - floating point that gives the same bits on the CPU and the GPU.
 *
 * Every engine must write the same bytes for the same input, so a plugin
 * whose map computes with doubles must not let the two compilers differ.
 * They differ in two ways.  nvcc fuses a product and a sum into one fused
 * multiply-add on the device, and a host compiler does the same where the
 * target has FMA (aarch64 always, x86-64 with -mfma); a fused result is
 * rounded once, a separate product and sum twice.  And the device's exp,
 * log and pow are not the host libm's.  Sums, differences, quotients and
 * square roots are correctly rounded on both (IEEE 754), so only products
 * and library functions need care:
 *
 *   soren_mul(a, b)   a * b rounded on its own, never fused into a sum;
 *   soren_exp(x)      e^x from those operations alone (within one unit in
 *                     the last place), the same bits everywhere.
 *
 *     double d = soren_mul(x - c, x - c);     // a squared difference
 *     double k = soren_exp(soren_mul(-gamma, distance));
 */
#ifndef SOREN_EXACT_H
#define SOREN_EXACT_H

#include <stdint.h>
#include <string.h>

#include <soren/soren.h>

#if defined(__CUDA_ARCH__)
SOREN__INLINE double soren_mul(double a, double b)
{
    return __dmul_rn(a, b); /* never contracted into an FMA */
}
#else
SOREN__INLINE double soren_mul(double a, double b)
{
    /* The rounded product goes through an empty asm that may have changed
     * it: a compiler cannot fuse a product it no longer knows into the sum
     * that uses it.  The product stays in its register (a volatile store
     * and load cost a step of every sum's chain). */
    double p = a * b;
#if defined(__x86_64__)
    __asm__("" : "+x"(p));
#elif defined(__aarch64__)
    __asm__("" : "+w"(p));
#else
    volatile double stored = p;
    p = stored;
#endif
    return p;
}
#endif

/* e^x: x = k ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts, the first
 * with its low bits zero so that k times it is exact), e^r by its Taylor
 * series to r^13 (the 14th term is under 2^-60 of the sum), then 2^k put
 * into the exponent in two steps, so that results down to the smallest
 * subnormal come out right.  Within one unit in the last place of glibc's
 * exp on 2 million points of [-740, 710]. */
SOREN__INLINE double soren_exp(double x)
{
    const double ln2_hi = 6.93147180369123816490e-01; /* 0x3fe62e42fee00000 */
    const double ln2_lo = 1.90821492927058770002e-10; /* ln 2 - ln2_hi */
    const double inv_ln2 = 1.44269504088896338700e+00;
    if (x != x)
        return x;
    if (x > 709.782712893384) {
        const uint64_t inf_bits = 0x7ff0000000000000ull;
        double inf;
        memcpy(&inf, &inf_bits, sizeof inf);
        return inf;
    }
    if (x < -745.1332191019412)
        return 0.0;
    double kd = soren_mul(x, inv_ln2);
    int64_t k = (int64_t)(kd < 0 ? kd - 0.5 : kd + 0.5);
    double r = (x - soren_mul((double)k, ln2_hi)) - soren_mul((double)k, ln2_lo);
    /* e^r - 1 = r (1 + r (1/2! + r (1/3! + ...))), by Horner's rule from the
     * highest term, then 1 added last: the small terms are summed before
     * they meet the large ones. */
    static const double inv_factorial[] = {
        1.0,                    1.0 / 2,           1.0 / 6,           1.0 / 24,
        1.0 / 120,              1.0 / 720,         1.0 / 5040,        1.0 / 40320,
        1.0 / 362880,           1.0 / 3628800,     1.0 / 39916800,    1.0 / 479001600,
        1.0 / 6227020800.0};
    double p = inv_factorial[12];
    for (int n = 11; n >= 0; n--)
        p = soren_mul(p, r) + inv_factorial[n];
    double sum = 1.0 + soren_mul(r, p);
    /* 2^k in two halves, each a normal power of two */
    int64_t k1 = k / 2, k2 = k - k1;
    uint64_t b1 = (uint64_t)(k1 + 1023) << 52, b2 = (uint64_t)(k2 + 1023) << 52;
    double s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    return soren_mul(soren_mul(sum, s1), s2);
}

#endif /* SOREN_EXACT_H */
