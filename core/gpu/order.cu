/*
 * order.cu - the run's result: the table's used slots or the pairs merged
 * into a list (grouped for a reduce without a combine), reduced, put in the
 * stage's order with CUB sorts, packed as a soren_result on the device and
 * copied to the host; and a small result in one wait.
 */
#include "run.h"

#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <stdlib.h>
#include <string.h>

namespace soren__gpu {

/* The indices of the table's used slots, in slot order, into used (room
 * for every slot); their count goes to the counters' SELECTED. */
static soren_status select_used(gpu_run *r, uint64_t *used)
{
    thrust::counting_iterator<uint64_t> slots(0);
    CUB_RUN(r, cub::DeviceSelect::If, slots, used, r->counters + SELECTED,
            (int64_t)r->reg.slot_count, slot_used{r->reg.slots});
    return SOREN_OK;
}

/* The combine's identity value on the device, which emptied slots get. */
static soren_status ensure_identity(gpu_run *r)
{
    if (r->reg.identity)
        return SOREN_OK;
    ALLOC(r, r->reg.identity, r->spec->value_size, "the identity value");
    CUDA_TRY(r, r->gpu->fill_identity(r->reg.identity, 1, r->stream));
    return SOREN_OK;
}

/* Hash, block, dense: the used slots, compacted by a parallel select, are
 * the list. */
static soren_status merge_table(gpu_run *r)
{
    uint32_t vs = (uint32_t)r->spec->value_size;
    uint64_t *used = NULL;
    ALLOC(r, used, r->reg.slot_count * sizeof(uint64_t), "the list of used slots");
    soren_status st = select_used(r, used);
    unsigned long long c[COUNTER_COUNT];
    if (st == SOREN_OK)
        st = read_counters(r, c);
    /* a dense launch's status, read here (launch_map) */
    if (st == SOREN_OK && (c[STATUS] & SOREN_GPU_BAD_KEY))
        st = bad_key_error(r, c[BAD_KEY]);
    uint64_t n = st == SOREN_OK ? c[SELECTED] : 0;
    r->list.n = r->list.last_keys = n;
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&r->list.refs, n * 4, "the merged keys");
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&r->list.values, n * vs, "the merged values");
    if (st == SOREN_OK)
        st = ensure_identity(r);
    if (st == SOREN_OK) {
        launch_gather_slots(GRID(r), used, n, r->reg.slots, r->reg.slot_values, r->reg.identity, vs,
                            r->list.refs, r->list.values);
        cudaError_t rc = cudaGetLastError();
        if (rc != cudaSuccess)
            st = cuda_fail(r, rc, "gather_slots_kernel", __FILE__, __LINE__);
    }
    dev_free(r, used);
    return st;
}

static soren_status alloc_order_buffers(gpu_run *r)
{
    ALLOC(r, r->list.perm, r->list.n * 4, "the sort order");
    ALLOC(r, r->list.perm_alt, r->list.n * 4, "the sort order");
    ALLOC(r, r->list.bits, r->list.n * 8, "the sort keys");
    ALLOC(r, r->list.bits_alt, r->list.n * 8, "the sort keys");
    launch_iota(GRID(r), r->list.perm, r->list.n);
    CUDA_TRY(r, cudaGetLastError());
    return SOREN_OK;
}

/* Stable radix sort of perm by the low end_bit bits of bits (filled for the
 * current perm). */
static soren_status radix_perm(gpu_run *r, int end_bit)
{
    cub::DoubleBuffer<uint64_t> keys(r->list.bits, r->list.bits_alt);
    cub::DoubleBuffer<uint32_t> perm(r->list.perm, r->list.perm_alt);
    CUB_RUN(r, cub::DeviceRadixSort::SortPairs, keys, perm, (int64_t)r->list.n, 0, end_bit);
    if (perm.Current() != r->list.perm) {
        uint32_t *t = r->list.perm;
        r->list.perm = r->list.perm_alt;
        r->list.perm_alt = t;
    }
    if (keys.Current() != r->list.bits) {
        uint64_t *t = r->list.bits;
        r->list.bits = r->list.bits_alt;
        r->list.bits_alt = t;
    }
    return SOREN_OK;
}

