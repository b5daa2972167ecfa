/*
 * test_api.c - libsoren's API (soren/host.h): opening plugins, jobs and
 * their options, parameters as text and as bytes, file, memory and index
 * inputs, runs and re-runs, results read in place and written, the explain
 * report, and k-means through the API against a plain C loop.  Runs on the
 * GPU where one is usable (device auto), on the CPU engine elsewhere.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datagen.h"
#include "jschema.h"
#include "kmeans_ref.h"
#include "testutil.h"
#include <soren/host.h>

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }

static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}

TestSuite(api, .init = setup, .fini = teardown);

static soren_plugin *open_plugin(const char *name)
{
    soren_error err;
    soren_error_clear(&err);
    soren_plugin *p = NULL;
    cr_assert_eq(soren_open(name, &p, &err), SOREN_OK, "soren_open %s: %s", name, err.text);
    cr_assert_not_null(p);
    return p;
}

static soren_job *new_job(soren_plugin *p, const soren_job_options *o)
{
    soren_error err;
    soren_error_clear(&err);
    soren_job *job = NULL;
    cr_assert_eq(soren_job_new(p, o, &job, &err), SOREN_OK, "soren_job_new: %s", err.text);
    return job;
}

/* Runs the job, asserting success. */
static void run(soren_job *job)
{
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_job_run(job, &err), SOREN_OK, "soren_job_run: %s", err.text);
}

/* Expects a call's status and a message containing needle. */
#define EXPECT_FAIL(call, status, needle)                                                  \
    do {                                                                                   \
        soren_error err_;                                                                  \
        soren_error_clear(&err_);                                                          \
        soren_status st_ = call(&err_);                                                    \
        cr_expect_eq(st_, status, "%s: status %d (%s)", #call, (int)st_, err_.text);        \
        cr_expect(strstr(err_.text, needle) != NULL, "%s: \"%s\" not in \"%s\"", #call,    \
                  needle, err_.text);                                                      \
    } while (0)

/* The job's result written as TSV, read back. */
static char *result_text(soren_job *job)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/result.tsv", dir);
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_job_write(job, path, "tsv", &err), SOREN_OK, "%s", err.text);
    return tu_read(path, NULL);
}

/* soren-host's output for the same run, for comparison. */
static char *host_output(const char *args)
{
    char *out = NULL, *err = NULL;
    int rc = tu_runf(&out, &err, "'%s' run %s", tu_host(), args);
    cr_assert_eq(rc, 0, "soren-host run %s: exit %d: %s", args, rc, err);
    free(err);
    return out;
}

static soren_status open_missing(soren_error *err)
{
    soren_plugin *p = (soren_plugin *)1;
    soren_status st = soren_open("no-such-job", &p, err);
    cr_expect_null(p, "a failed soren_open leaves *out NULL");
    return st;
}

Test(api, open_by_name_and_by_path)
{
    soren_close(open_plugin("wordcount"));
    char path[4096];
    snprintf(path, sizeof path, "%s/stage/plugins/grep.json", tu_builddir());
    soren_close(open_plugin(path));
    EXPECT_FAIL(open_missing, SOREN_EPLUGIN, "no-such-job");
    soren_close(NULL);
    soren_job_free(NULL);
}

/* Whether the process has the file whose path ends in tail mapped. */
static int mapped(const char *tail)
{
    char *maps = tu_read("/proc/self/maps", NULL);
    cr_assert_not_null(maps);
    int found = 0;
    for (char *line = strtok(maps, "\n"); line && !found; line = strtok(NULL, "\n")) {
        size_t n = strlen(line), t = strlen(tail);
        found = n >= t && strcmp(line + n - t, tail) == 0;
    }
    free(maps);
    return found;
}

static soren_plugin *mismatched;
static soren_status new_here_mismatched(soren_error *err)
{
    soren_job *job = NULL;
    soren_status st = soren_job_new(mismatched, NULL, &job, err);
    cr_expect_null(job, "a failed soren_job_new leaves *out NULL");
    return st;
}

/* soren_open reads the manifest alone; the first job in the process loads
 * the library and checks it against the manifest, and a job for a
 * resident host leaves the library unloaded, whatever it holds. */
Test(api, the_library_is_loaded_by_a_job_in_the_process)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/stage/plugins/grep.json", tu_builddir());
    soren_plugin *p = open_plugin(path);
    soren_job_options o;
    soren_job_options_init(&o);
    o.host = "/nonexistent/soren-host.sock";
    soren_job *in_host = new_job(p, &o);
    cr_expect_not(mapped("/grep.so"), "soren_open and a job for a host loaded grep.so");
    soren_job *here = new_job(p, NULL);
    cr_expect(mapped("/grep.so"), "a job in the process did not load grep.so");
    soren_job_free(here);
    soren_job_free(in_host);
    soren_close(p);

    /* a library built for another key type than its manifest says */
    cr_assert_eq(tu_runf(NULL, NULL, "cp '%s/tests/plugins/.libs/mismatch.so' "
                         "'%s/tests/plugins/mismatch.json' '%s/'", tu_builddir(), tu_srcdir(),
                         dir), 0);
    snprintf(path, sizeof path, "%s/mismatch.json", dir);
    mismatched = open_plugin(path);
    EXPECT_FAIL(new_here_mismatched, SOREN_EPLUGIN, "key type: the library was built for u32");
    in_host = new_job(mismatched, &o);
    cr_expect_not(mapped("/mismatch.so"), "a failed load or a job for a host left mismatch.so "
                  "loaded");
    soren_job_free(in_host);
    soren_close(mismatched);
}

static soren_plugin *wc;
static soren_status new_with_engine(soren_error *err)
{
    soren_job_options o;
    soren_job_options_init(&o);
    o.engine = "fastest";
    soren_job *job = NULL;
    return soren_job_new(wc, &o, &job, err);
}
static soren_status new_with_sample(soren_error *err)
{
    soren_job_options o;
    soren_job_options_init(&o);
    o.sample = 1.5;
    soren_job *job = NULL;
    return soren_job_new(wc, &o, &job, err);
}
static soren_status new_with_device(soren_error *err)
{
    soren_job_options o;
    soren_job_options_init(&o);
    o.device = (soren_device)7;
    soren_job *job = NULL;
    return soren_job_new(wc, &o, &job, err);
}

