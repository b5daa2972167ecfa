/*
 * adapt.c - the adaptive engine's decisions (see adapt.h): how big the
 * sample is, how many distinct keys the sketch saw, how big the regions
 * should start, which variant runs, and the --explain report.
 *
 * Everything here is plain arithmetic over the metrics, shared by the GPU
 * and the CPU engine, so both decide the same way from the same numbers.
 */
#include "adapt.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const variant_names[] = {"auto", "hash", "direct", "sort", "block", "dense"};

const char *soren_variant_name(soren_variant v)
{
    return (unsigned)v < sizeof variant_names / sizeof variant_names[0] ? variant_names[v] : "?";
}

int soren_variant_parse(const char *name, soren_variant *out)
{
    for (unsigned v = 0; v < sizeof variant_names / sizeof variant_names[0]; v++)
        if (strcmp(name, variant_names[v]) == 0) {
            *out = (soren_variant)v;
            return 0;
        }
    return -1;
}

/* ---- Arithmetic ---------------------------------------------------------- */

#define U64_LIMIT 18446744073709551615.0 /* UINT64_MAX as a double (2^64) */

/* ceil(x) as a count.  A product of doubles can land one ulp above an
 * integer (0.7 * 10 is 7.000000000000001), which a plain ceil would turn
 * into one more record; a relative slack of 1e-12 absorbs that error and
 * nothing a caller could mean. */
static uint64_t ceil_count(double x)
{
    if (!(x > 0))
        return 0;
    double c = ceil(x - x * 1e-12);
    return c >= U64_LIMIT ? UINT64_MAX : (uint64_t)c;
}

/* The smallest power of two >= n (n <= 2^63; larger n get 2^63). */
static uint64_t next_pow2(uint64_t n)
{
    uint64_t p = 1;
    while (p < n && p < (UINT64_C(1) << 63))
        p <<= 1;
    return p;
}

/* a + b and a * b, stopping at UINT64_MAX instead of wrapping: a projected
 * size that wraps would be tiny, and tiny regions only cost overflows, but a
 * silent wrap is still a lie in --explain. */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* x * 5/4: the headroom every projected region gets. */
static uint64_t with_headroom(uint64_t x)
{
    return add_sat(x, x / 4 + (x % 4 != 0));
}

/* ---- Monitoring ---------------------------------------------------------- */

uint64_t soren_sample_size(uint64_t total_records, uint64_t total_bytes, double fraction)
{
    if (total_records == 0 || !(fraction > 0)) /* also NaN */
        return 0;
    if (fraction > 1)
        fraction = 1;
    uint64_t n = ceil_count(fraction * (double)total_records);
    if (n > total_records)
        n = total_records;
    /* Cap by bytes at the input's mean record size: n * total_bytes /
     * total_records <= SOREN_SAMPLE_BYTES_MAX.  In 128 bits, as the product
     * of a record count and a byte budget passes 64. */
    if (total_bytes > SOREN_SAMPLE_BYTES_MAX) {
        unsigned __int128 cap =
            (unsigned __int128)SOREN_SAMPLE_BYTES_MAX * total_records / total_bytes;
        if (n > cap)
            n = (uint64_t)cap;
    }
    return n ? n : 1;
}

uint64_t soren_sketch_estimate(const uint8_t *registers)
{
    const double m = SOREN_SKETCH_REGISTERS;
    double sum = 0;
    unsigned zeros = 0;
    for (unsigned i = 0; i < SOREN_SKETCH_REGISTERS; i++) {
        sum += ldexp(1.0, -(int)registers[i]);
        zeros += registers[i] == 0;
    }
    double alpha = 0.7213 / (1 + 1.079 / m);
    double estimate = alpha * m * m / sum;
    /* Few keys leave registers empty, and the harmonic mean is biased high
     * there; counting the empty registers (linear counting) is not. */
    if (estimate <= 2.5 * m && zeros > 0)
        estimate = m * log(m / zeros);
    /* 64-bit hashes: no large-range correction is needed below 2^50 keys. */
    return estimate >= U64_LIMIT ? UINT64_MAX : (uint64_t)llround(estimate);
}

/* ---- Projection ---------------------------------------------------------- */

