/*
 * serve.c - soren-host serve: the resident host.
 *
 * One process keeps, for as long as it runs, each GPU's CUDA context, the
 * loaded plugins (core/host/registry.h) with their GPU sessions, and a
 * queue of jobs that its workers run side by side.  Clients connect on a
 * Unix socket (core/host/channel.h) and send one request each (protocol.h):
 *
 *  - each connection has a thread, which reads the request, queues a run
 *    and waits for it, watching the connection: a client that goes away
 *    takes its queued job with it, and a running one is cancelled (it
 *    stops after the chunk it is mapping);
 *  - the queue is first come, first served, and --jobs workers take from
 *    it, so a large job holds one worker while small ones pass through the
 *    others; a job that may use the GPU goes to the GPU with the fewest
 *    jobs (unless it names its GPUs) and first reserves its share of that
 *    GPU's device memory (core/host/ledger.h) and runs within it, so GPU
 *    jobs spread over the GPUs and run side by side where their budgets
 *    fit;
 *  - each worker has a working folder of its own (unshare(CLONE_FS)) and
 *    moves into its client's before a job, so that every path of the job
 *    (a plugin, --param NAME=@FILE) means what it means to the client;
 *    inputs, the output and standard error are the client's descriptors;
 *  - a job that fails fails alone: its error goes back to its client.
 *
 * A fault in plugin code ends the host, as it would end any program that
 * loaded the plugin: its clients say so, and a service manager (the
 * systemd units in share/systemd/) or the next `serve` starts it again.
 * So does a fault on the GPU, which leaves the process's CUDA context
 * unusable: the job's client is told, and the host stops with status 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "engine/job.h"
#include "gpu/device.h"
#include "host/channel.h"
#include "host/ledger.h"
#include "host/registry.h"
#include "host/remote.h"
#include "io/signals.h"
#include "plugin/search.h"

/* What one RUN request carries: descriptors in this order, then the inputs. */
enum { FD_CWD, FD_STDIN, FD_OUTPUT, FD_STDERR, FD_INPUTS };

typedef struct job {
    struct job *next;            /* in the queue */
    soren_msg msg;
    int fds[SOREN_MSG_MAX_FDS];
    size_t nfds;
    soren__cli_args args;
    char **argv;                 /* the request's, which getopt permutes */
    soren_loaded *loaded;
    /* set by the worker, read by the connection's thread under the lock */
    int started, done, gone;
    soren_progress *progress;    /* while it runs: how it is cancelled */
    int library;                 /* a library job (SOREN_MSG_JOB), not a run */
    char *explain;               /* a library job's --explain line */
    soren_error err;
    pthread_cond_t finished;
} job;

typedef struct host {
    pthread_mutex_t lock;        /* the queue, the counts, each job's flags */
    pthread_cond_t work;         /* a job was queued, or the host stops */
    job *head, *tail;
    unsigned queued, running, served;
    unsigned connections;        /* threads serving one; the host waits for them */
    pthread_cond_t quiet;        /* connections fell to 0 */
    int stopping;
    unsigned workers;
    soren_registry *registry;
    const char *socket_path;
    int gpus;                    /* at most SOREN_MAX_DEVICES */
    /* The device memory the GPU jobs share, a ledger for each GPU: what it
     * had free at the start, less an eighth. */
    soren_ledger memory[SOREN_MAX_DEVICES];
    unsigned gpu_jobs;           /* jobs holding device memory on one GPU or more */
    int context_lost;            /* a job's GPU fault took the context */
    time_t started;
} host;

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
    stop_signal = sig;
}

/* The argument parser is getopt's, whose state is the process's. */
static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- Workers ------------------------------------------------------------- */

/* A job starts: the connection's thread cancels it through its progress
 * object from now on (at once, where the client left while it was queued),
 * and it borrows a set of its plugin's GPU sessions. */
static soren_gpu_session **job_begins(host *h, job *j, soren_progress *progress,
                                      const char *key)
{
    pthread_mutex_lock(&h->lock);
    j->progress = progress;
    if (j->gone)
        soren_progress_cancel(progress);
    pthread_mutex_unlock(&h->lock);
    return soren_loaded_take_sessions(h->registry, j->loaded, key);
}

/* The bytes of the inputs fds in *bytes; 0 where one is not a regular
 * file (standard input, a pipe), whose size is not known. */
static int inputs_bytes(const int *fds, size_t count, uint64_t *bytes)
{
    *bytes = 0;
    for (size_t i = 0; i < count; i++) {
        struct stat st;
        if (fstat(fds[i], &st) != 0 || !S_ISREG(st.st_mode))
            return 0;
        *bytes += (uint64_t)st.st_size;
    }
    return 1;
}

