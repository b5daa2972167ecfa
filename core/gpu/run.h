/*
 * run.h - the GPU engine's run, shared by its files (see engine.h for what
 * a run does).  A gpu_run owns every device allocation of a stage's runs
 * and the stream; its parts are handled by:
 *   pool.cu      the device memory pool and the checked CUDA calls;
 *   staging.cu   host inputs on their way up (pinned staging and its copy
 *                threads), the parameters, the record index;
 *   regions.cu   the table, key space and pair space: sizing, growth after
 *                an overflow, the key space folded a part at a time;
 *   launch.cu    monitoring, the variant's choice, the map's launches and
 *                their resumes;
 *   order.cu     merge, group, reduce, order and pack the result, and its
 *                copy to the host;
 *   session.cu   a run's phases, and the public soren_gpu_* entry points;
 *   iterate.cu   a session's runs again and again on the device, each
 *                feeding a parameter for the next;
 *   kernels.cu   the device code those launch (kernels.cuh).
 * Everything here is internal: namespace soren__gpu, hidden from the
 * library's exports.  Each function's contract is in the comment at its
 * definition; what a file alone uses is static there.
 */
#ifndef SOREN_GPU_RUN_H
#define SOREN_GPU_RUN_H

#include <soren/engine/abi.h>

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>

extern "C" {
#include "../cpu/cpu.h"
#include "../cpu/internal.h"
#include "engine.h"
}

#include "kernels.cuh"

namespace soren__gpu {

enum { MARKS = 9 }; /* upload, split, monitor, map, merge, reduce, order, download, end */

/* Host inputs go up through pinned pieces of STAGING_PIECE bytes, copied
 * into by up to COPY_THREADS_MAX threads, two pieces each (input_feed):
 * 64 MiB pinned in all.  Larger pieces copy no faster and take longer to
 * pin.  Registering the mapped file with the driver instead
 * (cudaHostRegister) would pin every page of it, slower than the staging
 * threads copy (bench-staging measures both), and can hang, the host
 * thread spinning with the GPU idle, on a file rewritten in place just
 * before the run. */
enum { STAGING_PIECE = 2 << 20, COPY_THREADS_MAX = 16 };

/* A device block of a session's pool (see dev_alloc). */
struct pool_block {
    void *p;
    uint64_t size;
    bool used;
};

/* The device memory pool and CUB's scratch space (pool.cu).  A session
 * keeps the device blocks a run frees for the next run, so that a run of
 * the same shape allocates nothing; a single run frees them at once. */
struct gpu_pool {
    bool pooled;
    pool_block *blocks;
    size_t count, cap;
    void *temp; /* CUB's scratch space, grown on demand (temp_reserve) */
    size_t temp_size;
};

/* The inputs on the device and their way up, and the job's parameters
 * (staging.cu). */
struct gpu_inputs {
    uint8_t *input;
    uint64_t input_capacity;  /* bytes of input */
    uint64_t *line_starts;
    uint64_t record_capacity; /* records line_starts (and the sort variant's
                                 record arrays) can hold */
    uint64_t *tile_first;     /* split_lines: each tile's first line, kept (a free would
                                 wait for the next input's copies) */
    uint64_t tile_capacity;
    const uint8_t *cur_input; /* this launch's input: input, or the caller's
                                 device memory */
    uint64_t cur_base;        /* its place in the whole (soren_input.base) */

    /* the pinned pieces the input passes through on its way up: copy
     * thread t fills pieces 2t and 2t + 1 in turn; staged[i] is recorded
     * once piece i's copy to the device has been issued */
    uint8_t *pieces;
    cudaEvent_t staged[2 * COPY_THREADS_MAX];
    unsigned copy_threads;

    /* Inputs in chunks (or several host inputs of lines or fixed records)
     * go up through two device buffers, input and input_alt: the next on
     * copy_stream, by the copy threads, while split and map read the
     * other on the run's stream.  uploaded[b] and upload_began[b] bracket
     * buffer b's copy; began marks the run's start, for the chunks'
     * timeline. */
    uint8_t *input_alt;
    uint64_t input_alt_capacity;
    cudaStream_t copy_stream;
    cudaEvent_t upload_began[2], uploaded[2], began;

