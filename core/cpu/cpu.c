/*
 * cpu.c - the CPU engine.
 *
 * Four phases, each run by the same number of threads P:
 *
 *  map     Worker w takes chunks of the inputs from a shared counter and runs
 *          map on the records that start in each.  Its emitter applies the
 *          combine at once into w's own open-addressing table (combine
 *          mode: each accumulator updated in place in its key's entry), counts keys and keeps the values (collect mode: a reduce
 *          function without a combine), or appends the pairs to w's list
 *          (list mode: map-only).  The table starts at the size the options
 *          give (from the projection, or forced) and doubles as it fills;
 *          each growth is reported to --explain.  At the end w groups its
 *          entries by key partition (P partitions by hash).
 *          Dense mode (index keys under key.count with a combine, where
 *          soren_cpu_dense says the arrays fit): w folds into its own
 *          array of key.count accumulators instead, with a flag per key it
 *          has seen; no hashing, no table.
 *  merge   Partition t is merged from partition t of every worker's table,
 *          applying the combine again (or gathering every value of a key).
 *          Keys of up to 16 bytes live in the entries; longer ones are
 *          not copied again: merged entries point into the workers' key
 *          arenas, which live until the end.  Dense mode: partition t is
 *          the t-th range of keys, folded from every worker's array in
 *          worker order (as the tables merge), keeping only keys some
 *          worker saw.
 *  reduce  Each partition's keys go through the reduce function, if any.
 *  copy    The partitions (or, map-only, the chunks in input order) are
 *          copied into the result at offsets computed beforehand.
 *
 * An emitter cannot fail, so a worker records its first error (a key the
 * manifest does not allow, memory exhaustion), ignores its further emits,
 * stops at the next record and asks the others to stop at their next chunk.
 *
 * Determinism: the combined value of a key does not depend on the schedule
 * for integer combines and for MIN/MAX (floats ignore NaNs, -0 < +0); float
 * sums and user combines are as associative as their arithmetic.  A reduce
 * without a combine receives a key's values sorted (by value, as
 * soren_value_compare orders them), so its input is the same for any thread
 * count or chunk size.
 */
#include "cpu.h"
#include "internal.h"
#include "../io/signals.h"
#include <soren/engine/abi.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_DEFAULT (UINT64_C(1) << 20)
/* Index input has no bytes: its chunks are counted in tasks, few enough per
 * chunk that a matrix product of a few million tasks keeps every thread
 * busy, many enough that taking a chunk costs nothing. */
#define CHUNK_TASKS 1024u
#define TABLE_MIN_SLOTS 1024u
#define TABLE_FORCED_MIN_SLOTS 8u             /* --table-slots below this is rounded up */
#define TABLE_EXPECT_MAX (UINT64_C(1) << 19)  /* keys a map table is first sized for */
#define ARENA_FIRST_BLOCK (64u << 10)
#define ARENA_MAX_BLOCK (4u << 20)
#define NO_ENTRY UINT32_MAX
/* Dense mode's memory, every thread's accumulators and flags and the keys'
 * bytes together: past it index keys go through the tables. */
#define DENSE_BYTES_MAX (UINT64_C(64) << 20)

/* ---- Hashing ------------------------------------------------------------- */

/* A multiply-fold hash over 8-byte words: each step multiplies two 64-bit
 * words into 128 bits and folds the halves together, which mixes every input
 * bit into every output bit; short keys are read with overlapping loads. */
#define H0 UINT64_C(0x9e3779b97f4a7c15)
#define H1 UINT64_C(0xc2b2ae3d27d4eb4f)
#define H2 UINT64_C(0x165667b19e3779f9)
#define H3 UINT64_C(0xd6e8feb86659fd93)

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t load32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t fold_mul(uint64_t a, uint64_t b)
{
    unsigned __int128 m = (unsigned __int128)a * b;
    return (uint64_t)m ^ (uint64_t)(m >> 64);
}

