/*
 * abi.h - the GPU engine's device ABI: what the host's GPU engine
 * (core/gpu/) hands the launchers that SOREN_PLUGIN compiles into each CUDA
 * plugin (soren/engine/plugin.cuh), and what they report back.
 *
 * A plugin author never uses these names: SOREN_PLUGIN fills a stage's
 * soren_gpu_stage, and the engine's kernels read soren_gpu_map_args.  The
 * ABI is versioned with the plugin table, by SOREN_ABI_MAJOR and
 * SOREN_ABI_MINOR (soren/soren.h): a minor version only appends fields to
 * these structures or gives meaning to reserved ones, and each
 * soren_gpu_stage records the minor its launchers were built with, so that
 * the host uses nothing that a plugin's launchers do not know.  What each
 * minor version added is listed in docs/design.md, "The plugin ABI".
 */
/* Outside the guard: under nvcc soren.h includes the engine's headers,
 * which include this one, and they need its definitions whichever of
 * soren.h and this header a file includes first. */
#include <soren/soren.h>

#ifndef SOREN_ENGINE_ABI_H
#define SOREN_ENGINE_ABI_H

/* What one map launch does (see soren/engine/map.cuh). */
typedef enum soren_gpu_variant {
    SOREN_GPU_HASH = 1,   /* insert into the global table, combining as pairs arrive, through a
                             per-block table in shared_bytes, if any */
    SOREN_GPU_DIRECT,     /* append every pair at an atomically claimed index */
    SOREN_GPU_SORT_COUNT, /* Mars pass 1: count each record's pairs and key bytes */
    SOREN_GPU_SORT_WRITE, /* Mars pass 2: write each record's pairs at its scanned offsets */
    SOREN_GPU_MONITOR,    /* count the sample's pairs and key bytes, sketch its keys */
    SOREN_GPU_BLOCK,      /* hash, through a per-block table in shared memory sized by
                             shared_bytes */
    SOREN_GPU_DENSE,      /* index keys: per-block arrays in shared memory, then slot = key */
    SOREN_GPU_GROUP,      /* find or claim the key's slot, append the pair with the slot's key
                             ref: values grouped by key for a reduce */
    SOREN_GPU_REDUCE      /* reduce over groups instead of map over records; its pairs are
                             appended as direct appends them */
} soren_gpu_variant;

/* soren_gpu_map_args.input_format: the manifest's lines, fixed, index and
 * pairs. */
enum { SOREN_GPU_LINES = 1, SOREN_GPU_FIXED = 2, SOREN_GPU_INDEX = 3, SOREN_GPU_PAIRS = 4 };

/* Why a launch stopped early: bits of *status. */
enum {
    SOREN_GPU_TABLE_FULL = 1u << 0, /* the hash table has no free slot */
    SOREN_GPU_KEYS_FULL = 1u << 1,  /* the key space is used up */
    SOREN_GPU_PAIRS_FULL = 1u << 2, /* the pair space is used up */
    SOREN_GPU_BAD_KEY = 1u << 3     /* a key broke the manifest's rules; *bad_key says how */
};
/* The most entries of a per-block table in shared memory, and the bytes of
 * each beside its value (its claim, the key's size and first 12 bytes).  A
 * launch's table has shared_bytes / (SOREN_GPU_BLOCK_BYTES + value_size)
 * entries, a power of two. */
#define SOREN_GPU_BLOCK_SLOTS 2048
#define SOREN_GPU_BLOCK_BYTES 24

/* The bits after which the host grows a region and resumes the launch. */
#define SOREN_GPU_OVERFLOW (SOREN_GPU_TABLE_FULL | SOREN_GPU_KEYS_FULL | SOREN_GPU_PAIRS_FULL)

/* The ref of a global table slot reserved for a new key whose bytes found
 * the key space full: its tag is the key's, it holds no key and no value,
 * and the launch that resumes after the key space grows stores a key of
 * that tag there.  No key has this ref (refs count the 4-byte units of at
 * most 16 GiB, in 16-byte steps). */
