#include "dist_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

/* Whether the last stage's pairs all go to rank 0, whose GPU folds the whole
 * result (st->folded_whole), instead of each rank folding its keys' and
 * rank 0 gathering and merging what they folded: where the ranks share this
 * process (a copy moves the pairs), the output is written whole, and the
 * stage folds on the GPU.  One fold on the GPU takes a few milliseconds,
 * where packing and gathering the folded shares cost more than it saves.
 * Every rank decides alike. */
static int folds_whole(const soren_stage_spec *spec, soren_device where,
                       const soren_run_options *o)
{
    return o->comm->process_ranks == o->comm->size && where == SOREN_DEVICE_GPU &&
           !o->output_parts && !o->iterate && soren_gpu_folds_pairs(spec);
}

/* One stage on one rank: map its share (unless prior failed), agree, and
 * where the stage shuffles, exchange, fold and agree again.  res (its
 * share of the stage's output, in the stage's order; the whole on rank 0
 * where the last stage folds whole) is initialised here. */
static soren_status run_stage_dist(const soren_stage_spec *spec, size_t index, int last,
                                   soren_device where, const soren_input *inputs,
                                   size_t input_count, const soren_params *params,
                                   const soren_run_options *o, soren_status prior,
                                   soren_result *res, soren_explain *x, char *rule,
                                   size_t rule_size, soren_rank_stage *st, soren_error *err)
{
    const soren_comm *c = o->comm;
    soren_stage_spec l = soren__local_spec(spec);
    soren_result_init(res, spec);
    st->gpu = where == SOREN_DEVICE_GPU;
    st->shuffled = (uint32_t)soren__stage_shuffles(spec);
    double t0 = soren__now_ms();
    /* A reduce without a combine: the rank maps its pairs as they come and
     * the fold groups them, so where hash is forced (which groups a reduce's
     * values in one process) the rank's map is direct, the same pairs. */
    soren_run_options lo = *o;
    if (spec->reduce == SOREN_REDUCE_FUNCTION && spec->combine == SOREN_COMBINE_NONE &&
        o->engine && strcmp(o->engine, "hash") == 0)
        lo.engine = "direct";
    soren_status rc = prior;
    if (rc == SOREN_OK)
        rc = soren__run_stage(&l, index, where, inputs, input_count, params, &lo, res, x, rule,
                              rule_size, err);
    st->ms_map = soren__now_ms() - t0;
    st->mapped = st->pairs = x->pairs = res->count;
    rc = soren_dist_agree(c, rc, err);
    if (rc != SOREN_OK || !st->shuffled)
        return rc;

    soren_progress_phase(o->progress, "shuffle", 0);
    soren_input received;
    st->folded_whole = (uint32_t)(last && folds_whole(spec, where, o));
    rc = st->folded_whole ? soren_dist_gather_pairs(c, res, &received, &st->sent_bytes, err)
                          : soren_dist_shuffle(c, res, &received, &st->sent_bytes, err);
    soren_result_destroy(res);
    double t1 = soren__now_ms();
    st->ms_exchange = t1 - t0 - st->ms_map;
    if (rc != SOREN_OK)
        return rc;
    st->received = received.count;
    soren_progress_phase(o->progress, "fold", 0);
    soren_result_init(res, spec);
    int on_gpu = 0;
    rc = soren__fold_received(spec, index, where, &received, params, o, res, &on_gpu, err);
    st->fold_gpu = (uint32_t)on_gpu;
    soren_input_close(&received);
    st->pairs = x->pairs = res->count;
    st->ms_fold = soren__now_ms() - t1;
    return soren_dist_agree(c, rc, err);
}

soren_status soren__run_stages_dist(const soren_run_plan *plan, soren_device where,
                                    const soren_input *inputs, size_t input_count,
                                    const soren_params *params, const soren_run_options *o,
                                    soren_result *res, soren_explain *xs, char (*rules)[256],
                                    soren_rank_stage *stats, soren_error *err)
{
    const soren_stage_spec *specs = plan->specs;
    size_t stages = plan->stages;
    soren_status rc = run_stage_dist(&specs[0], 0, stages == 1, where, inputs, input_count, params,
                                     o, SOREN_OK, res, &xs[0], rules[0], sizeof rules[0],
                                     &stats[0], err);
    for (size_t i = 1; rc == SOREN_OK && i < stages; i++) {
        uint64_t first = 0;
        rc = soren_dist_first(o->comm, res->count, &first, err);
        if (rc != SOREN_OK)
            return rc;
        char name[64];
        snprintf(name, sizeof name, "(the pairs of stage %zu)", i);
        soren_input pairs;
        soren_status packed = soren_input_pairs(&pairs, name, res, err);
        pairs.base = first;
        stats[i].begin = first;
        stats[i].end = first + res->count;
        soren_result_destroy(res);
        if (o->verbose)
            soren_progress_say(o->progress, "soren-host: %s: stage %zu of %zu: %llu pairs on "
                               "rank 0\n", plan->job, i + 1, stages,
                               (unsigned long long)pairs.count);
        rc = run_stage_dist(&specs[i], i, i == stages - 1, where, &pairs, 1, params, o, packed,
                            res, &xs[i], rules[i], sizeof rules[i], &stats[i], err);
        soren_input_close(&pairs);
    }
    return rc;
}

