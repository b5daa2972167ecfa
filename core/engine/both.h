/*
 * both.h - co-processing (--device both, the Mars paper, section 4.4):
 * stage 1 mapped by the GPU and the CPU engine at once.  The input is cut
 * into pieces (chunks.h: the GPU's chunks, the last one cut again into
 * small pieces).  The GPU takes pieces from the front as its run opens
 * them; the CPU engine takes them from the back, one at a time, on a
 * thread of its own, where the GPU's run is bound by its map rather than
 * by its upload: it takes the next piece only if, at its rate (a timed
 * sample of the last piece's map, then the pieces it mapped), it would
 * map it before the GPU, at the rate its run shows, would be done with the
 * pieces in front of it, and its share would save more than the fold of
 * its pairs costs.  Where it took a piece, both engines' pairs are folded (on the GPU where
 * that gains); where it took none, the GPU's result is the stage's.  The
 * later stages run on the GPU alone.
 */
#ifndef SOREN_ENGINE_BOTH_H
#define SOREN_ENGINE_BOTH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/adapt.h"
#include "../base/result.h"
#include "../base/stage.h"
#include "../error.h"
#include "../io/input.h"
#include "../plugin/params.h"
#include "options.h"

/* Fewer pieces than this run on the GPU alone: a piece would be too large
 * a share to risk. */
enum { SOREN_BOTH_PROBE_LEAST = 8 };

/* What the GPU's run shows when it asks for a piece. */
typedef struct soren_both_gpu_state {
    double now_ms;
    double upload_ms;  /* its upload's time so far */
    double compute_ms; /* its split's, monitoring's and map's */
    /* what folding the CPU engine's pairs with its own would cost (from
     * its projected keys), or 0 where its result is folded anyway */
    double fold_ms;
} soren_both_gpu_state;

/* The pieces between the two engines. */
typedef struct soren_both_queue {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* the GPU took a piece, or its run ended */
    const soren_input *pieces;
    size_t count;
    size_t gpu_end;    /* pieces [0, gpu_end) are the GPU's (the first always) */
    size_t cpu_first;  /* pieces [cpu_first, count) are the CPU engine's */
    int gpu_stopped;   /* the GPU's run has ended its pass (or failed) */
    uint64_t changes, cpu_seen; /* GPU takes so far; their count at the CPU engine's LATER */
    soren_both_gpu_state since; /* at the GPU's ask for piece 2: its first piece mapped */
    uint64_t gpu_mapped; /* bytes it mapped since then */
    double gpu_rate;   /* gpu_mapped over the time since, bytes a ms; 0: not known yet */
    int gpu_map_bound; /* since then its map took longer than its upload */
    double fold_ms;    /* the GPU's latest soren_both_gpu_state.fold_ms */
} soren_both_queue;

typedef enum soren_both_take {
    SOREN_BOTH_NO,      /* no piece for the CPU engine, now or later */
    SOREN_BOTH_YES,     /* *k is the CPU engine's */
    SOREN_BOTH_LATER,   /* not yet: soren__both_wait, then ask again */
    SOREN_BOTH_MEASURE  /* the GPU's map bounds its run: ask again with a rate */
} soren_both_take;

void soren__both_queue_init(soren_both_queue *q, const soren_input *pieces, size_t count);
void soren__both_queue_destroy(soren_both_queue *q);
/* The GPU asks for piece i (a soren_gpu_claim's take), its run as g says:
 * 1 if the piece is the GPU's.  The first no ends the GPU's share. */
int soren__both_gpu_take(soren_both_queue *q, size_t i, const soren_both_gpu_state *g);
/* The GPU's run is over: the CPU engine takes no further piece. */
void soren__both_gpu_done(soren_both_queue *q);
/* The CPU engine, free, whose rate is cpu_rate bytes a ms (0: not
 * measured yet), asks for the last piece nobody has taken.  It gets one
 * only where the GPU's map, not its upload, bounds the GPU's run: the CPU
 * engine reads its pieces from the memory the GPU's copy threads read, so
 * beside a run bound by its upload it takes from the GPU what it adds.
 * Then it takes the piece if, at its rate, it would map it before the GPU
 * is done with the pieces in front of it, and, for its first piece, if
 * sharing the rest (R bytes, at rates c and g, saving R c / (g (g + c))
 * ms) would save more than the fold it brings costs. */
soren_both_take soren__both_cpu_take(soren_both_queue *q, double cpu_rate, size_t *k);
/* After a LATER: returns once the GPU has taken a piece since, or its run
 * has ended. */
void soren__both_wait(soren_both_queue *q);

/* Stage 1 on both engines, as above: the same bytes as either engine
 * alone; --explain's "coprocessing" says how the pieces went. */
soren_status soren__run_both(const soren_stage_spec *spec, const soren_input *inputs,
                             size_t input_count, const soren_params *params,
                             const soren_run_options *o, soren_gpu_session **session,
                             soren_result *res, soren_explain *x, soren_error *err);

#endif /* SOREN_ENGINE_BOTH_H */
