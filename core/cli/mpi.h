/*
 * mpi.h - soren-host's ranks under mpirun: the collectives of a distributed
 * run (engine/dist.h) over Open MPI.
 *
 * They live in a module of their own, soren-mpi.so (core/cli/mpi.c), built
 * where configure found MPI (HAVE_MPI) and loaded by soren-host only when
 * Open MPI's launcher started it (its environment has OMPI_COMM_WORLD_SIZE):
 * a plain run, and every command that a resident host serves, neither loads
 * Open MPI's libraries nor initialises MPI.  libsoren links no MPI.
 *
 * Transport failures keep MPI's default handler, which ends the job on
 * every rank: a broken link is never a hang.
 */
#ifndef SOREN_CLI_MPI_H
#define SOREN_CLI_MPI_H

#include "engine/dist.h"

#include <stdlib.h>

/* What soren-mpi.so exports, as the symbol SOREN_MPI_MODULE_SYMBOL. */
typedef struct soren_mpi_module {
    /* Initialises MPI and fills *c with this rank, the ranks, its local
     * rank (among the ranks of its host) and the collectives. */
    soren_status (*start)(soren_comm *c, soren_error *err);
    /* Finalises MPI (after start). */
    void (*end)(void);
} soren_mpi_module;

#define SOREN_MPI_MODULE_SYMBOL "soren__mpi_module"

/* The number of ranks mpirun started (OMPI_COMM_WORLD_SIZE), 0 outside it:
 * read by every soren-host, with MPI or without (which refuses to be
 * several ranks). */
static inline int soren__mpi_launched(void)
{
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    return size ? atoi(size) : 0;
}

/* Loads soren-mpi.so: from $SOREN_MPI_MODULE where set, else from where it
 * was installed (SOREN_MPI_MODULE_PATH); the module stays loaded until the
 * process ends, as MPI's libraries must. */
soren_status soren__mpi_module_load(const soren_mpi_module **m, soren_error *err);

#endif /* SOREN_CLI_MPI_H */
