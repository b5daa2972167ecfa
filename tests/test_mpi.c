/* The distributed run (engine/dist.h, cli/mpi.c): `mpirun -np N soren-host
 * run ...` on the CPU engine, oversubscribed on one host, writes the bytes a
 * plain run writes for N = 1, 2 and 3, for every kind of stage (combine,
 * reduce with and without a combine, map-only, two stages, --iterate), for
 * every input format (offsets and task numbers included), with
 * --output-parts, and with exchanges cut into many rounds; --explain and
 * --verbose report every rank; a rank that fails fails every rank with its
 * words, within a time limit.  Skips, saying why, where soren-host was built
 * without MPI. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "jschema.h"
#include "testutil.h"

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}

TestSuite(mpi, .init = setup, .fini = teardown, .timeout = 300);

static const char *mpirun(void)
{
    const char *m = getenv("SOREN_MPIRUN");
    return m && *m ? m : NULL;
}

static void need_mpi(void)
{
#ifndef HAVE_MPI
    cr_skip_test("soren-host was built without MPI (configure found no Open MPI: "
                 "apt-get install libopenmpi-dev openmpi-bin, then configure again)");
#endif
    if (!mpirun())
        cr_skip_test("configure found no mpirun ($SOREN_MPIRUN is empty)");
}

/* dir/name (static buffer, one at a time). */
static const char *at(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* soren-gen ARGS -o dir/name. */
static void gen(const char *name, const char *args)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tu_gen(path, args);
}

/* Runs `soren-host run ARGS` on the CPU engine in dir: as mpirun's ranks
 * (oversubscribed, one thread each, as root where CI is root), or plainly
 * when ranks is 0; under a time limit, so a hang fails the test.  env, where
 * not NULL, is NAME=VALUE (VALUE quoted for the shell as needed), set for
 * the run and handed to every rank.  Returns the exit status; *err gets
 * standard error (may be NULL). */
