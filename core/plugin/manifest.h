/*
 * manifest.h - NAME.json: parse and validate a job's manifest.
 *
 * The manifest is checked against the rules documented in
 * share/manifest.schema.json.  Every error names the file, the JSON path and
 * what was expected, e.g.
 *
 *   wordcount.json: $.value.type: expected one of u32, u64, i64, f32, f64, got "int"
 *
 * Unknown keys are errors.  A parsed manifest owns all of its strings.
 */
#ifndef SOREN_MANIFEST_H
#define SOREN_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "../error.h"
#include <soren/soren.h>

#define SOREN_MANIFEST_VERSION 1
#define SOREN_KEY_MAX_SIZE_DEFAULT 256u
#define SOREN_KEY_MAX_SIZE_LIMIT 65536u
#define SOREN_MAX_COUNT_FROM 4  /* parameters whose product is a count (see soren_count_from) */

typedef enum soren_input_format {
    SOREN_INPUT_LINES = 1, /* records end at '\n'; a last line without one counts */
    SOREN_INPUT_FIXED,     /* records of input.record_size bytes */
    SOREN_INPUT_INDEX,     /* tasks known only by their index (see input.count) */
    SOREN_INPUT_PAIRS      /* a previous stage's output: the input of stages 2..N */
} soren_input_format;

typedef enum soren_reduce_kind {
    SOREN_REDUCE_NONE = 0, /* map-only, or the combine result is the output */
    SOREN_REDUCE_COMBINE,  /* "reduce": "combine": the combined value per key */
    SOREN_REDUCE_FUNCTION  /* "reduce": "function": the plugin's reduce */
} soren_reduce_kind;

typedef enum soren_order {
    SOREN_ORDER_KEY = 0,
    SOREN_ORDER_VALUE_DESC,
    SOREN_ORDER_VALUE_ASC,
    SOREN_ORDER_NONE
} soren_order;

typedef enum soren_param_type {
    SOREN_PARAM_STRING = 1,
    SOREN_PARAM_U32,
    SOREN_PARAM_U64,
    SOREN_PARAM_I64,
    SOREN_PARAM_F32,
    SOREN_PARAM_F64,
    SOREN_PARAM_REGEX,  /* compiled on the host into a soren_dfa */
    SOREN_PARAM_SCRATCH /* memory the map may write, given as its size in bytes */
} soren_param_type;

typedef struct soren_manifest_param {
    char *name;          /* [A-Za-z_][A-Za-z0-9_]* , unique */
    soren_param_type type;
    int required;
    char *default_value; /* textual, as on the command line; NULL if none */
    char *help;          /* NULL if none */
} soren_manifest_param;

/* count_from: a count known only at run time (index input's tasks, index
 * keys), the product of up to SOREN_MAX_COUNT_FROM items as the manifest
 * lists them: parameters of type u32 or u64, and constant factors (at least
 * one parameter: a constant count is "count").  Item i is the parameter
 * names[i], or where that is NULL the constant constants[i]; count is 0
 * where the manifest gives none. */
typedef struct soren_count_from {
    char *names[SOREN_MAX_COUNT_FROM];
    uint32_t constants[SOREN_MAX_COUNT_FROM];
    size_t count;
} soren_count_from;

typedef struct soren_manifest_key {
    soren_type type;   /* STRING, U32, U64, I64, F32, F64 or INDEX */
    uint32_t max_size; /* STRING: bytes, default SOREN_KEY_MAX_SIZE_DEFAULT; else the type's size */
    /* INDEX: keys are 0 .. count-1, count from 1 to UINT32_MAX; or count 0
     * and the product of count_from's parameters (exactly one of the two) */
    uint64_t count;
    soren_count_from count_from;
} soren_manifest_key;

typedef struct soren_manifest_value {
    soren_type type; /* U32, U64, I64, F32 or F64 */
} soren_manifest_value;

/* A stage after the first ($.stages[i]): it reads the previous stage's
 * pairs (input format pairs); the job's output section orders the last
 * stage's pairs. */
typedef struct soren_manifest_stage {
    soren_manifest_key key;
    soren_manifest_value value;
    soren_combine_op combine;
    soren_reduce_kind reduce;
} soren_manifest_stage;

