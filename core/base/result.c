/* result.c - a stage's pairs, appending to them, and their final order. */
#include "result.h"

#include <stdlib.h>
#include <string.h>

void soren_result_init(soren_result *r, const soren_stage_spec *spec)
{
    *r = (soren_result){
        .value_size = spec->value_size,
        .key_type = spec->key_type,
        .value_type = spec->value_type,
    };
}

void soren_result_destroy(soren_result *r)
{
    free(r->key_bytes);
    free(r->key_offset);
    free(r->values);
    *r = (soren_result){
        .value_size = r->value_size,
        .key_type = r->key_type,
        .value_type = r->value_type,
    };
}

/* Makes room for one more pair of key_size bytes. */
static int result_reserve(soren_result *r, uint64_t key_size)
{
    uint64_t key_used = r->count ? r->key_offset[r->count] : 0;
    uint64_t count_cap = r->count_cap > r->count ? r->count_cap : r->count;
    if (r->count + 1 > count_cap || !r->key_offset) {
        uint64_t cap = count_cap < 64 ? 64 : count_cap * 2;
        uint64_t *off = realloc(r->key_offset, (cap + 1) * sizeof *off);
        if (!off)
            return -1;
        r->key_offset = off;
        if (r->value_size) {
            uint8_t *v = realloc(r->values, cap * r->value_size);
            if (!v)
                return -1;
            r->values = v;
        }
        if (r->count == 0)
            off[0] = 0;
        r->count_cap = cap;
    }
    uint64_t key_cap = r->key_cap > key_used ? r->key_cap : key_used;
    if (key_used + key_size > key_cap || !r->key_bytes) {
        uint64_t cap = key_cap < 1024 ? 1024 : key_cap;
        while (cap < key_used + key_size)
            cap *= 2;
        uint8_t *k = realloc(r->key_bytes, cap);
        if (!k)
            return -1;
        r->key_bytes = k;
        r->key_cap = cap;
    }
    return 0;
}

soren_pairs soren_result_pairs(const soren_result *r)
{
    return (soren_pairs){
        .count = r->count,
        .key_bytes = r->key_bytes,
        .key_offset = r->key_offset,
        .values = r->values,
        .value_size = r->value_size,
        .key_type = r->key_type,
        .value_type = r->value_type,
    };
}

soren_status soren_result_append_all(soren_result *r, const soren_result *src, soren_error *err)
{
    soren_status rc = SOREN_OK;
    for (uint64_t i = 0; rc == SOREN_OK && i < src->count; i++)
        rc = soren_result_append(r, src->key_bytes + src->key_offset[i],
                                 (uint32_t)(src->key_offset[i + 1] - src->key_offset[i]),
                                 src->values + i * src->value_size, err);
    return rc;
}

soren_status soren_result_append(soren_result *r, const void *key, uint32_t key_size,
                                 const void *value, soren_error *err)
{
    if (result_reserve(r, key_size) != 0)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory storing %llu result pairs",
                               (unsigned long long)r->count + 1);
    uint64_t used = r->key_offset[r->count];
    if (key_size)
        memcpy(r->key_bytes + used, key, key_size);
    if (r->value_size)
        memcpy(r->values + r->count * r->value_size, value, r->value_size);
    r->count++;
    r->key_offset[r->count] = used + key_size;
    return SOREN_OK;
}

/* ---- Comparisons --------------------------------------------------------- */

/* IEEE total order as unsigned integers: negatives reversed below positives,
 * so -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN. */
static inline uint32_t f32_order(uint32_t bits)
{
    return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}

static inline uint64_t f64_order(uint64_t bits)
{
    return (bits >> 63) ? ~bits : bits | (UINT64_C(1) << 63);
}

#define CMP(a, b) (((a) > (b)) - ((a) < (b)))

static inline int bytes_compare(const uint8_t *a, uint64_t a_size, const uint8_t *b,
                                uint64_t b_size)
{
    uint64_t n = a_size < b_size ? a_size : b_size;
    int c = n ? memcmp(a, b, (size_t)n) : 0;
    return c ? (c > 0) - (c < 0) : CMP(a_size, b_size);
}

static inline int typed_compare(soren_type t, const void *a, const void *b)
{
    switch (t) {
    case SOREN_TYPE_U32:
    case SOREN_TYPE_INDEX: {
        uint32_t x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        return CMP(x, y);
    }
    case SOREN_TYPE_U64: {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        return CMP(x, y);
    }
    case SOREN_TYPE_I64: {
        int64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        return CMP(x, y);
    }
    case SOREN_TYPE_F32: {
        uint32_t x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        x = f32_order(x);
        y = f32_order(y);
        return CMP(x, y);
    }
    case SOREN_TYPE_F64: {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        x = f64_order(x);
        y = f64_order(y);
        return CMP(x, y);
    }
    default:
        return 0;
    }
}

