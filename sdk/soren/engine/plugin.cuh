/*
 * plugin.cuh - what SOREN_PLUGIN instantiates in a CUDA plugin: for every
 * stage, the GPU launchers (map, combine, identity fill) of soren_gpu_stage,
 * with the stage's functions compiled into the kernels, and the host loops
 * of soren_cpu_stage (soren/engine/host_loop.h).
 *
 * Launch shapes come from the device (cudaOccupancyMaxPotentialBlockSize),
 * or for a map launch from the engine's measurement where it asks for a
 * smaller block: grid-stride kernels get as many blocks as can be resident
 * at once.  The query makes some 35 driver calls, longer than a small
 * re-run's kernels, so each thread keeps the shapes it found.
 */
#ifndef SOREN_ENGINE_PLUGIN_CUH
#define SOREN_ENGINE_PLUGIN_CUH

#include <cuda_runtime.h>
#include <string.h>
#include <utility>

#include <soren/engine/abi.h>
#include <soren/engine/host_loop.h>
#include <soren/engine/map.cuh>

namespace soren {

/* A map block's record tile: bytes per thread, enough for a quarter more
 * than the input's mean record (a warp's lines vary less in sum than one by
 * one; a step whose lines do not fit reads them in place); 0 (records read
 * in place) where the variant does not tile,
 * the records are not lines or pairs, the input is not 16-aligned, or
 * records are short or long.  A warp's loads of short records already read
 * whole lines of memory (histogram's 3-byte pixels took 30% longer through
 * a tile); a tile of a few long records would cost more resident threads
 * than it saves.  Fixed records are not tiled: none of the applications'
 * is long enough to gain. */
enum { TILE_RECORD_LEAST = 16, TILE_PER_THREAD_MOST = 256 };

static uint32_t tile_per_thread(const soren_gpu_map_args &a)
{
    if (!tiles_records(a.variant) ||
        (a.input_format != SOREN_GPU_LINES && a.input_format != SOREN_GPU_PAIRS) ||
        !a.record_count || ((uintptr_t)a.input & 15))
        return 0;
    uint64_t per = a.input_size / a.record_count;
    if (per < TILE_RECORD_LEAST)
        return 0;
    per = (per + per / 4 + 16) & ~15ull;
    return per > TILE_PER_THREAD_MOST ? 0 : (uint32_t)per;
}

/* A map launch's dynamic shared memory: the table's (or array's), then the
 * tile from the next 16-byte boundary. */
__host__ __device__ inline size_t map_shared_bytes(uint32_t shared, uint32_t per_thread, int block)
{
    return per_thread ? ((shared + 15u) & ~15u) + (size_t)per_thread * (size_t)block : shared;
}

/* map_shared_bytes as a function of the block size, for the occupancy
 * query, whose template is __host__ __device__ (a lambda would be
 * constexpr, which that template may not call). */
struct map_shared_of {
    uint32_t shared, per_thread;
    __host__ __device__ size_t operator()(int threads) const
    {
        return map_shared_bytes(shared, per_thread, threads);
    }
};

/* The current device's multiprocessors, asked once a thread. */
static cudaError_t multiprocessors(int *count)
{
    static thread_local int device = -1, sms = 0;
    int now = 0;
    cudaError_t rc = cudaGetDevice(&now);
    if (rc == cudaSuccess && now != device) {
        rc = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, now);
        device = rc == cudaSuccess ? now : -1;
    }
    *count = sms;
    return rc;
}

/* A kernel's largest resident grid and its block size, for its dynamic
 * shared memory (shared, and per_thread bytes more for each thread) on the
 * current device: the occupancy query's block, or the block asked for
 * where it is smaller (the engine's measured choice, soren_gpu_map_args.
 * block_threads); asked of the device once a thread, then remembered.
 * Shared memory past 48 KiB needs the kernel's leave, given for all the
 * device has, so that no thread's later, smaller grant can undo another's. */
