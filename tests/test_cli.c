/* soren-host as a user meets it: exit codes (0 ok, 1 job or input error,
 * 2 usage error), messages that say what to do, and no partial output. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "number.h"
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
    expect_run(2, "--device: expected auto, cpu, gpu or both", "run wordcount --device tpu x");
    expect_run(2, "--devices: expected all, a count such as 2, or GPU numbers such as 0,2, got "
               "\"0\"", "run wordcount --devices 0 x");
    expect_run(2, "--devices: expected all, a count such as 2, or GPU numbers such as 0,2, got "
               "\"17\"", "run wordcount --devices 17 x");
    expect_run(2, "got \"1,1\": GPU 1 is named twice", "run wordcount --devices 1,1 x");
    expect_run(2, "got \"0,,2\": \"\" is not a GPU number", "run wordcount --devices 0,,2 x");
    expect_run(2, "got \"two\"", "run wordcount --devices two x");
    expect_run(2, "--timeout: expected a duration such as 90, 90s, 5m or 2h (seconds where no "
               "unit is given), from 1 s to 1000 h, got \"0\"", "run wordcount --timeout 0 x");
    expect_run(2, "got \"5x\"", "run wordcount --timeout 5x x");
    expect_run(2, "got \"1001h\"", "run wordcount --timeout 1001h x");
    expect_run(2, "got \"m\"", "run wordcount --timeout m x");
    expect_run(2, "--engine: expected one of", "run wordcount --engine magic x");
    expect_run(2, "--format: expected one of tsv csv json jsonl, got \"xml\"",
               "run wordcount --format xml x");
    expect_run(2, "--order: expected one of key value_desc value_asc none, got \"value\"",
               "run wordcount --order value x");
    expect_run(2, "--top: expected a number of pairs from 1 up, got \"0\"",
               "run wordcount --top 0 x");
    expect_run(2, "--top: expected a number of pairs from 1 up, got \"-3\"",
               "run wordcount --top -3 x");
    expect_run(2, "--top: expected a number of pairs from 1 up, got \"ten\"",
               "run wordcount --top ten x");
    expect_run(2, "--from applies to the new command only", "run wordcount --from grep x");
    expect_run(2, "--dir applies to the new command only", "list --dir .");
    expect_run(2, "devices takes no arguments, got \"0\"", "devices 0");
    expect_run(2, "new takes one NAME", "new");
    expect_run(2, "new takes one NAME", "new a b");
    expect_run(2, "--output needs a value", "run wordcount --output");
    expect_run(2, "run needs a job", "run");
    expect_run(2, "list takes no arguments", "list extra");
    expect_run(2, "info takes one NAME or PATH", "info");
    /* A near miss names what was meant. */
    expect_run(2, "unknown command \"rnu\"; did you mean \"run\"?", "rnu wordcount x");
    expect_run(2, "unknown command \"lsit\"; did you mean \"list\"?", "lsit");
    expect_run(2, "unknown option --devcie=gpu; did you mean --device?", "--devcie=gpu list");
    expect_run(2, "unknown option --plugin-pth; did you mean --plugin-path?",
               "--plugin-pth x list");
    expect_run(1, "no plugin named \"wordcont\" in the plugin path", "info wordcont");
    expect_run(1, "did you mean \"wordcount\"? `soren-host list`", "check wordcont");
    /* a folder of the path with no plugins, or none at all, before the one
     * that holds the near name */
    expect_run(1, "did you mean \"wordcount\"?", "-P ./no-such-folder info wordcont");
}

/* A plugin is named by its folder, its NAME.cu or NAME.so (the NAME.json
 * beside them) as well as by NAME.json, in every command that takes one;
 * any other file or folder is refused with what is expected. */
