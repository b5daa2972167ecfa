/*
 * soren.h - the plugin author's API.
 *
 * A Soren job is a shared object built from one CUDA source file that includes
 * this header, defines its map (and optionally combine and reduce) functions
 * with SOREN_FN, and ends with one SOREN_PLUGIN(...) line.  Beside the .so
 * lives NAME.json, the manifest that describes the job to soren-host.
 *
 *     #include <soren/soren.h>
 *
 *     SOREN_FN void wc_map(soren_emitter *e, const soren_record *r,
 *                          const soren_params *p)
 *     {
 *         uint32_t one = 1;
 *         ... for each word w of r->data[0 .. r->size) ...
 *         soren_emit(e, w, w_len, &one);
 *     }
 *
 *     SOREN_PLUGIN(wordcount,
 *                  SOREN_STAGE(.map = wc_map, .combine = SOREN_SUM_U32))
 *
 * Contract for the functions a plugin provides:
 *  - They run on the GPU and on the CPU (SOREN_FN is __host__ __device__):
 *    no host-only library calls, no global mutable state.
 *  - They are deterministic: the engine may run map on a record again after an
 *    overflow and skips the emits it already applied.
 *  - Keys are byte strings of at most the manifest's key.max_size bytes; typed
 *    keys (u32, u64, index, ...) are emitted as the bytes of the native value.
 *    Values are fixed-size (the manifest's value.type).
 *
 * The one exported symbol of a plugin is SOREN_PLUGIN_SYMBOL, a versioned
 * soren_plugin_table.  The host refuses a table whose ABI major version or
 * size it does not know, and one that disagrees with the manifest.
 */
#ifndef SOREN_SOREN_H
#define SOREN_SOREN_H

#include <stddef.h>
#include <stdint.h>

/* ABI of the plugin table.  A new major version is a break the host refuses;
 * a new minor version only appends to the table or uses reserved fields. */
#define SOREN_ABI_MAJOR 1
#define SOREN_ABI_MINOR 6
#define SOREN_PLUGIN_SYMBOL "soren_plugin_v1"

/* Markers around the manifest copy embedded in every plugin (see
 * build-aux/embed-manifest); the text between them is NAME.json less its
 * "sha256" member, which the library's own digest cannot be part of. */
#define SOREN_MANIFEST_BEGIN "\n--- SOREN MANIFEST BEGIN ---\n"
#define SOREN_MANIFEST_END "\n--- SOREN MANIFEST END ---\n"

#define SOREN_MAX_STAGES 4
#define SOREN_MAX_PARAMS 16

#ifdef __CUDACC__
#define SOREN_FN static __host__ __device__
#define SOREN__INLINE static __host__ __device__ __forceinline__
#else
#define SOREN_FN static
#define SOREN__INLINE static inline
#endif

#ifdef __cplusplus
#define SOREN__EXTERN_C extern "C"
#else
#define SOREN__EXTERN_C extern
#endif

/* ---- Types of keys and values ------------------------------------------ */

typedef enum soren_type {
    SOREN_TYPE_NONE = 0,
    SOREN_TYPE_STRING, /* bytes, up to key.max_size; keys only */
    SOREN_TYPE_U32,
    SOREN_TYPE_U64,
    SOREN_TYPE_I64,
    SOREN_TYPE_F32,
    SOREN_TYPE_F64,
    SOREN_TYPE_INDEX, /* u32 in [0, key.count): dense keys only */
    SOREN_TYPE__COUNT
} soren_type;

/* ---- What map sees ----------------------------------------------------- */

/* One input record.  For `lines` input, data excludes the newline; for
 * `fixed`, size is the manifest's record_size.  index is the record number for
 * `fixed` input and the line's byte offset for `lines` input (a line number
 * would need a scan of everything before it).
 *
 * `index` input (tasks known only by their number, e.g. one element of a
 * matrix product): data is NULL, size 0, and offset and index are the task's
 * number, 0 .. N-1.
 *
 * `pairs` input (what every stage after the first maps: the pairs of the
 * stage before, ordered by key): data is the pair's key bytes followed by
 * its value bytes, size the key's size plus the value's, and offset and
 * index the pair's number in that order.  Values are fixed-size, so the key
 * is data[0 .. size - value size) and the value the rest; the value is not
 * aligned (read it with memcpy). */
typedef struct soren_record {
    const uint8_t *data;
    uint64_t size;
    uint64_t offset; /* byte offset of data in the whole input: every input
                        end to end, in the order given */
    uint64_t index;
} soren_record;

/* The job's parameters, in manifest order, as bytes: strings without a
 * terminator, numbers in native layout, regex parameters as a soren_dfa
 * (soren/dfa.h).  On the GPU the pointers are device pointers. */
