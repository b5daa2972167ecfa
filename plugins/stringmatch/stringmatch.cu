/* stringmatch: the Mars paper's StringMatch, every position of a literal
 * string in the input.  Map-only: each match is a pair (its byte offset in
 * the input, the byte offset of the line it is in), and ordering by key
 * lists the matches in input order.  Overlapping matches all count ("aa"
 * is at 0 and 1 in "aaa"), found in time linear in the line's and the
 * pattern's sizes (soren/find.h). */
#include <soren/find.h>
#include <soren/soren.h>

enum { STRINGMATCH_PARAM_PATTERN = 0 };

SOREN_FN void stringmatch_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    soren_find f;
    soren_find_init(&f, soren_param(p, STRINGMATCH_PARAM_PATTERN),
                    soren_param_size(p, STRINGMATCH_PARAM_PATTERN), r->data, r->size);
    for (uint64_t i; soren_find_next(&f, &i);) {
        uint64_t at = r->offset + i, line = r->offset;
        soren_emit(e, &at, sizeof at, &line);
    }
}

SOREN_PLUGIN(stringmatch, SOREN_STAGE(.map = stringmatch_map, .key = SOREN_TYPE_U64,
                                      .value = SOREN_TYPE_U64))
