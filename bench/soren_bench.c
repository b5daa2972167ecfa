/*
 * soren_bench.c - one benchmark configuration, timed in one process through
 * libsoren's API (soren/host.h): a warm-up run (CUDA context, module
 * loading, page cache), then --runs timed runs, each of a new job over the
 * same inputs, or with --same-job each a run again of the warm-up's job
 * (what a program that keeps its job sees: the GPU session's variant,
 * regions, stream and pinned staging kept; the input mapped and uploaded
 * again).
 *
 *   soren-bench JOB [--device auto|cpu|gpu] [--engine NAME] [--runs N] [--same-job]
 *               [--param NAME=VALUE]... [--tasks N] [--output FILE] [INPUT...]
 *
 * Each run's wall time is the host clock around soren_job_run (input
 * mapping and upload, every phase, the result back in host memory); its
 * device time is the sum of the GPU phases its --explain report gives,
 * which the GPU engine times with CUDA events (monitor, split, map, merge,
 * reduce, sort; not the upload or the download).  --output writes the last
 * run's result, for comparison with other configurations.  Prints one JSON
 * line on standard output:
 *
 *   {"job":..,"device":..,"engine":..,"variant":..,"runs":N,"same_job":..,"pairs":..,
 *    "wall_ms":[..],"device_ms":[..] (null on the CPU engine),
 *    "phases_ms":{"monitor":..,...} (medians over the runs)}
 */
#include <jansson.h>
#include <soren/host.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { RUNS_MAX = 100 };

/* The phases of --explain's times_ms (its "copy" is upload plus download). */
static const char *const phases[] = {"upload", "split",  "monitor", "map",
                                     "merge",  "reduce", "sort",    "download"};
enum { PHASES = sizeof phases / sizeof phases[0] };
/* The phases the GPU spends on the resident input (device time). */
static const char *const device_phases[] = {"monitor", "split", "map", "merge", "reduce", "sort"};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double sorted[RUNS_MAX];
    memcpy(sorted, v, (size_t)n * sizeof *v);
    qsort(sorted, (size_t)n, sizeof *sorted, compare_doubles);
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

static int usage(const char *why)
{
    fprintf(stderr, "soren-bench: %s\n"
            "usage: soren-bench JOB [--device auto|cpu|gpu] [--engine NAME] [--runs N] [--same-job]\n"
            "                   [--param NAME=VALUE]... [--tasks N] [--output FILE] [INPUT...]\n",
            why);
    return 2;
}

/* Adds a stage's phase times to phase_ms and its GPU phases on the
 * resident input to *device_ms. */
static int add_stage(const json_t *stage, double *phase_ms, double *device_ms)
{
    json_t *times = json_object_get(stage, "times_ms");
    if (!json_is_object(times))
        return -1;
    for (int i = 0; i < PHASES; i++)
        phase_ms[i] += json_number_value(json_object_get(times, phases[i]));
    for (size_t i = 0; i < sizeof device_phases / sizeof device_phases[0]; i++)
        *device_ms += json_number_value(json_object_get(times, device_phases[i]));
    return 0;
}

/* One run's phase times from its report, every stage's added up, and its
 * device time (stage 1's variant names the run). */
static int read_report(const char *report, double *phase_ms, double *device_ms,
                       const char **device, char *variant, size_t variant_size)
{
    json_error_t why;
    json_t *doc = json_loads(report, 0, &why);
    memset(phase_ms, 0, PHASES * sizeof *phase_ms);
    *device_ms = 0;
    int bad = !doc || add_stage(doc, phase_ms, device_ms) != 0;
    size_t i;
    json_t *stage;
    json_array_foreach(json_object_get(doc, "stages"), i, stage)
        bad |= add_stage(stage, phase_ms, device_ms) != 0;
    if (bad) {
        fprintf(stderr, "soren-bench: the explain report has no times_ms: %s\n", report);
        json_decref(doc);
        return -1;
    }
    *device = strcmp(json_string_value(json_object_get(doc, "device")), "gpu") == 0 ? "gpu"
                                                                                    : "cpu";
    snprintf(variant, variant_size, "%s", json_string_value(json_object_get(doc, "variant")));
    json_decref(doc);
    return 0;
}

/* What each run's job is given: the command line's parameters, task count
 * and inputs. */
typedef struct job_setup {
    const char *const *params; /* NAME=VALUE */
    int param_count;
    uint64_t tasks;            /* 0: the job's own */
    const char *const *inputs;
    int input_count;
} job_setup;

/* A new job of plugin p set up as the command line says.  Unless
 * --same-job, every timed run gets its own, so that each is a whole run as
 * soren-host makes it (monitoring, the choice of variant, sizing and
 * allocation included); re-running on resident data is what
 * bench/api-overhead measures. */
