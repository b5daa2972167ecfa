/* The jobs on the CPU engine, end to end through soren-host, against
 * independent references: coreutils pipelines for wordcount, grep,
 * pageviewcount, pageviewrank, invertedindex and the test job docfreq, plain
 * C loops for histogram, matmul, simscore, kmeans (one step and --iterate)
 * and the test jobs kvmedian and kvscale (reduce functions, tests/plugins)
 * and bucketsum (index keys counted by parameters).  Inputs are seeded
 * random data of $SOREN_TEST_MB megabytes (default 100), run with 1, 2 and 7
 * threads. */
#include <criterion/criterion.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datagen.h"
#include "engine/ranks.h"
#include "kmeans_ref.h"
#include "svmclassify_ref.h"
#include "testutil.h"

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}

TestSuite(jobs, .init = setup, .fini = teardown, .timeout = 600);

static size_t test_bytes(void) { return tu_test_bytes(100); }

/* The coreutils pipeline that splits into words, one a line. */
#define WORDS_PIPE "LC_ALL=C tr -s ' \\t\\n\\v\\f\\r' '\\n' < '%s' | LC_ALL=C grep -av '^$'"
/* ... and counts them as soren-host's TSV writes them (backslash escaped). */
#define COUNT_PIPE "LC_ALL=C sort -S 512M | LC_ALL=C uniq -c | " \
                   "LC_ALL=C awk '{printf \"%%s\\t%%s\\n\", $2, $1}' | sed 's/\\\\/\\\\\\\\/g'"

static void expect_same_file(const char *got_path, const char *want_path, const char *what)
{
    size_t got_n = 0, want_n = 0;
    char *got = tu_read(got_path, &got_n);
    char *want = tu_read(want_path, &want_n);
    cr_assert_gt(want_n, 0, "%s: the reference is empty", what);
    if (got_n != want_n || memcmp(got, want, got_n) != 0) {
        char *diff = NULL;
        tu_runf(&diff, NULL, "diff '%s' '%s' | head -8", want_path, got_path);
        cr_assert_fail("%s: output differs from the reference (%zu vs %zu bytes):\n%s", what,
                       got_n, want_n, diff);
    }
    free(got);
    free(want);
}

/* Runs soren-host with 1, 2 and 7 threads; each output must equal want.
 * input may be "" (index jobs read none). */
static void run_threads(const char *job, const char *args, const char *input, const char *want)
{
    static const int threads[] = {1, 2, 7};
    for (size_t i = 0; i < 3; i++) {
        char out[4096], what[256];
        snprintf(out, sizeof out, "%s/out-%d.tsv", dir, threads[i]);
        snprintf(what, sizeof what, "%s with %d threads", job, threads[i]);
        char *err = NULL;
        int rc = tu_runf(NULL, &err, "'%s' run %s %s --device cpu --threads %d -o '%s' %s%s%s",
                         tu_host(), job, args, threads[i], out, *input ? "'" : "", input,
                         *input ? "'" : "");
        cr_assert_eq(rc, 0, "%s: exit %d: %s", what, rc, err);
        free(err);
        expect_same_file(out, want, what);
    }
}

/* One process of a distributed run, standing in for one under mpirun: a
 * thread whose ranks run in threads of their own, its collectives with the
 * other processes those of threads too. */
typedef struct process_run {
    const soren_plugin *p;
    soren_run_options o;
    soren_comm outer;
    size_t ranks;
    soren_status rc;
    soren_error err;
} process_run;

static void *process_main(void *arg)
{
    static const int devices[] = {0, 1, 2};
    process_run *r = arg;
    r->rc = soren__run_ranks(r->p, &r->o, devices, r->ranks, &r->err);
    return NULL;
}

/* The run of o over processes of ranks[0 .. n) ranks each. */
static void run_processes(const soren_plugin *p, const soren_run_options *o,
                          const size_t *ranks, int n, const char *what)
{
    soren_thread_comm *outer = soren__thread_comm_new(n);
    cr_assert_not_null(outer);
    process_run runs[4];
    pthread_t threads[4];
    cr_assert_leq(n, 4);
    for (int q = 0; q < n; q++) {
        runs[q] = (process_run){.p = p, .o = *o, .ranks = ranks[q]};
        runs[q].outer = soren__thread_comm_rank(outer, q, 0);
        runs[q].o.comm = &runs[q].outer;
        soren_error_clear(&runs[q].err);
        cr_assert_eq(pthread_create(&threads[q], NULL, process_main, &runs[q]), 0);
    }
    for (int q = 0; q < n; q++)
        pthread_join(threads[q], NULL);
    for (int q = 0; q < n; q++)
        cr_assert_eq(runs[q].rc, SOREN_OK, "%s, process %d: %s", what, q, runs[q].err.text);
    soren__thread_comm_free(outer);
}

/* job (a name in the build's plugins, or a path) over input by 2 and by 3
 * ranks in threads of this process, and by processes of 2, 1 and 2 ranks
 * (mpirun's processes each on the GPUs of --devices), each rank on the CPU
 * engine with one thread: the distributed run that --devices spreads over
 * GPUs, whose output must be the one process's. */
static void run_ranks(const char *job, const char *input, const char *want)
{
    char manifest[4096];
    if (strchr(job, '/'))
        snprintf(manifest, sizeof manifest, "%s", job);
    else
        snprintf(manifest, sizeof manifest, "%s/stage/plugins/%s.json", tu_builddir(), job);
    soren_plugin *p = NULL;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_plugin_open(manifest, SOREN_TRUST_CHECK, &p, &err), SOREN_OK, "%s",
                 err.text);
    static const int devices[] = {0, 1, 2};
    static const size_t processes[] = {2, 1, 2};
    char out[4096], what[256];
    soren_run_options o;
    soren_run_options_init(&o);
    o.device = SOREN_DEVICE_CPU;
    o.threads = 1;
    o.inputs = &input;
    o.input_count = 1;
    o.output = out;
    for (size_t ranks = 2; ranks <= 3; ranks++) {
        snprintf(out, sizeof out, "%s/out-ranks-%zu.tsv", dir, ranks);
        snprintf(what, sizeof what, "%s by %zu ranks in threads", job, ranks);
        cr_assert_eq(soren__run_ranks(p, &o, devices, ranks, &err), SOREN_OK, "%s: %s", what,
                     err.text);
        expect_same_file(out, want, what);
    }
    snprintf(out, sizeof out, "%s/out-processes.tsv", dir);
    snprintf(what, sizeof what, "%s by processes of 2, 1 and 2 ranks", job);
    run_processes(p, &o, processes, 3, what);
    expect_same_file(out, want, what);
    soren_plugin_close(p);
}

