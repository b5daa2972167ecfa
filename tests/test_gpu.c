/* The GPU suite: every variant, forced with --engine, gives output
 * byte-identical to the CPU engine on seeded inputs of 1 MB, 100 MB and 1 GB
 * ($SOREN_GPU_TEST_MB lists the sizes), on adversarial ones, and with regions
 * so small that the run overflows and resumes many times; auto picks the
 * variant the metrics call for.  Skips, saying why, where no GPU is usable. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datagen.h"
#include "gpu/device.h"
#include "jschema.h"
#include "svmclassify_ref.h"
#include "testutil.h"

static char *dir;
/* The variants that can run a job: dense only where the keys are index keys
 * (histogram, and bucketsum and svmclassify, whose parameters count them),
 * block only where there is a combine, hash where there is a combine or a
 * reduce (the test jobs of tests/plugins, found by path: docfreq and
 * kvmedian reduce without a combine, kvscale after one). */
static const char *const all_variants[] = {"hash", "block", "dense", "direct", "sort"};

static int named(const char *job, const char *const *names)
{
    for (; *names; names++)
        if (strstr(job, *names))
            return 1;
    return 0;
}

static int runs_on(const char *job, const char *variant)
{
    static const char *const map_only[] = {"stringmatch", "invertedindex", "matmul", "simscore",
                                           "pageviewrank", NULL};
    static const char *const reduce_only[] = {"docfreq", "kvmedian", NULL};
    static const char *const index_keys[] = {"histogram", "bucketsum", "svmclassify", NULL};
    if (strcmp(variant, "dense") == 0)
        return named(job, index_keys);
    if (strcmp(variant, "block") == 0)
        return !named(job, map_only) && !named(job, reduce_only);
    if (strcmp(variant, "hash") == 0)
        return !named(job, map_only);
    return 1;
}

static char *test_job(const char *name)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/stage/test-plugins/%s.json", tu_builddir(), name) > 0);
    return p;
}

#define VARIANT_COUNT (sizeof all_variants / sizeof all_variants[0])

static void setup(void)
{
    char why[256] = "";
    if (soren_device_count(why, sizeof why) == 0)
        cr_skip_test("no usable GPU (%s): the GPU suite runs from the bundle on a GPU host", why);
    dir = tu_mkdtemp();
}

static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
    dir = NULL;
}

TestSuite(gpu, .init = setup, .fini = teardown, .timeout = 1800);

static char *in_dir(const char *name)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
    return p;
}

/* Runs job on input (none for "", an index job) with --device and extra
 * options into out; returns the exit code, stderr in *err. */
static int run(const char *job, const char *args, const char *input, const char *out,
               char **err)
{
    return tu_runf(NULL, err, "'%s' run %s %s -o '%s' %s%s%s", tu_host(), job, args, out,
                   *input ? "'" : "", input, *input ? "'" : "");
}

/* Starts a resident host on sock, with options besides --detach. */
static void host_start(const char *sock, const char *options)
{
    char *err = NULL;
    cr_assert_eq(tu_runf(NULL, &err, "'%s' --socket '%s' serve --detach %s", tu_host(), sock,
                         options), 0, "serve: %s", err);
    free(err);
}

static void host_stop(const char *sock)
{
    tu_runf(NULL, NULL, "'%s' --socket '%s' stop", tu_host(), sock);
}

static void expect_same(const char *a, const char *b, const char *what)
{
    size_t na = 0, nb = 0;
    char *x = tu_read(a, &na), *y = tu_read(b, &nb);
    if (na != nb || memcmp(x, y, na) != 0) {
        char *diff = NULL;
        tu_runf(&diff, NULL, "diff '%s' '%s' | head -6", a, b);
        cr_assert_fail("%s: differs from the CPU engine (%zu vs %zu bytes):\n%s", what, nb, na,
                       diff);
    }
    free(x);
    free(y);
}

/* The CPU engine's output, then each variant's, run with gpu_args too,
 * which must equal it. */
static void compare_variants_with(const char *job, const char *args, const char *extra,
                                  const char *input, const char *label)
{
    char *want = in_dir("cpu.out"), *got = in_dir("gpu.out"), *err = NULL;
    char cpu_args[2048];
    snprintf(cpu_args, sizeof cpu_args, "%s --device cpu", args);
    int rc = run(job, cpu_args, input, want, &err);
    cr_assert_eq(rc, 0, "%s %s on the CPU: exit %d: %s", job, label, rc, err);
    free(err);
    for (size_t v = 0; v < VARIANT_COUNT; v++) {
        if (!runs_on(job, all_variants[v]))
            continue;
        char gpu_args[2048], what[256];
        snprintf(gpu_args, sizeof gpu_args, "%s %s --device gpu --engine %s", args, extra,
                 all_variants[v]);
        snprintf(what, sizeof what, "%s %s %s%s--engine %s", job, label, extra, *extra ? " " : "",
                 all_variants[v]);
        err = NULL;
        rc = run(job, gpu_args, input, got, &err);
        cr_expect_eq(rc, 0, "%s: exit %d: %s", what, rc, err);
        free(err);
        if (rc == 0)
            expect_same(got, want, what);
    }
    free(want);
    free(got);
}

static void compare_variants(const char *job, const char *args, const char *input,
                             const char *label)
{
    compare_variants_with(job, args, "", input, label);
}

/* Sizes in MB from $SOREN_GPU_TEST_MB ("1 100 1024" by default). */
static size_t sizes(size_t out[8])
{
    const char *env = getenv("SOREN_GPU_TEST_MB");
    char list[256];
    snprintf(list, sizeof list, "%s", env && *env ? env : "1 100 1024");
    size_t n = 0;
    for (char *tok = strtok(list, " ,"); tok && n < 8; tok = strtok(NULL, " ,"))
        out[n++] = (size_t)atol(tok);
    return n;
}

static void text_sizes(const char *job, const char *args, uint64_t seed)
{
    size_t mb[8], n = sizes(mb);
    char *input = in_dir("text");
    for (size_t i = 0; i < n; i++) {
        char label[64];
        snprintf(label, sizeof label, "on %zu MB", mb[i]);
        dg_text(input, mb[i] << 20, seed + i);
        compare_variants(job, args, input, label);
    }
    free(input);
}

Test(gpu, wordcount_sizes) { text_sizes("wordcount", "", 101); }
Test(gpu, grep_sizes) { text_sizes("grep", "--param 'pattern=^th.*(ed|ing)$|[a-c]+x?Q'", 201); }

Test(gpu, histogram_sizes)
{
    size_t mb[8], n = sizes(mb);
    char *input = in_dir("pixels");
    for (size_t i = 0; i < n; i++) {
        char label[64];
        snprintf(label, sizeof label, "on %zu MB", mb[i]);
        dg_rgb(input, (mb[i] << 20) / 3, 301 + i);
        compare_variants("histogram", "", input, label);
    }
    free(input);
}

/* Reduce functions: docfreq groups string keys, kvmedian few and mostly
 * distinct u32 keys (hash and sort group them differently), kvscale reduces
 * after a combine.  Mostly distinct keys stop at 100 MB: at 1 GiB the CPU
 * engine's reference takes over a minute and each output is 4 GB of text,
 * while the GPU path is the same at every size. */
