/*
 * find.h - every occurrence of a literal pattern in a record.
 *
 *     soren_find f;
 *     soren_find_init(&f, pattern, pattern_size, r->data, r->size);
 *     for (uint64_t at; soren_find_next(&f, &at);)
 *         ... pattern lies at r->data[at ..] ...
 *
 * Occurrences come in increasing order, overlapping ones included ("aa" is
 * at 0, 1 and 2 in "aaaa"); an empty pattern has none.  The search is
 * Crochemore and Perrin's Two-Way algorithm: time linear in the pattern's
 * and the text's sizes together (at most 2n comparisons for n text bytes
 * after O(m) for the pattern) and no table, so a map function can run it on
 * a GPU thread with a pattern of any size.  The pattern is cut at a
 * critical factorization u v (u from the larger of the two maximal suffixes
 * under opposite byte orders); a window is checked by comparing v left to
 * right, then u right to left, and a mismatch in v shifts the window past
 * the bytes that matched.  Where u is a suffix of v's first period, a
 * window after a match shifts by that period and remembers the bytes of the
 * pattern it knows to match, which keeps overlapping matches linear.  On
 * the host, a pattern of up to 16 bytes is first looked for on its own, so
 * that a record without it costs no factorization: with SSE2, sixteen
 * windows at a time, comparing only those whose first and last bytes both
 * match (a pattern's first byte alone, as the "t" of "the", is common in
 * text and stops a memchr every few bytes); elsewhere with memchr and
 * memcmp.  Then memchr takes the search to the next window whose v can
 * begin to match (its first byte in place).  The device compares byte by
 * byte.
 */
#ifndef SOREN_FIND_H
#define SOREN_FIND_H

#include <soren/soren.h>

#ifndef __CUDA_ARCH__
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#endif

/* The host scans for a pattern of up to this many bytes before setting up
 * the search: each place its first byte is found costs at most this many
 * compares, so the time stays linear. */
#define SOREN__FIND_SCAN_MAX 16

typedef struct soren_find {
    const uint8_t *pattern;
    int64_t m;
    const uint8_t *text;
    int64_t n;
    int64_t ell;    /* u is pattern[0 .. ell], v the rest (ell is -1 for an empty u) */
    int64_t period; /* the shift after a window whose v matched */
    int periodic;   /* whether u is a suffix of v's first period (memory is kept) */
    int64_t at;     /* the next window's start in text */
    int64_t memory; /* periodic: pattern[0 .. memory] is known to match at `at` */
} soren_find;

/* The maximal suffix of x[0 .. m) under byte order (reverse: the opposite
 * one): returns the index before it (-1 for all of x) and sets *period to
 * the suffix's period. */
SOREN__INLINE int64_t soren__max_suffix(const uint8_t *x, int64_t m, int reverse,
                                        int64_t *period)
{
    int64_t ms = -1, j = 0, k = 1, p = 1;
    while (j + k < m) {
        uint8_t a = x[j + k], b = x[ms + k];
        if (a == b) {
            if (k != p) {
                k++;
            } else {
                j += p;
                k = 1;
            }
        } else if ((a < b) != (reverse != 0)) {
            j += k;
            k = 1;
            p = j - ms;
        } else {
            ms = j;
            j = ms + 1;
            k = p = 1;
        }
    }
    *period = p;
    return ms;
}

#ifndef __CUDA_ARCH__
/* The first window of y[0 .. n) that holds x[0 .. m), 1 <= m <= n, or
 * NULL: each window whose first byte matches is compared whole, and with
 * SSE2 only those whose last byte matches too. */
SOREN__INLINE const uint8_t *soren__find_scan(const uint8_t *x, int64_t m, const uint8_t *y,
                                              int64_t n)
{
    const uint8_t *at = y, *last = y + (n - m);
#if defined(__SSE2__)
    const __m128i first = _mm_set1_epi8((char)x[0]), final = _mm_set1_epi8((char)x[m - 1]);
    /* windows at .. at + 15, whose last bytes end at or before y[n - 1] */
    for (; last - at >= 15; at += 16) {
        const __m128i a = _mm_loadu_si128((const __m128i *)at);
        const __m128i b = _mm_loadu_si128((const __m128i *)(at + m - 1));
        unsigned both = (unsigned)_mm_movemask_epi8(
            _mm_and_si128(_mm_cmpeq_epi8(a, first), _mm_cmpeq_epi8(b, final)));
        for (; both; both &= both - 1) {
            const uint8_t *w = at + __builtin_ctz(both);
            if (memcmp(w + 1, x + 1, (size_t)(m - 1)) == 0)
                return w;
        }
    }
#endif
    for (; at <= last && (at = (const uint8_t *)memchr(at, x[0], (size_t)(last - at) + 1));
         at++)
        if (memcmp(at + 1, x + 1, (size_t)(m - 1)) == 0)
            return at;
    return NULL;
}
#endif

