/* kmeans: one iteration of K-means (not one of the papers' benchmarks);
 * `soren-host run kmeans --iterate N` runs it until the centroids stop
 * moving.  Each record is a
 * point of float32 coordinates (record_size / 4 of them: the manifest says
 * 3).  The centroids parameter holds k entries of dims + 1 float64 in the
 * output's layout: the sums of each coordinate over the centroid's points,
 * then their count, so centroid c is at sum_j / count (soren-gen points
 * --centroids K starts them at the first K points, count 1).  An entry whose
 * count is not positive, or that the parameter does not hold whole, is no
 * centroid.  Map finds the nearest centroid c by squared Euclidean distance,
 * ties to the lower index, and emits (c * (dims + 1) + j, coordinate j) for
 * each j and (c * (dims + 1) + dims, 1); the sum combine turns them into the
 * next centroids' sums and counts.  The keys are index keys, fewer than k
 * times 4 (the manifest's dims + 1), so that the engines fold them into
 * arrays rather than hash them.
 *
 * Each distance is summed j = 0, 1, ... in double, each product rounded on
 * its own (soren/exact.h): nvcc would fuse a product and a sum into one FMA
 * on the device, which the host does not, and a centroid chosen
 * differently would change the output.  soren-gen's coordinates are
 * multiples of 1/8, so the sums are exact whatever order the engines add
 * them in, and every engine writes the same bytes. */
#include <soren/exact.h>
#include <soren/soren.h>
#include <string.h>

enum { KMEANS_K, KMEANS_CENTROIDS };

/* Coordinate j of the point (records need not be 4-byte aligned). */
SOREN_FN double kmeans_coordinate(const soren_record *r, uint32_t j)
{
    float x;
    memcpy(&x, r->data + 4 * (uint64_t)j, sizeof x);
    return x;
}

/* The centroids the parameter holds whole, at most k, and so few that
 * every key c * stride + j fits the u32 keys. */
SOREN_FN uint64_t kmeans_count(const soren_params *p, uint64_t stride)
{
    const uint32_t *k = (const uint32_t *)soren_param(p, KMEANS_K);
    uint64_t n = soren_param_size(p, KMEANS_CENTROIDS) / (stride * sizeof(double));
    if (k && *k < n)
        n = *k;
    return n < UINT32_MAX / stride ? n : UINT32_MAX / stride;
}

SOREN_FN void kmeans_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    uint32_t dims = (uint32_t)(r->size / sizeof(float));
    uint64_t stride = (uint64_t)dims + 1, k = kmeans_count(p, stride), best = k;
    const double *centroids = (const double *)soren_param(p, KMEANS_CENTROIDS);
    double best_distance = 0;
    for (uint64_t c = 0; c < k; c++) {
        const double *m = centroids + c * stride;
        double count = m[dims];
        if (!(count > 0))
            continue;
        double distance = 0;
        for (uint32_t j = 0; j < dims; j++) {
            double d = kmeans_coordinate(r, j) - m[j] / count;
            distance = distance + soren_mul(d, d);
        }
        if (best == k || distance < best_distance) {
            best = c;
            best_distance = distance;
        }
    }
    if (best == k)
        return;
    uint32_t key = (uint32_t)(best * stride);
    for (uint32_t j = 0; j < dims; j++, key++) {
        double x = kmeans_coordinate(r, j);
        soren_emit(e, &key, sizeof key, &x);
    }
    const double one = 1.0;
    soren_emit(e, &key, sizeof key, &one);
}

SOREN_PLUGIN(kmeans, SOREN_STAGE(.map = kmeans_map, .combine = SOREN_SUM_F64,
                                 .key = SOREN_TYPE_INDEX))
