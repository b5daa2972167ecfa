/*
 * kmeans_ref.h - k-means written independently of the kmeans plugin, the
 * reference its tests hold it to.
 */
#ifndef SOREN_KMEANS_REF_H
#define SOREN_KMEANS_REF_H

#include <stddef.h>

/* One k-means step as the kmeans job takes it: centroid c is
 * centroids[c * (dims + 1) + j] / its count (an entry of count 0 is none);
 * each point goes to the nearest by squared distance summed j = 0, 1, ...
 * in double, ties to the lower index; sums[] gets, per centroid, the sums
 * of its points' coordinates and their count. */
void kmeans_ref_step(const float *points, size_t n, size_t dims, const double *centroids,
                     size_t k, double *sums);

/* Steps from centroids (rewritten in place, in the same layout) until runs
 * steps or a step that changes nothing; a centroid no point chose keeps its
 * sums and count.  Leaves the last step's sums in sums and returns how many
 * steps ran. */
int kmeans_ref_run(const float *points, size_t n, size_t dims, double *centroids, size_t k,
                   int runs, double *sums);

#endif /* SOREN_KMEANS_REF_H */
