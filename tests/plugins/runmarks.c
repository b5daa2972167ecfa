/* runmarks (a test job for run maps): fixed records of one u32 v each,
 * counted under the key v % 4 by map and under 4 + v % 4 by the run map,
 * so that the output says which of the two mapped every record (the CPU
 * engine maps fixed records with the run map).  SOREN_TEST_CRASH_AT=N
 * makes the run map dereference NULL at the record at byte N.  Plain C:
 * the CPU engine runs it. */
#include <soren/soren.h>

#include <stdlib.h>
#include <string.h>

static void count(soren_emitter *e, const uint8_t *record, uint32_t first_key)
{
    uint32_t v, key;
    memcpy(&v, record, sizeof v);
    key = first_key + v % 4;
    const uint64_t one = 1;
    soren_emit(e, &key, sizeof key, &one);
}

static void runmarks_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    count(e, r->data, 0);
}

/* The NULL store is the fault under test: UBSan, in the sanitizer build,
 * must let it happen rather than report it. */
__attribute__((no_sanitize("undefined")))
static void runmarks_map_run(soren_emitter *e, const soren_record_run *run,
                             const soren_params *p)
{
    (void)p;
    const char *crash = getenv("SOREN_TEST_CRASH_AT");
    uint64_t crash_at = crash ? strtoull(crash, NULL, 10) : UINT64_MAX;
    for (uint64_t i = 0; i < run->count; i++) {
        if (run->offset + i * run->size == crash_at)
            *(volatile int *)NULL = 1;
        count(e, run->data + i * run->size, 4);
    }
}

SOREN_PLUGIN(runmarks, SOREN_STAGE(.map = runmarks_map, .combine = SOREN_SUM_U64,
                                   .key = SOREN_TYPE_INDEX, .map_run = runmarks_map_run))