#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE uint64_t hash_key(const uint8_t *p, uint32_t n)
{
    uint64_t h = H0 ^ fold_mul((uint64_t)n ^ H1, H3);
    uint64_t a, b;
    if (n <= 16) {
        if (n >= 8) {
            a = load64(p);
            b = load64(p + n - 8);
        } else if (n >= 4) {
            a = load32(p);
            b = load32(p + n - 4);
        } else if (n > 0) {
            a = ((uint64_t)p[0] << 16) | ((uint64_t)p[n >> 1] << 8) | p[n - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        uint64_t left = n;
        const uint8_t *q = p;
        while (left > 16) {
            h = fold_mul(load64(q) ^ H1, load64(q + 8) ^ h);
            q += 16;
            left -= 16;
        }
        /* The last 16 bytes, overlapping what the loop read. */
        a = load64(q + left - 16);
        b = load64(q + left - 8);
    }
    h = fold_mul(a ^ H2, b ^ h);
    return fold_mul(h ^ H3, H0 ^ n);
}

/* Key equality without a call for the short keys that dominate. */
static ALWAYS_INLINE int key_equal(const uint8_t *a, const uint8_t *b, uint32_t n)
{
    if (n >= 8 && n <= 16)
        return load64(a) == load64(b) && load64(a + n - 8) == load64(b + n - 8);
    if (n >= 4 && n < 8)
        return load32(a) == load32(b) && load32(a + n - 4) == load32(b + n - 4);
    if (n < 4) {
        for (uint32_t i = 0; i < n; i++)
            if (a[i] != b[i])
                return 0;
        return 1;
    }
    return memcmp(a, b, n) == 0;
}

static inline unsigned partition_of(uint64_t hash, unsigned parts)
{
    return (unsigned)(((hash >> 32) * (uint64_t)parts) >> 32);
}

/* ---- Key arena: blocks that never move, so entries keep pointers -------- */

typedef struct arena_block {
    struct arena_block *next;
    uint8_t data[];
} arena_block;

typedef struct arena {
    arena_block *head;
    uint8_t *cur;
    size_t left;
    size_t next_size;
} arena;

static uint8_t *arena_alloc(arena *a, size_t n)
{
    if (n > a->left) {
        size_t size = a->next_size ? a->next_size : ARENA_FIRST_BLOCK;
        if (size < n)
            size = n;
        arena_block *b = malloc(sizeof *b + size);
        if (!b)
            return NULL;
        b->next = a->head;
        a->head = b;
        a->cur = b->data;
        a->left = size;
        if (a->next_size < ARENA_MAX_BLOCK)
            a->next_size = (a->next_size ? a->next_size : ARENA_FIRST_BLOCK) * 2;
    }
    uint8_t *p = a->cur;
    a->cur += n;
    a->left -= n;
    return p;
}

static void arena_free(arena *a)
{
    while (a->head) {
        arena_block *next = a->head->next;
        free(a->head);
        a->head = next;
    }
    memset(a, 0, sizeof *a);
}

/* ---- The table: open addressing, linear probing -------------------------- */

/* Keys of up to KEY_INLINE bytes live in their entry; longer ones in the
 * table's arena (or, copy_keys 0, wherever the caller keeps them). */
#define KEY_INLINE 16u
/* Entries come in blocks of 2^ENTRY_BLOCK_SHIFT that never move: growing
 * the table copies no entry and never holds two copies of them. */
#define ENTRY_BLOCK_SHIFT 10u
#define ENTRY_BLOCK_MASK ((1u << ENTRY_BLOCK_SHIFT) - 1)

/* An entry's header is 32 bytes, and a value of at most 4 bytes sits in
 * aux's place (collect mode, which uses aux, has 8-byte values), so such an
 * entry is one record of half a cache line: a probe that matches reads the
 * key and updates the value with one miss.  A larger value follows the
 * header, 8-byte aligned. */
typedef struct entry {
    uint64_t hash;
    uint32_t len;
    uint32_t aux; /* collect mode: the entry's rank within its partition */
    union {
        uint8_t bytes[KEY_INLINE]; /* len <= KEY_INLINE */
        const uint8_t *ptr;        /* longer */
    } key;
} entry;

_Static_assert(sizeof(entry) == 32, "an entry header is 32 bytes");

static inline const uint8_t *entry_key(const entry *en)
{
    return en->len <= KEY_INLINE ? en->key.bytes : en->key.ptr;
}

/* A slot is 0 (empty) or the hash's high half over (entry index + 1), so a
 * probe compares 32 bits of hash before it touches the entry.  The hash is
 * computed once, by whoever first looks the key up: entries keep it for
 * growth, partitioning and the merge. */
typedef struct table {
    uint64_t *slots;
    uint64_t mask;
    uint8_t **blocks; /* records of stride bytes: an entry, then its value */
    uint32_t nblocks, blocks_cap;
    size_t stride;
    size_t value_at;  /* the value's offset within a record */
    uint32_t count;
    uint32_t cap;
    size_t vsize;
    uint64_t key_total; /* sum of the entries' key lengths */
    int copy_keys;      /* 0: long keys stay where the caller keeps them */
    arena keys;
    /* Each growth doubles the slots, so growth k went from first_slots << k
     * to first_slots << (k + 1): --explain reports them without the table
     * keeping a log (or allocating one in the middle of map). */
    uint64_t first_slots;
    unsigned growths;
} table;

static ALWAYS_INLINE entry *table_entry(const table *t, uint32_t e)
{
    return (entry *)(t->blocks[e >> ENTRY_BLOCK_SHIFT] + (e & ENTRY_BLOCK_MASK) * t->stride);
}

static ALWAYS_INLINE uint8_t *table_value(const table *t, uint32_t e)
{
    return (uint8_t *)table_entry(t, e) + t->value_at;
}

/* The layout of vsize-byte values, with no slots and no entries: merge_dense
 * fills such a table without probing. */
static void table_layout(table *t, size_t vsize)
{
    memset(t, 0, sizeof *t);
    t->vsize = vsize;
    if (vsize <= 4) {
        t->stride = sizeof(entry);
        t->value_at = offsetof(entry, aux);
    } else {
        t->stride = sizeof(entry) + ((vsize + 7) & ~(size_t)7);
        t->value_at = sizeof(entry);
    }
}

/* An empty table of at least min_slots slots (a power of two), more if
 * expect keys would load it past 5/8. */
static int table_init(table *t, size_t vsize, int copy_keys, uint64_t min_slots,
                      uint64_t expect)
{
    table_layout(t, vsize);
    t->copy_keys = copy_keys;
    uint64_t slots = min_slots;
    while (slots * 5 / 8 < expect)
        slots *= 2;
    t->slots = calloc(slots, sizeof *t->slots);
    if (!t->slots)
        return -1;
    t->mask = slots - 1;
    t->first_slots = slots;
    return 0;
}

static void table_free(table *t)
{
    free(t->slots);
    for (uint32_t b = 0; b < t->nblocks; b++)
        free(t->blocks[b]);
    free(t->blocks);
    arena_free(&t->keys);
    memset(t, 0, sizeof *t);
}

/* After a table's last lookup: its slots go, its entries stay (the merge,
 * reduce and copy read entries only), so that they do not add to the
 * memory that the merged tables and the result take next. */
static void table_drop_slots(table *t)
{
    free(t->slots);
    t->slots = NULL;
}

static int table_rehash(table *t)
{
    uint64_t slots = (t->mask + 1) * 2;
    uint64_t *s = calloc(slots, sizeof *s);
    if (!s)
        return -1;
    uint64_t mask = slots - 1;
    for (uint32_t e = 0; e < t->count; e++) {
        uint64_t h = table_entry(t, e)->hash;
        uint64_t i = h & mask;
        while (s[i])
            i = (i + 1) & mask;
        s[i] = (h & UINT64_C(0xffffffff00000000)) | ((uint64_t)e + 1);
    }
    free(t->slots);
    t->slots = s;
    t->mask = mask;
    t->growths++;
    return 0;
}

/* One more block of entries, aligned to 64 bytes so that no entry header
 * straddles a cache line. */
static int table_add_block(table *t)
{
    if (t->cap >= UINT32_MAX - ENTRY_BLOCK_MASK - 1)
        return -1;
    if (t->nblocks == t->blocks_cap) {
        uint32_t n = t->blocks_cap ? t->blocks_cap * 2 : 16;
        uint8_t **b = realloc(t->blocks, (size_t)n * sizeof *b);
        if (!b)
            return -1;
        t->blocks = b;
        t->blocks_cap = n;
    }
    uint8_t *p = aligned_alloc(64, ((size_t)t->stride << ENTRY_BLOCK_SHIFT));
    if (!p)
        return -1;
    t->blocks[t->nblocks++] = p;
    t->cap += 1u << ENTRY_BLOCK_SHIFT;
    return 0;
}

/* Makes entry e (the next one, room taken) hold key: inline if short,
 * else copied into the arena (copy_keys) or pointed at.  -1: no memory. */
static ALWAYS_INLINE int entry_set(table *t, entry *en, uint64_t h, const uint8_t *key,
                                   uint32_t len)
{
    en->hash = h;
    en->len = len; /* aux: the value's place or collect mode's, set by them */
    if (len <= KEY_INLINE) {
        memcpy(en->key.bytes, key, len);
    } else if (t->copy_keys) {
        uint8_t *p = arena_alloc(&t->keys, len);
        if (!p)
            return -1;
        memcpy(p, key, len);
        en->key.ptr = p;
    } else {
        en->key.ptr = key;
    }
    t->key_total += len;
    return 0;
}

/* Adds key at the empty slot i (table_find's miss path, out of line). */
static __attribute__((noinline)) uint32_t table_insert(table *t, uint64_t i, uint64_t h,
                                                       const uint8_t *key, uint32_t len)
{
    if (t->count == t->cap && table_add_block(t) != 0)
        return NO_ENTRY;
    uint32_t e = t->count;
    if (entry_set(t, table_entry(t, e), h, key, len) != 0)
        return NO_ENTRY;
    t->count++;
    t->slots[i] = (h & UINT64_C(0xffffffff00000000)) | ((uint64_t)e + 1);
    return e;
}

/* The entry of key (inserting it: *fresh = 1), or NO_ENTRY when memory ran
 * out.  A fresh entry's value is for the caller to set.  The table grows
 * past 5/8 full, so probes stay short. */
static ALWAYS_INLINE uint32_t table_find(table *t, uint64_t h, const uint8_t *key,
                                         uint32_t len, int *fresh)
{
    if (__builtin_expect((uint64_t)(t->count + 1) * 8 > (t->mask + 1) * 5, 0) &&
        table_rehash(t) != 0)
        return NO_ENTRY;
    const uint64_t tag = h & UINT64_C(0xffffffff00000000);
    uint64_t i = h & t->mask;
    for (;;) {
        uint64_t s = t->slots[i];
        if (!s)
            break;
        if ((s & UINT64_C(0xffffffff00000000)) == tag) {
            uint32_t e = (uint32_t)s - 1;
            const entry *en = table_entry(t, e);
            if (en->len == len && key_equal(entry_key(en), key, len)) {
                *fresh = 0;
                return e;
            }
        }
        i = (i + 1) & t->mask;
    }
    *fresh = 1;
    return table_insert(t, i, h, key, len);
}

/* ---- Pair lists (map-only output, reduce output) ------------------------- */

typedef struct pairbuf {
    uint8_t *keys;
    uint64_t key_used, key_cap;
    uint64_t *offs; /* count + 1 start offsets */
    uint8_t *vals;
    uint64_t count, cap;
} pairbuf;

static int pairbuf_push(pairbuf *b, const void *key, uint32_t len, const void *value,
                        size_t vsize)
{
    if (b->count == b->cap) {
        uint64_t cap = b->cap ? b->cap * 2 : 1024;
        uint64_t *o = realloc(b->offs, (cap + 1) * sizeof *o);
        if (!o)
            return -1;
        b->offs = o;
        uint8_t *v = realloc(b->vals, cap * vsize);
        if (!v)
            return -1;
        b->vals = v;
        b->cap = cap;
    }
    if (b->key_cap - b->key_used < len) {
        uint64_t cap = b->key_cap ? b->key_cap * 2 : 16384;
        while (cap - b->key_used < len)
            cap *= 2;
        uint8_t *k = realloc(b->keys, cap);
        if (!k)
            return -1;
        b->keys = k;
        b->key_cap = cap;
    }
    if (len)
        memcpy(b->keys + b->key_used, key, len);
    memcpy(b->vals + b->count * vsize, value, vsize);
    b->offs[b->count] = b->key_used;
    b->key_used += len;
    b->count++;
    b->offs[b->count] = b->key_used;
    return 0;
}

static void pairbuf_free(pairbuf *b)
{
    free(b->keys);
    free(b->offs);
    free(b->vals);
    memset(b, 0, sizeof *b);
}

/* ---- Combines ------------------------------------------------------------ */

/* first: a fresh accumulator from one emitted value; fold: one more emitted
 * value; merge: another accumulator of the same key (partial results). */
typedef struct combine_ctx {
    soren_combine_fn *fn;  /* USER */
    const void *identity;  /* USER */
    size_t vsize;
} combine_ctx;
typedef void combine_step(void *acc, const void *v, const combine_ctx *c);

static inline uint32_t f32_key(uint32_t b) { return (b & 0x80000000u) ? ~b : b | 0x80000000u; }
static inline uint64_t f64_key(uint64_t b) { return (b >> 63) ? ~b : b | (UINT64_C(1) << 63); }

#define DEFINE_ARITH(name, T, ADD)                                                       \
    static void sum_first_##name(void *acc, const void *v, const combine_ctx *c)       \
    {                                                                                    \
        (void)c;                                                                         \
        T x = 0, y;                                                                      \
        memcpy(&y, v, sizeof y);                                                         \
        x = ADD(x, y);                                                                   \
        memcpy(acc, &x, sizeof x);                                                       \
    }                                                                                    \
    static void sum_##name(void *acc, const void *v, const combine_ctx *c)             \
    {                                                                                    \
        (void)c;                                                                         \
        T x, y;                                                                          \
        memcpy(&x, acc, sizeof x);                                                       \
        memcpy(&y, v, sizeof y);                                                         \
        x = ADD(x, y);                                                                   \
        memcpy(acc, &x, sizeof x);                                                       \
    }                                                                                    \
    static void count_first_##name(void *acc, const void *v, const combine_ctx *c)     \
    {                                                                                    \
        (void)v;                                                                         \
        (void)c;                                                                         \
        T x = 0;                                                                         \
        x = ADD(x, (T)1);                                                                \
        memcpy(acc, &x, sizeof x);                                                       \
    }                                                                                    \
    static void count_##name(void *acc, const void *v, const combine_ctx *c)           \
    {                                                                                    \
        (void)v;                                                                         \
        (void)c;                                                                         \
        T x;                                                                             \
        memcpy(&x, acc, sizeof x);                                                       \
        x = ADD(x, (T)1);                                                                \
        memcpy(acc, &x, sizeof x);                                                       \
    }

/* Integers wrap (signed sums through unsigned arithmetic: no overflow UB). */
#define ADD_PLAIN(a, b) ((a) + (b))
#define ADD_I64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
DEFINE_ARITH(u32, uint32_t, ADD_PLAIN)
DEFINE_ARITH(u64, uint64_t, ADD_PLAIN)
DEFINE_ARITH(i64, int64_t, ADD_I64)
DEFINE_ARITH(f32, float, ADD_PLAIN)
DEFINE_ARITH(f64, double, ADD_PLAIN)

/* MIN/MAX compare integers numerically.  Floats, like fmin/fmax and the GPU
 * engine, ignore NaNs (a key whose values are all NaN keeps one), and order
 * -0 below +0 (IEEE total order otherwise equals numeric order), so the
 * result never depends on the order values arrive in. */
#define DEFINE_MINMAX(name, T, ORD, NAN_BITS)                                            \
    static void min_##name(void *acc, const void *v, const combine_ctx *c)             \
    {                                                                                    \
        (void)c;                                                                         \
        T x, y;                                                                          \
        memcpy(&x, acc, sizeof x);                                                       \
        memcpy(&y, v, sizeof y);                                                         \
        if (NAN_BITS(y))                                                                 \
            return;                                                                      \
        if (NAN_BITS(x) || ORD(y) < ORD(x))                                              \
            memcpy(acc, &y, sizeof y);                                                   \
    }                                                                                    \
    static void max_##name(void *acc, const void *v, const combine_ctx *c)             \
    {                                                                                    \
        (void)c;                                                                         \
        T x, y;                                                                          \
        memcpy(&x, acc, sizeof x);                                                       \
        memcpy(&y, v, sizeof y);                                                         \
        if (NAN_BITS(y))                                                                 \
            return;                                                                      \
        if (NAN_BITS(x) || ORD(y) > ORD(x))                                              \
            memcpy(acc, &y, sizeof y);                                                   \
    }

#define ORD_PLAIN(x) (x)
#define ORD_F32(x) f32_key(x)
#define ORD_F64(x) f64_key(x)
#define NAN_NEVER(x) 0
#define NAN_F32(x) (((x) & 0x7fffffffu) > 0x7f800000u)
#define NAN_F64(x) (((x) & ~(UINT64_C(1) << 63)) > UINT64_C(0x7ff0000000000000))
DEFINE_MINMAX(u32, uint32_t, ORD_PLAIN, NAN_NEVER)
DEFINE_MINMAX(u64, uint64_t, ORD_PLAIN, NAN_NEVER)
DEFINE_MINMAX(i64, int64_t, ORD_PLAIN, NAN_NEVER)
DEFINE_MINMAX(f32, uint32_t, ORD_F32, NAN_F32) /* on the bits */
DEFINE_MINMAX(f64, uint64_t, ORD_F64, NAN_F64)

static void copy4(void *acc, const void *v, const combine_ctx *c)
{
    (void)c;
    memcpy(acc, v, 4);
}

static void copy8(void *acc, const void *v, const combine_ctx *c)
{
    (void)c;
    memcpy(acc, v, 8);
}

/* A fold's first value of a key is a partial result: it is the accumulator
 * as it is (COUNT's first step would count it as one). */
static void copy_value(void *acc, const void *v, const combine_ctx *c)
{
    memcpy(acc, v, c->vsize);
}

static void user_first(void *acc, const void *v, const combine_ctx *c)
{
    memcpy(acc, c->identity, c->vsize);
    c->fn(acc, v);
}

static void user_fold(void *acc, const void *v, const combine_ctx *c)
{
    c->fn(acc, v);
}

typedef struct combine_ops {
    combine_step *first, *fold, *merge;
} combine_ops;

#define OPS_FOR_TYPE(t, SUMF, SUM, CF, CNT, MIN, MAX, COPY)                              \
    case t:                                                                              \
        switch (op) {                                                                    \
        case SOREN_COMBINE_SUM: *o = (combine_ops){SUMF, SUM, SUM}; return 0;            \
        case SOREN_COMBINE_COUNT: *o = (combine_ops){CF, CNT, SUM}; return 0;            \
        case SOREN_COMBINE_MIN: *o = (combine_ops){COPY, MIN, MIN}; return 0;            \
        case SOREN_COMBINE_MAX: *o = (combine_ops){COPY, MAX, MAX}; return 0;            \
        default: return -1;                                                              \
        }

static int builtin_ops(soren_combine_op op, soren_type type, combine_ops *o)
{
    switch (type) {
        OPS_FOR_TYPE(SOREN_TYPE_U32, sum_first_u32, sum_u32, count_first_u32, count_u32,
                     min_u32, max_u32, copy4)
        OPS_FOR_TYPE(SOREN_TYPE_U64, sum_first_u64, sum_u64, count_first_u64, count_u64,
                     min_u64, max_u64, copy8)
        OPS_FOR_TYPE(SOREN_TYPE_I64, sum_first_i64, sum_i64, count_first_i64, count_i64,
                     min_i64, max_i64, copy8)
        OPS_FOR_TYPE(SOREN_TYPE_F32, sum_first_f32, sum_f32, count_first_f32, count_f32,
                     min_f32, max_f32, copy4)
        OPS_FOR_TYPE(SOREN_TYPE_F64, sum_first_f64, sum_f64, count_first_f64, count_f64,
                     min_f64, max_f64, copy8)
    default:
        return -1;
    }
}

/* ---- The engine ---------------------------------------------------------- */

typedef enum mode { MODE_LIST, MODE_COMBINE, MODE_COLLECT } mode;

typedef struct segment {
    uint64_t seq;         /* global chunk number: the order of the output */
    uint64_t first, last; /* pairs [first, last) of the worker's list */
    struct worker *w;
    uint64_t out_pair, out_key; /* where they go in the result */
} segment;

typedef struct engine engine;
typedef struct worker worker;

/* Emits between fetching a key's slot and its entry, and between fetching
 * its entry and folding the pair: together about a memory latency of
 * map's work. */
#define PIPE_SLOT 8u
#define PIPE_ENTRY 8u
#define PIPE (PIPE_SLOT + PIPE_ENTRY)
/* Tables of fewer slots (256 KiB of them) fold at once: their slots and
 * entries stay in the caches, where waiting only costs the copies. */
#define PIPE_MIN_SLOTS (UINT64_C(1) << 15)

/* A pair waiting in combine mode's pipeline (its value is kept apart). */
typedef struct pending {
    uint64_t hash;
    uint32_t len;
    uint8_t key[KEY_INLINE];
} pending;

/* One pass of the engine (map, merge, reduce, copy): every thread takes
 * the next unit (a chunk, a partition, a segment) from one counter until
 * none is left or a unit has failed on any thread, so a slow thread, or one
 * that never started, costs only parallelism. */
typedef struct pass {
    uint64_t units;
    /* Does unit u on the thread of worker w (its per-thread state);
     * nonzero when it failed, with the error recorded where the unit
     * keeps it: the other threads then take no further unit. */
    int (*unit)(worker *w, uint64_t u);
    /* After the thread's last unit, unless one of its units failed; NULL
     * for nothing. */
    void (*finish)(worker *w);
    int plugin_code; /* the units run plugin code: a signal stack (signals.h) */
} pass;

struct worker {
    engine *g;
    soren_emitter em;
    int failed;
    uint64_t seq; /* chunk being mapped */
    uint64_t err_seq;
    soren_error err;

    table tab;           /* combine and collect modes */
    uint32_t *by_part;   /* entry numbers grouped by partition */
    uint64_t *part_start; /* P + 1 */

    /* collect mode: every pair as (entry, value), then grouped by partition */
    uint32_t *pair_entry;
    uint8_t *pair_vals;
    uint64_t pair_count, pair_cap;
    uint64_t *pair_part_start; /* P + 1 */

    /* combine mode: the short keys' pairs that wait for their slot and
     * entry (emit_combine), pipe_first .. pipe_next - 1, at index n % PIPE */
    pending pipe[PIPE];
    uint8_t *pipe_vals; /* PIPE values */
    uint64_t pipe_first, pipe_next;

    /* dense mode: key.count accumulators (zeros) and a seen flag per key */
    uint64_t dense_count; /* key.count */
    uint8_t *dense_vals;
    uint8_t *dense_seen;

    /* list mode */
    pairbuf list;
    segment *segs;
    size_t seg_count, seg_cap;
};

typedef struct part {
    engine *g;
    soren_emitter em;
    int failed;
    soren_error err;
    table tab;         /* the merged keys (combine, collect) */
    const table *src;  /* what holds the partition's pairs: &tab or worker 0's */
    /* collect: key i's values are vals[val_start[i] .. val_start[i + 1]) */
    uint64_t *val_start;
    uint8_t *vals;
    pairbuf out;       /* reduce's pairs */
    uint64_t out_pair, out_key; /* where the partition goes in the result */
} part;

struct engine {
    const soren_stage_spec *spec;
    const soren_params *params;
    const soren_input *inputs;
    size_t input_count;
    mode mode;
    combine_ops ops;
    combine_ctx combine;
    soren_type sum_type; /* the combine is a sum of values of this type; NONE: another */
    size_t vsize;                 /* value size */
    size_t key_size;              /* typed keys: the one size allowed */

    unsigned nthreads; /* also the number of partitions */
    uint64_t chunk_size, chunks;
    uint64_t *chunk_first; /* input_count + 1: first global chunk of each input */
    atomic_uint_fast64_t next;
    atomic_int stop;
    int fold; /* the records are pairs to fold (soren_cpu_options.fold) */
    int dense; /* combine mode with per-thread arrays of key_count accumulators */
    uint64_t key_count;
    /* dense mode: the plugin's host loop over fixed records or tasks, or
     * NULL (soren_cpu_stage.map_dense) */
    void (*map_dense)(soren_cpu_dense_args *a);
    /* the stage's run map over fixed records or tasks, or NULL
     * (soren_stage.map_run; in dense mode the host loop calls it) */
    soren_map_run_fn *map_run;

    const pass *pass; /* the pass the threads run */
    worker *workers;
    part *parts;
    soren_progress *progress; /* told the bytes of each chunk mapped, or NULL */
    segment **order; /* list mode: every segment, by seq */
    size_t seg_total;
    soren_result *out;
    uint64_t added; /* pairs the run appends to out */
};

/* ---- Checking what a plugin emits ---------------------------------------- */

static int key_refused(engine *g, const char *phase, const void *key, uint32_t len,
                       soren_error *err)
{
    return soren__key_refused(g->spec, g->key_size, phase, key, len, err);
}

static void worker_fail(worker *w)
{
    w->failed = 1;
    w->err_seq = w->seq;
    atomic_store_explicit(&w->g->stop, 1, memory_order_relaxed);
}

/* 1 if the manifest allows key: what soren__key_refused checks, without
 * its words, inline on every emit; a key it refuses goes to worker_refuse
 * for them. */
static ALWAYS_INLINE int key_allowed(const engine *g, const void *key, uint32_t len)
{
    if (g->key_size == 0) /* a string */
        return len <= g->spec->key_max_size;
    if (len != g->key_size)
        return 0;
    if (g->spec->key_type != SOREN_TYPE_INDEX)
        return 1;
    uint32_t k;
    memcpy(&k, key, 4);
    return k < g->key_count;
}

/* Records that map emitted a key the manifest does not allow (out of line:
 * the emitters stay small). */
static __attribute__((noinline, cold)) void worker_refuse(worker *w, const void *key,
                                                          uint32_t len)
{
    if (!w->failed && key_refused(w->g, "map", key, len, &w->err))
        worker_fail(w);
}

static void worker_nomem(worker *w, const char *what)
{
    soren_error_set(&w->err, SOREN_ENOMEM, "%s: out of memory in map (%s)",
                    w->g->spec->job_name, what);
    worker_fail(w);
}

/* The entry of key in the thread's table, made if the key is new (*fresh);
 * NO_ENTRY once the thread has failed, the key was refused or the table
 * could not grow (the failure is recorded). */
static ALWAYS_INLINE uint32_t worker_entry(worker *w, const void *key, uint32_t len, int *fresh)
{
    if (w->failed)
        return NO_ENTRY;
    if (__builtin_expect(!key_allowed(w->g, key, len), 0)) {
        worker_refuse(w, key, len);
        return NO_ENTRY;
    }
    uint32_t i = table_find(&w->tab, hash_key(key, len), key, len, fresh);
    if (i == NO_ENTRY)
        worker_nomem(w, "the thread's table");
    return i;
}

/* Folds value into key's accumulator in w's table (h: key's hash). */
static ALWAYS_INLINE void combine_pair(worker *w, uint64_t h, const uint8_t *key, uint32_t len,
                                       const void *value)
{
    engine *g = w->g;
    int fresh;
    uint32_t i = table_find(&w->tab, h, key, len, &fresh);
    if (i == NO_ENTRY) {
        worker_nomem(w, "the thread's table");
        return;
    }
    uint8_t *acc = table_value(&w->tab, i);
    /* The sums without a call: the additions of sum_u32 .. sum_f64 (integers
     * wrap), a fresh key taking 0 + its value as sum_first does. */
#define SUM_CASE(TYPE, T)                                                                \
    if (g->sum_type == TYPE) {                                                           \
        T x = 0, y;                                                                      \
        if (!fresh)                                                                      \
            memcpy(&x, acc, sizeof x);                                                   \
        memcpy(&y, value, sizeof y);                                                     \
        x += y;                                                                          \
        memcpy(acc, &x, sizeof x);                                                       \
        return;                                                                          \
    }
    SUM_CASE(SOREN_TYPE_U32, uint32_t)
    SUM_CASE(SOREN_TYPE_U64, uint64_t)
    SUM_CASE(SOREN_TYPE_I64, uint64_t)
    SUM_CASE(SOREN_TYPE_F64, double)
    SUM_CASE(SOREN_TYPE_F32, float)
#undef SUM_CASE
    if (fresh)
        g->ops.first(acc, value, &g->combine);
    else
        g->ops.fold(acc, value, &g->combine);
}

/* Combines w's pending pairs, oldest first, and empties the pipeline. */
static void pipe_flush(worker *w)
{
    size_t vs = w->g->vsize;
    for (uint64_t n = w->pipe_first; n < w->pipe_next && !w->failed; n++) {
        const pending *q = &w->pipe[n % PIPE];
        combine_pair(w, q->hash, q->key, q->len, w->pipe_vals + (n % PIPE) * vs);
    }
    w->pipe_first = w->pipe_next = 0;
}

/* Copies the n <= KEY_INLINE bytes of key to dst without a call: two
 * loads that may overlap, as key_equal reads them. */
static ALWAYS_INLINE void key_copy(uint8_t *dst, const uint8_t *key, uint32_t n)
{
    if (n >= 8) {
        uint64_t a = load64(key), b = load64(key + n - 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a = (uint32_t)load32(key), b = (uint32_t)load32(key + n - 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    } else {
        for (uint32_t i = 0; i < n; i++)
            dst[i] = key[i];
    }
}

/* Combine mode's emitter.  Once a table outgrows the caches (PIPE_MIN_SLOTS
 * slots), a key's slot and then its entry are most often cache misses, and
 * the next emits do not depend on them: a short key (the common case) then
 * waits in w's pipeline while its slot is fetched (PIPE_SLOT emits), then
 * its entry (PIPE_ENTRY emits), and only then is folded, first in first
 * out.  A long key, or any key while the table is small, is folded at
 * once; a table never shrinks, so the pipeline is empty until it is in
 * use.  Every value of a key takes the same path, so each accumulator sees
 * its values in the order map emitted them. */
static void emit_combine(soren_emitter *e, const void *key, uint32_t len, const void *value)
{
    worker *w = e->ctx;
    engine *g = w->g;
    if (w->failed)
        return;
    if (__builtin_expect(!key_allowed(g, key, len), 0)) {
        worker_refuse(w, key, len);
        return;
    }
    uint64_t h = hash_key(key, len);
    const table *t = &w->tab;
    if (len > KEY_INLINE || t->mask < PIPE_MIN_SLOTS - 1) {
        combine_pair(w, h, key, len, value);
        return;
    }
    uint64_t n = w->pipe_next;
    size_t vs = g->vsize;
    if (n - w->pipe_first == PIPE) {
        const pending *q = &w->pipe[n % PIPE];
        combine_pair(w, q->hash, q->key, q->len, w->pipe_vals + (n % PIPE) * vs);
        w->pipe_first++;
    }
    if (n - w->pipe_first >= PIPE_SLOT) {
        /* The pair PIPE_SLOT emits old: its slot has arrived; fetch the
         * entry it names (the key's, most often). */
        uint64_t s = t->slots[w->pipe[(n - PIPE_SLOT) % PIPE].hash & t->mask];
        if (s)
            __builtin_prefetch(table_entry(t, (uint32_t)s - 1), 1);
    }
    pending *q = &w->pipe[n % PIPE];
    q->hash = h;
    q->len = len;
    key_copy(q->key, key, len);
    uint8_t *v = w->pipe_vals + (n % PIPE) * vs;
    if (vs == 4)
        memcpy(v, value, 4);
    else if (vs == 8)
        memcpy(v, value, 8);
    else
        memcpy(v, value, vs);
    __builtin_prefetch(&t->slots[h & t->mask]);
    w->pipe_next = n + 1;
}

/* Dense mode: the accumulator of key (*fresh: the worker had not seen it),
 * or NULL once the worker has failed or the key is refused (not 4 bytes,
 * not under key.count: the manifest's words, as the tables give them). */
static ALWAYS_INLINE uint8_t *dense_acc(worker *w, const void *key, uint32_t len, int *fresh)
{
    engine *g = w->g;
    if (__builtin_expect(len == 4 && !w->failed, 1)) {
        uint32_t k;
        memcpy(&k, key, 4);
        if (__builtin_expect(k < g->key_count, 1)) {
            *fresh = !w->dense_seen[k];
            w->dense_seen[k] = 1;
            return w->dense_vals + (size_t)k * g->vsize;
        }
    }
    worker_refuse(w, key, len);
    return NULL;
}

static void emit_dense(soren_emitter *e, const void *key, uint32_t len, const void *value)
{
    worker *w = e->ctx;
    engine *g = w->g;
    int fresh;
    uint8_t *acc = dense_acc(w, key, len, &fresh);
    if (!acc)
        return;
    if (fresh)
        g->ops.first(acc, value, &g->combine);
    else
        g->ops.fold(acc, value, &g->combine);
}

/* The integer sums (the histogram's), without a call per value: the same
 * wrapping additions as sum_u32 and sum_u64.  The accumulators start at 0,
 * so a fresh key takes 0 + its value, as sum_first does, and the seen flag
 * is only set, never read. */
#define DEFINE_DENSE_SUM(name, T)                                                        \
    static void emit_dense_sum_##name(soren_emitter *e, const void *key, uint32_t len,  \
                                      const void *value)                                 \
    {                                                                                    \
        worker *w = e->ctx;                                                              \
        if (__builtin_expect(len == 4 && !w->failed, 1)) {                               \
            uint32_t k;                                                                  \
            memcpy(&k, key, 4);                                                          \
            if (__builtin_expect(k < w->dense_count, 1)) {                               \
                uint8_t *acc = w->dense_vals + (size_t)k * sizeof(T);                    \
                T x, y;                                                                  \
                memcpy(&x, acc, sizeof x);                                               \
                memcpy(&y, value, sizeof y);                                             \
                x += y;                                                                  \
                memcpy(acc, &x, sizeof x);                                               \
                w->dense_seen[k] = 1;                                                    \
                return;                                                                  \
            }                                                                            \
        }                                                                                \
        worker_refuse(w, key, len);                                                      \
    }
DEFINE_DENSE_SUM(u32, uint32_t)
DEFINE_DENSE_SUM(u64, uint64_t)

/* The dense emitter for the engine's combine. */
static soren_emit_fn *dense_emitter(const engine *g)
{
    if (g->spec->combine == SOREN_COMBINE_SUM && g->spec->value_type == SOREN_TYPE_U32)
        return emit_dense_sum_u32;
    if (g->spec->combine == SOREN_COMBINE_SUM &&
        (g->spec->value_type == SOREN_TYPE_U64 || g->spec->value_type == SOREN_TYPE_I64))
        return emit_dense_sum_u64;
    return emit_dense;
}

static void emit_collect(soren_emitter *e, const void *key, uint32_t len, const void *value)
{
    worker *w = e->ctx;
    engine *g = w->g;
    int fresh;
    uint32_t i = worker_entry(w, key, len, &fresh);
    if (i == NO_ENTRY)
        return;
    uint64_t n = 0;
    if (!fresh)
        memcpy(&n, table_value(&w->tab, i), 8);
    n++;
    memcpy(table_value(&w->tab, i), &n, 8);
    if (w->pair_count == w->pair_cap) {
        uint64_t cap = w->pair_cap ? w->pair_cap * 2 : 4096;
        uint32_t *pe = realloc(w->pair_entry, cap * sizeof *pe);
        if (pe)
            w->pair_entry = pe;
        uint8_t *pv = pe ? realloc(w->pair_vals, cap * g->vsize) : NULL;
        if (!pv) {
            worker_nomem(w, "the values of each key");
            return;
        }
        w->pair_vals = pv;
        w->pair_cap = cap;
    }
    w->pair_entry[w->pair_count] = i;
    memcpy(w->pair_vals + w->pair_count * g->vsize, value, g->vsize);
    w->pair_count++;
}

static void emit_list(soren_emitter *e, const void *key, uint32_t len, const void *value)
{
    worker *w = e->ctx;
    engine *g = w->g;
    if (w->failed)
        return;
    if (key_refused(g, "map", key, len, &w->err)) {
        worker_fail(w);
        return;
    }
    if (pairbuf_push(&w->list, key, len, value, g->vsize) != 0)
        worker_nomem(w, "the pairs of the thread");
}

static void emit_reduced(soren_emitter *e, const void *key, uint32_t len, const void *value)
{
    part *p = e->ctx;
    engine *g = p->g;
    if (p->failed)
        return;
    if (key_refused(g, "reduce", key, len, &p->err)) {
        p->failed = 1;
        return;
    }
    if (pairbuf_push(&p->out, key, len, value, g->vsize) != 0) {
        soren_error_set(&p->err, SOREN_ENOMEM, "%s: out of memory in reduce",
                        g->spec->job_name);
        p->failed = 1;
    }
}

/* ---- Phase 1: map -------------------------------------------------------- */

/* The map of a fold: the record is a pair already mapped, its value last. */
static void map_pair(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    const worker *w = e->ctx;
    size_t vs = w->g->vsize;
    e->emit(e, r->data, (uint32_t)(r->size - vs), r->data + r->size - vs);
}

static int segment_open(worker *w, uint64_t seq)
{
    if (w->seg_count == w->seg_cap) {
        size_t cap = w->seg_cap ? w->seg_cap * 2 : 64;
        segment *s = realloc(w->segs, cap * sizeof *s);
        if (!s)
            return -1;
        w->segs = s;
        w->seg_cap = cap;
    }
    w->segs[w->seg_count] = (segment){.seq = seq, .first = w->list.count, .w = w};
    return 0;
}

static void segment_close(worker *w)
{
    segment *s = &w->segs[w->seg_count];
    s->last = w->list.count;
    if (s->last > s->first)
        w->seg_count++;
}

/* Groups the worker's entries (and, collecting, its pairs) by partition. */
static void group_by_partition(worker *w)
{
    engine *g = w->g;
    unsigned P = g->nthreads;
    table_drop_slots(&w->tab);
    w->part_start = calloc((size_t)P + 1, sizeof *w->part_start);
    w->by_part = malloc(((size_t)w->tab.count + 1) * sizeof *w->by_part);
    if (!w->part_start || !w->by_part) {
        worker_nomem(w, "grouping keys by partition");
        return;
    }
    for (uint32_t e = 0; e < w->tab.count; e++)
        w->part_start[partition_of(table_entry(&w->tab, e)->hash, P) + 1]++;
    for (unsigned p = 0; p < P; p++)
        w->part_start[p + 1] += w->part_start[p];
    uint64_t *fill = malloc((size_t)P * sizeof *fill);
    if (!fill) {
        worker_nomem(w, "grouping keys by partition");
        return;
    }
    memcpy(fill, w->part_start, (size_t)P * sizeof *fill);
    for (uint32_t e = 0; e < w->tab.count; e++) {
        entry *en = table_entry(&w->tab, e);
        unsigned p = partition_of(en->hash, P);
        if (g->mode == MODE_COLLECT)
            en->aux = (uint32_t)(fill[p] - w->part_start[p]);
        w->by_part[fill[p]++] = e;
    }
    if (g->mode != MODE_COLLECT) {
        free(fill);
        return;
    }

    /* Collect: the same grouping for the pairs, through new arrays. */
    w->pair_part_start = calloc((size_t)P + 1, sizeof *w->pair_part_start);
    uint32_t *pe = malloc((w->pair_count + 1) * sizeof *pe);
    uint8_t *pv = malloc((w->pair_count + 1) * g->vsize);
    if (!w->pair_part_start || !pe || !pv) {
        free(pe);
        free(pv);
        free(fill);
        worker_nomem(w, "grouping values by partition");
        return;
    }
    for (uint64_t k = 0; k < w->pair_count; k++)
        w->pair_part_start[partition_of(table_entry(&w->tab, w->pair_entry[k])->hash, P) + 1]++;
    for (unsigned p = 0; p < P; p++)
        w->pair_part_start[p + 1] += w->pair_part_start[p];
    memcpy(fill, w->pair_part_start, (size_t)P * sizeof *fill);
    for (uint64_t k = 0; k < w->pair_count; k++) {
        uint32_t e = w->pair_entry[k];
        uint64_t at = fill[partition_of(table_entry(&w->tab, e)->hash, P)]++;
        pe[at] = e;
        memcpy(pv + at * g->vsize, w->pair_vals + k * g->vsize, g->vsize);
    }
    free(fill);
    free(w->pair_entry);
    free(w->pair_vals);
    w->pair_entry = pe;
    w->pair_vals = pv;
}

/* Whether the stage's records lie a stride apart (fixed records, tasks),
 * as host loops and run maps take them. */
static int strided(const soren_stage_spec *spec)
{
    return spec->input_format == SOREN_INPUT_INDEX ||
           (spec->input_format == SOREN_INPUT_FIXED && spec->record_size > 0);
}

/* The plugin's dense host loop for the stage (plugin ABI 1.9), where its
 * records are strided; NULL otherwise. */
static void (*dense_loop(const soren_stage_spec *spec))(soren_cpu_dense_args *)
{
    const soren_cpu_stage *cpu = spec->code->cpu;
    int fits = cpu && cpu->abi_minor >= 9 &&
               cpu->size >= offsetof(soren_cpu_stage, map_dense) + sizeof cpu->map_dense;
    return fits && strided(spec) ? cpu->map_dense : NULL;
}

/* Records a run map takes at once: its work is then named by a run of a
 * few thousand records (a fault, a slow record), and its setup, once a
 * run, is spread over them. */
enum { RUN_RECORDS = 4096 };

/* The next run of the records left in it, at most `most` of them: how
 * many (0 where none are left), the first in *first, whose size is every
 * record's (0 for tasks).  it stays where it was. */
static uint64_t next_run(const soren_records *it, soren_record *first, uint64_t most)
{
    uint64_t left = soren_records_left(it);
    soren_records probe = *it;
    if (left == 0 || !soren_records_next(&probe, first))
        return 0;
    return left < most ? left : most;
}

/* Maps what the plugin's dense host loop can of its records into w's
 * arrays, leaving it at the first record not mapped: none where the loop
 * mapped them all; else one whose key was refused (or the first of the
 * run where a run map emitted it), which the caller maps the usual way so
 * that the refusal says what it always says.  A stage with a run map has
 * the loop take RUN_RECORDS at a time. */
static void map_by_loop(worker *w, soren_records *it, soren_record *r)
{
    engine *g = w->g;
    soren_record first;
    for (uint64_t count; (count = next_run(it, &first, g->map_run ? RUN_RECORDS
                                                                   : UINT64_MAX)) > 0;) {
        soren_cpu_dense_args a = {
            .data = first.data,
            .record_size = first.size,
            .count = count,
            .first_offset = first.offset,
            .first_index = first.index,
            .params = g->params,
            .values = w->dense_vals,
            .seen = w->dense_seen,
            .key_count = w->dense_count,
            .current = r,
        };
        soren__current_map.records = g->map_run ? count : 0;
        g->map_dense(&a);
        soren__current_map.records = 0;
        soren_records_skip(it, a.done);
        if (a.done < count)
            return;
    }
}

/* Maps the records left through the stage's run map, RUN_RECORDS at a
 * time, until they end or w fails. */
static void map_by_runs(worker *w, soren_records *it, soren_record *r)
{
    engine *g = w->g;
    for (uint64_t count; !w->failed && (count = next_run(it, r, RUN_RECORDS)) > 0;) {
        const soren_record_run run = {r->data, r->size, count, r->offset, r->index};
        soren__current_map.records = count;
        g->map_run(&w->em, &run, g->params);
        soren__current_map.records = 0;
        soren_records_skip(it, count);
    }
}

/* Maps chunk c on w's thread; nonzero when w failed. */
static int map_chunk(worker *w, uint64_t c)
{
    engine *g = w->g;
    const soren_stage_spec *spec = g->spec;
    soren_map_fn *map = g->fold ? map_pair : spec->code->map;
    /* The input that holds chunk c: the last whose first chunk <= c. */
    size_t lo = 0, hi = g->input_count;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (g->chunk_first[mid] <= c)
            lo = mid;
        else
            hi = mid;
    }
    const soren_input *in = &g->inputs[lo];
    uint64_t begin = (c - g->chunk_first[lo]) * g->chunk_size;
    uint64_t end = in->size - begin > g->chunk_size ? begin + g->chunk_size : in->size;
    w->seq = c;
    if (g->mode == MODE_LIST && segment_open(w, c) != 0) {
        worker_nomem(w, "the chunk list");
        return 1;
    }
    soren_records it;
    soren_record r;
    soren_records_init_input(&it, spec, in, begin, end);
    /* A fault in map names the input and r's offset (signals.h). */
    soren__current_map = (soren__map_site){in, &r, spec->input_format, g->progress, 0};
    if (g->map_dense)
        map_by_loop(w, &it, &r);
    else if (g->map_run)
        map_by_runs(w, &it, &r);
    while (!w->failed && soren_records_next(&it, &r))
        map(&w->em, &r, g->params);
    /* The pairs still waiting, folded while a fault in a user combine
     * still names the input. */
    if (g->mode == MODE_COMBINE && !g->dense)
        pipe_flush(w);
    soren__current_map.in = NULL;
    if (g->mode == MODE_LIST)
        segment_close(w);
    if (w->failed)
        return 1;
    soren_progress_add(g->progress, end - begin);
    if (soren_progress_check(g->progress, spec->job_name, &w->err) != SOREN_OK) {
        worker_fail(w);
        return 1;
    }
    return 0;
}

/* After w's last chunk: its table's entries grouped by partition for the
 * merge (list mode keeps its pairs in chunk order). */
static void map_finish(worker *w)
{
    if (w->g->mode != MODE_LIST && !w->g->dense)
        group_by_partition(w);
}

/* ---- Phase 2: merge and reduce ------------------------------------------- */

static void part_nomem(part *p, const char *what)
{
    soren_error_set(&p->err, SOREN_ENOMEM, "%s: out of memory merging %s", p->g->spec->job_name,
                    what);
    p->failed = 1;
}

static int value_cmp(const void *a, const void *b, void *ctx)
{
    return soren_value_compare(*(const soren_type *)ctx, a, b);
}

static void merge_combine(part *p, unsigned t)
{
    engine *g = p->g;
    if (g->nthreads == 1) {
        p->src = &g->workers[0].tab;
    } else {
        uint64_t expect = 0;
        for (unsigned s = 0; s < g->nthreads; s++)
            expect += g->workers[s].part_start[t + 1] - g->workers[s].part_start[t];
        if (table_init(&p->tab, g->vsize, 0, TABLE_MIN_SLOTS, expect) != 0) {
            part_nomem(p, "the tables");
            return;
        }
        p->src = &p->tab;
        for (unsigned s = 0; s < g->nthreads; s++) {
            const worker *w = &g->workers[s];
            for (uint64_t k = w->part_start[t]; k < w->part_start[t + 1]; k++) {
                const entry *en = table_entry(&w->tab, w->by_part[k]);
                const uint8_t *v = table_value(&w->tab, w->by_part[k]);
                int fresh;
                uint32_t i = table_find(&p->tab, en->hash, entry_key(en), en->len, &fresh);
                if (i == NO_ENTRY) {
                    part_nomem(p, "the tables");
                    return;
                }
                if (fresh)
                    memcpy(table_value(&p->tab, i), v, g->vsize);
                else
                    g->ops.merge(table_value(&p->tab, i), v, &g->combine);
            }
        }
        table_drop_slots(&p->tab);
    }
}

/* Dense mode: partition t's keys are the t-th of nthreads ranges of
 * 0 .. key_count-1; each key some worker saw becomes an entry, in key
 * order, its accumulators merged in worker order. */
static void merge_dense(part *p, unsigned t)
{
    engine *g = p->g;
    uint64_t lo = g->key_count * t / g->nthreads, hi = g->key_count * (t + 1) / g->nthreads;
    table *tab = &p->tab;
    table_layout(tab, g->vsize);
    p->src = tab;
    for (uint64_t k = lo; k < hi; k++) {
        if (tab->count == tab->cap && table_add_block(tab) != 0) {
            part_nomem(p, "the key ranges");
            return;
        }
        uint8_t *acc = table_value(tab, tab->count);
        int seen = 0;
        for (unsigned s = 0; s < g->nthreads; s++) {
            const worker *w = &g->workers[s];
            if (!w->dense_seen[k])
                continue;
            const uint8_t *v = w->dense_vals + (size_t)k * g->vsize;
            if (seen)
                g->ops.merge(acc, v, &g->combine);
            else
                memcpy(acc, v, g->vsize);
            seen = 1;
        }
        if (seen) {
            uint32_t key = (uint32_t)k;
            entry_set(tab, table_entry(tab, tab->count++), 0, (const uint8_t *)&key, 4);
        }
    }
}

/* Reduce after a combine: each key has one (combined) value. */
static void reduce_combined(part *p)
{
    engine *g = p->g;
    soren_reduce_fn *reduce = g->spec->code->reduce;
    for (uint32_t i = 0; i < p->src->count && !p->failed; i++) {
        const entry *en = table_entry(p->src, i);
        reduce(&p->em, entry_key(en), en->len, table_value(p->src, i), 1, g->params);
    }
}

static void merge_collect(part *p, unsigned t)
{
    engine *g = p->g;
    unsigned P = g->nthreads;
    size_t vs = g->vsize;
    uint32_t **remap = calloc(P, sizeof *remap);
    uint64_t *start = NULL, *fill = NULL;
    uint8_t *vals = NULL;
    uint64_t expect = 0;
    for (unsigned s = 0; s < P; s++)
        expect += g->workers[s].part_start[t + 1] - g->workers[s].part_start[t];
    if (!remap || table_init(&p->tab, 8, 0, TABLE_MIN_SLOTS, expect) != 0) {
        part_nomem(p, "the tables");
        goto done;
    }
    p->src = &p->tab;
    /* Merge the keys; remap[s][rank] is the merged entry of worker s's
     * rank-th key of this partition. */
    for (unsigned s = 0; s < P; s++) {
        const worker *w = &g->workers[s];
        uint64_t first = w->part_start[t], n = w->part_start[t + 1] - first;
        remap[s] = malloc((n + 1) * sizeof **remap);
        if (!remap[s]) {
            part_nomem(p, "the tables");
            goto done;
        }
        for (uint64_t k = 0; k < n; k++) {
            uint32_t e = w->by_part[first + k];
            const entry *en = table_entry(&w->tab, e);
            int fresh;
            uint32_t i = table_find(&p->tab, en->hash, entry_key(en), en->len, &fresh);
            if (i == NO_ENTRY) {
                part_nomem(p, "the tables");
                goto done;
            }
            uint64_t have = 0, more;
            if (!fresh)
                memcpy(&have, table_value(&p->tab, i), 8);
            memcpy(&more, table_value(&w->tab, e), 8);
            have += more;
            memcpy(table_value(&p->tab, i), &have, 8);
            remap[s][k] = i;
        }
    }
    table_drop_slots(&p->tab);
    /* Each key's values, packed in one array. */
    uint32_t keys = p->tab.count;
    start = malloc(((size_t)keys + 1) * sizeof *start);
    fill = malloc(((size_t)keys + 1) * sizeof *fill);
    if (!start || !fill) {
        part_nomem(p, "the values");
        goto done;
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < keys; i++) {
        uint64_t n;
        memcpy(&n, table_value(&p->tab, i), 8);
        if (n > UINT32_MAX) {
            soren_error_set(&p->err, SOREN_EJOB,
                            "%s: a key has %llu values; reduce takes at most %u at a time",
                            g->spec->job_name, (unsigned long long)n, UINT32_MAX);
            p->failed = 1;
            goto done;
        }
        start[i] = fill[i] = total;
        total += n;
    }
    start[keys] = total;
    vals = malloc((total + 1) * vs);
    if (!vals) {
        part_nomem(p, "the values");
        goto done;
    }
    for (unsigned s = 0; s < P; s++) {
        const worker *w = &g->workers[s];
        for (uint64_t k = w->pair_part_start[t]; k < w->pair_part_start[t + 1]; k++) {
            uint32_t i = remap[s][table_entry(&w->tab, w->pair_entry[k])->aux];
            memcpy(vals + fill[i]++ * vs, w->pair_vals + k * vs, vs);
        }
    }
    /* The reduce phase takes them (freed with the part). */
    p->val_start = start;
    p->vals = vals;
    start = NULL;
    vals = NULL;
done:
    for (unsigned s = 0; remap && s < P; s++)
        free(remap[s]);
    free(remap);
    free(start);
    free(fill);
    free(vals);
}

/* Reduce without a combine: each key's values, sorted so that reduce sees
 * the same input whatever the schedule. */
static void reduce_collected(part *p)
{
    engine *g = p->g;
    size_t vs = g->vsize;
    soren_reduce_fn *reduce = g->spec->code->reduce;
    soren_type vt = g->spec->value_type;
    for (uint32_t i = 0; i < p->tab.count && !p->failed; i++) {
        uint64_t n = p->val_start[i + 1] - p->val_start[i];
        uint8_t *v = p->vals + p->val_start[i] * vs;
        if (n > 1)
            qsort_r(v, (size_t)n, vs, value_cmp, &vt);
        const entry *en = table_entry(&p->tab, i);
        reduce(&p->em, entry_key(en), en->len, v, (uint32_t)n, g->params);
    }
}

/* Merges partition t's keys from every worker's table. */
static int merge_part(worker *w, uint64_t t)
{
    part *p = &w->g->parts[t];
    if (w->g->dense)
        merge_dense(p, (unsigned)t);
    else if (w->g->mode == MODE_COMBINE)
        merge_combine(p, (unsigned)t);
    else
        merge_collect(p, (unsigned)t);
    return p->failed;
}

/* Reduces partition t.  Reduce is its own pass, after every partition is
 * merged, so that --explain can time merge and reduce apart. */
static int reduce_part(worker *w, uint64_t t)
{
    part *p = &w->g->parts[t];
    if (w->g->mode == MODE_COMBINE)
        reduce_combined(p);
    else
        reduce_collected(p);
    return p->failed;
}

/* ---- Phase 3: copy into the result --------------------------------------- */

static void copy_pairs(engine *g, const pairbuf *b, uint64_t first, uint64_t last,
                       uint64_t out_pair, uint64_t out_key)
{
    soren_result *r = g->out;
    uint64_t n = last - first;
    if (!n)
        return;
    uint64_t k0 = b->offs[first], k1 = b->offs[last];
    if (k1 > k0)
        memcpy(r->key_bytes + out_key, b->keys + k0, (size_t)(k1 - k0));
    for (uint64_t i = 0; i < n; i++)
        r->key_offset[out_pair + i] = out_key + (b->offs[first + i] - k0);
    memcpy(r->values + out_pair * g->vsize, b->vals + first * g->vsize, (size_t)n * g->vsize);
}

static void copy_table(engine *g, const table *t, uint64_t out_pair, uint64_t out_key)
{
    soren_result *r = g->out;
    uint64_t at = out_key;
    for (uint32_t i = 0; i < t->count; i++) {
        const entry *en = table_entry(t, i);
        r->key_offset[out_pair + i] = at;
        if (en->len)
            memcpy(r->key_bytes + at, entry_key(en), en->len);
        at += en->len;
        memcpy(r->values + (out_pair + i) * g->vsize, table_value(t, i), g->vsize);
    }
}

/* Copies unit u (a segment in list mode, else a partition) into the
 * result, where prepare_copy laid it out. */
static int copy_unit(worker *w, uint64_t u)
{
    engine *g = w->g;
    if (g->mode == MODE_LIST) {
        const segment *s = g->order[u];
        copy_pairs(g, &s->w->list, s->first, s->last, s->out_pair, s->out_key);
    } else {
        const part *p = &g->parts[u];
        if (g->spec->reduce == SOREN_REDUCE_FUNCTION)
            copy_pairs(g, &p->out, 0, p->out.count, p->out_pair, p->out_key);
        else
            copy_table(g, p->src, p->out_pair, p->out_key);
    }
    return 0;
}

static int segment_cmp(const void *a, const void *b)
{
    uint64_t x = (*(segment *const *)a)->seq, y = (*(segment *const *)b)->seq;
    return (x > y) - (x < y);
}

/* Lays the units out in the result and makes room for them. */
static soren_status prepare_copy(engine *g, soren_error *err)
{
    soren_result *r = g->out;
    uint64_t pairs = r->count, keys = r->count ? r->key_offset[r->count] : 0;
    uint64_t first_pairs = pairs;
    if (g->mode == MODE_LIST) {
        size_t n = 0;
        for (unsigned i = 0; i < g->nthreads; i++)
            n += g->workers[i].seg_count;
        g->order = malloc((n + 1) * sizeof *g->order);
        if (!g->order)
            return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory collecting pairs",
                                   g->spec->job_name);
        n = 0;
        for (unsigned i = 0; i < g->nthreads; i++)
            for (size_t j = 0; j < g->workers[i].seg_count; j++)
                g->order[n++] = &g->workers[i].segs[j];
        qsort(g->order, n, sizeof *g->order, segment_cmp);
        g->seg_total = n;
        for (size_t i = 0; i < n; i++) {
            segment *s = g->order[i];
            s->out_pair = pairs;
            s->out_key = keys;
            pairs += s->last - s->first;
            keys += s->w->list.offs[s->last] - s->w->list.offs[s->first];
        }
    } else {
        for (unsigned t = 0; t < g->nthreads; t++) {
            part *p = &g->parts[t];
            p->out_pair = pairs;
            p->out_key = keys;
            if (g->spec->reduce == SOREN_REDUCE_FUNCTION) {
                pairs += p->out.count;
                keys += p->out.key_used;
            } else {
                pairs += p->src->count;
                keys += p->src->key_total;
            }
        }
    }
    g->added = pairs - first_pairs;
    if (g->added == 0)
        return SOREN_OK;

    uint64_t *ko = realloc(r->key_offset, (pairs + 1) * sizeof *ko);
    if (ko)
        r->key_offset = ko;
    uint8_t *kb = ko ? realloc(r->key_bytes, keys ? keys : 1) : NULL;
    if (kb)
        r->key_bytes = kb;
    uint8_t *vb = kb ? realloc(r->values, pairs * g->vsize) : NULL;
    if (!vb)
        return soren_error_set(err, SOREN_ENOMEM,
                               "%s: out of memory storing %llu result pairs", g->spec->job_name,
                               (unsigned long long)pairs);
    r->values = vb;
    r->key_offset[pairs] = keys;
    r->count_cap = pairs;
    r->key_cap = keys ? keys : 1;
    return SOREN_OK;
}

/* ---- Threads ------------------------------------------------------------- */

void soren__run_threads(unsigned n, void *(*fn)(void *), void *args, size_t stride)
{
    pthread_t *tid = n > 1 ? malloc((size_t)n * sizeof *tid) : NULL;
    unsigned *started = n > 1 ? calloc(n, sizeof *started) : NULL;
    if (!tid || !started)
        n = 1;
    for (unsigned i = 1; i < n; i++)
        started[i] = pthread_create(&tid[i], NULL, fn, (char *)args + (size_t)i * stride) == 0;
    fn(args);
    for (unsigned i = 1; i < n; i++)
        if (started[i])
            pthread_join(tid[i], NULL);
    free(tid);
    free(started);
}

typedef struct items {
    void (*fn)(void *arg, uint64_t i);
    void *arg;
    uint64_t count;
    atomic_uint_fast64_t next;
} items;

static void *items_main(void *arg)
{
    items *t = arg;
    for (uint64_t i; (i = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed)) < t->count;)
        t->fn(t->arg, i);
    return NULL;
}

