/*
 * monitor.c - initial monitoring on the CPU (the Soren paper, section 3.2):
 * map runs over a sample of the records, storing nothing, to count what it
 * emits before the run sizes anything.
 *
 * The inputs are cut into chunks of MONITOR_CHUNK bytes, and two passes run
 * over them, each by every thread taking chunks from a shared counter:
 *
 *  count   how many records start in each chunk.  Exact for both formats:
 *          arithmetic for fixed records (no pass at all), memchr for lines
 *          (a pass at memory speed, far cheaper than the map that follows).
 *          A prefix sum then numbers each chunk's first record.
 *  sample  the sample is records soren__sample_record(i, n, total) for
 *          i < n = soren_sample_size(...): spread evenly over the input, and
 *          the very records the GPU engine samples, so both devices see the
 *          same metrics.  Each chunk maps the sampled records that start in
 *          it, through an emitter that counts pairs and key footprints and
 *          sketches the keys (HyperLogLog registers, soren/engine/sketch.h).
 *
 * Each thread keeps its own counters and sketch; they are summed, and the
 * sketches merged register by register (max), at the end.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "internal.h"
#include "../io/signals.h"
#include <soren/engine/sketch.h>

#define MONITOR_CHUNK (UINT64_C(1) << 20)

typedef struct chunk {
    const soren_input *in;
    uint64_t begin, end; /* bytes of in */
    uint64_t first;      /* the number of its first record in the whole input */
    uint64_t count;      /* records that start in it */
} chunk;

typedef struct monitor monitor;

typedef struct mworker {
    monitor *mon;
    soren_emitter em;
    uint64_t records, bytes, pairs, key_bytes;
    uint8_t sketch[SOREN_SKETCH_REGISTERS];
    int failed;
    uint64_t err_chunk; /* the chunk it failed in: the earliest failure wins */
    soren_error err;
} mworker;

struct monitor {
    const soren_stage_spec *spec;
    const soren_params *params;
    soren_progress *progress; /* a cancelled run stops before its next chunk */
    size_t key_size; /* typed keys: the one size allowed */
    chunk *chunks;
    uint64_t chunk_count;
    uint64_t total, sample; /* records in the input, in the sample */
    atomic_uint_fast64_t next;
    atomic_int stop;
};

/* ---- Chunks -------------------------------------------------------------- */

/* Cuts the inputs into chunks (whole records for fixed ones). */
static soren_status cut_chunks(monitor *mon, const soren_input *inputs, size_t input_count,
                               soren_error *err)
{
    uint64_t size = MONITOR_CHUNK;
    if (mon->spec->input_format == SOREN_INPUT_FIXED) {
        uint64_t rs = mon->spec->record_size;
        size = size < rs ? rs : size - size % rs;
    }
    uint64_t count = 0;
    for (size_t i = 0; i < input_count; i++)
        count += inputs[i].size / size + (inputs[i].size % size != 0);
    mon->chunks = malloc((count + 1) * sizeof *mon->chunks);
    if (!mon->chunks)
        return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory cutting the input into "
                               "%llu chunks for monitoring; try --sample 0",
                               mon->spec->job_name, (unsigned long long)count);
    uint64_t c = 0;
    for (size_t i = 0; i < input_count; i++)
        for (uint64_t at = 0; at < inputs[i].size; at += size) {
            uint64_t end = inputs[i].size - at > size ? at + size : inputs[i].size;
            mon->chunks[c++] = (chunk){.in = &inputs[i], .begin = at, .end = end};
        }
    mon->chunk_count = c;
    return SOREN_OK;
}

/* The lines that start in [begin, end) of buf (begin < end <= its size): a
 * line starts at 0 and after every '\n' but one that ends the buffer, so
 * those starting in the range follow a '\n' in [begin - 1, end - 1). */
static uint64_t line_starts(const uint8_t *buf, uint64_t begin, uint64_t end)
{
    uint64_t n = begin == 0;
    const uint8_t *p = buf + (begin ? begin - 1 : 0);
    const uint8_t *stop = buf + end - 1;
    while (p < stop && (p = memchr(p, '\n', (size_t)(stop - p))) != NULL) {
        n++;
        p++;
    }
    return n;
}

/* The whole fixed records that start in [begin, end), begin a multiple of
 * the record size (a truncated last record is not a record). */
static uint64_t fixed_starts(const chunk *c, uint64_t rs)
{
    uint64_t first = c->begin / rs;
    uint64_t last = c->end / rs + (c->end % rs != 0);
    uint64_t whole = c->in->size / rs;
    if (last > whole)
        last = whole;
    return last > first ? last - first : 0;
}

/* The pairs that start in the chunk: pair starts only grow, so the count
 * is the distance between two binary searches. */
