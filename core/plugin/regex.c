/*
 * regex.c - compiling a pattern into a soren_dfa (see regex.h, soren/dfa.h).
 *
 * Three steps:
 *  1. A recursive-descent parser builds a Thompson NFA whose edges are byte
 *     sets, epsilons, and the zero-width assertions ^ and $.  A character
 *     is a set of code points (UTF-8 mode) or bytes ("(?-u)"); in UTF-8
 *     mode each set becomes alternatives of byte sequences, one per run of
 *     code points whose encodings share their byte ranges, so the automaton
 *     stays one over bytes.  An interval copies the NFA of what it repeats.
 *  2. Subset construction builds a DFA for "the subject contains a match".
 *     Every DFA state also holds the NFA's start (the implicit leading .*,
 *     so there is no dead state), and every state whose closure reaches the
 *     NFA's final state becomes the one accepting state, which is absorbing.
 *     Bytes the pattern cannot tell apart share a class, so the work per
 *     DFA state is per class, not per byte.
 *  3. Valmari's partition refinement (Hopcroft's minimisation for complete
 *     DFAs) merges equivalent states; the result is laid out over all 258
 *     symbols.
 *
 * Anchors are zero-width assertions, as in POSIX, not symbols the pattern
 * consumes: "^^a" and "a$$" match "a", and "$^" matches the empty subject.
 * A DFA state remembers whether it was entered by BEGIN (then ^ holds) and
 * keeps the NFA states waiting on a $ until END is read.  The automaton has
 * no edge on BEGIN or END, so '.' and [^...] never match an end.  Reading
 * BEGIN or END anywhere restarts the search (no match is in progress across
 * an end), which keeps the DFA's start state a plain "not at the beginning"
 * state: a caller that feeds bytes without BEGIN gets a ^ that never holds.
 *
 * UTF-8 and invalid bytes: the search may start a match at any byte, but
 * every character of a UTF-8 pattern begins with a byte that no well-formed
 * sequence continues with, so a match never starts inside a character, and
 * a byte that is not part of a well-formed sequence matches nothing ('.'
 * and [^...] included), as in GNU grep in a UTF-8 locale.
 *
 * Limits: the NFA has at most MAX_NFA_STATES states (intervals multiply
 * it); the result has at most SOREN_REGEX_MAX_STATES states.  Subset
 * construction can be exponentially larger than the minimal DFA, so it may
 * go past that (up to BUILD_MAX_CELLS transitions and BUILD_MAX_KEYS stored
 * NFA states); beyond those the pattern is refused as too complex even if
 * its minimal DFA would be small.  The message says which limit was hit.
 *
 * The empty pattern matches every subject.
 *
 * What this compiler does where POSIX leaves the meaning undefined (GNU
 * grep -E's choice, where that is simple):
 *  - '*', '+', '?' or an interval with nothing before it (at the start,
 *    after '(' or '|') repeats the empty string: "*a" means "a", "(+)"
 *    means "()".  glibc's regcomp refuses these; GNU grep accepts them with
 *    a warning.
 *  - Stacked operators apply in turn: "a**" is (a*)*, "a+?" is (a+)?,
 *    "a{2}{3}" is (a{2}){3}.
 *  - An operator after an anchor repeats the assertion: "^*" matches every
 *    subject and "a^*b" matches "ab", as in GNU grep (glibc refuses these).
 *  - Empty alternatives and empty groups match the empty string: "a|",
 *    "|a", "a||b" and "()" all accept; "a|" matches every subject.
 *  - ']' right after '[' or "[^" is literal ("[]a]", "[^]a]"); '-' first or
 *    last is literal.
 *  - '\' inside brackets: POSIX reads it as itself, most other dialects as
 *    an escape, so "[\t]" would silently mean something else to someone;
 *    only "\\" is accepted (one backslash, in either reading) and any
 *    other '\' is refused.
 *  - "[a-c-e]" (a range right after a range), reversed ranges ("[z-a]") and
 *    a class at either end of a range are refused, as glibc and GNU grep
 *    do.  Ranges compare code points (bytes with "(?-u)").
 *  - Classes ("[:alpha:]") are the C locale's, ASCII only, in both modes;
 *    "[." and "[=" (collating symbols, equivalence classes) are refused.
 *  - ')' with no open group is literal (POSIX, glibc and GNU grep agree);
 *    '}' is literal; '{' is literal unless an interval "{m}", "{m,}",
 *    "{,n}", "{m,n}" or "{,}" starts there, as in GNU grep -E ("a{1" and
 *    "a{x}" match themselves).  A bound past SOREN_REGEX_MAX_REPEAT and
 *    "{n,m}" with n > m are refused.
 *  - '\' before a letter, a digit or one of < > ` ' is refused, because GNU
 *    gives those escapes meanings this compiler lacks (\w, \1, \<); before
 *    any other character it makes that character literal.
 *  - "(?" opens a flag group only at the very start of the pattern and is
 *    refused elsewhere (GNU reads "(?i)" as "(i)").  "(?i)" folds ASCII
 *    letters, and in UTF-8 mode the Latin-1 letters (U+00C0-U+00FE but for
 *    U+00D7 and U+00F7, with U+00FF/U+0178): not the rest of Unicode.
 *  - '.' and [^...] match every character, NUL and newline included
 *    (glibc's '.' does not match NUL; subjects here are bytes, not C
 *    strings).
 */
#include "regex.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../utf8.h"

#define NONE UINT32_MAX

/* The parser recurses once per group; deeper nesting is refused so that a
 * hostile pattern cannot exhaust the stack. */
#define MAX_DEPTH 1000u

/* The NFA's size, which intervals multiply: a UTF-8 '.' takes about 70
 * states, so ".{255}" about 18000.  Past this a pattern is refused as too
 * complex. */
#ifdef SOREN_REGEX_SMALL_LIMITS
#define MAX_NFA_STATES (1u << 12)
#else
#define MAX_NFA_STATES (1u << 16)
#endif

/* Subset construction may overshoot the final limit, since minimisation
 * can shrink its result a lot: "a(a|b){14}" needs 2^15 subsets but only 16
 * states.  It stops at this many transitions (rows x classes), or at twice
 * the final limit where the rows are wide. */
#define BUILD_MIN_STATES (2u * SOREN_REGEX_MAX_STATES)
/* BUILD_MAX_KEYS: the NFA states the subset construction may store over all
 * its states: a long literal's state sets grow with the prefix read
 * (quadratic), and this still fits one of 4096 bytes. */
#ifdef SOREN_REGEX_SMALL_LIMITS
#define BUILD_MAX_CELLS (1u << 16)
#define BUILD_MAX_KEYS (1u << 20)
#else
#define BUILD_MAX_CELLS (1u << 20)
#define BUILD_MAX_KEYS (1u << 24)
#endif

/* ---- Messages ------------------------------------------------------------ */

static bool is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

static bool has_control(const char *s)
{
    for (; *s; s++)
        if (is_control((unsigned char)*s))
            return true;
    return false;
}

/* One byte as shown in a message: as it is, or JSON-escaped when json. */
static void show_byte(unsigned char c, bool json, char piece[8])
{
    static const char short_escape[] = "btn\0fr"; /* \b .. \r; JSON has no \v */
    if (json && (c == '"' || c == '\\'))
        snprintf(piece, 8, "\\%c", c);
    else if (json && c >= '\b' && c <= '\r' && c != '\v')
        snprintf(piece, 8, "\\%c", short_escape[c - '\b']);
    else if (json && is_control(c))
        snprintf(piece, 8, "\\u%04x", c);
    else
        snprintf(piece, 8, "%c", c);
}

/* The pattern as shown in a message: as typed, JSON-escaped when it holds
 * control bytes that would garble a terminal, cut short with "..." when
 * long so the rest of the message survives. */
