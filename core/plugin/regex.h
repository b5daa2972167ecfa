/*
 * regex.h - compiling a pattern into a soren_dfa (see soren/dfa.h).
 *
 * Syntax, a POSIX extended regular expression subset over bytes (the C
 * locale): literals; '.' (any byte); bracket expressions "[abc]", "[a-z]",
 * "[^...]" (']' first is literal, '-' first or last is literal); postfix
 * '*', '+', '?'; alternation '|'; grouping "(...)"; anchors '^' and '$';
 * '\' makes the next character literal, except a letter, a digit or one of
 * < > ` ' (GNU escapes such as \w, \1, \<).  Nothing else ({n,m}, classes,
 * back-references, GNU escapes) is accepted.
 *
 * Semantics equal regexec(REG_EXTENDED) in the C locale answering "does the
 * subject contain a match": ^ and $ anchor at the subject's ends.
 */
#ifndef SOREN_REGEX_H
#define SOREN_REGEX_H

#include <stddef.h>

#include "../error.h"
#include <soren/dfa.h>

/* Most states a compiled DFA may have; larger patterns are refused.  The
 * fuzzing build (SOREN_REGEX_SMALL_LIMITS, tests/fuzz/fuzz_regex) has this
 * and the construction's limits (regex.c) sixteen times smaller: the same
 * code refuses sooner, so the fuzzer tries many patterns instead of building
 * a few DFAs of a million transitions. */
#ifdef SOREN_REGEX_SMALL_LIMITS
#define SOREN_REGEX_MAX_STATES 256u
#else
#define SOREN_REGEX_MAX_STATES 4096u
#endif

/* Compiles pattern into a new DFA block (free with free()).  On a syntax
 * error returns SOREN_EUSAGE with a message that shows the pattern and points
 * at the offending position, e.g.
 *   invalid pattern "ab(c": unclosed '(' at position 2
 * (0-based byte offsets).  Patterns too complex for SOREN_REGEX_MAX_STATES
 * are refused with SOREN_EUSAGE too.
 */
soren_status soren_regex_compile(const char *pattern, soren_dfa **out, size_t *out_size,
                                 soren_error *err);

#endif /* SOREN_REGEX_H */