/* The device memory a GPU job asks for, of a ledger of total bytes: what
 * it gave (--device-memory), else an equal part of the GPU's for each
 * worker, or more where its inputs are large (four times their bytes: the
 * chunks in flight, their record index, the tables and the key space), so
 * a job alone is not cut into more chunks than it would be in a process of
 * its own.  Inputs of unknown size (standard input) ask for all of it. */
static uint64_t gpu_want(const host *h, uint64_t total, uint64_t asked, int known,
                         uint64_t bytes)
{
    if (asked)
        return asked;
    if (!known)
        return total;
    uint64_t part = total / h->workers;
    return bytes > part / 4 ? 4 * bytes : part;
}

/* A GPU job's reservations: bytes on each GPU of the mask. */
typedef struct gpu_hold {
    uint64_t bytes;
    unsigned gpus; /* bit d: GPU d */
} gpu_hold;

/* The GPUs a job will run on: those --devices names (all of them for
 * --devices all), GPU 0 for --device both (the engines share its
 * chunks), else none: the host chooses one (gpu_take). */
static unsigned gpus_named(const host *h, const soren_run_options *o)
{
    unsigned mask = 0;
    if (o->devices_all)
        return (1u << h->gpus) - 1;
    for (size_t i = 0; i < o->device_count; i++)
        if (o->devices[i] >= 0 && o->devices[i] < h->gpus)
            mask |= 1u << o->devices[i];
    if (!o->device_count && o->device == SOREN_DEVICE_BOTH)
        mask = 1;
    return mask;
}

/* Reserves device memory (asked: what the job gave, 0: gpu_want's part)
 * for a job that may use the GPU, on each GPU it will run on (in the order
 * of their numbers, so that two jobs that both want two GPUs never hold
 * one each while waiting for the other); none for a job on the CPU engine.
 * A job that names no GPU spreads over several where soren_choose_devices
 * says so (spread: the job's plugin, whose last run it reads; NULL: a
 * library job, which runs on one), else takes the least busy.  The
 * sessions kept for jobs run again hold device memory outside every
 * reservation: where a GPU has less free than the job reserved, the idle
 * ones go. */
static gpu_hold gpu_take(host *h, soren_run_options *o, uint64_t asked, int known,
                         uint64_t bytes, soren_loaded *spread)
{
    gpu_hold g = {0, 0};
    if (!h->gpus || o->device == SOREN_DEVICE_CPU)
        return g;
    g.gpus = gpus_named(h, o);
    int chosen = -1;
    uint64_t turn = 0;
    if (!g.gpus && !o->device_count && !o->devices_all) {
        uint64_t last_bytes = 0, last_pairs = 0;
        if (spread)
            soren_loaded_last_run(h->registry, spread, &last_bytes, &last_pairs);
        pthread_mutex_lock(&h->lock);
        int count = 1;
        if (spread && h->gpus > 1)
            o->devices_rule = soren_choose_devices(
                &(soren_spread_case){.gpus = h->gpus, .started = 1, .busy = h->gpu_jobs > 0,
                                     .bytes = known ? bytes : 0,
                                     .pairs = soren_expected_pairs(bytes, last_bytes,
                                                                   last_pairs)},
                &count);
        if (count > 1) {
            for (int d = 0; d < count; d++)
                o->devices[d] = d;
            o->device_count = (size_t)count;
            g.gpus = (1u << count) - 1;
        } else {
            /* the GPU with the fewest jobs, the job's turn taken there at
             * once so that the next job to choose counts it */
            chosen = soren_ledger_least_busy(h->memory, h->gpus);
            turn = soren_ledger_turn(&h->memory[chosen]);
            o->devices[0] = chosen;
            o->device_count = 1;
            g.gpus = 1u << chosen;
        }
        pthread_mutex_unlock(&h->lock);
    }
    if (!g.gpus)
        return g; /* a GPU the host lacks: the run says so itself */
    uint64_t total = UINT64_MAX;
    for (int d = 0; d < h->gpus; d++)
        if (g.gpus & 1u << d && h->memory[d].total < total)
            total = h->memory[d].total;
    uint64_t want = gpu_want(h, total, asked, known, bytes);
    g.bytes = want < total ? want : total;
    int short_of_room = 0;
    for (int d = 0; d < h->gpus; d++) {
        if (!(g.gpus & 1u << d))
            continue;
        if (d == chosen)
            soren_ledger_wait(&h->memory[d], turn, g.bytes, NULL);
        else
            soren_ledger_reserve(&h->memory[d], g.bytes, NULL);
        uint64_t free_bytes = 0;
        short_of_room |= soren_device_free_memory(d, &free_bytes, NULL, 0) == 0 &&
                         free_bytes < g.bytes;
    }
    if (short_of_room)
        soren_registry_drop_idle_sessions(h->registry);
    pthread_mutex_lock(&h->lock);
    h->gpu_jobs++;
    pthread_mutex_unlock(&h->lock);
    return g;
}