static void show_pattern(const char *pattern, char *buf, size_t size)
{
    bool json = has_control(pattern);
    size_t n = 0;
    for (const unsigned char *s = (const unsigned char *)pattern; *s; s++) {
        char piece[8];
        show_byte(*s, json, piece);
        size_t k = strlen(piece);
        if (n + k + sizeof "..." > size) {
            memcpy(buf + n, "...", sizeof "...");
            return;
        }
        memcpy(buf + n, piece, k);
        n += k;
    }
    buf[n] = '\0';
}

static soren_status out_of_memory(const char *pattern, soren_error *err)
{
    char shown[256];
    show_pattern(pattern, shown, sizeof shown);
    return soren_error_set(err, SOREN_ENOMEM, "out of memory compiling pattern \"%s\"", shown);
}

/* why names the limit: the minimal DFA's, or one of the subset
 * construction's, which may be larger than the DFA it would yield. */
static soren_status too_complex(const char *pattern, soren_error *err, const char *why)
{
    char shown[256];
    show_pattern(pattern, shown, sizeof shown);
    return soren_error_set(err, SOREN_EUSAGE, "pattern \"%s\" is too complex: %s", shown, why);
}

/* ---- NFA ----------------------------------------------------------------- */

enum nfa_kind {
    NFA_EPS,   /* epsilon edges to out[0] and out[1] (either may be NONE) */
    NFA_BYTES, /* an edge to out[0] on the bytes in set */
    NFA_BOL,   /* an edge to out[0] where ^ holds */
    NFA_EOL,   /* an edge to out[0] where $ holds */
    NFA_MATCH  /* the final state */
};

typedef struct nfa_state {
    uint8_t kind;
    uint8_t set[32];
    uint32_t out[2];
} nfa_state;

typedef struct nfa {
    nfa_state *st;
    uint32_t n, cap;
    uint32_t start;
} nfa;

static bool has_byte(const uint8_t set[32], unsigned c)
{
    return set[c >> 3] >> (c & 7) & 1;
}

static void add_bytes(uint8_t set[32], unsigned lo, unsigned hi)
{
    for (unsigned c = lo; c <= hi; c++)
        set[c >> 3] |= (uint8_t)(1u << (c & 7));
}

/* ---- Character sets -------------------------------------------------------- */

/* A set of characters: code points in UTF-8 mode, bytes in byte mode, as
 * ranges [lo, hi], sorted and disjoint once normalised. */
typedef struct cset {
    uint32_t (*r)[2];
    size_t n, cap;
} cset;

static int cmp_range(const void *x, const void *y)
{
    const uint32_t *a = x, *b = y;
    return (a[0] > b[0]) - (a[0] < b[0]);
}

/* Sorts the ranges and merges those that overlap or touch. */
static void cset_normalise(cset *s)
{
    if (s->n == 0)
        return;
    qsort(s->r, s->n, sizeof *s->r, cmp_range);
    size_t k = 0;
    for (size_t i = 1; i < s->n; i++) {
        if (s->r[i][0] <= s->r[k][1] || s->r[i][0] - 1 == s->r[k][1]) {
            if (s->r[i][1] > s->r[k][1])
                s->r[k][1] = s->r[i][1];
        } else {
            k++;
            s->r[k][0] = s->r[i][0];
            s->r[k][1] = s->r[i][1];
        }
    }
    s->n = k + 1;
}

/* ---- Parser ---------------------------------------------------------------- */

typedef struct parser {
    const char *pattern;
    const unsigned char *p;
    size_t len, pos;
    unsigned depth;
    bool utf8, icase; /* the flags: (?-u) clears utf8, (?i) sets icase */
    cset set;         /* the set being read, reused by every atom */
    nfa *m;
    soren_error *err;
} parser;

/* A piece of NFA: end is an NFA_EPS state with no edges yet. */
typedef struct frag {
    uint32_t start, end;
} frag;

