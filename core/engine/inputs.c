#include "inputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../file.h"

static void count_read(void *progress, size_t bytes)
{
    soren_progress_add(progress, (uint64_t)bytes);
}

/* Standard input is read whole: it cannot be mapped, and records may span
 * any two reads. */
static soren_status slurp_stdin(soren_progress *progress, int fd, char **out, size_t *size,
                                soren_error *err)
{
    soren_file_rules rules = {.what = "standard input",
                              .max = SIZE_MAX,
                              .read_code = SOREN_EINPUT,
                              .on_read = count_read,
                              .on_read_arg = progress};
    soren_progress_phase(progress, "read", 0);
    return soren__file_read_fd(fd, "standard input", &rules, out, size, err);
}

/* What param_product found. */
typedef enum product_status {
    PRODUCT_OK,      /* *out is the product; *name the first factor of 0, if any */
    PRODUCT_MISSING, /* *name was not given (no value, no default) */
    PRODUCT_OVER     /* the product is over 2^64 - 1 */
} product_status;

/* The product of the parameters cf names (u32 or u64, as the manifest
 * checked), in *out: the count that a count_from says. */
static product_status param_product(const soren_manifest *m, const soren_count_from *cf,
                                    const soren_params *params, uint64_t *out, const char **name)
{
    uint64_t values[SOREN_MAX_COUNT_FROM];
    *name = NULL;
    for (size_t i = 0; i < cf->count; i++) {
        int k = soren_manifest_param_index(m, cf->names[i]);
        if (k < 0 || params->size[k] == 0) {
            *name = cf->names[i];
            return PRODUCT_MISSING;
        }
        if (params->size[k] == 4) {
            uint32_t v32;
            memcpy(&v32, params->data[k], 4);
            values[i] = v32;
        } else {
            memcpy(&values[i], params->data[k], 8);
        }
        if (values[i] == 0 && !*name)
            *name = cf->names[i];
    }
    /* A factor of 0 makes the product 0, however large the others. */
    *out = *name ? 0 : 1;
    for (size_t i = 0; i < cf->count && *out; i++) {
        if (*out > UINT64_MAX / values[i])
            return PRODUCT_OVER;
        *out *= values[i];
    }
    return PRODUCT_OK;
}

/* The number of tasks of an index job: --tasks, else the manifest's count,
 * else the product of the parameters its count_from names. */
static soren_status task_count(const soren_manifest *m, const soren_run_options *o,
                               const soren_params *params, uint64_t *out, soren_error *err)
{
    if (o->tasks) {
        *out = o->tasks;
        return SOREN_OK;
    }
    if (m->input.count) {
        *out = m->input.count;
        return SOREN_OK;
    }
    if (m->input.count_from.count == 0)
        return soren_error_set(err, SOREN_EUSAGE, "%s reads index input and its manifest gives "
                               "no task count: give --tasks N", m->name);
    const char *name = NULL;
    switch (param_product(m, &m->input.count_from, params, out, &name)) {
    case PRODUCT_MISSING:
        return soren_error_set(err, SOREN_EUSAGE, "%s: the task count is the product of "
                               "parameters of input.count_from: give --param %s=N (or "
                               "--tasks N)", m->name, name);
    case PRODUCT_OVER:
        return soren_error_set(err, SOREN_EUSAGE, "%s: the task count (the product of "
                               "input.count_from) is over 2^64", m->name);
    case PRODUCT_OK: break;
    }
    return SOREN_OK;
}

/* The key count of stage index (0-based), whose index keys are counted by
 * key.count_from: the product of those parameters, from 1 to UINT32_MAX as
 * key.count is (keys are u32: a larger count would promise keys that cannot
 * be emitted, and the GPU's dense variant sizes its arrays by it). */