/* Stable sort of perm by key. */
static soren_status sort_by_key(gpu_run *r)
{
    if (r->spec->key_type == SOREN_TYPE_STRING) {
        CUB_RUN(r, cub::DeviceMergeSort::StableSortKeys, r->list.perm, (int64_t)r->list.n,
                string_key_less{r->reg.keys, r->list.refs});
        return SOREN_OK;
    }
    launch_key_bits(GRID(r), r->list.perm, r->list.n, r->list.refs, r->reg.keys,
                    r->spec->key_type, r->list.bits);
    CUDA_TRY(r, cudaGetLastError());
    return radix_perm(r, 64);
}

static soren_status sort_by_value(gpu_run *r, bool descending)
{
    launch_value_bits(GRID(r), r->list.perm, r->list.n, r->list.values,
                      (uint32_t)r->spec->value_size, r->spec->value_type, descending,
                      r->list.bits);
    CUDA_TRY(r, cudaGetLastError());
    return radix_perm(r, 64);
}

/* The pair space becomes the list (its keys stay in the key space). */
static soren_status take_pairs(gpu_run *r)
{
    unsigned long long c[COUNTER_COUNT];
    soren_status st = read_counters(r, c);
    if (st != SOREN_OK)
        return st;
    r->list.n = c[PAIRS_USED];
    r->list.refs = r->reg.pair_keys;
    r->list.values = r->reg.pair_values;
    r->reg.pair_keys = NULL;
    r->reg.pair_values = NULL;
    return SOREN_OK;
}

/* The order buffers are sized for the list: drop them when it changes. */
static void free_order_buffers(gpu_run *r)
{
    uint64_t **bits[] = {&r->list.bits, &r->list.bits_alt};
    uint32_t **perms[] = {&r->list.perm, &r->list.perm_alt};
    for (int i = 0; i < 2; i++) {
        dev_free(r, *bits[i]);
        *bits[i] = NULL;
        dev_free(r, *perms[i]);
        *perms[i] = NULL;
    }
}

/* Sorted list entry j starts a run of equal keys: bits[j] = 1; bits_alt
 * gets their running count, and *runs the number of runs. */
static soren_status find_runs(gpu_run *r, bool by_ref, uint64_t *runs)
{
    launch_run_heads(GRID(r), r->list.perm, r->list.n, r->list.refs, r->reg.keys, by_ref,
                     r->list.bits);
    CUDA_TRY(r, cudaGetLastError());
    CUB_RUN(r, cub::DeviceScan::InclusiveSum, r->list.bits, r->list.bits_alt, (int64_t)r->list.n);
    CUDA_TRY(r, cudaMemcpyAsync(runs, r->list.bits_alt + r->list.n - 1, 8, cudaMemcpyDeviceToHost,
                                r->stream));
    WAIT_STREAM(r);
    return SOREN_OK;
}

/* Direct and sort: every pair is in the pair space.  With a combine, sort
 * them by key and fold each run of equal keys into one accumulator. */
