/* jschema.c - the tests' JSON Schema validator (see jschema.h). */
#include "jschema.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct ctx {
    const json_t *root; /* where "$ref"s look for "$defs" */
    int refs_followed;  /* on the path being checked: a bound finds a loop */
    char *why;
    size_t why_size;
} ctx;

/* More "$ref"s than this on one path through the document: a loop of refs
 * (Soren's schemas nest none). */
enum { REFS_MOST = 64 };

/* Records why validation failed (at path) and returns 0. */
static int fail(ctx *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(ctx *c, const char *path, const char *fmt, ...)
{
    int n = snprintf(c->why, c->why_size, "%s: ", path);
    if (n >= 0 && (size_t)n < c->why_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->why + n, c->why_size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return 0;
}

static const char *const known_keywords[] = {
    "$schema", "title", "description", "$defs", "$ref", "type", "enum", "minimum", "maximum",
    "required", "properties", "additionalProperties", "items",
};

/* The prefix of the only refs this validator follows: "#/$defs/NAME". */
static const char defs_prefix[] = "#/$defs/";

static int known(const char *keyword)
{
    for (size_t i = 0; i < sizeof known_keywords / sizeof known_keywords[0]; i++)
        if (strcmp(keyword, known_keywords[i]) == 0)
            return 1;
    return 0;
}

/* The JSON Schema type name of v ("integer" for JSON integers). */
static const char *type_of(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* 1 if v is of the named type, 0 if not, -1 if the name is no type. */
static int is_type(const char *name, const json_t *v)
{
    if (strcmp(name, "number") == 0)
        return json_is_number(v);
    if (strcmp(name, "integer") == 0)
        return json_is_integer(v);
    if (strcmp(name, "boolean") == 0)
        return json_is_boolean(v);
    if (strcmp(name, "object") == 0 || strcmp(name, "array") == 0 ||
        strcmp(name, "string") == 0 || strcmp(name, "null") == 0)
        return strcmp(name, type_of(v)) == 0;
    return -1;
}

static int check(ctx *c, const json_t *schema, const json_t *doc, const char *path);

static int check_type(ctx *c, const json_t *type, const json_t *doc, const char *path)
{
    if (json_is_string(type)) {
        int ok = is_type(json_string_value(type), doc);
        if (ok < 0)
            return fail(c, path, "schema: unknown type \"%s\"", json_string_value(type));
        return ok ? 1 : fail(c, path, "expected %s, got %s", json_string_value(type),
                             type_of(doc));
    }
    if (!json_is_array(type) || json_array_size(type) == 0)
        return fail(c, path, "schema: \"type\" must be a name or a list of names");
    size_t i;
    const json_t *t;
    json_array_foreach(type, i, t) {
        int ok = json_is_string(t) ? is_type(json_string_value(t), doc) : -1;
        if (ok < 0)
            return fail(c, path, "schema: \"type\" lists something that is no type");
        if (ok)
            return 1;
    }
    return fail(c, path, "expected one of the listed types, got %s", type_of(doc));
}

static int check_enum(ctx *c, const json_t *values, const json_t *doc, const char *path)
{
    if (!json_is_array(values))
        return fail(c, path, "schema: \"enum\" must be a list");
    size_t i;
    const json_t *v;
    json_array_foreach(values, i, v)
        if (json_equal(v, doc))
            return 1;
    if (json_is_string(doc))
        return fail(c, path, "\"%s\" is not one of the allowed values", json_string_value(doc));
    return fail(c, path, "the %s is not one of the allowed values", type_of(doc));
}

static int check_bound(ctx *c, const json_t *bound, const json_t *doc, const char *path,
                       int is_minimum)
{
    if (!json_is_number(bound))
        return fail(c, path, "schema: \"%s\" must be a number", is_minimum ? "minimum" : "maximum");
    if (!json_is_number(doc))
        return 1; /* bounds apply to numbers only */
    double b = json_number_value(bound), v = json_number_value(doc);
    if (is_minimum ? v >= b : v <= b)
        return 1;
    return fail(c, path, "%g is %s than the %s %g", v, is_minimum ? "less" : "greater",
                is_minimum ? "minimum" : "maximum", b);
}

static int check_required(ctx *c, const json_t *names, const json_t *doc, const char *path)
{
    if (!json_is_array(names))
        return fail(c, path, "schema: \"required\" must be a list of names");
    if (!json_is_object(doc))
        return 1;
    size_t i;
    const json_t *n;
    json_array_foreach(names, i, n) {
        if (!json_is_string(n))
            return fail(c, path, "schema: \"required\" lists something that is no name");
        if (!json_object_get(doc, json_string_value(n)))
            return fail(c, path, "missing the required key \"%s\"", json_string_value(n));
    }
    return 1;
}

/* properties and additionalProperties, which depend on each other. */
static int check_members(ctx *c, const json_t *schema, const json_t *doc, const char *path)
{
    const json_t *props = json_object_get(schema, "properties");
    const json_t *extra = json_object_get(schema, "additionalProperties");
    if (props && !json_is_object(props))
        return fail(c, path, "schema: \"properties\" must be an object");
    if (extra && !json_is_boolean(extra) && !json_is_object(extra))
        return fail(c, path, "schema: \"additionalProperties\" must be a boolean or a schema");
    if (!json_is_object(doc))
        return 1;
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)doc, key, value) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s.%s", path, key);
        const json_t *s = props ? json_object_get(props, key) : NULL;
        if (!s && json_is_false(extra))
            return fail(c, path, "the key \"%s\" is not allowed here", key);
        if (!s && json_is_object(extra))
            s = extra;
        if (s && !check(c, s, value, sub))
            return 0;
    }
    return 1;
}