static uint64_t pair_starts(const chunk *c)
{
    soren_records a, b;
    soren_stage_spec spec = {.input_format = SOREN_INPUT_PAIRS};
    soren_records_init_input(&a, &spec, c->in, c->begin, c->end);
    soren_records_init_input(&b, &spec, c->in, c->end, c->in->size);
    return (c->end < c->in->size ? b.pos : c->in->count) - a.pos;
}

static void count_lines(void *arg, uint64_t c)
{
    chunk *ch = &((monitor *)arg)->chunks[c];
    ch->count = line_starts(ch->in->data, ch->begin, ch->end);
}

/* Fills every chunk's count and first record, and mon->total. */
static void count_records(monitor *mon, unsigned threads)
{
    soren_input_format format = mon->spec->input_format;
    if (format != SOREN_INPUT_LINES) {
        /* Counted without a pass: arithmetic, or a search of the pair starts. */
        for (uint64_t c = 0; c < mon->chunk_count; c++) {
            chunk *ch = &mon->chunks[c];
            ch->count = format == SOREN_INPUT_FIXED ? fixed_starts(ch, mon->spec->record_size)
                      : format == SOREN_INPUT_INDEX ? ch->end - ch->begin
                                                    : pair_starts(ch);
        }
    } else {
        soren__run_items(threads, mon->chunk_count, count_lines, mon);
    }
    uint64_t total = 0;
    for (uint64_t c = 0; c < mon->chunk_count; c++) {
        mon->chunks[c].first = total;
        total += mon->chunks[c].count;
    }
    mon->total = total;
}

/* ---- The sample ---------------------------------------------------------- */

static void monitor_emit(soren_emitter *e, const void *key, uint32_t len, const void *value)
{
    (void)value;
    mworker *w = e->ctx;
    if (w->failed)
        return;
    if (soren__key_refused(w->mon->spec, w->mon->key_size, "map", key, len, &w->err)) {
        w->failed = 1;
        return;
    }
    w->pairs++;
    w->key_bytes += soren__key_footprint(len);
    uint64_t h = soren__key_hash(key, len);
    uint32_t reg = soren__sketch_register(h);
    uint8_t rank = (uint8_t)soren__sketch_rank(h);
    if (w->sketch[reg] < rank)
        w->sketch[reg] = rank;
}