typedef struct soren_params {
    uint32_t count;
    const void *data[SOREN_MAX_PARAMS];
    uint64_t size[SOREN_MAX_PARAMS];
} soren_params;

SOREN__INLINE const void *soren_param(const soren_params *p, uint32_t i)
{
    return i < p->count ? p->data[i] : (const void *)0;
}

SOREN__INLINE uint64_t soren_param_size(const soren_params *p, uint32_t i)
{
    return i < p->count ? p->size[i] : 0;
}

/* Where emitted pairs go.  Engines own it; a plugin only passes it to
 * soren_emit.  Host engines deliver each pair through `emit`; device engines
 * keep their cursor in `state`. */
typedef struct soren_emitter soren_emitter;
typedef void soren_emit_fn(soren_emitter *e, const void *key, uint32_t key_size,
                           const void *value);
struct soren_emitter {
    soren_emit_fn *emit;
    void *ctx;
    uint64_t state[6];
};

#if defined(__CUDA_ARCH__)
/* Device engines define soren__device_emit in soren/engine/ (compiled into
 * each plugin, where the variant's kernel sets up the emitter). */
__device__ void soren__device_emit(soren_emitter *e, const void *key, uint32_t key_size,
                                   const void *value);
#endif

/* Emit one intermediate pair.  value points to value.type's size in bytes. */
SOREN__INLINE void soren_emit(soren_emitter *e, const void *key, uint32_t key_size,
                              const void *value)
{
#if defined(__CUDA_ARCH__)
    soren__device_emit(e, key, key_size, value);
#else
    e->emit(e, key, key_size, value);
#endif
}

/* ---- The functions a plugin provides ----------------------------------- */

typedef void soren_map_fn(soren_emitter *e, const soren_record *r, const soren_params *p);
/* Fold value into acc (both value.type); must be associative and commutative. */
typedef void soren_combine_fn(void *acc, const void *value);
/* Receives one key and all its values (n of them, packed); emits the final
 * pairs of that key with soren_emit. */
typedef void soren_reduce_fn(soren_emitter *e, const void *key, uint32_t key_size,
                             const void *values, uint32_t n, const soren_params *p);

/* Built-in combines, applied with native atomics on the GPU. */
typedef enum soren_combine_op {
    SOREN_COMBINE_NONE = 0,
    SOREN_COMBINE_SUM,
    SOREN_COMBINE_MIN,
    SOREN_COMBINE_MAX,
    SOREN_COMBINE_COUNT, /* the number of values; emitted values are ignored */
    SOREN_COMBINE_USER,  /* the stage's combine_fn, starting from identity */
    SOREN_COMBINE__COUNT
} soren_combine_op;

typedef struct soren_combine {
    uint32_t op;   /* soren_combine_op */
    uint32_t type; /* soren_type of the values it combines; 0 for USER */
    soren_combine_fn *fn;
    const void *identity;
} soren_combine;

#define SOREN__BUILTIN(op, type) {SOREN_COMBINE_##op, SOREN_TYPE_##type, 0, 0}
#define SOREN_SUM_U32 SOREN__BUILTIN(SUM, U32)
#define SOREN_SUM_U64 SOREN__BUILTIN(SUM, U64)
#define SOREN_SUM_I64 SOREN__BUILTIN(SUM, I64)
#define SOREN_SUM_F32 SOREN__BUILTIN(SUM, F32)
#define SOREN_SUM_F64 SOREN__BUILTIN(SUM, F64)
#define SOREN_MIN_U32 SOREN__BUILTIN(MIN, U32)
#define SOREN_MIN_U64 SOREN__BUILTIN(MIN, U64)
#define SOREN_MIN_I64 SOREN__BUILTIN(MIN, I64)
#define SOREN_MIN_F32 SOREN__BUILTIN(MIN, F32)
#define SOREN_MIN_F64 SOREN__BUILTIN(MIN, F64)
#define SOREN_MAX_U32 SOREN__BUILTIN(MAX, U32)
#define SOREN_MAX_U64 SOREN__BUILTIN(MAX, U64)
#define SOREN_MAX_I64 SOREN__BUILTIN(MAX, I64)
#define SOREN_MAX_F32 SOREN__BUILTIN(MAX, F32)
#define SOREN_MAX_F64 SOREN__BUILTIN(MAX, F64)
#define SOREN_COUNT_U32 SOREN__BUILTIN(COUNT, U32)
#define SOREN_COUNT_U64 SOREN__BUILTIN(COUNT, U64)
#define SOREN_COUNT_I64 SOREN__BUILTIN(COUNT, I64)
#define SOREN_COUNT_F32 SOREN__BUILTIN(COUNT, F32)
#define SOREN_COUNT_F64 SOREN__BUILTIN(COUNT, F64)
/* A user combine: fn folds a value into an accumulator that starts as
 * *identity_ptr. */
