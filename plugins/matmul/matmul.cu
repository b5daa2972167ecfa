/* matmul: the Soren and Mars papers' Matrix Multiplication, C = A x B.
 * Map-only over index input: task t computes the element (i, j) = (t / cols,
 * t % cols) of C, so the manifest counts rows x cols tasks (count_from).  A
 * (rows x inner) and B (inner x cols) are float32, row-major, given as
 * --param a=@A.bin --param b=@B.bin (soren-gen matrix).  Each task emits the
 * key (i << 32) | j and the dot product of row i of A and column j of B,
 * summed k = 0, 1, ... in float32.  A task whose row or column is not in
 * the files (they are shorter than the dimensions say) emits nothing. */
#include <soren/soren.h>

enum { MATMUL_A, MATMUL_B, MATMUL_ROWS, MATMUL_INNER, MATMUL_COLS };

SOREN_FN uint32_t matmul_u32(const soren_params *p, uint32_t i)
{
    const uint32_t *v = (const uint32_t *)soren_param(p, i);
    return v ? *v : 0;
}

SOREN_FN void matmul_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    uint64_t inner = matmul_u32(p, MATMUL_INNER), cols = matmul_u32(p, MATMUL_COLS);
    if (cols == 0)
        return;
    uint64_t i = r->index / cols, j = r->index % cols;
    /* The last float each task reads, in A and in B. */
    if ((i + 1) * inner * 4 > soren_param_size(p, MATMUL_A) ||
        (inner ? ((inner - 1) * cols + j + 1) * 4 : 0) > soren_param_size(p, MATMUL_B))
        return;
    const float *a = (const float *)soren_param(p, MATMUL_A) + i * inner;
    const float *b = (const float *)soren_param(p, MATMUL_B) + j;
    float sum = 0.0f;
    for (uint64_t k = 0; k < inner; k++)
        sum += a[k] * b[k * cols];
    uint64_t key = (i << 32) | j;
    soren_emit(e, &key, sizeof key, &sum);
}

SOREN_PLUGIN(matmul, SOREN_STAGE(.map = matmul_map, .key = SOREN_TYPE_U64,
                                 .value = SOREN_TYPE_F32))
