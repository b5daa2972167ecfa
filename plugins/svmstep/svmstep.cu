/* svmstep: SMO training of a two-class soft-margin SVM with an RBF kernel,
 * with LibSVM's second-order working set selection (Fan, Chen and Lin,
 * 2005), as an iterative job: each run's output is written over its state
 * for the next (run --iterate, soren_job_iterate), so that on the GPU the
 * steps loop on the device.  A step is two runs, phase A then phase B.
 *
 * The state is 3n + 4 elements of 8 bytes: the choices (element 0 the
 * point i_high, 1 the point whose f is largest in I_low, 2 the point
 * i_low; each packed as below, SVM_START before the first, SVM_NONE where
 * none is), the phase (element 3: 0 A, 1 B), then each point's optimality
 * indicator f_i (float64; -y_i at the start), its weight alpha_i (float64;
 * 0 at the start), and the kernel row of i_high, K(x_high, x_i) (float64).
 * Task i (index input, n tasks):
 *
 *   A. moves the chosen pair as SMO moves it (every task makes the same
 *      arithmetic): alpha_low by y_low (b_high - b_low) / eta, eta = 2 -
 *      2 K(x_high, x_low), clipped to keep both in [0, C] and their
 *      weighted sum, then alpha_high; a weight within rounding of a bound
 *      is put on it.  Updates f_i' = f_i + d_high K(x_high, x_i) + d_low
 *      K(x_low, x_i), d = (new - old alpha) y, and emits it (key 4 + i),
 *      with its new weight where it is one of the pair (key 4 + n + i).
 *      Offers itself as i_high (key 0) when in I_up (y_i = +1 and alpha_i
 *      < C, or y_i = -1 and alpha_i > 0), the smallest f winning, and as
 *      the largest f of I_low (key 1; y_i = +1 and alpha_i > 0, or y_i =
 *      -1 and alpha_i < C).  The first run moves nothing; a move that
 *      changes nothing (no room) emits nothing.
 *   B. unless b_low <= b_high + eps (b_low the largest f of I_low: then
 *      it emits nothing, and a run whose output changes no byte of the
 *      state has converged), emits K(x_high, x_i) (key 4 + 2n + i) and,
 *      in I_low with f_i > b_high, offers itself as i_low (key 2) by the
 *      gain (f_i - b_high)^2 / (2 - 2 K(x_high, x_i)), the largest
 *      winning.
 *
 * K(a, b) = exp(-gamma |a - b|^2) in float64 with soren/exact.h (the same
 * bits on every engine), kept for later steps in the scratch parameter rows
 * where it has room (rows.h); combine max.  A packed choice is the top 40 bits
 * of the order-preserving bits of what it is chosen by, then the point's
 * index subtracted from 2^24 - 1, so that ties go to the lower index; the
 * next run reads the chosen points' f exactly from the state.  Task 0
 * offers SVM_NONE for every choice of its phase, below any point, and the
 * next phase (key 3). */
#include <soren/exact.h>
#include <soren/soren.h>
#include <string.h>

enum { SVM_X, SVM_Y, SVM_N, SVM_D, SVM_SLOTS, SVM_C, SVM_GAMMA, SVM_EPS, SVM_STATE, SVM_ROWS };

/* The state's elements: the choices, the phase, then three arrays of n. */
enum { SVM_HIGH, SVM_LOW_BOUND, SVM_LOW, SVM_PHASE, SVM_F };

#define SVM_START 0xffffffffffffffffull /* no choice made yet */
#define SVM_NONE 0ull                   /* no point to choose */
#define SVM_TAU 1e-12                   /* eta's floor, LibSVM's TAU */

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

SOREN_FN void svm_add_lanes(double part[SVM_LANES], const float *a, const float *b)
{
    for (int j = 0; j < SVM_LANES; j++) {
        double diff = (double)a[j] - (double)b[j];
        part[j] = part[j] + soren_mul(diff, diff);
    }
}

