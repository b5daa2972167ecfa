/*
 * iterate.cu - a session's runs again and again on the device, each run's
 * output written over a parameter for the next (run --iterate N), with the
 * host waiting once for a batch of runs instead of once a run.
 *
 * A run of a table variant (hash, block, dense) leaves its pairs in the
 * table, one slot a key.  Behind the map's launch, the feed reads the
 * table as it is: feed_compare checks every pair against the parameter's
 * element it names (soren_iterate_feed's rule), and its last block decides
 * what the run comes to; feed_apply then writes the values over the
 * elements and empties the table for the next run.  A small table's feed
 * is one block that does all three (feed_whole).  The map and the feed are
 * captured once as the body of a CUDA graph's while node, whose condition the
 * decision clears when the output changed no byte (converged), when the
 * batch's runs are done, or when a run needs the host: its launch stopped
 * for room or met a bad key, or a key is past the parameter's end.  That
 * run is then left undone, with the parameter as the run before left it,
 * for the caller to make the usual way.  The last run's table is left as
 * its map filled it, for the usual merge, order and copy of its result.
 */
#include "run.h"

#include <stdlib.h>
#include <string.h>

namespace soren__gpu {

enum { FEED_THREADS = 256, FEED_WHOLE_THREADS = 1024, FEED_WHOLE_SLOTS = 4 * FEED_WHOLE_THREADS };

/* A batch as the host sets it up and the feed leaves it. */
struct feed_state {
    unsigned long long runs;   /* runs of the batch fed (or, the last, compared) */
    unsigned long long limit;  /* runs the batch may make */
    unsigned int last_batch;   /* the batch ends the loop: its last run keeps its table */
    unsigned int compare_last; /* and that run only compares */
    unsigned int end;          /* soren_gpu_loop_end */
    /* a run's, from feed_compare to feed_apply */
    unsigned int changed, outside, blocks_done;
    unsigned int write, empty; /* the decision: write the values; empty the table */
};

struct feed_args {
    unsigned long long *slots;
    uint8_t *slot_values;
    uint64_t slot_count;
    const uint8_t *keys; /* NULL: slot i holds key i (dense's array) */
    const uint8_t *identity;
    unsigned long long *counters;
    uint32_t key_size, value_size;
    uint8_t *param;
    uint64_t param_size;
    feed_state *state;
    cudaGraphConditionalHandle going;
};

/* The element slot i's pair names: its key, a u32, index or u64 key, read
 * little-endian; dense's slot i is key i, with no key to read. */
__device__ static uint64_t element_of(const feed_args &a, uint64_t i)
{
    if (!a.keys)
        return i;
    uint64_t e = 0;
    memcpy(&e, key_bytes_of(a.keys, (uint32_t)a.slots[i]), a.key_size);
    return e;
}

__device__ static bool bytes_differ(const uint8_t *a, const uint8_t *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return true;
    return false;
}

/* Whether a pair of the slots from first, every step, differs from its
 * element (*changed) or names one past the end (*outside). */
__device__ static void compare_slots(const feed_args &a, uint64_t first, uint64_t step,
                                     bool *changed, bool *outside)
{
    const uint64_t elements = a.param_size / a.value_size;
    for (uint64_t i = first; i < a.slot_count; i += step) {
        if (!holds_key(a.slots[i]))
            continue;
        const uint64_t e = element_of(a, i);
        if (e >= elements)
            *outside = true;
        else if (bytes_differ(a.param + e * a.value_size, a.slot_values + i * a.value_size,
                              a.value_size))
            *changed = true;
    }
}

/* What the run comes to, from what the compare found (one thread): the
 * decision for the apply, the runs, the end, the graph's condition. */
__device__ static void decide(const feed_args &a, bool stopped, bool outside, bool any)
{
    feed_state *st = a.state;
    const bool host = stopped || outside;
    const bool final = st->runs + 1 == st->limit;
    /* LIMIT: the batch's runs are done (the iteration's, where it compared) */
    const unsigned int end = host   ? SOREN_GPU_LOOP_HOST
                             : !any ? SOREN_GPU_LOOP_CONVERGED
                             : final ? SOREN_GPU_LOOP_LIMIT
                                     : SOREN_GPU_LOOP_GOING;
    st->write = !host && any && !(final && st->compare_last);
    /* the table stays for the host's result where the iteration ends, and
     * for the host's run where it needs one; else the next run (of this
     * batch or the next) finds it empty */
    st->empty = end == SOREN_GPU_LOOP_GOING || (end == SOREN_GPU_LOOP_LIMIT && !st->last_batch);
    if (!host)
        st->runs++;
    st->end = end;
    cudaGraphSetConditional(a.going, end == SOREN_GPU_LOOP_GOING);
}

/* The decision carried out over the slots from first, every step: the
 * values written over their elements, and the table emptied and the
 * counters fresh for the next run. */
__device__ static void apply_slots(const feed_args &a, uint64_t first, uint64_t step)
{
    const feed_state *st = a.state;
    const bool write = st->write, empty = st->empty;
    if (!write && !empty)
        return;
    for (uint64_t i = first; i < a.slot_count; i += step) {
        if (!holds_key(a.slots[i]))
            continue;
        uint8_t *value = a.slot_values + i * a.value_size;
        if (write) {
            const uint64_t e = element_of(a, i);
            memcpy(a.param + e * a.value_size, value, a.value_size);
        }
        if (empty) {
            a.slots[i] = 0;
            memcpy(value, a.identity, a.value_size);
        }
    }
    if (empty && first < COUNTER_COUNT) /* as session_start's */
        a.counters[first] = first == KEYS_USED ? SOREN_KEY_ALIGN : 0;
}

/* A table of many slots: the compare over the grid, whose last block to
 * finish decides (and resets the flags for the next run)... */
__global__ void __launch_bounds__(FEED_THREADS) feed_compare(feed_args a)
{
    feed_state *st = a.state;
    const bool stopped = a.counters[STATUS] != 0;
    bool changed = false, outside = false;
    if (!stopped)
        compare_slots(a, blockIdx.x * (uint64_t)blockDim.x + threadIdx.x,
                      (uint64_t)gridDim.x * blockDim.x, &changed, &outside);
    if (changed)
        atomicOr(&st->changed, 1u);
    if (outside)
        atomicOr(&st->outside, 1u);
    __threadfence();
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(&st->blocks_done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last || threadIdx.x != 0)
        return;
    __threadfence();
    const volatile feed_state *seen = st;
    decide(a, stopped, seen->outside != 0, seen->changed != 0);
    st->changed = st->outside = st->blocks_done = 0;
}

/* ...and the apply, a launch of its own that waits for the decision. */
__global__ void __launch_bounds__(FEED_THREADS) feed_apply(feed_args a)
{
    apply_slots(a, blockIdx.x * (uint64_t)blockDim.x + threadIdx.x,
                (uint64_t)gridDim.x * blockDim.x);
}

/* A table of at most FEED_WHOLE_SLOTS slots: compare, decision and apply
 * in one block, a launch (and its gap in the loop) fewer a run. */
__global__ void __launch_bounds__(FEED_WHOLE_THREADS) feed_whole(feed_args a)
{
    const bool stopped = a.counters[STATUS] != 0;
    bool changed = false, outside = false;
    if (!stopped)
        compare_slots(a, threadIdx.x, blockDim.x, &changed, &outside);
    const bool any = __syncthreads_or(changed), beyond = __syncthreads_or(outside);
    if (threadIdx.x == 0)
        decide(a, stopped, beyond, any);
    __syncthreads();
    apply_slots(a, threadIdx.x, blockDim.x);
}

/* A batch of runs takes about this long on the device, so that the host
 * looks in (for a cancel) a few times a second and waits a few times a
 * batch's worth of runs; and at most this many runs. */
static const float BATCH_MS = 50;
enum { BATCH_RUNS_MAX = 1 << 16 };

/* The loop's graph: a while node whose body is one run and its feed. */
struct loop_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

static void loop_graph_destroy(loop_graph *g)
{
    if (g->exec)
        cudaGraphExecDestroy(g->exec);
    if (g->graph)
        cudaGraphDestroy(g->graph);
}

/* Captures the body: the map over the input already on the device, then
 * the feed.  Nothing in them waits for the host or allocates. */
static soren_status capture_body(gpu_run *r, cudaGraph_t body, const feed_args &fa,
                                 uint64_t size, uint64_t records)
{
    CUDA_TRY(r, cudaStreamBeginCaptureToGraph(r->stream, body, NULL, NULL, 0,
                                              cudaStreamCaptureModeRelaxed));
    r->map.leave_unread = true;
    shape_of_input(r, false, 0);
    soren_status st = map_input(r, size, records);
    r->map.leave_unread = false;
    const uint64_t blocks = (fa.slot_count + FEED_THREADS - 1) / FEED_THREADS;
    const unsigned grid = blocks < (uint64_t)r->grid ? (unsigned)blocks : (unsigned)r->grid;
    if (st == SOREN_OK) {
        if (fa.slot_count <= FEED_WHOLE_SLOTS) {
            feed_whole<<<1, FEED_WHOLE_THREADS, 0, r->stream>>>(fa);
        } else {
            feed_compare<<<grid ? grid : 1, FEED_THREADS, 0, r->stream>>>(fa);
            feed_apply<<<grid ? grid : 1, FEED_THREADS, 0, r->stream>>>(fa);
        }
        cudaError_t rc = cudaGetLastError();
        if (rc != cudaSuccess)
            st = cuda_fail(r, rc, "the feed's kernels", __FILE__, __LINE__);
    }
    cudaGraph_t captured = NULL;
    cudaError_t rc = cudaStreamEndCapture(r->stream, &captured);
    if (st == SOREN_OK && rc != cudaSuccess)
        st = cuda_fail(r, rc, "cudaStreamEndCapture", __FILE__, __LINE__);
    return st;
}

/* Makes the loop's graph, or says (*supported = false) that this device
 * and driver have no while nodes, where the caller iterates the usual way. */
static soren_status loop_graph_make(gpu_run *r, loop_graph *g, feed_args fa, uint64_t size,
                                    uint64_t records, bool *supported)
{
    *supported = true;
    CUDA_TRY(r, cudaGraphCreate(&g->graph, 0));
    cudaError_t rc = cudaGraphConditionalHandleCreate(&fa.going, g->graph, 1,
                                                      cudaGraphCondAssignDefault);
    cudaGraphNodeParams node = {};
    node.type = cudaGraphNodeTypeConditional;
    node.conditional.handle = fa.going;
    node.conditional.type = cudaGraphCondTypeWhile;
    node.conditional.size = 1;
    cudaGraphNode_t loop;
    if (rc == cudaSuccess)
        rc = cudaGraphAddNode(&loop, g->graph, NULL, NULL, 0, &node);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        *supported = false;
        return SOREN_OK;
    }
    soren_status st = capture_body(r, node.conditional.phGraph_out[0], fa, size, records);
    if (st == SOREN_OK)
        CUDA_TRY(r, cudaGraphInstantiate(&g->exec, g->graph, 0));
    return st;
}

