/*
 * test_svm.c - soren-svm against LibSVM (svm-train, svm-predict) on
 * soren-gen's svm data: the same C and gamma give the same number of
 * support vectors (within 1%) and the same test accuracy (within half a
 * point); each tool's predictor reads the other's models and agrees with
 * its own; on a GPU every variant trains the CPU engine's model, byte for
 * byte.  Skips, saying why, where LibSVM's tools are not installed.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char *dir;
static char sock[4096];

/* soren-svm uses a resident host where one answers: the tests name a
 * socket of their own, where one runs only when a test starts it. */
static void setup(void)
{
    dir = tu_mkdtemp();
    snprintf(sock, sizeof sock, "%s/run/host.sock", dir);
    setenv("SOREN_HOST", sock, 1);
}

static void teardown(void)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' --socket '%s' stop", tu_host(), sock);
    if (access(sock, F_OK) == 0)
        tu_run(cmd, NULL, NULL);
    tu_rmtree(dir);
    free(dir);
}

TestSuite(svm, .init = setup, .fini = teardown, .timeout = 600);

static int have_libsvm(void)
{
    return tu_run("command -v svm-train && command -v svm-predict", NULL, NULL) == 0;
}

/* soren-gen svm ARGS -o dir/NAME; returns the path (static buffer). */
static const char *gen(const char *name, const char *args)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *err = NULL;
    int rc = tu_runf(NULL, &err, "'%s/soren-gen' svm %s -o '%s'", tu_builddir(), args, path);
    cr_assert_eq(rc, 0, "soren-gen svm %s: exit %d: %s", args, rc, err);
    free(err);
    return path;
}

/* Runs a command, asserting exit 0; returns its standard output. */
static char *run(const char *what, const char *cmd)
{
    char *out = NULL, *err = NULL;
    int rc = tu_run(cmd, &out, &err);
    cr_assert_eq(rc, 0, "%s: exit %d: %s\n%s", what, rc, cmd, err);
    free(err);
    return out;
}

static long total_nsv(const char *what, const char *out)
{
    const char *at = strstr(out, "Total nSV = ");
    cr_assert_not_null(at, "%s printed no \"Total nSV = \": %s", what, out);
    return strtol(at + 12, NULL, 10);
}

/* "Accuracy = 97.5% (975/1000)": the number right. */
static long right(const char *what, const char *out)
{
    const char *at = strstr(out, "% (");
    cr_assert_not_null(at, "%s printed no accuracy: %s", what, out);
    return strtol(at + 3, NULL, 10);
}

