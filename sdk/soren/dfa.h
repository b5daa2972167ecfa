/*
 * dfa.h - matching a compiled pattern inside a plugin.
 *
 * A manifest parameter of type "regex" reaches the plugin as a soren_dfa: the
 * host compiles the pattern (POSIX ERE with intervals, bracket classes and
 * UTF-8 characters, and the flags (?i) and (?-u): docs/grep.md gives the
 * dialect) into a deterministic automaton over 258 symbols,
 * the 256 byte values plus SOREN_DFA_BEGIN and SOREN_DFA_END, which stand for
 * the two ends of the subject: ^ matches BEGIN and $ matches END.  The
 * automaton is built for "the subject contains a match" and its accepting
 * states are absorbing, so a scan can stop at the first accepting state.
 *
 * Layout (one contiguous block, copied to the device as it is):
 *   soren_dfa header, then uint32_t next[state_count][SOREN_DFA_SYMBOLS],
 *   then uint8_t accept[state_count].
 */
#ifndef SOREN_DFA_H
#define SOREN_DFA_H

#include <soren/soren.h>

#define SOREN_DFA_MAGIC 0x41464453u /* "SDFA" */
#define SOREN_DFA_BEGIN 256u
#define SOREN_DFA_END 257u
#define SOREN_DFA_SYMBOLS 258u

typedef struct soren_dfa {
    uint32_t magic;
    uint32_t state_count;
    uint32_t start;
    uint32_t reserved;
} soren_dfa;

SOREN__INLINE const uint32_t *soren_dfa_next(const soren_dfa *d)
{
    return (const uint32_t *)(d + 1);
}

SOREN__INLINE const uint8_t *soren_dfa_accept(const soren_dfa *d)
{
    return (const uint8_t *)(soren_dfa_next(d) + (uint64_t)d->state_count * SOREN_DFA_SYMBOLS);
}

/* Bytes a DFA of n states occupies. */
SOREN__INLINE uint64_t soren_dfa_size(uint32_t n)
{
    return sizeof(soren_dfa) + (uint64_t)n * SOREN_DFA_SYMBOLS * sizeof(uint32_t) + n;
}

/* 1 if s[0 .. n) contains a match of the pattern, else 0. */
SOREN__INLINE int soren_dfa_search(const soren_dfa *d, const uint8_t *s, uint64_t n)
{
    const uint32_t *next = soren_dfa_next(d);
    const uint8_t *accept = soren_dfa_accept(d);
    uint32_t q = next[(uint64_t)d->start * SOREN_DFA_SYMBOLS + SOREN_DFA_BEGIN];
    for (uint64_t i = 0; i < n && !accept[q]; i++)
        q = next[(uint64_t)q * SOREN_DFA_SYMBOLS + s[i]];
    if (!accept[q])
        q = next[(uint64_t)q * SOREN_DFA_SYMBOLS + SOREN_DFA_END];
    return accept[q];
}

#endif /* SOREN_DFA_H */
