/*
 * soren-svm - two-class SVM training and classification on Soren, with
 * LibSVM's file formats, written against libsoren's API alone
 * (soren/host.h): training is the svmstep job iterated, a step a run
 * (soren_job_iterate: on the GPU the steps loop on the device), a
 * classification one run of svmclassify.
 *
 *   soren-svm train [OPTIONS] TRAIN MODEL     like svm-train -s 0 -t 2
 *   soren-svm predict [OPTIONS] TEST MODEL [OUTPUT]   like svm-predict
 *
 * Training is SMO with LibSVM's second-order working set selection:
 * alpha = 0, f = -y; then, step by step, the job moves the last chosen
 * pair as SMO moves it (clipped to [0, C]), updates f, and chooses the
 * next pair (i_high, the smallest f over I_up; i_low, the point of I_low
 * that gains most with it); training ends when b_low <= b_high + eps
 * (b_low the largest f over I_low: LibSVM's stopping rule, eps its -e,
 * default 0.001).  rho = (b_high + b_low) / 2.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <soren/host.h>

#include "libsvm_text.h"

#define EXIT_USAGE 2

static const char usage_text[] =
    "Usage: soren-svm train [OPTIONS] TRAIN MODEL\n"
    "       soren-svm predict [OPTIONS] TEST MODEL [OUTPUT]\n"
    "\n"
    "Train a two-class soft-margin SVM with an RBF kernel, exp(-gamma |u - v|^2),\n"
    "or classify with one, on a GPU where one is usable and on the CPU elsewhere.\n"
    "TRAIN and TEST are in LibSVM's format (LABEL INDEX:VALUE ...; two labels);\n"
    "MODEL is LibSVM's model format, so svm-predict reads soren-svm's models and\n"
    "soren-svm predict reads svm-train's (RBF, two classes).  predict prints the\n"
    "accuracy as svm-predict does and writes each point's label to OUTPUT.\n"
    "The jobs run in the resident host (soren-host serve) where one answers, which\n"
    "keeps the GPU's context and the plugins between commands; else in this process.\n"
    "\n"
    "Options:\n"
    "  -c C              train: the soft margin's cost (default 1)\n"
    "  -g GAMMA          train: the kernel's gamma (default 1 / the number of\n"
    "                    features)\n"
    "  -e EPS            train: stop once b_low <= b_high + EPS (default 0.001)\n"
    "  -m MB             train: memory for kernel rows kept between steps, in MiB\n"
    "                    (default 1024; 0 keeps none); the model is the same for\n"
    "                    every size\n"
    "      --max-steps N train: give up after N steps (default 10000000)\n"
    "      --device auto|cpu|gpu\n"
    "                    where the jobs run (default auto)\n"
    "      --engine auto|hash|block|direct|dense|sort\n"
    "                    force the jobs' GPU engine variant (default auto: dense)\n"
    "      --local       run the jobs in this process even where a host answers\n"
    "      --socket PATH the resident host's socket (default $SOREN_HOST, else\n"
    "                    $XDG_RUNTIME_DIR/soren/host.sock)\n"
    "  -v, --verbose     say where the jobs run and how long reading the files,\n"
    "                    training and classifying took, on standard error\n"
    "  -h, --help        show this help\n"
    "\n"
    "Exit status: 0 success, 1 an error, 2 a usage error.\n";

static int usage_error(const char *what)
{
    fprintf(stderr, "soren-svm: %s\nTry 'soren-svm --help'.\n", what);
    return EXIT_USAGE;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- Points ------------------------------------------------------------- */

/* Points as the jobs read them: n rows of d features, row-major, each row
 * width float32 (d rounded up to a multiple of 4, zeros after the
 * features: every row starts 16-byte aligned, as the GPU's loads of a row
 * want, and the zeros add nothing to a distance), and a float32 label per
 * row (+1 for labels[0], -1 for labels[1]). */
