/* docfreq (a test job for reduce functions on both engines): in how many
 * lines each word occurs.  Map emits (word, the line's offset); reduce,
 * with no combine, counts the distinct offsets among the word's values,
 * which arrive sorted, so a new line is a change from the previous value.
 * Offsets are kept to 32 bits: the tests' inputs are under 4 GiB.  A
 * reduce that sees its values out of order emits 0xffffffff, which no
 * reference has. */
#include <soren/soren.h>
#include <soren/text.h>

SOREN_FN void docfreq_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    const uint32_t line = (uint32_t)r->index;
    uint64_t pos = 0, start, len;
    while (soren_next_word(r->data, r->size, &pos, &start, &len))
        soren_emit(e, r->data + start, soren_key_size(len), &line);
}

SOREN_FN void docfreq_reduce(soren_emitter *e, const void *key, uint32_t key_size,
                             const void *values, uint32_t n, const soren_params *p)
{
    (void)p;
    const uint32_t *v = (const uint32_t *)values;
    uint32_t lines = 1;
    for (uint32_t i = 1; i < n && lines != 0xffffffffu; i++)
        lines = v[i] < v[i - 1] ? 0xffffffffu : lines + (v[i] != v[i - 1]);
    soren_emit(e, key, key_size, &lines);
}

SOREN_PLUGIN(docfreq, SOREN_STAGE(.map = docfreq_map, .reduce = docfreq_reduce,
                                  .value = SOREN_TYPE_U32))
