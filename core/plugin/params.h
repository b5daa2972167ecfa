/*
 * params.h - a job's parameters, from the command line to soren_params.
 *
 * The manifest declares the parameters (name, type, required, default);
 * the user gives `name=value` or `name=@file` (the file's bytes become the
 * value).  Values are converted once to what map sees (soren_params): strings
 * as bytes, numbers (decimal only, read by soren_number_parse: number.h) in
 * native layout, regex parameters compiled to a soren_dfa.  A parameter
 * neither given nor defaulted is absent (size 0).
 */
#ifndef SOREN_PARAMS_H
#define SOREN_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "../error.h"
#include "manifest.h"
#include <soren/soren.h>

typedef struct soren_param_set {
    soren_params params;               /* host pointers: into owned[], or at
                                          the bytes a soren_param_value gave */
    void *owned[SOREN_MAX_PARAMS];     /* values converted from text */
    uint32_t mapped;                   /* bit j: owned[j] is a scratch mapping */
} soren_param_set;

/* The most bytes a parameter file (name=@file) may hold.  The file must be
 * a regular one: pipes, FIFOs and devices are refused, not read. */
#define SOREN_PARAM_FILE_MAX ((uint64_t)256 << 20)

/* Builds the parameters of manifest m from assignments ("name=value" or
 * "name=@file").  Unknown names, a missing required parameter, a malformed
 * number and an invalid pattern are SOREN_EUSAGE errors that say which
 * parameter and what it takes. */
soren_status soren_param_set_build(soren_param_set *set, const soren_manifest *m,
                                   const char *const *assignments, size_t count,
                                   soren_error *err);

/* One parameter's value as given: text as after `--param NAME=` (a leading
 * @ names a file whose bytes are the text), or bytes taken as they are (a
 * string's bytes, a number's native layout at its exact width). */
typedef struct soren_param_value {
    const char *text;  /* NULL: not given as text */
    const void *bytes; /* NULL: not given as bytes; else size of them */
    size_t size;
} soren_param_value;

/* Builds the parameters from values[j] for each manifest parameter j; one
 * given neither way takes its default, and a required one without a
 * default is a SOREN_EUSAGE error naming it.  Values given as bytes are
 * borrowed, not copied: they must outlive the set. */
soren_status soren_param_set_from(soren_param_set *set, const soren_manifest *m,
                                  const soren_param_value *values, soren_error *err);

/* Checks values[j]'s value as soren_param_set_from would take it. */
soren_status soren_param_check(const soren_manifest *m, size_t j, const soren_param_value *v,
                               soren_error *err);

/* The index of the parameter named name[0 .. name_len), or -1 with a
 * SOREN_EUSAGE error that lists the job's parameters. */
int soren_param_find(const soren_manifest *m, const char *name, size_t name_len,
                     soren_error *err);

void soren_param_set_destroy(soren_param_set *set);

#endif /* SOREN_PARAMS_H */
