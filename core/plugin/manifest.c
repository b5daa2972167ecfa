/*
 * manifest.c - parse and validate NAME.json.
 *
 * The rules are those of share/manifest.schema.json (the users' copy); this
 * file enforces them in one pass over jansson's tree, in schema order, and
 * stops at the first error.  Every message has the shape
 *
 *   SOURCE: PATH: expected WHAT, got WHAT-WAS-THERE
 *
 * (or "missing required key", "unknown key", "allowed only when ...") so that
 * `soren-host check` can print it as is and a user can find the spot.
 */
#include "manifest.h"

#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../file.h"
#include "../nearest.h"

#define NAME_MAX_BYTES 64
#define SUMMARY_MAX_BYTES 200
#define LIBRARY_MAX_BYTES 255
#define PARAM_NAME_MAX_BYTES 64
#define SHA256_HEX_DIGITS 64
#define RECORD_SIZE_MAX ((json_int_t)1 << 31)
#define KEY_COUNT_MAX ((json_int_t)UINT32_MAX)
#if JSON_INTEGER_IS_LONG_LONG
#define INTEGER_MAX ((json_int_t)LLONG_MAX)
#else
#define INTEGER_MAX ((json_int_t)LONG_MAX)
#endif

/* A message quotes at most SHOW_BYTES bytes of a string value (a 10 kB
 * summary must not push the path out of the 1 kB error text); escaping can
 * grow each byte to "\u00XX". */
#define SHOW_BYTES 64
#define SHOW_SIZE (SHOW_BYTES * 6 + 8)
/* Paths are at most five levels deep ($.stages[2].key.count_from[3]); only
 * an unknown key's name is unbounded, and it is quoted (so cut) too. */
#define PATH_SIZE (SHOW_SIZE + 64)

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))
#define TRY(expr)                                                                                  \
    do {                                                                                           \
        soren_status try_st_ = (expr);                                                             \
        if (try_st_ != SOREN_OK)                                                                   \
            return try_st_;                                                                        \
    } while (0)

typedef struct parser {
    const char *source; /* names the text in messages */
    soren_error *err;
} parser;

/* One member of an object: its value (NULL when absent) and its path. */
typedef struct field {
    const json_t *value;
    char path[PATH_SIZE];
} field;

typedef struct enum_entry {
    const char *name;
    int value;
} enum_entry;

static const enum_entry input_formats[] = {
    {"lines", SOREN_INPUT_LINES},
    {"fixed", SOREN_INPUT_FIXED},
    {"index", SOREN_INPUT_INDEX},
    {"pairs", SOREN_INPUT_PAIRS},
};

static const enum_entry key_types[] = {
    {"string", SOREN_TYPE_STRING}, {"u32", SOREN_TYPE_U32}, {"u64", SOREN_TYPE_U64},
    {"i64", SOREN_TYPE_I64},       {"f32", SOREN_TYPE_F32}, {"f64", SOREN_TYPE_F64},
    {"index", SOREN_TYPE_INDEX},
};

static const enum_entry value_types[] = {
    {"u32", SOREN_TYPE_U32}, {"u64", SOREN_TYPE_U64}, {"i64", SOREN_TYPE_I64},
    {"f32", SOREN_TYPE_F32}, {"f64", SOREN_TYPE_F64},
};

static const enum_entry combine_ops[] = {
    {"sum", SOREN_COMBINE_SUM},     {"min", SOREN_COMBINE_MIN},
    {"max", SOREN_COMBINE_MAX},     {"count", SOREN_COMBINE_COUNT},
    {"function", SOREN_COMBINE_USER},
};

static const enum_entry reduce_kinds[] = {
    {"combine", SOREN_REDUCE_COMBINE},
    {"function", SOREN_REDUCE_FUNCTION},
};

static const enum_entry output_orders[] = {
    {"key", SOREN_ORDER_KEY},
    {"value_desc", SOREN_ORDER_VALUE_DESC},
    {"value_asc", SOREN_ORDER_VALUE_ASC},
    {"none", SOREN_ORDER_NONE},
};

static const enum_entry param_types[] = {
    {"string", SOREN_PARAM_STRING}, {"u32", SOREN_PARAM_U32}, {"u64", SOREN_PARAM_U64},
    {"i64", SOREN_PARAM_I64},       {"f32", SOREN_PARAM_F32}, {"f64", SOREN_PARAM_F64},
    {"regex", SOREN_PARAM_REGEX},   {"scratch", SOREN_PARAM_SCRATCH},
};

static const char *const top_keys[] = {
    "manifest_version", "name", "version", "summary", "library", "sha256", "input",
    "key",              "value", "combine", "reduce", "output", "params", "stages",
    "iterate",
};
static const char *const input_keys[] = {"format", "record_size", "count", "count_from"};
static const char *const stage_keys[] = {"key", "value", "combine", "reduce"};
static const char *const key_keys[] = {"type", "max_size", "count", "count_from"};
static const char *const value_keys[] = {"type"};
static const char *const output_keys[] = {"order", "limit"};
static const char *const param_keys[] = {"name", "type", "required", "default", "help"};
static const char *const iterate_keys[] = {"param"};

/* ---- Messages ----------------------------------------------------------- */