Test(cli, a_plugin_by_its_folder_or_source)
{
    cr_assert_eq(tu_runf(NULL, NULL, "mkdir '%s/wordcount' '%s/empty' && cp '%s/stage/plugins/"
                                     "wordcount.so' '%s/stage/plugins/wordcount.json' "
                                     "'%s/wordcount/' && echo 'x' > '%s/wordcount/wordcount.cu' "
                                     "&& printf 'b a b\\n' > '%s/in.txt'",
                         dir, dir, tu_builddir(), tu_builddir(), dir, dir, dir), 0);
    const char *names[] = {"./wordcount", "wordcount/", "./wordcount/wordcount.cu",
                           "wordcount/wordcount.so", "./wordcount/wordcount.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "run %s in.txt", names[i]);
        expect_run(0, "a\t1\nb\t2\n", args);
        snprintf(args, sizeof args, "info %s", names[i]);
        expect_run(0, "name:      wordcount", args);
        snprintf(args, sizeof args, "check %s", names[i]);
        expect_run(0, ": ok (wordcount 1.0.0", args);
    }
    expect_run(1, "./in.txt is not a plugin: name one by its name, NAME.json, NAME.so, NAME.cu "
                  "(the NAME.json beside it) or its folder", "run ./in.txt in.txt");
    expect_run(1, "./empty is a folder without empty.json: a plugin's folder holds NAME.json "
                  "and NAME.so", "check ./empty");
    expect_run(1, "cannot read ./absent: No such file or directory", "info ./absent");
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
    expect_run(2, "--block-slots: expected a count such as 256 (0: no per-block tables), got "
                  "\"-4\"", "run wordcount --block-slots -4 x");
    expect_run(2, "--block-slots: expected a count", "run wordcount --block-slots 2K x");
    expect_run(2, "unknown option --explain=yes", "run wordcount --explain=yes x");
}

