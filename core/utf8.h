/*
 * utf8.h - well-formed UTF-8 (RFC 3629, Unicode's table 3-7): no overlong
 * forms, no surrogates, nothing past U+10FFFF.  The output writer keeps
 * valid text as it is in JSON strings; the pattern compiler reads a
 * pattern's characters.
 */
#ifndef SOREN_UTF8_H
#define SOREN_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length of the well-formed sequence at s[0 .. n) (1 for ASCII), or 0
 * where none starts there; n is at least 1. */
size_t soren__utf8_length(const uint8_t *s, uint64_t n);

#endif /* SOREN_UTF8_H */
