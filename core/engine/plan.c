#include "plan.h"

#include <stdio.h>
#include <string.h>

/* What param_product found. */
typedef enum product_status {
    PRODUCT_OK,      /* *out is the product; *name the first factor of 0, if any */
    PRODUCT_MISSING, /* *name was not given (no value, no default) */
    PRODUCT_OVER     /* the product is over 2^64 - 1 */
} product_status;

/* The product of cf's items, the parameters it names (u32 or u64, as the
 * manifest checked) and its constants, in *out: the count that a
 * count_from says. */
static product_status param_product(const soren_manifest *m, const soren_count_from *cf,
                                    const soren_params *params, uint64_t *out, const char **name)
{
    uint64_t values[SOREN_MAX_COUNT_FROM];
    *name = NULL;
    for (size_t i = 0; i < cf->count; i++) {
        if (!cf->names[i]) {
            values[i] = cf->constants[i];
            continue;
        }
        int k = soren_manifest_param_index(m, cf->names[i]);
        if (k < 0 || params->size[k] == 0) {
            *name = cf->names[i];
            return PRODUCT_MISSING;
        }
        if (params->size[k] == 4) {
            uint32_t v32;
            memcpy(&v32, params->data[k], 4);
            values[i] = v32;
        } else {
            memcpy(&values[i], params->data[k], 8);
        }
        if (values[i] == 0 && !*name)
            *name = cf->names[i];
    }
    /* A factor of 0 makes the product 0, however large the others. */
    *out = *name ? 0 : 1;
    for (size_t i = 0; i < cf->count && *out; i++) {
        if (*out > UINT64_MAX / values[i])
            return PRODUCT_OVER;
        *out *= values[i];
    }
    return PRODUCT_OK;
}

/* The number of tasks of an index job: --tasks, else the manifest's count,
 * else the product of the parameters its count_from names. */
static soren_status task_count(const soren_manifest *m, const soren_run_options *o,
                               const soren_params *params, uint64_t *out, soren_error *err)
{
    if (o->tasks) {
        *out = o->tasks;
        return SOREN_OK;
    }
    if (m->input.count) {
        *out = m->input.count;
        return SOREN_OK;
    }
    if (m->input.count_from.count == 0)
        return soren_error_set(err, SOREN_EUSAGE, "%s reads index input and its manifest gives "
                               "no task count: give --tasks N", m->name);
    const char *name = NULL;
    switch (param_product(m, &m->input.count_from, params, out, &name)) {
    case PRODUCT_MISSING:
        return soren_error_set(err, SOREN_EUSAGE, "%s: the task count is the product of "
                               "parameters of input.count_from: give --param %s=N (or "
                               "--tasks N)", m->name, name);
    case PRODUCT_OVER:
        return soren_error_set(err, SOREN_EUSAGE, "%s: the task count (the product of "
                               "input.count_from) is over 2^64", m->name);
    case PRODUCT_OK: break;
    }
    return SOREN_OK;
}

/* The key count of stage index (0-based), whose index keys are counted by
 * key.count_from: the product of those parameters, from 1 to UINT32_MAX as
 * key.count is (keys are u32: a larger count would promise keys that cannot
 * be emitted, and the GPU's dense variant sizes its arrays by it). */
static soren_status key_count(const soren_manifest *m, size_t index, const soren_params *params,
                              uint64_t *out, soren_error *err)
{
    char field[64] = "key.count_from";
    if (index > 0)
        snprintf(field, sizeof field, "stages[%zu].key.count_from", index - 1);
    const char *name = NULL;
    soren_manifest_stage st = soren_manifest_stage_at(m, index);
    product_status ps = param_product(m, &st.key.count_from, params, out, &name);
    if (ps == PRODUCT_MISSING)
        return soren_error_set(err, SOREN_EUSAGE, "%s: the key count is the product of "
                               "parameters of %s: give --param %s=N", m->name, field, name);
    if (ps == PRODUCT_OK && *out == 0)
        return soren_error_set(err, SOREN_EUSAGE, "%s: the key count (the product of %s) is 0, "
                               "for parameter %s is 0; index keys need at least one: give "
                               "--param %s=N, N from 1 up", m->name, field, name, name);
    if (ps == PRODUCT_OVER || *out > UINT32_MAX)
        return soren_error_set(err, SOREN_EUSAGE, "%s: the key count (the product of %s) is "
                               "over 4294967295, the most that index keys (u32) can number: "
                               "give smaller parameters", m->name, field);
    return SOREN_OK;
}

/* Sets the key count of every stage whose index keys are counted by
 * parameters (soren_stage_spec_init_at leaves it 0, which no key is under). */
static soren_status stage_key_counts(const soren_manifest *m, soren_stage_spec *specs,
                                     size_t stages, const soren_params *params, soren_error *err)
{
    for (size_t i = 0; i < stages; i++) {
        if (soren_manifest_stage_at(m, i).key.count_from.count == 0)
            continue;
        soren_status rc = key_count(m, i, params, &specs[i].key_count, err);
        if (rc != SOREN_OK)
            return rc;
    }
    return SOREN_OK;
}


/* The parameter --iterate feeds (its index in plan->iterate_param), or why
 * the job cannot iterate. */
static soren_status iterate_param(soren_run_plan *plan, const soren_manifest *m,
                                  const soren_run_options *o, soren_error *err)
{
    plan->iterate_param = -1;
    plan->iterate_name = "";
    if (!o->iterate)
        return SOREN_OK;
    if (!m->iterate_param)
        return soren_error_set(err, SOREN_EUSAGE, "--iterate applies to jobs whose manifest has "
                               "\"iterate\" (the parameter each run's output feeds); %s has "
                               "none: run it without --iterate", m->name);
    plan->iterate_param = soren_manifest_param_index(m, m->iterate_param);
    plan->iterate_name = m->iterate_param;
    return SOREN_OK;
}

soren_status soren__run_plan_make(soren_run_plan *plan, const soren_plugin *p,
                                  const soren_run_options *o, const soren_params *params,
                                  soren_error *err)
{
    const soren_manifest *m = p->manifest;
    plan->job = m->name;
    plan->stages = soren_manifest_stages(m);
    for (size_t i = 0; i < plan->stages; i++)
        soren_stage_spec_init_at(&plan->specs[i], m, &p->table->stages[i], i);
    /* --order and --top: both engines order and cut the result as the
     * stage says, so the last stage is where they go. */
    soren_stage_spec *last = &plan->specs[plan->stages - 1];
    if (o->order >= 0)
        last->order = (soren_order)o->order;
    if (o->top)
        last->limit = o->top;
    plan->iterate_param = -1;
    plan->iterate_name = "";
    plan->tasks = 0;
    soren_status rc = stage_key_counts(m, plan->specs, plan->stages, params, err);
    if (rc == SOREN_OK && m->input.format == SOREN_INPUT_INDEX)
        rc = task_count(m, o, params, &plan->tasks, err);
    if (rc == SOREN_OK)
        rc = iterate_param(plan, m, o, err);
    return rc;
}