static inline size_t typed_size(soren_type t)
{
    switch (t) {
    case SOREN_TYPE_U32:
    case SOREN_TYPE_INDEX:
    case SOREN_TYPE_F32:
        return 4;
    case SOREN_TYPE_U64:
    case SOREN_TYPE_I64:
    case SOREN_TYPE_F64:
        return 8;
    default:
        return 0;
    }
}

int soren_key_compare(soren_type t, const uint8_t *a, uint64_t a_size, const uint8_t *b,
                      uint64_t b_size)
{
    size_t ts = typed_size(t);
    /* Strings, and (defensively) typed keys of the wrong size, by bytes. */
    if (ts == 0 || a_size != ts || b_size != ts)
        return bytes_compare(a, a_size, b, b_size);
    return typed_compare(t, a, b);
}

int soren_value_compare(soren_type t, const void *a, const void *b)
{
    return typed_compare(t, a, b);
}

/* ---- Ordering ------------------------------------------------------------ */

typedef struct order_ctx {
    const soren_result *r;
    soren_order order;
} order_ctx;

static int key_of(const order_ctx *c, uint64_t i, const uint8_t **k, uint64_t *n)
{
    *k = c->r->key_bytes + c->r->key_offset[i];
    *n = c->r->key_offset[i + 1] - c->r->key_offset[i];
    return 0;
}

static int pair_compare(const order_ctx *c, uint64_t i, uint64_t j)
{
    const soren_result *r = c->r;
    const uint8_t *ka, *kb;
    uint64_t na, nb;
    key_of(c, i, &ka, &na);
    key_of(c, j, &kb, &nb);
    const uint8_t *va = r->values + i * r->value_size, *vb = r->values + j * r->value_size;
    int k, v;
    switch (c->order) {
    case SOREN_ORDER_VALUE_DESC:
        v = soren_value_compare(r->value_type, vb, va);
        return v ? v : soren_key_compare(r->key_type, ka, na, kb, nb);
    case SOREN_ORDER_VALUE_ASC:
        v = soren_value_compare(r->value_type, va, vb);
        return v ? v : soren_key_compare(r->key_type, ka, na, kb, nb);
    default:
        k = soren_key_compare(r->key_type, ka, na, kb, nb);
        return k ? k : soren_value_compare(r->value_type, va, vb);
    }
}

static int index_compare(const void *a, const void *b, void *ctx)
{
    return pair_compare(ctx, *(const uint64_t *)a, *(const uint64_t *)b);
}

/* Keeps in idx[0 .. k) the k smallest of 0 .. n-1 under the order, in any
 * order: a max-heap of the k best so far, whose top is replaced by anything
 * smaller.  O(n log k) instead of sorting everything for a short top-N. */
static void select_smallest(const order_ctx *c, uint64_t *idx, uint64_t n, uint64_t k)
{
    for (uint64_t i = 0; i < k; i++) {
        /* sift up */
        uint64_t child = i;
        idx[i] = i;
        while (child > 0) {
            uint64_t parent = (child - 1) / 2;
            if (pair_compare(c, idx[parent], idx[child]) >= 0)
                break;
            uint64_t t = idx[parent];
            idx[parent] = idx[child];
            idx[child] = t;
            child = parent;
        }
    }
    for (uint64_t i = k; i < n; i++) {
        if (pair_compare(c, i, idx[0]) >= 0)
            continue;
        idx[0] = i;
        uint64_t p = 0;
        for (;;) {
            uint64_t l = 2 * p + 1, r = l + 1, big = p;
            if (l < k && pair_compare(c, idx[l], idx[big]) > 0)
                big = l;
            if (r < k && pair_compare(c, idx[r], idx[big]) > 0)
                big = r;
            if (big == p)
                break;
            uint64_t t = idx[p];
            idx[p] = idx[big];
            idx[big] = t;
            p = big;
        }
    }
}

static soren_status ordering_out_of_memory(const soren_result *r, soren_error *err)
{
    return soren_error_set(err, SOREN_ENOMEM, "out of memory ordering %llu result pairs",
                           (unsigned long long)r->count);
}

