/*
 * api_overhead.c - what running a job again costs beyond its kernels
 * (the target: at most 50 us): k-means through the library over points already
 * in device memory, one step a run, the program feeding each step's sums
 * back as the next step's centroids.  For each timed run, the wall time of
 * soren_job_run against the time the GPU spent in the run's kernels, copies
 * and memsets, as CUPTI's activity records give them; the difference is the
 * run's overhead: host work, launches, and the GPU idle between them.
 *
 *   api-overhead POINTS K [--runs N] [--timeline]
 *   api-overhead POINTS K --iterate N [--rounds R]
 *
 * POINTS: float32 x, y, z (soren-gen points --dims 3).  Prints one JSON line:
 *   {"program":"api-overhead","points":..,"k":..,"runs":N,"variant":"..",
 *    "waits":..,"wall_us":{"median":..,"p10":..,"p90":..},"gpu_busy_us":{...},
 *    "overhead_us":{...},"activities_per_run":..}
 * waits: explain's count of the host's waits for the device in a run.
 * --timeline: then two more runs, traced with the runtime API calls too
 * (which slows them, so they are not among the timed runs), the second
 * shown as a second line:
 *   {"timeline":[{"on":"host"|"gpu","what":"..","start_us":..,"end_us":..}]}
 * the host's calls, then the GPU's activities, each in order of start,
 * their times from the run's start.
 *
 * --iterate N: the runs loop instead (soren_job_iterate, up to N runs, each
 * run's sums written over the centroids on the device), R rounds (default
 * 5) from the same centroids, untraced, then R rounds again traced; for
 * each round the wall time untraced (CUPTI's tracing adds to every launch
 * of the loop's graph), the wall time traced, the GPU's busy time (traced)
 * and the overhead (the untraced wall time less the busy time), each
 * divided by the round's runs:
 *   {"program":"api-overhead","mode":"iterate","points":..,"k":..,
 *    "rounds":R,"runs":[..],"device_runs":[..],"wall_us":{...},
 *    "traced_wall_us":{...},"gpu_busy_us":{...},"overhead_us":{...},
 *    "device_ms_per_run":..}
 * the summaries per run, over the rounds; device_ms_per_run: explain's
 * map time of the last round (the loop's device time over its runs).
 */
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <jansson.h>
#include <soren/host.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { RUNS_MAX = 100000, DIMS = 3, STRIDE = DIMS + 1 };

/* ---- CUPTI: the GPU's busy time ---------------------------------------- */

/* Activity records land in buffers CUPTI asks for and hands back; each
 * record's start and end are in CUPTI's clock (cuptiGetTimestamp). */
typedef struct busy_span {
    uint64_t start, end;
    const char *what; /* a kernel's name or the copy's kind (CUPTI's, or static) */
} busy_span;

typedef struct span_list {
    busy_span *at;
    size_t count, cap;
} span_list;

/* the GPU's kernels, copies and memsets; the host's runtime API calls */
static span_list spans, calls;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *size = 8u << 20;
    *buffer = aligned_alloc(8, *size);
    *max_records = 0;
}

static void add_span(span_list *l, uint64_t start, uint64_t end, const char *what)
{
    if (l->count == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4096;
        busy_span *grown = realloc(l->at, cap * sizeof *grown);
        if (!grown) {
            fprintf(stderr, "api-overhead: out of memory for activity records\n");
            exit(1);
        }
        l->at = grown;
        l->cap = cap;
    }
    l->at[l->count++] = (busy_span){start, end, what};
}

static const char *copy_kind(uint8_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "copy host to device";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "copy device to host";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "copy device to device";
    default: return "copy";
    }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *record = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)record;
            add_span(&spans, k->start, k->end, k->name);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)record;
            add_span(&spans, m->start, m->end, copy_kind(m->copyKind));
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)record;
            add_span(&spans, m->start, m->end, "memset");
            break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME: {
            CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)record;
            const char *name = NULL;
            cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name);
            add_span(&calls, a->start, a->end, name ? name : "?");
            break;
        }
        default:
            break;
        }
    }
    free(buffer);
}