#define SOREN_COMBINE_FN(fn, identity_ptr) {SOREN_COMBINE_USER, 0, fn, identity_ptr}

/* ---- The plugin table (ABI) -------------------------------------------- */

/* ---- The GPU engine's ABI ---------------------------------------------- */

/* What one map launch does (see soren/engine/map.cuh). */
typedef enum soren_gpu_variant {
    SOREN_GPU_HASH = 1,   /* insert into the global table, combining as pairs arrive; since
                             ABI 1.4 through a per-block table in shared_bytes, if any */
    SOREN_GPU_DIRECT,     /* append every pair at an atomically claimed index */
    SOREN_GPU_SORT_COUNT, /* Mars pass 1: count each record's pairs and key bytes */
    SOREN_GPU_SORT_WRITE, /* Mars pass 2: write each record's pairs at its scanned offsets */
    SOREN_GPU_MONITOR,    /* count the sample's pairs and key bytes, sketch its keys */
    SOREN_GPU_BLOCK,      /* hash, through a per-block table in shared memory sized (since
                             ABI 1.4) by shared_bytes */
    SOREN_GPU_DENSE,      /* index keys: per-block arrays in shared memory, then slot = key */
    SOREN_GPU_GROUP,      /* (ABI 1.2) find or claim the key's slot, append the pair with the
                             slot's key ref: values grouped by key for a reduce */
    SOREN_GPU_REDUCE      /* (ABI 1.2) reduce over groups instead of map over records; its
                             pairs are appended as direct appends them */
} soren_gpu_variant;

/* soren_gpu_map_args.input_format (the manifest's lines, fixed, and, since
 * ABI 1.2, index and pairs). */
enum { SOREN_GPU_LINES = 1, SOREN_GPU_FIXED = 2, SOREN_GPU_INDEX = 3, SOREN_GPU_PAIRS = 4 };

/* Why a launch stopped early: bits of *status. */
enum {
    SOREN_GPU_TABLE_FULL = 1u << 0, /* the hash table has no free slot */
    SOREN_GPU_KEYS_FULL = 1u << 1,  /* the key space is used up */
    SOREN_GPU_PAIRS_FULL = 1u << 2, /* the pair space is used up */
    SOREN_GPU_BAD_KEY = 1u << 3     /* a key broke the manifest's rules; *bad_key says how */
};
/* The most entries of a per-block table in shared memory (before ABI 1.4,
 * the block variant's fixed size), and the bytes of each beside its value
 * (its claim, the key's size and first 12 bytes).  A launch's table has
 * shared_bytes / (SOREN_GPU_BLOCK_BYTES + value_size) entries, a power of
 * two. */
#define SOREN_GPU_BLOCK_SLOTS 2048
#define SOREN_GPU_BLOCK_BYTES 24

/* The bits after which the host grows a region and resumes the launch. */
#define SOREN_GPU_OVERFLOW (SOREN_GPU_TABLE_FULL | SOREN_GPU_KEYS_FULL | SOREN_GPU_PAIRS_FULL)

/* (ABI 1.5) The ref of a global table slot reserved for a new key whose
 * bytes found the key space full: its tag is the key's, it holds no key and
 * no value, and the launch that resumes after the key space grows stores a
 * key of that tag there.  No key has this ref (refs count the 4-byte units
 * of at most 16 GiB, in 16-byte steps). */
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
 * kernels only read and write it. */
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
    uint32_t reserved0;

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

    /* ABI 1.1 */
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
    uint32_t shared_bytes;           /* hash (ABI 1.4), block and dense: dynamic shared memory
                                        per block; 0 for hash: no per-block table */
    uint64_t identity;               /* the combine's identity, as the value's bits */
    /* monitor: map records soren__sample_record(i, sample_count, record_count)
     * for i < sample_count; sample_counts[0..2] += pairs, key footprints and
     * record bytes (with their newlines) */
    uint64_t sample_count;
    unsigned long long *sample_counts;
    unsigned int *sketch;            /* SOREN_SKETCH_REGISTERS ranks (atomicMax) */

    /* ABI 1.2 */
    /* reduce: record_count groups; group i is the key group_refs[i] with the
     * values group_start[i] .. group_start[i+1] - 1 of group_values (one
     * value each, value i, where group_start is NULL) */
    const uint32_t *group_refs;
    const uint64_t *group_start;
    const void *group_values;

    /* ABI 1.3 */
    /* Where input[0] (task 0, pair 0) lies in the whole input (every
     * input end to end) when the input is part of it (an input after the
     * first, a chunk of a large input, an MPI rank's share): records report
     * their offset and index in the whole, as the CPU engine's do. */
    uint64_t record_base;

    /* ABI 1.6 */
    /* hash and block: the part of the key space this launch folds.  An emit
     * whose key's hash (soren__key_hash) has its top 32 bits outside
     * [key_first, key_last] is skipped: a table that would outgrow the
     * device memory budget folds the key space a part at a time, one pass
     * over the input each.  [0, 0xffffffff] is every key. */
    uint32_t key_first;
    uint32_t key_last;
} soren_gpu_map_args;