/* The input on the device once for every run of the loop; its size and
 * records. */
static soren_status input_once(gpu_run *r, const soren_input *in, uint64_t *size,
                               uint64_t *records)
{
    const soren_stage_spec *s = r->spec;
    *size = in->size;
    *records = records_at_most(s, in);
    const uint64_t bytes = in->on_device ? 0 : data_bytes(s, in);
    soren_status st = session_inputs(r, bytes, *records);
    if (st == SOREN_OK)
        st = alloc_staging(r, bytes);
    if (st == SOREN_OK)
        st = upload_input(r, in);
    if (st == SOREN_OK && s->input_format == SOREN_INPUT_LINES)
        st = split_lines(r, in->size, records);
    return st;
}

/* Runs batches until the loop ends; *ms the device's time in them. */
static soren_status run_batches(gpu_run *r, loop_graph *g, feed_state *dev, uint64_t limit,
                                bool compare_last, soren_gpu_loop *out, float *ms)
{
    feed_state *host = r->loop_state;
    uint64_t batch = 1;
    *ms = 0;
    for (;;) {
        const uint64_t left = limit - out->runs;
        const uint64_t runs = batch < left ? batch : left;
        *host = feed_state{0, runs, runs == left, compare_last && runs == left,
                           SOREN_GPU_LOOP_GOING, 0, 0, 0, 0, 0};
        CUDA_TRY(r, cudaMemcpyAsync(dev, host, sizeof *host, cudaMemcpyHostToDevice, r->stream));
        CUDA_TRY(r, cudaEventRecord(r->mark[0], r->stream));
        CUDA_TRY(r, cudaGraphLaunch(g->exec, r->stream));
        CUDA_TRY(r, cudaMemcpyAsync(host, dev, sizeof *host, cudaMemcpyDeviceToHost, r->stream));
        CUDA_TRY(r, cudaEventRecord(r->mark[1], r->stream));
        soren_status st = wait_mark(r, 1);
        if (st != SOREN_OK)
            return st;
        float batch_ms = 0;
        CUDA_TRY(r, cudaEventElapsedTime(&batch_ms, r->mark[0], r->mark[1]));
        *ms += batch_ms;
        out->runs += host->runs;
        out->batches++;
        out->end = (soren_gpu_loop_end)host->end;
        if (out->end == SOREN_GPU_LOOP_CONVERGED || out->end == SOREN_GPU_LOOP_HOST ||
            out->runs == limit)
            return SOREN_OK;
        st = soren_progress_check(r->opt->progress, r->spec->job_name, r->err);
        if (st != SOREN_OK)
            return st;
        /* the next batch about BATCH_MS long, from this one's runs */
        const float per_run = batch_ms / (float)(host->runs ? host->runs : 1);
        const float fit = per_run > 0 ? BATCH_MS / per_run : (float)BATCH_RUNS_MAX;
        batch = fit < 1 ? 1 : fit > BATCH_RUNS_MAX ? BATCH_RUNS_MAX : (uint64_t)fit;
    }
}

