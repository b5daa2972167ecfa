/*
 * api.c - libsoren's API (soren/host.h) over the run path soren-host uses
 * (engine/job.h): a soren_job keeps the plugin, the options, one value per
 * parameter and the inputs, builds them into a run each time it runs, and
 * keeps the last run's outcome for the caller to read.
 */
#include <soren/host.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../engine/job.h"
#include "../host/channel.h"
#include "../host/remote.h"
#include "../io/output.h"
#include "../plugin/loader.h"
#include "../plugin/params.h"
#include "../plugin/search.h"

struct soren_job {
    soren_plugin *plugin;
    soren_job_options options;
    char *engine;                              /* options.engine's copy */
    char *host;                                /* options.host's copy */
    uint64_t serial;                           /* this process's job number */
    soren_param_value values[SOREN_MAX_PARAMS]; /* text and bytes owned here... */
    unsigned char in_place[SOREN_MAX_PARAMS];   /* ...but bytes the caller keeps */
    /* each value's version, new whenever it is set, so that a GPU session
     * uploads again only what changed (soren_run_options.param_versions) */
    uint64_t versions[SOREN_MAX_PARAMS];
    uint64_t versions_issued;
    soren_job_input *inputs; /* as the caller gave them; a path is owned here */
    size_t input_count, input_cap;
    uint64_t tasks;
    soren_run_outcome outcome;
    int has_result;
    /* each stage's GPU session: stream, buffers and variant kept from run
     * to run (see engine.h) */
    soren_gpu_session *sessions[SOREN_RANK_SESSIONS];
    char *explain; /* made from the outcome when first asked for */
};

/* A NULL pointer argument: a usage error naming the call and the argument,
 * refused before anything is touched. */
static soren_status null_argument(soren_error *err, const char *call, const char *argument)
{
    return soren_error_set(err, SOREN_EUSAGE, "%s: %s is NULL", call, argument);
}

/* Returns from the calling function when its pointer argument arg is NULL. */
#define REFUSE_NULL(arg)                                                                   \
    do {                                                                                   \
        if (!(arg))                                                                        \
            return null_argument(err, __func__, #arg);                                     \
    } while (0)

soren_status soren_open(const char *name_or_path, soren_plugin **out, soren_error *err)
{
    REFUSE_NULL(out);
    *out = NULL;
    if (!name_or_path || !*name_or_path)
        return soren_error_set(err, SOREN_EUSAGE, "soren_open: no plugin name or path given");
    soren_search_path sp;
    soren_status rc = soren_search_path_init(&sp, NULL, 0, err);
    if (rc != SOREN_OK)
        return rc;
    char *path = NULL;
    rc = soren_plugin_resolve(&sp, name_or_path, &path, err);
    if (rc == SOREN_OK)
        rc = soren_plugin_open_unloaded(path, SOREN_TRUST_CHECK, out, err);
    free(path);
    soren_search_path_destroy(&sp);
    return rc;
}

void soren_close(soren_plugin *p)
{
    soren_plugin_close(p);
}

void soren_job_options_init(soren_job_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->device = SOREN_DEVICE_AUTO;
    o->engine = "auto";
    o->sample = SOREN_SAMPLE_DEFAULT;
}

static soren_status check_options(const soren_job_options *o, soren_error *err)
{
    if (o->device != SOREN_DEVICE_AUTO && o->device != SOREN_DEVICE_CPU &&
        o->device != SOREN_DEVICE_GPU && o->device != SOREN_DEVICE_BOTH)
        return soren_error_set(err, SOREN_EUSAGE, "soren_job_new: device %d is none of "
                               "SOREN_DEVICE_AUTO, SOREN_DEVICE_CPU, SOREN_DEVICE_GPU, "
                               "SOREN_DEVICE_BOTH", (int)o->device);
    if (o->engine && !soren_engine_name_valid(o->engine))
        return soren_error_set(err, SOREN_EUSAGE, "soren_job_new: engine \"%s\" is none of %s",
                               o->engine, soren_engine_names);
    if (!(o->sample >= 0 && o->sample <= 1))
        return soren_error_set(err, SOREN_EUSAGE, "soren_job_new: sample %g is not a fraction "
                               "from 0 to 1", o->sample);
    return SOREN_OK;
}

/* Loads p's library where no job of it has run in this process yet: a
 * program whose jobs all run in a resident host never loads it (nor the
 * CUDA code and C++ runtime it brings), the host does. */
static soren_status plugin_loaded(soren_plugin *p, soren_error *err)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    soren_status rc = p->table ? SOREN_OK : soren_plugin_load(p, SOREN_TRUST_CHECK, NULL, err);
    pthread_mutex_unlock(&lock);
    return rc;
}