/* The first sample index whose record is at or after record. */
static uint64_t first_sample_at(const monitor *mon, uint64_t record)
{
    uint64_t lo = 0, hi = mon->sample;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (soren__sample_record(mid, mon->sample, mon->total) < record)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Maps one record for the sample; 0 once the worker failed. */
static int map_one(mworker *w, const soren_record *r, const soren_input *in)
{
    monitor *mon = w->mon;
    /* A fault in map names the input and the record (signals.h). */
    soren__current_map = (soren__map_site){in, r, mon->spec->input_format, mon->progress, 0};
    mon->spec->code->map(&w->em, r, mon->params);
    soren__current_map.in = NULL;
    w->records++;
    /* A line's bytes include its '\n', so the sample's bytes over its
     * records estimate the input's mean record size. */
    int newline = mon->spec->input_format == SOREN_INPUT_LINES &&
                  r->offset - in->base + r->size < in->size;
    w->bytes += r->size + (uint64_t)newline;
    return !w->failed;
}

/* Maps the sampled records that start in chunk c. */
static void sample_chunk(mworker *w, uint64_t c)
{
    monitor *mon = w->mon;
    const chunk *ch = &mon->chunks[c];
    uint64_t end = ch->first + ch->count;
    uint64_t i = first_sample_at(mon, ch->first);
    uint64_t want = i < mon->sample ? soren__sample_record(i, mon->sample, mon->total) : end;
    if (want >= end)
        return;
    soren_records it;
    soren_record r;
    if (mon->spec->input_format == SOREN_INPUT_FIXED) {
        /* Fixed records are found by their number. */
        uint64_t rs = mon->spec->record_size;
        while (want < end) {
            uint64_t at = ch->begin + (want - ch->first) * rs;
            soren_records_init_input(&it, mon->spec, ch->in, at, at + rs);
            if (soren_records_next(&it, &r) && !map_one(w, &r, ch->in))
                return;
            i++;
            want = i < mon->sample ? soren__sample_record(i, mon->sample, mon->total) : end;
        }
        return;
    }
    /* Other records are found by walking the chunk's records up to the last
     * one the sample wants (tasks and pairs cost nothing to walk). */
    soren_records_init_input(&it, mon->spec, ch->in, ch->begin, ch->end);
    for (uint64_t k = ch->first; k < end && soren_records_next(&it, &r); k++) {
        if (k != want)
            continue;
        if (!map_one(w, &r, ch->in))
            return;
        i++;
        want = i < mon->sample ? soren__sample_record(i, mon->sample, mon->total) : end;
        if (want >= end)
            return;
    }
}

static void *sample_main(void *arg)
{
    mworker *w = arg;
    monitor *mon = w->mon;
    void *alt_stack = soren__signals_thread_stack(); /* map is plugin code */
    for (;;) {
        if (atomic_load_explicit(&mon->stop, memory_order_relaxed))
            break;
        uint64_t c = atomic_fetch_add_explicit(&mon->next, 1, memory_order_relaxed);
        if (c >= mon->chunk_count)
            break;
        if (soren_progress_check(mon->progress, mon->spec->job_name, &w->err) != SOREN_OK)
            w->failed = 1;
        else
            sample_chunk(w, c);
        if (w->failed) {
            w->err_chunk = c;
            atomic_store_explicit(&mon->stop, 1, memory_order_relaxed);
            break;
        }
    }
    soren__signals_thread_stack_free(alt_stack);
    return NULL;
}

/* Sums the workers' counts into m and merges their sketches; the earliest
 * failure (by chunk, as the engine picks it) if one failed. */
static soren_status gather(const mworker *workers, unsigned n, soren_metrics *m,
                           soren_error *err)
{
    const mworker *bad = NULL;
    uint8_t sketch[SOREN_SKETCH_REGISTERS] = {0};
    for (unsigned t = 0; t < n; t++) {
        const mworker *w = &workers[t];
        if (w->failed && (!bad || w->err_chunk < bad->err_chunk))
            bad = w;
        m->sampled_records += w->records;
        m->sampled_bytes += w->bytes;
        m->pairs += w->pairs;
        m->key_bytes += w->key_bytes;
        for (unsigned r = 0; r < SOREN_SKETCH_REGISTERS; r++)
            if (sketch[r] < w->sketch[r])
                sketch[r] = w->sketch[r];
    }
    if (bad)
        return soren_error_set(err, bad->err.code, "%s", bad->err.text);
    m->distinct_keys = soren_sketch_estimate(sketch);
    return SOREN_OK;
}

/* ---- The whole ----------------------------------------------------------- */

static soren_status check_monitor_spec(const soren_stage_spec *spec, size_t *key_size,
                                       soren_error *err)
{
    const char *job = spec->job_name ? spec->job_name : "(job)";
    if (!spec->code || !spec->code->map)
        return soren_error_set(err, SOREN_EJOB, "%s: the plugin has no map function", job);
    if (spec->input_format == SOREN_INPUT_FIXED && spec->record_size == 0)
        return soren_error_set(err, SOREN_EJOB, "%s: the record size is 0", job);
    *key_size = 0;
    if (spec->key_type != SOREN_TYPE_STRING) {
        *key_size = soren_type_size(spec->key_type);
        if (*key_size == 0)
            return soren_error_set(err, SOREN_EJOB, "%s: keys of type %s are not supported",
                                   job, soren_type_name(spec->key_type));
    }
    return SOREN_OK;
}

soren_status soren_cpu_monitor(const soren_stage_spec *spec, const soren_input *inputs,
                               size_t input_count, const soren_params *params, double fraction,
                               unsigned threads, soren_progress *progress, soren_metrics *m,
                               soren_error *err)
{
    static const soren_params no_params;
    memset(m, 0, sizeof *m);
    m->fraction = fraction;
    monitor mon = {.spec = spec, .params = params ? params : &no_params, .progress = progress};
    soren_status rc = check_monitor_spec(spec, &mon.key_size, err);
    if (rc == SOREN_OK)
        rc = cut_chunks(&mon, inputs, input_count, err);
    if (rc != SOREN_OK)
        return rc;
    unsigned n = threads ? threads : soren_cpu_count();
    if (n > mon.chunk_count)
        n = mon.chunk_count ? (unsigned)mon.chunk_count : 1;

    count_records(&mon, n);
    for (size_t i = 0; i < input_count; i++)
        m->total_bytes += inputs[i].size;
    m->total_records = mon.total;
    mon.sample = soren_sample_size(mon.total, m->total_bytes, fraction);
    m->ran = fraction > 0;

    mworker *workers = calloc(n, sizeof *workers);
    if (!workers) {
        free(mon.chunks);
        return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory starting monitoring; "
                               "try --sample 0", spec->job_name);
    }
    for (unsigned t = 0; t < n; t++) {
        workers[t].mon = &mon;
        workers[t].em.emit = monitor_emit;
        workers[t].em.ctx = &workers[t];
        soren_error_clear(&workers[t].err);
    }
    if (mon.sample) {
        atomic_store(&mon.next, 0);
        atomic_store(&mon.stop, 0);
        soren__run_threads(n, sample_main, workers, sizeof *workers);
    }
    rc = gather(workers, n, m, err);
    m->value_bytes = m->pairs * spec->value_size;
    free(workers);
    free(mon.chunks);
    return rc;
}
