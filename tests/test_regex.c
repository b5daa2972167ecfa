/*
 * test_regex.c - soren_regex_compile and soren_dfa_search.
 *
 * The reference is glibc's regexec(REG_EXTENDED), with and without
 * REG_ICASE: in the C locale for byte patterns ("(?-u)"), in C.UTF-8 for
 * UTF-8 ones.  Random patterns come from the part of the grammar where
 * glibc and this compiler agree (no leading '*', no unmatched ')', no
 * operator after an anchor or after a group holding one, no newline in the
 * words: glibc refuses or mismatches those; in UTF-8 no classes and no
 * ranges past ASCII), matched against random words.  UTF-8 ranges are
 * checked against the code points themselves.  Every compiled DFA is also
 * checked for layout and minimality.  Hand-written cases cover what the
 * generators leave out, every syntax error, and the limits.
 */
#include <criterion/criterion.h>

#include <locale.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/regex.h"
#include "testutil.h"

/* ---- Helpers ------------------------------------------------------------ */

/* s with non-printing bytes as \xNN, for failure messages (static buffer). */
static const char *visible(const char *s)
{
    static char buf[2048];
    size_t n = 0;
    for (; *s && n + 5 < sizeof buf; s++) {
        unsigned char c = (unsigned char)*s;
        n += (size_t)snprintf(buf + n, sizeof buf - n, c >= 0x20 && c < 0x7f ? "%c" : "\\x%02x",
                              c);
    }
    buf[n] = '\0';
    return buf;
}

/* Checks the block's layout: sizes, targets in range, accepting states
 * absorbing. */
static void check_layout(const soren_dfa *dfa, size_t size, const char *pattern)
{
    cr_assert_eq(dfa->magic, SOREN_DFA_MAGIC);
    cr_assert_eq(size, soren_dfa_size(dfa->state_count));
    cr_assert(dfa->state_count >= 1 && dfa->state_count <= SOREN_REGEX_MAX_STATES);
    cr_assert_lt(dfa->start, dfa->state_count);
    const uint32_t *next = soren_dfa_next(dfa);
    const uint8_t *accept = soren_dfa_accept(dfa);
    for (uint32_t q = 0; q < dfa->state_count; q++) {
        cr_assert(accept[q] <= 1);
        for (uint32_t a = 0; a < SOREN_DFA_SYMBOLS; a++) {
            uint32_t t = next[(size_t)q * SOREN_DFA_SYMBOLS + a];
            cr_assert_lt(t, dfa->state_count, "pattern \"%s\"", visible(pattern));
            cr_assert(!accept[q] || t == q, "pattern \"%s\": accepting state %u leaves on %u",
                      visible(pattern), q, a);
        }
    }
}

/* True if p and q agree on acceptance and send every symbol to states of
 * one class. */
static int same_signature(const soren_dfa *dfa, const uint32_t *cls, uint32_t p, uint32_t q)
{
    const uint32_t *next = soren_dfa_next(dfa);
    if (cls[p] != cls[q])
        return 0;
    for (uint32_t a = 0; a < SOREN_DFA_SYMBOLS; a++)
        if (cls[next[(size_t)p * SOREN_DFA_SYMBOLS + a]] !=
            cls[next[(size_t)q * SOREN_DFA_SYMBOLS + a]])
            return 0;
    return 1;
}

/* Moore's refinement, independent of the compiler's Hopcroft-style one: in
 * a minimal DFA no two states end up in one class. */
static void check_minimal(const soren_dfa *dfa, const char *pattern)
{
    uint32_t n = dfa->state_count, classes = 0, before;
    uint32_t *cls = malloc(n * sizeof *cls), *next_cls = malloc(n * sizeof *next_cls);
    cr_assert(cls && next_cls);
    for (uint32_t q = 0; q < n; q++)
        cls[q] = soren_dfa_accept(dfa)[q];
    do {
        before = classes;
        classes = 0;
        for (uint32_t q = 0; q < n; q++) {
            uint32_t p = 0;
            while (p < q && !same_signature(dfa, cls, p, q))
                p++;
            next_cls[q] = p == q ? classes++ : next_cls[p];
        }
        memcpy(cls, next_cls, n * sizeof *cls);
    } while (classes != before);
    cr_assert_eq(classes, n, "pattern \"%s\": %u states, %u would do", visible(pattern), n,
                 classes);
    free(cls);
    free(next_cls);
}

static soren_dfa *compile(const char *pattern)
{
    soren_dfa *dfa = NULL;
    size_t size = 0;
    soren_error err;
    soren_error_clear(&err);
    soren_status rc = soren_regex_compile(pattern, &dfa, &size, &err);
    cr_assert_eq(rc, SOREN_OK, "pattern \"%s\": %s", visible(pattern), err.text);
    check_layout(dfa, size, pattern);
    check_minimal(dfa, pattern);
    return dfa;
}

static int search(const soren_dfa *dfa, const char *word)
{
    return soren_dfa_search(dfa, (const uint8_t *)word, strlen(word));
}

static void expect_error(const char *pattern, soren_status code, const char *text)
{
    soren_dfa *dfa = (soren_dfa *)&dfa; /* must be reset to NULL */
    size_t size = 1;
    soren_error err;
    soren_error_clear(&err);
    soren_status rc = soren_regex_compile(pattern, &dfa, &size, &err);
    cr_assert_eq(rc, code, "pattern \"%s\": got %d (%s)", visible(pattern), rc, err.text);
    cr_assert_eq(err.code, code);
    cr_assert_null(dfa);
    cr_assert_eq(size, 0);
    cr_assert_str_eq(err.text, text, "pattern \"%s\"", visible(pattern));
}

