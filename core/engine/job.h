/*
 * job.h - one run of a loaded plugin, from inputs to its result (and, for
 * soren-host, the output file).
 *
 * Builds the parameters, picks the device (auto: a usable GPU with the
 * plugin's GPU engine, else the CPU engine), runs the stage, orders the
 * result as the manifest (or --order and --top, which replace its
 * output.order and output.limit in the stage both engines read) say and
 * writes it through a temporary file, so a failed run leaves no output
 * behind.  Each phase is reported to the progress line, if any, which ends
 * before the result goes to standard output and before the run returns.
 *
 * Either engine first monitors a sample of the input (unless sample is 0),
 * picks its variant with soren_choose, starts its regions at soren_project's
 * sizes, and fills a soren_explain that --explain prints once the output is
 * committed.
 *
 * With iterate N (a job whose manifest has "iterate"), the stages run up to
 * N times over the same inputs, each run's output fed into the manifest's
 * parameter before the next (engine/iterate.h), stopping early when a run
 * changes nothing; the last run's result is written and explained.
 *
 * With comm (a distributed run of two or more ranks, engine/dist.h), every
 * rank calls soren_run with the same options: each maps its slice,
 * the pairs go to their keys' ranks, and rank 0 writes the result (or each
 * rank its part).  Only rank 0 reports (verbose, explain); a failure on any
 * rank fails the run on every rank with that rank's words.  output_parts
 * writes the result as OUTPUT.part-R-of-N, one file per rank, R from 0 with
 * as many digits as N - 1 (one process writes OUTPUT.part-0-of-1).
 */
#ifndef SOREN_JOB_H
#define SOREN_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "../error.h"
#include "../plugin/loader.h"
#include "../plugin/params.h"
#include "dist.h"
#include "options.h"
#include "plan.h"

/* What one run of a job produced: the last stage's pairs, in their final
 * order (in a distributed run: the whole result on rank 0, or this rank's
 * share with output_parts), and every stage's report; with --iterate, how
 * the loop ended; in a distributed run, this rank's figures.  A report's
 * rule may point into rules. */
typedef struct soren_run_outcome {
    soren_result result;
    soren_explain stages[SOREN_MAX_STAGES];
    size_t stage_count;
    soren_iterations iterations;
    /* with --iterate in a library job: the fed parameter as the last run
     * read it (malloc'd; soren_run_job) */
    void *iterated;
    uint64_t iterated_size;
    char rules[SOREN_MAX_STAGES][256];
    soren_rank_stage ranks[SOREN_MAX_STAGES];
} soren_run_outcome;

/* Runs plan (made by soren__run_plan_make from the plugin, o and params)
 * over inputs already opened (none for an index job, whose tasks the plan
 * counts) with the parameters params (which --iterate rewrites), as o
 * says; leaves what the run produced in *out, which the caller releases
 * with soren_run_outcome_destroy whether the run succeeded or not. */
soren_status soren_run_inputs(const soren_run_plan *plan, const soren_run_options *o,
                              soren_param_set *params, const soren_input *inputs,
                              size_t input_count, soren_run_outcome *out, soren_error *err);
void soren_run_outcome_destroy(soren_run_outcome *out);

/* One input of a library job: a file opened here by its path, a file (or
 * a memory file) that the caller opened, or bytes in memory. */
typedef struct soren_job_input {
    enum {
        SOREN_JOB_INPUT_PATH,  /* path, opened and mapped here */
        SOREN_JOB_INPUT_FD,    /* fd, mapped here and left open; path names it */
        SOREN_JOB_INPUT_MEMORY /* size bytes at data, in device memory with on_device */
    } kind;
    const char *path;
    int fd;
    const void *data;
    size_t size;
    int on_device;
} soren_job_input;

/* A library job's run, in the program (soren_job_run) or in the resident
 * host for it: the parameters built from values (one per manifest
 * parameter, borrowed), the inputs opened and laid end to end, then
 * soren_run_inputs.  *out as soren_run_inputs leaves it (emptied first, so
 * that soren_run_outcome_destroy may always follow), with o->iterate the
 * fed parameter in out->iterated. */
soren_status soren_run_job(const soren_plugin *p, const soren_run_options *o,
                           const soren_param_value *values, const soren_job_input *inputs,
                           size_t input_count, soren_run_outcome *out, soren_error *err);

/* soren-host run: builds the parameters from o->params, opens o->inputs
 * (standard input when none), runs, and writes the result to o->output
 * through a temporary file, so a failed run leaves no output; --verbose and
 * --explain report on standard error. */
soren_status soren_run(const soren_plugin *p, const soren_run_options *o, soren_error *err);

#endif /* SOREN_JOB_H */
