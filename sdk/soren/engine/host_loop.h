/*
 * host_loop.h - the host loops that SOREN_PLUGIN compiles into a CUDA
 * plugin beside its GPU launchers (soren_cpu_stage, soren/engine/abi.h).
 *
 * The CPU engine calls a plugin's map through a pointer for every record,
 * and the map calls the engine's emitter through a pointer for every pair:
 * for a histogram's pixel that is four calls around three additions.  A
 * host loop is compiled with the stage's map, so the map is inlined into
 * it and its pairs reach soren__host_emit, inlined too (soren_emit takes
 * that path for an emitter whose address has its low bit set).  The loop
 * adds exactly what the CPU engine's dense emitters add, in the same order,
 * so the engine's output does not depend on which of them mapped a record.
 */
#ifndef SOREN_ENGINE_HOST_LOOP_H
#define SOREN_ENGINE_HOST_LOOP_H

#include <string.h>

#include <soren/engine/abi.h>
#include <soren/engine/map.cuh>

namespace soren {

/* Where a host loop's pairs go.  The loop hands the map this object's
 * address plus one as its emitter (soren_emit), so that nothing outside the
 * loop sees the object: its fields stay in registers. */
struct host_dense {
    uint32_t stage;
    void *values;
    uint8_t *seen;
    uint64_t key_count;
    bool refused; /* set where a key broke the manifest's rules: the loop stops after
                     its record (whose later pairs may land: the run fails anyway) */
};

__host__ __forceinline__ soren_emitter *host_dense_emitter(host_dense *d)
{
    return (soren_emitter *)((uintptr_t)d + 1);
}

__host__ __forceinline__ host_dense *host_dense_of(soren_emitter *e)
{
    return (host_dense *)((uintptr_t)e - 1);
}

/* Whether stage I has a dense host loop: index keys, summed or counted. */
template <const auto &Desc, uint32_t I> constexpr bool host_dense_stage()
{
    typedef stage_traits<Desc, I> S;
    return S::key_type == SOREN_TYPE_INDEX &&
           (S::op == SOREN_COMBINE_SUM || S::op == SOREN_COMBINE_COUNT);
}

/* *acc += v (a sum) or 1 (a count); integers wrap, i64 through u64. */
template <uint32_t Op, uint32_t Type>
__host__ __forceinline__ void host_add(typename value_of<Type>::type *acc, const void *v)
{
    typedef typename value_of<Type>::type T;
    T y;
    if constexpr (Op == SOREN_COMBINE_COUNT)
        y = (T)1;
    else
        memcpy(&y, v, sizeof y);
    if constexpr (Type == SOREN_TYPE_I64)
        *acc = (T)((uint64_t)*acc + (uint64_t)y);
    else
        *acc = *acc + y;
}

template <const auto &Desc, uint32_t Count, uint32_t I = 0>
__host__ __forceinline__ void host_emit_any(soren_emitter *e, const void *key, uint32_t n,
                                            const void *v)
{
    if constexpr (I < Count) {
        host_dense *d = host_dense_of(e);
        if (d->stage != I) {
            host_emit_any<Desc, Count, I + 1>(e, key, n, v);
            return;
        }
        if constexpr (host_dense_stage<Desc, I>()) {
            typedef stage_traits<Desc, I> S;
            typedef typename value_of<S::value_type>::type T;
            uint32_t k = 0;
            if (n == 4)
                memcpy(&k, key, 4);
            if (n == 4 && k < d->key_count) {
                host_add<S::op, S::value_type>((T *)d->values + k, v);
                /* a load where the key was seen before: stores are what a pair costs */
                if (!d->seen[k])
                    d->seen[k] = 1;
                return;
            }
        }
        d->refused = true;
    }
}

/* soren_cpu_stage.map_dense of stage I: flattened, so that the map and
 * everything it calls are inlined into the loop (the map is also called
 * through its pointer by the CPU engine, which would otherwise keep it a
 * function of its own). */
template <const auto &Desc, uint32_t I>
__host__ __attribute__((flatten)) void map_dense(soren_cpu_dense_args *a)
{
    typedef stage_traits<Desc, I> S;
    host_dense d = {I, a->values, a->seen, a->key_count, false};
    soren_emitter *const e = host_dense_emitter(&d);
    const uint8_t *const data = a->data;
    const uint64_t rs = a->record_size, step = rs ? rs : 1, count = a->count;
    const uint64_t first_offset = a->first_offset, first_index = a->first_index;
    const soren_params *const params = a->params;
    soren_record *const current = a->current;
    *current = soren_record{data, rs, first_offset, first_index};
    if constexpr (Desc[I].map_run != nullptr) {
        /* The run map takes the records at once; where it emitted a key the
         * manifest refuses, none counts as mapped, so that the engine maps
         * them again one by one and names the record. */
        const soren_record_run run = {data, rs, count, first_offset, first_index};
        Desc[I].map_run(e, &run, params);
        a->done = d.refused ? 0 : count;
        return;
    }
    soren_record r;
    r.size = rs;
    uint64_t i = 0;
    for (; i < count; i++) {
        r.data = rs ? data + i * rs : nullptr;
        r.offset = first_offset + i * step;
        r.index = first_index + i;
        /* what a fault's report reads: a fixed record's offset, a task's index */
        if (rs)
            current->offset = r.offset;
        else
            current->index = r.index;
        S::map(e, &r, params);
        if (d.refused)
            break;
    }
    a->done = i;
}

template <const auto &Desc, uint32_t I> constexpr soren_cpu_stage cpu_stage()
{
    void (*dense)(soren_cpu_dense_args *) = nullptr;
    if constexpr (host_dense_stage<Desc, I>())
        dense = &map_dense<Desc, I>;
    return soren_cpu_stage{sizeof(soren_cpu_stage), SOREN_ABI_MINOR, dense, {0, 0, 0, 0}};
}

} /* namespace soren */

#endif /* SOREN_ENGINE_HOST_LOOP_H */
