/* A plugin built without the kit: SOREN_PLUGIN refers to the manifest that
 * embed-manifest writes, and this library was linked without it, so the
 * dynamic loader finds soren__embedded_manifest undefined. */
#include <soren/soren.h>
#include <soren/text.h>

static void unembedded_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    const uint32_t one = 1;
    soren_emit(e, r->data, soren_key_size(r->size), &one);
}

SOREN_PLUGIN(unembedded, SOREN_STAGE(.map = unembedded_map, .combine = SOREN_SUM_U32))
