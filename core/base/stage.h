/*
 * stage.h - one stage of a job, as the engines run it.
 *
 * The host builds a soren_stage_spec from the manifest and the plugin's table
 * once they have been checked to agree (see plugin/loader.h); engines read
 * nothing else.  Types and sizes come from the manifest, functions from the
 * plugin.
 */
#ifndef SOREN_STAGE_H
#define SOREN_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "../plugin/manifest.h"
#include <soren/soren.h>

typedef struct soren_stage_spec {
    const char *job_name;
    const soren_stage *code; /* the plugin's functions (host entry points) */

    soren_input_format input_format;
    uint64_t record_size; /* SOREN_INPUT_FIXED */
    uint64_t task_count;  /* SOREN_INPUT_INDEX */

    soren_type key_type;
    uint32_t key_max_size; /* largest key in bytes (the type's size for typed keys) */
    /* SOREN_TYPE_INDEX: keys are 0 .. key_count-1; key.count, or 0 where
     * key.count_from counts them: the run sets it from the parameters */
    uint64_t key_count;

    soren_type value_type;
    size_t value_size;

    soren_combine_op combine; /* NONE for map-only, or reduce-without-combine */
    soren_reduce_kind reduce;

    soren_order order;
    uint64_t limit; /* 0: all pairs */

    /* bit i: parameter i is scratch memory (SOREN_PARAM_SCRATCH), which an
     * engine gives the map zeroed instead of copying the host's bytes */
    uint32_t scratch_params;
} soren_stage_spec;

/* Fills spec from a manifest and the stage the plugin compiled (already
 * checked to agree): stage 1 of the job. */
void soren_stage_spec_init(soren_stage_spec *spec, const soren_manifest *m,
                           const soren_stage *code);

/* The same for stage index (0-based) of a job of soren_manifest_stages(m)
 * stages.  Stages after the first read pairs; stages before the last pass
 * on all their pairs ordered by key (so the pair numbers the next stage's
 * map sees do not depend on the schedule); the last one is ordered and cut
 * as $.output says. */
void soren_stage_spec_init_at(soren_stage_spec *spec, const soren_manifest *m,
                              const soren_stage *code, size_t index);

#endif /* SOREN_STAGE_H */
