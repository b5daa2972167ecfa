#include "device.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

int soren_device_count(char *why, size_t why_size)
{
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) {
        if (why)
            snprintf(why, why_size, "%s (%s)", cudaGetErrorString(rc), cudaGetErrorName(rc));
        /* A failed query leaves a sticky error in the runtime; clear it so
         * later CUDA calls in this process report their own failures. */
        (void)cudaGetLastError();
        return 0;
    }
    if (n == 0 && why)
        snprintf(why, why_size, "the CUDA driver reports no devices");
    return n;
}

int soren_device_free_memory(int device, uint64_t *bytes, char *why, size_t why_size)
{
    size_t free_bytes = 0, total = 0;
    cudaError_t rc = cudaSetDevice(device);
    if (rc == cudaSuccess)
        rc = cudaMemGetInfo(&free_bytes, &total);
    if (rc != cudaSuccess) {
        if (why)
            snprintf(why, why_size, "%s (%s)", cudaGetErrorString(rc), cudaGetErrorName(rc));
        (void)cudaGetLastError();
        return -1;
    }
    *bytes = free_bytes;
    return 0;
}
