/*
 * internal.h - what the CPU engine (cpu.c) and its initial monitoring
 * (monitor.c) share: the check of every emitted key against the manifest,
 * so both refuse the same keys with the same words, and the thread runner.
 * Not installed, not exported.
 */
#ifndef SOREN_CPU_INTERNAL_H
#define SOREN_CPU_INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../base/stage.h"
#include "../error.h"
#include "../io/signals.h"

/* The refusal of a string key over key.max_size, naming the record being
 * mapped where the calling thread maps one (the CPU engine's threads):
 * out of line, so that the check inlined into every emit stays small
 * (marked unused for a file that includes this header and checks no key). */
__attribute__((noinline, cold, unused)) static void
soren__key_too_long(const soren_stage_spec *s, const char *phase, uint32_t len, soren_error *err)
{
    char site[PATH_MAX + 64];
    soren__map_site_describe(site, sizeof site);
    soren_error_set(err, SOREN_EJOB,
                    "%s: %s emitted a key of %u bytes%s%s%s; the manifest allows at most %u "
                    "(key.max_size)",
                    s->job_name, phase, len, site[0] ? " (mapping " : "", site,
                    site[0] ? ")" : "", s->key_max_size);
}

/* 1 (with err filled) if key breaks the manifest's rules: a string key
 * longer than key.max_size, a typed key of the wrong size (key_size: the
 * type's size), an index key not under key.count.  phase names who emitted
 * it ("map", "reduce").  Inline: it runs on every emit. */
static inline int soren__key_refused(const soren_stage_spec *s, size_t key_size,
                                     const char *phase, const void *key, uint32_t len,
                                     soren_error *err)
{
    if (s->key_type == SOREN_TYPE_STRING) {
        if (len <= s->key_max_size)
            return 0;
        soren__key_too_long(s, phase, len, err);
        return 1;
    }
    if (len != key_size) {
        soren_error_set(err, SOREN_EJOB,
                        "%s: %s emitted a key of %u bytes; key.type %s has %zu-byte keys",
                        s->job_name, phase, len, soren_type_name(s->key_type), key_size);
        return 1;
    }
    if (s->key_type == SOREN_TYPE_INDEX) {
        uint32_t k;
        memcpy(&k, key, 4);
        if (k < s->key_count)
            return 0;
        if (s->key_count == 0)
            soren_error_set(err, SOREN_EJOB,
                            "%s: %s emitted the index key %u, but key.count is 0", s->job_name,
                            phase, k);
        else
            soren_error_set(err, SOREN_EJOB,
                            "%s: %s emitted the index key %u; the manifest allows 0 to %llu "
                            "(key.count %llu)",
                            s->job_name, phase, k, (unsigned long long)s->key_count - 1,
                            (unsigned long long)s->key_count);
        return 1;
    }
    return 0;
}

/* Runs fn on args[0 .. n) (stride bytes apart), args[0] in the calling
 * thread.  A thread that cannot be started only costs parallelism: callers
 * take their work from a shared counter, so the others do its share. */
void soren__run_threads(unsigned n, void *(*fn)(void *), void *args, size_t stride);

/* Runs fn(arg, i) for every i in [0, count) on up to n threads (no more
 * than count), which take the items from a shared counter in order. */
void soren__run_items(unsigned n, uint64_t count, void (*fn)(void *arg, uint64_t i), void *arg);

#endif /* SOREN_CPU_INTERNAL_H */
