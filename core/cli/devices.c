/* devices.c - `soren-host devices`: the GPUs, or why none is usable. */
#include <stdio.h>

#include "cli/commands.h"
#include "gpu/device.h"
#include "gpu/devices_list.h"

/* 1000 * major + 10 * minor as "major.minor"; 0 as "none". */
static void format_version(char *buf, size_t size, int v)
{
    if (v <= 0)
        snprintf(buf, size, "none");
    else
        snprintf(buf, size, "%d.%d", v / 1000, v % 1000 / 10);
}

/* What to do when no GPU is usable, judged from the versions. */
static const char *advice(int driver, int runtime)
{
    if (driver == 0)
        return "no NVIDIA driver is loaded, install NVIDIA's driver for the GPU";
    if (driver < runtime)
        return "the driver is older than the runtime, update the NVIDIA driver";
    return "check that nvidia-smi lists the GPU and that CUDA_VISIBLE_DEVICES, if set, "
           "names it";
}

int soren__cli_devices(void)
{
    int driver, runtime;
    soren_cuda_versions(&driver, &runtime);
    char dv[32], rv[32], why[256] = "";
    format_version(dv, sizeof dv, driver);
    format_version(rv, sizeof rv, runtime);
    int n = soren_device_count(why, sizeof why);
    if (n <= 0) {
        fprintf(stderr, "soren-host: no usable GPU: %s; CUDA driver %s, runtime %s: %s. "
                        "Until then jobs run on the CPU engine.\n",
                why, dv, rv, advice(driver, runtime));
        return 1;
    }
    printf("CUDA driver %s, runtime %s\n", dv, rv);
    int rc = 0;
    for (int i = 0; i < n; i++) {
        soren_gpu_info g;
        soren_error err;
        soren_error_clear(&err);
        if (soren_gpu_describe(i, &g, &err) != SOREN_OK) {
            fprintf(stderr, "soren-host: %s\n", err.text);
            rc = 1;
            continue;
        }
        printf("gpu %d: %s, %.1f GiB, compute capability %d.%d, %d multiprocessors\n", i,
               g.name, (double)g.memory / (1024.0 * 1024 * 1024), g.major, g.minor,
               g.multiprocessors);
    }
    return rc;
}