void soren__run_items(unsigned n, uint64_t count, void (*fn)(void *arg, uint64_t i), void *arg)
{
    items t = {.fn = fn, .arg = arg, .count = count};
    atomic_init(&t.next, 0);
    soren__run_threads(count < n ? (unsigned)(count ? count : 1) : n, items_main, &t, 0);
}

/* Milliseconds on the monotonic clock, for --explain's phase times. */
static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- The run ------------------------------------------------------------- */

static soren_status check_spec(const soren_stage_spec *spec, const soren_result *out,
                               engine *g, soren_error *err)
{
    const char *job = spec->job_name ? spec->job_name : "(job)";
    const soren_stage *code = spec->code;
    if (!code || !code->map)
        return soren_error_set(err, SOREN_EJOB, "%s: the plugin has no map function", job);
    if (spec->input_format == SOREN_INPUT_FIXED && spec->record_size == 0)
        return soren_error_set(err, SOREN_EJOB, "%s: the record size is 0", job);
    if (spec->value_size == 0)
        return soren_error_set(err, SOREN_EJOB, "%s: the value size is 0", job);
    if (out->value_size != spec->value_size)
        return soren_error_set(err, SOREN_EJOB,
                               "%s: the result holds %zu-byte values, the stage %zu-byte ones",
                               job, out->value_size, spec->value_size);
    if (spec->key_type != SOREN_TYPE_STRING) {
        g->key_size = soren_type_size(spec->key_type);
        if (g->key_size == 0)
            return soren_error_set(err, SOREN_EJOB, "%s: keys of type %s are not supported",
                                   job, soren_type_name(spec->key_type));
    }
    g->combine = (combine_ctx){code->combine.fn, code->combine.identity, spec->value_size};
    if (spec->combine == SOREN_COMBINE_NONE) {
        if (spec->reduce == SOREN_REDUCE_COMBINE)
            return soren_error_set(err, SOREN_EJOB,
                                   "%s: reduce \"combine\" needs a combine", job);
        g->mode = spec->reduce == SOREN_REDUCE_FUNCTION ? MODE_COLLECT : MODE_LIST;
    } else if (spec->combine == SOREN_COMBINE_USER) {
        if (!code->combine.fn || !code->combine.identity)
            return soren_error_set(err, SOREN_EJOB,
                                   "%s: the combine function or its identity is missing", job);
        g->ops = (combine_ops){user_first, user_fold, user_fold};
        g->mode = MODE_COMBINE;
    } else {
        if (soren_type_size(spec->value_type) != spec->value_size ||
            builtin_ops(spec->combine, spec->value_type, &g->ops) != 0)
            return soren_error_set(err, SOREN_EJOB,
                                   "%s: combine %u over values of type %s is not supported", job,
                                   (unsigned)spec->combine, soren_type_name(spec->value_type));
        g->mode = MODE_COMBINE;
        if (spec->combine == SOREN_COMBINE_SUM)
            g->sum_type = spec->value_type;
    }
    if (spec->reduce == SOREN_REDUCE_FUNCTION && !code->reduce)
        return soren_error_set(err, SOREN_EJOB, "%s: the plugin has no reduce function", job);
    return SOREN_OK;
}

