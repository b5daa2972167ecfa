/*
 * session.cu - a run's phases over its inputs, a pass over them for each
 * part of the key space, and the public entry points of engine.h: one run
 * (soren_gpu_run) or a session's runs again and again.
 */
#include "run.h"

#include <chrono>
#include <stdlib.h>
#include <string.h>

namespace soren__gpu {

/* Gives the run's device blocks back (to its pool, in a session) and frees
 * the host memory its results held. */
static void gpu_run_release_blocks(gpu_run *r)
{
    void *owned[] = {r->in.input,           r->in.input_alt,         r->in.line_starts,
                     r->in.tile_first,      r->reg.keys,             r->counters,
                     r->map.resume,         r->map.sketch,           r->reg.slots,
                     r->reg.slot_values,    r->reg.pair_keys,        r->reg.pair_values,
                     r->reg.record_pairs,   r->reg.record_key_bytes, r->pool.temp,
                     r->list.refs,          r->list.values,          r->list.perm,
                     r->list.perm_alt,      r->list.bits,            r->list.bits_alt,
                     r->list.group_refs,    r->list.group_start,     r->list.group_values,
                     r->packed.keys,        r->packed.values,        r->packed.offsets,
                     r->reg.identity};
    soren_result_destroy(&r->parts);
    free(r->part_ends);
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        dev_free(r, owned[i]);
    for (int i = 0; i < SOREN_MAX_PARAMS; i++)
        dev_free(r, r->in.param_blocks[i]);
}

static void gpu_run_destroy(gpu_run *r)
{
    /* Copies from the staging buffers may still be in flight after an error. */
    if (r->stream)
        (void)cudaStreamSynchronize(r->stream);
    if (r->in.copy_stream)
        (void)cudaStreamSynchronize(r->in.copy_stream);
    gpu_run_release_blocks(r);
    pool_release_free(r, 0);
    free(r->pool.blocks);
    for (int i = 0; i < MARKS; i++)
        if (r->mark[i])
            cudaEventDestroy(r->mark[i]);
    if (r->in.pieces)
        cudaFreeHost(r->in.pieces);
    for (int i = 0; i < 2 * COPY_THREADS_MAX; i++)
        if (r->in.staged[i])
            cudaEventDestroy(r->in.staged[i]);
    for (int b = 0; b < 2; b++) {
        cudaEvent_t events[] = {r->in.upload_began[b], r->in.uploaded[b]};
        for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
            if (events[i])
                cudaEventDestroy(events[i]);
    }
    if (r->host_counters)
        pinned_give(r->opt->device, r->host_counters);
    if (r->loop_state)
        cudaFreeHost(r->loop_state);
    if (r->in.began)
        cudaEventDestroy(r->in.began);
    if (r->in.copy_stream)
        cudaStreamDestroy(r->in.copy_stream);
    if (r->stream)
        cudaStreamDestroy(r->stream);
}

/* The bytes of an input that go to the device (index input has none), and
 * an upper bound of its records. */
uint64_t data_bytes(const soren_stage_spec *s, const soren_input *in)
{
    return s->input_format == SOREN_INPUT_INDEX ? 0 : in->size;
}

uint64_t records_at_most(const soren_stage_spec *s, const soren_input *in)
{
    switch (s->input_format) {
    case SOREN_INPUT_FIXED: return in->size / s->record_size;
    case SOREN_INPUT_PAIRS: return in->count;
    default: return in->size; /* index: the tasks; lines: at most one a byte */
    }
}

static float elapsed_between(cudaEvent_t from, cudaEvent_t to)
{
    float ms = 0;
    return cudaEventElapsedTime(&ms, from, to) == cudaSuccess ? ms : 0;
}

/* What every run of the stage needs, once: the counters, the resume
 * points, monitoring's registers. */
static soren_status session_start(gpu_run *r)
{
    ALLOC(r, r->counters, COUNTER_COUNT * sizeof(unsigned long long), "the engine's counters");
    const size_t counter_bytes = COUNTER_COUNT * sizeof(unsigned long long);
    if (!r->host_counters)
        r->host_counters = (unsigned long long *)pinned_take(r->opt->device);
    cudaError_t rc = r->host_counters ? cudaSuccess
                                      : cudaMallocHost((void **)&r->host_counters,
                                                       SESSION_PINNED_BYTES);
    if (rc != cudaSuccess) {
        r->host_counters = NULL;
        return cuda_fail(r, rc, "cudaMallocHost(the counters', the result's and the "
                         "parameters' pinned buffer)", __FILE__, __LINE__);
    }
    r->fresh_counters = r->host_counters + COUNTER_COUNT;
    r->readback = (uint8_t *)(r->fresh_counters + COUNTER_COUNT);
    r->param_staging = r->readback + READBACK_BYTES;
    CUDA_TRY(r, cudaHostGetDevicePointer((void **)&r->readback_on_device, r->readback, 0));
    /* the first key unit reserved (key ref 0 means "none"; keys start
     * SOREN_KEY_ALIGN-aligned) */
    memset(r->fresh_counters, 0, counter_bytes);
    r->fresh_counters[KEYS_USED] = SOREN_KEY_ALIGN;
    int sms = 0, per_sm = 0;
    CUDA_TRY(r, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, r->opt->device));
    CUDA_TRY(r, cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor,
                                       r->opt->device));
    r->map.max_threads = (uint64_t)sms * (uint64_t)per_sm;
    ALLOC(r, r->map.resume, r->map.max_threads * sizeof(soren_gpu_resume), "the resume points");
    /* Monitoring's registers, here with the rest of the setup so that the
     * monitor phase times only the sample. */
    ALLOC(r, r->map.sketch, SOREN_SKETCH_REGISTERS * sizeof(unsigned int), "the key sketch");
    CUDA_TRY(r, cudaMemsetAsync(r->map.sketch, 0, SOREN_SKETCH_REGISTERS * sizeof(unsigned int),
                                r->stream));
    return SOREN_OK;
}