/* Trains and tests one preset with both tools on the CPU engine. */
static void compare(const char *preset, int rows, int test_rows)
{
    char args[256], cmd[16384], train[4096], test[4096];
    snprintf(args, sizeof args, "--preset %s --rows %d --seed 3", preset, rows);
    snprintf(train, sizeof train, "%s", gen("train", args));
    snprintf(args, sizeof args, "--preset %s --test --rows %d --seed 3", preset, test_rows);
    snprintf(test, sizeof test, "%s", gen("test", args));
    snprintf(cmd, sizeof cmd, "'%s/soren-gen' svm --preset %s --print-params", tu_builddir(),
             preset);
    char *params = run("soren-gen --print-params", cmd);
    double c = 0, gamma = 0;
    cr_assert_eq(sscanf(params, "%lf %lf", &c, &gamma), 2, "%s", params);
    free(params);

    snprintf(cmd, sizeof cmd, "svm-train -q -c %.17g -g %.17g -e 0.001 '%s' '%s/libsvm.model' "
             "&& awk '/^total_sv/ {print \"Total nSV = \" $2}' '%s/libsvm.model'", c, gamma, train,
             dir, dir);
    char *theirs = run("svm-train", cmd);
    snprintf(cmd, sizeof cmd, "'%s/soren-svm' train --device cpu -c %.17g -g %.17g '%s' "
             "'%s/soren.model'", tu_builddir(), c, gamma, train, dir);
    char *ours = run("soren-svm train", cmd);
    long n_theirs = total_nsv("svm-train", theirs), n_ours = total_nsv("soren-svm", ours);
    cr_expect(labs(n_ours - n_theirs) <= (long)ceil(0.01 * (double)n_theirs),
              "%s: %ld support vectors, LibSVM %ld (more than 1%% apart)", preset, n_ours,
              n_theirs);
    cr_expect(n_theirs > rows / 50, "%s: %ld support vectors of %d points: a problem too easy "
              "to tell the solvers apart", preset, n_theirs, rows);

    /* Each predictor on each model. */
    long acc[2][2];
    const char *models[] = {"libsvm.model", "soren.model"};
    for (int m = 0; m < 2; m++) {
        snprintf(cmd, sizeof cmd, "svm-predict '%s' '%s/%s' '%s/p-libsvm-%d'", test, dir,
                 models[m], dir, m);
        char *out = run("svm-predict", cmd);
        acc[m][0] = right("svm-predict", out);
        free(out);
        snprintf(cmd, sizeof cmd, "'%s/soren-svm' predict --device cpu '%s' '%s/%s' "
                 "'%s/p-soren-%d'", tu_builddir(), test, dir, models[m], dir, m);
        out = run("soren-svm predict", cmd);
        acc[m][1] = right("soren-svm predict", out);
        free(out);
        /* The same model, two predictors: the same labels but where a
         * decision value lies within rounding of zero. */
        cr_expect(labs(acc[m][0] - acc[m][1]) <= 1, "%s, %s: svm-predict %ld right, soren-svm "
                  "%ld", preset, models[m], acc[m][0], acc[m][1]);
    }
    cr_expect(fabs((double)(acc[1][1] - acc[0][0])) / test_rows <= 0.005,
              "%s: soren-svm's model %ld right of %d, LibSVM's %ld (more than half a point "
              "apart)", preset, acc[1][1], test_rows, acc[0][0]);
    cr_expect(acc[0][0] > test_rows * 6 / 10, "%s: LibSVM's %ld right of %d: near chance",
              preset, acc[0][0], test_rows);
    free(theirs);
    free(ours);
}

Test(svm, adult_like_equals_libsvm)
{
    if (!have_libsvm())
        cr_skip_test("svm-train and svm-predict not found: apt-get install libsvm-tools");
    compare("adult", 1500, 600);
}

Test(svm, usps_like_equals_libsvm)
{
    if (!have_libsvm())
        cr_skip_test("svm-train and svm-predict not found: apt-get install libsvm-tools");
    compare("usps", 1000, 500);
}

/* On a GPU: every variant of both jobs gives the CPU engine's model and
 * labels, byte for byte (soren/exact.h; integer sums). */
Test(svm, every_gpu_variant_equals_the_cpu_engine)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s' devices >/dev/null 2>&1", tu_host());
    if (tu_run(cmd, NULL, NULL) != 0)
        cr_skip_test("no usable GPU: this compares the GPU's variants with the CPU engine");
    char train[4096], test[4096];
    snprintf(train, sizeof train, "%s", gen("train", "--preset web --rows 1200 --seed 5"));
    snprintf(test, sizeof test, "%s", gen("test", "--preset web --test --rows 400 --seed 5"));
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/soren-svm' train --device cpu -c 64 -g 7.8125 "
             "'%s' cpu.model && '%s/soren-svm' predict --device cpu '%s' cpu.model cpu.labels",
             dir, tu_builddir(), train, tu_builddir(), test);
    free(run("soren-svm on the CPU engine", cmd));
    const char *variants[] = {"auto", "dense", "hash", "block", "direct", "sort"};
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && '%s/soren-svm' train --device gpu --engine %s -c "
                 "64 -g 7.8125 '%s' gpu.model && cmp cpu.model gpu.model && '%s/soren-svm' "
                 "predict --device gpu --engine %s '%s' cpu.model gpu.labels && cmp cpu.labels "
                 "gpu.labels", dir, tu_builddir(), variants[v], train, tu_builddir(),
                 variants[v], test);
        char *out = NULL, *err = NULL;
        int rc = tu_run(cmd, &out, &err);
        cr_expect_eq(rc, 0, "--engine %s: exit %d: %s", variants[v], rc, err);
        free(out);
        free(err);
    }
}

