#include "run.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../cpu/cpu.h"
#include "both.h"

double soren__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The CPU engine folds with a thread for each FOLD_PAIRS_PER_THREAD pairs;
 * the GPU, from FOLD_ON_GPU_LEAST pairs: fewer fold on the CPU in less than
 * a GPU run's set-up and waits. */
enum { FOLD_PAIRS_PER_THREAD = 1 << 16, FOLD_ON_GPU_LEAST = 1 << 16 };

/* The fold on the rank's GPU: a run of the stage whose records are the
 * pairs as they are, with the hash variant, in the stage's fold session
 * where the caller keeps sessions; quietly (the rank's map has spoken; its
 * bytes are not the input's). */
static soren_status fold_on_gpu(const soren_stage_spec *f, size_t index,
                                const soren_input *received, const soren_params *params,
                                const soren_run_options *o, soren_result *res, soren_error *err)
{
    soren_run_options g = *o;
    g.engine = "hash";
    g.verbose = 0;
    g.progress = NULL;
    g.gpu.fold_pairs = 1;
    soren_gpu_session **session =
        o->gpu_sessions ? &o->gpu_sessions[SOREN_MAX_STAGES + index] : NULL;
    soren_explain x;
    memset(&x, 0, sizeof x);
    soren_status rc = soren__run_gpu(f, received, 1, params, &g, session, NULL, res, &x, err);
    soren_explain_destroy(&x);
    return rc;
}

soren_status soren__fold_received(const soren_stage_spec *spec, size_t index,
                                  soren_device where, const soren_input *received,
                                  const soren_params *params, const soren_run_options *o,
                                  soren_result *res, int *on_gpu, soren_error *err)
{
    soren_stage_spec f = *spec;
    f.input_format = SOREN_INPUT_PAIRS;
    f.record_size = 0;
    *on_gpu = where == SOREN_DEVICE_GPU && received->count >= FOLD_ON_GPU_LEAST &&
              soren_gpu_folds_pairs(&f);
    if (*on_gpu)
        return fold_on_gpu(&f, index, received, params, o, res, err);
    /* Each thread's table is sized for every received key, so threads
     * beyond the work's need cost their tables' setup: one per 64K pairs. */
    unsigned threads = o->threads ? o->threads : soren_cpu_count();
    uint64_t need = 1 + received->count / FOLD_PAIRS_PER_THREAD;
    if (need < threads)
        threads = (unsigned)need;
    soren_cpu_options cpu = {.threads = threads, .distinct_keys = received->count, .fold = 1};
    soren_status rc = soren_cpu_run(&f, received, 1, params, &cpu, res, err);
    if (rc == SOREN_OK)
        rc = soren_result_order(res, spec->order, spec->limit, err);
    return rc;
}

soren_status soren__run_gpu(const soren_stage_spec *spec, const soren_input *inputs,
                            size_t input_count, const soren_params *params,
                            const soren_run_options *o, soren_gpu_session **session,
                            const soren_gpu_claim *claim, soren_result *res, soren_explain *x,
                            soren_error *err)
{
    soren_gpu_options gpu = o->gpu;
    if (soren_variant_parse(o->engine ? o->engine : "auto", &gpu.variant) != 0)
        return soren_error_set(err, SOREN_EUSAGE, "--engine %s: expected one of %s", o->engine,
                               soren_engine_names);
    gpu.sample = o->sample;
    gpu.small_keys = o->small_keys;
    gpu.progress = o->progress;
    gpu.device_memory = o->device_memory;
    x->device = "gpu";
    soren_status rc = SOREN_OK;
    if (!session) {
        rc = soren_gpu_run(spec, inputs, input_count, params, &gpu, res, x, err);
    } else {
        if (!*session || !soren_gpu_session_fits(*session, spec, &gpu))
            rc = soren_gpu_session_renew(session, spec, &gpu, err);
        if (rc == SOREN_OK) {
            soren_gpu_session_leave_result(*session, gpu.leave_result);
            rc = soren_gpu_session_run(*session, inputs, input_count, params,
                                       o->param_versions, o->progress, claim, res, x, err);
        }
    }
    if (rc == SOREN_OK && x->key_parts > 1 && o->verbose)
        soren_progress_say(o->progress, "soren-host: gpu engine: the table folded the key space "
                           "in %llu parts under --device-memory (%llu passes began again on "
                           "half their part)\n", (unsigned long long)x->key_parts,
                           (unsigned long long)x->narrowings);
    if (rc == SOREN_OK && o->verbose) {
        soren_progress_say(o->progress,
                           "soren-host: gpu engine: %s variant; ms: upload %.3f, split %.3f, "
                           "map %.3f, merge %.3f, reduce %.3f, order %.3f, download %.3f\n",
                           soren_variant_name(x->variant), x->ms.upload, x->ms.split,
                           x->ms.map, x->ms.merge, x->ms.reduce, x->ms.sort, x->ms.download);
        soren_progress_say(o->progress, "soren-host: variant: %s (%s)\n",
                           soren_variant_name(x->variant),
                           x->rule ? x->rule : "no rule recorded");
    }
    return rc;
}

