/*
 * ledger.h - the device memory that a resident host's GPU jobs share, a
 * ledger for each GPU.
 *
 * The host may use a fixed total of a GPU's memory.  A GPU job reserves
 * its budget before it starts and runs within it (the engine's
 * --device-memory: chunks, tables and key space fit it, folding where they
 * would not); it gives the reservation back when it ends.  Jobs are served
 * in the order they asked: a job waits until every job that asked before it
 * was served and its own reservation fits beside those of the running jobs.
 * So jobs run side by side as long as their budgets fit, and no job waits
 * behind later ones however large or small it is.
 * Every function is safe from any thread.
 */
#ifndef SOREN_HOST_LEDGER_H
#define SOREN_HOST_LEDGER_H

#include <pthread.h>
#include <stdint.h>

typedef struct soren_ledger {
    pthread_mutex_t lock;
    pthread_cond_t changed;  /* a reservation went back, or a turn moved on */
    uint64_t total;          /* the bytes the jobs share */
    uint64_t reserved;       /* by the jobs running now */
    unsigned holders;        /* jobs holding a reservation */
    uint64_t next_ticket;    /* the turn the next job to ask takes */
    uint64_t serving;        /* the turn being served */
} soren_ledger;

/* A ledger of total bytes; it lives as long as the host. */
void soren_ledger_init(soren_ledger *l, uint64_t total);

/* Reserves want bytes (at most the total: a job may not take more than the
 * host has), waiting for its turn and for the room; returns the bytes
 * reserved, which the job runs within and gives back with
 * soren_ledger_release.  *reserved_now: all bytes reserved, this job's
 * included, when it was served. */
uint64_t soren_ledger_reserve(soren_ledger *l, uint64_t want, uint64_t *reserved_now);
void soren_ledger_release(soren_ledger *l, uint64_t bytes);

/* soren_ledger_reserve in two steps: a turn (the job counts as waiting
 * from then on, for soren_ledger_least_busy), then the wait for it.  Every
 * turn taken must be waited for: the turns after it wait behind it. */
uint64_t soren_ledger_turn(soren_ledger *l);
uint64_t soren_ledger_wait(soren_ledger *l, uint64_t turn, uint64_t want, uint64_t *reserved_now);

/* What is reserved now, by how many jobs, and how many wait for a turn. */
void soren_ledger_usage(soren_ledger *l, uint64_t *reserved, unsigned *holders,
                        unsigned *waiting);

/* Of count ledgers, a GPU's each, the one a job asking now is likely to be
 * served by first: the fewest jobs holding or waiting for a reservation,
 * the lowest index among equals (so that jobs one at a time stay on one
 * GPU, where their sessions are). */
int soren_ledger_least_busy(soren_ledger *ledgers, int count);

#endif /* SOREN_HOST_LEDGER_H */