/* 1 where a GPU's context no longer answers (why says which and how). */
static int context_lost(const host *h, char *why, size_t size)
{
    for (int d = 0; d < h->gpus; d++) {
        uint64_t free_bytes = 0;
        char what[200] = "";
        if (soren_device_free_memory(d, &free_bytes, what, sizeof what) != 0) {
            snprintf(why, size, "GPU %d: %s", d, what);
            return 1;
        }
    }
    return 0;
}

/* Gives the reservation back, after looking at the contexts of a job that
 * failed: a fault on a device (an illegal address or instruction, a trap)
 * is sticky, and every later CUDA call on that GPU fails with it, so the
 * host stops rather than fail every job after; the job's client hears
 * why.  A run over several GPUs may have faulted on any of them. */
static void gpu_give(host *h, job *j, gpu_hold taken)
{
    if (!taken.gpus)
        return;
    char why[256] = "";
    int lost = j->err.code != SOREN_OK && context_lost(h, why, sizeof why);
    for (int d = 0; d < h->gpus; d++)
        if (taken.gpus & 1u << d)
            soren_ledger_release(&h->memory[d], taken.bytes);
    pthread_mutex_lock(&h->lock);
    h->gpu_jobs--;
    pthread_mutex_unlock(&h->lock);
    if (!lost)
        return;
    const soren_plugin *p = soren_loaded_plugin(j->loaded);
    const char *name = p->manifest->name;
    const char *plugin = p->manifest->path ? p->manifest->path : p->library_path;
    fprintf(stderr, "soren-host: the GPU faulted while running job %s (plugin %s): %s; "
            "stopping, as its CUDA context is lost\n", name, plugin, why);
    soren_error fault;
    soren_error_clear(&fault);
    soren_error_set(&fault, SOREN_EDEVICE, "%s; the host stopped while running job %s (plugin "
                    "%s), as the GPU's context in it is lost (%s): nothing was written, and the "
                    "next run starts afresh", j->err.text, name, plugin, why);
    j->err = fault;
    pthread_mutex_lock(&h->lock);
    h->context_lost = 1;
    h->stopping = 1;
    pthread_cond_broadcast(&h->work);
    pthread_mutex_unlock(&h->lock);
    stop_signal = SIGTERM;
}

/* Which job a run is, for its GPU sessions: a run over the same files as
 * before (each the same file, unchanged since) is that job run again and
 * keeps its variant, regions and staging; any other run chooses afresh.
 * NULL (no sessions) for standard input, which is new bytes every time. */
