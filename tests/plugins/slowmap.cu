/* slowmap (a test job for --device both): lines input; each line emits its
 * length (u32) with the count 1, summed.  On the GPU each line first waits
 * `cycles` clock cycles, so that the map, not the upload, bounds the GPU's
 * run and the CPU engine takes pieces beside it; the CPU engine's map does
 * not wait. */
#include <soren/soren.h>

enum { SLOWMAP_CYCLES };

SOREN_FN void slowmap_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
#ifdef __CUDA_ARCH__
    uint64_t cycles = 0;
    const uint8_t *c = (const uint8_t *)soren_param(p, SLOWMAP_CYCLES);
    for (uint64_t b = 0; c && b < 8 && b < soren_param_size(p, SLOWMAP_CYCLES); b++)
        ((uint8_t *)&cycles)[b] = c[b]; /* parameters have no alignment promise */
    const long long start = clock64();
    while ((uint64_t)(clock64() - start) < cycles) {
    }
#else
    (void)p;
#endif
    uint32_t key = (uint32_t)r->size;
    uint64_t one = 1;
    soren_emit(e, &key, sizeof key, &one);
}

SOREN_PLUGIN(slowmap, SOREN_STAGE(.map = slowmap_map, .combine = SOREN_SUM_U64,
                                  .key = SOREN_TYPE_U32))
