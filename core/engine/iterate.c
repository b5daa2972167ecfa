#include "iterate.h"

#include <stdio.h>
#include <string.h>

#include "dist_run.h"
#include "run.h"

/* Pair i's key as an element number. */
static uint64_t element_of(const soren_result *res, uint64_t i)
{
    const uint8_t *k = res->key_bytes + res->key_offset[i];
    if (res->key_type == SOREN_TYPE_U64) {
        uint64_t v;
        memcpy(&v, k, 8);
        return v;
    }
    uint32_t v;
    memcpy(&v, k, 4);
    return v;
}

soren_status soren_iterate_feed(const soren_result *res, uint8_t *data, uint64_t size,
                                const char *what, int write, int *changed, soren_error *err)
{
    soren_type kt = res->key_type;
    size_t vs = res->value_size;
    *changed = 0;
    if (kt != SOREN_TYPE_U32 && kt != SOREN_TYPE_U64 && kt != SOREN_TYPE_INDEX)
        return soren_error_set(err, SOREN_EJOB, "%s: the output's keys are of type %s; only u32, "
                               "u64 and index keys number the parameter's elements", what,
                               soren_type_name(kt));
    uint64_t elements = vs ? size / vs : 0;
    /* Every key is checked before anything is written, so a failed feed
     * leaves the parameter as the last run read it. */
    for (uint64_t i = 0; i < res->count; i++) {
        uint64_t e = element_of(res, i);
        if (e < elements)
            continue;
        if (!write) {
            *changed = 1;
            break;
        }
        return soren_error_set(err, SOREN_EJOB, "%s: the output's key %llu is past the "
                               "parameter's end (%llu bytes: %llu elements of %zu bytes), so "
                               "it cannot be fed to the next run", what, (unsigned long long)e,
                               (unsigned long long)size, (unsigned long long)elements, vs);
    }
    for (uint64_t i = 0; i < res->count; i++) {
        uint64_t e = element_of(res, i);
        const uint8_t *v = res->values + i * vs;
        if (e >= elements || memcmp(data + e * vs, v, vs) == 0)
            continue;
        *changed = 1;
        if (!write)
            return SOREN_OK;
        memcpy(data + e * vs, v, vs);
    }
    return SOREN_OK;
}

/* The reports of one run, emptied for the next (engines add to them). */
static void explains_reset(soren_explain *xs, size_t stages)
{
    for (size_t i = 0; i < stages; i++) {
        soren_explain_destroy(&xs[i]);
        memset(&xs[i], 0, sizeof xs[i]);
    }
}

/* The session the runs from here on can loop in on the GPU (NULL where
 * they cannot): one stage on the GPU engine of this process, whose session,
 * kept from the run before, serves such a loop. */
static soren_gpu_session *loop_session(const soren_run_plan *plan, soren_device where,
                                       const soren_input *inputs, size_t input_count,
                                       const soren_run_options *o)
{
    if (where != SOREN_DEVICE_GPU || o->device == SOREN_DEVICE_BOTH || o->comm ||
        plan->stages != 1 || !o->gpu_sessions || !o->gpu_sessions[0])
        return NULL;
    soren_gpu_session *s = o->gpu_sessions[0];
    return soren_gpu_session_loops(s, inputs, input_count) ? s : NULL;
}

