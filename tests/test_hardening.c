/* Hardening: a run interrupted by SIGINT or SIGTERM leaves no output and ends
 * as the signal says (the shell's 130 and 143). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}

TestSuite(signals, .init = setup, .fini = teardown);

/* Starts wordcount reading a FIFO that stays open (so the run is still
 * reading its input), sends sig once the run has made its temporary output
 * (it opens its output before reading input, with its handlers set: a
 * shell starts a background job with SIGINT ignored, and a slow start,
 * under valgrind, must not meet the signal first), and returns the exit
 * status the shell saw; *leftovers gets the files left in the run's
 * folder. */
static int interrupted_status(const char *sig, char **leftovers)
{
    char *out = NULL;
    int rc = tu_runf(&out, NULL,
                     "cd '%s' || exit 1; mkdir run && mkfifo fifo || exit 1; "
                     "sleep 60 > fifo & writer=$!; "
                     "'%s' run wordcount --device cpu -o run/result.tsv < fifo "
                     "2> log & pid=$!; "
                     "i=0; until ls -A run | grep -q soren-tmp || [ $i -eq 300 ]; do "
                     "sleep 0.1; i=$((i + 1)); done; "
                     "kill -%s $pid; wait $pid; echo $?; kill $writer; ls -A run",
                     dir, tu_host(), sig);
    cr_assert_eq(rc, 0, "the test's shell failed");
    char *newline = strchr(out, '\n');
    cr_assert_not_null(newline, "no status in: %s", out);
    *newline = '\0';
    int status = atoi(out);
    *leftovers = strdup(newline + 1);
    free(out);
    return status;
}

Test(signals, sigterm_exits_143_with_no_output)
{
    char *left = NULL;
    cr_expect_eq(interrupted_status("TERM", &left), 143);
    cr_expect_str_eq(left, "", "files left behind: %s", left);
    free(left);
}

Test(signals, sigint_exits_130_with_no_output)
{
    char *left = NULL;
    cr_expect_eq(interrupted_status("INT", &left), 130);
    cr_expect_str_eq(left, "", "files left behind: %s", left);
    free(left);
}