#define SOREN_GPU_SLOT_NO_KEY 0xfffffffeu

/* soren_gpu_map_args.resume[tid]: the record thread tid goes on from, or
 * SOREN_GPU_RESUME_DONE, and how many of that record's emits were applied. */
#define SOREN_GPU_RESUME_DONE (~0ull)
typedef struct soren_gpu_resume {
    unsigned long long record;
    unsigned long long applied;
} soren_gpu_resume;

/* The key space holds each key once as [uint32 size][bytes], 4-byte aligned;
 * a key is referred to by its offset / 4 (offset 0 is reserved: ref 0 means
 * "no key").  The device memory here is owned by the host; the plugin's
 * kernels only read and write it.  Fields are grouped by the minor version
 * that added them (docs/design.md); their order is the ABI. */
typedef struct soren_gpu_map_args {
    uint32_t variant;      /* soren_gpu_variant */
    uint32_t input_format; /* SOREN_GPU_LINES, _FIXED, _INDEX or _PAIRS */
    const uint8_t *input;  /* device; NULL for index input */
    uint64_t input_size;
    /* lines: record i is [line_starts[i], line_starts[i+1] - 1), with
     * line_starts[record_count] one past the end as if a '\n' followed;
     * pairs: record i is [line_starts[i], line_starts[i+1]) */
    const uint64_t *line_starts;
    uint64_t record_count;
    uint64_t record_size; /* fixed */
    soren_params params;  /* device pointers */

    uint32_t key_type;
    uint32_t key_max_size;
    uint64_t key_count; /* index keys */
    uint32_t value_size;
    uint32_t value_type;
    uint32_t combine; /* soren_combine_op */
    /* (1.7) pairs input: each record is emitted as it is (its key's
     * bytes, then the value), the map not called, to fold the pairs that
     * the ranks of a distributed run sent each other. */
    uint32_t fold_pairs;

    uint8_t *keys; /* key space */
    uint64_t keys_capacity;
    unsigned long long *keys_used; /* bytes, starts at 4 */

    unsigned long long *slots; /* hash: (hash << 32) | key ref; 0 is empty */
    uint64_t slot_count;       /* a power of two */
    void *slot_values;         /* slot_count values, pre-filled with the combine's identity */

    uint32_t *pair_keys;   /* direct, sort: key ref of each pair */
    void *pair_values;
    uint64_t pair_capacity;
    unsigned long long *pairs_used;

    /* sort: per record, pass 1 counts (pairs, padded key bytes); pass 2
     * reads them back as exclusive prefix sums (offsets) */
    unsigned long long *record_pairs;
    unsigned long long *record_key_bytes;

    unsigned int *status;            /* SOREN_GPU_* bits */
    unsigned long long *bad_key;     /* (what << 56) | size or index of the first bad key */

    /* hash and block: a launch refuses to claim slot number slot_limit + 1
     * (*slots_used counts the claims), so the table's load stays bounded */
    unsigned long long *slots_used;
    uint64_t slot_limit;
    /* overflow and resume: a thread that cannot apply an emit records where
     * it stopped in resume[tid] and every thread stops at its next record;
     * the host grows the region and launches again with resuming set */
    soren_gpu_resume *resume;
    uint64_t max_threads;            /* resume entries; the launch uses at most this many threads */
    uint32_t resuming;
    uint32_t shared_bytes;           /* hash, block and dense: dynamic shared memory per block;
                                        0 for hash: no per-block table */
    uint64_t identity;               /* the combine's identity, as the value's bits */
    /* monitor: map records soren__sample_record(i, sample_count, record_count)
     * for i < sample_count; sample_counts[0..2] += pairs, key footprints and
     * record bytes (with their newlines) */
    uint64_t sample_count;
    unsigned long long *sample_counts;
    unsigned int *sketch;            /* SOREN_SKETCH_REGISTERS ranks (atomicMax) */

    /* reduce: record_count groups; group i is the key group_refs[i] with the
     * values group_start[i] .. group_start[i+1] - 1 of group_values (one
     * value each, value i, where group_start is NULL) */
    const uint32_t *group_refs;
    const uint64_t *group_start;
    const void *group_values;

    /* Where input[0] (task 0, pair 0) lies in the whole input (every
     * input end to end) when the input is part of it (an input after the
     * first, a chunk of a large input, an MPI rank's share): records report
     * their offset and index in the whole, as the CPU engine's do. */
    uint64_t record_base;

    /* hash and block: the part of the key space this launch folds.  An emit
     * whose key's hash (soren__key_hash) has its top 32 bits outside
     * [key_first, key_last] is skipped: a table that would outgrow the
     * device memory budget folds the key space a part at a time, one pass
     * over the input each.  [0, 0xffffffff] is every key. */
    uint32_t key_first;
    uint32_t key_last;

    /* (1.10) Threads a block of a map launch: the engine's choice by
     * measurement (docs/gpu-engine.md, "Launch shapes"), taken where it is
     * smaller than the occupancy query's block; 0: the occupancy query's. */
    uint32_t block_threads;
} soren_gpu_map_args;