static soren_status merge_pairs(gpu_run *r)
{
    soren_status st = take_pairs(r);
    if (st != SOREN_OK || r->spec->combine == SOREN_COMBINE_NONE || r->list.n == 0)
        return st;
    st = alloc_order_buffers(r);
    if (st == SOREN_OK)
        st = sort_by_key(r);
    uint64_t runs = 0;
    if (st == SOREN_OK)
        st = find_runs(r, false, &runs);
    if (st != SOREN_OK)
        return st;
    uint64_t *target = NULL;
    uint32_t *run_refs = NULL;
    uint8_t *run_values = NULL;
    uint32_t vs = (uint32_t)r->spec->value_size;
    st = dev_alloc(r, (void **)&target, r->list.n * 8, "the run of each pair");
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&run_refs, runs * 4, "the merged keys");
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&run_values, runs * vs, "the merged values");
    cudaError_t rc = cudaSuccess;
    if (st == SOREN_OK) {
        launch_run_targets(GRID(r), r->list.perm, r->list.n, r->list.bits_alt, r->list.bits,
                           r->list.refs, target, run_refs);
        rc = cudaGetLastError();
    }
    if (st == SOREN_OK && rc == cudaSuccess)
        rc = (cudaError_t)r->gpu->fill_identity(run_values, runs, r->stream);
    if (st == SOREN_OK && rc == cudaSuccess) {
        soren_gpu_combine_args c = {r->list.values, target, run_values, r->list.n};
        rc = (cudaError_t)r->gpu->combine(&c, r->stream);
    }
    if (st == SOREN_OK && rc != cudaSuccess)
        st = cuda_fail(r, rc, "combining runs of equal keys", __FILE__, __LINE__);
    dev_free(r, target);
    if (st != SOREN_OK) {
        dev_free(r, run_refs);
        dev_free(r, run_values);
        return st;
    }
    /* The runs, already in key order, are the list now. */
    dev_free(r, r->list.refs);
    dev_free(r, r->list.values);
    r->list.refs = run_refs;
    r->list.values = run_values;
    r->list.n = runs;
    launch_iota(GRID(r), r->list.perm, r->list.n);
    CUDA_TRY(r, cudaGetLastError());
    return SOREN_OK;
}

/* Stable sort of perm by the hash table's key refs. */
static soren_status sort_by_ref(gpu_run *r)
{
    launch_ref_bits(GRID(r), r->list.perm, r->list.n, r->list.refs, r->list.bits);
    CUDA_TRY(r, cudaGetLastError());
    return radix_perm(r, 32);
}

/* A reduce without a combine: the pairs, grouped by key, become groups
 * (group_refs, group_start, group_values; r->list.n counts them).  Within a
 * group the values are in the CPU engine's order: sort by value first, then
 * stably by key.  The hash variant's pairs carry the table's refs, which
 * group as they are; the others compare key bytes. */
static soren_status group_pairs(gpu_run *r)
{
    soren_status st = take_pairs(r);
    if (st != SOREN_OK || r->list.n == 0)
        return st;
    const bool by_ref = r->variant == SOREN_VARIANT_HASH;
    const uint32_t vs = (uint32_t)r->spec->value_size;
    uint64_t groups = 0, pairs = r->list.n;
    if ((st = alloc_order_buffers(r)) == SOREN_OK && (st = sort_by_value(r, false)) == SOREN_OK)
        st = by_ref ? sort_by_ref(r) : sort_by_key(r);
    if (st == SOREN_OK)
        st = find_runs(r, by_ref, &groups);
    if (st != SOREN_OK)
        return st;
    ALLOC(r, r->list.group_refs, groups * 4, "the keys of the groups");
    ALLOC(r, r->list.group_start, (groups + 1) * 8, "the starts of the groups");
    ALLOC(r, r->list.group_values, pairs * vs, "the grouped values");
    launch_groups(GRID(r), r->list.perm, pairs, r->list.bits_alt, r->list.bits, r->list.refs,
                  r->list.values, vs, r->list.group_refs, r->list.group_start,
                  r->list.group_values);
    CUDA_TRY(r, cudaGetLastError());
    CUDA_TRY(r, cudaMemcpyAsync(r->list.group_start + groups, &pairs, 8, cudaMemcpyHostToDevice,
                                r->stream));
    if (pairs > UINT32_MAX) {
        unsigned long long largest = 0;
        CUDA_TRY(r, cudaMemsetAsync(r->counters + SELECTED, 0, 8, r->stream));
        launch_largest_group(GRID(r), r->list.group_start, groups, r->counters + SELECTED);
        CUDA_TRY(r, cudaGetLastError());
        CUDA_TRY(r, cudaMemcpyAsync(&largest, r->counters + SELECTED, 8,
                                    cudaMemcpyDeviceToHost, r->stream));
        WAIT_STREAM(r);
        if (largest > UINT32_MAX)
            return soren_error_set(r->err, SOREN_EJOB, "%s: a key has %llu values; reduce "
                                   "takes at most %u at a time", r->spec->job_name, largest,
                                   UINT32_MAX);
    }
    /* The stream orders the frees after the gather. */
    dev_free(r, r->list.refs);
    dev_free(r, r->list.values);
    r->list.refs = NULL;
    r->list.values = NULL;
    free_order_buffers(r);
    r->list.n = groups;
    return SOREN_OK;
}