typedef struct points {
    size_t n, d, width;
    float *x;
    float *y;
    double labels[2];
    int label_count;
} points;

static void points_free(points *p)
{
    free(p->x);
    free(p->y);
    memset(p, 0, sizeof *p);
}

/* Reads a LibSVM file into dense points of at least d features (its own
 * largest index where larger).  labels gives the two labels in their order
 * (from a model) or, when label_count is 0, they are taken in the order the
 * file first names them (+1 before -1, as LibSVM does). */
static int points_read(const char *path, points *p, size_t min_d)
{
    libsvm_file file;
    if (libsvm_file_open(path, &file) != 0)
        return -1;
    sparse_rows rows;
    int rc = sparse_rows_parse(file.bytes, file.size, path, 0, &rows);
    libsvm_file_close(&file);
    if (rc != 0)
        return -1;
    const size_t n = rows.n, d = rows.d > min_d ? rows.d : min_d;
    const int labels_from_file = p->label_count == 0;
    if (n == 0 || d == 0) {
        fprintf(stderr, "soren-svm: %s: no points\n", path);
        goto fail;
    }
    p->n = n;
    p->d = d;
    p->width = (d + 3) & ~(size_t)3;
    p->x = malloc(n * p->width * sizeof *p->x);
    p->y = malloc(n * sizeof *p->y);
    if (!p->x || !p->y) {
        fprintf(stderr, "soren-svm: %s: out of memory for %zu points of %zu features\n", path, n,
                d);
        goto fail;
    }
    sparse_rows_dense(&rows, p->x, p->width);
    for (size_t i = 0; i < n; i++) {
        const double label = rows.label[i];
        int which = p->label_count;
        for (int l = 0; l < p->label_count; l++)
            if (p->labels[l] == label)
                which = l;
        if (which == p->label_count) {
            if (p->label_count == 2) {
                fprintf(stderr, "soren-svm: %s:%zu: a third label, %g (the first two: %g, %g): "
                        "soren-svm trains two classes\n", path, i + 1, label, p->labels[0],
                        p->labels[1]);
                goto fail;
            }
            p->labels[p->label_count++] = label;
        }
        p->y[i] = which == 0 ? 1.0f : -1.0f;
    }
    /* Labels -1 and +1 found in that order become +1 and -1, as LibSVM
     * takes them, so that +1's points are the positive side and the two
     * tools' models have the same rho. */
    if (labels_from_file && p->label_count == 2 && p->labels[0] == -1 && p->labels[1] == 1) {
        p->labels[0] = 1;
        p->labels[1] = -1;
        for (size_t i = 0; i < n; i++)
            p->y[i] = -p->y[i];
    }
    sparse_rows_free(&rows);
    return 0;
fail:
    sparse_rows_free(&rows);
    points_free(p);
    return -1;
}

/* ---- Models (LibSVM's format) -------------------------------------------- */

typedef struct model {
    double gamma, rho;
    double labels[2];
    size_t svs, d;
    sparse_rows sv; /* the support vectors, as the file lists them */
    double *coef;   /* alpha_i y_i, y = +1 for labels[0] */
} model;

static void model_free(model *m)
{
    sparse_rows_free(&m->sv);
    free(m->coef);
    memset(m, 0, sizeof *m);
}

/* The texts of the floats printed last, a slot each by a hash of the
 * bits: a model's feature values repeat (pixels in 256ths, binary
 * features), and the shortest text of one costs a few conversions. */
enum { FLOAT_TEXTS = 1024 };
typedef struct float_texts {
    uint32_t bits[FLOAT_TEXTS];
    char text[FLOAT_TEXTS][16]; /* "-1.23456789e-38" at the longest; "" is empty */
} float_texts;

/* The shortest text of a float that reads back to the same float. */
static const char *float_text(float v, float_texts *seen)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    const uint32_t slot = (bits * 0x9e3779b1u) >> 22;
    char *text = seen->text[slot];
    if (!text[0] || seen->bits[slot] != bits) {
        for (int digits = 6; digits <= 9; digits++) {
            snprintf(text, sizeof seen->text[slot], "%.*g", digits, (double)v);
            if (strtof(text, NULL) == v)
                break;
        }
        seen->bits[slot] = bits;
    }
    return text;
}

