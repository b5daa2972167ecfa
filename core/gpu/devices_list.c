/* devices_list.c - the GPUs as the CUDA runtime describes them. */
#include "devices_list.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

void soren_cuda_versions(int *driver, int *runtime)
{
    /* Both only read versions: they succeed without a driver or a GPU
     * (the driver's version is then 0). */
    *driver = 0;
    *runtime = 0;
    if (cudaDriverGetVersion(driver) != cudaSuccess)
        *driver = 0;
    if (cudaRuntimeGetVersion(runtime) != cudaSuccess)
        *runtime = 0;
    (void)cudaGetLastError();
}

soren_status soren_gpu_describe(int i, soren_gpu_info *info, soren_error *err)
{
    struct cudaDeviceProp prop;
    cudaError_t rc = cudaGetDeviceProperties(&prop, i);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        return soren_error_set(err, SOREN_EDEVICE, "GPU %d: cudaGetDeviceProperties: %s (%s)",
                               i, cudaGetErrorString(rc), cudaGetErrorName(rc));
    }
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->memory = prop.totalGlobalMem;
    info->major = prop.major;
    info->minor = prop.minor;
    info->multiprocessors = prop.multiProcessorCount;
    return SOREN_OK;
}