static soren_status syntax_error(const parser *ps, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static soren_status syntax_error(const parser *ps, size_t pos, const char *fmt, ...)
{
    char what[160], shown[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    show_pattern(ps->pattern, shown, sizeof shown);
    return soren_error_set(ps->err, SOREN_EUSAGE, "invalid pattern \"%s\": %s at position %zu",
                           shown, what, pos);
}

static soren_status chars_add(parser *ps, uint32_t lo, uint32_t hi)
{
    cset *s = &ps->set;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        uint32_t(*r)[2] = realloc(s->r, cap * sizeof *r);
        if (!r)
            return out_of_memory(ps->pattern, ps->err);
        s->r = r;
        s->cap = cap;
    }
    s->r[s->n][0] = lo;
    s->r[s->n][1] = hi;
    s->n++;
    return SOREN_OK;
}

/* The largest character: U+10FFFF in UTF-8 mode, 0xff in byte mode. */
static uint32_t max_char(const parser *ps)
{
    return ps->utf8 ? 0x10ffffu : 0xffu;
}

/* Adds what [lo, hi] becomes when its part within [from, to] moves by
 * delta. */
static soren_status add_shifted(parser *ps, uint32_t lo, uint32_t hi, uint32_t from,
                                uint32_t to, int32_t delta)
{
    if (hi < from || lo > to)
        return SOREN_OK;
    lo = lo > from ? lo : from;
    hi = hi < to ? hi : to;
    return chars_add(ps, (uint32_t)((int32_t)lo + delta), (uint32_t)((int32_t)hi + delta));
}

/* Adds the other case of every letter in the set: ASCII letters, and in
 * UTF-8 mode the Latin-1 letters (U+00C0-U+00DE and U+00E0-U+00FE, but for
 * U+00D7 and U+00F7, which are signs) and U+00FF/U+0178. */
static soren_status chars_fold(parser *ps)
{
    soren_status rc = SOREN_OK;
    for (size_t i = 0, n = ps->set.n; i < n && rc == SOREN_OK; i++) {
        uint32_t lo = ps->set.r[i][0], hi = ps->set.r[i][1];
        rc = add_shifted(ps, lo, hi, 'A', 'Z', 32);
        if (rc == SOREN_OK)
            rc = add_shifted(ps, lo, hi, 'a', 'z', -32);
        if (!ps->utf8)
            continue;
        static const uint32_t latin[][3] = {
            {0xc0, 0xd6, 0}, {0xd8, 0xde, 0}, {0xe0, 0xf6, 1}, {0xf8, 0xfe, 1},
        };
        for (int k = 0; k < 4 && rc == SOREN_OK; k++)
            rc = add_shifted(ps, lo, hi, latin[k][0], latin[k][1], latin[k][2] ? -32 : 32);
        if (rc == SOREN_OK && lo <= 0xff && hi >= 0xff)
            rc = chars_add(ps, 0x178, 0x178);
        if (rc == SOREN_OK && lo <= 0x178 && hi >= 0x178)
            rc = chars_add(ps, 0xff, 0xff);
    }
    cset_normalise(&ps->set);
    return rc;
}

/* Replaces the (normalised) set with its complement up to max_char. */
static soren_status chars_negate(parser *ps)
{
    cset *s = &ps->set;
    uint32_t next = 0, top = max_char(ps);
    size_t n = s->n;
    soren_status rc = SOREN_OK;
    for (size_t i = 0; i < n && rc == SOREN_OK; i++) {
        if (s->r[i][0] > next)
            rc = chars_add(ps, next, s->r[i][0] - 1);
        next = s->r[i][1] + 1;
    }
    if (rc == SOREN_OK && next <= top)
        rc = chars_add(ps, next, top);
    if (rc == SOREN_OK) {
        memmove(s->r, s->r + n, (s->n - n) * sizeof *s->r);
        s->n -= n;
    }
    return rc;
}

/* ---- From sets to NFA -------------------------------------------------- */

static soren_status add_state(parser *ps, enum nfa_kind kind, uint32_t *id)
{
    nfa *m = ps->m;
    if (m->n == MAX_NFA_STATES) {
        char why[64];
        snprintf(why, sizeof why, "it needs more than %u NFA states", MAX_NFA_STATES);
        return too_complex(ps->pattern, ps->err, why);
    }
    if (m->n == m->cap) {
        uint32_t cap = m->cap ? 2 * m->cap : 64;
        nfa_state *st = realloc(m->st, cap * sizeof *st);
        if (!st)
            return out_of_memory(ps->pattern, ps->err);
        m->st = st;
        m->cap = cap;
    }
    nfa_state *s = &m->st[m->n];
    memset(s, 0, sizeof *s);
    s->kind = (uint8_t)kind;
    s->out[0] = s->out[1] = NONE;
    *id = m->n++;
    return SOREN_OK;
}

static soren_status empty(parser *ps, frag *f)
{
    soren_status rc = add_state(ps, NFA_EPS, &f->start);
    f->end = f->start;
    return rc;
}

/* start --kind--> end */
static soren_status edge(parser *ps, enum nfa_kind kind, frag *f)
{
    soren_status rc = add_state(ps, kind, &f->start);
    if (rc == SOREN_OK)
        rc = add_state(ps, NFA_EPS, &f->end);
    if (rc == SOREN_OK)
        ps->m->st[f->start].out[0] = f->end;
    return rc;
}

static soren_status bytes(parser *ps, const uint8_t set[32], frag *f)
{
    soren_status rc = edge(ps, NFA_BYTES, f);
    if (rc == SOREN_OK)
        memcpy(ps->m->st[f->start].set, set, 32);
    return rc;
}

static soren_status byte_range(parser *ps, unsigned lo, unsigned hi, frag *f)
{
    uint8_t set[32] = {0};
    add_bytes(set, lo, hi);
    return bytes(ps, set, f);
}

static void join_concat(nfa *m, frag *f, frag g)
{
    m->st[f->end].out[0] = g.start;
    f->end = g.end;
}

static soren_status join_alt(parser *ps, frag *f, frag g)
{
    uint32_t s, e;
    soren_status rc = add_state(ps, NFA_EPS, &s);
    if (rc == SOREN_OK)
        rc = add_state(ps, NFA_EPS, &e);
    if (rc != SOREN_OK)
        return rc;
    nfa_state *st = ps->m->st;
    st[s].out[0] = f->start;
    st[s].out[1] = g.start;
    st[f->end].out[0] = e;
    st[g.end].out[0] = e;
    f->start = s;
    f->end = e;
    return SOREN_OK;
}

/* Writes code point c as UTF-8 into out; returns its length. */
static unsigned utf8_encode(uint32_t c, uint8_t out[4])
{
    if (c < 0x80) {
        out[0] = (uint8_t)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (uint8_t)(0xc0 | c >> 6);
        out[1] = (uint8_t)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (uint8_t)(0xe0 | c >> 12);
        out[1] = (uint8_t)(0x80 | (c >> 6 & 0x3f));
        out[2] = (uint8_t)(0x80 | (c & 0x3f));
        return 3;
    }
    out[0] = (uint8_t)(0xf0 | c >> 18);
    out[1] = (uint8_t)(0x80 | (c >> 12 & 0x3f));
    out[2] = (uint8_t)(0x80 | (c >> 6 & 0x3f));
    out[3] = (uint8_t)(0x80 | (c & 0x3f));
    return 4;
}

/* What a set's alternatives are built into: one byte set for its ASCII
 * part, and a fragment (have) for its multi-byte sequences. */
typedef struct alts {
    uint8_t ascii[32];
    frag f;
    bool have;
} alts;

/* Adds the code points [lo, hi] as alternatives of byte sequences.  The
 * range is split until every piece encodes to sequences of one length
 * whose bytes each span a plain range, so that the sequences of [lo, hi]
 * are exactly the products of those byte ranges: what UTF-8 spells for
 * those code points and nothing else (no overlong forms, no surrogates,
 * nothing past U+10FFFF). */
static soren_status utf8_alts(parser *ps, uint32_t lo, uint32_t hi, alts *a)
{
    static const uint32_t last_of_length[] = {0x7f, 0x7ff, 0xffff};
    if (lo > hi)
        return SOREN_OK;
    if (lo <= 0xdfff && hi >= 0xd800) { /* surrogates are not characters */
        soren_status rc = lo < 0xd800 ? utf8_alts(ps, lo, 0xd7ff, a) : SOREN_OK;
        return rc == SOREN_OK && hi > 0xdfff ? utf8_alts(ps, 0xe000, hi, a) : rc;
    }
    for (int k = 0; k < 3; k++) {
        uint32_t b = last_of_length[k];
        if (lo <= b && hi > b) {
            soren_status rc = utf8_alts(ps, lo, b, a);
            return rc == SOREN_OK ? utf8_alts(ps, b + 1, hi, a) : rc;
        }
    }
    if (hi < 0x80) {
        add_bytes(a->ascii, lo, hi);
        return SOREN_OK;
    }
    for (unsigned k = 1; k < 4; k++) {
        uint32_t m = (1u << (6 * k)) - 1;
        if ((lo & ~m) == (hi & ~m))
            continue;
        if ((lo & m) != 0) {
            soren_status rc = utf8_alts(ps, lo, lo | m, a);
            return rc == SOREN_OK ? utf8_alts(ps, (lo | m) + 1, hi, a) : rc;
        }
        if ((hi & m) != m) {
            soren_status rc = utf8_alts(ps, lo, (hi & ~m) - 1, a);
            return rc == SOREN_OK ? utf8_alts(ps, hi & ~m, hi, a) : rc;
        }
    }
    uint8_t x[4], y[4];
    unsigned n = utf8_encode(lo, x);
    utf8_encode(hi, y);
    frag seq, g;
    soren_status rc = byte_range(ps, x[0], y[0], &seq);
    for (unsigned i = 1; i < n && rc == SOREN_OK; i++) {
        rc = byte_range(ps, x[i], y[i], &g);
        if (rc == SOREN_OK)
            join_concat(ps->m, &seq, g);
    }
    if (rc != SOREN_OK)
        return rc;
    if (!a->have) {
        a->f = seq;
        a->have = true;
        return SOREN_OK;
    }
    return join_alt(ps, &a->f, seq);
}

/* The fragment that matches one character of the (normalised) set: one
 * byte in byte mode, one UTF-8 sequence in UTF-8 mode.  An empty set gives
 * an edge that nothing takes. */
static soren_status chars_frag(parser *ps, frag *f)
{
    const cset *s = &ps->set;
    if (!ps->utf8) {
        uint8_t set[32] = {0};
        for (size_t i = 0; i < s->n; i++)
            add_bytes(set, s->r[i][0], s->r[i][1]);
        return bytes(ps, set, f);
    }
    alts a;
    memset(&a, 0, sizeof a);
    soren_status rc = SOREN_OK;
    for (size_t i = 0; i < s->n && rc == SOREN_OK; i++)
        rc = utf8_alts(ps, s->r[i][0], s->r[i][1], &a);
    bool ascii = false;
    for (int k = 0; k < 32; k++)
        ascii |= a.ascii[k] != 0;
    if (rc != SOREN_OK)
        return rc;
    if (a.have && !ascii) {
        *f = a.f;
        return SOREN_OK;
    }
    rc = bytes(ps, a.ascii, f);
    return rc == SOREN_OK && a.have ? join_alt(ps, f, a.f) : rc;
}

/* The fragment for a character of the set, after case folding. */
static soren_status finish_chars(parser *ps, bool negate, frag *f)
{
    soren_status rc = ps->icase ? chars_fold(ps) : SOREN_OK;
    cset_normalise(&ps->set);
    if (rc == SOREN_OK && negate)
        rc = chars_negate(ps);
    return rc == SOREN_OK ? chars_frag(ps, f) : rc;
}

/* ---- Repetition ------------------------------------------------------------ */

/* Applies the postfix operator op ('*', '+' or '?') to f. */
static soren_status repeat(parser *ps, unsigned char op, frag *f)
{
    uint32_t s = NONE, e;
    soren_status rc = op == '+' ? SOREN_OK : add_state(ps, NFA_EPS, &s);
    if (rc == SOREN_OK)
        rc = add_state(ps, NFA_EPS, &e);
    if (rc != SOREN_OK)
        return rc;
    nfa_state *st = ps->m->st;
    if (op == '+') {
        st[f->end].out[0] = f->start;
        st[f->end].out[1] = e;
        f->end = e;
        return SOREN_OK;
    }
    st[s].out[0] = f->start;
    st[s].out[1] = e;
    st[f->end].out[0] = op == '*' ? s : e;
    f->start = s;
    f->end = e;
    return SOREN_OK;
}

/* A copy of f, whose states are m->st[base .. base + size): every edge of
 * a fragment stays inside it. */
static soren_status copy_frag(parser *ps, uint32_t base, uint32_t size, frag f, frag *out)
{
    uint32_t first = ps->m->n, id;
    for (uint32_t i = 0; i < size; i++) {
        soren_status rc = add_state(ps, NFA_EPS, &id);
        if (rc != SOREN_OK)
            return rc;
        nfa_state *s = &ps->m->st[id];
        *s = ps->m->st[base + i];
        for (int k = 0; k < 2; k++)
            if (s->out[k] != NONE)
                s->out[k] = s->out[k] - base + first;
    }
    out->start = f.start - base + first;
    out->end = f.end - base + first;
    return SOREN_OK;
}

/* Applies the interval {min,max} (max NONE: no maximum) to f, whose states
 * are m->st[base ..]: min copies, then max - min optional ones, or one
 * repeated with '*'. */
static soren_status interval(parser *ps, uint32_t base, uint32_t min, uint32_t max, frag *f)
{
    uint32_t size = ps->m->n - base;
    uint32_t copies = max == NONE ? (min ? min : 1) : max;
    if (copies == 0)
        return empty(ps, f);
    if ((uint64_t)size * copies > MAX_NFA_STATES) {
        char why[64];
        snprintf(why, sizeof why, "it needs more than %u NFA states", MAX_NFA_STATES);
        return too_complex(ps->pattern, ps->err, why);
    }
    /* Every copy is taken before any operator changes the original. */
    frag part[SOREN_REGEX_MAX_REPEAT];
    part[0] = *f;
    soren_status rc = SOREN_OK;
    for (uint32_t i = 1; i < copies && rc == SOREN_OK; i++)
        rc = copy_frag(ps, base, size, *f, &part[i]);
    for (uint32_t i = 0; i < copies && rc == SOREN_OK; i++) {
        if (max == NONE && i + 1 == copies)
            rc = repeat(ps, min ? '+' : '*', &part[i]);
        else if (i >= min)
            rc = repeat(ps, '?', &part[i]);
        if (rc == SOREN_OK && i > 0)
            join_concat(ps->m, &part[0], part[i]);
    }
    *f = part[0];
    return rc;
}

/* Reads a bound of an interval at *at: digits, saturating past any limit. */
static uint32_t read_bound(const parser *ps, size_t *at, bool *any)
{
    uint32_t v = 0;
    *any = false;
    for (; *at < ps->len && ps->p[*at] >= '0' && ps->p[*at] <= '9'; (*at)++) {
        v = v > 100000000u ? v : 10 * v + (uint32_t)(ps->p[*at] - '0');
        *any = true;
    }
    return v;
}

/* True if an interval "{m}", "{m,}", "{,n}", "{m,n}" or "{,}" starts at
 * at; sets its bounds (max NONE: none) and where it ends.  Anything else
 * after '{' makes the '{' a literal, as in GNU grep -E. */
static bool interval_at(const parser *ps, size_t at, uint32_t *min, uint32_t *max, size_t *past)
{
    size_t i = at + 1;
    bool any_min, any_max;
    *min = read_bound(ps, &i, &any_min);
    *max = *min;
    if (i < ps->len && ps->p[i] == ',') {
        i++;
        *max = read_bound(ps, &i, &any_max);
        if (!any_max)
            *max = NONE;
    } else if (!any_min) {
        return false;
    }
    if (i == ps->len || ps->p[i] != '}')
        return false;
    *past = i + 1;
    return true;
}

/* Applies the interval at ps->pos to f (states from base), checking its
 * bounds. */
static soren_status parse_interval(parser *ps, uint32_t base, frag *f)
{
    size_t at = ps->pos, past;
    uint32_t min, max;
    interval_at(ps, at, &min, &max, &past);
    uint32_t top = max == NONE ? min : max;
    if (top > SOREN_REGEX_MAX_REPEAT)
        return syntax_error(ps, at, "interval bound %s%u is over the limit of %u",
                            top > 100000000u ? "past " : "", top > 100000000u ? 100000000u : top,
                            SOREN_REGEX_MAX_REPEAT);
    if (max != NONE && min > max)
        return syntax_error(ps, at, "interval {%u,%u} has its minimum above its maximum",
                            min, max);
    ps->pos = past;
    return interval(ps, base, min, max, f);
}

static bool is_interval(const parser *ps)
{
    uint32_t min, max;
    size_t past;
    return ps->pos < ps->len && ps->p[ps->pos] == '{' &&
           interval_at(ps, ps->pos, &min, &max, &past);
}

/* ---- Atoms ----------------------------------------------------------------- */

static soren_status parse_alt(parser *ps, frag *f);

/* Reads the character at *at into *c and moves *at past it: one byte in
 * byte mode, one UTF-8 sequence in UTF-8 mode (where invalid UTF-8 is
 * refused). */
static soren_status read_char(parser *ps, size_t *at, uint32_t *c)
{
    const unsigned char *p = ps->p + *at;
    size_t left = ps->len - *at;
    if (!ps->utf8 || p[0] < 0x80) {
        *c = p[0];
        (*at)++;
        return SOREN_OK;
    }
    size_t n = soren__utf8_length(p, left);
    if (n == 0)
        return syntax_error(ps, *at, "byte 0x%02x is not valid UTF-8 (start the pattern with "
                            "(?-u) to match bytes)", p[0]);
    uint32_t v = p[0] & (0x7fu >> n);
    for (size_t i = 1; i < n; i++)
        v = v << 6 | (p[i] & 0x3fu);
    *c = v;
    *at += n;
    return SOREN_OK;
}

/* The ASCII classes, as in the C locale, each as ranges. */
static const struct {
    const char *name;
    uint8_t ranges[4][2];
} classes[] = {
    {"alpha", {{'A', 'Z'}, {'a', 'z'}}},
    {"digit", {{'0', '9'}}},
    {"alnum", {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}}},
    {"space", {{'\t', '\r'}, {' ', ' '}}},
    {"upper", {{'A', 'Z'}}},
    {"lower", {{'a', 'z'}}},
    {"punct", {{'!', '/'}, {':', '@'}, {'[', '`'}, {'{', '~'}}},
    {"xdigit", {{'0', '9'}, {'A', 'F'}, {'a', 'f'}}},
    {"blank", {{'\t', '\t'}, {' ', ' '}}},
    {"cntrl", {{0x00, 0x1f}, {0x7f, 0x7f}}},
    {"print", {{' ', '~'}}},
    {"graph", {{'!', '~'}}},
};