bool loop_serves(const gpu_run *r, const soren_input *inputs, size_t input_count)
{
    const soren_stage_spec *s = r->spec;
    const soren_type kt = (soren_type)s->key_type;
    return r->runs > 0 && r->reg.slots && r->reg.identity && s->combine != SOREN_COMBINE_NONE &&
           s->reduce != SOREN_REDUCE_FUNCTION && whole_key_space(r) && input_count == 1 &&
           !inputs[0].base && !pipelined(s, inputs, input_count) &&
           (kt == SOREN_TYPE_U32 || kt == SOREN_TYPE_U64 || kt == SOREN_TYPE_INDEX);
}

soren_status session_loop(gpu_run *r, const soren_input *inputs, size_t input_count,
                          const soren_params *params, uint32_t param, uint8_t *host_param,
                          uint64_t limit, bool compare_last, soren_result *out,
                          soren_gpu_loop *loop)
{
    const soren_stage_spec *s = r->spec;
    *loop = soren_gpu_loop{0, 0, SOREN_GPU_LOOP_UNSUPPORTED};
    r->phase = "setup";
    r->emitter = "map";
    soren_explain *x = r->x;
    x->key_parts = 1;
    x->narrowings = x->waits = 0;
    soren_status st = use_device(r);
    if (st == SOREN_OK)
        st = upload_params(r, params, NULL);
    if (st == SOREN_OK)
        st = counters_reset(r);
    if (st == SOREN_OK)
        st = session_reset(r);
    uint64_t size = 0, records = 0;
    if (st == SOREN_OK)
        st = input_once(r, &inputs[0], &size, &records);
    if (st == SOREN_OK && !r->loop_state) {
        cudaError_t rc = cudaMallocHost((void **)&r->loop_state, sizeof(feed_state));
        if (rc != cudaSuccess) {
            r->loop_state = NULL;
            return cuda_fail(r, rc, "cudaMallocHost(the loop's state)", __FILE__, __LINE__);
        }
    }
    feed_state *dev = NULL;
    if (st == SOREN_OK)
        st = dev_alloc(r, (void **)&dev, sizeof *dev, "the loop's state");
    if (st != SOREN_OK)
        return st;
    feed_args fa = {r->reg.slots,
                    r->reg.slot_values,
                    r->reg.slot_count,
                    r->variant == SOREN_VARIANT_DENSE ? NULL : r->reg.keys,
                    r->reg.identity,
                    r->counters,
                    (uint32_t)soren_type_size((soren_type)s->key_type),
                    (uint32_t)s->value_size,
                    (uint8_t *)r->in.param_blocks[param],
                    params->size[param],
                    dev,
                    0};
    loop_graph g = {};
    bool supported = false;
    float ms = 0;
    st = loop_graph_make(r, &g, fa, size, records, &supported);
    if (st == SOREN_OK && supported) {
        r->phase = "map";
        soren_progress_phase(r->opt->progress, "map", 0);
        st = run_batches(r, &g, dev, limit, compare_last, loop, &ms);
    }
    loop_graph_destroy(&g);
    dev_free(r, dev);
    if (st != SOREN_OK || !supported)
        return st;
    /* the host's copy of the parameter as the last fed run left it */
    CUDA_TRY(r, cudaMemcpyAsync(host_param, r->in.param_blocks[param], params->size[param],
                                cudaMemcpyDeviceToHost, r->stream));
    WAIT_STREAM(r);
    r->runs += (int)loop->runs;
    if (loop->runs)
        x->ms.map = ms / (float)loop->runs;
    if (loop->end == SOREN_GPU_LOOP_HOST) {
        /* the run the host is to make finds the table and counters empty */
        r->counters_fresh = false;
        return empty_slots(r);
    }
    /* the last run's pairs, from its table */
    st = result_after_map(r, false, out);
    release_list(r);
    return st;
}

} /* namespace soren__gpu */