SOREN_FN double svm_kernel(const float *x, uint64_t d, uint64_t a, uint64_t b, double gamma)
{
    const float *xa = x + a * d, *xb = x + b * d;
    double part[SVM_LANES] = {0};
    uint64_t k = 0;
#if defined(__CUDA_ARCH__)
    /* A thread reads its point's row alone: 16-byte loads, four groups'
     * issued before the first is summed, keep more of the row in flight
     * (rows are 16-aligned where d is a multiple of 4). */
    if ((((uintptr_t)xa | (uintptr_t)xb) & 15) == 0) {
#pragma unroll 4
        for (; k + SVM_LANES <= d; k += SVM_LANES) {
            float4 ga[2] = {*(const float4 *)(xa + k), *(const float4 *)(xa + k + 4)};
            float4 gb[2] = {*(const float4 *)(xb + k), *(const float4 *)(xb + k + 4)};
            svm_add_lanes(part, (const float *)ga, (const float *)gb);
        }
    }
#endif
    for (; k + SVM_LANES <= d; k += SVM_LANES)
        svm_add_lanes(part, xa + k, xb + k);
    for (int j = 0; k < d; k++, j++) {
        double diff = (double)xa[k] - (double)xb[k];
        part[j] = part[j] + soren_mul(diff, diff);
    }
    double distance = 0;
    for (int j = 0; j < SVM_LANES; j++)
        distance = distance + part[j];
    return soren_exp(soren_mul(-gamma, distance));
}

/* the kept rows, which compute a row they do not find with svm_kernel */
#include "rows.h"

/* K(x_a, x_i), kept between steps where the scratch parameter rows has
 * room. */
