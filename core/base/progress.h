/*
 * progress.h - how far a run has got, and the line on a terminal that says so.
 *
 * The run names each phase as it starts ("read", "upload", "split",
 * "monitor", "map", "merge", "reduce", "order", "download", "write"), with
 * the bytes the phase goes through where they are counted; the CPU engine
 * adds the bytes of every chunk it has mapped (one atomic add per 1 MiB
 * chunk, never one per record), the GPU engine every chunk it uploads.  A
 * thread of the progress object's own draws one line on its stream at most
 * ten times a second, each frame over the last with a carriage return:
 *
 *   soren-host: map 3.2 MiB of 8.0 MiB (40%), 12.1 MiB/s, 0:01 left
 *   soren-host: merge, 0:02 elapsed
 *
 * and soren_progress_end wipes it, so the terminal is left as it was.  The
 * caller decides whether to draw at all (soren-host: when standard error is
 * a terminal, or --progress); the writer only draws.  Every function takes
 * a NULL progress and then does nothing (soren_progress_say still prints),
 * so the engines report without asking whether anyone listens.
 */
#ifndef SOREN_PROGRESS_H
#define SOREN_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../error.h"

typedef struct soren_progress soren_progress;

/* Starts drawing on stream (nothing shows until the first phase), or with
 * draw 0 only carries the run's messages to stream (the resident host's
 * jobs speak on their client's standard error, a terminal or not).  NULL
 * with err set if the memory or the drawing thread cannot be had. */
soren_progress *soren_progress_new(FILE *stream, int draw, soren_error *err);

/* A new phase (a string that outlives the run) starts; total is the bytes
 * it goes through, or 0 when it counts none (the line then shows the time
 * spent).  The bytes done start again from 0. */
void soren_progress_phase(soren_progress *p, const char *phase, uint64_t total);
/* bytes more of the current phase are done; safe from any thread. */
void soren_progress_add(soren_progress *p, uint64_t bytes);

/* Prints a message on p's stream (standard error when p is NULL) without
 * tearing the progress line: the line is wiped first and redrawn by the
 * next frame. */
void soren_progress_say(soren_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Asks the run to stop (safe from any thread): the engines look after each
 * chunk, and soren_progress_check then fails the run with SOREN_EJOB.  The
 * resident host cancels the job of a client that went away. */
void soren_progress_cancel(soren_progress *p);
soren_status soren_progress_check(soren_progress *p, const char *job, soren_error *err);

/* Names a record that the run whose progress object is run has been
 * mapping for a second or more, in buf ("" when none). */
typedef void soren_progress_slow_fn(const void *run, char *buf, size_t size);
/* Each frame of the line then ends with the record slow names, if any:
 * "..., 0:07 left; mapping big.txt at byte 1234 for 3 s".  The engines
 * know where they map; the orchestration, above both, sets it. */
void soren_progress_watch_records(soren_progress *p, soren_progress_slow_fn *slow);
/* The phase the run is in ("map", ...), NULL before the first or for a
 * NULL p; safe from any thread. */
const char *soren_progress_current_phase(soren_progress *p);
/* Where p's messages go: its stream, or standard error when p is NULL. */
FILE *soren_progress_stream(const soren_progress *p);

/* Stops drawing and wipes the line; later calls draw nothing.  Idempotent. */
void soren_progress_end(soren_progress *p);
/* Ends p and frees it. */
void soren_progress_free(soren_progress *p);

#endif /* SOREN_PROGRESS_H */
