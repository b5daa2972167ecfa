/*
 * host.h - running Soren jobs from a program: libsoren's API.
 *
 * A job is a plugin (NAME.so beside NAME.json) opened once, set up with its
 * parameters and inputs, and run as often as needed: after a run its pairs
 * are read in place (in host or device memory), its parameters may change,
 * and it runs again.
 *
 *     #include <soren/host.h>
 *
 *     soren_error err;
 *     soren_plugin *p = NULL;
 *     soren_job *job = NULL;
 *     soren_pairs out;
 *     if (soren_open("wordcount", &p, &err) != SOREN_OK ||
 *         soren_job_new(p, NULL, &job, &err) != SOREN_OK ||
 *         soren_job_input_file(job, "book.txt", &err) != SOREN_OK ||
 *         soren_job_run(job, &err) != SOREN_OK ||
 *         soren_job_result(job, &out, &err) != SOREN_OK) {
 *         fprintf(stderr, "%s\n", err.text);
 *         ...
 *     }
 *     for (uint64_t i = 0; i < out.count; i++) ... soren_pairs_key(&out, i, &size) ...
 *     soren_job_free(job);
 *     soren_close(p);
 *
 * Build with `pkg-config --cflags --libs soren`.  Every call returns a
 * soren_status and fills the caller's soren_error on failure (soren/error.h);
 * nothing is printed.  err may be NULL: the status still tells failure from
 * success, only the words are lost.  Every other pointer argument must be
 * valid unless its call says NULL is fine: a NULL one is refused with
 * SOREN_EUSAGE and a message naming the call and the argument (the calls
 * that return no status do nothing with a NULL, soren_job_explain returns
 * NULL; the inline soren_pairs_key and soren_pairs_value check nothing).
 * A job is used by one thread at a time; separate jobs may run in separate
 * threads.
 */
#ifndef SOREN_HOST_H
#define SOREN_HOST_H

#include <stddef.h>
#include <stdint.h>

#include <soren/error.h>
#include <soren/soren.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Plugins -------------------------------------------------------------- */

typedef struct soren_plugin soren_plugin;

/* Opens a plugin by name (searched for as NAME.json in $SOREN_PLUGIN_PATH,
 * $XDG_DATA_HOME/soren/plugins and the installed plugin folder, as
 * soren-host does) or by path (NAME.json, or NAME.so beside it): reads and
 * checks its manifest, and that nobody but its owner can write to it.  Its
 * library is loaded and checked as `soren-host check` does (its ABI, its
 * agreement with the manifest) by the first soren_job_new that runs a job
 * in this process; jobs in a resident host leave that to the host, and the
 * process never loads the library, its device code or what it links. */
soren_status soren_open(const char *name_or_path, soren_plugin **out, soren_error *err);
/* Closes the plugin; its jobs must be freed first.  NULL is fine.  A plugin
 * with device code stays mapped until the process ends (the CUDA runtime
 * cannot take its device code back and load it again). */
void soren_close(soren_plugin *p);

/* ---- Jobs ----------------------------------------------------------------- */

typedef struct soren_job soren_job;

/* Where a job runs. */
typedef enum soren_device {
    SOREN_DEVICE_AUTO = 0, /* a usable GPU, else the CPU engine */
    SOREN_DEVICE_CPU,
    SOREN_DEVICE_GPU,      /* fails, saying why, where no GPU can run the job */
    SOREN_DEVICE_BOTH      /* the GPU and the CPU engine together: stage 1's input
                              shared between them by their measured rates (fails
                              as SOREN_DEVICE_GPU does) */
} soren_device;

typedef struct soren_job_options {
    soren_device device;
    const char *engine;   /* "auto" or a GPU variant: "hash", "block", "direct", "dense",
                             "sort" (soren-host run --engine); copied */
    double sample;        /* monitoring: the fraction of records mapped first (0: none) */
    unsigned threads;     /* CPU engine threads; 0: every CPU */
    /* Where the job runs: NULL, in this process; else in the resident host
     * (soren-host serve) at this socket, "" for its default one
     * ($SOREN_HOST, else $XDG_RUNTIME_DIR/soren/host.sock).  The host keeps
     * the GPUs' contexts, the plugin and the job's GPU session from run to
     * run; the pairs are copied back, and every other call works as in the
     * process, but for device memory (soren_job_input_device,
     * soren_job_result_device), which stays the process's own.  A run
     * fails with SOREN_EDEVICE, saying so, where no host answers.  Copied. */
    const char *host;
} soren_job_options;

/* The defaults: device auto, engine "auto", sample 0.2, every CPU, in this
 * process. */
void soren_job_options_init(soren_job_options *o);

/* Whether a resident host answers at socket (NULL or "": the default one,
 * as for soren_job_options.host): 1 where one does; 0 where none serves
 * there (no socket, or nobody listening); -1 where the socket or its
 * folder is not safe to use (another user's, too open), err saying why.
 * A program that runs its jobs in a host where one is up, and in its own
 * process otherwise, asks this first. */
int soren_host_answers(const char *socket, soren_error *err);

/* A job of plugin p (which must outlive it), with options o (NULL: the
 * defaults).  Its parameters start at their manifest defaults.  A job in
 * this process (o->host NULL) fails with SOREN_EPLUGIN where p's library
 * does not load or disagrees with its manifest. */
soren_status soren_job_new(soren_plugin *p, const soren_job_options *o, soren_job **out,
                           soren_error *err);
/* Frees the job and everything it holds.  NULL is fine. */
void soren_job_free(soren_job *job);