/* ---- Random patterns against regexec -------------------------------------- */

/* What a generator draws from: one table for bytes (against the C locale,
 * compiled with "(?-u)"), one for UTF-8 (against C.UTF-8). */
typedef struct alphabet {
    const char *const *literals, *const *items, *const *letters;
    size_t nliterals, nitems, nletters;
} alphabet;

typedef struct gen {
    uint64_t rng;
    const alphabet *a;
    char buf[512];
    size_t n;
    unsigned anchors; /* ^ and $ written so far */
} gen;

static unsigned pick(gen *g, size_t n)
{
    return (unsigned)tu_rand_below(&g->rng, n);
}

static void put(gen *g, const char *s)
{
    size_t k = strlen(s);
    cr_assert_lt(g->n + k, sizeof g->buf);
    memcpy(g->buf + g->n, s, k + 1);
    g->n += k;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Atoms whose meaning glibc shares; "abc" dominate so that matches are
 * common, '}' ']' '-' are literal outside brackets in both. */
static const char *const byte_literals[] = {
    "a", "b", "c", "a", "b", "c", "a", "b", "c", "d", "\\.", "\\*", "\\(", "\\)",
    "\\[", "\\\\", "\\|", "\\+", "\\?", "\\^", "\\$", "\\{", "\\-", "}", "]", "-",
    "\x80", "\xe9", "\xff", "A", "B", "7",
};

/* Bracket items that cannot run into each other as ranges; the classes
 * are the C locale's in both. */
static const char *const byte_items[] = {
    "a", "b", "c", "a-c", "a-b", "b-c", "\\\\", ".", "*", "x", "\x80", "\xe9-\xff", "(", "|",
    "[:alpha:]", "[:digit:]", "[:alnum:]", "[:space:]", "[:upper:]", "[:lower:]",
    "[:punct:]", "[:xdigit:]", "[:blank:]", "[:cntrl:]", "[:print:]", "[:graph:]", "B", "A-C",
};

/* Words over "abc" and a few bytes the patterns name.  No newline: glibc
 * lets a ^ or $ inside a pattern match next to one even without
 * REG_NEWLINE ("a$." matches "a\nb"), POSIX and soren do not. */
static const char *const byte_letters[] = {
    "a", "b", "c", "a", "b", "c", "a", "b", "c", "a", "b", "c", "d", "-", "]", ".", "\\",
    "*", "(", ")", "[", "{", "}", "|", "+", "?", "^", "$", "x", "\t", "\x80", "\xe9", "\xff",
    "A", "B", "C", "7", "F", ",",
};

/* The same in UTF-8: letters of one, two, three and four bytes, Latin-1
 * letters in both cases.  No classes: C.UTF-8's are Unicode's, soren's
 * ASCII's.  No ranges past ASCII: glibc refuses them in C.UTF-8
 * (REG_ECOLLATE).  Test(regex, utf8_ranges) checks those against code
 * points, and hand-written cases the classes on other letters. */
static const char *const utf8_literals[] = {
    "a", "b", "c", "a", "b", "c", "\xc3\xa9", "\xc3\x89", "\xc3\xa8", "\xe6\x97\xa5",
    "\xe2\x82\xac", "\xf0\x9d\x84\x9e", "\\.", "\\*", "\\\\", "\\{", "}", "]", "-", "A",
    "\xc3\xbf", "\xc3\x9c",
};
static const char *const utf8_items[] = {
    "a", "b", "c", "a-c", "\\\\", ".", "\xc3\xa9", "\xc3\xa8", "\xc3\xbc", "\xc3\x9c",
    "\xe6\x97\xa5", "\xe2\x82\xac", "\xf0\x9d\x84\x9e", "\xc3\x89", "A-C", "\xc5\xb8",
};
static const char *const utf8_letters[] = {
    "a", "b", "c", "a", "b", "c", "a", "b", "c", "A", "B", "C", "-", "]", ".", "\\", "{",
    "}", "\xc3\xa9", "\xc3\x89", "\xc3\xa8", "\xc3\xbc", "\xc3\x9c", "\xc3\xbf", "\xc5\xb8",
    "\xc4\x80", "\xc4\x81", "\xe6\x97\xa5", "\xe2\x82\xac", "\xf0\x9d\x84\x9e", "\xc3\x97",
    "\xc3\xb7", "\xc2\xa0",
};

static const alphabet bytes_alphabet = {
    byte_literals, byte_items, byte_letters, COUNT(byte_literals), COUNT(byte_items),
    COUNT(byte_letters)};
static const alphabet utf8_alphabet = {
    utf8_literals, utf8_items, utf8_letters, COUNT(utf8_literals), COUNT(utf8_items),
    COUNT(utf8_letters)};

static void gen_bracket(gen *g)
{
    put(g, pick(g, 3) ? "[" : "[^");
    unsigned lead = pick(g, 6);
    if (lead == 0)
        put(g, "]");
    else if (lead == 1)
        put(g, "-");
    for (unsigned k = 1 + pick(g, 3); k > 0; k--)
        put(g, g->a->items[pick(g, g->a->nitems)]);
    if (pick(g, 6) == 0)
        put(g, "-");
    put(g, "]");
}

static void gen_alt(gen *g, unsigned depth);

/* One atom; returns how many operators may follow it: none after an anchor
 * (glibc refuses "^*") or a group holding one (glibc matches "(^.)+\[" in
 * "c{c)c[", and "](a^.+)?+c" in "]abc"), else two. */
static unsigned gen_atom(gen *g, unsigned depth)
{
    unsigned kind = pick(g, 20);
    if (kind == 17 || kind == 18) {
        put(g, kind == 17 ? "^" : "$");
        g->anchors++;
        return 0;
    }
    if (kind < 9 || kind == 19)
        put(g, g->a->literals[pick(g, g->a->nliterals)]);
    else if (kind < 11)
        put(g, ".");
    else if (kind < 14 || depth == 3)
        gen_bracket(g);
    else {
        unsigned anchors = g->anchors;
        put(g, "(");
        gen_alt(g, depth + 1);
        put(g, ")");
        return g->anchors == anchors ? 2 : 0;
    }
    return 2;
}

static void gen_branch(gen *g, unsigned depth)
{
    static const char *const ops[] = {"*", "+", "?", "{2}", "{0,1}", "{1,}", "{,2}",
                                      "{0}", "{2,3}", "{1}", "{0,}", "*", "+", "?"};
    unsigned n = pick(g, 8) == 0 ? 0 : 1 + pick(g, 4);
    for (; n > 0 && g->n < 40; n--) {
        unsigned most = gen_atom(g, depth);
        unsigned r = pick(g, 10);
        unsigned k = r < 6 ? 0 : r < 9 ? 1 : 2;
        for (k = k < most ? k : most; k > 0; k--)
            put(g, ops[pick(g, COUNT(ops))]);
    }
}

static void gen_alt(gen *g, unsigned depth)
{
    gen_branch(g, depth);
    for (unsigned k = pick(g, 3) == 0 ? 1 + pick(g, 2) : 0; k > 0; k--) {
        put(g, "|");
        gen_branch(g, depth);
    }
}

static const char *gen_pattern(gen *g)
{
    g->n = 0;
    g->buf[0] = '\0';
    gen_alt(g, 0);
    return g->buf;
}

/* A word of 0 to 12 letters. */
static void gen_word(gen *g, char *word, size_t size)
{
    size_t len = tu_rand_below(&g->rng, 13), n = 0;
    for (size_t i = 0; i < len; i++) {
        const char *l = g->a->letters[pick(g, g->a->nletters)];
        size_t k = strlen(l);
        cr_assert_lt(n + k, size);
        memcpy(word + n, l, k);
        n += k;
    }
    word[n] = '\0';
}

#define PATTERNS 3000
#define WORDS 120

/* Compiles PATTERNS generated patterns with soren (prefix before each) and
 * with regcomp (cflags), and runs both on WORDS generated words each. */
static void agree(const alphabet *a, uint64_t seed, const char *prefix, int cflags)
{
    gen g = {.rng = seed, .a = a};
    unsigned long matches = 0, misses = 0;
    for (int i = 0; i < PATTERNS; i++) {
        const char *pattern = gen_pattern(&g);
        char flagged[sizeof g.buf + 16];
        snprintf(flagged, sizeof flagged, "%s%s", prefix, pattern);
        regex_t re;
        int rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB | cflags);
        cr_assert_eq(rc, 0, "regcomp refused generated pattern \"%s\"", visible(pattern));
        soren_dfa *dfa = compile(flagged);
        for (int j = 0; j < WORDS; j++) {
            char word[64];
            gen_word(&g, word, sizeof word);
            int want = regexec(&re, word, 0, NULL, 0) == 0;
            int got = search(dfa, word);
            if (got != want) {
                char shown[256];
                snprintf(shown, sizeof shown, "%s", visible(word));
                cr_assert_fail("pattern \"%s\" on word \"%s\": soren %d, regexec %d",
                               visible(flagged), shown, got, want);
            }
            if (got)
                matches++;
            else
                misses++;
        }
        regfree(&re);
        free(dfa);
    }
    unsigned long total = (unsigned long)PATTERNS * WORDS;
    cr_assert_gt(matches, total / 10, "only %lu matches in %lu", matches, total);
    cr_assert_gt(misses, total / 10, "only %lu misses in %lu", misses, total);
}

