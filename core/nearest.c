#include "nearest.h"

#include <string.h>

#define NEAREST_MAX_BYTES 64
#define NEAREST_MAX_EDITS 2

/* The optimal string alignment distance of a and b, each at most
 * NEAREST_MAX_BYTES long: three rows of the dynamic programme. */
static size_t distance(const char *a, size_t na, const char *b, size_t nb)
{
    size_t rows[3][NEAREST_MAX_BYTES + 1];
    size_t *before = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= nb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = prev[j - 1] + cost;
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                before[j - 2] + 1 < best)
                best = before[j - 2] + 1;
            cur[j] = best;
        }
        size_t *spare = before;
        before = prev;
        prev = cur;
        cur = spare;
    }
    return prev[nb];
}

const char *soren__nearest(const char *word, const char *const *candidates, size_t count)
{
    size_t n = strlen(word);
    if (n == 0 || n > NEAREST_MAX_BYTES)
        return NULL;
    const char *best = NULL;
    size_t best_edits = NEAREST_MAX_EDITS + 1;
    for (size_t i = 0; i < count; i++) {
        size_t m = strlen(candidates[i]);
        if (m > NEAREST_MAX_BYTES || (m > n ? m - n : n - m) >= best_edits)
            continue;
        size_t d = distance(word, n, candidates[i], m);
        if (d < best_edits && d < n && d > 0) {
            best = candidates[i];
            best_edits = d;
        }
    }
    return best;
}
