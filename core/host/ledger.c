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

uint64_t soren_ledger_turn(soren_ledger *l)
{
    pthread_mutex_lock(&l->lock);
    uint64_t turn = l->next_ticket++;
    pthread_mutex_unlock(&l->lock);
    return turn;
}

uint64_t soren_ledger_wait(soren_ledger *l, uint64_t turn, uint64_t want, uint64_t *reserved_now)
{
    if (want > l->total)
        want = l->total;
    pthread_mutex_lock(&l->lock);
    while (turn != l->serving || l->total - l->reserved < want)
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

uint64_t soren_ledger_reserve(soren_ledger *l, uint64_t want, uint64_t *reserved_now)
{
    return soren_ledger_wait(l, soren_ledger_turn(l), want, reserved_now);
}

void soren_ledger_release(soren_ledger *l, uint64_t bytes)
{
    pthread_mutex_lock(&l->lock);
    l->reserved -= bytes;
    l->holders--;
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->lock);
}

void soren_ledger_usage(soren_ledger *l, uint64_t *reserved, unsigned *holders,
                        unsigned *waiting)
{
    pthread_mutex_lock(&l->lock);
    *reserved = l->reserved;
    *holders = l->holders;
    *waiting = (unsigned)(l->next_ticket - l->serving);
    pthread_mutex_unlock(&l->lock);
}

int soren_ledger_least_busy(soren_ledger *ledgers, int count)
{
    int best = 0;
    unsigned least = 0;
    for (int i = 0; i < count; i++) {
        uint64_t reserved;
        unsigned holders, waiting;
        soren_ledger_usage(&ledgers[i], &reserved, &holders, &waiting);
        if (i == 0 || holders + waiting < least) {
            best = i;
            least = holders + waiting;
        }
    }
    return best;
}
