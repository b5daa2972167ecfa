#include "both.h"

#include <pthread.h>
#include <string.h>

#include "../cpu/cpu.h"
#include "chunks.h"
#include "run.h"

void soren__both_queue_init(soren_both_queue *q, const soren_input *pieces, size_t count)
{
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->changed, NULL);
    q->pieces = pieces;
    q->count = count;
    q->gpu_end = count ? 1 : 0;
    q->cpu_first = count;
}

void soren__both_queue_destroy(soren_both_queue *q)
{
    pthread_cond_destroy(&q->changed);
    pthread_mutex_destroy(&q->lock);
}

/* The GPU asks for piece i when it starts on piece i - 1, that is once
 * piece i - 2 is mapped: from its ask for piece 2 on, the bytes mapped
 * since then over the time they took are its rate, and its upload and
 * compute times since then say which bounds it. */
int soren__both_gpu_take(soren_both_queue *q, size_t i, const soren_both_gpu_state *g)
{
    pthread_mutex_lock(&q->lock);
    int mine = i < q->gpu_end;
    if (!mine && i == q->gpu_end && i < q->cpu_first && !q->gpu_stopped) {
        mine = 1;
        q->gpu_end = i + 1;
        if (i == 2)
            q->since = *g;
        if (i >= 3) {
            q->gpu_mapped += q->pieces[i - 2].size;
            double ms = g->now_ms - q->since.now_ms;
            q->gpu_rate = ms > 0 ? (double)q->gpu_mapped / ms : 0;
            q->gpu_map_bound = g->compute_ms - q->since.compute_ms >
                               g->upload_ms - q->since.upload_ms;
        }
        q->fold_ms = g->fold_ms;
        q->changes++;
    }
    if (!mine)
        q->gpu_stopped = 1; /* its pass ends before i: the rest is the CPU engine's */
    pthread_cond_broadcast(&q->changed);
    pthread_mutex_unlock(&q->lock);
    return mine;
}

void soren__both_gpu_done(soren_both_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->gpu_stopped = 1;
    pthread_cond_broadcast(&q->changed);
    pthread_mutex_unlock(&q->lock);
}

soren_both_take soren__both_cpu_take(soren_both_queue *q, double cpu_rate, size_t *k)
{
    pthread_mutex_lock(&q->lock);
    soren_both_take t = SOREN_BOTH_NO;
    const size_t last = q->cpu_first - 1;
    if (q->cpu_first <= q->gpu_end || q->gpu_stopped || q->count < SOREN_BOTH_PROBE_LEAST) {
        t = SOREN_BOTH_NO;
    } else if (q->gpu_rate <= 0 || !q->gpu_map_bound) {
        t = SOREN_BOTH_LATER; /* the GPU's rate and bound are not known, or its upload bounds it */
    } else if (cpu_rate <= 0) {
        t = SOREN_BOTH_MEASURE;
    } else {
        uint64_t ahead = 0; /* the bytes of the GPU's pieces still to start */
        for (size_t i = q->gpu_end; i < last; i++)
            ahead += q->pieces[i].size;
        const double g = q->gpu_rate, c = cpu_rate, piece = (double)q->pieces[last].size;
        /* this piece, at the CPU engine's rate, done before the GPU has
         * done the pieces ahead of it at its own */
        const int in_time = piece / c < (double)ahead / g;
        /* a first piece only where sharing the rest saves more than the
         * fold of the two engines' pairs costs */
        const double share_saves_ms = ((double)ahead + piece) * c / (g * (g + c));
        const int pays = q->cpu_first < q->count || share_saves_ms > q->fold_ms;
        t = in_time && pays ? SOREN_BOTH_YES : SOREN_BOTH_NO;
    }
    if (t == SOREN_BOTH_YES) {
        q->cpu_first = last;
        *k = last;
    }
    q->cpu_seen = q->changes;
    pthread_mutex_unlock(&q->lock);
    return t;
}

void soren__both_wait(soren_both_queue *q)
{
    pthread_mutex_lock(&q->lock);
    while (q->changes == q->cpu_seen && !q->gpu_stopped)
        pthread_cond_wait(&q->changed, &q->lock);
    pthread_mutex_unlock(&q->lock);
}

/* What folding a key of the CPU engine's pairs with the GPU's costs: the
 * pairs packed, copied up, folded, ordered and copied back (about 50 to 100
 * ns a key for wordcount on an H100 host). */
#define FOLD_MS_PER_KEY 1e-4

/* The GPU's ask (soren_gpu_claim), on its run's thread, which fills x. */
typedef struct gpu_asker {
    soren_both_queue *q;
    const soren_explain *x;
    int folds_anyway; /* the stage's reduce function or limit needs the fold */
} gpu_asker;

static int gpu_take(void *ctx, size_t i)
{
    const gpu_asker *a = ctx;
    const soren_phase_times *t = &a->x->ms;
    soren_both_gpu_state g = {
        .now_ms = soren__now_ms(), .upload_ms = t->upload,
        .compute_ms = t->split + t->monitor + t->map,
        .fold_ms = a->folds_anyway ? 0 : FOLD_MS_PER_KEY * (double)a->x->projection.distinct_keys};
    return soren__both_gpu_take(a->q, i, &g);
}

