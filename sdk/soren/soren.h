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

/* ABI of the plugin table and of the GPU engine's launchers in it
 * (soren/engine/abi.h).  A new major version is a break the host refuses;
 * a new minor version only appends to the tables or uses reserved fields
 * (docs/design.md lists the minor versions). */
#define SOREN_ABI_MAJOR 1
#define SOREN_ABI_MINOR 11
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
 * (soren/dfa.h), scratch parameters as memory the map may write
 * (soren_scratch).  On the GPU the pointers are device pointers. */
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

/* A scratch parameter (manifest type "scratch"): memory the map may write,
 * of the size in bytes the caller gave (NULL where it gave 0).  It starts
 * zeroed.  What a run writes may still be there for a later run of the same
 * session, or may not (another device, another process, a fresh session), so
 * keep in it only what the map can recompute and can tell from what it did
 * not write: a cache whose entries carry a tag.  A task reads and writes only
 * bytes that no other task of the run writes. */
SOREN__INLINE void *soren_scratch(const soren_params *p, uint32_t i)
{
    return i < p->count ? (void *)p->data[i] : (void *)0;
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
#elif defined(__CUDACC__)
/* A CUDA plugin's host loops (soren/engine/host_loop.h) pass an emitter
 * whose address has its low bit set (an engine's emitter is aligned): their
 * pairs go to soren__host_emit, which SOREN_PLUGIN defines, inlined into
 * the loop. */
void soren__host_emit(soren_emitter *e, const void *key, uint32_t key_size, const void *value);
#endif

/* Emit one intermediate pair.  value points to value.type's size in bytes. */
SOREN__INLINE void soren_emit(soren_emitter *e, const void *key, uint32_t key_size,
                              const void *value)
{
#if defined(__CUDA_ARCH__)
    soren__device_emit(e, key, key_size, value);
#elif defined(__CUDACC__)
    /* A test of the address, not of a field: where a host loop inlines the
     * map, the compiler folds it and drops the call through `emit`, which
     * would otherwise let the loop's state escape and be reloaded for every
     * pair. */
    if ((uintptr_t)e & 1)
        soren__host_emit(e, key, key_size, value);
    else
        e->emit(e, key, key_size, value);
#else
    e->emit(e, key, key_size, value);
#endif
}

/* ---- The functions a plugin provides ----------------------------------- */

typedef void soren_map_fn(soren_emitter *e, const soren_record *r, const soren_params *p);
/* Consecutive records that lie a stride apart, for a run map: fixed
 * records (record i at data + i * size) or index input's tasks (data NULL,
 * size 0).  Record i's offset is offset + i * size (+ i for tasks) and its
 * index index + i, as map would see them one by one. */
typedef struct soren_record_run {
    const uint8_t *data;
    uint64_t size;
    uint64_t count;
    uint64_t offset;
    uint64_t index;
} soren_record_run;

/* A run map (host code only, not SOREN_FN): emits exactly the pairs that
 * map emits for each record of the run, in record order.  The CPU engine
 * calls it instead of map for fixed records and tasks, in runs of a few
 * thousand, so that a job can do once a run what map does once a record
 * (kmeans divides its centroids' sums once) or order its loops for the
 * cache (matmul reads B by rows); the GPU, and the CPU engine's sample of
 * the input, call map. */
typedef void soren_map_run_fn(soren_emitter *e, const soren_record_run *run,
                              const soren_params *p);
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

/* A stage's GPU launchers and host loops, which SOREN_PLUGIN fills in a
 * CUDA plugin: the engines' ABI, in soren/engine/abi.h. */
typedef struct soren_gpu_stage soren_gpu_stage;
typedef struct soren_cpu_stage soren_cpu_stage;

/* One stage as the author declares it with SOREN_STAGE(...).  Fields in this
 * order (C++ designated initializers must keep it):
 *   .map      required
 *   .combine  a built-in (SOREN_SUM_U32, ...) or SOREN_COMBINE_FN(fn, &identity)
 *   .reduce   optional
 *   .key      SOREN_TYPE_STRING unless given
 *   .value    the combine's type unless given
 *   .map_run  optional: the CPU engine's map of fixed records and tasks */
typedef struct soren_stage {
    soren_map_fn *map;
    soren_combine combine;
    soren_reduce_fn *reduce;
    uint32_t key;   /* soren_type */
    uint32_t value; /* soren_type */
    const soren_gpu_stage *gpu;
    const soren_cpu_stage *cpu; /* (1.9) */
    soren_map_run_fn *map_run;  /* (1.11) */
    void *reserved[2];
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
    __host__ __forceinline__ void soren__host_emit(soren_emitter *e, const void *key,      \
                                                   uint32_t key_size, const void *value)   \
    {                                                                                    \
        soren::host_emit_any<soren__desc, soren__stage_count>(e, key, key_size, value);  \
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