static soren_status key_count(const soren_manifest *m, size_t index, const soren_params *params,
                              uint64_t *out, soren_error *err)
{
    char field[64] = "key.count_from";
    if (index > 0)
        snprintf(field, sizeof field, "stages[%zu].key.count_from", index - 1);
    const char *name = NULL;
    soren_manifest_stage st = soren_manifest_stage_at(m, index);
    product_status ps = param_product(m, &st.key.count_from, params, out, &name);
    if (ps == PRODUCT_MISSING)
        return soren_error_set(err, SOREN_EUSAGE, "%s: the key count is the product of "
                               "parameters of %s: give --param %s=N", m->name, field, name);
    if (ps == PRODUCT_OK && *out == 0)
        return soren_error_set(err, SOREN_EUSAGE, "%s: the key count (the product of %s) is 0, "
                               "for parameter %s is 0; index keys need at least one: give "
                               "--param %s=N, N from 1 up", m->name, field, name, name);
    if (ps == PRODUCT_OVER || *out > UINT32_MAX)
        return soren_error_set(err, SOREN_EUSAGE, "%s: the key count (the product of %s) is "
                               "over 4294967295, the most that index keys (u32) can number: "
                               "give smaller parameters", m->name, field);
    return SOREN_OK;
}

soren_status soren__stage_key_counts(const soren_manifest *m, soren_stage_spec *specs,
                                     size_t stages, const soren_params *params, soren_error *err)
{
    for (size_t i = 0; i < stages; i++) {
        if (soren_manifest_stage_at(m, i).key.count_from.count == 0)
            continue;
        soren_status rc = key_count(m, i, params, &specs[i].key_count, err);
        if (rc != SOREN_OK)
            return rc;
    }
    return SOREN_OK;
}

soren_status soren__open_cli_inputs(const soren_manifest *m, const soren_run_options *o,
                                    soren_input *inputs, size_t *count, char **stdin_data,
                                    soren_error *err)
{
    soren_status rc = SOREN_OK;
    *count = 0;
    if (m->input.format == SOREN_INPUT_INDEX) {
        if (o->input_count)
            return soren_error_set(err, SOREN_EUSAGE, "%s reads index input (tasks known by "
                                   "their number, no data): it takes no INPUT files, got %s",
                                   m->name, o->inputs[0]);
        return SOREN_OK;
    }
    if (o->comm && o->input_count == 0)
        return soren_error_set(err, SOREN_EUSAGE, "under mpirun, give %s its INPUT files: "
                               "standard input reaches one rank only", m->name);
    for (size_t i = 0; rc == SOREN_OK && i < o->input_count; i++, (*count)++)
        rc = o->client ? soren_input_open_fd(&inputs[i], o->client->input_fds[i], o->inputs[i], err)
                       : soren_input_open(&inputs[i], o->inputs[i], err);
    if (rc == SOREN_OK && o->input_count == 0) {
        size_t size = 0;
        rc = slurp_stdin(o->progress, o->client ? o->client->stdin_fd : STDIN_FILENO,
                         stdin_data, &size, err);
        if (rc == SOREN_OK) {
            soren_input_wrap(&inputs[0], "(standard input)", *stdin_data, size);
            *count = 1;
        }
    }
    if (rc == SOREN_OK)
        soren_input_lay_out(inputs, *count);
    return rc;
}

soren_status soren__stage_inputs(const soren_manifest *m, const soren_stage_spec *spec,
                                 const soren_run_options *o, const soren_params *params,
                                 const soren_input *inputs, size_t input_count,
                                 soren_input *tasks, const soren_input **use, size_t *use_count,
                                 soren_error *err)
{
    *use = inputs;
    *use_count = input_count;
    if (spec->input_format != SOREN_INPUT_INDEX) {
        if (o->tasks)
            return soren_error_set(err, SOREN_EUSAGE, "--tasks applies to jobs with index "
                                   "input; %s reads %s", m->name,
                                   spec->input_format == SOREN_INPUT_LINES ? "lines"
                                                                           : "fixed records");
        for (size_t i = 0; i < input_count; i++) {
            soren_status rc = soren_input_check(&inputs[i], spec, err);
            if (rc != SOREN_OK)
                return rc;
        }
        return SOREN_OK;
    }
    if (input_count)
        return soren_error_set(err, SOREN_EUSAGE, "%s reads index input (tasks known by their "
                               "number, no data): it takes no inputs", m->name);
    uint64_t count = 0;
    soren_status rc = task_count(m, o, params, &count, err);
    if (rc == SOREN_OK) {
        soren_input_tasks(tasks, count);
        *use = tasks;
        *use_count = 1;
    }
    return rc;
}