/* The sample that measures the CPU engine's rate: a MiB (monitoring's
 * chunk) on each of at most BOTH_SAMPLE_THREADS threads.  It runs beside
 * the GPU's run, whose copy threads need CPUs too: a sample on 16 threads
 * cost a k-means run beside an H100 a sixth of its time, with no piece
 * taken.  The sample's rate is scaled to the share's threads: it is taken
 * only beside a GPU that its map bounds, and such maps gain from every
 * thread (the first piece's own rate replaces it). */
enum { BOTH_SAMPLE_PER_THREAD = 1 << 20, BOTH_SAMPLE_THREADS = 4 };

/* The CPU engine's share: pieces from the input's end, one at a time, on a
 * thread of its own; their pairs appended to res. */
typedef struct cpu_share {
    soren_both_queue *q;
    const soren_stage_spec *spec; /* soren__local_spec: the fold reduces and orders */
    const soren_params *params;
    soren_run_options o;
    soren_result res;
    uint64_t bytes;
    size_t pieces;
    double ms;
    soren_error err;
    soren_status rc;
} cpu_share;

/* The CPU engine's rate on its threads before it has mapped a piece:
 * monitoring, timed, over the start of the input's last piece (the sample
 * above), every record mapped and no pair stored; 0 where that fails. */
static double cpu_sample_rate(cpu_share *c)
{
    const soren_input *last = &c->q->pieces[c->q->count - 1];
    const unsigned threads = c->o.threads < BOTH_SAMPLE_THREADS ? c->o.threads
                                                                : BOTH_SAMPLE_THREADS;
    const uint64_t want = (uint64_t)BOTH_SAMPLE_PER_THREAD * threads;
    soren_input sample;
    soren_input_slice(&sample, last, 0, soren_record_boundary(c->spec, last, want));
    soren_metrics m;
    soren_error err;
    soren_error_clear(&err);
    double t0 = soren__now_ms();
    soren_status rc =
        soren_cpu_monitor(c->spec, &sample, 1, c->params, 1, threads, NULL, &m, &err);
    double ms = soren__now_ms() - t0;
    soren_input_close(&sample);
    if (rc != SOREN_OK || ms <= 0)
        return 0;
    return (double)m.sampled_bytes / ms * c->o.threads / threads;
}

static void *cpu_share_main(void *arg)
{
    cpu_share *c = arg;
    double rate = 0;
    size_t k;
    for (;;) {
        soren_both_take t = soren__both_cpu_take(c->q, rate, &k);
        if (t == SOREN_BOTH_NO)
            break;
        if (t == SOREN_BOTH_LATER) {
            soren__both_wait(c->q);
            continue;
        }
        if (t == SOREN_BOTH_MEASURE) {
            /* the sample stores no pairs, which costs about as much again */
            if ((rate = cpu_sample_rate(c) / 2) <= 0)
                break;
            continue;
        }
        const soren_input *piece = &c->q->pieces[k];
        soren_explain x;
        memset(&x, 0, sizeof x);
        soren_result part;
        soren_result_init(&part, c->spec);
        char rule[256];
        double t0 = soren__now_ms();
        c->rc = soren__run_cpu(c->spec, piece, 1, c->params, &c->o, &part, &x, rule, sizeof rule,
                               &c->err);
        c->ms += soren__now_ms() - t0;
        if (c->rc == SOREN_OK)
            c->rc = soren_result_append_all(&c->res, &part, &c->err);
        soren_result_destroy(&part);
        soren_explain_destroy(&x);
        if (c->rc != SOREN_OK)
            break;
        c->bytes += piece->size;
        c->pieces++;
        rate = c->ms > 0 ? (double)c->bytes / c->ms : 0;
    }
    return NULL;
}

/* The CPU engine's threads beside the GPU: --threads, else the CPUs the
 * GPU's copy threads leave free (they stage the GPU's input and are bound
 * by the host's memory, which the CPU engine's threads would share). */
static unsigned cpu_share_threads(const soren_run_options *o)
{
    if (o->threads)
        return o->threads;
    unsigned cpus = soren_cpu_count(), copying = soren_gpu_copy_threads();
    return cpus > copying ? cpus - copying : 0;
}

/* Whether the GPU's result over its share is the stage's own where the CPU
 * engine took nothing: its pairs fold again with the combine only where no
 * reduce function and no limit has changed them. */
static int gpu_result_folds(const soren_stage_spec *spec)
{
    return spec->reduce != SOREN_REDUCE_FUNCTION && spec->limit == 0;
}

/* Both engines' pairs (all, destroyed here) folded into res with the
 * stage's combine, reduced and ordered: on the GPU where that gains, as a
 * rank of a distributed run folds what it received. */
