/* dist.c - the transport-neutral part of a distributed run (dist.h). */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <soren/engine/sketch.h>

#include "../cpu/cpu.h"
#include "../cpu/internal.h"

void *soren_dist_must_alloc(size_t size)
{
    void *p = calloc(1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "soren-host: out of memory for the %zu bytes of a collective; "
                "ending this rank\n", size);
        abort();
    }
    return p;
}

/* ---- Slices -------------------------------------------------------------- */

/* The record boundary at or after unit x of the inputs laid end to end. */
static uint64_t global_boundary(const soren_stage_spec *spec, const soren_input *whole,
                                size_t n, uint64_t x)
{
    uint64_t first = 0;
    for (size_t i = 0; i < n; i++) {
        if (x < first + whole[i].size)
            return first + soren_record_boundary(spec, &whole[i], x - first);
        first += whole[i].size;
    }
    return first;
}

static uint64_t clamp(uint64_t x, uint64_t lo, uint64_t hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

void soren_dist_slice(const soren_comm *c, const soren_stage_spec *spec,
                      const soren_input *whole, size_t n, soren_input *slices, uint64_t *begin,
                      uint64_t *end)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += whole[i].size;
    /* 128-bit products: r * total may pass 2^64. */
    uint64_t lo = (uint64_t)((unsigned __int128)total * (unsigned)c->rank / (unsigned)c->size);
    uint64_t hi =
        (uint64_t)((unsigned __int128)total * ((unsigned)c->rank + 1) / (unsigned)c->size);
    *begin = global_boundary(spec, whole, n, lo);
    *end = global_boundary(spec, whole, n, hi);
    uint64_t first = 0;
    for (size_t i = 0; i < n; i++) {
        const soren_input *in = &whole[i];
        uint64_t b = clamp(*begin, first, first + in->size) - first;
        uint64_t e = clamp(*end, first, first + in->size) - first;
        if (spec->input_format == SOREN_INPUT_INDEX) {
            soren_input_tasks(&slices[i], e - b);
            slices[i].base = b;
        } else {
            soren_input_slice(&slices[i], in, b, e);
        }
        first += in->size;
    }
}

/* ---- Agreeing on failure ------------------------------------------------- */

soren_status soren_dist_agree(const soren_comm *c, soren_status rc, soren_error *err)
{
    uint64_t *all = soren_dist_must_alloc((size_t)c->size * sizeof *all);
    soren_error local;
    soren_error_clear(&local);
    soren_status st = c->ops->allgather(c->ctx, (uint64_t)(int64_t)rc, all, &local);
    int failed = -1;
    for (int r = 0; st == SOREN_OK && r < c->size && failed < 0; r++)
        if (all[r] != 0)
            failed = r;
    soren_status code = failed < 0 ? SOREN_OK : (soren_status)(int64_t)all[failed];
    free(all);
    if (st == SOREN_OK && failed < 0)
        return SOREN_OK;
    /* The failing rank's words, to every rank. */
    char text[sizeof err->text];
    memset(text, 0, sizeof text);
    if (st == SOREN_OK && c->rank == failed)
        memcpy(text, err->text, sizeof text);
    if (st == SOREN_OK)
        st = c->ops->bcast(c->ctx, failed, text, sizeof text, &local);
    soren_error_clear(err);
    if (st != SOREN_OK)
        return soren_error_set(err, st, "%s", local.text);
    text[sizeof text - 1] = '\0';
    return soren_error_set(err, code, "rank %d of %d: %s", failed, c->size, text);
}

/* ---- Packing pairs ------------------------------------------------------- */

/* Pairs travel as two blocks per destination: each pair's key size (u32),
 * and each pair's key bytes followed by its value, the layout of a pairs
 * input, so what a rank receives is its fold's input without a copy. */
typedef struct packed {
    uint32_t *sizes;
    uint8_t *bytes;
    uint64_t *pairs_to, *bytes_to; /* per rank */
} packed;

static void packed_free(packed *p)
{
    free(p->sizes);
    free(p->bytes);
    free(p->pairs_to);
    free(p->bytes_to);
    memset(p, 0, sizeof *p);
}

/* The rank that owns a key: the hash's top 32 bits scaled to the ranks. */
static int owner(const soren_result *r, uint64_t i, int ranks)
{
    uint64_t k0 = r->key_offset[i];
    uint64_t h = soren__key_hash(r->key_bytes + k0, (uint32_t)(r->key_offset[i + 1] - k0));
    return (int)(((h >> 32) * (uint64_t)ranks) >> 32);
}