/* Runs the stage's reduce over the groups (after a combine, each list
 * entry is a group of one value) into a fresh pair space, which becomes the
 * list.  The reduce launch grows and resumes on overflow as map does. */
static soren_status reduce_list(gpu_run *r)
{
    uint64_t groups = r->list.n;
    if (!r->list.group_refs) {
        r->list.group_refs = r->list.refs;
        r->list.group_values = r->list.values;
        r->list.refs = NULL;
        r->list.values = NULL;
    }
    free_order_buffers(r);
    r->emitter = "reduce";
    dev_free(r, r->reg.pair_keys);
    dev_free(r, r->reg.pair_values);
    r->reg.pair_keys = NULL;
    r->reg.pair_values = NULL;
    r->reg.map_pair_capacity = r->reg.pair_capacity;
    r->reg.pair_capacity = r->opt->pair_slots ? r->opt->pair_slots : groups + groups / 4 + 1024;
    ALLOC(r, r->reg.pair_keys, r->reg.pair_capacity * sizeof(uint32_t), "the pair keys");
    ALLOC(r, r->reg.pair_values, r->reg.pair_capacity * r->spec->value_size, "the pair values");
    CUDA_TRY(r, cudaMemsetAsync(r->counters + PAIRS_USED, 0, 8, r->stream));
    soren_status st = launch_map(r, SOREN_GPU_REDUCE, 0, groups);
    if (st != SOREN_OK)
        return st;
    void **spent[] = {(void **)&r->list.group_refs, (void **)&r->list.group_start,
                      (void **)&r->list.group_values};
    for (int i = 0; i < 3; i++) {
        dev_free(r, *spent[i]);
        *spent[i] = NULL;
    }
    return take_pairs(r);
}

/* A list of string keys of at most ORDER_RADIX_BYTES bytes is put in order
 * by radix passes, one for each 8 bytes of the longest, where a merge sort
 * compares keys a pair at a time (13 million keys of up to 52 bytes took
 * it 154 ms on an H100).  The passes grow with the longest key (a key may
 * have 65,536 bytes): a list with a longer one is merge-sorted. */
enum { ORDER_RADIX_BYTES = 64 };

/* The longest key of the list, in *longest; each key's size is left in
 * r->list.bits, in the list's order. */
static soren_status longest_key(gpu_run *r, uint64_t *longest)
{
    launch_key_sizes(GRID(r), r->list.perm, r->list.n, r->list.refs, r->reg.keys, r->list.bits);
    CUDA_TRY(r, cudaGetLastError());
    CUB_RUN(r, cub::DeviceReduce::Max, r->list.bits, r->counters + SELECTED, (int64_t)r->list.n);
    CUDA_TRY(r, cudaMemcpyAsync(longest, r->counters + SELECTED, 8, cudaMemcpyDeviceToHost,
                                r->stream));
    WAIT_STREAM(r);
    return SOREN_OK;
}

/* Stable sort of perm by key, string keys as the CPU engine orders them
 * (bytes, then the shorter first): least significant first, by size, then
 * by each 8 bytes zero-padded from the last to the first, each pass stable
 * (where one key is the other and zeros, the size decides; elsewhere the
 * bytes do). */
static soren_status order_by_key(gpu_run *r)
{
    uint64_t longest = 0;
    soren_status st = SOREN_OK;
    if (r->spec->key_type != SOREN_TYPE_STRING ||
        (st = longest_key(r, &longest)) != SOREN_OK || longest > ORDER_RADIX_BYTES)
        return st == SOREN_OK ? sort_by_key(r) : st;
    if ((st = radix_perm(r, 7)) != SOREN_OK) /* by the sizes longest_key left: at most 64 */
        return st;
    for (uint32_t w = (uint32_t)((longest + 7) / 8); w-- > 0;) {
        launch_key_word(GRID(r), r->list.perm, r->list.n, r->list.refs, r->reg.keys, w,
                        r->list.bits);
        CUDA_TRY(r, cudaGetLastError());
        if ((st = radix_perm(r, 64)) != SOREN_OK)
            return st;
    }
    return SOREN_OK;
}

