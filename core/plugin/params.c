#include "params.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../file.h"
#include "../number.h"
#include "regex.h"

/* A parameter's type in messages about its value. */
static const char *param_type_name(soren_param_type t)
{
    return t == SOREN_PARAM_SCRATCH ? "scratch size" : soren_param_type_name(t);
}

/* Reads a whole file for "name=@file": a regular file of at most
 * SOREN_PARAM_FILE_MAX bytes, named by the user. */
static soren_status read_value_file(const char *job, const char *name, const char *path,
                                    char **out, size_t *size, soren_error *err)
{
    char *context = NULL;
    if (asprintf(&context, "%s: --param %s=@%s: ", job, name, path) < 0)
        return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory", job);
    const soren_file_rules rules = {
        .what = "a parameter file",
        .max = SOREN_PARAM_FILE_MAX,
        .context = context,
        .kind_fix = "save the value to a file and name that",
        .kind_code = SOREN_EUSAGE,
        .size_code = SOREN_EUSAGE,
        .read_code = SOREN_EIO,
        .named = 1,
    };
    soren_status rc = soren__file_read(path, &rules, out, size, err);
    free(context);
    return rc;
}

/* The width of a number parameter's native value (0: not a number). */
static size_t number_width(soren_param_type t)
{
    switch (t) {
    case SOREN_PARAM_U32:
    case SOREN_PARAM_F32: return 4;
    case SOREN_PARAM_U64:
    case SOREN_PARAM_I64:
    case SOREN_PARAM_F64: return 8;
    default: return 0;
    }
}

/* Scratch memory of the size given: zero pages mapped and neither touched
 * nor reserved until the map writes them, so that an engine that gives the
 * map memory of its own, as the GPU's does, costs the host nothing, however
 * much the device holds.  Size 0 is no memory: the parameter is absent. */
static soren_status scratch_block(const char *job, const soren_manifest_param *mp,
                                  uint64_t bytes, void **out, uint64_t *size, soren_error *err)
{
    *out = NULL;
    *size = 0;
    if (bytes == 0)
        return SOREN_OK;
    void *p = bytes > SIZE_MAX ? MAP_FAILED
                               : mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return soren_error_set(err, SOREN_ENOMEM, "%s: parameter %s: cannot map %" PRIu64
                               " bytes of scratch memory; give a smaller size", job, mp->name,
                               bytes);
    *out = p;
    *size = bytes;
    return SOREN_OK;
}

/* Frees a value param_value made: a scratch mapping of size bytes
 * (mapped), or a block. */
static void value_free(void *owned, uint64_t size, int mapped)
{
    if (owned && mapped)
        munmap(owned, (size_t)size);
    else
        free(owned);
}

/* Converts text to the parameter's native representation in a new block. */
static soren_status convert(const char *job, const soren_manifest_param *mp, const char *text,
                            size_t text_size, void **out, uint64_t *size, soren_error *err)
{
    if (mp->type == SOREN_PARAM_STRING) {
        char *copy = malloc(text_size + 1);
        if (!copy)
            return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory", job);
        memcpy(copy, text, text_size);
        copy[text_size] = '\0';
        *out = copy;
        *size = text_size;
        return SOREN_OK;
    }
    if (mp->type == SOREN_PARAM_REGEX) {
        soren_dfa *dfa = NULL;
        size_t dfa_size = 0;
        if (strlen(text) != text_size)
            return soren_error_set(err, SOREN_EUSAGE, "%s: parameter %s: a pattern cannot "
                                   "contain a NUL byte", job, mp->name);
        soren_status rc = soren_regex_compile(text, &dfa, &dfa_size, err);
        if (rc != SOREN_OK)
            return rc;
        *out = dfa;
        *size = dfa_size;
        return SOREN_OK;
    }

    soren_number_type t = mp->type == SOREN_PARAM_U32   ? SOREN_NUMBER_U32
                        : mp->type == SOREN_PARAM_U64   ? SOREN_NUMBER_U64
                        : mp->type == SOREN_PARAM_SCRATCH ? SOREN_NUMBER_U64
                        : mp->type == SOREN_PARAM_I64   ? SOREN_NUMBER_I64
                        : mp->type == SOREN_PARAM_F32   ? SOREN_NUMBER_F32
                                                        : SOREN_NUMBER_F64;
    size_t width = number_width(mp->type);
    soren_number v;
    char why[160] = "a number cannot contain a NUL byte";
    if (strlen(text) != text_size || soren_number_parse(text, t, 0, &v, why, sizeof why) != 0)
        return soren_error_set(err, SOREN_EUSAGE, "%s: parameter %s: \"%.*s\" is not a valid "
                               "%s: %s", job, mp->name, (int)(text_size > 64 ? 64 : text_size),
                               text, param_type_name(mp->type), why);
    if (mp->type == SOREN_PARAM_SCRATCH)
        return scratch_block(job, mp, v.u64, out, size, err);
    void *block = malloc(width);
    if (!block)
        return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory", job);
    memcpy(block, &v, width);
    *out = block;
    *size = width;
    return SOREN_OK;
}

static soren_status unknown_param(const soren_manifest *m, const char *name, size_t name_len,
                                  soren_error *err)
{
    char known[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < m->param_count && used < sizeof known; i++)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                                 m->params[i].name);
    if (m->param_count == 0)
        return soren_error_set(err, SOREN_EUSAGE, "%s takes no parameters (got \"%.*s\")",
                               m->name, (int)name_len, name);
    return soren_error_set(err, SOREN_EUSAGE, "%s has no parameter \"%.*s\" (it takes: %s)",
                           m->name, (int)name_len, name, known);
}

