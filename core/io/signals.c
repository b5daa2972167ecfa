/* signals.c - soren-host's signal handlers: a partial output never
 * survives, a plugin's fault is named, a shrinking input is an input error.
 * Everything a handler calls is async-signal-safe: write(2), unlink(2),
 * mmap(2), sigaction(2), raise(3), and formatting by hand into a local
 * buffer. */
#include "signals.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "output.h"

__thread soren__map_site soren__current_map __attribute__((tls_model("initial-exec")));

enum signal_class { TERMINATE, FAULT, IGNORE };

/* Every signal whose default action ends the process, less SIGKILL and
 * SIGSTOP (which no handler sees), SIGTRAP (debuggers own it) and the
 * real-time signals (libraries such as the C library's threads use some). */
static const struct {
    int sig;
    const char *name;
    enum signal_class class;
} table[] = {
    /* Requests to stop, from a terminal, a supervisor or a timer. */
    {SIGHUP, "SIGHUP", TERMINATE},
    {SIGINT, "SIGINT", TERMINATE},
    {SIGQUIT, "SIGQUIT", TERMINATE},
    {SIGTERM, "SIGTERM", TERMINATE},
    {SIGUSR1, "SIGUSR1", TERMINATE},
    {SIGUSR2, "SIGUSR2", TERMINATE},
    {SIGALRM, "SIGALRM", TERMINATE},
    {SIGVTALRM, "SIGVTALRM", TERMINATE},
    {SIGPROF, "SIGPROF", TERMINATE},
    /* The CPU time limit (ulimit -t) is a request to stop too. */
    {SIGXCPU, "SIGXCPU", TERMINATE},
    /* A reader of standard output or error that went away: the run is
     * unwanted, so it stops as if asked to. */
    {SIGPIPE, "SIGPIPE", TERMINATE},
#ifdef SIGPWR
    {SIGPWR, "SIGPWR", TERMINATE},
#endif
#ifdef SIGSTKFLT
    {SIGSTKFLT, "SIGSTKFLT", TERMINATE},
#endif
    /* Raised by the instruction that failed: the code running (a plugin's,
     * in a run) is at fault.  SIGBUS is also a read past the end of a
     * mapped input that shrank, which soren__input_fault takes. */
    {SIGSEGV, "SIGSEGV", FAULT},
    {SIGBUS, "SIGBUS", FAULT},
    {SIGILL, "SIGILL", FAULT},
    {SIGFPE, "SIGFPE", FAULT},
    /* abort(3) (a failed assert) and a forbidden system call: a fault of
     * the code that made them. */
    {SIGABRT, "SIGABRT", FAULT},
    {SIGSYS, "SIGSYS", FAULT},
    /* A write past the file size limit (ulimit -f) then fails with EFBIG,
     * which the output reports, naming the limit, instead of dying. */
    {SIGXFSZ, "SIGXFSZ", IGNORE},
};

/* The running job, for a fault's message: static copies a handler reads. */
static char job_library[PATH_MAX];
static char job_name[256];
static volatile sig_atomic_t job_set;

void soren__signals_job(const char *library, const char *job)
{
    job_set = 0;
    if (!library || !job || strlen(library) >= sizeof job_library ||
        strlen(job) >= sizeof job_name)
        return;
    strcpy(job_library, library);
    strcpy(job_name, job);
    job_set = 1;
}

static const char *signal_name(int sig)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].sig == sig)
            return table[i].name;
    return "a signal";
}

/* A message built in a fixed buffer, cut short where it is full. */
typedef struct line {
    char buf[2 * PATH_MAX + 512];
    size_t n;
} line;

static void put(line *l, const char *s)
{
    while (*s && l->n < sizeof l->buf - 1)
        l->buf[l->n++] = *s++;
}

static void put_u64(line *l, uint64_t v)
{
    char tmp[SOREN_U64_DIGITS + 1];
    tmp[SOREN_U64_DIGITS] = '\0';
    put(l, soren__u64_digits(tmp, v));
}