Test(jobs, wordcount_equals_coreutils)
{
    char in[4096], want[4096];
    snprintf(in, sizeof in, "%s/text", dir);
    snprintf(want, sizeof want, "%s/want.tsv", dir);
    dg_text(in, test_bytes(), 11);
    cr_assert_eq(tu_runf(NULL, NULL, WORDS_PIPE " | " COUNT_PIPE " > '%s'", in, want), 0);
    run_threads("wordcount", "", in, want);
    run_ranks("wordcount", in, want);
    /* A vocabulary of 400,000: each rank packs pairs enough to fill
     * several blocks (dist.c), whose counts must send every pair to its
     * key's rank, once */
    tu_gen(in, "text --size 8M --vocab 400000 --seed 12");
    cr_assert_eq(tu_runf(NULL, NULL, WORDS_PIPE " | " COUNT_PIPE " > '%s'", in, want), 0);
    run_ranks("wordcount", in, want);
}

/* grep on generated text (invalid UTF-8 included) against GNU grep -E in
 * locale: the C locale for byte patterns ("(?-u)" in soren), C.UTF-8 for
 * UTF-8 ones.  icase adds -i and "(?i)". */
static void grep_case(const char *locale, const char *pattern, int icase, uint64_t seed)
{
    if (!setlocale(LC_CTYPE, locale))
        cr_skip_test("the %s locale is missing: GNU grep cannot be the reference", locale);
    setlocale(LC_CTYPE, "C");
    char in[4096], want[4096];
    snprintf(in, sizeof in, "%s/text", dir);
    snprintf(want, sizeof want, "%s/want.tsv", dir);
    dg_text(in, test_bytes() / 2, seed);
    cr_assert_eq(tu_runf(NULL, NULL, WORDS_PIPE " | LC_ALL=%s grep -aE%s '%s' | " COUNT_PIPE
                                     " > '%s'", in, locale, icase ? "i" : "", pattern, want), 0);
    int bytes = strcmp(locale, "C") == 0;
    const char *flags = icase ? (bytes ? "(?i-u)" : "(?i)") : bytes ? "(?-u)" : "";
    char args[256];
    snprintf(args, sizeof args, "--param 'pattern=%s%s'", flags, pattern);
    run_threads("grep", args, in, want);
}

Test(jobs, grep_equals_coreutils_anchored) { grep_case("C", "^th.*(ed|ing)$", 0, 21); }
Test(jobs, grep_equals_coreutils_classes) { grep_case("C", "[a-c]+x?[^a-z.]", 0, 22); }
Test(jobs, grep_equals_coreutils_bytes) { grep_case("C", "\xc3\xa9|Q7|\\\\", 0, 23); }
Test(jobs, grep_equals_coreutils_utf8)
{
    grep_case("C.UTF-8", "^.{1,3}$|[^a-z]\xc3\xa9|^(th|.)[^.]{2}$|e[[:punct:]]{2,}", 0, 24);
}
Test(jobs, grep_equals_coreutils_ignoring_case)
{
    grep_case("C.UTF-8", "^q.{0,2}[[:digit:]]|^(TH|X)+$|\xc3\x89.", 1, 25);
}

Test(jobs, histogram_equals_c_loop)
{
    char in[4096], want[4096];
    snprintf(in, sizeof in, "%s/pixels.rgb", dir);
    snprintf(want, sizeof want, "%s/want.tsv", dir);
    size_t pixels = test_bytes() / 3;
    dg_rgb(in, pixels, 31);
    size_t n = 0;
    uint8_t *rgb = (uint8_t *)tu_read(in, &n);
    cr_assert_eq(n, pixels * 3);
    uint64_t bins[768] = {0};
    for (size_t i = 0; i < pixels * 3; i++)
        bins[(i % 3) * 256 + rgb[i]]++;
    FILE *f = fopen(want, "w");
    cr_assert_not_null(f);
    for (int b = 0; b < 768; b++)
        if (bins[b])
            fprintf(f, "%d\t%llu\n", b, (unsigned long long)bins[b]);
    fclose(f);
    free(rgb);
    run_threads("histogram", "", in, want);
}

/* The test jobs with reduce functions, found by path in the build tree. */
static const char *test_job(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/stage/test-plugins/%s.json", tu_builddir(), name);
    return path;
}

Test(jobs, docfreq_equals_awk)
{
    char in[4096], want[4096];
    snprintf(in, sizeof in, "%s/text", dir);
    snprintf(want, sizeof want, "%s/want.tsv", dir);
    dg_text(in, test_bytes() / 4, 41);
    /* Lines are the records; words split at every ASCII space, which awk
     * sees once \t, \v, \f and \r are blanks; line offsets fit the job's
     * 32-bit values at these sizes. */
    cr_assert_eq(tu_runf(NULL, NULL, "LC_ALL=C tr '\t\v\f\r' '    ' < '%s' | "
                         "LC_ALL=C awk '{ split(\"\", seen); for (i = 1; i <= NF; i++) "
                         "if (!seen[$i]++) lines[$i]++ } END { for (w in lines) "
                         "printf \"%%s\\t%%d\\n\", w, lines[w] }' | LC_ALL=C sort | "
                         "sed 's/\\\\/\\\\\\\\/g' > '%s'", in, want), 0);
    run_threads(test_job("docfreq"), "", in, want);
    run_ranks(test_job("docfreq"), in, want);
}