Test(gpu, reduce_sizes)
{
    size_t mb[8], n = sizes(mb);
    char *text = in_dir("text"), *kv = in_dir("kv");
    char *docfreq = test_job("docfreq"), *kvmedian = test_job("kvmedian"),
         *kvscale = test_job("kvscale");
    for (size_t i = 0; i < n; i++) {
        char label[64];
        snprintf(label, sizeof label, "on %zu MB", mb[i]);
        dg_text(text, mb[i] << 20, 501 + i);
        compare_variants(docfreq, "", text, label);
        size_t records = (mb[i] << 20) / 8;
        snprintf(label, sizeof label, "on %zu MB, 1000 keys", mb[i]);
        dg_kv32(kv, records, 1000, 511 + i);
        compare_variants(kvmedian, "", kv, label);
        compare_variants(kvscale, "", kv, label);
        if (mb[i] > 100)
            continue;
        snprintf(label, sizeof label, "on %zu MB, distinct keys", mb[i]);
        dg_kv32(kv, records, 1u << 30, 521 + i);
        compare_variants(kvmedian, "", kv, label);
    }
    free(docfreq);
    free(kvmedian);
    free(kvscale);
    free(text);
    free(kv);
}

/* Runs soren-gen ARGS -o dir/name; returns the path (the caller frees). */
static char *gen(const char *name, const char *args)
{
    char *path = in_dir(name);
    tu_gen(path, args);
    return path;
}

/* A stage's pairs stay on the GPU for the next stage, which maps them there,
 * and --verbose says so: pageviewcount's (URL, IP) string keys, bucketsum's
 * index keys (typed: 4 bytes each), each on every variant that runs it; the
 * outputs are the CPU engine's.  A dense stage of few keys brings its
 * result back in one wait, and the next stage reads it from the host. */
Test(gpu, stage_pairs_stay_on_the_gpu)
{
    char *log = gen("log", "weblog --size 16M --urls 2000 --ips 5000 --seed 43");
    char *bucketsum = test_job("bucketsum"), *want = in_dir("cpu.out"), *got = in_dir("gpu.out");
    /* only: the one variant where the case runs (NULL: all) */
    struct { const char *job, *args, *input, *only; int left; } cases[] = {
        {"pageviewcount", "", log, NULL, 1},
        {bucketsum, "--param n=1000000 --param buckets=30000 --param groups=70", "", NULL, 1},
        {bucketsum, "--param n=100000 --param buckets=100 --param groups=7", "", "dense", 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char args[512], *err = NULL;
        snprintf(args, sizeof args, "%s --device cpu", cases[c].args);
        cr_assert_eq(run(cases[c].job, args, cases[c].input, want, &err), 0, "%s", err);
        free(err);
        for (size_t v = 0; v < VARIANT_COUNT; v++) {
            if (!runs_on(cases[c].job, all_variants[v]) ||
                (cases[c].only && strcmp(cases[c].only, all_variants[v]) != 0))
                continue;
            snprintf(args, sizeof args, "%s --device gpu --engine %s --verbose", cases[c].args,
                     all_variants[v]);
            err = NULL;
            int rc = run(cases[c].job, args, cases[c].input, got, &err);
            cr_expect_eq(rc, 0, "%s %s: %s", cases[c].job, args, err);
            const int left = strstr(err, " pairs, left on the GPU by the stage before\n") != NULL;
            cr_expect(strstr(err, ": stage 2 of 2: ") && left == cases[c].left,
                      "%s %s: stage 1's pairs %s on the GPU:\n%s", cases[c].job, args,
                      cases[c].left ? "not left" : "left", err);
            free(err);
            if (rc == 0)
                expect_same(got, want, args);
        }
    }
    free(log);
    free(bucketsum);
    free(want);
    free(got);
}

/* The papers' applications on soren-gen's data: pageviewcount's two stages
 * (the second reads the first's pairs), pageviewrank on its output,
 * invertedindex, the index-input jobs matmul and simscore, and kmeans, one
 * step and --iterate 10 (every run of it on the variant, through one
 * session, the runs after the first looping on the device). */
Test(gpu, applications)
{
    char *log = gen("log", "weblog --size 64M --urls 20000 --ips 5000 --seed 41");
    char *counts = in_dir("counts.tsv"), *err = NULL;
    compare_variants("pageviewcount", "", log, "on 64 MB of log");
    cr_assert_eq(run("pageviewcount", "--device cpu", log, counts, &err), 0, "%s", err);
    free(err);
    compare_variants("pageviewrank", "", counts, "on pageviewcount's output");
    char *html = gen("pages.html", "html --size 32M --urls 3000 --seed 43");
    compare_variants("invertedindex", "", html, "on 32 MB of pages");
    char *a = gen("a.bin", "matrix --rows 256 --cols 300 --seed 51");
    char *b = gen("b.bin", "matrix --rows 300 --cols 200 --seed 52");
    char params[9000];
    snprintf(params, sizeof params, "--param 'a=@%s' --param 'b=@%s' --param rows=256 "
             "--param inner=300 --param cols=200", a, b);
    compare_variants("matmul", params, "", "256 x 300 by 300 x 200");
    char *features = gen("features.bin", "features --docs 300 --dims 64 --seed 53");
    snprintf(params, sizeof params, "--param 'features=@%s' --param docs=300 --param dims=64",
             features);
    compare_variants("simscore", params, "", "300 documents of 64 features");
    char *points = gen("points.bin", "points --count 1000000 --dims 3 --seed 61");
    char *centroids = gen("c0.bin", "points --dims 3 --centroids 24 --seed 61");
    snprintf(params, sizeof params, "--param k=24 --param 'centroids=@%s'", centroids);
    compare_variants("kmeans", params, points, "1000000 points, 24 centroids");
    strcat(params, " --iterate 10");
    compare_variants("kmeans", params, points, "1000000 points, 24 centroids, --iterate 10");
    free(log);
    free(counts);
    free(html);
    free(a);
    free(b);
    free(features);
    free(points);
    free(centroids);
}

static json_t *explain_of(const char *err);

static json_int_t iterations_field(json_t *x, const char *name)
{
    json_t *it = json_object_get(x, "iterations");
    cr_assert_not_null(it, "no iterations in --explain");
    json_t *v = json_object_get(it, name);
    return json_is_boolean(v) ? (json_int_t)json_is_true(v) : json_integer_value(v);
}

/* --iterate: after the first run the runs loop on the GPU, each one's
 * output written over the parameter on the device and the host waiting
 * once a batch.  Run for run, kmeans --iterate N on each variant gives the
 * CPU engine's output after the same number of runs, converged or not,
 * with every run after the first on the device; its table of 1,024 slots
 * is fed by one block, and one of 8,192 (hash, --table-slots) by the
 * grid's compare and apply. */
Test(gpu, iterate_loops_on_the_device)
{
    char *points = gen("points.bin", "points --count 200000 --dims 3 --seed 71");
    char *centroids = gen("c0.bin", "points --dims 3 --centroids 16 --seed 71");
    char *want = in_dir("cpu.out"), *got = in_dir("gpu.out");
    static const unsigned limits[] = {1, 2, 3, 5, 8, 13, 500};
    static const char *const variants[] = {"auto", "hash", "block", "hash --table-slots 8192"};
    json_int_t converged_at = 0;
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        char args[9000], *err = NULL;
        snprintf(args, sizeof args, "--param k=16 --param 'centroids=@%s' --iterate %u "
                 "--device cpu --explain", centroids, limits[i]);
        int rc = run("kmeans", args, points, want, &err);
        cr_assert_eq(rc, 0, "--iterate %u on the CPU: %s", limits[i], err);
        json_t *cpu = explain_of(err);
        free(err);
        const json_int_t runs = iterations_field(cpu, "runs");
        const json_int_t converged = iterations_field(cpu, "converged");
        if (converged && !converged_at)
            converged_at = runs;
        for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
            snprintf(args, sizeof args, "--param k=16 --param 'centroids=@%s' --iterate %u "
                     "--device gpu --engine %s --explain", centroids, limits[i], variants[v]);
            err = NULL;
            rc = run("kmeans", args, points, got, &err);
            cr_expect_eq(rc, 0, "--iterate %u, %s: %s", limits[i], variants[v], err);
            if (rc == 0) {
                char what[96];
                snprintf(what, sizeof what, "kmeans --iterate %u, %s", limits[i], variants[v]);
                expect_same(got, want, what);
                json_t *gpu = explain_of(err);
                cr_expect_eq(iterations_field(gpu, "runs"), runs, "%s: runs", what);
                cr_expect_eq(iterations_field(gpu, "converged"), converged, "%s: converged",
                             what);
                cr_expect_eq(iterations_field(gpu, "device_runs"), runs - 1, "%s: device runs",
                             what);
                json_int_t waits = json_integer_value(json_object_get(gpu, "waits"));
                cr_expect(runs < 13 || waits < runs, "%s: %lld waits for %lld runs", what,
                          (long long)waits, (long long)runs);
                json_decref(gpu);
            }
            free(err);
        }
        json_decref(cpu);
    }
    cr_expect(converged_at > 13, "kmeans converged after %lld runs: the limits above do not "
              "cover a loop that converges on the device", (long long)converged_at);
    free(points);
    free(centroids);
    free(want);
    free(got);
}

