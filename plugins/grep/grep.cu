/* grep: the Soren paper's distributed grep.  Every word that contains a match
 * of the pattern counts once per occurrence; ^ and $ anchor at the word's
 * ends.  The host compiles the pattern into a DFA (soren/dfa.h). */
#include <soren/dfa.h>
#include <soren/soren.h>
#include <soren/text.h>

enum { GREP_PARAM_PATTERN = 0 };

SOREN_FN void grep_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    const soren_dfa *dfa = (const soren_dfa *)soren_param(p, GREP_PARAM_PATTERN);
    const uint32_t one = 1;
    uint64_t pos = 0, start, len;
    while (soren_next_word(r->data, r->size, &pos, &start, &len))
        if (soren_dfa_search(dfa, r->data + start, len))
            soren_emit(e, r->data + start, soren_key_size(len), &one);
}

SOREN_PLUGIN(grep, SOREN_STAGE(.map = grep_map, .combine = SOREN_SUM_U32))
