/*
 * shape.c - the GPU map's launch shape, chosen by measurement (shape.h).
 */
#include "shape.h"

#include <string.h>

void soren_shape_search_start(soren_shape_search *s, soren_shape fallback, int threads,
                              int slots, const char *why)
{
    static const uint32_t thread_choices[] = {0, SOREN_SHAPE_THREADS_A, SOREN_SHAPE_THREADS_B};
    memset(s, 0, sizeof *s);
    const uint32_t half = fallback.block_slots / 2;
    const unsigned thread_count = threads ? 3 : 1;
    const unsigned slot_count = slots && half >= SOREN_SHAPE_SLOTS_LEAST ? 2 : 1;
    for (unsigned j = 0; j < slot_count; j++)
        for (unsigned i = 0; i < thread_count; i++)
            s->candidates[s->count++] =
                (soren_shape){thread_choices[i], j ? half : fallback.block_slots};
    if (s->count == 1)
        s->rule = why;
    else
        s->rule = "being measured: each candidate maps two inputs of at least 0.1 ms of map, "
                  "and the fastest per byte is kept";
}

int soren_shape_searching(const soren_shape_search *s)
{
    return s->count > 1 && s->timed < 2 * s->count;
}

/* The candidate whose turn the next timed input is: 0, 1, .., n - 1, then
 * n - 1, .., 0. */
static unsigned turn(const soren_shape_search *s)
{
    return s->timed < s->count ? s->timed : 2 * s->count - 1 - s->timed;
}

soren_shape soren_shape_next(const soren_shape_search *s)
{
    return soren_shape_searching(s) ? s->candidates[turn(s)] : soren_shape_kept(s);
}

soren_shape soren_shape_kept(const soren_shape_search *s)
{
    return s->candidates[s->kept];
}

void soren_shape_timed(soren_shape_search *s, double ms, uint64_t units)
{
    if (!soren_shape_searching(s) || ms < SOREN_SHAPE_LEAST_MS || units == 0)
        return;
    const unsigned i = turn(s);
    s->ms[i] += ms;
    s->units[i] += (double)units;
    if (++s->timed < 2 * s->count)
        return;
    unsigned best = 0;
    for (unsigned c = 1; c < s->count; c++)
        if (s->ms[c] / s->units[c] < s->ms[best] / s->units[best])
            best = c;
    const double fallback = s->ms[0] / s->units[0], fastest = s->ms[best] / s->units[best];
    if (best == 0) {
        s->rule = "the default, the fastest per byte of the candidates timed";
    } else if (fastest < fallback * (1 - SOREN_SHAPE_MARGIN)) {
        s->kept = best;
        s->rule = "the fastest per byte of the candidates timed";
    } else {
        s->rule = "the default: no candidate timed was 3% faster per byte";
    }
}