/* Regions for an input nobody watched: generous in the input's bytes, since
 * nothing bounds what map emits per byte. */
static void project_blind(const soren_metrics *m, soren_projection *p)
{
    uint64_t b = m->total_bytes;
    uint64_t quarter = b / 4;
    p->table_slots = next_pow2(quarter > 65536 ? quarter : 65536);
    p->key_space = add_sat(mul_sat(b, 4), UINT64_C(1) << 20);
    p->pair_slots = add_sat(b, 65536);
}

/* Distinct keys grow with the records as D(n) = K n^g (Heaps' law), and
 * the sample measured g from half of it to all of it: g = log2(D(n) /
 * D(n/2)).  1 is linear, exact for keys that keep appearing at the
 * sample's rate; a vocabulary the sample has mostly seen grows slower
 * (wordcount's 8 GiB of Zipf text, a million words: 0.43, 8.4M keys and
 * 16M table slots where the linear bound asked for 192M and 512M).  Exponents from
 * KEY_GROWTH_LINEAR up count as linear: the sketch's error (1.6%) could
 * otherwise turn keys that keep appearing into a table that overflows.
 * Without the half sample, linear: an upper bound. */
#define KEY_GROWTH_LINEAR 0.9

static double key_growth(const soren_metrics *m)
{
    if (!m->half_distinct_keys || !m->distinct_keys)
        return 1;
    double g = log2((double)m->distinct_keys / (double)m->half_distinct_keys);
    return g >= KEY_GROWTH_LINEAR ? 1 : g > 0 ? g : 0;
}

void soren_project(const soren_stage_spec *spec, const soren_metrics *m, soren_projection *p)
{
    memset(p, 0, sizeof *p);
    if (!m->ran) {
        project_blind(m, p);
        return;
    }
    double scale = m->sampled_records ? (double)m->total_records / (double)m->sampled_records : 0;
    p->pairs = ceil_count((double)m->pairs * scale);
    uint64_t distinct = ceil_count((double)m->distinct_keys * pow(scale, key_growth(m)));
    if (distinct > p->pairs)
        distinct = p->pairs;
    if (spec->key_type == SOREN_TYPE_INDEX && distinct > spec->key_count)
        distinct = spec->key_count;
    p->distinct_keys = distinct;
    /* m->key_bytes counts each sampled pair's stored footprint, so its mean
     * per pair is the mean footprint of a key as the key space holds it. */
    double mean_key = m->pairs ? (double)m->key_bytes / (double)m->pairs : 0;
    p->key_bytes = ceil_count((double)distinct * mean_key);
    uint64_t twice = mul_sat(distinct, 2);
    p->table_slots = next_pow2(twice > 1024 ? twice : 1024);
    p->key_space = add_sat(with_headroom(p->key_bytes), UINT64_C(1) << 20);
    p->pair_slots = add_sat(with_headroom(p->pairs), 65536);
}

/* ---- Choice -------------------------------------------------------------- */

/* A reduce without a combine needs each key's values together.  hash keeps
 * one copy of each key and groups the pairs by 32-bit table refs; sort
 * copies the key of every pair and groups by sorting keys.  Where typed keys
 * (which radix-sort like refs) are mostly distinct, the table saves little
 * and costs a probe per pair, so sort groups them; where keys repeat, or are
 * strings (which sort by comparing bytes), hash does. */
static const char *choose_grouping(const soren_metrics *m, int on_gpu, soren_type key_type,
                                   soren_variant *out)
{
    *out = SOREN_VARIANT_HASH;
    if (!on_gpu)
        return "reduce without a combine: hash, values grouped by key (the CPU engine "
               "groups through its tables)";
    if (!m->ran)
        return "reduce without a combine, no monitoring (--sample 0): hash, values grouped "
               "by key";
    if (key_type == SOREN_TYPE_STRING)
        return "reduce without a combine, string keys: hash, values grouped by the table's "
               "key refs";
    if (m->distinct_keys * 2 < m->pairs)
        return "reduce without a combine, keys repeat in the sample (under one distinct key "
               "per two pairs): hash, values grouped by the table's key refs";
    *out = SOREN_VARIANT_SORT;
    return "reduce without a combine, typed keys mostly distinct in the sample (one "
           "distinct key per two pairs or more): sort, values grouped by a radix sort of "
           "the keys";
}