static soren_status fail(parser *p, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static soren_status fail(parser *p, const char *path, const char *fmt, ...)
{
    char msg[sizeof p->err->text];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return soren_error_set(p->err, SOREN_EMANIFEST, "%s: %s: %s", p->source, path, msg);
}

static soren_status no_memory(parser *p)
{
    return soren_error_set(p->err, SOREN_ENOMEM, "%s: out of memory reading the manifest",
                           p->source);
}

/* s[0 .. len) as a JSON string literal.  Control characters are escaped so
 * that the message stays on one line; a long string is cut at a character
 * boundary and followed by "..." outside the quotes. */
static const char *quote(const char *s, size_t len, char buf[SHOW_SIZE])
{
    size_t shown = len;
    if (shown > SHOW_BYTES) {
        shown = SHOW_BYTES;
        while (shown > 0 && ((unsigned char)s[shown] & 0xC0) == 0x80)
            shown--;
    }
    char *o = buf;
    *o++ = '"';
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        unsigned char next = i + 1 < shown ? (unsigned char)s[i + 1] : 0;
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c == '\n') {
            o = stpcpy(o, "\\n");
        } else if (c == '\t') {
            o = stpcpy(o, "\\t");
        } else if (c == '\r') {
            o = stpcpy(o, "\\r");
        } else if (c < 0x20 || c == 0x7F) {
            o += sprintf(o, "\\u%04x", c);
        } else if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {
            o += sprintf(o, "\\u%04x", next); /* a C1 control, U+0080..U+009F */
            i++;
        } else {
            *o++ = (char)c;
        }
    }
    *o++ = '"';
    if (shown < len)
        o = stpcpy(o, "...");
    *o = '\0';
    return buf;
}

/* What a message says was found: strings quoted, the rest by JSON type. */
static const char *describe(const json_t *v, char buf[SHOW_SIZE])
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return quote(json_string_value(v), json_string_length(v), buf);
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "an unknown value";
}

/* Like describe, but numbers show their value: where an integer is
 * expected, "got 1.5" says more than "got a number". */