Test(cli, adaptive_options_accept_their_range)
{
    write_in_dir("in.txt", "b a b\n", 6);
    static const char *const good[] = {"--sample 0", "--sample 1", "--sample 0.5",
                                       "--sample 1e-3", "--small-keys 0",
                                       "--small-keys 1000000", "--table-slots 1",
                                       "--table-slots 16 --sample 0", "--block-slots 0",
                                       "--block-slots 100000", "--explain"};
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

/* Every number a user writes, a parameter's or an option's, is decimal:
 * what C's strtoul with base 0 would read as octal or hex, or after a
 * space, is refused with the form accepted; a number past its type's range
 * is refused with the range. */
Test(cli, numbers_are_decimal_only)
{
    static const struct {
        const char *text;
        soren_number_type type;
        unsigned flags;
        const char *why; /* NULL: accepted */
        double value;
    } cases[] = {
        {"0", SOREN_NUMBER_U32, 0, NULL, 0},
        {"10", SOREN_NUMBER_U32, 0, NULL, 10},
        {"4294967295", SOREN_NUMBER_U32, 0, NULL, 4294967295.0},
        {"4294967296", SOREN_NUMBER_U32, 0, "a u32 is from 0 to 4294967295", 0},
        {"010", SOREN_NUMBER_U32, 0, "without leading zeros, e.g. 10", 0},
        {"00", SOREN_NUMBER_U64, 0, "without leading zeros, e.g. 0", 0},
        {"0x4", SOREN_NUMBER_U32, 0, "write decimal digits", 0},
        {" 4", SOREN_NUMBER_U32, 0, "write decimal digits", 0},
        {"4 ", SOREN_NUMBER_U32, 0, "write decimal digits", 0},
        {"+4", SOREN_NUMBER_U64, 0, "write decimal digits", 0},
        {"-1", SOREN_NUMBER_U64, 0, "write decimal digits", 0},
        {"", SOREN_NUMBER_U64, 0, "write decimal digits", 0},
        {"18446744073709551615", SOREN_NUMBER_U64, 0, NULL, 18446744073709551615.0},
        {"18446744073709551616", SOREN_NUMBER_U64, 0, "a u64 is from 0", 0},
        {"64K", SOREN_NUMBER_U64, SOREN_NUMBER_SUFFIX, NULL, 65536},
        {"2g", SOREN_NUMBER_U64, SOREN_NUMBER_SUFFIX, NULL, 2147483648.0},
        {"64K", SOREN_NUMBER_U64, 0, "write decimal digits", 0},
        {"1T", SOREN_NUMBER_U64, SOREN_NUMBER_SUFFIX, "followed by K, M or G", 0},
        {"08M", SOREN_NUMBER_U64, SOREN_NUMBER_SUFFIX, "e.g. 8M", 0},
        {"4G", SOREN_NUMBER_U32, SOREN_NUMBER_SUFFIX, "a u32 is from 0 to 4294967295", 0},
        {"17179869184G", SOREN_NUMBER_U64, SOREN_NUMBER_SUFFIX, "a u64 is from 0", 0},
        {"-10", SOREN_NUMBER_I64, 0, NULL, -10},
        {"-0", SOREN_NUMBER_I64, 0, NULL, 0},
        {"-010", SOREN_NUMBER_I64, 0, "e.g. -10", 0},
        {"-9223372036854775808", SOREN_NUMBER_I64, 0, NULL, -9223372036854775808.0},
        {"9223372036854775808", SOREN_NUMBER_I64, 0, "from -9223372036854775808 to", 0},
        {"-9223372036854775809", SOREN_NUMBER_I64, 0, "from -9223372036854775808 to", 0},
        {"--1", SOREN_NUMBER_I64, 0, "optional minus sign", 0},
        {"0x10", SOREN_NUMBER_I64, 0, "optional minus sign", 0},
        {"1.5", SOREN_NUMBER_F64, 0, NULL, 1.5},
        {"-.5", SOREN_NUMBER_F64, 0, NULL, -0.5},
        {"5.", SOREN_NUMBER_F64, 0, NULL, 5},
        {"0.25", SOREN_NUMBER_F32, 0, NULL, 0.25},
        {"2E-3", SOREN_NUMBER_F64, 0, NULL, 2e-3},
        {"1e+3", SOREN_NUMBER_F64, 0, NULL, 1000},
        {"1e-400", SOREN_NUMBER_F64, 0, NULL, 0},
        {"01.5", SOREN_NUMBER_F64, 0, "e.g. 1.5", 0},
        {"1e400", SOREN_NUMBER_F64, 0, "an f64 is at most 1.7976931348623157e+308", 0},
        {"1e39", SOREN_NUMBER_F32, 0, "an f32 is at most 3.40282347e+38", 0},
        {"0x1p4", SOREN_NUMBER_F64, 0, "no space, hex, inf or nan", 0},
        {"inf", SOREN_NUMBER_F64, 0, "no space, hex, inf or nan", 0},
        {"nan", SOREN_NUMBER_F32, 0, "no space, hex, inf or nan", 0},
        {" 1.5", SOREN_NUMBER_F64, 0, "no space", 0},
        {".", SOREN_NUMBER_F64, 0, "no space", 0},
        {"1e", SOREN_NUMBER_F64, 0, "no space", 0},
        {"1.5x", SOREN_NUMBER_F64, 0, "no space", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        soren_number n;
        char why[160];
        int rc = soren_number_parse(cases[i].text, cases[i].type, cases[i].flags, &n, why,
                                    sizeof why);
        if (cases[i].why) {
            cr_expect_eq(rc, -1, "\"%s\" is refused", cases[i].text);
            cr_expect(strstr(why, cases[i].why) != NULL, "\"%s\": \"%s\" lacks \"%s\"",
                      cases[i].text, why, cases[i].why);
            continue;
        }
        cr_expect_eq(rc, 0, "\"%s\": %s", cases[i].text, why);
        double got = cases[i].type == SOREN_NUMBER_U32   ? (double)n.u32
                   : cases[i].type == SOREN_NUMBER_U64   ? (double)n.u64
                   : cases[i].type == SOREN_NUMBER_I64   ? (double)n.i64
                   : cases[i].type == SOREN_NUMBER_F32   ? (double)n.f32
                                                         : n.f64;
        cr_expect(got == cases[i].value, "\"%s\" read as %.17g", cases[i].text, got);
    }

    /* Through soren-host: a parameter written in decimal means its number
     * (10 x 10 matmul: 100 lines), and the options read numbers the same
     * way. */
    float ten[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    write_in_dir("a", (const char *)ten, sizeof ten);
    char *out = NULL;
    cr_expect_eq(tu_runf(&out, NULL, "cd '%s' && '%s' run matmul --param a=@a --param b=@a "
                         "--param rows=10 --param inner=1 --param cols=10 | wc -l", dir,
                         tu_host()), 0);
    cr_expect_str_eq(out, "100\n");
    free(out);
    expect_run(2, "parameter rows: \"010\" is not a valid u32: write it without leading "
               "zeros, e.g. 10", "run matmul --param a=@a --param b=@a --param rows=010 "
               "--param inner=1 --param cols=10");
    expect_run(2, "--top: expected a number of pairs from 1 up, got \"010\": write it "
               "without leading zeros, e.g. 10", "run wordcount --top 010 x");
    expect_run(2, "--threads: expected a number from 1 to 4096, got \"0x4\": write decimal "
               "digits", "run wordcount --threads 0x4 x");
    expect_run(2, "--sample: expected a fraction from 0 to 1 (0 turns monitoring off), got "
               "\" 0.5\": write a decimal number", "run wordcount --sample ' 0.5' x");
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

/* Two-stage and index jobs run under --device auto (on the CPU here). */
Test(cli, multistage_and_index_jobs_run_under_auto)
{
    write_in_dir("log", "u\t1.2.3.4\tc\n", 11);
    expect_run(0, "u\t1", "run pageviewcount --device auto log");
    write_in_dir("a", "\0\0\0\x40", 4); /* 2.0f */
    expect_run(0, "0\t4\n", "run matmul --param a=@a --param b=@a --param rows=1 "
               "--param inner=1 --param cols=1 --device auto");
}

/* inf - inf is a NaN with its sign bit set on x86: written nan, as every
 * NaN is, in every format. */
Test(cli, a_negative_nan_is_written_nan)
{
    const float infs[2] = {INFINITY, INFINITY}, signs[2] = {1, -1};
    write_in_dir("a", (const char *)infs, sizeof infs);
    write_in_dir("b", (const char *)signs, sizeof signs);
    const char *mm = "run matmul --device cpu --param a=@a --param b=@b --param rows=1 "
                     "--param inner=2 --param cols=1";
    static const char *const formats[][2] = {{"tsv", "0\tnan\n"},
                                              {"csv", "0,nan\r\n"},
                                              {"json", "[\n{\"key\": 0, \"value\": \"nan\"}\n]\n"},
                                              {"jsonl", "{\"key\": 0, \"value\": \"nan\"}\n"}};
    for (int i = 0; i < 4; i++) {
        char *out = NULL;
        cr_expect_eq(tu_runf(&out, NULL, "cd '%s' && '%s' %s --format %s", dir, tu_host(), mm,
                             formats[i][0]), 0);
        cr_expect_str_eq(out, formats[i][1], "--format %s", formats[i][0]);
        free(out);
    }
}

Test(cli, index_jobs_count_their_tasks)
{
    write_in_dir("a", "\0\0\0\x40\0\0\0\x40", 8); /* 2.0f 2.0f */
    const char *mm = "run matmul --param a=@a --param b=@a --param inner=1";
    char args[512];
    /* 2 x 1 times 1 x 2: count_from is rows x cols, --tasks cuts it. */
    snprintf(args, sizeof args, "%s --param rows=2 --param cols=2", mm);
    expect_run(0, "0\t4\n1\t4\n4294967296\t4\n4294967297\t4\n", args);
    snprintf(args, sizeof args, "%s --param rows=2 --param cols=2 --tasks 1", mm);
    expect_run(0, "0\t4\n", args);
    snprintf(args, sizeof args, "%s --param rows=0 --param cols=2", mm);
    expect_run(0, NULL, args);
    snprintf(args, sizeof args, "%s --param rows=2 --param cols=2 a", mm);
    expect_run(2, "matmul reads index input (tasks known by their number, no data): it takes "
               "no INPUT files, got a", args);
    write_in_dir("in.txt", "a\n", 2);
    expect_run(2, "--tasks applies to jobs with index input; wordcount reads lines",
               "run wordcount --tasks 3 in.txt");
    expect_run(2, "--tasks: expected a number of tasks from 1 up", "run matmul --tasks 0");
    expect_run(0, "input:     index (tasks: rows x cols)", "info matmul");
    expect_run(0, "stage 2:   reads the pairs of the stage before", "info pageviewcount");
    /* Index keys counted by parameters: their product, in any stage. */
    char info[4300];
    /* info reads a manifest as run does: as job.json, the file its name says */
    cr_assert_eq(tu_runf(NULL, NULL, "cp '%s/tests/manifests/valid/stage-index-keys-count-from/"
                         "manifest.json' '%s/job.json'", tu_srcdir(), dir), 0);
    snprintf(info, sizeof info, "info '%s/job.json'", dir);
    expect_run(0, "key:       index (0 to 7)\n", info);
    expect_run(0, "key:       index (0 to rows x cols x rows x cols - 1)\n", info);
    snprintf(info, sizeof info, "info '%s/stage/test-plugins/bucketsum.json'", tu_builddir());
    expect_run(0, "input:     index (tasks: n)\n", info);
    expect_run(0, "key:       index (0 to buckets - 1)\n", info);
    expect_run(0, "key:       index (0 to groups - 1)\n", info);
}

/* --iterate takes a number of runs from 1 up, and only a job whose
 * manifest names the parameter to feed; either mistake is a usage error
 * that leaves no output. */
Test(cli, iterate_usage_errors)
{
    write_in_dir("in.txt", "a\n", 2);
    expect_run(0, "--iterate N", "--help");
    expect_run(2, "--iterate applies to jobs whose manifest has \"iterate\" (the parameter "
               "each run's output feeds); wordcount has none: run it without --iterate",
               "run wordcount --iterate 3 in.txt -o out.tsv");
    char path[4096];
    snprintf(path, sizeof path, "%s/out.tsv", dir);
    cr_expect_neq(access(path, F_OK), 0, "a refused --iterate left %s", path);
    expect_run(2, "--iterate: expected a number of runs from 1 up, got \"0\"",
               "run wordcount --iterate 0 in.txt");
    expect_run(2, "--iterate: expected a number of runs from 1 up, got \"-1\"",
               "run wordcount --iterate -1 in.txt");
    expect_run(2, "--iterate: expected a number of runs from 1 up, got \"ten\"",
               "run wordcount --iterate ten in.txt");
    expect_run(2, "--iterate needs a value", "run wordcount in.txt --iterate");
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
    expect_run(0, "param:     rows (scratch, default 0)", "info svmstep");
    expect_run(0, "key:       index (0 to 767)", "info histogram");
    expect_run(0, ": ok (wordcount 1.0.0", "check wordcount");
    expect_run(0, "kmeans           1.0.0    One k-means step over 3-D float32 points", "list");
    expect_run(0, "iterate:   run --iterate N feeds each run's output into parameter centroids",
               "info kmeans");
    expect_run(0, "key:       index (0 to k x 4 - 1)\n", "info kmeans");
    expect_run(0, ": ok (kmeans 1.0.0", "check kmeans");
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

/* ---- Output formats, order and top --------------------------------------- */

Test(cli, formats_order_and_top)
{
    write_in_dir("in.txt", "c b,x c \"q\" c b a\n", 18);
    expect_run(0, "\"q\"\t1\na\t1\nb\t1\nb,x\t1\nc\t3\n", "run wordcount in.txt");
    expect_run(0, "\"\"\"q\"\"\",1\r\na,1\r\nb,1\r\n\"b,x\",1\r\nc,3\r\n",
               "run wordcount in.txt --format csv");
    expect_run(0, "[\n{\"key\": \"\\\"q\\\"\", \"value\": 1},\n{\"key\": \"a\", \"value\": 1},\n",
               "run wordcount in.txt -f json");
    expect_run(0, "{\"key\": \"b,x\", \"value\": 1}\n{\"key\": \"c\", \"value\": 3}\n",
               "run wordcount in.txt --format=jsonl");
    /* --order replaces the manifest's order (key); ties go by key. */
    expect_run(0, "c\t3\n\"q\"\t1\na\t1\nb\t1\nb,x\t1\n", "run wordcount in.txt --order value_desc");
    expect_run(0, "\"q\"\t1\na\t1\nb\t1\nb,x\t1\nc\t3\n", "run wordcount in.txt --order value_asc");
    expect_run(0, "c\t3\n\"q\"\t1\n", "run wordcount in.txt --order value_desc --top 2");
    expect_run(0, "\"q\"\t1\n", "run wordcount in.txt --top 1");
    expect_run(0, "c,3\r\n", "run wordcount in.txt --top 1 --order value_desc -f csv");
    /* --top past the number of pairs keeps them all. */
    expect_run(0, "\"q\"\t1\na\t1\nb\t1\nb,x\t1\nc\t3\n", "run wordcount in.txt --top 1000");
    /* none: the engine's order; --top still keeps exactly N of the pairs. */
    char *out = NULL;
    cr_assert_eq(tu_runf(&out, NULL, "cd '%s' && '%s' run wordcount in.txt --order none --top 3",
                         dir, tu_host()), 0);
    int lines = 0;
    for (const char *p = out; *p; p++)
        lines += *p == '\n';
    cr_expect_eq(lines, 3, "%s", out);
    free(out);
    /* A map-only job ordered by value: stringmatch's line offsets. */
    write_in_dir("lines.txt", "ab\nxab\nab ab\n", 13);
    expect_run(0, "7\t7\n10\t7\n4\t3\n0\t0\n",
               "run stringmatch --param pattern=ab lines.txt --order value_desc");
}

/* ---- The progress line ------------------------------------------------------ */

/* Writes MB megabytes of seeded text into dir/name with soren-gen. */
static void make_text_file(const char *name, int mb)
{
    cr_assert_eq(tu_runf(NULL, NULL, "'%s/soren-gen' text --size %dM -o '%s/%s'", tu_builddir(),
                         mb, dir, name), 0);
}

static char *read_in_dir(const char *name, size_t *size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return tu_read(path, size);
}

Test(cli, progress_forced_into_a_file_leaves_the_output_alone)
{
    /* Large enough that one thread still maps it a frame after it starts,
     * on a fast core too. */
    make_text_file("in.txt", 48);
    char *err = NULL, *out = NULL;
    int rc = tu_runf(&out, &err, "cd '%s' && '%s' run wordcount in.txt --device cpu -t 1 "
                                 "--progress -o forced.tsv", dir, tu_host());
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect_str_eq(out, "");
    /* Frames start with \r and say the phase, the bytes of the total, the
     * rate and the time left; the last thing written wipes the line. */
    cr_expect(strstr(err, "\rsoren-host: map ") != NULL, "%s", err);
    cr_expect(strstr(err, " of 48.0 MiB (") != NULL, "%s", err);
    cr_expect(strstr(err, " MiB/s, ") != NULL && strstr(err, " left") != NULL, "%s", err);
    cr_expect(strchr(err, '\n') == NULL, "a progress frame ended a line: %s", err);
    size_t n = strlen(err);
    cr_expect(n > 2 && err[n - 1] == '\r' && err[n - 2] == ' ', "not wiped at the end: %s", err);
    free(err);
    free(out);

    /* Standard error is a file here: without the flag, no progress. */
    rc = tu_runf(&out, &err, "cd '%s' && '%s' run wordcount in.txt --device cpu -t 1 "
                             "-o plain.tsv", dir, tu_host());
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect_str_eq(err, "");
    free(err);
    free(out);
    size_t a_size, b_size;
    char *a = read_in_dir("forced.tsv", &a_size), *b = read_in_dir("plain.tsv", &b_size);
    cr_expect(a_size == b_size && memcmp(a, b, a_size) == 0, "--progress changed the output");
    free(a);

    /* Nor does it touch standard output, where the result then goes. */
    rc = tu_runf(&out, &err, "cd '%s' && '%s' run wordcount in.txt --device cpu -t 2 "
                             "--progress", dir, tu_host());
    cr_assert_eq(rc, 0);
    cr_expect(strlen(out) == b_size && memcmp(out, b, b_size) == 0,
              "--progress changed standard output");
    cr_expect(strstr(err, "soren-host: ") != NULL, "%s", err);
    free(err);
    free(out);
    free(b);

    /* The last of --progress and --no-progress wins. */
    rc = tu_runf(NULL, &err, "cd '%s' && '%s' run wordcount in.txt --progress --no-progress "
                             "-o off.tsv", dir, tu_host());
    cr_assert_eq(rc, 0);
    cr_expect_str_eq(err, "");
    free(err);
}

Test(cli, progress_and_verbose_lines_do_not_tear)
{
    make_text_file("in.txt", 4);
    char *err = NULL;
    int rc = tu_runf(NULL, &err, "cd '%s' && '%s' run wordcount in.txt --device cpu -t 1 "
                                 "--progress --verbose -o out.tsv", dir, tu_host());
    cr_assert_eq(rc, 0, "%s", err);
    /* Every verbose message starts a line: at the start, after a newline,
     * or after the \r that ends a wiped frame. */
    static const char *const messages[] = {"soren-host: device: cpu", "soren-host: cpu engine:",
                                           "soren-host: variant: ", "pairs written\n"};
    for (size_t i = 0; i < 4; i++) {
        const char *m = strstr(err, messages[i]);
        cr_expect_not_null(m, "no \"%s\" in %s", messages[i], err);
        if (m && i < 3)
            cr_expect(m == err || m[-1] == '\n' || m[-1] == '\r', "torn: %s", err);
    }
    free(err);
}

/* On a terminal (script(1) gives the run one) the line shows unasked. */
Test(cli, progress_on_a_terminal)
{
    if (tu_runf(NULL, NULL, "script -qec true /dev/null") != 0)
        cr_skip_test("script(1) from util-linux is needed to run soren-host on a terminal");
    make_text_file("in.txt", 8);
    make_text_file("slow.txt", 1);
    /* The test job that sleeps on every line keeps its map on the line
     * for frames to show, however fast the machine.  It reads how long from
     * the environment of the process that maps, so the run is local even
     * where a resident host answers (test_host checks the relayed line). */
    char *out = NULL;
    int rc = tu_runf(&out, NULL, "cd '%s' && SOREN_TEST_SLOW_US=1 script -qec \"'%s' run --local "
                                 "'%s/stage/test-plugins/faulty.json' slow.txt --device cpu -t 1 "
                                 "-o tty.tsv\" /dev/null", dir, tu_host(), tu_builddir());
    cr_assert_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "soren-host: map ") != NULL, "%s", out);
    free(out);
    rc = tu_runf(&out, NULL, "cd '%s' && script -qec \"'%s' run wordcount in.txt --device cpu "
                             "-t 1 --no-progress -o tty2.tsv\" /dev/null", dir, tu_host());
    cr_assert_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "soren-host: ") == NULL, "%s", out);
    free(out);
}

/* ---- soren-host new ------------------------------------------------------ */

static char *path_in(const char *a, const char *b)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s/%s", dir, a, b) > 0);
    return p;
}