static int u64_less(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* kvmedian's or kvscale's answer for kv32 records, by a plain loop over
 * the pairs sorted by key, then value. */
static void kv_reference(const char *in, const char *want, int median)
{
    size_t n = 0;
    uint32_t *kv = (uint32_t *)tu_read(in, &n);
    n /= 8;
    uint64_t *pairs = malloc((n ? n : 1) * 8);
    cr_assert_not_null(pairs);
    for (size_t i = 0; i < n; i++)
        pairs[i] = (uint64_t)kv[2 * i] << 32 | kv[2 * i + 1];
    qsort(pairs, n, 8, u64_less);
    FILE *f = fopen(want, "w");
    cr_assert_not_null(f);
    /* kvmedian's median keys (key | 2^31) sort after every key map emits. */
    for (int pass = 0; pass < (median ? 2 : 1); pass++) {
        for (size_t first = 0, end; first < n; first = end) {
            uint32_t key = (uint32_t)(pairs[first] >> 32), distinct = 0, sum = 0;
            for (end = first; end < n && (uint32_t)(pairs[end] >> 32) == key; end++) {
                distinct += end == first || pairs[end] != pairs[end - 1];
                sum += (uint32_t)pairs[end];
            }
            if (!median)
                fprintf(f, "%u\t%u\n", key, 2 * sum);
            else if (pass == 0)
                fprintf(f, "%u\t%u\n", key, distinct);
            else
                fprintf(f, "%u\t%u\n", key | 0x80000000u,
                        (uint32_t)pairs[first + (end - first) / 2]);
        }
    }
    cr_assert_eq(fclose(f), 0);
    free(kv);
    free(pairs);
}

static void kv_case(const char *job, uint32_t keys, uint64_t seed)
{
    char in[4096], want[4096];
    snprintf(in, sizeof in, "%s/kv", dir);
    snprintf(want, sizeof want, "%s/want.tsv", dir);
    dg_kv32(in, test_bytes() / 64, keys, seed);
    kv_reference(in, want, strcmp(job, "kvmedian") == 0);
    run_threads(test_job(job), "", in, want);
}

/* Few keys with many values each, and keys mostly distinct. */
Test(jobs, kvmedian_equals_c_loop_few_keys) { kv_case("kvmedian", 1000, 51); }
Test(jobs, kvmedian_equals_c_loop_distinct_keys) { kv_case("kvmedian", 1u << 30, 52); }
Test(jobs, kvscale_equals_c_loop) { kv_case("kvscale", 5000, 53); }

/* bucketsum's answer by a plain loop: the sum of the task numbers i < n
 * whose bucket i % buckets falls in each group (bucket % groups); groups
 * no task reaches are not output. */
static void bucketsum_reference(uint64_t n, uint64_t buckets, uint32_t groups, const char *want)
{
    uint64_t *sums = calloc(groups, sizeof *sums);
    uint8_t *seen = calloc(groups, 1);
    cr_assert(sums && seen);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t g = (uint32_t)(i % buckets % groups);
        sums[g] += i;
        seen[g] = 1;
    }
    FILE *f = fopen(want, "w");
    cr_assert_not_null(f);
    for (uint32_t g = 0; g < groups; g++)
        if (seen[g])
            fprintf(f, "%u\t%llu\n", g, (unsigned long long)sums[g]);
    cr_assert_eq(fclose(f), 0);
    free(sums);
    free(seen);
}

static void bucketsum_case(uint64_t n, uint64_t buckets, uint32_t groups)
{
    char want[4096], args[256];
    snprintf(want, sizeof want, "%s/want.tsv", dir);
    bucketsum_reference(n, buckets, groups, want);
    snprintf(args, sizeof args, "--param n=%llu --param buckets=%llu --param groups=%u",
             (unsigned long long)n, (unsigned long long)buckets, groups);
    run_threads(test_job("bucketsum"), args, "", want);
}

/* The CPU engine maps fixed records with the stage's run map, a few
 * thousand at a time: runmarks counts each u32 record under 4 + v % 4 from
 * its run map (under v % 4 from map), so every record must land there,
 * whatever the threads and wherever chunks, runs and inputs end.  Three
 * inputs, of a record, of one more than a run and of one more than a
 * chunk (1 MiB). */
Test(jobs, run_map_takes_every_fixed_record)
{
    static const uint64_t records[] = {1, 4097, (1u << 18) + 1};
    uint64_t counts[4] = {0}, state = 81;
    char files[3 * 4100] = "", path[4096], want[4096];
    for (size_t k = 0; k < 3; k++) {
        uint32_t *v = malloc(records[k] * sizeof *v);
        cr_assert_not_null(v);
        for (uint64_t i = 0; i < records[k]; i++) {
            v[i] = (uint32_t)tu_rand(&state);
            counts[v[i] % 4]++;
        }
        snprintf(path, sizeof path, "%s/part%zu", dir, k);
        tu_write(path, (const char *)v, records[k] * sizeof *v);
        free(v);
        size_t used = strlen(files);
        snprintf(files + used, sizeof files - used, "%s%s", k ? "' '" : "", path);
    }
    snprintf(want, sizeof want, "%s/want.tsv", dir);
    FILE *f = fopen(want, "w");
    cr_assert_not_null(f);
    for (int key = 0; key < 4; key++)
        if (counts[key])
            fprintf(f, "%d\t%llu\n", 4 + key, (unsigned long long)counts[key]);
    fclose(f);
    run_threads(test_job("runmarks"), "", files, want);
}

/* Index keys counted by parameters, in stage 1 (buckets) and stage 2
 * (groups): one key, keys with many values each, groups of buckets, more
 * buckets than tasks, and a count that a u64 parameter brings to the most
 * that u32 keys can number. */