static soren_status new_job(soren_plugin *p, const soren_job_options *o, const job_setup *setup,
                            soren_job **out, soren_error *err)
{
    soren_job *job = NULL;
    soren_status st = soren_job_new(p, o, &job, err);
    for (int i = 0; st == SOREN_OK && i < setup->param_count; i++) {
        const char *param = setup->params[i];
        const char *eq = strchr(param, '=');
        char name[256];
        if (!eq || (size_t)(eq - param) >= sizeof name) {
            snprintf(err->text, sizeof err->text, "--param %s: expected NAME=VALUE", param);
            st = SOREN_EUSAGE;
            break;
        }
        snprintf(name, sizeof name, "%.*s", (int)(eq - param), param);
        st = soren_job_param(job, name, eq + 1, err);
    }
    if (st == SOREN_OK && setup->tasks)
        st = soren_job_tasks(job, setup->tasks, err);
    for (int i = 0; st == SOREN_OK && i < setup->input_count; i++)
        st = soren_job_input_file(job, setup->inputs[i], err);
    if (st != SOREN_OK) {
        soren_job_free(job);
        return st;
    }
    *out = job;
    return SOREN_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-')
        return usage("no job given");
    const char *job_name = argv[1], *output = NULL;
    soren_job_options o;
    soren_job_options_init(&o);
    int runs = 5, same_job = 0;
    uint64_t tasks = 0;
    const char *params[64];
    int param_count = 0, first_input = argc;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] != '-') {
            first_input = i;
            break;
        }
        if (strcmp(a, "--same-job") == 0) {
            same_job = 1;
            continue;
        }
        if (!v)
            return usage("an option needs a value");
        i++;
        if (strcmp(a, "--device") == 0) {
            if (strcmp(v, "cpu") == 0)
                o.device = SOREN_DEVICE_CPU;
            else if (strcmp(v, "gpu") == 0)
                o.device = SOREN_DEVICE_GPU;
            else if (strcmp(v, "auto") != 0)
                return usage("--device takes auto, cpu or gpu");
        } else if (strcmp(a, "--engine") == 0) {
            o.engine = v;
        } else if (strcmp(a, "--runs") == 0) {
            runs = atoi(v);
            if (runs < 1 || runs > RUNS_MAX)
                return usage("--runs takes 1 to 100");
        } else if (strcmp(a, "--param") == 0) {
            if (param_count == 64)
                return usage("too many --param");
            params[param_count++] = v;
        } else if (strcmp(a, "--tasks") == 0) {
            tasks = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--output") == 0) {
            output = v;
        } else {
            return usage("unknown option");
        }
    }

    soren_error err;
    soren_error_clear(&err);
    soren_plugin *p = NULL;
    soren_job *job = NULL;
    double wall[RUNS_MAX], device[RUNS_MAX], phase[PHASES][RUNS_MAX];
    const char *where = "cpu";
    char variant[32] = "";
    unsigned long long pairs = 0;
    int status = 1;
    const job_setup setup = {params, param_count, tasks,
                             (const char *const *)argv + first_input, argc - first_input};
    if (soren_open(job_name, &p, &err) != SOREN_OK)
        goto done;
    for (int r = -1; r < runs; r++) {
        soren_pairs out;
        if (!job && new_job(p, &o, &setup, &job, &err) != SOREN_OK)
            goto done;
        double t0 = now_ms();
        if (soren_job_run(job, &err) != SOREN_OK || soren_job_result(job, &out, &err) != SOREN_OK)
            goto done;
        double t1 = now_ms();
        pairs = out.count;
        if (r == runs - 1 && output && soren_job_write(job, output, "tsv", &err) != SOREN_OK)
            goto done;
        if (r >= 0) { /* not the warm-up */
            double times[PHASES];
            if (read_report(soren_job_explain(job), times, &device[r], &where, variant,
                            sizeof variant) != 0) {
                snprintf(err.text, sizeof err.text, "no usable explain report");
                goto done;
            }
            wall[r] = t1 - t0;
            for (int i = 0; i < PHASES; i++)
                phase[i][r] = times[i];
        }
        if (!same_job) {
            soren_job_free(job);
            job = NULL;
        }
    }

    printf("{\"job\":\"%s\",\"device\":\"%s\",\"engine\":\"%s\",\"variant\":\"%s\",\"runs\":%d,"
           "\"same_job\":%s,\"pairs\":%llu,\"wall_ms\":[", job_name, where, o.engine, variant, runs,
           same_job ? "true" : "false", pairs);
    for (int r = 0; r < runs; r++)
        printf("%s%.4f", r ? "," : "", wall[r]);
    printf("],\"device_ms\":");
    if (strcmp(where, "gpu") == 0) {
        for (int r = 0; r < runs; r++)
            printf("%s%.4f", r ? "," : "[", device[r]);
        putchar(']');
    } else {
        printf("null");
    }
    printf(",\"phases_ms\":{");
    for (int i = 0; i < PHASES; i++)
        printf("%s\"%s\":%.4f", i ? "," : "", phases[i], median(phase[i], runs));
    printf("}}\n");
    status = 0;
done:
    if (status)
        fprintf(stderr, "soren-bench: %s: %s\n", job_name, err.text);
    soren_job_free(job);
    soren_close(p);
    return status;
}