/* Puts the list in the stage's order (the CPU engine's, see result.h). */
static soren_status order_list(gpu_run *r, bool key_sorted)
{
    if (r->list.n == 0)
        return SOREN_OK;
    soren_status st = SOREN_OK;
    if (!r->list.perm)
        st = alloc_order_buffers(r);
    if (st != SOREN_OK)
        return st;
    /* A combine leaves one pair per key; a reduce may emit any pairs. */
    bool unique_keys = r->spec->combine != SOREN_COMBINE_NONE &&
                       r->spec->reduce != SOREN_REDUCE_FUNCTION;
    switch (r->spec->order) {
    case SOREN_ORDER_NONE:
        break;
    case SOREN_ORDER_KEY:
        /* Pairs may share a key: ties by value, so sort by value first and
         * rely on the key sort being stable. */
        if (!unique_keys)
            st = sort_by_value(r, false);
        if (st == SOREN_OK && !key_sorted)
            st = order_by_key(r);
        break;
    case SOREN_ORDER_VALUE_DESC:
    case SOREN_ORDER_VALUE_ASC:
        if (!unique_keys)
            st = sort_by_value(r, false);
        if (st == SOREN_OK && !key_sorted)
            st = order_by_key(r);
        if (st == SOREN_OK)
            st = sort_by_value(r, r->spec->order == SOREN_ORDER_VALUE_DESC);
        break;
    }
    if (st == SOREN_OK && r->spec->limit && r->list.n > r->spec->limit)
        r->list.n = r->spec->limit;
    return st;
}

/* The last run's packed result, spent. */
void free_packed(gpu_run *r)
{
    void **packed[] = {(void **)&r->packed.keys, (void **)&r->packed.values,
                       (void **)&r->packed.offsets};
    for (int i = 0; i < 3; i++) {
        dev_free(r, *packed[i]);
        *packed[i] = NULL;
    }
    r->packed.n = r->packed.key_bytes = 0;
    r->packed.as_pairs = false;
}

/* Packs the ordered list on the device as a soren_result lays it out (keys
 * back to back at their offsets, values in order), or as_pairs as the next
 * stage's pairs input (see gpu_packed), into packed_*, which a session
 * keeps until its next run. */
static soren_status pack_result(gpu_run *r, bool as_pairs)
{
    free_packed(r);
    uint64_t n = r->list.n;
    uint32_t vs = (uint32_t)r->spec->value_size;
    r->packed.n = n;
    if (n == 0)
        return SOREN_OK;
    ALLOC(r, r->packed.offsets, (n + 1) * 8, "the result's key offsets");
    /* Typed keys have one size: their offsets need no scan, and the host
     * knows their total without asking the device. */
    const uint32_t key_size = (uint32_t)soren_type_size((soren_type)r->spec->key_type);
    if (key_size) {
        r->packed.key_bytes = n * key_size;
    } else {
        launch_key_sizes(GRID(r), r->list.perm, n, r->list.refs, r->reg.keys, r->list.bits_alt);
        CUDA_TRY(r, cudaGetLastError());
        CUB_RUN(r, cub::DeviceScan::ExclusiveSum, r->list.bits_alt, r->packed.offsets, (int64_t)n);
        uint64_t last_offset = 0, last_size = 0;
        CUDA_TRY(r, cudaMemcpyAsync(&last_offset, r->packed.offsets + n - 1, 8,
                                    cudaMemcpyDeviceToHost, r->stream));
        CUDA_TRY(r, cudaMemcpyAsync(&last_size, r->list.bits_alt + n - 1, 8, cudaMemcpyDeviceToHost,
                                    r->stream));
        WAIT_STREAM(r);
        r->packed.key_bytes = last_offset + last_size;
        CUDA_TRY(r, cudaMemcpyAsync(r->packed.offsets + n, &r->packed.key_bytes, 8,
                                    cudaMemcpyHostToDevice, r->stream));
    }
    if (as_pairs) {
        ALLOC(r, r->packed.keys, r->packed.key_bytes + n * vs, "the pairs for the next stage");
        launch_pack(GRID(r), r->list.perm, n, r->list.refs, r->reg.keys, key_size,
                    r->packed.offsets, r->list.values, vs, r->packed.keys, NULL);
        r->packed.key_bytes += n * vs;
        r->packed.as_pairs = true;
    } else {
        ALLOC(r, r->packed.keys, r->packed.key_bytes, "the result's keys");
        ALLOC(r, r->packed.values, n * vs, "the result's values");
        launch_pack(GRID(r), r->list.perm, n, r->list.refs, r->reg.keys, key_size,
                    r->packed.offsets, r->list.values, vs, r->packed.keys, r->packed.values);
    }
    CUDA_TRY(r, cudaGetLastError());
    return SOREN_OK;
}