/* Folds values[i] into accumulators[target[i]] with the stage's combine, for
 * i in [0, count): how the sort and direct variants combine grouped pairs. */
typedef struct soren_gpu_combine_args {
    const void *values;
    const uint64_t *target;
    void *accumulators; /* pre-filled with the combine's identity */
    uint64_t count;
} soren_gpu_combine_args;

/* GPU launchers of one stage; every call is asynchronous on the given
 * cudaStream_t and returns a cudaError_t.  NULL in a plugin built without
 * device code. */
typedef struct soren_gpu_stage {
    uint32_t size;      /* sizeof(soren_gpu_stage) */
    uint32_t abi_minor; /* SOREN_ABI_MINOR the launchers were built with (0 before 1.1) */
    int (*map)(const soren_gpu_map_args *args, void *stream);
    int (*combine)(const soren_gpu_combine_args *args, void *stream);
    /* Writes the combine's identity into count values. */
    int (*fill_identity)(void *values, uint64_t count, void *stream);
    void *reserved[5];
} soren_gpu_stage;

/* One stage as the author declares it with SOREN_STAGE(...).  Fields in this
 * order (C++ designated initializers must keep it):
 *   .map      required
 *   .combine  a built-in (SOREN_SUM_U32, ...) or SOREN_COMBINE_FN(fn, &identity)
 *   .reduce   optional
 *   .key      SOREN_TYPE_STRING unless given
 *   .value    the combine's type unless given */
typedef struct soren_stage {
    soren_map_fn *map;
    soren_combine combine;
    soren_reduce_fn *reduce;
    uint32_t key;   /* soren_type */
    uint32_t value; /* soren_type */
    const soren_gpu_stage *gpu;
    void *reserved[4];
} soren_stage;

typedef struct soren_plugin_table {
    uint32_t abi_major;      /* SOREN_ABI_MAJOR the plugin was built with */
    uint32_t abi_minor;
    uint32_t size;           /* sizeof(soren_plugin_table) in the plugin */
    uint32_t stage_count;
    const char *name;        /* must equal the manifest's "name" */
    const char *manifest;    /* embedded copy, between the SOREN_MANIFEST markers */
    const soren_stage *stages;
    void *reserved[8];
} soren_plugin_table;

#define SOREN_STAGE(...) {__VA_ARGS__}

#define SOREN__TABLE(job_name, stage_count, stages)                                      \
    SOREN__EXTERN_C __attribute__((visibility("default"))) const soren_plugin_table      \
        soren_plugin_v1;                                                                 \
    const soren_plugin_table soren_plugin_v1 = {SOREN_ABI_MAJOR,                         \
                                                SOREN_ABI_MINOR,                         \
                                                (uint32_t)sizeof(soren_plugin_table),    \
                                                (uint32_t)(stage_count),                 \
                                                #job_name,                               \
                                                soren__embedded_manifest,                \
                                                stages,                                  \
                                                {0}};

#ifdef __CUDACC__
#include <soren/engine/plugin.cuh>
/* Defines the plugin's one exported symbol, with every stage's GPU launchers
 * instantiated over its functions (soren/engine/).  The build generates
 * soren__embedded_manifest from NAME.json (build-aux/embed-manifest). */
#define SOREN_PLUGIN(job_name, ...)                                                      \
    SOREN__EXTERN_C const char soren__embedded_manifest[];                               \
    static constexpr soren_stage soren__desc[] = {__VA_ARGS__};                          \
    static constexpr uint32_t soren__stage_count = sizeof soren__desc / sizeof soren__desc[0]; \
    __device__ __forceinline__ void soren__device_emit(soren_emitter *e, const void *key,  \
                                                       uint32_t key_size, const void *value) \
    {                                                                                    \
        soren::emit_any<soren__desc, soren__stage_count>(e, key, key_size, value);       \
    }                                                                                    \
    SOREN__TABLE(job_name, soren__stage_count,                                           \
                 soren::stages_of<soren__desc>(std::make_index_sequence<soren__stage_count>()))
#else
/* Plain C (host-only test plugins): the stages without GPU launchers. */
#define SOREN_PLUGIN(job_name, ...)                                                      \
    SOREN__EXTERN_C const char soren__embedded_manifest[];                               \
    static const soren_stage soren__stages[] = {__VA_ARGS__};                            \
    SOREN__TABLE(job_name, sizeof soren__stages / sizeof soren__stages[0], soren__stages)
#endif

#endif /* SOREN_SOREN_H */
