/* simscore: the Mars paper's Similarity Score, the cosine similarity of
 * every pair of documents.  Map-only over index input: task t looks at the
 * pair (i, j) = (t / docs, t % docs), so the manifest counts docs x docs
 * tasks, and emits only for i < j: key the score, value (i << 32) | j.  The
 * feature vectors (docs x dims float32, row-major: soren-gen features) are
 * --param features=@FILE.  The dot product and the squared norms are summed
 * k = 0, 1, ... in float32, then score = dot / sqrt(|a|^2 |b|^2) in double,
 * rounded once to float32: the same bits on any IEEE machine.  A pair with a
 * zero vector has no cosine and emits nothing, as does a pair whose vectors
 * are not in the file. */
#include <math.h>
#include <soren/soren.h>

enum { SIMSCORE_FEATURES, SIMSCORE_DOCS, SIMSCORE_DIMS };

SOREN_FN uint32_t simscore_u32(const soren_params *p, uint32_t i)
{
    const uint32_t *v = (const uint32_t *)soren_param(p, i);
    return v ? *v : 0;
}

SOREN_FN void simscore_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    uint64_t docs = simscore_u32(p, SIMSCORE_DOCS), dims = simscore_u32(p, SIMSCORE_DIMS);
    if (docs == 0)
        return;
    uint64_t i = r->index / docs, j = r->index % docs;
    if (i >= j || (j + 1) * dims * 4 > soren_param_size(p, SIMSCORE_FEATURES))
        return;
    const float *f = (const float *)soren_param(p, SIMSCORE_FEATURES);
    const float *a = f + i * dims, *b = f + j * dims;
    float dot = 0.0f, aa = 0.0f, bb = 0.0f;
    for (uint64_t k = 0; k < dims; k++) {
        dot += a[k] * b[k];
        aa += a[k] * a[k];
        bb += b[k] * b[k];
    }
    if (aa == 0.0f || bb == 0.0f)
        return;
    float score = (float)((double)dot / sqrt((double)aa * (double)bb));
    uint64_t pair = (i << 32) | j;
    soren_emit(e, &score, sizeof score, &pair);
}

SOREN_PLUGIN(simscore, SOREN_STAGE(.map = simscore_map, .key = SOREN_TYPE_F32,
                                   .value = SOREN_TYPE_U64))