#define CUPTI_TRY(call)                                                                    \
    do {                                                                                   \
        CUptiResult r_ = (call);                                                           \
        if (r_ != CUPTI_SUCCESS) {                                                         \
            const char *why_ = NULL;                                                       \
            cuptiGetResultString(r_, &why_);                                               \
            fprintf(stderr, "api-overhead: %s failed: %s\n", #call, why_ ? why_ : "?");    \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* The GPU's busy nanoseconds within [from, to]: the union of the spans
 * (one stream, but copies and kernels may still touch). */
static uint64_t busy_within(uint64_t from, uint64_t to)
{
    uint64_t busy = 0, covered = from;
    for (size_t i = 0; i < spans.count; i++) {
        uint64_t s = spans.at[i].start > covered ? spans.at[i].start : covered;
        uint64_t e = spans.at[i].end < to ? spans.at[i].end : to;
        if (e > s) {
            busy += e - s;
            covered = e;
        }
    }
    return busy;
}

static int compare_spans(const void *a, const void *b)
{
    const busy_span *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

/* Turns on the activity records of the GPU's kernels, copies and memsets. */
static void start_tracing(void)
{
    CUPTI_TRY(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    CUPTI_TRY(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CUPTI_TRY(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CUPTI_TRY(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
}

/* ---- The run ------------------------------------------------------------- */

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double at(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return v[(int)(q * (n - 1) + 0.5)];
}

static void summary(const char *name, double *v, int n, int last)
{
    printf("\"%s\":{\"median\":%.1f,\"p10\":%.1f,\"p90\":%.1f}%s", name, at(v, n, 0.5),
           at(v, n, 0.1), at(v, n, 0.9), last ? "" : ",");
}

/* One run: the centroids in, soren_job_run timed (the wall clock, and
 * CUPTI's where t0 and t1 are given), the sums fed back as the next run's
 * centroids. */
static void run_once(soren_job *job, double *centroids, size_t size, uint64_t *t0, uint64_t *t1,
                     double *wall_us)
{
    soren_error err;
    soren_error_clear(&err);
    struct timespec w0, w1;
    if (soren_job_param_bytes(job, "centroids", centroids, size, &err) != SOREN_OK) {
        fprintf(stderr, "api-overhead: %s\n", err.text);
        exit(1);
    }
    if (t0)
        CUPTI_TRY(cuptiGetTimestamp(t0));
    clock_gettime(CLOCK_MONOTONIC, &w0);
    if (soren_job_run(job, &err) != SOREN_OK) {
        fprintf(stderr, "api-overhead: %s\n", err.text);
        exit(1);
    }
    clock_gettime(CLOCK_MONOTONIC, &w1);
    if (t1)
        CUPTI_TRY(cuptiGetTimestamp(t1));
    *wall_us = (double)(w1.tv_sec - w0.tv_sec) * 1e6 + (double)(w1.tv_nsec - w0.tv_nsec) / 1e3;
    soren_pairs out;
    soren_job_result(job, &out, &err);
    for (uint64_t i = 0; i < out.count; i++) {
        uint64_t key_size;
        uint32_t key;
        memcpy(&key, soren_pairs_key(&out, i, &key_size), sizeof key);
        memcpy(&centroids[key], soren_pairs_value(&out, i), sizeof *centroids);
    }
}

/* --iterate: rounds of soren_job_iterate from the same centroids; each
 * round's wall time a run, and where traced (CUPTI's activity records on)
 * the GPU's busy time a run. */
static void iterate_rounds(soren_job *job, const double *start, size_t size, uint64_t most,
                           int rounds, int traced, double *wall, double *busy, uint64_t *runs,
                           uint64_t *device_runs)
{
    soren_error err;
    soren_error_clear(&err);
    uint64_t *t0 = malloc((size_t)rounds * 8), *t1 = malloc((size_t)rounds * 8);
    if (!t0 || !t1) {
        fprintf(stderr, "api-overhead: out of memory\n");
        exit(1);
    }
    for (int r = 0; r < rounds; r++) {
        soren_iteration how;
        struct timespec w0, w1;
        if (soren_job_param_bytes(job, "centroids", start, size, &err) != SOREN_OK) {
            fprintf(stderr, "api-overhead: %s\n", err.text);
            exit(1);
        }
        if (traced)
            CUPTI_TRY(cuptiGetTimestamp(&t0[r]));
        clock_gettime(CLOCK_MONOTONIC, &w0);
        if (soren_job_iterate(job, most, &how, &err) != SOREN_OK) {
            fprintf(stderr, "api-overhead: %s\n", err.text);
            exit(1);
        }
        clock_gettime(CLOCK_MONOTONIC, &w1);
        if (traced)
            CUPTI_TRY(cuptiGetTimestamp(&t1[r]));
        runs[r] = how.runs;
        device_runs[r] = how.device_runs;
        wall[r] = ((double)(w1.tv_sec - w0.tv_sec) * 1e6 +
                   (double)(w1.tv_nsec - w0.tv_nsec) / 1e3) / (double)how.runs;
    }
    if (traced) {
        CUPTI_TRY(cuptiActivityFlushAll(1));
        qsort(spans.at, spans.count, sizeof *spans.at, compare_spans);
        for (int r = 0; r < rounds; r++)
            busy[r] = (double)busy_within(t0[r], t1[r]) / 1e3 / (double)runs[r];
    }
    free(t0);
    free(t1);
}

static void print_counts(const char *name, const uint64_t *v, int n)
{
    printf("\"%s\":[", name);
    for (int i = 0; i < n; i++)
        printf("%s%llu", i ? "," : "", (unsigned long long)v[i]);
    printf("],");
}

/* The spans of l within [from, to], as JSON objects on stdout. */
static void print_spans(const span_list *l, const char *on, uint64_t from, uint64_t to, int *first)
{
    for (size_t i = 0; i < l->count; i++) {
        const busy_span *s = &l->at[i];
        if (s->start < from || s->start > to)
            continue;
        json_t *what = json_string(s->what);
        char *quoted = json_dumps(what, JSON_ENCODE_ANY);
        printf("%s{\"on\":\"%s\",\"what\":%s,\"start_us\":%.2f,\"end_us\":%.2f}",
               *first ? "" : ",", on, quoted ? quoted : "\"?\"", (double)(s->start - from) / 1e3,
               (double)(s->end - from) / 1e3);
        *first = 0;
        free(quoted);
        json_decref(what);
    }
}

int main(int argc, char **argv)
{
    int runs = 1000, timeline = 0, rounds = 5;
    long long iterate = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--timeline") == 0)
            timeline = 1;
        else if (strcmp(argv[i], "--iterate") == 0 && i + 1 < argc)
            iterate = atoll(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else
            runs = 0; /* refused below */
    }
    if (argc < 3) {
        fprintf(stderr, "usage: api-overhead POINTS K [--runs N] [--timeline]\n"
                "       api-overhead POINTS K --iterate N [--rounds R]\n");
        return 2;
    }
    uint32_t k = (uint32_t)atoi(argv[2]);
    if (k == 0 || runs < 1 || runs > RUNS_MAX || iterate < 0 || rounds < 1 ||
        rounds > RUNS_MAX) {
        fprintf(stderr, "usage: api-overhead POINTS K [--runs N] [--timeline] | --iterate N "
                "[--rounds R]: K from 1, --runs and --rounds from 1 to %d, --iterate from 1\n",
                RUNS_MAX);
        return 2;
    }
    if (iterate)
        runs = rounds;
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    size_t bytes = (size_t)ftell(f), n = bytes / (DIMS * sizeof(float));
    rewind(f);
    float *points = malloc(bytes ? bytes : 1);
    double *centroids = malloc((size_t)k * STRIDE * sizeof *centroids);
    double *wall = malloc((size_t)runs * sizeof *wall), *busy = malloc((size_t)runs * sizeof *busy);
    double *over = malloc((size_t)runs * sizeof *over);
    if (!points || !centroids || !wall || !busy || !over || fread(points, 1, bytes, f) != bytes ||
        n < k) {
        fprintf(stderr, "api-overhead: cannot read %u points from %s\n", k, argv[1]);
        return 1;
    }
    fclose(f);
    for (uint32_t c = 0; c < k; c++) {
        for (int j = 0; j < DIMS; j++)
            centroids[c * STRIDE + j] = points[c * DIMS + j];
        centroids[c * STRIDE + DIMS] = 1;
    }
    void *device_points = NULL;
    if (cudaMalloc(&device_points, bytes) != cudaSuccess ||
        cudaMemcpy(device_points, points, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        fprintf(stderr, "api-overhead: cannot put the points in device memory\n");
        return 1;
    }

    soren_error err;
    soren_error_clear(&err);
    soren_plugin *p = NULL;
    soren_job *job = NULL;
    soren_job_options o;
    soren_job_options_init(&o);
    o.device = SOREN_DEVICE_GPU;
    size_t size = (size_t)k * STRIDE * sizeof *centroids;
    if (soren_open("kmeans", &p, &err) != SOREN_OK || soren_job_new(p, &o, &job, &err) ||
        soren_job_input_device(job, device_points, bytes, &err) ||
        soren_job_param_bytes(job, "k", &k, sizeof k, &err)) {
        fprintf(stderr, "api-overhead: %s\n", err.text);
        return 1;
    }
    uint64_t *from = NULL, *to = NULL;
    if (iterate) {
        /* the session set up first, as the program's runs would have it */
        double *start = malloc(size), *traced_wall = malloc((size_t)rounds * sizeof(double)), us;
        uint64_t *counts = malloc((size_t)rounds * 32);
        if (!start || !traced_wall || !counts) {
            fprintf(stderr, "api-overhead: out of memory\n");
            return 1;
        }
        memcpy(start, centroids, size);
        run_once(job, centroids, size, NULL, NULL, &us);
        /* The wall times untraced: CUPTI's tracing adds its own cost to
         * every launch.  Then the same rounds traced, for the busy time. */
        iterate_rounds(job, start, size, (uint64_t)iterate, rounds, 0, wall, NULL, counts,
                       counts + rounds);
        start_tracing();
        iterate_rounds(job, start, size, (uint64_t)iterate, rounds, 1, traced_wall, busy,
                       counts + 2 * rounds, counts + 3 * rounds);
        for (int r = 0; r < rounds; r++) {
            if (counts[r] != counts[2 * rounds + r]) {
                fprintf(stderr, "api-overhead: round %d made %llu runs untraced and %llu "
                        "traced: the runs are not the same\n", r,
                        (unsigned long long)counts[r],
                        (unsigned long long)counts[2 * rounds + r]);
                return 1;
            }
            over[r] = wall[r] - busy[r];
        }
        json_t *x = json_loads(soren_job_explain(job), 0, NULL);
        double device_ms = json_real_value(json_object_get(json_object_get(x, "times_ms"), "map"));
        json_decref(x);
        printf("{\"program\":\"api-overhead\",\"mode\":\"iterate\",\"points\":%zu,\"k\":%u,"
               "\"rounds\":%d,", n, k, rounds);
        print_counts("runs", counts, rounds);
        print_counts("device_runs", counts + rounds, rounds);
        summary("wall_us", wall, rounds, 0);
        summary("traced_wall_us", traced_wall, rounds, 0);
        summary("gpu_busy_us", busy, rounds, 0);
        summary("overhead_us", over, rounds, 0);
        printf("\"device_ms_per_run\":%.4f}\n", device_ms);
        free(start);
        free(traced_wall);
        free(counts);
        goto done;
    }

    start_tracing();
    from = malloc((size_t)runs * 8);
    to = malloc((size_t)runs * 8);
    char variant[32] = "";
    long long waits = -1;
    /* run -1 is the warm-up: the session's set-up and monitoring */
    for (int r = -1; r < runs; r++) {
        uint64_t t0, t1;
        double us;
        run_once(job, centroids, size, &t0, &t1, &us);
        if (r < 0)
            continue;
        from[r] = t0;
        to[r] = t1;
        wall[r] = us;
    }
    json_t *x = json_loads(soren_job_explain(job), 0, NULL);
    snprintf(variant, sizeof variant, "%s",
             json_string_value(json_object_get(x, "variant")) ?: "?");
    if (json_is_integer(json_object_get(x, "waits")))
        waits = json_integer_value(json_object_get(x, "waits"));
    json_decref(x);
    CUPTI_TRY(cuptiActivityFlushAll(1));
    const size_t timed_spans = spans.count;
    uint64_t t0 = 0, t1 = 0;
    if (timeline) {
        /* the first traced run pays for the tracing's set-up: the second
         * is the one shown */
        double us;
        CUPTI_TRY(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
        for (int i = 0; i < 2; i++)
            run_once(job, centroids, size, &t0, &t1, &us);
        CUPTI_TRY(cuptiActivityFlushAll(1));
    }
    qsort(spans.at, spans.count, sizeof *spans.at, compare_spans);
    qsort(calls.at, calls.count, sizeof *calls.at, compare_spans);
    for (int r = 0; r < runs; r++) {
        busy[r] = (double)busy_within(from[r], to[r]) / 1e3;
        over[r] = wall[r] - busy[r];
    }
    printf("{\"program\":\"api-overhead\",\"points\":%zu,\"k\":%u,\"runs\":%d,"
           "\"variant\":\"%s\",\"waits\":%lld,\"activities_per_run\":%.1f,", n, k, runs,
           variant, waits, (double)timed_spans / (runs + 1));
    summary("wall_us", wall, runs, 0);
    summary("gpu_busy_us", busy, runs, 0);
    summary("overhead_us", over, runs, 1);
    printf("}\n");
    if (timeline) {
        int first = 1;
        printf("{\"timeline\":[");
        print_spans(&calls, "host", t0, t1, &first);
        print_spans(&spans, "gpu", t0, t1, &first);
        printf("]}\n");
    }
done:
    soren_job_free(job);
    soren_close(p);
    cudaFree(device_points);
    free(points);
    free(centroids);
    free(wall);
    free(busy);
    free(over);
    free(from);
    free(to);
    free(spans.at);
    free(calls.at);
    return 0;
}
