/*
 * pool.cu - the GPU engine's device memory and checked CUDA calls: every
 * device block a run takes comes from dev_alloc and goes back through
 * dev_free, to a session's pool (which keeps it for the next run) or to the
 * device; sessions' pinned buffers, a few kept for the next session; CUB's
 * scratch space; the host's waits for the device.
 */
#include "run.h"

#include <stdlib.h>
#include <string.h>

namespace soren__gpu {

soren_status cuda_fail(gpu_run *r, cudaError_t rc, const char *call, const char *file, int line)
{
    /* Clear the sticky error so later calls (the frees) report their own. */
    (void)cudaGetLastError();
    if (rc == cudaErrorMemoryAllocation)
        return soren_error_set(r->err, SOREN_EDEVICE, "%s: out of device memory during %s (%s)",
                               r->spec->job_name, r->phase, call);
    return soren_error_set(r->err, SOREN_EDEVICE, "%s: CUDA error during %s: %s (%s) in %s at %s:%d",
                           r->spec->job_name, r->phase, cudaGetErrorString(rc),
                           cudaGetErrorName(rc), call, file, line);
}

/* Pinned buffers kept from sessions that ended: pinning a session's buffer
 * (over 1 MiB) takes about a millisecond and unpinning it most of one,
 * which every new job, a resident host's above all, would pay at its first
 * run and at its end.  A few are kept, each for its device, for the
 * sessions that start next; the process's end unpins them. */
enum { PINNED_KEPT = 4 };
static pthread_mutex_t pinned_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *p;
    int device;
} pinned_kept[PINNED_KEPT];

void *pinned_take(int device)
{
    void *p = NULL;
    pthread_mutex_lock(&pinned_lock);
    for (int i = 0; i < PINNED_KEPT && !p; i++)
        if (pinned_kept[i].p && pinned_kept[i].device == device) {
            p = pinned_kept[i].p;
            pinned_kept[i].p = NULL;
        }
    pthread_mutex_unlock(&pinned_lock);
    return p;
}

void pinned_give(int device, void *p)
{
    pthread_mutex_lock(&pinned_lock);
    for (int i = 0; i < PINNED_KEPT && p; i++)
        if (!pinned_kept[i].p) {
            pinned_kept[i].p = p;
            pinned_kept[i].device = device;
            p = NULL;
        }
    pthread_mutex_unlock(&pinned_lock);
    if (p)
        cudaFreeHost(p);
}

/* Gives the pool's free blocks of more than larger_than bytes back to the
 * device; returns how many. */
size_t pool_release_free(gpu_run *r, uint64_t larger_than)
{
    size_t kept = 0, released = 0;
    for (size_t i = 0; i < r->pool.count; i++) {
        if (r->pool.blocks[i].used || r->pool.blocks[i].size <= larger_than) {
            r->pool.blocks[kept++] = r->pool.blocks[i];
        } else {
            cudaFree(r->pool.blocks[i].p);
            released++;
        }
    }
    r->pool.count = kept;
    return released;
}

/* A free pooled block of at least bytes and at most twice as many (a small
 * need must not hold a large block), or NULL. */
static void *pool_take(gpu_run *r, uint64_t bytes)
{
    for (size_t i = 0; i < r->pool.count; i++) {
        pool_block *b = &r->pool.blocks[i];
        if (!b->used && b->size >= bytes && b->size <= 2 * bytes + (1u << 20)) {
            b->used = true;
            return b->p;
        }
    }
    return NULL;
}

/* Allocates bytes of device memory for what, naming it on failure: from
 * the pool where a session has a block that fits. */
soren_status dev_alloc(gpu_run *r, void **p, uint64_t bytes, const char *what)
{
    bytes = bytes ? bytes : 1;
    if (r->pool.pooled && (*p = pool_take(r, bytes)) != NULL)
        return SOREN_OK;
    *p = NULL;
    if (r->pool.pooled && r->pool.count == r->pool.cap) {
        size_t cap = r->pool.cap ? 2 * r->pool.cap : 64;
        pool_block *grown = (pool_block *)realloc(r->pool.blocks, cap * sizeof *grown);
        if (!grown)
            return soren_error_set(r->err, SOREN_ENOMEM, "%s: out of host memory for the "
                                   "device memory pool", r->spec->job_name);
        r->pool.blocks = grown;
        r->pool.cap = cap;
    }
    cudaError_t rc = cudaMalloc(p, bytes);
    if (rc != cudaSuccess && r->pool.pooled && pool_release_free(r, 0) > 0) {
        /* the pool held what the device needs now */
        (void)cudaGetLastError();
        rc = cudaMalloc(p, bytes);
    }
    if (rc == cudaSuccess) {
        if (r->pool.pooled)
            r->pool.blocks[r->pool.count++] = pool_block{*p, bytes, true};
        return SOREN_OK;
    }
    *p = NULL;
    (void)cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    return soren_error_set(r->err, SOREN_EDEVICE,
                           "%s: out of device memory: %s needs %llu bytes, %llu of %llu are free "
                           "(%s)", r->spec->job_name, what, (unsigned long long)bytes,
                           (unsigned long long)free_bytes, (unsigned long long)total,
                           cudaGetErrorString(rc));
}

/* Frees a block dev_alloc gave: back to the pool in a session (the stream
 * orders its next use after every use already queued), at once otherwise. */
void dev_free(gpu_run *r, void *p)
{
    if (!p)
        return;
    if (r->pool.pooled)
        for (size_t i = 0; i < r->pool.count; i++)
            if (r->pool.blocks[i].p == p) {
                r->pool.blocks[i].used = false;
                return;
            }
    cudaFree(p);
}

/* The host waits for the device: for the stream's work so far, or for
 * mark i.  explain's "waits" counts them: a re-run's overhead beyond its
 * kernels is mostly waits. */
soren_status wait_stream(gpu_run *r)
{
    r->x->waits++;
    CUDA_TRY(r, cudaStreamSynchronize(r->stream));
    return SOREN_OK;
}

soren_status wait_mark(gpu_run *r, int i)
{
    r->x->waits++;
    CUDA_TRY(r, cudaEventSynchronize(r->mark[i]));
    return SOREN_OK;
}

/* CUB's temporary storage, grown on demand and kept for the run. */
soren_status temp_reserve(gpu_run *r, size_t bytes)
{
    if (bytes <= r->pool.temp_size)
        return SOREN_OK;
    dev_free(r, r->pool.temp);
    r->pool.temp = NULL;
    r->pool.temp_size = 0;
    ALLOC(r, r->pool.temp, bytes, "sort and scan scratch space");
    r->pool.temp_size = bytes;
    return SOREN_OK;
}

} /* namespace soren__gpu */