/* Raw bytes as parameter mp's value, checked: a number's exact width, any
 * string; a pattern only as text (its compiled form is the engine's).  The
 * value is the caller's bytes, borrowed (*owned stays NULL): a library
 * job's large parameters are not copied again on every run. */
static soren_status take_bytes(const char *job, const soren_manifest_param *mp,
                               const soren_param_value *v, const void **out, uint64_t *size,
                               soren_error *err)
{
    size_t width = number_width(mp->type);
    if (mp->type == SOREN_PARAM_REGEX)
        return soren_error_set(err, SOREN_EUSAGE, "%s: parameter %s is a pattern: give it as "
                               "text (soren_job_param)", job, mp->name);
    if (mp->type == SOREN_PARAM_SCRATCH)
        return soren_error_set(err, SOREN_EUSAGE, "%s: parameter %s is scratch memory: give "
                               "its size in bytes as text (soren_job_param)", job, mp->name);
    if (width && v->size != width)
        return soren_error_set(err, SOREN_EUSAGE, "%s: parameter %s is a %s: it takes %zu "
                               "bytes, got %zu", job, mp->name, param_type_name(mp->type), width,
                               v->size);
    *out = v->bytes;
    *size = v->size;
    return SOREN_OK;
}

/* Parameter j's value: given (as bytes or text), else its default, else
 * absent (*out NULL; an error if it is required).  A value converted from
 * text is allocated, and *owned is it; bytes are borrowed, *owned NULL. */
static soren_status param_value(const soren_manifest *m, size_t j, const soren_param_value *v,
                                const void **out, void **owned, uint64_t *size,
                                soren_error *err)
{
    const soren_manifest_param *mp = &m->params[j];
    *out = NULL;
    *owned = NULL;
    *size = 0;
    if (v && v->bytes)
        return take_bytes(m->name, mp, v, out, size, err);
    const char *text = v && v->text ? v->text : mp->default_value;
    if (!text)
        return mp->required ? soren_error_set(err, SOREN_EUSAGE, "%s: missing required "
                                              "parameter %s (give --param %s=VALUE)",
                                              m->name, mp->name, mp->name)
                            : SOREN_OK;
    char *file_text = NULL;
    size_t text_size = strlen(text);
    if (v && v->text && text[0] == '@') {
        soren_status rc = read_value_file(m->name, mp->name, text + 1, &file_text, &text_size,
                                          err);
        if (rc != SOREN_OK)
            return rc;
        text = file_text;
    }
    soren_status rc = convert(m->name, mp, text, text_size, owned, size, err);
    free(file_text);
    *out = *owned;
    return rc;
}

soren_status soren_param_set_from(soren_param_set *set, const soren_manifest *m,
                                  const soren_param_value *values, soren_error *err)
{
    memset(set, 0, sizeof *set);
    set->params.count = (uint32_t)m->param_count;
    soren_status rc = SOREN_OK;
    for (size_t j = 0; j < m->param_count && rc == SOREN_OK; j++) {
        rc = param_value(m, j, &values[j], &set->params.data[j], &set->owned[j],
                         &set->params.size[j], err);
        if (m->params[j].type == SOREN_PARAM_SCRATCH)
            set->mapped |= 1u << j;
    }
    if (rc != SOREN_OK)
        soren_param_set_destroy(set);
    return rc;
}

soren_status soren_param_check(const soren_manifest *m, size_t j, const soren_param_value *v,
                               soren_error *err)
{
    const void *value = NULL;
    void *owned = NULL;
    uint64_t size = 0;
    soren_status rc = param_value(m, j, v, &value, &owned, &size, err);
    value_free(owned, size, m->params[j].type == SOREN_PARAM_SCRATCH);
    return rc;
}

int soren_param_find(const soren_manifest *m, const char *name, size_t name_len,
                     soren_error *err)
{
    for (size_t j = 0; j < m->param_count; j++)
        if (strlen(m->params[j].name) == name_len && memcmp(m->params[j].name, name, name_len) == 0)
            return (int)j;
    unknown_param(m, name, name_len, err);
    return -1;
}

soren_status soren_param_set_build(soren_param_set *set, const soren_manifest *m,
                                   const char *const *assignments, size_t count,
                                   soren_error *err)
{
    memset(set, 0, sizeof *set);
    soren_param_value values[SOREN_MAX_PARAMS] = {{0}};
    for (size_t i = 0; i < count; i++) {
        const char *a = assignments[i];
        const char *eq = strchr(a, '=');
        if (!eq)
            return soren_error_set(err, SOREN_EUSAGE,
                                   "--param %s: expected NAME=VALUE or NAME=@FILE", a);
        int found = soren_param_find(m, a, (size_t)(eq - a), err);
        if (found < 0)
            return SOREN_EUSAGE;
        values[found].text = eq + 1; /* a later assignment overrides an earlier one */
    }
    return soren_param_set_from(set, m, values, err);
}

void soren_param_set_destroy(soren_param_set *set)
{
    for (size_t j = 0; j < SOREN_MAX_PARAMS; j++)
        value_free(set->owned[j], set->params.size[j], set->mapped >> j & 1);
    memset(set, 0, sizeof *set);
}
