/* kvscale (a test job for reduce functions on both engines): records of a
 * u32 key and a u32 value, summed by the combine; reduce then sees one
 * value a key and emits it doubled (0xffffffff if it saw more than one). */
#include <soren/soren.h>

SOREN_FN void kvscale_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    uint32_t kv[2];
    for (int i = 0; i < 8; i++)
        ((uint8_t *)kv)[i] = r->data[i];
    soren_emit(e, &kv[0], 4, &kv[1]);
}

SOREN_FN void kvscale_reduce(soren_emitter *e, const void *key, uint32_t key_size,
                             const void *values, uint32_t n, const soren_params *p)
{
    (void)p;
    uint32_t twice = n == 1 ? 2 * *(const uint32_t *)values : 0xffffffffu;
    soren_emit(e, key, key_size, &twice);
}

SOREN_PLUGIN(kvscale, SOREN_STAGE(.map = kvscale_map, .combine = SOREN_SUM_U32,
                                  .reduce = kvscale_reduce, .key = SOREN_TYPE_U32))
