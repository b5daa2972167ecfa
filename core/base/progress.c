/* progress.c - the progress line: counters the run updates, and the thread
 * that draws them. */
#include "progress.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/* At most ten frames a second: enough to look alive, and a terminal that
 * redraws costs nothing measurable. */
#define FRAME_SECONDS 0.1

struct soren_progress {
    FILE *stream;
    pthread_mutex_t lock; /* the stream and every field below but done */
    pthread_cond_t wake;  /* a phase began, or the end came */
    pthread_t thread;
    int drawing;          /* the thread was started and not yet joined */
    int ended;
    const char *phase;    /* NULL until the first */
    uint64_t total;       /* bytes of the phase; 0: it counts none */
    double phase_start;   /* seconds on the monotonic clock */
    double last_frame;    /* when the last frame was drawn; < 0: never */
    size_t width;         /* characters of the line now shown; 0: none */
    soren_progress_slow_fn *slow; /* names a slow record; NULL: nobody asked */
    /* Outside the lock: the engines' threads add to it after every chunk,
     * and read cancelled there. */
    atomic_uint_fast64_t done;
    atomic_int cancelled;
};

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- Composing a frame --------------------------------------------------- */

static void format_bytes(char *buf, size_t size, double n)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (n < 1024) {
        snprintf(buf, size, "%.0f B", n);
        return;
    }
    size_t u = 0;
    for (n /= 1024; n >= 1024 && u + 1 < sizeof units / sizeof units[0]; n /= 1024)
        u++;
    snprintf(buf, size, "%.1f %s", n, units[u]);
}

/* m:ss under an hour, then XhYYm. */
static void format_duration(char *buf, size_t size, double seconds)
{
    unsigned long long s = seconds > 0 ? (unsigned long long)(seconds + 0.5) : 0;
    if (s >= 3600)
        snprintf(buf, size, "%lluh%02llum", s / 3600, s / 60 % 60);
    else
        snprintf(buf, size, "%llu:%02llu", s / 60, s % 60);
}

/* The line for the current phase at time now. */
static void compose(const soren_progress *p, double now, char *line, size_t size)
{
    uint64_t done = atomic_load_explicit(&p->done, memory_order_relaxed);
    if (p->total && done > p->total)
        done = p->total;
    double elapsed = now - p->phase_start;
    double rate = elapsed > 0 ? (double)done / elapsed : 0;
    char d[32], t[32], r[32], span[32];
    format_bytes(d, sizeof d, (double)done);
    format_bytes(r, sizeof r, rate);
    if (p->total) {
        format_bytes(t, sizeof t, (double)p->total);
        int percent = (int)((double)done * 100 / (double)p->total);
        if (rate > 0) {
            format_duration(span, sizeof span, (double)(p->total - done) / rate);
            snprintf(line, size, "soren-host: %s %s of %s (%d%%), %s/s, %s left", p->phase, d,
                     t, percent, r, span);
        } else {
            snprintf(line, size, "soren-host: %s %s of %s (%d%%)", p->phase, d, t, percent);
        }
    } else {
        format_duration(span, sizeof span, elapsed);
        if (done)
            snprintf(line, size, "soren-host: %s %s, %s/s, %s elapsed", p->phase, d, r, span);
        else
            snprintf(line, size, "soren-host: %s, %s elapsed", p->phase, span);
    }
}

/* The frame, with the record the run has been mapping for a second or
 * more where there is one. */
static void compose_frame(const soren_progress *p, double now, char *line, size_t size)
{
    compose(p, now, line, size);
    char slow[400] = "";
    if (p->slow)
        p->slow(p, slow, sizeof slow);
    size_t n = strlen(line);
    if (slow[0] && n < size)
        snprintf(line + n, size - n, "; mapping %s", slow);
}

/* ---- Drawing (with the lock held) ---------------------------------------- */

