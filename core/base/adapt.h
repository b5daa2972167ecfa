/*
 * adapt.h - the adaptive engine's decisions, shared by both engines: the
 * variants, initial monitoring's metrics (the Soren paper, section 3.2),
 * the projection of region sizes from them, the rule that picks a variant,
 * and the --explain report.
 *
 * One run: the engine maps a sample of the records without storing pairs
 * (soren_metrics), soren_choose picks the variant, soren_project sizes the
 * regions by linear projection plus headroom, the run records every region
 * it had to grow (soren_explain_overflow) and its phase times, and
 * soren_explain_print writes the whole story as JSON
 * (share/explain.schema.json).
 */
#ifndef SOREN_ADAPT_H
#define SOREN_ADAPT_H

#include <stdint.h>
#include <stdio.h>

#include "../error.h"
#include "shape.h"
#include "stage.h"
#include <soren/engine/sketch.h>

typedef enum soren_variant {
    SOREN_VARIANT_AUTO = 0, /* decide from the metrics and the manifest */
    SOREN_VARIANT_HASH,     /* one global table, combine as pairs arrive */
    SOREN_VARIANT_DIRECT,   /* map-only: pairs appended, no table */
    SOREN_VARIANT_SORT,     /* Mars: emit all, sort by key, group */
    SOREN_VARIANT_BLOCK,    /* few distinct keys: per-block tables */
    SOREN_VARIANT_DENSE     /* index keys: per-block arrays */
} soren_variant;

/* "auto", "hash", "direct", "sort", "block", "dense". */
const char *soren_variant_name(soren_variant v);
/* Parses a name of soren_variant_name; 0 on success, -1 if unknown. */
int soren_variant_parse(const char *name, soren_variant *out);

/* Defaults of the options that steer monitoring and the choice. */
#define SOREN_SAMPLE_DEFAULT 0.2
/* Monitoring maps at most this many input bytes, so that it stays a small
 * part of the run whatever the input's size. */
#define SOREN_SAMPLE_BYTES_MAX (32ull << 20)
#define SOREN_SMALL_KEYS_DEFAULT 1000
/* The most index keys the GPU's dense variant numbers: it refers to key i
 * by the 32-bit ref 1 + 2i (4-byte units of its key space), which must not
 * wrap.  More keys run hash or block. */
#define SOREN_DENSE_KEYS_MAX (UINT64_C(1) << 31)

/* What map emitted over the sample. */
typedef struct soren_metrics {
    int ran;                  /* 0: monitoring was skipped (--sample 0) */
    double fraction;          /* --sample as given */
    uint64_t total_records, total_bytes;
    uint64_t sampled_records, sampled_bytes;
    uint64_t pairs, key_bytes, value_bytes;
    uint64_t distinct_keys;   /* HyperLogLog estimate over the sample */
    /* the same over a sample half as large (the GPU engine's monitoring;
     * 0: not measured): how fast distinct keys grow with the records */
    uint64_t half_distinct_keys;
} soren_metrics;

/* How many records monitoring maps: fraction of them, fewer where their
 * bytes (at the input's mean record size) would pass SOREN_SAMPLE_BYTES_MAX;
 * at least one of a non-empty input, 0 when fraction is 0. */
uint64_t soren_sample_size(uint64_t total_records, uint64_t total_bytes, double fraction);

/* Sample record i of n is record soren__sample_record(i, n, total) (in
 * soren/engine/sketch.h): spread evenly over the input. */

/* The distinct-key estimate of SOREN_SKETCH_REGISTERS registers. */
uint64_t soren_sketch_estimate(const uint8_t *registers);

/* Region sizes for the whole input. */
typedef struct soren_projection {
    uint64_t pairs;         /* projected pairs (linear in records) */
    uint64_t distinct_keys; /* projected distinct keys (at most the pairs) */
    uint64_t key_bytes;     /* projected bytes of distinct keys as stored */
    uint64_t table_slots;   /* hash table slots: a power of two, load <= 1/2 */
    uint64_t key_space;     /* key space bytes, with headroom */
    uint64_t pair_slots;    /* direct and sort: pairs, with headroom */
} soren_projection;

/* Projects m (which ran) over the whole input, with headroom. */
void soren_project(const soren_stage_spec *spec, const soren_metrics *m, soren_projection *p);

/* Picks the variant for spec from the manifest and m; returns the rule that
 * decided, as a sentence for --explain and --verbose.  on_gpu: the CPU
 * engine has no block or dense variant (it reports hash for them). */
const char *soren_choose(const soren_stage_spec *spec, const soren_metrics *m,
                         uint64_t small_keys, int on_gpu, soren_variant *out);

/* Whether a run that names no GPUs spreads over several of its host's
 * (--devices): what the choice knows. */
typedef struct soren_spread_case {
    int gpus;       /* GPUs this process can use */
    int started;    /* 1: their CUDA contexts are up already (a resident host's) */
    int busy;       /* 1: another job runs on them */
    uint64_t bytes; /* the run's input; 0: not known */
    uint64_t pairs; /* the first stage's pairs expected (soren_expected_pairs) */
} soren_spread_case;

#define SOREN_PAIRS_UNKNOWN UINT64_MAX

/* The first stage's pairs expected over bytes of input from the job's last
 * run, which left last_pairs from last_bytes (0: none yet, and the result
 * SOREN_PAIRS_UNKNOWN): as many, or more in proportion for a larger input
 * (keys grow more slowly than that, so the guess errs towards one GPU). */
uint64_t soren_expected_pairs(uint64_t bytes, uint64_t last_bytes, uint64_t last_pairs);

/* How many GPUs such a run spreads over (*count, 1 or more) and the rule
 * that decided, as a sentence for --explain and --verbose. */
