/* bucketsum (a test job for index keys counted by parameters, in both
 * stages): index input of n tasks (input.count_from ["n"]).  Stage 1: task
 * i emits the key i % modulus with the value i (u64), summed; the keys are
 * counted by buckets (key.count_from ["buckets"]), and modulus is buckets
 * unless --param modulus=M says otherwise, so a modulus over the bucket
 * count makes keys that the engines must refuse.  Stage 2: each bucket's
 * sum goes to the group bucket % groups (key.count_from ["groups"]),
 * summed; with groups = buckets the output is the buckets' sums.  groups
 * has no default, so that leaving it out meets the run's own message.
 * On the CPU, SOREN_TEST_CRASH_AT=N makes stage 1's map dereference NULL
 * at task N (a fault inside the CPU engine's host loop). */
#include <soren/soren.h>

#ifndef __CUDA_ARCH__
#include <stdlib.h>
#endif

enum { BUCKETSUM_N, BUCKETSUM_BUCKETS, BUCKETSUM_MODULUS, BUCKETSUM_GROUPS };

SOREN_FN uint64_t bucketsum_param(const soren_params *p, uint32_t i)
{
    uint64_t v = 0;
    const uint8_t *bytes = (const uint8_t *)soren_param(p, i);
    for (uint64_t b = 0; bytes && b < soren_param_size(p, i); b++)
        ((uint8_t *)&v)[b] = bytes[b]; /* u32 or u64, little-endian */
    return v;
}

SOREN_FN void bucketsum_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    /* The run refuses a bucket count of 0, so the modulus is never 0. */
    uint64_t modulus = bucketsum_param(p, BUCKETSUM_MODULUS);
    if (modulus == 0)
        modulus = bucketsum_param(p, BUCKETSUM_BUCKETS);
#ifndef __CUDA_ARCH__
    static const char *crash_at = getenv("SOREN_TEST_CRASH_AT");
    if (crash_at && strtoull(crash_at, NULL, 10) == r->index)
        *(volatile int *)0 = 1;
#endif
    uint32_t key = (uint32_t)(r->index % modulus);
    uint64_t value = r->index;
    soren_emit(e, &key, sizeof key, &value);
}

/* A stage-1 pair: the bucket (4 bytes), then its sum (8 bytes). */
SOREN_FN void bucketsum_group_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    uint32_t bucket = 0;
    uint64_t sum = 0;
    for (int i = 0; i < 4; i++)
        ((uint8_t *)&bucket)[i] = r->data[i];
    for (int i = 0; i < 8; i++)
        ((uint8_t *)&sum)[i] = r->data[4 + i];
    uint32_t group = (uint32_t)(bucket % bucketsum_param(p, BUCKETSUM_GROUPS));
    soren_emit(e, &group, sizeof group, &sum);
}

SOREN_PLUGIN(bucketsum,
             SOREN_STAGE(.map = bucketsum_map, .combine = SOREN_SUM_U64, .key = SOREN_TYPE_INDEX),
             SOREN_STAGE(.map = bucketsum_group_map, .combine = SOREN_SUM_U64,
                         .key = SOREN_TYPE_INDEX))