/* out takes n pairs from host memory: keys back to back (key_total bytes)
 * at offsets (n + 1 of them; NULL: keys of key_size bytes each), and the
 * values. */
static soren_status take_host_pairs(gpu_run *r, soren_result *out, uint64_t n, const uint8_t *keys,
                                    uint64_t key_total, const uint64_t *offsets, uint32_t key_size,
                                    const uint8_t *values)
{
    const uint64_t vs = r->spec->value_size;
    soren_result_destroy(out);
    if (n == 0)
        return SOREN_OK;
    uint8_t *k = (uint8_t *)malloc(key_total ? key_total : 1), *v = (uint8_t *)malloc(n * vs);
    uint64_t *o = (uint64_t *)malloc((n + 1) * 8);
    if (!k || !v || !o) {
        free(k);
        free(v);
        free(o);
        return soren_error_set(r->err, SOREN_ENOMEM, "%s: out of host memory for %llu results",
                               r->spec->job_name, (unsigned long long)n);
    }
    memcpy(k, keys, key_total);
    memcpy(v, values, n * vs);
    for (uint64_t i = 0; i <= n; i++)
        o[i] = offsets ? offsets[i] : i * key_size;
    out->count = n;
    out->key_bytes = k;
    out->key_offset = o;
    out->values = v;
    return SOREN_OK;
}

/* Copies the packed result into out's host arrays, and records mark 8 (the
 * end of the download) once the copies are issued.  A small result comes
 * through the pinned readback buffer, so that the host waits once, on the
 * mark. */
static soren_status copy_result(gpu_run *r, soren_result *out)
{
    uint64_t n = r->packed.n, key_total = r->packed.key_bytes;
    uint32_t vs = (uint32_t)r->spec->value_size;
    uint64_t sizes[3] = {key_total, n ? (n + 1) * 8 : 0, n * vs};
    const void *from[3] = {r->packed.keys, r->packed.offsets, r->packed.values};
    if (sizes[0] + sizes[1] + sizes[2] <= READBACK_BYTES) {
        for (uint64_t i = 0, at = 0; i < 3 && n; at += sizes[i], i++)
            CUDA_TRY(r, cudaMemcpyAsync(r->readback + at, from[i], sizes[i],
                                        cudaMemcpyDeviceToHost, r->stream));
        CUDA_TRY(r, cudaEventRecord(r->mark[8], r->stream));
        soren_status st = wait_mark(r, 8);
        if (st != SOREN_OK)
            return st;
        const uint8_t *at = r->readback;
        return take_host_pairs(r, out, n, at, key_total, (const uint64_t *)(at + sizes[0]), 0,
                               at + sizes[0] + sizes[1]);
    }
    /* Too large for the readback buffer: straight into the result's arrays,
     * whose copies dwarf the waits. */
    void *to[3] = {NULL, NULL, NULL};
    soren_status st = SOREN_OK;
    for (int i = 0; i < 3; i++)
        if (!(to[i] = malloc(sizes[i] ? sizes[i] : 1)))
            st = soren_error_set(r->err, SOREN_ENOMEM, "%s: out of host memory for %llu "
                                 "results", r->spec->job_name, (unsigned long long)n);
    cudaError_t rc = cudaSuccess;
    for (int i = 0; i < 3 && st == SOREN_OK && rc == cudaSuccess; i++)
        rc = cudaMemcpyAsync(to[i], from[i], sizes[i], cudaMemcpyDeviceToHost, r->stream);
    if (st == SOREN_OK && rc == cudaSuccess)
        rc = cudaEventRecord(r->mark[8], r->stream);
    if (st == SOREN_OK && rc != cudaSuccess)
        st = cuda_fail(r, rc, "copying the result back", __FILE__, __LINE__);
    if (st == SOREN_OK)
        st = wait_mark(r, 8);
    if (st != SOREN_OK) {
        for (int i = 0; i < 3; i++)
            free(to[i]);
        return st;
    }
    soren_result_destroy(out);
    out->count = n;
    out->key_bytes = (uint8_t *)to[0];
    out->key_offset = (uint64_t *)to[1];
    out->values = (uint8_t *)to[2];
    return SOREN_OK;
}