Test(jobs, bucketsum_equals_c_loop)
{
    uint64_t n = test_bytes() / 64;
    bucketsum_case(n, 1, 1);
    bucketsum_case(n, 1000, 1000);
    bucketsum_case(n, 768, 10);
    bucketsum_case(1000, 5000, 300);
    bucketsum_case(1000, UINT32_MAX, 7);
}

/* A bucketsum run refused with exit code rc_want and a message containing
 * want (and also, unless NULL, also), leaving no output. */
static void bucketsum_refused(const char *args, int rc_want, const char *want, const char *also)
{
    char out[4096];
    snprintf(out, sizeof out, "%s/refused.tsv", dir);
    char *err = NULL;
    int rc = tu_runf(NULL, &err, "'%s' run '%s' %s --device cpu -o '%s'", tu_host(),
                     test_job("bucketsum"), args, out);
    cr_expect_eq(rc, rc_want, "bucketsum %s: exit %d, expected %d: %s", args, rc, rc_want, err);
    cr_expect(strstr(err, want) != NULL, "bucketsum %s: \"%s\" lacks \"%s\"", args, err, want);
    cr_expect(!also || strstr(err, also) != NULL, "bucketsum %s: \"%s\" lacks \"%s\"", args, err,
              also);
    cr_expect_neq(access(out, F_OK), 0, "bucketsum %s left an output", args);
    free(err);
}

/* Parameters that make no key count, or one that keys break: a modulus
 * over the bucket count emits keys past it, which the engine refuses as it
 * refuses any index key past its count. */
Test(jobs, bucketsum_refuses_bad_counts)
{
    bucketsum_refused("--param n=1000 --param buckets=100 --param groups=1 --param modulus=150",
                      1, "bucketsum: map emitted the index key 1",
                      "; the manifest allows 0 to 99 (key.count 100)");
    bucketsum_refused("--param n=1000 --param buckets=0 --param groups=1", 2,
                      "bucketsum: the key count (the product of key.count_from) is 0, for "
                      "parameter buckets is 0; index keys need at least one: give --param "
                      "buckets=N, N from 1 up", NULL);
    bucketsum_refused("--param n=1000 --param buckets=4294967296 --param groups=1", 2,
                      "bucketsum: the key count (the product of key.count_from) is over "
                      "4294967295, the most that index keys (u32) can number: give smaller "
                      "parameters", NULL);
    bucketsum_refused("--param n=1000 --param buckets=10", 2,
                      "bucketsum: the key count is the product of parameters of "
                      "stages[0].key.count_from: give --param groups=N", NULL);
    bucketsum_refused("--param n=1000 --param buckets=10 --param groups=0", 2,
                      "bucketsum: the key count (the product of stages[0].key.count_from) is 0",
                      NULL);
}

/* Small hand-made inputs whose answers are known exactly. */
static void expect_output(const char *job, const char *args, const char *input,
                          size_t input_size, const char *want)
{
    char in[4096];
    snprintf(in, sizeof in, "%s/small", dir);
    tu_write(in, input, input_size);
    char *out = NULL, *err = NULL;
    int rc = tu_runf(&out, &err, "'%s' run %s %s --device cpu '%s'", tu_host(), job, args, in);
    cr_assert_eq(rc, 0, "%s: exit %d: %s", job, rc, err);
    cr_expect_str_eq(out, want, "%s on %zu bytes", job, input_size);
    free(out);
    free(err);
}

Test(jobs, wordcount_edge_cases)
{
    expect_output("wordcount", "", "", 0, "");
    expect_output("wordcount", "", "\n\n \t\n", 5, "");
    expect_output("wordcount", "", "a", 1, "a\t1\n");
    expect_output("wordcount", "", "b a\r\nb", 6, "a\t1\nb\t2\n");
    expect_output("wordcount", "", "x\\y x\\y", 7, "x\\\\y\t2\n");
    expect_output("wordcount", "", "ab a abc b", 10, "a\t1\nab\t1\nabc\t1\nb\t1\n");
    expect_output("wordcount", "--format json", "b a b", 5,
                  "[\n{\"key\": \"a\", \"value\": 1},\n{\"key\": \"b\", \"value\": 2}\n]\n");
}

Test(jobs, histogram_edge_cases)
{
    expect_output("histogram", "", "", 0, "");
    expect_output("histogram", "", "\x01\x02\x03\x01\xff\x03", 6,
                  "1\t2\n258\t1\n511\t1\n515\t2\n");
}

Test(jobs, grep_edge_cases)
{
    expect_output("grep", "--param pattern=^a$", "a ab ba a", 9, "a\t2\n");
    expect_output("grep", "--param pattern=", "b a", 3, "a\t1\nb\t1\n");
    expect_output("grep", "--param pattern=zzz", "b a", 3, "");
}

/* ---- The papers' applications, on soren-gen's data ---------------------- */

/* Runs soren-gen ARGS -o dir/name and returns the path (static buffer). */
static const char *gen(const char *name, const char *args)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tu_gen(path, args);
    return path;
}

/* Distinct IPs per URL: unique (URL, IP), then count the URLs. */
#define PVC_PIPE "cut -f1,2 '%s' | LC_ALL=C sort -u -S 256M | cut -f1 | LC_ALL=C sort -S 256M | " \
                 "LC_ALL=C uniq -c | LC_ALL=C awk '{printf \"%%s\\t%%s\\n\", $2, $1}'"