/* Sets the counters as a run starts them (from pinned memory that never
 * changes: the copy need not wait). */
soren_status counters_reset(gpu_run *r)
{
    if (r->counters_fresh) { /* a run in one wait left them so */
        r->counters_fresh = false;
        return SOREN_OK;
    }
    CUDA_TRY(r, cudaMemcpyAsync(r->counters, r->fresh_counters,
                                COUNTER_COUNT * sizeof(unsigned long long),
                                cudaMemcpyHostToDevice, r->stream));
    return SOREN_OK;
}

/* A later run of a session: the first run's variant and the regions as
 * they grew, emptied (the counters, the table or dense array back to empty
 * slots and the identity), and the pair space again where the last run
 * handed it to its list; the first run's sample and sizes reported. */
soren_status session_reset(gpu_run *r)
{
    /* merge_table emptied the slots it took; grouping leaves its slots
     * claimed (a run that failed left its session unusable) */
    if (r->reg.slots && groups_pairs(r->spec)) {
        soren_status st = empty_slots(r);
        if (st != SOREN_OK)
            return st;
    }
    bool pairs = r->variant == SOREN_VARIANT_DIRECT || r->variant == SOREN_VARIANT_SORT ||
                 (r->variant == SOREN_VARIANT_HASH && r->spec->combine == SOREN_COMBINE_NONE);
    if (pairs && !r->reg.pair_keys) {
        if (r->reg.map_pair_capacity)
            r->reg.pair_capacity = r->reg.map_pair_capacity;
        ALLOC(r, r->reg.pair_keys, r->reg.pair_capacity * sizeof(uint32_t), "the pair keys");
        ALLOC(r, r->reg.pair_values, r->reg.pair_capacity * r->spec->value_size, "the pair values");
    }
    soren_explain *x = r->x;
    x->metrics = r->first_metrics;
    x->projection = r->first_projection;
    x->variant = r->variant;
    x->rule = r->first_rule;
    x->block_slots = r->reg.block_slots;
    return SOREN_OK;
}

