/* svmstep: SMO training of a two-class soft-margin SVM with an RBF kernel,
 * as the MapReduce code-generation paper runs it (Keerthi's first-order
 * working set selection), one step a run of an iterative job: each run's
 * output is written over its state for the next (run --iterate,
 * soren_job_iterate), so that on the GPU the steps loop on the device.
 *
 * The state is 2n + 2 elements of 8 bytes: the chosen pair as two packed
 * choices (element 0 for i_high, 1 for i_low; SVM_START before the first
 * run, SVM_NONE where a set was empty), then every point's optimality
 * indicator f_i (float64; -y_i at the start), then its weight alpha_i
 * (float64; 0 at the start).  Task i (index input, n tasks) reads it and:
 *
 *   1. moves the chosen pair as SMO moves it (every task makes the same
 *      arithmetic, so each knows the change): alpha_low by y_low (b_high -
 *      b_low) / eta, eta = 2 - 2 K(x_high, x_low), clipped to keep both in
 *      [0, C] and their weighted sum, then alpha_high; a weight within
 *      rounding of a bound is put on it.  Unless b_low <= b_high + eps:
 *      then the task emits nothing, and a run whose output changes no byte
 *      of the state has converged.
 *   2. updates f_i' = f_i + d_high K(x_high, x_i) + d_low K(x_low, x_i),
 *      d = (new - old alpha) y, K(a, b) = exp(-gamma |a - b|^2), in float64
 *      with soren/exact.h (the same bits on every engine), and emits it
 *      (key 2 + i), with its new weight where it is one of the pair (key
 *      2 + n + i);
 *   3. offers itself for the next pair (combine max): key 0 when i is in
 *      I_up (y_i = +1 and alpha_i < C, or y_i = -1 and alpha_i > 0), its
 *      f packed so that the largest packed value is the smallest f
 *      (b_high); key 1 when in I_low (y_i = +1 and alpha_i > 0, or y_i = -1
 *      and alpha_i < C), packed so that the largest is the largest f
 *      (b_low).  Task 0 offers SVM_NONE for both, below any point, which
 *      a run chooses where a set is empty.
 * A packed value is the top 40 bits of f's order-preserving bits, then the
 * point's index subtracted from 2^24 - 1, so ties go to the lower index;
 * the next run reads the chosen points' f exactly from the state. */
#include <soren/exact.h>
#include <soren/soren.h>
#include <string.h>

enum { SVM_X, SVM_Y, SVM_N, SVM_D, SVM_SLOTS, SVM_C, SVM_GAMMA, SVM_EPS, SVM_STATE };

#define SVM_START 0xffffffffffffffffull /* no pair chosen yet */
#define SVM_NONE 0ull                   /* no point in the set */

SOREN_FN uint32_t svm_u32(const soren_params *p, uint32_t i)
{
    const uint32_t *v = (const uint32_t *)soren_param(p, i);
    return v ? *v : 0;
}

SOREN_FN double svm_f64(const soren_params *p, uint32_t i)
{
    const double *v = (const double *)soren_param(p, i);
    return v ? *v : 0;
}

/* Element e of the state (read with memcpy: parameters given as bytes have
 * no alignment promise). */
SOREN_FN uint64_t svm_element(const soren_params *p, uint64_t e)
{
    uint64_t v;
    memcpy(&v, (const uint8_t *)soren_param(p, SVM_STATE) + 8 * e, sizeof v);
    return v;
}

