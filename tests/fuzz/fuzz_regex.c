/* libFuzzer harness: the grep pattern compiler.  The input is a pattern then,
 * after the first NUL, a subject; a pattern that compiles gives a DFA that
 * runs over the subject, and one that does not gives a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/regex.h"
#include <soren/dfa.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, '\0', size);
    size_t pattern_size = nul ? (size_t)(nul - data) : size;
    char *pattern = malloc(pattern_size + 1);
    if (!pattern)
        return 0;
    memcpy(pattern, data, pattern_size);
    pattern[pattern_size] = '\0';
    const uint8_t *subject = nul ? nul + 1 : data;
    size_t subject_size = nul ? size - pattern_size - 1 : size;

    soren_dfa *dfa = NULL;
    size_t dfa_size = 0;
    soren_error err;
    soren_error_clear(&err);
    if (soren_regex_compile(pattern, &dfa, &dfa_size, &err) == SOREN_OK) {
        if (!dfa || dfa_size == 0)
            abort();
        (void)soren_dfa_search(dfa, subject, subject_size);
    } else if (dfa || err.text[0] == '\0') {
        abort();
    }
    free(dfa);
    free(pattern);
    return 0;
}
