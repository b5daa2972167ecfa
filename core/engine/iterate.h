/*
 * iterate.h - feeding a job's output back into one of its parameters, for
 * `soren-host run --iterate N` (the manifest's "iterate": {"param": NAME}).
 *
 * Between two runs every output pair (i, v) overwrites element i of the
 * parameter's bytes: the value's size in bytes from byte i x that size (for
 * k-means, the centroids' sums and counts).  Elements no pair names keep
 * their bytes.  A run whose output changes no byte has converged: the next
 * run would read the same parameter and compute the same output.
 */
#ifndef SOREN_ITERATE_H
#define SOREN_ITERATE_H

#include <stdint.h>

#include "../base/result.h"
#include "../error.h"

/* Writes (write != 0) or only compares (write == 0) every pair of res over
 * the elements of data[0 .. size), the keys (u32, u64 or index) numbering
 * them; *changed says whether any byte differs.  what names the parameter
 * in messages ("kmeans: parameter centroids").  Writing, a key past the end
 * is a SOREN_EJOB error naming the key and the size, with data untouched;
 * comparing, it only counts as a change.  Other key types are SOREN_EJOB
 * errors. */
soren_status soren_iterate_feed(const soren_result *res, uint8_t *data, uint64_t size,
                                const char *what, int write, int *changed, soren_error *err);

#endif /* SOREN_ITERATE_H */