/* True if "[:", "[." or "[=" starts at i inside brackets. */
static bool opens_class(const parser *ps, size_t i)
{
    return ps->p[i] == '[' && i + 1 < ps->len &&
           (ps->p[i + 1] == ':' || ps->p[i + 1] == '.' || ps->p[i + 1] == '=');
}

/* Adds the class "[:name:]" at *at to the set and moves *at past it. */
static soren_status bracket_class(parser *ps, size_t *at)
{
    size_t i = *at, name = i + 2, end = name;
    if (ps->p[i + 1] != ':')
        return syntax_error(ps, i, "unsupported '[%c' in a bracket expression", ps->p[i + 1]);
    while (end + 1 < ps->len && !(ps->p[end] == ':' && ps->p[end + 1] == ']'))
        end++;
    if (end + 1 >= ps->len)
        return syntax_error(ps, i, "unclosed '[:'");
    for (size_t k = 0; k < sizeof classes / sizeof classes[0]; k++) {
        const char *c = classes[k].name;
        if (strlen(c) != end - name || memcmp(c, ps->p + name, end - name) != 0)
            continue;
        soren_status rc = SOREN_OK;
        for (int r = 0; r < 4 && rc == SOREN_OK && classes[k].ranges[r][1]; r++)
            rc = chars_add(ps, classes[k].ranges[r][0], classes[k].ranges[r][1]);
        *at = end + 2;
        return rc;
    }
    if (end - name > 32 || has_control(ps->pattern))
        return syntax_error(ps, i, "unknown character class");
    return syntax_error(ps, i, "unknown character class '%.*s' (the classes: alpha digit "
                        "alnum upper lower space blank punct print graph cntrl xdigit)",
                        (int)(end - name), (const char *)ps->p + name);
}

