/*
 * result.h - the pairs a stage produced, and their final order.
 *
 * Keys are stored packed: key i is key_bytes[key_offset[i] .. key_offset[i+1]).
 * Values are value_size bytes each, packed.  Every engine (CPU or GPU) ends in
 * a soren_result, and output writers read only this.  A soren_result owns its
 * arrays; soren_pairs (soren/host.h) is the same layout as a read-only view,
 * which is what the library's callers, and the GPU session's device result,
 * are given.
 */
#ifndef SOREN_RESULT_H
#define SOREN_RESULT_H

#include <stddef.h>
#include <stdint.h>

#include <soren/host.h>

#include "../error.h"
#include "stage.h"

typedef struct soren_result {
    uint64_t count;
    uint8_t *key_bytes;
    uint64_t *key_offset; /* count + 1 entries; NULL while count == 0 */
    uint8_t *values;      /* count * value_size bytes */
    size_t value_size;
    soren_type key_type;
    soren_type value_type;
    /* Private to result.c: room allocated for pairs and for key bytes, so
     * appends are amortised.  0 means "exactly what count needs" (arrays
     * built elsewhere are simply reallocated on the next append). */
    uint64_t count_cap;
    uint64_t key_cap;
} soren_result;

void soren_result_init(soren_result *r, const soren_stage_spec *spec);
/* Releases everything r owns and re-initialises it empty. */
void soren_result_destroy(soren_result *r);

/* A view of r's pairs, valid while r is unchanged. */
soren_pairs soren_result_pairs(const soren_result *r);

/* Appends one pair (copying key and value), growing the arrays. */
soren_status soren_result_append(soren_result *r, const void *key, uint32_t key_size,
                                 const void *value, soren_error *err);
/* Appends every pair of src (of the same types) to r. */
soren_status soren_result_append_all(soren_result *r, const soren_result *src, soren_error *err);

/* Compares keys as the key type orders them: strings by bytes (memcmp, then
 * length), integers and index keys numerically, floats by IEEE total order. */
int soren_key_compare(soren_type t, const uint8_t *a, uint64_t a_size, const uint8_t *b,
                      uint64_t b_size);
/* Compares two values of type t numerically (floats by IEEE total order, as
 * keys: -0 before +0, NaNs at the ends by sign, so equal means equal bytes). */
int soren_value_compare(soren_type t, const void *a, const void *b);

/* Puts r in the stage's order and keeps at most spec->limit pairs.
 *   key:        by key, ties (map-only jobs) by value
 *   value_desc: by value descending, ties by key ascending
 *   value_asc:  by value ascending, ties by key ascending
 *   none:       left as the engine produced it
 * The result is a total order on the pairs' content, so two engines that
 * produce the same pairs produce the same bytes. */
soren_status soren_result_order(soren_result *r, soren_order order, uint64_t limit,
                                soren_error *err);

/* soren_result_order for an r whose pairs are runs already in that order:
 * run i ends before pair run_ends[i] (the last run at r->count).  A merge of
 * the runs, O(n log runs) instead of a sort. */
soren_status soren_result_merge_runs(soren_result *r, const uint64_t *run_ends, size_t runs,
                                     soren_order order, uint64_t limit, soren_error *err);

/* The names of the orders (the manifest's output.order and --order),
 * space-separated, in soren_order order. */
extern const char soren_order_names[];
/* Parses an order name; returns 0 and sets *out, or -1 if name is unknown. */
int soren_order_parse(const char *name, soren_order *out);

#endif /* SOREN_RESULT_H */