Test(jobs, pageviewcount_and_rank_equal_coreutils)
{
    char log[4096], want[4096], want_rank[4096];
    char size[128];
    snprintf(size, sizeof size, "weblog --size %zu --urls 20000 --ips 5000 --seed 41",
             test_bytes() / 4);
    snprintf(log, sizeof log, "%s", gen("log", size));
    snprintf(want, sizeof want, "%s/want.tsv", dir);
    snprintf(want_rank, sizeof want_rank, "%s/want-rank.tsv", dir);
    cr_assert_eq(tu_runf(NULL, NULL, PVC_PIPE " > '%s'", log, want), 0);
    run_threads("pageviewcount", "", log, want);
    run_ranks("pageviewcount", log, want);
    /* The top ten of the reference, by count and then URL, as value_desc
     * orders them. */
    cr_assert_eq(tu_runf(NULL, NULL, "LC_ALL=C sort -t '\t' -k2,2nr -k1,1 '%s' | head -10 > '%s'",
                         want, want_rank), 0);
    run_threads("pageviewrank", "", want, want_rank);
    run_ranks("pageviewrank", want, want_rank);
}

Test(jobs, pageviewcount_edge_cases)
{
    /* Exact duplicates, the same (URL, IP) with another cookie, a line
     * without a cookie, one without a tab, an empty line. */
    const char log[] = "u1\t1.2.3.4\taa\nu1\t1.2.3.4\taa\nu1\t1.2.3.4\tbb\nu1\t5.6.7.8\n"
                       "u2\t1.2.3.4\tcc\nno-tab-here\n\nu2\t\tdd\n";
    expect_output("pageviewcount", "", log, sizeof log - 1, "u1\t2\nu2\t2\n");
    expect_output("pageviewcount", "", "", 0, "");
    /* pageviewrank: ties by URL, escapes undone and redone, lines that
     * are not URL<TAB>count skipped. */
    const char counts[] = "b\t5\na\t5\nc\\\\d\t7\nbad\tx\nno count\n\t3\nz\t\n";
    expect_output("pageviewrank", "", counts, sizeof counts - 1, "c\\\\d\t7\na\t5\nb\t5\n\t3\n");
}

Test(jobs, invertedindex_equals_grep)
{
    char want[4096], html[4096];
    char args[128];
    snprintf(args, sizeof args, "html --size %zu --urls 3000 --seed 43", test_bytes() / 8);
    snprintf(html, sizeof html, "%s", gen("pages.html", args));
    snprintf(want, sizeof want, "%s/want.tsv", dir);
    /* grep -b -o gives each match's byte offset; the URL starts 6 bytes
     * (href=") into it. */
    cr_assert_eq(tu_runf(NULL, NULL, "LC_ALL=C grep -abo 'href=\"[^\"]*\"' '%s' | LC_ALL=C awk "
                         "'{i = index($0, \":\"); u = substr($0, i + 1); "
                         "printf \"%%s\\t%%d\\n\", substr(u, 7, length(u) - 7), "
                         "substr($0, 1, i - 1) + 6}' | LC_ALL=C sort -S 256M -t '\t' -k1,1 -k2,2n "
                         "> '%s'", html, want), 0);
    run_threads("invertedindex", "", html, want);
    const char page[] = "<a href=\"x\">href=\"\" href=\"open\n<a href=\"x\">";
    expect_output("invertedindex", "", page, sizeof page - 1, "\t18\nx\t9\nx\t40\n");
}

/* Every occurrence of each line's pattern, overlapping ones included, by
 * awk's index(), as stringmatch writes them: offset, TAB, its line's offset. */
#define STRINGMATCH_AWK                                                                        \
    "LC_ALL=C awk -v p=\"$(cat '%s')\" '{ for (i = 1; (k = index(substr($0, i), p)) > 0; "   \
    "i += k) printf \"%%d\\t%%d\\n\", off + i + k - 2, off; off += length($0) + 1 }' "      \
    "'%s' > '%s'"

/* size seeded bytes of lines of a, b and c, mostly a, where patterns
 * overlap themselves (malloc'd). */
static char *abc_text(size_t size, uint64_t seed)
{
    uint64_t state = seed;
    char *text = malloc(size);
    cr_assert_not_null(text);
    for (size_t i = 0; i < size; i++) {
        uint64_t r = tu_rand_below(&state, 100);
        text[i] = r < 70 ? 'a' : r < 85 ? 'b' : r < 99 ? 'c' : '\n';
    }
    return text;
}

Test(jobs, stringmatch_equals_awk)
{
    size_t size = test_bytes() / 128;
    char *text = abc_text(size, 61);
    char in[4096], pattern[4096], want[4096];
    snprintf(in, sizeof in, "%s/abc.txt", dir);
    snprintf(pattern, sizeof pattern, "%s/pattern", dir);
    snprintf(want, sizeof want, "%s/want.tsv", dir);
    tu_write(in, text, size);
    static const char *const patterns[] = {"a", "aa", "aba", "aaab", "abaabaab", "caaaaa"};
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        tu_write(pattern, patterns[i], strlen(patterns[i]));
        cr_assert_eq(tu_runf(NULL, NULL, STRINGMATCH_AWK, pattern, in, want), 0);
        char args[4200];
        snprintf(args, sizeof args, "--param pattern=@'%s'", pattern);
        run_threads("stringmatch", args, in, want);
    }
    expect_output("stringmatch", "--param pattern=aa", "aaaa\naa\n", 8,
                  "0\t0\n1\t0\n2\t0\n5\t5\n");
    free(text);
}

/* A pattern of 10 kB that almost matches everywhere, over a line of 10 MB:
 * a search that compares the pattern at every position makes 10^11
 * comparisons; a linear one makes about 2 * 10^7. */
Test(jobs, stringmatch_is_linear, .timeout = 20)
{
    const size_t m = 10240, n = 10u << 20;
    char *line = malloc(n + 2), *pat = malloc(m);
    cr_assert(line && pat);
    memset(line, 'a', n);
    line[n] = 'b';
    line[n + 1] = '\n';
    memset(pat, 'a', m - 1);
    pat[m - 1] = 'b';
    char in[4096], pattern[4096];
    snprintf(in, sizeof in, "%s/long.txt", dir);
    snprintf(pattern, sizeof pattern, "%s/pattern", dir);
    tu_write(in, line, n + 2);
    tu_write(pattern, pat, m);
    char *out = NULL, *err = NULL;
    int rc = tu_runf(&out, &err, "'%s' run stringmatch --device cpu --param pattern=@'%s' '%s'",
                     tu_host(), pattern, in);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    char want[64];
    snprintf(want, sizeof want, "%zu\t0\n", n + 1 - m);
    cr_expect_str_eq(out, want);
    free(out);
    free(err);
    free(line);
    free(pat);
}

