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

soren_status soren__open_cli_inputs(const soren_run_plan *plan, const soren_run_options *o,
                                    soren_input *inputs, size_t *count, char **stdin_data,
                                    soren_error *err)
{
    soren_status rc = SOREN_OK;
    *count = 0;
    if (plan->specs[0].input_format == SOREN_INPUT_INDEX) {
        if (o->input_count)
            return soren_error_set(err, SOREN_EUSAGE, "%s reads index input (tasks known by "
                                   "their number, no data): it takes no INPUT files, got %s",
                                   plan->job, o->inputs[0]);
        return SOREN_OK;
    }
    if (o->comm && o->input_count == 0)
        return soren_error_set(err, SOREN_EUSAGE, "give %s its INPUT files: over several ranks "
                               "(mpirun, --devices) each reads its own slice, and standard input "
                               "reaches one rank only", plan->job);
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

soren_status soren__stage_inputs(const soren_run_plan *plan, const soren_run_options *o,
                                 const soren_input *inputs, size_t input_count,
                                 soren_input *tasks, const soren_input **use, size_t *use_count,
                                 soren_error *err)
{
    const soren_stage_spec *spec = &plan->specs[0];
    *use = inputs;
    *use_count = input_count;
    if (spec->input_format != SOREN_INPUT_INDEX) {
        if (o->tasks)
            return soren_error_set(err, SOREN_EUSAGE, "--tasks applies to jobs with index "
                                   "input; %s reads %s", plan->job,
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
                               "number, no data): it takes no inputs", plan->job);
    soren_input_tasks(tasks, plan->tasks);
    *use = tasks;
    *use_count = 1;
    return SOREN_OK;
}