soren_status soren_job_new(soren_plugin *p, const soren_job_options *o, soren_job **out,
                           soren_error *err)
{
    REFUSE_NULL(out);
    *out = NULL;
    if (!p)
        return soren_error_set(err, SOREN_EUSAGE, "soren_job_new: no plugin (soren_open first)");
    soren_job_options defaults;
    soren_job_options_init(&defaults);
    if (!o)
        o = &defaults;
    soren_status rc = check_options(o, err);
    if (rc == SOREN_OK && !o->host)
        rc = plugin_loaded(p, err);
    if (rc != SOREN_OK)
        return rc;
    soren_job *job = calloc(1, sizeof *job);
    char *engine = strdup(o->engine ? o->engine : "auto");
    char *host = o->host ? strdup(o->host) : NULL;
    if (!job || !engine || (o->host && !host)) {
        free(job);
        free(engine);
        free(host);
        return soren_error_set(err, SOREN_ENOMEM, "soren_job_new: out of memory");
    }
    job->plugin = p;
    for (size_t j = 0; j < SOREN_MAX_PARAMS; j++)
        job->versions[j] = ++job->versions_issued; /* the defaults */
    job->options = *o;
    job->engine = engine;
    job->options.engine = engine;
    job->host = host;
    job->options.host = host;
    static atomic_uint_fast64_t jobs_made;
    job->serial = atomic_fetch_add(&jobs_made, 1);
    *out = job;
    return SOREN_OK;
}

/* Forgets parameter j's value (back to its default). */
static void value_clear(soren_job *job, size_t j)
{
    soren_param_value *v = &job->values[j];
    free((void *)v->text);
    if (!job->in_place[j])
        free((void *)v->bytes);
    memset(v, 0, sizeof *v);
    job->in_place[j] = 0;
}

static void outcome_clear(soren_job *job)
{
    soren_run_outcome_destroy(&job->outcome);
    job->has_result = 0;
    free(job->explain);
    job->explain = NULL;
}

void soren_job_free(soren_job *job)
{
    if (!job)
        return;
    outcome_clear(job);
    for (size_t j = 0; j < SOREN_MAX_PARAMS; j++)
        value_clear(job, j);
    soren_job_clear_inputs(job);
    free(job->inputs);
    for (size_t i = 0; i < SOREN_RANK_SESSIONS; i++)
        soren_gpu_session_free(job->sessions[i]);
    free(job->engine);
    free(job->host);
    free(job);
}

/* Sets parameter name to v, once it has been checked: copied here, or
 * (in_place) bytes the caller keeps. */
static soren_status set_param(soren_job *job, const char *name, const soren_param_value *v,
                              int in_place, soren_error *err)
{
    const soren_manifest *m = job->plugin->manifest;
    int j = soren_param_find(m, name, strlen(name), err);
    if (j < 0)
        return SOREN_EUSAGE;
    soren_status rc = soren_param_check(m, (size_t)j, v, err);
    if (rc != SOREN_OK)
        return rc;
    soren_param_value copy = {0};
    if (v->text && !(copy.text = strdup(v->text)))
        return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory", m->name);
    if (v->bytes && in_place) {
        copy = *v;
    } else if (v->bytes) {
        void *bytes = malloc(v->size ? v->size : 1);
        if (!bytes)
            return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory", m->name);
        memcpy(bytes, v->bytes, v->size);
        copy.bytes = bytes;
        copy.size = v->size;
    }
    value_clear(job, (size_t)j);
    job->values[j] = copy;
    job->in_place[j] = v->bytes && in_place;
    job->versions[j] = ++job->versions_issued;
    return SOREN_OK;
}

soren_status soren_job_param(soren_job *job, const char *name, const char *text,
                             soren_error *err)
{
    REFUSE_NULL(job);
    REFUSE_NULL(name);
    REFUSE_NULL(text);
    soren_param_value v = {.text = text};
    return set_param(job, name, &v, 0, err);
}

/* Empty bytes are still bytes: a string parameter may be empty. */
static soren_param_value bytes_value(const void *data, size_t size)
{
    static const uint8_t none = 0;
    return (soren_param_value){.bytes = data ? data : &none, .size = data ? size : 0};
}