/* Runs soren-host run JOB ARGS (through sh, in dir); its output must be
 * want's bytes. */
static void expect_run_output(const char *want, const char *job, const char *args)
{
    char *out = NULL, *err = NULL;
    int rc = tu_runf(&out, &err, "cd '%s' && %s", dir, args);
    cr_assert_eq(rc, 0, "%s: %s: exit %d: %s", job, args, rc, err);
    cr_expect_str_eq(out, want, "%s: %s", job, args);
    free(out);
    free(err);
}

/* A record's offset is its place in all the inputs laid end to end, as
 * standard input carries them: with several files, chunks of them, and
 * threads. */
Test(jobs, offsets_count_in_the_whole_input)
{
    const char *host = tu_host();
    char cmd[20000];
    char path[4096];
    snprintf(path, sizeof path, "%s/m1", dir);
    tu_write(path, "abc\nxab\n", 8);
    snprintf(path, sizeof path, "%s/m2", dir);
    tu_write(path, "ab\n", 3);
    static const char *const ways[] = {"'%s' run stringmatch --param pattern=ab m1 m2",
                                       "'%s' run stringmatch --param pattern=ab "
                                       "--device-memory 8 m1 m2",
                                       "cat m1 m2 | '%s' run stringmatch --param pattern=ab"};
    for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++) {
        snprintf(cmd, sizeof cmd, ways[i], host);
        expect_run_output("0\t0\n5\t4\n8\t8\n", "stringmatch", cmd);
    }
    snprintf(path, sizeof path, "%s/h1", dir);
    tu_write(path, "<a href=\"x\">\n", 13);
    snprintf(path, sizeof path, "%s/h2", dir);
    tu_write(path, "q <a href=\"y\">\n", 15);
    snprintf(cmd, sizeof cmd, "'%s' run invertedindex h1 h2", host);
    expect_run_output("x\t9\ny\t24\n", "invertedindex", cmd);
    snprintf(cmd, sizeof cmd, "'%s' run invertedindex --device-memory 8 h1 h2", host);
    expect_run_output("x\t9\ny\t24\n", "invertedindex", cmd);

    /* Seeded text cut at line ends into three files and an empty one,
     * against awk over the whole. */
    size_t size = test_bytes() / 64;
    char *text = abc_text(size, 62);
    size_t cut[5] = {0, size / 3, size / 3, size / 2, size};
    for (size_t k = 1; k < 4; k++)
        while (cut[k] < size && text[cut[k] - 1] != '\n')
            cut[k]++;
    /* the paths joined by "' '": run_threads quotes the list as one */
    char files[4 * 4100] = "";
    for (size_t k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s/part%zu", dir, k);
        tu_write(path, text + cut[k], cut[k + 1] - cut[k]);
        size_t used = strlen(files);
        snprintf(files + used, sizeof files - used, "%s%s", k ? "' '" : "", path);
    }
    char whole[4096], pattern[4096], want[4096], got[4096];
    snprintf(whole, sizeof whole, "%s/whole", dir);
    snprintf(pattern, sizeof pattern, "%s/pattern", dir);
    snprintf(want, sizeof want, "%s/want.tsv", dir);
    snprintf(got, sizeof got, "%s/got.tsv", dir);
    tu_write(whole, text, size);
    tu_write(pattern, "aba", 3);
    cr_assert_eq(tu_runf(NULL, NULL, STRINGMATCH_AWK, pattern, whole, want), 0);
    run_threads("stringmatch", "--param pattern=aba", files, want);
    snprintf(cmd, sizeof cmd, "'%s' run stringmatch --param pattern=aba --device-memory 40000 "
             "-o '%s' '%s'", host, got, files);
    cr_assert_eq(tu_runf(NULL, NULL, "%s", cmd), 0, "%s", cmd);
    expect_same_file(got, want, "stringmatch over four files in chunks");
    free(text);
}

/* A normal f32 as the writers spell it: %.Ng with the fewest digits N from
 * 6 (FLT_DIG: %g drops trailing zeros, and keeps 100 from becoming 1e+02)
 * up to 9 that reads back to the same bits. */
static void put_f32(FILE *f, float v)
{
    char buf[64];
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)v);
        float back = strtof(buf, NULL);
        if (memcmp(&back, &v, 4) == 0)
            break;
    }
    fputs(buf, f);
}

/* The same for a normal f64: from 15 (DBL_DIG) up to 17 digits. */
static void put_f64(FILE *f, double v)
{
    char buf[64];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        double back = strtod(buf, NULL);
        if (memcmp(&back, &v, 8) == 0)
            break;
    }
    fputs(buf, f);
}

static float *read_floats(const char *path, size_t count)
{
    size_t n = 0;
    float *v = (float *)tu_read(path, &n);
    cr_assert_eq(n, count * 4, "%s: %zu bytes, expected %zu floats", path, n, count);
    return v;
}

/* C = A x B summed k = 0, 1, ... as matmul does, on soren-gen's matrices
 * (multiples of 1/8, whose sums are exact in any order) and on floats of
 * every mantissa, whose sums are the same bits only when every element adds
 * its products in the same order: the CPU engine's run map, which sums a
 * row's elements side by side, must keep map's order. */
