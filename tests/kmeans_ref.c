#include "kmeans_ref.h"

#include <stdlib.h>
#include <string.h>

/* x86-64's baseline instruction set has no FMA, so the host compiler fuses
 * no product into a sum here, as the plugin rounds each operation on the
 * device; and the points are on soren-gen's grid, so the sums are exact:
 * the reference does not depend on the order of the additions. */
void kmeans_ref_step(const float *points, size_t n, size_t dims, const double *centroids,
                     size_t k, double *sums)
{
    size_t stride = dims + 1;
    memset(sums, 0, k * stride * sizeof *sums);
    for (size_t i = 0; i < n; i++) {
        const float *x = points + i * dims;
        size_t best = k;
        double best_distance = 0;
        for (size_t c = 0; c < k; c++) {
            const double *m = centroids + c * stride;
            if (!(m[dims] > 0))
                continue;
            double distance = 0;
            for (size_t j = 0; j < dims; j++) {
                double d = (double)x[j] - m[j] / m[dims];
                distance += d * d;
            }
            if (best == k || distance < best_distance) {
                best = c;
                best_distance = distance;
            }
        }
        if (best == k)
            continue;
        for (size_t j = 0; j < dims; j++)
            sums[best * stride + j] += x[j];
        sums[best * stride + dims] += 1;
    }
}

int kmeans_ref_run(const float *points, size_t n, size_t dims, double *centroids, size_t k,
                   int runs, double *sums)
{
    size_t stride = dims + 1;
    int run = 1;
    for (;; run++) {
        kmeans_ref_step(points, n, dims, centroids, k, sums);
        int changed = 0;
        for (size_t c = 0; c < k; c++)
            if (sums[c * stride + dims] > 0 &&
                memcmp(&centroids[c * stride], &sums[c * stride], stride * sizeof *sums) != 0) {
                memcpy(&centroids[c * stride], &sums[c * stride], stride * sizeof *sums);
                changed = 1;
            }
        if (!changed || run == runs)
            return run;
    }
}