static const char *describe_number(const json_t *v, char buf[SHOW_SIZE])
{
    if (json_is_integer(v)) {
        snprintf(buf, SHOW_SIZE, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return buf;
    }
    if (!json_is_real(v))
        return describe(v, buf);
    double d = json_real_value(v);
    if (d > -1e15 && d < 1e15 && d == (double)(long long)d) {
        snprintf(buf, SHOW_SIZE, "%.1f", d); /* 1e3 reads "1000.0", as jansson prints it */
        return buf;
    }
    for (int prec = 1; prec <= 17; prec++) { /* the shortest text that reads back as d */
        snprintf(buf, SHOW_SIZE, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    return buf;
}

/* Like describe, but an array says how many items it has ("3 stages"). */
static const char *describe_array(const json_t *v, const char *items, char buf[SHOW_SIZE])
{
    if (!json_is_array(v))
        return describe(v, buf);
    if (json_array_size(v) == 0)
        return "an empty array";
    snprintf(buf, SHOW_SIZE, "%zu %s", json_array_size(v), items);
    return buf;
}

/* "a, b, c" from an enum table or a key list, for "expected one of ...". */
static const char *join_enum(const enum_entry *e, size_t n, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", e[i].name);
    return buf;
}

static const char *join_keys(const char *const *keys, size_t n, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", keys[i]);
    return buf;
}

/* ---- Paths -------------------------------------------------------------- */

static bool is_lower_or_digit(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* ^[A-Za-z_][A-Za-z0-9_]*$: parameter names, and keys a path shows with '.'. */
static bool is_identifier(const char *s)
{
    if ((!is_alnum(*s) && *s != '_') || is_digit(*s))
        return false;
    for (s++; *s; s++)
        if (!is_alnum(*s) && *s != '_')
            return false;
    return true;
}

/* parent.key, or parent["odd key"] (JSONPath's bracket form) when the key is
 * not an identifier. */
static void path_key(char dst[PATH_SIZE], const char *parent, const char *key)
{
    if (is_identifier(key)) {
        snprintf(dst, PATH_SIZE, "%s.%s", parent, key);
    } else {
        char q[SHOW_SIZE];
        snprintf(dst, PATH_SIZE, "%s[%s]", parent, quote(key, strlen(key), q));
    }
}

/* parent[i], an array's item.  parent is a path built here, a few levels
 * deep: the precision only tells the compiler that the index fits. */
static void path_item(char dst[PATH_SIZE], const char *parent, size_t i)
{
    snprintf(dst, PATH_SIZE, "%.*s[%zu]", PATH_SIZE - 32, parent, i);
}

/* ---- Typed members ------------------------------------------------------ */

static soren_status expect_object(parser *p, const json_t *v, const char *path)
{
    char buf[SHOW_SIZE];
    if (!json_is_object(v))
        return fail(p, path, "expected an object, got %s", describe(v, buf));
    return SOREN_OK;
}

/* Unknown keys are errors: a misspelt optional key would otherwise be
 * ignored without a word. */
static soren_status check_keys(parser *p, const json_t *obj, const char *path,
                               const char *const *keys, size_t n)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        size_t i = 0;
        while (i < n && strcmp(key, keys[i]) != 0)
            i++;
        if (i == n) {
            char at[PATH_SIZE], list[512];
            path_key(at, path, key);
            const char *near = soren__nearest(key, keys, n);
            char hint[96] = "";
            if (near)
                snprintf(hint, sizeof hint, "did you mean \"%s\"? ", near);
            return fail(p, at, "unknown key; %sexpected one of %s", hint,
                        join_keys(keys, n, list, sizeof list));
        }
    }
    return SOREN_OK;
}

static soren_status field_get(parser *p, const json_t *obj, const char *path, const char *key,
                              bool required, field *f)
{
    f->value = json_object_get(obj, key);
    path_key(f->path, path, key);
    if (!f->value && required)
        return fail(p, path, "missing required key \"%s\"", key);
    return SOREN_OK;
}

static soren_status field_string(parser *p, const field *f, const char **out, size_t *len)
{
    char buf[SHOW_SIZE];
    if (!json_is_string(f->value))
        return fail(p, f->path, "expected a string, got %s", describe(f->value, buf));
    *out = json_string_value(f->value);
    if (len)
        *len = json_string_length(f->value);
    return SOREN_OK;
}

static soren_status field_enum(parser *p, const field *f, const enum_entry *e, size_t n, int *out)
{
    if (json_is_string(f->value)) {
        for (size_t i = 0; i < n; i++) {
            if (strcmp(json_string_value(f->value), e[i].name) == 0) {
                *out = e[i].value;
                return SOREN_OK;
            }
        }
    }
    char buf[SHOW_SIZE], list[256];
    return fail(p, f->path, "expected one of %s, got %s", join_enum(e, n, list, sizeof list),
                describe(f->value, buf));
}

/* An integer in [min, max].  json_int_t is signed, so comparing it with the
 * json_int_t bounds cannot overflow; reals are refused, not truncated. */
static soren_status field_integer(parser *p, const field *f, json_int_t min, json_int_t max,
                                  uint64_t *out)
{
    if (json_is_integer(f->value)) {
        json_int_t v = json_integer_value(f->value);
        if (v >= min && v <= max) {
            *out = (uint64_t)v;
            return SOREN_OK;
        }
    }
    char buf[SHOW_SIZE];
    if (max == INTEGER_MAX)
        return fail(p, f->path, "expected an integer of at least %" JSON_INTEGER_FORMAT ", got %s",
                    min, describe_number(f->value, buf));
    return fail(p, f->path,
                "expected an integer from %" JSON_INTEGER_FORMAT " to %" JSON_INTEGER_FORMAT
                ", got %s",
                min, max, describe_number(f->value, buf));
}

static soren_status field_bool(parser *p, const field *f, bool *out)
{
    char buf[SHOW_SIZE];
    if (!json_is_boolean(f->value))
        return fail(p, f->path, "expected true or false, got %s", describe(f->value, buf));
    *out = json_is_true(f->value);
    return SOREN_OK;
}

static soren_status dup_string(parser *p, const char *s, char **out)
{
    *out = strdup(s);
    return *out ? SOREN_OK : no_memory(p);
}

/* ---- String rules ------------------------------------------------------- */

/* ^[a-z0-9][a-z0-9_-]*$: the name doubles as a file name and a command word. */
static bool valid_job_name(const char *s)
{
    if (!is_lower_or_digit(*s))
        return false;
    for (s++; *s; s++)
        if (!is_lower_or_digit(*s) && *s != '_' && *s != '-')
            return false;
    return true;
}

static const char *skip_digits(const char *s)
{
    if (!is_digit(*s))
        return NULL;
    while (is_digit(*s))
        s++;
    return s;
}

/* N.N.N, then optionally "-" or "+" and a non-empty suffix of letters,
 * digits, '.', '-' and '+' (semver's pre-release and build parts). */
static bool valid_version(const char *s)
{
    for (int part = 0; part < 3; part++) {
        if (part > 0 && *s++ != '.')
            return false;
        if (!(s = skip_digits(s)))
            return false;
    }
    if (*s == '\0')
        return true;
    if (*s != '-' && *s != '+')
        return false;
    if (*++s == '\0')
        return false;
    for (; *s; s++)
        if (!is_alnum(*s) && *s != '.' && *s != '-' && *s != '+')
            return false;
    return true;
}

/* C0 controls, DEL, and the C1 controls U+0080..U+009F (UTF-8 C2 80..C2 9F):
 * any of them would break the one-line listings that show the summary. */
static bool has_control(const char *s)
{
    for (const unsigned char *u = (const unsigned char *)s; *u; u++) {
        if (*u < 0x20 || *u == 0x7F)
            return true;
        if (*u == 0xC2 && u[1] >= 0x80 && u[1] <= 0x9F)
            return true;
    }
    return false;
}

/* Whether some '/'-separated component of s is exactly "..". */
static bool has_dotdot(const char *s)
{
    while (*s) {
        const char *end = strchr(s, '/');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        if (n == 2 && s[0] == '.' && s[1] == '.')
            return true;
        if (!end)
            break;
        s = end + 1;
    }
    return false;
}

static bool valid_sha256(const char *s, size_t len)
{
    if (len != SHA256_HEX_DIGITS)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_digit(s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
            return false;
    return true;
}

static soren_status check_length(parser *p, const field *f, size_t len, size_t max)
{
    if (len > max)
        return fail(p, f->path, "expected at most %zu bytes, got %zu", max, len);
    return SOREN_OK;
}

static soren_status check_non_empty(parser *p, const field *f, size_t len)
{
    if (len == 0)
        return fail(p, f->path, "expected a non-empty string, got \"\"");
    return SOREN_OK;
}

/* ---- Sections ----------------------------------------------------------- */

/* Checked before anything else: a manifest for another version may well
 * have keys this one does not know, and the version is the real problem. */
static soren_status parse_manifest_version(parser *p, const json_t *root)
{
    field f;
    TRY(field_get(p, root, "$", "manifest_version", true, &f));
    if (json_is_integer(f.value) && json_integer_value(f.value) == SOREN_MANIFEST_VERSION)
        return SOREN_OK;
    char buf[SHOW_SIZE];
    const char *got = json_is_number(f.value) ? describe_number(f.value, buf) : describe(f.value, buf);
    return fail(p, f.path, "expected %d (this soren-host reads manifest version %d), got %s",
                SOREN_MANIFEST_VERSION, SOREN_MANIFEST_VERSION, got);
}

static soren_status parse_name(parser *p, const json_t *root, soren_manifest *m)
{
    field f;
    const char *s = NULL;
    size_t len = 0;
    char buf[SHOW_SIZE];
    TRY(field_get(p, root, "$", "name", true, &f));
    TRY(field_string(p, &f, &s, &len));
    if (!valid_job_name(s))
        return fail(p, f.path,
                    "expected lowercase letters, digits, '_' and '-', starting with a letter or "
                    "digit, got %s",
                    quote(s, len, buf));
    TRY(check_length(p, &f, len, NAME_MAX_BYTES));
    return dup_string(p, s, &m->name);
}

static soren_status parse_version(parser *p, const json_t *root, soren_manifest *m)
{
    field f;
    const char *s = NULL;
    size_t len = 0;
    char buf[SHOW_SIZE];
    TRY(field_get(p, root, "$", "version", true, &f));
    TRY(field_string(p, &f, &s, &len));
    if (!valid_version(s))
        return fail(p, f.path,
                    "expected a version like 1.2.3, optionally followed by -suffix or +suffix, "
                    "got %s",
                    quote(s, len, buf));
    return dup_string(p, s, &m->version);
}

static soren_status parse_summary(parser *p, const json_t *root, soren_manifest *m)
{
    field f;
    const char *s = NULL;
    size_t len = 0;
    char buf[SHOW_SIZE];
    TRY(field_get(p, root, "$", "summary", true, &f));
    TRY(field_string(p, &f, &s, &len));
    TRY(check_non_empty(p, &f, len));
    if (has_control(s))
        return fail(p, f.path, "expected one line without control characters, got %s",
                    quote(s, len, buf));
    TRY(check_length(p, &f, len, SUMMARY_MAX_BYTES));
    return dup_string(p, s, &m->summary);
}

/* The library is found relative to the manifest's folder and must stay in
 * it: a manifest must not be able to point the host at an arbitrary .so. */
static soren_status parse_library(parser *p, const json_t *root, soren_manifest *m)
{
    field f;
    const char *s = NULL;
    size_t len = 0;
    char buf[SHOW_SIZE];
    TRY(field_get(p, root, "$", "library", true, &f));
    TRY(field_string(p, &f, &s, &len));
    TRY(check_non_empty(p, &f, len));
    TRY(check_length(p, &f, len, LIBRARY_MAX_BYTES));
    if (s[0] == '/')
        return fail(p, f.path, "expected a path relative to the manifest's folder, got %s",
                    quote(s, len, buf));
    if (has_dotdot(s))
        return fail(p, f.path,
                    "expected a path inside the manifest's folder (no \"..\" component), got %s",
                    quote(s, len, buf));
    return dup_string(p, s, &m->library);
}

static soren_status parse_sha256(parser *p, const json_t *root, soren_manifest *m)
{
    field f;
    const char *s = NULL;
    size_t len = 0;
    char buf[SHOW_SIZE];
    TRY(field_get(p, root, "$", "sha256", false, &f));
    if (!f.value)
        return SOREN_OK;
    TRY(field_string(p, &f, &s, &len));
    if (!valid_sha256(s, len))
        return fail(p, f.path, "expected 64 lowercase hexadecimal digits, got %s",
                    quote(s, len, buf));
    return dup_string(p, s, &m->sha256);
}

/* The object at parent.key (parent at path), checked for unknown keys; NULL
 * when optional and absent. */
static soren_status section(parser *p, const json_t *parent, const char *path, const char *key,
                            bool required, const char *const *keys, size_t n, field *f)
{
    TRY(field_get(p, parent, path, key, required, f));
    if (!f->value)
        return SOREN_OK;
    TRY(expect_object(p, f->value, f->path));
    return check_keys(p, f->value, f->path, keys, n);
}

/* section.count_from (section at sec->path: $.input, or a key): 1 to
 * SOREN_MAX_COUNT_FROM parameter names and constants whose product is the
 * count, into out; the names are checked against $.params once they are
 * read (check_count_from).  allowed: whether the section's format or type
 * takes a count (else the message says "allowed only when " + when);
 * has_count: whether the section gives count itself, which count_from
 * would contradict. */
static soren_status parse_count_from(parser *p, const field *sec, bool allowed, const char *when,
                                     bool has_count, soren_count_from *out)
{
    field f;
    char buf[SHOW_SIZE];
    TRY(field_get(p, sec->value, sec->path, "count_from", false, &f));
    if (!f.value)
        return SOREN_OK;
    if (!allowed)
        return fail(p, f.path, "allowed only when %s", when);
    if (has_count)
        return fail(p, f.path, "not allowed together with \"count\": give one or the other");
    size_t n = json_is_array(f.value) ? json_array_size(f.value) : 0;
    if (n == 0 || n > SOREN_MAX_COUNT_FROM)
        return fail(p, f.path, "expected an array of 1 to %d parameter names and constant "
                    "factors, got %s", SOREN_MAX_COUNT_FROM, describe_array(f.value, "items", buf));
    bool named = false;
    for (size_t i = 0; i < n; i++) {
        field item = {json_array_get(f.value, i), ""};
        path_item(item.path, f.path, i);
        out->count = i + 1; /* counted now: soren_manifest_free frees what was filled */
        if (json_is_number(item.value)) {
            /* Within u32, as a key count is: a larger constant would make
             * every count of index keys too large. */
            uint64_t v;
            TRY(field_integer(p, &item, 1, (json_int_t)UINT32_MAX, &v));
            out->constants[i] = (uint32_t)v;
            continue;
        }
        if (!json_is_string(item.value))
            return fail(p, item.path, "expected a parameter's name or a constant factor (an "
                        "integer), got %s", describe(item.value, buf));
        TRY(dup_string(p, json_string_value(item.value), &out->names[i]));
        named = true;
    }
    if (!named)
        return fail(p, f.path, "names no parameter: a count that is a constant is \"count\"");
    return SOREN_OK;
}

/* Every name of the count_from at list_path (what: what it counts, for the
 * message) is an integer parameter. */
static soren_status check_count_from(parser *p, const soren_manifest *m, const char *list_path,
                                     const soren_count_from *cf, const char *what)
{
    char buf[SHOW_SIZE];
    for (size_t i = 0; i < cf->count; i++) {
        const char *name = cf->names[i];
        if (!name)
            continue; /* a constant */
        char path[PATH_SIZE];
        path_item(path, list_path, i);
        int k = soren_manifest_param_index(m, name);
        if (k < 0)
            return fail(p, path, "%s is not a parameter of the job ($.params)",
                        quote(name, strlen(name), buf));
        if (m->params[k].type != SOREN_PARAM_U32 && m->params[k].type != SOREN_PARAM_U64)
            return fail(p, path, "parameter %s counts %s, so it must be of type u32 or u64",
                        quote(name, strlen(name), buf), what);
    }
    return SOREN_OK;
}

static soren_status parse_input(parser *p, const json_t *root, soren_manifest *m)
{
    field in, f;
    int format;
    TRY(section(p, root, "$", "input", true, input_keys, COUNT_OF(input_keys), &in));

    TRY(field_get(p, in.value, in.path, "format", true, &f));
    TRY(field_enum(p, &f, input_formats, COUNT_OF(input_formats), &format));
    if (format == SOREN_INPUT_PAIRS)
        return fail(p, f.path, "\"pairs\" is what stages after the first read ($.stages); "
                    "stage 1 reads lines, fixed or index");
    m->input.format = (soren_input_format)format;

    TRY(field_get(p, in.value, in.path, "record_size", false, &f));
    if (f.value && format != SOREN_INPUT_FIXED)
        return fail(p, f.path, "allowed only when format is \"fixed\"");
    if (!f.value && format == SOREN_INPUT_FIXED)
        return fail(p, in.path, "missing required key \"record_size\" for format \"fixed\"");
    if (f.value)
        TRY(field_integer(p, &f, 1, RECORD_SIZE_MAX, &m->input.record_size));

    /* Optional for index input: the task count may come from parameters
     * (count_from) or from the command line (run --tasks N) instead. */
    TRY(field_get(p, in.value, in.path, "count", false, &f));
    if (f.value && format != SOREN_INPUT_INDEX)
        return fail(p, f.path, "allowed only when format is \"index\"");
    if (f.value)
        TRY(field_integer(p, &f, 1, INTEGER_MAX, &m->input.count));
    return parse_count_from(p, &in, format == SOREN_INPUT_INDEX, "format is \"index\"",
                            m->input.count != 0, &m->input.count_from);
}

static soren_status parse_key(parser *p, const json_t *obj, const char *path,
                              soren_manifest_key *out)
{
    field key, f;
    int type;
    uint64_t v;
    TRY(section(p, obj, path, "key", true, key_keys, COUNT_OF(key_keys), &key));

    TRY(field_get(p, key.value, key.path, "type", true, &f));
    TRY(field_enum(p, &f, key_types, COUNT_OF(key_types), &type));
    out->type = (soren_type)type;

    /* Typed keys have their native size; only string keys choose a bound. */
    out->max_size = (uint32_t)soren_type_size(out->type);
    TRY(field_get(p, key.value, key.path, "max_size", false, &f));
    if (f.value && type != SOREN_TYPE_STRING)
        return fail(p, f.path, "allowed only when type is \"string\"");
    if (type == SOREN_TYPE_STRING) {
        out->max_size = SOREN_KEY_MAX_SIZE_DEFAULT;
        if (f.value) {
            TRY(field_integer(p, &f, 1, SOREN_KEY_MAX_SIZE_LIMIT, &v));
            out->max_size = (uint32_t)v;
        }
    }

    /* Index keys are counted by the manifest (count) or, where the count
     * depends on the job's input, by parameters (count_from). */
    TRY(field_get(p, key.value, key.path, "count", false, &f));
    if (f.value && type != SOREN_TYPE_INDEX)
        return fail(p, f.path, "allowed only when type is \"index\"");
    if (f.value)
        TRY(field_integer(p, &f, 1, KEY_COUNT_MAX, &out->count));
    TRY(parse_count_from(p, &key, type == SOREN_TYPE_INDEX, "type is \"index\"", f.value != NULL,
                         &out->count_from));
    if (type == SOREN_TYPE_INDEX && !f.value && out->count_from.count == 0)
        return fail(p, key.path, "missing required key \"count\" or \"count_from\" for type "
                    "\"index\"");
    return SOREN_OK;
}

static soren_status parse_value(parser *p, const json_t *obj, const char *path,
                                soren_manifest_value *out)
{
    field value, f;
    int type;
    TRY(section(p, obj, path, "value", true, value_keys, COUNT_OF(value_keys), &value));
    TRY(field_get(p, value.value, value.path, "type", true, &f));
    TRY(field_enum(p, &f, value_types, COUNT_OF(value_types), &type));
    out->type = (soren_type)type;
    return SOREN_OK;
}

/* A stage's combine and reduce (obj is the manifest or a $.stages entry). */
static soren_status parse_combine_reduce(parser *p, const json_t *obj, const char *path,
                                         soren_combine_op *combine, soren_reduce_kind *reduce)
{
    field f;
    int v;
    TRY(field_get(p, obj, path, "combine", false, &f));
    if (f.value) {
        TRY(field_enum(p, &f, combine_ops, COUNT_OF(combine_ops), &v));
        *combine = (soren_combine_op)v;
    }
    TRY(field_get(p, obj, path, "reduce", false, &f));
    if (f.value) {
        TRY(field_enum(p, &f, reduce_kinds, COUNT_OF(reduce_kinds), &v));
        *reduce = (soren_reduce_kind)v;
    }
    if (*reduce == SOREN_REDUCE_COMBINE && *combine == SOREN_COMBINE_NONE)
        return strcmp(path, "$") == 0
                   ? fail(p, f.path, "\"combine\" needs a top-level \"combine\" key")
                   : fail(p, f.path, "\"combine\" needs a \"combine\" key in %s", path);
    return SOREN_OK;
}

/* $.stages: the stages after the first, each {key, value, combine,
 * reduce}. */
static soren_status parse_stages(parser *p, const json_t *root, soren_manifest *m)
{
    field f;
    char buf[SHOW_SIZE];
    TRY(field_get(p, root, "$", "stages", false, &f));
    if (!f.value)
        return SOREN_OK;
    size_t n = json_is_array(f.value) ? json_array_size(f.value) : 0;
    if (n == 0 || n > SOREN_MAX_STAGES - 1)
        return fail(p, f.path, "expected an array of 1 to %d stages (the stages after the "
                    "first), got %s", SOREN_MAX_STAGES - 1, describe_array(f.value, "stages", buf));
    m->stages = calloc(n, sizeof *m->stages);
    if (!m->stages)
        return no_memory(p);
    m->stage_count = n;
    for (size_t i = 0; i < n; i++) {
        const json_t *obj = json_array_get(f.value, i);
        soren_manifest_stage *st = &m->stages[i];
        char path[PATH_SIZE];
        snprintf(path, sizeof path, "$.stages[%zu]", i);
        TRY(expect_object(p, obj, path));
        TRY(check_keys(p, obj, path, stage_keys, COUNT_OF(stage_keys)));
        TRY(parse_key(p, obj, path, &st->key));
        char count_from[PATH_SIZE];
        snprintf(count_from, sizeof count_from, "$.stages[%zu].key.count_from", i);
        TRY(check_count_from(p, m, count_from, &st->key.count_from, "keys"));
        TRY(parse_value(p, obj, path, &st->value));
        TRY(parse_combine_reduce(p, obj, path, &st->combine, &st->reduce));
    }
    return SOREN_OK;
}

static soren_status parse_output(parser *p, const json_t *root, soren_manifest *m)
{
    field out, f;
    int order;
    m->output.order = SOREN_ORDER_KEY;
    m->output.limit = 0;
    TRY(section(p, root, "$", "output", false, output_keys, COUNT_OF(output_keys), &out));
    if (!out.value)
        return SOREN_OK;
    TRY(field_get(p, out.value, out.path, "order", false, &f));
    if (f.value) {
        TRY(field_enum(p, &f, output_orders, COUNT_OF(output_orders), &order));
        m->output.order = (soren_order)order;
    }
    TRY(field_get(p, out.value, out.path, "limit", false, &f));
    if (f.value)
        TRY(field_integer(p, &f, 1, INTEGER_MAX, &m->output.limit));
    return SOREN_OK;
}

static soren_status parse_param_name(parser *p, const json_t *obj, const char *path,
                                     soren_manifest *m, size_t index)
{
    field f;
    const char *s = NULL;
    size_t len = 0;
    char buf[SHOW_SIZE];
    TRY(field_get(p, obj, path, "name", true, &f));
    TRY(field_string(p, &f, &s, &len));
    if (!is_identifier(s))
        return fail(p, f.path,
                    "expected letters, digits and '_', not starting with a digit, got %s",
                    quote(s, len, buf));
    TRY(check_length(p, &f, len, PARAM_NAME_MAX_BYTES));
    for (size_t i = 0; i < index; i++)
        if (strcmp(m->params[i].name, s) == 0)
            return fail(p, f.path, "duplicate parameter name %s; the first is $.params[%zu]",
                        quote(s, len, buf), i);
    return dup_string(p, s, &m->params[index].name);
}

/* The default as it would be typed on the command line, so that one code
 * path (params.c) converts both. */
static soren_status param_default_text(parser *p, const field *f, char **out)
{
    char buf[SHOW_SIZE];
    if (json_is_string(f->value))
        return dup_string(p, json_string_value(f->value), out);
    if (json_is_integer(f->value)) {
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(f->value));
        return dup_string(p, buf, out);
    }
    if (json_is_real(f->value)) {
        *out = json_dumps(f->value, JSON_ENCODE_ANY);
        return *out ? SOREN_OK : no_memory(p);
    }
    return fail(p, f->path, "expected a string or a number, got %s", describe(f->value, buf));
}

static soren_status parse_param(parser *p, const json_t *obj, soren_manifest *m, size_t index)
{
    soren_manifest_param *param = &m->params[index];
    char path[PATH_SIZE];
    field f, def;
    int type;
    bool required = false;
    const char *help = NULL;

    snprintf(path, sizeof path, "$.params[%zu]", index);
    TRY(expect_object(p, obj, path));
    TRY(check_keys(p, obj, path, param_keys, COUNT_OF(param_keys)));
    TRY(parse_param_name(p, obj, path, m, index));

    TRY(field_get(p, obj, path, "type", true, &f));
    TRY(field_enum(p, &f, param_types, COUNT_OF(param_types), &type));
    param->type = (soren_param_type)type;

    TRY(field_get(p, obj, path, "required", false, &f));
    if (f.value)
        TRY(field_bool(p, &f, &required));
    param->required = required;

    TRY(field_get(p, obj, path, "default", false, &def));
    if (def.value) {
        TRY(param_default_text(p, &def, &param->default_value));
        /* A default on a required parameter could never be used: almost
         * certainly one of the two is a mistake. */
        if (required)
            return fail(p, def.path, "not allowed when \"required\" is true");
    }

    TRY(field_get(p, obj, path, "help", false, &f));
    if (f.value) {
        TRY(field_string(p, &f, &help, NULL));
        TRY(dup_string(p, help, &param->help));
    }
    return SOREN_OK;
}

static soren_status parse_params(parser *p, const json_t *root, soren_manifest *m)
{
    field f;
    char buf[SHOW_SIZE];
    TRY(field_get(p, root, "$", "params", false, &f));
    if (!f.value)
        return SOREN_OK;
    if (!json_is_array(f.value))
        return fail(p, f.path, "expected an array, got %s", describe(f.value, buf));
    size_t n = json_array_size(f.value);
    if (n > SOREN_MAX_PARAMS)
        return fail(p, f.path, "expected at most %d parameters, got %zu", SOREN_MAX_PARAMS, n);
    if (n == 0)
        return SOREN_OK;
    m->params = calloc(n, sizeof *m->params);
    if (!m->params)
        return no_memory(p);
    m->param_count = n; /* set now: soren_manifest_free frees what was filled */
    for (size_t i = 0; i < n; i++)
        TRY(parse_param(p, json_array_get(f.value, i), m, i));
    return SOREN_OK;
}

/* $.iterate: {"param": NAME}.  `run --iterate N` writes each output pair
 * (i, v) over element i of that parameter's bytes before the next run, so
 * the parameter takes bytes (type string) and the output's keys, those of
 * the last stage, are element numbers (u32, u64 or index). */
static soren_status parse_iterate(parser *p, const json_t *root, soren_manifest *m)
{
    field it, f;
    const char *name = NULL;
    size_t len = 0;
    char buf[SHOW_SIZE];
    TRY(section(p, root, "$", "iterate", false, iterate_keys, COUNT_OF(iterate_keys), &it));
    if (!it.value)
        return SOREN_OK;
    TRY(field_get(p, it.value, it.path, "param", true, &f));
    TRY(field_string(p, &f, &name, &len));
    int k = soren_manifest_param_index(m, name);
    if (k < 0)
        return fail(p, f.path, "%s is not a parameter of the job ($.params)",
                    quote(name, len, buf));
    if (m->params[k].type != SOREN_PARAM_STRING)
        return fail(p, f.path, "parameter %s receives the output's values as bytes, so it must "
                    "be of type string", quote(name, len, buf));
    soren_type key = soren_manifest_stage_at(m, m->stage_count).key.type;
    if (key != SOREN_TYPE_U32 && key != SOREN_TYPE_U64 && key != SOREN_TYPE_INDEX) {
        char key_path[PATH_SIZE] = "$.key.type";
        if (m->stage_count)
            snprintf(key_path, sizeof key_path, "$.stages[%zu].key.type", m->stage_count - 1);
        return fail(p, it.path, "allowed only when the output's keys (%s) are u32, u64 or "
                    "index, the numbers of the parameter's elements; got \"%s\"", key_path,
                    soren_type_name(key));
    }
    return dup_string(p, name, &m->iterate_param);
}

static soren_status parse_root(parser *p, const json_t *root, soren_manifest *m)
{
    TRY(expect_object(p, root, "$"));
    TRY(parse_manifest_version(p, root));
    TRY(check_keys(p, root, "$", top_keys, COUNT_OF(top_keys)));
    TRY(parse_name(p, root, m));
    TRY(parse_version(p, root, m));
    TRY(parse_summary(p, root, m));
    TRY(parse_library(p, root, m));
    TRY(parse_sha256(p, root, m));
    TRY(parse_input(p, root, m));
    TRY(parse_key(p, root, "$", &m->key));
    TRY(parse_value(p, root, "$", &m->value));
    TRY(parse_combine_reduce(p, root, "$", &m->combine, &m->reduce));
    TRY(parse_output(p, root, m));
    TRY(parse_params(p, root, m));
    /* The count_from names of stage 1 against the parameters, now read;
     * parse_stages checks those of the later stages as it goes. */
    TRY(check_count_from(p, m, "$.input.count_from", &m->input.count_from, "tasks"));
    TRY(check_count_from(p, m, "$.key.count_from", &m->key.count_from, "keys"));
    TRY(parse_stages(p, root, m));
    return parse_iterate(p, root, m);
}

/* ---- Loading ------------------------------------------------------------ */

/* Three texts jansson calls a syntax error at line 1 in words that do not
 * say what is wrong: nothing at all, and the byte order marks an editor
 * may put first. */
static soren_status check_start(const char *text, size_t size, const char *source,
                                soren_error *err)
{
    const unsigned char *t = (const unsigned char *)text;
    size_t blank = 0;
    while (blank < size && (text[blank] == ' ' || text[blank] == '\t' || text[blank] == '\r' ||
                            text[blank] == '\n'))
        blank++;
    if (blank == size)
        return soren_error_set(err, SOREN_EMANIFEST, "%s is empty: a manifest is one JSON "
                               "object (`soren-host new NAME` writes one to start from)",
                               source);
    if (size >= 3 && t[0] == 0xEF && t[1] == 0xBB && t[2] == 0xBF)
        return soren_error_set(err, SOREN_EMANIFEST, "%s starts with a byte order mark (EF BB "
                               "BF): save it as UTF-8 without one", source);
    if (size >= 2 && ((t[0] == 0xFF && t[1] == 0xFE) || (t[0] == 0xFE && t[1] == 0xFF)))
        return soren_error_set(err, SOREN_EMANIFEST, "%s is UTF-16 or UTF-32 (it starts with "
                               "the byte order mark %02X %02X): save it as UTF-8", source, t[0],
                               t[1]);
    return SOREN_OK;
}

/* Parses m->text into m's fields. */
static soren_status manifest_parse_text(soren_manifest *m, const char *source, soren_error *err)
{
    parser p = {source, err};
    soren_status rc = check_start(m->text, m->text_size, source, err);
    if (rc != SOREN_OK)
        return rc;
    json_error_t jerr;
    /* DECODE_ANY: a top-level array or string is reported as "$: expected
     * an object", not as a JSON syntax error. */
    json_t *root = json_loadb(m->text, m->text_size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!root) {
        /* jansson 2.14 leaves the text empty (and the code unknown) when an
         * allocation fails; a syntax error always has words. */
        if (jerr.text[0] == '\0')
            return no_memory(&p);
#if JANSSON_VERSION_HEX >= 0x020b00
        if (json_error_code(&jerr) == json_error_out_of_memory)
            return no_memory(&p);
#endif
        /* jansson quotes the input near the error; keep the message on one
         * line whatever bytes that was. */
        for (char *c = jerr.text; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7F)
                *c = ' ';
        return soren_error_set(err, SOREN_EMANIFEST, "%s:%d:%d: invalid JSON: %s", source,
                               jerr.line, jerr.column, jerr.text);
    }
    soren_status st = parse_root(&p, root, m);
    json_decref(root);
    return st;
}

/* The folder part of path, "." when it has none (POSIX dirname). */
static char *dir_of(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return NULL;
    char *dir = strdup(dirname(copy));
    free(copy);
    return dir;
}

/* A manifest as core/file.h reads it. */
static const soren_file_rules manifest_file = {
    .what = "a manifest",
    .max = SOREN_MANIFEST_MAX_SIZE,
    .kind_fix = "a manifest is a file, NAME.json",
    .size_fix = "it is not a manifest, or a damaged one",
    .kind_code = SOREN_EIO,
    .size_code = SOREN_EMANIFEST,
    .read_code = SOREN_EIO,
};

soren_status soren_manifest_open(const char *path, int *fd, soren_error *err)
{
    return soren__file_open(path, &manifest_file, fd, err);
}

soren_status soren_manifest_read(int fd, const char *path, soren_manifest **out,
                                 soren_error *err)
{
    soren_status st;
    *out = NULL;
    soren_manifest *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path)) || !(m->dir = dir_of(path))) {
        soren_manifest_free(m);
        return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory reading the manifest", path);
    }
    st = soren__file_read_fd(fd, path, &manifest_file, &m->text, &m->text_size, err);
    if (st == SOREN_OK)
        st = manifest_parse_text(m, path, err);
    if (st != SOREN_OK) {
        soren_manifest_free(m);
        return st;
    }
    *out = m;
    return SOREN_OK;
}

