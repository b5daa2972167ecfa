/*
 * remote.h - a library job run in the resident host (soren_job_options'
 * host): what travels each way, the client's half and the host's.
 *
 * The request (SOREN_MSG_JOB) carries the job's manifest path and options,
 * each manifest parameter as given (text, bytes or nothing), the inputs'
 * names, and a token that names the job among the program's (its runs
 * share the GPU sessions the host keeps for it, as they would in the
 * program), and the most runs of an iteration (0: one run, as
 * soren_job_run; else as soren_job_iterate); beside it travel the
 * program's working folder, a memory file for the result, and one
 * descriptor for each input (a file opened by the program, or a memory
 * file holding a memory input's bytes).  The host runs the job, writes
 * the result into the memory file (soren_outcome_file_*: the pairs, and
 * for an iteration how it ended and the fed parameter's bytes) and
 * replies with the run's --explain line.
 *
 * The host checks the request's shape (soren_remote_request_check) before
 * it loads the plugin, and reads it (soren_remote_request_read: the
 * parameters' bytes from their memory files, the inputs' descriptors) once
 * the manifest says how many parameters the job takes.
 */
#ifndef SOREN_HOST_REMOTE_H
#define SOREN_HOST_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/result.h"
#include "../engine/job.h"
#include "../engine/options.h"
#include "../error.h"
#include "../plugin/params.h"
#include <soren/host.h>

/* One input of a library job as the program gave it. */
typedef struct soren_remote_input {
    const char *path;  /* a file, or NULL */
    const void *data;  /* else size bytes of host memory */
    size_t size;
} soren_remote_input;

/* What a job sends: values has one entry per manifest parameter. */
typedef struct soren_remote_job {
    const char *token;  /* the same for every run of one job, unique to it */
    const char *manifest_path;
    const soren_job_options *options;
    uint64_t tasks;
    uint64_t iterate; /* the most runs, feeding the manifest's iterate parameter; 0: one run */
    const soren_param_value *values;
    size_t value_count;
    const soren_remote_input *inputs;
    size_t input_count;
} soren_remote_job;

/* Runs job in the host at socket (NULL or "": the default socket): its
 * pairs in out->result (initialised by the caller, for the last stage's
 * types), for an iteration out->iterations and out->iterated, its
 * --explain line in *explain (malloc'd). */
soren_status soren_remote_run(const char *socket, const soren_remote_job *job,
                              soren_run_outcome *out, char **explain, soren_error *err);

/* A request's descriptors: the program's working folder, the result's
 * memory file, then one for each parameter given as bytes and one for each
 * input, in order. */
enum { SOREN_REMOTE_FD_CWD, SOREN_REMOTE_FD_RESULT, SOREN_REMOTE_FD_REST };

/* A parameter's bytes as the host holds them: the program's sealed memory
 * file mapped, or a copy read from an unsealed one. */
typedef struct soren_remote_bytes {
    void *mapped, *copy;
    size_t size;
} soren_remote_bytes;

/* A request as the host read it; it points into the message's fields and
 * descriptors, which stay the caller's and must outlive it. */
typedef struct soren_remote_request {
    const char *manifest_path;
    const char *token;
    /* device, engine, sample, threads, tasks and iterate from the request;
     * the rest as soren_run_options_init leaves it */
    soren_run_options options;
    soren_param_value values[SOREN_MAX_PARAMS]; /* one per manifest parameter */
    soren_remote_bytes bytes[SOREN_MAX_PARAMS]; /* the bytes behind values */
    size_t value_count;
    soren_job_input *inputs;                    /* input_count, by descriptor */
    size_t input_count;
    int cwd_fd;    /* the program's working folder */
    int result_fd; /* the memory file the pairs go to */
} soren_remote_request;

/* Checks the shape of a request of count fields that came with nfds
 * descriptors: each parameter's and input's tag, as many descriptors as
 * they need, a known device and engine.  A SOREN_EUSAGE error says what is
 * malformed. */
soren_status soren_remote_request_check(char *const *fields, size_t count, size_t nfds,
                                        soren_error *err);

/* Reads a checked request for job (its name in messages) of param_count
 * parameters: a request that gives another count was made for another
 * version of the plugin.  r is filled even on failure, and
 * soren_remote_request_destroy frees what it holds either way. */
soren_status soren_remote_request_read(soren_remote_request *r, const char *job,
                                       size_t param_count, char *const *fields, size_t count,
                                       const int *fds, soren_error *err);
void soren_remote_request_destroy(soren_remote_request *r);

/* A run's outcome written to fd from offset 0, and read back: a header of
 * six 64-bit words (pair count, key bytes, value size, key type, value
 * type, 1 where the run iterated), then the count + 1 key offsets, the
 * key bytes and the values; where it iterated, five words more (runs,
 * their limit, converged, the runs on the device, the fed parameter's
 * size) and the fed parameter's bytes.  Read: out->result initialised for
 * the last stage's types; every size is checked against the file's. */
soren_status soren_outcome_file_write(int fd, const soren_run_outcome *o, soren_error *err);
soren_status soren_outcome_file_read(int fd, soren_run_outcome *out, soren_error *err);

#endif /* SOREN_HOST_REMOTE_H */
