/*
 * devices_list.h - what the CUDA runtime says about the GPUs, for
 * `soren-host devices`.  (device.h decides whether a run may use a GPU;
 * this only describes them.)
 */
#ifndef SOREN_DEVICES_LIST_H
#define SOREN_DEVICES_LIST_H

#include <stddef.h>
#include <stdint.h>

#include "../error.h"

typedef struct soren_gpu_info {
    char name[256];
    uint64_t memory;     /* bytes of device memory */
    int major, minor;    /* compute capability */
    int multiprocessors;
} soren_gpu_info;

/* The CUDA versions, as 1000 * major + 10 * minor: the newest the installed
 * driver supports (0: no driver) and the runtime soren-host was built with. */
void soren_cuda_versions(int *driver, int *runtime);

/* Fills *info for GPU i, 0 to soren_device_count() - 1; SOREN_EDEVICE,
 * naming the CUDA error, when the runtime cannot say. */
soren_status soren_gpu_describe(int i, soren_gpu_info *info, soren_error *err);

#endif /* SOREN_DEVICES_LIST_H */