/* Kernel rows kept between steps change no bit of the model: none kept
 * (-m 0), room for 43 of 1,500 rows (-m 1: five sets of eight or nine
 * slots, whose rows take slots from each other, so a task's entry holds
 * another row's value and a check of the wrong row gives another model),
 * and room for all; on the CPU engine, and on a GPU where there is one. */
Test(svm, kept_kernel_rows_give_the_same_model)
{
    char train[4096], cmd[16384];
    snprintf(train, sizeof train, "%s", gen("train", "--preset usps --rows 1500 --seed 3"));
    snprintf(cmd, sizeof cmd, "'%s' devices >/dev/null 2>&1", tu_host());
    const int gpu = tu_run(cmd, NULL, NULL) == 0;
    const char *devices[] = {"cpu", "gpu"};
    for (int g = 0; g <= gpu; g++) {
        const char *how[][2] = {{"-m 0", "room for 0 kernel rows"},
                                {"-m 1", "room for 43 kernel rows"},
                                {"", "room for 1500 kernel rows"}};
        for (size_t h = 0; h < sizeof how / sizeof how[0]; h++) {
            snprintf(cmd, sizeof cmd, "cd '%s' && '%s/soren-svm' train --local -v --device %s "
                     "%s -c 10 -g 0.00390625 '%s' %s-%zu.model && cmp cpu-0.model %s-%zu.model",
                     dir, tu_builddir(), devices[g], how[h][0], train, devices[g], h,
                     devices[g], h);
            char *out = NULL, *err = NULL;
            int rc = tu_run(cmd, &out, &err);
            cr_expect_eq(rc, 0, "--device %s %s: exit %d: %s", devices[g], how[h][0], rc, err);
            cr_expect(err && strstr(err, how[h][1]), "--device %s %s -v: \"%s\" not in: %s",
                      devices[g], how[h][0], how[h][1], err);
            free(out);
            free(err);
        }
    }
}

/* Where a resident host answers, soren-svm trains and classifies in it
 * (the training's steps one soren_job_iterate there): the model and the
 * labels of --local, byte for byte. */
Test(svm, in_a_resident_host_as_in_the_process)
{
    char train[4096], test[4096], cmd[16384];
    snprintf(train, sizeof train, "%s", gen("train", "--preset usps --rows 600 --seed 8"));
    snprintf(test, sizeof test, "%s", gen("test", "--preset usps --test --rows 300 --seed 8"));
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/soren-svm' train --local -v '%s' here.model && "
             "'%s/soren-svm' predict --local '%s' here.model here.labels", dir, tu_builddir(),
             train, tu_builddir(), test);
    char *out = NULL, *err = NULL;
    int rc = tu_run(cmd, &out, &err);
    cr_assert_eq(rc, 0, "soren-svm --local: exit %d: %s", rc, err);
    cr_expect(strstr(err, "svmstep runs in this process"), "-v: %s", err);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' --socket '%s' serve --detach", tu_host(), sock);
    free(run("soren-host serve --detach", cmd));
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/soren-svm' train -v '%s' host.model && "
             "'%s/soren-svm' predict -v '%s' host.model host.labels && cmp here.model "
             "host.model && cmp here.labels host.labels", dir, tu_builddir(), train,
             tu_builddir(), test);
    out = err = NULL;
    rc = tu_run(cmd, &out, &err);
    cr_expect_eq(rc, 0, "soren-svm in the host: exit %d: %s%s", rc, out, err);
    cr_expect(strstr(err, "svmstep runs in the resident host") &&
                  strstr(err, "svmclassify runs in the resident host"),
              "-v: %s", err);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' --socket '%s' ps", tu_host(), sock);
    char *ps = run("soren-host ps", cmd);
    cr_expect(strstr(ps, "svmstep") && strstr(ps, "svmclassify"), "ps: %s", ps);
    free(ps);
}