const char *soren_choose(const soren_stage_spec *spec, const soren_metrics *m,
                         uint64_t small_keys, int on_gpu, soren_variant *out)
{
    if (spec->combine == SOREN_COMBINE_NONE && spec->reduce == SOREN_REDUCE_NONE) {
        *out = SOREN_VARIANT_DIRECT;
        return "map-only stage (no combine, no reduce): direct";
    }
    if (spec->combine == SOREN_COMBINE_NONE)
        return choose_grouping(m, on_gpu, spec->key_type, out);
    /* More index keys than dense can number are hashed like any others. */
    int dense_fits = spec->key_count <= SOREN_DENSE_KEYS_MAX;
    if (spec->key_type == SOREN_TYPE_INDEX && (!on_gpu || dense_fits)) {
        *out = on_gpu ? SOREN_VARIANT_DENSE : SOREN_VARIANT_HASH;
        return on_gpu ? "index keys bounded by the manifest: dense"
                      : "index keys bounded by the manifest: hash (the CPU engine chooses "
                        "dense itself, where its arrays fit)";
    }
    if (!m->ran) {
        *out = SOREN_VARIANT_HASH;
        return "no monitoring (--sample 0): hash";
    }
    if (m->distinct_keys < small_keys) {
        *out = on_gpu ? SOREN_VARIANT_BLOCK : SOREN_VARIANT_HASH;
        return on_gpu ? "distinct keys in the sample under --small-keys: block"
                      : "distinct keys in the sample under --small-keys: hash (the CPU "
                        "engine's per-thread tables are its block variant)";
    }
    *out = SOREN_VARIANT_HASH;
    return "distinct keys in the sample at or over --small-keys: hash";
}

/* ---- Several GPUs -------------------------------------------------------- */

/* What spreading a run over the GPUs of one host gains and costs, from the
 * figures in bench/results/h100/devices.md (the model is docs/mpi.md's,
 * "Where more GPUs stop paying"):
 *  - a process that starts CUDA on one more GPU pays 175-235 ms for it, and
 *    a plain process on two GPUs took 0.69-0.82x the time of one over 8 GiB:
 *    only a resident host, whose GPUs are started, spreads a run unasked;
 *  - a second GPU saves about SPREAD_SAVED_MS_PER_GIB for every GiB read
 *    from the page cache, which the host copies to two GPUs faster than to
 *    one (histogram: 8 ms of 28 over 1 GiB, 18 of 49 over 2 GiB);
 *  - it costs the exchange and the fold of the first stage's pairs, about
 *    SPREAD_PAIR_NS a pair beside SPREAD_FIXED_MS (wordcount's 195,280
 *    keys: exchange 6-13 ms and fold 4 ms; pageviewcount's millions of
 *    (URL, IP) keys: over a second), and below SPREAD_LEAST_BYTES the
 *    saving is within the noise of a run;
 *  - a third GPU saves nothing more: the host's copies from the page cache
 *    reach four GPUs no faster than two. */
#define SPREAD_LEAST_BYTES (UINT64_C(1) << 30)
#define SPREAD_SAVED_MS_PER_GIB 9.0
#define SPREAD_PAIR_NS 80.0
#define SPREAD_FIXED_MS 2.0
/* the saving must pass the cost by this much: the figures above are one
 * host's, and a run that gains little is not worth two GPUs */
#define SPREAD_MARGIN 1.5
enum { SPREAD_GPUS_MOST = 2 };

uint64_t soren_expected_pairs(uint64_t bytes, uint64_t last_bytes, uint64_t last_pairs)
{
    if (!last_bytes)
        return SOREN_PAIRS_UNKNOWN;
    if (bytes <= last_bytes)
        return last_pairs;
    return ceil_count((double)last_pairs * ((double)bytes / (double)last_bytes));
}

