/*
 * libsvm_text.h - the rows of LibSVM's text format ("LABEL INDEX:VALUE ...",
 * indices from 1 and increasing), as soren-svm reads training sets, test
 * sets and a model's support vectors.
 *
 * A file is mapped (read whole where it is not a regular file), cut at line
 * ends into parts, one for each CPU the process may use, and each part is
 * parsed by a thread of its own, of threads kept for the process's later
 * files and passes: a test set of a few megabytes is most of what a
 * classification costs beside the run.  The rows come back in the
 * file's order, and a bad line is reported as the first bad line of the
 * file, whichever thread met it.
 */
#ifndef SOREN_CLI_LIBSVM_TEXT_H
#define SOREN_CLI_LIBSVM_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Rows as the file lists them: n labels (or a support vector's
 * coefficients), in the file's order, and their entries, held in the
 * parts that threads read; d is the largest index. */
typedef struct sparse_rows {
    size_t n, d;
    double *label;
    struct rows_part *parts;
    size_t part_count;
} sparse_rows;

void sparse_rows_free(sparse_rows *r);

/* The bytes of the file at path: a regular file mapped, anything else read
 * to its end.  0, or -1 after saying why on standard error. */
typedef struct libsvm_file {
    char *bytes;
    size_t size;
    int mapped;
} libsvm_file;

int libsvm_file_open(const char *path, libsvm_file *f);
void libsvm_file_close(libsvm_file *f);

/* Parses text[0, size), the lines of path that follow its line first_line,
 * into r.  0, or -1 after saying on standard error "soren-svm: PATH:LINE:
 * what is wrong" for the file's first bad line; r is then empty. */
int sparse_rows_parse(const char *text, size_t size, const char *path, size_t first_line,
                      sparse_rows *r);

/* Row i of r as width dense floats at out + i * width for every row, zeros
 * where it lists nothing; indices past width are left out. */
void sparse_rows_dense(const sparse_rows *r, float *out, size_t width);

/* The rows of r as columns: feature k of row i at out + k * stride + i,
 * for the features below features; out holds zeros, and only the entries
 * the rows list are written. */
void sparse_rows_columns(const sparse_rows *r, float *out, size_t features, size_t stride);

#endif /* SOREN_CLI_LIBSVM_TEXT_H */