/* Prepares the search for pattern[0 .. m) in text[0 .. n); both must stay
 * alive until the last soren_find_next. */
SOREN__INLINE void soren_find_init(soren_find *f, const void *pattern, uint64_t m,
                                   const void *text, uint64_t n)
{
    f->pattern = (const uint8_t *)pattern;
    f->m = (int64_t)m;
    f->text = (const uint8_t *)text;
    f->n = (int64_t)n;
    f->at = 0;
    f->memory = -1;
    f->ell = -1;
    f->period = 1;
    f->periodic = 0;
    if (m == 0 || m > n)
        return;
#ifndef __CUDA_ARCH__
    if (m <= SOREN__FIND_SCAN_MAX) {
        /* A record without a short pattern (most, for a rare one) ends
         * here, before the factorization; else the search starts at its
         * first occurrence. */
        const uint8_t *first = soren__find_scan(f->pattern, f->m, f->text, f->n);
        if (!first) {
            f->at = f->n - f->m + 1;
            return;
        }
        f->at = first - f->text;
    }
#endif
    int64_t p, q;
    int64_t i = soren__max_suffix(f->pattern, f->m, 0, &p);
    int64_t j = soren__max_suffix(f->pattern, f->m, 1, &q);
    f->ell = i > j ? i : j;
    f->period = i > j ? p : q;
    /* u a suffix of pattern[period .. period + ell] (the period is v's,
     * at most v's size, so the bytes compared lie in the pattern) */
    int periodic = 1;
    for (int64_t k = 0; k <= f->ell && periodic; k++)
        periodic = f->pattern[k] == f->pattern[f->period + k];
    f->periodic = periodic;
    if (!periodic) {
        /* no two occurrences overlap by more than this allows */
        int64_t left = f->ell + 1, right = f->m - f->ell - 1;
        f->period = (left > right ? left : right) + 1;
    }
}

/* Sets *at to the next occurrence and returns 1, or returns 0 when none is
 * left. */
SOREN__INLINE int soren_find_next(soren_find *f, uint64_t *at)
{
    const uint8_t *x = f->pattern, *y = f->text;
    const int64_t m = f->m, ell = f->ell;
    if (m == 0)
        return 0;
    while (f->at <= f->n - m) {
#ifndef __CUDA_ARCH__
        /* On the host, memchr finds the next window whose v can begin to
         * match: the windows it passes would each mismatch at v's first
         * byte and shift by one (and a match's memory is only of the
         * window right after it). */
        if (ell + 1 < m && (!f->periodic || f->memory <= ell)) {
            const uint8_t *v = (const uint8_t *)memchr(y + f->at + ell + 1, x[ell + 1],
                                                       (size_t)(f->n - m - f->at + 1));
            if (!v) {
                f->at = f->n - m + 1;
                return 0;
            }
            if (v - y - (ell + 1) != f->at) {
                f->at = v - y - (ell + 1);
                f->memory = -1;
            }
        }
#endif
        const int64_t j = f->at, memory = f->periodic ? f->memory : -1;
        int64_t i = (ell > memory ? ell : memory) + 1;
        while (i < m && x[i] == y[i + j])
            i++;
        if (i < m) { /* v mismatched at i: no occurrence starts before j + i - ell */
            f->at = j + (i - ell);
            f->memory = -1;
            continue;
        }
        i = ell;
        while (i > memory && x[i] == y[i + j])
            i--;
        f->at = j + f->period;
        f->memory = m - f->period - 1;
        if (i <= memory) {
            *at = (uint64_t)j;
            return 1;
        }
    }
    return 0;
}

#endif /* SOREN_FIND_H */
