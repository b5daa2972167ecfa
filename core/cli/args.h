/*
 * args.h - soren-host's command line: options, then a command and its
 * arguments.
 *
 * soren__cli_parse_args fills a soren__cli_args from argv with getopt_long
 * (argv is permuted, as getopt does; args points into it).  It returns -1
 * to go on with the command, or the process's exit code: 0 after --help or
 * --version (printed on standard output), 2 after a usage error (said on
 * standard error by soren__cli_usage_error), 1 when memory ran out (said
 * there too).  Either way the lists it grew
 * are freed by soren__cli_args_destroy.  Apart from main.c so that the
 * parser can be fuzzed on its own (tests/fuzz/fuzz_cli.c).
 */
#ifndef SOREN_CLI_ARGS_H
#define SOREN_CLI_ARGS_H

#include <stddef.h>

#include "engine/options.h"
#include "plugin/trust.h"

#define SOREN_EXIT_USAGE 2

typedef struct soren__cli_args {
    const char *command;
    char **args; /* after the command */
    int arg_count;
    soren_run_options run;
    const char **plugin_paths; /* owned array of argv's strings */
    size_t plugin_path_count;
    soren_trust trust; /* --allow-insecure-plugin-dirs */
    const char **params;       /* owned array of argv's strings */
    size_t param_count;
    int progress;          /* --progress 1, --no-progress 0, else -1: on a terminal */
    const char *new_from;  /* new --from */
    const char *new_dir;   /* new --dir */
    int local;             /* run --local: in this process, never in a host */
    const char *socket;    /* --socket: the resident host's socket */
    int detach;            /* serve --detach */
    const char **loads;    /* serve --load NAME (owned array of argv's strings) */
    size_t load_count;
    unsigned host_jobs;    /* serve --jobs N: jobs run at once; 0: the default */
} soren__cli_args;

/* c must be zeroed first.  Returns -1 to go on, or an exit code. */
int soren__cli_parse_args(soren__cli_args *c, int argc, char **argv);

/* Frees the lists parse_args grew (not the strings: they are argv's). */
void soren__cli_args_destroy(soren__cli_args *c);

/* Says "soren-host: MESSAGE" and where to find help on standard error;
 * returns SOREN_EXIT_USAGE. */
int soren__cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* SOREN_CLI_ARGS_H */
