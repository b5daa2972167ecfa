/* svmclassify: the decision values of a two-class RBF SVM, as the MapReduce
 * code-generation paper classifies: a map completes each kernel evaluation
 * between a support vector and a test point and weighs it, and a sum per
 * test point reduces them.  soren-svm predict drives it (soren/host.h).
 *
 * Task t (index input, tests x svs tasks) pairs test point j = t / svs with
 * support vector i = t % svs and emits (j, coef_i K(sv_i, z_j)) with
 * K(a, b) = exp(-gamma |a - b|^2) computed in float64 with soren/exact.h,
 * and coef_i = alpha_i y_i.  The values are summed as integers: each is
 * rounded to a multiple of 1 / scale (soren-svm picks the largest power of
 * two that keeps any sum within 2^62), so every engine and every order of
 * the additions gives the same sum; j's decision value is sum / scale - rho. */
#include <soren/exact.h>
#include <soren/soren.h>
#include <string.h>

enum { SVC_SV, SVC_COEF, SVC_Z, SVC_D, SVC_TESTS, SVC_SVS, SVC_GAMMA, SVC_SCALE };

SOREN_FN uint32_t svc_u32(const soren_params *p, uint32_t i)
{
    const uint32_t *v = (const uint32_t *)soren_param(p, i);
    return v ? *v : 0;
}

SOREN_FN double svc_f64(const soren_params *p, uint32_t i)
{
    const double *v = (const double *)soren_param(p, i);
    return v ? *v : 0;
}

SOREN_FN void svmclassify_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    uint64_t svs = svc_u32(p, SVC_SVS), tests = svc_u32(p, SVC_TESTS), d = svc_u32(p, SVC_D);
    if (svs == 0 || r->index >= svs * tests || soren_param_size(p, SVC_SV) < svs * d * 4 ||
        soren_param_size(p, SVC_COEF) < svs * 8 || soren_param_size(p, SVC_Z) < tests * d * 4)
        return;
    uint64_t j = r->index / svs, i = r->index % svs;
    const float *sv = (const float *)soren_param(p, SVC_SV) + i * d;
    const float *z = (const float *)soren_param(p, SVC_Z) + j * d;
    double distance = 0;
    for (uint64_t k = 0; k < d; k++) {
        double diff = (double)sv[k] - (double)z[k];
        distance = distance + soren_mul(diff, diff);
    }
    double coef;
    memcpy(&coef, (const uint8_t *)soren_param(p, SVC_COEF) + 8 * i, sizeof coef);
    double v = soren_mul(soren_mul(coef, soren_exp(soren_mul(-svc_f64(p, SVC_GAMMA), distance))),
                         svc_f64(p, SVC_SCALE));
    int64_t fixed = (int64_t)(v < 0 ? v - 0.5 : v + 0.5);
    uint32_t key = (uint32_t)j;
    soren_emit(e, &key, sizeof key, &fixed);
}

SOREN_PLUGIN(svmclassify, SOREN_STAGE(.map = svmclassify_map, .combine = SOREN_SUM_I64,
                                      .key = SOREN_TYPE_INDEX))
