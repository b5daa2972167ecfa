#include "options.h"

#include <string.h>

const char soren_engine_names[] = "auto hash block direct dense sort";

int soren_engine_name_valid(const char *name)
{
    size_t n = strlen(name);
    for (const char *p = soren_engine_names; *p;) {
        const char *space = strchr(p, ' ');
        size_t len = space ? (size_t)(space - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0)
            return 1;
        p += len + (space != NULL);
    }
    return 0;
}

void soren_run_options_init(soren_run_options *o)
{
    memset(o, 0, sizeof *o);
    o->engine = "auto";
    o->order = -1;
    o->sample = SOREN_SAMPLE_DEFAULT;
    o->small_keys = SOREN_SMALL_KEYS_DEFAULT;
}
