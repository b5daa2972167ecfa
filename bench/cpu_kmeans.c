/*
 * cpu_kmeans.c - the CPU baseline of the kmeans plugin, one step: plain C
 * and pthreads, no Soren.
 *
 *   cpu-kmeans [--threads N] K CENTROIDS POINTS
 *
 * POINTS holds 3-D float32 points (12 bytes each, a trailing partial point
 * ignored); CENTROIDS holds entries of 4 float64 (3 coordinate sums, then a
 * count), the first K of them read (soren-gen points --centroids K).  As
 * plugins/kmeans does: an entry that the file does not hold whole, or whose
 * count is not positive, is no centroid; each point goes to the nearest
 * centroid (sum / count) by squared distance summed j = 0, 1, 2 in double,
 * ties to the lower index.  Each thread sums its contiguous share of the
 * points per centroid, the main thread adds the threads' sums, and the
 * output is `soren-host run kmeans --device cpu`'s: "KEY\tVALUE" for
 * KEY = c * 4 + j (the 3 sums, then the count) of every centroid some point
 * chose, in key order, values as soren-host writes an f64.  The plugin's
 * coordinates from soren-gen are multiples of 1/8, so its sums are exact
 * in any order and tests/cpu-baselines.sh compares the two byte for byte.
 * (x86-64 without -mfma has no fused multiply-add, so each product is
 * rounded on its own, as the plugin's soren_mul is.)
 */
#include "cpu_baseline.h"

#include <inttypes.h>

#define DIMS 3
#define STRIDE (DIMS + 1)

typedef struct share {
    const uint8_t *points;
    uint64_t count;          /* points of this share */
    const double *centroids; /* k of them, STRIDE doubles each */
    const double *means;     /* k * DIMS: each centroid's sums / count */
    const int *live;         /* k: 1 for a centroid (count > 0) */
    uint64_t k;
    double *sums;            /* k * STRIDE, this share's */
} share;

static void *assign_share(void *arg)
{
    share *s = arg;
    const uint8_t *p = s->points;
    for (uint64_t i = 0; i < s->count; i++, p += DIMS * sizeof(float)) {
        float x[DIMS];
        memcpy(x, p, sizeof x);
        uint64_t best = s->k;
        double best_distance = 0;
        for (uint64_t c = 0; c < s->k; c++) {
            if (!s->live[c])
                continue;
            double distance = 0;
            for (int j = 0; j < DIMS; j++) {
                double d = (double)x[j] - s->means[c * DIMS + j];
                distance = distance + d * d;
            }
            if (best == s->k || distance < best_distance) {
                best = c;
                best_distance = distance;
            }
        }
        if (best == s->k)
            continue;
        double *sum = s->sums + best * STRIDE;
        for (int j = 0; j < DIMS; j++)
            sum[j] += x[j];
        sum[DIMS] += 1.0;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    static const char name[] = "cpu-kmeans";
    const char *args[3];
    long threads;
    baseline_args(argc, argv, name, "K CENTROIDS POINTS", 3, args, &threads);
    uint64_t want = baseline_u32(name, "K", args[0]);
    uint64_t csize, psize;
    const uint8_t *cbytes = baseline_map(name, args[1], &csize);
    const uint8_t *points = baseline_map(name, args[2], &psize);
    uint64_t k = csize / (STRIDE * sizeof(double));
    if (want < k)
        k = want;

    /* The centroids as the plugin reads them: count, then sum_j / count. */
    double *centroids = baseline_calloc(name, (size_t)k * STRIDE + 1, sizeof *centroids,
                                        "the centroids");
    double *means = baseline_calloc(name, (size_t)k * DIMS + 1, sizeof *means, "the centroids");
    int *live = baseline_calloc(name, (size_t)k + 1, sizeof *live, "the centroids");
    if (k)
        memcpy(centroids, cbytes, (size_t)k * STRIDE * sizeof *centroids);
    for (uint64_t c = 0; c < k; c++) {
        double count = centroids[c * STRIDE + DIMS];
        live[c] = count > 0;
        for (int j = 0; j < DIMS; j++)
            means[c * DIMS + j] = centroids[c * STRIDE + j] / count;
    }

    uint64_t n = psize / (DIMS * sizeof(float));
    share *shares = baseline_calloc(name, (size_t)threads, sizeof *shares, "the threads");
    for (long t = 0; t < threads; t++) {
        uint64_t first = n * (uint64_t)t / (uint64_t)threads;
        uint64_t last = n * (uint64_t)(t + 1) / (uint64_t)threads;
        shares[t] = (share){points + first * DIMS * sizeof(float), last - first, centroids,
                            means, live, k, NULL};
        shares[t].sums = baseline_calloc(name, (size_t)k * STRIDE + 1, sizeof(double),
                                         "the sums");
    }
    baseline_run(name, threads, assign_share, shares, sizeof *shares);

    for (uint64_t c = 0; c < k; c++) {
        double sum[STRIDE] = {0};
        for (long t = 0; t < threads; t++)
            for (int j = 0; j < STRIDE; j++)
                sum[j] += shares[t].sums[c * STRIDE + j];
        if (!(sum[DIMS] > 0))
            continue;
        for (int j = 0; j < STRIDE; j++) {
            printf("%" PRIu64 "\t", c * STRIDE + (uint64_t)j);
            baseline_print_float(sum[j], 0);
            putchar('\n');
        }
    }
    for (long t = 0; t < threads; t++)
        free(shares[t].sums);
    free(shares);
    free(centroids);
    free(means);
    free(live);
    baseline_unmap(points, psize);
    baseline_unmap(cbytes, csize);
    return baseline_done(name);
}
