/*
 * nearest.h - "did you mean X?": the known word nearest to a mistyped one.
 *
 * Nearness is the edit distance (optimal string alignment: an insertion, a
 * deletion, a substitution or a swap of two neighbours costs one edit).  A
 * word is suggested only when it is close enough to be a typo: at most
 * two edits, and fewer edits than the mistyped word has bytes, so that
 * "rn" finds "run" but "x" finds nothing.  Used for soren-host's commands
 * and options and for plugin names.
 */
#ifndef SOREN_NEAREST_H
#define SOREN_NEAREST_H

#include <stddef.h>

/* The candidate nearest to word, the first of equals; NULL when none is
 * close enough, or word is longer than 64 bytes. */
const char *soren__nearest(const char *word, const char *const *candidates, size_t count);

#endif /* SOREN_NEAREST_H */
