/* gpufault (a test job for a fault in a plugin's device code): counts lines
 * by length, as faulty does, and on the GPU stores through NULL at the line
 * at byte `at`, which leaves the process's CUDA context unusable.  The CPU
 * engine's map never faults: the fault under test is the GPU's. */
#include <soren/soren.h>

enum { GPUFAULT_AT };

SOREN_FN void gpufault_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
#ifdef __CUDA_ARCH__
    if (r->offset == *(const uint64_t *)soren_param(p, GPUFAULT_AT))
        *(volatile int *)0 = 1;
#else
    (void)p;
#endif
    uint32_t key = (uint32_t)r->size, one = 1;
    soren_emit(e, &key, sizeof key, &one);
}

SOREN_PLUGIN(gpufault, SOREN_STAGE(.map = gpufault_map, .combine = SOREN_SUM_U32,
                                   .key = SOREN_TYPE_U32))