static char *run_key(const job *j, size_t inputs)
{
    if (!inputs)
        return NULL;
    char *key = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&key, &size);
    if (!f)
        return NULL;
    for (size_t i = 0; i < inputs; i++) {
        struct stat st;
        if (fstat(j->fds[FD_INPUTS + i], &st) != 0) {
            fclose(f);
            free(key);
            return NULL;
        }
        fprintf(f, "%llu:%llu:%lld:%lld.%09ld;", (unsigned long long)st.st_dev,
                (unsigned long long)st.st_ino, (long long)st.st_size,
                (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    }
    return fclose(f) == 0 ? key : (free(key), NULL);
}

/* ... and ends: its progress object is about to go, its sessions go back. */
static void job_ends(host *h, job *j, soren_gpu_session **sessions)
{
    pthread_mutex_lock(&h->lock);
    j->progress = NULL;
    pthread_mutex_unlock(&h->lock);
    soren_loaded_give_sessions(h->registry, j->loaded, sessions);
}

static void run_job(host *h, job *j)
{
    soren_run_options o = j->args.run;
    size_t inputs = (size_t)j->args.arg_count - 1;
    soren_client_files files = {.input_fds = j->fds + FD_INPUTS,
                                .stdin_fd = j->fds[FD_STDIN],
                                .output_fd = j->fds[FD_OUTPUT]};
    o.inputs = (const char *const *)j->args.args + 1;
    o.input_count = inputs;
    o.client = &files;
    if (fchdir(j->fds[FD_CWD]) != 0) {
        soren_error_errno(&j->err, SOREN_EIO, errno, "the host cannot enter your working "
                          "folder; run with --local");
        return;
    }
    int err_fd = fcntl(j->fds[FD_STDERR], F_DUPFD_CLOEXEC, 0);
    FILE *said = err_fd >= 0 ? fdopen(err_fd, "w") : NULL;
    if (!said) {
        if (err_fd >= 0)
            close(err_fd);
        soren_error_set(&j->err, SOREN_ENOMEM, "the host cannot write to your standard error");
        return;
    }
    int draw = j->args.progress >= 0 ? j->args.progress : isatty(j->fds[FD_STDERR]);
    o.progress = soren_progress_new(said, draw, &j->err);
    char *key = run_key(j, inputs);
    o.gpu_sessions = job_begins(h, j, o.progress, key);
    free(key);
    /* A run without INPUT files reads standard input, unless it is an
     * index job, which reads nothing. */
    const int *fds = inputs ? j->fds + FD_INPUTS : &j->fds[FD_STDIN];
    int index_job = soren_loaded_plugin(j->loaded)->manifest->input.format == SOREN_INPUT_INDEX;
    size_t nfds = inputs ? inputs : index_job ? 0 : 1;
    uint64_t bytes = 0;
    int known = inputs_bytes(fds, nfds, &bytes);
    gpu_hold gpu = gpu_take(h, &o, o.device_memory, known, bytes, j->loaded);
    if (gpu.gpus)
        o.device_memory = gpu.bytes;
    uint64_t first_pairs = SOREN_PAIRS_UNKNOWN;
    o.first_pairs = &first_pairs;
    if (o.progress && soren_run(soren_loaded_plugin(j->loaded), &o, &j->err) == SOREN_OK &&
        known && bytes && first_pairs != SOREN_PAIRS_UNKNOWN)
        soren_loaded_note_run(h->registry, j->loaded, bytes, first_pairs);
    gpu_give(h, j, gpu);
    job_ends(h, j, o.gpu_sessions);
    soren_progress_free(o.progress);
    fclose(said);
}

/* Runs a library job as soren_job_run (or soren_job_iterate) would, from
 * what the request says (read_library_job checked its shape).  The
 * request (its parameters, mapped or copied) and the outcome come back in
 * *request and *outcome, for the caller to destroy once the client has
 * its reply, which need not wait for the unmapping and the frees. */
static void run_library_job(host *h, job *j, soren_remote_request *request,
                            soren_run_outcome *outcome)
{
    const soren_plugin *p = soren_loaded_plugin(j->loaded);
    const soren_manifest *m = p->manifest;
    soren_remote_request r;
    soren_status rc = soren_remote_request_read(&r, m->name, m->param_count, j->msg.fields,
                                                j->msg.count, j->fds, &j->err);
    if (rc == SOREN_OK && fchdir(r.cwd_fd) != 0)
        rc = soren_error_errno(&j->err, SOREN_EIO, errno, "the host cannot enter the "
                               "program's working folder");
    soren_run_options o = r.options;
    /* No messages: the library prints nothing; the object is for cancelling. */
    FILE *quiet = fopen("/dev/null", "we");
    o.progress = quiet ? soren_progress_new(quiet, 0, NULL) : NULL;
    /* the program's job, whose runs share its sessions as in its process */
    o.gpu_sessions = job_begins(h, j, o.progress, r.token);
    soren_run_outcome out;
    memset(&out, 0, sizeof out);
    int fds[SOREN_MSG_MAX_FDS];
    size_t nfds = 0;
    for (size_t i = 0; i < r.input_count && nfds < SOREN_MSG_MAX_FDS; i++)
        fds[nfds++] = r.inputs[i].fd;
    gpu_hold gpu = {0, 0};
    uint64_t bytes = 0;
    int known = inputs_bytes(fds, nfds, &bytes);
    if (rc == SOREN_OK)
        gpu = gpu_take(h, &o, 0, known, bytes, NULL);
    if (gpu.gpus)
        o.device_memory = gpu.bytes;
    if (rc == SOREN_OK)
        rc = soren_run_job(p, &o, r.values, r.inputs, r.input_count, &out, &j->err);
    gpu_give(h, j, gpu);
    job_ends(h, j, o.gpu_sessions);
    if (rc == SOREN_OK)
        rc = soren_outcome_file_write(r.result_fd, &out, &j->err);
    char *text = NULL;
    size_t size = 0;
    FILE *x = rc == SOREN_OK ? open_memstream(&text, &size) : NULL;
    if (x) {
        soren_explain_print_stages(out.stages, out.stage_count, NULL, NULL, x);
        fclose(x);
        if (size && text[size - 1] == '\n')
            text[size - 1] = '\0';
        j->explain = text;
    }
    soren_progress_free(o.progress);
    if (quiet)
        fclose(quiet);
    *request = r;
    *outcome = out;
}

static void *worker_main(void *arg)
{
    host *h = arg;
    /* A working folder of this thread's own, to enter each client's. */
    int own_folder = unshare(CLONE_FS) == 0;
    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (!h->head && !h->stopping)
            pthread_cond_wait(&h->work, &h->lock);
        if (!h->head)
            break;
        job *j = h->head;
        h->head = j->next;
        if (!h->head)
            h->tail = NULL;
        h->queued--;
        h->running++;
        j->started = 1;
        pthread_mutex_unlock(&h->lock);
        soren_remote_request request;
        soren_run_outcome outcome;
        memset(&request, 0, sizeof request);
        memset(&outcome, 0, sizeof outcome);
        if (!own_folder)
            soren_error_set(&j->err, SOREN_EIO, "the host's workers cannot have working "
                            "folders of their own here; run with --local");
        else if (j->library)
            run_library_job(h, j, &request, &outcome);
        else
            run_job(h, j);
        pthread_mutex_lock(&h->lock);
        h->running--;
        h->served++;
        j->done = 1;
        pthread_cond_signal(&j->finished);
        pthread_mutex_unlock(&h->lock); /* the reply goes out while these are freed */
        soren_run_outcome_destroy(&outcome);
        soren_remote_request_destroy(&request);
        pthread_mutex_lock(&h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

/* ---- A connection -------------------------------------------------------- */

static void reply(int fd, int code, const char *text)
{
    char number[16];
    snprintf(number, sizeof number, "%d", code);
    const char *fields[] = {number, text ? text : ""};
    soren_error ignored;
    soren_error_clear(&ignored);
    soren_channel_send_msg(fd, SOREN_MSG_REPLY, fields, 2, NULL, 0, &ignored);
}

static void reply_error(int fd, const soren_error *err)
{
    reply(fd, soren_status_exit_code(err->code), err->text);
}

/* 1 where the client hung up (or broke the connection). */
static int client_gone(int fd)
{
    struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    return (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
}

static void job_free(job *j)
{
    for (size_t i = 0; i < j->nfds; i++)
        close(j->fds[i]);
    soren__cli_args_destroy(&j->args);
    free(j->argv);
    free(j->explain);
    soren_msg_destroy(&j->msg);
    pthread_cond_destroy(&j->finished);
    free(j);
}

/* Reads a RUN request into j: its arguments parsed as soren-host's own. */
static soren_status read_run(job *j, soren_error *err)
{
    /* fields: manifest, argv[0], argv[1], ... */
    if (j->msg.count < 3)
        return soren_error_set(err, SOREN_EUSAGE, "a run request without its job");
    int argc = (int)(j->msg.count - 1);
    j->argv = calloc((size_t)argc + 1, sizeof *j->argv);
    if (!j->argv)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    for (int i = 0; i < argc; i++)
        j->argv[i] = j->msg.fields[i + 1];
    /* A client parsed the same words, so this parse succeeds; a request
     * that is not a run (--help, another command) is refused. */
    pthread_mutex_lock(&parse_lock);
    optind = 0;
    int rc = soren__cli_parse_args(&j->args, argc, j->argv);
    pthread_mutex_unlock(&parse_lock);
    if (rc != -1 || !j->args.command || strcmp(j->args.command, "run") != 0 ||
        j->args.arg_count < 1)
        return soren_error_set(err, SOREN_EUSAGE, "a run request whose arguments do not parse");
    if (j->nfds != FD_INPUTS + (size_t)(j->args.arg_count - 1))
        return soren_error_set(err, SOREN_EUSAGE, "a run request with %zu descriptors for %d "
                               "inputs", j->nfds, j->args.arg_count - 1);
    return SOREN_OK;
}

/* Checks a library job's request, fields and descriptors (remote.h); the
 * parameters' count is the manifest's, checked once it is loaded
 * (soren_remote_request_read). */
static soren_status read_library_job(job *j, soren_error *err)
{
    soren_status rc = soren_remote_request_check(j->msg.fields, j->msg.count, j->nfds, err);
    j->library = rc == SOREN_OK;
    return rc;
}

static void serve_run(host *h, int fd, job *j)
{
    soren_error err;
    soren_error_clear(&err);
    int library = j->msg.kind == SOREN_MSG_JOB;
    /* A program's soren_open always checks the plugin's owners. */
    if ((library ? read_library_job(j, &err) : read_run(j, &err)) != SOREN_OK ||
        soren_registry_acquire(h->registry, j->msg.fields[0],
                               library ? SOREN_TRUST_CHECK : j->args.trust, &j->loaded,
                               &err) != SOREN_OK) {
        if (library)
            reply(fd, err.code, err.text);
        else
            reply_error(fd, &err);
        return;
    }
    soren_error_clear(&j->err);
    pthread_mutex_lock(&h->lock);
    if (h->stopping) {
        pthread_mutex_unlock(&h->lock);
        soren_error_set(&err, SOREN_EJOB, "the host is stopping: run again");
        reply_error(fd, &err);
        soren_registry_release(h->registry, j->loaded);
        return;
    }
    if (h->tail)
        h->tail->next = j;
    else
        h->head = j;
    h->tail = j;
    h->queued++;
    pthread_cond_signal(&h->work);
    /* Waits for the job, looking at the client ten times a second. */
    while (!j->done) {
        struct timespec at;
        clock_gettime(CLOCK_REALTIME, &at);
        at.tv_nsec += 100000000L;
        if (at.tv_nsec >= 1000000000L) {
            at.tv_sec++;
            at.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&j->finished, &h->lock, &at);
        if (j->done || j->gone || !client_gone(fd))
            continue;
        j->gone = 1;
        soren_progress_cancel(j->progress); /* a running job stops at its next chunk */
        if (!j->started) { /* still queued: it leaves with its client */
            for (job **p = &h->head; *p; p = &(*p)->next)
                if (*p == j) {
                    *p = j->next;
                    break;
                }
            h->tail = NULL;
            for (job *q = h->head; q; q = q->next)
                h->tail = q;
            h->queued--;
            break;
        }
    }
    pthread_mutex_unlock(&h->lock);
    if (!j->gone && library)
        reply(fd, j->err.code, j->err.code == SOREN_OK ? j->explain : j->err.text);
    else if (!j->gone && j->err.code == SOREN_OK)
        reply(fd, 0, NULL);
    else if (!j->gone)
        reply_error(fd, &j->err);
    soren_registry_release(h->registry, j->loaded);
}

static void serve_ps(host *h, int fd)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f) {
        reply(fd, 1, "out of memory");
        return;
    }
    pthread_mutex_lock(&h->lock);
    unsigned running = h->running, queued = h->queued, served = h->served;
    pthread_mutex_unlock(&h->lock);
    fprintf(f, "host:     pid %ld, up %lld s, socket %s\n", (long)getpid(),
            (long long)(time(NULL) - h->started), h->socket_path);
    fprintf(f, "jobs:     %u running, %u queued, %u done; %u at once\n", running, queued,
            served, h->workers);
    /* Each ledger read once, so that the total is the sum of the lines. */
    uint64_t reserved[SOREN_MAX_DEVICES], total = 0, reserved_total = 0;
    unsigned holders[SOREN_MAX_DEVICES], waiting[SOREN_MAX_DEVICES];
    for (int d = 0; d < h->gpus; d++) {
        soren_ledger_usage(&h->memory[d], &reserved[d], &holders[d], &waiting[d]);
        total += h->memory[d].total;
        reserved_total += reserved[d];
    }
    if (h->gpus) {
        pthread_mutex_lock(&h->lock);
        unsigned gpu_jobs = h->gpu_jobs;
        pthread_mutex_unlock(&h->lock);
        fprintf(f, "memory:   %.1f MiB of device memory for GPU jobs, %.1f MiB reserved by %u "
                "running\n", (double)total / (1 << 20), (double)reserved_total / (1 << 20),
                gpu_jobs);
    }
    for (int d = 0; d < h->gpus; d++) {
        uint64_t free_bytes = 0;
        if (soren_device_free_memory(d, &free_bytes, NULL, 0) == 0)
            fprintf(f, "gpu %d:    %.1f MiB free; %.1f of %.1f MiB reserved by %u jobs, %u "
                    "waiting\n", d, (double)free_bytes / (1 << 20),
                    (double)reserved[d] / (1 << 20), (double)h->memory[d].total / (1 << 20),
                    holders[d], waiting[d]);
    }
    if (!h->gpus)
        fprintf(f, "gpus:     none (jobs run on the CPU engine)\n");
    fprintf(f, "plugins:\n");
    soren_registry_print(h->registry, f);
    fclose(f);
    reply(fd, 0, text);
    free(text);
}

typedef struct connection {
    host *h;
    int fd;
} connection;

static void *connection_main(void *arg)
{
    connection *c = arg;
    host *h = c->h;
    int fd = c->fd;
    free(c);
    job *j = calloc(1, sizeof *j);
    soren_error err;
    soren_error_clear(&err);
    int closed = 0;
    if (!j) {
        close(fd);
        return NULL;
    }
    pthread_cond_init(&j->finished, NULL);
    if (soren_channel_recv(fd, &j->msg, j->fds, SOREN_MSG_MAX_FDS, &j->nfds, &closed, &err) !=
        SOREN_OK) {
        if (!closed)
            reply_error(fd, &err);
    } else if (j->msg.kind == SOREN_MSG_RUN || j->msg.kind == SOREN_MSG_JOB) {
        serve_run(h, fd, j);
    } else if (j->msg.kind == SOREN_MSG_LOAD && j->msg.count == 2) {
        /* fields: the manifest, "1" to allow insecure plugin folders */
        soren_trust trust = strcmp(j->msg.fields[1], "1") == 0 ? SOREN_TRUST_ANY
                                                               : SOREN_TRUST_CHECK;
        if (soren_registry_load(h->registry, j->msg.fields[0], trust, &err) == SOREN_OK)
            reply(fd, 0, NULL);
        else
            reply_error(fd, &err);
    } else if (j->msg.kind == SOREN_MSG_UNLOAD && j->msg.count == 1) {
        if (soren_registry_unload(h->registry, j->msg.fields[0], &err) == SOREN_OK)
            reply(fd, 0, NULL);
        else
            reply_error(fd, &err);
    } else if (j->msg.kind == SOREN_MSG_PS && j->msg.count == 0) {
        serve_ps(h, fd);
    } else if (j->msg.kind == SOREN_MSG_STOP && j->msg.count == 0) {
        pthread_mutex_lock(&h->lock);
        h->stopping = 1;
        pthread_cond_broadcast(&h->work);
        pthread_mutex_unlock(&h->lock);
        stop_signal = SIGTERM;
        reply(fd, 0, NULL);
    } else {
        soren_error_set(&err, SOREN_EUSAGE, "a request of kind %d with %zu fields, which this "
                        "host does not take", (int)j->msg.kind, j->msg.count);
        reply_error(fd, &err);
    }
    /* A job the client left while it ran is still the worker's: the
     * worker's done flag says when it may go. */
    pthread_mutex_lock(&h->lock);
    while (j->started && !j->done)
        pthread_cond_wait(&j->finished, &h->lock);
    if (--h->connections == 0)
        pthread_cond_broadcast(&h->quiet);
    pthread_mutex_unlock(&h->lock);
    job_free(j);
    close(fd);
    return NULL;
}

/* ---- The host ------------------------------------------------------------ */

/* The listening socket systemd handed over (socket activation), or -1. */
static int activated_socket(void)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    if (!pid || !fds || atol(pid) != (long)getpid() || atoi(fds) < 1)
        return -1;
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    fcntl(3, F_SETFD, FD_CLOEXEC);
    return 3;
}

/* The folder for the copies of plugin libraries: beside the socket, 0700. */
static soren_status copy_folder(const char *socket_path, char *buf, size_t size,
                                soren_error *err)
{
    char dir[4096];
    soren_status rc = soren_channel_folder(socket_path, dir, sizeof dir, err);
    if (rc != SOREN_OK)
        return rc;
    int n = snprintf(buf, size, "%s/plugins.%ld", dir, (long)getpid());
    if (n < 0 || (size_t)n >= size)
        return soren_error_set(err, SOREN_EUSAGE, "the host's folder %s is too long", dir);
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return soren_error_errno(err, SOREN_EIO, errno, "cannot make %s", buf);
    return SOREN_OK;
}

static int say(const soren_error *err)
{
    fprintf(stderr, "soren-host: %s\n", err->text);
    return soren_status_exit_code(err->code);
}

/* Detaches from the terminal: the parent returns 0 once the child runs.
 * The host's standard error (a job's fault, a lost GPU context) goes on in
 * PATH.log, the user's alone; a link there is refused, not followed. */
static int detach(const char *path)
{
    char log[4200];
    snprintf(log, sizeof log, "%s.log", path);
    int log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (log_fd < 0) {
        fprintf(stderr, "soren-host: cannot open the host's log %s: %s\n", log, strerror(errno));
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "soren-host: cannot start the host in the background: %s\n",
                strerror(errno));
        close(log_fd);
        return 1;
    }
    if (pid > 0) {
        printf("soren-host: serving at %s (pid %ld), its log in %s\n", path, (long)pid, log);
        close(log_fd);
        return 0;
    }
    setsid();
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        if (null > STDERR_FILENO)
            close(null);
    }
    dup2(log_fd, STDERR_FILENO);
    close(log_fd);
    return -1;
}