/* Packing takes a thread for each PACK_PAIRS_PER_THREAD pairs, up to the
 * cores this rank's share of the process has: stage 1 of a job of many
 * keys (pageviewcount's) sends tens of millions.  The pairs go in blocks of
 * at least PACK_BLOCK_PAIRS, which the threads take from a shared counter:
 * first each block's pairs are counted by destination, then scattered
 * where the counts put them, destination by destination and block by
 * block, so the packed bytes are those one thread would pack. */
enum { PACK_PAIRS_PER_THREAD = 1 << 20, PACK_BLOCK_PAIRS = 1 << 16, PACK_BLOCKS_MAX = 256 };

typedef struct pack_job {
    const soren_result *r;
    int ranks, to;
    uint64_t block_pairs, blocks;
    int *dest;           /* each pair's destination */
    uint64_t *pairs_at;  /* [block * ranks + d]: block's pairs for d, then where they go */
    uint64_t *bytes_at;  /* the same in bytes */
    packed *p;
    int scatter;         /* 0: counting, 1: scattering */
} pack_job;

static void pack_block(void *arg, uint64_t b)
{
    pack_job *j = arg;
    const soren_result *r = j->r;
    size_t vs = r->value_size;
    uint64_t first = b * j->block_pairs;
    uint64_t last = first + j->block_pairs < r->count ? first + j->block_pairs : r->count;
    uint64_t *pairs_at = j->pairs_at + b * (uint64_t)j->ranks;
    uint64_t *bytes_at = j->bytes_at + b * (uint64_t)j->ranks;
    for (uint64_t i = first; i < last; i++) {
        uint64_t k0 = r->key_offset[i], klen = r->key_offset[i + 1] - k0;
        if (!j->scatter) {
            int d = j->to >= 0 ? j->to : owner(r, i, j->ranks);
            j->dest[i] = d;
            pairs_at[d]++;
            bytes_at[d] += klen + vs;
            continue;
        }
        int d = j->dest[i];
        j->p->sizes[pairs_at[d]++] = (uint32_t)klen;
        memcpy(j->p->bytes + bytes_at[d], r->key_bytes + k0, (size_t)klen);
        memcpy(j->p->bytes + bytes_at[d] + klen, r->values + i * vs, vs);
        bytes_at[d] += klen + vs;
    }
}

static void pack_pass(pack_job *j, unsigned threads, int scatter)
{
    j->scatter = scatter;
    soren__run_items(threads, j->blocks, pack_block, j);
}

/* Packs r's pairs grouped by destination: the key's owner, or rank `to`
 * for every pair when to >= 0.  threads: those this rank may take. */
static soren_status pack(const soren_result *r, int ranks, int to, unsigned threads, packed *p,
                         soren_error *err)
{
    memset(p, 0, sizeof *p);
    uint64_t n = r->count;
    uint64_t blocks = n / PACK_BLOCK_PAIRS + 1;
    blocks = blocks < PACK_BLOCKS_MAX ? blocks : PACK_BLOCKS_MAX;
    uint64_t want = n / PACK_PAIRS_PER_THREAD + 1;
    threads = want < threads ? (unsigned)want : threads;
    pack_job j = {.r = r, .ranks = ranks, .to = to, .blocks = blocks,
                  .block_pairs = (n + blocks - 1) / blocks, .p = p};
    j.block_pairs = j.block_pairs ? j.block_pairs : 1;
    j.dest = malloc((n + 1) * sizeof *j.dest);
    j.pairs_at = calloc((size_t)(blocks * (uint64_t)ranks), sizeof *j.pairs_at);
    j.bytes_at = calloc((size_t)(blocks * (uint64_t)ranks), sizeof *j.bytes_at);
    p->pairs_to = calloc((size_t)ranks, sizeof *p->pairs_to);
    p->bytes_to = calloc((size_t)ranks, sizeof *p->bytes_to);
    uint64_t key_total = n ? r->key_offset[n] : 0;
    p->sizes = malloc((n + 1) * sizeof *p->sizes);
    p->bytes = malloc(key_total + n * r->value_size + 1);
    soren_status rc = SOREN_OK;
    if (!j.dest || !j.pairs_at || !j.bytes_at || !p->pairs_to || !p->bytes_to || !p->sizes ||
        !p->bytes) {
        rc = soren_error_set(err, SOREN_ENOMEM, "out of memory packing %llu pairs (%llu bytes) "
                             "for the other ranks", (unsigned long long)n,
                             (unsigned long long)(key_total + n * r->value_size));
        goto done;
    }
    pack_pass(&j, threads, 0);
    /* Each block's counts become where its pairs go: destination by
     * destination, block by block. */
    uint64_t pair_at = 0, byte_at = 0;
    for (int d = 0; d < ranks; d++)
        for (uint64_t b = 0; b < blocks; b++) {
            uint64_t *pc = &j.pairs_at[b * (uint64_t)ranks + d];
            uint64_t *bc = &j.bytes_at[b * (uint64_t)ranks + d];
            uint64_t pairs = *pc, bytes = *bc;
            p->pairs_to[d] += pairs;
            p->bytes_to[d] += bytes;
            *pc = pair_at;
            *bc = byte_at;
            pair_at += pairs;
            byte_at += bytes;
        }
    pack_pass(&j, threads, 1);
done:
    free(j.dest);
    free(j.pairs_at);
    free(j.bytes_at);
    if (rc != SOREN_OK)
        packed_free(p);
    return rc;
}

