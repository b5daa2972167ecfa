/* doubling (a test job for run --iterate): index input of `keys` tasks and
 * a state of u32 elements, fed by each run's output.  With w the state's
 * first element, task i < w emits (i, 2w) for i = 0 and (i, 1) otherwise,
 * so a run emits w keys and sets w to 2w for the next: from w = 1, run k
 * emits 2^(k-1) keys, and once w is past the state's elements the output
 * names elements the state does not have.  No run's output equals the
 * state it read, so the iteration never converges. */
#include <soren/soren.h>

enum { DOUBLING_KEYS, DOUBLING_STATE };

SOREN_FN void doubling_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    const uint8_t *state = (const uint8_t *)soren_param(p, DOUBLING_STATE);
    uint32_t w = 0;
    for (uint64_t b = 0; state && b < 4 && b < soren_param_size(p, DOUBLING_STATE); b++)
        ((uint8_t *)&w)[b] = state[b]; /* parameters have no alignment promise */
    if (r->index >= w)
        return;
    uint32_t key = (uint32_t)r->index, value = key == 0 ? 2 * w : 1;
    soren_emit(e, &key, sizeof key, &value);
}

SOREN_PLUGIN(doubling,
             SOREN_STAGE(.map = doubling_map, .combine = SOREN_MAX_U32, .key = SOREN_TYPE_INDEX))
