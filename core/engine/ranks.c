#include "ranks.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu/cpu.h"
#include "../cpu/internal.h"
#include "job.h"

/* Each collective publishes what the ranks share, meets at the barrier,
 * copies, and meets again before anything published may change: a rank
 * that leaves a collective first cannot overwrite what a slower one still
 * reads. */
struct soren_thread_comm {
    int n;
    pthread_barrier_t barrier;
    struct rank_ctx {
        soren_thread_comm *t;
        int rank;
    } *ranks;
    uint64_t *values;              /* allgather: one per rank */
    const void **send;             /* alltoallv: each rank's send buffer */
    const uint64_t **send_counts;  /* ... and its counts, one per rank */
    int *failed;                   /* alltoallv: a rank that could not take its part */
    const void *root_buf;          /* bcast */
};

static void meet(soren_thread_comm *t)
{
    pthread_barrier_wait(&t->barrier);
}

static soren_status thread_allgather(void *ctx, uint64_t value, uint64_t *all, soren_error *err)
{
    (void)err;
    struct rank_ctx *c = ctx;
    soren_thread_comm *t = c->t;
    t->values[c->rank] = value;
    meet(t);
    memcpy(all, t->values, (size_t)t->n * sizeof *all);
    meet(t);
    return SOREN_OK;
}

/* A rank copies what the others send it in pieces of at most COPY_PIECE
 * bytes, which its share of the process's threads take from a shared
 * counter: on one thread a copy of a few GB into fresh memory runs at a
 * fraction of the memory's speed, its pages faulted in one by one. */
enum { COPY_PIECE = 8u << 20 };

typedef struct copy_piece {
    uint8_t *to;
    const uint8_t *from;
    size_t size;
} copy_piece;

static void copy_one(void *arg, uint64_t i)
{
    const copy_piece *p = (const copy_piece *)arg + i;
    memcpy(p->to, p->from, p->size);
}

/* Copies each rank's block for rank me into in, end to end (on this
 * thread alone where the list of pieces cannot be had). */
static void copy_blocks(const soren_thread_comm *t, int me, const uint64_t *recv_counts,
                        uint8_t *in, uint64_t total)
{
    size_t cap = (size_t)(total / COPY_PIECE) + (size_t)t->n, count = 0;
    copy_piece *pieces = malloc(cap * sizeof *pieces);
    for (uint64_t at = 0, i = 0; i < (uint64_t)t->n; i++) {
        uint64_t from = 0; /* rank i's block for me follows its blocks for ranks before me */
        for (int k = 0; k < me; k++)
            from += t->send_counts[i][k];
        const uint8_t *src = (const uint8_t *)t->send[i] + from;
        for (uint64_t done = 0; done < recv_counts[i];) {
            size_t size = recv_counts[i] - done < COPY_PIECE ? (size_t)(recv_counts[i] - done)
                                                             : COPY_PIECE;
            if (pieces)
                pieces[count++] = (copy_piece){in + at + done, src + done, size};
            else
                memcpy(in + at + done, src + done, size);
            done += size;
        }
        at += recv_counts[i];
    }
    if (pieces)
        soren__run_items(soren_dist_rank_threads(t->n), count, copy_one, pieces);
    free(pieces);
}

static soren_status thread_alltoallv(void *ctx, const void *send, const uint64_t *send_counts,
                                     void **recv, uint64_t *recv_counts, soren_error *err)
{
    struct rank_ctx *c = ctx;
    soren_thread_comm *t = c->t;
    const int me = c->rank;
    t->send[me] = send;
    t->send_counts[me] = send_counts;
    meet(t);
    uint64_t total = 0;
    for (int i = 0; i < t->n; i++)
        total += (recv_counts[i] = t->send_counts[i][me]);
    uint8_t *in = malloc(total ? total : 1);
    t->failed[me] = !in;
    if (in)
        copy_blocks(t, me, recv_counts, in, total);
    meet(t);
    int any_failed = 0;
    for (int i = 0; i < t->n; i++)
        any_failed |= t->failed[i];
    meet(t);
    if (any_failed) {
        free(in);
        return soren_error_set(err, SOREN_ENOMEM, "out of memory for the pairs the GPUs "
                               "exchange");
    }
    *recv = in;
    return SOREN_OK;
}