Test(regex, agrees_with_regexec)
{
    cr_assert_not_null(setlocale(LC_ALL, "C"));
    agree(&bytes_alphabet, 20240611, "(?-u)", 0);
}

Test(regex, agrees_with_regexec_ignoring_case)
{
    cr_assert_not_null(setlocale(LC_ALL, "C"));
    agree(&bytes_alphabet, 20261126, "(?i-u)", REG_ICASE);
}

static void utf8_locale(void)
{
    if (!setlocale(LC_ALL, "C.UTF-8"))
        cr_skip_test("the C.UTF-8 locale is missing: UTF-8 patterns are not compared");
}

Test(regex, agrees_with_regexec_in_utf8)
{
    utf8_locale();
    agree(&utf8_alphabet, 20261127, "", 0);
}

Test(regex, agrees_with_regexec_in_utf8_ignoring_case)
{
    utf8_locale();
    agree(&utf8_alphabet, 20261128, "(?i)", REG_ICASE);
}

/* ---- Hand-written cases --------------------------------------------------- */

typedef struct match_case {
    const char *pattern, *word;
    int want;
} match_case;

static void check_cases(const match_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        soren_dfa *dfa = compile(cases[i].pattern);
        char shown[64];
        snprintf(shown, sizeof shown, "%s", visible(cases[i].word));
        cr_expect_eq(search(dfa, cases[i].word), cases[i].want, "pattern \"%s\" on \"%s\"",
                     visible(cases[i].pattern), shown);
        free(dfa);
    }
}

