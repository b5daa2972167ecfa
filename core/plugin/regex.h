/*
 * regex.h - compiling a pattern into a soren_dfa (see soren/dfa.h).
 *
 * Syntax, POSIX extended regular expressions (docs/grep.md has the full
 * dialect): literals; '.'; bracket expressions "[abc]", "[a-z]", "[^...]"
 * with the classes "[:alpha:]" and the rest, ASCII only as in the C locale
 * (']' first is literal, '-' first or last is literal, "\\" is one
 * backslash and any other '\' is refused); postfix '*', '+', '?' and the
 * intervals "{m}", "{m,}", "{,n}", "{m,n}" (bounds up to
 * SOREN_REGEX_MAX_REPEAT; a '{' that starts none of them is literal, as in
 * GNU grep -E); alternation '|'; grouping "(...)"; anchors '^' and '$';
 * '\' makes the next character literal, except a letter, a digit or one of
 * < > ` ' (GNU escapes such as \w, \1, \<, refused).  A leading flag group
 * "(?i)", "(?-u)" or "(?i-u)" ignores case (ASCII, and Latin-1 letters in
 * UTF-8 mode) or matches bytes instead of UTF-8 characters.
 *
 * Characters are UTF-8 unless "(?-u)" says bytes: '.', a bracket expression
 * or a literal matches one well-formed UTF-8 sequence, never a byte of an
 * invalid one, and the pattern itself must be valid UTF-8.  With "(?-u)"
 * every byte is a character, as in the C locale.
 *
 * Semantics equal regexec(REG_EXTENDED) answering "does the subject contain
 * a match" (in the C.UTF-8 locale, or the C locale with "(?-u)"): ^ and $
 * anchor at the subject's ends.
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

/* The largest bound an interval may give ("a{255}"), POSIX's
 * _POSIX_RE_DUP_MAX: each repetition copies the repeated piece. */
#define SOREN_REGEX_MAX_REPEAT 255u

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
