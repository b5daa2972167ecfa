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
    for (uint64_t run = 1;; run++) {
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
                "run's output changed no byte of parameter %s)\n", job,
                (unsigned long long)it->runs, (unsigned long long)it->limit, param);
    else
        fprintf(to, "soren-host: %s: not converged after --iterate %llu: the last run's "
                "output still changed parameter %s\n", job,
                (unsigned long long)it->limit, param);
}
