/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How the ranks' threads wait when they cannot sleep on a descriptor:
 * poll, yield, then sleep longer and longer, so that oversubscribed ranks
 * do not starve each other.  (The agent sleeps in poll(): agent.c.)
 */
#include "config.h"

#include <sched.h>
#include <time.h>

#include "backoff.h"

uint64_t
scimq__mpi_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

uint64_t
scimq__mpi_backoff_ns(unsigned int *spins)
{
    uint64_t ns;

    if (*spins < 64) {
        (*spins)++;
        return 0;
    }
    ns = *spins < 256 ? 20000 : *spins < 1024 ? 200000 : 1000000;
    (*spins)++;
    return ns;
}

void
scimq__mpi_backoff(unsigned int *spins)
{
    uint64_t ns = scimq__mpi_backoff_ns(spins);
    struct timespec ts = {0, (long) ns};

    if (ns == 0)
        sched_yield();
    else
        nanosleep(&ts, NULL);
}
