#include "timeout.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../io/output.h"
#include "../io/signals.h"

/* How long a run asked to stop may take to do so. */
enum { GRACE_MS = 3000 };

struct soren_watchdog {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t ended_cond;
    int ended, fired;
    uint64_t ms;
    soren_progress *progress;
    char job[128];
    char where[600]; /* where the run was when the time ran out */
};

/* ms milliseconds from now on the monotonic clock. */
static struct timespec after_ms(uint64_t ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += (time_t)(ms / 1000);
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Waits, holding w->lock, until the run ends or ms pass; 1 if it ended. */
static int wait_end(soren_watchdog *w, uint64_t ms)
{
    struct timespec until = after_ms(ms);
    while (!w->ended && pthread_cond_timedwait(&w->ended_cond, &w->lock, &until) == 0)
        ;
    return w->ended;
}

static void *watch(void *arg)
{
    soren_watchdog *w = arg;
    pthread_mutex_lock(&w->lock);
    if (wait_end(w, w->ms)) {
        pthread_mutex_unlock(&w->lock);
        return NULL;
    }
    const char *phase = soren_progress_current_phase(w->progress);
    char site[512];
    soren__map_sites_describe(w->progress, site, sizeof site);
    snprintf(w->where, sizeof w->where, "in phase %s%s%s", phase ? phase : "start",
             site[0] ? ", mapping " : "", site);
    w->fired = 1;
    pthread_mutex_unlock(&w->lock);
    soren_progress_cancel(w->progress);
    pthread_mutex_lock(&w->lock);
    if (wait_end(w, GRACE_MS)) {
        pthread_mutex_unlock(&w->lock);
        return NULL;
    }
    fprintf(stderr, "soren-host: %s ran longer than --timeout %llu s (%s) and did not stop "
            "when asked: ending the process, nothing written\n", w->job,
            (unsigned long long)(w->ms / 1000), w->where);
    fflush(stderr);
    const char *pending = soren_output_pending_path();
    if (pending)
        unlink(pending);
    _exit(1);
}

soren_status soren__watchdog_start(soren_watchdog **w, uint64_t ms, const char *job,
                                   soren_progress *progress, soren_error *err)
{
    *w = NULL;
    if (!ms)
        return SOREN_OK;
    soren_watchdog *d = calloc(1, sizeof *d);
    if (!d)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    d->ms = ms;
    d->progress = progress;
    snprintf(d->job, sizeof d->job, "%s", job);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->ended_cond, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&d->thread, NULL, watch, d) != 0) {
        pthread_cond_destroy(&d->ended_cond);
        pthread_mutex_destroy(&d->lock);
        free(d);
        return soren_error_set(err, SOREN_ENOMEM, "cannot start the thread that watches "
                               "--timeout");
    }
    *w = d;
    return SOREN_OK;
}

soren_status soren__watchdog_stop(soren_watchdog *w, soren_status rc, soren_error *err)
{
    if (!w)
        return rc;
    pthread_mutex_lock(&w->lock);
    w->ended = 1;
    pthread_cond_signal(&w->ended_cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    if (w->fired) {
        soren_error_clear(err); /* the cancellation's, which the timeout explains */
        rc = soren_error_set(err, SOREN_EJOB, "%s ran longer than --timeout %llu s and was "
                             "stopped (%s); nothing was written", w->job,
                             (unsigned long long)(w->ms / 1000), w->where);
    }
    pthread_cond_destroy(&w->ended_cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
    return rc;
}
