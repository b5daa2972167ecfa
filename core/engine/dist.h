/*
 * dist.h - one job over several processes (ranks), each with a share of the
 * input: the part of a distributed run that does not depend on how bytes
 * travel between ranks.
 *
 * libsoren links no MPI.  soren-host, built with MPI and started by
 * mpirun, fills a soren_comm with MPI's collectives (core/cli/mpi.c) and
 * hands it to soren_run in soren_run_options.comm.  A run of N ranks:
 *
 *  1. slice  rank r takes units [r*S/N, (r+1)*S/N) of the inputs laid end to
 *            end (S bytes, or tasks of index input), each end moved forward
 *            to a record boundary within its file (after the next '\n' of
 *            lines, to a multiple of record_size of fixed records), so every
 *            record is mapped by exactly one rank and none spans two files;
 *  2. map    it runs the stage over its slice on its own engine, without the
 *            reduce function: combined pairs where the stage has a combine,
 *            map's pairs where it has a reduce function only;
 *  3. shuffle it sends every pair to the rank soren__key_hash of its key
 *            picks, and receives the pairs of its own keys;
 *  4. fold   it folds what it received with the combine and runs the reduce
 *            function on its keys (the CPU engine's fold mode).  A later
 *            stage maps these pairs, numbered after the pairs of the ranks
 *            before it, and shuffles again.
 *  5. the last stage's pairs are gathered on rank 0 (soren_dist_gather) and
 *            written in the stage's order, or each rank writes its own.
 * Stages without combine and reduce (map-only) skip 3 and 4: no key needs
 * its values in one place.
 *
 * Every rank calls the same collectives in the same order.  A rank that
 * fails goes on to the next soren_dist_agree instead of the next
 * collective, and every rank leaves it with the failure of the lowest
 * failing rank, so no rank waits for one that gave up.
 */
#ifndef SOREN_DIST_H
#define SOREN_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "../base/result.h"
#include "../base/stage.h"
#include "../error.h"
#include "../io/input.h"

/* The collectives a distributed run needs, with every rank taking part.  A
 * transport failure may end the process (MPI's default); an error returned
 * must be returned on every rank. */
typedef struct soren_comm_ops {
    /* all[i] = rank i's value, on every rank. */
    soren_status (*allgather)(void *ctx, uint64_t value, uint64_t *all, soren_error *err);
    /* Sends send_counts[i] bytes to rank i, from send, where the blocks lie in rank
     * order; *recv (malloc'd, freed by the caller, at least 1 byte) gets recv_counts[i]
     * bytes from each rank i, in rank order. */
    soren_status (*alltoallv)(void *ctx, const void *send, const uint64_t *send_counts,
                              void **recv, uint64_t *recv_counts, soren_error *err);
    /* size bytes at buf on rank root to buf on every other rank. */
    soren_status (*bcast)(void *ctx, int root, void *buf, uint64_t size, soren_error *err);
} soren_comm_ops;

typedef struct soren_comm {
    int rank, size;
    int local_rank; /* among the ranks of this host: picks its GPU */
    /* The ranks that are threads of this process, this one among them
     * (they share its CPUs): 1 for a process of its own under mpirun, its
     * GPUs for one under mpirun with --devices, size where every rank is a
     * thread of this process (--devices alone), so that pairs move between
     * them at the speed of a copy and rank 0 may fold them all. */
    int process_ranks;
    const soren_comm_ops *ops;
    void *ctx;
} soren_comm;

/* Fills slices[0 .. n) with this rank's share of whole[0 .. n) (step 1):
 * views into whole's bytes (whole must outlive them; close them with
 * soren_input_close), each with its base, empty where the rank has none of
 * a file.  *begin and *end get the share in units of the inputs laid end to
 * end, for --explain. */
void soren_dist_slice(const soren_comm *c, const soren_stage_spec *spec,
                      const soren_input *whole, size_t n, soren_input *slices, uint64_t *begin,
                      uint64_t *end);

/* Tells every rank whether any failed: returns SOREN_OK where none did, else
 * on every rank the status of the lowest failing rank with its message,
 * "rank R of N: ...", in err (replacing what err held). */
soren_status soren_dist_agree(const soren_comm *c, soren_status rc, soren_error *err);

/* Step 3: sends each pair of local to the rank its key hashes to, and packs
 * the pairs this rank receives as a pairs input (initialised here) for the
 * fold.  *sent gets the bytes that left for other ranks.  Agrees before the
 * exchange, so a rank that cannot pack its pairs fails every rank. */
soren_status soren_dist_shuffle(const soren_comm *c, const soren_result *local,
                                soren_input *received, uint64_t *sent, soren_error *err);

/* soren_dist_shuffle with every pair sent to rank 0, whose fold then makes
 * the whole result (the others receive none). */
soren_status soren_dist_gather_pairs(const soren_comm *c, const soren_result *local,
                                     soren_input *received, uint64_t *sent, soren_error *err);

/* Appends the pairs of every rank's local to *whole (initialised by the
 * caller), in rank order: on rank 0 only, or on every rank with to_all. */
soren_status soren_dist_gather(const soren_comm *c, const soren_result *local, int to_all,
                               soren_result *whole, soren_error *err);

/* Where each rank's pairs end when each holds count and they are laid
 * end to end in rank order: ends[r], c->size of them (malloc'd; the
 * caller frees it, also on an error). */
soren_status soren_dist_ends(const soren_comm *c, uint64_t count, uint64_t **ends,
                             soren_error *err);

/* The number of the first pair of this rank when each rank holds count
 * pairs: the pairs of the ranks before it (a later stage's base). */
soren_status soren_dist_first(const soren_comm *c, uint64_t count, uint64_t *first,
                              soren_error *err);

/* The threads one rank may take for its share of an exchange (packing,
 * copying in what it receives): the process's CPUs, shared by the ranks
 * that are threads of it (1 where the rank is a process of its own), at
 * most 16. */
unsigned soren_dist_rank_threads(int ranks_in_process);

/* The bookkeeping of a collective (a few words per rank), zeroed: a rank
 * that cannot have it cannot take part, and must not leave the others
 * waiting in the collective, so it ends, and the launcher ends the others. */
void *soren_dist_must_alloc(size_t size);

/* Gathers size bytes of every rank's mine on rank 0 into all (rank i's at
 * all + i * size; all is size * ranks bytes, used on rank 0 only). */
soren_status soren_dist_gather_fixed(const soren_comm *c, const void *mine, size_t size,
                                     void *all, soren_error *err);

#endif /* SOREN_DIST_H */