/* Folds values[i] into accumulators[target[i]] with the stage's combine, for
 * i in [0, count): how the sort and direct variants combine grouped pairs. */
typedef struct soren_gpu_combine_args {
    const void *values;
    const uint64_t *target;
    void *accumulators; /* pre-filled with the combine's identity */
    uint64_t count;
} soren_gpu_combine_args;

/* GPU launchers of one stage (soren_stage.gpu); every call is asynchronous
 * on the given cudaStream_t and returns a cudaError_t.  NULL in a plugin
 * built without device code. */
struct soren_gpu_stage {
    uint32_t size;      /* sizeof(soren_gpu_stage) */
    uint32_t abi_minor; /* SOREN_ABI_MINOR the launchers were built with */
    int (*map)(const soren_gpu_map_args *args, void *stream);
    int (*combine)(const soren_gpu_combine_args *args, void *stream);
    /* Writes the combine's identity into count values. */
    int (*fill_identity)(void *values, uint64_t count, void *stream);
    void *reserved[5];
};

/* ---- The host loop (plugin ABI 1.9) ------------------------------------- */

/* A run of records for soren_cpu_stage.map_dense, numbered as the CPU
 * engine numbers them: fixed records of record_size bytes (record i at
 * data + i * record_size, its offset first_offset + i * record_size), or
 * tasks (record_size 0, no data, offset first_offset + i); record i's index
 * is first_index + i. */
typedef struct soren_cpu_dense_args {
    const uint8_t *data;
    uint64_t record_size;
    uint64_t count;
    uint64_t first_offset;
    uint64_t first_index;
    const soren_params *params;
    void *values;          /* key_count accumulators of the stage's value type */
    uint8_t *seen;         /* key_count flags: set for each key emitted */
    uint64_t key_count;
    soren_record *current; /* the record being mapped, for the report of a fault in map */
    uint64_t done;         /* out: the records mapped: count, or where an emitted key was
                              refused (not 4 bytes, not under key_count) */
} soren_cpu_dense_args;

/* Host loops of one stage (soren_stage.cpu), compiled into a CUDA plugin
 * with the stage's map inlined in them, so that a record costs no call
 * through a pointer and a pair no call at all. */
struct soren_cpu_stage {
    uint32_t size;      /* sizeof(soren_cpu_stage) */
    uint32_t abi_minor; /* SOREN_ABI_MINOR the loops were built with */
    /* Maps a->count records, adding each emitted value (a sum) or 1 (a
     * count) to its key's accumulator, as the CPU engine's dense
     * emitters do; NULL unless the stage's keys are index keys and its
     * combine a sum or a count. */
    void (*map_dense)(soren_cpu_dense_args *a);
    void *reserved[4];
};

#endif /* SOREN_ENGINE_ABI_H */