/* The session's device made current: a session may run from another
 * thread than its first run's. */
soren_status use_device(gpu_run *r)
{
    int device = -1;
    CUDA_TRY(r, cudaGetDevice(&device));
    if (device != r->opt->device)
        CUDA_TRY(r, cudaSetDevice(r->opt->device));
    return SOREN_OK;
}

/* Marks the start of a phase on the stream (for its time) and names it for
 * errors and the progress line (where the host waits on the device). */
soren_status mark(gpu_run *r, int i, const char *phase, const char *progress_phase)
{
    r->phase = phase;
    if (progress_phase)
        soren_progress_phase(r->opt->progress, progress_phase, 0);
    CUDA_TRY(r, cudaEventRecord(r->mark[i], r->stream));
    return SOREN_OK;
}

static float elapsed(gpu_run *r, int from, int to)
{
    return elapsed_between(r->mark[from], r->mark[to]);
}

/* Adds input i's phases to the run's times, its marks 0 to 4 done (piped,
 * the copy engine's time, beside split and map's).  A phase that did not
 * run adds nothing: between its marks the device only waited for the host
 * to queue the next (a few microseconds an input). */
static void add_input_times(gpu_run *r, bool piped, size_t i)
{
    soren_phase_times *ms = &r->x->ms;
    ms->upload += piped ? elapsed_between(r->in.upload_began[i % 2], r->in.uploaded[i % 2])
                        : elapsed(r, 0, 1);
    if (r->spec->input_format == SOREN_INPUT_LINES)
        ms->split += elapsed(r, 1, 2);
    if (r->map.sampled && i == 0)
        ms->monitor += elapsed(r, 2, 3);
    const float map_ms = elapsed(r, 3, 4);
    ms->map += map_ms;
    shape_timed(r, map_ms);
}

/* Whether input i is the run's: every input is, unless the run shares
 * them (r->claim). */
static bool input_claimed(gpu_run *r, size_t i)
{
    return !r->claim || r->claim->take(r->claim->ctx, i);
}

/* Maps every input once (a pass) for the part of the key space in
 * r->reg.key_first .. key_last, the first input sampled and the variant chosen
 * first where sampling; stops after the input whose map halved the part
 * (r->reg.narrowed).  Inputs go up one after another, or pipelined (the next
 * on its way up while the map reads this one).  Where the run shares its
 * inputs, the pass ends before the first one it is refused: *input_count
 * becomes the inputs it mapped. */
