/*
 * regions.cu - the table (or dense array), the key space and the pair
 * space: their sizes, from the options or the projection; their growth
 * when a launch stops for room, keeping their content; and, under a device
 * memory budget, the key space folded a part at a time instead.
 */
#include "run.h"

namespace soren__gpu {

static uint64_t next_pow2(uint64_t x)
{
    uint64_t p = 1;
    while (p < x)
        p <<= 1;
    return p;
}

/* The device bytes of a table of slot_count slots and their values. */
static uint64_t table_bytes(const gpu_run *r, uint64_t slot_count)
{
    return slot_count * (8 + r->spec->value_size);
}

/* A table of slot_count empty slots (and identity values) for the hash and
 * block variants; a claim past slot_limit counts as full. */
static soren_status alloc_table(gpu_run *r, uint64_t slot_count, unsigned long long **slots,
                                uint8_t **values)
{
    *slots = NULL;
    *values = NULL;
    soren_status st = dev_alloc(r, (void **)slots, slot_count * 8, "the hash table");
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)values, slot_count * r->spec->value_size,
                       "the hash table's values");
    if (st != SOREN_OK) {
        dev_free(r, *slots);
        *slots = NULL;
        return st;
    }
    CUDA_TRY(r, cudaMemsetAsync(*slots, 0, slot_count * 8, r->stream));
    CUDA_TRY(r, r->gpu->fill_identity(*values, slot_count, r->stream));
    return SOREN_OK;
}

/* Largest sizes the engine's 32-bit references allow. */
static const uint64_t KEY_SPACE_MAX = 16ull << 30; /* key refs count 4-byte units */
static const uint64_t TABLE_SLOTS_MAX = 1ull << 31; /* block entries hold slot + 1 in 32 bits */

static soren_status grow_table(gpu_run *r)
{
    uint64_t count = r->reg.slot_count * 2;
    if (count > TABLE_SLOTS_MAX)
        return soren_error_set(r->err, SOREN_EJOB, "%s: the hash table cannot grow past %llu "
                               "slots", r->spec->job_name, (unsigned long long)TABLE_SLOTS_MAX);
    unsigned long long *slots = NULL;
    uint8_t *values = NULL;
    soren_status st = alloc_table(r, count, &slots, &values);
    if (st != SOREN_OK)
        return st;
    launch_rehash(GRID(r), r->reg.slots, r->reg.slot_values, r->reg.slot_count, slots, values,
                  count, (uint32_t)r->spec->value_size, r->reg.keys);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) {
        dev_free(r, slots);
        dev_free(r, values);
        return cuda_fail(r, rc, "rehash_kernel", __FILE__, __LINE__);
    }
    st = soren_explain_overflow(r->x, "table", r->reg.slot_count, count, r->err);
    /* The stream orders the frees after the rehash. */
    dev_free(r, r->reg.slots);
    dev_free(r, r->reg.slot_values);
    r->reg.slots = slots;
    r->reg.slot_values = values;
    r->reg.slot_count = count;
    r->reg.slot_limit = count - count / 4;
    return st;
}

/* Grows a region of used bytes to new_size, keeping its content. */
static soren_status grow_region(gpu_run *r, void **region, uint64_t used, uint64_t new_size,
                                const char *what)
{
    void *bigger = NULL;
    soren_status st = dev_alloc(r, &bigger, new_size, what);
    if (st != SOREN_OK)
        return st;
    cudaError_t rc = used ? cudaMemcpyAsync(bigger, *region, used, cudaMemcpyDeviceToDevice,
                                            r->stream)
                          : cudaSuccess;
    if (rc != cudaSuccess) {
        dev_free(r, bigger);
        return cuda_fail(r, rc, "cudaMemcpyAsync", __FILE__, __LINE__);
    }
    dev_free(r, *region);
    *region = bigger;
    return SOREN_OK;
}

soren_status grow_keys(gpu_run *r, uint64_t used, uint64_t need)
{
    uint64_t size = r->reg.keys_capacity;
    while (size < need)
        size *= 2;
    if (size > KEY_SPACE_MAX)
        size = KEY_SPACE_MAX;
    if (size <= r->reg.keys_capacity || size < need)
        return soren_error_set(r->err, SOREN_EJOB, "%s: the key space cannot grow past %llu "
                               "bytes (key references are 32-bit)", r->spec->job_name,
                               (unsigned long long)KEY_SPACE_MAX);
    soren_status st = grow_region(r, (void **)&r->reg.keys, used, size, "the key space");
    if (st == SOREN_OK)
        st = soren_explain_overflow(r->x, "keys", r->reg.keys_capacity, size, r->err);
    if (st == SOREN_OK)
        r->reg.keys_capacity = size;
    return st;
}