/* Rebuilds r from its pairs idx[0 .. keep), in that order; frees idx. */
static soren_status take_in_order(soren_result *r, uint64_t *idx, uint64_t keep,
                                  soren_error *err)
{
    uint64_t key_total = 0;
    for (uint64_t i = 0; i < keep; i++)
        key_total += r->key_offset[idx[i] + 1] - r->key_offset[idx[i]];
    uint8_t *kb = malloc(key_total ? key_total : 1);
    uint64_t *ko = malloc((keep + 1) * sizeof *ko);
    uint8_t *vb = r->value_size ? malloc(keep ? keep * r->value_size : 1) : NULL;
    if (!kb || !ko || (r->value_size && !vb)) {
        free(kb);
        free(ko);
        free(vb);
        free(idx);
        return ordering_out_of_memory(r, err);
    }
    uint64_t at = 0;
    for (uint64_t i = 0; i < keep; i++) {
        uint64_t j = idx[i];
        uint64_t len = r->key_offset[j + 1] - r->key_offset[j];
        ko[i] = at;
        if (len)
            memcpy(kb + at, r->key_bytes + r->key_offset[j], (size_t)len);
        at += len;
        if (r->value_size)
            memcpy(vb + i * r->value_size, r->values + j * r->value_size, r->value_size);
    }
    ko[keep] = at;
    free(idx);
    free(r->key_bytes);
    free(r->key_offset);
    free(r->values);
    r->key_bytes = kb;
    r->key_offset = ko;
    r->values = vb;
    r->count = keep;
    r->count_cap = keep;
    r->key_cap = key_total ? key_total : 1;
    return SOREN_OK;
}

/* How many pairs an order keeps of n; for none, r keeps its first ones. */
static uint64_t kept(soren_result *r, soren_order order, uint64_t limit)
{
    uint64_t n = r->count, keep = limit && limit < n ? limit : n;
    if (order == SOREN_ORDER_NONE && keep < n)
        r->count = keep; /* the arrays keep their room (count_cap, key_cap) */
    return keep;
}

/* A pair's string key as its first 8 bytes, big-endian and zero padded.
 * Two keys whose prefixes differ compare as their prefixes do, because
 * bytes_compare orders a key before every longer key it begins; keys with
 * equal prefixes need the whole comparison. */
typedef struct prefixed {
    uint64_t prefix, pair;
} prefixed;

static uint64_t key_prefix(const soren_result *r, uint64_t i)
{
    const uint8_t *k = r->key_bytes + r->key_offset[i];
    uint64_t n = r->key_offset[i + 1] - r->key_offset[i], p = 0;
    for (uint64_t b = 0; b < 8; b++)
        p = p << 8 | (b < n ? k[b] : 0);
    return p;
}

/* Sorts a[0 .. n) by prefix, a byte at a time from the lowest (stable), in
 * scratch's room; the sorted array is returned (a or scratch). */
static prefixed *radix_by_prefix(prefixed *a, prefixed *scratch, uint64_t n)
{
    for (unsigned shift = 0; shift < 64; shift += 8) {
        uint64_t at[256] = {0};
        for (uint64_t i = 0; i < n; i++)
            at[a[i].prefix >> shift & 255]++;
        if (at[a[0].prefix >> shift & 255] == n)
            continue; /* every key has this byte */
        for (uint64_t b = 0, sum = 0; b < 256; b++) {
            uint64_t c = at[b];
            at[b] = sum;
            sum += c;
        }
        for (uint64_t i = 0; i < n; i++)
            scratch[at[a[i].prefix >> shift & 255]++] = a[i];
        prefixed *t = a;
        a = scratch;
        scratch = t;
    }
    return a;
}

/* idx[0 .. n) in key order for string keys: a radix sort of the prefixes,
 * then each run of equal prefixes by the whole comparison.  The cache
 * misses of comparing through the key offsets are paid once a pair
 * instead of once a comparison.  -1 (idx untouched) when out of memory. */
static int order_by_key_prefix(order_ctx *ctx, uint64_t *idx, uint64_t n)
{
    prefixed *a = malloc(n * sizeof *a), *scratch = malloc(n * sizeof *scratch);
    if (!a || !scratch) {
        free(a);
        free(scratch);
        return -1;
    }
    for (uint64_t i = 0; i < n; i++)
        a[i] = (prefixed){key_prefix(ctx->r, i), i};
    prefixed *sorted = radix_by_prefix(a, scratch, n);
    for (uint64_t i = 0; i < n; i++)
        idx[i] = sorted[i].pair;
    for (uint64_t run = 0; run < n;) {
        uint64_t end = run + 1;
        while (end < n && sorted[end].prefix == sorted[run].prefix)
            end++;
        if (end - run > 1)
            qsort_r(idx + run, (size_t)(end - run), sizeof *idx, index_compare, ctx);
        run = end;
    }
    free(a);
    free(scratch);
    return 0;
}