/* svmstep's kept rows (plugins/svmstep/rows.h) over a K(x_a, x_i) of
 * 1000 + a that counts its calls: a row found is one not computed. */
static unsigned long long kernels_computed;

static double svm_kernel(const float *x, uint64_t d, uint64_t a, uint64_t b, double gamma)
{
    (void)x, (void)d, (void)b, (void)gamma;
    kernels_computed++;
    return 1000.0 + (double)a;
}

#include "../plugins/svmstep/rows.h"

/* Asks the rows for row a on behalf of task i: whether it was found. */
static int ask_for(svm_cached *rows, uint64_t slots, uint64_t n, uint64_t a, uint64_t i)
{
    const unsigned long long computed = kernels_computed;
    const double k = svm_rows_k(rows, slots, NULL, n, 0, a, i, 0);
    cr_expect_eq(k, 1000.0 + (double)a, "row %llu gave %g", (unsigned long long)a, k);
    return kernels_computed == computed;
}

static int ask(svm_cached *rows, uint64_t slots, uint64_t n, uint64_t a)
{
    return ask_for(rows, slots, n, a, 0);
}

static svm_cached *new_rows(uint64_t slots, uint64_t n)
{
    svm_cached *rows = aligned_alloc(16, slots * n * sizeof *rows);
    cr_assert(rows);
    memset(rows, 0, slots * n * sizeof *rows);
    return rows;
}

/* A row not kept takes an empty slot, else one of a row not asked for
 * again since it came in, else the least recently used; so a new row stays
 * only if asked for again before its set's next miss, and the rows asked
 * for again stay. */
Test(svm, kept_rows_give_up_new_rows_first_then_the_least_recent)
{
    svm_cached *rows = new_rows(8, 64); /* one set of eight slots for 64 points */
    for (uint64_t a = 0; a < 8; a++)
        cr_expect(!ask(rows, 8, 64, a), "row %llu found in empty slots", (unsigned long long)a);
    cr_expect(ask(rows, 8, 64, 0), "row 0 not kept");
    cr_expect(!ask(rows, 8, 64, 8), "row 8 found before it was kept");
    cr_expect(!ask(rows, 8, 64, 9), "row 9 found before it was kept");
    cr_expect(!ask(rows, 8, 64, 8), "row 8 kept over row 9, which came after it");
    for (uint64_t a = 0; a < 8; a++)
        if (a != 1)
            cr_expect(ask(rows, 8, 64, a), "row %llu given up for a row asked for once",
                      (unsigned long long)a);
    cr_expect(!ask(rows, 8, 64, 1), "row 1, the first never asked for again, kept");
    cr_expect(ask(rows, 8, 64, 1), "row 1 not kept");
    /* every row has now been asked for again: row 0 was used longest ago */
    cr_expect(!ask(rows, 8, 64, 10), "row 10 found before it was kept");
    cr_expect(!ask(rows, 8, 64, 0), "row 0, the least recently used, kept");
    for (uint64_t a = 1; a < 8; a++)
        cr_expect(ask(rows, 8, 64, a), "row %llu given up before the least recent",
                  (unsigned long long)a);
    free(rows);
}

/* 43 slots for 100 points: five sets of nine, nine, nine, eight and eight
 * slots, row a in set a mod 5, so rows 0 to 42 fill every slot; with a
 * slot for every point, row a keeps slot a. */