static soren_status map_pass(gpu_run *r, const soren_input *inputs, size_t *input_count,
                             bool piped, bool sampling, uint64_t total)
{
    const soren_stage_spec *s = r->spec;
    r->reg.narrowed = false;
    r->map.sampled = sampling;
    soren_status st = SOREN_OK;
    size_t n = *input_count;
    input_feed feed;
    if (piped)
        feed_start(r, &feed, inputs, n, true);
    for (size_t i = 0; st == SOREN_OK && i < n; i++) {
        const soren_input *in = &inputs[i];
        uint64_t records = records_at_most(s, in);
        if (i + 1 < n && !input_claimed(r, i + 1))
            n = i + 1;
        soren_progress_phase(r->opt->progress, "upload", in->on_device ? 0 : data_bytes(s, in));
        if ((st = mark(r, 0, "upload", NULL)) == SOREN_OK)
            st = piped ? upload_next(r, &feed, i, i + 1 < n) : upload_input(r, in);
        if (st == SOREN_OK && (st = mark(r, 1, "record splitting", "split")) == SOREN_OK &&
            s->input_format == SOREN_INPUT_LINES)
            st = split_lines(r, in->size, &records);
        const bool sampled = sampling && i == 0;
        if (st == SOREN_OK &&
            (st = mark(r, 2, "monitoring", sampled ? "monitor" : NULL)) == SOREN_OK && sampled)
            st = monitor(r, in->size, records, total);
        /* Choosing the variant and allocating its regions count as map's. */
        if (st == SOREN_OK && (st = mark(r, 3, "map", "map")) == SOREN_OK && sampled) {
            st = configure(r);
            if (st == SOREN_OK)
                st = allocate_regions(r);
            if (st == SOREN_OK)
                shape_search_start(r, n);
        }
        /* the sampled input's map time includes the choice and the sizing */
        shape_of_input(r, !sampled, in->size ? in->size : records);
        r->map.leave_unread = i + 1 == n && one_wait(r);
        if (st == SOREN_OK)
            st = map_input(r, in->size, records);
        /* The next input reuses the marks: its times are read now.  The
         * last input's are read with the result, mark 4 then the merge's
         * start, so that the host need not wait between map and merge. */
        if (st == SOREN_OK && (i + 1 < n || r->reg.narrowed) &&
            (st = mark(r, 4, "map", NULL)) == SOREN_OK && (st = wait_mark(r, 4)) == SOREN_OK)
            add_input_times(r, piped, i);
        if (r->reg.narrowed)
            break;
    }
    /* the copy threads end with the pass; a failed or narrowed one leaves the rest unread */
    if (piped)
        feed_stop(&feed);
    *input_count = n;
    return st;
}

/* The result of a pass into part: in one wait where that serves, else the
 * usual way (which may halve the pass's part of the key space, when the
 * launch left unread had stopped for room); the times of the last input
 * and of the result phases added to the run's. */
static soren_status pass_result(gpu_run *r, size_t input_count, bool piped, soren_result *part)
{
    const bool quick = r->map.leave_unread;
    r->map.leave_unread = false;
    bool again = false;
    soren_status st = SOREN_OK;
    if (quick)
        st = result_in_one_wait(r, part, &again);
    if (st == SOREN_OK && !r->reg.narrowed && (!quick || again))
        st = result_after_map(r, r->opt->leave_result && whole_key_space(r), part);
    if (st != SOREN_OK || r->reg.narrowed)
        return st;
    soren_phase_times *ms = &r->x->ms;
    if (input_count)
        add_input_times(r, piped, input_count - 1);
    if (piped)
        r->x->chunks.inputs_ms = elapsed_between(r->in.began, r->mark[4]);
    ms->merge += elapsed(r, 4, 5);
    ms->reduce += elapsed(r, 5, 6);
    ms->sort += elapsed(r, 6, 7);
    ms->download += elapsed(r, 7, 8);
    release_list(r);
    return SOREN_OK;
}

/* Appends a finished part's pairs (emptying part) to the run's parts. */
static soren_status add_part(gpu_run *r, soren_result *part)
{
    const size_t i = (size_t)r->x->key_parts - 1;
    if (i >= r->part_ends_cap) {
        size_t cap = r->part_ends_cap ? 2 * r->part_ends_cap : 16;
        uint64_t *ends = (uint64_t *)realloc(r->part_ends, cap * sizeof *ends);
        if (!ends)
            return soren_error_set(r->err, SOREN_ENOMEM, "out of memory keeping %zu parts of "
                                   "the key space", cap);
        r->part_ends = ends;
        r->part_ends_cap = cap;
    }
    soren_status st = soren_result_append_all(&r->parts, part, r->err);
    soren_result_destroy(part);
    r->part_ends[i] = r->parts.count;
    return st;
}

/* Every part's pairs, each part in the stage's order (and within its
 * limit), merged into out in that order: the host's share of ordering. */