const char *soren_choose_devices(const soren_spread_case *c, int *count)
{
    *count = 1;
    if (c->gpus < 2)
        return "one GPU usable: one GPU";
    if (!c->started)
        return "a process of its own: starting CUDA on another GPU costs more than it saves "
               "(--devices spreads the run, and so does a resident host by itself): one GPU";
    if (c->busy)
        return "another job runs on this host's GPUs: one GPU, the least busy";
    if (c->bytes < SPREAD_LEAST_BYTES)
        return "input under 1 GiB, or of unknown size: one GPU";
    if (c->pairs == SOREN_PAIRS_UNKNOWN)
        return "the job's first run on this host, whose first stage's pairs are not known "
               "yet: one GPU";
    double saved = SPREAD_SAVED_MS_PER_GIB * ((double)c->bytes / (double)(UINT64_C(1) << 30));
    double cost = SPREAD_FIXED_MS + SPREAD_PAIR_NS * 1e-6 * (double)c->pairs;
    if (saved < SPREAD_MARGIN * cost)
        return "exchanging and folding the first stage's pairs would cost about what a "
               "second GPU saves on this input: one GPU";
    *count = c->gpus < SPREAD_GPUS_MOST ? c->gpus : SPREAD_GPUS_MOST;
    return "input of 1 GiB or more whose first stage leaves few enough pairs to exchange: "
           "two GPUs (the page cache reaches more no faster)";
}

/* ---- Explain ------------------------------------------------------------- */

soren_status soren_explain_overflow(soren_explain *x, const char *region, uint64_t old_size,
                                    uint64_t new_size, soren_error *err)
{
    if (x->overflow_count == x->overflow_cap) {
        size_t cap = x->overflow_cap ? x->overflow_cap * 2 : 16;
        soren_overflow *grown = realloc(x->overflows, cap * sizeof *grown);
        if (!grown)
            return soren_error_set(err, SOREN_ENOMEM,
                                   "%s: out of memory recording that the %s region grew",
                                   x->job ? x->job : "(job)", region);
        x->overflows = grown;
        x->overflow_cap = cap;
    }
    x->overflows[x->overflow_count++] = (soren_overflow){region, old_size, new_size};
    return SOREN_OK;
}

void soren_explain_destroy(soren_explain *x)
{
    free(x->overflows);
    x->overflows = NULL;
    x->overflow_count = x->overflow_cap = 0;
}

/* Sizes and counts are integers in JSON; jansson's are signed 64-bit, and
 * nothing here reaches 2^63 but a saturated projection, which stays
 * saturated. */
static json_t *count(uint64_t n)
{
    return json_integer(n > INT64_MAX ? INT64_MAX : (json_int_t)n);
}

/* Milliseconds to the microsecond: finer digits are timer noise. */
static json_t *millis(double ms)
{
    return json_real(round(ms * 1000) / 1000);
}

/* Sets o[key] = v, taking v (NULL: out of memory); returns 0 on failure.
 * Objects are built by joining puts with & rather than &&, so every put runs
 * and releases its value even after one failed: json_object_set_new takes v
 * whatever happens, and a NULL o only releases v. */
static int put(json_t *o, const char *key, json_t *v)
{
    if (!o) {
        json_decref(v);
        return 0;
    }
    return json_object_set_new(o, key, v) == 0;
}

