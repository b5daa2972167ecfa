#include "job.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/result.h"
#include "../base/stage.h"
#include "../cpu/cpu.h"
#include "../io/input.h"
#include "../io/signals.h"
#include "../plugin/params.h"
#include "iterate.h"

/* Standard input is read whole: it cannot be mapped, and records may span
 * any two reads. */
static soren_status slurp_stdin(soren_progress *progress, int fd, char **out, size_t *size,
                                soren_error *err)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    soren_progress_phase(progress, "read", 0);
    for (;;) {
        if (!buf)
            return soren_error_set(err, SOREN_ENOMEM, "out of memory reading standard input");
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int e = errno;
            free(buf);
            return soren_error_errno(err, SOREN_EINPUT, e, "cannot read standard input");
        }
        if (got == 0)
            break;
        n += (size_t)got;
        soren_progress_add(progress, (uint64_t)got);
        if (n < cap)
            continue;
        char *bigger = realloc(buf, cap *= 2);
        if (!bigger)
            free(buf);
        buf = bigger;
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
                                  const soren_run_options *o, soren_device *where,
                                  int *gpu, soren_error *err)
{
    char why[256] = "", unsupported_buf[256];
    int gpus = o->device == SOREN_DEVICE_CPU ? 0 : soren_device_count(why, sizeof why);
    const char *unsupported =
        gpus > 0 ? gpu_unsupported(specs, stages, unsupported_buf, sizeof unsupported_buf) : NULL;
    if (unsupported)
        snprintf(why, sizeof why, "%s", unsupported);
    int gpu_ok = gpus > 0 && !unsupported;

    if ((o->device == SOREN_DEVICE_GPU || o->device == SOREN_DEVICE_BOTH) && !gpu_ok)
        return soren_error_set(err, SOREN_EDEVICE, "--device %s: %s: %s; use --device cpu or "
                               "auto", o->device == SOREN_DEVICE_GPU ? "gpu" : "both",
                               gpus > 0 ? "the GPU cannot run this job" : "no usable GPU", why);
    *where = gpu_ok ? SOREN_DEVICE_GPU : SOREN_DEVICE_CPU;
    /* The ranks of a host share its GPUs, one each while there are enough. */
    *gpu = gpu_ok && o->comm ? o->comm->local_rank % gpus : 0;
    if (o->verbose) {
        if (gpu_ok)
            soren_progress_say(o->progress, "soren-host: device: gpu %d of %d\n", *gpu, gpus);
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

static soren_status fold_received(const soren_stage_spec *spec, const soren_input *received,
                                  const soren_params *params, const soren_run_options *o,
                                  soren_result *res, soren_error *err);

/* Pairs that hold a key's values in several pairs (src, destroyed here;
 * what names them) folded into res with the stage's combine on the CPU
 * engine, which also runs the reduce function and orders, as a rank of a
 * distributed run folds what it received: both engines' shares under
 * --device both. */
static soren_status fold_pairs(const soren_stage_spec *spec, const char *what, soren_result *src,
                               const soren_params *params, const soren_run_options *o,
                               soren_result *res, soren_error *err)
{
    soren_input pairs;
    soren_status rc = soren_input_pairs(&pairs, what, src, err);
    soren_result_destroy(src);
    if (rc != SOREN_OK)
        return rc;
    soren_progress_phase(o->progress, "fold", 0);
    rc = fold_received(spec, &pairs, params, o, res, err);
    soren_input_close(&pairs);
    return rc;
}

/* A stage on the GPU: one run, or a run of the session in *session (the
 * library's jobs keep one per stage), made anew where the stage or the
 * options changed. */
static soren_status run_gpu(const soren_stage_spec *spec, const soren_input *inputs,
                            size_t input_count, const soren_params *params,
                            const soren_run_options *o, soren_gpu_session **session,
                            soren_result *res, soren_explain *x, soren_error *err)
{
    soren_gpu_options gpu = o->gpu;
    if (soren_variant_parse(o->engine ? o->engine : "auto", &gpu.variant) != 0)
        return soren_error_set(err, SOREN_EUSAGE, "--engine %s: expected one of %s", o->engine,
                               soren_engine_names);
    gpu.sample = o->sample;
    gpu.small_keys = o->small_keys;
    gpu.progress = o->progress;
    gpu.device_memory = o->device_memory;
    x->device = "gpu";
    soren_status rc = SOREN_OK;
    if (!session) {
        rc = soren_gpu_run(spec, inputs, input_count, params, &gpu, res, x, err);
    } else {
        if (*session && !soren_gpu_session_fits(*session, spec, &gpu)) {
            soren_gpu_session_free(*session);
            *session = NULL;
        }
        if (!*session)
            rc = soren_gpu_session_new(spec, &gpu, session, err);
        if (rc == SOREN_OK)
            rc = soren_gpu_session_run(*session, inputs, input_count, params,
                                       o->param_versions, o->progress, res, x, err);
    }
    if (rc == SOREN_OK && x->key_parts > 1 && o->verbose)
        soren_progress_say(o->progress, "soren-host: gpu engine: the table folded the key space "
                           "in %llu parts under --device-memory (%llu passes began again on "
                           "half their part)\n", (unsigned long long)x->key_parts,
                           (unsigned long long)x->narrowings);
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

/* Sets the key count of every stage whose index keys are counted by
 * parameters (stage_spec_init leaves it 0, which no key is under). */
static soren_status stage_key_counts(const soren_manifest *m, soren_stage_spec *specs,
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

/* The CLI's inputs: the INPUT files, or standard input when none is given
 * (an index job takes none), laid end to end.  *count is how many were
 * opened. */
static soren_status open_cli_inputs(const soren_manifest *m, const soren_run_options *o,
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

/* Stage 1's inputs as the engines read them: an index job's tasks (made
 * here, in *tasks), or the data inputs checked against the record format. */
static soren_status stage_inputs(const soren_manifest *m, const soren_stage_spec *spec,
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

/* ---- Inputs larger than the device's memory ------------------------------ */

/* Of a device memory budget, the share one chunk of input takes: the rest
 * holds its record index (8 bytes a line), the tables, the key space and
 * CUB's scratch. */
enum { CHUNK_SHARE = 4 };

/* The most bytes of a chunk on the GPU: an input that fits whole still goes
 * in chunks, so that each one's copy overlaps the map of the one before
 * instead of the whole input's copy preceding the map. */
enum { CHUNK_MOST = 256 << 20 };

/* --device both cuts stage 1's input into this many pieces (none under
 * BOTH_PIECE_MIN bytes), so that the engines can share them by their rates. */
enum { BOTH_PIECES = 32, BOTH_PIECE_MIN = 1 << 20 };

/* The device memory a run on where may take: --device-memory, else on the
 * GPU its free memory less an eighth (the CUDA context, other processes'
 * allocations meanwhile); 0 (no budget) on the CPU engine without it. */
static soren_status memory_budget(const soren_run_options *o, soren_device where,
                                  uint64_t *budget, soren_error *err)
{
    *budget = o->device_memory;
    if (*budget || where != SOREN_DEVICE_GPU)
        return SOREN_OK;
    uint64_t free_bytes = 0;
    char why[256];
    if (soren_device_free_memory(o->gpu.device, &free_bytes, why, sizeof why) != 0)
        return soren_error_set(err, SOREN_EDEVICE, "cannot read the free memory of GPU %d: %s; "
                               "give --device-memory SIZE, or run with --device cpu",
                               o->gpu.device, why);
    *budget = free_bytes - free_bytes / 8;
    return SOREN_OK;
}

/* Stage 1's inputs cut into chunks of budget / CHUNK_SHARE bytes, at most
 * CHUNK_MOST, where one is larger than that (lines and fixed records in
 * host memory; the others stay whole), so that the engine maps them one
 * after another into the same tables.  *chunks stays NULL when nothing is
 * cut; c says how. */
static soren_status plan_chunks(const soren_stage_spec *spec, const soren_run_options *o,
                                soren_device where, const soren_input *inputs, size_t n,
                                soren_input **chunks, size_t *count, soren_chunking *c,
                                soren_error *err)
{
    *chunks = NULL;
    *count = 0;
    memset(c, 0, sizeof *c);
    if (spec->input_format != SOREN_INPUT_LINES && spec->input_format != SOREN_INPUT_FIXED)
        return SOREN_OK;
    for (size_t i = 0; i < n; i++)
        if (inputs[i].on_device)
            return SOREN_OK;
    uint64_t budget = 0;
    soren_status rc = memory_budget(o, where, &budget, err);
    if (rc != SOREN_OK || budget == 0)
        return rc;
    uint64_t chunk = budget / CHUNK_SHARE ? budget / CHUNK_SHARE : 1;
    if (where == SOREN_DEVICE_GPU && chunk > CHUNK_MOST)
        chunk = CHUNK_MOST;
    if (o->device == SOREN_DEVICE_BOTH) {
        /* pieces enough for the two engines to share by their rates */
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += inputs[i].size;
        uint64_t piece = (total + BOTH_PIECES - 1) / BOTH_PIECES;
        piece = piece > BOTH_PIECE_MIN ? piece : BOTH_PIECE_MIN;
        chunk = piece < chunk ? piece : chunk;
    }
    int cut = 0;
    for (size_t i = 0; i < n; i++)
        cut |= inputs[i].size > chunk;
    if (!cut)
        return SOREN_OK;
    uint64_t largest = 0;
    rc = soren_input_chunks(spec, inputs, n, chunk, chunks, count, &largest, err);
    if (rc != SOREN_OK)
        return rc;
    *c = (soren_chunking){.budget = budget, .chunk_bytes = chunk, .count = *count,
                          .largest = largest};
    if (o->verbose)
        soren_progress_say(o->progress, "soren-host: input: %zu chunks of about %llu bytes "
                           "(the largest %llu) for a device memory budget of %llu bytes\n",
                           *count, (unsigned long long)chunk, (unsigned long long)largest,
                           (unsigned long long)budget);
    return SOREN_OK;
}

static soren_status run_both(const soren_stage_spec *spec, const soren_input *inputs,
                             size_t input_count, const soren_params *params,
                             const soren_run_options *o, soren_gpu_session **session,
                             soren_result *res, soren_explain *x, soren_error *err);

/* One stage on the chosen device, its result left in res (initialised
 * here) in the stage's order; under --device both, stage 1 on the GPU and
 * the CPU engine together, the later stages on the GPU. */
static soren_status run_stage(const soren_stage_spec *spec, size_t index, soren_device where,
                              const soren_input *inputs, size_t input_count,
                              const soren_params *params, const soren_run_options *o,
                              soren_result *res, soren_explain *x, char *rule, size_t rule_size,
                              soren_error *err)
{
    soren_result_init(res, spec);
    soren_status cancelled = soren_progress_check(o->progress, spec->job_name, err);
    if (cancelled != SOREN_OK)
        return cancelled;
    x->job = spec->job_name;
    soren_gpu_session **session = o->gpu_sessions ? &o->gpu_sessions[index] : NULL;
    if (where == SOREN_DEVICE_GPU && index == 0 && o->device == SOREN_DEVICE_BOTH)
        return run_both(spec, inputs, input_count, params, o, session, res, x, err);
    if (where == SOREN_DEVICE_GPU)
        return run_gpu(spec, inputs, input_count, params, o, session, res, x, err);
    return run_cpu(spec, inputs, input_count, params, o, res, x, rule, rule_size, err);
}

/* Runs every stage: stage 1 over the inputs, each later stage over the
 * pairs of the one before (packed by soren_input_pairs, its result freed
 * as soon as they are).  The last stage's result is left in res. */
static soren_status run_stages(const soren_plugin *p, const soren_stage_spec *specs,
                               size_t stages, soren_device where,
                               const soren_input *inputs, size_t input_count,
                               const soren_params *params, const soren_run_options *o,
                               soren_result *res, soren_explain *xs,
                               char (*rules)[256], soren_error *err)
{
    soren_status rc = run_stage(&specs[0], 0, where, inputs, input_count, params, o, res, &xs[0],
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
        rc = run_stage(&specs[i], i, where, &pairs, 1, params, o, res, &xs[i], rules[i],
                       sizeof rules[i], err);
        soren_input_close(&pairs);
    }
    return rc;
}

/* ---- A distributed run (dist.h) ------------------------------------------ */

/* A stage's pairs go to their keys' ranks where some key needs all its
 * values in one place: to combine them, or to reduce them. */
static int stage_shuffles(const soren_stage_spec *s)
{
    return s->combine != SOREN_COMBINE_NONE || s->reduce != SOREN_REDUCE_NONE;
}

/* What a rank runs over its share: the stage without its reduce function
 * (which needs every value of a key) and without an order (the fold after
 * the shuffle orders), or a map-only stage as it is. */
static soren_stage_spec local_spec(const soren_stage_spec *s)
{
    soren_stage_spec l = *s;
    if (!stage_shuffles(s))
        return l;
    if (l.reduce == SOREN_REDUCE_FUNCTION)
        l.reduce = l.combine != SOREN_COMBINE_NONE ? SOREN_REDUCE_COMBINE : SOREN_REDUCE_NONE;
    l.order = SOREN_ORDER_NONE;
    l.limit = 0;
    return l;
}

/* Folds the pairs a rank received with the stage's combine and reduces its
 * keys on the CPU engine (the GPU engine has no fold), then orders them as
 * the stage says: by key before a later stage, which numbers them. */
static soren_status fold_received(const soren_stage_spec *spec, const soren_input *received,
                                  const soren_params *params, const soren_run_options *o,
                                  soren_result *res, soren_error *err)
{
    soren_stage_spec f = *spec;
    f.input_format = SOREN_INPUT_PAIRS;
    f.record_size = 0;
    soren_cpu_options cpu = {.threads = o->threads, .distinct_keys = received->count, .fold = 1};
    soren_status rc = soren_cpu_run(&f, received, 1, params, &cpu, res, err);
    if (rc == SOREN_OK)
        rc = soren_result_order(res, spec->order, spec->limit, err);
    return rc;
}

/* ---- Co-processing: --device both (the Mars paper, section 4.4) ---------- */

/* Some of stage 1's pieces, mapped on one engine, on a thread of its own. */
typedef struct both_share {
    const soren_stage_spec *spec; /* local_spec: the fold reduces and orders */
    soren_device where;
    const soren_input *inputs;
    size_t count;
    uint64_t bytes;
    const soren_params *params;
    soren_run_options o;
    soren_gpu_session **session; /* the GPU's, kept from the probe to the rest */
    soren_result res;
    soren_explain x;
    char rule[256];
    soren_error err;
    soren_status rc;
    double ms; /* the engine's time: the GPU's phases (its setup left out), the CPU's wall */
} both_share;

static void *both_share_main(void *arg)
{
    both_share *b = arg;
    memset(&b->x, 0, sizeof b->x);
    b->x.job = b->spec->job_name;
    soren_result_init(&b->res, b->spec);
    double t0 = now_ms();
    if (b->where == SOREN_DEVICE_GPU) {
        b->rc = run_gpu(b->spec, b->inputs, b->count, b->params, &b->o, b->session, &b->res,
                        &b->x, &b->err);
        const soren_phase_times *t = &b->x.ms;
        b->ms = t->upload + t->split + t->monitor + t->map + t->merge + t->reduce + t->sort +
                t->download;
    } else {
        b->rc = run_cpu(b->spec, b->inputs, b->count, b->params, &b->o, &b->res, &b->x,
                        b->rule, sizeof b->rule, &b->err);
        b->ms = now_ms() - t0;
    }
    return NULL;
}

/* Runs the GPU's share on this thread and the CPU's beside it. */
static void both_run(both_share *gpu, both_share *cpu)
{
    pthread_t tid;
    int started = cpu->count && pthread_create(&tid, NULL, both_share_main, cpu) == 0;
    if (gpu->count)
        both_share_main(gpu);
    if (started)
        pthread_join(tid, NULL);
    else if (cpu->count)
        both_share_main(cpu); /* no thread: one after the other */
}

static soren_status both_take(both_share *b, soren_result *all, soren_explain *x,
                              soren_error *err)
{
    soren_status rc = b->rc;
    if (b->count && rc != SOREN_OK)
        soren_error_set(err, rc, "%s (the %s's share of --device both)", b->err.text,
                        b->where == SOREN_DEVICE_GPU ? "GPU" : "CPU engine");
    if (b->count && rc == SOREN_OK)
        rc = soren_result_append_all(all, &b->res, err);
    if (b->count && b->where == SOREN_DEVICE_GPU && rc == SOREN_OK) {
        soren_explain_destroy(x);
        *x = b->x; /* stage 1's report is the GPU's, with the sharing beside it */
        memset(&b->x, 0, sizeof b->x);
    }
    soren_result_destroy(&b->res);
    soren_explain_destroy(&b->x);
    return b->count ? rc : SOREN_OK;
}

/* Stage 1 on both engines: a probe piece each, at once, measures their
 * rates; the other pieces go to them in proportion, the GPU's first; the
 * CPU engine folds both engines' pairs (as a rank of a distributed run
 * folds what it received), reduces and orders. */
static soren_status run_both(const soren_stage_spec *spec, const soren_input *inputs,
                             size_t input_count, const soren_params *params,
                             const soren_run_options *o, soren_gpu_session **session,
                             soren_result *res, soren_explain *x, soren_error *err)
{
    if (input_count < 2) {
        if (o->verbose)
            soren_progress_say(o->progress, "soren-host: --device both: the input is one "
                               "piece (under %d bytes); it runs on the GPU alone\n",
                               2 * BOTH_PIECE_MIN);
        return run_gpu(spec, inputs, input_count, params, o, session, res, x, err);
    }
    soren_stage_spec l = local_spec(spec);
    soren_gpu_session *own = NULL;
    both_share gpu = {.spec = &l, .where = SOREN_DEVICE_GPU, .params = params, .o = *o,
                      .session = session ? session : &own};
    both_share cpu = {.spec = &l, .where = SOREN_DEVICE_CPU, .params = params, .o = *o};
    /* The progress line is the GPU's; the CPU engine's threads leave it be. */
    cpu.o.progress = NULL;
    cpu.o.verbose = 0;
    soren_result all;
    soren_result_init(&all, &l);
    soren_status rc = SOREN_OK;
    double gpu_ms = 0, cpu_ms = 0;
    uint64_t gpu_bytes = 0, cpu_bytes = 0;
    for (int round = 0; round < 2 && rc == SOREN_OK; round++) {
        if (round == 0) { /* the probe: a piece each */
            gpu.inputs = &inputs[0], gpu.count = 1, gpu.bytes = inputs[0].size;
            cpu.inputs = &inputs[1], cpu.count = 1, cpu.bytes = inputs[1].size;
        } else { /* the rest, in proportion to the rates */
            uint64_t rest = 0;
            for (size_t i = 2; i < input_count; i++)
                rest += inputs[i].size;
            double g = gpu_ms > 0 ? (double)gpu_bytes / gpu_ms : 1;
            double c = cpu_ms > 0 ? (double)cpu_bytes / cpu_ms : 0;
            double want = (double)rest * g / (g + c);
            size_t k = 2;
            uint64_t taken = 0;
            while (k < input_count && (double)taken + (double)inputs[k].size / 2 < want)
                taken += inputs[k++].size;
            gpu.inputs = &inputs[2], gpu.count = k - 2, gpu.bytes = taken;
            cpu.inputs = &inputs[k], cpu.count = input_count - k, cpu.bytes = rest - taken;
        }
        both_run(&gpu, &cpu);
        gpu_ms += gpu.count ? gpu.ms : 0, gpu_bytes += gpu.count ? gpu.bytes : 0;
        cpu_ms += cpu.count ? cpu.ms : 0, cpu_bytes += cpu.count ? cpu.bytes : 0;
        soren_error ignored; /* the CPU's error, where the GPU's is told */
        soren_status g = both_take(&gpu, &all, x, err);
        soren_status c = both_take(&cpu, &all, x, g == SOREN_OK ? err : &ignored);
        rc = g != SOREN_OK ? g : c;
    }
    soren_gpu_session_free(own);
    x->sharing = (soren_sharing){.gpu_bytes = gpu_bytes, .cpu_bytes = cpu_bytes,
                                 .gpu_ms = gpu_ms, .cpu_ms = cpu_ms};
    if (rc == SOREN_OK && o->verbose)
        soren_progress_say(o->progress, "soren-host: --device both: the GPU mapped %llu bytes "
                           "in %.1f ms, the CPU engine %llu bytes in %.1f ms\n",
                           (unsigned long long)gpu_bytes, gpu_ms,
                           (unsigned long long)cpu_bytes, cpu_ms);
    if (rc != SOREN_OK) {
        soren_result_destroy(&all);
        return rc;
    }
    double t0 = now_ms();
    rc = fold_pairs(spec, "(both engines' pairs)", &all, params, o, res, err);
    x->sharing.fold_ms = now_ms() - t0;
    return rc;
}

/* One stage on one rank: map its share (unless prior failed), agree, and
 * where the stage shuffles, exchange, fold and agree again.  res (its
 * share of the stage's output, in the stage's order) is initialised here. */
static soren_status run_stage_dist(const soren_stage_spec *spec, size_t index, soren_device where,
                                   const soren_input *inputs, size_t input_count,
                                   const soren_params *params, const soren_run_options *o,
                                   soren_status prior, soren_result *res, soren_explain *x,
                                   char *rule, size_t rule_size, soren_rank_stage *st,
                                   soren_error *err)
{
    const soren_comm *c = o->comm;
    soren_stage_spec l = local_spec(spec);
    soren_result_init(res, spec);
    st->gpu = where == SOREN_DEVICE_GPU;
    st->shuffled = (uint32_t)stage_shuffles(spec);
    double t0 = now_ms();
    soren_status rc = prior;
    if (rc == SOREN_OK)
        rc = run_stage(&l, index, where, inputs, input_count, params, o, res, x, rule, rule_size,
                       err);
    st->ms_map = now_ms() - t0;
    st->mapped = st->pairs = res->count;
    rc = soren_dist_agree(c, rc, err);
    if (rc != SOREN_OK || !st->shuffled)
        return rc;

    soren_progress_phase(o->progress, "shuffle", 0);
    soren_input received;
    rc = soren_dist_shuffle(c, res, &received, &st->sent_bytes, err);
    soren_result_destroy(res);
    double t1 = now_ms();
    st->ms_exchange = t1 - t0 - st->ms_map;
    if (rc != SOREN_OK)
        return rc;
    st->received = received.count;
    soren_progress_phase(o->progress, "fold", 0);
    soren_result_init(res, spec);
    rc = fold_received(spec, &received, params, o, res, err);
    soren_input_close(&received);
    st->pairs = res->count;
    st->ms_fold = now_ms() - t1;
    return soren_dist_agree(c, rc, err);
}

/* run_stages for one rank of a distributed run: each later stage maps this
 * rank's pairs of the stage before, numbered after those of the ranks
 * before it.  Its share of the last stage's output is left in res. */
static soren_status run_stages_dist(const soren_plugin *p, const soren_stage_spec *specs,
                                    size_t stages, soren_device where,
                                    const soren_input *inputs, size_t input_count,
                                    const soren_params *params, const soren_run_options *o,
                                    soren_result *res, soren_explain *xs, char (*rules)[256],
                                    soren_rank_stage *stats, soren_error *err)
{
    soren_status rc = run_stage_dist(&specs[0], 0, where, inputs, input_count, params, o, SOREN_OK,
                                     res, &xs[0], rules[0], sizeof rules[0], &stats[0], err);
    for (size_t i = 1; rc == SOREN_OK && i < stages; i++) {
        uint64_t first = 0;
        rc = soren_dist_first(o->comm, res->count, &first, err);
        if (rc != SOREN_OK)
            return rc;
        char name[64];
        snprintf(name, sizeof name, "(the pairs of stage %zu)", i);
        soren_input pairs;
        soren_status packed = soren_input_pairs(&pairs, name, res, err);
        pairs.base = first;
        stats[i].begin = first;
        stats[i].end = first + res->count;
        soren_result_destroy(res);
        if (o->verbose)
            soren_progress_say(o->progress, "soren-host: %s: stage %zu of %zu: %llu pairs on "
                               "rank 0\n", p->manifest->name, i + 1, stages,
                               (unsigned long long)pairs.count);
        rc = run_stage_dist(&specs[i], i, where, &pairs, 1, params, o, packed, res, &xs[i],
                            rules[i], sizeof rules[i], &stats[i], err);
        soren_input_close(&pairs);
    }
    return rc;
}

/* The whole result from every rank's share: on rank 0, or on every rank
 * with to_all, in the last stage's order. */
static soren_status gather_whole(const soren_run_options *o, const soren_stage_spec *last,
                                 const soren_result *share, int to_all, soren_result *whole,
                                 soren_error *err)
{
    soren_result_init(whole, last);
    soren_status rc = soren_dist_gather(o->comm, share, to_all, whole, err);
    if (rc != SOREN_OK)
        return rc;
    if (to_all || o->comm->rank == 0)
        rc = soren_result_order(whole, last->order, last->limit, err);
    return soren_dist_agree(o->comm, rc, err);
}

/* Rank 0 gets every rank's stats: all[stage * ranks + rank]; all may be
 * NULL on rank 0 (out of memory: no report), and is unused elsewhere. */
static soren_status gather_stats(const soren_comm *c, const soren_rank_stage *mine,
                                 size_t stages, soren_rank_stage *all, soren_error *err)
{
    for (size_t s = 0; s < stages; s++) {
        soren_rank_stage *row = c->rank == 0 && all ? all + s * (size_t)c->size : NULL;
        soren_status rc = soren_dist_gather_fixed(c, &mine[s], sizeof mine[s], row, err);
        if (rc != SOREN_OK)
            return rc;
    }
    return SOREN_OK;
}

/* --verbose on rank 0: what every rank did in every stage. */
static void say_ranks(const soren_distributed *d, size_t stages)
{
    for (size_t s = 0; s < stages; s++)
        for (int r = 0; r < d->ranks; r++) {
            const soren_rank_stage *st = &d->stages[s * (size_t)d->ranks + r];
            fprintf(stderr, "soren-host: rank %d of %d: stage %zu: %s engine, %s [%llu, %llu), "
                    "%llu pairs mapped", r, d->ranks, s + 1, st->gpu ? "gpu" : "cpu",
                    s ? "pairs" : "input", (unsigned long long)st->begin,
                    (unsigned long long)st->end, (unsigned long long)st->mapped);
            if (st->shuffled)
                fprintf(stderr, ", %llu bytes sent, %llu pairs received",
                        (unsigned long long)st->sent_bytes, (unsigned long long)st->received);
            fprintf(stderr, ", %llu pairs out; ms: map %.3f, exchange %.3f, fold %.3f\n",
                    (unsigned long long)st->pairs, st->ms_map, st->ms_exchange, st->ms_fold);
        }
}

/* OUTPUT.part-R-of-N, R with as many digits as N - 1 so that the parts
 * list in rank order (malloc'd; NULL when out of memory). */
static char *part_path(const char *output, int rank, int ranks)
{
    int width = snprintf(NULL, 0, "%d", ranks - 1);
    size_t size = strlen(output) + 2 * 12 + 16;
    char *path = malloc(size);
    if (path)
        snprintf(path, size, "%s.part-%0*d-of-%d", output, width, rank, ranks);
    return path;
}

/* --output-parts needs a file name to add to, and no limit: a limit cuts
 * the whole result, which no rank holds. */
static soren_status check_parts(const soren_manifest *m, const soren_stage_spec *last,
                                const soren_run_options *o, soren_error *err)
{
    if (!o->output_parts)
        return SOREN_OK;
    if (!o->output || strcmp(o->output, "-") == 0)
        return soren_error_set(err, SOREN_EUSAGE, "--output-parts writes OUTPUT.part-R-of-N, one "
                               "file per rank: give -o OUTPUT");
    if (last->limit)
        return soren_error_set(err, SOREN_EUSAGE, "--output-parts: %s keeps the first %llu pairs "
                               "(%s), a cut of the whole result that no rank holds: run it "
                               "without --output-parts%s", m->name,
                               (unsigned long long)last->limit,
                               o->top ? "--top" : "its manifest's output.limit",
                               o->top ? ", or without --top" : "");
    return SOREN_OK;
}

/* The parameter --iterate feeds (its index in *param), or why the job
 * cannot iterate; *param is -1 without --iterate. */
static soren_status iterate_param(const soren_manifest *m, const soren_run_options *o,
                                  int *param, soren_error *err)
{
    *param = -1;
    if (!o->iterate)
        return SOREN_OK;
    if (!m->iterate_param)
        return soren_error_set(err, SOREN_EUSAGE, "--iterate applies to jobs whose manifest has "
                               "\"iterate\" (the parameter each run's output feeds); %s has "
                               "none: run it without --iterate", m->name);
    *param = soren_manifest_param_index(m, m->iterate_param);
    return SOREN_OK;
}

/* The reports of one run, emptied for the next (engines add to them). */
static void explains_reset(soren_explain *xs, size_t stages)
{
    for (size_t i = 0; i < stages; i++) {
        soren_explain_destroy(&xs[i]);
        memset(&xs[i], 0, sizeof xs[i]);
    }
}

/* Runs the stages once or, with --iterate N, up to N times: after each run
 * its output is written over the elements of parameter `param` for the
 * next, and after the last only compared with them, so that a run that
 * changes no byte is known to have converged (and ends the loop early).
 * The last run's result is left in res, its reports in xs.  In a
 * distributed run res is this rank's share; with --iterate the whole result
 * is gathered on every rank into whole (which feeds the parameter, the same
 * bytes everywhere, so every rank decides alike) and left there. */
static soren_status run_iterations(const soren_plugin *p, const soren_stage_spec *specs,
                                   size_t stages, soren_device where,
                                   const soren_input *inputs, size_t input_count,
                                   soren_param_set *params, int param,
                                   const soren_run_options *o, soren_result *res,
                                   soren_result *whole, soren_explain *xs, char (*rules)[256],
                                   soren_rank_stage *stats, soren_iterations *it,
                                   soren_error *err)
{
    const soren_manifest *m = p->manifest;
    char what[160];
    snprintf(what, sizeof what, "%s: parameter %s", m->name, param >= 0 ? m->iterate_param : "");
    *it = (soren_iterations){.limit = o->iterate};
    for (uint64_t run = 1;; run++) {
        if (o->verbose && o->iterate)
            soren_progress_say(o->progress, "soren-host: %s: iteration %llu of %llu\n", m->name,
                               (unsigned long long)run, (unsigned long long)o->iterate);
        soren_status rc =
            o->comm ? run_stages_dist(p, specs, stages, where, inputs, input_count,
                                      &params->params, o, res, xs, rules, stats, err)
                    : run_stages(p, specs, stages, where, inputs, input_count, &params->params,
                                 o, res, xs, rules, err);
        if (rc != SOREN_OK || !o->iterate)
            return rc;
        if (o->comm && (rc = gather_whole(o, &specs[stages - 1], res, 1, whole, err)) != SOREN_OK)
            return rc;
        it->runs = run;
        int last = run == o->iterate, changed = 0;
        rc = soren_iterate_feed(o->comm ? whole : res, params->owned[param],
                                params->params.size[param], what, !last, &changed, err);
        if (rc != SOREN_OK)
            return rc;
        it->converged = !changed;
        if (!changed || last)
            return SOREN_OK;
        soren_result_destroy(res);
        soren_result_destroy(whole);
        explains_reset(xs, stages);
    }
}

/* Says how an iteration ended. */
static void say_iterations(FILE *to, const soren_manifest *m, const soren_iterations *it)
{
    if (it->converged)
        fprintf(to, "soren-host: %s: converged after %llu of at most %llu runs (the last "
                "run's output changed no byte of parameter %s)\n", m->name,
                (unsigned long long)it->runs, (unsigned long long)it->limit, m->iterate_param);
    else
        fprintf(to, "soren-host: %s: not converged after --iterate %llu: the last run's "
                "output still changed parameter %s\n", m->name,
                (unsigned long long)it->limit, m->iterate_param);
}

/* Writes r to out, opened on path (standard output for NULL or "-") by
 * soren_run before the job ran where this rank writes, and commits it; in a distributed run every rank agrees before
 * any renames its file into place, and a rank whose rename failed fails
 * them all, each removing what it committed, so a failed run leaves no
 * part behind. */
static soren_status write_output(const soren_run_options *o, const char *path,
                                 soren_output *out, int writes, const soren_result *r,
                                 soren_error *err)
{
    soren_status rc = SOREN_OK;
    if (writes)
        rc = soren_output_write(out, r, o->format, err);
    if (o->comm)
        rc = soren_dist_agree(o->comm, rc, err);
    int committed = 0;
    if (writes && rc == SOREN_OK)
        committed = (rc = soren_output_commit(out, err)) == SOREN_OK;
    else
        soren_output_abort(out);
    if (!o->comm)
        return rc;
    rc = soren_dist_agree(o->comm, rc, err);
    if (rc != SOREN_OK && committed && path && strcmp(path, "-") != 0)
        unlink(path);
    return rc;
}

/* After a distributed run: rank 0 reports every rank's part (--verbose,
 * --explain); every rank takes part in gathering the numbers. */
static soren_status report_ranks(const soren_run_options *o, const soren_rank_stage *stats,
                                 size_t stages, soren_rank_stage **all, soren_error *err)
{
    const soren_comm *c = o->comm;
    *all = c->rank == 0 ? calloc(stages * (size_t)c->size, sizeof **all) : NULL;
    soren_status rc = gather_stats(c, stats, stages, *all, err);
    if (rc == SOREN_OK && *all && o->verbose)
        say_ranks(&(soren_distributed){.ranks = c->size, .stages = *all}, stages);
    return rc;
}

void soren_run_outcome_destroy(soren_run_outcome *out)
{
    for (size_t i = 0; i < SOREN_MAX_STAGES; i++)
        soren_explain_destroy(&out->stages[i]);
    soren_result_destroy(&out->result);
    memset(out, 0, sizeof *out);
}

soren_status soren_run_inputs(const soren_plugin *p, const soren_run_options *opt,
                              soren_param_set *params, const soren_input *inputs,
                              size_t input_count, soren_run_outcome *out, soren_error *err)
{
    const soren_manifest *m = p->manifest;
    const soren_comm *comm = opt->comm;
    /* choose_device sets the GPU a rank runs on; --iterate, the sessions */
    soren_run_options ro = *opt;
    const soren_run_options *o = &ro;
    memset(out, 0, sizeof *out);
    size_t stages = soren_manifest_stages(m);
    out->stage_count = stages;
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
    soren_result_init(&out->result, last);
    int param = -1;
    soren_status rc = stage_key_counts(m, specs, stages, &params->params, err);
    if (rc == SOREN_OK)
        rc = iterate_param(m, o, &param, err);
    if (rc == SOREN_OK)
        rc = check_parts(m, last, o, err);
    soren_device where = SOREN_DEVICE_CPU;
    if (rc == SOREN_OK)
        rc = choose_device(specs, stages, o, &where, &ro.gpu.device, err);
    for (size_t i = 0; rc == SOREN_OK && i < input_count; i++)
        if (inputs[i].on_device && where != SOREN_DEVICE_GPU)
            rc = soren_error_set(err, SOREN_EDEVICE, "%s: an input in device memory "
                                 "(soren_job_input_device) needs the GPU engine, and the job "
                                 "runs on the CPU engine here", m->name);
    soren_input tasks = {0};
    const soren_input *use = NULL;
    size_t use_count = 0;
    if (rc == SOREN_OK)
        rc = stage_inputs(m, &specs[0], o, &params->params, inputs, input_count, &tasks, &use,
                          &use_count, err);
    soren_input *slices = NULL;
    if (rc == SOREN_OK && comm && !(slices = calloc(use_count ? use_count : 1, sizeof *slices)))
        rc = soren_error_set(err, SOREN_ENOMEM, "out of memory");
    if (rc == SOREN_OK && comm)
        soren_dist_slice(comm, &specs[0], use, use_count, slices, &out->ranks[0].begin,
                         &out->ranks[0].end);
    const soren_input *stage1 = comm ? slices : use;
    size_t stage1_count = use_count;
    soren_input *chunks = NULL;
    size_t chunk_count = 0;
    soren_chunking chunking = {0};
    if (rc == SOREN_OK)
        rc = plan_chunks(&specs[0], o, where, stage1, use_count, &chunks, &chunk_count,
                         &chunking, err);
    if (chunks) {
        stage1 = chunks;
        stage1_count = chunk_count;
    }
    /* Every rank got this far: from here on they fail together. */
    if (comm)
        rc = soren_dist_agree(comm, rc, err);

    /* Both engines leave the result in the stage's order.  A distributed
     * run leaves this rank's share in out->result, and the whole result in
     * whole where it is written whole (gathered on rank 0; with --iterate on
     * every rank). */
    soren_result whole;
    soren_result_init(&whole, last);
    /* The iterations keep a GPU session per stage, as a library job does:
     * a stage sets up, monitors and sizes once, and its later runs wait
     * for the GPU as little as they can. */
    soren_gpu_session *sessions[SOREN_MAX_STAGES] = {0};
    if (ro.iterate && !ro.gpu_sessions)
        ro.gpu_sessions = sessions;
    if (rc == SOREN_OK)
        rc = run_iterations(p, specs, stages, where, stage1, stage1_count, params, param, o,
                            &out->result, &whole, out->stages, out->rules, out->ranks,
                            &out->iterations, err);
    for (size_t i = 0; i < SOREN_MAX_STAGES; i++)
        soren_gpu_session_free(sessions[i]);
    if (rc == SOREN_OK) { /* the plan, with the engine's timing of it */
        chunking.inputs_ms = out->stages[0].chunks.inputs_ms;
        out->stages[0].chunks = chunking;
    }
    if (rc == SOREN_OK && comm && !o->iterate && !o->output_parts)
        rc = gather_whole(o, last, &out->result, 0, &whole, err);
    if (comm && !o->output_parts) {
        soren_result_destroy(&out->result);
        out->result = whole;
    } else {
        soren_result_destroy(&whole);
    }
    soren_input_chunks_free(chunks, chunk_count);
    for (size_t i = 0; slices && i < use_count; i++)
        soren_input_close(&slices[i]);
    free(slices);
    soren_input_close(&tasks);
    return rc;
}

soren_status soren_run(const soren_plugin *p, const soren_run_options *opt, soren_error *err)
{
    const soren_manifest *m = p->manifest;
    const soren_comm *comm = opt->comm;
    /* Only rank 0 of a distributed run speaks. */
    int speaks = !comm || comm->rank == 0;
    soren_run_options ro = *opt;
    ro.verbose = opt->verbose && speaks;
    const soren_run_options *o = &ro;
    soren_param_set params;
    /* A failed build leaves params empty, so the end frees it either way. */
    soren_status rc = soren_param_set_build(&params, m, o->params, o->param_count, err);

    /* The output is opened before any input is read, so a folder that is
     * missing or not writable fails the run before the job's time is
     * spent; from here a signal removes the temporary file (signals.h).
     * --output-parts without -o is refused with the other options (see
     * check_parts). */
    int writes = o->output_parts || speaks;
    char *part = NULL;
    int parts = o->output_parts && o->output && strcmp(o->output, "-") != 0;
    if (rc == SOREN_OK && parts &&
        !(part = part_path(o->output, comm ? comm->rank : 0, comm ? comm->size : 1)))
        rc = soren_error_set(err, SOREN_ENOMEM, "out of memory");
    const char *dest = part ? part : o->output;
    soren_output out = {0};
    if (rc == SOREN_OK && writes && (!o->output_parts || parts))
        rc = o->client ? soren_output_open_fd(&out, o->client->output_fd, dest, err)
                       : soren_output_open(&out, dest, err);
    soren__signals_job(p->library_path, m->name);

    size_t input_count = 0;
    soren_input *inputs = calloc(o->input_count ? o->input_count : 1, sizeof *inputs);
    char *stdin_data = NULL;
    if (rc == SOREN_OK && !inputs)
        rc = soren_error_set(err, SOREN_ENOMEM, "out of memory");
    if (rc == SOREN_OK)
        rc = open_cli_inputs(m, o, inputs, &input_count, &stdin_data, err);
    /* A rank that could not open its output or inputs fails every rank. */
    if (comm)
        rc = soren_dist_agree(comm, rc, err);
    soren_run_outcome run;
    if (rc == SOREN_OK)
        rc = soren_run_inputs(p, o, &params, inputs, input_count, &run, err);
    else
        memset(&run, 0, sizeof run);
    /* An input that shrank was read as zeros where its bytes had gone. */
    for (size_t i = 0; rc == SOREN_OK && i < input_count; i++)
        rc = soren_input_check_shrunk(&inputs[i], m->name, err);
    /* Pairs written to a terminal would mix with the progress line, so it
     * ends first; a file shows the writing as its last phase. */
    if (rc != SOREN_OK || !o->output || strcmp(o->output, "-") == 0)
        soren_progress_end(o->progress);
    else
        soren_progress_phase(o->progress, "write", 0);
    if (rc == SOREN_OK)
        rc = write_output(o, dest, &out, writes, &run.result, err);
    soren_output_abort(&out);
    soren_progress_end(o->progress);
    size_t stages = run.stage_count;
    soren_rank_stage *all = NULL;
    FILE *said = soren_progress_stream(o->progress);
    if (rc == SOREN_OK && comm && (opt->explain || opt->verbose))
        rc = report_ranks(opt, run.ranks, stages, &all, err);
    if (rc == SOREN_OK && o->verbose && o->iterate)
        say_iterations(said, m, &run.iterations);
    if (rc == SOREN_OK && o->verbose)
        fprintf(said, "soren-host: %s: %llu pairs written%s\n", m->name,
                (unsigned long long)run.result.count, o->output_parts && comm ? " by rank 0" : "");
    /* Only a run that succeeded is explained: a failed one has its error. */
    if (rc == SOREN_OK && o->explain && speaks)
        soren_explain_print_stages(run.stages, stages, o->iterate ? &run.iterations : NULL,
                                   all ? &(soren_distributed){comm->size, all} : NULL, said);

    free(all);
    free(part);
    soren_run_outcome_destroy(&run);
    for (size_t i = 0; i < input_count; i++)
        soren_input_close(&inputs[i]);
    free(inputs);
    free(stdin_data);
    soren_param_set_destroy(&params);
    soren__signals_job(NULL, NULL);
    return rc;
}
