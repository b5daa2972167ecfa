#include "job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../cpu/cpu.h"
#include "../io/input.h"
#include "../plugin/params.h"
#include "result.h"
#include "stage.h"

/* Standard input is read whole: it cannot be mapped, and records may span
 * any two reads. */
static soren_status slurp_stdin(soren_progress *progress, char **out, size_t *size,
                                soren_error *err)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    soren_progress_phase(progress, "read", 0);
    for (;;) {
        if (!buf)
            return soren_error_set(err, SOREN_ENOMEM, "out of memory reading standard input");
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        soren_progress_add(progress, got);
        if (n < cap)
            break;
        char *bigger = realloc(buf, cap *= 2);
        if (!bigger)
            free(buf);
        buf = bigger;
    }
    if (ferror(stdin)) {
        int e = errno;
        free(buf);
        return soren_error_errno(err, SOREN_EINPUT, e, "cannot read standard input");
    }
    *out = buf;
    *size = n;
    return SOREN_OK;
}

/* Why the GPU engine cannot run one of the job's stages (NULL if it can
 * run them all), in buf. */
static const char *gpu_unsupported(const soren_stage_spec *specs, size_t stages, char *buf,
                                   size_t size)
{
    for (size_t i = 0; i < stages; i++) {
        const char *why = soren_gpu_unsupported(&specs[i]);
        if (!why)
            continue;
        if (stages == 1)
            return why;
        snprintf(buf, size, "stage %zu: %s", i + 1, why);
        return buf;
    }
    return NULL;
}

