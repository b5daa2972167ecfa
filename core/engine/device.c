#include "device.h"

#include <stdio.h>
#include <unistd.h>

#include "../cpu/cpu.h"

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

/* A process bound to fewer CPUs than the host has (mpirun binds each rank
 * to one core by default) runs its CPU engine threads and the GPU's
 * staging threads on those alone: --verbose says so, with the way out. */
static void say_cpus(const soren_run_options *o)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned usable = soren_cpu_count();
    if (online > 0 && usable < (unsigned long)online)
        soren_progress_say(o->progress, "soren-host: cpus: this process may run on %u of the "
                           "host's %ld CPUs (its CPU affinity; mpirun binds each rank to one "
                           "core unless told otherwise): the CPU engine and the GPU's staging "
                           "threads share them; docs/mpi.md shows mpirun's options for more\n",
                           usable, online);
}

soren_status soren__choose_device(const soren_stage_spec *specs, size_t stages,
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
    /* The ranks of a host share its GPUs, one each while there are enough;
     * --devices naming one GPU runs there (soren__devices_pick checked it). */
    *gpu = !gpu_ok                ? 0
           : o->comm              ? o->comm->local_rank % gpus
           : o->device_count == 1 ? o->devices[0] % gpus
                                  : 0;
    if (o->verbose) {
        say_cpus(o);
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