soren_status soren_job_param_bytes(soren_job *job, const char *name, const void *data,
                                   size_t size, soren_error *err)
{
    REFUSE_NULL(job);
    REFUSE_NULL(name);
    soren_param_value v = bytes_value(data, size);
    return set_param(job, name, &v, 0, err);
}

soren_status soren_job_param_bytes_in_place(soren_job *job, const char *name, const void *data,
                                            size_t size, soren_error *err)
{
    REFUSE_NULL(job);
    REFUSE_NULL(name);
    soren_param_value v = bytes_value(data, size);
    return set_param(job, name, &v, 1, err);
}

static soren_status add_input(soren_job *job, const soren_job_input *in, soren_error *err)
{
    if (job->plugin->manifest->input.format == SOREN_INPUT_INDEX)
        return soren_error_set(err, SOREN_EUSAGE, "%s reads index input (tasks known by their "
                               "number, no data): give soren_job_tasks instead of inputs",
                               job->plugin->manifest->name);
    if (job->input_count == job->input_cap) {
        size_t cap = job->input_cap ? 2 * job->input_cap : 4;
        soren_job_input *grown = realloc(job->inputs, cap * sizeof *grown);
        if (!grown)
            return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory",
                                   job->plugin->manifest->name);
        job->inputs = grown;
        job->input_cap = cap;
    }
    job->inputs[job->input_count++] = *in;
    return SOREN_OK;
}

soren_status soren_job_input_file(soren_job *job, const char *path, soren_error *err)
{
    REFUSE_NULL(job);
    if (!path || !*path)
        return soren_error_set(err, SOREN_EUSAGE, "%s: no input path given",
                               job->plugin->manifest->name);
    char *copy = strdup(path);
    if (!copy)
        return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory",
                               job->plugin->manifest->name);
    soren_job_input in = {.kind = SOREN_JOB_INPUT_PATH, .path = copy};
    soren_status rc = add_input(job, &in, err);
    if (rc != SOREN_OK)
        free(copy);
    return rc;
}

soren_status soren_job_input_memory(soren_job *job, const void *data, size_t size,
                                    soren_error *err)
{
    REFUSE_NULL(job);
    if (!data && size)
        return soren_error_set(err, SOREN_EUSAGE, "%s: an input of %zu bytes at NULL",
                               job->plugin->manifest->name, size);
    soren_job_input in = {.kind = SOREN_JOB_INPUT_MEMORY, .data = data, .size = size};
    return add_input(job, &in, err);
}

soren_status soren_job_input_device(soren_job *job, const void *data, size_t size,
                                    soren_error *err)
{
    REFUSE_NULL(job);
    const char *name = job->plugin->manifest->name;
    if (!data && size)
        return soren_error_set(err, SOREN_EUSAGE, "%s: a device input of %zu bytes at NULL",
                               name, size);
    if ((uintptr_t)data % 16)
        return soren_error_set(err, SOREN_EUSAGE, "%s: a device input must be 16-byte aligned "
                               "(cudaMalloc's pointers are), got %p", name, data);
    if (job->options.device == SOREN_DEVICE_CPU)
        return soren_error_set(err, SOREN_EUSAGE, "%s: the job runs on the CPU engine "
                               "(SOREN_DEVICE_CPU), which cannot read device memory: give it "
                               "host memory or a file", name);
    soren_job_input in = {.kind = SOREN_JOB_INPUT_MEMORY, .data = data, .size = size,
                          .on_device = 1};
    return add_input(job, &in, err);
}

soren_status soren_job_tasks(soren_job *job, uint64_t count, soren_error *err)
{
    REFUSE_NULL(job);
    const soren_manifest *m = job->plugin->manifest;
    if (m->input.format != SOREN_INPUT_INDEX)
        return soren_error_set(err, SOREN_EUSAGE, "%s reads %s, not index input: give it "
                               "inputs, not a task count", m->name,
                               m->input.format == SOREN_INPUT_LINES ? "lines" : "fixed records");
    if (count == 0)
        return soren_error_set(err, SOREN_EUSAGE, "%s: a task count from 1 up, got 0", m->name);
    job->tasks = count;
    return SOREN_OK;
}

