/*
 * job.h - one run of a loaded plugin, from inputs to the output file.
 *
 * Builds the parameters, picks the device (auto: a usable GPU with the
 * plugin's GPU engine, else the CPU engine), runs the stage, orders the
 * result as the manifest (or --order and --top, which replace its
 * output.order and output.limit in the stage both engines read) say and
 * writes it through a temporary file, so a failed run leaves no output
 * behind.  Each phase is reported to the progress line, if any, which ends
 * before the result goes to standard output and before the run returns.
 *
 * Either engine first monitors a sample of the input (unless sample is 0),
 * picks its variant with soren_choose, starts its regions at soren_project's
 * sizes, and fills a soren_explain that --explain prints once the output is
 * committed.
 */
#ifndef SOREN_JOB_H
#define SOREN_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "../error.h"
#include "../plugin/loader.h"
#include "options.h"

soren_status soren_job_run(const soren_plugin *p, const soren_run_options *o, soren_error *err);

#endif /* SOREN_JOB_H */
