/*
 * signals.h - what soren-host does when a signal ends a run.
 *
 * soren_signals_install (soren-host, and any program that hosts jobs for
 * good, calls it once at start; the library never installs handlers of its
 * own) sorts every signal that would end the process into one table:
 *
 *  terminate  a request to stop (SIGINT, SIGTERM, SIGHUP, ...): the
 *             temporary output file (soren_output_pending_path) is removed
 *             and the process dies of the same signal (exit status 128+N).
 *  fault      the code running faulted (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
 *             ...): one line on standard error says which plugin and job
 *             were running and, on a CPU engine thread in map, which input
 *             and byte; then as for terminate.  A SIGBUS on a page of a
 *             mapped input whose file shrank is no fault: the page reads as
 *             zeros from then on and the input is marked (soren_input_shrank),
 *             so the engine fails the run with an input error.
 *  ignore     SIGXFSZ: a write past the file size limit fails with EFBIG,
 *             which the output reports as an error naming the limit.
 *
 * SIGHUP and SIGPIPE stay ignored where they were when the program started
 * (nohup; a parent that wants EPIPE errors); the others are handled even
 * then, as a shell's background job has SIGINT ignored and must still stop
 * on kill -INT.
 */
#ifndef SOREN_SIGNALS_H
#define SOREN_SIGNALS_H

#include <stdint.h>

#include "input.h"

/* Installs the handlers of the table above, process-wide. */
void soren_signals_install(void);

/* The job soren_run is running (library path, job name), or none (NULL):
 * a fault's message names it.  Both are copied. */
void soren__signals_job(const char *library, const char *job);

/* The fault handler runs on an alternate stack, so that a plugin that
 * overflows its thread's stack is reported too: a thread that runs plugin
 * code takes one at its start and frees it at its end (which also lists
 * its map site for soren__map_sites_describe).  NULL (nothing to
 * free) where soren_signals_install was not called or memory is short. */
void *soren__signals_thread_stack(void);
void soren__signals_thread_stack_free(void *stack);

/* What a CPU engine thread is mapping: in, and the record whose fields the
 * map loop fills before each call, so setting it costs one store a chunk
 * and nothing a record.  NULL in when the thread maps nothing. */
typedef struct soren__map_site {
    const soren_input *in;
    const soren_record *record;
    soren_input_format format;
    const void *run; /* the run's progress object (or NULL): whose record it is */
    /* 0 (one record), or the records from *record on that a run map is
     * mapping at once (soren_stage.map_run) */
    uint64_t records;
} soren__map_site;

/* The record the calling thread is mapping, in buf, as a fault's message
 * names it ("FILE at byte N", "task N", "pair N of FILE"); "" when it maps
 * none.  Returns buf.  Not for a signal handler (it formats with snprintf). */
const char *soren__map_site_describe(char *buf, size_t size);

/* A record that a thread running plugin code for run (its progress object)
 * is mapping, the first found, in buf as soren__map_site_describe says it;
 * "" when none maps.  For a thread that watches the run: the others'
 * records change under it, so what it names is where one of them was a
 * moment ago. */
const char *soren__map_sites_describe(const void *run, char *buf, size_t size);

/* Where a thread has been mapping one record of run for a second or more:
 * "FILE at byte N for S s" in buf, else "".  Called from the progress
 * line's thread, ten times a second (soren_progress_watch_records). */
void soren__map_sites_slow(const void *run, char *buf, size_t size);

extern __thread soren__map_site soren__current_map __attribute__((tls_model("initial-exec")));

#endif /* SOREN_SIGNALS_H */
