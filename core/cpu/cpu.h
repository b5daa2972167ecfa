/*
 * cpu.h - the CPU engine.
 *
 * Runs a stage with worker threads over the plugin's host functions.  Each
 * thread takes chunks of records (a chunk owns the records that start in it),
 * emits into its own open-addressing table that applies the combine as pairs
 * arrive, then the tables are merged by key partition (thread t merges
 * partition t of every table), reduced, and concatenated.  Map-only stages
 * append pairs to per-thread lists instead; index keys that fit
 * (soren_cpu_dense) fold into per-thread arrays of key.count accumulators,
 * merged by key range.  The result is unordered; the
 * caller orders it (soren_result_order).
 *
 * Its output, once ordered, is the reference every GPU variant must equal.
 */
#ifndef SOREN_CPU_H
#define SOREN_CPU_H

#include "../base/adapt.h"
#include "../base/progress.h"
#include "../base/result.h"
#include "../base/stage.h"
#include "../error.h"
#include "../io/input.h"

typedef struct soren_cpu_options {
    unsigned threads;     /* 0: soren_cpu_count() */
    uint64_t chunk_bytes; /* 0: the default (1 MiB) */
    /* The map tables' first size.  They grow (doubling) as they fill, so
     * these change how often they grow, never the result. */
    uint64_t distinct_keys; /* projected distinct keys of the stage (0: unknown);
                               each thread's table starts with room for its share */
    uint64_t table_slots;   /* forced first slots per table (--table-slots), rounded up
                               to a power of two from 8 to 2^20; 0: from distinct_keys */
    /* Where to report the phase times (map, merge, reduce) and every growth
     * of a map table (region "table", old and new slots); NULL: nowhere. */
    soren_explain *explain;
    /* Where to report the phases (map with its bytes, merge, reduce) and the
     * bytes of every chunk mapped; NULL: nowhere. */
    soren_progress *progress;
    /* The inputs are pairs already mapped (SOREN_INPUT_PAIRS records, each
     * its key bytes then its value): fold them with the stage's combine
     * (partial values merged, as the merge of two threads' tables merges
     * them), or group them for its reduce, instead of calling map.  How a
     * rank of a distributed run folds the pairs the others sent it. */
    int fold;
    /* Index keys through the tables even where soren_cpu_dense would take
     * the per-thread arrays (the same bytes either way; tests compare). */
    int hash_only;
} soren_cpu_options;

/* Runs spec over every input (records never span inputs) and appends the
 * stage's pairs to *out (initialised by the caller with soren_result_init). */
soren_status soren_cpu_run(const soren_stage_spec *spec, const soren_input *inputs,
                           size_t input_count, const soren_params *params,
                           const soren_cpu_options *opt, soren_result *out, soren_error *err);

/* 1 if soren_cpu_run folds spec's keys into per-thread arrays (dense)
 * rather than its tables: index keys under a known key.count, a combine,
 * and key.count accumulators of every one of threads threads (0: every
 * CPU) within the engine's memory cap for them (64 MiB). */
int soren_cpu_dense(const soren_stage_spec *spec, unsigned threads);

/* Initial monitoring on the CPU: maps an evenly spread sample of the
 * records (soren_sample_size of them at fraction, record
 * soren__sample_record(i, n, total) for i < n, the GPU's sample of the same
 * input) without storing pairs, with threads threads (0: every CPU), and
 * fills *m: totals, the sample's records and bytes, pairs, key footprints as
 * the key space stores them, value bytes and a distinct-key estimate.  A key
 * that breaks the manifest fails it with the CPU engine's words; a run
 * cancelled through progress (NULL: none) stops before its next chunk. */
soren_status soren_cpu_monitor(const soren_stage_spec *spec, const soren_input *inputs,
                               size_t input_count, const soren_params *params, double fraction,
                               unsigned threads, soren_progress *progress, soren_metrics *m,
                               soren_error *err);

/* Number of CPUs this process may run on: online and in its affinity mask
 * (at least 1). */
unsigned soren_cpu_count(void);

#endif /* SOREN_CPU_H */