static int run_env(const char *env, int ranks, char **err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int run_env(const char *env, int ranks, char **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *args = NULL;
    cr_assert(vasprintf(&args, fmt, ap) > 0);
    va_end(ap);
    char forward[128] = "";
    if (env)
        snprintf(forward, sizeof forward, "-x %.*s", (int)strcspn(env, "="), env);
    /* Under --enable-sanitizers, the ranks check everything but leaks: Open
     * MPI's components, unloaded by MPI_Finalize, leave allocations that
     * LeakSanitizer can only call "(unknown module)", so no suppression by
     * name can hold them.  The other suites check the engines' leaks. */
    char launcher[512] = "";
    if (ranks)
        snprintf(launcher, sizeof launcher,
                 "'%s' --oversubscribe %s -x ASAN_OPTIONS=detect_leaks=0 -np %d", mpirun(),
                 forward, ranks);
    int rc = tu_runf(NULL, err,
                     "cd '%s' && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 %s "
                     "timeout -s KILL 120 %s '%s' run --device cpu %s %s",
                     dir, env ? env : "", launcher, tu_host(), ranks ? "-t 1" : "", args);
    free(args);
    return rc;
}

/* run_env without a variable. */
#define run(...) run_env(NULL, __VA_ARGS__)

static void same_file(const char *a, const char *b, const char *what)
{
    char pa[4096], pb[4096];
    snprintf(pa, sizeof pa, "%s/%s", dir, a);
    snprintf(pb, sizeof pb, "%s/%s", dir, b);
    size_t na = 0, nb = 0;
    char *x = tu_read(pa, &na), *y = tu_read(pb, &nb);
    cr_expect(na == nb && memcmp(x, y, na) == 0, "%s: %s (%zu bytes) differs from %s (%zu bytes)",
              what, b, nb, a, na);
    free(x);
    free(y);
}

/* ARGS plainly, then under 1, 2 and 3 ranks: the same bytes. */
static void same_as_plain(const char *args)
{
    char *err = NULL;
    cr_assert_eq(run(0, &err, "%s -o plain.out", args), 0, "plain run %s: %s", args, err);
    free(err);
    for (int n = 1; n <= 3; n++) {
        err = NULL;
        int rc = run(n, &err, "%s -o ranks.out", args);
        cr_assert_eq(rc, 0, "-np %d run %s: exit %d: %s", n, args, rc, err);
        free(err);
        char what[512];
        snprintf(what, sizeof what, "mpirun -np %d soren-host run %s", n, args);
        same_file("plain.out", "ranks.out", what);
    }
}

Test(mpi, wordcount_as_one_process)
{
    need_mpi();
    gen("text", "text --size 3M --vocab 50000 --seed 11");
    same_as_plain("wordcount text");
}

Test(mpi, histogram_as_one_process)
{
    need_mpi();
    gen("rgb", "rgb --size 2M --seed 12"); /* fixed 3-byte records: slices on whole pixels */
    same_as_plain("histogram rgb");
}

Test(mpi, pageviewcount_as_one_process)
{
    need_mpi();
    gen("log", "weblog --size 3M --seed 13"); /* two stages, each shuffled */
    same_as_plain("pageviewcount log");
}

Test(mpi, kmeans_iterate_as_one_process)
{
    need_mpi();
    gen("points", "points --count 60000 --dims 3 --seed 14");
    gen("c0", "points --count 60000 --dims 3 --seed 14 --centroids 12");
    same_as_plain("kmeans points --param k=12 --param centroids=@c0 --iterate 8");
}

/* Records keep their offsets and task numbers in the whole input. */
Test(mpi, offsets_and_tasks_as_one_process)
{
    need_mpi();
    gen("text", "text --size 1M --vocab 2000 --seed 15");
    same_as_plain("stringmatch text --param pattern=th");
    gen("a", "matrix --rows 40 --cols 30 --seed 1");
    gen("b", "matrix --rows 30 --cols 50 --seed 2");
    same_as_plain("matmul --param a=@a --param b=@b --param rows=40 --param inner=30 "
                  "--param cols=50");
}

/* Several files: each rank's records count their offsets in all of them
 * laid end to end, as one stream of the same bytes does. */
Test(mpi, offsets_over_several_files)
{
    need_mpi();
    gen("text", "text --size 1M --vocab 2000 --seed 18");
    size_t size = 0;
    char *text = tu_read(at("text"), &size);
    size_t cut[4] = {0, size / 5, size / 2, size};
    for (size_t k = 1; k < 3; k++)
        while (text[cut[k] - 1] != '\n')
            cut[k]++;
    for (size_t k = 0; k < 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "part%zu", k);
        tu_write(at(name), text + cut[k], cut[k + 1] - cut[k]);
    }
    free(text);
    char *err = NULL;
    cr_assert_eq(run(0, &err, "stringmatch --param pattern=th -o plain.out < text"), 0,
                 "standard input: %s", err);
    free(err);
    for (int n = 0; n <= 3; n++) {
        err = NULL;
        int rc = run(n, &err, "stringmatch --param pattern=th part0 part1 part2 -o ranks.out");
        cr_assert_eq(rc, 0, "-np %d: exit %d: %s", n, rc, err);
        free(err);
        char what[128];
        snprintf(what, sizeof what, "%d ranks over three files", n);
        same_file("plain.out", "ranks.out", what);
    }
}

/* A reduce without a combine (every value shuffled, grouped on its key's
 * rank) and a combine before a reduce. */
Test(mpi, reduce_functions_as_one_process)
{
    need_mpi();
    gen("text", "text --size 1M --vocab 5000 --seed 16");
    gen("points", "points --count 40000 --dims 2 --seed 17");
    char args[8192];
    snprintf(args, sizeof args, "-P '%s/stage/test-plugins' docfreq text", tu_builddir());
    same_as_plain(args);
    snprintf(args, sizeof args, "-P '%s/stage/test-plugins' kvscale points", tu_builddir());
    same_as_plain(args);
}

/* Slices cross files, never records: an empty file, a file without a final
 * newline, a file smaller than a slice. */
Test(mpi, several_inputs_as_one_process)
{
    need_mpi();
    gen("text", "text --size 2M --seed 18");
    tu_write(at("empty"), "", 0);
    tu_write(at("short"), "a b c\nd e", 9);
    same_as_plain("wordcount short text empty short text");
}

/* Exchanges of a few hundred bytes a round run many rounds. */
Test(mpi, many_rounds_as_one_process)
{
    need_mpi();
    gen("log", "weblog --size 1M --seed 19");
    char *err = NULL;
    cr_assert_eq(run(0, &err, "pageviewcount log -o plain.out"), 0, "%s", err);
    free(err);
    err = NULL;
    int rc = run_env("SOREN_MPI_CHUNK=333", 3, &err, "pageviewcount log -o ranks.out");
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    free(err);
    same_file("plain.out", "ranks.out", "pageviewcount with SOREN_MPI_CHUNK=333");
}

