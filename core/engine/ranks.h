/*
 * ranks.h - one run spread over several GPUs of this process (--devices):
 * a rank on each GPU, each in a thread of its own, running the distributed
 * run of dist.h (each maps a share of the input, the pairs of a key meet on
 * one rank, rank 0 writes the output) with collectives that copy through
 * this process's memory instead of MPI.  Under mpirun, each process's
 * ranks are a part of the run's: what goes between processes travels
 * through mpirun's collectives.
 */
#ifndef SOREN_ENGINE_RANKS_H
#define SOREN_ENGINE_RANKS_H

#include <stddef.h>

#include "../error.h"
#include "../plugin/loader.h"
#include "dist.h"
#include "options.h"

/* The collectives of n ranks that are threads of this process. */
typedef struct soren_thread_comm soren_thread_comm;

/* NULL when out of memory. */
soren_thread_comm *soren__thread_comm_new(int n);
void soren__thread_comm_free(soren_thread_comm *t);
/* Makes t's n ranks a part of a run of several processes (outer, one rank
 * each): called by every process, on the thread that calls outer's
 * collectives, with rc its status so far; returns the first failing
 * process's status on every process (soren_dist_agree). */
soren_status soren__thread_comm_join(soren_thread_comm *t, int n, const soren_comm *outer,
                                     soren_status rc, soren_error *err);
/* This process's rank rank's communicator, whose local_rank (the GPU it
 * runs on) is local_rank; valid while t is. */
soren_comm soren__thread_comm_rank(soren_thread_comm *t, int rank, int local_rank);

/* The GPUs o->devices and o->devices_all name, checked against the GPUs
 * this process can use: *count of them in devices[]; where o names none,
 * those soren_choose_devices gives a process of its own (GPU 0 alone).
 * *rule: why, for --explain and --verbose (o->devices_rule where the
 * caller chose; NULL where the run is on the CPU engine or this process
 * has one GPU).  A SOREN_EUSAGE error names a GPU that does not exist,
 * or --devices with --device cpu or both. */
soren_status soren__devices_pick(const soren_run_options *o, int devices[SOREN_MAX_DEVICES],
                                 size_t *count, const char **rule, soren_error *err);

/* soren_run on each of the count GPUs of devices at once, rank r on
 * devices[r]; the run's error, the same on every rank, in err.  With
 * o->device SOREN_DEVICE_CPU the ranks run the CPU engine, as they do
 * under mpirun.  Where o->comm is set, this process is its rank of a run
 * of several (one a host under mpirun): every process calls this, and
 * their ranks together make the run, this process's numbered after those
 * of the processes before it. */
soren_status soren__run_ranks(const soren_plugin *p, const soren_run_options *o,
                              const int *devices, size_t count, soren_error *err);

#endif /* SOREN_ENGINE_RANKS_H */