Test(api, options_are_checked)
{
    wc = open_plugin("wordcount");
    EXPECT_FAIL(new_with_engine, SOREN_EUSAGE, "\"fastest\"");
    EXPECT_FAIL(new_with_sample, SOREN_EUSAGE, "1.5");
    EXPECT_FAIL(new_with_device, SOREN_EUSAGE, "device 7");
    soren_close(wc);
}

/* wordcount through the API over a file, over memory, over both: the same
 * bytes as soren-host over the same input. */
Test(api, wordcount_equals_soren_host)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/text", dir);
    dg_text(path, 2 << 20, 71);
    size_t size = 0;
    char *text = tu_read(path, &size);
    char args[4200];
    snprintf(args, sizeof args, "wordcount '%s'", path);
    char *want = host_output(args);

    soren_plugin *p = open_plugin("wordcount");
    soren_job *job = new_job(p, NULL);
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_job_input_file(job, path, &err), SOREN_OK, "%s", err.text);
    run(job);
    char *got = result_text(job);
    cr_expect_str_eq(got, want, "file input");
    free(got);

    /* The text cut at a newline into two memory inputs. */
    size_t half = size / 2;
    while (text[half - 1] != '\n')
        half++;
    soren_job_clear_inputs(job);
    cr_assert_eq(soren_job_input_memory(job, text, half, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_input_memory(job, text + half, size - half, &err), SOREN_OK, "%s",
                 err.text);
    run(job);
    got = result_text(job);
    cr_expect_str_eq(got, want, "two memory inputs");
    free(got);

    /* The pairs in place: as many as lines of output, counts that add up. */
    soren_pairs out;
    cr_assert_eq(soren_job_result(job, &out, &err), SOREN_OK, "%s", err.text);
    cr_expect_eq(out.key_type, SOREN_TYPE_STRING);
    cr_expect_eq(out.value_type, SOREN_TYPE_U32);
    cr_expect_eq(out.value_size, 4);
    uint64_t lines = 0, words = 0;
    for (const char *c = want; *c; c++)
        lines += *c == '\n';
    cr_expect_eq(out.count, lines);
    for (uint64_t i = 0; i < out.count; i++) {
        uint32_t n;
        memcpy(&n, soren_pairs_value(&out, i), 4);
        words += n;
    }
    uint64_t want_words = 0;
    for (size_t i = 0; i < size; i++)
        want_words += (i == 0 || strchr(" \t\n\v\f\r", text[i - 1])) && !strchr(" \t\n\v\f\r", text[i]);
    cr_expect_eq(words, want_words);
    soren_job_free(job);
    soren_close(p);
    free(want);
    free(text);
}

static soren_job *grep_job;
static soren_status grep_unknown_param(soren_error *err)
{
    return soren_job_param(grep_job, "patern", "x", err);
}
static soren_status grep_bad_pattern(soren_error *err)
{
    return soren_job_param(grep_job, "pattern", "a(b", err);
}
static soren_status grep_pattern_bytes(soren_error *err)
{
    return soren_job_param_bytes(grep_job, "pattern", "ab", 2, err);
}
static soren_status grep_run(soren_error *err) { return soren_job_run(grep_job, err); }
static soren_status grep_result(soren_error *err)
{
    soren_pairs out;
    return soren_job_result(grep_job, &out, err);
}
static soren_status grep_tasks(soren_error *err) { return soren_job_tasks(grep_job, 5, err); }

/* Parameters change between runs; mistakes are errors that say what the
 * job takes, and leave the job as it was. */
/* Records of several inputs count their offsets in all of them laid end to
 * end, as soren-host's standard input carries them. */
