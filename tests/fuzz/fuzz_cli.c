/* libFuzzer harness: soren-host's command line parser (core/cli/args.c).
 * The input is the arguments after the program's name, separated by NUL
 * bytes.  Every parse either goes on with a command among the arguments or
 * ends with exit code 0 (--help, --version), 2 (a usage error, with its
 * message) or 1 (out of memory, which ASan's allocator does not give here),
 * and soren__cli_args_destroy frees all it took.  What the parser
 * prints goes to /dev/null: libFuzzer and ASan report through handles of
 * their own (libFuzzer keeps the FILE it found at start-up, ASan writes to
 * file descriptor 2). */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"

enum { MAX_ARGS = 64 };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    FILE *null = fopen("/dev/null", "w");
    if (!null)
        abort();
    stdout = null;
    stderr = null;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_ARGS + 2] = {"soren-host"};
    int argc = 1;
    for (char *p = text; p <= text + size && argc <= MAX_ARGS; p += strlen(p) + 1)
        argv[argc++] = p;
    argv[argc] = NULL;

    soren__cli_args c = {0};
    optind = 0; /* glibc: start over, forgetting the last parse's state */
    int rc = soren__cli_parse_args(&c, argc, argv);
    if (rc == -1) {
        /* The command and its arguments are among argv's strings. */
        if (!c.command || c.arg_count < 0 || c.args + c.arg_count != argv + argc ||
            c.args[-1] != c.command)
            abort();
    } else if (rc != 0 && rc != 1 && rc != SOREN_EXIT_USAGE) {
        abort();
    }
    soren__cli_args_destroy(&c);
    free(text);
    return 0;
}