/* Runs that need the host in the middle of a loop: doubling's run k emits
 * 2^(k-1) keys, so hash and block tables sized for the first run's one key
 * grow, each growth a run made on the host; with a state of 4,096 elements
 * run 14 names element 4,096, and with 1,024 elements run 12 names element
 * 1,024, each found on the device and made again on the host, which fails
 * it as the CPU engine does.  Every variant gives the CPU engine's output,
 * runs, or error. */
Test(gpu, iterate_leaves_the_device_for_a_run_that_needs_the_host)
{
    char *doubling = test_job("doubling"), *want = in_dir("cpu.out"), *got = in_dir("gpu.out");
    char *large = in_dir("state4096"), *small = in_dir("state1024");
    uint32_t state[4096] = {1};
    tu_write(large, state, sizeof state);
    tu_write(small, state, 1024 * sizeof state[0]);
    static const struct {
        int small, iterate, device_runs;
    } cases[] = {{0, 12, 11}, {0, 13, 12}, {0, 20, -1}, {1, 20, -1}};
    static const char *const variants[] = {"auto", "hash", "block", "dense"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int fails = cases[i].device_runs < 0;
        char args[9000], *cpu_err = NULL;
        snprintf(args, sizeof args, "--param keys=8192 --param 'state=@%s' --iterate %d "
                 "--device cpu%s", cases[i].small ? small : large, cases[i].iterate,
                 fails ? "" : " --explain");
        int rc = run(doubling, args, "", want, &cpu_err);
        cr_assert_eq(rc, fails, "case %zu on the CPU: %s", i, cpu_err);
        for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
            char what[96], *err = NULL;
            snprintf(what, sizeof what, "doubling, %d elements, --iterate %d, %s",
                     cases[i].small ? 1024 : 4096, cases[i].iterate, variants[v]);
            snprintf(args, sizeof args, "--param keys=8192 --param 'state=@%s' --iterate %d "
                     "--device gpu --engine %s%s", cases[i].small ? small : large,
                     cases[i].iterate, variants[v], fails ? "" : " --explain");
            rc = run(doubling, args, "", got, &err);
            cr_expect_eq(rc, fails, "%s: exit %d: %s", what, rc, err);
            if (fails) {
                const char *because = strstr(cpu_err, "is past the parameter's end");
                cr_expect(because && strstr(err, "is past the parameter's end"),
                          "%s: %s; the CPU engine: %s", what, err, cpu_err);
            } else if (rc == 0) {
                expect_same(got, want, what);
                json_t *x = explain_of(err);
                cr_expect_eq(iterations_field(x, "runs"), cases[i].iterate, "%s", what);
                /* hash and block tables grow on the host, the loop going on
                 * after each growth */
                const json_int_t device_runs = iterations_field(x, "device_runs");
                if (strcmp(variants[v], "hash") && strcmp(variants[v], "block"))
                    cr_expect_eq(device_runs, cases[i].device_runs, "%s", what);
                else
                    cr_expect(device_runs > 0 && device_runs <= cases[i].device_runs,
                              "%s: %lld runs on the device", what, (long long)device_runs);
                json_decref(x);
            }
            free(err);
        }
        free(cpu_err);
    }
    free(doubling);
    free(want);
    free(got);
    free(large);
    free(small);
}

static void shapes(const char *job, const char *args)
{
    static const char *const names[] = {"one key repeated", "every key distinct",
                                        "10 KB words",      "empty lines",
                                        "no newline at all", "a long line among short ones"};
    char *input = in_dir("shape");
    for (int s = DG_ONE_KEY; s <= DG_LONG_AMONG_SHORT; s++) {
        dg_text_shape(input, 8u << 20, (dg_shape)s, 401 + (uint64_t)s);
        compare_variants(job, args, input, names[s]);
    }
    free(input);
}

Test(gpu, wordcount_adversarial) { shapes("wordcount", ""); }

/* The order of string keys as the CPU engine gives it (bytes, then the
 * shorter first), where zero bytes, shared prefixes and the last of 8 bytes
 * decide: keys of up to 64 bytes, which the order puts in place 8 bytes a
 * pass, and with one key of 65 bytes, which it compares whole. */
