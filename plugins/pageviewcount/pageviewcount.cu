/* pageviewcount: the Soren and Mars papers' Page View Count, the number of
 * distinct IP addresses that visited each URL of a web log whose lines are
 * URL<TAB>IP<TAB>cookie (soren-gen weblog).  Two stages:
 *
 *   1. each line emits the key "URL<TAB>IP"; counting the lines of each key
 *      leaves every (URL, IP) once: the duplicates are gone;
 *   2. each pair of stage 1 (its key, then its u32 count) emits (URL, 1),
 *      summed per URL.
 *
 * A line without a tab names no visit and is skipped; a line without a
 * second tab is URL<TAB>IP without a cookie. */
#include <soren/soren.h>

/* The first tab of data[from .. size), or size. */
SOREN_FN uint64_t pvc_tab(const uint8_t *data, uint64_t from, uint64_t size)
{
    while (from < size && data[from] != '\t')
        from++;
    return from;
}

SOREN_FN void pvc_dedup_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    const uint32_t one = 1;
    uint64_t url_end = pvc_tab(r->data, 0, r->size);
    if (url_end == r->size)
        return;
    uint64_t ip_end = pvc_tab(r->data, url_end + 1, r->size);
    soren_emit(e, r->data, (uint32_t)ip_end, &one);
}

/* A stage-1 pair: "URL<TAB>IP" then its 4-byte count. */
SOREN_FN void pvc_count_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    const uint32_t one = 1;
    uint64_t key_size = r->size - sizeof(uint32_t);
    soren_emit(e, r->data, (uint32_t)pvc_tab(r->data, 0, key_size), &one);
}

SOREN_PLUGIN(pageviewcount, SOREN_STAGE(.map = pvc_dedup_map, .combine = SOREN_COUNT_U32),
             SOREN_STAGE(.map = pvc_count_map, .combine = SOREN_SUM_U32))