/* Appends " INDEX:" to line at *at. */
static void put_index(char *line, size_t *at, size_t index)
{
    char digits[24];
    int n = 0;
    do
        digits[n++] = (char)('0' + index % 10);
    while ((index /= 10) != 0);
    line[(*at)++] = ' ';
    while (n > 0)
        line[(*at)++] = digits[--n];
    line[(*at)++] = ':';
}

/* Writes the model to path through path.tmp, renamed at the end, so that
 * a failed write leaves nothing behind. */
static int model_write(const char *path, const model *m, const points *p, const double *alpha)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        fprintf(stderr, "soren-svm: %s: the path is too long\n", path);
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "soren-svm: cannot write %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    size_t per_label[2] = {0, 0};
    for (size_t i = 0; i < p->n; i++)
        if (alpha[i] > 0)
            per_label[p->y[i] > 0 ? 0 : 1]++;
    fprintf(f, "svm_type c_svc\nkernel_type rbf\ngamma %.17g\nnr_class 2\ntotal_sv %zu\n"
            "rho %.17g\nlabel %.17g %.17g\nnr_sv %zu %zu\nSV\n", m->gamma,
            per_label[0] + per_label[1], m->rho, p->labels[0], p->labels[1], per_label[0],
            per_label[1]);
    /* A support vector's line, built whole: "%.17g" of its coefficient
     * (at most 24 bytes), then " INDEX:VALUE" (at most 1 + 20 + 1 + 15). */
    float_texts *seen = calloc(1, sizeof *seen);
    char *line = malloc(32 + 40 * p->d);
    if (!seen || !line) {
        fprintf(stderr, "soren-svm: writing %s: out of memory\n", path);
        free(seen);
        free(line);
        fclose(f);
        remove(tmp);
        return -1;
    }
    /* LibSVM lists the support vectors of labels[0] first. */
    for (int side = 0; side < 2; side++)
        for (size_t i = 0; i < p->n; i++) {
            if (!(alpha[i] > 0) || (p->y[i] > 0) != (side == 0))
                continue;
            size_t at = (size_t)snprintf(line, 32, "%.17g", alpha[i] * p->y[i]);
            for (size_t k = 0; k < p->d; k++) {
                float v = p->x[i * p->width + k];
                if (v != 0) {
                    put_index(line, &at, k + 1);
                    const char *text = float_text(v, seen);
                    const size_t len = strlen(text);
                    memcpy(line + at, text, len);
                    at += len;
                }
            }
            line[at++] = '\n';
            fwrite(line, 1, at, f);
        }
    free(line);
    free(seen);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "soren-svm: writing %s: %s\n", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