template <typename Kernel>
static cudaError_t resident_shape(Kernel kernel, uint32_t shared, uint32_t per_thread,
                                  int asked, int *resident, int *block)
{
    struct shape {
        Kernel kernel;
        uint32_t shared, per_thread;
        int asked, device, resident, block;
    };
    enum { KEPT = 8, THREADS_MOST = 1024 };
    static thread_local shape kept[KEPT];
    static thread_local unsigned next;
    int device = 0;
    cudaError_t rc = cudaGetDevice(&device);
    if (rc != cudaSuccess)
        return rc;
    for (const shape &k : kept)
        if (k.kernel == kernel && k.shared == shared && k.per_thread == per_thread &&
            k.asked == asked && k.device == device) {
            *resident = k.resident;
            *block = k.block;
            return cudaSuccess;
        }
    if (map_shared_bytes(shared, per_thread, THREADS_MOST) > 48u << 10) {
        cudaFuncAttributes attributes;
        int most = 0;
        if ((rc = cudaFuncGetAttributes(&attributes, kernel)) != cudaSuccess ||
            (rc = cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                         device)) != cudaSuccess ||
            (rc = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       most - (int)attributes.sharedSizeBytes)) != cudaSuccess)
            return rc;
    }
    rc = cudaOccupancyMaxPotentialBlockSizeVariableSMem(resident, block, kernel,
                                                        map_shared_of{shared, per_thread});
    if (rc != cudaSuccess)
        return rc;
    if (asked > 0 && asked < *block) {
        int per_sm = 0, sms = 0;
        if ((rc = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                 &per_sm, kernel, asked, map_shared_bytes(shared, per_thread, asked))) !=
                cudaSuccess ||
            (rc = multiprocessors(&sms)) != cudaSuccess)
            return rc;
        *block = asked;
        *resident = per_sm * sms;
    }
    kept[next++ % KEPT] = shape{kernel, shared, per_thread, asked, device, *resident, *block};
    return cudaSuccess;
}

/* Blocks and threads for a grid-stride kernel over count items. */
template <typename Kernel>
static cudaError_t launch_shape(Kernel kernel, uint64_t count, int *grid, int *block)
{
    int resident = 0;
    cudaError_t rc = resident_shape(kernel, 0, 0, 0, &resident, block);
    if (rc != cudaSuccess)
        return rc;
    uint64_t wanted = (count + (uint64_t)*block - 1) / (uint64_t)*block;
    *grid = (int)(wanted < (uint64_t)resident ? wanted : (uint64_t)resident);
    return cudaSuccess;
}

/* A map launch.  Its shape depends only on the variant's kernel, the work,
 * the shared memory and max_threads, so a launch that resumes after an
 * overflow has the same threads as the one that stopped, each going on from
 * resume[tid]. */
template <const auto &Desc, uint32_t I>
static int launch_map(const soren_gpu_map_args *args, void *stream)
{
    typedef stage_traits<Desc, I> S;
    soren_gpu_map_args a = *args;
    /* A user identity lives in the plugin's host memory: pass its bits. */
    if constexpr (S::op == SOREN_COMBINE_USER)
        memcpy(&a.identity, Desc[I].combine.identity,
               sizeof(typename value_of<S::value_type>::type));
    void (*kernel)(soren_gpu_map_args, uint32_t) = map_kernel_for<Desc, I>(a);
    if (!kernel)
        return cudaErrorNotSupported;
    /* A resuming launch takes the same tile as the one that stopped (its
     * shape must not change), though it reads its records in place. */
    const uint32_t per_thread = tile_per_thread(a);
    int resident = 0, block = 0;
    cudaError_t rc = resident_shape(kernel, a.shared_bytes, per_thread, (int)a.block_threads,
                                    &resident, &block);
    if (rc != cudaSuccess)
        return rc;
    uint64_t work = a.variant == SOREN_GPU_MONITOR ? a.sample_count : a.record_count;
    /* Work for fewer threads than the device holds is spread over its
     * multiprocessors, a block each as far as blocks of 64 threads allow:
     * in blocks of the full size a few thousand records (an SVM step's
     * points) would run on a few multiprocessors and leave the rest idle. */
    int sms = 0;
    if ((rc = multiprocessors(&sms)) != cudaSuccess)
        return rc;
    const uint64_t spread = (work + (uint64_t)sms - 1) / (uint64_t)sms;
    if (spread < (uint64_t)block) {
        const uint64_t fit = (spread + 31) / 32 * 32;
        block = (int)(fit < 64 ? 64 : fit);
    }
    uint64_t grid = (work + (uint64_t)block - 1) / (uint64_t)block;
    if (grid > (uint64_t)resident)
        grid = (uint64_t)resident;
    if (a.max_threads && grid > a.max_threads / (uint64_t)block)
        grid = a.max_threads / (uint64_t)block;
    if (grid == 0)
        return cudaSuccess;
    kernel<<<(unsigned)grid, block, map_shared_bytes(a.shared_bytes, per_thread, block),
             (cudaStream_t)stream>>>(a, per_thread * (uint32_t)block);
    return cudaGetLastError();
}