static int check_items(ctx *c, const json_t *items, const json_t *doc, const char *path)
{
    if (!json_is_object(items))
        return fail(c, path, "schema: \"items\" must be a schema");
    if (!json_is_array(doc))
        return 1;
    size_t i;
    const json_t *v;
    json_array_foreach(doc, i, v) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        if (!check(c, items, v, sub))
            return 0;
    }
    return 1;
}

static int check(ctx *c, const json_t *schema, const json_t *doc, const char *path);

/* "$ref": the root's definition it names, checked against doc in place. */
static int check_ref(ctx *c, const json_t *ref, const json_t *doc, const char *path)
{
    const char *name = json_string_value(ref);
    if (!name || strncmp(name, defs_prefix, sizeof defs_prefix - 1) != 0)
        return fail(c, path, "schema: \"$ref\" must be \"%sNAME\"", defs_prefix);
    const json_t *def = json_object_get(json_object_get(c->root, "$defs"),
                                        name + sizeof defs_prefix - 1);
    if (!def)
        return fail(c, path, "schema: \"$ref\" %s names no definition of \"$defs\"", name);
    if (c->refs_followed == REFS_MOST)
        return fail(c, path, "schema: \"$ref\" %s: more than %d refs deep (a loop)", name,
                    REFS_MOST);
    c->refs_followed++;
    int ok = check(c, def, doc, path);
    c->refs_followed--;
    return ok;
}

static int check(ctx *c, const json_t *schema, const json_t *doc, const char *path)
{
    if (!json_is_object(schema))
        return fail(c, path, "schema: a schema must be an object");
    const char *keyword;
    const json_t *arg;
    json_object_foreach((json_t *)schema, keyword, arg)
        if (!known(keyword))
            return fail(c, path, "schema: the keyword \"%s\" is not supported by this validator",
                        keyword);
    if ((arg = json_object_get(schema, "$defs")) && !json_is_object(arg))
        return fail(c, path, "schema: \"$defs\" must be an object");
    if ((arg = json_object_get(schema, "$ref")) && !check_ref(c, arg, doc, path))
        return 0;
    if ((arg = json_object_get(schema, "type")) && !check_type(c, arg, doc, path))
        return 0;
    if ((arg = json_object_get(schema, "enum")) && !check_enum(c, arg, doc, path))
        return 0;
    if ((arg = json_object_get(schema, "minimum")) && !check_bound(c, arg, doc, path, 1))
        return 0;
    if ((arg = json_object_get(schema, "maximum")) && !check_bound(c, arg, doc, path, 0))
        return 0;
    if ((arg = json_object_get(schema, "required")) && !check_required(c, arg, doc, path))
        return 0;
    if (!check_members(c, schema, doc, path))
        return 0;
    if ((arg = json_object_get(schema, "items")) && !check_items(c, arg, doc, path))
        return 0;
    return 1;
}

int js_validate(const json_t *schema, const json_t *doc, char *why, size_t why_size)
{
    ctx c = {schema, 0, why, why_size};
    if (why_size)
        why[0] = '\0';
    return check(&c, schema, doc, "$");
}
