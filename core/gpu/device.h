/*
 * device.h - finding a usable GPU.
 *
 * soren-host runs on the GPU where one is usable and on the CPU engine
 * elsewhere; `--device gpu` without one is an error that says why (no driver,
 * no device, a driver older than the runtime ...).
 */
#ifndef SOREN_DEVICE_H
#define SOREN_DEVICE_H

#include <stdint.h>

#include "../error.h"
#include <soren/host.h> /* soren_device */

/* Number of usable GPUs.  When there are none, returns 0 and, if why is not
 * NULL, writes the CUDA runtime's reason into why (at most why_size bytes). */
int soren_device_count(char *why, size_t why_size);

/* The free memory of GPU device in *bytes; 0 on success, -1 (with the
 * runtime's reason in why) when it cannot be read. */
int soren_device_free_memory(int device, uint64_t *bytes, char *why, size_t why_size);

#endif /* SOREN_DEVICE_H */
