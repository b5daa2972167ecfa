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

/* Whether the files hold row i of A and column j of B: the last float a
 * task reads in each. */
SOREN_FN bool matmul_has_row(const soren_params *p, uint64_t i, uint64_t inner)
{
    return (i + 1) * inner * 4 <= soren_param_size(p, MATMUL_A);
}

SOREN_FN bool matmul_has_column(const soren_params *p, uint64_t j, uint64_t inner, uint64_t cols)
{
    return (inner ? ((inner - 1) * cols + j + 1) * 4 : 0) <= soren_param_size(p, MATMUL_B);
}

SOREN_FN void matmul_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    uint64_t inner = matmul_u32(p, MATMUL_INNER), cols = matmul_u32(p, MATMUL_COLS);
    if (cols == 0)
        return;
    uint64_t i = r->index / cols, j = r->index % cols;
    if (!matmul_has_row(p, i, inner) || !matmul_has_column(p, j, inner, cols))
        return;
    const float *a = (const float *)soren_param(p, MATMUL_A) + i * inner;
    const float *b = (const float *)soren_param(p, MATMUL_B) + j;
    float sum = 0.0f;
    for (uint64_t k = 0; k < inner; k++)
        sum += a[k] * b[k * cols];
    uint64_t key = (i << 32) | j;
    soren_emit(e, &key, sizeof key, &sum);
}

/* The CPU engine's map of a run of tasks: its elements row by row, a row's
 * in tiles of MATMUL_TILE columns whose sums go k = 0, 1, ... side by side,
 * so that B is read along its rows.  Each element takes the same products
 * and additions in the same order as in matmul_map. */
enum { MATMUL_TILE = 256 };

static void matmul_map_run(soren_emitter *e, const soren_record_run *run, const soren_params *p)
{
    uint64_t inner = matmul_u32(p, MATMUL_INNER), cols = matmul_u32(p, MATMUL_COLS);
    if (cols == 0)
        return;
    const float *a = (const float *)soren_param(p, MATMUL_A);
    const float *b = (const float *)soren_param(p, MATMUL_B);
    for (uint64_t t = run->index, end = run->index + run->count; t < end;) {
        uint64_t i = t / cols, first = t % cols, last = cols;
        if (last - first > end - t)
            last = first + (end - t);
        if (last - first > MATMUL_TILE)
            last = first + MATMUL_TILE;
        t += last - first;
        if (!matmul_has_row(p, i, inner))
            continue;
        /* the files hold B's columns up to some j: these, of the tile */
        uint64_t held = last;
        while (held > first && !matmul_has_column(p, held - 1, inner, cols))
            held--;
        float sum[MATMUL_TILE] = {0};
        for (uint64_t k = 0; k < inner; k++) {
            const float x = a[i * inner + k], *row = b + k * cols;
            for (uint64_t j = first; j < held; j++)
                sum[j - first] += x * row[j];
        }
        for (uint64_t j = first; j < held; j++) {
            uint64_t key = (i << 32) | j;
            soren_emit(e, &key, sizeof key, &sum[j - first]);
        }
    }
}

SOREN_PLUGIN(matmul, SOREN_STAGE(.map = matmul_map, .key = SOREN_TYPE_U64,
                                 .value = SOREN_TYPE_F32, .map_run = matmul_map_run))
