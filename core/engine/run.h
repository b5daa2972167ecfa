/*
 * run.h - one stage on one engine, and the stages of a run in order.
 *
 * The GPU engine runs a stage once, or as a run of a GPU session that a
 * library job (or --iterate) keeps per stage; the CPU engine monitors a
 * sample, picks its variant, runs and orders.  Either fills the stage's
 * soren_explain and leaves the result in the stage's order.  The fold (a
 * key's values gathered from several pairs into one) serves the ranks of
 * a distributed run and --device both; what runs before a fold is the
 * stage without its reduce function and order (soren__local_spec).
 */
#ifndef SOREN_ENGINE_RUN_H
#define SOREN_ENGINE_RUN_H

#include <stddef.h>

#include "../base/adapt.h"
#include "../base/result.h"
#include "../base/stage.h"
#include "../error.h"
#include "../io/input.h"
#include "../plugin/loader.h"
#include "../plugin/params.h"
#include "options.h"
#include "plan.h"

/* Milliseconds of a monotonic clock. */
double soren__now_ms(void);

/* Folds the pairs a rank received with the stage's combine and reduces its
 * keys, then orders them as the stage says: by key before a later stage,
 * which numbers them.  A rank whose map of stage index ran on the GPU
 * (where) folds there, in that stage's fold session where o keeps sessions,
 * if the stage's device code can (soren_gpu_folds_pairs) and the pairs are
 * many enough to gain (*on_gpu says so); else the CPU engine folds. */
soren_status soren__fold_received(const soren_stage_spec *spec, size_t index,
                                  soren_device where, const soren_input *received,
                                  const soren_params *params, const soren_run_options *o,
                                  soren_result *res, int *on_gpu, soren_error *err);

/* A stage on the GPU: one run, or a run of the session in *session (the
 * library's jobs keep one per stage), made anew where the stage or the
 * options changed.  claim (NULL: every input) hands the inputs out as the
 * run goes, and needs a session. */
soren_status soren__run_gpu(const soren_stage_spec *spec, const soren_input *inputs,
                            size_t input_count, const soren_params *params,
                            const soren_run_options *o, soren_gpu_session **session,
                            const soren_gpu_claim *claim, soren_result *res, soren_explain *x,
                            soren_error *err);

soren_status soren__run_cpu(const soren_stage_spec *spec, const soren_input *inputs,
                            size_t input_count, const soren_params *params,
                            const soren_run_options *o, soren_result *res, soren_explain *x,
                            char *rule_buf, size_t rule_size, soren_error *err);

/* One stage on the chosen device, its result left in res (initialised
 * here) in the stage's order; under --device both, stage 1 on the GPU and
 * the CPU engine together, the later stages on the GPU. */
soren_status soren__run_stage(const soren_stage_spec *spec, size_t index, soren_device where,
                              const soren_input *inputs, size_t input_count,
                              const soren_params *params, const soren_run_options *o,
                              soren_result *res, soren_explain *x, char *rule, size_t rule_size,
                              soren_error *err);

/* Runs every stage: stage 1 over the inputs, each later stage over the
 * pairs of the one before (packed by soren_input_pairs, its result freed
 * as soon as they are).  The last stage's result is left in res. */
soren_status soren__run_stages(const soren_run_plan *plan, soren_device where,
                               const soren_input *inputs, size_t input_count,
                               const soren_params *params, const soren_run_options *o,
                               soren_result *res, soren_explain *xs,
                               char (*rules)[256], soren_error *err);

/* A stage's pairs go to their keys' ranks where some key needs all its
 * values in one place: to combine them, or to reduce them. */
int soren__stage_shuffles(const soren_stage_spec *s);

/* What a rank runs over its share: the stage without its reduce function
 * (which needs every value of a key) and without an order (the fold after
 * the shuffle orders), or a map-only stage as it is. */
soren_stage_spec soren__local_spec(const soren_stage_spec *s);

#endif /* SOREN_ENGINE_RUN_H */