Test(gpu, string_keys_in_the_cpu_engines_order)
{
    static const char *const words[] = {
        "a", "a\0", "a\0\0b", "ab", "a\x01", "b", "\x7f", "\x80", "\xff\xff", "\0",
        "12345678", "1234567", "123456789", "12345678\0", "1234567\xff", "\0\0\0\0\0\0\0\0z",
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdee"};
    static const size_t sizes[] = {1, 2, 4, 2, 2, 1, 1, 1, 2, 1, 8, 7, 9, 9, 8, 9, 64, 64};
    char *input = in_dir("keys.txt");
    for (int longer = 0; longer < 2; longer++) {
        FILE *f = fopen(input, "wb");
        cr_assert_not_null(f);
        /* every word a few times, in a scrambled order, and a seeded spread
         * of others so that the list is past one block's worth */
        uint64_t seed = 77;
        for (int i = 0; i < 20000; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            const size_t w = (size_t)(seed >> 33) % (sizeof sizes / sizeof sizes[0]);
            fwrite(words[w], 1, sizes[w], f);
            fprintf(f, " w%llu%c", (unsigned long long)(seed >> 45), i % 9 ? ' ' : '\n');
        }
        if (longer) /* 65 bytes: the order compares keys whole */
            fputs("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef!\n", f);
        fclose(f);
        compare_variants("wordcount", "", input, longer ? "keys up to 65 bytes"
                                                        : "keys up to 64 bytes");
    }
    free(input);
}
Test(gpu, grep_adversarial) { shapes("grep", "--param 'pattern=e|[0-9]$'"); }

Test(gpu, histogram_adversarial)
{
    char *input = in_dir("pixels");
    uint8_t *same = malloc(3u << 20);
    cr_assert_not_null(same);
    for (size_t i = 0; i < (3u << 20); i++)
        same[i] = (uint8_t)(i % 3 == 0 ? 200 : i % 3 == 1 ? 7 : 255);
    tu_write(input, same, 3u << 20);
    compare_variants("histogram", "", input, "one colour");
    tu_write(input, same, 3);
    compare_variants("histogram", "", input, "one pixel");
    free(same);
    free(input);
}

Test(gpu, empty_input)
{
    char *input = in_dir("empty"), *out = in_dir("out"), *err = NULL;
    tu_write(input, "", 0);
    for (size_t v = 0; v < VARIANT_COUNT; v++) {
        if (!runs_on("wordcount", all_variants[v]))
            continue;
        char args[128];
        snprintf(args, sizeof args, "--device gpu --engine %s", all_variants[v]);
        cr_expect_eq(run("wordcount", args, input, out, &err), 0, "%s: %s", all_variants[v], err);
        free(err);
        char *text = tu_read(out, NULL);
        cr_expect_str_eq(text, "", "%s", all_variants[v]);
        free(text);
    }
    free(input);
    free(out);
}

/* The JSON object --explain printed on stderr, checked against
 * share/explain.schema.json. */
static json_t *explain_of(const char *err)
{
    const char *brace = strchr(err, '{');
    cr_assert_not_null(brace, "no --explain output in: %s", err);
    json_error_t why;
    json_t *x = json_loads(brace, JSON_DISABLE_EOF_CHECK, &why);
    cr_assert_not_null(x, "--explain output is not JSON (%s): %s", why.text, brace);
    char broken[512];
    json_t *schema = tu_explain_schema();
    cr_expect(js_validate(schema, x, broken, sizeof broken), "--explain breaks the schema: %s",
              broken);
    json_decref(schema);
    return x;
}

/* svmclassify on every variant: the decision sums of a plain loop, the
 * CPU engine's, byte for byte (1001 support vectors: the last group of
 * eight has one); and with --block-slots 0, where dense's sums go to the
 * global array, a test point's groups in consecutive lanes folded by the
 * warp. */
Test(gpu, svmclassify_sums_on_every_variant)
{
    char params[16384], *want = in_dir("svc-want.tsv"), *got = in_dir("svc-cpu.tsv"), *err = NULL;
    svmclassify_case(dir, 1001, 300, 33, 62, params, sizeof params, want);
    char args[16500];
    snprintf(args, sizeof args, "%s --device cpu", params);
    cr_assert_eq(run("svmclassify", args, "", got, &err), 0, "on the CPU: %s", err);
    free(err);
    expect_same(got, want, "svmclassify on the CPU engine against the plain loop");
    compare_variants("svmclassify", params, "", "1001 support vectors, 300 test points");
    compare_variants_with("svmclassify", params, "--block-slots 0", "",
                          "1001 support vectors, 300 test points");
    free(want);
    free(got);
}

/* The dense variant's global array (many keys, or --block-slots 0), where
 * the lanes of a warp that emit one key at once fold their values before
 * the atomic: counts of pixels in runs of one colour as long as a lane's
 * group of pixels, a warp's or longer, and of generated pixels; sums by a
 * modulus that repeats keys among a warp's lanes apart from each other (1:
 * one key for all).  Each on every variant, against the CPU engine
 * (svmclassify's sums, above, fold too). */
Test(gpu, warp_emits_to_one_key_fold_in_the_global_array)
{
    char *pixels = in_dir("pixels");
    static const size_t runs[] = {1, 4, 32, 1000};
    const size_t count = 1u << 20;
    uint8_t *rgb = malloc(3 * count);
    cr_assert_not_null(rgb);
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        for (size_t j = 0; j < count; j++) {
            const size_t colour = (j / runs[r]) % 5;
            rgb[3 * j] = (uint8_t)(40 * colour + 1);
            rgb[3 * j + 1] = (uint8_t)(255 - 7 * colour);
            rgb[3 * j + 2] = (uint8_t)(colour * colour);
        }
        tu_write(pixels, rgb, 3 * count);
        char label[96];
        snprintf(label, sizeof label, "five colours in runs of %zu pixels", runs[r]);
        compare_variants_with("histogram", "", "--block-slots 0", pixels, label);
    }
    free(rgb);
    dg_rgb(pixels, count, 311);
    compare_variants_with("histogram", "", "--block-slots 0", pixels, "generated pixels");
    free(pixels);

    char *bucketsum = test_job("bucketsum");
    static const unsigned moduli[] = {1, 3, 29};
    for (size_t m = 0; m < sizeof moduli / sizeof moduli[0]; m++) {
        char params[256], label[64];
        snprintf(params, sizeof params, "--param n=1000000 --param buckets=30000 "
                 "--param modulus=%u --param groups=30000", moduli[m]);
        snprintf(label, sizeof label, "30000 buckets, modulus %u", moduli[m]);
        compare_variants(bucketsum, params, "", label);
    }
    free(bucketsum);
}

/* Index keys counted by parameters (bucketsum: n tasks, stage 1's keys
 * counted by buckets, stage 2's by groups), a few keys to a million; a count
 * over what dense numbers (SOREN_DENSE_KEYS_MAX) runs hash or block under
 * auto and is refused by --engine dense; keys past the count are the CPU
 * engine's error on every variant. */
