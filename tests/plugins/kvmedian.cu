/* kvmedian (a test job for reduce functions on both engines): records of
 * a u32 key under 2^31 and a u32 value.  Reduce, with no combine, emits
 * (key, distinct values) and (key | 2^31, the median value): two pairs a
 * key, one of them under a key map never emitted.  Both need the values
 * sorted; a reduce that sees them out of order emits 0xffffffff as the
 * count. */
#include <soren/soren.h>

SOREN_FN void kvmedian_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    uint32_t kv[2];
    for (int i = 0; i < 8; i++)
        ((uint8_t *)kv)[i] = r->data[i];
    soren_emit(e, &kv[0], 4, &kv[1]);
}

SOREN_FN void kvmedian_reduce(soren_emitter *e, const void *key, uint32_t key_size,
                              const void *values, uint32_t n, const soren_params *p)
{
    (void)p;
    (void)key_size;
    const uint32_t *v = (const uint32_t *)values;
    uint32_t k = *(const uint32_t *)key, distinct = 1;
    for (uint32_t i = 1; i < n && distinct != 0xffffffffu; i++)
        distinct = v[i] < v[i - 1] ? 0xffffffffu : distinct + (v[i] != v[i - 1]);
    soren_emit(e, &k, 4, &distinct);
    k |= 0x80000000u;
    soren_emit(e, &k, 4, &v[n / 2]);
}

SOREN_PLUGIN(kvmedian, SOREN_STAGE(.map = kvmedian_map, .reduce = kvmedian_reduce,
                                   .key = SOREN_TYPE_U32, .value = SOREN_TYPE_U32))
