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
#include "../gpu/device.h"
#include "../gpu/engine.h"
#include "../io/output.h"
#include "../plugin/loader.h"
#include "../plugin/params.h"
#include "dist.h"
#include "progress.h"

typedef struct soren_run_options {
    const char *const *inputs; /* files; none: standard input */
    size_t input_count;
    const char *output;        /* NULL or "-": standard output */
    soren_format format;
    int order;                 /* -1: the manifest's output.order; else a soren_order */
    uint64_t top;              /* keep the first top pairs; 0: the manifest's output.limit */
    soren_device device;
    const char *engine;        /* "auto" or a variant name (see soren_engine_names) */
    double sample;             /* fraction of the records monitoring maps; 0: none */
    uint64_t small_keys;       /* auto picks block under this many distinct keys */
    /* Initial region sizes (0: projected); the variant, sample and
     * small_keys are set from the fields above.  The CPU engine takes
     * table_slots as its per-thread tables' first size. */
    soren_gpu_options gpu;
    unsigned threads;          /* CPU engine; 0: every online CPU */
    uint64_t tasks;            /* index input: the task count (--tasks); 0: the manifest's */
    uint64_t iterate;          /* --iterate N: up to N runs, fed by the output; 0: one run */
    const char *const *params; /* "name=value" / "name=@file" */
    size_t param_count;
    int verbose;               /* report decisions on stderr */
    int explain;               /* after a successful run, the JSON report on stderr */
    soren_progress *progress;  /* the progress line, or NULL; verbose lines go through it */
    const soren_comm *comm;    /* the ranks of a distributed run; NULL: one process */
    /* The library's jobs: a GPU session per stage, made by the first run on
     * the GPU and kept by the caller; NULL: every run sets up anew. */
    soren_gpu_session **gpu_sessions;
    int output_parts;          /* --output-parts: each rank writes OUTPUT.part-R-of-N */
} soren_run_options;

/* Zeroes o and sets the defaults: engine "auto", order -1 (the
 * manifest's), sample SOREN_SAMPLE_DEFAULT, small_keys
 * SOREN_SMALL_KEYS_DEFAULT. */
void soren_run_options_init(soren_run_options *o);

/* The values --engine accepts, space-separated. */
extern const char soren_engine_names[];
/* 1 if name is one of soren_engine_names. */
int soren_engine_name_valid(const char *name);

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
    char rules[SOREN_MAX_STAGES][256];
    soren_rank_stage ranks[SOREN_MAX_STAGES];
} soren_run_outcome;

/* Runs p over inputs already opened (none for an index job, whose tasks
 * come from o->tasks, the manifest or its count_from parameters) with the
 * parameters params (which --iterate rewrites), as o says; leaves what the
 * run produced in *out, which the caller releases with
 * soren_run_outcome_destroy whether the run succeeded or not. */
soren_status soren_run_inputs(const soren_plugin *p, const soren_run_options *o,
                              soren_param_set *params, const soren_input *inputs,
                              size_t input_count, soren_run_outcome *out, soren_error *err);
void soren_run_outcome_destroy(soren_run_outcome *out);

/* soren-host run: builds the parameters from o->params, opens o->inputs
 * (standard input when none), runs, and writes the result to o->output
 * through a temporary file, so a failed run leaves no output; --verbose and
 * --explain report on standard error. */
soren_status soren_run(const soren_plugin *p, const soren_run_options *o, soren_error *err);

#endif /* SOREN_JOB_H */