static json_t *metrics_json(const soren_metrics *m)
{
    json_t *o = json_object();
    int ok = put(o, "ran", json_boolean(m->ran)) &
             put(o, "sample_fraction", json_real(m->fraction)) &
             put(o, "total_records", count(m->total_records)) &
             put(o, "total_bytes", count(m->total_bytes)) &
             put(o, "sampled_records", count(m->sampled_records)) &
             put(o, "sampled_bytes", count(m->sampled_bytes)) &
             put(o, "pairs", count(m->pairs)) &
             put(o, "key_bytes", count(m->key_bytes)) &
             put(o, "value_bytes", count(m->value_bytes)) &
             put(o, "distinct_keys", count(m->distinct_keys));
    if (m->half_distinct_keys)
        ok &= put(o, "half_sample_distinct_keys", count(m->half_distinct_keys));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *projection_json(const soren_projection *p)
{
    json_t *o = json_object();
    int ok = put(o, "pairs", count(p->pairs)) &
             put(o, "distinct_keys", count(p->distinct_keys)) &
             put(o, "key_bytes", count(p->key_bytes)) &
             put(o, "table_slots", count(p->table_slots)) &
             put(o, "key_space", count(p->key_space)) &
             put(o, "pair_slots", count(p->pair_slots));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *overflow_json(const soren_overflow *v)
{
    json_t *o = json_object();
    int ok = put(o, "region", json_string(v->region ? v->region : "?")) &
             put(o, "old_size", count(v->old_size)) & put(o, "new_size", count(v->new_size));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *overflows_json(const soren_explain *x)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < x->overflow_count; i++) {
        if (json_array_append_new(a, overflow_json(&x->overflows[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* The GPU's two transfers are one "copy" phase to a reader, and each on
 * its own for bandwidth figures; the CPU engine has none. */
static json_t *times_json(const soren_phase_times *t)
{
    json_t *o = json_object();
    int ok = put(o, "monitor", millis(t->monitor)) &
             put(o, "copy", millis(t->upload + t->download)) &
             put(o, "upload", millis(t->upload)) & put(o, "download", millis(t->download)) &
             put(o, "split", millis(t->split)) & put(o, "map", millis(t->map)) &
             put(o, "merge", millis(t->merge)) & put(o, "reduce", millis(t->reduce)) &
             put(o, "sort", millis(t->sort));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A candidate's map time per unit timed (a byte, or a task of index
 * input), in nanoseconds; null until it has been timed. */
static json_t *candidate_json(const soren_shape_search *s, unsigned i)
{
    json_t *o = json_object();
    int ok = put(o, "block_threads", count(s->candidates[i].block_threads)) &
             put(o, "block_slots", count(s->candidates[i].block_slots)) &
             put(o, "ns_per_unit", s->units[i] > 0 ? json_real(s->ms[i] * 1e6 / s->units[i])
                                                   : json_null());
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *shape_json(const soren_explain *x)
{
    const soren_shape_search *s = &x->shape_search;
    json_t *o = json_object(), *candidates = json_array();
    int ok = put(o, "block_threads", count(x->shape.block_threads)) &
             put(o, "block_slots", count(x->shape.block_slots)) &
             put(o, "rule", json_string(s->rule ? s->rule : "")) &
             put(o, "timed", count(s->timed)) & put(o, "candidates", candidates);
    for (unsigned i = 0; ok && i < s->count; i++)
        ok = json_array_append_new(candidates, candidate_json(s, i)) == 0;
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The fields every stage reports: the variant and why, the metrics, the
 * sizes, the overflows and the phase times; on the GPU the launch shape. */
static int put_stage(json_t *o, const soren_explain *x)
{
    return put(o, "variant", json_string(soren_variant_name(x->variant))) &
           put(o, "rule", json_string(x->rule ? x->rule : "")) &
           put(o, "block_slots", count(x->block_slots)) &
           (x->shape_search.count ? put(o, "shape", shape_json(x)) : 1) &
           put(o, "key_parts", count(x->key_parts)) & put(o, "narrowings", count(x->narrowings)) &
           put(o, "waits", count(x->waits)) &
           put(o, "metrics", metrics_json(&x->metrics)) &
           put(o, "projection", projection_json(&x->projection)) &
           put(o, "overflows", overflows_json(x)) & put(o, "times_ms", times_json(&x->ms)) &
           put(o, "pairs", count(x->pairs));
}

static json_t *devices_json(const soren_explain *x)
{
    json_t *o = json_object();
    if (!(put(o, "count", count((uint64_t)x->devices)) &
          put(o, "rule", json_string(x->devices_rule)))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *chunks_json(const soren_chunking *c)
{
    json_t *o = json_object();
    int ok = put(o, "budget", count(c->budget)) & put(o, "chunk_bytes", count(c->chunk_bytes)) &
             put(o, "count", count(c->count)) & put(o, "largest", count(c->largest)) &
             put(o, "inputs_ms", millis(c->inputs_ms));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *sharing_json(const soren_sharing *b)
{
    json_t *o = json_object();
    int ok = put(o, "pieces", count(b->pieces)) & put(o, "cpu_pieces", count(b->cpu_pieces)) &
             put(o, "cpu_threads", count(b->cpu_threads)) &
             put(o, "gpu_bytes", count(b->gpu_bytes)) & put(o, "cpu_bytes", count(b->cpu_bytes)) &
             put(o, "gpu_ms", millis(b->gpu_ms)) & put(o, "cpu_ms", millis(b->cpu_ms)) &
             put(o, "fold", json_string(b->fold ? b->fold : "none")) &
             put(o, "fold_ms", millis(b->fold_ms));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *iterations_json(const soren_iterations *it)
{
    json_t *o = json_object();
    int ok = put(o, "runs", count(it->runs)) & put(o, "limit", count(it->limit)) &
             put(o, "converged", json_boolean(it->converged)) &
             put(o, "device_runs", count(it->device_runs));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *rank_json(const soren_rank_stage *st, int rank)
{
    json_t *o = json_object(), *input = json_array(), *ms = json_object();
    int ok = put(o, "rank", count((uint64_t)rank)) &
             put(o, "device", json_string(st->gpu ? "gpu" : "cpu")) & put(o, "input", input) &
             (json_array_append_new(input, count(st->begin)) == 0) &
             (json_array_append_new(input, count(st->end)) == 0) &
             put(o, "mapped_pairs", count(st->mapped)) &
             put(o, "sent_bytes", count(st->sent_bytes)) &
             put(o, "received_pairs", count(st->received)) &
             put(o, "fold_device", json_string(st->folded_whole && rank > 0 ? "none"
                                               : st->fold_gpu             ? "gpu"
                                                                          : "cpu")) &
             put(o, "pairs", count(st->pairs)) &
             put(o, "times_ms", ms) & put(ms, "map", millis(st->ms_map)) &
             put(ms, "exchange", millis(st->ms_exchange)) & put(ms, "fold", millis(st->ms_fold));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* "distributed": {"ranks": N, "stages": [{"stage", "shuffled", "ranks": [...]}]} */
static json_t *distributed_json(const soren_distributed *d, size_t n)
{
    json_t *o = json_object(), *stages = json_array();
    int ok = put(o, "ranks", count((uint64_t)d->ranks)) & put(o, "stages", stages);
    for (size_t s = 0; ok && s < n; s++) {
        json_t *stage = json_object(), *ranks = json_array();
        ok &= json_array_append_new(stages, stage) == 0 &&
              (put(stage, "stage", count(s + 1)) &
               put(stage, "shuffled", json_boolean(d->stages[s * (size_t)d->ranks].shuffled)) &
               put(stage, "ranks", ranks));
        for (int r = 0; ok && r < d->ranks; r++)
            ok &= json_array_append_new(ranks, rank_json(&d->stages[s * (size_t)d->ranks + r],
                                                         r)) == 0;
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

void soren_explain_print(const soren_explain *x, FILE *f)
{
    soren_explain_print_stages(x, 1, NULL, NULL, f);
}

void soren_explain_print_stages(const soren_explain *xs, size_t n, const soren_iterations *it,
                                const soren_distributed *d, FILE *f)
{
    const soren_explain *x = &xs[0];
    json_t *doc = json_object();
    int ok = put(doc, "job", json_string(x->job ? x->job : "")) &
             put(doc, "device", json_string(x->device ? x->device : "cpu")) & put_stage(doc, x);
    if (n > 1) {
        json_t *later = json_array();
        ok &= put(doc, "stages", later);
        for (size_t i = 1; ok && i < n; i++) {
            json_t *stage = json_object();
            /* The array takes stage, even when appending fails. */
            ok &= json_array_append_new(later, stage) == 0 &&
                  (put(stage, "stage", count(i + 1)) & put_stage(stage, &xs[i]));
        }
    }
    if (x->devices_rule)
        ok &= put(doc, "devices", devices_json(x));
    if (x->chunks.count)
        ok &= put(doc, "chunks", chunks_json(&x->chunks));
    if (x->sharing.gpu_bytes + x->sharing.cpu_bytes)
        ok &= put(doc, "coprocessing", sharing_json(&x->sharing));
    if (it)
        ok &= put(doc, "iterations", iterations_json(it));
    if (d)
        ok &= put(doc, "distributed", distributed_json(d, n));
    /* Printed after the run succeeded: running out of memory here must not
     * fail the run, only say why the report is missing. */
    if (!ok)
        fputs("{\"error\": \"out of memory writing the explain report\"}\n", f);
    else if (json_dumpf(doc, f, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12)) ==
             0)
        fputc('\n', f);
    json_decref(doc);
}
