/*
 * inputs.h - what stage 1 of a run reads: soren-host's INPUT files (or the
 * descriptors a resident host's client opened), or standard input read
 * whole; the inputs checked against the manifest's record format, or an
 * index job's tasks; and the counts that parameters give (input.count_from,
 * key.count_from), refused with the option to give where they are missing,
 * 0 or too large.
 */
#ifndef SOREN_ENGINE_INPUTS_H
#define SOREN_ENGINE_INPUTS_H

#include <stddef.h>

#include "../base/stage.h"
#include "../error.h"
#include "../io/input.h"
#include "../plugin/manifest.h"
#include "../plugin/params.h"
#include "options.h"

/* Sets the key count of every stage whose index keys are counted by
 * parameters (soren_stage_spec_init_at leaves it 0, which no key is under). */
soren_status soren__stage_key_counts(const soren_manifest *m, soren_stage_spec *specs,
                                     size_t stages, const soren_params *params, soren_error *err);

/* The CLI's inputs: the INPUT files, or standard input when none is given
 * (an index job takes none), laid end to end.  *count is how many were
 * opened. */
soren_status soren__open_cli_inputs(const soren_manifest *m, const soren_run_options *o,
                                    soren_input *inputs, size_t *count, char **stdin_data,
                                    soren_error *err);

/* Stage 1's inputs as the engines read them: an index job's tasks (made
 * here, in *tasks), or the data inputs checked against the record format. */
soren_status soren__stage_inputs(const soren_manifest *m, const soren_stage_spec *spec,
                                 const soren_run_options *o, const soren_params *params,
                                 const soren_input *inputs, size_t input_count,
                                 soren_input *tasks, const soren_input **use, size_t *use_count,
                                 soren_error *err);

#endif /* SOREN_ENGINE_INPUTS_H */
