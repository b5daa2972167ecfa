#include "svmclassify_ref.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <soren/exact.h>

#include "testutil.h"

void svmclassify_case(const char *dir, size_t svs, size_t tests, size_t d, uint64_t seed,
                      char *params, size_t params_size, const char *want)
{
    const size_t groups = (svs + 7) / 8, stride = 8 * groups;
    const double gamma = 0.37;
    float *sv = malloc(svs * d * sizeof *sv), *z = malloc(tests * d * sizeof *z);
    float *columns = calloc(d * stride, sizeof *columns);
    double *coef = malloc(svs * sizeof *coef);
    cr_assert(sv && z && columns && coef);
    double total = 0;
    for (size_t i = 0; i < svs; i++) {
        for (size_t k = 0; k < d; k++)
            columns[k * stride + i] = sv[i * d + k] = tu_rand_float(&seed);
        coef[i] = (double)(tu_rand(&seed) >> 11) / 9007199254740992.0 * 20 - 10;
        total += fabs(coef[i]);
    }
    for (size_t j = 0; j < tests * d; j++)
        z[j] = tu_rand_float(&seed);
    /* soren-svm's scale: the largest power of two that keeps a sum within 2^62 */
    const double scale = ldexp(1.0, 62 - (int)ceil(log2(total > 1 ? total : 1)) - 1);

    FILE *f = fopen(want, "w");
    cr_assert_not_null(f, "cannot write %s", want);
    for (size_t j = 0; j < tests; j++) {
        int64_t sum = 0;
        for (size_t i = 0; i < svs; i++) {
            double distance = 0;
            for (size_t k = 0; k < d; k++) {
                const double diff = (double)sv[i * d + k] - (double)z[j * d + k];
                distance = distance + soren_mul(diff, diff);
            }
            const double v =
                soren_mul(soren_mul(coef[i], soren_exp(soren_mul(-gamma, distance))), scale);
            sum += (int64_t)(v < 0 ? v - 0.5 : v + 0.5);
        }
        fprintf(f, "%zu\t%lld\n", j, (long long)sum);
    }
    fclose(f);

    char path[3][4096];
    snprintf(path[0], sizeof path[0], "%s/svc-sv.bin", dir);
    snprintf(path[1], sizeof path[1], "%s/svc-coef.bin", dir);
    snprintf(path[2], sizeof path[2], "%s/svc-z.bin", dir);
    tu_write(path[0], columns, d * stride * sizeof *columns);
    tu_write(path[1], coef, svs * sizeof *coef);
    tu_write(path[2], z, tests * d * sizeof *z);
    snprintf(params, params_size,
             "--param 'sv=@%s' --param 'coef=@%s' --param 'z=@%s' --param d=%zu "
             "--param tests=%zu --param svs=%zu --param groups=%zu --param gamma=%.17g "
             "--param scale=%.17g",
             path[0], path[1], path[2], d, tests, svs, groups, gamma, scale);
    free(sv);
    free(z);
    free(columns);
    free(coef);
}