/* Splits a buffer into its lines, sorted (bytes, as strcmp). */
static int line_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static size_t sorted_lines(char *text, char ***lines)
{
    size_t n = 0, cap = 1024;
    *lines = malloc(cap * sizeof **lines);
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (n == cap)
            *lines = realloc(*lines, (cap *= 2) * sizeof **lines);
        (*lines)[n++] = l;
    }
    qsort(*lines, n, sizeof **lines, line_cmp);
    return n;
}

Test(mpi, output_parts)
{
    need_mpi();
    gen("text", "text --size 2M --vocab 30000 --seed 20");
    char *err = NULL;
    cr_assert_eq(run(0, &err, "wordcount text -o plain.tsv"), 0, "%s", err);
    free(err);
    err = NULL;
    int rc = run(3, &err, "wordcount text -o out.tsv --output-parts");
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    free(err);
    char *listing = NULL;
    tu_runf(&listing, NULL, "cd '%s' && ls", dir);
    cr_expect_str_eq(listing, "out.tsv.part-0-of-3\nout.tsv.part-1-of-3\nout.tsv.part-2-of-3\n"
                              "plain.tsv\ntext\n");
    free(listing);
    /* The parts hold the plain run's pairs, each key in one part. */
    char *parts = NULL;
    tu_runf(&parts, NULL, "cd '%s' && cat out.tsv.part-*", dir);
    char *plain = tu_read(at("plain.tsv"), NULL);
    char **a, **b;
    size_t na = sorted_lines(plain, &a), nb = sorted_lines(parts, &b);
    cr_expect_eq(na, nb, "the parts hold %zu pairs, the plain run %zu", nb, na);
    for (size_t i = 0; i < na && i < nb; i++)
        if (strcmp(a[i], b[i]) != 0) {
            cr_expect_fail("pair %zu: %s in the parts, %s in the plain run", i, b[i], a[i]);
            break;
        }
    free(a);
    free(b);
    free(plain);
    free(parts);

    /* One process writes part 0 of 1. */
    cr_assert_eq(run(0, NULL, "wordcount text -o one.tsv --output-parts"), 0);
    same_file("plain.tsv", "one.tsv.part-0-of-1", "--output-parts without mpirun");
}

Test(mpi, output_parts_refusals)
{
    need_mpi();
    tu_write(at("views"), "a\t3\nb\t2\n", 8);
    char *err = NULL;
    cr_expect_eq(run(2, &err, "pageviewrank views -o top --output-parts"), 2);
    cr_expect(strstr(err, "keeps the first 10 pairs") != NULL, "%s", err);
    free(err);
    err = NULL;
    cr_expect_eq(run(2, &err, "wordcount views --top 1 -o top --output-parts"), 2);
    cr_expect(strstr(err, "without --top") != NULL, "%s", err);
    free(err);
    err = NULL;
    cr_expect_eq(run(2, &err, "wordcount views --output-parts"), 2);
    cr_expect(strstr(err, "give -o OUTPUT") != NULL, "%s", err);
    free(err);
}

Test(mpi, explain_and_verbose_report_every_rank)
{
    need_mpi();
    gen("log", "weblog --size 1M --seed 21");
    char *err = NULL;
    int rc = run(3, &err, "pageviewcount log -o out --explain");
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    json_error_t je;
    json_t *doc = json_loads(err, JSON_DISABLE_EOF_CHECK, &je);
    cr_assert_not_null(doc, "not JSON (%s): %s", je.text, err);
    char why[512];
    json_t *schema = tu_explain_schema();
    cr_expect(js_validate(schema, doc, why, sizeof why), "%s", why);
    json_t *d = json_object_get(doc, "distributed");
    cr_assert_not_null(d);
    cr_expect_eq(json_integer_value(json_object_get(d, "ranks")), 3);
    json_t *stages = json_object_get(d, "stages");
    cr_assert_eq(json_array_size(stages), 2);
    /* Stage 1's slices tile the input. */
    size_t size = 0;
    free(tu_read(at("log"), &size));
    json_t *ranks = json_object_get(json_array_get(stages, 0), "ranks");
    json_int_t next = 0;
    for (size_t r = 0; r < 3; r++) {
        json_t *input = json_object_get(json_array_get(ranks, r), "input");
        cr_expect_eq(json_integer_value(json_array_get(input, 0)), next, "rank %zu", r);
        next = json_integer_value(json_array_get(input, 1));
    }
    cr_expect_eq(next, (json_int_t)size);
    json_decref(schema);
    json_decref(doc);
    free(err);

    err = NULL;
    rc = run(3, &err, "pageviewcount log -o out --verbose");
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    for (int r = 0; r < 3; r++)
        for (int s = 1; s <= 2; s++) {
            char line[64];
            snprintf(line, sizeof line, "rank %d of 3: stage %d: cpu engine", r, s);
            cr_expect(strstr(err, line) != NULL, "no \"%s\" in: %s", line, err);
        }
    /* Rank 0 alone speaks: one device line, not three. */
    char *first = strstr(err, "soren-host: device:");
    cr_expect(first && !strstr(first + 1, "soren-host: device:"), "%s", err);
    free(err);
}

