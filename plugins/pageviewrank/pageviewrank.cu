/* pageviewrank: the Mars paper's Page View Rank, the ten URLs with the most
 * views, from Page View Count's output (lines URL<TAB>count, as
 * `soren-host run pageviewcount` writes them).  Map-only: each line emits
 * (URL, count); the manifest orders the pairs by value, largest first (ties
 * by URL), and keeps ten.  TSV escapes (\\, \t, \n, \r) in the URL are
 * undone, so the URL is written back as it was read.  A line that is not
 * URL<TAB>digits is skipped. */
#include <soren/soren.h>

#define PVR_URL_MAX 4096 /* the manifest's key.max_size */

/* The decimal count of data[from .. size): 1 with *out set, or 0 if it is
 * not digits only (or does not fit 64 bits). */
SOREN_FN int pvr_count(const uint8_t *data, uint64_t from, uint64_t size, uint64_t *out)
{
    uint64_t n = 0;
    if (from >= size)
        return 0;
    for (uint64_t i = from; i < size; i++) {
        uint64_t d = (uint64_t)data[i] - '0';
        if (d > 9 || n > (UINT64_MAX - d) / 10)
            return 0;
        n = n * 10 + d;
    }
    *out = n;
    return 1;
}

SOREN_FN void pageviewrank_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    uint64_t tab = r->size;
    while (tab > 0 && r->data[tab - 1] != '\t')
        tab--;
    uint64_t views;
    if (tab == 0 || !pvr_count(r->data, tab, r->size, &views))
        return;
    uint8_t url[PVR_URL_MAX];
    uint32_t n = 0;
    for (uint64_t i = 0; i + 1 < tab; i++) {
        uint8_t c = r->data[i];
        if (c == '\\' && i + 2 < tab) {
            uint8_t next = r->data[++i];
            c = next == 't' ? '\t' : next == 'n' ? '\n' : next == 'r' ? '\r' : next;
        }
        if (n == PVR_URL_MAX) { /* too long: let the engine refuse it by its size */
            soren_emit(e, r->data, (uint32_t)(tab - 1), &views);
            return;
        }
        url[n++] = c;
    }
    soren_emit(e, url, n, &views);
}

SOREN_PLUGIN(pageviewrank, SOREN_STAGE(.map = pageviewrank_map, .value = SOREN_TYPE_U64))