static soren_status join_parts(gpu_run *r, soren_result *out)
{
    const soren_stage_spec *s = r->spec;
    soren_progress_phase(r->opt->progress, "order", 0);
    auto began = std::chrono::steady_clock::now();
    soren_status st = soren_result_merge_runs(&r->parts, r->part_ends, (size_t)r->x->key_parts,
                                              s->order, s->limit, r->err);
    r->x->ms.sort += std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() -
                                                              began).count();
    if (st != SOREN_OK)
        return st;
    soren_result_destroy(out);
    *out = r->parts;
    soren_result_init(&r->parts, s);
    return SOREN_OK;
}

/* What a run that has its result keeps for the next run of its session. */
static void session_done(gpu_run *r, bool first)
{
    if (first) {
        r->first_metrics = r->x->metrics;
        r->first_projection = r->x->projection;
        r->first_rule = r->x->rule;
    }
    r->runs++;
}

/* One run over the inputs (host inputs go up through the staging buffers;
 * a caller's device input is read where it is): the result is packed on
 * the device and copied into out.  The first run of a session sets up,
 * monitors, chooses and sizes; later runs reuse all of it.  A table that
 * would outgrow the device memory budget folds the key space a part at a
 * time, a pass over the inputs each (narrowing_due), and the parts'
 * ordered pairs are merged on the host (join_parts). */
static soren_status session_run(gpu_run *r, const soren_input *inputs, size_t input_count,
                                const soren_params *params, const uint64_t *param_versions,
                                soren_result *out)
{
    const soren_stage_spec *s = r->spec;
    const bool first = r->runs == 0;
    uint64_t total = 0, largest = 0, most_records = 0;
    for (size_t i = 0; i < input_count; i++) {
        if (inputs[i].base && s->code->gpu->abi_minor < 3)
            return soren_error_set(r->err, SOREN_EPLUGIN, "%s: its device code predates plugin "
                                   "ABI 1.3 and cannot number the records of part of the whole "
                                   "input (an input after the first, a chunk under a device "
                                   "memory budget, an MPI rank's share); rebuild it with this Soren's SDK, or run it with "
                                   "--device cpu", s->job_name);
        total += inputs[i].size;
        uint64_t bytes = inputs[i].on_device ? 0 : data_bytes(s, &inputs[i]);
        uint64_t records = records_at_most(s, &inputs[i]);
        largest = bytes > largest ? bytes : largest;
        most_records = records > most_records ? records : most_records;
    }
    r->phase = "setup";
    r->emitter = "map";
    soren_result_destroy(&r->parts);
    soren_result_init(&r->parts, s);
    r->reg.key_first = 0;
    r->reg.key_last = KEY_LAST;
    r->x->key_parts = r->x->narrowings = r->x->waits = 0;
    soren_status st = use_device(r);
    if (st != SOREN_OK)
        return st;
    if (first) { /* a renewed session has its stream and events */
        if (!r->stream)
            CUDA_TRY(r, cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
        for (int i = 0; i < MARKS; i++)
            if (!r->mark[i])
                CUDA_TRY(r, cudaEventCreate(&r->mark[i]));
        int sms = 0;
        CUDA_TRY(r, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, r->opt->device));
        r->grid = sms * 8;
        st = session_start(r);
    }
    if (st == SOREN_OK)
        st = upload_params(r, params, param_versions);
    if (st == SOREN_OK)
        st = counters_reset(r);
    if (st == SOREN_OK)
        st = session_inputs(r, largest, most_records);
    if (st == SOREN_OK)
        st = alloc_staging(r, largest);
    if (st == SOREN_OK && !first)
        st = session_reset(r);
    const bool piped = pipelined(s, inputs, input_count);
    if (st == SOREN_OK && piped)
        st = pipeline_setup(r);
    soren_result part;
    soren_result_init(&part, s);
    for (bool sampling = first; st == SOREN_OK; sampling = false) {
        st = map_pass(r, inputs, &input_count, piped, sampling, total);
        if (st == SOREN_OK && input_count == 0 && sampling)
            st = configure(r); /* no input: nothing to monitor, an empty result */
        if (st == SOREN_OK && input_count == 0 && sampling &&
            (st = allocate_regions(r)) == SOREN_OK)
            shape_search_start(r, 0);
        if (st == SOREN_OK && !r->reg.narrowed)
            st = pass_result(r, input_count, piped, &part);
        if (st == SOREN_OK && r->reg.narrowed) {
            st = empty_table(r);
            continue;
        }
        if (st != SOREN_OK)
            break;
        r->x->key_parts++;
        if (whole_key_space(r)) {
            soren_result_destroy(out);
            *out = part; /* the whole key space in one pass */
            session_done(r, first);
            return SOREN_OK;
        }
        if ((st = add_part(r, &part)) != SOREN_OK)
            break;
        if (r->reg.key_last == KEY_LAST) {
            if ((st = join_parts(r, out)) == SOREN_OK)
                session_done(r, first);
            return st;
        }
        /* The next part as wide as this one, which fitted. */
        const uint64_t width = (uint64_t)r->reg.key_last - r->reg.key_first;
        r->reg.key_first = r->reg.key_last + 1;
        r->reg.key_last = KEY_LAST - r->reg.key_first > width
                              ? (uint32_t)(r->reg.key_first + width)
                              : KEY_LAST;
        CUDA_TRY(r, restart_counters(r, SOREN_KEY_ALIGN, 0));
    }
    soren_result_destroy(&part);
    release_list(r);
    return st;
}

} /* namespace soren__gpu */