    /* the job's parameters on the device (params.data points into the
     * blocks) */
    void *param_blocks[SOREN_MAX_PARAMS];
    soren_params params;
    uint64_t param_capacity[SOREN_MAX_PARAMS];
    uint64_t param_version[SOREN_MAX_PARAMS]; /* the version each block holds (0: none) */
};

/* The regions the map fills: the table (or dense array), the key space and
 * the pair space (regions.cu). */
struct gpu_regions {
    uint8_t *keys;
    uint64_t keys_capacity;
    unsigned long long *slots;
    uint8_t *slot_values;
    uint64_t slot_count;
    uint64_t slot_limit;   /* claims allowed before the table counts as full */
    uint32_t dense_shared; /* dense: shared bytes per block (0: arrays in global memory) */
    uint32_t block_slots;  /* hash and block: per-block table entries (0: none) */
    uint8_t *identity;     /* the combine's identity value, for emptied slots */
    uint32_t *pair_keys;
    uint8_t *pair_values;
    uint64_t pair_capacity;
    uint64_t map_pair_capacity; /* the map's pair space, before a reduce's */
    unsigned long long *record_pairs, *record_key_bytes; /* sort: per-record counts */
    /* Under a device memory budget a table that would outgrow it folds the
     * key space a part at a time, one pass over the inputs each: the part
     * now (soren_gpu_map_args.key_first, key_last), and whether its pass
     * stopped because the part's keys did not fit (it begins again on half
     * the part). */
    uint32_t key_first, key_last;
    bool narrowed;
};

/* The map's launches (launch.cu). */
struct gpu_launch {
    /* The last map launch's arguments, for its resumes.  A run in one
     * wait (one_wait) leaves its last launch unread (leave_unread). */
    soren_gpu_map_args args;
    bool leave_unread;
    bool sampled; /* the pass monitored its first input */
    soren_gpu_resume *resume; /* hash, block, direct: where each thread stopped */
    uint64_t max_threads;     /* resume entries: every thread the device can hold */
    unsigned int *sketch;     /* monitor: SOREN_SKETCH_REGISTERS ranks */
    uint64_t sample_count;
    /* The map's launch shape: the session's search for it, the shape of
     * the input under way, and that input's bytes (or tasks), for its
     * time per byte (shape_of_input, shape_timed). */
    soren_shape_search search;
    soren_shape shape;
    uint64_t units;
};

/* The merged list and its order (order.cu). */
struct gpu_list {
    /* reduce: groups of values, each with its key (see soren_gpu_map_args) */
    uint32_t *group_refs;
    uint64_t *group_start;
    uint8_t *group_values;

    /* the merged list: n entries of (key ref, value), in perm order */
    uint32_t *refs;
    uint8_t *values;
    uint32_t *perm, *perm_alt;
    uint64_t *bits, *bits_alt;
    uint64_t n;
    uint64_t last_keys; /* the keys the last run's table held */
};

/* The last run's result packed on the device: keys back to back at
 * offsets, values in order; kept until the next run (order.cu).  Where the
 * run left its result for the next stage (opt->leave_result), the pairs
 * are packed as that stage's input instead: each key followed by its
 * value in keys, offsets their starts (n + 1), values NULL. */
struct gpu_packed {
    uint8_t *keys, *values;
    uint64_t *offsets;
    uint64_t n, key_bytes;
    bool as_pairs;
};

/* Everything the runs of a stage allocated on the device; gpu_run_destroy
 * frees it all.  One soren-host run uses it once; a session (the library's
 * soren_job_run, again and again) keeps it from run to run.  Each part is
 * owned by one file (see the top of this header); the rest is the run's
 * own: the stage, the stream, the counters and the phases' marks. */
struct feed_state; /* iterate.cu */

struct gpu_run {
    const soren_stage_spec *spec;
    const soren_gpu_options *opt;
    const soren_gpu_claim *claim; /* the run under way's, or NULL */
    const soren_gpu_stage *gpu;
    soren_variant variant; /* resolved: never AUTO */
    soren_error *err;
    soren_explain *x;
    const char *phase;
    const char *emitter; /* "map" or "reduce": who emits in the launch under way */
    cudaStream_t stream;
    int grid; /* blocks for the engine's own grid-stride kernels */
    cudaEvent_t mark[MARKS];

    unsigned long long *counters; /* keys_used, pairs_used, status, bad_key, selected */
    /* pinned host memory (see READBACK_BYTES): the counters as the host last
     * read them, the fresh counters a run starts from, a small result, and
     * small parameters on their way up (PARAM_STAGING_BYTES) */
    unsigned long long *host_counters, *fresh_counters;
    uint8_t *readback, *param_staging;
    uint8_t *readback_on_device; /* readback, as the device addresses it */
    bool counters_fresh;         /* the last run left the counters as a run starts them */

    gpu_pool pool;
    gpu_inputs in;
    gpu_regions reg;
    gpu_launch map;
    gpu_list list;
    gpu_packed packed;

    /* the finished parts of the key space's pairs (see gpu_regions) */
    soren_result parts;
    uint64_t *part_ends; /* where each finished part's pairs end in parts */
    size_t part_ends_cap;

    feed_state *loop_state; /* pinned: a loop of runs' batch (iterate.cu) */