static void matmul_case(const char *a, const char *b, size_t rows, size_t inner, size_t cols)
{
    char want[4096];
    float *A = read_floats(a, rows * inner), *B = read_floats(b, inner * cols);
    snprintf(want, sizeof want, "%s/want.tsv", dir);
    FILE *f = fopen(want, "w");
    cr_assert_not_null(f);
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            float sum = 0.0f;
            for (size_t k = 0; k < inner; k++)
                sum += A[i * inner + k] * B[k * cols + j];
            fprintf(f, "%llu\t", (unsigned long long)(((uint64_t)i << 32) | j));
            put_f32(f, sum);
            fputc('\n', f);
        }
    fclose(f);
    free(A);
    free(B);
    char params[8400];
    snprintf(params, sizeof params, "--param 'a=@%s' --param 'b=@%s' --param rows=%zu "
             "--param inner=%zu --param cols=%zu", a, b, rows, inner, cols);
    run_threads("matmul", params, "", want);
}

/* count floats in [-1, 1) with all 24 bits of mantissa drawn, into path. */
static void write_random_floats(const char *path, size_t count, uint64_t seed)
{
    float *v = malloc(count * sizeof *v);
    cr_assert_not_null(v);
    for (size_t i = 0; i < count; i++)
        v[i] = tu_rand_float(&seed);
    tu_write(path, (const char *)v, count * sizeof *v);
    free(v);
}

Test(jobs, matmul_equals_c_loop)
{
    const size_t rows = 61, inner = 300, cols = 47;
    char a[4096], b[4096], args[128];
    snprintf(args, sizeof args, "matrix --rows %zu --cols %zu --seed 51", rows, inner);
    snprintf(a, sizeof a, "%s", gen("a.bin", args));
    snprintf(args, sizeof args, "matrix --rows %zu --cols %zu --seed 52", inner, cols);
    snprintf(b, sizeof b, "%s", gen("b.bin", args));
    matmul_case(a, b, rows, inner, cols);
    /* wider than a tile of the run map (256 columns) */
    const size_t wide = 300;
    snprintf(a, sizeof a, "%s/ra.bin", dir);
    snprintf(b, sizeof b, "%s/rb.bin", dir);
    write_random_floats(a, rows * inner, 53);
    write_random_floats(b, inner * wide, 54);
    matmul_case(a, b, rows, inner, wide);
}

typedef struct scored {
    float score;
    uint64_t pair;
} scored;

static int scored_cmp(const void *x, const void *y)
{
    const scored *a = x, *b = y;
    if (a->score != b->score)
        return a->score < b->score ? -1 : 1;
    return (a->pair > b->pair) - (a->pair < b->pair);
}

/* Every pair i < j with its cosine, computed as simscore does (float sums
 * in k order, one rounding of a double quotient), ordered by score then
 * pair.  Scores are positive, so numeric order is the key order. */
Test(jobs, simscore_equals_c_loop)
{
    const size_t docs = 230, dims = 64;
    char features[4096], want[4096], args[128];
    snprintf(args, sizeof args, "features --docs %zu --dims %zu --seed 53", docs, dims);
    snprintf(features, sizeof features, "%s", gen("features.bin", args));
    float *F = read_floats(features, docs * dims);
    scored *all = malloc(docs * docs / 2 * sizeof *all);
    cr_assert_not_null(all);
    size_t n = 0;
    for (size_t i = 0; i < docs; i++)
        for (size_t j = i + 1; j < docs; j++) {
            float dot = 0.0f, aa = 0.0f, bb = 0.0f;
            for (size_t k = 0; k < dims; k++) {
                dot += F[i * dims + k] * F[j * dims + k];
                aa += F[i * dims + k] * F[i * dims + k];
                bb += F[j * dims + k] * F[j * dims + k];
            }
            all[n++] = (scored){(float)((double)dot / sqrt((double)aa * (double)bb)),
                                ((uint64_t)i << 32) | j};
        }
    qsort(all, n, sizeof *all, scored_cmp);
    snprintf(want, sizeof want, "%s/want.tsv", dir);
    FILE *f = fopen(want, "w");
    cr_assert_not_null(f);
    for (size_t i = 0; i < n; i++) {
        put_f32(f, all[i].score);
        fprintf(f, "\t%llu\n", (unsigned long long)all[i].pair);
    }
    fclose(f);
    free(all);
    free(F);
    char params[4200];
    snprintf(params, sizeof params, "--param 'features=@%s' --param docs=%zu --param dims=%zu",
             features, docs, dims);
    run_threads("simscore", params, "", want);
}

/* ---- svmclassify --------------------------------------------------------- */

/* svmclassify's decision sums against a plain loop over every support
 * vector and test point: 203 support vectors leave the last group of eight
 * short, and 19 features leave no row 16-byte aligned. */
Test(jobs, svmclassify_equals_c_loop)
{
    char params[16384], want[4096];
    snprintf(want, sizeof want, "%s/want.tsv", dir);
    svmclassify_case(dir, 203, 37, 19, 61, params, sizeof params, want);
    run_threads("svmclassify", params, "", want);
}

/* ---- kmeans -------------------------------------------------------------- */

/* The reference of `kmeans --iterate runs` (1: one step), its last step's
 * pairs (the centroids with points) written as TSV to want. */
static void kmeans_reference(const float *points, size_t n, size_t dims, double *centroids,
                             size_t k, int runs, const char *want)
{
    size_t stride = dims + 1;
    double *sums = malloc(k * stride * sizeof *sums);
    cr_assert_not_null(sums);
    kmeans_ref_run(points, n, dims, centroids, k, runs, sums);
    FILE *f = fopen(want, "w");
    cr_assert_not_null(f);
    for (size_t c = 0; c < k; c++)
        for (size_t j = 0; sums[c * stride + dims] > 0 && j < stride; j++) {
            fprintf(f, "%zu\t", c * stride + j);
            put_f64(f, sums[c * stride + j]);
            fputc('\n', f);
        }
    cr_assert_eq(fclose(f), 0);
    free(sums);
}

/* kmeans on 200000 generated points of 3 dimensions around 8 centres, with
 * 24 centroids started at the first 24 points (so several share a centre
 * and some end up with no point), one step and ten, for two seeds. */
