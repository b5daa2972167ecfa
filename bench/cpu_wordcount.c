/*
 * cpu_wordcount.c - the CPU baseline of the wordcount plugin: plain C and
 * pthreads, no Soren.
 *
 *   cpu-wordcount [--threads N] FILE
 *
 * A word is what sdk/soren/text.h says: a maximal run of bytes other than
 * ASCII whitespace (space, \t, \n, \v, \f, \r).  Each thread takes a
 * contiguous share of FILE, its bounds moved forward past the word they
 * cut (a word belongs to the share it starts in), and counts its words in
 * its own open-addressing table whose slots hold keys of up to 16 bytes
 * inline (longer ones point into the mapped file).  The main thread folds
 * the tables into thread 0's, sorts the words by their bytes (a prefix
 * first) and writes `soren-host run wordcount --device cpu`'s output:
 * "WORD\tCOUNT", a backslash in WORD written as \\, counts as u32
 * (wrapping, as the plugin's sum does).  tests/cpu-baselines.sh compares
 * the two byte for byte.
 */
#include "cpu_baseline.h"

#include <inttypes.h>

#define INLINE_KEY 16
#define FIRST_SLOTS (1u << 16)

typedef struct slot {
    uint64_t hash; /* 0: empty (hashes are made odd) */
    uint32_t len;
    uint32_t count;
    union {
        uint8_t bytes[INLINE_KEY]; /* len <= INLINE_KEY */
        const uint8_t *ptr;        /* longer: in the mapped file */
    } key;
} slot;

typedef struct table {
    slot *slots;
    uint64_t mask, used;
} table;

typedef struct share {
    const uint8_t *begin, *end;
    table t;
    int failed;
} share;

static inline int is_space(uint8_t c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static inline const uint8_t *slot_key(const slot *s)
{
    return s->len <= INLINE_KEY ? s->key.bytes : s->key.ptr;
}

/* A multiply-xorshift hash over 8-byte words (odd: 0 marks an empty slot). */
static inline uint64_t hash_word(const uint8_t *p, uint32_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15u ^ n;
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdu;
        h ^= h >> 32;
    }
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, p + i, n - i);
        h = (h ^ w) * 0xc4ceb9fe1a85ec53u;
    }
    h ^= h >> 29;
    h *= 0x94d049bb133111ebu;
    h ^= h >> 32;
    return h | 1;
}

static int table_init(table *t, uint64_t slots)
{
    t->slots = calloc(slots, sizeof *t->slots);
    t->mask = slots - 1;
    t->used = 0;
    return t->slots ? 0 : -1;
}

static int table_grow(table *t)
{
    table g;
    if (table_init(&g, (t->mask + 1) * 2) != 0)
        return -1;
    for (uint64_t i = 0; i <= t->mask; i++) {
        const slot *s = &t->slots[i];
        if (!s->hash)
            continue;
        uint64_t j = s->hash & g.mask;
        while (g.slots[j].hash)
            j = (j + 1) & g.mask;
        g.slots[j] = *s;
    }
    g.used = t->used;
    free(t->slots);
    *t = g;
    return 0;
}

/* Adds count to word's slot (key points into the mapped file, which
 * outlives every table). */
static int table_add(table *t, const uint8_t *key, uint32_t len, uint64_t h, uint32_t count)
{
    if ((t->used + 1) * 2 > t->mask + 1 && table_grow(t) != 0)
        return -1;
    uint64_t i = h & t->mask;
    for (;;) {
        slot *s = &t->slots[i];
        if (!s->hash) {
            s->hash = h;
            s->len = len;
            s->count = count;
            if (len <= INLINE_KEY)
                memcpy(s->key.bytes, key, len);
            else
                s->key.ptr = key;
            t->used++;
            return 0;
        }
        if (s->hash == h && s->len == len && memcmp(slot_key(s), key, len) == 0) {
            s->count += count; /* u32, wrapping as the plugin's sum */
            return 0;
        }
        i = (i + 1) & t->mask;
    }
}

static void *count_share(void *arg)
{
    share *s = arg;
    if (table_init(&s->t, FIRST_SLOTS) != 0) {
        s->failed = 1;
        return NULL;
    }
    const uint8_t *p = s->begin, *end = s->end;
    while (p < end) {
        while (p < end && is_space(*p))
            p++;
        if (p == end)
            break;
        const uint8_t *w = p;
        while (p < end && !is_space(*p))
            p++;
        uint32_t len = (uint32_t)(p - w);
        if (table_add(&s->t, w, len, hash_word(w, len), 1) != 0) {
            s->failed = 1;
            return NULL;
        }
    }
    return NULL;
}

static int slot_cmp(const void *a, const void *b)
{
    const slot *x = *(const slot *const *)a, *y = *(const slot *const *)b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(slot_key(x), slot_key(y), n) : 0;
    if (c)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

static void put_word(const uint8_t *w, uint32_t n)
{
    /* soren-host's tsv escapes \\, \t, \n and \r; only the backslash can
     * be in a word. */
    uint32_t run = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (w[i] != '\\')
            continue;
        fwrite(w + run, 1, i - run, stdout);
        fputs("\\\\", stdout);
        run = i + 1;
    }
    fwrite(w + run, 1, n - run, stdout);
}

int main(int argc, char **argv)
{
    static const char name[] = "cpu-wordcount";
    const char *path;
    long threads;
    baseline_args(argc, argv, name, "FILE", 1, &path, &threads);
    uint64_t size;
    const uint8_t *data = baseline_map(name, path, &size);

    share *shares = baseline_calloc(name, (size_t)threads, sizeof *shares, "the threads");
    /* Share t starts at its even split, moved past the rest of a word that
     * began before it. */
    for (long t = 0; t <= threads; t++) {
        uint64_t at = size * (uint64_t)t / (uint64_t)threads;
        while (at > 0 && at < size && !is_space(data[at - 1]))
            at++;
        if (t < threads)
            shares[t].begin = data + at;
        if (t > 0)
            shares[t - 1].end = data + at;
    }
    baseline_run(name, threads, count_share, shares, sizeof *shares);
    for (long t = 0; t < threads; t++)
        if (shares[t].failed) {
            fprintf(stderr, "%s: out of memory for the words\n", name);
            return 1;
        }

    table *all = &shares[0].t;
    for (long t = 1; t < threads; t++) {
        const table *o = &shares[t].t;
        for (uint64_t i = 0; i <= o->mask; i++) {
            const slot *s = &o->slots[i];
            if (s->hash && table_add(all, slot_key(s), s->len, s->hash, s->count) != 0) {
                fprintf(stderr, "%s: out of memory merging the words\n", name);
                return 1;
            }
        }
        free(shares[t].t.slots);
    }
    /* Inline keys point into their slot: the table must not grow after
     * the order is taken. */
    slot **order = baseline_calloc(name, all->used + 1, sizeof *order, "ordering the words");
    uint64_t n = 0;
    for (uint64_t i = 0; i <= all->mask; i++)
        if (all->slots[i].hash)
            order[n++] = &all->slots[i];
    qsort(order, n, sizeof *order, slot_cmp);
    for (uint64_t i = 0; i < n; i++) {
        put_word(slot_key(order[i]), order[i]->len);
        printf("\t%" PRIu32 "\n", order[i]->count);
    }
    free(order);
    free(all->slots);
    free(shares);
    baseline_unmap(data, size);
    return baseline_done(name);
}