Test(api, offsets_in_several_inputs)
{
    soren_plugin *p = open_plugin("stringmatch");
    soren_job *job = new_job(p, NULL);
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_job_param(job, "pattern", "ab", &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_input_memory(job, "abc\nxab\n", 8, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_input_memory(job, "ab\n", 3, &err), SOREN_OK, "%s", err.text);
    run(job);
    char *got = result_text(job);
    cr_expect_str_eq(got, "0\t0\n5\t4\n8\t8\n");
    free(got);

    /* Seeded text as a file between two memory inputs, cut at line ends. */
    char path[4096], part[4096];
    snprintf(path, sizeof path, "%s/text", dir);
    snprintf(part, sizeof part, "%s/part", dir);
    dg_text(path, 1 << 20, 72);
    size_t size = 0;
    char *text = tu_read(path, &size);
    size_t cut[2] = {size / 4, size / 2};
    for (size_t k = 0; k < 2; k++)
        while (text[cut[k] - 1] != '\n')
            cut[k]++;
    tu_write(part, text + cut[0], cut[1] - cut[0]);
    char args[4200];
    snprintf(args, sizeof args, "stringmatch --param pattern=th < '%s'", path);
    char *want = host_output(args);
    soren_job_clear_inputs(job);
    cr_assert_eq(soren_job_param(job, "pattern", "th", &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_input_memory(job, text, cut[0], &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_input_file(job, part, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_input_memory(job, text + cut[1], size - cut[1], &err), SOREN_OK,
                 "%s", err.text);
    run(job);
    got = result_text(job);
    cr_expect_str_eq(got, want, "a memory input, a file, a memory input");
    free(got);
    free(want);
    free(text);
    soren_job_free(job);
    soren_close(p);
}

Test(api, parameters_between_runs)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/text", dir);
    dg_text(path, 1 << 20, 72);
    soren_plugin *p = open_plugin("grep");
    grep_job = new_job(p, NULL);
    EXPECT_FAIL(grep_result, SOREN_EUSAGE, "soren_job_run first");
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_job_input_file(grep_job, path, &err), SOREN_OK, "%s", err.text);
    EXPECT_FAIL(grep_run, SOREN_EUSAGE, "missing required parameter pattern");
    EXPECT_FAIL(grep_unknown_param, SOREN_EUSAGE, "it takes: pattern");
    EXPECT_FAIL(grep_bad_pattern, SOREN_EUSAGE, "pattern");
    EXPECT_FAIL(grep_pattern_bytes, SOREN_EUSAGE, "give it as text");
    EXPECT_FAIL(grep_tasks, SOREN_EUSAGE, "not index input");

    const char *patterns[] = {"^a", "^th.*ing$", "Q"};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(soren_job_param(grep_job, "pattern", patterns[i], &err), SOREN_OK, "%s",
                     err.text);
        run(grep_job);
        char *got = result_text(grep_job), args[4300];
        snprintf(args, sizeof args, "grep --param 'pattern=%s' '%s'", patterns[i], path);
        char *want = host_output(args);
        cr_expect_str_eq(got, want, "pattern %s", patterns[i]);
        cr_expect(want[0] != '\0', "pattern %s matches something", patterns[i]);
        free(got);
        free(want);
    }
    soren_job_free(grep_job);
    soren_close(p);
}

static soren_job *svmstep_job;
static soren_status svmstep_rows_bytes(soren_error *err)
{
    uint64_t size = 4096;
    return soren_job_param_bytes(svmstep_job, "rows", &size, sizeof size, err);
}
static soren_status svmstep_rows_text(soren_error *err)
{
    return soren_job_param(svmstep_job, "rows", "4k", err);
}
static soren_status svmstep_rows_too_many(soren_error *err)
{
    return soren_job_param(svmstep_job, "rows", "18446744073709551616", err);
}

/* A scratch parameter is given by its size in bytes, as text. */
Test(api, scratch_parameters_take_a_size)
{
    soren_plugin *p = open_plugin("svmstep");
    svmstep_job = new_job(p, NULL);
    EXPECT_FAIL(svmstep_rows_bytes, SOREN_EUSAGE,
                "parameter rows is scratch memory: give its size in bytes as text");
    EXPECT_FAIL(svmstep_rows_text, SOREN_EUSAGE,
                "parameter rows: \"4k\" is not a valid scratch size");
    EXPECT_FAIL(svmstep_rows_too_many, SOREN_EUSAGE, "is not a valid scratch size");
    soren_error err;
    soren_error_clear(&err);
    cr_expect_eq(soren_job_param(svmstep_job, "rows", "4096", &err), SOREN_OK, "%s", err.text);
    cr_expect_eq(soren_job_param(svmstep_job, "rows", "0", &err), SOREN_OK, "%s", err.text);
    /* twice the host's memory: nothing is reserved on the host until the
     * CPU engine's map writes it (the GPU's runs never do) */
    FILE *rule = fopen("/proc/sys/vm/overcommit_memory", "r");
    int strict = rule && fgetc(rule) == '2';
    if (rule)
        fclose(rule);
    if (!strict) {
        char twice[32];
        snprintf(twice, sizeof twice, "%llu",
                 2ull * (unsigned long long)sysconf(_SC_PHYS_PAGES) *
                     (unsigned long long)sysconf(_SC_PAGESIZE));
        cr_expect_eq(soren_job_param(svmstep_job, "rows", twice, &err), SOREN_OK, "%s: %s",
                     twice, err.text);
    }
    soren_job_free(svmstep_job);
    soren_close(p);
}

static soren_job *matmul_job;
static soren_status matmul_rows_width(soren_error *err)
{
    uint64_t eight = 8;
    return soren_job_param_bytes(matmul_job, "rows", &eight, sizeof eight, err);
}
static soren_status matmul_input(soren_error *err)
{
    return soren_job_input_memory(matmul_job, "x", 1, err);
}

/* An index job: its tasks from its parameters (count_from), numbers given
 * as bytes, the result equal to soren-host's; run again with one matrix
 * changed in place and the other as it was (a GPU session uploads only
 * what changed), the result follows the change, also where the job reads
 * the caller's matrices in place and each change is set again. */
Test(api, index_job_with_number_bytes)
{
    const uint32_t n = 16;
    float a[16 * 16], b[16 * 16];
    uint64_t rng = 73;
    for (int i = 0; i < 256; i++) {
        a[i] = (float)(tu_rand_below(&rng, 64)) / 8 - 4;
        b[i] = (float)(tu_rand_below(&rng, 64)) / 8 - 4;
    }
    char pa[4096], pb[4096];
    snprintf(pa, sizeof pa, "%s/a.bin", dir);
    snprintf(pb, sizeof pb, "%s/b.bin", dir);
    tu_write(pa, a, sizeof a);
    soren_plugin *p = open_plugin("matmul");
    matmul_job = new_job(p, NULL);
    soren_error err;
    soren_error_clear(&err);
    EXPECT_FAIL(matmul_rows_width, SOREN_EUSAGE, "takes 4 bytes, got 8");
    EXPECT_FAIL(matmul_input, SOREN_EUSAGE, "soren_job_tasks");
    cr_assert_eq(soren_job_param_bytes(matmul_job, "a", a, sizeof a, &err), SOREN_OK, "%s",
                 err.text);
    const char *dims[] = {"rows", "inner", "cols"};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(soren_job_param_bytes(matmul_job, dims[i], &n, sizeof n, &err), SOREN_OK,
                     "%s", err.text);
    char *first = NULL;
    for (int round = 0; round < 4; round++) {
        if (round > 0)
            for (int i = 0; i < 256; i++)
                b[i] = b[i] * 2 + 1; /* the same size, other values */
        tu_write(pb, b, sizeof b);
        /* rounds 2 and 3 read the caller's b in place, set again after
         * each change; round 2 a in place too (the job frees neither) */
        if (round == 2)
            cr_assert_eq(soren_job_param_bytes_in_place(matmul_job, "a", a, sizeof a, &err),
                         SOREN_OK, "%s", err.text);
        cr_assert_eq(round < 2 ? soren_job_param_bytes(matmul_job, "b", b, sizeof b, &err)
                               : soren_job_param_bytes_in_place(matmul_job, "b", b, sizeof b,
                                                                &err),
                     SOREN_OK, "%s", err.text);
        run(matmul_job);
        char *got = result_text(matmul_job), args[8400];
        snprintf(args, sizeof args, "matmul --param a=@'%s' --param b=@'%s' --param rows=16 "
                 "--param inner=16 --param cols=16", pa, pb);
        char *want = host_output(args);
        cr_expect_str_eq(got, want, "round %d", round);
        soren_pairs out;
        cr_assert_eq(soren_job_result(matmul_job, &out, &err), SOREN_OK, "%s", err.text);
        cr_expect_eq(out.count, 256);
        if (round == 0)
            first = got;
        else
            cr_expect_str_neq(got, first, "the changed matrix changed the product");
        if (round > 0)
            free(got);
        free(want);
    }
    free(first);
    soren_job_free(matmul_job);
    soren_close(p);
}

/* Expects the call (which passes E as its soren_error) to refuse a NULL
 * argument with SOREN_EUSAGE and a message holding needle; then the same
 * call with a NULL soren_error, which must fail the same way and not crash. */
#define REFUSED(needle, ...)                                                               \
    do {                                                                                   \
        soren_error e_;                                                                    \
        soren_error_clear(&e_);                                                            \
        soren_error *E = &e_;                                                              \
        soren_status st_ = __VA_ARGS__;                                                    \
        cr_expect_eq(st_, SOREN_EUSAGE, "%s: status %d (%s)", #__VA_ARGS__, (int)st_,      \
                     e_.text);                                                             \
        cr_expect(strstr(e_.text, needle) != NULL, "%s: \"%s\" not in \"%s\"",             \
                  #__VA_ARGS__, needle, e_.text);                                          \
        E = NULL;                                                                          \
        st_ = __VA_ARGS__;                                                                 \
        cr_expect_eq(st_, SOREN_EUSAGE, "%s with a NULL soren_error: status %d",           \
                     #__VA_ARGS__, (int)st_);                                              \
    } while (0)

/* Every call of soren/host.h with each of its pointer arguments NULL:
 * refused with a message naming the call and the argument, or (for the
 * calls that return nothing to check) harmless. */
Test(api, null_arguments_are_refused)
{
    soren_plugin *p = open_plugin("wordcount");
    soren_job *job = new_job(p, NULL);
    soren_plugin *no_plugin = (soren_plugin *)1;
    soren_job *no_job = (soren_job *)1;
    soren_pairs pairs;
    REFUSED("soren_open: no plugin name or path given", soren_open(NULL, &no_plugin, E));
    cr_expect_null(no_plugin);
    REFUSED("soren_open: out is NULL", soren_open("wordcount", NULL, E));
    REFUSED("soren_job_new: no plugin", soren_job_new(NULL, NULL, &no_job, E));
    cr_expect_null(no_job);
    REFUSED("soren_job_new: out is NULL", soren_job_new(p, NULL, NULL, E));
    REFUSED("soren_job_param: job is NULL", soren_job_param(NULL, "x", "1", E));
    REFUSED("soren_job_param: name is NULL", soren_job_param(job, NULL, "1", E));
    REFUSED("soren_job_param: text is NULL", soren_job_param(job, "x", NULL, E));
    REFUSED("soren_job_param_bytes: job is NULL", soren_job_param_bytes(NULL, "x", "1", 1, E));
    REFUSED("soren_job_param_bytes: name is NULL", soren_job_param_bytes(job, NULL, "1", 1, E));
    REFUSED("soren_job_param_bytes_in_place: job is NULL",
            soren_job_param_bytes_in_place(NULL, "x", "1", 1, E));
    REFUSED("soren_job_param_bytes_in_place: name is NULL",
            soren_job_param_bytes_in_place(job, NULL, "1", 1, E));
    REFUSED("soren_job_input_file: job is NULL", soren_job_input_file(NULL, "in.txt", E));
    REFUSED("no input path given", soren_job_input_file(job, NULL, E));
    REFUSED("soren_job_input_memory: job is NULL", soren_job_input_memory(NULL, "a", 1, E));
    REFUSED("an input of 1 bytes at NULL", soren_job_input_memory(job, NULL, 1, E));
    REFUSED("soren_job_input_device: job is NULL", soren_job_input_device(NULL, NULL, 0, E));
    REFUSED("a device input of 16 bytes at NULL", soren_job_input_device(job, NULL, 16, E));
    REFUSED("soren_job_tasks: job is NULL", soren_job_tasks(NULL, 1, E));
    REFUSED("soren_job_run: job is NULL", soren_job_run(NULL, E));
    REFUSED("soren_job_result: job is NULL", soren_job_result(NULL, &pairs, E));
    REFUSED("soren_job_result: out is NULL", soren_job_result(job, NULL, E));
    REFUSED("soren_job_result_device: job is NULL", soren_job_result_device(NULL, &pairs, E));
    REFUSED("soren_job_result_device: out is NULL", soren_job_result_device(job, NULL, E));
    REFUSED("soren_job_write: job is NULL", soren_job_write(NULL, "out.tsv", "tsv", E));
    REFUSED("soren_job_write: path is NULL", soren_job_write(job, NULL, "tsv", E));
    cr_expect_null(soren_job_explain(NULL));
    soren_job_options_init(NULL);
    soren_job_clear_inputs(NULL);
    soren_job_free(NULL);
    soren_close(NULL);

    /* A NULL soren_error on success and on failure alike. */
    cr_expect_eq(soren_job_input_memory(job, "a b a\n", 6, NULL), SOREN_OK);
    cr_expect_eq(soren_job_run(job, NULL), SOREN_OK);
    cr_expect_eq(soren_job_result(job, &pairs, NULL), SOREN_OK);
    cr_expect_eq(pairs.count, 2);
    cr_expect_eq(soren_job_tasks(job, 3, NULL), SOREN_EUSAGE);
    cr_expect_eq(soren_open("no-such-job", &no_plugin, NULL), SOREN_EPLUGIN);
    soren_job_free(job);
    soren_close(p);
}

/* The report after a run is one line of JSON that the schema accepts. */
Test(api, explain_follows_the_schema)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/text", dir);
    dg_text(path, 1 << 20, 74);
    soren_plugin *p = open_plugin("wordcount");
    soren_job *job = new_job(p, NULL);
    cr_expect_null(soren_job_explain(job), "no report before a run");
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_job_input_file(job, path, &err), SOREN_OK, "%s", err.text);
    run(job);
    const char *report = soren_job_explain(job);
    cr_assert_not_null(report);
    cr_expect(strchr(report, '\n') == NULL, "one line");
    json_error_t why;
    json_t *doc = json_loads(report, 0, &why);
    cr_assert_not_null(doc, "%s: %s", why.text, report);
    json_t *schema = tu_explain_schema();
    char reason[512];
    cr_expect(js_validate(schema, doc, reason, sizeof reason), "%s", reason);
    cr_expect_str_eq(json_string_value(json_object_get(doc, "job")), "wordcount");
    json_decref(schema);
    json_decref(doc);
    soren_job_free(job);
    soren_close(p);
}

/* The job's last explain report, parsed (the caller decrefs it). */
static json_t *last_explain(soren_job *job)
{
    json_t *x = json_loads(soren_job_explain(job), 0, NULL);
    cr_assert_not_null(x, "an explain report after a run");
    return x;
}

/* explain's "waits" for the job's last run: the host's waits for the GPU;
 * -1 where the run was on the CPU engine. */
static long long gpu_waits(soren_job *job)
{
    json_t *x = last_explain(job);
    const char *device = json_string_value(json_object_get(x, "device"));
    long long waits = device && strcmp(device, "gpu") == 0
                          ? json_integer_value(json_object_get(x, "waits"))
                          : -1;
    json_decref(x);
    return waits;
}

/* K-means through the API, the program holding the centroids and feeding
 * each run's sums back as the next run's parameter: 1M points of 3
 * dimensions, k = 24 (the sizes bench/api-overhead measures), until no
 * centroid moves (at most 30 runs); every centroid equals a plain C loop's
 * to 1e-4 (they are exact here: the points are on soren-gen's grid).  Then
 * soren_job_iterate, run for run the same. */
Test(api, kmeans_through_the_api_equals_a_c_loop, .timeout = 600)
{
    /* a million points (12 MB), or as many as a smaller test size holds */
    const size_t fit = tu_test_bytes(12) / 12, n = fit < 1000000 ? fit : 1000000;
    const size_t dims = 3, k = 24, stride = dims + 1;
    char points_path[4096], c0_path[4096];
    snprintf(points_path, sizeof points_path, "%s/points.bin", dir);
    snprintf(c0_path, sizeof c0_path, "%s/c0.bin", dir);
    char args[256];
    snprintf(args, sizeof args, "points --count %zu --dims %zu --clusters 24 --seed 75", n, dims);
    tu_gen(points_path, args);
    snprintf(args, sizeof args, "points --dims %zu --centroids %zu --clusters 24 --seed 75", dims,
             k);
    tu_gen(c0_path, args);
    size_t size = 0;
    float *points = (float *)tu_read(points_path, &size);
    cr_assert_eq(size, n * dims * sizeof(float));
    double *want = (double *)tu_read(c0_path, &size);
    cr_assert_eq(size, k * stride * sizeof(double));
    double *centroids = malloc(size), *sums = malloc(size), *start = malloc(size);
    cr_assert(centroids && sums && start);
    memcpy(centroids, want, size);
    memcpy(start, want, size);
    int ref_runs = kmeans_ref_run(points, n, dims, want, k, 30, sums);

    soren_plugin *p = open_plugin("kmeans");
    soren_job *job = new_job(p, NULL);
    soren_error err;
    soren_error_clear(&err);
    uint32_t k32 = (uint32_t)k;
    cr_assert_eq(soren_job_input_file(job, points_path, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_param_bytes(job, "k", &k32, sizeof k32, &err), SOREN_OK, "%s",
                 err.text);
    int runs = 0, changed = 1;
    double *last_read = malloc(size);
    cr_assert_not_null(last_read);
    while (changed && runs < 30) {
        cr_assert_eq(soren_job_param_bytes(job, "centroids", centroids, size, &err), SOREN_OK,
                     "%s", err.text);
        memcpy(last_read, centroids, size);
        run(job);
        runs++;
        /* a re-run on the GPU waits for it once (result_in_one_wait) */
        long long waits = gpu_waits(job);
        if (runs > 1 && waits >= 0)
            cr_expect_eq(waits, 1, "run %d waited for the GPU %lld times", runs, waits);
        soren_pairs out;
        cr_assert_eq(soren_job_result(job, &out, &err), SOREN_OK, "%s", err.text);
        changed = 0;
        for (uint64_t i = 0; i < out.count; i++) {
            uint64_t key_size;
            uint32_t key;
            memcpy(&key, soren_pairs_key(&out, i, &key_size), sizeof key);
            cr_assert(key_size == 4 && key < k * stride);
            double v;
            memcpy(&v, soren_pairs_value(&out, i), sizeof v);
            changed |= centroids[key] != v;
            centroids[key] = v;
        }
    }
    cr_expect_eq(runs, ref_runs, "the API loop ran %d times, the C loop %d", runs, ref_runs);

    /* soren_job_iterate makes the same runs from the same start (on the
     * GPU, every run after the first on the device): the same number, the
     * same last output, the parameter as the last run read it. */
    soren_job *again = new_job(p, NULL);
    cr_assert_eq(soren_job_input_file(again, points_path, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_param_bytes(again, "k", &k32, sizeof k32, &err), SOREN_OK, "%s",
                 err.text);
    cr_assert_eq(soren_job_param_bytes(again, "centroids", start, size, &err), SOREN_OK, "%s",
                 err.text);
    soren_iteration how;
    cr_assert_eq(soren_job_iterate(again, 30, &how, &err), SOREN_OK, "%s", err.text);
    cr_expect_eq(how.runs, (uint64_t)runs, "soren_job_iterate: %llu runs, the program's loop %d",
                 (unsigned long long)how.runs, runs);
    cr_expect_eq(how.converged, !changed);
    cr_expect(gpu_waits(again) < 0 || how.device_runs == how.runs - 1,
              "%llu of %llu runs on the device", (unsigned long long)how.device_runs,
              (unsigned long long)how.runs);
    cr_assert_eq(how.param_size, size);
    cr_expect_eq(memcmp(how.param, last_read, size), 0, "the fed parameter differs");
    soren_pairs mine, theirs;
    cr_assert_eq(soren_job_result(job, &mine, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_result(again, &theirs, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(mine.count, theirs.count);
    cr_expect_eq(memcmp(mine.values, theirs.values, mine.count * mine.value_size), 0,
                 "the last run's output differs");
    soren_job_free(again);
    free(last_read);
    free(start);
    for (size_t c = 0; c < k; c++)
        for (size_t j = 0; j < dims; j++) {
            double got = centroids[c * stride + j] / centroids[c * stride + dims];
            double ref = want[c * stride + j] / want[c * stride + dims];
            cr_expect(fabs(got - ref) <= 1e-4, "centroid %zu, coordinate %zu: %.9g, want %.9g",
                      c, j, got, ref);
        }
    soren_job_free(job);
    soren_close(p);
    free(points);
    free(want);
    free(centroids);
    free(sums);
}

/* soren_job_iterate refuses, saying why, a job with nothing to feed and
 * no runs. */
Test(api, iterate_refuses_what_it_cannot_run)
{
    soren_plugin *counts = open_plugin("wordcount"), *km = open_plugin("kmeans");
    soren_job *job = new_job(counts, NULL);
    soren_error err;
    soren_error_clear(&err);
    soren_iteration how;
    cr_expect_eq(soren_job_iterate(job, 5, &how, &err), SOREN_EUSAGE);
    cr_expect(strstr(err.text, "wordcount: soren_job_iterate: the manifest has no \"iterate\"")
              != NULL, "%s", err.text);
    soren_job_free(job);
    job = new_job(km, NULL);
    soren_error_clear(&err);
    cr_expect_eq(soren_job_iterate(job, 0, &how, &err), SOREN_EUSAGE);
    cr_expect(strstr(err.text, "at most 0 runs") != NULL, "%s", err.text);
    cr_expect_eq(soren_job_iterate(job, 3, NULL, &err), SOREN_EUSAGE);
    soren_job_free(job);
    soren_close(counts);
    soren_close(km);
}

/* ---- On a GPU ------------------------------------------------------------- */

#include <cuda_runtime_api.h>

/* Skips the test where no GPU is usable. */
static void need_gpu(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
        cr_skip_test("no usable GPU: this checks inputs and results in device memory");
}

/* Pairs in device memory, copied back and compared with the host's. */
static void expect_same_pairs(const soren_pairs *dev, const soren_pairs *host)
{
    cr_assert_eq(dev->count, host->count);
    if (host->count == 0)
        return;
    uint64_t n = host->count, key_bytes = host->key_offset[n];
    uint64_t *offsets = malloc((n + 1) * 8);
    uint8_t *keys = malloc(key_bytes ? key_bytes : 1), *values = malloc(n * host->value_size);
    cr_assert(offsets && keys && values);
    cr_assert_eq(cudaMemcpy(offsets, dev->key_offset, (n + 1) * 8, cudaMemcpyDeviceToHost), 0);
    cr_assert_eq(cudaMemcpy(keys, dev->key_bytes, key_bytes, cudaMemcpyDeviceToHost), 0);
    cr_assert_eq(cudaMemcpy(values, dev->values, n * host->value_size, cudaMemcpyDeviceToHost),
                 0);
    cr_expect_eq(memcmp(offsets, host->key_offset, (n + 1) * 8), 0, "key offsets differ");
    cr_expect_eq(memcmp(keys, host->key_bytes, key_bytes), 0, "keys differ");
    cr_expect_eq(memcmp(values, host->values, n * host->value_size), 0, "values differ");
    free(offsets);
    free(keys);
    free(values);
}

/* wordcount over text in device memory, run again after the text changes
 * in place: each run equals the same text given from host memory, and the
 * device copy of the result equals the host's. */
Test(api, device_input_and_result_on_the_gpu)
{
    need_gpu();
    char path[4096];
    snprintf(path, sizeof path, "%s/text", dir);
    dg_text(path, 3 << 20, 76);
    size_t size = 0;
    char *text = tu_read(path, &size);
    void *dev = NULL;
    cr_assert_eq(cudaMalloc(&dev, size), cudaSuccess);
    soren_plugin *p = open_plugin("wordcount");
    soren_job_options o;
    soren_job_options_init(&o);
    o.device = SOREN_DEVICE_GPU;
    soren_job *on_device = new_job(p, &o), *on_host = new_job(p, &o);
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_job_input_device(on_device, dev, size, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_input_memory(on_host, text, size, &err), SOREN_OK, "%s", err.text);
    for (int round = 0; round < 3; round++) {
        /* a different text each round, the same size */
        for (size_t i = 0; i < size; i++)
            if (text[i] >= 'a' && text[i] <= 'z')
                text[i] = (char)('a' + (text[i] - 'a' + round) % 26);
        cr_assert_eq(cudaMemcpy(dev, text, size, cudaMemcpyHostToDevice), cudaSuccess);
        run(on_device);
        run(on_host);
        char *got = result_text(on_device), *want = result_text(on_host);
        size_t at = 0;
        while (got[at] && got[at] == want[at])
            at++;
        size_t line = at;
        while (line && got[line - 1] != '\n')
            line--;
        cr_expect_str_eq(got, want, "round %d: from the device input \"%.40s\", from host "
                         "memory \"%.40s\" (byte %zu of %zu and %zu)", round, got + line,
                         want + line, at, strlen(got), strlen(want));
        free(got);
        free(want);
        soren_pairs host_pairs, dev_pairs;
        cr_assert_eq(soren_job_result(on_device, &host_pairs, &err), SOREN_OK, "%s", err.text);
        cr_assert_eq(soren_job_result_device(on_device, &dev_pairs, &err), SOREN_OK, "%s",
                     err.text);
        expect_same_pairs(&dev_pairs, &host_pairs);
    }
    soren_job_free(on_device);
    soren_job_free(on_host);
    soren_close(p);
    cudaFree(dev);
    free(text);
}

static soren_status misaligned_device_input(soren_error *err)
{
    soren_plugin *p = open_plugin("wordcount");
    soren_job *job = new_job(p, NULL);
    soren_status st = soren_job_input_device(job, (const char *)NULL + 8, 64, err);
    soren_job_free(job);
    soren_close(p);
    return st;
}

static soren_status device_result_after_a_cpu_run(soren_error *err)
{
    soren_plugin *p = open_plugin("wordcount");
    soren_job_options o;
    soren_job_options_init(&o);
    o.device = SOREN_DEVICE_CPU;
    soren_job *job = new_job(p, &o);
    soren_job_input_memory(job, "a b a\n", 6, err);
    soren_job_run(job, err);
    soren_pairs out;
    soren_status st = soren_job_result_device(job, &out, err);
    soren_job_free(job);
    soren_close(p);
    return st;
}

Test(api, device_memory_mistakes)
{
    EXPECT_FAIL(misaligned_device_input, SOREN_EUSAGE, "16-byte aligned");
    EXPECT_FAIL(device_result_after_a_cpu_run, SOREN_EUSAGE, "in host memory");
}

/* The number of overflows explain lists for the job's last run. */
static size_t overflows(soren_job *job)
{
    json_t *x = last_explain(job);
    size_t n = json_array_size(json_object_get(x, "overflows"));
    json_decref(x);
    return n;
}


/* A job's runs again over inputs of other key counts, on the GPU and on
 * the CPU engine, each run equal: slowmap (u32 keys, summed) over memory
 * inputs, the first 200,064 lines all sampled (96 keys make a table of
 * 1,024 slots, full at 768):
 *   96 keys     the first run;
 *   2,800 keys  the map stops for room after the one wait, and the run
 *               resumes it into a grown table, the usual way;
 *   2,000 keys  the run before had more keys than one block takes: the
 *               usual way from the start;
 *   2,600 keys  more than one block takes, in a table that holds them: the
 *               usual way after the one wait;
 *   2,000 keys  the usual way again (the run before had 2,600);
 *   96 keys     one wait for the result, after the one for the lines'
 *               count that a lines input's split on the device takes.
 * Each run's pairs on the device equal those copied back. */
Test(api, rerun_outgrowing_its_table_on_the_gpu, .timeout = 300)
{
    need_gpu();
    char path[4096];
    snprintf(path, sizeof path, "%s/stage/test-plugins/slowmap.json", tu_builddir());
    soren_plugin *p = open_plugin(path);
    soren_job_options o;
    soren_job_options_init(&o);
    o.sample = 1;
    o.device = SOREN_DEVICE_GPU;
    soren_job *gpu = new_job(p, &o);
    o.device = SOREN_DEVICE_CPU;
    soren_job *cpu = new_job(p, &o);
    soren_job *jobs[2] = {gpu, cpu};
    soren_error err;
    soren_error_clear(&err);
    enum { RUNS = 6 };
    const uint32_t keys[RUNS] = {96, 2800, 2000, 2600, 2000, 96};
    for (int round = 0; round < RUNS; round++) {
        size_t size = 0;
        char *text = tu_lines_of_lengths(keys[round], round == 0 ? 2084 : 2, &size);
        for (int j = 0; j < 2; j++) {
            soren_job_clear_inputs(jobs[j]);
            cr_assert_eq(soren_job_input_memory(jobs[j], text, size, &err), SOREN_OK, "%s",
                         err.text);
            run(jobs[j]);
        }
        char *got = result_text(gpu), *want = result_text(cpu);
        cr_expect_str_eq(got, want, "run %d, %u keys", round + 1, keys[round]);
        free(got);
        free(want);
        long long waits = gpu_waits(gpu);
        size_t grew = overflows(gpu);
        if (round >= 1 && round <= 4)
            cr_expect_gt(waits, 2, "run %d, %u keys went the usual way (%lld waits)", round + 1,
                         keys[round], waits);
        if (round == 1)
            cr_expect_gt(grew, 0, "run 2 outgrew its table");
        if (round >= 2)
            cr_expect_eq(grew, 0, "run %d's table held its keys", round + 1);
        if (round == 5)
            cr_expect_eq(waits, 2, "run 6 waited for the GPU %lld times", waits);
        /* the pairs left on the device are the ones copied back */
        soren_pairs host_pairs, dev_pairs;
        cr_assert_eq(soren_job_result(gpu, &host_pairs, &err), SOREN_OK, "%s", err.text);
        cr_assert_eq(soren_job_result_device(gpu, &dev_pairs, &err), SOREN_OK, "%s", err.text);
        expect_same_pairs(&dev_pairs, &host_pairs);
        free(text);
    }
    soren_job_free(gpu);
    soren_job_free(cpu);
    soren_close(p);
}

/* The error of a run on the job's engine (NULL: it ran). */
static char *run_error(soren_job *job)
{
    soren_error err;
    soren_error_clear(&err);
    return soren_job_run(job, &err) == SOREN_OK ? NULL : strdup(err.text);
}

/* bucketsum (index keys, dense on the GPU) on the GPU and on the CPU
 * engine: a re-run whose map emits a bad key (a modulus past the bucket
 * count) fails with the CPU engine's words, its one wait reading the
 * status with the result; the job then runs again, as on the CPU. */
Test(api, bad_key_in_a_rerun_on_the_gpu)
{
    need_gpu();
    char path[4096];
    snprintf(path, sizeof path, "%s/stage/test-plugins/bucketsum.json", tu_builddir());
    soren_plugin *p = open_plugin(path);
    soren_job_options o;
    soren_job_options_init(&o);
    o.device = SOREN_DEVICE_GPU;
    soren_job *gpu = new_job(p, &o);
    o.device = SOREN_DEVICE_CPU;
    soren_job *cpu = new_job(p, &o);
    soren_job *jobs[2] = {gpu, cpu};
    soren_error err;
    soren_error_clear(&err);
    const uint32_t moduli[3] = {0, 1001, 0};
    for (int round = 0; round < 3; round++) {
        char *why[2] = {NULL, NULL};
        for (int j = 0; j < 2; j++) {
            const char *texts[][2] = {{"n", "100000"}, {"buckets", "1000"}, {"groups", "1000"}};
            for (int t = 0; t < 3; t++)
                cr_assert_eq(soren_job_param(jobs[j], texts[t][0], texts[t][1], &err), SOREN_OK,
                             "%s", err.text);
            cr_assert_eq(soren_job_param_bytes(jobs[j], "modulus", &moduli[round],
                                               sizeof moduli[round], &err),
                         SOREN_OK, "%s", err.text);
            why[j] = run_error(jobs[j]);
        }
        if (moduli[round]) {
            cr_assert_not_null(why[0], "round %d: the GPU run took a bad key", round);
            cr_assert_not_null(why[1], "round %d: the CPU run took a bad key", round);
            cr_expect_str_eq(why[0], why[1], "round %d", round);
        } else {
            cr_assert_null(why[0], "round %d: %s", round, why[0]);
            cr_assert_null(why[1], "round %d: %s", round, why[1]);
            char *got = result_text(gpu), *want = result_text(cpu);
            cr_expect_str_eq(got, want, "round %d", round);
            free(got);
            free(want);
        }
        free(why[0]);
        free(why[1]);
    }
    soren_job_free(gpu);
    soren_job_free(cpu);
    soren_close(p);
}

/* ---- Jobs in threads ------------------------------------------------------ */

/* One thread's job: a plugin with a variant, run again and again over one
 * input, each output compared with the same job run alone on the CPU
 * engine.  A failure is written down, not asserted: Criterion's asserts
 * belong to the test's own thread. */
typedef struct threaded_job {
    const char *plugin;
    const char *engine;
    const char *input;
    const char *param; /* "name=text" or NULL */
    char *want;
    char out[4200];
    char failure[1200];
} threaded_job;

enum { THREADED_RUNS = 6 };

static soren_job *threaded_new(soren_plugin *p, const threaded_job *t, soren_device device,
                               soren_error *err)
{
    soren_job_options o;
    soren_job_options_init(&o);
    o.device = device;
    o.engine = device == SOREN_DEVICE_CPU ? "auto" : t->engine;
    soren_job *job = NULL;
    if (soren_job_new(p, &o, &job, err) != SOREN_OK)
        return NULL;
    if (soren_job_input_file(job, t->input, err) != SOREN_OK)
        goto fail;
    if (t->param) {
        char name[64];
        const char *eq = strchr(t->param, '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - t->param), t->param);
        if (soren_job_param(job, name, eq + 1, err) != SOREN_OK)
            goto fail;
    }
    return job;
fail:
    soren_job_free(job);
    return NULL;
}

static void *threaded_main(void *arg)
{
    threaded_job *t = arg;
    soren_error err;
    soren_error_clear(&err);
    soren_plugin *p = NULL;
    soren_job *job = NULL;
    if (soren_open(t->plugin, &p, &err) != SOREN_OK ||
        !(job = threaded_new(p, t, SOREN_DEVICE_AUTO, &err))) {
        snprintf(t->failure, sizeof t->failure, "setting up: %s", err.text);
        goto done;
    }
    for (int run = 0; run < THREADED_RUNS; run++) {
        if (soren_job_run(job, &err) != SOREN_OK ||
            soren_job_write(job, t->out, "tsv", &err) != SOREN_OK) {
            snprintf(t->failure, sizeof t->failure, "run %d: %s", run, err.text);
            break;
        }
        char *got = tu_read(t->out, NULL);
        int same = strcmp(got, t->want) == 0;
        free(got);
        if (!same) {
            snprintf(t->failure, sizeof t->failure, "run %d: the output differs from the "
                     "CPU engine's", run);
            break;
        }
    }
done:
    soren_job_free(job);
    soren_close(p);
    return NULL;
}

/* Separate jobs run in separate threads at once (host.h), on the GPU where
 * one is usable, each thread's job with another variant, so that every
 * variant's kernels, growth and ordering share one context; every run's
 * output equals the job's alone on the CPU engine. */
Test(api, jobs_in_threads_equal_each_alone, .timeout = 600)
{
    char text[4096], rgb[4096];
    snprintf(text, sizeof text, "%s/text", dir);
    snprintf(rgb, sizeof rgb, "%s/rgb", dir);
    dg_text(text, 3 << 20, 97);
    dg_rgb(rgb, 1 << 20, 98);
    threaded_job jobs[] = {
        {.plugin = "wordcount", .engine = "hash", .input = text},
        {.plugin = "wordcount", .engine = "block", .input = text},
        {.plugin = "wordcount", .engine = "sort", .input = text},
        {.plugin = "wordcount", .engine = "direct", .input = text},
        {.plugin = "histogram", .engine = "dense", .input = rgb},
        {.plugin = "histogram", .engine = "hash", .input = rgb},
        {.plugin = "stringmatch", .engine = "direct", .input = text, .param = "pattern=th"},
        {.plugin = "grep", .engine = "sort", .input = text, .param = "pattern=^a.*b"},
    };
    enum { N = sizeof jobs / sizeof jobs[0] };
    pthread_t threads[N];
    for (size_t i = 0; i < N; i++) {
        soren_plugin *p = open_plugin(jobs[i].plugin);
        soren_error err;
        soren_error_clear(&err);
        soren_job *job = threaded_new(p, &jobs[i], SOREN_DEVICE_CPU, &err);
        cr_assert_not_null(job, "%s: %s", jobs[i].plugin, err.text);
        run(job);
        jobs[i].want = result_text(job);
        cr_assert_gt(strlen(jobs[i].want), 0, "%s gave no pairs", jobs[i].plugin);
        soren_job_free(job);
        soren_close(p);
        snprintf(jobs[i].out, sizeof jobs[i].out, "%s/out.%zu", dir, i);
    }
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(pthread_create(&threads[i], NULL, threaded_main, &jobs[i]), 0);
    for (size_t i = 0; i < N; i++)
        pthread_join(threads[i], NULL);
    for (size_t i = 0; i < N; i++) {
        cr_expect_str_empty(jobs[i].failure, "%s --engine %s: %s", jobs[i].plugin,
                            jobs[i].engine, jobs[i].failure);
        free(jobs[i].want);
    }
}

/* A plugin closed and opened again in one process runs on the GPU: its
 * device code was loaded once and stays loaded. */
Test(api, plugin_opened_again_runs_where_it_ran)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/text", dir);
    dg_text(path, 1 << 20, 99);
    char *first = NULL;
    for (int round = 0; round < 2; round++) {
        soren_plugin *p = open_plugin("wordcount");
        soren_job_options o;
        soren_job_options_init(&o);
        o.device = round == 0 ? SOREN_DEVICE_CPU : SOREN_DEVICE_AUTO;
        soren_job *job = new_job(p, &o);
        soren_error err;
        soren_error_clear(&err);
        cr_assert_eq(soren_job_input_file(job, path, &err), SOREN_OK, "%s", err.text);
        run(job);
        char *got = result_text(job);
        if (round == 0)
            first = got;
        else {
            cr_expect_str_eq(got, first, "opened again, the job's output differs");
            free(got);
        }
        soren_job_free(job);
        soren_close(p);
    }
    free(first);
}
