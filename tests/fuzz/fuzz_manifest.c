/* libFuzzer harness: the manifest parser and validator on arbitrary bytes.
 * Every input is either a manifest or an error with a message; nothing
 * crashes, leaks or reads out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    soren_manifest *m = NULL;
    soren_error err;
    soren_error_clear(&err);
    soren_status rc = soren_manifest_parse((const char *)data, size, "fuzz.json", &m, &err);
    if ((rc == SOREN_OK) != (m != NULL) || (rc != SOREN_OK && err.text[0] == '\0'))
        abort(); /* a failure must come with a message, a success with a manifest */
    soren_manifest_free(m);
    return 0;
}
