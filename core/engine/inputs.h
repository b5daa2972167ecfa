/*
 * inputs.h - what stage 1 of a run reads: soren-host's INPUT files (or the
 * descriptors a resident host's client opened), or standard input read
 * whole; the inputs checked against the plan's record format, or an index
 * job's tasks.
 */
#ifndef SOREN_ENGINE_INPUTS_H
#define SOREN_ENGINE_INPUTS_H

#include <stddef.h>

#include "../base/stage.h"
#include "../error.h"
#include "../io/input.h"
#include "options.h"
#include "plan.h"

/* The CLI's inputs: the INPUT files, or standard input when none is given
 * (an index job takes none), laid end to end.  *count is how many were
 * opened. */
soren_status soren__open_cli_inputs(const soren_run_plan *plan, const soren_run_options *o,
                                    soren_input *inputs, size_t *count, char **stdin_data,
                                    soren_error *err);

/* Stage 1's inputs as the engines read them: an index job's tasks (made
 * here, in *tasks), or the data inputs checked against the record format. */
soren_status soren__stage_inputs(const soren_run_plan *plan, const soren_run_options *o,
                                 const soren_input *inputs, size_t input_count,
                                 soren_input *tasks, const soren_input **use, size_t *use_count,
                                 soren_error *err);

#endif /* SOREN_ENGINE_INPUTS_H */