Test(gpu, index_keys_counted_by_parameters)
{
    char *bucketsum = test_job("bucketsum"), *out = in_dir("out");
    static const struct { uint64_t n, buckets, groups; } cases[] = {
        {1 << 20, 1, 1}, {1 << 24, 768, 768}, {1 << 24, 1 << 20, 1000}, {1000, 5000, 300}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char params[256], label[96];
        snprintf(params, sizeof params, "--param n=%llu --param buckets=%llu --param groups=%llu",
                 (unsigned long long)cases[i].n, (unsigned long long)cases[i].buckets,
                 (unsigned long long)cases[i].groups);
        snprintf(label, sizeof label, "n %llu, %llu buckets, %llu groups",
                 (unsigned long long)cases[i].n, (unsigned long long)cases[i].buckets,
                 (unsigned long long)cases[i].groups);
        compare_variants(bucketsum, params, "", label);
    }

    /* 2^31 + 1 keys: the CPU engine's output, auto's (not dense), and
     * dense refused. */
    const char *huge = "--param n=100000 --param buckets=2147483649 --param groups=7";
    char *want = in_dir("cpu.out"), args[256], *err = NULL;
    snprintf(args, sizeof args, "%s --device cpu", huge);
    cr_assert_eq(run(bucketsum, args, "", want, &err), 0, "2^31 + 1 keys on the CPU: %s", err);
    free(err);
    snprintf(args, sizeof args, "%s --device gpu --explain", huge);
    err = NULL;
    int rc = run(bucketsum, args, "", out, &err);
    cr_expect_eq(rc, 0, "auto with 2^31 + 1 keys: exit %d: %s", rc, err);
    if (rc == 0) {
        json_t *x = explain_of(err);
        const char *variant = json_string_value(json_object_get(x, "variant"));
        cr_expect(variant && strcmp(variant, "dense") != 0, "auto ran %s for 2^31 + 1 keys",
                  variant);
        json_decref(x);
        expect_same(out, want, "bucketsum with 2^31 + 1 keys, auto");
    }
    free(err);
    snprintf(args, sizeof args, "%s --device gpu --engine dense", huge);
    err = NULL;
    cr_expect_eq(run(bucketsum, args, "", out, &err), 2, "--engine dense, 2^31 + 1 keys: %s", err);
    cr_expect(strstr(err, "--engine dense: bucketsum has 2147483649 index keys, more than the "
                          "dense variant numbers (2147483648: its key refs are 32 bits); use "
                          "hash or block") != NULL, "%s", err);
    free(err);
    free(want);

    for (size_t v = 0; v < VARIANT_COUNT; v++) {
        if (!runs_on(bucketsum, all_variants[v]))
            continue;
        snprintf(args, sizeof args, "--param n=1000 --param buckets=100 --param groups=1 "
                 "--param modulus=150 --device gpu --engine %s", all_variants[v]);
        err = NULL;
        cr_expect_eq(run(bucketsum, args, "", out, &err), 1, "%s", all_variants[v]);
        cr_expect(strstr(err, "; the manifest allows 0 to 99 (key.count 100)") != NULL, "%s: %s",
                  all_variants[v], err);
        free(err);
    }
    free(bucketsum);
    free(out);
}

/* Regions so small that map overflows again and again: each overflow grows
 * a region and the launch resumes where it stopped, and the output is still
 * the CPU engine's.  hash, block and direct grow while they map; sort and
 * dense size their regions exactly before writing (sort from its count
 * pass, dense from key.count), so they overflow at most once per region.
 * hash and block also run with per-block tables of none, of 4 entries (all
 * but a few keys crowded out to the global table) and of their default
 * size. */
static void overflow_case(const char *job, const char *params, const char *input)
{
    char *want = in_dir("cpu.out"), *got = in_dir("gpu.out"), *err = NULL;
    char args[512];
    snprintf(args, sizeof args, "%s --device cpu", params);
    cr_assert_eq(run(job, args, input, want, &err), 0, "%s on the CPU: %s", job, err);
    free(err);
    static const char *const tables[] = {"", "--block-slots 0", "--block-slots 4"};
    for (size_t v = 0; v < VARIANT_COUNT; v++) {
        const char *variant = all_variants[v];
        if (!runs_on(job, variant))
            continue;
        const int tabled = strcmp(variant, "hash") == 0 || strcmp(variant, "block") == 0;
        for (size_t t = 0; t < (tabled ? 3u : 1u); t++) {
            snprintf(args, sizeof args, "%s --device gpu --engine %s --table-slots 16 "
                     "--key-bytes 256 --pair-slots 100 %s --explain", params, variant, tables[t]);
            err = NULL;
            int rc = run(job, args, input, got, &err);
            cr_expect_eq(rc, 0, "%s --engine %s %s with tiny regions: exit %d: %s", job, variant,
                         tables[t], rc, err);
            if (rc == 0) {
                json_t *x = explain_of(err);
                size_t overflows = json_array_size(json_object_get(x, "overflows"));
                int grows_while_mapping =
                    strcmp(variant, "sort") != 0 && strcmp(variant, "dense") != 0;
                cr_expect(!grows_while_mapping || overflows >= 10,
                          "%s --engine %s %s: %zu overflows, expected at least 10", job, variant,
                          tables[t], overflows);
                json_decref(x);
                char what[256];
                snprintf(what, sizeof what, "%s --engine %s %s with %zu overflows", job, variant,
                         tables[t], overflows);
                expect_same(got, want, what);
            }
            free(err);
        }
    }
    free(want);
    free(got);
}

Test(gpu, overflows_resume_without_losing_a_pair)
{
    char *text = in_dir("text"), *pixels = in_dir("pixels");
    dg_text(text, 1 << 20, 7);
    dg_rgb(pixels, (1 << 20) / 3, 8);
    overflow_case("wordcount", "", text);
    overflow_case("grep", "--param 'pattern=e|[0-9]$'", text);
    overflow_case("histogram", "", pixels);
    overflow_case("stringmatch", "--param pattern=th", text);
    char *kv = in_dir("kv");
    dg_kv32(kv, 100000, 3000, 12);
    const char *reducing[] = {"docfreq", "kvmedian", "kvscale"};
    for (size_t i = 0; i < 3; i++) {
        char *job = test_job(reducing[i]);
        overflow_case(job, "", i == 0 ? text : kv);
        free(job);
    }
    char *bucketsum = test_job("bucketsum");
    overflow_case(bucketsum, "--param n=100000 --param buckets=3000 --param groups=3000", "");
    free(bucketsum);
    free(kv);
    free(text);
    free(pixels);
}

/* The entries of each thread block's table that the GPU engine gives a
 * run with variant: 2048 for block, and for hash where it folds values
 * (none where it groups them for a reduce), none for the others. */
static json_int_t block_slots_for(const char *variant, int grouping)
{
    if (strcmp(variant, "block") == 0)
        return 2048;
    return strcmp(variant, "hash") == 0 && !grouping ? 2048 : 0;
}

/* --engine auto reads the metrics: many distinct keys, hash; few (a rare
 * pattern), block; index keys (counted by the manifest or by parameters),
 * dense; no combine, direct; a reduce without
 * a combine, hash where keys repeat or are strings, sort where typed keys
 * are mostly distinct. */
