/* histogram: counts of each channel value over raw 24-bit RGB pixels.
 * Bins 0-255 are red, 256-511 green, 512-767 blue. */
#include <soren/soren.h>

SOREN_FN void histogram_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    const uint32_t one = 1;
    for (uint32_t channel = 0; channel < 3; channel++) {
        uint32_t bin = channel * 256u + r->data[channel];
        soren_emit(e, &bin, sizeof bin, &one);
    }
}

SOREN_PLUGIN(histogram, SOREN_STAGE(.map = histogram_map, .combine = SOREN_COUNT_U32,
                                    .key = SOREN_TYPE_INDEX))