/* Reads one character of a bracket expression at *at.  '\' there is
 * literal in POSIX but an escape in most other dialects, so only "\\" (one
 * backslash either way) is accepted. */
static soren_status bracket_char(parser *ps, size_t *at, uint32_t *c)
{
    size_t i = *at;
    if (ps->p[i] != '\\' || i + 1 == ps->len) /* at the end: the '[' is unclosed */
        return read_char(ps, at, c);
    if (i + 1 < ps->len && ps->p[i + 1] == '\\') {
        *c = '\\';
        *at = i + 2;
        return SOREN_OK;
    }
    if (i + 1 < ps->len && ps->p[i + 1] >= 0x20 && ps->p[i + 1] < 0x7f)
        return syntax_error(ps, i, "'\\%c' in a bracket expression is ambiguous (POSIX reads "
                            "'\\' there as itself): write a backslash as \\\\", ps->p[i + 1]);
    return syntax_error(ps, i, "'\\' in a bracket expression is ambiguous (POSIX reads it as "
                        "itself): write a backslash as \\\\");
}

/* True if '-' at i makes a range: it is followed by something but ']'. */
static bool range_dash(const parser *ps, size_t i)
{
    return i + 1 < ps->len && ps->p[i] == '-' && ps->p[i + 1] != ']';
}

static soren_status out_of_order(parser *ps, size_t from, size_t to)
{
    bool json = has_control(ps->pattern);
    char range[64] = "";
    size_t n = 0;
    for (size_t i = from; i < to && n + 8 < sizeof range; i++) {
        show_byte(ps->p[i], json, range + n);
        n += strlen(range + n);
    }
    return syntax_error(ps, from, "range '%s' is out of order", range);
}

/* Adds the character, range or class at *at to the set and moves *at past
 * it. */
static soren_status bracket_item(parser *ps, size_t *at)
{
    size_t i = *at;
    uint32_t lo, hi;
    if (opens_class(ps, i)) {
        soren_status rc = bracket_class(ps, at);
        if (rc == SOREN_OK && range_dash(ps, *at))
            return syntax_error(ps, *at, "a character class cannot start a range");
        return rc;
    }
    soren_status rc = bracket_char(ps, at, &lo);
    if (rc != SOREN_OK || !range_dash(ps, *at))
        return rc == SOREN_OK ? chars_add(ps, lo, lo) : rc;
    size_t dash = *at;
    if (opens_class(ps, dash + 1)) {
        if (ps->p[dash + 2] != ':')
            return bracket_class(ps, &(size_t){dash + 1}); /* refuses "[." and "[=" */
        return syntax_error(ps, dash + 1, "a range cannot end with a class");
    }
    *at = dash + 1;
    rc = bracket_char(ps, at, &hi);
    if (rc != SOREN_OK)
        return rc;
    if (hi < lo)
        return out_of_order(ps, i, *at);
    if (range_dash(ps, *at))
        return syntax_error(ps, *at, "'-' after a range must come last");
    return chars_add(ps, lo, hi);
}

static soren_status parse_bracket(parser *ps, frag *f)
{
    size_t open = ps->pos, i = open + 1;
    bool negate = i < ps->len && ps->p[i] == '^';
    i += negate;
    ps->set.n = 0;
    for (size_t first = i;;) {
        if (i == ps->len)
            return syntax_error(ps, open, "unclosed '['");
        if (ps->p[i] == ']' && i > first)
            break;
        soren_status rc = bracket_item(ps, &i);
        if (rc != SOREN_OK)
            return rc;
    }
    ps->pos = i + 1;
    return finish_chars(ps, negate, f);
}

static soren_status parse_group(parser *ps, frag *f)
{
    size_t open = ps->pos;
    if (ps->depth == MAX_DEPTH)
        return syntax_error(ps, open, "groups nested more than %u deep", MAX_DEPTH);
    if (open + 1 < ps->len && ps->p[open + 1] == '?')
        return syntax_error(ps, open, "'(?' sets flags, and only at the start of the pattern");
    ps->pos++;
    ps->depth++;
    soren_status rc = parse_alt(ps, f);
    ps->depth--;
    if (rc != SOREN_OK)
        return rc;
    if (ps->pos == ps->len)
        return syntax_error(ps, open, "unclosed '('");
    ps->pos++; /* the ')' that stopped parse_alt */
    return SOREN_OK;
}

/* Escapes GNU gives a meaning this compiler lacks (\w, \1, \<, ...). */
static bool gnu_escape(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '<' || c == '>' || c == '`' || c == '\'';
}

/* The one character at *at (moved past it), as a set. */
static soren_status literal(parser *ps, size_t *at, frag *f)
{
    uint32_t c;
    ps->set.n = 0;
    soren_status rc = read_char(ps, at, &c);
    if (rc == SOREN_OK)
        rc = chars_add(ps, c, c);
    return rc == SOREN_OK ? finish_chars(ps, false, f) : rc;
}

static soren_status parse_escape(parser *ps, frag *f)
{
    size_t at = ps->pos;
    if (at + 1 == ps->len)
        return syntax_error(ps, at, "trailing '\\'");
    unsigned char c = ps->p[at + 1];
    if (gnu_escape(c))
        return syntax_error(ps, at, "unsupported escape '\\%c'", c);
    ps->pos += 1;
    return literal(ps, &ps->pos, f);
}

static soren_status parse_atom(parser *ps, frag *f)
{
    unsigned char c = ps->p[ps->pos];
    switch (c) {
    case '(': return parse_group(ps, f);
    case '[': return parse_bracket(ps, f);
    case '\\': return parse_escape(ps, f);
    case '*':
    case '+':
    case '?': return empty(ps, f); /* nothing to repeat: repeats "" (GNU grep) */
    case '{':
        if (is_interval(ps))
            return empty(ps, f); /* likewise */
        break;
    case '^': ps->pos++; return edge(ps, NFA_BOL, f);
    case '$': ps->pos++; return edge(ps, NFA_EOL, f);
    case '.': /* any character: the complement of none */
        ps->pos++;
        ps->set.n = 0;
        return finish_chars(ps, true, f);
    }
    return literal(ps, &ps->pos, f);
}

static soren_status parse_repeat(parser *ps, frag *f)
{
    uint32_t base = ps->m->n;
    soren_status rc = parse_atom(ps, f);
    while (rc == SOREN_OK && ps->pos < ps->len) {
        unsigned char c = ps->p[ps->pos];
        if (c == '*' || c == '+' || c == '?')
            rc = repeat(ps, ps->p[ps->pos++], f);
        else if (is_interval(ps))
            rc = parse_interval(ps, base, f);
        else
            break;
    }
    return rc;
}

/* A branch ends at '|', at the end, or at the ')' closing an open group;
 * with no group open, ')' is a literal. */