static int mode_of(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s", path);
    return (int)(st.st_mode & 07777);
}

Test(cli, new_writes_a_skeleton)
{
    /* A loose umask must not make a folder soren-host would then refuse. */
    char *out = NULL, *err = NULL;
    int rc = tu_runf(&out, &err, "cd '%s' && umask 002 && '%s' new my-job", dir, tu_host());
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect(strstr(out, "./my-job/: my-job.cu, my-job.json, Makefile, README.md") != NULL,
              "%s", out);
    cr_expect(strstr(out, "next: cd ./my-job && make && soren-host run ./my-job.json INPUT") !=
              NULL, "%s", out);
    free(out);
    free(err);
    char *folder = path_in("my-job", "");
    cr_expect_eq(mode_of(folder) & 022, 0, "folder mode %o", mode_of(folder));
    free(folder);
    static const char *const files[] = {"my-job.cu", "my-job.json", "Makefile", "README.md"};
    for (size_t i = 0; i < 4; i++) {
        char *path = path_in("my-job", files[i]);
        char *text = tu_read(path, NULL);
        cr_expect(strstr(text, "@NAME@") == NULL && strstr(text, "@IDENT@") == NULL,
                  "%s keeps a placeholder", files[i]);
        cr_expect_eq(mode_of(path) & 022, 0, "%s mode %o", files[i], mode_of(path));
        if (i == 0) {
            cr_expect(strstr(text, "SOREN_PLUGIN(my-job, SOREN_STAGE(.map = my_job_map") != NULL,
                      "%s", text);
            cr_expect(strstr(text, "SOREN_FN void my_job_map(") != NULL, "%s", text);
        }
        if (i == 2)
            cr_expect(strstr(text, "NAME = my-job\n") != NULL &&
                      strstr(text, "/plugin.mk") != NULL, "%s", text);
        free(text);
        free(path);
    }
    /* The manifest is valid and names the job and its library. */
    expect_run(0, "name:      my-job\n", "info ./my-job/my-job.json");
    expect_run(0, "library:   ./my-job/my-job.so\n", "info ./my-job/my-job.json");

    /* Never overwritten; nothing of the first is changed. */
    expect_run(1, "./my-job already exists: soren-host new never overwrites; choose another "
                  "NAME, another --dir, or remove ./my-job", "new my-job");
    /* A name that starts with a digit gets a C identifier of its own. */
    expect_run(0, "./7up/", "new 7up");
    char *cu = path_in("7up", "7up.cu");
    char *text = tu_read(cu, NULL);
    cr_expect(strstr(text, "SOREN_PLUGIN(7up, SOREN_STAGE(.map = job_7up_map") != NULL, "%s",
              text);
    free(text);
    free(cu);
}

