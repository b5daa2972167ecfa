/*
 * engine.h - the GPU engine's host side.
 *
 * The host owns every device allocation and the stream; the plugin's
 * launchers (soren_gpu_stage) only run kernels over memory handed to them.
 * One run:
 *   1. copy each input to the device through pinned staging buffers;
 *   2. split `lines` input into records on the device (a parallel scan for
 *      line starts, not a CPU loop);
 *   3. on the first input, initial monitoring: map a sample of the records
 *      storing nothing, counting pairs and key bytes and sketching the keys;
 *      choose the variant (adapt.h) unless forced, and size the regions by
 *      projection (or from the options, as initial sizes);
 *   4. map with the variant:
 *        hash    one global table collocates each key's values as they are
 *                emitted, combining them at once (the Soren paper's default);
 *        block   the same through per-block tables in shared memory;
 *        dense   index keys: per-block arrays, the key is the slot;
 *        direct  every pair appended at an atomically claimed index;
 *        sort    the Mars design: count pass, prefix sum, write pass;
 *      a region that runs out is grown, keeping its content, and the launch
 *      resumes where each thread stopped (soren/engine/map.cuh);
 *   5. merge into a compact list: the table's used slots (hash, block,
 *      dense), or the pairs sorted by key and combined run by run (direct,
 *      sort);
 *   6. order the list as the stage says with CUB sorts (radix for typed keys
 *      and values, merge sort for byte-string keys), keep the limit;
 *   7. pack keys and values and copy them back into a soren_result.
 * Its result, already ordered, equals the CPU engine's byte for byte (float
 * sums up to the order of additions).
 */
#ifndef SOREN_GPU_ENGINE_H
#define SOREN_GPU_ENGINE_H

#include <stdint.h>

#include "../base/adapt.h"
#include "../base/progress.h"
#include "../base/result.h"
#include "../base/stage.h"
#include "../error.h"
#include "../io/input.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SOREN_GPU_NO_BLOCK_TABLE UINT64_MAX

typedef struct soren_gpu_options {
    soren_variant variant;   /* SOREN_VARIANT_AUTO: chosen after monitoring */
    double sample;           /* fraction of records monitoring maps (0: none) */
    uint64_t small_keys;     /* auto picks block under this many distinct keys */
    /* Initial region sizes; 0: projected from the metrics.  Regions that run
     * out grow and the map resumes, so small values only cost overflows. */
    uint64_t table_slots;    /* hash and block: table slots (a power of two) */
    uint64_t key_bytes;      /* key space */
    uint64_t pair_slots;     /* direct and sort: pairs */
    /* Entries of the per-block tables in shared memory (rounded up to a
     * power of two, at most SOREN_GPU_BLOCK_SLOTS): block's, which holds
     * every key it can, and hash's, a cache of the frequent keys; 0:
     * SOREN_GPU_BLOCK_SLOTS; SOREN_GPU_NO_BLOCK_TABLE: none, every pair to
     * the global table (dense: to the global array, where a small one
     * would have an array in each block). */
    uint64_t block_slots;
    /* --device-memory: where growing the hash table and the key space would
     * take them past half of it, the run folds the key space a part at a
     * time instead, a pass over the inputs each, and merges the parts'
     * ordered pairs into the result (soren_explain.key_parts says how
     * many).  0: they grow until the device is full. */
    uint64_t device_memory;
    soren_progress *progress; /* where the run reports its phases and uploaded bytes (or NULL) */
    int device;              /* the CUDA device to run on (a rank's: its local rank's) */
    /* A pairs input whose records are emitted as they are instead of
     * mapped: the fold of the pairs a distributed run's ranks sent each
     * other, with the hash variant (soren_gpu_folds_pairs says which stages
     * can). */
    int fold_pairs;
    /* The next stage maps this stage's pairs on the same GPU: a session's
     * run leaves a result of pairs on the device, packed as that stage's
     * input (soren_gpu_session_pairs_input), instead of copying it back. */
    int leave_result;
} soren_gpu_options;

/* The copy threads that stage a large input on its way to the GPU: one a
 * CPU, at most COPY_THREADS_MAX (run.h). */
unsigned soren_gpu_copy_threads(void);

/* A stage set up on the GPU for runs again and again (the library's
 * soren_job_run): the first run monitors, chooses the variant and sizes the
 * regions; later runs reuse the variant, the regions as they grew, the
 * stream, the staging buffers and every device block, so that a run of the
 * same shape allocates nothing.  The last run's result stays packed on the
 * device until the next run. */
typedef struct soren_gpu_session soren_gpu_session;

/* A run's inputs handed out as it goes (--device both, where the CPU
 * engine takes inputs from the other end): before the run opens input i
 * (i >= 1) it asks take(ctx, i), and on the first no it ends with the
 * inputs before i, which later passes of the run map again without
 * asking.  take may be asked again for an input it gave. */
typedef struct soren_gpu_claim {
    int (*take)(void *ctx, size_t i);
    void *ctx;
} soren_gpu_claim;

soren_status soren_gpu_session_new(const soren_stage_spec *spec, const soren_gpu_options *opt,
                                   soren_gpu_session **out, soren_error *err);
/* 1 if the session was made for this stage and these options (a key count
 * from the parameters, a forced variant or an order that changed need a
 * new one), no run of it failed and its job did not end. */
int soren_gpu_session_fits(const soren_gpu_session *s, const soren_stage_spec *spec,
                           const soren_gpu_options *opt);