/* The list and its order buffers, spent once the result is packed. */
void release_list(gpu_run *r)
{
    void **spent[] = {(void **)&r->list.refs,        (void **)&r->list.values,
                      (void **)&r->list.group_refs,  (void **)&r->list.group_start,
                      (void **)&r->list.group_values};
    for (size_t i = 0; i < sizeof spent / sizeof spent[0]; i++) {
        dev_free(r, *spent[i]);
        *spent[i] = NULL;
    }
    free_order_buffers(r);
    r->list.n = 0;
}

/* Merges the table or the pairs, reduces, orders, packs and copies the
 * result into out (marks 4 to 8): each step as large as the list, whose
 * size the host reads.  With leave, a result of pairs is left on the device
 * as the next stage's input (packed.as_pairs) and out stays empty. */
soren_status result_after_map(gpu_run *r, bool leave, soren_result *out)
{
    const soren_stage_spec *s = r->spec;
    soren_status st = mark(r, 4, "merge", "merge");
    const bool reducing = s->reduce == SOREN_REDUCE_FUNCTION;
    bool key_sorted = false;
    if (st == SOREN_OK) {
        if (groups_pairs(s)) {
            st = group_pairs(r);
        } else if (r->reg.slots) {
            st = merge_table(r);
            /* dense: slot i is key i, and the select keeps the slots' order */
            key_sorted = r->variant == SOREN_VARIANT_DENSE;
        } else {
            st = merge_pairs(r);
            key_sorted = s->combine != SOREN_COMBINE_NONE;
        }
    }
    if (st == SOREN_OK && (st = mark(r, 5, "reduce", reducing ? "reduce" : NULL)) == SOREN_OK &&
        reducing && r->list.n) {
        st = reduce_list(r);
        key_sorted = false;
    }
    if (st == SOREN_OK && (st = mark(r, 6, "ordering", "order")) == SOREN_OK)
        st = order_list(r, key_sorted);
    leave = leave && r->list.n > 0;
    if (st == SOREN_OK && (st = mark(r, 7, "copying the result back", "download")) == SOREN_OK)
        st = pack_result(r, leave);
    if (st == SOREN_OK && leave) { /* mark 8 ends the marks, as the copy's does */
        soren_result_destroy(out);
        if ((st = mark(r, 8, "leaving the pairs for the next stage", NULL)) == SOREN_OK)
            st = wait_mark(r, 8);
    } else if (st == SOREN_OK) {
        st = copy_result(r, out); /* ends with mark 8: every mark is done */
    }
    return st;
}

static_assert(COUNTER_COUNT * 8 + SMALL_KEYS * 16 <= READBACK_BYTES,
              "a result in one wait comes back through the readback buffer");

