/* wordcount: the occurrences of every word (see soren/text.h for "word"). */
#include <soren/soren.h>
#include <soren/text.h>

SOREN_FN void wordcount_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    const uint32_t one = 1;
    uint64_t pos = 0, start, len;
    while (soren_next_word(r->data, r->size, &pos, &start, &len))
        soren_emit(e, r->data + start, soren_key_size(len), &one);
}

SOREN_PLUGIN(wordcount, SOREN_STAGE(.map = wordcount_map, .combine = SOREN_SUM_U32))