Test(gpu, auto_picks_the_variant_the_metrics_call_for)
{
    char *text = in_dir("text"), *pixels = in_dir("pixels"), *out = in_dir("out");
    char *few = in_dir("few"), *distinct = in_dir("distinct");
    char *docfreq = test_job("docfreq"), *kvmedian = test_job("kvmedian");
    char *bucketsum = test_job("bucketsum");
    dg_text(text, 8 << 20, 9);
    dg_rgb(pixels, (8 << 20) / 3, 10);
    dg_kv32(few, 1 << 20, 1000, 13);
    dg_kv32(distinct, 1 << 20, 1u << 30, 14);
    /* grouping: a reduce without a combine (docfreq, kvmedian) */
    struct { const char *job, *params, *input, *variant; int grouping; } cases[] = {
        {"wordcount", "", text, "hash", 0},
        {"grep", "--param 'pattern=^Q.*7$'", text, "block", 0},
        {"histogram", "", pixels, "dense", 0},
        {"stringmatch", "--param pattern=the", text, "direct", 0},
        {docfreq, "", text, "hash", 1},
        {kvmedian, "", few, "hash", 1},
        {kvmedian, "", distinct, "sort", 1},
        {bucketsum, "--param n=1000000 --param buckets=768 --param groups=10", "", "dense", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[256], *err = NULL;
        snprintf(args, sizeof args, "%s --device gpu --explain", cases[i].params);
        int rc = run(cases[i].job, args, cases[i].input, out, &err);
        cr_expect_eq(rc, 0, "%s: exit %d: %s", cases[i].job, rc, err);
        if (rc == 0) {
            json_t *x = explain_of(err);
            const char *variant = json_string_value(json_object_get(x, "variant"));
            cr_expect(variant && strcmp(variant, cases[i].variant) == 0,
                      "%s: auto picked %s, expected %s (%s)", cases[i].job, variant,
                      cases[i].variant, json_string_value(json_object_get(x, "rule")));
            json_int_t got = json_integer_value(json_object_get(x, "block_slots"));
            cr_expect_eq(got, block_slots_for(cases[i].variant, cases[i].grouping),
                         "%s (%s): %lld per-block table entries", cases[i].job, cases[i].variant,
                         (long long)got);
            json_decref(x);
        }
        free(err);
    }
    free(docfreq);
    free(kvmedian);
    free(bucketsum);
    free(few);
    free(distinct);
    free(text);
    free(pixels);
    free(out);
}

/* The progress line of a GPU run: the upload counts its bytes, the other
 * phases their time, the line is wiped at the end, and the output is what
 * it is without the line. */
Test(gpu, progress_names_the_phases_and_counts_the_upload)
{
    char *input = in_dir("text"), *with = in_dir("with.out"), *without = in_dir("without.out");
    char *err = NULL;
    dg_text(input, 64 << 20, 15);
    cr_assert_eq(run("wordcount", "--device gpu --progress", input, with, &err), 0, "%s", err);
    cr_expect(strstr(err, "\rsoren-host: upload ") != NULL, "%s", err);
    cr_expect(strstr(err, " of 64.0 MiB (") != NULL, "%s", err);
    size_t n = strlen(err);
    cr_expect(n > 2 && err[n - 1] == '\r' && err[n - 2] == ' ', "not wiped at the end: %s", err);
    free(err);
    err = NULL;
    cr_assert_eq(run("wordcount", "--device gpu", input, without, &err), 0, "%s", err);
    cr_expect_str_eq(err, "");
    free(err);
    expect_same(with, without, "wordcount with --progress");
    free(input);
    free(with);
    free(without);
}

/* Asking for more device memory than there is fails cleanly, naming the
 * region and the size, with no output. */
Test(gpu, out_of_device_memory_is_a_clear_error)
{
    char *input = in_dir("text"), *out = in_dir("out"), *err = NULL;
    dg_text(input, 1 << 20, 7);
    int rc = run("wordcount", "--device gpu --engine direct --pair-slots 100000000000", input,
                 out, &err);
    cr_expect_eq(rc, 1, "exit %d: %s", rc, err);
    cr_expect(strstr(err, "out of device memory: the pair keys needs 400000000000 bytes") != NULL,
              "%s", err);
    free(err);
    FILE *f = fopen(out, "r");
    cr_expect_null(f, "a failed run left an output file");
    if (f)
        fclose(f);
    free(input);
    free(out);
}

Test(gpu, over_long_key_is_the_same_error_as_on_the_cpu)
{
    char *input = in_dir("long"), *out = in_dir("out");
    char *big = malloc(70000);
    cr_assert_not_null(big);
    memset(big, 'w', 70000);
    tu_write(input, big, 70000);
    free(big);
    for (size_t v = 0; v < VARIANT_COUNT; v++) {
        if (!runs_on("wordcount", all_variants[v]))
            continue;
        char args[128], *err = NULL;
        snprintf(args, sizeof args, "--device gpu --engine %s", all_variants[v]);
        cr_expect_eq(run("wordcount", args, input, out, &err), 1);
        cr_expect(strstr(err, "map emitted a key of 70000 bytes; the manifest allows at most "
                              "65536") != NULL, "%s: %s", all_variants[v], err);
        free(err);
    }
    free(input);
    free(out);
}

/* --devices all where the host has two GPUs or more: every job and variant
 * spread over them (each maps a slice, the pairs of a key meet on one, rank
 * 0 writes) equals the CPU engine byte for byte: map-only, combine, reduce
 * with and without a combine, index keys and index input, two stages. */
Test(gpu, devices_all_equal_the_cpu_engine)
{
    if (soren_device_count(NULL, 0) < 2)
        cr_skip_test("one GPU: --devices spreads a run over two or more");
    char *text = in_dir("text"), *rgb = in_dir("pixels"), *kv = in_dir("kv");
    dg_text(text, 64 << 20, 701);
    dg_rgb(rgb, (64 << 20) / 3, 702);
    dg_kv32(kv, (16 << 20) / 8, 1000, 703);
    compare_variants_with("wordcount", "", "--devices all", text, "on 64 MB");
    compare_variants_with("grep", "--param 'pattern=^th.*(ed|ing)$'", "--devices all", text,
                          "on 64 MB");
    compare_variants_with("stringmatch", "--param pattern=th", "--devices all", text,
                          "on 64 MB");
    compare_variants_with("histogram", "", "--devices all", rgb, "on 64 MB");
    char *docfreq = test_job("docfreq"), *kvmedian = test_job("kvmedian"),
         *kvscale = test_job("kvscale"), *bucketsum = test_job("bucketsum");
    compare_variants_with(docfreq, "", "--devices all", text, "on 64 MB");
    compare_variants_with(kvmedian, "", "--devices all", kv, "on 16 MB, 1000 keys");
    compare_variants_with(kvscale, "", "--devices all", kv, "on 16 MB, 1000 keys");
    compare_variants_with(bucketsum, "--param n=1000000 --param buckets=1000 --param groups=10",
                          "--devices all", "", "1000000 tasks");
    char *log = gen("log", "weblog --size 64M --urls 20000 --ips 5000 --seed 41");
    compare_variants_with("pageviewcount", "", "--devices all", log, "on 64 MB of log");
    compare_variants_with("wordcount", "--top 100 --order value_desc", "--devices 0,1", text,
                          "on 64 MB");
    free(text);
    free(rgb);
    free(kv);
    free(docfreq);
    free(kvmedian);
    free(kvscale);
    free(bucketsum);
    free(log);
}

/* Whether every rank's --verbose line of stage `stage` says it folded on
 * its GPU. */
static int stage_folds_on_the_gpu(const char *said, int stage)
{
    char tag[32];
    snprintf(tag, sizeof tag, ": stage %d: ", stage);
    int lines = 0;
    for (const char *at = strstr(said, tag); at; at = strstr(at + 1, tag)) {
        const char *end = strchr(at, '\n');
        const char *gpu = strstr(at, " on the gpu");
        if (!end || !gpu || gpu > end)
            return 0;
        lines++;
    }
    return lines > 0;
}

/* The GPUs of one process send rank 0 every pair of the last stage, and
 * its GPU folds the whole result (the hash variant over the pairs as they
 * are); with --output-parts each rank folds its keys' pairs on its own GPU,
 * from the 65,536 pairs that 300,000 words send each.  The output, whole
 * or cut to its top, equals the CPU engine byte for byte, and the parts
 * hold its lines.  pageviewcount's first stage counts: its ranks fold the
 * partial counts they receive on their GPUs, adding them. */
Test(gpu, devices_fold_on_the_gpu)
{
    if (soren_device_count(NULL, 0) < 2)
        cr_skip_test("one GPU: --devices spreads a run over two or more");
    char *text = gen("words", "text --size 48M --vocab 300000 --seed 706");
    char *want = in_dir("cpu.out"), *got = in_dir("gpu.out");
    static const char *const shapes[] = {"", "--top 100 --order value_desc", "--order key"};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        char args[256], *err = NULL;
        snprintf(args, sizeof args, "%s --device cpu", shapes[i]);
        cr_assert_eq(run("wordcount", args, text, want, &err), 0, "%s", err);
        free(err);
        err = NULL;
        snprintf(args, sizeof args, "%s --devices all --verbose", shapes[i]);
        int rc = run("wordcount", args, text, got, &err);
        cr_expect_eq(rc, 0, "wordcount %s --devices all: exit %d: %s", shapes[i], rc, err);
        if (rc == 0) {
            cr_expect(strstr(err, "on the gpu, the whole result\n") != NULL &&
                          strstr(err, "on the cpu") == NULL,
                      "wordcount %s --devices all: rank 0 should fold on its GPU: %s",
                      shapes[i], err);
            expect_same(got, want, "wordcount --devices all, folded on a GPU");
        }
        free(err);
    }
    char *err = NULL;
    int rc = tu_runf(NULL, &err, "'%s' run wordcount --devices all --output-parts --verbose "
                     "'%s' -o '%s'", tu_host(), text, got);
    cr_expect_eq(rc, 0, "wordcount --devices all --output-parts: exit %d: %s", rc, err);
    cr_expect(rc != 0 || (strstr(err, "on the gpu\n") != NULL && strstr(err, "on the cpu") == NULL),
              "with --output-parts every rank should fold on its GPU: %s", err);
    free(err);
    cr_expect_eq(tu_runf(NULL, NULL, "cat '%s'.part-* | sort > '%s.parts' && sort '%s' | "
                         "cmp - '%s.parts'", got, got, want, got), 0,
                 "the parts of wordcount --devices all --output-parts hold the CPU engine's "
                 "lines");
    char *log = gen("log", "weblog --size 64M --urls 20000 --ips 5000 --seed 707");
    err = NULL;
    cr_assert_eq(run("pageviewcount", "--device cpu", log, want, &err), 0, "%s", err);
    free(err);
    err = NULL;
    cr_expect_eq(run("pageviewcount", "--devices all --verbose", log, got, &err), 0, "%s", err);
    cr_expect(stage_folds_on_the_gpu(err, 1),
              "each rank should fold its received counts on its GPU: %s", err);
    expect_same(got, want, "pageviewcount --devices all");
    free(err);
    free(log);
    free(text);
    free(want);
    free(got);
}