enum { RANK_THREADS_MAX = 16 };

unsigned soren_dist_rank_threads(int ranks_in_process)
{
    unsigned cpus = soren_cpu_count();
    unsigned share = ranks_in_process > 1 ? cpus / (unsigned)ranks_in_process : cpus;
    share = share ? share : 1;
    return share < RANK_THREADS_MAX ? share : RANK_THREADS_MAX;
}

/* The threads this rank packs with. */
static unsigned pack_threads(const soren_comm *c)
{
    return soren_dist_rank_threads(c->process_ranks);
}

/* Exchanges packed pairs: *sizes and *bytes get what every rank sent this
 * one, *pairs their number (malloc'd; the caller frees them). */
static soren_status exchange(const soren_comm *c, const packed *p, uint32_t **sizes,
                             uint8_t **bytes, uint64_t *pairs, uint64_t *total,
                             soren_error *err)
{
    int n = c->size;
    uint64_t *send = soren_dist_must_alloc((size_t)n * sizeof *send);
    uint64_t *recv = soren_dist_must_alloc((size_t)n * sizeof *recv);
    for (int d = 0; d < n; d++)
        send[d] = p->pairs_to[d] * sizeof(uint32_t);
    void *s = NULL, *b = NULL;
    soren_status rc = c->ops->alltoallv(c->ctx, p->sizes, send, &s, recv, err);
    *pairs = 0;
    for (int d = 0; rc == SOREN_OK && d < n; d++)
        *pairs += recv[d] / sizeof(uint32_t);
    if (rc == SOREN_OK)
        rc = c->ops->alltoallv(c->ctx, p->bytes, p->bytes_to, &b, recv, err);
    *total = 0;
    for (int d = 0; rc == SOREN_OK && d < n; d++)
        *total += recv[d];
    free(send);
    free(recv);
    if (rc != SOREN_OK) {
        free(s);
        free(b);
        return rc;
    }
    *sizes = s;
    *bytes = b;
    return SOREN_OK;
}

/* Sends each pair of local to rank `to`, or where to is -1 to the rank its
 * key hashes to, and packs what this rank receives as a pairs input. */
static soren_status send_pairs(const soren_comm *c, const soren_result *local, int to,
                               soren_input *received, uint64_t *sent, soren_error *err)
{
    memset(received, 0, sizeof *received);
    packed p;
    soren_status rc =
        soren_dist_agree(c, pack(local, c->size, to, pack_threads(c), &p, err), err);
    if (rc != SOREN_OK) {
        packed_free(&p);
        return rc;
    }
    *sent = 0;
    for (int d = 0; d < c->size; d++)
        *sent += d == c->rank ? 0 : p.bytes_to[d];
    uint32_t *sizes = NULL;
    uint8_t *bytes = NULL;
    uint64_t n = 0, total = 0;
    rc = exchange(c, &p, &sizes, &bytes, &n, &total, err);
    packed_free(&p);
    if (rc != SOREN_OK)
        return rc;
    received->path = strdup("(the pairs of every rank)");
    received->starts = malloc((n + 1) * sizeof *received->starts);
    if (!received->starts) {
        free(sizes);
        free(bytes);
        soren_input_close(received);
        return soren_error_set(err, SOREN_ENOMEM, "out of memory receiving %llu pairs",
                               (unsigned long long)n);
    }
    uint64_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        received->starts[i] = at;
        at += sizes[i] + local->value_size;
    }
    received->starts[n] = at;
    free(sizes);
    received->owned_data = bytes;
    received->data = n ? bytes : NULL;
    received->size = total;
    received->count = n;
    return SOREN_OK;
}