void soren_job_clear_inputs(soren_job *job)
{
    if (!job)
        return;
    for (size_t i = 0; i < job->input_count; i++)
        free((char *)job->inputs[i].path);
    job->input_count = 0;
}

/* The run options soren-host would build from the job's options. */
static void run_options(soren_job *job, soren_run_options *o)
{
    soren_run_options_init(o);
    o->device = job->options.device;
    o->engine = job->options.engine;
    o->sample = job->options.sample;
    o->threads = job->options.threads;
    o->tasks = job->tasks;
    o->gpu_sessions = job->sessions;
    o->param_versions = job->versions;
}

/* A run in the resident host (iterate as run_here's), the previous result
 * released first: the same request, the outcome and the explain line
 * copied back. */
static soren_status run_in_host(soren_job *job, uint64_t iterate, soren_error *err)
{
    outcome_clear(job);
    const soren_manifest *m = job->plugin->manifest;
    soren_remote_input *inputs = calloc(job->input_count ? job->input_count : 1,
                                        sizeof *inputs);
    if (!inputs)
        return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory", m->name);
    soren_status rc = SOREN_OK;
    for (size_t i = 0; rc == SOREN_OK && i < job->input_count; i++) {
        const soren_job_input *in = &job->inputs[i];
        if (in->on_device)
            rc = soren_error_set(err, SOREN_EUSAGE, "%s: a device memory input stays in this "
                                 "process: run the job here (soren_job_options.host NULL)",
                                 m->name);
        inputs[i] = (soren_remote_input){in->path, in->data, in->size};
    }
    size_t stages = soren_manifest_stages(m);
    soren_stage_spec last;
    soren_stage_spec_init_at(&last, m, NULL, stages - 1); /* the result's types alone */
    soren_result_init(&job->outcome.result, &last);
    /* The job's token: this process and this job, which no later job of the
     * process reuses (a serial number, not the address, which can be). */
    char token[64];
    snprintf(token, sizeof token, "%ld-%llu", (long)getpid(), (unsigned long long)job->serial);
    soren_remote_job rj = {token,       m->path,        &job->options, job->tasks, iterate,
                           job->values, m->param_count, inputs,        job->input_count};
    char *explain = NULL;
    if (rc == SOREN_OK)
        rc = soren_remote_run(job->host, &rj, &job->outcome, &explain, err);
    free(inputs);
    job->has_result = rc == SOREN_OK;
    job->explain = explain;
    if (rc != SOREN_OK)
        soren_run_outcome_destroy(&job->outcome);
    return rc;
}

int soren_host_answers(const char *socket, soren_error *err)
{
    soren_error ignored;
    if (!err)
        err = &ignored;
    char path[4096];
    if (soren_channel_path(socket, path, sizeof path, err) != SOREN_OK)
        return -1;
    int fd = soren_channel_connect(path, err);
    if (fd >= 0)
        close(fd);
    return fd >= 0 ? 1 : fd == -2 ? 0 : -1;
}

/* A run in this process (iterate: up to that many, feeding the manifest's
 * iterate parameter; 0: one run), the previous result released first. */
static soren_status run_here(soren_job *job, uint64_t iterate, soren_error *err)
{
    outcome_clear(job);
    soren_run_options o;
    run_options(job, &o);
    o.iterate = iterate;
    soren_status rc = soren_run_job(job->plugin, &o, job->values, job->inputs, job->input_count,
                                    &job->outcome, err);
    job->has_result = rc == SOREN_OK;
    if (rc != SOREN_OK)
        soren_run_outcome_destroy(&job->outcome);
    return rc;
}