static bool ends_branch(const parser *ps)
{
    if (ps->pos == ps->len)
        return true;
    unsigned char c = ps->p[ps->pos];
    return c == '|' || (c == ')' && ps->depth > 0);
}

static soren_status parse_branch(parser *ps, frag *f)
{
    soren_status rc = empty(ps, f);
    while (rc == SOREN_OK && !ends_branch(ps)) {
        frag g;
        rc = parse_repeat(ps, &g);
        if (rc == SOREN_OK)
            join_concat(ps->m, f, g);
    }
    return rc;
}

static soren_status parse_alt(parser *ps, frag *f)
{
    soren_status rc = parse_branch(ps, f);
    while (rc == SOREN_OK && ps->pos < ps->len && ps->p[ps->pos] == '|') {
        frag g;
        ps->pos++;
        rc = parse_branch(ps, &g);
        if (rc == SOREN_OK)
            rc = join_alt(ps, f, g);
    }
    return rc;
}

/* Reads the flag group "(?flags)" or "(?flags-flags)" that may open the
 * pattern: i (ignore case) and u (UTF-8, on unless cleared). */
static soren_status parse_flags(parser *ps)
{
    if (ps->len < 2 || ps->p[0] != '(' || ps->p[1] != '?')
        return SOREN_OK;
    bool on = true, any = false;
    size_t i = 2;
    for (; i < ps->len && ps->p[i] != ')'; i++) {
        unsigned char c = ps->p[i];
        if (c == '-' && on) {
            on = false;
            continue;
        }
        if (c == 'i')
            ps->icase = on;
        else if (c == 'u')
            ps->utf8 = on;
        else if (c >= 0x20 && c < 0x7f)
            return syntax_error(ps, i, "unknown flag '%c' (the flags: i ignores case, -u "
                                "matches bytes instead of UTF-8 characters)", c);
        else
            return syntax_error(ps, i, "unknown flag");
        any = true;
    }
    if (i == ps->len)
        return syntax_error(ps, 0, "unclosed '(?'");
    if (!any)
        return syntax_error(ps, 0, "'(?' names no flag");
    ps->pos = i + 1;
    return SOREN_OK;
}

static soren_status parse(const char *pattern, nfa *m, soren_error *err)
{
    parser ps = {.pattern = pattern,
                 .p = (const unsigned char *)pattern,
                 .len = strlen(pattern),
                 .utf8 = true,
                 .m = m,
                 .err = err};
    frag f;
    soren_status rc = parse_flags(&ps);
    if (rc == SOREN_OK)
        rc = parse_alt(&ps, &f); /* at depth 0 it reads the rest of the pattern */
    if (rc == SOREN_OK) {
        m->st[f.end].kind = NFA_MATCH;
        m->start = f.start;
    }
    free(ps.set.r);
    return rc;
}

/* ---- Subset construction --------------------------------------------------- */

/* What a DFA state knows beyond its NFA states. */
enum { AT_OTHER, AT_BEGIN, ACCEPTING };

/* A DFA state: its flag and the sorted NFA states it holds, keys[off ..
 * off + len).  Only byte states and states waiting on $ are kept: the rest
 * have been followed already, or never hold again. */
typedef struct dstate {
    uint32_t off, len;
    uint8_t flag;
} dstate;

typedef struct builder {
    const nfa *m;
    const char *pattern;
    soren_error *err;
    uint8_t cls[256];      /* byte -> class */
    uint8_t rep[256];      /* class -> its smallest byte */
    uint32_t nclass, cols; /* cols: the classes, then BEGIN and END */
    dstate *st;
    uint32_t n, cap, max_states;
    uint32_t *trans; /* n x cols */
    uint32_t *keys;
    size_t nkeys, keycap;
    uint32_t *table; /* hash table of states (NONE: free), at most half full */
    uint32_t table_size;
    /* closure scratch, one slot per NFA state */
    uint32_t *stack, *list, *seen;
    uint32_t nstack, nlist, stamp;
    bool matched;
} builder;

/* Groups bytes that every byte set of the NFA treats alike. */
static void byte_classes(builder *b)
{
    memset(b->cls, 0, sizeof b->cls);
    b->nclass = 1;
    for (uint32_t s = 0; s < b->m->n; s++) {
        if (b->m->st[s].kind != NFA_BYTES)
            continue;
        uint16_t remap[512];
        uint32_t n = 0;
        memset(remap, 0xff, sizeof remap);
        for (unsigned c = 0; c < 256; c++) {
            unsigned key = 2u * b->cls[c] + has_byte(b->m->st[s].set, c);
            if (remap[key] == 0xffff)
                remap[key] = (uint16_t)n++;
            b->cls[c] = (uint8_t)remap[key];
        }
        b->nclass = n;
    }
    for (unsigned c = 256; c-- > 0;)
        b->rep[b->cls[c]] = (uint8_t)c;
    b->cols = b->nclass + 2;
    b->max_states = BUILD_MAX_CELLS / b->cols;
    if (b->max_states < BUILD_MIN_STATES)
        b->max_states = BUILD_MIN_STATES;
}

static void set_begin(builder *b)
{
    b->stamp++;
    b->nstack = 0;
}

static void set_add(builder *b, uint32_t s)
{
    if (s != NONE && b->seen[s] != b->stamp) {
        b->seen[s] = b->stamp;
        b->stack[b->nstack++] = s;
    }
}

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, c = *(const uint32_t *)y;
    return (a > c) - (a < c);
}

/* Follows epsilon edges from the added states, and ^ and $ edges where they
 * hold; leaves the states to keep in list (sorted), and sets matched when
 * the final state is reached. */
static void closure(builder *b, bool at_begin, bool at_end)
{
    b->nlist = 0;
    b->matched = false;
    while (b->nstack && !b->matched) {
        uint32_t s = b->stack[--b->nstack];
        const nfa_state *q = &b->m->st[s];
        switch (q->kind) {
        case NFA_EPS:
            set_add(b, q->out[0]);
            set_add(b, q->out[1]);
            break;
        case NFA_BOL:
            if (at_begin)
                set_add(b, q->out[0]);
            break;
        case NFA_EOL:
            if (at_end)
                set_add(b, q->out[0]);
            else
                b->list[b->nlist++] = s;
            break;
        case NFA_BYTES: b->list[b->nlist++] = s; break;
        case NFA_MATCH: b->matched = true; break;
        }
    }
    qsort(b->list, b->nlist, sizeof *b->list, cmp_u32);
}

static uint32_t hash_key(uint8_t flag, const uint32_t *list, uint32_t n)
{
    uint32_t h = 2166136261u ^ flag;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ list[i]) * 16777619u;
    return h ^ (h >> 15);
}

static bool same_key(const builder *b, uint32_t q, uint8_t flag)
{
    const dstate *d = &b->st[q];
    return d->flag == flag && d->len == b->nlist &&
           memcmp(b->keys + d->off, b->list, b->nlist * sizeof *b->list) == 0;
}

/* The free slot for a new key or the slot of an equal one. */
static uint32_t find_slot(const builder *b, uint8_t flag)
{
    uint32_t mask = b->table_size - 1;
    uint32_t slot = hash_key(flag, b->list, b->nlist) & mask;
    while (b->table[slot] != NONE && !same_key(b, b->table[slot], flag))
        slot = (slot + 1) & mask;
    return slot;
}

/* Doubles the hash table and reinserts every state. */
static soren_status grow_table(builder *b)
{
    uint32_t size = b->table_size ? 2 * b->table_size : 1024;
    uint32_t *table = malloc(size * sizeof *table);
    if (!table)
        return out_of_memory(b->pattern, b->err);
    memset(table, 0xff, size * sizeof *table);
    for (uint32_t q = 0; q < b->n; q++) {
        const dstate *d = &b->st[q];
        uint32_t slot = hash_key(d->flag, b->keys + d->off, d->len) & (size - 1);
        while (table[slot] != NONE)
            slot = (slot + 1) & (size - 1);
        table[slot] = q;
    }
    free(b->table);
    b->table = table;
    b->table_size = size;
    return SOREN_OK;
}

