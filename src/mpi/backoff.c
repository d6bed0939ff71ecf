/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How the agent and the ranks wait: poll, yield, then sleep longer and
 * longer, so that oversubscribed ranks do not starve each other; but stay
 * "hot" (yield only, never sleep) for a few milliseconds after handing out
 * or asking for a message, because a libfabric read only progresses while
 * both sides poll (measured by bench/scimq-rma-bench: sleeping there cost
 * 70 % of the hop's throughput at 1 MiB on shm).
 */
#include "config.h"

#include <sched.h>
#include <time.h>

#include "runtime.h"

/* How long a side stays hot after a hand-out or a request. */
#define BACKOFF_HOT_NS 5000000u

static _Thread_local uint64_t hot_until_ns;

uint64_t
scimq__mpi_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

void
scimq__mpi_hot(void)
{
    hot_until_ns = scimq__mpi_now_ns() + BACKOFF_HOT_NS;
}

uint64_t
scimq__mpi_backoff_ns(unsigned int *spins)
{
    uint64_t ns;

    if (*spins < 64 || scimq__mpi_now_ns() < hot_until_ns) {
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