soren_status soren_dist_shuffle(const soren_comm *c, const soren_result *local,
                                soren_input *received, uint64_t *sent, soren_error *err)
{
    return send_pairs(c, local, -1, received, sent, err);
}

soren_status soren_dist_gather_pairs(const soren_comm *c, const soren_result *local,
                                     soren_input *received, uint64_t *sent, soren_error *err)
{
    return send_pairs(c, local, 0, received, sent, err);
}

/* Appends n packed pairs to r. */
static soren_status unpack(const uint32_t *sizes, const uint8_t *bytes, uint64_t n,
                           soren_result *r, soren_error *err)
{
    uint64_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        soren_status rc =
            soren_result_append(r, bytes + at, sizes[i], bytes + at + sizes[i], err);
        if (rc != SOREN_OK)
            return rc;
        at += sizes[i] + r->value_size;
    }
    return SOREN_OK;
}

/* Rank 0's gathered pairs to every rank: their number and size, then the
 * two blocks.  Every rank allocates before the blocks travel, and agrees. */
static soren_status bcast_gathered(const soren_comm *c, uint32_t **sizes, uint8_t **bytes,
                                   uint64_t *n, uint64_t *total, soren_error *err)
{
    uint64_t dims[2] = {*n, *total};
    soren_status rc = c->ops->bcast(c->ctx, 0, dims, sizeof dims, err);
    if (rc != SOREN_OK)
        return rc;
    if (c->rank != 0) {
        free(*sizes); /* the empty blocks the exchange gave this rank */
        free(*bytes);
        *n = dims[0];
        *total = dims[1];
        *sizes = malloc((*n + 1) * sizeof **sizes);
        *bytes = malloc(*total + 1);
        if (!*sizes || !*bytes)
            rc = soren_error_set(err, SOREN_ENOMEM, "out of memory receiving the %llu pairs "
                                 "of the result", (unsigned long long)*n);
    }
    rc = soren_dist_agree(c, rc, err);
    if (rc == SOREN_OK)
        rc = c->ops->bcast(c->ctx, 0, *sizes, *n * sizeof **sizes, err);
    if (rc == SOREN_OK)
        rc = c->ops->bcast(c->ctx, 0, *bytes, *total, err);
    return rc;
}

soren_status soren_dist_gather(const soren_comm *c, const soren_result *local, int to_all,
                               soren_result *whole, soren_error *err)
{
    packed p;
    soren_status rc = soren_dist_agree(c, pack(local, c->size, 0, pack_threads(c), &p, err), err);
    if (rc != SOREN_OK) {
        packed_free(&p);
        return rc;
    }
    uint32_t *sizes = NULL;
    uint8_t *bytes = NULL;
    uint64_t n = 0, total = 0;
    rc = exchange(c, &p, &sizes, &bytes, &n, &total, err);
    packed_free(&p);
    if (rc == SOREN_OK && to_all)
        rc = bcast_gathered(c, &sizes, &bytes, &n, &total, err);
    if (rc == SOREN_OK && (to_all || c->rank == 0))
        rc = unpack(sizes, bytes, n, whole, err);
    free(sizes);
    free(bytes);
    return rc;
}

soren_status soren_dist_ends(const soren_comm *c, uint64_t count, uint64_t **ends,
                             soren_error *err)
{
    uint64_t *all = *ends = soren_dist_must_alloc((size_t)c->size * sizeof *all);
    soren_status rc = c->ops->allgather(c->ctx, count, all, err);
    for (int r = 1; rc == SOREN_OK && r < c->size; r++)
        all[r] += all[r - 1];
    return rc;
}

soren_status soren_dist_first(const soren_comm *c, uint64_t count, uint64_t *first,
                              soren_error *err)
{
    uint64_t *ends;
    soren_status rc = soren_dist_ends(c, count, &ends, err);
    *first = rc == SOREN_OK && c->rank > 0 ? ends[c->rank - 1] : 0;
    free(ends);
    return rc;
}

soren_status soren_dist_gather_fixed(const soren_comm *c, const void *mine, size_t size,
                                     void *all, soren_error *err)
{
    uint64_t *send = soren_dist_must_alloc((size_t)c->size * sizeof *send);
    uint64_t *recv = soren_dist_must_alloc((size_t)c->size * sizeof *recv);
    send[0] = size;
    void *got = NULL;
    soren_status rc = c->ops->alltoallv(c->ctx, mine, send, &got, recv, err);
    if (rc == SOREN_OK && c->rank == 0)
        memcpy(all, got, size * (size_t)c->size);
    free(got);
    free(send);
    free(recv);
    return rc;
}