Test(cli, new_refuses_bad_names_and_places)
{
    static const char *const bad[] = {"Upper", "_x", "-- -x", "a/b", "..", "a.b", "''", "sp\\ ace",
                                      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "new %s", bad[i]);
        expect_run(2, "is not a job name: use lowercase letters, digits, '_' and '-'", args);
    }
    expect_run(1, "cannot create no/such/dir/x: No such file or directory (create the folder "
                  "it goes in first, or choose another --dir)", "new x --dir no/such/dir");
    expect_run(2, "--from nope: no such example", "new x --from nope");
    expect_run(2, "--from ../x: no such example", "new x --from ../x");
    /* Nothing is left behind by a refusal. */
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    struct dirent *de;
    while ((de = readdir(d)))
        cr_expect(de->d_name[0] == '.', "left behind: %s", de->d_name);
    closedir(d);
}

Test(cli, new_from_an_example_and_into_a_dir)
{
    char *sub = NULL;
    cr_assert(asprintf(&sub, "%s/work", dir) > 0);
    cr_assert_eq(mkdir(sub, 0755), 0);
    free(sub);
    expect_run(0, "work/mygrep/: mygrep.cu, mygrep.json, Makefile, README.md, from the example "
                  "grep", "new mygrep --from grep --dir work");
    char *cu = path_in("work/mygrep", "mygrep.cu");
    char *text = tu_read(cu, NULL);
    cr_expect(strstr(text, "SOREN_PLUGIN(mygrep,") != NULL, "%s", text);
    cr_expect(strstr(text, "mygrep_map") != NULL, "%s", text);
    cr_expect(strstr(text, "soren_dfa") != NULL, "the example's code is gone: %s", text);
    free(text);
    free(cu);
    /* The example's manifest, renamed, with its parameter. */
    expect_run(0, "param:     pattern (regex, required)", "info ./work/mygrep/mygrep.json");
    expect_run(0, "name:      mygrep\n", "info ./work/mygrep/mygrep.json");
    expect_run(0, "library:   ./work/mygrep/mygrep.so\n", "info ./work/mygrep/mygrep.json");
    /* The kit's data folder is where SOREN_DATADIR says. */
    char *err = NULL;
    int rc = tu_runf(NULL, &err, "cd '%s' && SOREN_DATADIR=/nonexistent '%s' new y", dir,
                     tu_host());
    cr_expect_eq(rc, 1);
    cr_expect(strstr(err, "cannot read /nonexistent/templates/plugin.cu: No such file or "
                          "directory; is Soren installed (make install)?") != NULL, "%s", err);
    free(err);
    /* A template that is a FIFO is refused at once, not waited on. */
    err = NULL;
    rc = tu_runf(NULL, &err, "cd '%s' && mkdir -p kit/templates && mkfifo kit/templates/plugin.cu "
                 "&& SOREN_DATADIR=kit timeout 20 '%s' new z", dir, tu_host());
    cr_expect_eq(rc, 1);
    cr_expect(strstr(err, "kit/templates/plugin.cu is a pipe or FIFO, not a regular file; is "
                          "Soren installed (make install)?") != NULL, "%s", err);
    free(err);
}

