/*
 * launch.cu - the map's launches: monitoring a sample of the first input,
 * choosing the variant, launching the plugin's map (or reduce) over the
 * records and resuming it after each stop for room until every record is
 * done.
 */
#include "run.h"

#include <cub/device/device_scan.cuh>

#include <string.h>

namespace soren__gpu {

/* The counters as they stand once the stream's work so far is done. */
soren_status read_counters(gpu_run *r, unsigned long long *c)
{
    CUDA_TRY(r, cudaMemcpyAsync(r->host_counters, r->counters, COUNTER_COUNT * sizeof *c,
                                cudaMemcpyDeviceToHost, r->stream));
    WAIT_STREAM(r);
    memcpy(c, r->host_counters, COUNTER_COUNT * sizeof *c);
    return SOREN_OK;
}

static void fill_args(gpu_run *r, soren_gpu_map_args *a, uint32_t variant, uint64_t size,
                      uint64_t records)
{
    const soren_stage_spec *s = r->spec;
    memset(a, 0, sizeof *a);
    a->variant = variant;
    a->input_format = s->input_format == SOREN_INPUT_FIXED   ? SOREN_GPU_FIXED
                    : s->input_format == SOREN_INPUT_INDEX   ? SOREN_GPU_INDEX
                    : s->input_format == SOREN_INPUT_PAIRS   ? SOREN_GPU_PAIRS
                                                             : SOREN_GPU_LINES;
    a->input = r->in.cur_input;
    a->input_size = size;
    a->line_starts = r->in.line_starts;
    a->record_count = records;
    a->record_size = s->record_size;
    a->params = r->in.params;
    a->key_type = s->key_type;
    a->key_max_size = s->key_max_size;
    a->key_count = s->key_count;
    a->value_size = (uint32_t)s->value_size;
    a->value_type = s->value_type;
    a->combine = s->combine;
    a->fold_pairs = r->opt->fold_pairs && s->input_format == SOREN_INPUT_PAIRS;
    a->keys = r->reg.keys;
    a->keys_capacity = r->reg.keys_capacity;
    a->keys_used = r->counters + KEYS_USED;
    a->slots = r->reg.slots;
    a->slot_count = r->reg.slot_count;
    a->slot_values = r->reg.slot_values;
    a->slots_used = r->counters + SLOTS_USED;
    a->slot_limit = r->reg.slot_limit;
    a->pair_keys = r->reg.pair_keys;
    a->pair_values = r->reg.pair_values;
    a->pair_capacity = r->reg.pair_capacity;
    a->pairs_used = r->counters + PAIRS_USED;
    a->record_pairs = r->reg.record_pairs;
    a->record_key_bytes = r->reg.record_key_bytes;
    a->status = (unsigned int *)(r->counters + STATUS);
    a->bad_key = r->counters + BAD_KEY;
    a->max_threads = r->map.max_threads;
    if (variant == SOREN_GPU_HASH || variant == SOREN_GPU_BLOCK || variant == SOREN_GPU_DIRECT ||
        variant == SOREN_GPU_GROUP || variant == SOREN_GPU_REDUCE)
        a->resume = r->map.resume;
    if (variant == SOREN_GPU_HASH || variant == SOREN_GPU_BLOCK)
        a->shared_bytes = r->reg.block_slots * (SOREN_GPU_BLOCK_BYTES + (uint32_t)s->value_size);
    if (variant == SOREN_GPU_DENSE)
        a->shared_bytes = r->reg.dense_shared;
    a->sample_count = r->map.sample_count;
    a->sample_counts = r->counters + SAMPLE_PAIRS;
    a->sketch = r->map.sketch;
    a->group_refs = r->list.group_refs;
    a->group_start = r->list.group_start;
    a->group_values = r->list.group_values;
    /* reduce numbers groups, not records */
    a->record_base = variant == SOREN_GPU_REDUCE ? 0 : r->in.cur_base;
    a->key_first = r->reg.key_first;
    a->key_last = r->reg.key_last;
    if (variant == SOREN_GPU_HASH || variant == SOREN_GPU_GROUP || variant == SOREN_GPU_BLOCK ||
        variant == SOREN_GPU_DENSE || variant == SOREN_GPU_DIRECT)
        a->block_threads = r->map.shape.block_threads;
}

/* A bad key recorded by a launch, in the CPU engine's words: the launch
 * kept the key's size, or an index key's value, which is all the check
 * reads. */
soren_status bad_key_error(gpu_run *r, unsigned long long bad)
{
    unsigned long long detail = bad & ((1ull << 56) - 1);
    uint32_t len = (uint32_t)detail, index = (uint32_t)detail;
    if ((bad >> 56) == 3)
        len = 4;
    if (soren__key_refused(r->spec, soren_type_size(r->spec->key_type), r->emitter, &index, len,
                           r->err))
        return r->err->code;
    return soren_error_set(r->err, SOREN_EJOB, "%s: %s emitted a key the manifest does not "
                           "allow (%#llx)", r->spec->job_name, r->emitter, bad);
}

/* Resumes the launch in r->map.args, whose counters c the host has read,
 * after each stop for room (growing a region), until it has mapped
 * everything or its pass is to begin again on half its part of the key
 * space (r->reg.narrowed). */
soren_status finish_launch(gpu_run *r, unsigned long long *c)
{
    /* Each resume at least doubles a region: this many cover any size. */
    enum { RESUMES_MAX = 64 };
    soren_gpu_map_args *a = &r->map.args;
    for (unsigned resumes = 0;; resumes++) {
        unsigned status = (unsigned)c[STATUS];
        if (status & SOREN_GPU_BAD_KEY)
            return bad_key_error(r, c[BAD_KEY]);
        if (!(status & SOREN_GPU_OVERFLOW))
            return SOREN_OK;
        if (narrowing_due(r, c))
            return narrow_key_range(r);
        soren_status st;
        if (resumes == RESUMES_MAX) {
            return soren_error_set(r->err, SOREN_EJOB, "%s: map still overflows after %d "
                                   "resumes; this is a bug in Soren, please report it",
                                   r->spec->job_name, (int)RESUMES_MAX);
        } else {
            st = grow_after_overflow(r, c);
        }
        if (st != SOREN_OK)
            return st;
        fill_args(r, a, a->variant, a->input_size, a->record_count);
        a->resuming = 1;
        CUDA_TRY(r, r->gpu->map(a, r->stream));
        if ((st = read_counters(r, c)) != SOREN_OK)
            return st;
    }
}

/* Launches map over one input's records, growing regions and resuming
 * until every record is done (or its part of the key space is halved). */
soren_status launch_map(gpu_run *r, uint32_t variant, uint64_t size, uint64_t records)
{
    fill_args(r, &r->map.args, variant, size, records);
    CUDA_TRY(r, r->gpu->map(&r->map.args, r->stream));
    /* A dense array holds every key and no key bytes: its launch cannot
     * stop for room, and merge_table reads a bad key's status with the
     * merged count, so the host need not wait here.  A re-run in one wait
     * reads the status with its result. */
    if (r->map.leave_unread || (variant == SOREN_GPU_DENSE && !groups_pairs(r->spec)))
        return SOREN_OK;
    unsigned long long c[COUNTER_COUNT];
    soren_status st = read_counters(r, c);
    return st == SOREN_OK ? finish_launch(r, c) : st;
}

/* The Mars layout for one input: count, scan, then write at the offsets. */
static soren_status map_sort(gpu_run *r, uint64_t size, uint64_t records)
{
    soren_status st = launch_map(r, SOREN_GPU_SORT_COUNT, size, records);
    if (st != SOREN_OK || records == 0)
        return st;
    uint64_t last[2];
    CUDA_TRY(r, cudaMemcpyAsync(&last[0], r->reg.record_pairs + records - 1, 8,
                                cudaMemcpyDeviceToHost, r->stream));
    CUDA_TRY(r, cudaMemcpyAsync(&last[1], r->reg.record_key_bytes + records - 1, 8,
                                cudaMemcpyDeviceToHost, r->stream));
    CUB_RUN(r, cub::DeviceScan::ExclusiveSum, r->reg.record_pairs, r->reg.record_pairs,
            (int64_t)records);
    CUB_RUN(r, cub::DeviceScan::ExclusiveSum, r->reg.record_key_bytes, r->reg.record_key_bytes,
            (int64_t)records);
    unsigned long long used[2], scanned[2];
    CUDA_TRY(r, cudaMemcpyAsync(used, r->counters, sizeof used, cudaMemcpyDeviceToHost,
                                r->stream));
    CUDA_TRY(r, cudaMemcpyAsync(&scanned[0], r->reg.record_pairs + records - 1, 8,
                                cudaMemcpyDeviceToHost, r->stream));
    CUDA_TRY(r, cudaMemcpyAsync(&scanned[1], r->reg.record_key_bytes + records - 1, 8,
                                cudaMemcpyDeviceToHost, r->stream));
    WAIT_STREAM(r);
    uint64_t pairs = scanned[0] + last[0], key_bytes = scanned[1] + last[1];
    /* Pass 1 counted exactly: grow to fit before writing. */
    if (used[PAIRS_USED] + pairs > r->reg.pair_capacity &&
        (st = grow_pairs(r, used[PAIRS_USED], used[PAIRS_USED] + pairs)) != SOREN_OK)
        return st;
    if (used[KEYS_USED] + key_bytes > r->reg.keys_capacity &&
        (st = grow_keys(r, used[KEYS_USED], used[KEYS_USED] + key_bytes)) != SOREN_OK)
        return st;
    st = launch_map(r, SOREN_GPU_SORT_WRITE, size, records);
    if (st != SOREN_OK)
        return st;
    used[PAIRS_USED] += pairs;
    used[KEYS_USED] += key_bytes;
    CUDA_TRY(r, cudaMemcpyAsync(r->counters, used, sizeof used, cudaMemcpyHostToDevice,
                                r->stream));
    return SOREN_OK;
}

/* The distinct keys that the sketch's ranks, a word each as the device
 * keeps them, estimate. */
static uint64_t estimate_of_ranks(const unsigned int *ranks)
{
    uint8_t registers[SOREN_SKETCH_REGISTERS];
    for (unsigned i = 0; i < SOREN_SKETCH_REGISTERS; i++)
        registers[i] = (uint8_t)ranks[i];
    return soren_sketch_estimate(registers);
}

/* Initial monitoring over the first input, on the device already: map a
 * sample of its records without storing pairs, and fill the metrics for the
 * whole input (other inputs are assumed to look like the first). */
soren_status monitor(gpu_run *r, uint64_t size, uint64_t records, uint64_t total)
{
    soren_metrics *m = &r->x->metrics;
    m->fraction = r->opt->sample;
    m->total_bytes = total;
    m->total_records = size ? (uint64_t)((double)records * ((double)total / (double)size)) : 0;
    /* Index keys with a combine run dense, sized by the key count: the
     * manifest decides all that the metrics would, so there is nothing to
     * sample (unless there are more keys than dense numbers). */
    soren_variant v = r->opt->variant;
    bool dense = r->spec->key_type == SOREN_TYPE_INDEX && r->spec->combine != SOREN_COMBINE_NONE &&
                 r->spec->key_count <= SOREN_DENSE_KEYS_MAX &&
                 (v == SOREN_VARIANT_AUTO || v == SOREN_VARIANT_DENSE);
    const uint64_t sample = dense ? 0 : soren_sample_size(records, size, r->opt->sample);
    if (sample == 0)
        return SOREN_OK;
    /* First a sample half as large, spread over the same input, for its
     * distinct keys alone: how fast they grow (soren_project). */
    unsigned int ranks[SOREN_SKETCH_REGISTERS];
    m->half_distinct_keys = 0;
    r->map.sample_count = sample / 2;
    if (r->map.sample_count) {
        soren_status st = launch_map(r, SOREN_GPU_MONITOR, size, records);
        if (st != SOREN_OK)
            return st;
        CUDA_TRY(r, cudaMemcpyAsync(ranks, r->map.sketch, sizeof ranks, cudaMemcpyDeviceToHost,
                                    r->stream));
        CUDA_TRY(r, cudaMemsetAsync(r->map.sketch, 0, sizeof ranks, r->stream));
        if ((st = counters_reset(r)) != SOREN_OK)
            return st;
        WAIT_STREAM(r);
        m->half_distinct_keys = estimate_of_ranks(ranks);
    }
    r->map.sample_count = sample;
    soren_status st = launch_map(r, SOREN_GPU_MONITOR, size, records);
    if (st != SOREN_OK)
        return st;
    unsigned long long c[COUNTER_COUNT];
    CUDA_TRY(r, cudaMemcpyAsync(c, r->counters, sizeof c, cudaMemcpyDeviceToHost, r->stream));
    CUDA_TRY(r, cudaMemcpyAsync(ranks, r->map.sketch, sizeof ranks, cudaMemcpyDeviceToHost,
                                r->stream));
    WAIT_STREAM(r);
    m->ran = 1;
    m->sampled_records = r->map.sample_count;
    m->sampled_bytes = c[SAMPLE_BYTES];
    m->pairs = c[SAMPLE_PAIRS];
    m->key_bytes = c[SAMPLE_KEY_BYTES];
    m->value_bytes = m->pairs * r->spec->value_size;
    m->distinct_keys = estimate_of_ranks(ranks);
    return SOREN_OK;
}

/* The variant: as forced, or chosen from the metrics; then the projection. */
soren_status configure(gpu_run *r)
{
    const soren_stage_spec *s = r->spec;
    soren_explain *x = r->x;
    if (r->opt->variant == SOREN_VARIANT_AUTO) {
        x->rule = soren_choose(s, &x->metrics, r->opt->small_keys, 1, &r->variant);
    } else {
        r->variant = r->opt->variant;
        x->rule = "forced with --engine";
    }
    /* Without a combine, hash can only group values for a reduce function;
     * block and dense have nothing to fold. */
    bool grouping = s->reduce == SOREN_REDUCE_FUNCTION;
    if (s->combine == SOREN_COMBINE_NONE &&
        ((r->variant == SOREN_VARIANT_HASH && !grouping) || r->variant == SOREN_VARIANT_BLOCK ||
         r->variant == SOREN_VARIANT_DENSE))
        return soren_error_set(r->err, SOREN_EUSAGE, "--engine %s: %s has no combine to fold "
                               "values with; use %s", soren_variant_name(r->variant),
                               s->job_name, grouping ? "hash, direct or sort" : "direct or sort");
    if (r->variant == SOREN_VARIANT_DENSE && s->key_type != SOREN_TYPE_INDEX)
        return soren_error_set(r->err, SOREN_EUSAGE, "--engine dense: %s's keys are not index "
                               "keys (the manifest's key.type index with a count)", s->job_name);
    if (r->variant == SOREN_VARIANT_DENSE && s->key_count > SOREN_DENSE_KEYS_MAX)
        return soren_error_set(r->err, SOREN_EUSAGE, "--engine dense: %s has %llu index keys, "
                               "more than the dense variant numbers (%llu: its key refs are 32 "
                               "bits); use hash or block", s->job_name,
                               (unsigned long long)s->key_count,
                               (unsigned long long)SOREN_DENSE_KEYS_MAX);
    x->variant = r->variant;
    soren_project(s, &x->metrics, &x->projection);
    return SOREN_OK;
}

/* Starts the search for the map's launch shape (core/base/shape.h), once
 * the variant and its per-block table are known: over the threads a block
 * and, for hash and block, the table's entries unless --block-slots set
 * them.  A session searches over its runs' inputs; a run of its own only
 * where it has inputs enough (chunks) to keep the shape it finds for most
 * of them. */
void shape_search_start(gpu_run *r, size_t input_count)
{
    enum { INPUTS_A_CANDIDATE = 4 };
    const soren_shape fallback = {0, r->reg.block_slots};
    const char *why = NULL;
    if (r->spec->code->gpu->abi_minor < 10)
        why = "the default: the plugin predates plugin ABI 1.10, whose launchers take a block size";
    else if (r->variant == SOREN_VARIANT_SORT)
        why = "the default: sort's launches are not measured";
    const bool slots = (r->variant == SOREN_VARIANT_HASH || r->variant == SOREN_VARIANT_BLOCK) &&
                       r->reg.block_slots && !r->opt->block_slots;
    soren_shape_search *search = &r->map.search;
    soren_shape_search_start(search, fallback, !why, !why && slots, why);
    if (!r->pool.pooled && search->count > 1 && input_count < INPUTS_A_CANDIDATE * search->count)
        soren_shape_search_start(search, fallback, 0, 0, "the default: a run of its own with "
                                 "too few inputs to time the candidates on (a session, as the "
                                 "resident host's, times them over its runs)");
}

/* The shape the next input's launches take: the search's candidate where
 * the input is timed, else the one kept; units are its bytes (or tasks). */
void shape_of_input(gpu_run *r, bool timed, uint64_t units)
{
    r->map.shape = timed ? soren_shape_next(&r->map.search) : soren_shape_kept(&r->map.search);
    r->reg.block_slots = r->map.shape.block_slots;
    r->map.units = timed ? units : 0;
}

/* The input under way took ms of map: counted for its shape (where it was
 * timed over the whole key space), and the shape reported. */
void shape_timed(gpu_run *r, float ms)
{
    soren_shape_search *search = &r->map.search;
    if (r->map.units && whole_key_space(r))
        soren_shape_timed(search, ms, r->map.units);
    r->x->shape = r->map.shape;
    r->x->shape_search = *search;
    r->x->block_slots = r->map.shape.block_slots;
}

/* Maps one input with the chosen variant. */
soren_status map_input(gpu_run *r, uint64_t size, uint64_t records)
{
    switch (r->variant) {
    case SOREN_VARIANT_HASH:
        return launch_map(r, r->spec->combine == SOREN_COMBINE_NONE ? SOREN_GPU_GROUP
                                                                    : SOREN_GPU_HASH,
                          size, records);
    case SOREN_VARIANT_BLOCK: return launch_map(r, SOREN_GPU_BLOCK, size, records);
    case SOREN_VARIANT_DENSE: return launch_map(r, SOREN_GPU_DENSE, size, records);
    case SOREN_VARIANT_DIRECT: return launch_map(r, SOREN_GPU_DIRECT, size, records);
    default: return map_sort(r, size, records);
    }
}

} /* namespace soren__gpu */
