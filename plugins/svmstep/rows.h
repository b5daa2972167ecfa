/*
 * rows.h - svmstep's kernel rows kept between steps: K(x_a, x_i) found where
 * it was kept, or computed and kept.
 *
 * The rows live in the job's scratch parameter `rows`: slots of n entries,
 * in sets of about SVM_WAYS slots (of one slot where every row has one),
 * row a in any slot of set a mod sets.  Task i keeps, in its own entry of a
 * slot, K(x_a, x_i) with a tag: a's number plus one (0: empty, as the zeroed
 * memory starts) and the entry's last use, counted in the set.  A row asked
 * for again becomes the set's most recent.  A row not kept takes an empty
 * slot, else the slot of a row not asked for again since it came in, else
 * the least recently used one, and enters below every row asked for again:
 * it stays only if it is asked for again before the set's next miss (LRU
 * insertion: SMO visits many points once, which would otherwise push out the
 * rows it comes back to).  A task reads and writes only its own entries and
 * checks the number, so an entry another row took since, or one never
 * written on this device, is computed again: the value is K's bits either
 * way.  Every task asks for the same rows in the same order, so all keep the
 * same rows.  Plain C beside CUDA: the tests include it with an svm_kernel
 * of their own.
 */
#ifndef SVMSTEP_ROWS_H
#define SVMSTEP_ROWS_H

#include <soren/soren.h>

#define SVM_WAYS 8

#if defined(__CUDACC__)
#define SVM_ALIGN16 __align__(16)
#else
#define SVM_ALIGN16 __attribute__((aligned(16)))
#endif

typedef struct SVM_ALIGN16 svm_cached {
    double k;
    uint64_t tag; /* last use << 32 | a + 1 */
} svm_cached;

/* K(x_a, x_i) from `slots` slots of n entries at rows, computed by
 * svm_kernel, which the file including this one defines, and kept where row
 * a is not found. */
SOREN_FN double svm_rows_k(svm_cached *rows, uint64_t slots, const float *x, uint64_t n,
                           uint64_t d, uint64_t a, uint64_t i, double gamma)
{
    /* where every row has a slot, row a keeps slot a (one load a lookup);
     * else sets of SVM_WAYS slots or a few more, the first slots % sets
     * sets taking one each of the slots the division leaves */
    const uint64_t sets = slots >= n ? slots : slots > SVM_WAYS ? slots / SVM_WAYS : 1;
    const uint64_t set = a % sets, ways = slots / sets + (set < slots % sets);
    const uint64_t first = set * (slots / sets) + (set < slots % sets ? set : slots % sets);
    svm_cached *entry = rows + first * n + i;
    uint64_t found = ways, victim = 0, victim_rank = ~0ull;
    uint32_t last = 0, found_use = 0;
    double k = 0;
    for (uint64_t w = 0; w < ways; w++) {
        const svm_cached e = entry[w * n];
        const uint32_t use = (uint32_t)(e.tag >> 32), row = (uint32_t)e.tag;
        if (row == a + 1) {
            found = w;
            found_use = use;
            k = e.k;
        }
        if (use > last)
            last = use;
        const uint64_t rank = (uint64_t)use << 1 | (row != 0); /* empty slots first */
        if (rank < victim_rank) {
            victim_rank = rank;
            victim = w;
        }
    }
    if (found < ways) {
        /* a set stops counting at 2^32 - 1 uses: what it gives up is then
         * not the least recent, and what it keeps still K's bits */
        if (found_use == 0 || found_use != last)
            entry[found * n].tag = (uint64_t)(last == 0xffffffffu ? last : last + 1) << 32 |
                                   (a + 1);
        return k;
    }
    const svm_cached kept = {svm_kernel(x, d, a, i, gamma), a + 1};
    entry[victim * n] = kept;
    return kept.k;
}

#endif /* SVMSTEP_ROWS_H */