Test(regex, anchors)
{
    static const match_case cases[] = {
        {"^abc", "abcd", 1},  {"^abc", "xabc", 0}, {"abc$", "xabc", 1},  {"abc$", "abcx", 0},
        {"^a|b$", "ax", 1},   {"^a|b$", "xb", 1},  {"^a|b$", "ba", 0},   {"^$", "", 1},
        {"^$", "a", 0},       {"a^b", "ab", 0},    {"a^b", "a^b", 0},    {"a$b", "ab", 0},
        {"^", "", 1},         {"$", "xyz", 1},     {"^^a", "a", 1},      {"a$$", "a", 1},
        {"$^", "", 1},        {"$^", "a", 0},      {"(^|x)a", "a", 1},   {"(^|x)a", "ba", 0},
        {"(^|x)a", "bxa", 1}, {"x*^a", "a", 1},    {"(^.)+\\[", "c{c)c[", 0},
        {"(^.)+\\[", "c[", 1}, {"(a|^)*b", "cb", 1}, {"(^a)+b", "aab", 0}, {"(a$)*", "", 1},
        {"](a^.+)?+c", "]abc", 0}, {"](a^.+)?+c", "]c", 1},    {"^a*$", "aaa", 1},   {"^a*$", "aab", 0},
        {"^.", "", 0},        {".$", "", 0},       {"^[^a]", "", 0},     {"[^a]$", "a", 0},
        {"(a|$)b", "ab", 1},  {"(a|$)b", "b", 0},  {"(a|$)c", "bc", 0},  {"^(ab)+$", "abab", 1},
        {"^(ab)+$", "aba", 0},
    };
    check_cases(cases, sizeof cases / sizeof cases[0]);
}

Test(regex, brackets)
{
    static const match_case cases[] = {
        {"[a-c]", "xbx", 1},    {"[a-c]", "xdx", 0},    {"[^a]", "a", 0},
        {"[^a]", "ab", 1},      {"[^a]", "", 0},        {"[]a]", "]", 1},
        {"[]a]", "a", 1},       {"[]a]", "b", 0},       {"[^]a]", "]a", 0},
        {"[^]a]", "]ab", 1},    {"[a-]", "-", 1},       {"[a-]", "b", 0},
        {"[-a]", "-", 1},       {"[^-a]", "-a", 0},     {"[a-c-]", "-", 1},
        {"[\\\\]", "\\", 1},    {"[\\\\]", "]", 0},     {"[\\\\n]", "n", 1},
        {"[\\\\n]", "\\", 1},   {"[\\\\n]", "\n", 0},    {"[^\\\\]", "\\", 0},
        {"[.*+?(|)]", "|", 1},  {"[.*+?(|)]", "a", 0},  {"[[]", "[", 1},
        {"[]-a]", "^", 1},      {"[!--]", ",", 1},      {"[--/]", ".", 1},
        {"[a-a]", "a", 1},      {"[\x01-\x1f]", "\t", 1}, {"(?-u)[^\x01-\xff]", "a", 0},
    };
    check_cases(cases, sizeof cases / sizeof cases[0]);
}

Test(regex, escapes_and_literals)
{
    static const match_case cases[] = {
        {"a\\.b", "a.b", 1}, {"a\\.b", "axb", 0},  {"\\*", "*", 1},     {"\\\\", "\\", 1},
        {"\\(\\)", "()", 1}, {"\\[a\\]", "[a]", 1}, {"\\{", "{", 1},     {"}", "}", 1},
        {"a)", "a)", 1},     {"a)", "a", 0},       {"(a))", "a)", 1},   {"]", "]", 1},
        {"\\|", "|", 1},     {"a\\|b", "a", 0},    {"\\^a", "^a", 1},   {"\\$", "$", 1},
        {"\\-", "-", 1},     {"\\ ", " ", 1},      {"(?-u)\\\x80", "\x80", 1},
        {"\\\xc3\xa9", "\xc3\xa9", 1}, {"a{", "a{", 1},     {"a{", "a", 0},      {"a{1", "a{1", 1},
        {"a{1,2", "a{1,2", 1}, {"a{x}", "a{x}", 1}, {"a{1a}", "a{1a}", 1}, {"a{}", "a{}", 1},
        {"{", "{", 1},       {"a{ 1}", "a{ 1}", 1}, {"x{-1}", "x{-1}", 1},
    };
    check_cases(cases, sizeof cases / sizeof cases[0]);
}

Test(regex, alternation_and_grouping)
{
    static const match_case cases[] = {
        {"cat|dog", "hotdog", 1}, {"cat|dog", "cow", 0},     {"a(b|c)d", "acd", 1},
        {"a(b|c)d", "aed", 0},    {"(ab)*c", "c", 1},       {"x(ab)+y", "xy", 0},
        {"x(ab)+y", "xababy", 1}, {"x(ab)?y", "xy", 1},     {"((a|b)c)+$", "acbc", 1},
        {"", "", 1},              {"", "anything", 1},      {"()", "", 1},
        {"a|", "zzz", 1},         {"|a", "", 1},            {"a||b", "c", 1},
        {"(|a)x", "x", 1},        {"(a|)x", "zx", 1},       {"*a", "a", 1},
        {"*a", "b", 0},           {"+a", "xa", 1},          {"(*a)", "a", 1},
        {"a|*b", "b", 1},         {"a**", "", 1},           {"a+?", "", 1},
        {"xa+*y", "xy", 1},       {"x(a?)+y", "xy", 1},     {"^*", "", 1},
        {"a^*b", "ab", 1},        {"a$?b", "ab", 1},        {"(+)", "", 1},
        {"x.y", "x\ny", 1},       {"x.y", "xy", 0},         {"a$.", "a\nb", 0},
        {".^b", "a\nb", 0},
    };
    check_cases(cases, sizeof cases / sizeof cases[0]);
}

