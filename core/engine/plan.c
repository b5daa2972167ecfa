#include "plan.h"

#include "inputs.h"

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
    soren_status rc = soren__stage_key_counts(m, plan->specs, plan->stages, params, err);
    if (rc == SOREN_OK)
        rc = iterate_param(plan, m, o, err);
    return rc;
}