soren_status grow_pairs(gpu_run *r, uint64_t used, uint64_t need)
{
    uint64_t count = r->reg.pair_capacity ? r->reg.pair_capacity : 1;
    while (count < need)
        count *= 2;
    uint32_t vs = (uint32_t)r->spec->value_size;
    soren_status st = grow_region(r, (void **)&r->reg.pair_keys, used * 4, count * 4,
                                  "the pair keys");
    if (st == SOREN_OK)
        st = grow_region(r, (void **)&r->reg.pair_values, used * vs, count * vs, "the pair values");
    if (st == SOREN_OK)
        st = soren_explain_overflow(r->x, "pairs", r->reg.pair_capacity, count, r->err);
    if (st == SOREN_OK)
        r->reg.pair_capacity = count;
    return st;
}

/* The counters for a stopped launch's resume: the key and pair space used
 * as given, no status, no slots counted (grow_after_overflow counts those a
 * table keeps). */
cudaError_t restart_counters(gpu_run *r, uint64_t keys_used, uint64_t pairs_used)
{
    unsigned long long reset[SLOTS_USED + 1] = {keys_used, pairs_used, 0, 0, 0, 0};
    return cudaMemcpyAsync(r->counters, reset, sizeof reset, cudaMemcpyHostToDevice, r->stream);
}

/* After a launch stopped on a full region: grow what ran out, and set the
 * counters to what the launch really used (claims past a region's end
 * failed, and their threads will claim again). */
soren_status grow_after_overflow(gpu_run *r, const unsigned long long *c)
{
    unsigned status = (unsigned)c[STATUS];
    uint64_t keys_used = c[KEYS_USED] < r->reg.keys_capacity ? c[KEYS_USED] : r->reg.keys_capacity;
    uint64_t pairs_used = c[PAIRS_USED] < r->reg.pair_capacity ? c[PAIRS_USED]
                                                                : r->reg.pair_capacity;
    soren_status st = SOREN_OK;
    if (status & SOREN_GPU_TABLE_FULL)
        st = grow_table(r);
    if (st == SOREN_OK && (status & SOREN_GPU_KEYS_FULL))
        st = grow_keys(r, keys_used, r->reg.keys_capacity * 2);
    if (st == SOREN_OK && (status & SOREN_GPU_PAIRS_FULL))
        st = grow_pairs(r, pairs_used, r->reg.pair_capacity * 2);
    if (st != SOREN_OK)
        return st;
    CUDA_TRY(r, restart_counters(r, keys_used, pairs_used));
    /* Count the slots taken, those kept for a key that comes again among
     * them (a grown table has none): plugins before ABI 1.5 counted the
     * claims that lost a race, or found the key space full. */
    if (r->reg.slots) {
        launch_count_used(GRID(r), r->reg.slots, r->reg.slot_count, r->counters + SLOTS_USED);
        CUDA_TRY(r, cudaGetLastError());
    }
    return SOREN_OK;
}

/* Whether this pass folds every key (no part of the key space waits). */
bool whole_key_space(const gpu_run *r)
{
    return r->reg.key_first == 0 && r->reg.key_last == KEY_LAST;
}

/* Whether a full table folds half its part of the key space instead of
 * growing: under a device memory budget, where growing would take the
 * table and the key space past half of it (the input's chunks take the
 * other half), for a table that folds values (hash, block) and holds at
 * least NARROW_MIN_KEYS keys.  Regions too small for that many grow past
 * the budget instead: halving the part again and again would not make a
 * key fit, and every narrower part costs a pass (budgets of a few bytes
 * would take billions). */