Test(svm, kept_rows_use_every_slot)
{
    svm_cached *rows = new_rows(43, 100);
    for (uint64_t a = 0; a < 43; a++)
        cr_expect(!ask(rows, 43, 100, a), "row %llu found in empty slots", (unsigned long long)a);
    for (uint64_t a = 0; a < 43; a++)
        cr_expect(ask(rows, 43, 100, a), "row %llu of 43 not kept in 43 slots",
                  (unsigned long long)a);
    cr_expect(!ask(rows, 43, 100, 43), "row 43 found before it was kept");
    cr_expect(!ask(rows, 43, 100, 3), "row 3 kept beside eight others in set 3 of eight slots");
    free(rows);
    rows = new_rows(4, 4);
    for (uint64_t a = 0; a < 4; a++) {
        cr_expect(!ask_for(rows, 4, 4, a, 1), "row %llu found in empty slots",
                  (unsigned long long)a);
        cr_expect_eq((uint32_t)rows[a * 4 + 1].tag, a + 1, "row %llu of task 1 not in slot %llu",
                     (unsigned long long)a, (unsigned long long)a);
    }
    free(rows);
}

/* Mistakes are errors that say what to do, and write nothing. */
Test(svm, usage_and_input_errors)
{
    char path[4096], cmd[8192];
    struct { const char *args, *file, *text; int status; const char *said; } cases[] = {
        {"train", NULL, NULL, 2, "train takes TRAIN and MODEL"},
        {"fly", NULL, NULL, 2, "unknown command"},
        {"train -c 0 a b", NULL, NULL, 2, "-c takes a cost above 0"},
        {"train -m -1 a b", NULL, NULL, 2, "-m takes the MiB kept for kernel rows"},
        {"train --engine fastest %s m", "t", "+1 1:1\n-1 1:2\n", 1, "\"fastest\""},
        {"train %s m", "t", "+1 1:1\n-1 2:2\n+2 1:1\n", 1, "a third label"},
        {"train %s m", "t", "+1 1:1\n+1 2:2\n", 1, "one label only"},
        {"train %s m", "t", "+1 2:1 1:2\n", 1, "indices from 1 and increasing"},
        {"train %s m", "t", "", 1, "no points"},
        {"predict %s %s", "t", "+1 1:1\n", 1, "is not a two-class RBF model"},
        {"train /no/such/file m", NULL, NULL, 1, "cannot read /no/such/file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(path, sizeof path, "%s/t", dir);
        if (cases[i].file)
            tu_write(path, cases[i].text, strlen(cases[i].text));
        char args[512];
        snprintf(args, sizeof args, cases[i].args, path, path);
        snprintf(cmd, sizeof cmd, "cd '%s' && '%s/soren-svm' %s --device cpu", dir,
                 tu_builddir(), args);
        char *err = NULL;
        int rc = tu_run(cmd, NULL, &err);
        cr_expect_eq(rc, cases[i].status, "soren-svm %s: exit %d, want %d: %s", args, rc,
                     cases[i].status, err);
        cr_expect(strstr(err, cases[i].said) != NULL, "soren-svm %s: \"%s\" not in: %s", args,
                  cases[i].said, err);
        free(err);
        snprintf(path, sizeof path, "%s/m", dir);
        cr_expect_eq(access(path, F_OK), -1, "soren-svm %s left a model behind", args);
    }
}

/* The numbers of a training file read as strtod reads them (a float of its
 * double): two points, each an SV of the model soren-svm writes, whose
 * values (the shortest text that reads back to the float; zeros left
 * out) are checked against strtod's.  The values: short decimals, which have a fast path,
 * and those past it (20 digits, past 2^53, past 10^22, hex, a bare point),
 * and 400 drawn from a fixed seed in %g, %f and %e forms. */
Test(svm, numbers_read_as_strtod_reads_them)
{
    enum { FIXED = 20, DRAWN = 400, PER_ROW = (FIXED + DRAWN) / 2 };
    static const char *const fixed[FIXED] = {
        "0.34375", "-0.0039", "1e-5", "12345678901234567890", "9007199254740993",
        "0.1000000000000000055511151231257827", "1.5E+3", "-2e22", "3e23", "0x1p-3",
        "7.", ".5", "+2.5", "-0", "123456789.987654321", "4.9406564584124654e-300",
        "1E-0", "2.5e+2", "0.000000000000000000001", "18446744073709551617"};
    char *text[FIXED + DRAWN];
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < FIXED + DRAWN; i++) {
        char buf[64];
        if (i < FIXED) {
            snprintf(buf, sizeof buf, "%s", fixed[i]);
        } else {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            double v = (double)(state >> 11) / 9007199254740992.0 * 2000 - 1000;
            int digits = (int)(state >> 3 & 15);
            const char *form = (state & 3) == 0 ? "%.*g" : (state & 3) == 1 ? "%.*f" : "%.*e";
            snprintf(buf, sizeof buf, form, digits + 1, v);
        }
        text[i] = strdup(buf);
        cr_assert_not_null(text[i]);
    }
    char path[4096], model[4096], line[16384];
    snprintf(path, sizeof path, "%s/numbers", dir);
    snprintf(model, sizeof model, "%s/numbers.model", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int row = 0; row < 2; row++) {
        int at = snprintf(line, sizeof line, "%s", row == 0 ? "+1" : "-1");
        for (int k = 0; k < PER_ROW; k++)
            at += snprintf(line + at, sizeof line - (size_t)at, " %d:%s", k + 1,
                           text[row * PER_ROW + k]);
        fprintf(f, "%s\n", line);
    }
    fclose(f);
    char *err = NULL;
    int rc = tu_runf(NULL, &err, "cd '%s' && '%s/soren-svm' train --device cpu -g 1e-30 '%s' '%s'",
                     dir, tu_builddir(), path, model);
    cr_assert_eq(rc, 0, "soren-svm train: exit %d: %s", rc, err);
    free(err);
    char *written = tu_read(model, NULL);
    cr_assert_not_null(written);
    char *sv = strstr(written, "\nSV\n");
    cr_assert_not_null(sv, "no SV section in %s", written);
    sv += 4;
    int checked = 0;
    for (int row = 0; row < 2; row++) {
        char *end = strchr(sv, '\n');
        cr_assert_not_null(end, "model: %d SV lines, want 2", row);
        *end = '\0';
        float want[PER_ROW] = {0}, got[PER_ROW] = {0};
        for (int k = 0; k < PER_ROW; k++)
            want[k] = (float)strtod(text[row * PER_ROW + k], NULL);
        for (char *s = strchr(sv, ' '); s; s = strchr(s + 1, ' ')) {
            long index = strtol(s + 1, &s, 10);
            cr_assert(*s == ':' && index >= 1 && index <= PER_ROW, "SV line: %s", sv);
            got[index - 1] = strtof(s + 1, NULL);
        }
        /* the model leaves zeros out, -0 among them */
        for (int k = 0; k < PER_ROW; k++, checked++)
            cr_expect(want[k] == 0 ? got[k] == 0 : memcmp(&want[k], &got[k], sizeof want[k]) == 0,
                      "\"%s\" read as %.9g, strtod gives %.9g", text[row * PER_ROW + k],
                      (double)got[k], (double)want[k]);
        sv = end + 1;
    }
    cr_expect_eq(checked, FIXED + DRAWN);
    free(written);
    for (int i = 0; i < FIXED + DRAWN; i++)
        free(text[i]);
}