/* A word over wordcount's key.max_size in the last rank's slice only: every
 * rank exits non-zero, rank 0 says which rank failed and why, once, and no
 * output is left. */
Test(mpi, a_failing_rank_fails_every_rank)
{
    need_mpi();
    gen("text", "text --size 1M --seed 22");
    FILE *f = fopen(at("text"), "a");
    cr_assert_not_null(f);
    fputc('\n', f);
    for (int i = 0; i < 70000; i++)
        fputc('x', f);
    fputc('\n', f);
    fclose(f);
    char *err = NULL;
    int rc = run(3, &err, "wordcount text -o out");
    cr_expect(rc != 0 && rc != 137, "exit %d (137: killed at the time limit): %s", rc, err);
    const char *said = "soren-host: rank 2 of 3: wordcount: map emitted a key of 70000 bytes";
    char *first = strstr(err, said);
    cr_expect(first != NULL, "no \"%s\" in: %s", said, err);
    cr_expect(first == NULL || strstr(first + 1, said) == NULL, "said twice: %s", err);
    char *listing = NULL;
    tu_runf(&listing, NULL, "cd '%s' && ls", dir);
    cr_expect_str_eq(listing, "text\n");
    free(listing);
    free(err);
}

Test(mpi, standard_input_is_refused)
{
    need_mpi();
    char *err = NULL;
    cr_expect_eq(run(2, &err, "wordcount < /dev/null"), 2);
    cr_expect(strstr(err, "standard input reaches one rank only") != NULL, "%s", err);
    free(err);
}

/* A process under mpirun with --devices runs a rank of the run on each GPU
 * it names, and the processes' ranks make one run.  On a host without a
 * GPU, --devices all gives each process one rank, on the CPU engine: the
 * collectives of the ranks in threads go through MPI's all the same. */
Test(mpi, devices_all_as_one_process)
{
    need_mpi();
    gen("text", "text --size 3M --vocab 50000 --seed 13");
    same_as_plain("wordcount --device auto --devices all text");
}

/* Every process checks --devices, and all fail with the first one's
 * words: none is left waiting in a collective. */
Test(mpi, a_bad_devices_fails_every_rank)
{
    need_mpi();
    char *err = NULL;
    cr_expect_eq(run(2, &err, "wordcount --devices 2 /dev/null"), 2);
    cr_expect(strstr(err, "rank 0 of 2: --devices spreads a run over GPUs, and --device cpu "
                          "asks for the CPU engine") != NULL, "%s", err);
    free(err);
}

/* Only mpirun's ranks load Open MPI, through soren-mpi.so: soren-host
 * itself links none of it, so a plain command or one a resident host
 * serves starts without MPI's libraries. */
Test(mpi, soren_host_links_no_mpi)
{
    need_mpi();
    char *out = NULL;
    cr_assert_eq(tu_runf(&out, NULL, "ldd '%s'", tu_host()), 0);
    cr_expect(strstr(out, "libmpi") == NULL, "soren-host links MPI:\n%s", out);
    free(out);
}

Test(mpi, a_missing_module_is_named)
{
    need_mpi();
    char env[4200], *err = NULL;
    snprintf(env, sizeof env, "SOREN_MPI_MODULE='%s/none/soren-mpi.so'", dir);
    int rc = run_env(env, 2, &err, "wordcount /dev/null");
    cr_expect_neq(rc, 0);
    cr_expect(strstr(err, "mpirun started soren-host, but its MPI module did not load") &&
                  strstr(err, "/none/soren-mpi.so") && strstr(err, "SOREN_MPI_MODULE"),
              "%s", err);
    free(err);
}