static int model_read(const char *path, model *m)
{
    libsvm_file file;
    if (libsvm_file_open(path, &file) != 0)
        return -1;
    memset(m, 0, sizeof *m);
    /* The header, a line at a time up to "SV" (short lines: the rest of a
     * longer one is not read). */
    const char *s = file.bytes, *end = file.bytes + file.size;
    size_t lineno = 0;
    int rbf = 0, two = 0, sv_section = 0, have_labels = 0;
    while (!sv_section && s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *next = nl ? nl + 1 : end;
        char line[256], key[64];
        const size_t len = (size_t)(next - s) < sizeof line ? (size_t)(next - s) : sizeof line - 1;
        memcpy(line, s, len);
        line[len] = '\0';
        s = next;
        lineno++;
        if (sscanf(line, "%63s", key) != 1)
            continue;
        if (strcmp(key, "kernel_type") == 0)
            rbf = strstr(line, " rbf") != NULL;
        else if (strcmp(key, "nr_class") == 0)
            two = strstr(line, " 2") != NULL;
        else if (strcmp(key, "gamma") == 0)
            m->gamma = strtod(line + 5, NULL);
        else if (strcmp(key, "rho") == 0)
            m->rho = strtod(line + 3, NULL);
        else if (strcmp(key, "total_sv") == 0)
            m->svs = strtoul(line + 8, NULL, 10);
        else if (strcmp(key, "label") == 0)
            have_labels = sscanf(line + 5, "%lf %lf", &m->labels[0], &m->labels[1]) == 2;
        else if (strcmp(key, "SV") == 0)
            sv_section = 1;
    }
    if (!sv_section || !rbf || !two || !have_labels || m->svs == 0) {
        fprintf(stderr, "soren-svm: %s is not a two-class RBF model in LibSVM's format (it "
                "needs kernel_type rbf, nr_class 2, label, total_sv and SV)\n", path);
        goto fail;
    }
    /* The support vectors: their coefficients and points. */
    if (sparse_rows_parse(s, (size_t)(end - s), path, lineno, &m->sv) != 0)
        goto fail;
    if (m->sv.n != m->svs) {
        fprintf(stderr, "soren-svm: %s: total_sv says %zu support vectors, it lists %zu\n", path,
                m->svs, m->sv.n);
        goto fail;
    }
    m->d = m->sv.d ? m->sv.d : 1;
    /* the coefficients stand where the labels of points stand */
    m->coef = m->sv.label;
    m->sv.label = NULL;
    libsvm_file_close(&file);
    return 0;
fail:
    libsvm_file_close(&file);
    model_free(m);
    return -1;
}

/* ---- Jobs --------------------------------------------------------------- */

typedef struct svm_cli {
    double c, gamma, eps;
    unsigned long long max_steps;
    unsigned long long cache_mb; /* svmstep's rows: kernel rows kept between steps */
    soren_device device;
    const char *engine; /* the jobs' GPU variant, or "auto" */
    int local;          /* in this process even where a resident host answers */
    const char *socket; /* the resident host's socket; NULL: the default one */
    int verbose;
    char **args;
    int arg_count;
} svm_cli;

static int fail(soren_error *err)
{
    fprintf(stderr, "soren-svm: %s\n", err->text);
    return 1;
}

/* A job of the named plugin, on the device asked for, unmonitored (each
 * step is a small run whose variant the manifest decides: index keys), in
 * the resident host where one answers and --local was not given. */
static int open_job(const char *name, const svm_cli *o, soren_plugin **p, soren_job **job,
                    soren_error *err)
{
    soren_job_options opt;
    soren_job_options_init(&opt);
    opt.device = o->device;
    opt.engine = o->engine;
    opt.sample = 0;
    if (!o->local) {
        soren_error why;
        soren_error_clear(&why);
        int up = soren_host_answers(o->socket, &why);
        if (up > 0)
            opt.host = o->socket ? o->socket : "";
        else if (up < 0)
            fprintf(stderr, "soren-svm: not using the host: %s; running here\n", why.text);
    }
    if (o->verbose)
        fprintf(stderr, "soren-svm: %s runs %s\n", name,
                opt.host ? "in the resident host" : "in this process");
    return soren_open(name, p, err) == SOREN_OK && soren_job_new(*p, &opt, job, err) == SOREN_OK
               ? 0
               : -1;
}

#define SET(job, name, ptr, size)                                                          \
    (soren_job_param_bytes(job, name, ptr, size, &err) == SOREN_OK)
/* Large arrays, read where they are: the job is freed before them. */
#define SET_IN_PLACE(job, name, ptr, size)                                                 \
    (soren_job_param_bytes_in_place(job, name, ptr, size, &err) == SOREN_OK)

/* The state svmstep iterates over (svmstep.cu): the choices (i_high, the
 * largest f of I_low, i_low), the phase, then f, alpha and the kernel row
 * of i_high, 8 bytes an element. */