soren_status soren__run_iterations(const soren_run_plan *plan, soren_device where,
                                   const soren_input *inputs, size_t input_count,
                                   soren_param_set *params, const soren_run_options *o,
                                   soren_result *res,
                                   soren_result *whole, soren_explain *xs, char (*rules)[256],
                                   soren_rank_stage *stats, soren_iterations *it,
                                   soren_error *err)
{
    int param = plan->iterate_param;
    char what[160];
    snprintf(what, sizeof what, "%s: parameter %s", plan->job, plan->iterate_name);
    *it = (soren_iterations){.limit = o->iterate};
    /* The fed parameter changes from run to run under the version the
     * caller gave it: a GPU session uploads it every run. */
    soren_run_options fed = *o;
    uint64_t versions[SOREN_MAX_PARAMS];
    if (o->iterate && o->param_versions) {
        memcpy(versions, o->param_versions, sizeof versions);
        versions[param] = 0;
        fed.param_versions = versions;
    }
    o = &fed;
    int on_device = 1; /* until the GPU says it has no graph while nodes */
    for (uint64_t run = 1;; run++) {
        /* After a run on the host has set the session up, the runs loop
         * on the GPU, the host waiting once a batch; a run that needs the
         * host (its table grew, say) is made below, and the loop goes on. */
        soren_gpu_session *session =
            run > 1 && on_device ? loop_session(plan, where, inputs, input_count, o) : NULL;
        if (session) {
            soren_gpu_loop loop;
            xs[0].job = plan->specs[0].job_name;
            soren_status rc = soren_gpu_session_loop(
                session, inputs, input_count, &params->params, (uint32_t)param,
                params->owned[param], o->iterate - run + 1, 1, o->progress, res, &xs[0], &loop,
                err);
            if (rc != SOREN_OK)
                return rc;
            on_device = loop.end != SOREN_GPU_LOOP_UNSUPPORTED;
            if (o->verbose && loop.runs)
                soren_progress_say(o->progress, "soren-host: %s: iterations %llu to %llu of %llu "
                                   "on the GPU, the host waiting %llu times\n", plan->job,
                                   (unsigned long long)run,
                                   (unsigned long long)(run + loop.runs - 1),
                                   (unsigned long long)o->iterate,
                                   (unsigned long long)loop.batches);
            if (o->verbose && !on_device)
                soren_progress_say(o->progress, "soren-host: %s: this GPU's driver runs no CUDA "
                                   "graph while nodes: the host waits for every run\n",
                                   plan->job);
            it->device_runs += loop.runs;
            run += loop.runs;
            if (loop.end == SOREN_GPU_LOOP_CONVERGED || loop.end == SOREN_GPU_LOOP_LIMIT) {
                it->runs = run - 1;
                it->converged = loop.end == SOREN_GPU_LOOP_CONVERGED;
                return SOREN_OK;
            }
        }
        if (o->verbose && o->iterate)
            soren_progress_say(o->progress, "soren-host: %s: iteration %llu of %llu\n", plan->job,
                               (unsigned long long)run, (unsigned long long)o->iterate);
        soren_status rc =
            o->comm ? soren__run_stages_dist(plan, where, inputs, input_count, &params->params,
                                             o, res, xs, rules, stats, err)
                    : soren__run_stages(plan, where, inputs, input_count, &params->params, o,
                                        res, xs, rules, err);
        if (rc != SOREN_OK || !o->iterate)
            return rc;
        if (o->comm)
            rc = soren__gather_whole(o, &plan->specs[plan->stages - 1], res, 1, whole, err);
        if (rc != SOREN_OK)
            return rc;
        it->runs = run;
        int last = run == o->iterate, changed = 0;
        rc = soren_iterate_feed(o->comm ? whole : res, params->owned[param],
                                params->params.size[param], what, !last, &changed, err);
        if (rc != SOREN_OK)
            return rc;
        it->converged = !changed;
        if (!changed || last)
            return SOREN_OK;
        soren_result_destroy(res);
        soren_result_destroy(whole);
        explains_reset(xs, plan->stages);
    }
}

void soren__say_iterations(FILE *to, const char *job, const char *param,
                           const soren_iterations *it)
{
    if (it->converged)
        fprintf(to, "soren-host: %s: converged after %llu of at most %llu runs (the last "
                "run's output changed no byte of parameter %s)", job,
                (unsigned long long)it->runs, (unsigned long long)it->limit, param);
    else
        fprintf(to, "soren-host: %s: not converged after --iterate %llu: the last run's "
                "output still changed parameter %s", job,
                (unsigned long long)it->limit, param);
    if (it->device_runs)
        fprintf(to, "; %llu of the runs looped on the GPU", (unsigned long long)it->device_runs);
    fputc('\n', to);
}
