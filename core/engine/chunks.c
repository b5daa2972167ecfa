#include "chunks.h"

#include <string.h>

/* Of a device memory budget, the share one chunk of input takes: the rest
 * holds its record index (8 bytes a line), the tables, the key space and
 * CUB's scratch. */
enum { CHUNK_SHARE = 4 };

/* The most bytes of a chunk on the GPU: an input that fits whole still goes
 * in chunks, so that each one's copy overlaps the map of the one before
 * instead of the whole input's copy preceding the map. */
enum { CHUNK_MOST = 256 << 20 };

/* The device memory a run on where may take: --device-memory, else on the
 * GPU its free memory less an eighth (the CUDA context, other processes'
 * allocations meanwhile); 0 (no budget) on the CPU engine without it. */
static soren_status memory_budget(const soren_run_options *o, soren_device where,
                                  uint64_t *budget, soren_error *err)
{
    *budget = o->device_memory;
    if (*budget || where != SOREN_DEVICE_GPU)
        return SOREN_OK;
    uint64_t free_bytes = 0;
    char why[256];
    if (soren_device_free_memory(o->gpu.device, &free_bytes, why, sizeof why) != 0)
        return soren_error_set(err, SOREN_EDEVICE, "cannot read the free memory of GPU %d: %s; "
                               "give --device-memory SIZE, or run with --device cpu",
                               o->gpu.device, why);
    *budget = free_bytes - free_bytes / 8;
    return SOREN_OK;
}

soren_status soren__plan_chunks(const soren_stage_spec *spec, const soren_run_options *o,
                                soren_device where, const soren_input *inputs, size_t n,
                                soren_input **chunks, size_t *count, soren_chunking *c,
                                soren_error *err)
{
    *chunks = NULL;
    *count = 0;
    memset(c, 0, sizeof *c);
    if (spec->input_format != SOREN_INPUT_LINES && spec->input_format != SOREN_INPUT_FIXED)
        return SOREN_OK;
    for (size_t i = 0; i < n; i++)
        if (inputs[i].on_device)
            return SOREN_OK;
    uint64_t budget = 0;
    soren_status rc = memory_budget(o, where, &budget, err);
    if (rc != SOREN_OK || budget == 0)
        return rc;
    uint64_t chunk = budget / CHUNK_SHARE ? budget / CHUNK_SHARE : 1;
    if (where == SOREN_DEVICE_GPU && chunk > CHUNK_MOST)
        chunk = CHUNK_MOST;
    if (o->device == SOREN_DEVICE_BOTH) {
        /* pieces enough for the two engines to take as they go */
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += inputs[i].size;
        uint64_t piece = (total + BOTH_PIECES - 1) / BOTH_PIECES;
        piece = piece > BOTH_PIECE_MIN ? piece : BOTH_PIECE_MIN;
        chunk = piece < chunk ? piece : chunk;
    }
    int cut = 0;
    for (size_t i = 0; i < n; i++)
        cut |= inputs[i].size > chunk;
    if (!cut)
        return SOREN_OK;
    uint64_t largest = 0;
    rc = soren_input_chunks(spec, inputs, n, chunk, chunks, count, &largest, err);
    if (rc != SOREN_OK)
        return rc;
    *c = (soren_chunking){.budget = budget, .chunk_bytes = chunk, .count = *count,
                          .largest = largest};
    if (o->verbose)
        soren_progress_say(o->progress, "soren-host: input: %zu chunks of about %llu bytes "
                           "(the largest %llu) for a device memory budget of %llu bytes\n",
                           *count, (unsigned long long)chunk, (unsigned long long)largest,
                           (unsigned long long)budget);
    return SOREN_OK;
}