static soren_status fold_both(const soren_stage_spec *spec, soren_result *all,
                              const soren_params *params, const soren_run_options *o,
                              soren_result *res, int *on_gpu, soren_error *err)
{
    soren_input pairs;
    soren_status rc = soren_input_pairs(&pairs, "(both engines' pairs)", all, err);
    soren_result_destroy(all);
    if (rc != SOREN_OK)
        return rc;
    soren_progress_phase(o->progress, "fold", 0);
    rc = soren__fold_received(spec, 0, SOREN_DEVICE_GPU, &pairs, params, o, res, on_gpu, err);
    soren_input_close(&pairs);
    return rc;
}

soren_status soren__run_both(const soren_stage_spec *spec, const soren_input *inputs,
                             size_t input_count, const soren_params *params,
                             const soren_run_options *o, soren_gpu_session **session,
                             soren_result *res, soren_explain *x, soren_error *err)
{
    const unsigned threads = cpu_share_threads(o);
    if (input_count < SOREN_BOTH_PROBE_LEAST || threads == 0) {
        if (o->verbose)
            soren_progress_say(o->progress, "soren-host: --device both: %s; the GPU runs "
                               "alone\n", threads == 0
                                              ? "the GPU's copy threads take every CPU"
                                              : "the input is too small to share");
        return soren__run_gpu(spec, inputs, input_count, params, o, session, NULL, res, x, err);
    }
    const soren_stage_spec local = soren__local_spec(spec);
    const soren_stage_spec *gpu_spec = gpu_result_folds(spec) ? spec : &local;
    soren_both_queue q;
    soren__both_queue_init(&q, inputs, input_count);
    cpu_share cpu = {.q = &q, .spec = &local, .params = params, .o = *o};
    /* The progress line is the GPU's; the CPU engine's threads leave it be. */
    cpu.o.progress = NULL;
    cpu.o.verbose = 0;
    cpu.o.threads = threads;
    soren_result_init(&cpu.res, &local);
    pthread_t tid;
    const int started = pthread_create(&tid, NULL, cpu_share_main, &cpu) == 0;

    soren_gpu_session *own = NULL;
    gpu_asker asker = {&q, x, gpu_spec != spec};
    soren_gpu_claim claim = {gpu_take, &asker};
    soren_result gpu_res;
    soren_result_init(&gpu_res, gpu_spec);
    soren_status rc = soren__run_gpu(gpu_spec, inputs, input_count, params, o,
                                     session ? session : &own, &claim, &gpu_res, x, err);
    soren__both_gpu_done(&q);
    if (started)
        pthread_join(tid, NULL);
    soren_gpu_session_free(own);
    const size_t gpu_pieces = q.gpu_end;
    soren__both_queue_destroy(&q);

    uint64_t gpu_bytes = 0;
    for (size_t i = 0; i < gpu_pieces; i++)
        gpu_bytes += inputs[i].size;
    const soren_phase_times *t = &x->ms;
    soren_sharing sharing = {
        .pieces = input_count, .gpu_bytes = gpu_bytes, .cpu_bytes = cpu.bytes,
        .cpu_pieces = cpu.pieces, .cpu_threads = threads, .cpu_ms = cpu.ms,
        .gpu_ms = t->upload + t->split + t->monitor + t->map + t->merge + t->reduce + t->sort +
                  t->download};
    if (rc == SOREN_OK && cpu.rc != SOREN_OK)
        rc = soren_error_set(err, cpu.rc, "%s (the CPU engine's share of --device both)",
                             cpu.err.text);
    if (rc == SOREN_OK && o->verbose)
        soren_progress_say(o->progress, "soren-host: --device both: the GPU mapped %llu bytes "
                           "in %.1f ms, the CPU engine %llu bytes (%zu of %zu pieces, %u "
                           "threads) in %.1f ms\n",
                           (unsigned long long)gpu_bytes, sharing.gpu_ms,
                           (unsigned long long)cpu.bytes, cpu.pieces, input_count, threads,
                           cpu.ms);
    if (rc == SOREN_OK && cpu.pieces == 0 && gpu_spec == spec) {
        soren_result_destroy(res);
        *res = gpu_res; /* the GPU's result is the stage's */
        soren_result_destroy(&cpu.res);
        x->sharing = sharing;
        return SOREN_OK;
    }
    soren_result all;
    soren_result_init(&all, &local);
    if (rc == SOREN_OK)
        rc = soren_result_append_all(&all, &gpu_res, err);
    if (rc == SOREN_OK)
        rc = soren_result_append_all(&all, &cpu.res, err);
    soren_result_destroy(&gpu_res);
    soren_result_destroy(&cpu.res);
    if (rc != SOREN_OK) {
        soren_result_destroy(&all);
        return rc;
    }
    double t0 = soren__now_ms();
    int on_gpu = 0;
    rc = fold_both(spec, &all, params, o, res, &on_gpu, err);
    sharing.fold_ms = soren__now_ms() - t0;
    sharing.fold = on_gpu ? "gpu" : "cpu";
    x->sharing = sharing;
    return rc;
}