soren_status soren_manifest_load(const char *path, soren_manifest **out, soren_error *err)
{
    int fd;
    *out = NULL;
    soren_status st = soren_manifest_open(path, &fd, err);
    if (st == SOREN_OK) {
        st = soren_manifest_read(fd, path, out, err);
        close(fd);
    }
    return st;
}

soren_status soren_manifest_parse(const char *text, size_t size, const char *source,
                                  soren_manifest **out, soren_error *err)
{
    soren_status st;
    *out = NULL;
    if (!source)
        source = "manifest";
    /* Keep a copy of the bytes here too, so that every manifest can be
     * compared with a plugin's embedded copy the same way. */
    soren_manifest *m = calloc(1, sizeof *m);
    if (!m || size == SIZE_MAX || !(m->text = malloc(size + 1))) {
        soren_manifest_free(m);
        return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory reading the manifest",
                               source);
    }
    if (size)
        memcpy(m->text, text, size);
    m->text[size] = '\0';
    m->text_size = size;
    st = manifest_parse_text(m, source, err);
    if (st != SOREN_OK) {
        soren_manifest_free(m);
        return st;
    }
    *out = m;
    return SOREN_OK;
}

/* text as JSON, less its top-level "sha256" member; NULL if it is not
 * JSON (or memory ran out). */
