/* The GPU suite: every variant, forced with --engine, gives output
 * byte-identical to the CPU engine on seeded inputs of 1 MB, 100 MB and 1 GB
 * ($SOREN_GPU_TEST_MB lists the sizes) and on adversarial ones.  Skips,
 * saying why, where no GPU is usable. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datagen.h"
#include "gpu/device.h"
#include "testutil.h"

static char *dir;
static const char *const variants[] = {"hash", "direct", "sort"};

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

/* Runs job on input with --device and extra options into out; returns the
 * exit code, stderr in *err. */
static int run(const char *job, const char *args, const char *input, const char *out,
               char **err)
{
    return tu_runf(NULL, err, "'%s' run %s %s -o '%s' '%s'", tu_host(), job, args, out, input);
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

/* The CPU engine's output, then each variant's, which must equal it. */
static void compare_variants(const char *job, const char *args, const char *input,
                             const char *label)
{
    char *want = in_dir("cpu.out"), *got = in_dir("gpu.out"), *err = NULL;
    char cpu_args[512];
    snprintf(cpu_args, sizeof cpu_args, "%s --device cpu", args);
    int rc = run(job, cpu_args, input, want, &err);
    cr_assert_eq(rc, 0, "%s %s on the CPU: exit %d: %s", job, label, rc, err);
    free(err);
    for (size_t v = 0; v < 3; v++) {
        char gpu_args[512], what[256];
        snprintf(gpu_args, sizeof gpu_args, "%s --device gpu --engine %s", args, variants[v]);
        snprintf(what, sizeof what, "%s %s --engine %s", job, label, variants[v]);
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

static void shapes(const char *job, const char *args)
{
    static const char *const names[] = {"one key repeated", "every key distinct",
                                        "10 KB words", "empty lines", "no newline at all"};
    char *input = in_dir("shape");
    for (int s = DG_ONE_KEY; s <= DG_NO_NEWLINE; s++) {
        dg_text_shape(input, 8u << 20, (dg_shape)s, 401 + (uint64_t)s);
        compare_variants(job, args, input, names[s]);
    }
    free(input);
}

Test(gpu, wordcount_adversarial) { shapes("wordcount", ""); }
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
    for (size_t v = 0; v < 3; v++) {
        char args[128];
        snprintf(args, sizeof args, "--device gpu --engine %s", variants[v]);
        cr_expect_eq(run("wordcount", args, input, out, &err), 0, "%s: %s", variants[v], err);
        free(err);
        char *text = tu_read(out, NULL);
        cr_expect_str_eq(text, "", "%s", variants[v]);
        free(text);
    }
    free(input);
    free(out);
}

/* Regions too small for the input are a clear error, with no output. */
Test(gpu, full_regions_are_clear_errors)
{
    char *input = in_dir("text"), *out = in_dir("out"), *err = NULL;
    dg_text(input, 1 << 20, 7);
    struct { const char *args, *message; } cases[] = {
        {"--engine hash --table-slots 16", "the hash table is full (16 slots)"},
        {"--engine hash --key-bytes 256", "the key space is full (256 bytes)"},
        {"--engine direct --pair-slots 100", "the pair space is full (100 pairs)"},
        {"--engine direct --key-bytes 256", "the key space is full (256 bytes)"},
        {"--engine sort --pair-slots 100", "the pair space is full (100 pairs"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "--device gpu %s", cases[i].args);
        err = NULL;
        int rc = run("wordcount", args, input, out, &err);
        cr_expect_eq(rc, 1, "%s: exit %d", cases[i].args, rc);
        cr_expect(strstr(err, cases[i].message) != NULL, "%s: \"%s\" lacks \"%s\"",
                  cases[i].args, err, cases[i].message);
        free(err);
        FILE *f = fopen(out, "r");
        cr_expect_null(f, "%s left an output file", cases[i].args);
        if (f)
            fclose(f);
    }
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
    for (size_t v = 0; v < 3; v++) {
        char args[128], *err = NULL;
        snprintf(args, sizeof args, "--device gpu --engine %s", variants[v]);
        cr_expect_eq(run("wordcount", args, input, out, &err), 1);
        cr_expect(strstr(err, "map emitted a key of 70000 bytes; the manifest allows at most "
                              "65536") != NULL, "%s: %s", variants[v], err);
        free(err);
    }
    free(input);
    free(out);
}
