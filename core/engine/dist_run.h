/*
 * dist_run.h - one rank's part of a distributed run (dist.h says how the
 * ranks share the work): its stages over its slice, each shuffled and
 * folded where a key needs all its values in one place; the whole result
 * gathered where it is written whole; --output-parts' file names and what
 * it refuses; and the ranks' figures gathered for rank 0's report.
 */
#ifndef SOREN_ENGINE_DIST_RUN_H
#define SOREN_ENGINE_DIST_RUN_H

#include <stddef.h>

#include "../base/adapt.h"
#include "../base/result.h"
#include "../base/stage.h"
#include "../error.h"
#include "../io/input.h"
#include "../plugin/loader.h"
#include "../plugin/manifest.h"
#include "../plugin/params.h"
#include "options.h"
#include "plan.h"

/* soren__run_stages for one rank of a distributed run: each later stage maps this
 * rank's pairs of the stage before, numbered after those of the ranks
 * before it.  Its share of the last stage's output is left in res: where
 * the last stage's stats say folded_whole, the whole output on rank 0 and
 * nothing on the others. */
soren_status soren__run_stages_dist(const soren_run_plan *plan, soren_device where,
                                    const soren_input *inputs, size_t input_count,
                                    const soren_params *params, const soren_run_options *o,
                                    soren_result *res, soren_explain *xs, char (*rules)[256],
                                    soren_rank_stage *stats, soren_error *err);

/* The whole result from every rank's share: on rank 0, or on every rank
 * with to_all, in the last stage's order. */
soren_status soren__gather_whole(const soren_run_options *o, const soren_stage_spec *last,
                                 const soren_result *share, int to_all, soren_result *whole,
                                 soren_error *err);

/* After a distributed run: rank 0 reports every rank's part (--verbose,
 * --explain); every rank takes part in gathering the numbers. */
soren_status soren__report_ranks(const soren_run_options *o, const soren_rank_stage *stats,
                                 size_t stages, soren_rank_stage **all, soren_error *err);

/* OUTPUT.part-R-of-N, R with as many digits as N - 1 so that the parts
 * list in rank order (malloc'd; NULL when out of memory). */
char *soren__part_path(const char *output, int rank, int ranks);

/* --output-parts needs a file name to add to, and no limit: a limit cuts
 * the whole result, which no rank holds. */
soren_status soren__check_parts(const char *job, const soren_stage_spec *last,
                                const soren_run_options *o, soren_error *err);

#endif /* SOREN_ENGINE_DIST_RUN_H */