const char *soren_choose_devices(const soren_spread_case *c, int *count);

typedef struct soren_overflow {
    const char *region; /* "table", "keys", "pairs" (static strings) */
    uint64_t old_size, new_size;
} soren_overflow;

/* Milliseconds per phase. */
typedef struct soren_phase_times {
    double monitor, upload, split, map, merge, reduce, sort, download;
} soren_phase_times;

/* How stage 1's input was cut to fit a device memory budget (job.c). */
typedef struct soren_chunking {
    uint64_t budget;      /* bytes of device memory the run may take */
    uint64_t chunk_bytes; /* the bytes of input taken in one piece */
    uint64_t count;       /* chunks made; 0: the input was not cut */
    uint64_t largest;     /* bytes of the largest (over chunk_bytes where a record is) */
    /* GPU: from the first chunk's upload to the last one's map, each chunk
     * going up while the map reads the one before (0 on the CPU engine) */
    double inputs_ms;
} soren_chunking;

/* --device both: how stage 1's pieces were shared (zero otherwise). */
typedef struct soren_sharing {
    uint64_t pieces, cpu_pieces;   /* the input's pieces, and those the CPU engine took */
    unsigned cpu_threads;          /* the CPU engine's threads beside the GPU */
    uint64_t gpu_bytes, cpu_bytes; /* input each engine mapped */
    double gpu_ms, cpu_ms;         /* their times: the GPU's phases, the CPU's wall */
    const char *fold;              /* where both engines' pairs were folded: "gpu",
                                      "cpu", or NULL: none (the GPU's result stood) */
    double fold_ms;
} soren_sharing;

typedef struct soren_explain {
    const char *job;
    const char *device; /* "gpu" or "cpu" */
    soren_metrics metrics;
    soren_projection projection;
    soren_variant variant;
    const char *rule;   /* static string from soren_choose, or "--engine NAME" */
    uint64_t block_slots; /* GPU hash and block: entries of each thread block's table */
    /* GPU: the map's launch shape in the run's last input, and the
     * session's search for it as it stands (shape.h; no candidates: not
     * reported). */
    soren_shape shape;
    soren_shape_search shape_search;
    /* GPU: the parts of the key space the table folded, a pass over the
     * input each (1: every key at once; more under a device memory budget
     * the table would outgrow, soren_gpu_options), and the passes that
     * began again on half their part; the engine merges the parts' ordered
     * pairs into the result. */
    uint64_t key_parts, narrowings;
    /* GPU: the times the host waited for the device in the stage's last
     * run (a re-run's overhead is mostly waits); 0 on the CPU engine. */
    uint64_t waits;
    soren_overflow *overflows; /* owned */
    size_t overflow_count, overflow_cap;
    soren_phase_times ms;
    uint64_t pairs;        /* the stage's output; a rank's share after its fold */
    soren_chunking chunks; /* stage 1 only */
    soren_sharing sharing; /* stage 1 only */
    /* stage 1 only: the GPUs the run spread over, and why (soren_choose_devices,
     * or --devices); NULL: not reported */
    int devices;
    const char *devices_rule;
} soren_explain;

/* Records that region grew from old_size to new_size (ENOMEM on failure). */
soren_status soren_explain_overflow(soren_explain *x, const char *region, uint64_t old_size,
                                    uint64_t new_size, soren_error *err);
void soren_explain_destroy(soren_explain *x);
/* How a run with --iterate N ended. */
typedef struct soren_iterations {
    uint64_t runs;  /* the runs made, 1 .. limit */
    uint64_t limit; /* N */
    int converged;  /* the last run's output changed no byte of the parameter */
    uint64_t device_runs; /* the runs that looped on the GPU, the host waiting once a batch */
} soren_iterations;

/* One rank's part in one stage of a distributed run (engine/dist.h), for
 * --explain and --verbose.  Plain numbers, so rank 0 can gather them. */
typedef struct soren_rank_stage {
    uint32_t gpu;        /* 1: its GPU engine ran the map; 0: its CPU engine */
    uint32_t shuffled;   /* 1: the stage's pairs went to their keys' ranks */
    uint32_t fold_gpu;   /* 1: its GPU folded what it received; 0: its CPU engine */
    uint32_t folded_whole; /* 1: every rank sent rank 0 its pairs, and rank 0 folded the
                              whole result */
    uint64_t begin, end; /* what it mapped: units (bytes, tasks) of the inputs laid end to
                            end in stage 1, pair numbers in later stages */
    uint64_t mapped;     /* pairs its map left (combined where the stage combines) */
    uint64_t sent_bytes; /* bytes of pairs it sent to other ranks */
    uint64_t received;   /* pairs it received, its own included */
    uint64_t pairs;      /* its share of the stage's output */
    double ms_map, ms_exchange, ms_fold;
} soren_rank_stage;

typedef struct soren_distributed {
    int ranks;
    const soren_rank_stage *stages; /* stage s of rank r at [s * ranks + r] */
} soren_distributed;

/* Writes x as one JSON object and a newline. */
void soren_explain_print(const soren_explain *x, FILE *f);
/* The same for a job of n stages: the object describes stage 1 (xs[0]) as
 * soren_explain_print does, and, when n > 1, "stages" lists stages 2 .. n
 * ({"stage": N, variant, rule, metrics, projection, overflows, times_ms}).
 * xs are the last run's; it (NULL without --iterate) adds "iterations"
 * ({runs, limit, converged}).  d (NULL but in a distributed run) adds
 * "distributed": xs then describe rank 0's share, and d every rank's. */
void soren_explain_print_stages(const soren_explain *xs, size_t n, const soren_iterations *it,
                                const soren_distributed *d, FILE *f);

#endif /* SOREN_ADAPT_H */