SOREN_FN double svm_real(const soren_params *p, uint64_t e)
{
    uint64_t bits = svm_element(p, e);
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

SOREN_FN float svm_label(const soren_params *p, uint64_t i)
{
    float y;
    memcpy(&y, (const uint8_t *)soren_param(p, SVM_Y) + 4 * i, sizeof y);
    return y;
}

/* K(x_a, x_b) = exp(-gamma |x_a - x_b|^2).  The squared distance is summed
 * in SVM_LANES parts, part j over k = j, j + SVM_LANES, ... in order, and
 * the parts then added in order: the same bits on every engine, and on the
 * GPU, where a step has one thread a point, independent additions that do
 * not each wait for the last one and its loads. */
#define SVM_LANES 8

SOREN_FN double svm_kernel(const float *x, uint64_t d, uint64_t a, uint64_t b, double gamma)
{
    const float *xa = x + a * d, *xb = x + b * d;
    double part[SVM_LANES] = {0};
    uint64_t k = 0;
    for (; k + SVM_LANES <= d; k += SVM_LANES)
        for (int j = 0; j < SVM_LANES; j++) {
            double diff = (double)xa[k + j] - (double)xb[k + j];
            part[j] = part[j] + soren_mul(diff, diff);
        }
    for (int j = 0; k < d; k++, j++) {
        double diff = (double)xa[k] - (double)xb[k];
        part[j] = part[j] + soren_mul(diff, diff);
    }
    double distance = 0;
    for (int j = 0; j < SVM_LANES; j++)
        distance = distance + part[j];
    return soren_exp(soren_mul(-gamma, distance));
}

/* f's bits, ordered as f is (IEEE total order): negative numbers reversed. */
SOREN_FN uint64_t svm_ordered(double f)
{
    uint64_t b;
    memcpy(&b, &f, sizeof b);
    return (b >> 63) ? ~b : b | (1ull << 63);
}

SOREN_FN uint64_t svm_pack(uint64_t ordered, uint64_t i)
{
    return (ordered & ~0xffffffull) | (0xffffffull - i);
}

SOREN_FN double svm_clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* A weight clipped to a bound lies on it: what the arithmetic leaves within
 * rounding of 0 or C is 0 or C (a residue of 1e-17 would keep a point in
 * I_up or I_low that has no room to move, and stall the solver). */
SOREN_FN double svm_snap(double alpha, double c)
{
    double tiny = soren_mul(1e-12, c);
    return alpha <= tiny ? 0 : alpha >= c - tiny ? c : alpha;
}

SOREN_FN void svm_emit(soren_emitter *e, uint64_t key, uint64_t value)
{
    uint32_t k = (uint32_t)key;
    soren_emit(e, &k, sizeof k, &value);
}

SOREN_FN void svmstep_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    const uint64_t i = r->index, n = svm_u32(p, SVM_N), d = svm_u32(p, SVM_D);
    /* parameters too short for the task are no task at all */
    if (i >= n || n > 0xfffffeull || svm_u32(p, SVM_SLOTS) != 2 * n + 2 ||
        soren_param_size(p, SVM_X) < n * d * 4 || soren_param_size(p, SVM_Y) < n * 4 ||
        soren_param_size(p, SVM_STATE) < (2 * n + 2) * 8)
        return;
    const float *x = (const float *)soren_param(p, SVM_X);
    const double gamma = svm_f64(p, SVM_GAMMA), c = svm_f64(p, SVM_C);
    const uint64_t chose_high = svm_element(p, 0), chose_low = svm_element(p, 1);
    uint64_t high = n, low = n; /* none: the first run moves nothing */
    double d_high = 0, d_low = 0, new_high = 0, new_low = 0;
    if (chose_high != SVM_START) {
        if (chose_high == SVM_NONE || chose_low == SVM_NONE)
            return; /* a set is empty: nothing left to move */
        high = 0xffffffull - (chose_high & 0xffffff);
        low = 0xffffffull - (chose_low & 0xffffff);
        if (high >= n || low >= n)
            return;
        const double b_high = svm_real(p, 2 + high), b_low = svm_real(p, 2 + low);
        if (b_low <= b_high + svm_f64(p, SVM_EPS))
            return; /* converged */
        double eta = 2.0 - soren_mul(2.0, svm_kernel(x, d, high, low, gamma));
        if (eta < 1e-12)
            eta = 1e-12;
        const double y_high = (double)svm_label(p, high), y_low = (double)svm_label(p, low);
        const double s = soren_mul(y_high, y_low);
        const double a_high = svm_real(p, 2 + n + high), a_low = svm_real(p, 2 + n + low);
        const double lo = s < 0 ? (a_low - a_high > 0 ? a_low - a_high : 0)
                                : (a_low + a_high - c > 0 ? a_low + a_high - c : 0);
        const double hi = s < 0 ? (c + a_low - a_high < c ? c + a_low - a_high : c)
                                : (a_low + a_high < c ? a_low + a_high : c);
        new_low = svm_snap(svm_clamp(a_low + soren_mul(y_low, (b_high - b_low) / eta), lo, hi),
                           c);
        new_high = svm_snap(svm_clamp(a_high + soren_mul(s, a_low - new_low), 0, c), c);
        d_high = soren_mul(new_high - a_high, y_high);
        d_low = soren_mul(new_low - a_low, y_low);
    }
    double f = svm_real(p, 2 + i), alpha = svm_real(p, 2 + n + i);
    if (d_high != 0)
        f = f + soren_mul(d_high, svm_kernel(x, d, high, i, gamma));
    if (d_low != 0)
        f = f + soren_mul(d_low, svm_kernel(x, d, low, i, gamma));
    uint64_t bits;
    memcpy(&bits, &f, sizeof bits);
    svm_emit(e, 2 + i, bits);
    if (i == high || i == low) {
        alpha = i == high ? new_high : new_low;
        memcpy(&bits, &alpha, sizeof bits);
        svm_emit(e, 2 + n + i, bits);
    }
    const float y = svm_label(p, i);
    const uint64_t ordered = svm_ordered(f);
    const int up = (y > 0 && alpha < c) || (y < 0 && alpha > 0);
    const int down = (y > 0 && alpha > 0) || (y < 0 && alpha < c);
    if (up)
        svm_emit(e, 0, svm_pack(~ordered, i));
    if (down)
        svm_emit(e, 1, svm_pack(ordered, i));
    if (i == 0) { /* the choices a run makes where a set is empty */
        svm_emit(e, 0, SVM_NONE);
        svm_emit(e, 1, SVM_NONE);
    }
}

SOREN_PLUGIN(svmstep, SOREN_STAGE(.map = svmstep_map, .combine = SOREN_MAX_U64,
                                  .key = SOREN_TYPE_INDEX))
