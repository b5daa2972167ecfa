/* soren-host as a user meets it: exit codes (0 ok, 1 job or input error,
 * 2 usage error), messages that say what to do, and no partial output. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include <soren/soren.h>

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}

TestSuite(cli, .init = setup, .fini = teardown);

/* Runs soren-host with args; checks the exit code and that stderr (or
 * stdout, for code 0) contains fragment. */
static void expect_run(int code, const char *fragment, const char *args)
{
    char *out = NULL, *err = NULL;
    int rc = tu_runf(&out, &err, "cd '%s' && '%s' %s", dir, tu_host(), args);
    cr_expect_eq(rc, code, "soren-host %s: exit %d, expected %d\nstdout: %s\nstderr: %s", args,
                 rc, code, out, err);
    const char *where = code == 0 ? out : err;
    if (fragment)
        cr_expect(strstr(where, fragment) != NULL, "soren-host %s: \"%s\" lacks \"%s\"", args,
                  where, fragment);
    free(out);
    free(err);
}

static void write_in_dir(const char *name, const char *text, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tu_write(path, text, size);
}

Test(cli, help_and_version)
{
    expect_run(0, "Usage: soren-host", "--help");
    expect_run(0, "run NAME|PATH [INPUT...]", "-h");
    expect_run(0, "--sample FRACTION", "--help");
    expect_run(0, "--small-keys N", "--help");
    expect_run(0, "--explain", "--help");
    expect_run(0, "initial hash table slots", "--help");
    expect_run(0, "Regions grow when they fill", "--help");
    char version[64];
    snprintf(version, sizeof version, "soren-host 0.1.0 (plugin ABI %d.%d)", SOREN_ABI_MAJOR,
             SOREN_ABI_MINOR);
    expect_run(0, version, "--version");
}

Test(cli, usage_errors_exit_2)
{
    expect_run(2, "no command given", "");
    expect_run(2, "unknown command \"frobnicate\"", "frobnicate");
    expect_run(2, "unknown option --frob", "--frob list");
    expect_run(2, "--threads: expected a number", "run wordcount --threads 0 x");
    expect_run(2, "--threads: expected a number", "run wordcount --threads many x");
    expect_run(2, "--device: expected auto, cpu or gpu", "run wordcount --device tpu x");
    expect_run(2, "--engine: expected one of", "run wordcount --engine magic x");
    expect_run(2, "--format: expected tsv or json", "run wordcount --format xml x");
    expect_run(2, "--output needs a value", "run wordcount --output");
    expect_run(2, "run needs a job", "run");
    expect_run(2, "list takes no arguments", "list extra");
    expect_run(2, "info takes one NAME or PATH", "info");
}

Test(cli, adaptive_options_exit_2_on_bad_values)
{
    static const char *const bad_samples[] = {"abc", "-0.1", "1.5", "nan", "inf", "''",
                                              "0.5x", "1e400", "2"};
    for (size_t i = 0; i < sizeof bad_samples / sizeof bad_samples[0]; i++) {
        char args[128];
        snprintf(args, sizeof args, "run wordcount --sample %s x", bad_samples[i]);
        expect_run(2, "--sample: expected a fraction from 0 to 1 (0 turns monitoring off)",
                   args);
    }
    expect_run(2, "--sample needs a value", "run wordcount --sample");
    expect_run(2, "--small-keys: expected a number of distinct keys",
               "run wordcount --small-keys -1 x");
    expect_run(2, "--small-keys: expected a number of distinct keys",
               "run wordcount --small-keys lots x");
    expect_run(2, "--small-keys: expected a number of distinct keys",
               "run wordcount --small-keys 99999999999999999999999 x");
    expect_run(2, "--table-slots: expected a size", "run wordcount --table-slots 0 x");
    expect_run(2, "--key-bytes: expected a size", "run wordcount --key-bytes 1T x");
    expect_run(2, "--pair-slots: expected a size",
               "run wordcount --pair-slots 99999999999999999999999 x");
    expect_run(2, "unknown option --explain=yes", "run wordcount --explain=yes x");
}

Test(cli, adaptive_options_accept_their_range)
{
    write_in_dir("in.txt", "b a b\n", 6);
    static const char *const good[] = {"--sample 0", "--sample 1", "--sample 0.5",
                                       "--sample 1e-3", "--small-keys 0",
                                       "--small-keys 1000000", "--table-slots 1",
                                       "--table-slots 16 --sample 0", "--explain"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char args[128];
        snprintf(args, sizeof args, "run wordcount --device cpu %s in.txt", good[i]);
        expect_run(0, "a\t1\nb\t2\n", args);
    }
}