/* --devices through a resident host, whose jobs keep a GPU session: each
 * rank sets up its own on its GPU, and every run, the first and those
 * after it, equals the CPU engine byte for byte. */
Test(gpu, devices_all_through_a_resident_host)
{
    if (soren_device_count(NULL, 0) < 2)
        cr_skip_test("one GPU: --devices spreads a run over two or more");
    char *text = in_dir("text"), *want = in_dir("cpu.out"), *got = in_dir("host.out");
    char *sock = in_dir("run/host.sock"), *err = NULL;
    dg_text(text, 16 << 20, 704);
    cr_assert_eq(run("wordcount", "--local --device cpu", text, want, &err), 0, "%s", err);
    free(err);
    host_start(sock, "");
    for (int i = 0; i < 3; i++) {
        err = NULL;
        int rc = tu_runf(NULL, &err, "'%s' --socket '%s' run wordcount --devices all '%s' -o '%s'",
                         tu_host(), sock, text, got);
        cr_expect_eq(rc, 0, "run %d through the host: exit %d: %s", i + 1, rc, err);
        free(err);
        if (rc != 0)
            break;
        expect_same(got, want, "wordcount --devices all through a resident host");
    }
    host_stop(sock);
    free(text);
    free(want);
    free(got);
    free(sock);
}

/* Through a resident host a run that names no GPUs spreads over two by
 * itself where the adaptive engine expects a gain: a job's first run there
 * takes one GPU and the host learns its pairs (histogram's 768 bins), and
 * the next over 1 GiB or more takes two.  Both equal the CPU engine, and
 * --explain says why each took what it took. */
Test(gpu, host_spreads_a_large_run_by_itself)
{
    if (soren_device_count(NULL, 0) < 2)
        cr_skip_test("one GPU: nothing to spread over");
    char *rgb = in_dir("pixels"), *want = in_dir("cpu.out"), *got = in_dir("host.out");
    char *sock = in_dir("run/host.sock"), *err = NULL;
    dg_rgb(rgb, (1100u << 20) / 3, 705);
    cr_assert_eq(run("histogram", "--local --device cpu", rgb, want, &err), 0, "%s", err);
    free(err);
    err = NULL;
    /* a process of its own stays on one GPU */
    cr_assert_eq(run("histogram", "--local --explain", rgb, got, &err), 0, "%s", err);
    json_t *x = explain_of(err);
    free(err);
    const json_t *devices = json_object_get(x, "devices");
    cr_expect_eq(json_integer_value(json_object_get(devices, "count")), 1);
    cr_expect(strstr(json_string_value(json_object_get(devices, "rule")), "a process of its own"),
              "%s", json_string_value(json_object_get(devices, "rule")));
    json_decref(x);
    expect_same(got, want, "histogram in a process of its own");
    host_start(sock, "");
    static const struct {
        int gpus;
        const char *rule;
    } runs[] = {{1, "the job's first run on this host"}, {2, "two GPUs"}};
    for (int i = 0; i < 2; i++) {
        err = NULL;
        int rc = tu_runf(NULL, &err, "'%s' --socket '%s' run histogram --explain '%s' -o '%s'",
                         tu_host(), sock, rgb, got);
        cr_expect_eq(rc, 0, "run %d through the host: exit %d: %s", i + 1, rc, err);
        if (rc != 0) {
            free(err);
            break;
        }
        x = explain_of(err);
        free(err);
        devices = json_object_get(x, "devices");
        const char *rule = json_string_value(json_object_get(devices, "rule"));
        cr_expect_eq(json_integer_value(json_object_get(devices, "count")), runs[i].gpus,
                     "run %d: %s", i + 1, rule);
        cr_expect(rule && strstr(rule, runs[i].rule), "run %d: \"%s\" lacks \"%s\"", i + 1,
                  rule, runs[i].rule);
        json_decref(x);
        expect_same(got, want, "histogram through a resident host, GPUs of its choice");
    }
    /* A job the GPUs cannot run (faulty has no device code) runs on the
     * CPU engine, and --verbose says no GPU choice for it. */
    char *faulty = test_job("faulty"), *lines = in_dir("lines"), *said = in_dir("faulty.err");
    dg_text(lines, 1 << 20, 706);
    int rc = tu_runf(NULL, NULL, "'%s' --socket '%s' run '%s' --verbose '%s' -o /dev/null "
                     "2>'%s'", tu_host(), sock, faulty, lines, said);
    char *text = tu_read(said, NULL);
    cr_expect_eq(rc, 0, "faulty through the host: %s", text);
    cr_expect(text && strstr(text, "device: cpu") && !strstr(text, " GPU ("),
              "faulty ran on the CPU engine and said a GPU choice:\n%s", text);
    free(text);
    free(said);
    free(lines);
    free(faulty);
    host_stop(sock);
    free(rgb);
    free(want);
    free(got);
    free(sock);
}