static json_t *unpinned(const char *text, size_t size)
{
    json_error_t jerr;
    json_t *v = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
    if (v && json_is_object(v))
        json_object_del(v, "sha256");
    return v;
}

int soren_manifest_matches(const soren_manifest *m, const char *text, size_t size)
{
    json_t *mine = unpinned(m->text, m->text_size), *theirs = unpinned(text, size);
    int same = mine && theirs && json_equal(mine, theirs);
    json_decref(mine);
    json_decref(theirs);
    return same;
}

static void count_from_destroy(soren_count_from *cf)
{
    for (size_t i = 0; i < cf->count; i++)
        free(cf->names[i]);
}

void soren_manifest_free(soren_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->param_count; i++) {
        free(m->params[i].name);
        free(m->params[i].default_value);
        free(m->params[i].help);
    }
    free(m->params);
    count_from_destroy(&m->input.count_from);
    count_from_destroy(&m->key.count_from);
    for (size_t i = 0; i < m->stage_count; i++)
        count_from_destroy(&m->stages[i].key.count_from);
    free(m->stages);
    free(m->iterate_param);
    free(m->path);
    free(m->dir);
    free(m->text);
    free(m->name);
    free(m->version);
    free(m->summary);
    free(m->library);
    free(m->sha256);
    free(m);
}