using namespace soren__gpu;

extern "C" const char *soren_gpu_unsupported(const soren_stage_spec *spec)
{
    if (spec->code->gpu == NULL)
        return "the plugin was built without device code";
    if (spec->code->gpu->abi_minor < 1)
        return "the plugin's device code predates plugin ABI 1.1 (monitoring, block and dense "
               "launches, resume after overflow); rebuild it with this Soren's SDK";
    if ((spec->reduce == SOREN_REDUCE_FUNCTION || spec->input_format == SOREN_INPUT_INDEX ||
         spec->input_format == SOREN_INPUT_PAIRS) &&
        spec->code->gpu->abi_minor < 2)
        return "the plugin's device code predates plugin ABI 1.2 (reduce, index and pairs "
               "input on the GPU); rebuild it with this Soren's SDK";
    return NULL;
}

extern "C" int soren_gpu_folds_pairs(const soren_stage_spec *spec)
{
    return spec->code->gpu &&
           spec->code->gpu->abi_minor >= (spec->combine == SOREN_COMBINE_COUNT ? 8 : 7) &&
           spec->combine != SOREN_COMBINE_NONE && spec->key_type != SOREN_TYPE_INDEX;
}

/* A session is a gpu_run that outlives its runs, with its own copies of
 * the stage and the options it was made for. */
struct soren_gpu_session {
    soren_stage_spec spec;
    soren_gpu_options opt;
    gpu_run run;
    int failed;    /* a run failed: the device state is not to be trusted */
    int forgotten; /* its job ended: it serves another once renewed */
};

static void session_init(soren_gpu_session *s, const soren_stage_spec *spec,
                         const soren_gpu_options *opt, bool pooled)
{
    memset(s, 0, sizeof *s);
    s->spec = *spec;
    s->opt = *opt;
    s->run.spec = &s->spec;
    s->run.opt = &s->opt;
    s->run.gpu = spec->code->gpu;
    s->run.pool.pooled = pooled;
}

extern "C" soren_status soren_gpu_session_new(const soren_stage_spec *spec,
                                              const soren_gpu_options *opt,
                                              soren_gpu_session **out, soren_error *err)
{
    *out = NULL;
    const char *why = soren_gpu_unsupported(spec);
    if (why)
        return soren_error_set(err, SOREN_EDEVICE, "%s: cannot run on the GPU: %s",
                               spec->job_name, why);
    soren_gpu_session *s = (soren_gpu_session *)malloc(sizeof *s);
    if (!s)
        return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory", spec->job_name);
    session_init(s, spec, opt, true);
    *out = s;
    return SOREN_OK;
}