Test(regex, high_bytes)
{
    static const match_case cases[] = {
        {"\xc3\xa9t\xc3\xa9", "l'\xc3\xa9t\xc3\xa9", 1},
        {"\xc3\xa9", "e", 0},
        {"(?-u)^\xff$", "\xff", 1},
        {"(?-u)[\x80-\xff]", "abc\x80", 1},
        {"(?-u)[\x80-\xff]", "abc\x7f", 0},
        {"(?-u)[^\x80-\xff]", "\x80\xff", 0},
        {"(?-u)^.$", "\xfe", 1},
        {"(?-u)^..$", "\xc3\xa9", 1},
        {"(?-u)^.$", "\xc3\xa9", 0},
        {"(?-u)\x80+$", "a\x80\x80", 1},
        {"(?-u)[\xc3\xa9]", "\xc3", 1},
        {"(?-u)^[^a]$", "\xff", 1},
    };
    check_cases(cases, sizeof cases / sizeof cases[0]);
}

/* UTF-8 mode: '.', brackets and literals are whole characters; a byte of
 * invalid UTF-8 in the subject matches nothing, as in GNU grep. */
Test(regex, utf8_characters)
{
    static const match_case cases[] = {
        {"^.$", "\xc3\xa9", 1},              /* é is one character */
        {"^..$", "\xc3\xa9", 0},
        {"^.$", "\xe6\x97\xa5", 1},          /* 日 */
        {"^.$", "\xf0\x9d\x84\x9e", 1},      /* U+1D11E */
        {"^.{3}$", "a\xc3\xa9\xe6\x97\xa5", 1},
        {"^[\xc3\xa9\xc3\xa8]$", "\xc3\xa8", 1},
        {"^[\xc3\xa9\xc3\xa8]$", "\xc3\xa9", 1},
        {"[\xc3\xa9\xc3\xa8]", "\xc3\xaa", 0},      /* ê shares é's first byte */
        {"^[^\xc3\xa9]$", "\xc3\xa8", 1},
        {"^[^\xc3\xa9]$", "\xc3\xa9", 0},
        {"^[^a]$", "\xe6\x97\xa5", 1},
        {"^[\xc3\xa0-\xc3\xbf]+$", "\xc3\xa9\xc3\xa0\xc3\xbf", 1},
        {"^[\xc3\xa0-\xc3\xbf]+$", "\xc3\xa9\xc3\x9f", 0},  /* ß is U+00DF */
        {"[\xe2\x82\xac-\xe6\x97\xa5]", "x\xe4\xb8\x80", 1}, /* 一 U+4E00 */
        {"[\xe2\x82\xac-\xe6\x97\xa5]", "x\xe6\x97\xa6", 0}, /* U+65E6, past 日 */
        {"\xc3\xa9+", "\xc3\xa9\xc3\xa9", 1},
        {"^\xc3\xa9+$", "\xc3\xa9\xa9", 0},  /* '+' repeats the character, not its last byte */
        /* Invalid bytes: no '.', no [^...], but the valid text around them matches. */
        {"^.$", "\xff", 0},
        {"^.$", "\xc3", 0},                  /* truncated */
        {"^.$", "\xc0\xa9", 0},              /* overlong */
        {"^.$", "\xed\xa0\x80", 0},          /* a surrogate */
        {"^.$", "\xf4\x90\x80\x80", 0},      /* past U+10FFFF */
        {"^.$", "\xa9", 0},                  /* a lone continuation byte */
        {"^[^a]$", "\xff", 0},
        {"a.b", "a\xff" "b", 0},
        {"a", "\xff" "a\xff", 1},
        {"^a", "\xff" "a", 0},
        {"\xc3\xa9", "\xe2\xc3\xa9", 1},     /* after a truncated sequence */
        {"^..$", "\xe2\xc3\xa9", 0},
        {".", "\xff", 0},
        {".", "\xff\xc3\xa9", 1},
    };
    check_cases(cases, sizeof cases / sizeof cases[0]);
}

/* Writes c as UTF-8: the test's own encoder, so that a mistake in the
 * compiler's cannot hide in both. */
static size_t utf8_put(uint32_t c, char *out)
{
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xc0 | c >> 6);
        out[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xe0 | c >> 12);
        out[1] = (char)(0x80 | (c >> 6 & 0x3f));
        out[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | c >> 18);
    out[1] = (char)(0x80 | (c >> 12 & 0x3f));
    out[2] = (char)(0x80 | (c >> 6 & 0x3f));
    out[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/* A random code point, most often near a boundary of UTF-8's encoding. */
static uint32_t some_code_point(uint64_t *rng)
{
    static const uint32_t edges[] = {0x80, 0x800, 0x1000, 0xd800, 0xe000, 0x10000, 0x40000,
                                     0x100000, 0x110000};
    uint32_t c;
    do {
        if (tu_rand_below(rng, 2))
            c = (uint32_t)tu_rand_below(rng, 0x110000);
        else
            c = edges[tu_rand_below(rng, COUNT(edges))] - 2 + (uint32_t)tu_rand_below(rng, 4);
    } while (c == 0 || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff));
    return c;
}

/* Ranges of code points against the code points themselves: "^[lo-hi]$"
 * and "^[^lo-hi]$" on characters around and inside the range, and '.' on
 * every character. */
