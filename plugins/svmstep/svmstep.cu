/* svmstep: one step of SMO training for a two-class soft-margin SVM with an
 * RBF kernel, as the MapReduce code-generation paper runs it (Keerthi's
 * first-order working set selection): a map that updates every point's
 * optimality indicator f_i after the last step moved two weights, and two
 * predicated reductions that find the next pair to move.  soren-svm drives
 * it step by step through libsoren (soren/host.h); each step is one run.
 *
 * Task i (index input, n tasks) reads point x_i (d float32), its label y_i
 * (float32, +1 or -1), its weight alpha_i and indicator f_i (float64), and
 * the last step: the points i_high and i_low whose weights moved, by
 * d_high = (new - old alpha_high) y_high and d_low likewise.  It computes
 *
 *   f_i' = f_i + d_high K(x_high, x_i) + d_low K(x_low, x_i),
 *   K(a, b) = exp(-gamma |a - b|^2)
 *
 * in float64 with soren/exact.h (the same bits on every engine), and emits,
 * all keyed by index (count_from slots = n + 2) and combined by max:
 *   key 2 + i   f_i' (its float64 bits, the only value of its key);
 *   key 0       when i is in I_up (y_i = +1 and alpha_i < C, or y_i = -1 and
 *               alpha_i > 0): f_i' packed so that the largest packed value
 *               is the smallest f (b_high, i_high);
 *   key 1       when i is in I_low (y_i = +1 and alpha_i > 0, or y_i = -1 and
 *               alpha_i < C): f_i' packed so that the largest is the largest
 *               f (b_low, i_low).
 * A packed value is the top 40 bits of f's order-preserving bits, then the
 * point's index subtracted from 2^24 - 1, so ties go to the lower index
 * (n is at most 2^24).  The 40 bits order f to 2^-28 of its size; the
 * caller reads the chosen points' f exactly from keys 2 + i. */
#include <soren/exact.h>
#include <soren/soren.h>
#include <string.h>

enum {
    SVM_X,      /* n x d float32, row-major */
    SVM_Y,      /* n float32 labels */
    SVM_ALPHA,  /* n float64 */
    SVM_F,      /* n float64 */
    SVM_N,      /* u32 */
    SVM_D,      /* u32 */
    SVM_SLOTS,  /* u32: n + 2, the key count */
    SVM_C,      /* f64 */
    SVM_GAMMA,  /* f64 */
    SVM_HIGH,   /* u32 i_high */
    SVM_LOW,    /* u32 i_low */
    SVM_D_HIGH, /* f64 */
    SVM_D_LOW   /* f64 */
};

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

/* Element i of a float64 array parameter (read with memcpy: parameters
 * given as bytes have no alignment promise). */
SOREN_FN double svm_at(const soren_params *p, uint32_t param, uint64_t i)
{
    double v;
    memcpy(&v, (const uint8_t *)soren_param(p, param) + 8 * i, sizeof v);
    return v;
}

/* K(x_a, x_b) = exp(-gamma |x_a - x_b|^2), summed over k = 0, 1, ... */
SOREN_FN double svm_kernel(const float *x, uint64_t d, uint64_t a, uint64_t b, double gamma)
{
    const float *xa = x + a * d, *xb = x + b * d;
    double distance = 0;
    for (uint64_t k = 0; k < d; k++) {
        double diff = (double)xa[k] - (double)xb[k];
        distance = distance + soren_mul(diff, diff);
    }
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

SOREN_FN void svmstep_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    uint64_t i = r->index, n = svm_u32(p, SVM_N), d = svm_u32(p, SVM_D);
    uint64_t high = svm_u32(p, SVM_HIGH), low = svm_u32(p, SVM_LOW);
    /* parameters too short for the task are no task at all */
    if (i >= n || high >= n || low >= n || n > 0xffffffull ||
        soren_param_size(p, SVM_X) < n * d * 4 || soren_param_size(p, SVM_Y) < n * 4 ||
        soren_param_size(p, SVM_ALPHA) < n * 8 || soren_param_size(p, SVM_F) < n * 8)
        return;
    const float *x = (const float *)soren_param(p, SVM_X);
    double gamma = svm_f64(p, SVM_GAMMA), c = svm_f64(p, SVM_C);
    double d_high = svm_f64(p, SVM_D_HIGH), d_low = svm_f64(p, SVM_D_LOW);
    double f = svm_at(p, SVM_F, i);
    if (d_high != 0)
        f = f + soren_mul(d_high, svm_kernel(x, d, high, i, gamma));
    if (d_low != 0)
        f = f + soren_mul(d_low, svm_kernel(x, d, low, i, gamma));
    float y;
    memcpy(&y, (const uint8_t *)soren_param(p, SVM_Y) + 4 * i, sizeof y);
    double alpha = svm_at(p, SVM_ALPHA, i);
    uint64_t bits;
    memcpy(&bits, &f, sizeof bits);
    uint32_t key = (uint32_t)(2 + i);
    soren_emit(e, &key, sizeof key, &bits);
    uint64_t ordered = svm_ordered(f);
    if ((y > 0 && alpha < c) || (y < 0 && alpha > 0)) {
        key = 0;
        uint64_t packed = svm_pack(~ordered, i);
        soren_emit(e, &key, sizeof key, &packed);
    }
    if ((y > 0 && alpha > 0) || (y < 0 && alpha < c)) {
        key = 1;
        uint64_t packed = svm_pack(ordered, i);
        soren_emit(e, &key, sizeof key, &packed);
    }
}

SOREN_PLUGIN(svmstep, SOREN_STAGE(.map = svmstep_map, .combine = SOREN_MAX_U64,
                                  .key = SOREN_TYPE_INDEX))
