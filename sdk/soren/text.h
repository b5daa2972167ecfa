/*
 * text.h - splitting records into words, for plugins that read text.
 *
 * A word is a maximal run of bytes that are not ASCII whitespace (space,
 * \t, \n, \v, \f, \r).  Every other byte, UTF-8 or not, belongs to words.
 */
#ifndef SOREN_TEXT_H
#define SOREN_TEXT_H

#include <soren/soren.h>

SOREN__INLINE int soren_is_space(uint8_t c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Finds the next word at or after *pos in s[0 .. n): sets *start and *len
 * and moves *pos past it; returns 0 when no word is left. */
SOREN__INLINE int soren_next_word(const uint8_t *s, uint64_t n, uint64_t *pos,
                                  uint64_t *start, uint64_t *len)
{
    uint64_t i = *pos;
    while (i < n && soren_is_space(s[i]))
        i++;
    if (i == n) {
        *pos = n;
        return 0;
    }
    *start = i;
    while (i < n && !soren_is_space(s[i]))
        i++;
    *len = i - *start;
    *pos = i;
    return 1;
}

/* A key size for soren_emit: lengths past 4 GiB saturate, and the engine
 * refuses them against key.max_size instead of wrapping around. */
SOREN__INLINE uint32_t soren_key_size(uint64_t len)
{
    return len > 0xffffffffu ? 0xffffffffu : (uint32_t)len;
}

#endif /* SOREN_TEXT_H */
