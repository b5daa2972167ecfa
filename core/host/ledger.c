#include "ledger.h"

void soren_ledger_init(soren_ledger *l, uint64_t total)
{
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->changed, NULL);
    l->total = total;
    l->reserved = 0;
    l->holders = 0;
    l->next_ticket = 0;
    l->serving = 0;
}

uint64_t soren_ledger_reserve(soren_ledger *l, uint64_t want, uint64_t *reserved_now)
{
    if (want > l->total)
        want = l->total;
    pthread_mutex_lock(&l->lock);
    uint64_t ticket = l->next_ticket++;
    while (ticket != l->serving || l->total - l->reserved < want)
        pthread_cond_wait(&l->changed, &l->lock);
    l->reserved += want;
    l->holders++;
    l->serving++;
    if (reserved_now)
        *reserved_now = l->reserved;
    /* the next turn may fit beside this one */
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->lock);
    return want;
}

void soren_ledger_release(soren_ledger *l, uint64_t bytes)
{
    pthread_mutex_lock(&l->lock);
    l->reserved -= bytes;
    l->holders--;
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->lock);
}

void soren_ledger_usage(soren_ledger *l, uint64_t *reserved, unsigned *holders)
{
    pthread_mutex_lock(&l->lock);
    *reserved = l->reserved;
    *holders = l->holders;
    pthread_mutex_unlock(&l->lock);
}