/* Columns of the terminal behind stream, or 0 when it is not one. */
static size_t terminal_columns(FILE *stream)
{
    struct winsize ws;
    if (ioctl(fileno(stream), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 0;
}

static void pad(FILE *f, size_t n)
{
    while (n--)
        fputc(' ', f);
}

/* A line wider than the terminal would wrap, and \r would then return only
 * to the start of its last row: the frame is cut to fit instead.  A shorter
 * frame than the last is padded with spaces over the rest of it. */
static void draw(soren_progress *p, double now)
{
    char line[768];
    compose_frame(p, now, line, sizeof line);
    size_t n = strlen(line), cols = terminal_columns(p->stream);
    if (cols && n >= cols)
        n = cols - 1;
    fputc('\r', p->stream);
    fwrite(line, 1, n, p->stream);
    if (p->width > n)
        pad(p->stream, p->width - n);
    fflush(p->stream);
    p->width = n;
    p->last_frame = now;
}

static void wipe(soren_progress *p)
{
    if (!p->width)
        return;
    fputc('\r', p->stream);
    pad(p->stream, p->width);
    fputc('\r', p->stream);
    fflush(p->stream);
    p->width = 0;
}

/* Draws the first frame of the first phase at once, then one every
 * FRAME_SECONDS; a phase that starts sooner waits for the next tick. */
static void *draw_main(void *arg)
{
    soren_progress *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->ended) {
        double now = now_seconds();
        if (p->phase && (p->last_frame < 0 || now - p->last_frame >= FRAME_SECONDS))
            draw(p, now);
        double at = (p->last_frame < 0 ? now : p->last_frame) + FRAME_SECONDS;
        struct timespec ts = {(time_t)at, (long)((at - (double)(time_t)at) * 1e9)};
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_nsec = 999999999L;
        pthread_cond_timedwait(&p->wake, &p->lock, &ts);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* ---- The interface ------------------------------------------------------- */

soren_progress *soren_progress_new(FILE *stream, int draw, soren_error *err)
{
    soren_progress *p = calloc(1, sizeof *p);
    if (!p) {
        soren_error_set(err, SOREN_ENOMEM, "out of memory starting the progress line");
        return NULL;
    }
    p->stream = stream;
    p->last_frame = -1;
    atomic_init(&p->done, 0);
    atomic_init(&p->cancelled, 0);
    /* The waits are deadlines on the monotonic clock, as now_seconds. */
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc == 0) {
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        rc = pthread_cond_init(&p->wake, &attr);
        pthread_condattr_destroy(&attr);
    }
    if (rc != 0) {
        free(p);
        soren_error_errno(err, SOREN_ENOMEM, rc, "cannot start the progress line");
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    if (!draw)
        return p;
    rc = pthread_create(&p->thread, NULL, draw_main, p);
    if (rc != 0) {
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->lock);
        free(p);
        soren_error_errno(err, SOREN_ENOMEM, rc,
                          "cannot start the progress line's thread; run with --no-progress");
        return NULL;
    }
    p->drawing = 1;
    return p;
}

void soren_progress_phase(soren_progress *p, const char *phase, uint64_t total)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->phase = phase;
    p->total = total;
    p->phase_start = now_seconds();
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
}

void soren_progress_add(soren_progress *p, uint64_t bytes)
{
    if (p)
        atomic_fetch_add_explicit(&p->done, bytes, memory_order_relaxed);
}

void soren_progress_say(soren_progress *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!p) {
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        return;
    }
    pthread_mutex_lock(&p->lock);
    wipe(p);
    vfprintf(p->stream, fmt, ap);
    fflush(p->stream);
    pthread_mutex_unlock(&p->lock);
    va_end(ap);
}

void soren_progress_cancel(soren_progress *p)
{
    if (p)
        atomic_store(&p->cancelled, 1);
}

soren_status soren_progress_check(soren_progress *p, const char *job, soren_error *err)
{
    if (!p || !atomic_load_explicit(&p->cancelled, memory_order_relaxed))
        return SOREN_OK;
    return soren_error_set(err, SOREN_EJOB, "%s: the run was cancelled", job);
}

void soren_progress_watch_records(soren_progress *p, soren_progress_slow_fn *slow)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->slow = slow;
    pthread_mutex_unlock(&p->lock);
}

const char *soren_progress_current_phase(soren_progress *p)
{
    if (!p)
        return NULL;
    pthread_mutex_lock(&p->lock);
    const char *phase = p->phase;
    pthread_mutex_unlock(&p->lock);
    return phase;
}

FILE *soren_progress_stream(const soren_progress *p)
{
    return p ? p->stream : stderr;
}

void soren_progress_end(soren_progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->ended = 1;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    if (p->drawing) {
        pthread_join(p->thread, NULL);
        p->drawing = 0;
    }
    pthread_mutex_lock(&p->lock);
    wipe(p);
    pthread_mutex_unlock(&p->lock);
}

void soren_progress_free(soren_progress *p)
{
    if (!p)
        return;
    soren_progress_end(p);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