/* Whether this run waits for the GPU once (waits are most of a re-run's
 * overhead beyond its kernels, and the merge's and order's launches most
 * of a small result's device time): a run of a table variant that folds
 * values (hash, block, dense) into typed keys, with no reduce function,
 * whose keys are known to be few: a dense array of at most SMALL_KEYS
 * keys, or a later run whose run before had at most SMALL_KEYS.  Its last
 * map launch goes unread, and one block does the rest
 * (result_in_one_wait). */
bool one_wait(const gpu_run *r)
{
    const soren_stage_spec *s = r->spec;
    const bool few_keys = (r->variant == SOREN_VARIANT_DENSE && s->key_count <= SMALL_KEYS) ||
                          (r->runs > 0 && r->list.last_keys <= SMALL_KEYS);
    return few_keys && r->reg.slots && s->combine != SOREN_COMBINE_NONE &&
           s->reduce != SOREN_REDUCE_FUNCTION && soren_type_size((soren_type)s->key_type) &&
           whole_key_space(r);
}

/* The merge, order, packing and copy of a small result in one wait: one block
 * (small_result_kernel) queued behind the last map launch, unread, writes
 * the counters and the ordered pairs into the pinned readback buffer, and
 * the host waits once.  Where the launch stopped for room, or the table
 * held more than SMALL_KEYS keys, the table is as the launch left it:
 * *again says so (the launch resumed), and the caller takes the result the
 * usual way. */
soren_status result_in_one_wait(gpu_run *r, soren_result *out, bool *again)
{
    const soren_stage_spec *s = r->spec;
    const uint32_t vs = (uint32_t)s->value_size;
    const uint32_t key_size = (uint32_t)soren_type_size((soren_type)s->key_type);
    /* one kernel is the merge; the phases after it take no time */
    soren_status st = mark(r, 4, "merge", "merge");
    if (st == SOREN_OK)
        st = ensure_identity(r);
    free_packed(r);
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&r->packed.keys, SMALL_KEYS * key_size, "the result's keys");
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&r->packed.values, SMALL_KEYS * vs, "the result's values");
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&r->packed.offsets, (SMALL_KEYS + 1) * 8,
                       "the result's key offsets");
    if (st != SOREN_OK)
        return st;
    small_result_args a = {r->reg.slots,
                           r->reg.slot_values,
                           r->reg.slot_count,
                           r->reg.keys,
                           r->reg.identity,
                           (uint32_t)s->key_type,
                           key_size,
                           (uint32_t)s->value_type,
                           vs,
                           (uint32_t)s->order,
                           r->counters,
                           r->packed.keys,
                           r->packed.values,
                           r->packed.offsets,
                           r->readback_on_device};
    launch_small_result(r->stream, a);
    CUDA_TRY(r, cudaGetLastError());
    if ((st = mark(r, 5, "reduce", NULL)) != SOREN_OK ||
        (st = mark(r, 6, "ordering", "order")) != SOREN_OK ||
        (st = mark(r, 7, "copying the result back", "download")) != SOREN_OK ||
        (st = mark(r, 8, "copying the result back", NULL)) != SOREN_OK ||
        (st = wait_mark(r, 8)) != SOREN_OK)
        return st;
    unsigned long long c[COUNTER_COUNT];
    memcpy(c, r->readback, sizeof c);
    if (c[STATUS] & SOREN_GPU_BAD_KEY)
        return bad_key_error(r, c[BAD_KEY]);
    if ((c[STATUS] & SOREN_GPU_OVERFLOW) || c[SELECTED] > SMALL_KEYS) {
        *again = true;
        free_packed(r);
        return finish_launch(r, c);
    }
    const uint64_t n = c[SELECTED];
    r->list.last_keys = n;
    r->counters_fresh = true;
    r->packed.n = s->limit && n > s->limit ? s->limit : n;
    r->packed.key_bytes = r->packed.n * key_size;
    if (r->packed.n == 0)
        free_packed(r); /* as an empty list leaves them */
    const uint8_t *keys = r->readback + COUNTER_COUNT * 8;
    return take_host_pairs(r, out, r->packed.n, keys, r->packed.key_bytes, NULL, key_size,
                           keys + n * key_size);
}

} /* namespace soren__gpu */
