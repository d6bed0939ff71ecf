/* SPDX-License-Identifier: BSD-3-Clause */
/* Liveness of the processes of this host: the agent's ranks, a rank's
 * agent. */
#ifndef SCIMQ_MPI_PROC_H
#define SCIMQ_MPI_PROC_H

#include <stdbool.h>
#include <sys/types.h>

/* How often an agent looks at its ranks' processes, and a rank at its
 * agent's. */
#define SCIMQ_MPI_LIVENESS_MS 200u

/* Whether a process of this host no longer runs: gone, or a zombie not
 * yet reaped (proc.c). */
bool scimq__mpi_pid_dead(pid_t pid);

#endif /* SCIMQ_MPI_PROC_H */