    /* What a session's later runs reuse. */
    int runs;                          /* runs completed */
    soren_metrics first_metrics;       /* the first run's sample, sizes and */
    soren_projection first_projection; /* rule (a static string), which */
    const char *first_rule;            /* later runs report */
};

/* A result of up to this many bytes comes back through the run's pinned
 * readback buffer: its copies then run without the host, which waits once.
 * A copy into pageable memory waits for itself, several times a run, and
 * a re-run's time is mostly such waits.  A larger result is copied straight
 * into its arrays, where the copy's own time dwarfs the waits. */
enum { READBACK_BYTES = 1 << 20 };

/* Changed parameters of up to this many bytes in all go up through pinned
 * memory: a copy from pageable memory holds the host up even for a few
 * bytes (a k-means re-run's centroids).  A run ends waiting for the
 * stream, so the next run finds the buffer free. */
enum { PARAM_STAGING_BYTES = 64 << 10 };

/* ---- Checked CUDA calls and device memory (pool.cu) ---------------------- */

soren_status cuda_fail(gpu_run *r, cudaError_t rc, const char *call, const char *file, int line);

#define CUDA_TRY(r, call)                                                                  \
    do {                                                                                   \
        cudaError_t rc_ = (cudaError_t)(call);                                             \
        if (rc_ != cudaSuccess)                                                            \
            return cuda_fail(r, rc_, #call, __FILE__, __LINE__);                           \
    } while (0)

size_t pool_release_free(gpu_run *r, uint64_t larger_than);
soren_status dev_alloc(gpu_run *r, void **p, uint64_t bytes, const char *what);
void dev_free(gpu_run *r, void *p);

/* A session's pinned host buffer: its counters (COUNTER_COUNT, twice), the
 * one-wait result (READBACK_BYTES) and the parameters' staging. */
enum { SESSION_PINNED_BYTES = 2 * COUNTER_COUNT * 8 + READBACK_BYTES + PARAM_STAGING_BYTES };
/* One kept from a session that ended on device, or NULL; and a buffer
 * given back, kept for the next session or unpinned. */
void *pinned_take(int device);
void pinned_give(int device, void *p);

#define ALLOC(r, ptr, bytes, what)                                                         \
    do {                                                                                   \
        soren_status st_ = dev_alloc(r, (void **)&(ptr), (bytes), (what));                 \
        if (st_ != SOREN_OK)                                                               \
            return st_;                                                                    \
    } while (0)

soren_status wait_stream(gpu_run *r);
soren_status wait_mark(gpu_run *r, int i);

#define WAIT_STREAM(r)                                                                     \
    do {                                                                                   \
        soren_status st_ = wait_stream(r);                                                 \
        if (st_ != SOREN_OK)                                                               \
            return st_;                                                                    \
    } while (0)

soren_status temp_reserve(gpu_run *r, size_t bytes);

/* Runs a CUB algorithm twice: once to size its scratch space, once for real. */
#define CUB_RUN(r, fn, ...)                                                                \
    do {                                                                                   \
        size_t need_ = 0;                                                                  \
        CUDA_TRY(r, fn(NULL, need_, __VA_ARGS__, r->stream));                              \
        soren_status st_ = temp_reserve(r, need_);                                         \
        if (st_ != SOREN_OK)                                                               \
            return st_;                                                                    \
        CUDA_TRY(r, fn(r->pool.temp, need_, __VA_ARGS__, r->stream));                      \
    } while (0)

/* The engine's grid-stride launches (kernels.cuh's launch_*): the run's
 * grid on its stream. */
#define GRID(r) (r)->grid, (r)->stream

/* ---- Inputs (staging.cu) ------------------------------------------------- */

/* What stopped an upload: a CUDA call (rc, call), or reading the input's
 * file (read_errno; ENODATA: it ended before its mapped size). */
struct upload_fault {
    cudaError_t rc;
    int read_errno;
    const char *call;
};

/* A pass's host inputs on their way up (staging.cu): copy threads take the
 * pieces of the inputs opened so far in order, each filling its two pinned
 * pieces in turn and queuing their copies; the pass opens an input once
 * its buffer's last reader is done and waits for its copies to be queued.
 * The lock guards everything below it. */
struct input_feed;
struct copy_thread {
    input_feed *f;
    unsigned t;
};
struct input_feed {
    gpu_run *r;
    const soren_input *inputs;
    size_t count;
    bool piped; /* input k into buffer k % 2 on copy_stream, else into input on the run's stream */
    soren_progress *progress; /* counts each piece (not piped: the pass counts whole inputs) */
    copy_thread threads[COPY_THREADS_MAX];
    pthread_t thread_ids[COPY_THREADS_MAX];
    unsigned started;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    size_t opened;          /* inputs 0 .. opened - 1 may be read */
    size_t next_input;      /* the next piece handed out: next_input's bytes at next_offset */
    uint64_t next_offset;
    int fd[2];              /* the open inputs' files (soren_input_reopen) by buffer, or -1 */
    uint64_t issued[2];     /* bytes of the input in each buffer whose copies are queued */
    uint8_t turn[COPY_THREADS_MAX]; /* which of thread t's pieces it fills next */
    bool stop;              /* a fault, or feed_stop */
    size_t fault_input;
    upload_fault fault;
};

soren_status upload_params(gpu_run *r, const soren_params *host, const uint64_t *versions);
soren_status alloc_staging(gpu_run *r, uint64_t largest);
soren_status upload_input(gpu_run *r, const soren_input *in);
bool pipelined(const soren_stage_spec *s, const soren_input *inputs, size_t n);
soren_status pipeline_setup(gpu_run *r);
void feed_start(gpu_run *r, input_feed *f, const soren_input *inputs, size_t count, bool piped);
void feed_open(input_feed *f, size_t k);
soren_status feed_wait(input_feed *f, size_t k);
void feed_stop(input_feed *f);
soren_status upload_next(gpu_run *r, input_feed *f, size_t i, bool more);
soren_status session_inputs(gpu_run *r, uint64_t largest, uint64_t records);
soren_status split_lines(gpu_run *r, uint64_t size, uint64_t *count);

/* ---- Regions (regions.cu) ------------------------------------------------ */

/* The whole key space, as soren_gpu_map_args.key_first and key_last. */
const uint32_t KEY_LAST = 0xffffffffu;

soren_status allocate_regions(gpu_run *r);
soren_status grow_keys(gpu_run *r, uint64_t used, uint64_t need);
soren_status grow_pairs(gpu_run *r, uint64_t used, uint64_t need);
cudaError_t restart_counters(gpu_run *r, uint64_t keys_used, uint64_t pairs_used);
soren_status grow_after_overflow(gpu_run *r, const unsigned long long *c);
bool whole_key_space(const gpu_run *r);
bool narrowing_due(const gpu_run *r, const unsigned long long *c);
soren_status narrow_key_range(gpu_run *r);
soren_status empty_slots(gpu_run *r);
soren_status empty_table(gpu_run *r);

/* ---- Launches (launch.cu) ------------------------------------------------ */

/* A reduce without a combine groups the map's pairs by key (group_pairs)
 * instead of merging a table of one value per key (merge_table). */
inline bool groups_pairs(const soren_stage_spec *s)
{
    return s->reduce == SOREN_REDUCE_FUNCTION && s->combine == SOREN_COMBINE_NONE;
}

soren_status read_counters(gpu_run *r, unsigned long long *c);
soren_status bad_key_error(gpu_run *r, unsigned long long bad);
soren_status finish_launch(gpu_run *r, unsigned long long *c);
soren_status launch_map(gpu_run *r, uint32_t variant, uint64_t size, uint64_t records);
soren_status monitor(gpu_run *r, uint64_t size, uint64_t records, uint64_t total);
soren_status configure(gpu_run *r);
void shape_search_start(gpu_run *r, size_t input_count);
void shape_of_input(gpu_run *r, bool timed, uint64_t units);
void shape_timed(gpu_run *r, float ms);
soren_status map_input(gpu_run *r, uint64_t size, uint64_t records);

/* ---- The result (order.cu) ----------------------------------------------- */

soren_status result_after_map(gpu_run *r, bool leave, soren_result *out);
void free_packed(gpu_run *r);
bool one_wait(const gpu_run *r);
soren_status result_in_one_wait(gpu_run *r, soren_result *out, bool *again);
void release_list(gpu_run *r);

/* ---- Sessions (session.cu) ----------------------------------------------- */

uint64_t data_bytes(const soren_stage_spec *s, const soren_input *in);
uint64_t records_at_most(const soren_stage_spec *s, const soren_input *in);
soren_status use_device(gpu_run *r);
soren_status counters_reset(gpu_run *r);
soren_status session_reset(gpu_run *r);
soren_status mark(gpu_run *r, int i, const char *phase, const char *progress_phase);

/* ---- Runs on the device, one after another (iterate.cu) ------------------ */

bool loop_serves(const gpu_run *r, const soren_input *inputs, size_t input_count);
soren_status session_loop(gpu_run *r, const soren_input *inputs, size_t input_count,
                          const soren_params *params, uint32_t param, uint8_t *host_param,
                          uint64_t limit, bool compare_last, soren_result *out,
                          soren_gpu_loop *loop);

} /* namespace soren__gpu */

#endif /* SOREN_GPU_RUN_H */
