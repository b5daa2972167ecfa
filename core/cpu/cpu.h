/*
 * cpu.h - the CPU engine.
 *
 * Runs a stage with worker threads over the plugin's host functions.  Each
 * thread takes chunks of records (a chunk owns the records that start in it),
 * emits into its own open-addressing table that applies the combine as pairs
 * arrive, then the tables are merged by key partition (thread t merges
 * partition t of every table), reduced, and concatenated.  Map-only stages
 * append pairs to per-thread lists instead.  The result is unordered; the
 * caller orders it (soren_result_order).
 *
 * Its output, once ordered, is the reference every GPU variant must equal.
 */
#ifndef SOREN_CPU_H
#define SOREN_CPU_H

#include "../engine/result.h"
#include "../engine/stage.h"
#include "../error.h"
#include "../io/input.h"

typedef struct soren_cpu_options {
    unsigned threads;     /* 0: soren_cpu_count() */
    uint64_t chunk_bytes; /* 0: the default (1 MiB) */
} soren_cpu_options;

/* Runs spec over every input (records never span inputs) and appends the
 * stage's pairs to *out (initialised by the caller with soren_result_init). */
soren_status soren_cpu_run(const soren_stage_spec *spec, const soren_input *inputs,
                           size_t input_count, const soren_params *params,
                           const soren_cpu_options *opt, soren_result *out, soren_error *err);

/* Number of CPUs this process may run on: online and in its affinity mask
 * (at least 1). */
unsigned soren_cpu_count(void);

#endif /* SOREN_CPU_H */
