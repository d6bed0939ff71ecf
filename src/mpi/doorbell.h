/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A doorbell from a node's ranks to their agent, for providers whose
 * completion queue cannot be waited on (shm in libfabric 1.17 has no
 * FI_WAIT_FD, and its fi_cq_sread never returns: nothing progresses the
 * queue while the agent waits in it).  The agent owns a datagram socket
 * in the abstract namespace of the host; a rank sends one byte to it after
 * it posted control messages, so that an agent asleep in poll() wakes and
 * reads its completion queue.  A full socket (the agent is awake and has
 * not read yet) drops the byte: the agent reads the queue anyway.  Only
 * ranks of the agent's own host ring it.
 */
#ifndef SCIMQ_MPI_DOORBELL_H
#define SCIMQ_MPI_DOORBELL_H

#include <stddef.h>

/* The abstract socket name, without its leading NUL; a string. */
#define SCIMQ_DOORBELL_NAME_MAX 64

/* Agent side: binds a new doorbell, names it in name (a string); returns
 * the socket (non-blocking) or a negative SCIMQ_E* code. */
int scimq__doorbell_open(char name[SCIMQ_DOORBELL_NAME_MAX]);

/* Agent side: empties the socket after a wake-up. */
void scimq__doorbell_drain(int fd);

/* Rank side: a socket connected to the doorbell name, or a negative
 * SCIMQ_E* code. */
int scimq__doorbell_connect(const char *name);

/* Rank side: rings (never blocks; a lost ring is harmless, see above). */
void scimq__doorbell_ring(int fd);

#endif /* SCIMQ_MPI_DOORBELL_H */