static soren_status thread_bcast(void *ctx, int root, void *buf, uint64_t size, soren_error *err)
{
    (void)err;
    struct rank_ctx *c = ctx;
    soren_thread_comm *t = c->t;
    if (c->rank == root)
        t->root_buf = buf;
    meet(t);
    if (c->rank != root && size)
        memcpy(buf, t->root_buf, size);
    meet(t);
    return SOREN_OK;
}

static const soren_comm_ops thread_ops = {thread_allgather, thread_alltoallv, thread_bcast};

/* Frees t and its arrays (the barrier is the caller's). */
static void free_parts(soren_thread_comm *t)
{
    free(t->ranks);
    free(t->values);
    free(t->send);
    free(t->send_counts);
    free(t->failed);
    free(t);
}

soren_thread_comm *soren__thread_comm_new(int n)
{
    soren_thread_comm *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->n = n;
    t->ranks = calloc((size_t)n, sizeof *t->ranks);
    t->values = calloc((size_t)n, sizeof *t->values);
    t->send = calloc((size_t)n, sizeof *t->send);
    t->send_counts = calloc((size_t)n, sizeof *t->send_counts);
    t->failed = calloc((size_t)n, sizeof *t->failed);
    if (!t->ranks || !t->values || !t->send || !t->send_counts || !t->failed ||
        pthread_barrier_init(&t->barrier, NULL, (unsigned)n) != 0) {
        free_parts(t);
        return NULL;
    }
    for (int r = 0; r < n; r++)
        t->ranks[r] = (struct rank_ctx){t, r};
    return t;
}

void soren__thread_comm_free(soren_thread_comm *t)
{
    if (!t)
        return;
    pthread_barrier_destroy(&t->barrier);
    free_parts(t);
}

soren_comm soren__thread_comm_rank(soren_thread_comm *t, int rank, int local_rank)
{
    return (soren_comm){.rank = rank, .size = t->n, .local_rank = local_rank, .in_process = 1,
                        .ops = &thread_ops, .ctx = &t->ranks[rank]};
}

soren_status soren__devices_pick(const soren_run_options *o, int devices[SOREN_MAX_DEVICES],
                                 size_t *count, const char **rule, soren_error *err)
{
    *count = 1;
    devices[0] = 0;
    *rule = o->devices_rule;
    if (!o->devices_all && o->device_count == 0) {
        if (o->device == SOREN_DEVICE_CPU || o->device == SOREN_DEVICE_BOTH)
            return SOREN_OK;
        /* this process starts CUDA on every GPU it takes */
        soren_spread_case c = {.gpus = soren_device_count(NULL, 0), .started = 0};
        if (c.gpus < 2)
            return SOREN_OK;
        int spread = 1;
        *rule = soren_choose_devices(&c, &spread);
        *count = (size_t)spread;
        for (size_t i = 0; i < *count; i++)
            devices[i] = (int)i;
        return SOREN_OK;
    }
    if (!*rule)
        *rule = "as --devices gives";
    if (o->device == SOREN_DEVICE_CPU || o->device == SOREN_DEVICE_BOTH)
        return soren_error_set(err, SOREN_EUSAGE, "--devices spreads a run over GPUs, and "
                               "--device %s asks for the CPU engine: give one of them",
                               o->device == SOREN_DEVICE_CPU ? "cpu" : "both");
    char why[256] = "";
    int gpus = soren_device_count(why, sizeof why);
    if (gpus <= 0 && !o->devices_all)
        return soren_error_set(err, SOREN_EDEVICE, "--devices: no usable GPU: %s; run without "
                               "--devices, or with --device cpu", why);
    if (o->devices_all) {
        *count = gpus > 1 ? (size_t)(gpus < SOREN_MAX_DEVICES ? gpus : SOREN_MAX_DEVICES) : 1;
        for (size_t i = 0; i < *count; i++)
            devices[i] = (int)i;
    } else {
        for (size_t i = 0; i < o->device_count; i++) {
            if (o->devices[i] >= gpus)
                return soren_error_set(err, SOREN_EUSAGE, "--devices: there is no GPU %d: this "
                                       "host has %d (soren-host devices lists them)",
                                       o->devices[i], gpus);
            devices[i] = o->devices[i];
        }
        *count = o->device_count;
    }
    return SOREN_OK;
}