bool narrowing_due(const gpu_run *r, const unsigned long long *c)
{
    enum { NARROW_MIN_KEYS = 256 };
    const uint64_t budget = r->opt->device_memory;
    const unsigned status = (unsigned)c[STATUS];
    if (!budget || !r->reg.slots || r->spec->combine == SOREN_COMBINE_NONE ||
        (r->variant != SOREN_VARIANT_HASH && r->variant != SOREN_VARIANT_BLOCK) ||
        !(status & (SOREN_GPU_TABLE_FULL | SOREN_GPU_KEYS_FULL)) ||
        c[SLOTS_USED] < NARROW_MIN_KEYS || r->reg.key_first == r->reg.key_last)
        return false;
    const uint64_t slots = r->reg.slot_count * (status & SOREN_GPU_TABLE_FULL ? 2 : 1);
    const uint64_t table = table_bytes(r, slots);
    const uint64_t keys = r->reg.keys_capacity * (status & SOREN_GPU_KEYS_FULL ? 2 : 1);
    return table + keys > budget / 2;
}

/* Halves the part of the key space the stopped pass folds: session_run
 * empties the table and maps the inputs again for the first half, the
 * second half's keys wait for a later pass. */
soren_status narrow_key_range(gpu_run *r)
{
    if (r->spec->code->gpu->abi_minor < 6)
        return soren_error_set(r->err, SOREN_EPLUGIN, "%s: its table outgrew --device-memory "
                               "%llu bytes, and its device code predates plugin ABI 1.6, which "
                               "folds the key space a part at a time; rebuild it with this "
                               "Soren's SDK, or give it more device memory",
                               r->spec->job_name, (unsigned long long)r->opt->device_memory);
    r->reg.key_last = r->reg.key_first + (r->reg.key_last - r->reg.key_first) / 2;
    r->reg.narrowed = true;
    r->x->narrowings++;
    return SOREN_OK;
}

/* Every slot of the table (or dense array) empty, its value the identity. */
soren_status empty_slots(gpu_run *r)
{
    CUDA_TRY(r, cudaMemsetAsync(r->reg.slots, 0, r->reg.slot_count * 8, r->stream));
    CUDA_TRY(r, r->gpu->fill_identity(r->reg.slot_values, r->reg.slot_count, r->stream));
    return SOREN_OK;
}

/* The table and the key space empty again, for a pass that begins anew on
 * a narrower part of the key space. */
soren_status empty_table(gpu_run *r)
{
    soren_status st = empty_slots(r);
    if (st == SOREN_OK)
        CUDA_TRY(r, restart_counters(r, SOREN_KEY_ALIGN, 0));
    return st;
}

/* The entries of a hash or block launch's per-block table: block's holds
 * its few keys, hash's caches the frequent short keys of many, so that they
 * fold in shared memory instead of waiting on the global table
 * (bench/results/h100/per-block-tables.md).  Both take the largest size by
 * default: a table sized to a few keys (64 entries for a rare grep) is no
 * faster, and slows k-means, its more resident blocks flushing the same 24
 * keys into the global table.  Plugins built
 * before ABI 1.4 have a fixed block table and none for hash. */
static uint32_t block_table_entries(gpu_run *r)
{
    const soren_gpu_options *o = r->opt;
    if (r->spec->combine == SOREN_COMBINE_NONE)
        return 0; /* grouping for a reduce: nothing to fold */
    if (r->spec->code->gpu->abi_minor < 4)
        return r->variant == SOREN_VARIANT_BLOCK ? SOREN_GPU_BLOCK_SLOTS : 0;
    if (o->block_slots == SOREN_GPU_NO_BLOCK_TABLE)
        return 0; /* straight into the global table, block's launch too */
    uint64_t want = o->block_slots ? o->block_slots : SOREN_GPU_BLOCK_SLOTS;
    return (uint32_t)next_pow2(want < SOREN_GPU_BLOCK_SLOTS ? want : SOREN_GPU_BLOCK_SLOTS);
}

/* Sizes the table, key space and pair space from the options (initial
 * sizes: they grow on overflow) or the projection, and allocates them. */