size_t soren_type_size(soren_type t)
{
    switch (t) {
    case SOREN_TYPE_U32:
    case SOREN_TYPE_F32:
    case SOREN_TYPE_INDEX: return 4;
    case SOREN_TYPE_U64:
    case SOREN_TYPE_I64:
    case SOREN_TYPE_F64: return 8;
    case SOREN_TYPE_NONE:
    case SOREN_TYPE_STRING:
    case SOREN_TYPE__COUNT: break;
    }
    return 0;
}

const char *soren_param_type_name(soren_param_type t)
{
    for (size_t i = 0; i < COUNT_OF(param_types); i++)
        if (param_types[i].value == (int)t)
            return param_types[i].name;
    return "?";
}

const char *soren_type_name(soren_type t)
{
    switch (t) {
    case SOREN_TYPE_NONE: return "none";
    case SOREN_TYPE_STRING: return "string";
    case SOREN_TYPE_U32: return "u32";
    case SOREN_TYPE_U64: return "u64";
    case SOREN_TYPE_I64: return "i64";
    case SOREN_TYPE_F32: return "f32";
    case SOREN_TYPE_F64: return "f64";
    case SOREN_TYPE_INDEX: return "index";
    case SOREN_TYPE__COUNT: break;
    }
    return "unknown";
}

size_t soren_manifest_stages(const soren_manifest *m)
{
    return 1 + m->stage_count;
}

soren_manifest_stage soren_manifest_stage_at(const soren_manifest *m, size_t i)
{
    if (i > 0 && i <= m->stage_count)
        return m->stages[i - 1];
    return (soren_manifest_stage){m->key, m->value, m->combine, m->reduce};
}

int soren_manifest_param_index(const soren_manifest *m, const char *name)
{
    if (!m || !name)
        return -1;
    for (size_t i = 0; i < m->param_count; i++)
        if (m->params[i].name && strcmp(m->params[i].name, name) == 0)
            return (int)i;
    return -1;
}