/* Whether the manifest alone decides the CPU engine's variant, whatever a
 * sample says: a map-only stage lists its pairs (direct; its lists have no
 * table to size), and index keys with a combine whose accumulators fit are
 * dense. */
static int cpu_variant_decided(const soren_stage_spec *spec, const soren_run_options *o)
{
    if (spec->combine == SOREN_COMBINE_NONE && spec->reduce == SOREN_REDUCE_NONE)
        return 1;
    return spec->key_type == SOREN_TYPE_INDEX && spec->combine != SOREN_COMBINE_NONE &&
           soren_cpu_dense(spec, o->threads);
}

/* Monitoring on the CPU, timed; with --sample 0, or where the manifest
 * decides, only the input's size is known, and so the number of its fixed
 * records or tasks (counting its lines would be a pass over it that nobody
 * needs). */
static soren_status monitor_cpu(const soren_stage_spec *spec, const soren_input *inputs,
                                size_t input_count, const soren_params *params,
                                const soren_run_options *o, soren_explain *x, soren_error *err)
{
    if (!(o->sample > 0) || cpu_variant_decided(spec, o)) {
        x->metrics.fraction = 0;
        for (size_t i = 0; i < input_count; i++) {
            x->metrics.total_bytes += inputs[i].size;
            if (spec->input_format == SOREN_INPUT_INDEX)
                x->metrics.total_records += inputs[i].size;
            else if (spec->input_format == SOREN_INPUT_FIXED && spec->record_size)
                x->metrics.total_records += inputs[i].size / spec->record_size;
        }
        return SOREN_OK;
    }
    soren_progress_phase(o->progress, "monitor", 0);
    double t0 = soren__now_ms();
    soren_status rc = soren_cpu_monitor(spec, inputs, input_count, params, o->sample,
                                        o->threads, o->progress, &x->metrics, err);
    x->ms.monitor = soren__now_ms() - t0;
    return rc;
}

/* The CPU engine's variant and the rule behind it.  It has hash (its
 * per-thread tables), dense (per-thread arrays, for index keys whose
 * accumulators fit: soren_cpu_dense) and direct (map-only); a forced GPU variant is reported
 * as not applying, in rule_buf (which x->rule then points to). */
static void choose_cpu(const soren_stage_spec *spec, const soren_run_options *o,
                       soren_explain *x, char *rule_buf, size_t rule_size)
{
    x->rule = soren_choose(spec, &x->metrics, o->small_keys, 0, &x->variant);
    if (spec->key_type == SOREN_TYPE_INDEX && x->variant == SOREN_VARIANT_HASH) {
        int dense = soren_cpu_dense(spec, o->threads);
        x->variant = dense ? SOREN_VARIANT_DENSE : SOREN_VARIANT_HASH;
        x->rule = dense ? "index keys bounded by the manifest, key.count accumulators of every "
                          "thread within 64 MiB, not monitored: dense"
                        : "index keys bounded by the manifest, key.count accumulators of every "
                          "thread over 64 MiB: hash";
    }
    if (o->engine && strcmp(o->engine, "auto") != 0) {
        snprintf(rule_buf, rule_size, "--engine %s applies to the GPU; the CPU engine ran %s",
                 o->engine, soren_variant_name(x->variant));
        x->rule = rule_buf;
    }
}

soren_status soren__run_cpu(const soren_stage_spec *spec, const soren_input *inputs,
                            size_t input_count, const soren_params *params,
                            const soren_run_options *o, soren_result *res, soren_explain *x,
                            char *rule_buf, size_t rule_size, soren_error *err)
{
    x->device = "cpu";
    if (o->verbose && o->engine && strcmp(o->engine, "auto") != 0)
        soren_progress_say(o->progress, "soren-host: engine: the CPU engine chooses its own "
                           "variant; --engine %s applies to the GPU\n", o->engine);
    if (o->verbose)
        soren_progress_say(o->progress, "soren-host: cpu engine: %u threads\n",
                           o->threads ? o->threads : soren_cpu_count());

    soren_status rc = monitor_cpu(spec, inputs, input_count, params, o, x, err);
    if (rc != SOREN_OK)
        return rc;
    choose_cpu(spec, o, x, rule_buf, rule_size);
    soren_project(spec, &x->metrics, &x->projection);
    if (o->verbose)
        soren_progress_say(o->progress, "soren-host: variant: %s (%s)\n",
                           soren_variant_name(x->variant), x->rule);

    /* Without monitoring the projection is only a generous bound from the
     * input's bytes: the tables then start small and grow. */
    soren_cpu_options cpu = {
        .threads = o->threads,
        .distinct_keys = x->metrics.ran ? x->projection.distinct_keys : 0,
        .table_slots = o->gpu.table_slots,
        .explain = x,
        .progress = o->progress,
    };
    rc = soren_cpu_run(spec, inputs, input_count, params, &cpu, res, err);
    if (rc != SOREN_OK)
        return rc;
    soren_progress_phase(o->progress, "order", 0);
    double t0 = soren__now_ms();
    rc = soren_result_order(res, spec->order, spec->limit, err);
    x->ms.sort = soren__now_ms() - t0;
    return rc;
}