/* A file of over a megabyte is read in parts, a thread each where the
 * process may use more than one CPU.  Bound to one CPU (taskset), the same
 * files are read in one part: training (its steps depend on every row) and
 * classification print the same bytes either way. */
Test(svm, a_large_file_reads_as_in_one_part)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || tu_runf(NULL, NULL, "taskset -c 0 true") != 0)
        cr_skip_test("one CPU, or no taskset: the parts and the one part are the same read");
    char train[4096], test[4096];
    snprintf(train, sizeof train, "%s", gen("train", "--preset usps --rows 1000 --seed 5"));
    snprintf(test, sizeof test, "%s", gen("test", "--preset usps --test --rows 1000 --seed 5"));
    const char *bound[2] = {"taskset -c 0 ", ""};
    char *said[2][2] = {{NULL, NULL}, {NULL, NULL}}, *model[2], *labels[2];
    for (int b = 0; b < 2; b++) {
        char *err = NULL;
        /* 30 steps: the model is written, the exit is 1 (not converged) */
        int rc = tu_runf(&said[b][0], &err, "cd '%s' && %s'%s/soren-svm' train --device cpu "
                         "--max-steps 30 -c 10 -g 0.004 '%s' m%d", dir, bound[b],
                         tu_builddir(), train, b);
        cr_assert_eq(rc, 1, "train %s: exit %d: %s", bound[b], rc, err);
        free(err);
        rc = tu_runf(&said[b][1], &err, "cd '%s' && %s'%s/soren-svm' predict --device cpu "
                     "'%s' m%d out%d", dir, bound[b], tu_builddir(), test, b, b);
        cr_assert_eq(rc, 0, "predict %s: exit %d: %s", bound[b], rc, err);
        free(err);
        char path[4096];
        snprintf(path, sizeof path, "%s/m%d", dir, b);
        model[b] = tu_read(path, NULL);
        snprintf(path, sizeof path, "%s/out%d", dir, b);
        labels[b] = tu_read(path, NULL);
        cr_assert(model[b] && labels[b]);
    }
    cr_expect_str_eq(said[1][0], said[0][0]);
    cr_expect_str_eq(model[1], model[0], "the models differ");
    cr_expect_str_eq(said[1][1], said[0][1]);
    cr_expect_str_eq(labels[1], labels[0], "the predicted labels differ");
    cr_expect(strstr(said[0][1], "/1000) (classification)") != NULL,
              "predict read 1000 test points: %s", said[0][1]);
    for (int b = 0; b < 2; b++) {
        free(said[b][0]);
        free(said[b][1]);
        free(model[b]);
        free(labels[b]);
    }
}