Test(cli, parameter_errors_exit_2)
{
    write_in_dir("in.txt", "a b\n", 4);
    expect_run(2, "missing required parameter pattern", "run grep in.txt");
    expect_run(2, "grep has no parameter \"colour\" (it takes: pattern)",
               "run grep --param colour=red in.txt");
    expect_run(2, "wordcount takes no parameters", "run wordcount --param x=1 in.txt");
    expect_run(2, "expected NAME=VALUE", "run grep --param pattern in.txt");
    expect_run(2, "invalid pattern \"ab(c\"", "run grep --param 'pattern=ab(c' in.txt");
    expect_run(2, "cannot read", "run grep --param pattern=@no-such-file in.txt");
}

Test(cli, job_errors_exit_1_and_leave_no_output)
{
    write_in_dir("odd.rgb", "\x01\x02\x03\x04", 4);
    expect_run(1, "not a multiple of the record size 3", "run histogram odd.rgb -o out.tsv");
    expect_run(1, "no plugin named \"nope\"", "run nope x -o out.tsv");
    expect_run(1, "missing.txt", "run wordcount missing.txt -o out.tsv");
    expect_run(1, "not a regular file", "run wordcount . -o out.tsv");
    char big[70000];
    memset(big, 'w', sizeof big);
    write_in_dir("long.txt", big, sizeof big);
    expect_run(1, "65536", "run wordcount long.txt -o out.tsv");
    /* Nothing may be left behind: no output, no temporary file. */
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    struct dirent *de;
    while ((de = readdir(d)))
        cr_expect(strncmp(de->d_name, "out.tsv", 7) != 0, "left behind: %s", de->d_name);
    closedir(d);
}

Test(cli, device_gpu_without_gpu_is_an_error)
{
    if (tu_runf(NULL, NULL, "nvidia-smi -L >/dev/null 2>&1") == 0)
        cr_skip_test("a GPU is present; this checks the message where none is");
    write_in_dir("in.txt", "a\n", 2);
    expect_run(1, "--device gpu: no usable GPU", "run wordcount --device gpu in.txt");
    expect_run(0, "a\t1", "run wordcount --device auto in.txt");
    char *err = NULL;
    tu_runf(NULL, &err, "cd '%s' && '%s' run wordcount --verbose in.txt", dir, tu_host());
    cr_expect(strstr(err, "device: cpu (no usable GPU") != NULL, "%s", err);
    free(err);
}

Test(cli, output_file_and_stdin)
{
    write_in_dir("in.txt", "b a b\n", 6);
    expect_run(0, NULL, "run wordcount in.txt -o out.tsv");
    char path[4096];
    snprintf(path, sizeof path, "%s/out.tsv", dir);
    char *text = tu_read(path, NULL);
    cr_expect_str_eq(text, "a\t1\nb\t2\n");
    free(text);
    char *out = NULL;
    cr_expect_eq(tu_runf(&out, NULL, "printf 'x y x' | '%s' run wordcount", tu_host()), 0);
    cr_expect_str_eq(out, "x\t2\ny\t1\n");
    free(out);
    /* Several inputs add up; a line never spans two files. */
    write_in_dir("in2.txt", "b", 1);
    expect_run(0, "a\t1\nb\t3\n", "run wordcount in.txt in2.txt");
}

Test(cli, list_info_check)
{
    expect_run(0, "wordcount        1.0.0    Count the occurrences of every word", "list");
    expect_run(0, "histogram", "list");
    expect_run(0, "grep", "list");
    expect_run(0, "param:     pattern (regex, required)", "info grep");
    expect_run(0, "key:       index (0 to 767)", "info histogram");
    expect_run(0, ": ok (wordcount 1.0.0", "check wordcount");
    /* A broken manifest in the path is listed, with its reason, and the
     * others still are. */
    write_in_dir("broken.json", "{\"name\": 1}", 11);
    char args[4200];
    snprintf(args, sizeof args, "--plugin-path '%s' list", dir);
    expect_run(0, "BROKEN", args);
    expect_run(0, "wordcount", args);
}

/* soren-host check prints, for every invalid catalog manifest, exactly the
 * message the catalog expects. */
Test(cli, check_prints_every_catalog_error)
{
    char root[4096];
    snprintf(root, sizeof root, "%s/tests/manifests/invalid", tu_srcdir());
    DIR *d = opendir(root);
    cr_assert_not_null(d, "no catalog at %s", root);
    struct dirent *de;
    int cases = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char case_dir[4400], expected_path[4500];
        snprintf(case_dir, sizeof case_dir, "%s/%s", root, de->d_name);
        snprintf(expected_path, sizeof expected_path, "%s/error", case_dir);
        char *expected = tu_read(expected_path, NULL);
        char *err = NULL;
        int rc = tu_runf(NULL, &err, "cd '%s' && '%s' check manifest.json", case_dir, tu_host());
        char want[2048];
        snprintf(want, sizeof want, "soren-host: %s", expected);
        cr_expect_eq(rc, 1, "%s: exit %d", de->d_name, rc);
        cr_expect_str_eq(err, want, "%s", de->d_name);
        free(expected);
        free(err);
        cases++;
    }
    closedir(d);
    cr_expect_geq(cases, 20, "the catalog has only %d invalid cases", cases);
}