Test(regex, utf8_ranges)
{
    uint64_t rng = 20261129;
    for (int i = 0; i < 300; i++) {
        uint32_t lo = some_code_point(&rng), hi = some_code_point(&rng);
        if (lo > hi) {
            uint32_t t = lo;
            lo = hi;
            hi = t;
        }
        char pattern[32], negated[40], word[8];
        size_t n = 0;
        n += (size_t)sprintf(pattern, "^[");
        n += utf8_put(lo, pattern + n);
        pattern[n++] = '-';
        n += utf8_put(hi, pattern + n);
        strcpy(pattern + n, "]$");
        snprintf(negated, sizeof negated, "^[^%s", pattern + 2);
        soren_dfa *in = compile(pattern), *out = compile(negated);
        for (int j = 0; j < 200; j++) {
            uint32_t c = j < 4 ? (j < 2 ? lo + (uint32_t)j - 1 : hi + (uint32_t)j - 2)
                               : some_code_point(&rng);
            if (c == 0 || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
                continue;
            word[utf8_put(c, word)] = '\0';
            int want = c >= lo && c <= hi;
            cr_assert_eq(search(in, word), want, "U+%04X in [U+%04X-U+%04X]", c, lo, hi);
            cr_assert_eq(search(out, word), !want, "U+%04X in [^U+%04X-U+%04X]", c, lo, hi);
        }
        free(in);
        free(out);
    }
    soren_dfa *any = compile("^.$");
    char word[8];
    for (uint32_t c = 1; c <= 0x10ffff; c++) {
        word[utf8_put(c, word)] = '\0';
        cr_assert_eq(search(any, word), c < 0xd800 || c > 0xdfff, "U+%04X", c);
    }
    free(any);
}

Test(regex, intervals)
{
    static const match_case cases[] = {
        {"^a{3}$", "aaa", 1},      {"^a{3}$", "aa", 0},         {"^a{3}$", "aaaa", 0},
        {"^a{2,}$", "aa", 1},      {"^a{2,}$", "aaaaaaa", 1},   {"^a{2,}$", "a", 0},
        {"^a{,2}$", "", 1},        {"^a{,2}$", "aa", 1},        {"^a{,2}$", "aaa", 0},
        {"^a{1,3}$", "aaa", 1},    {"^a{1,3}$", "aaaa", 0},     {"^a{1,3}$", "", 0},
        {"^a{0}$", "", 1},         {"^a{0}b$", "b", 1},         {"^a{0,0}$", "a", 0},
        {"^a{,}$", "aaaa", 1},     {"^(ab){2}$", "abab", 1},    {"^(ab){2}$", "ab", 0},
        {"^(a|bc){2,3}$", "bcabc", 1}, {"^(a|bc){2,3}$", "abcbca", 0},
        {"^a{2}{3}$", "aaaaaa", 1}, {"^a{2}{3}$", "aaaaa", 0},  {"^a*{2}$", "aaa", 1},
        {"^(a{1,2}){2}$", "aaa", 1}, {"^x{255}$", NULL, 1},     {"{2}a", "a", 1},
        {"^[[:digit:]]{4}-[[:digit:]]{2}$", "2026-11", 1},
        {"^[[:digit:]]{4}-[[:digit:]]{2}$", "226-11", 0},
        {"^.{2}$", "\xc3\xa9\xc3\xa8", 1},
    };
    for (size_t i = 0; i < COUNT(cases); i++) {
        char word[300];
        const char *w = cases[i].word;
        if (!w) { /* 255 x's */
            memset(word, 'x', 255);
            word[255] = '\0';
            w = word;
        }
        soren_dfa *dfa = compile(cases[i].pattern);
        cr_expect_eq(search(dfa, w), cases[i].want, "pattern \"%s\" on \"%s\"",
                     visible(cases[i].pattern), w);
        if (!cases[i].word) {
            word[254] = '\0';
            cr_expect(!search(dfa, word), "pattern \"%s\" on 254 x's", cases[i].pattern);
        }
        free(dfa);
    }
}

Test(regex, classes)
{
    static const match_case cases[] = {
        {"^[[:alpha:]]+$", "Abc", 1},   {"^[[:alpha:]]+$", "ab1", 0},
        {"^[[:digit:]]$", "7", 1},      {"^[[:digit:]]$", "a", 0},
        {"^[[:alnum:]]+$", "a1B", 1},   {"^[[:alnum:]]+$", "a_1", 0},
        {"[[:space:]]", "a\tb", 1},     {"[[:space:]]", "a\vb", 1},   {"[[:space:]]", "ab", 0},
        {"^[[:upper:]]+$", "ABC", 1},   {"^[[:upper:]]+$", "AbC", 0},
        {"^[[:lower:]]+$", "abc", 1},   {"^[[:lower:]]+$", "aBc", 0},
        {"^[[:punct:]]+$", "!-/:@[`{~", 1}, {"^[[:punct:]]+$", "a", 0},
        {"^[[:xdigit:]]+$", "0fA9", 1}, {"^[[:xdigit:]]+$", "0g", 0},
        {"^[[:blank:]]$", " ", 1},      {"^[[:blank:]]$", "\n", 0},
        {"^[[:cntrl:]]$", "\x7f", 1},   {"^[[:cntrl:]]$", " ", 0},
        {"^[[:print:]]+$", " ~", 1},    {"^[[:print:]]$", "\x7f", 0},
        {"^[[:graph:]]+$", "!~", 1},    {"^[[:graph:]]$", " ", 0},
        {"^[^[:alpha:]]$", "1", 1},     {"^[^[:alpha:]]$", "a", 0},
        {"^[[:digit:]a-f]+$", "12ef", 1}, {"^[x[:digit:]-]+$", "x-1", 1},
        {"^[[:alpha:][:digit:]]+$", "a1", 1}, {"^[]x[:digit:]]+$", "]1x", 1},
        /* ASCII only, as in the C locale: é is no letter, but is a character. */
        {"[[:alpha:]]", "\xc3\xa9", 0}, {"^[^[:alpha:]]$", "\xc3\xa9", 1},
        {"^[[:print:]]$", "\xc3\xa9", 0}, {"(?-u)^[^[:alpha:]]$", "\xc3", 1},
        {"(?i)^[[:upper:]]+$", "aB", 1}, {"(?i)^[[:lower:]]+$", "AB", 1},
    };
    check_cases(cases, COUNT(cases));
}

Test(regex, ignoring_case)
{
    static const match_case cases[] = {
        {"(?i)abc", "xAbCx", 1},       {"(?i)ABC", "abc", 1},        {"(?i)^a$", "b", 0},
        {"(?i)[a-c]+", "BCA", 1},      {"(?i)^[^a]$", "A", 0},       {"(?i)^[^a]$", "b", 1},
        {"(?i)\xc3\xa9", "\xc3\x89", 1},       /* é matches É */
        {"(?i)\xc3\x89", "\xc3\xa9", 1},
        {"(?i)\xc3\xbf", "\xc5\xb8", 1},       /* ÿ matches Ÿ */
        {"(?i)^[\xc3\xa0-\xc3\xbe]$", "\xc3\x80", 1},
        {"(?i)^[\xc3\xa0-\xc3\xbe]$", "\xc3\x97", 0},  /* × is no letter */
        {"(?i)\xce\xb1", "\xce\x91", 0},       /* Greek is not folded */
        {"(?i-u)\xc3\xa9", "\xc3\x89", 0},     /* bytes fold ASCII only */
        {"(?i-u)^A.$", "a\xc3", 1},
        {"(?-i)a", "A", 0},            {"(?iu)a", "A", 1},           {"(?i)1", "1", 1},
        {"(?i)[[:punct:]]", "!", 1},   {"(?i)^[Z-a]+$", "z", 1},     {"(?i)^[Z-a]+$", "_A", 1},
    };
    check_cases(cases, COUNT(cases));
}

/* Minimisation leaves the states a hand count gives: the search states for
 * the prefixes read so far, plus the accepting state. */
Test(regex, state_counts)
{
    static const struct {
        const char *pattern;
        uint32_t states;
    } cases[] = {
        {"", 1}, {"a", 2}, {"a|b", 2}, {"the", 4}, {"^th", 4}, {"ing$", 5}, {"a^b", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        soren_dfa *dfa = compile(cases[i].pattern);
        cr_expect_eq(dfa->state_count, cases[i].states, "pattern \"%s\": %u states",
                     cases[i].pattern, dfa->state_count);
        free(dfa);
    }
}

/* ---- Errors --------------------------------------------------------------- */

Test(regex, syntax_errors)
{
    static const struct {
        const char *pattern, *text;
    } cases[] = {
        {"ab(c", "invalid pattern \"ab(c\": unclosed '(' at position 2"},
        {"(a(b)", "invalid pattern \"(a(b)\": unclosed '(' at position 0"},
        {"a[bc", "invalid pattern \"a[bc\": unclosed '[' at position 1"},
        {"[]", "invalid pattern \"[]\": unclosed '[' at position 0"},
        {"[^]", "invalid pattern \"[^]\": unclosed '[' at position 0"},
        {"x[", "invalid pattern \"x[\": unclosed '[' at position 1"},
        {"ab\\", "invalid pattern \"ab\\\": trailing '\\' at position 2"},
        {"[z-a]", "invalid pattern \"[z-a]\": range 'z-a' is out of order at position 1"},
        {"[a--]", "invalid pattern \"[a--]\": range 'a--' is out of order at position 1"},
        {"[a-c-e]", "invalid pattern \"[a-c-e]\": '-' after a range must come last at position 4"},
        {"a{2,1}", "invalid pattern \"a{2,1}\": interval {2,1} has its minimum above its maximum "
         "at position 1"},
        {"a{256}", "invalid pattern \"a{256}\": interval bound 256 is over the limit of 255 at "
         "position 1"},
        {"a{1,99999999999}", "invalid pattern \"a{1,99999999999}\": interval bound past "
         "100000000 is over the limit of 255 at position 1"},
        {"a{300,}", "invalid pattern \"a{300,}\": interval bound 300 is over the limit of 255 "
         "at position 1"},
        {"[[:alpha]", "invalid pattern \"[[:alpha]\": unclosed '[:' at position 1"},
        {"[[:alpha:]", "invalid pattern \"[[:alpha:]\": unclosed '[' at position 0"},
        {"[[:word:]]", "invalid pattern \"[[:word:]]\": unknown character class 'word' (the "
         "classes: alpha digit alnum upper lower space blank punct print graph cntrl xdigit) at "
         "position 1"},
        {"[[:alpha:]-z]", "invalid pattern \"[[:alpha:]-z]\": a character class cannot start a "
         "range at position 10"},
        {"[a-[:alpha:]]", "invalid pattern \"[a-[:alpha:]]\": a range cannot end with a class "
         "at position 3"},
        {"[\\t]", "invalid pattern \"[\\t]\": '\\t' in a bracket expression is ambiguous "
         "(POSIX reads '\\' there as itself): write a backslash as \\\\ at position 1"},
        {"[\\]", "invalid pattern \"[\\]\": '\\]' in a bracket expression is ambiguous "
         "(POSIX reads '\\' there as itself): write a backslash as \\\\ at position 1"},
        {"[a\\", "invalid pattern \"[a\\\": unclosed '[' at position 0"},
        {"[\\\x01]", "invalid pattern \"[\\\\\\u0001]\": '\\' in a bracket expression is "
         "ambiguous (POSIX reads it as itself): write a backslash as \\\\ at position 1"},
        {"(?x)a", "invalid pattern \"(?x)a\": unknown flag 'x' (the flags: i ignores case, -u "
         "matches bytes instead of UTF-8 characters) at position 2"},
        {"(?i", "invalid pattern \"(?i\": unclosed '(?' at position 0"},
        {"(?)", "invalid pattern \"(?)\": '(?' names no flag at position 0"},
        {"a(?i)", "invalid pattern \"a(?i)\": '(?' sets flags, and only at the start of the "
         "pattern at position 1"},
        {"\xff", "invalid pattern \"\xff\": byte 0xff is not valid UTF-8 (start the pattern "
         "with (?-u) to match bytes) at position 0"},
        {"a\xc3", "invalid pattern \"a\xc3\": byte 0xc3 is not valid UTF-8 (start the pattern "
         "with (?-u) to match bytes) at position 1"},
        {"[\xed\xa0\x80]", "invalid pattern \"[\xed\xa0\x80]\": byte 0xed is not valid UTF-8 "
         "(start the pattern with (?-u) to match bytes) at position 1"},
        {"[\xc3\xa9-a]", "invalid pattern \"[\xc3\xa9-a]\": range '\xc3\xa9" "-a' is out of "
         "order at position 1"},
        {"[a[.-.]]",
         "invalid pattern \"[a[.-.]]\": unsupported '[.' in a bracket expression at position 2"},
        {"[a-[=a=]]",
         "invalid pattern \"[a-[=a=]]\": unsupported '[=' in a bracket expression at position 3"},
        {"\\d+", "invalid pattern \"\\d+\": unsupported escape '\\d' at position 0"},
        {"(a)\\1", "invalid pattern \"(a)\\1\": unsupported escape '\\1' at position 3"},
        {"\\<the", "invalid pattern \"\\<the\": unsupported escape '\\<' at position 0"},
        {"a\n(", "invalid pattern \"a\\n(\": unclosed '(' at position 2"},
        {"\"\x1b[\\", "invalid pattern \"\\\"\\u001b[\\\\\": unclosed '[' at position 2"},
        {"[\x02-\x01]",
         "invalid pattern \"[\\u0002-\\u0001]\": range '\\u0002-\\u0001' is out of order at "
         "position 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error(cases[i].pattern, SOREN_EUSAGE, cases[i].text);
}

static char *nested(size_t depth)
{
    char *p = malloc(2 * depth + 1);
    cr_assert_not_null(p);
    memset(p, '(', depth);
    memset(p + depth, ')', depth);
    p[2 * depth] = '\0';
    return p;
}

Test(regex, deep_nesting_is_refused)
{
    char *ok = nested(1000), *deep = nested(1001);
    free(compile(ok));
    soren_dfa *dfa = NULL;
    size_t size = 0;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_regex_compile(deep, &dfa, &size, &err), SOREN_EUSAGE);
    cr_assert(strstr(err.text, "groups nested more than 1000 deep at position 1000"), "%s",
              err.text);
    cr_assert(strstr(err.text, "((((...\""), "long patterns are cut: %s", err.text);
    free(ok);
    free(deep);
}

Test(regex, null_error_is_allowed)
{
    soren_dfa *dfa = NULL;
    size_t size = 0;
    cr_assert_eq(soren_regex_compile("(", &dfa, &size, NULL), SOREN_EUSAGE);
    cr_assert_null(dfa);
}

/* "(a|b)*a", n copies of "(a|b)", then tail. */
static char *lookback_pattern(int n, const char *tail)
{
    char *p = malloc(9 + 5 * (size_t)n);
    cr_assert_not_null(p);
    strcpy(p, "(a|b)*a");
    for (int i = 0; i < n; i++)
        strcat(p, "(a|b)");
    strcat(p, tail);
    return p;
}

/* Anchored at the end, the DFA must remember the last n+1 letters: about
 * 2^(n+1) states. */
Test(regex, state_limit)
{
    char *small = lookback_pattern(8, "$");
    soren_dfa *dfa = compile(small);
    cr_expect_gt(dfa->state_count, 512u, "%u states", dfa->state_count);
    cr_expect(search(dfa, "xxabbbbbbbb"));
    cr_expect(!search(dfa, "xxabbbbbbbbb"));
    free(dfa);
    free(small);

    char *big = lookback_pattern(14, "$");
    char text[1024];
    snprintf(text, sizeof text,
             "pattern \"%s\" is too complex: its automaton needs more than 4096 states", big);
    expect_error(big, SOREN_EUSAGE, text);
    free(big);
}

/* Unanchored, the same pattern only needs the distance to the oldest 'a'
 * in the current run of letters, though its subset construction makes
 * 2^15 states: minimisation must see it through. */
Test(regex, minimisation_rescues_unanchored_lookback)
{
    char *p = lookback_pattern(14, "");
    soren_dfa *dfa = compile(p);
    cr_expect_eq(dfa->state_count, 16u, "%u states", dfa->state_count);
    cr_expect(search(dfa, "xxabbbbbbbbbbbbbbx"));
    cr_expect(!search(dfa, "xxabbbbbbbbbbbbbx"));
    free(dfa);
    free(p);
}

/* A pattern whose subset construction outgrows the build limit. */
Test(regex, build_limit)
{
    char *p = lookback_pattern(18, "");
    char text[1024];
    snprintf(text, sizeof text,
             "pattern \"%s\" is too complex: building its automaton needs more than %u states",
             p, (1u << 20) / 5);
    expect_error(p, SOREN_EUSAGE, text);
    free(p);
}

/* Intervals copy what they repeat; the NFA's size is bounded. */
Test(regex, repetition_limit)
{
    free(compile("^(x{255}){3}$"));
    free(compile("^.{255}$"));
    expect_error("(a{255}){255}", SOREN_EUSAGE,
                 "pattern \"(a{255}){255}\" is too complex: it needs more than 65536 NFA states");
    expect_error("((a{64}){64}){64}", SOREN_EUSAGE,
                 "pattern \"((a{64}){64}){64}\" is too complex: it needs more than 65536 NFA "
                 "states");
}