/* In a file read in parts, a bad line is named by its line in the whole
 * file, and where several are bad, the first; the last line, without a
 * newline, is read. */
Test(svm, bad_lines_are_named_by_their_line_in_the_file)
{
    enum { LINES = 40000 };
    char path[4096];
    snprintf(path, sizeof path, "%s/t", dir);
    const int bad_sets[3][2] = {{0, 0}, {29000, 0}, {12345, 37000}};
    for (int s = 0; s < 3; s++) {
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        for (int i = 1; i <= LINES; i++) {
            if (i == bad_sets[s][0] || i == bad_sets[s][1])
                fprintf(f, "%s 1:0.5 3:x\n", i % 2 ? "+1" : "-1");
            else
                fprintf(f, "%s 1:0.%d 2:0.25 3:%d%s", i % 2 ? "+1" : "-1", i % 97, i % 7,
                        i < LINES ? "\n" : "");
        }
        fclose(f);
        char *err = NULL;
        int rc = tu_runf(NULL, &err, "cd '%s' && '%s/soren-svm' train -v --device cpu "
                         "--max-steps 1 t m", dir, tu_builddir());
        if (bad_sets[s][0] == 0) {
            cr_expect_eq(rc, 1, "exit %d: %s", rc, err);
            cr_expect(strstr(err, "soren-svm: 40000 points of 3 features") != NULL, "%s", err);
        } else {
            char want[64];
            snprintf(want, sizeof want, "soren-svm: t:%d: expected a number after 3:", bad_sets[s][0]);
            cr_expect_eq(rc, 1, "exit %d: %s", rc, err);
            cr_expect(strstr(err, want) != NULL, "\"%s\" not in: %s", want, err);
        }
        free(err);
    }
}