template <const auto &Desc, uint32_t I>
static int launch_combine(const soren_gpu_combine_args *args, void *stream)
{
    int grid = 0, block = 0;
    cudaError_t rc = launch_shape(combine_kernel<Desc, I>, args->count, &grid, &block);
    if (rc != cudaSuccess || grid == 0)
        return rc;
    uint32_t value_size = sizeof(typename value_of<stage_traits<Desc, I>::value_type>::type);
    combine_kernel<Desc, I><<<grid, block, 0, (cudaStream_t)stream>>>(*args, value_size);
    return cudaGetLastError();
}

template <const auto &Desc, uint32_t I>
static int launch_fill_identity(void *values, uint64_t count, void *stream)
{
    typedef stage_traits<Desc, I> S;
    typedef typename value_of<S::value_type>::type T;
    /* A user identity lives in the plugin's host memory: pass its bits. */
    T user_identity = T();
    if constexpr (S::op == SOREN_COMBINE_USER)
        memcpy(&user_identity, Desc[I].combine.identity, sizeof user_identity);
    int grid = 0, block = 0;
    cudaError_t rc = launch_shape(identity_kernel<Desc, I>, count, &grid, &block);
    if (rc != cudaSuccess || grid == 0)
        return rc;
    identity_kernel<Desc, I><<<grid, block, 0, (cudaStream_t)stream>>>(values, count,
                                                                        user_identity);
    return cudaGetLastError();
}

template <const auto &Desc, uint32_t I> constexpr soren_gpu_stage gpu_stage()
{
    static_assert(stage_traits<Desc, I>::value_type > SOREN_TYPE_STRING &&
                      stage_traits<Desc, I>::value_type < SOREN_TYPE_INDEX,
                  "SOREN_STAGE needs .value (SOREN_TYPE_U32 ...) when .combine is not a built-in");
    return soren_gpu_stage{sizeof(soren_gpu_stage),        SOREN_ABI_MINOR, &launch_map<Desc, I>,
                           &launch_combine<Desc, I>,       &launch_fill_identity<Desc, I>,
                           {0, 0, 0, 0, 0}};
}

constexpr soren_stage with_engines(soren_stage s, const soren_gpu_stage *gpu,
                                   const soren_cpu_stage *cpu)
{
    s.gpu = gpu;
    s.cpu = cpu;
    return s;
}

template <const auto &Desc, size_t... I> struct plugin_stages {
    static constexpr soren_gpu_stage gpu[sizeof...(I)] = {gpu_stage<Desc, I>()...};
    static constexpr soren_cpu_stage cpu[sizeof...(I)] = {cpu_stage<Desc, I>()...};
    static constexpr soren_stage stages[sizeof...(I)] = {
        with_engines(Desc[I], &gpu[I], &cpu[I])...};
};

template <const auto &Desc, size_t... I>
constexpr const soren_stage *stages_of(std::index_sequence<I...>)
{
    return plugin_stages<Desc, I...>::stages;
}

} /* namespace soren */

#endif /* SOREN_ENGINE_PLUGIN_CUH */
