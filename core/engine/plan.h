/*
 * plan.h - what a run does, made once from the manifest, the plugin's
 * table, the options and the parameters before anything runs: each stage
 * as the engines run it (the key counts that parameters give set, --order
 * and --top on the last stage, where both engines order and cut), an index
 * job's task count, and the parameter --iterate feeds.  The counts that
 * parameters give (input.count_from, key.count_from) are refused here, with
 * the option to give, where they are missing, 0 or too large.  The
 * orchestration reads the plan, never the manifest.
 */
#ifndef SOREN_ENGINE_PLAN_H
#define SOREN_ENGINE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "../base/stage.h"
#include "../error.h"
#include "../plugin/loader.h"
#include "../plugin/params.h"
#include "options.h"

typedef struct soren_run_plan {
    const char *job; /* the job's name, in messages */
    size_t stages;
    soren_stage_spec specs[SOREN_MAX_STAGES];
    uint64_t tasks;          /* an index job's task count; 0 for data input */
    int iterate_param;       /* the parameter --iterate feeds; -1 without --iterate */
    const char *iterate_name; /* its name; "" without --iterate */
} soren_run_plan;

/* Makes the plan of a run of p as o says, with params.  The stages are set
 * even where it fails: a SOREN_EUSAGE error where a count that parameters
 * give is missing, 0 or too large, an index job has no task count, or
 * --iterate is given to a job without "iterate". */
soren_status soren__run_plan_make(soren_run_plan *plan, const soren_plugin *p,
                                  const soren_run_options *o, const soren_params *params,
                                  soren_error *err);

#endif /* SOREN_ENGINE_PLAN_H */