typedef struct soren_manifest {
    char *path; /* as given to soren_manifest_load; NULL from soren_manifest_parse */
    char *dir;  /* folder of path ("." when none); NULL from soren_manifest_parse */
    char *text; /* the file's bytes, NUL-terminated, for the embedded-copy check */
    size_t text_size;

    char *name;    /* [a-z0-9_-]+, at most 64 bytes */
    char *version; /* semantic version string */
    char *summary; /* one line */
    char *library; /* path of the .so relative to dir: not absolute, no ".." component */
    char *sha256;  /* 64 lowercase hex digits, or NULL */

    struct {
        soren_input_format format; /* LINES, FIXED or INDEX: stage 1 reads no pairs */
        uint64_t record_size; /* fixed: required, >= 1 */
        /* index: the number of tasks, or 0: the product of the parameters
         * named by count_from (u32 or u64), or else `run --tasks N` */
        uint64_t count;
        soren_count_from count_from;
    } input;

    /* Stage 1 (the top-level key, value, combine and reduce). */
    soren_manifest_key key;
    soren_manifest_value value;
    soren_combine_op combine; /* NONE, SUM, MIN, MAX, COUNT, or USER for "function" */
    soren_reduce_kind reduce;

    /* Stages 2 .. stage_count + 1 ($.stages), each reading the pairs of the
     * one before; NULL and 0 for a one-stage job. */
    soren_manifest_stage *stages;
    size_t stage_count;

    struct {
        soren_order order;
        uint64_t limit; /* 0: no limit */
    } output;

    soren_manifest_param *params;
    size_t param_count; /* at most SOREN_MAX_PARAMS */

    /* $.iterate.param: the parameter (of type string) that `run --iterate
     * N` writes each run's output into before the next run, the output's
     * keys (u32, u64 or index) numbering its elements; NULL when the job
     * does not iterate. */
    char *iterate_param;
} soren_manifest;

/* The most bytes a manifest file may hold; a larger one is refused before
 * it is read (real manifests are a few kB). */
#define SOREN_MANIFEST_MAX_SIZE (1u << 20)

/* Opens the manifest at path for reading (*fd, close it): without waiting
 * on a FIFO, and refusing a folder, anything that is not a regular file,
 * and a file over SOREN_MANIFEST_MAX_SIZE bytes (SOREN_EMANIFEST), with
 * path, the size and the cap in the message. */
soren_status soren_manifest_open(const char *path, int *fd, soren_error *err);

/* Reads and validates the manifest open on fd (from soren_manifest_open),
 * found at path, as soren_manifest_load does. */
soren_status soren_manifest_read(int fd, const char *path, soren_manifest **out,
                                 soren_error *err);

/* Reads and validates the manifest at path.  On success *out owns a new
 * manifest (free with soren_manifest_free); on failure *out is NULL and err
 * says why (SOREN_EMANIFEST, or SOREN_EIO when the file cannot be read). */
soren_status soren_manifest_load(const char *path, soren_manifest **out, soren_error *err);

/* Same, from bytes already in memory; source names them in messages (usually
 * the file name). */
soren_status soren_manifest_parse(const char *text, size_t size, const char *source,
                                  soren_manifest **out, soren_error *err);

void soren_manifest_free(soren_manifest *m);

/* 1 if text (the copy of a manifest embedded in a library) is the same JSON
 * value as m's file, each less its top-level "sha256" member, else 0.  The
 * pin is left out because a library cannot embed its own digest: the
 * side-car gains it after the library is built. */
int soren_manifest_matches(const soren_manifest *m, const char *text, size_t size);

/* Size in bytes of a value of type t (0 for STRING and NONE). */
size_t soren_type_size(soren_type t);
/* The manifest spelling of t ("u32", "string", "index", ...). */
const char *soren_type_name(soren_type t);
/* The manifest spelling of a parameter's type ("string", "regex", ...). */
const char *soren_param_type_name(soren_param_type t);

/* The job's number of stages: 1 + stage_count. */
size_t soren_manifest_stages(const soren_manifest *m);
/* Stage i (0-based) of the job as a soren_manifest_stage (stage 0 from the
 * top-level fields); its strings (key.count_from) still belong to m. */
soren_manifest_stage soren_manifest_stage_at(const soren_manifest *m, size_t i);

/* Index of the parameter called name, or -1. */
int soren_manifest_param_index(const soren_manifest *m, const char *name);

#endif /* SOREN_MANIFEST_H */