/* The map tables' first size: as forced (--table-slots, a power of two),
 * else room for this thread's share of the projected distinct keys.  The
 * share is a guess both ways: keys split across threads when they are all
 * distinct, and every thread sees the frequent ones when they are skewed
 * (where the linear projection overestimates anyway).  Beyond
 * TABLE_EXPECT_MAX a table grows as it fills: a table far larger than its
 * keys only spreads them over more cache lines. */
static void first_table_size(const soren_cpu_options *opt, unsigned threads,
                             uint64_t *min_slots, uint64_t *expect)
{
    *min_slots = TABLE_MIN_SLOTS;
    *expect = 0;
    if (opt && opt->table_slots) {
        uint64_t slots = TABLE_FORCED_MIN_SLOTS;
        while (slots < opt->table_slots && slots < TABLE_EXPECT_MAX * 2)
            slots *= 2;
        *min_slots = slots;
    } else if (opt && opt->distinct_keys) {
        uint64_t share = opt->distinct_keys / threads + (opt->distinct_keys % threads != 0);
        *expect = share < TABLE_EXPECT_MAX ? share : TABLE_EXPECT_MAX;
    }
}

/* The thread of worker w in a pass: units until none is left, or one
 * failed on any thread. */
static void *pass_main(void *arg)
{
    worker *w = arg;
    engine *g = w->g;
    const pass *p = g->pass;
    void *alt_stack = p->plugin_code ? soren__signals_thread_stack() : NULL;
    int failed = 0;
    while (!failed && !atomic_load_explicit(&g->stop, memory_order_relaxed)) {
        uint64_t u = atomic_fetch_add_explicit(&g->next, 1, memory_order_relaxed);
        if (u >= p->units)
            break;
        failed = p->unit(w, u);
        if (failed)
            atomic_store_explicit(&g->stop, 1, memory_order_relaxed);
    }
    if (!failed && p->finish)
        p->finish(w);
    if (alt_stack)
        soren__signals_thread_stack_free(alt_stack);
    return NULL;
}

