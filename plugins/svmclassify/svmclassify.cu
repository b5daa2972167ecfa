/* svmclassify: the decision values of a two-class RBF SVM, as the MapReduce
 * code-generation paper classifies: a map completes kernel evaluations
 * between support vectors and a test point and weighs them, and a sum per
 * test point reduces them.  soren-svm predict drives it (soren/host.h).
 *
 * The support vectors come as columns: feature k of support vector i at
 * sv[k * 8 * groups + i], groups = ceil(svs / 8), zeros past svs.  Task t
 * (index input, tests x groups tasks) pairs test point j = t / groups with
 * the eight support vectors i = 8g .. 8g + 7, g = t % groups, and emits
 * (j, the sum of coef_i K(sv_i, z_j) over those below svs), with K(a, b) =
 * exp(-gamma |a - b|^2) computed in float64 with soren/exact.h, each
 * squared distance summed over k in order, and coef_i = alpha_i y_i.  On
 * the GPU the lanes of a warp are consecutive groups of one test point, so
 * a warp reads a feature of 256 support vectors in one kilobyte and the
 * test point's feature once for them all; each thread keeps eight
 * distances, so it reads the test point once for eight kernels.
 *
 * The values are summed as integers: each is rounded to a multiple of
 * 1 / scale (soren-svm picks the largest power of two that keeps any sum
 * within 2^62), so every engine and every order of the additions gives the
 * same sum; j's decision value is sum / scale - rho. */
#include <soren/exact.h>
#include <soren/soren.h>
#include <string.h>

enum { SVC_SV, SVC_COEF, SVC_Z, SVC_D, SVC_TESTS, SVC_SVS, SVC_GROUPS, SVC_GAMMA, SVC_SCALE };

#define SVC_GROUP 8 /* support vectors a task */

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

/* distance[s] += (column[s] - z)^2 for the group's eight support vectors. */
SOREN_FN void svc_add_feature(double distance[SVC_GROUP], const float *column, float z)
{
    float sv[SVC_GROUP];
#if defined(__CUDA_ARCH__)
    if (((uintptr_t)column & 15) == 0) {
        *(float4 *)sv = *(const float4 *)column;
        *(float4 *)(sv + 4) = *(const float4 *)(column + 4);
    } else
#endif
        memcpy(sv, column, sizeof sv);
    for (int s = 0; s < SVC_GROUP; s++) {
        double diff = (double)sv[s] - (double)z;
        distance[s] = distance[s] + soren_mul(diff, diff);
    }
}

SOREN_FN void svmclassify_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    const uint64_t svs = svc_u32(p, SVC_SVS), tests = svc_u32(p, SVC_TESTS);
    const uint64_t d = svc_u32(p, SVC_D), groups = svc_u32(p, SVC_GROUPS);
    const uint64_t stride = SVC_GROUP * groups;
    /* parameters too short for the task are no task at all */
    if (svs == 0 || groups != (svs + SVC_GROUP - 1) / SVC_GROUP ||
        r->index >= groups * tests || soren_param_size(p, SVC_SV) < stride * d * 4 ||
        soren_param_size(p, SVC_COEF) < svs * 8 || soren_param_size(p, SVC_Z) < tests * d * 4)
        return;
    const uint64_t j = r->index / groups, first = r->index % groups * SVC_GROUP;
    const float *column = (const float *)soren_param(p, SVC_SV) + first;
    const float *z = (const float *)soren_param(p, SVC_Z) + j * d;
    double distance[SVC_GROUP] = {0};
    for (uint64_t k = 0; k < d; k++)
        svc_add_feature(distance, column + k * stride, z[k]);
    const double gamma = svc_f64(p, SVC_GAMMA), scale = svc_f64(p, SVC_SCALE);
    const uint8_t *coefs = (const uint8_t *)soren_param(p, SVC_COEF);
    int64_t sum = 0;
    for (uint64_t s = 0; s < SVC_GROUP && first + s < svs; s++) {
        double coef;
        memcpy(&coef, coefs + 8 * (first + s), sizeof coef);
        const double kernel = soren_exp(soren_mul(-gamma, distance[s]));
        const double v = soren_mul(soren_mul(coef, kernel), scale);
        sum += (int64_t)(v < 0 ? v - 0.5 : v + 0.5);
    }
    uint32_t key = (uint32_t)j;
    soren_emit(e, &key, sizeof key, &sum);
}

SOREN_PLUGIN(svmclassify, SOREN_STAGE(.map = svmclassify_map, .combine = SOREN_SUM_I64,
                                      .key = SOREN_TYPE_INDEX))
