/*
 * mpi.h - soren-host's ranks under mpirun: the collectives of a distributed
 * run (engine/dist.h) over Open MPI.  Built into soren-host only, where
 * configure found MPI (HAVE_MPI), so libsoren links no MPI.
 *
 * MPI starts only when Open MPI's launcher started this process (its
 * environment has OMPI_COMM_WORLD_SIZE), so a plain run never initialises
 * MPI.  Transport failures keep MPI's default handler, which ends the job on
 * every rank: a broken link is never a hang.
 */
#ifndef SOREN_CLI_MPI_H
#define SOREN_CLI_MPI_H

#include "engine/dist.h"

/* The number of ranks mpirun started (OMPI_COMM_WORLD_SIZE), 0 outside it. */
int soren__mpi_launched(void);

/* Initialises MPI and fills *c with this rank, the ranks, its local rank
 * (among the ranks of its host) and the collectives. */
soren_status soren__mpi_start(soren_comm *c, soren_error *err);

/* Finalises MPI (after soren__mpi_start). */
void soren__mpi_end(void);

#endif /* SOREN_CLI_MPI_H */