/* The record m's thread is mapping: "FILE at byte N", "task N" or
 * "pair N of FILE"; for a run map's records "one of tasks N to M" or "one
 * of the records of FILE at bytes N to M". */
static void put_site(line *l, const soren__map_site *m)
{
    if (m->records > 1) {
        const soren_record *r = m->record;
        if (m->format == SOREN_INPUT_INDEX) {
            put(l, "one of tasks ");
            put_u64(l, r->index);
            put(l, " to ");
            put_u64(l, r->index + m->records - 1);
        } else {
            put(l, "one of the records of ");
            put(l, m->in->path ? m->in->path : "(input)");
            put(l, " at bytes ");
            put_u64(l, r->offset);
            put(l, " to ");
            put_u64(l, r->offset + m->records * r->size - 1);
        }
        return;
    }
    if (m->format == SOREN_INPUT_INDEX) {
        put(l, "task ");
        put_u64(l, m->record->index);
    } else if (m->format == SOREN_INPUT_PAIRS) {
        put(l, "pair ");
        put_u64(l, m->record->index);
        put(l, " of ");
        put(l, m->in->path ? m->in->path : "the stage before");
    } else {
        put(l, m->in->path ? m->in->path : "(input)");
        put(l, " at byte ");
        put_u64(l, m->record->offset);
    }
}

/* m's record as a fault's message names it, in buf. */
static void describe_site(const soren__map_site *m, char *buf, size_t size)
{
    line l = {.n = 0};
    put_site(&l, m);
    l.buf[l.n] = '\0';
    if (size > 0)
        snprintf(buf, size, "%s", l.buf);
}

const char *soren__map_site_describe(char *buf, size_t size)
{
    if (size > 0)
        buf[0] = '\0';
    if (soren__current_map.in && soren__current_map.record)
        describe_site(&soren__current_map, buf, size);
    return buf;
}

/* Removes the partial output, then dies of sig with its default action
 * (so the exit status says 128+sig); exits 128+sig if that returns. */
static void die(int sig)
{
    const char *pending = soren_output_pending_path();
    if (pending)
        unlink(pending);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    _exit(128 + sig);
}

static void on_terminate(int sig)
{
    die(sig);
}

/* Set by the first fault, so two threads faulting at once print one line. */
static atomic_int faulted;

static void on_fault(int sig, siginfo_t *si, void *context)
{
    (void)context;
    if (sig == SIGBUS && si->si_code > 0 && soren__input_fault(si->si_addr))
        return; /* the read is retried, on zeros */
    if (atomic_exchange(&faulted, 1)) {
        for (;;)
            pause(); /* the first fault ends the process */
    }
    line l = {.n = 0};
    put(&l, "soren-host: ");
    if (job_set) {
        put(&l, "plugin ");
        put(&l, job_library);
        put(&l, " crashed (");
        put(&l, signal_name(sig));
        put(&l, ") while running job ");
        put(&l, job_name);
        if (soren__current_map.in && soren__current_map.record) {
            put(&l, ", mapping ");
            put_site(&l, &soren__current_map);
        }
    } else {
        put(&l, "crashed (");
        put(&l, signal_name(sig));
        put(&l, ")");
    }
    put(&l, "\n");
    ssize_t ignored = write(STDERR_FILENO, l.buf, l.n);
    (void)ignored;
    die(sig);
}

/* The fault handler's stack, where the thread's own overflowed: the main
 * thread's here, other threads' from soren__signals_thread_stack. */
#define ALT_STACK_SIZE (1 << 16)
static char alt_stack[ALT_STACK_SIZE];
static atomic_int installed;

/* The map sites of the threads that run plugin code now, so that a thread
 * watching the run can name what they map (soren__map_sites_describe). */
enum { SITES_MAX = 1024 };
static soren__map_site *_Atomic sites[SITES_MAX];