#define SVM_START 0xffffffffffffffffull
#define SVM_NONE 0ull
enum { SVM_HIGH, SVM_LOW_BOUND, SVM_LOW, SVM_PHASE, SVM_F };

static uint64_t state_bits(const uint8_t *state, uint64_t e)
{
    uint64_t v;
    memcpy(&v, state + 8 * e, sizeof v);
    return v;
}

static double state_real(const uint8_t *state, uint64_t e)
{
    uint64_t bits = state_bits(state, e);
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

static void state_set_real(uint8_t *state, uint64_t e, double v)
{
    memcpy(state + 8 * e, &v, sizeof v);
}

/* The bytes of svmstep's rows: as many kernel rows of 16 n bytes as
 * cache_mb MiB holds, and no more than the n rows there are. */
static unsigned long long cache_bytes(unsigned long long cache_mb, uint32_t n)
{
    const unsigned long long row = 16ull * n;
    unsigned long long rows = row ? (cache_mb << 20) / row : 0;
    return (rows < n ? rows : n) * row;
}

/* The point a packed choice names (n where none was made). */
static uint32_t chosen(uint64_t packed, uint32_t n)
{
    return packed == SVM_NONE || packed == SVM_START ? n
                                                      : (uint32_t)(0xffffff - (packed & 0xffffff));
}

static int train(const svm_cli *o)
{
    if (o->arg_count != 2)
        return usage_error("train takes TRAIN and MODEL");
    points p = {0};
    const double start = now_s();
    if (points_read(o->args[0], &p, 0) != 0)
        return 1;
    const double reading = now_s() - start;
    if (p.n > 0xfffffe) {
        fprintf(stderr, "soren-svm: %s has %zu points; svmstep takes at most 16777214\n",
                o->args[0], p.n);
        points_free(&p);
        return 1;
    }
    if (p.label_count < 2) {
        fprintf(stderr, "soren-svm: %s has one label only (%g): there is nothing to separate\n",
                o->args[0], p.labels[0]);
        points_free(&p);
        return 1;
    }
    double gamma = o->gamma > 0 ? o->gamma : 1.0 / (double)p.d, c = o->c, eps = o->eps;
    const uint32_t n = (uint32_t)p.n, width = (uint32_t)p.width, slots = 3 * n + 4;
    const size_t state_size = (size_t)slots * 8;
    uint8_t *state = malloc(state_size);
    double *alpha = malloc(p.n * sizeof *alpha);
    soren_error err;
    soren_error_clear(&err);
    soren_plugin *plugin = NULL;
    soren_job *job = NULL;
    int status = 1;
    const unsigned long long rows_bytes = cache_bytes(o->cache_mb, n);
    char rows[24];
    snprintf(rows, sizeof rows, "%llu", rows_bytes);
    if (!state || !alpha) {
        fprintf(stderr, "soren-svm: out of memory\n");
        goto done;
    }
    /* Nothing chosen, phase A; f = -y, alpha = 0, no kernel row. */
    memset(state, 0, state_size);
    memset(state, 0xff, 3 * 8);
    for (size_t i = 0; i < p.n; i++)
        state_set_real(state, SVM_F + i, -(double)p.y[i]);
    if (open_job("svmstep", o, &plugin, &job, &err) != 0 ||
        !SET_IN_PLACE(job, "x", p.x, p.n * p.width * sizeof *p.x) ||
        !SET_IN_PLACE(job, "y", p.y, p.n * sizeof *p.y) || !SET(job, "n", &n, 4) ||
        !SET(job, "d", &width, 4) || !SET(job, "slots", &slots, 4) || !SET(job, "c", &c, 8) ||
        !SET(job, "gamma", &gamma, 8) || !SET(job, "eps", &eps, 8) ||
        !SET(job, "state", state, state_size) ||
        soren_job_param(job, "rows", rows, &err) != SOREN_OK) {
        status = fail(&err);
        goto done;
    }
    /* A step is two runs: the first two choose the first pair, each two
     * after move one and choose the next, and the run that finds nothing
     * to move changes nothing. */
    double t0 = now_s();
    soren_iteration how;
    const unsigned long long runs = o->max_steps < ULLONG_MAX / 2 - 1 ? 2 * o->max_steps + 2
                                                                       : ULLONG_MAX;
    if (soren_job_iterate(job, runs, &how, &err) != SOREN_OK) {
        status = fail(&err);
        goto done;
    }
    double seconds = now_s() - t0;
    const uint8_t *last = how.param; /* as the last run read it */
    const uint32_t high = chosen(state_bits(last, SVM_HIGH), n);
    const uint32_t low = chosen(state_bits(last, SVM_LOW_BOUND), n);
    const double b_high = high < n ? state_real(last, SVM_F + high) : 0;
    const double b_low = low < n ? state_real(last, SVM_F + low) : 0;
    /* the moves in the state the last run read: runs 3, 5, ... before it */
    unsigned long long steps = how.runs >= 2 ? (how.runs - 2) / 2 : 0;
    int converged = how.converged;
    char stopped[96] = "--max-steps reached";
    if (converged && high < n && low < n && !(b_low <= b_high + eps)) {
        /* the step changed nothing: the pair had no room to move */
        converged = 0;
        snprintf(stopped, sizeof stopped, "the pair (%u, %u) could not move", high, low);
    }
    /* The dual objective, 1/2 a'Qa - sum a, from f (f_i + y_i is row i of
     * Qa divided by y_i), as svm-train prints it. */
    size_t svs = 0, bounded = 0;
    double objective = 0;
    for (size_t i = 0; i < p.n; i++) {
        const double f = state_real(last, SVM_F + i);
        alpha[i] = state_real(last, SVM_F + p.n + i);
        svs += alpha[i] > 0;
        bounded += alpha[i] >= c;
        objective += alpha[i] * ((double)p.y[i] * (f + (double)p.y[i]) / 2 - 1);
    }
    model m = {.gamma = gamma, .rho = (b_high + b_low) / 2};
    if (model_write(o->args[1], &m, &p, alpha) != 0)
        goto done;
    printf("optimization finished, #iter = %llu%s%s%s\nobj = %f, rho = %f\n"
           "nSV = %zu, nBSV = %zu\nTotal nSV = %zu\n", steps,
           converged ? "" : " (not converged: ", converged ? "" : stopped, converged ? "" : ")",
           objective, m.rho, svs, bounded, svs);
    if (o->verbose)
        fprintf(stderr, "soren-svm: %zu points of %zu features read in %.3f s, C %g, gamma %g: "
                "%llu steps in %.3f s (%.1f us a step; %llu of the runs looped on the GPU), "
                "b_high %.6g, b_low %.6g; room for %llu kernel rows\n", p.n, p.d, reading, c,
                gamma, steps, seconds, steps ? seconds * 1e6 / (double)steps : 0.0,
                (unsigned long long)how.device_runs, b_high, b_low, rows_bytes / (16ull * n));
    status = converged ? 0 : 1;
done:
    soren_job_free(job);
    soren_close(plugin);
    free(state);
    free(alpha);
    points_free(&p);
    return status;
}

static int predict(const svm_cli *o)
{
    if (o->arg_count < 2 || o->arg_count > 3)
        return usage_error("predict takes TEST, MODEL and optionally OUTPUT");
    model m;
    const double start = now_s();
    if (model_read(o->args[1], &m) != 0)
        return 1;
    points t = {.labels = {m.labels[0], m.labels[1]}, .label_count = 2};
    if (points_read(o->args[0], &t, m.d) != 0) {
        model_free(&m);
        return 1;
    }
    const double reading = now_s() - start;
    /* The support vectors as columns of the test points' features, in
     * groups of eight (svmclassify.cu). */
    const uint32_t width = (uint32_t)t.width, tests = (uint32_t)t.n, svs = (uint32_t)m.svs;
    const uint32_t groups = (uint32_t)((m.svs + 7) / 8);
    float *sv = calloc(t.width * 8 * (size_t)groups, sizeof *sv);
    if (sv)
        sparse_rows_columns(&m.sv, sv, t.width, 8 * (size_t)groups);
    int64_t *decision = NULL;
    soren_error err;
    soren_error_clear(&err);
    soren_plugin *plugin = NULL;
    soren_job *job = NULL;
    int status = 1;
    if (!sv) {
        fprintf(stderr, "soren-svm: out of memory\n");
        goto done;
    }
    /* The largest power of two that keeps every sum within 2^62. */
    double total = 0;
    for (size_t i = 0; i < m.svs; i++)
        total += fabs(m.coef[i]);
    double scale = ldexp(1.0, 62 - (int)ceil(log2(total > 1 ? total : 1)) - 1);
    double t0 = now_s();
    if (open_job("svmclassify", o, &plugin, &job, &err) != 0 ||
        !SET_IN_PLACE(job, "sv", sv, t.width * 8 * groups * sizeof *sv) ||
        !SET_IN_PLACE(job, "coef", m.coef, m.svs * sizeof *m.coef) ||
        !SET_IN_PLACE(job, "z", t.x, t.n * t.width * sizeof *t.x) || !SET(job, "d", &width, 4) ||
        !SET(job, "tests", &tests, 4) || !SET(job, "svs", &svs, 4) ||
        !SET(job, "groups", &groups, 4) ||
        !SET(job, "gamma", &m.gamma, 8) || !SET(job, "scale", &scale, 8) ||
        soren_job_run(job, &err) != SOREN_OK) {
        status = fail(&err);
        goto done;
    }
    double seconds = now_s() - t0;
    soren_pairs out;
    soren_job_result(job, &out, &err);
    decision = calloc(t.n, sizeof *decision);
    if (!decision) {
        fprintf(stderr, "soren-svm: out of memory\n");
        goto done;
    }
    for (uint64_t k = 0; k < out.count; k++) {
        uint64_t key_size;
        uint32_t key;
        memcpy(&key, soren_pairs_key(&out, k, &key_size), sizeof key);
        memcpy(&decision[key], soren_pairs_value(&out, k), sizeof decision[key]);
    }
    FILE *f = o->arg_count == 3 ? fopen(o->args[2], "w") : NULL;
    if (o->arg_count == 3 && !f) {
        fprintf(stderr, "soren-svm: cannot write %s: %s\n", o->args[2], strerror(errno));
        goto done;
    }
    /* the two labels' lines, formatted once */
    char line[2][40];
    for (int l = 0; l < 2; l++)
        snprintf(line[l], sizeof line[l], "%g\n", m.labels[l]);
    size_t right = 0;
    for (size_t j = 0; j < t.n; j++) {
        int first = (double)decision[j] / scale - m.rho > 0;
        right += first == (t.y[j] > 0);
        if (f)
            fputs(line[!first], f);
    }
    if (f && fclose(f) != 0) {
        fprintf(stderr, "soren-svm: writing %s: %s\n", o->args[2], strerror(errno));
        goto done;
    }
    printf("Accuracy = %g%% (%zu/%zu) (classification)\n", 100.0 * (double)right / (double)t.n,
           right, t.n);
    if (o->verbose)
        fprintf(stderr, "soren-svm: %zu test points, %zu support vectors of %zu features: read "
                "in %.3f s, classified in %.3f s\n", t.n, m.svs, t.d, reading, seconds);
    status = 0;
done:
    soren_job_free(job);
    soren_close(plugin);
    free(sv);
    free(decision);
    points_free(&t);
    model_free(&m);
    return status;
}

/* Parses a number option's value; returns 0 when it is not a positive number. */
static int positive(const char *text, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno || !(v > 0) || isinf(v))
        return 0;
    *out = v;
    return 1;
}

