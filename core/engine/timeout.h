/*
 * timeout.h - --timeout: a run that takes longer is stopped.
 *
 * A thread watches the run.  When the time is up it notes where the run is
 * (its phase and, on the CPU engine, a record being mapped) and asks it to
 * stop (soren_progress_cancel: the engines look after each chunk); a run
 * that stops then fails with a message that names the job and where it
 * was, and writes nothing.  A run that does not stop within a few seconds
 * (plugin code in an endless loop, a kernel that does not end) cannot be
 * stopped from inside the process: the watchdog says so on standard error,
 * removes the temporary output and ends the process with status 1.  In a
 * resident host that ends the host, as a fault in plugin code does, and
 * the job's client says the host stopped while running it.
 */
#ifndef SOREN_ENGINE_TIMEOUT_H
#define SOREN_ENGINE_TIMEOUT_H

#include <stdint.h>

#include "../base/progress.h"
#include "../error.h"

typedef struct soren_watchdog soren_watchdog;

/* Watches the run of job for ms milliseconds, cancelling it through
 * progress (which may be NULL: then only the end of the process stops it).
 * *w is NULL where ms is 0. */
soren_status soren__watchdog_start(soren_watchdog **w, uint64_t ms, const char *job,
                                   soren_progress *progress, soren_error *err);

/* The run ended with rc: stops watching and frees w.  Where the time ran
 * out, err says so and the run fails with SOREN_EJOB (its cancellation is
 * the timeout's doing); else rc is returned as it is. */
soren_status soren__watchdog_stop(soren_watchdog *w, soren_status rc, soren_error *err);

#endif /* SOREN_ENGINE_TIMEOUT_H */
