/*
 * iterate.h - feeding a job's output back into one of its parameters, for
 * `soren-host run --iterate N` (the manifest's "iterate": {"param": NAME}).
 *
 * Between two runs every output pair (i, v) overwrites element i of the
 * parameter's bytes: the value's size in bytes from byte i x that size (for
 * k-means, the centroids' sums and counts).  Elements no pair names keep
 * their bytes.  A run whose output changes no byte has converged: the next
 * run would read the same parameter and compute the same output.
 *
 * soren__run_iterations is that loop over a run's stages (run.h, or
 * dist_run.h on a rank of a distributed run), and soren__say_iterations
 * tells how it ended.
 */
#ifndef SOREN_ITERATE_H
#define SOREN_ITERATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../base/adapt.h"
#include "../base/result.h"
#include "../base/stage.h"
#include "../error.h"
#include "../io/input.h"
#include "../plugin/loader.h"
#include "../plugin/params.h"
#include "options.h"
#include "plan.h"

/* Writes (write != 0) or only compares (write == 0) every pair of res over
 * the elements of data[0 .. size), the keys (u32, u64 or index) numbering
 * them; *changed says whether any byte differs.  what names the parameter
 * in messages ("kmeans: parameter centroids").  Writing, a key past the end
 * is a SOREN_EJOB error naming the key and the size, with data untouched;
 * comparing, it only counts as a change.  Other key types are SOREN_EJOB
 * errors. */
soren_status soren_iterate_feed(const soren_result *res, uint8_t *data, uint64_t size,
                                const char *what, int write, int *changed, soren_error *err);

/* Runs the stages once or, with --iterate N, up to N times: after each run
 * its output is written over the elements of the plan's iterate_param for the
 * next, and after the last only compared with them, so that a run that
 * changes no byte is known to have converged (and ends the loop early).
 * The last run's result is left in res, its reports in xs.  In a
 * distributed run res is this rank's share; with --iterate the whole result
 * is gathered on every rank into whole (which feeds the parameter, the same
 * bytes everywhere, so every rank decides alike) and left there. */
soren_status soren__run_iterations(const soren_run_plan *plan, soren_device where,
                                   const soren_input *inputs, size_t input_count,
                                   soren_param_set *params, const soren_run_options *o,
                                   soren_result *res,
                                   soren_result *whole, soren_explain *xs, char (*rules)[256],
                                   soren_rank_stage *stats, soren_iterations *it,
                                   soren_error *err);

/* Says how an iteration of job ended (param: the parameter it fed). */
void soren__say_iterations(FILE *to, const char *job, const char *param,
                           const soren_iterations *it);

#endif /* SOREN_ITERATE_H */
