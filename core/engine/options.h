/*
 * options.h - what one run is asked to do: the options soren-host's command
 * line fills (core/cli/args.c) and soren_run reads, with their defaults
 * and the names --engine accepts.  Apart from the job so that the command
 * line parser stands alone (tests/fuzz/fuzz_cli.c builds it without the
 * engines).
 */
#ifndef SOREN_OPTIONS_H
#define SOREN_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "../base/progress.h"
#include "../gpu/device.h"
#include "../gpu/engine.h"
#include "../io/output.h"
#include "dist.h"

/* The most GPUs one run spreads over in one process. */
#define SOREN_MAX_DEVICES 16
/* The GPU sessions of one run on one GPU: a stage's map at its index, and
 * the fold of the pairs a distributed run's rank received in that stage
 * SOREN_MAX_STAGES after it. */
#define SOREN_RANK_SESSIONS (2 * SOREN_MAX_STAGES)
/* ... and of a run of soren_run over every GPU it may use. */
#define SOREN_RUN_SESSIONS (SOREN_RANK_SESSIONS * SOREN_MAX_DEVICES)

/* A run for a client of the resident host (core/host/): the client opened
 * its inputs and output, and the host reads and writes what it was handed,
 * so a path means what it means to the client and nothing the client may
 * not read is read.  The descriptors stay the caller's. */
typedef struct soren_client_files {
    const int *input_fds; /* one for each of the run's inputs, in order */
    int stdin_fd;         /* read where the run has no inputs */
    int output_fd;        /* the result is written here as it is: the client
                             made the temporary file and renames it */
} soren_client_files;

typedef struct soren_run_options {
    const char *const *inputs; /* files; none: standard input */
    size_t input_count;
    const char *output;        /* NULL or "-": standard output */
    soren_format format;
    int order;                 /* -1: the manifest's output.order; else a soren_order */
    uint64_t top;              /* keep the first top pairs; 0: the manifest's output.limit */
    soren_device device;
    const char *engine;        /* "auto" or a variant name (see soren_engine_names) */
    double sample;             /* fraction of the records monitoring maps; 0: none */
    uint64_t small_keys;       /* auto picks block under this many distinct keys */
    /* Initial region sizes (0: projected); the variant, sample and
     * small_keys are set from the fields above.  The CPU engine takes
     * table_slots as its per-thread tables' first size. */
    soren_gpu_options gpu;
    unsigned threads;          /* CPU engine; 0: every online CPU */
    uint64_t tasks;            /* index input: the task count (--tasks); 0: the manifest's */
    uint64_t iterate;          /* --iterate N: up to N runs, fed by the output; 0: one run */
    const char *const *params; /* "name=value" / "name=@file" */
    size_t param_count;
    int verbose;               /* report decisions on stderr */
    int explain;               /* after a successful run, the JSON report on stderr */
    soren_progress *progress;  /* the progress line, or NULL; verbose lines go through it */
    const soren_comm *comm;    /* the ranks of a distributed run; NULL: one process */
    /* The library's jobs: SOREN_RANK_SESSIONS GPU sessions, made by the
     * first run on the GPU and kept by the caller; NULL: every run sets up
     * anew.  A run of soren_run over several GPUs (--devices) takes
     * SOREN_RUN_SESSIONS: the GPU of rank r keeps its own from
     * r * SOREN_RANK_SESSIONS. */
    soren_gpu_session **gpu_sessions;
    /* ... and each parameter's version, which changes whenever its value
     * does: a session uploads only the parameters whose version it does
     * not hold.  NULL: every run uploads them all. */
    const uint64_t *param_versions;
    int output_parts;          /* --output-parts: each rank writes OUTPUT.part-R-of-N */
    /* --device-memory: the device memory a run may take, which sizes the
     * chunks a large input is cut into (soren_chunk_bytes); 0: on the GPU
     * its free memory less headroom, on the CPU engine no chunks. */
    uint64_t device_memory;
    const soren_client_files *client; /* NULL: the process's own files */
    /* --devices: the GPUs one run spreads over, a rank on each in a thread
     * of this process (ranks.h); device_count 0: one GPU.  devices_all:
     * every usable GPU, counted when the run starts. */
    int devices[SOREN_MAX_DEVICES];
    size_t device_count;
    int devices_all;
    /* Why the run takes the GPUs it does, where its caller chose them (a
     * resident host, by soren_choose_devices), for --explain and --verbose;
     * NULL: --devices as given, or soren_run chooses. */
    const char *devices_rule;
    /* Where not NULL, a run that succeeds writes here the pairs its first
     * stage left, every rank's together: what a resident host remembers
     * of a job to choose its GPUs the next time. */
    uint64_t *first_pairs;
    /* --timeout: a run that takes longer is stopped (timeout.h); 0: none */
    uint64_t timeout_ms;
} soren_run_options;

/* Zeroes o and sets the defaults: engine "auto", order -1 (the
 * manifest's), sample SOREN_SAMPLE_DEFAULT, small_keys
 * SOREN_SMALL_KEYS_DEFAULT. */
void soren_run_options_init(soren_run_options *o);

/* The values --engine accepts, space-separated. */
extern const char soren_engine_names[];
/* 1 if name is one of soren_engine_names. */
int soren_engine_name_valid(const char *name);

#endif /* SOREN_OPTIONS_H */
