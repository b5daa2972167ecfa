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
 * reads.
 *
 * Where this process is one of several (outer: mpirun's processes, one a
 * host driving its GPUs), its n ranks are ranks first .. first + n - 1 of
 * the run's total.  Local rank 0, the leader, is the one that calls outer's
 * collectives (it runs on the thread that called soren__run_ranks, where
 * MPI started): between two meetings it moves what this process's ranks
 * published to the other processes, and what they sent back. */
struct soren_thread_comm {
    int n;
    pthread_barrier_t barrier;
    struct rank_ctx {
        soren_thread_comm *t;
        int rank; /* among this process's ranks */
    } *ranks;
    uint64_t *values;              /* allgather: one per rank of the run */
    const void **send;             /* alltoallv: each rank's send buffer */
    const uint64_t **send_counts;  /* ... and its counts, one per rank of the run */
    int *failed;                   /* alltoallv: a rank that could not take its part */
    const void *root_buf;          /* bcast */

    const soren_comm *outer;       /* the processes; NULL where this one is the run */
    int first, total;              /* this process's first rank; the run's ranks */
    int *process_first;            /* each process's first rank; [outer->size] = total */
    soren_status outer_rc;         /* the leader's last outer collective */
    soren_error outer_err;
    /* The leader's exchange (alltoallv): what leaves this process, for
     * each other process in turn, each of its ranks' blocks for that
     * process's ranks; what arrives, laid out by the sending rank of the
     * run and then by the receiving rank of this process.  Blocks between
     * ranks of this process are read from their send buffers, as where
     * the process is the run. */
    uint64_t *out_counts;          /* n * total: the blocks' sizes, as they leave */
    uint64_t *out_bytes;           /* outer->size: the bytes for each process */
    uint64_t *pack_at;             /* n * outer->size: where rank s's part for process q goes */
    uint8_t *packed;
    uint64_t *in_counts;           /* total * n: the size of rank g's block for our rank d */
    uint64_t *in_at;               /* total * n: where it lies in in_bytes */
    uint8_t *in_bytes;
};

static void meet(soren_thread_comm *t)
{
    pthread_barrier_wait(&t->barrier);
}

/* The leader's last outer collective, on every rank of this process. */
static soren_status outer_status(const soren_thread_comm *t, soren_error *err)
{
    if (t->outer_rc != SOREN_OK)
        *err = t->outer_err;
    return t->outer_rc;
}

/* The ranks of process q. */
static int process_size(const soren_thread_comm *t, int q)
{
    return t->process_first[q + 1] - t->process_first[q];
}

/* The leader's part of an allgather: a copy of this process's values for
 * every process, every process's into values. */
static soren_status outer_allgather(soren_thread_comm *t)
{
    const soren_comm *o = t->outer;
    const size_t n = (size_t)t->n, P = (size_t)o->size;
    uint64_t *each = soren_dist_must_alloc(P * sizeof *each);
    uint64_t *got = soren_dist_must_alloc(P * sizeof *got);
    uint64_t *copies = soren_dist_must_alloc(P * n * sizeof *copies);
    for (size_t q = 0; q < P; q++) {
        each[q] = n * sizeof *copies;
        memcpy(copies + q * n, t->values + t->first, n * sizeof *copies);
    }
    void *in = NULL;
    soren_status rc = o->ops->alltoallv(o->ctx, copies, each, &in, got, &t->outer_err);
    if (rc == SOREN_OK)
        memcpy(t->values, in, (size_t)t->total * sizeof *t->values);
    free(in);
    free(copies);
    free(each);
    free(got);
    return rc;
}

static soren_status thread_allgather(void *ctx, uint64_t value, uint64_t *all, soren_error *err)
{
    struct rank_ctx *c = ctx;
    soren_thread_comm *t = c->t;
    t->values[t->first + c->rank] = value;
    meet(t);
    if (t->outer) {
        if (c->rank == 0)
            t->outer_rc = outer_allgather(t);
        meet(t);
    }
    if (t->outer_rc == SOREN_OK)
        memcpy(all, t->values, (size_t)t->total * sizeof *all);
    meet(t);
    return outer_status(t, err);
}

/* The leader lays out what leaves this process: rank s's blocks for the
 * ranks of process q lie end to end in its send buffer, and go to
 * pack_at[s * P + q], after the blocks of the ranks before s for q.  Every
 * block's size goes to its process, this one's too (it receives none of
 * the bytes). */
static soren_status outer_pack_layout(soren_thread_comm *t)
{
    const int P = t->outer->size, n = t->n;
    uint64_t at = 0;
    for (int q = 0; q < P; q++) {
        const int first = t->process_first[q], size = process_size(t, q);
        const uint64_t start = at;
        for (int s = 0; s < n; s++) {
            t->pack_at[s * P + q] = at;
            for (int d = 0; d < size; d++) {
                uint64_t bytes = t->send_counts[s][first + d];
                t->out_counts[(uint64_t)n * first + (uint64_t)s * size + d] = bytes;
                at += q == t->outer->rank ? 0 : bytes;
            }
        }
        t->out_bytes[q] = at - start;
    }
    t->packed = malloc(at ? at : 1);
    return t->packed ? SOREN_OK
                     : soren_error_set(&t->outer_err, SOREN_ENOMEM, "out of memory for the "
                                       "%llu bytes of pairs that leave this process",
                                       (unsigned long long)at);
}

