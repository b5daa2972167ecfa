#include "job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/result.h"
#include "../base/stage.h"
#include "../io/input.h"
#include "../io/signals.h"
#include "../plugin/params.h"
#include "chunks.h"
#include "device.h"
#include "dist_run.h"
#include "inputs.h"
#include "iterate.h"
#include "plan.h"
#include "ranks.h"
#include "timeout.h"

/* Writes r to out, opened on path (standard output for NULL or "-") by
 * soren_run before the job ran where this rank writes, and commits it; in
 * a distributed run every rank agrees before any renames its file into
 * place, and a rank whose rename failed fails them all, each removing what
 * it committed, so a failed run leaves no part behind. */
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

void soren_run_outcome_destroy(soren_run_outcome *out)
{
    for (size_t i = 0; i < SOREN_MAX_STAGES; i++)
        soren_explain_destroy(&out->stages[i]);
    soren_result_destroy(&out->result);
    free(out->iterated);
    memset(out, 0, sizeof *out);
}

soren_status soren_run_inputs(const soren_run_plan *plan, const soren_run_options *opt,
                              soren_param_set *params, const soren_input *inputs,
                              size_t input_count, soren_run_outcome *out, soren_error *err)
{
    const soren_comm *comm = opt->comm;
    /* soren__choose_device sets the GPU a rank runs on; --iterate, the sessions */
    soren_run_options ro = *opt;
    const soren_run_options *o = &ro;
    memset(out, 0, sizeof *out);
    const soren_stage_spec *specs = plan->specs, *last = &plan->specs[plan->stages - 1];
    out->stage_count = plan->stages;
    soren_result_init(&out->result, last);
    soren_status rc = soren__check_parts(plan->job, last, o, err);
    soren_device where = SOREN_DEVICE_CPU;
    if (rc == SOREN_OK)
        rc = soren__choose_device(specs, plan->stages, o, &where, &ro.gpu.device, err);
    for (size_t i = 0; rc == SOREN_OK && i < input_count; i++)
        if (inputs[i].on_device && where != SOREN_DEVICE_GPU)
            rc = soren_error_set(err, SOREN_EDEVICE, "%s: an input in device memory "
                                 "(soren_job_input_device) needs the GPU engine, and the job "
                                 "runs on the CPU engine here", plan->job);
    soren_input tasks = {0};
    const soren_input *use = NULL;
    size_t use_count = 0;
    if (rc == SOREN_OK)
        rc = soren__stage_inputs(plan, o, inputs, input_count, &tasks, &use, &use_count, err);
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
        rc = soren__plan_chunks(&specs[0], o, where, stage1, use_count, &chunks, &chunk_count,
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
    soren_gpu_session *sessions[SOREN_RANK_SESSIONS] = {0};
    if (ro.iterate && !ro.gpu_sessions)
        ro.gpu_sessions = sessions;
    if (rc == SOREN_OK)
        rc = soren__run_iterations(plan, where, stage1, stage1_count, params, o, &out->result,
                                   &whole, out->stages, out->rules, out->ranks,
                                   &out->iterations, err);
    for (size_t i = 0; i < SOREN_RANK_SESSIONS; i++)
        soren_gpu_session_free(sessions[i]);
    if (rc == SOREN_OK) { /* the plan, with the engine's timing of it */
        chunking.inputs_ms = out->stages[0].chunks.inputs_ms;
        out->stages[0].chunks = chunking;
    }
    /* rank 0 may hold the whole already (soren__run_stages_dist) */
    int gathered = comm && out->ranks[plan->stages - 1].folded_whole;
    if (rc == SOREN_OK && comm && !o->iterate && !o->output_parts && !gathered)
        rc = soren__gather_whole(o, last, &out->result, 0, &whole, err);
    if (comm && !o->output_parts && !gathered) {
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

soren_status soren_run_job(const soren_plugin *p, const soren_run_options *o,
                           const soren_param_value *values, const soren_job_input *inputs,
                           size_t input_count, soren_run_outcome *out, soren_error *err)
{
    const soren_manifest *m = p->manifest;
    memset(out, 0, sizeof *out);
    soren_param_set params;
    soren_status rc = soren_param_set_from(&params, m, values, err);
    if (rc != SOREN_OK)
        return rc;
    soren_run_plan plan;
    if ((rc = soren__run_plan_make(&plan, p, o, &params.params, err)) != SOREN_OK) {
        soren_param_set_destroy(&params);
        return rc;
    }
    /* the fed parameter is rewritten: a copy of the caller's bytes */
    const int fed = plan.iterate_param;
    if (fed >= 0 && !params.owned[fed]) {
        uint64_t size = params.params.size[fed];
        if ((params.owned[fed] = malloc(size ? size : 1)) != NULL && size)
            memcpy(params.owned[fed], params.params.data[fed], size);
        params.params.data[fed] = params.owned[fed];
    }
    soren_input *in = calloc(input_count ? input_count : 1, sizeof *in);
    if (!in || (fed >= 0 && !params.owned[fed])) {
        free(in);
        soren_param_set_destroy(&params);
        return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory", m->name);
    }
    size_t opened = 0;
    for (; rc == SOREN_OK && opened < input_count; opened++) {
        const soren_job_input *j = &inputs[opened];
        if (j->kind == SOREN_JOB_INPUT_PATH) {
            rc = soren_input_open(&in[opened], j->path, err);
        } else if (j->kind == SOREN_JOB_INPUT_FD) {
            rc = soren_input_open_fd(&in[opened], j->fd, j->path, err);
        } else {
            soren_input_wrap(&in[opened], j->on_device ? "(device memory input)"
                                                       : "(memory input)",
                             j->data, j->size);
            in[opened].on_device = j->on_device;
        }
    }
    if (rc == SOREN_OK) {
        soren_input_lay_out(in, opened);
        rc = soren_run_inputs(&plan, o, &params, in, opened, out, err);
    }
    for (size_t i = 0; i < opened; i++)
        soren_input_close(&in[i]);
    free(in);
    if (rc == SOREN_OK && fed >= 0) {
        out->iterated = params.owned[fed];
        out->iterated_size = params.params.size[fed];
        params.owned[fed] = NULL;
    }
    soren_param_set_destroy(&params);
    return rc;
}

/* The pairs the first stage left: every rank's share (all, on rank 0 of a
 * distributed run; SOREN_PAIRS_UNKNOWN where they were not gathered). */
static uint64_t first_pairs(const soren_run_outcome *run, const soren_comm *comm,
                            const soren_rank_stage *all)
{
    if (!comm)
        return run->stages[0].pairs;
    if (!all)
        return SOREN_PAIRS_UNKNOWN;
    uint64_t pairs = 0;
    for (int r = 0; r < comm->size; r++)
        pairs += all[r].pairs;
    return pairs;
}

soren_status soren_run(const soren_plugin *p, const soren_run_options *opt, soren_error *err)
{
    soren_run_options ro = *opt;
    /* A process of its own spreads over the GPUs the adaptive engine or
     * --devices gives it.  Under mpirun a process takes the GPU of its
     * place on the host, or with --devices the GPUs it names, a rank of the
     * run on each, every process alike so that all call the same
     * collectives. */
    if (!opt->comm || opt->devices_all || opt->device_count > 0) {
        int devices[SOREN_MAX_DEVICES];
        size_t count = 0;
        soren_status rc = soren__devices_pick(opt, devices, &count, &ro.devices_rule, err);
        if (opt->comm)
            rc = soren_dist_agree(opt->comm, rc, err);
        if (rc != SOREN_OK)
            return rc;
        if (count > 1 || opt->comm)
            return soren__run_ranks(p, &ro, devices, count, err);
    }
    const soren_manifest *m = p->manifest;
    const soren_comm *comm = opt->comm;
    /* Only rank 0 of a distributed run speaks. */
    int speaks = !comm || comm->rank == 0;
    ro.verbose = opt->verbose && speaks;
    const soren_run_options *o = &ro;
    soren_param_set params;
    /* A failed build leaves params empty, so the end frees it either way. */
    soren_status rc = soren_param_set_build(&params, m, o->params, o->param_count, err);
    soren_run_plan plan;
    if (rc == SOREN_OK)
        rc = soren__run_plan_make(&plan, p, o, &params.params, err);

    /* The output is opened before any input is read, so a folder that is
     * missing or not writable fails the run before the job's time is
     * spent; from here a signal removes the temporary file (signals.h).
     * --output-parts without -o is refused with the other options (see
     * soren__check_parts). */
    int writes = o->output_parts || speaks;
    char *part = NULL;
    int parts = o->output_parts && o->output && strcmp(o->output, "-") != 0;
    if (rc == SOREN_OK && parts &&
        !(part = soren__part_path(o->output, comm ? comm->rank : 0, comm ? comm->size : 1)))
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
        rc = soren__open_cli_inputs(&plan, o, inputs, &input_count, &stdin_data, err);
    /* A rank that could not open its output or inputs fails every rank. */
    if (comm)
        rc = soren_dist_agree(comm, rc, err);
    soren_progress_watch_records(o->progress, soren__map_sites_slow);
    soren_watchdog *watchdog = NULL;
    if (rc == SOREN_OK)
        rc = soren__watchdog_start(&watchdog, o->timeout_ms, plan.job, o->progress, err);
    soren_run_outcome run;
    if (rc == SOREN_OK)
        rc = soren_run_inputs(&plan, o, &params, inputs, input_count, &run, err);
    else
        memset(&run, 0, sizeof run);
    rc = soren__watchdog_stop(watchdog, rc, err);
    /* An input that shrank was read as zeros where its bytes had gone. */
    for (size_t i = 0; rc == SOREN_OK && i < input_count; i++)
        rc = soren_input_check_shrunk(&inputs[i], plan.job, err);
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
    if (rc == SOREN_OK && comm && (opt->explain || opt->verbose || opt->first_pairs))
        rc = soren__report_ranks(opt, run.ranks, stages, &all, err);
    if (rc == SOREN_OK && opt->first_pairs && speaks)
        *opt->first_pairs = first_pairs(&run, comm, all);
    if (rc == SOREN_OK && o->verbose && o->iterate)
        soren__say_iterations(said, plan.job, plan.iterate_name, &run.iterations);
    if (rc == SOREN_OK && o->verbose)
        fprintf(said, "soren-host: %s: %llu pairs written%s\n", plan.job,
                (unsigned long long)run.result.count, o->output_parts && comm ? " by rank 0" : "");
    /* The GPUs of this process that the run spread over (not an MPI run's),
     * said once the run knows its first stage ran on a GPU at all. */
    if (o->devices_rule && run.stages[0].device && strcmp(run.stages[0].device, "gpu") == 0) {
        int gpus = comm ? comm->process_ranks : 1;
        run.stages[0].devices = gpus;
        run.stages[0].devices_rule = o->devices_rule;
        if (rc == SOREN_OK && o->verbose)
            fprintf(said, "soren-host: %s: %d GPU%s (%s)\n", plan.job, gpus, gpus > 1 ? "s" : "",
                    o->devices_rule);
    }
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