/* A session measures the map's launch shapes on its inputs: through a
 * resident host, wordcount's first run over 14 inputs (the first one
 * monitored) maps two of them with each of its 6 candidate shapes (three
 * blocks, two per-block tables) and keeps the fastest, which its last
 * input and the next run take; every output equals the CPU engine's. */
Test(gpu, host_session_measures_launch_shapes)
{
    enum { INPUTS = 14, CANDIDATES = 6 };
    char *text = in_dir("text"), *want = in_dir("cpu.out"), *got = in_dir("host.out");
    char *sock = in_dir("run/host.sock"), *err = NULL, *inputs = NULL;
    dg_text(text, 32 << 20, 707);
    for (int i = 0; i < INPUTS; i++) {
        char *more = NULL;
        cr_assert(asprintf(&more, "%s'%s' ", inputs ? inputs : "", text) > 0);
        free(inputs);
        inputs = more;
    }
    cr_assert_eq(tu_runf(NULL, &err, "'%s' run wordcount --local --device cpu %s-o '%s'",
                         tu_host(), inputs, want), 0, "%s", err);
    free(err);
    host_start(sock, "");
    json_int_t kept[2] = {-1, -1};
    for (int i = 0; i < 2; i++) {
        err = NULL;
        int rc = tu_runf(NULL, &err, "'%s' --socket '%s' run wordcount --device gpu --explain "
                         "%s-o '%s'", tu_host(), sock, inputs, got);
        cr_expect_eq(rc, 0, "run %d through the host: exit %d: %s", i + 1, rc, err);
        if (rc != 0) {
            free(err);
            break;
        }
        json_t *x = explain_of(err);
        free(err);
        const json_t *shape = json_object_get(x, "shape");
        const char *rule = json_string_value(json_object_get(shape, "rule"));
        cr_expect_eq(json_array_size(json_object_get(shape, "candidates")), CANDIDATES,
                     "run %d: %s", i + 1, rule);
        cr_expect_eq(json_integer_value(json_object_get(shape, "timed")), 2 * CANDIDATES,
                     "run %d: %s", i + 1, rule);
        cr_expect(rule && !strstr(rule, "being measured"), "run %d: %s", i + 1, rule);
        kept[i] = json_integer_value(json_object_get(shape, "block_threads")) * 4096 +
                  json_integer_value(json_object_get(shape, "block_slots"));
        json_decref(x);
        expect_same(got, want, "wordcount through a resident host, shapes measured");
    }
    cr_expect_eq(kept[0], kept[1], "the second run did not keep the first run's shape");
    host_stop(sock);
    free(inputs);
    free(text);
    free(want);
    free(got);
    free(sock);
}

/* The GPU that --verbose says a run took ("device: gpu D of N"), or -1. */
static int gpu_said(const char *err_path)
{
    char *text = tu_read(err_path, NULL);
    const char *at = text ? strstr(text, "soren-host: device: gpu ") : NULL;
    int d = at ? atoi(at + strlen("soren-host: device: gpu ")) : -1;
    free(text);
    return d;
}

/* Two clients at once through a host with two workers: the second job
 * goes to the GPU the first left free, and each output is the CPU
 * engine's.  One client after the other, both stay on GPU 0, where their
 * sessions are. */
Test(gpu, jobs_side_by_side_spread_over_the_gpus)
{
    if (soren_device_count(NULL, 0) < 2)
        cr_skip_test("one GPU: nothing to spread over");
    char *text = in_dir("text"), *want = in_dir("cpu.out"), *sock = in_dir("run/host.sock");
    char *out[2] = {in_dir("a.out"), in_dir("b.out")}, *said[2] = {in_dir("a.err"),
                                                                   in_dir("b.err")};
    char *err = NULL;
    dg_text(text, 256 << 20, 705);
    cr_assert_eq(run("wordcount", "--local --device cpu", text, want, &err), 0, "%s", err);
    free(err);
    host_start(sock, "--jobs 2 --load wordcount");
    const char *client = "'%s' --socket '%s' run wordcount --device gpu --verbose '%s' -o '%s' "
                         "2>'%s'";
    char *one = NULL, *two = NULL, *both = NULL;
    cr_assert(asprintf(&one, client, tu_host(), sock, text, out[0], said[0]) > 0);
    cr_assert(asprintf(&two, client, tu_host(), sock, text, out[1], said[1]) > 0);
    cr_assert(asprintf(&both, "%s & %s; b=$?; wait $! && exit $b", one, two) > 0);
    for (int round = 0; round < 2; round++) {
        err = NULL;
        int rc = tu_runf(NULL, &err, "%s", round == 0 ? both : one);
        cr_expect_eq(rc, 0, "round %d: exit %d: %s", round, rc, err);
        free(err);
        if (round == 1) {
            err = NULL;
            rc |= tu_runf(NULL, &err, "%s", two);
            cr_expect_eq(rc, 0, "round 1, second client: %s", err);
            free(err);
        }
        if (rc != 0)
            break;
        int d[2] = {gpu_said(said[0]), gpu_said(said[1])};
        if (round == 0)
            cr_expect((d[0] == 0 && d[1] == 1) || (d[0] == 1 && d[1] == 0),
                      "side by side, the jobs ran on GPUs %d and %d", d[0], d[1]);
        else
            cr_expect(d[0] == 0 && d[1] == 0, "one after the other, the jobs ran on GPUs %d "
                      "and %d", d[0], d[1]);
        expect_same(out[0], want, "the first client's wordcount");
        expect_same(out[1], want, "the second client's wordcount");
    }
    host_stop(sock);
    free(one);
    free(two);
    free(both);
    for (int i = 0; i < 2; i++) {
        free(out[i]);
        free(said[i]);
    }
    free(text);
    free(want);
    free(sock);
}