/* The ranks' threads start together or not at all: each meets the others
 * at every collective, so one whose peers never came would wait forever. */
typedef struct gate {
    pthread_mutex_t lock;
    pthread_cond_t opened;
    int state; /* 0 closed, 1 run, -1 go home */
} gate;

typedef struct rank_run {
    gate *gate;
    const soren_plugin *p;
    soren_run_options o;
    soren_comm comm;
    soren_error err;
} rank_run;

static int gate_wait(gate *g)
{
    pthread_mutex_lock(&g->lock);
    while (g->state == 0)
        pthread_cond_wait(&g->opened, &g->lock);
    int run = g->state > 0;
    pthread_mutex_unlock(&g->lock);
    return run;
}

static void gate_open(gate *g, int state)
{
    pthread_mutex_lock(&g->lock);
    g->state = state;
    pthread_cond_broadcast(&g->opened);
    pthread_mutex_unlock(&g->lock);
}

static void *rank_main(void *arg)
{
    rank_run *r = arg;
    if (gate_wait(r->gate))
        soren_run(r->p, &r->o, &r->err);
    return NULL;
}

soren_status soren__run_ranks(const soren_plugin *p, const soren_run_options *o,
                              const int *devices, size_t count, soren_error *err)
{
    soren_thread_comm *t = soren__thread_comm_new((int)count);
    rank_run *runs = calloc(count, sizeof *runs);
    pthread_t *threads = calloc(count, sizeof *threads);
    if (!t || !runs || !threads) {
        soren__thread_comm_free(t);
        free(runs);
        free(threads);
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    }
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    for (size_t r = 0; r < count; r++) {
        runs[r].gate = &g;
        runs[r].p = p;
        runs[r].o = *o;
        runs[r].o.device_count = 0;
        runs[r].o.devices_all = 0;
        runs[r].comm = soren__thread_comm_rank(t, (int)r, devices[r]);
        runs[r].o.comm = &runs[r].comm;
        /* A caller's kept GPU sessions (a resident host's) hold a set for
         * each rank: a rank sets up on its GPU once, as a run of its own. */
        if (o->gpu_sessions)
            runs[r].o.gpu_sessions = o->gpu_sessions + r * SOREN_RANK_SESSIONS;
        /* the CPUs shared among the ranks: their staging, their folds */
        if (!o->threads) {
            unsigned cpus = soren_cpu_count() / (unsigned)count;
            runs[r].o.threads = cpus ? cpus : 1;
        }
        /* rank 0 speaks and draws the progress line; the others fail with it */
        if (r > 0)
            runs[r].o.progress = NULL;
        soren_error_clear(&runs[r].err);
    }
    size_t started = 1; /* rank 0 runs on this thread */
    while (started < count && pthread_create(&threads[started], NULL, rank_main,
                                             &runs[started]) == 0)
        started++;
    soren_status rc = SOREN_OK;
    if (started < count)
        rc = soren_error_set(err, SOREN_ENOMEM, "cannot start a thread for each GPU of "
                             "--devices: run with fewer");
    gate_open(&g, rc == SOREN_OK ? 1 : -1);
    if (rc == SOREN_OK)
        rank_main(&runs[0]);
    for (size_t r = 1; r < started; r++)
        pthread_join(threads[r], NULL);
    if (rc == SOREN_OK && runs[0].err.code != SOREN_OK) {
        *err = runs[0].err;
        rc = err->code;
    }
    soren__thread_comm_free(t);
    free(runs);
    free(threads);
    return rc;
}
