/* A well-formed plugin whose compiled key type (u32) disagrees with its own
 * manifest (string): the host must name both sides. */
#include <soren/soren.h>

static void mismatch_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    uint32_t key = (uint32_t)r->size, one = 1;
    soren_emit(e, &key, sizeof key, &one);
}

SOREN_PLUGIN(mismatch, SOREN_STAGE(.map = mismatch_map, .combine = SOREN_SUM_U32,
                                   .key = SOREN_TYPE_U32))
