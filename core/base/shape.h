/*
 * shape.h - the GPU map's launch shape, chosen by measurement.
 *
 * A launch's shape is its threads a block and the entries of its per-block
 * table in shared memory.  Which is fastest depends on the job (how many
 * keys a block sees, how uneven its records are) and on the GPU (shared
 * memory, registers), so a stage's session tries a few: it maps its inputs
 * with each candidate in turn, each timed on two inputs in mirrored order
 * (the first and last candidates' inputs lie furthest apart, so that a
 * table that fills as the runs go on weighs on every candidate alike), and
 * keeps the fastest per byte for the rest of its runs.  The default stays
 * unless another is faster by SOREN_SHAPE_MARGIN: a shape that wins by
 * less than inputs differ by is noise.
 *
 * The search is pure bookkeeping, the same for any engine that times its
 * launches: the GPU engine (core/gpu/launch.cu) says which inputs it timed.
 */
#ifndef SOREN_SHAPE_H
#define SOREN_SHAPE_H

#include <stdint.h>

typedef struct soren_shape {
    uint32_t block_threads; /* 0: as many as the occupancy query gives the kernel */
    uint32_t block_slots;   /* per-block table entries (0: none) */
} soren_shape;

/* The threads a block the search tries beside the occupancy query's, and
 * the smallest per-block table it halves to. */
enum { SOREN_SHAPE_THREADS_A = 512, SOREN_SHAPE_THREADS_B = 256, SOREN_SHAPE_SLOTS_LEAST = 512 };
enum { SOREN_SHAPES_MAX = 6 };

/* A candidate beats the default only by more than this fraction of its
 * time per byte. */
#define SOREN_SHAPE_MARGIN 0.03
/* An input whose map took less than this is not timed: a launch's fixed
 * cost (a few microseconds), not its shape, decides its time. */
#define SOREN_SHAPE_LEAST_MS 0.1

typedef struct soren_shape_search {
    soren_shape candidates[SOREN_SHAPES_MAX]; /* [0] is the default */
    unsigned count;
    unsigned timed;                  /* inputs timed, up to 2 * count */
    double ms[SOREN_SHAPES_MAX];     /* each candidate's map time, and */
    double units[SOREN_SHAPES_MAX];  /* the bytes (or tasks) it mapped */
    unsigned kept;                   /* the candidate kept once the search is done */
    const char *rule;                /* why the shape is what it is (static) */
} soren_shape_search;

/* Starts a search from the default shape: over the threads a block where
 * threads is set, over the table's entries (the default's, then half) where
 * slots is set; with neither, the default is kept, for the reason `why`. */
void soren_shape_search_start(soren_shape_search *s, soren_shape fallback, int threads,
                              int slots, const char *why);

/* Whether candidates are still being timed. */
int soren_shape_searching(const soren_shape_search *s);

/* The shape the next input takes: the candidate whose turn it is while
 * searching, else the one kept. */
soren_shape soren_shape_next(const soren_shape_search *s);

/* The shape kept: the default until the search is done. */
soren_shape soren_shape_kept(const soren_shape_search *s);

/* An input mapped with soren_shape_next's shape took ms over units bytes
 * (or tasks); after the last candidate's second input, keeps the fastest. */
void soren_shape_timed(soren_shape_search *s, double ms, uint64_t units);

#endif /* SOREN_SHAPE_H */