soren_status allocate_regions(gpu_run *r)
{
    const soren_stage_spec *s = r->spec;
    const soren_gpu_options *o = r->opt;
    const soren_projection *p = &r->x->projection;
    const soren_metrics *m = &r->x->metrics;
    switch (r->variant) {
    case SOREN_VARIANT_DENSE: {
        /* No hashing: slot i holds key i, whose bytes the host stores. */
        uint64_t k = s->key_count, vs = s->value_size;
        r->reg.slot_count = k;
        r->reg.keys_capacity = 4 + 8 * k;
        ALLOC(r, r->reg.slots, k * 8, "the dense array");
        ALLOC(r, r->reg.slot_values, k * vs, "the dense array's values");
        soren_status st = empty_slots(r);
        if (st != SOREN_OK)
            return st;
        ALLOC(r, r->reg.keys, r->reg.keys_capacity, "the key space");
        launch_dense_keys(GRID(r), r->reg.keys, k);
        CUDA_TRY(r, cudaGetLastError());
        /* the values, then a presence byte per key (soren/engine/map.cuh);
         * none with --block-slots 0, every pair to the global array */
        uint64_t shared = ((k * vs + 7) & ~7ull) + ((k + 7) & ~7ull);
        r->reg.dense_shared = shared <= (48u << 10) && o->block_slots != SOREN_GPU_NO_BLOCK_TABLE
                                  ? (uint32_t)shared
                                  : 0;
        return SOREN_OK;
    }
    case SOREN_VARIANT_HASH:
    case SOREN_VARIANT_BLOCK: {
        r->reg.block_slots = block_table_entries(r);
        r->x->block_slots = r->reg.block_slots;
        uint64_t slots = next_pow2(o->table_slots ? o->table_slots : p->table_slots);
        r->reg.keys_capacity = o->key_bytes ? o->key_bytes : p->key_space;
        if (o->device_memory && s->combine != SOREN_COMBINE_NONE) {
            /* Under a budget the projection may not have it all: a quarter
             * of the budget each for the table and the key space, which
             * then fold part of the key space (narrowing_due) rather than
             * grow past half of it. */
            const uint64_t quarter = o->device_memory / 4;
            while (slots > 1024 && table_bytes(r, slots) > quarter)
                slots /= 2;
            if (r->reg.keys_capacity > quarter)
                r->reg.keys_capacity = quarter;
        }
        if (slots > TABLE_SLOTS_MAX)
            slots = TABLE_SLOTS_MAX;
        r->reg.slot_count = slots < 2 ? 2 : slots;
        r->reg.slot_limit = r->reg.slot_count - r->reg.slot_count / 4;
        soren_status st = alloc_table(r, r->reg.slot_count, &r->reg.slots, &r->reg.slot_values);
        if (st != SOREN_OK)
            return st;
        if (s->combine == SOREN_COMBINE_NONE) {
            /* grouping for a reduce: the pairs refer to the table's keys */
            r->reg.pair_capacity = o->pair_slots ? o->pair_slots : p->pair_slots;
            ALLOC(r, r->reg.pair_keys, r->reg.pair_capacity * sizeof(uint32_t), "the pair keys");
            ALLOC(r, r->reg.pair_values, r->reg.pair_capacity * s->value_size, "the pair values");
        }
        break;
    }
    default: {
        /* Each pair keeps its own copy of its key. */
        r->reg.pair_capacity = o->pair_slots ? o->pair_slots : p->pair_slots;
        uint64_t per_pair = m->ran && m->pairs ? (m->key_bytes + m->pairs - 1) / m->pairs
                                                 : soren__key_footprint(8);
        r->reg.keys_capacity = o->key_bytes ? o->key_bytes
                                        : r->reg.pair_capacity * per_pair + (1 << 20);
        if (r->variant == SOREN_VARIANT_SORT) {
            /* as many as the record index holds; ensure_records grows both */
            ALLOC(r, r->reg.record_pairs, (r->in.record_capacity + 1) * 8,
                  "the per-record pair counts");
            ALLOC(r, r->reg.record_key_bytes, (r->in.record_capacity + 1) * 8,
                  "the per-record key sizes");
        }
        ALLOC(r, r->reg.pair_keys, r->reg.pair_capacity * sizeof(uint32_t), "the pair keys");
        ALLOC(r, r->reg.pair_values, r->reg.pair_capacity * s->value_size, "the pair values");
    }
    }
    if (r->reg.keys_capacity > KEY_SPACE_MAX)
        r->reg.keys_capacity = KEY_SPACE_MAX;
    if (r->reg.keys_capacity < 64)
        r->reg.keys_capacity = 64;
    /* A whole number of key units: after an overflow the bytes used are cut
     * back to the capacity, and the next key must start aligned. */
    r->reg.keys_capacity =
        (r->reg.keys_capacity + SOREN_KEY_ALIGN - 1) & ~(uint64_t)(SOREN_KEY_ALIGN - 1);
    ALLOC(r, r->reg.keys, r->reg.keys_capacity, "the key space");
    return SOREN_OK;
}

} /* namespace soren__gpu */