/* Sets parameter name from text, as `--param name=text` does: a pattern, a
 * string, or a number in decimal (digits, a minus sign for i64, a point and
 * an exponent for f32 and f64: 10, -3, 1.5e-3; no leading zeros, spaces, 0x,
 * inf or nan; a value past the type's range is refused); "@FILE" takes the
 * bytes of FILE, a regular file of at most 256 MiB (a pipe, FIFO or device
 * is refused).  The text is checked at once. */
soren_status soren_job_param(soren_job *job, const char *name, const char *text,
                             soren_error *err);
/* Sets parameter name to size bytes as map sees them: a string's bytes, a
 * number in native layout (its exact width); data NULL gives no bytes.
 * Copied; a regex parameter takes text only. */
soren_status soren_job_param_bytes(soren_job *job, const char *name, const void *data,
                                   size_t size, soren_error *err);
/* The same, read where they are instead of copied, as memory inputs are:
 * the caller keeps the bytes, unchanged, until the parameter is set again
 * or the job freed.  For large parameters set once and run many times. */
soren_status soren_job_param_bytes_in_place(soren_job *job, const char *name, const void *data,
                                            size_t size, soren_error *err);

/* Inputs, used by every run until soren_job_clear_inputs.  Files are mapped
 * when the next run starts; memory inputs are read where they are, so the
 * caller keeps them unchanged while a run is under way.  Records never span
 * two inputs.  A job with index input takes soren_job_tasks instead. */
soren_status soren_job_input_file(soren_job *job, const char *path, soren_error *err);
soren_status soren_job_input_memory(soren_job *job, const void *data, size_t size,
                                    soren_error *err);
/* An input already in device memory (a GPU job only; data from cudaMalloc
 * or any 16-byte aligned device pointer of the job's GPU), read where it
 * is: no copy, and the caller may change its bytes between runs. */
soren_status soren_job_input_device(soren_job *job, const void *data, size_t size,
                                    soren_error *err);
/* The task count of a job with index input (default: its manifest's). */
soren_status soren_job_tasks(soren_job *job, uint64_t count, soren_error *err);
void soren_job_clear_inputs(soren_job *job);

/* Runs the job over its inputs with its current parameters.  The previous
 * run's result is released first. */
soren_status soren_job_run(soren_job *job, soren_error *err);

/* How soren_job_iterate ended. */
typedef struct soren_iteration {
    uint64_t runs;        /* the runs made, 1 to the most allowed */
    uint64_t device_runs; /* of them, those that looped on the GPU without the program
                             between them */
    int converged;        /* 1: the last run's output changed no byte of the parameter */
    /* The fed parameter's bytes as the last run read them, which the job
     * keeps as that parameter's value: valid until the parameter is set
     * again, the job iterates again, or it is freed. */
    const void *param;
    size_t param_size;
} soren_iteration;

/* Runs the job up to most times, as soren-host run --iterate does: after
 * each run its pairs (i, v) are written over element i of the parameter
 * the manifest's "iterate" names (v's size in bytes from byte i x that
 * size), and a run whose output changes no byte of it ends the loop.  On
 * the GPU the runs after the first loop on the device, the program waiting
 * once for a batch of them (about 50 ms of runs).  The result is the last
 * run's; *how says how it ended.  A job made for the resident host
 * (soren_job_options.host) iterates there, the fed parameter coming back
 * with the result.  A job whose manifest has no "iterate" is a
 * SOREN_EUSAGE error. */
soren_status soren_job_iterate(soren_job *job, uint64_t most, soren_iteration *how,
                               soren_error *err);

/* ---- Results -------------------------------------------------------------- */

/* The pairs of the last run, in the order the manifest (or nothing else)
 * gives, valid until the next run or soren_job_free.  Pair i's key is
 * key_bytes[key_offset[i] .. key_offset[i + 1]) (a typed key is its native
 * bytes), its value the value_size bytes at values + i * value_size. */
typedef struct soren_pairs {
    uint64_t count;
    const uint8_t *key_bytes;
    const uint64_t *key_offset; /* count + 1 entries; NULL when count is 0 */
    const uint8_t *values;
    size_t value_size;
    soren_type key_type;
    soren_type value_type;
} soren_pairs;

soren_status soren_job_result(soren_job *job, soren_pairs *out, soren_error *err);

/* The same pairs in device memory, where the last run was on the GPU: the
 * same layout, device pointers, valid until the next run.  A run on the
 * GPU keeps its stream, buffers and variant for the next, so a job run
 * again over data of the same shape allocates nothing. */
soren_status soren_job_result_device(soren_job *job, soren_pairs *out, soren_error *err);

/* Pair i's key and its size. */
static inline const uint8_t *soren_pairs_key(const soren_pairs *p, uint64_t i, uint64_t *size)
{
    *size = p->key_offset[i + 1] - p->key_offset[i];
    return p->key_bytes + p->key_offset[i];
}

/* Pair i's value. */
static inline const void *soren_pairs_value(const soren_pairs *p, uint64_t i)
{
    return p->values + i * p->value_size;
}

/* Writes the last run's pairs to path ("-": standard output) in format
 * "tsv", "csv", "json" or "jsonl" (NULL: "tsv"), as soren-host does; a
 * failed write leaves no file. */
soren_status soren_job_write(soren_job *job, const char *path, const char *format,
                             soren_error *err);

/* The last run's report as one line of JSON (soren-host --explain's, see
 * share/explain.schema.json): the metrics, the variant and why, the sizes,
 * every overflow, the phase times in milliseconds.  Owned by the job; NULL
 * before the first successful run, and for a NULL job. */
const char *soren_job_explain(soren_job *job);

#ifdef __cplusplus
}
#endif

#endif /* SOREN_HOST_H */
