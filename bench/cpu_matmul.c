/*
 * cpu_matmul.c - the CPU baseline of the matmul plugin: plain C and
 * pthreads, no Soren.
 *
 *   cpu-matmul [--threads N] ROWS INNER COLS A B
 *
 * A (ROWS x INNER) and B (INNER x COLS) are float32, row-major (soren-gen
 * matrix).  C = A x B with blocked loops: each thread takes a contiguous
 * share of C's rows and runs over blocks of rows, of k and of columns, so
 * that a block of B stays in cache while a block of A's rows uses it; each
 * element still sums its products k = 0, 1, ... in float32, as the plugin
 * does (x86-64 without -mfma has no fused multiply-add, so each product is
 * rounded on its own).  As in plugins/matmul, an element whose row of A or
 * column of B the files do not hold is left out.  The output is
 * `soren-host run matmul --device cpu`'s: "KEY\tVALUE" with KEY =
 * (i << 32) | j in key order, values as soren-host writes an f32, so
 * tests/cpu-baselines.sh compares the two byte for byte.
 */
#include "cpu_baseline.h"

#include <inttypes.h>

#define BLOCK_ROWS 32
#define BLOCK_K 128
#define BLOCK_COLS 256

typedef struct share {
    const float *a, *b;
    float *c;                 /* rows x cols, the whole product */
    uint64_t first, last;     /* this share's rows of C */
    uint64_t inner, cols;
} share;

static void *multiply_share(void *arg)
{
    share *s = arg;
    uint64_t inner = s->inner, cols = s->cols;
    for (uint64_t i0 = s->first; i0 < s->last; i0 += BLOCK_ROWS) {
        uint64_t i1 = i0 + BLOCK_ROWS < s->last ? i0 + BLOCK_ROWS : s->last;
        for (uint64_t k0 = 0; k0 < inner; k0 += BLOCK_K) {
            uint64_t k1 = k0 + BLOCK_K < inner ? k0 + BLOCK_K : inner;
            for (uint64_t j0 = 0; j0 < cols; j0 += BLOCK_COLS) {
                uint64_t j1 = j0 + BLOCK_COLS < cols ? j0 + BLOCK_COLS : cols;
                for (uint64_t i = i0; i < i1; i++) {
                    float *c = s->c + i * cols;
                    const float *a = s->a + i * inner;
                    for (uint64_t k = k0; k < k1; k++) {
                        float x = a[k];
                        const float *b = s->b + k * cols;
                        for (uint64_t j = j0; j < j1; j++)
                            c[j] += x * b[j];
                    }
                }
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    static const char name[] = "cpu-matmul";
    const char *args[5];
    long threads;
    baseline_args(argc, argv, name, "ROWS INNER COLS A B", 5, args, &threads);
    uint64_t rows = baseline_u32(name, "ROWS", args[0]);
    uint64_t inner = baseline_u32(name, "INNER", args[1]);
    uint64_t cols = baseline_u32(name, "COLS", args[2]);
    uint64_t asize, bsize;
    const uint8_t *abytes = baseline_map(name, args[3], &asize);
    const uint8_t *bbytes = baseline_map(name, args[4], &bsize);

    /* What the files hold whole: the plugin's tasks outside it emit nothing. */
    uint64_t have_rows = rows, have_cols = cols;
    if (inner) {
        if (asize / (inner * 4) < have_rows)
            have_rows = asize / (inner * 4);
        uint64_t last_row = (inner - 1) * cols; /* B's floats before its last row */
        have_cols = bsize / 4 > last_row ? bsize / 4 - last_row : 0;
        if (have_cols > cols)
            have_cols = cols;
    }
    /* Mapped whole, the matrices may start anywhere: copy them aligned. */
    float *a = baseline_calloc(name, (size_t)(have_rows * inner) + 1, sizeof *a, "A");
    float *b = baseline_calloc(name, (size_t)(inner * cols) + 1, sizeof *b, "B");
    memcpy(a, abytes, (size_t)(have_rows * inner) * sizeof *a);
    memcpy(b, bbytes, (size_t)(bsize / 4 < inner * cols ? bsize / 4 : inner * cols) * sizeof *b);
    float *c = baseline_calloc(name, (size_t)(have_rows * cols) + 1, sizeof *c, "C");

    share *shares = baseline_calloc(name, (size_t)threads, sizeof *shares, "the threads");
    for (long t = 0; t < threads; t++)
        shares[t] = (share){a, b, c, have_rows * (uint64_t)t / (uint64_t)threads,
                            have_rows * (uint64_t)(t + 1) / (uint64_t)threads, inner, cols};
    baseline_run(name, threads, multiply_share, shares, sizeof *shares);

    for (uint64_t i = 0; i < have_rows; i++)
        for (uint64_t j = 0; j < have_cols; j++) {
            printf("%" PRIu64 "\t", (i << 32) | j);
            baseline_print_float(c[i * cols + j], 1);
            putchar('\n');
        }
    free(shares);
    free(a);
    free(b);
    free(c);
    baseline_unmap(abytes, asize);
    baseline_unmap(bbytes, bsize);
    return baseline_done(name);
}