/* Chooses where the job runs, or says why it cannot run where asked. */
static soren_status choose_device(const soren_stage_spec *specs, size_t stages,
                                  const soren_run_options *o, soren_device_choice *where,
                                  soren_error *err)
{
    char why[256] = "", unsupported_buf[256];
    int gpus = o->device == SOREN_DEVICE_CPU ? 0 : soren_device_count(why, sizeof why);
    const char *unsupported =
        gpus > 0 ? gpu_unsupported(specs, stages, unsupported_buf, sizeof unsupported_buf) : NULL;
    if (unsupported)
        snprintf(why, sizeof why, "%s", unsupported);
    int gpu_ok = gpus > 0 && !unsupported;

    if (o->device == SOREN_DEVICE_GPU && !gpu_ok)
        return soren_error_set(err, SOREN_EDEVICE, "--device gpu: %s: %s; use --device cpu or "
                               "auto", gpus > 0 ? "the GPU cannot run this job" : "no usable GPU",
                               why);
    *where = gpu_ok ? SOREN_DEVICE_GPU : SOREN_DEVICE_CPU;
    if (o->verbose) {
        if (gpu_ok)
            soren_progress_say(o->progress, "soren-host: device: gpu 0 of %d\n", gpus);
        else if (o->device == SOREN_DEVICE_AUTO)
            soren_progress_say(o->progress, "soren-host: device: cpu (%s: %s)\n",
                               gpus > 0 ? "the GPU cannot run this job" : "no usable GPU",
                               why);
        else
            soren_progress_say(o->progress, "soren-host: device: cpu (--device cpu)\n");
    }
    return SOREN_OK;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static soren_status run_gpu(const soren_stage_spec *spec, const soren_input *inputs,
                            size_t input_count, const soren_params *params,
                            const soren_run_options *o, soren_result *res, soren_explain *x,
                            soren_error *err)
{
    soren_gpu_options gpu = o->gpu;
    if (soren_variant_parse(o->engine ? o->engine : "auto", &gpu.variant) != 0)
        return soren_error_set(err, SOREN_EUSAGE, "--engine %s: expected one of %s", o->engine,
                               soren_engine_names);
    gpu.sample = o->sample;
    gpu.small_keys = o->small_keys;
    gpu.progress = o->progress;
    x->device = "gpu";
    soren_status rc = soren_gpu_run(spec, inputs, input_count, params, &gpu, res, x, err);
    if (rc == SOREN_OK && o->verbose) {
        soren_progress_say(o->progress,
                           "soren-host: gpu engine: %s variant; ms: upload %.3f, split %.3f, "
                           "map %.3f, merge %.3f, reduce %.3f, order %.3f, download %.3f\n",
                           soren_variant_name(x->variant), x->ms.upload, x->ms.split,
                           x->ms.map, x->ms.merge, x->ms.reduce, x->ms.sort, x->ms.download);
        soren_progress_say(o->progress, "soren-host: variant: %s (%s)\n",
                           soren_variant_name(x->variant),
                           x->rule ? x->rule : "no rule recorded");
    }
    return rc;
}

/* Monitoring on the CPU, timed; with --sample 0 only the input's size is
 * known (counting its lines would be a pass over it that nobody asked for). */
static soren_status monitor_cpu(const soren_stage_spec *spec, const soren_input *inputs,
                                size_t input_count, const soren_params *params,
                                const soren_run_options *o, soren_explain *x, soren_error *err)
{
    if (!(o->sample > 0)) {
        x->metrics.fraction = 0;
        for (size_t i = 0; i < input_count; i++)
            x->metrics.total_bytes += inputs[i].size;
        return SOREN_OK;
    }
    soren_progress_phase(o->progress, "monitor", 0);
    double t0 = now_ms();
    soren_status rc = soren_cpu_monitor(spec, inputs, input_count, params, o->sample,
                                        o->threads, &x->metrics, err);
    x->ms.monitor = now_ms() - t0;
    return rc;
}

/* The CPU engine's variant and the rule behind it.  It has hash (its
 * per-thread tables) and direct (map-only); a forced GPU variant is reported
 * as not applying, in rule_buf (which x->rule then points to). */
static void choose_cpu(const soren_stage_spec *spec, const soren_run_options *o,
                       soren_explain *x, char *rule_buf, size_t rule_size)
{
    x->rule = soren_choose(spec, &x->metrics, o->small_keys, 0, &x->variant);
    if (o->engine && strcmp(o->engine, "auto") != 0) {
        snprintf(rule_buf, rule_size, "--engine %s applies to the GPU; the CPU engine ran %s",
                 o->engine, soren_variant_name(x->variant));
        x->rule = rule_buf;
    }
}

static soren_status run_cpu(const soren_stage_spec *spec, const soren_input *inputs,
                            size_t input_count, const soren_params *params,
                            const soren_run_options *o, soren_result *res, soren_explain *x,
                            char *rule_buf, size_t rule_size, soren_error *err)
{
    x->device = "cpu";
    if (o->verbose && o->engine && strcmp(o->engine, "auto") != 0)
        soren_progress_say(o->progress, "soren-host: engine: the CPU engine has one variant; "
                           "--engine %s applies to the GPU\n", o->engine);
    if (o->verbose)
        soren_progress_say(o->progress, "soren-host: cpu engine: %u threads\n",
                           o->threads ? o->threads : soren_cpu_count());

    soren_status rc = monitor_cpu(spec, inputs, input_count, params, o, x, err);
    if (rc != SOREN_OK)
        return rc;
    choose_cpu(spec, o, x, rule_buf, rule_size);
    soren_project(spec, &x->metrics, &x->projection);
    if (o->verbose)
        soren_progress_say(o->progress, "soren-host: variant: %s (%s)\n",
                           soren_variant_name(x->variant), x->rule);

    /* Without monitoring the projection is only a generous bound from the
     * input's bytes: the tables then start small and grow. */
    soren_cpu_options cpu = {
        .threads = o->threads,
        .distinct_keys = x->metrics.ran ? x->projection.distinct_keys : 0,
        .table_slots = o->gpu.table_slots,
        .explain = x,
        .progress = o->progress,
    };
    rc = soren_cpu_run(spec, inputs, input_count, params, &cpu, res, err);
    if (rc != SOREN_OK)
        return rc;
    soren_progress_phase(o->progress, "order", 0);
    double t0 = now_ms();
    rc = soren_result_order(res, spec->order, spec->limit, err);
    x->ms.sort = now_ms() - t0;
    return rc;
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
    if (m->input.count_from_count == 0)
        return soren_error_set(err, SOREN_EUSAGE, "%s reads index input and its manifest gives "
                               "no task count: give --tasks N", m->name);
    uint64_t n = 1;
    for (size_t i = 0; i < m->input.count_from_count; i++) {
        const char *name = m->input.count_from[i];
        int k = soren_manifest_param_index(m, name);
        uint64_t v = 0;
        if (k < 0 || params->size[k] == 0)
            return soren_error_set(err, SOREN_EUSAGE, "%s: the task count is the product of "
                                   "parameters of input.count_from: give --param %s=N (or "
                                   "--tasks N)", m->name, name);
        if (params->size[k] == 4) {
            uint32_t v32;
            memcpy(&v32, params->data[k], 4);
            v = v32;
        } else {
            memcpy(&v, params->data[k], 8);
        }
        if (v && n > UINT64_MAX / v)
            return soren_error_set(err, SOREN_EUSAGE, "%s: the task count (the product of "
                                   "input.count_from) is over 2^64", m->name);
        n *= v;
    }
    *out = n;
    return SOREN_OK;
}

/* Stage 1's inputs: the files (or standard input), or an index job's tasks. */
static soren_status open_inputs(const soren_manifest *m, const soren_stage_spec *spec,
                                const soren_run_options *o, const soren_params *params,
                                soren_input *inputs, char **stdin_data, soren_error *err)
{
    soren_status rc = SOREN_OK;
    if (o->tasks && spec->input_format != SOREN_INPUT_INDEX)
        return soren_error_set(err, SOREN_EUSAGE, "--tasks applies to jobs with index input; "
                               "%s reads %s", m->name,
                               spec->input_format == SOREN_INPUT_LINES ? "lines" : "fixed "
                                                                                   "records");
    if (spec->input_format == SOREN_INPUT_INDEX) {
        if (o->input_count)
            return soren_error_set(err, SOREN_EUSAGE, "%s reads index input (tasks known by "
                                   "their number, no data): it takes no INPUT files, got %s",
                                   m->name, o->inputs[0]);
        uint64_t tasks = 0;
        rc = task_count(m, o, params, &tasks, err);
        if (rc == SOREN_OK)
            soren_input_tasks(&inputs[0], tasks);
        return rc;
    }
    for (size_t i = 0; rc == SOREN_OK && i < o->input_count; i++)
        rc = soren_input_open(&inputs[i], o->inputs[i], err);
    if (rc == SOREN_OK && o->input_count == 0) {
        size_t size = 0;
        rc = slurp_stdin(o->progress, stdin_data, &size, err);
        if (rc == SOREN_OK)
            soren_input_wrap(&inputs[0], "(standard input)", *stdin_data, size);
    }
    for (size_t i = 0; rc == SOREN_OK && i < o->input_count; i++)
        rc = soren_input_check(&inputs[i], spec, err);
    return rc;
}

/* One stage on the chosen device, its result left in res (initialised
 * here) in the stage's order. */
static soren_status run_stage(const soren_stage_spec *spec, soren_device_choice where,
                              const soren_input *inputs, size_t input_count,
                              const soren_params *params, const soren_run_options *o,
                              soren_result *res, soren_explain *x, char *rule, size_t rule_size,
                              soren_error *err)
{
    soren_result_init(res, spec);
    x->job = spec->job_name;
    if (where == SOREN_DEVICE_GPU)
        return run_gpu(spec, inputs, input_count, params, o, res, x, err);
    return run_cpu(spec, inputs, input_count, params, o, res, x, rule, rule_size, err);
}

/* Runs every stage: stage 1 over the inputs, each later stage over the
 * pairs of the one before (packed by soren_input_pairs, its result freed
 * as soon as they are).  The last stage's result is left in res. */
static soren_status run_stages(const soren_plugin *p, const soren_stage_spec *specs,
                               size_t stages, soren_device_choice where,
                               const soren_input *inputs, size_t input_count,
                               const soren_params *params, const soren_run_options *o,
                               soren_result *res, soren_explain *xs,
                               char (*rules)[256], soren_error *err)
{
    soren_status rc = run_stage(&specs[0], where, inputs, input_count, params, o, res, &xs[0],
                                rules[0], sizeof rules[0], err);
    for (size_t i = 1; rc == SOREN_OK && i < stages; i++) {
        char name[64];
        snprintf(name, sizeof name, "(the pairs of stage %zu)", i);
        soren_input pairs;
        rc = soren_input_pairs(&pairs, name, res, err);
        soren_result_destroy(res);
        if (rc != SOREN_OK)
            return rc;
        if (o->verbose)
            soren_progress_say(o->progress, "soren-host: %s: stage %zu of %zu: %llu pairs\n",
                               p->manifest->name, i + 1, stages,
                               (unsigned long long)pairs.count);
        rc = run_stage(&specs[i], where, &pairs, 1, params, o, res, &xs[i], rules[i],
                       sizeof rules[i], err);
        soren_input_close(&pairs);
    }
    return rc;
}

soren_status soren_job_run(const soren_plugin *p, const soren_run_options *o, soren_error *err)
{
    const soren_manifest *m = p->manifest;
    soren_param_set params;
    soren_status rc = soren_param_set_build(&params, m, o->params, o->param_count, err);
    if (rc != SOREN_OK)
        return rc;

    size_t stages = soren_manifest_stages(m);
    soren_stage_spec specs[SOREN_MAX_STAGES];
    for (size_t i = 0; i < stages; i++)
        soren_stage_spec_init_at(&specs[i], m, &p->table->stages[i], i);
    /* --order and --top: both engines order and cut the result as the
     * stage says, so the last stage is where they go. */
    soren_stage_spec *last = &specs[stages - 1];
    if (o->order >= 0)
        last->order = (soren_order)o->order;
    if (o->top)
        last->limit = o->top;
    soren_device_choice where = SOREN_DEVICE_CPU;
    rc = choose_device(specs, stages, o, &where, err);

    size_t input_count = o->input_count ? o->input_count : 1;
    soren_input *inputs = calloc(input_count, sizeof *inputs);
    char *stdin_data = NULL;
    if (rc == SOREN_OK && !inputs)
        rc = soren_error_set(err, SOREN_ENOMEM, "out of memory");
    if (rc == SOREN_OK)
        rc = open_inputs(m, &specs[0], o, &params.params, inputs, &stdin_data, err);

    /* Both engines leave the result in the stage's order. */
    soren_result res;
    soren_result_init(&res, last);
    soren_explain xs[SOREN_MAX_STAGES] = {0};
    char rules[SOREN_MAX_STAGES][256];
    if (rc == SOREN_OK)
        rc = run_stages(p, specs, stages, where, inputs, input_count, &params.params, o, &res,
                        xs, rules, err);
    /* Pairs written to a terminal would mix with the progress line, so it
     * ends first; a file shows the writing as its last phase. */
    if (rc != SOREN_OK || !o->output || strcmp(o->output, "-") == 0)
        soren_progress_end(o->progress);
    else
        soren_progress_phase(o->progress, "write", 0);
    soren_output out = {0};
    if (rc == SOREN_OK)
        rc = soren_output_open(&out, o->output, err);
    if (rc == SOREN_OK)
        rc = soren_output_write(&out, &res, o->format, err);
    if (rc == SOREN_OK)
        rc = soren_output_commit(&out, err);
    else
        soren_output_abort(&out);
    soren_progress_end(o->progress);
    if (rc == SOREN_OK && o->verbose)
        fprintf(stderr, "soren-host: %s: %llu pairs written\n", m->name,
                (unsigned long long)res.count);
    /* Only a run that succeeded is explained: a failed one has its error. */
    if (rc == SOREN_OK && o->explain)
        soren_explain_print_stages(xs, stages, stderr);

    for (size_t i = 0; i < stages; i++)
        soren_explain_destroy(&xs[i]);
    soren_result_destroy(&res);
    for (size_t i = 0; inputs && i < input_count; i++)
        soren_input_close(&inputs[i]);
    free(inputs);
    free(stdin_data);
    soren_param_set_destroy(&params);
    return rc;
}
