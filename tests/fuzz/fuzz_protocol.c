/* libFuzzer harness: the resident host's message decoder, the first code a
 * client's bytes reach.  Whatever the bytes, it either refuses them or
 * gives fields that lie inside one allocation, NUL-terminated, holding no
 * NUL; and a decoded message encodes back to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host/protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    soren_msg m;
    soren_error err;
    soren_error_clear(&err);
    if (soren_msg_decode(data, size, &m, &err) != SOREN_OK) {
        if (!err.text[0])
            abort();
        return 0;
    }
    uint8_t *again = NULL;
    size_t again_size = 0;
    soren_error_clear(&err);
    if (soren_msg_encode(m.kind, (const char *const *)m.fields, m.count, &again, &again_size,
                         &err) != SOREN_OK)
        abort();
    /* encode puts the 4-byte length first */
    if (again_size != size + 4 || memcmp(again + 4, data, size) != 0)
        abort();
    free(again);
    soren_msg_destroy(&m);
    return 0;
}