static void site_enter(void)
{
    for (size_t i = 0; i < SITES_MAX; i++) {
        soren__map_site *none = NULL;
        if (atomic_compare_exchange_strong(&sites[i], &none, &soren__current_map))
            return;
    }
}

static void site_leave(void)
{
    for (size_t i = 0; i < SITES_MAX; i++) {
        soren__map_site *mine = &soren__current_map;
        if (atomic_compare_exchange_strong(&sites[i], &mine, NULL))
            return;
    }
}

const char *soren__map_sites_describe(const void *run, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = 0; i < SITES_MAX && !buf[0]; i++) {
        const soren__map_site *s = atomic_load(&sites[i]);
        if (s && s->run == run && s->in && s->record)
            describe_site(s, buf, size);
    }
    return buf;
}

/* What each site was mapping when last looked at, and since when. */
static struct seen {
    const soren__map_site *site;
    uint64_t offset, index;
    double since;
} seen[SITES_MAX];
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

/* A record slower than this is named on the progress line. */
#define SLOW_SECONDS 1.0

void soren__map_sites_slow(const void *run, char *buf, size_t size)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9, slowest = 0;
    buf[0] = '\0';
    pthread_mutex_lock(&seen_lock);
    for (size_t i = 0; i < SITES_MAX; i++) {
        const soren__map_site *s = atomic_load(&sites[i]);
        if (!s || s->run != run || !s->in || !s->record)
            continue;
        uint64_t offset = s->record->offset, index = s->record->index;
        struct seen *w = &seen[i];
        if (w->site != s || w->offset != offset || w->index != index) {
            *w = (struct seen){s, offset, index, now};
            continue;
        }
        if (now - w->since >= SLOW_SECONDS && now - w->since > slowest) {
            slowest = now - w->since;
            char where[512];
            describe_site(s, where, sizeof where);
            snprintf(buf, size, "%s for %.0f s", where, slowest);
        }
    }
    pthread_mutex_unlock(&seen_lock);
}

void *soren__signals_thread_stack(void)
{
    site_enter();
    stack_t now;
    /* The main thread (and any thread run outside the engines) has one. */
    if (!atomic_load(&installed) || sigaltstack(NULL, &now) != 0 || !(now.ss_flags & SS_DISABLE))
        return NULL;
    stack_t ss = {.ss_sp = malloc(ALT_STACK_SIZE), .ss_size = ALT_STACK_SIZE, .ss_flags = 0};
    if (ss.ss_sp && sigaltstack(&ss, NULL) != 0) {
        free(ss.ss_sp);
        return NULL;
    }
    return ss.ss_sp;
}

void soren__signals_thread_stack_free(void *stack)
{
    site_leave();
    if (!stack)
        return;
    stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    sigaltstack(&off, NULL);
    free(stack);
}

void soren_signals_install(void)
{
    stack_t ss = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    atomic_store(&installed, 1);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        struct sigaction old, sa;
        memset(&sa, 0, sizeof sa);
        sigemptyset(&sa.sa_mask);
        if (table[i].class == IGNORE) {
            sa.sa_handler = SIG_IGN;
        } else if (table[i].class == TERMINATE) {
            /* SIGHUP ignored at start (nohup) stays ignored, and so does
             * SIGPIPE (a write to a closed pipe then fails with EPIPE, an
             * error).  Others are taken even where ignored: a shell starts
             * a background job with SIGINT and SIGQUIT ignored, and kill
             * -INT must still stop it. */
            if ((table[i].sig == SIGHUP || table[i].sig == SIGPIPE) &&
                sigaction(table[i].sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
                continue;
            sa.sa_handler = on_terminate;
            /* A second request while the first is handled waits. */
            for (size_t j = 0; j < sizeof table / sizeof table[0]; j++)
                if (table[j].class == TERMINATE)
                    sigaddset(&sa.sa_mask, table[j].sig);
        } else {
            sa.sa_sigaction = on_fault;
            sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        }
        sigaction(table[i].sig, &sa, NULL);
    }
}
