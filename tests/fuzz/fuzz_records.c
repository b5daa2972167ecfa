/* libFuzzer harness: the record splitter.  The first byte picks the format
 * (lines, or fixed records of 1 to 16 bytes), the second how many ranges the
 * buffer is cut into; the rest is the input.  However it is cut, the ranges
 * must yield exactly the records of one pass over the whole buffer, each
 * inside the buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/input.h"

static size_t all_records(const soren_stage_spec *spec, const uint8_t *buf, size_t size,
                          uint64_t begin, uint64_t end, soren_record *out, size_t cap)
{
    soren_records it;
    soren_records_init(&it, spec, buf, size, begin, end);
    soren_record r;
    size_t n = 0;
    while (soren_records_next(&it, &r)) {
        if (r.data < buf || r.size > size || r.data + r.size > buf + size || n == cap)
            abort();
        out[n++] = r;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    soren_stage_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.input_format = data[0] & 1 ? SOREN_INPUT_FIXED : SOREN_INPUT_LINES;
    spec.record_size = 1 + (data[0] >> 1) % 16;
    size_t ranges = 1 + data[1] % 8;
    const uint8_t *buf = data + 2;
    size -= 2;

    soren_record *whole = malloc((size + 1) * sizeof *whole);
    soren_record *parts = malloc((size + 1) * sizeof *parts);
    if (!whole || !parts) {
        free(whole);
        free(parts);
        return 0;
    }
    size_t n = all_records(&spec, buf, size, 0, size, whole, size + 1);
    size_t m = 0;
    for (size_t i = 0; i < ranges; i++) {
        uint64_t begin = size * i / ranges, end = size * (i + 1) / ranges;
        m += all_records(&spec, buf, size, begin, end, parts + m, size + 1 - m);
    }
    if (m != n)
        abort();
    for (size_t i = 0; i < n; i++)
        if (parts[i].offset != whole[i].offset || parts[i].size != whole[i].size ||
            parts[i].data != whole[i].data)
            abort();
    free(whole);
    free(parts);
    return 0;
}
