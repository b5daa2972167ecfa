/*
 * both.h - co-processing (--device both, the Mars paper, section 4.4):
 * stage 1 mapped by the GPU and the CPU engine at once, each on pieces of
 * the input (chunks.h cuts them) in proportion to the rates they showed on
 * a first piece each, their pairs folded on the CPU engine.  The later
 * stages run on the GPU alone.
 */
#ifndef SOREN_ENGINE_BOTH_H
#define SOREN_ENGINE_BOTH_H

#include <stddef.h>

#include "../base/adapt.h"
#include "../base/result.h"
#include "../base/stage.h"
#include "../error.h"
#include "../io/input.h"
#include "../plugin/params.h"
#include "options.h"

/* Stage 1 on both engines: a probe piece each, at once, measures their
 * rates; the other pieces go to them in proportion, the GPU's first; the
 * CPU engine folds both engines' pairs (as a rank of a distributed run
 * folds what it received), reduces and orders. */
soren_status soren__run_both(const soren_stage_spec *spec, const soren_input *inputs,
                             size_t input_count, const soren_params *params,
                             const soren_run_options *o, soren_gpu_session **session,
                             soren_result *res, soren_explain *x, soren_error *err);

#endif /* SOREN_ENGINE_BOTH_H */
