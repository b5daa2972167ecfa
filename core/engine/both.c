#include "both.h"

#include <pthread.h>
#include <string.h>

#include "chunks.h"
#include "run.h"

/* Some of stage 1's pieces, mapped on one engine, on a thread of its own. */
typedef struct both_share {
    const soren_stage_spec *spec; /* soren__local_spec: the fold reduces and orders */
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
    double t0 = soren__now_ms();
    if (b->where == SOREN_DEVICE_GPU) {
        b->rc = soren__run_gpu(b->spec, b->inputs, b->count, b->params, &b->o, b->session, &b->res,
                               &b->x, &b->err);
        const soren_phase_times *t = &b->x.ms;
        b->ms = t->upload + t->split + t->monitor + t->map + t->merge + t->reduce + t->sort +
                t->download;
    } else {
        b->rc = soren__run_cpu(b->spec, b->inputs, b->count, b->params, &b->o, &b->res, &b->x,
                               b->rule, sizeof b->rule, &b->err);
        b->ms = soren__now_ms() - t0;
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

soren_status soren__run_both(const soren_stage_spec *spec, const soren_input *inputs,
                             size_t input_count, const soren_params *params,
                             const soren_run_options *o, soren_gpu_session **session,
                             soren_result *res, soren_explain *x, soren_error *err)
{
    if (input_count < 2) {
        if (o->verbose)
            soren_progress_say(o->progress, "soren-host: --device both: the input is one "
                               "piece (under %d bytes); it runs on the GPU alone\n",
                               2 * BOTH_PIECE_MIN);
        return soren__run_gpu(spec, inputs, input_count, params, o, session, res, x, err);
    }
    soren_stage_spec l = soren__local_spec(spec);
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
    double t0 = soren__now_ms();
    rc = soren__fold_pairs(spec, "(both engines' pairs)", &all, params, o, res, err);
    x->sharing.fold_ms = soren__now_ms() - t0;
    return rc;
}
