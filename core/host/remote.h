/*
 * remote.h - a library job run in the resident host (soren_job_options'
 * host): what travels each way, and the client's half.
 *
 * The request (SOREN_MSG_JOB) carries the job's manifest path and options,
 * each manifest parameter as given (text, bytes or nothing), the inputs'
 * names, and a token that names the job among the program's (its runs
 * share the GPU sessions the host keeps for it, as they would in the
 * program); beside it travel the program's working folder, a memory
 * file for the result, and one descriptor for each input (a file opened
 * by the program, or a memory file holding a memory input's bytes).  The
 * host runs the job as soren_job_run would, writes the result's pairs
 * into the memory file (soren_pairs_file_*) and replies with the run's
 * --explain line.
 */
#ifndef SOREN_HOST_REMOTE_H
#define SOREN_HOST_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/result.h"
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
    const soren_param_value *values;
    size_t value_count;
    const soren_remote_input *inputs;
    size_t input_count;
} soren_remote_job;

/* Runs job in the host at socket (NULL or "": the default socket): its
 * pairs in *out (initialised by the caller, for the last stage's types),
 * its --explain line in *explain (malloc'd). */
soren_status soren_remote_run(const char *socket, const soren_remote_job *job,
                              soren_result *out, char **explain, soren_error *err);

/* The pairs of r written to fd from offset 0, and read back: a header of
 * six 64-bit words (count, key bytes, value size, key type, value type,
 * 0), then the count + 1 key offsets, the key bytes and the values. */
soren_status soren_pairs_file_write(int fd, const soren_result *r, soren_error *err);
soren_status soren_pairs_file_read(int fd, soren_result *out, soren_error *err);

#endif /* SOREN_HOST_REMOTE_H */