/* Whether every pair is at or after the one before it. */
static int in_order(const order_ctx *c, uint64_t n)
{
    for (uint64_t i = 1; i < n; i++)
        if (pair_compare(c, i - 1, i) > 0)
            return 0;
    return 1;
}

soren_status soren_result_order(soren_result *r, soren_order order, uint64_t limit,
                                soren_error *err)
{
    uint64_t n = r->count, keep = kept(r, order, limit);
    if (order == SOREN_ORDER_NONE || n == 0)
        return SOREN_OK;
    order_ctx ctx = {r, order};
    /* Pairs that come in order (a map-only stage's positions, listed in
     * input order) stay where they are: a pass of comparisons, which
     * stops at the first pair out of order. */
    if (keep == n && in_order(&ctx, n))
        return SOREN_OK;
    uint64_t *idx = malloc(n * sizeof *idx);
    if (!idx)
        return ordering_out_of_memory(r, err);
    /* The prefixes take 32 bytes a pair for a moment; where that memory is
     * not there, the comparison sort below needs none. */
    if (order == SOREN_ORDER_KEY && typed_size(r->key_type) == 0 && keep >= n / 4 &&
        order_by_key_prefix(&ctx, idx, n) == 0)
        return take_in_order(r, idx, keep, err);
    if (keep < n / 4) {
        select_smallest(&ctx, idx, n, keep);
    } else {
        for (uint64_t i = 0; i < n; i++)
            idx[i] = i;
    }
    /* The comparison is a total order on content (equal means equal bytes),
     * so whatever qsort_r does with ties, the bytes come out the same. */
    qsort_r(idx, (size_t)(keep < n / 4 ? keep : n), sizeof *idx, index_compare, &ctx);
    return take_in_order(r, idx, keep, err);
}

/* The heap of soren_result_merge_runs: run heads (their next pair), the
 * smallest on top. */
static void heap_down(const order_ctx *c, uint64_t *head, size_t *run, size_t n, size_t p)
{
    for (;;) {
        size_t l = 2 * p + 1, r = l + 1, least = p;
        if (l < n && pair_compare(c, head[run[l]], head[run[least]]) < 0)
            least = l;
        if (r < n && pair_compare(c, head[run[r]], head[run[least]]) < 0)
            least = r;
        if (least == p)
            return;
        size_t t = run[p];
        run[p] = run[least];
        run[least] = t;
        p = least;
    }
}

soren_status soren_result_merge_runs(soren_result *r, const uint64_t *run_ends, size_t runs,
                                     soren_order order, uint64_t limit, soren_error *err)
{
    uint64_t n = r->count, keep = kept(r, order, limit);
    if (order == SOREN_ORDER_NONE || n == 0)
        return SOREN_OK;
    order_ctx ctx = {r, order};
    uint64_t *idx = malloc(keep * sizeof *idx);
    uint64_t *head = malloc(runs * sizeof *head); /* run i's next pair */
    size_t *heap = malloc(runs * sizeof *heap);   /* runs with pairs left */
    if (!idx || !head || !heap) {
        free(idx);
        free(head);
        free(heap);
        return ordering_out_of_memory(r, err);
    }
    size_t live = 0;
    for (size_t i = 0; i < runs; i++) {
        head[i] = i ? run_ends[i - 1] : 0;
        if (head[i] < run_ends[i])
            heap[live++] = i;
    }
    for (size_t p = live / 2; p-- > 0;)
        heap_down(&ctx, head, heap, live, p);
    for (uint64_t i = 0; i < keep; i++) {
        size_t top = heap[0];
        idx[i] = head[top]++;
        if (head[top] == run_ends[top])
            heap[0] = heap[--live];
        heap_down(&ctx, head, heap, live, 0);
    }
    free(head);
    free(heap);
    return take_in_order(r, idx, keep, err);
}

/* ---- Names --------------------------------------------------------------- */

const char soren_order_names[] = "key value_desc value_asc none";

int soren_order_parse(const char *name, soren_order *out)
{
    static const char *const names[] = {"key", "value_desc", "value_asc", "none"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = (soren_order)i;
            return 0;
        }
    }
    return -1;
}
