/*
 * svmclassify_ref.h - a classification case for the svmclassify job, and
 * its decision sums computed by a plain loop, independently of the job's
 * groups and columns.
 */
#ifndef SOREN_SVMCLASSIFY_REF_H
#define SOREN_SVMCLASSIFY_REF_H

#include <stddef.h>
#include <stdint.h>

/* Writes random support vectors (features in [-1, 1), given to the job as
 * columns in groups of eight), their weights (in [-10, 10)) and test
 * points from seed under dir, the run's --param arguments into params, and
 * into want the output the job must give: for each test point j,
 * "j<TAB>sum", sum the integers round(coef_i K(sv_i, z_j) scale) over
 * every support vector, each squared distance summed over the features in
 * order with soren/exact.h. */
void svmclassify_case(const char *dir, size_t svs, size_t tests, size_t d, uint64_t seed,
                      char *params, size_t params_size, const char *want);

#endif /* SOREN_SVMCLASSIFY_REF_H */