int main(int argc, char **argv)
{
#ifdef M_TOP_PAD
    /* Reading a file, a dozen threads take and free megabytes of arrays
     * in a few milliseconds, and by default glibc gives the free memory at
     * a heap's top back to the kernel, for the next arrays to take again.
     * Keeping 64 MiB there took a usps classification through a resident
     * host from 14.3 to 11.5 ms (medians of 12 commands, a 16-core H200
     * host). */
    mallopt(M_TOP_PAD, 64 << 20);
#endif
    svm_cli o = {.c = 1, .gamma = 0, .eps = 1e-3, .max_steps = 10000000ull, .cache_mb = 1024,
                 .device = SOREN_DEVICE_AUTO, .engine = "auto"};
    char **args = calloc((size_t)argc, sizeof *args);
    const char *command = NULL;
    int count = 0, status = EXIT_USAGE;
    if (!args) {
        fprintf(stderr, "soren-svm: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage_text, stdout);
            status = 0;
            goto done;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            o.verbose = 1;
        } else if (strcmp(a, "-c") == 0 || strcmp(a, "-g") == 0 || strcmp(a, "-e") == 0) {
            double *dst = a[1] == 'c' ? &o.c : a[1] == 'g' ? &o.gamma : &o.eps;
            if (!v || !positive(v, dst)) {
                status = usage_error(a[1] == 'c'   ? "-c takes a cost above 0, e.g. -c 10"
                                     : a[1] == 'g' ? "-g takes a gamma above 0, e.g. -g 0.5"
                                                   : "-e takes a tolerance above 0, e.g. -e 0.001");
                goto done;
            }
            i++;
        } else if (strcmp(a, "-m") == 0) {
            char *end = NULL;
            o.cache_mb = v && *v >= '0' && *v <= '9' ? strtoull(v, &end, 10) : 0;
            if (!v || !end || *end || o.cache_mb > (1ull << 30)) {
                status = usage_error("-m takes the MiB kept for kernel rows, from 0 up, "
                                     "e.g. -m 1024");
                goto done;
            }
            i++;
        } else if (strcmp(a, "--max-steps") == 0) {
            char *end = NULL;
            o.max_steps = v ? strtoull(v, &end, 10) : 0;
            if (!v || *end || o.max_steps == 0) {
                status = usage_error("--max-steps takes a number of steps from 1 up");
                goto done;
            }
            i++;
        } else if (strcmp(a, "--engine") == 0) {
            if (!v) {
                status = usage_error("--engine takes auto, hash, block, direct, dense or sort");
                goto done;
            }
            o.engine = v; /* soren_job_new checks it */
            i++;
        } else if (strcmp(a, "--local") == 0) {
            o.local = 1;
        } else if (strcmp(a, "--socket") == 0) {
            if (!v || !*v) {
                status = usage_error("--socket takes the path of a resident host's socket");
                goto done;
            }
            o.socket = v;
            i++;
        } else if (strcmp(a, "--device") == 0) {
            if (v && strcmp(v, "auto") == 0)
                o.device = SOREN_DEVICE_AUTO;
            else if (v && strcmp(v, "cpu") == 0)
                o.device = SOREN_DEVICE_CPU;
            else if (v && strcmp(v, "gpu") == 0)
                o.device = SOREN_DEVICE_GPU;
            else {
                status = usage_error("--device takes auto, cpu or gpu");
                goto done;
            }
            i++;
        } else if (a[0] == '-' && a[1]) {
            char what[300];
            snprintf(what, sizeof what, "unknown option %s", a);
            status = usage_error(what);
            goto done;
        } else if (!command) {
            command = a;
        } else {
            args[count++] = argv[i];
        }
    }
    o.args = args;
    o.arg_count = count;
    if (!command)
        status = usage_error("no command given (train or predict)");
    else if (strcmp(command, "train") == 0)
        status = train(&o);
    else if (strcmp(command, "predict") == 0)
        status = predict(&o);
    else
        status = usage_error("unknown command (train or predict)");
done:
    free(args);
    return status;
}
