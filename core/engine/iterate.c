#include "iterate.h"

#include <string.h>

#include "../plugin/manifest.h"

/* Pair i's key as an element number. */
static uint64_t element_of(const soren_result *res, uint64_t i)
{
    const uint8_t *k = res->key_bytes + res->key_offset[i];
    if (res->key_type == SOREN_TYPE_U64) {
        uint64_t v;
        memcpy(&v, k, 8);
        return v;
    }
    uint32_t v;
    memcpy(&v, k, 4);
    return v;
}

soren_status soren_iterate_feed(const soren_result *res, uint8_t *data, uint64_t size,
                                const char *what, int write, int *changed, soren_error *err)
{
    soren_type kt = res->key_type;
    size_t vs = res->value_size;
    *changed = 0;
    if (kt != SOREN_TYPE_U32 && kt != SOREN_TYPE_U64 && kt != SOREN_TYPE_INDEX)
        return soren_error_set(err, SOREN_EJOB, "%s: the output's keys are of type %s; only u32, "
                               "u64 and index keys number the parameter's elements", what,
                               soren_type_name(kt));
    uint64_t elements = vs ? size / vs : 0;
    /* Every key is checked before anything is written, so a failed feed
     * leaves the parameter as the last run read it. */
    for (uint64_t i = 0; i < res->count; i++) {
        uint64_t e = element_of(res, i);
        if (e < elements)
            continue;
        if (!write) {
            *changed = 1;
            break;
        }
        return soren_error_set(err, SOREN_EJOB, "%s: the output's key %llu is past the "
                               "parameter's end (%llu bytes: %llu elements of %zu bytes), so "
                               "it cannot be fed to the next run", what, (unsigned long long)e,
                               (unsigned long long)size, (unsigned long long)elements, vs);
    }
    for (uint64_t i = 0; i < res->count; i++) {
        uint64_t e = element_of(res, i);
        const uint8_t *v = res->values + i * vs;
        if (e >= elements || memcmp(data + e * vs, v, vs) == 0)
            continue;
        *changed = 1;
        if (!write)
            return SOREN_OK;
        memcpy(data + e * vs, v, vs);
    }
    return SOREN_OK;
}