int soren__cli_serve(const soren__cli_args *c, const soren_search_path *sp)
{
    if (c->arg_count)
        return soren__cli_usage_error("serve takes no arguments, got \"%s\" (preload plugins "
                                      "with --load NAME)", c->args[0]);
    soren_error err;
    soren_error_clear(&err);
    char path[4096], copies[4200];
    if (soren_channel_path(c->socket, path, sizeof path, &err) != SOREN_OK)
        return say(&err);
    int activated = activated_socket();
    int listener = activated >= 0 ? activated : soren_channel_listen(path, &err);
    if (listener < 0)
        return say(&err);
    /* Before any CUDA call: a context does not survive fork. */
    if (c->detach) {
        int rc = detach(path);
        if (rc >= 0) {
            close(listener);
            return rc;
        }
    }
    host h = {.socket_path = path, .workers = c->host_jobs ? c->host_jobs : 2,
              .started = time(NULL)};
    int rc = 0;
    if (copy_folder(path, copies, sizeof copies, &err) != SOREN_OK ||
        !(h.registry = soren_registry_new(copies))) {
        rc = err.code ? say(&err) : (fprintf(stderr, "soren-host: out of memory\n"), 1);
        goto out;
    }
    pthread_mutex_init(&h.lock, NULL);
    pthread_cond_init(&h.work, NULL);
    pthread_cond_init(&h.quiet, NULL);
    for (size_t i = 0; i < c->load_count; i++) {
        char *manifest = NULL;
        if (soren_plugin_resolve(sp, c->loads[i], &manifest, &err) != SOREN_OK ||
            soren_registry_load(h.registry, manifest, c->trust, &err) != SOREN_OK) {
            free(manifest);
            rc = say(&err);
            goto out;
        }
        free(manifest);
    }
    /* Each GPU's context now, so that no job pays for it. */
    h.gpus = soren_device_count(NULL, 0);
    h.gpus = h.gpus < 0 ? 0 : h.gpus > SOREN_MAX_DEVICES ? SOREN_MAX_DEVICES : h.gpus;
    for (int d = 0; d < h.gpus; d++) {
        uint64_t free_bytes = 0;
        soren_device_free_memory(d, &free_bytes, NULL, 0);
        soren_ledger_init(&h.memory[d], free_bytes / 8 * 7);
    }
    /* A fault still says which plugin and job ran (signals.h); a request to
     * stop lets the jobs finish instead. */
    soren_signals_install();
    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_t *workers = calloc(h.workers, sizeof *workers);
    unsigned started = 0;
    for (; workers && started < h.workers; started++)
        if (pthread_create(&workers[started], NULL, worker_main, &h) != 0)
            break;
    if (!started) {
        fprintf(stderr, "soren-host: cannot start the host's workers\n");
        free(workers);
        rc = 1;
        goto out;
    }
    if (!c->detach)
        fprintf(stderr, "soren-host: serving at %s (pid %ld, %u jobs at once)\n", path,
                (long)getpid(), started);
    while (!stop_signal) {
        struct pollfd p = {listener, POLLIN, 0};
        if (poll(&p, 1, 200) <= 0)
            continue;
        int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        connection *conn = malloc(sizeof *conn);
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        soren_error ignored;
        soren_error_clear(&ignored);
        if (!conn || soren_channel_peer_is_me(fd, &ignored) != 0) {
            free(conn);
            close(fd);
        } else {
            /* A client that connects and says nothing is let go. */
            struct timeval patience = {30, 0};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
            *conn = (connection){&h, fd};
            pthread_mutex_lock(&h.lock);
            h.connections++;
            pthread_mutex_unlock(&h.lock);
            if (pthread_create(&t, &attr, connection_main, conn) != 0) {
                pthread_mutex_lock(&h.lock);
                h.connections--;
                pthread_mutex_unlock(&h.lock);
                free(conn);
                close(fd);
            }
        }
        pthread_attr_destroy(&attr);
    }
    /* No new connections; the jobs queued and running finish first. */
    close(listener);
    listener = -1;
    if (activated < 0)
        unlink(path);
    pthread_mutex_lock(&h.lock);
    h.stopping = 1;
    pthread_cond_broadcast(&h.work);
    pthread_mutex_unlock(&h.lock);
    for (unsigned i = 0; i < started; i++)
        pthread_join(workers[i], NULL);
    free(workers);
    /* Every job is done: their replies go out before the process ends. */
    pthread_mutex_lock(&h.lock);
    while (h.connections)
        pthread_cond_wait(&h.quiet, &h.lock);
    pthread_mutex_unlock(&h.lock);
out:
    if (listener >= 0) {
        close(listener);
        if (activated < 0)
            unlink(path);
    }
    if (h.context_lost)
        rc = 1;
    /* Every connection is done (a failed start had none): the plugins and
     * their sessions go, and the folder of their copies with them. */
    if (h.registry) {
        soren_registry_free(h.registry);
        rmdir(copies);
    }
    return rc;
}