/* Runs a pass on the engine's threads, one worker each. */
static void run_pass(engine *g, const pass *p)
{
    g->pass = p;
    atomic_store(&g->next, 0);
    soren__run_threads(g->nthreads, pass_main, g->workers, sizeof *g->workers);
}

/* Runs a pass over every partition; the first failed partition's error. */
static soren_status run_parts(engine *g, const pass *p, soren_error *err)
{
    run_pass(g, p);
    for (unsigned t = 0; t < g->nthreads; t++)
        if (g->parts[t].failed)
            return soren_error_set(err, g->parts[t].err.code, "%s", g->parts[t].err.text);
    return SOREN_OK;
}

int soren_cpu_dense(const soren_stage_spec *spec, unsigned threads)
{
    if (spec->key_type != SOREN_TYPE_INDEX || spec->key_count == 0 ||
        spec->combine == SOREN_COMBINE_NONE || spec->value_size == 0)
        return 0;
    if (threads == 0)
        threads = soren_cpu_count();
    uint64_t per_key = (uint64_t)spec->value_size + 1; /* accumulator and seen flag */
    uint64_t limit = DENSE_BYTES_MAX / (per_key * threads + 4);
    return spec->key_count <= limit;
}

/* Reports every growth of the map tables, thread by thread, as an overflow
 * of the "table" region (old and new slot counts). */
