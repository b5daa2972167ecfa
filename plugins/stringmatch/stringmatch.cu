/* stringmatch: the Mars paper's StringMatch, every position of a literal
 * string in the input.  Map-only: each match is a pair (its byte offset in
 * the input, the byte offset of the line it is in), and ordering by key
 * lists the matches in input order.  Overlapping matches all count ("aa"
 * is at 0 and 1 in "aaa"). */
#include <soren/soren.h>

enum { STRINGMATCH_PARAM_PATTERN = 0 };

SOREN_FN void stringmatch_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    const uint8_t *pattern = (const uint8_t *)soren_param(p, STRINGMATCH_PARAM_PATTERN);
    uint64_t n = soren_param_size(p, STRINGMATCH_PARAM_PATTERN);
    if (n == 0 || n > r->size)
        return;
    for (uint64_t i = 0; i + n <= r->size; i++) {
        if (r->data[i] != pattern[0])
            continue;
        uint64_t k = 1;
        while (k < n && r->data[i + k] == pattern[k])
            k++;
        if (k == n) {
            uint64_t at = r->offset + i, line = r->offset;
            soren_emit(e, &at, sizeof at, &line);
        }
    }
}

SOREN_PLUGIN(stringmatch, SOREN_STAGE(.map = stringmatch_map, .key = SOREN_TYPE_U64,
                                      .value = SOREN_TYPE_U64))