static soren_status grow_states(builder *b)
{
    uint32_t cap = b->cap ? 2 * b->cap : 64;
    dstate *st = realloc(b->st, cap * sizeof *st);
    if (!st)
        return out_of_memory(b->pattern, b->err);
    b->st = st;
    uint32_t *trans = realloc(b->trans, (size_t)cap * b->cols * sizeof *trans);
    if (!trans)
        return out_of_memory(b->pattern, b->err);
    b->trans = trans;
    b->cap = cap;
    return SOREN_OK;
}

static soren_status grow_keys(builder *b, size_t need)
{
    size_t cap = b->keycap ? b->keycap : 1024;
    while (cap < need)
        cap *= 2;
    uint32_t *keys = realloc(b->keys, cap * sizeof *keys);
    if (!keys)
        return out_of_memory(b->pattern, b->err);
    b->keys = keys;
    b->keycap = cap;
    return SOREN_OK;
}

static soren_status construction_limit(const builder *b)
{
    char why[128];
    if (b->n == b->max_states)
        snprintf(why, sizeof why, "building its automaton needs more than %u states",
                 b->max_states);
    else
        snprintf(why, sizeof why, "building its automaton needs more than %zu MiB",
                 BUILD_MAX_KEYS * sizeof *b->keys >> 20);
    return too_complex(b->pattern, b->err, why);
}

/* The DFA state for (flag, list), created if new. */
static soren_status intern(builder *b, uint8_t flag, uint32_t *id)
{
    uint32_t slot = find_slot(b, flag);
    if (b->table[slot] != NONE) {
        *id = b->table[slot];
        return SOREN_OK;
    }
    if (b->n == b->max_states || b->nkeys + b->nlist > BUILD_MAX_KEYS)
        return construction_limit(b);
    soren_status rc = b->n == b->cap ? grow_states(b) : SOREN_OK;
    if (rc == SOREN_OK && b->nkeys + b->nlist > b->keycap)
        rc = grow_keys(b, b->nkeys + b->nlist);
    if (rc == SOREN_OK && 2 * (b->n + 1) > b->table_size) {
        rc = grow_table(b);
        slot = find_slot(b, flag);
    }
    if (rc != SOREN_OK)
        return rc;
    memcpy(b->keys + b->nkeys, b->list, b->nlist * sizeof *b->list);
    b->st[b->n] = (dstate){.off = (uint32_t)b->nkeys, .len = b->nlist, .flag = flag};
    b->nkeys += b->nlist;
    b->table[slot] = b->n;
    *id = b->n++;
    return SOREN_OK;
}

/* The state a closure just computed leads to: the accepting state if it
 * reached the final state. */
static soren_status target(builder *b, uint8_t flag, uint32_t *id)
{
    if (b->matched) {
        b->nlist = 0;
        flag = ACCEPTING;
    }
    return intern(b, flag, id);
}

/* Where state q goes on a byte of class c: its byte states that take the
 * byte, plus a new attempt starting here. */
static soren_status step_byte(builder *b, uint32_t q, uint32_t c, uint32_t *id)
{
    const dstate *d = &b->st[q];
    set_begin(b);
    for (uint32_t i = 0; i < d->len; i++) {
        const nfa_state *s = &b->m->st[b->keys[d->off + i]];
        if (s->kind == NFA_BYTES && has_byte(s->set, b->rep[c]))
            set_add(b, s->out[0]);
    }
    set_add(b, b->m->start);
    closure(b, false, false);
    return target(b, AT_OTHER, id);
}

/* On BEGIN every attempt in progress dies (none can cross an end) and one
 * starts where ^ holds. */
static soren_status step_begin(builder *b, uint32_t *id)
{
    set_begin(b);
    set_add(b, b->m->start);
    closure(b, true, false);
    return target(b, AT_BEGIN, id);
}

/* On END the attempts waiting on $ go on; if none matches, the search
 * starts afresh in state 0. */
static soren_status step_end(builder *b, uint32_t q, uint32_t *id)
{
    const dstate *d = &b->st[q];
    set_begin(b);
    for (uint32_t i = 0; i < d->len; i++)
        if (b->m->st[b->keys[d->off + i]].kind == NFA_EOL)
            set_add(b, b->keys[d->off + i]);
    closure(b, d->flag == AT_BEGIN, true);
    if (!b->matched) {
        *id = 0;
        return SOREN_OK;
    }
    return target(b, ACCEPTING, id);
}

/* Fills state q's row; may create states (and move b->st and b->trans). */
static soren_status expand(builder *b, uint32_t q)
{
    uint32_t t = q;
    soren_status rc = SOREN_OK;
    for (uint32_t c = 0; c < b->cols && rc == SOREN_OK; c++) {
        if (b->st[q].flag != ACCEPTING) {
            if (c < b->nclass)
                rc = step_byte(b, q, c, &t);
            else if (c == b->nclass)
                rc = step_begin(b, &t);
            else
                rc = step_end(b, q, &t);
        }
        b->trans[(size_t)q * b->cols + c] = t;
    }
    return rc;
}

static void builder_free(builder *b)
{
    free(b->st);
    free(b->trans);
    free(b->keys);
    free(b->table);
    free(b->stack);
    free(b->list);
    free(b->seen);
}

/* Builds the unminimised DFA; state 0 is the start. */
static soren_status subsets(builder *b)
{
    size_t n = b->m->n;
    b->stack = malloc(n * sizeof *b->stack);
    b->list = malloc(n * sizeof *b->list);
    b->seen = calloc(n, sizeof *b->seen);
    if (!b->stack || !b->list || !b->seen)
        return out_of_memory(b->pattern, b->err);
    byte_classes(b);
    soren_status rc = grow_table(b);
    if (rc == SOREN_OK)
        rc = grow_keys(b, 1); /* never NULL, even while every key is empty */
    if (rc != SOREN_OK)
        return rc;

    uint32_t first; /* state 0 */
    set_begin(b);
    set_add(b, b->m->start);
    closure(b, false, false);
    rc = target(b, AT_OTHER, &first);
    for (uint32_t q = 0; q < b->n && rc == SOREN_OK; q++)
        rc = expand(b, q);
    return rc;
}

/* ---- Minimisation ---------------------------------------------------------- */

/* A refinable partition of 0 .. n-1 (Valmari and Lehtinen, "Efficient
 * minimization of DFAs with partial transition functions", 2008): set s
 * holds elem[first[s] .. past[s]), its marked elements first. */
typedef struct partition {
    uint32_t sets;
    uint32_t *elem, *loc, *set, *first, *past;
} partition;

/* Marking scratch shared by both partitions: marked elements per set, and
 * the sets with any marked. */
typedef struct marks {
    uint32_t *count, *touched;
    uint32_t ntouched;
} marks;

static bool partition_init(partition *p, uint32_t n)
{
    p->elem = malloc(n * sizeof *p->elem);
    p->loc = malloc(n * sizeof *p->loc);
    p->set = calloc(n, sizeof *p->set);
    p->first = malloc(n * sizeof *p->first);
    p->past = malloc(n * sizeof *p->past);
    if (!p->elem || !p->loc || !p->set || !p->first || !p->past)
        return false;
    for (uint32_t i = 0; i < n; i++)
        p->elem[i] = p->loc[i] = i;
    p->sets = 1;
    p->first[0] = 0;
    p->past[0] = n;
    return true;
}

static void partition_free(partition *p)
{
    free(p->elem);
    free(p->loc);
    free(p->set);
    free(p->first);
    free(p->past);
}

