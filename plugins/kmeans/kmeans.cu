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
#include <stdlib.h>
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

/* The nearest centroid to point r among the first k, or k where none has
 * points.  Entry c is at centroids + c * (dims + 1), its count last: its
 * coordinate sums, divided by the count here (the parameter's layout), or,
 * where divided, the quotients already (kmeans_map_run's, the same bits). */
SOREN_FN uint64_t kmeans_nearest(const soren_record *r, uint32_t dims, uint64_t k,
                                 const double *centroids, bool divided)
{
    uint64_t stride = (uint64_t)dims + 1, best = k;
    double best_distance = 0;
    for (uint64_t c = 0; c < k; c++) {
        const double *m = centroids + c * stride;
        double count = m[dims];
        if (!(count > 0))
            continue;
        double distance = 0;
        for (uint32_t j = 0; j < dims; j++) {
            double d = kmeans_coordinate(r, j) - (divided ? m[j] : m[j] / count);
            distance = distance + soren_mul(d, d);
        }
        if (best == k || distance < best_distance) {
            best = c;
            best_distance = distance;
        }
    }
    return best;
}

/* Point r's pairs for its centroid c: each coordinate, then a count of 1. */
SOREN_FN void kmeans_emit(soren_emitter *e, const soren_record *r, uint32_t dims, uint64_t c)
{
    uint32_t key = (uint32_t)(c * ((uint64_t)dims + 1));
    for (uint32_t j = 0; j < dims; j++, key++) {
        double x = kmeans_coordinate(r, j);
        soren_emit(e, &key, sizeof key, &x);
    }
    const double one = 1.0;
    soren_emit(e, &key, sizeof key, &one);
}

SOREN_FN void kmeans_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    uint32_t dims = (uint32_t)(r->size / sizeof(float));
    uint64_t k = kmeans_count(p, (uint64_t)dims + 1);
    const double *centroids = (const double *)soren_param(p, KMEANS_CENTROIDS);
    uint64_t c = kmeans_nearest(r, dims, k, centroids, false);
    if (c < k)
        kmeans_emit(e, r, dims, c);
}

/* The run's points against the centroids, divided or not (inlined: the
 * manifest's 3 dims are then a constant). */
static __forceinline__ void kmeans_run_points(soren_emitter *e, const soren_record_run *run,
                                              uint32_t dims, uint64_t k,
                                              const double *centroids, bool divided)
{
    for (uint64_t i = 0; i < run->count; i++) {
        const soren_record r = {run->data + i * run->size, run->size, run->offset + i * run->size,
                                run->index + i};
        uint64_t c = kmeans_nearest(&r, dims, k, centroids, divided);
        if (c < k)
            kmeans_emit(e, &r, dims, c);
    }
}

/* The CPU engine's map of a run of points: every centroid's sums divided
 * by its count once, not once a point (where memory for the quotients is
 * short, divided for each point as kmeans_map does). */
static void kmeans_map_run(soren_emitter *e, const soren_record_run *run, const soren_params *p)
{
    uint32_t dims = (uint32_t)(run->size / sizeof(float));
    uint64_t stride = (uint64_t)dims + 1, k = kmeans_count(p, stride);
    const double *centroids = (const double *)soren_param(p, KMEANS_CENTROIDS);
    double *divided = (double *)malloc((k ? k : 1) * stride * sizeof *divided);
    for (uint64_t c = 0; divided && c < k; c++) {
        const double *m = centroids + c * stride;
        for (uint32_t j = 0; j < dims; j++)
            divided[c * stride + j] = m[dims] > 0 ? m[j] / m[dims] : 0;
        divided[c * stride + dims] = m[dims];
    }
    if (divided && dims == 3)
        kmeans_run_points(e, run, 3, k, divided, true);
    else if (divided)
        kmeans_run_points(e, run, dims, k, divided, true);
    else
        kmeans_run_points(e, run, dims, k, centroids, false);
    free(divided);
}

SOREN_PLUGIN(kmeans, SOREN_STAGE(.map = kmeans_map, .combine = SOREN_SUM_F64,
                                 .key = SOREN_TYPE_INDEX, .map_run = kmeans_map_run))