extern "C" int soren_gpu_session_fits(const soren_gpu_session *s, const soren_stage_spec *spec,
                                      const soren_gpu_options *opt)
{
    /* A stage or options that changed (a key count from the parameters, a
     * forced variant, the order) need a session of their own. */
    const soren_stage_spec *a = &s->spec;
    bool same_stage = a->job_name == spec->job_name && a->code == spec->code &&
                      a->input_format == spec->input_format &&
                      a->record_size == spec->record_size && a->task_count == spec->task_count &&
                      a->key_type == spec->key_type && a->key_max_size == spec->key_max_size &&
                      a->key_count == spec->key_count && a->value_type == spec->value_type &&
                      a->value_size == spec->value_size && a->combine == spec->combine &&
                      a->reduce == spec->reduce && a->order == spec->order &&
                      a->limit == spec->limit;
    return !s->failed && !s->forgotten && same_stage &&
           s->opt.variant == opt->variant && s->opt.device == opt->device &&
           s->opt.table_slots == opt->table_slots && s->opt.key_bytes == opt->key_bytes &&
           s->opt.pair_slots == opt->pair_slots && s->opt.block_slots == opt->block_slots &&
           s->opt.device_memory == opt->device_memory &&
           s->opt.small_keys == opt->small_keys &&
           s->opt.sample == opt->sample && s->opt.fold_pairs == opt->fold_pairs;
}

extern "C" void soren_gpu_session_forget(soren_gpu_session *s)
{
    s->forgotten = 1;
}

/* A renewed session keeps device blocks of at most this size, the ones
 * every run takes (counters, resume points, parameters, small tables):
 * the larger ones of the job before (inputs, large tables) go back to the
 * device, which other jobs may need while this one runs. */
enum { RENEWED_BLOCK_MOST = 16 << 20 };

/* What a session keeps for the job it is renewed for: its stream, events,
 * pinned buffers and small device blocks, all free.  A run's other state
 * is the first run's to set. */
static void keep_resources(gpu_run *to, gpu_run *from)
{
    pool_release_free(from, RENEWED_BLOCK_MOST);
    to->pool = from->pool;
    to->pool.temp = NULL;
    to->pool.temp_size = 0;
    for (size_t i = 0; i < to->pool.count; i++)
        to->pool.blocks[i].used = false;
    to->stream = from->stream;
    memcpy(to->mark, from->mark, sizeof to->mark);
    to->host_counters = from->host_counters;
    to->loop_state = from->loop_state;
    to->in.pieces = from->in.pieces;
    to->in.copy_threads = from->in.copy_threads;
    memcpy(to->in.staged, from->in.staged, sizeof to->in.staged);
    to->in.copy_stream = from->in.copy_stream;
    memcpy(to->in.upload_began, from->in.upload_began, sizeof to->in.upload_began);
    memcpy(to->in.uploaded, from->in.uploaded, sizeof to->in.uploaded);
    to->in.began = from->in.began;
}

extern "C" soren_status soren_gpu_session_renew(soren_gpu_session **session,
                                                const soren_stage_spec *spec,
                                                const soren_gpu_options *opt, soren_error *err)
{
    soren_gpu_session *s = *session;
    if (s && (s->failed || s->opt.device != opt->device || soren_gpu_unsupported(spec))) {
        soren_gpu_session_free(s);
        *session = s = NULL;
    }
    if (!s)
        return soren_gpu_session_new(spec, opt, session, err);
    gpu_run old = s->run;
    gpu_run_release_blocks(&old);
    session_init(s, spec, opt, true);
    keep_resources(&s->run, &old);
    return SOREN_OK;
}

