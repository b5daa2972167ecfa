/* adapt.c - the adaptive engine's decisions (see adapt.h). */
#include "adapt.h"

#include <stdlib.h>
#include <string.h>

static const char *const variant_names[] = {"auto", "hash", "direct", "sort", "block", "dense"};

const char *soren_variant_name(soren_variant v)
{
    return (unsigned)v < sizeof variant_names / sizeof variant_names[0] ? variant_names[v] : "?";
}

int soren_variant_parse(const char *name, soren_variant *out)
{
    for (unsigned v = 0; v < sizeof variant_names / sizeof variant_names[0]; v++)
        if (strcmp(name, variant_names[v]) == 0) {
            *out = (soren_variant)v;
            return 0;
        }
    return -1;
}

void soren_explain_destroy(soren_explain *x)
{
    free(x->overflows);
    x->overflows = NULL;
    x->overflow_count = x->overflow_cap = 0;
}