soren_status soren__gather_whole(const soren_run_options *o, const soren_stage_spec *last,
                                 const soren_result *share, int to_all, soren_result *whole,
                                 soren_error *err)
{
    const soren_comm *c = o->comm;
    soren_result_init(whole, last);
    /* Each share is in the stage's order already (its first `limit`
     * pairs, where the stage keeps so many): the whole is their merge. */
    uint64_t *ends;
    soren_status rc = soren_dist_ends(c, share->count, &ends, err);
    if (rc == SOREN_OK)
        rc = soren_dist_gather(c, share, to_all, whole, err);
    if (rc == SOREN_OK && (to_all || c->rank == 0))
        rc = soren_result_merge_runs(whole, ends, (size_t)c->size, last->order, last->limit,
                                     err);
    free(ends);
    return soren_dist_agree(c, rc, err);
}

/* Rank 0 gets every rank's stats: all[stage * ranks + rank]; all may be
 * NULL on rank 0 (out of memory: no report), and is unused elsewhere. */
static soren_status gather_stats(const soren_comm *c, const soren_rank_stage *mine,
                                 size_t stages, soren_rank_stage *all, soren_error *err)
{
    for (size_t s = 0; s < stages; s++) {
        soren_rank_stage *row = c->rank == 0 && all ? all + s * (size_t)c->size : NULL;
        soren_status rc = soren_dist_gather_fixed(c, &mine[s], sizeof mine[s], row, err);
        if (rc != SOREN_OK)
            return rc;
    }
    return SOREN_OK;
}

/* --verbose on rank 0: what every rank did in every stage, a line each
 * through the progress line (relayed to a resident host's client). */
static void say_ranks(soren_progress *progress, const soren_distributed *d, size_t stages)
{
    for (size_t s = 0; s < stages; s++)
        for (int r = 0; r < d->ranks; r++) {
            const soren_rank_stage *st = &d->stages[s * (size_t)d->ranks + r];
            char sent[96] = "", fold[96] = "";
            if (st->shuffled)
                snprintf(sent, sizeof sent, ", %llu bytes sent, %llu pairs received",
                         (unsigned long long)st->sent_bytes, (unsigned long long)st->received);
            if (st->folded_whole && r > 0)
                snprintf(fold, sizeof fold, "; rank 0 folds its pairs");
            else
                snprintf(fold, sizeof fold, ", fold %.3f on the %s%s", st->ms_fold,
                         st->fold_gpu ? "gpu" : "cpu",
                         st->folded_whole ? ", the whole result" : "");
            soren_progress_say(progress, "soren-host: rank %d of %d: stage %zu: %s engine, %s "
                               "[%llu, %llu), %llu pairs mapped%s, %llu pairs out; ms: map "
                               "%.3f, exchange %.3f%s\n", r, d->ranks, s + 1,
                               st->gpu ? "gpu" : "cpu", s ? "pairs" : "input",
                               (unsigned long long)st->begin, (unsigned long long)st->end,
                               (unsigned long long)st->mapped, sent,
                               (unsigned long long)st->pairs, st->ms_map, st->ms_exchange, fold);
        }
}

soren_status soren__report_ranks(const soren_run_options *o, const soren_rank_stage *stats,
                                 size_t stages, soren_rank_stage **all, soren_error *err)
{
    const soren_comm *c = o->comm;
    *all = c->rank == 0 ? calloc(stages * (size_t)c->size, sizeof **all) : NULL;
    soren_status rc = gather_stats(c, stats, stages, *all, err);
    if (rc == SOREN_OK && *all && o->verbose)
        say_ranks(o->progress, &(soren_distributed){.ranks = c->size, .stages = *all}, stages);
    return rc;
}

char *soren__part_path(const char *output, int rank, int ranks)
{
    int width = snprintf(NULL, 0, "%d", ranks - 1);
    size_t size = strlen(output) + 2 * 12 + 16;
    char *path = malloc(size);
    if (path)
        snprintf(path, size, "%s.part-%0*d-of-%d", output, width, rank, ranks);
    return path;
}

soren_status soren__check_parts(const char *job, const soren_stage_spec *last,
                                const soren_run_options *o, soren_error *err)
{
    if (!o->output_parts)
        return SOREN_OK;
    if (!o->output || strcmp(o->output, "-") == 0)
        return soren_error_set(err, SOREN_EUSAGE, "--output-parts writes OUTPUT.part-R-of-N, one "
                               "file per rank: give -o OUTPUT");
    if (last->limit)
        return soren_error_set(err, SOREN_EUSAGE, "--output-parts: %s keeps the first %llu pairs "
                               "(%s), a cut of the whole result that no rank holds: run it "
                               "without --output-parts%s", job,
                               (unsigned long long)last->limit,
                               o->top ? "--top" : "its manifest's output.limit",
                               o->top ? ", or without --top" : "");
    return SOREN_OK;
}