extern "C" soren_status soren_gpu_session_run(soren_gpu_session *s, const soren_input *inputs,
                                              size_t input_count, const soren_params *params,
                                              const uint64_t *param_versions,
                                              soren_progress *progress,
                                              const soren_gpu_claim *claim, soren_result *out,
                                              soren_explain *x, soren_error *err)
{
    x->device = "gpu";
    if (s->failed)
        return soren_error_set(err, SOREN_EDEVICE, "%s: an earlier run of this job failed on "
                               "the GPU; make the job again", s->spec.job_name);
    s->opt.progress = progress;
    s->run.claim = claim;
    s->run.err = err;
    s->run.x = x;
    soren_status st = session_run(&s->run, inputs, input_count, params, param_versions, out);
    s->run.claim = NULL;
    if (st != SOREN_OK)
        s->failed = 1;
    return st;
}

extern "C" int soren_gpu_session_loops(const soren_gpu_session *s, const soren_input *inputs,
                                       size_t input_count)
{
    return !s->failed && !s->forgotten && loop_serves(&s->run, inputs, input_count);
}

extern "C" soren_status soren_gpu_session_loop(soren_gpu_session *s, const soren_input *inputs,
                                               size_t input_count, const soren_params *params,
                                               uint32_t param, uint8_t *host_param,
                                               uint64_t limit, int compare_last,
                                               soren_progress *progress, soren_result *out,
                                               soren_explain *x, soren_gpu_loop *loop,
                                               soren_error *err)
{
    x->device = "gpu";
    if (!soren_gpu_session_loops(s, inputs, input_count) || param >= params->count || limit == 0)
        return soren_error_set(err, SOREN_EJOB, "%s: these runs cannot loop on the GPU; "
                               "this is a bug in Soren, please report it", s->spec.job_name);
    s->opt.progress = progress;
    s->run.err = err;
    s->run.x = x;
    soren_status st = session_loop(&s->run, inputs, input_count, params, param, host_param,
                                   limit, compare_last != 0, out, loop);
    if (st != SOREN_OK)
        s->failed = 1;
    return st;
}

extern "C" void soren_gpu_session_pairs(const soren_gpu_session *s, soren_pairs *out)
{
    out->count = s->run.packed.n;
    out->key_bytes = s->run.packed.keys;
    out->key_offset = s->run.packed.offsets;
    out->values = s->run.packed.values;
}

extern "C" void soren_gpu_session_leave_result(soren_gpu_session *s, int leave)
{
    s->opt.leave_result = leave;
}

extern "C" int soren_gpu_session_pairs_input(const soren_gpu_session *s, soren_input *in)
{
    const gpu_packed *p = &s->run.packed;
    if (s->failed || !p->as_pairs)
        return 0;
    memset(in, 0, sizeof *in);
    in->data = p->keys;
    in->size = p->key_bytes;
    in->count = p->n;
    in->device_starts = p->offsets;
    in->on_device = 1;
    return 1;
}

extern "C" void soren_gpu_session_drop_pairs(soren_gpu_session *s)
{
    if (s->run.packed.as_pairs)
        free_packed(&s->run);
}

extern "C" void soren_gpu_session_free(soren_gpu_session *s)
{
    if (!s)
        return;
    gpu_run_destroy(&s->run);
    free(s);
}

extern "C" soren_status soren_gpu_run(const soren_stage_spec *spec, const soren_input *inputs,
                                      size_t input_count, const soren_params *params,
                                      const soren_gpu_options *opt, soren_result *out,
                                      soren_explain *x, soren_error *err)
{
    x->device = "gpu";
    const char *why = soren_gpu_unsupported(spec);
    if (why)
        return soren_error_set(err, SOREN_EDEVICE, "%s: cannot run on the GPU: %s",
                               spec->job_name, why);
    /* One run: what it frees goes back to the device at once, its result
     * with it, so the result comes back to the host. */
    soren_gpu_session s;
    session_init(&s, spec, opt, false);
    s.opt.leave_result = 0;
    s.run.err = err;
    s.run.x = x;
    soren_status st = session_run(&s.run, inputs, input_count, params, NULL, out);
    gpu_run_destroy(&s.run);
    return st;
}