soren_status soren__run_stage(const soren_stage_spec *spec, size_t index, soren_device where,
                              const soren_input *inputs, size_t input_count,
                              const soren_params *params, const soren_run_options *o,
                              soren_result *res, soren_explain *x, char *rule, size_t rule_size,
                              soren_error *err)
{
    soren_result_init(res, spec);
    soren_status cancelled = soren_progress_check(o->progress, spec->job_name, err);
    if (cancelled != SOREN_OK)
        return cancelled;
    x->job = spec->job_name;
    soren_gpu_session **session = o->gpu_sessions ? &o->gpu_sessions[index] : NULL;
    if (where == SOREN_DEVICE_GPU && index == 0 && o->device == SOREN_DEVICE_BOTH)
        return soren__run_both(spec, inputs, input_count, params, o, session, res, x, err);
    if (where == SOREN_DEVICE_GPU)
        return soren__run_gpu(spec, inputs, input_count, params, o, session, NULL, res, x, err);
    return soren__run_cpu(spec, inputs, input_count, params, o, res, x, rule, rule_size, err);
}

/* Stage i's pairs as stage i + 1's input, in pairs: where the GPU left
 * them on the device (*left, the session to drop them from once read), or
 * packed in host memory from res, which is spent either way. */
static soren_status next_input(soren_gpu_session *session, size_t i, soren_result *res,
                               soren_input *pairs, soren_gpu_session **left, soren_error *err)
{
    char name[64];
    snprintf(name, sizeof name, "(the pairs of stage %zu)", i + 1);
    *left = NULL;
    if (session && soren_gpu_session_pairs_input(session, pairs)) {
        soren_result_destroy(res);
        if (!(pairs->path = strdup(name)))
            return soren_error_set(err, SOREN_ENOMEM, "out of memory");
        *left = session;
        return SOREN_OK;
    }
    soren_status rc = soren_input_pairs(pairs, name, res, err);
    soren_result_destroy(res);
    return rc;
}

soren_status soren__run_stages(const soren_run_plan *plan, soren_device where,
                               const soren_input *inputs, size_t input_count,
                               const soren_params *params, const soren_run_options *o,
                               soren_result *res, soren_explain *xs,
                               char (*rules)[256], soren_error *err)
{
    const soren_stage_spec *specs = plan->specs;
    size_t stages = plan->stages;
    /* On the GPU a stage leaves its pairs on the device for the next, which
     * maps them there: they need not go to the host and back.  That takes
     * a session per stage, kept until the next stage has read them: the
     * caller's, or the run's own. */
    soren_gpu_session *own[SOREN_RANK_SESSIONS] = {0};
    soren_run_options so = *o;
    const int chained = where == SOREN_DEVICE_GPU && stages > 1 && o->device != SOREN_DEVICE_BOTH;
    if (chained && !so.gpu_sessions)
        so.gpu_sessions = own;
    so.gpu.leave_result = chained;
    soren_status rc = soren__run_stage(&specs[0], 0, where, inputs, input_count, params, &so,
                                       res, &xs[0], rules[0], sizeof rules[0], err);
    for (size_t i = 1; rc == SOREN_OK && i < stages; i++) {
        soren_input pairs;
        soren_gpu_session *left = NULL;
        rc = next_input(chained ? so.gpu_sessions[i - 1] : NULL, i, res, &pairs, &left, err);
        xs[i - 1].pairs = pairs.count;
        if (rc != SOREN_OK)
            break;
        if (o->verbose)
            soren_progress_say(o->progress, "soren-host: %s: stage %zu of %zu: %llu pairs%s\n",
                               plan->job, i + 1, stages, (unsigned long long)pairs.count,
                               left ? ", left on the GPU by the stage before" : "");
        so.gpu.leave_result = chained && i + 1 < stages;
        rc = soren__run_stage(&specs[i], i, where, &pairs, 1, params, &so, res, &xs[i],
                              rules[i], sizeof rules[i], err);
        soren_input_close(&pairs);
        if (left)
            soren_gpu_session_drop_pairs(left);
    }
    xs[stages - 1].pairs = res->count;
    for (size_t i = 0; i < SOREN_RANK_SESSIONS; i++)
        soren_gpu_session_free(own[i]);
    return rc;
}

int soren__stage_shuffles(const soren_stage_spec *s)
{
    return s->combine != SOREN_COMBINE_NONE || s->reduce != SOREN_REDUCE_NONE;
}

soren_stage_spec soren__local_spec(const soren_stage_spec *s)
{
    soren_stage_spec l = *s;
    if (!soren__stage_shuffles(s))
        return l;
    if (l.reduce == SOREN_REDUCE_FUNCTION)
        l.reduce = l.combine != SOREN_COMBINE_NONE ? SOREN_REDUCE_COMBINE : SOREN_REDUCE_NONE;
    l.order = SOREN_ORDER_NONE;
    l.limit = 0;
    return l;
}
