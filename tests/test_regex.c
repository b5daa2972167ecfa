/*
 * test_regex.c - soren_regex_compile and soren_dfa_search.
 *
 * The reference is glibc's regexec(REG_EXTENDED) in the C locale: random
 * patterns from the part of the grammar where glibc and this compiler agree
 * (no leading '*', no unmatched ')', no operator after an anchor or after a
 * group holding one, no newline in the words: glibc refuses or mismatches
 * those), matched against random words.  Every compiled DFA is also checked
 * for layout and minimality.  Hand-written cases cover what the generator
 * leaves out, every syntax error, and the state limits.
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

typedef struct gen {
    uint64_t rng;
    char buf[512];
    size_t n;
    unsigned anchors; /* ^ and $ written so far */
} gen;

static unsigned pick(gen *g, unsigned n)
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

/* Atoms whose meaning glibc shares; "abc" dominate so that matches are
 * common, '}' ']' '-' are literal outside brackets in both. */
static const char *const literals[] = {
    "a", "b", "c", "a", "b", "c", "a", "b", "c", "d", "\\.", "\\*", "\\(", "\\)",
    "\\[", "\\\\", "\\|", "\\+", "\\?", "\\^", "\\$", "\\{", "\\-", "}", "]", "-",
    "\x80", "\xe9", "\xff",
};

/* Bracket items that cannot run into each other as ranges. */
static const char *const items[] = {
    "a", "b", "c", "a-c", "a-b", "b-c", "\\", ".", "*", "x", "\x80", "\xe9-\xff", "(", "|",
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void gen_bracket(gen *g)
{
    put(g, pick(g, 3) ? "[" : "[^");
    unsigned lead = pick(g, 6);
    if (lead == 0)
        put(g, "]");
    else if (lead == 1)
        put(g, "-");
    for (unsigned k = 1 + pick(g, 3); k > 0; k--)
        put(g, items[pick(g, COUNT(items))]);
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
        put(g, literals[pick(g, COUNT(literals))]);
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
    static const char *const ops[] = {"*", "+", "?"};
    unsigned n = pick(g, 8) == 0 ? 0 : 1 + pick(g, 4);
    for (; n > 0 && g->n < 40; n--) {
        unsigned most = gen_atom(g, depth);
        unsigned r = pick(g, 10);
        unsigned k = r < 6 ? 0 : r < 9 ? 1 : 2;
        for (k = k < most ? k : most; k > 0; k--)
            put(g, ops[pick(g, 3)]);
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

/* Words over "abc" and a few bytes the patterns name, 0 to 12 bytes.  No
 * newline: glibc lets a ^ or $ inside a pattern match next to one even
 * without REG_NEWLINE ("a$." matches "a\nb"), POSIX and soren do not. */
static void gen_word(gen *g, char *word)
{
    static const char alphabet[] = "abcabcabcabcabcd-].\\*()[{}|+?^$x\t\x80\xe9\xff";
    size_t len = tu_rand_below(&g->rng, 13);
    for (size_t i = 0; i < len; i++)
        word[i] = alphabet[tu_rand_below(&g->rng, sizeof alphabet - 1)];
    word[len] = '\0';
}

#define PATTERNS 3000
#define WORDS 120

Test(regex, agrees_with_regexec)
{
    cr_assert_not_null(setlocale(LC_ALL, "C"));
    gen g = {.rng = 20240611};
    unsigned long matches = 0, misses = 0;
    for (int i = 0; i < PATTERNS; i++) {
        const char *pattern = gen_pattern(&g);
        regex_t re;
        int rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB);
        cr_assert_eq(rc, 0, "regcomp refused generated pattern \"%s\"", visible(pattern));
        soren_dfa *dfa = compile(pattern);
        for (int j = 0; j < WORDS; j++) {
            char word[16];
            gen_word(&g, word);
            int want = regexec(&re, word, 0, NULL, 0) == 0;
            int got = search(dfa, word);
            if (got != want) {
                char shown[64];
                snprintf(shown, sizeof shown, "%s", visible(word));
                cr_assert_fail("pattern \"%s\" on word \"%s\": soren %d, regexec %d",
                         visible(pattern), shown, got, want);
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
        {"[\\]", "\\", 1},      {"[\\]", "]", 0},       {"[\\n]", "n", 1},
        {"[.*+?(|)]", "|", 1},  {"[.*+?(|)]", "a", 0},  {"[[]", "[", 1},
        {"[]-a]", "^", 1},      {"[!--]", ",", 1},      {"[--/]", ".", 1},
        {"[a-a]", "a", 1},      {"[\x01-\x1f]", "\t", 1}, {"[^\x01-\xff]", "a", 0},
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
        {"\\-", "-", 1},     {"\\ ", " ", 1},      {"\\\x80", "\x80", 1},
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
        {"^\xff$", "\xff", 1},
        {"[\x80-\xff]", "abc\x80", 1},
        {"[\x80-\xff]", "abc\x7f", 0},
        {"[^\x80-\xff]", "\x80\xff", 0},
        {"^.$", "\xfe", 1},
        {"^..$", "\xc3\xa9", 1},
        {"\x80+$", "a\x80\x80", 1},
    };
    check_cases(cases, sizeof cases / sizeof cases[0]);
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
        {"a{2}", "invalid pattern \"a{2}\": unsupported interval '{' at position 1"},
        {"{", "invalid pattern \"{\": unsupported interval '{' at position 0"},
        {"[[:alpha:]]",
         "invalid pattern \"[[:alpha:]]\": unsupported '[:' in a bracket expression at position 1"},
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