/* Makes *s a session for spec and opt, as soren_gpu_session_new does (*s
 * NULL: a new one): its next run is a first run, which monitors, chooses
 * and sizes afresh, but on the stream, events, pinned buffers and device
 * blocks *s holds, which a new session would take milliseconds to get.  A
 * failed session, or one on another device, is freed and made anew. */
soren_status soren_gpu_session_renew(soren_gpu_session **s, const soren_stage_spec *spec,
                                     const soren_gpu_options *opt, soren_error *err);
/* The session's job ended (a resident host hands its sessions to another
 * job): soren_gpu_session_fits refuses it from now on, so that the next
 * job renews it. */
void soren_gpu_session_forget(soren_gpu_session *s);
/* One run; inputs may be host memory or, on_device, the caller's device
 * memory (16-byte aligned), read where it is.  The result is copied into
 * out (initialised by the caller) and kept on the device.  A parameter
 * whose version (param_versions, 0: unknown; NULL: none known) is the one
 * the session last uploaded is not uploaded again.  claim NULL: every
 * input is the run's. */
soren_status soren_gpu_session_run(soren_gpu_session *s, const soren_input *inputs,
                                   size_t input_count, const soren_params *params,
                                   const uint64_t *param_versions,
                                   soren_progress *progress, const soren_gpu_claim *claim,
                                   soren_result *out, soren_explain *x, soren_error *err);
/* Points out's count and arrays at the last run's pairs in device memory
 * (soren_pairs: the layout of a soren_result, device pointers); its sizes
 * and types, the stage's, are the caller's to set. */
void soren_gpu_session_pairs(const soren_gpu_session *s, soren_pairs *out);
/* Whether the session's runs leave their result on the device
 * (soren_gpu_options.leave_result) from its next run on. */
void soren_gpu_session_leave_result(soren_gpu_session *s, int leave);
/* 1, and in the pairs input that the last run left on the device (valid
 * until the session runs again, drops them or is freed: data and
 * device_starts are the session's, in owns nothing); 0 where it left none
 * (its result came back to the host: few keys, none, or a key space
 * folded in parts). */
int soren_gpu_session_pairs_input(const soren_gpu_session *s, soren_input *in);
/* Frees the pairs the last run left on the device, once read. */
void soren_gpu_session_drop_pairs(soren_gpu_session *s);
void soren_gpu_session_free(soren_gpu_session *s);

/* How a loop of runs on the device ended. */
typedef enum soren_gpu_loop_end {
    SOREN_GPU_LOOP_GOING,      /* (within a batch only) */
    SOREN_GPU_LOOP_CONVERGED,  /* the last run's output changed no byte of the parameter */
    SOREN_GPU_LOOP_LIMIT,      /* the runs asked for are made */
    SOREN_GPU_LOOP_HOST,       /* the next run needs the host: its map stopped for room or
                                  met a bad key, or it named an element past the
                                  parameter's end; it is left undone, the parameter as the
                                  run before left it */
    SOREN_GPU_LOOP_UNSUPPORTED /* the device or its driver runs no CUDA graph while nodes:
                                  no run was made */
} soren_gpu_loop_end;

typedef struct soren_gpu_loop {
    uint64_t runs;  /* the runs made and fed */
    uint64_t batches; /* the batches of runs, the host waiting once for each */
    soren_gpu_loop_end end;
} soren_gpu_loop;

/* 1 if the session's next runs over these inputs can loop on the device
 * (soren_gpu_session_loop): a run before this one set it up with a table
 * variant (hash with a combine, block, dense), no reduce function and the
 * whole key space, typed keys that number a parameter's elements (u32,
 * u64, index), and one input that stays on the device from run to run. */
int soren_gpu_session_loops(const soren_gpu_session *s, const soren_input *inputs,
                            size_t input_count);
/* Runs the session up to limit times without the host in the loop: after
 * each run its pairs (i, v) are written over element i of parameter param
 * on the device (soren_iterate_feed's rule), and a run that changes no byte
 * ends the loop; where compare_last, the limit-th run only compares.  The
 * host waits once a batch (about 50 ms of runs), and checks progress for a
 * cancel between batches.  host_param (params->size[param] bytes) gets the
 * parameter as the last fed run left it, out the last fed run's pairs
 * (unless loop->end is SOREN_GPU_LOOP_HOST or UNSUPPORTED), x the
 * session's first choices, the host's waits, and as map the device time of one
 * run (the loop's over its runs). */
soren_status soren_gpu_session_loop(soren_gpu_session *s, const soren_input *inputs,
                                    size_t input_count, const soren_params *params,
                                    uint32_t param, uint8_t *host_param, uint64_t limit,
                                    int compare_last, soren_progress *progress,
                                    soren_result *out, soren_explain *x, soren_gpu_loop *loop,
                                    soren_error *err);

/* Why the GPU engine cannot run this stage (NULL if it can). */
const char *soren_gpu_unsupported(const soren_stage_spec *spec);
/* 1 if the plugin's device code folds pairs of this stage as they are
 * (soren_gpu_options.fold_pairs): a combine, keys other than index keys,
 * and plugin ABI 1.7 or later (1.8 for a count, whose partial counts add). */
int soren_gpu_folds_pairs(const soren_stage_spec *spec);

/* Runs spec on device opt->device over the inputs, leaving the ordered pairs in out
 * (initialised by the caller).  Fills x (zeroed by the caller, which owns
 * it) with the metrics, sizes, variant and rule, overflows and phase times. */
soren_status soren_gpu_run(const soren_stage_spec *spec, const soren_input *inputs,
                           size_t input_count, const soren_params *params,
                           const soren_gpu_options *opt, soren_result *out,
                           soren_explain *x, soren_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SOREN_GPU_ENGINE_H */