/* ---- soren-host devices ----------------------------------------------------- */

Test(cli, devices_without_a_gpu)
{
    if (tu_runf(NULL, NULL, "nvidia-smi -L >/dev/null 2>&1") == 0)
        cr_skip_test("a GPU is present; this checks the message where none is");
    char *out = NULL, *err = NULL;
    int rc = tu_runf(&out, &err, "'%s' devices", tu_host());
    cr_expect_eq(rc, 1);
    cr_expect_str_eq(out, "");
    cr_expect(strncmp(err, "soren-host: no usable GPU: ", 27) == 0, "%s", err);
    cr_expect(strstr(err, "runtime ") != NULL, "%s", err);
    cr_expect(strstr(err, "Until then jobs run on the CPU engine.\n") != NULL, "%s", err);
    free(out);
    free(err);
    /* --devices: all is the one CPU run there is; named GPUs are not there */
    char in[4096];
    snprintf(in, sizeof in, "%s/devices.txt", dir);
    tu_write(in, "b a b\n", 6);
    rc = tu_runf(&out, &err, "'%s' run wordcount --devices all '%s'", tu_host(), in);
    cr_expect_eq(rc, 0, "%s", err);
    cr_expect_str_eq(out, "a\t1\nb\t2\n");
    free(out);
    free(err);
    rc = tu_runf(&out, &err, "'%s' run wordcount --devices 2 '%s'", tu_host(), in);
    cr_expect_eq(rc, 1);
    cr_expect(strstr(err, "--devices: no usable GPU: ") != NULL, "%s", err);
    free(out);
    free(err);
    /* bound to fewer CPUs than the host has, as mpirun binds a rank: -v says so */
    if (sysconf(_SC_NPROCESSORS_ONLN) > 1 && tu_runf(NULL, NULL, "taskset -c 0 true") == 0) {
        rc = tu_runf(&out, &err, "taskset -c 0 '%s' run wordcount -v -o /dev/null '%s'",
                     tu_host(), in);
        cr_expect_eq(rc, 0, "%s", err);
        cr_expect(strstr(err, "soren-host: cpus: this process may run on 1 of the host's ") !=
                      NULL, "%s", err);
        free(out);
        free(err);
    }
    rc = tu_runf(&out, &err, "'%s' run wordcount --devices 2 --device cpu '%s'", tu_host(), in);
    cr_expect_eq(rc, 2);
    cr_expect(strstr(err, "--devices spreads a run over GPUs, and --device cpu asks for the "
                     "CPU engine") != NULL, "%s", err);
    free(out);
    free(err);
}