SOREN_FN double svm_row(const soren_params *p, const float *x, uint64_t n, uint64_t d,
                        uint64_t a, uint64_t i, double gamma)
{
    svm_cached *rows = (svm_cached *)soren_scratch(p, SVM_ROWS);
    const uint64_t slots = soren_param_size(p, SVM_ROWS) / (sizeof *rows * n);
    if (slots == 0 || ((uintptr_t)rows & (sizeof *rows - 1)) != 0)
        return svm_kernel(x, d, a, i, gamma);
    return svm_rows_k(rows, slots, x, n, d, a, i, gamma);
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

/* A task's pairs, gathered and then emitted from one place: each emit is
 * the engine's whole emit path, inlined, and in each variant's kernel. */
typedef struct svm_out {
    uint32_t key[8];
    uint64_t value[8];
    int count;
} svm_out;

SOREN_FN void svm_put(svm_out *o, uint64_t key, uint64_t value)
{
    o->key[o->count] = (uint32_t)key;
    o->value[o->count++] = value;
}

/* The point a packed choice names; n for SVM_START and SVM_NONE. */
SOREN_FN uint64_t svm_chosen(uint64_t packed, uint64_t n)
{
    if (packed == SVM_START || packed == SVM_NONE)
        return n;
    uint64_t i = 0xffffffull - (packed & 0xffffff);
    return i < n ? i : n;
}

SOREN_FN int svm_in_up(float y, double alpha, double c)
{
    return (y > 0 && alpha < c) || (y < 0 && alpha > 0);
}

SOREN_FN int svm_in_low(float y, double alpha, double c)
{
    return (y > 0 && alpha > 0) || (y < 0 && alpha < c);
}

/* Phase A: the move, f, the next i_high and the largest f of I_low. */
SOREN_FN void svm_phase_move(svm_out *e, const soren_params *p, uint64_t i, uint64_t n,
                             uint64_t d)
{
    const float *x = (const float *)soren_param(p, SVM_X);
    const double gamma = svm_f64(p, SVM_GAMMA), c = svm_f64(p, SVM_C);
    const uint64_t alphas = SVM_F + n, row = SVM_F + 2 * n;
    double f = svm_real(p, SVM_F + i), alpha = svm_real(p, alphas + i);
    uint64_t high = n, low = n;
    double new_high = 0, new_low = 0;
    if (svm_element(p, SVM_HIGH) != SVM_START) {
        high = svm_chosen(svm_element(p, SVM_HIGH), n);
        low = svm_chosen(svm_element(p, SVM_LOW), n);
        if (high == n || low == n)
            return;
        const double b_high = svm_real(p, SVM_F + high), b_low = svm_real(p, SVM_F + low);
        double eta = 2.0 - soren_mul(2.0, svm_real(p, row + low));
        if (eta < SVM_TAU)
            eta = SVM_TAU;
        const double y_high = (double)svm_label(p, high), y_low = (double)svm_label(p, low);
        const double s = soren_mul(y_high, y_low);
        const double a_high = svm_real(p, alphas + high), a_low = svm_real(p, alphas + low);
        const double lo = s < 0 ? (a_low - a_high > 0 ? a_low - a_high : 0)
                                : (a_low + a_high - c > 0 ? a_low + a_high - c : 0);
        const double hi = s < 0 ? (c + a_low - a_high < c ? c + a_low - a_high : c)
                                : (a_low + a_high < c ? a_low + a_high : c);
        new_low = svm_snap(svm_clamp(a_low + soren_mul(y_low, (b_high - b_low) / eta), lo, hi),
                           c);
        new_high = svm_snap(svm_clamp(a_high + soren_mul(s, a_low - new_low), 0, c), c);
        const double d_high = soren_mul(new_high - a_high, y_high);
        const double d_low = soren_mul(new_low - a_low, y_low);
        if (d_high == 0 && d_low == 0)
            return; /* no room to move: the state stays */
        if (d_high != 0)
            f = f + soren_mul(d_high, svm_real(p, row + i));
        if (d_low != 0)
            f = f + soren_mul(d_low, svm_row(p, x, n, d, low, i, gamma));
    }
    uint64_t bits;
    memcpy(&bits, &f, sizeof bits);
    svm_put(e, SVM_F + i, bits);
    if (i == high || i == low) {
        alpha = i == high ? new_high : new_low;
        memcpy(&bits, &alpha, sizeof bits);
        svm_put(e, alphas + i, bits);
    }
    const float y = svm_label(p, i);
    const uint64_t ordered = svm_ordered(f);
    if (svm_in_up(y, alpha, c))
        svm_put(e, SVM_HIGH, svm_pack(~ordered, i));
    if (svm_in_low(y, alpha, c))
        svm_put(e, SVM_LOW_BOUND, svm_pack(ordered, i));
    if (i == 0) {
        svm_put(e, SVM_HIGH, SVM_NONE);
        svm_put(e, SVM_LOW_BOUND, SVM_NONE);
        svm_put(e, SVM_PHASE, 1);
    }
}

/* Phase B: the stopping rule, the row of i_high, and i_low by the gain. */
SOREN_FN void svm_phase_choose(svm_out *e, const soren_params *p, uint64_t i, uint64_t n,
                               uint64_t d)
{
    const uint64_t high = svm_chosen(svm_element(p, SVM_HIGH), n);
    const uint64_t bound = svm_chosen(svm_element(p, SVM_LOW_BOUND), n);
    if (high == n || bound == n)
        return; /* a set is empty: nothing left to move */
    const double b_high = svm_real(p, SVM_F + high);
    if (svm_real(p, SVM_F + bound) <= b_high + svm_f64(p, SVM_EPS))
        return; /* converged */
    const float *x = (const float *)soren_param(p, SVM_X);
    const double gamma = svm_f64(p, SVM_GAMMA), c = svm_f64(p, SVM_C);
    const double k = svm_row(p, x, n, d, high, i, gamma);
    uint64_t bits;
    memcpy(&bits, &k, sizeof bits);
    svm_put(e, SVM_F + 2 * n + i, bits);
    const double f = svm_real(p, SVM_F + i);
    if (svm_in_low(svm_label(p, i), svm_real(p, SVM_F + n + i), c) && f > b_high) {
        double a = 2.0 - soren_mul(2.0, k);
        if (a <= 0)
            a = SVM_TAU;
        const double gain = soren_mul(f - b_high, f - b_high) / a;
        svm_put(e, SVM_LOW, svm_pack(svm_ordered(gain), i));
    }
    if (i == 0) {
        svm_put(e, SVM_LOW, SVM_NONE);
        svm_put(e, SVM_PHASE, 0);
    }
}

SOREN_FN void svmstep_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    const uint64_t i = r->index, n = svm_u32(p, SVM_N), d = svm_u32(p, SVM_D);
    /* parameters too short for the task are no task at all */
    if (i >= n || n > 0xfffffeull || svm_u32(p, SVM_SLOTS) != 3 * n + 4 ||
        soren_param_size(p, SVM_X) < n * d * 4 || soren_param_size(p, SVM_Y) < n * 4 ||
        soren_param_size(p, SVM_STATE) < (3 * n + 4) * 8)
        return;
    svm_out out;
    out.count = 0;
    if (svm_element(p, SVM_PHASE) == 0)
        svm_phase_move(&out, p, i, n, d);
    else
        svm_phase_choose(&out, p, i, n, d);
    for (int q = 0; q < out.count; q++)
        soren_emit(e, &out.key[q], sizeof out.key[q], &out.value[q]);
}

SOREN_PLUGIN(svmstep, SOREN_STAGE(.map = svmstep_map, .combine = SOREN_MAX_U64,
                                  .key = SOREN_TYPE_INDEX))