static soren_status report_growths(const engine *g, soren_explain *x, soren_error *err)
{
    for (unsigned i = 0; g->mode != MODE_LIST && i < g->nthreads; i++) {
        const table *t = &g->workers[i].tab;
        for (unsigned k = 0; k < t->growths; k++) {
            soren_status rc = soren_explain_overflow(x, "table", t->first_slots << k,
                                                     t->first_slots << (k + 1), err);
            if (rc != SOREN_OK)
                return rc;
        }
    }
    return SOREN_OK;
}

soren_status soren_cpu_run(const soren_stage_spec *spec, const soren_input *inputs,
                           size_t input_count, const soren_params *params,
                           const soren_cpu_options *opt, soren_result *out, soren_error *err)
{
    engine *g = calloc(1, sizeof *g);
    if (!g)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory starting the CPU engine");
    soren_status rc = check_spec(spec, out, g, err);
    if (rc != SOREN_OK) {
        free(g);
        return rc;
    }
    static const soren_params no_params;
    g->spec = spec;
    g->params = params ? params : &no_params;
    g->inputs = inputs;
    g->input_count = input_count;
    g->vsize = spec->value_size;
    g->out = out;
    g->progress = opt ? opt->progress : NULL;
    g->fold = opt && opt->fold;
    if (g->fold && spec->input_format != SOREN_INPUT_PAIRS) {
        free(g);
        return soren_error_set(err, SOREN_EJOB, "%s: only pairs input can be folded",
                               spec->job_name);
    }
    if (g->fold && g->mode == MODE_COMBINE) {
        g->ops.first = copy_value;
        g->ops.fold = g->ops.merge;
    }
    /* Decided on the threads asked for, as --explain reports it, not on
     * the fewer that few chunks may leave. */
    g->dense = !(opt && opt->hash_only) && soren_cpu_dense(spec, opt ? opt->threads : 0);
    g->key_count = spec->key_count;
    g->map_dense = g->dense && !g->fold ? dense_loop(spec) : NULL;
    g->map_run = !g->fold && strided(spec) ? spec->code->map_run : NULL;

    uint64_t chunk = opt && opt->chunk_bytes ? opt->chunk_bytes : CHUNK_DEFAULT;
    if (spec->input_format == SOREN_INPUT_INDEX && !(opt && opt->chunk_bytes))
        chunk = CHUNK_TASKS;
    if (spec->input_format == SOREN_INPUT_FIXED) /* whole records per chunk */
        chunk = chunk < spec->record_size ? spec->record_size : chunk - chunk % spec->record_size;
    g->chunk_size = chunk;
    g->chunk_first = malloc((input_count + 1) * sizeof *g->chunk_first);
    if (!g->chunk_first) {
        free(g);
        return soren_error_set(err, SOREN_ENOMEM, "out of memory starting the CPU engine");
    }
    for (size_t i = 0; i < input_count; i++) {
        g->chunk_first[i] = g->chunks;
        g->chunks += inputs[i].size / chunk + (inputs[i].size % chunk != 0);
    }
    g->chunk_first[input_count] = g->chunks;

    unsigned n = opt && opt->threads ? opt->threads : soren_cpu_count();
    if (n > g->chunks)
        n = g->chunks ? (unsigned)g->chunks : 1;
    g->nthreads = n;
    g->workers = calloc(n, sizeof *g->workers);
    g->parts = calloc(n, sizeof *g->parts);
    if (!g->workers || !g->parts) {
        rc = soren_error_set(err, SOREN_ENOMEM, "out of memory starting the CPU engine");
        goto done;
    }
    soren_emit_fn *emit = g->dense                  ? dense_emitter(g)
                          : g->mode == MODE_COMBINE ? emit_combine
                          : g->mode == MODE_COLLECT ? emit_collect
                                                    : emit_list;
    uint64_t min_slots, expect;
    first_table_size(opt, n, &min_slots, &expect);
    for (unsigned i = 0; i < n; i++) {
        worker *w = &g->workers[i];
        w->g = g;
        w->em.emit = emit;
        w->em.ctx = w;
        soren_error_clear(&w->err);
        if (g->dense) {
            w->dense_count = g->key_count;
            w->dense_vals = calloc((size_t)g->key_count, g->vsize);
            w->dense_seen = calloc((size_t)g->key_count, 1);
            if (!w->dense_vals || !w->dense_seen) {
                rc = soren_error_set(err, SOREN_ENOMEM, "%s: out of memory for the index keys' "
                                     "arrays of %u threads; try fewer --threads",
                                     spec->job_name, n);
                goto done;
            }
        } else if (g->mode != MODE_LIST &&
                   (table_init(&w->tab, g->mode == MODE_COMBINE ? g->vsize : 8, 1, min_slots,
                               expect) != 0 ||
                    (g->mode == MODE_COMBINE && !(w->pipe_vals = malloc(PIPE * g->vsize))))) {
            rc = soren_error_set(err, SOREN_ENOMEM, "%s: out of memory for the map tables of "
                                 "%u threads; try fewer --threads", spec->job_name, n);
            goto done;
        }
        part *p = &g->parts[i];
        p->g = g;
        p->em.emit = emit_reduced;
        p->em.ctx = p;
        soren_error_clear(&p->err);
    }
    soren_phase_times ms = {0};

    /* map */
    uint64_t input_bytes = 0;
    for (size_t i = 0; i < input_count; i++)
        input_bytes += inputs[i].size;
    soren_progress_phase(g->progress, "map", input_bytes);
    double t0 = now_ms();
    atomic_init(&g->next, 0);
    atomic_init(&g->stop, 0);
    run_pass(g, &(const pass){g->chunks, map_chunk, map_finish, 1});
    /* An input file that shrank was read as zeros past its new end (a
     * failure of map on those zeros is a consequence, so this comes first). */
    for (size_t i = 0; i < input_count; i++) {
        rc = soren_input_check_shrunk(&inputs[i], spec->job_name, err);
        if (rc != SOREN_OK)
            goto done;
    }
    worker *bad = NULL;
    for (unsigned i = 0; i < n; i++) {
        worker *w = &g->workers[i];
        if (w->failed && (!bad || w->err_seq < bad->err_seq))
            bad = w;
    }
    if (bad) {
        rc = soren_error_set(err, bad->err.code, "%s", bad->err.text);
        goto done;
    }
    /* A worker whose thread did not start never grouped its (empty) table. */
    for (unsigned i = 0; g->mode != MODE_LIST && !g->dense && i < n; i++) {
        worker *w = &g->workers[i];
        if (!w->part_start)
            group_by_partition(w);
        if (w->failed) {
            rc = soren_error_set(err, w->err.code, "%s", w->err.text);
            goto done;
        }
    }
    double t1 = now_ms();
    ms.map = t1 - t0;

    /* merge, then reduce */
    soren_progress_phase(g->progress, "merge", 0);
    if (g->mode != MODE_LIST) {
        rc = run_parts(g, &(const pass){n, merge_part, NULL, 0}, err);
        if (rc != SOREN_OK)
            goto done;
    }
    double t2 = now_ms();
    if (spec->reduce == SOREN_REDUCE_FUNCTION) {
        soren_progress_phase(g->progress, "reduce", 0);
        rc = run_parts(g, &(const pass){n, reduce_part, NULL, 1}, err);
        if (rc != SOREN_OK)
            goto done;
    }
    double t3 = now_ms();
    ms.reduce = t3 - t2;

    /* copy: the last step of the merge into one compact list */
    rc = prepare_copy(g, err);
    if (rc != SOREN_OK)
        goto done;
    run_pass(g, &(const pass){g->mode == MODE_LIST ? g->seg_total : n, copy_unit, NULL, 0});
    out->count += g->added;
    ms.merge = (t2 - t1) + (now_ms() - t3);

    if (opt && opt->explain) {
        opt->explain->ms.map = ms.map;
        opt->explain->ms.merge = ms.merge;
        opt->explain->ms.reduce = ms.reduce;
        rc = report_growths(g, opt->explain, err);
    }

done:
    for (unsigned i = 0; g->workers && i < n; i++) {
        worker *w = &g->workers[i];
        table_free(&w->tab);
        free(w->pipe_vals);
        free(w->dense_vals);
        free(w->dense_seen);
        free(w->by_part);
        free(w->part_start);
        free(w->pair_entry);
        free(w->pair_vals);
        free(w->pair_part_start);
        pairbuf_free(&w->list);
        free(w->segs);
    }
    for (unsigned i = 0; g->parts && i < n; i++) {
        table_free(&g->parts[i].tab);
        free(g->parts[i].val_start);
        free(g->parts[i].vals);
        pairbuf_free(&g->parts[i].out);
    }
    free(g->workers);
    free(g->parts);
    free(g->order);
    free(g->chunk_first);
    free(g);
    return rc;
}

unsigned soren_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0 && (n < 1 || c < n))
            n = c;
    }
    return n < 1 ? 1 : (unsigned)n;
}