soren_status soren_job_iterate(soren_job *job, uint64_t most, soren_iteration *how,
                               soren_error *err)
{
    REFUSE_NULL(how);
    memset(how, 0, sizeof *how);
    REFUSE_NULL(job);
    const soren_manifest *m = job->plugin->manifest;
    if (!m->iterate_param)
        return soren_error_set(err, SOREN_EUSAGE, "%s: soren_job_iterate: the manifest has no "
                               "\"iterate\" (the parameter each run's output feeds): run it "
                               "with soren_job_run", m->name);
    if (most == 0)
        return soren_error_set(err, SOREN_EUSAGE, "%s: soren_job_iterate: at most 0 runs; "
                               "give 1 or more", m->name);
    soren_status rc = job->host ? run_in_host(job, most, err) : run_here(job, most, err);
    if (rc != SOREN_OK)
        return rc;
    if (!job->outcome.iterations.runs) {
        outcome_clear(job);
        return soren_error_set(err, SOREN_EJOB, "%s: soren_job_iterate: the host at %s ran the "
                               "job once instead of iterating: it is an older soren-host; "
                               "restart it with this Soren's", m->name,
                               job->host[0] ? job->host : "the default socket");
    }
    /* the job keeps the parameter as the iteration left it */
    int j = soren_manifest_param_index(m, m->iterate_param);
    value_clear(job, (size_t)j);
    job->values[j] = (soren_param_value){.bytes = job->outcome.iterated,
                                         .size = job->outcome.iterated_size};
    job->versions[j] = ++job->versions_issued;
    job->outcome.iterated = NULL;
    const soren_iterations *it = &job->outcome.iterations;
    *how = (soren_iteration){it->runs, it->device_runs, it->converged, job->values[j].bytes,
                             job->values[j].size};
    return SOREN_OK;
}

soren_status soren_job_run(soren_job *job, soren_error *err)
{
    REFUSE_NULL(job);
    return job->host ? run_in_host(job, 0, err) : run_here(job, 0, err);
}

static soren_status need_result(const soren_job *job, const char *call, soren_error *err)
{
    return job->has_result ? SOREN_OK
                           : soren_error_set(err, SOREN_EUSAGE, "%s: %s: no result: the job "
                                             "has not run successfully (soren_job_run first)",
                                             job->plugin->manifest->name, call);
}

soren_status soren_job_result(soren_job *job, soren_pairs *out, soren_error *err)
{
    REFUSE_NULL(out);
    memset(out, 0, sizeof *out);
    REFUSE_NULL(job);
    soren_status rc = need_result(job, "soren_job_result", err);
    if (rc != SOREN_OK)
        return rc;
    *out = soren_result_pairs(&job->outcome.result);
    return SOREN_OK;
}

soren_status soren_job_result_device(soren_job *job, soren_pairs *out, soren_error *err)
{
    REFUSE_NULL(out);
    memset(out, 0, sizeof *out);
    REFUSE_NULL(job);
    soren_status rc = need_result(job, "soren_job_result_device", err);
    if (rc != SOREN_OK)
        return rc;
    if (job->host)
        return soren_error_set(err, SOREN_EUSAGE, "%s: soren_job_result_device: the job ran in "
                               "the resident host, whose device memory is its own: read the "
                               "pairs with soren_job_result", job->plugin->manifest->name);
    size_t last = job->outcome.stage_count - 1;
    const soren_explain *x = &job->outcome.stages[last];
    if (!x->device || strcmp(x->device, "gpu") != 0 || !job->sessions[last])
        return soren_error_set(err, SOREN_EUSAGE, "%s: soren_job_result_device: the last run "
                               "was on the CPU engine: its pairs are in host memory "
                               "(soren_job_result)", job->plugin->manifest->name);
    /* The host copy gives the sizes and types, the session its arrays. */
    *out = soren_result_pairs(&job->outcome.result);
    soren_gpu_session_pairs(job->sessions[last], out);
    return SOREN_OK;
}

soren_status soren_job_write(soren_job *job, const char *path, const char *format,
                             soren_error *err)
{
    REFUSE_NULL(job);
    REFUSE_NULL(path);
    soren_status rc = need_result(job, "soren_job_write", err);
    if (rc != SOREN_OK)
        return rc;
    soren_format f;
    if (soren_format_parse(format ? format : "tsv", &f) != 0)
        return soren_error_set(err, SOREN_EUSAGE, "%s: soren_job_write: format \"%s\" is none "
                               "of %s", job->plugin->manifest->name, format, soren_format_names);
    soren_output out = {0};
    rc = soren_output_open(&out, path, err);
    if (rc == SOREN_OK)
        rc = soren_output_write(&out, &job->outcome.result, f, err);
    if (rc == SOREN_OK)
        return soren_output_commit(&out, err);
    soren_output_abort(&out);
    return rc;
}

const char *soren_job_explain(soren_job *job)
{
    if (!job)
        return NULL;
    if (!job->has_result || job->explain)
        return job->explain;
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f)
        return NULL;
    soren_explain_print_stages(job->outcome.stages, job->outcome.stage_count, NULL, NULL, f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    /* one line, as --explain prints it, without its newline */
    if (size && text[size - 1] == '\n')
        text[size - 1] = '\0';
    job->explain = text;
    return text;
}
