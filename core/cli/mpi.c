/* mpi.c - soren-mpi.so: the collectives of a distributed run over Open MPI
 * (mpi.h). */
#include "mpi.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* MPI counts and displacements are ints, so an exchange moves at most this
 * many bytes between two ranks per round (and as many rounds as the largest
 * block needs); each block travels as an hindexed type whose displacement is
 * an MPI_Aint, so buffers of any size work.  $SOREN_MPI_CHUNK sets a smaller
 * round, for tests that exercise many rounds. */
#define CHUNK_DEFAULT (UINT64_C(1) << 30)

static uint64_t chunk_bytes(void)
{
    const char *s = getenv("SOREN_MPI_CHUNK");
    unsigned long long n = s ? strtoull(s, NULL, 10) : 0;
    return n > 0 && n <= CHUNK_DEFAULT ? n : CHUNK_DEFAULT;
}

static soren_status failed(soren_error *err, const char *call, int code)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", code);
    return soren_error_set(err, SOREN_EIO, "%s: %s", call, text);
}

static soren_status allgather(void *ctx, uint64_t value, uint64_t *all, soren_error *err)
{
    (void)ctx;
    int rc = MPI_Allgather(&value, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? SOREN_OK : failed(err, "MPI_Allgather", rc);
}

static soren_status bcast(void *ctx, int root, void *buf, uint64_t size, soren_error *err)
{
    (void)ctx;
    uint64_t chunk = chunk_bytes();
    for (uint64_t at = 0; at < size; at += chunk) {
        int n = (int)(size - at < chunk ? size - at : chunk);
        int rc = MPI_Bcast((char *)buf + at, n, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            return failed(err, "MPI_Bcast", rc);
    }
    return SOREN_OK;
}

/* Round k's part of a block of count bytes at displ: at most chunk bytes,
 * as one hindexed type (MPI_BYTE with count 0 when nothing is left). */
static int round_type(uint64_t displ, uint64_t count, uint64_t k, uint64_t chunk,
                      MPI_Datatype *type, int *n)
{
    uint64_t done = k * chunk;
    *type = MPI_BYTE;
    *n = 0;
    if (count <= done)
        return MPI_SUCCESS;
    int len = (int)(count - done < chunk ? count - done : chunk);
    MPI_Aint at = (MPI_Aint)(displ + done);
    int rc = MPI_Type_create_hindexed(1, &len, &at, MPI_BYTE, type);
    if (rc == MPI_SUCCESS)
        rc = MPI_Type_commit(type);
    *n = rc == MPI_SUCCESS;
    return rc;
}

typedef struct round_plan {
    int ranks;
    uint64_t chunk;
    const uint64_t *send_counts, *recv_counts;
    uint64_t *send_displ, *recv_displ;
    int *scounts, *rcounts, *zeros;
    MPI_Datatype *stypes, *rtypes;
} round_plan;

static void free_types(round_plan *p)
{
    for (int i = 0; i < p->ranks; i++) {
        if (p->stypes[i] != MPI_BYTE)
            MPI_Type_free(&p->stypes[i]);
        if (p->rtypes[i] != MPI_BYTE)
            MPI_Type_free(&p->rtypes[i]);
        p->stypes[i] = p->rtypes[i] = MPI_BYTE;
    }
}

/* Round k of the exchange. */
static int exchange_round(round_plan *p, const void *send, void *recv, uint64_t k)
{
    int rc = MPI_SUCCESS;
    for (int i = 0; rc == MPI_SUCCESS && i < p->ranks; i++) {
        rc = round_type(p->send_displ[i], p->send_counts[i], k, p->chunk, &p->stypes[i],
                        &p->scounts[i]);
        if (rc == MPI_SUCCESS)
            rc = round_type(p->recv_displ[i], p->recv_counts[i], k, p->chunk, &p->rtypes[i],
                            &p->rcounts[i]);
    }
    /* A rank whose types failed still takes part, sending and expecting
     * nothing, and reports the failure: MPI's handler ends the job first in
     * practice. */
    if (rc != MPI_SUCCESS)
        for (int i = 0; i < p->ranks; i++)
            p->scounts[i] = p->rcounts[i] = 0;
    int sent = MPI_Alltoallw(send, p->scounts, p->zeros, p->stypes, recv, p->rcounts, p->zeros,
                             p->rtypes, MPI_COMM_WORLD);
    free_types(p);
    return rc != MPI_SUCCESS ? rc : sent;
}

static soren_status alltoallv(void *ctx, const void *send, const uint64_t *send_counts,
                              void **recv, uint64_t *recv_counts, soren_error *err)
{
    (void)ctx;
    int ranks = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    int rc = MPI_Alltoall(send_counts, 1, MPI_UINT64_T, recv_counts, 1, MPI_UINT64_T,
                          MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS)
        return failed(err, "MPI_Alltoall", rc);
    round_plan p = {.ranks = ranks, .chunk = chunk_bytes(), .send_counts = send_counts,
                    .recv_counts = recv_counts};
    p.send_displ = calloc((size_t)ranks, sizeof *p.send_displ);
    p.recv_displ = calloc((size_t)ranks, sizeof *p.recv_displ);
    p.scounts = calloc((size_t)ranks, sizeof *p.scounts);
    p.rcounts = calloc((size_t)ranks, sizeof *p.rcounts);
    p.zeros = calloc((size_t)ranks, sizeof *p.zeros);
    p.stypes = calloc((size_t)ranks, sizeof *p.stypes);
    p.rtypes = calloc((size_t)ranks, sizeof *p.rtypes);
    uint64_t total = 0, largest = 0, sent = 0;
    for (int i = 0; i < ranks; i++) {
        p.send_displ[i] = sent;
        p.recv_displ[i] = total;
        sent += send_counts[i];
        total += recv_counts[i];
        largest = send_counts[i] > largest ? send_counts[i] : largest;
        largest = recv_counts[i] > largest ? recv_counts[i] : largest;
    }
    *recv = malloc(total + 1);
    /* Every rank must run the same rounds, and none may start them without
     * its buffers: agree on both. */
    uint64_t mine[2] = {(largest + p.chunk - 1) / p.chunk,
                        !*recv || !p.send_displ || !p.recv_displ || !p.scounts || !p.rcounts ||
                            !p.zeros || !p.stypes || !p.rtypes},
             most[2] = {0, 0};
    rc = MPI_Allreduce(mine, most, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    soren_status st = SOREN_OK;
    if (rc != MPI_SUCCESS)
        st = failed(err, "MPI_Allreduce", rc);
    else if (most[1])
        st = soren_error_set(err, SOREN_ENOMEM, "out of memory receiving %llu bytes of pairs "
                             "(this rank or another)", (unsigned long long)total);
    if (st == SOREN_OK)
        for (int i = 0; i < ranks; i++)
            p.stypes[i] = p.rtypes[i] = MPI_BYTE;
    for (uint64_t k = 0; st == SOREN_OK && k < most[0]; k++)
        if ((rc = exchange_round(&p, send, *recv, k)) != MPI_SUCCESS)
            st = failed(err, "MPI_Alltoallw", rc);
    free(p.send_displ);
    free(p.recv_displ);
    free(p.scounts);
    free(p.rcounts);
    free(p.zeros);
    free(p.stypes);
    free(p.rtypes);
    if (st != SOREN_OK) {
        free(*recv);
        *recv = NULL;
    }
    return st;
}

static const soren_comm_ops mpi_ops = {
    .allgather = allgather,
    .alltoallv = alltoallv,
    .bcast = bcast,
};

static soren_status start(soren_comm *c, soren_error *err)
{
    int rc = MPI_Init(NULL, NULL);
    if (rc != MPI_SUCCESS)
        return failed(err, "MPI_Init", rc);
    *c = (soren_comm){.process_ranks = 1, .ops = &mpi_ops};
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    /* The ranks that share this host (and so its GPUs), numbered from 0. */
    MPI_Comm host;
    rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL,
                             &host);
    if (rc == MPI_SUCCESS) {
        MPI_Comm_rank(host, &c->local_rank);
        MPI_Comm_free(&host);
    }
    return rc == MPI_SUCCESS ? SOREN_OK : failed(err, "MPI_Comm_split_type", rc);
}

static void end(void)
{
    MPI_Finalize();
}

/* The module's one export (SOREN_MPI_MODULE_SYMBOL). */
extern const soren_mpi_module soren__mpi_module;
const soren_mpi_module soren__mpi_module = {.start = start, .end = end};