Test(jobs, kmeans_equals_c_loop)
{
    const size_t n = 200000, dims = 3, k = 24;
    for (uint64_t seed = 61; seed <= 62; seed++) {
        char points_path[4096], centroids_path[4096], want[4096], args[128];
        snprintf(args, sizeof args, "points --count %zu --dims %zu --seed %llu", n, dims,
                 (unsigned long long)seed);
        snprintf(points_path, sizeof points_path, "%s", gen("points.bin", args));
        snprintf(args, sizeof args, "points --dims %zu --centroids %zu --seed %llu", dims, k,
                 (unsigned long long)seed);
        snprintf(centroids_path, sizeof centroids_path, "%s", gen("c0.bin", args));
        snprintf(want, sizeof want, "%s/want.tsv", dir);
        float *points = read_floats(points_path, n * dims);
        size_t size = 0;
        for (int runs = 1; runs <= 10; runs += 9) {
            double *centroids = (double *)tu_read(centroids_path, &size);
            cr_assert_eq(size, k * (dims + 1) * sizeof(double));
            kmeans_reference(points, n, dims, centroids, k, runs, want);
            free(centroids);
            char params[4400];
            snprintf(params, sizeof params, "--param k=%zu --param 'centroids=@%s' --iterate %d",
                     k, centroids_path, runs);
            run_threads("kmeans", params, points_path, want);
        }
        free(points);
    }
}

/* Runs kmeans --verbose on the points (x, 0, 0) of xs with the centroids
 * (x, 0, 0) of count 1, or count 0 where the x is negative; the output must
 * be want and standard error must hold said. */
static void kmeans_case(const float *xs, size_t n, const double *cx, size_t k, const char *args,
                        const char *want, const char *said)
{
    char points[4096], centroids[4096];
    snprintf(points, sizeof points, "%s/points.bin", dir);
    snprintf(centroids, sizeof centroids, "%s/c.bin", dir);
    float p[16][3] = {{0}};
    double c[16][4] = {{0}};
    cr_assert(n <= 16 && k <= 16);
    for (size_t i = 0; i < n; i++)
        p[i][0] = xs[i];
    for (size_t i = 0; i < k; i++) {
        c[i][0] = cx[i] < 0 ? 0 : cx[i];
        c[i][3] = cx[i] < 0 ? 0 : 1;
    }
    tu_write(points, p, n * sizeof p[0]);
    tu_write(centroids, c, k * sizeof c[0]);
    char *out = NULL, *err = NULL;
    int rc = tu_runf(&out, &err, "'%s' run kmeans --device cpu --verbose --param k=%zu --param "
                     "'centroids=@%s' %s '%s'", tu_host(), k, centroids, args, points);
    cr_assert_eq(rc, 0, "kmeans %s: exit %d: %s", args, rc, err);
    cr_expect_str_eq(out, want, "kmeans %s", args);
    cr_expect(strstr(err, said) != NULL, "kmeans %s: \"%s\" not in: %s", args, said, err);
    free(out);
    free(err);
}

/* Points 0, 60, 62, 64 and 100 with centroids 0, 80 and 121: step 1 gives
 * every point but 0 to centroid 1 and none to centroid 2, which keeps its
 * bytes; step 2 moves centroid 1 to 71.5, so 100 goes to centroid 2 (had
 * its count become 0, 100 would stay with centroid 1); step 3 changes
 * nothing: converged, before --iterate 10 and exactly at --iterate 3. */
Test(jobs, kmeans_empty_cluster_and_convergence)
{
    const float xs[] = {0, 60, 62, 64, 100};
    const double cx[] = {0, 80, 121};
    const char *one = "0\t0\n1\t0\n2\t0\n3\t1\n4\t286\n5\t0\n6\t0\n7\t4\n";
    const char *fixed = "0\t0\n1\t0\n2\t0\n3\t1\n4\t186\n5\t0\n6\t0\n7\t3\n"
                        "8\t100\n9\t0\n10\t0\n11\t1\n";
    kmeans_case(xs, 5, cx, 3, "", one, "kmeans: 8 pairs written");
    kmeans_case(xs, 5, cx, 3, "--iterate 1", one, "kmeans: not converged after --iterate 1: the "
                "last run's output still changed parameter centroids");
    kmeans_case(xs, 5, cx, 3, "--iterate 2", fixed, "kmeans: not converged after --iterate 2");
    kmeans_case(xs, 5, cx, 3, "--iterate 3", fixed, "kmeans: converged after 3 of at most 3 "
                "runs (the last run's output changed no byte of parameter centroids)");
    kmeans_case(xs, 5, cx, 3, "--iterate 10", fixed, "kmeans: converged after 3 of at most 10 "
                "runs");
    /* k cuts the centroids: without centroid 2, 100 stays with centroid 1. */
    kmeans_case(xs, 5, cx, 2, "--iterate 10", one, "converged after 2 of at most 10");
    /* A k past the parameter's end reads the centroids it holds. */
    kmeans_case(xs, 5, cx, 3, "--param k=7 --iterate 10", fixed, "converged after 3");
    /* Ties go to the lower index, in either order. */
    const float ten[] = {10};
    kmeans_case(ten, 1, (const double[]){0, 20}, 2, "", "0\t10\n1\t0\n2\t0\n3\t1\n", "");
    kmeans_case(ten, 1, (const double[]){20, 0}, 2, "", "0\t10\n1\t0\n2\t0\n3\t1\n", "");
    /* Count 0 is no centroid: the point goes to centroid 1; with no
     * centroid at all nothing is output, and that changes nothing. */
    kmeans_case(ten, 1, (const double[]){-1, 40}, 2, "", "4\t10\n5\t0\n6\t0\n7\t1\n", "");
    kmeans_case(ten, 1, (const double[]){-1, -1}, 2, "--iterate 5", "",
                "converged after 1 of at most 5");
    kmeans_case(xs, 0, cx, 3, "--iterate 5", "", "converged after 1 of at most 5");
}
