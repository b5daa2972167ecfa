/*
 * device.h - where a run goes: the GPU engine where a usable GPU can run
 * every stage of the job and --device allows it, else the CPU engine (or,
 * with --device gpu or both, an error that says why not); under --verbose,
 * which and why.  The ranks of a distributed run share their host's GPUs,
 * one each while there are enough.
 */
#ifndef SOREN_ENGINE_DEVICE_H
#define SOREN_ENGINE_DEVICE_H

#include <stddef.h>

#include "../base/stage.h"
#include "../error.h"
#include "options.h"

/* Chooses where the job runs, or says why it cannot run where asked. */
soren_status soren__choose_device(const soren_stage_spec *specs, size_t stages,
                                  const soren_run_options *o, soren_device *where,
                                  int *gpu, soren_error *err);

#endif /* SOREN_ENGINE_DEVICE_H */