/* Rank s copies its blocks for every process into place. */
static void outer_pack(soren_thread_comm *t, int s)
{
    const int P = t->outer->size;
    const uint8_t *from = t->send[s];
    for (int q = 0; q < P; q++) {
        uint64_t bytes = 0;
        for (int d = t->process_first[q]; d < t->process_first[q + 1]; d++)
            bytes += t->send_counts[s][d];
        if (q != t->outer->rank)
            memcpy(t->packed + t->pack_at[s * P + q], from, bytes);
        from += bytes;
    }
}

/* The leader's part of an alltoallv, once its ranks packed: the processes
 * agree that all packed, exchange the blocks' sizes and then the blocks. */
static soren_status outer_exchange(soren_thread_comm *t)
{
    const soren_comm *o = t->outer;
    const int P = o->size, n = t->n;
    soren_status rc = soren_dist_agree(o, t->outer_rc, &t->outer_err);
    uint64_t *each = soren_dist_must_alloc((size_t)P * sizeof *each);
    uint64_t *got = soren_dist_must_alloc((size_t)P * sizeof *got);
    for (int q = 0; q < P; q++)
        each[q] = (uint64_t)n * (uint64_t)process_size(t, q) * sizeof *t->out_counts;
    void *counts = NULL, *bytes = NULL;
    if (rc == SOREN_OK)
        rc = o->ops->alltoallv(o->ctx, t->out_counts, each, &counts, got, &t->outer_err);
    if (rc == SOREN_OK)
        rc = o->ops->alltoallv(o->ctx, t->packed, t->out_bytes, &bytes, got, &t->outer_err);
    free(each);
    free(got);
    free(t->packed);
    t->packed = NULL;
    if (rc != SOREN_OK) {
        free(counts);
        free(bytes);
        return rc;
    }
    /* Each other process sent its ranks' blocks for ours, rank after
     * rank: by the sending rank of the run, then by ours. */
    t->in_counts = counts;
    t->in_bytes = bytes;
    uint64_t at = 0;
    for (uint64_t i = 0; i < (uint64_t)t->total * (uint64_t)n; i++) {
        const uint64_t from = i / (uint64_t)n;
        t->in_at[i] = at;
        if (from < (uint64_t)t->first || from >= (uint64_t)(t->first + n))
            at += t->in_counts[i];
    }
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

/* Where rank i's block for this process's rank me lies, and its size. */
static const uint8_t *block_for(const soren_thread_comm *t, int i, int me, uint64_t *size)
{
    const int sender = i - t->first;
    if (sender < 0 || sender >= t->n) { /* another process's: in what it sent */
        uint64_t k = (uint64_t)i * (uint64_t)t->n + (uint64_t)me;
        *size = t->in_counts[k];
        return t->in_bytes + t->in_at[k];
    }
    /* this process's: after its blocks for the ranks before me */
    const int to = t->first + me;
    uint64_t from = 0;
    for (int k = 0; k < to; k++)
        from += t->send_counts[sender][k];
    *size = t->send_counts[sender][to];
    return (const uint8_t *)t->send[sender] + from;
}

/* Copies each rank's block for rank me into in, end to end (on this
 * thread alone where the list of pieces cannot be had). */
static void copy_blocks(const soren_thread_comm *t, int me, uint8_t *in, uint64_t total)
{
    size_t cap = (size_t)(total / COPY_PIECE) + (size_t)t->total, count = 0;
    copy_piece *pieces = malloc(cap * sizeof *pieces);
    for (uint64_t at = 0, i = 0; i < (uint64_t)t->total; i++) {
        uint64_t bytes;
        const uint8_t *src = block_for(t, (int)i, me, &bytes);
        for (uint64_t done = 0; done < bytes;) {
            size_t size = bytes - done < COPY_PIECE ? (size_t)(bytes - done) : COPY_PIECE;
            if (pieces)
                pieces[count++] = (copy_piece){in + at + done, src + done, size};
            else
                memcpy(in + at + done, src + done, size);
            done += size;
        }
        at += bytes;
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
    if (t->outer) {
        if (me == 0)
            t->outer_rc = outer_pack_layout(t);
        meet(t);
        if (t->packed)
            outer_pack(t, me);
        meet(t);
        if (me == 0)
            t->outer_rc = outer_exchange(t);
        meet(t);
    }
    uint8_t *in = NULL;
    if (t->outer_rc == SOREN_OK) {
        uint64_t total = 0;
        for (int i = 0; i < t->total; i++) {
            block_for(t, i, me, &recv_counts[i]);
            total += recv_counts[i];
        }
        if ((in = malloc(total ? total : 1)))
            copy_blocks(t, me, in, total);
    }
    t->failed[me] = !in;
    meet(t);
    int any_failed = 0;
    for (int i = 0; i < t->n; i++)
        any_failed |= t->failed[i];
    meet(t);
    if (t->outer && me == 0) {
        free(t->in_counts);
        free(t->in_bytes);
        t->in_counts = NULL;
        t->in_bytes = NULL;
    }
    if (t->outer_rc != SOREN_OK || any_failed) {
        free(in);
        return t->outer_rc != SOREN_OK
                   ? outer_status(t, err)
                   : soren_error_set(err, SOREN_ENOMEM, "out of memory for the pairs the "
                                     "GPUs exchange");
    }
    *recv = in;
    return SOREN_OK;
}

/* The process that holds rank g of the run. */
static int process_of(const soren_thread_comm *t, int g)
{
    int q = 0;
    while (g >= t->process_first[q + 1])
        q++;
    return q;
}

static soren_status thread_bcast(void *ctx, int root, void *buf, uint64_t size, soren_error *err)
{
    struct rank_ctx *c = ctx;
    soren_thread_comm *t = c->t;
    const int here = root >= t->first && root < t->first + t->n;
    /* Elsewhere, the leader receives it for this process's ranks. */
    const int local_root = here ? root - t->first : 0;
    if (c->rank == local_root)
        t->root_buf = buf;
    meet(t);
    if (here && c->rank != local_root && size)
        memcpy(buf, t->root_buf, size);
    meet(t);
    if (!t->outer)
        return SOREN_OK;
    if (c->rank == 0)
        t->outer_rc = t->outer->ops->bcast(t->outer->ctx, process_of(t, root), buf, size,
                                           &t->outer_err);
    meet(t);
    if (!here && c->rank != 0 && size && t->outer_rc == SOREN_OK)
        memcpy(buf, t->root_buf, size);
    meet(t);
    return outer_status(t, err);
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
    free(t->process_first);
    free(t->out_counts);
    free(t->out_bytes);
    free(t->pack_at);
    free(t->in_at);
    free(t);
}

soren_thread_comm *soren__thread_comm_new(int n)
{
    soren_thread_comm *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->n = t->total = n;
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

/* The arrays of a process among others, whose ranks each process holds. */
static soren_status place(soren_thread_comm *t, const soren_comm *outer, const uint64_t *sizes,
                          soren_error *err)
{
    const int P = outer->size;
    if (!(t->process_first = calloc((size_t)P + 1, sizeof *t->process_first)))
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    for (int q = 0; q < P; q++)
        t->process_first[q + 1] = t->process_first[q] + (int)sizes[q];
    t->outer = outer;
    t->first = t->process_first[outer->rank];
    t->total = t->process_first[P];
    const size_t n = (size_t)t->n, total = (size_t)t->total;
    free(t->values);
    t->values = calloc(total, sizeof *t->values);
    t->out_counts = calloc(n * total, sizeof *t->out_counts);
    t->out_bytes = calloc((size_t)P, sizeof *t->out_bytes);
    t->pack_at = calloc(n * (size_t)P, sizeof *t->pack_at);
    t->in_at = calloc(total * n, sizeof *t->in_at);
    if (!t->values || !t->out_counts || !t->out_bytes || !t->pack_at || !t->in_at)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    return SOREN_OK;
}

soren_status soren__thread_comm_join(soren_thread_comm *t, int n, const soren_comm *outer,
                                     soren_status rc, soren_error *err)
{
    uint64_t *sizes = soren_dist_must_alloc((size_t)outer->size * sizeof *sizes);
    soren_status st = outer->ops->allgather(outer->ctx, (uint64_t)n, sizes, err);
    if (st != SOREN_OK) {
        free(sizes);
        return st;
    }
    if (rc == SOREN_OK)
        rc = place(t, outer, sizes, err);
    free(sizes);
    return soren_dist_agree(outer, rc, err);
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
    return (soren_comm){.rank = t->first + rank, .size = t->total, .local_rank = local_rank,
                        .process_ranks = t->n, .ops = &thread_ops, .ctx = &t->ranks[rank]};
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
    soren_status rc = t && runs && threads ? SOREN_OK
                                           : soren_error_set(err, SOREN_ENOMEM, "out of memory");
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    size_t started = 1; /* rank 0 runs on this thread */
    while (rc == SOREN_OK && started < count) {
        runs[started].gate = &g;
        if (pthread_create(&threads[started], NULL, rank_main, &runs[started]) != 0)
            rc = soren_error_set(err, SOREN_ENOMEM, "cannot start a thread for each GPU of "
                                 "--devices: run with fewer");
        else
            started++;
    }
    /* Every process of a run of several starts its ranks, or none does. */
    if (o->comm)
        rc = soren__thread_comm_join(t, (int)count, o->comm, rc, err);
    for (size_t r = 0; rc == SOREN_OK && r < count; r++) {
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
        /* the run's rank 0 speaks and draws the progress line; the others
         * fail with it */
        if (runs[r].comm.rank > 0)
            runs[r].o.progress = NULL;
        soren_error_clear(&runs[r].err);
    }
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
