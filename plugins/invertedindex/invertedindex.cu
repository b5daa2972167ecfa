/* invertedindex: the Mars paper's Inverted Index, every link of a set of
 * HTML pages (soren-gen html) with its position.  Map-only, as in Mars: a
 * link is href="URL" within one line; each emits (URL, the byte offset of
 * the URL's first byte in the input), and ordering by key lists each URL's
 * positions together, in input order.  The search goes on after the
 * link's closing quote; an href=" without a closing quote on its line is
 * not a link. */
#include <soren/soren.h>

SOREN_FN void invertedindex_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    const uint8_t *d = r->data;
    uint64_t i = 0;
    while (i + 6 <= r->size) {
        if (!(d[i] == 'h' && d[i + 1] == 'r' && d[i + 2] == 'e' && d[i + 3] == 'f' &&
              d[i + 4] == '=' && d[i + 5] == '"')) {
            i++;
            continue;
        }
        uint64_t start = i + 6, end = start;
        while (end < r->size && d[end] != '"')
            end++;
        if (end == r->size)
            return;
        uint64_t at = r->offset + start;
        soren_emit(e, d + start, (uint32_t)(end - start), &at);
        i = end + 1;
    }
}

SOREN_PLUGIN(invertedindex, SOREN_STAGE(.map = invertedindex_map, .value = SOREN_TYPE_U64))