static void partition_mark(partition *p, marks *mk, uint32_t e)
{
    uint32_t s = p->set[e], i = p->loc[e], j = p->first[s] + mk->count[s];
    p->elem[i] = p->elem[j];
    p->loc[p->elem[i]] = i;
    p->elem[j] = e;
    p->loc[e] = j;
    if (mk->count[s]++ == 0)
        mk->touched[mk->ntouched++] = s;
}

/* Splits every touched set into its marked and unmarked parts; the smaller
 * part becomes the new set, which is what keeps the whole O(m log n). */
static void partition_split(partition *p, marks *mk)
{
    while (mk->ntouched) {
        uint32_t s = mk->touched[--mk->ntouched], j = p->first[s] + mk->count[s];
        if (j == p->past[s]) {
            mk->count[s] = 0;
            continue;
        }
        uint32_t z = p->sets++;
        if (mk->count[s] <= p->past[s] - j) {
            p->first[z] = p->first[s];
            p->past[z] = p->first[s] = j;
        } else {
            p->past[z] = p->past[s];
            p->first[z] = p->past[s] = j;
        }
        for (uint32_t i = p->first[z]; i < p->past[z]; i++)
            p->set[p->elem[i]] = z;
        mk->count[s] = mk->count[z] = 0;
    }
}

/* The transitions, numbered q * cols + symbol, as cords: first grouped by
 * symbol; refinement then splits them by the block they enter. */
static void cords_by_symbol(partition *c, uint32_t n, uint32_t cols)
{
    uint32_t i = 0;
    for (uint32_t a = 0; a < cols; a++) {
        c->first[a] = i;
        for (uint32_t q = 0; q < n; q++, i++) {
            uint32_t t = q * cols + a;
            c->elem[i] = t;
            c->loc[t] = i;
            c->set[t] = a;
        }
        c->past[a] = i;
    }
    c->sets = cols;
}

/* in[in_first[q] .. in_first[q + 1]) are the transitions entering q. */
static void incoming(const builder *b, uint32_t *in, uint32_t *in_first)
{
    uint32_t n = b->n, m = n * b->cols;
    memset(in_first, 0, (n + 1) * sizeof *in_first);
    for (uint32_t t = 0; t < m; t++)
        in_first[b->trans[t] + 1]++;
    for (uint32_t q = 0; q < n; q++)
        in_first[q + 1] += in_first[q];
    for (uint32_t t = 0; t < m; t++)
        in[in_first[b->trans[t]]++] = t;
    for (uint32_t q = n; q > 0; q--)
        in_first[q] = in_first[q - 1];
    in_first[0] = 0;
}

static void refine(const builder *b, partition *blocks, partition *cords, marks *mk,
                   const uint32_t *in, const uint32_t *in_first)
{
    for (uint32_t q = 0; q < b->n; q++)
        if (b->st[q].flag == ACCEPTING)
            partition_mark(blocks, mk, q);
    partition_split(blocks, mk);
    cords_by_symbol(cords, b->n, b->cols);
    /* Every cord splits blocks by source; every block but the first splits
     * cords by target (the first is covered by the rest, as in Hopcroft's). */
    for (uint32_t c = 0, k = 1; c < cords->sets; c++) {
        for (uint32_t i = cords->first[c]; i < cords->past[c]; i++)
            partition_mark(blocks, mk, cords->elem[i] / b->cols);
        partition_split(blocks, mk);
        for (; k < blocks->sets; k++) {
            for (uint32_t i = blocks->first[k]; i < blocks->past[k]; i++) {
                uint32_t q = blocks->elem[i];
                for (uint32_t j = in_first[q]; j < in_first[q + 1]; j++)
                    partition_mark(cords, mk, in[j]);
            }
            partition_split(cords, mk);
        }
    }
}

/* Sets block[q] to q's class of equivalent states; returns the count in
 * *nblocks. */
static soren_status minimise(const builder *b, uint32_t *block, uint32_t *nblocks)
{
    uint32_t n = b->n, m = n * b->cols;
    partition blocks = {0}, cords = {0};
    marks mk = {.count = calloc((size_t)m + 1, sizeof *mk.count),
                .touched = malloc(((size_t)m + 1) * sizeof *mk.touched)};
    uint32_t *in = malloc((size_t)m * sizeof *in);
    uint32_t *in_first = malloc(((size_t)n + 1) * sizeof *in_first);
    bool ok = partition_init(&blocks, n) && partition_init(&cords, m) && mk.count &&
              mk.touched && in && in_first;
    if (ok) {
        incoming(b, in, in_first);
        refine(b, &blocks, &cords, &mk, in, in_first);
        memcpy(block, blocks.set, n * sizeof *block);
        *nblocks = blocks.sets;
    }
    partition_free(&blocks);
    partition_free(&cords);
    free(mk.count);
    free(mk.touched);
    free(in);
    free(in_first);
    return ok ? SOREN_OK : out_of_memory(b->pattern, b->err);
}

/* ---- Output ---------------------------------------------------------------- */

/* Lays the minimised DFA out over all 258 symbols, numbering its states in
 * order of their first member so that the start (state 0) stays state 0. */
static soren_status emit(const builder *b, const uint32_t *block, uint32_t nblocks,
                         soren_dfa **out, size_t *out_size)
{
    if (nblocks > SOREN_REGEX_MAX_STATES) {
        char why[64];
        snprintf(why, sizeof why, "its automaton needs more than %u states",
                 SOREN_REGEX_MAX_STATES);
        return too_complex(b->pattern, b->err, why);
    }
    uint64_t size = soren_dfa_size(nblocks);
    uint32_t *id = malloc(nblocks * sizeof *id), *member = malloc(nblocks * sizeof *member);
    soren_dfa *d = malloc(size);
    if (!id || !member || !d) {
        free(id);
        free(member);
        free(d);
        return out_of_memory(b->pattern, b->err);
    }
    memset(id, 0xff, nblocks * sizeof *id);
    uint32_t k = 0;
    for (uint32_t q = 0; q < b->n; q++) {
        if (id[block[q]] == NONE) {
            member[k] = q;
            id[block[q]] = k++;
        }
    }
    *d = (soren_dfa){.magic = SOREN_DFA_MAGIC, .state_count = nblocks, .start = 0};
    uint32_t *next = (uint32_t *)(d + 1);
    uint8_t *accept = (uint8_t *)(next + (size_t)nblocks * SOREN_DFA_SYMBOLS);
    for (uint32_t s = 0; s < nblocks; s++) {
        const uint32_t *row = b->trans + (size_t)member[s] * b->cols;
        for (uint32_t sym = 0; sym < SOREN_DFA_SYMBOLS; sym++) {
            uint32_t col = sym < 256 ? b->cls[sym] : b->nclass + (sym - 256);
            next[(size_t)s * SOREN_DFA_SYMBOLS + sym] = id[block[row[col]]];
        }
        accept[s] = b->st[member[s]].flag == ACCEPTING;
    }
    free(id);
    free(member);
    *out = d;
    *out_size = (size_t)size;
    return SOREN_OK;
}

static soren_status build_dfa(const nfa *m, const char *pattern, soren_dfa **out,
                              size_t *out_size, soren_error *err)
{
    builder b = {.m = m, .pattern = pattern, .err = err};
    uint32_t *block = NULL, nblocks = 0;
    soren_status rc = subsets(&b);
    if (rc == SOREN_OK) {
        block = malloc(b.n * sizeof *block);
        rc = block ? minimise(&b, block, &nblocks) : out_of_memory(pattern, err);
    }
    if (rc == SOREN_OK)
        rc = emit(&b, block, nblocks, out, out_size);
    free(block);
    builder_free(&b);
    return rc;
}

soren_status soren_regex_compile(const char *pattern, soren_dfa **out, size_t *out_size,
                                 soren_error *err)
{
    nfa m = {0};
    *out = NULL;
    *out_size = 0;
    soren_status rc = parse(pattern, &m, err);
    if (rc == SOREN_OK)
        rc = build_dfa(&m, pattern, out, out_size, err);
    free(m.st);
    return rc;
}
