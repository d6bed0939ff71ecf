/* SPDX-License-Identifier: BSD-3-Clause */
/* Waiting without work, for the agent and the ranks' progress threads. */
#ifndef SCIMQ_MPI_BACKOFF_H
#define SCIMQ_MPI_BACKOFF_H

#include <stdint.h>

/* Polls with a back-off that stays cheap on oversubscribed nodes
 * (backoff.c). */
void scimq__mpi_backoff(unsigned int *spins);
/* The same decision without the wait: 0 (yield) or nanoseconds to sleep,
 * for a caller that sleeps on its own condition variable. */
uint64_t scimq__mpi_backoff_ns(unsigned int *spins);

/* Nanoseconds on CLOCK_MONOTONIC (backoff.c). */
uint64_t scimq__mpi_now_ns(void);

#endif /* SCIMQ_MPI_BACKOFF_H */
