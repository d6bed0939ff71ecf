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
 *
 * A ring is a system call, which at 64 KiB a message costs a tenth of the
 * hop, and an agent with work never sleeps.  So the agent also keeps one
 * shared word, "asleep", in a memfd its ranks map through
 * /proc/<agent pid>/fd (the access CMA needs anyway): the agent sets it
 * before its last look at the completion queue and clears it when it
 * wakes, and a rank rings only when it finds it set after posting
 * (scimq__doorbell_notify()).  Both sides order the store before the load
 * (a full fence), so either the rank sees the word set and rings, or the
 * agent's last look finds the message.  A rank that cannot map the word
 * rings every time.
 */
#ifndef SCIMQ_MPI_DOORBELL_H
#define SCIMQ_MPI_DOORBELL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The abstract socket name, without its leading NUL; a string. */
#define SCIMQ_DOORBELL_NAME_MAX 64

struct scimq_doorbell {
    int fd;                   /* the socket, or -1 */
    int word_fd;              /* agent: the memfd holding asleep, or -1 */
    _Atomic uint32_t *asleep; /* the shared word, or NULL */
    bool armed;               /* agent: the value it last stored there */
};

/* Either side: a doorbell that is not open (closing it does nothing). */
void scimq__doorbell_init(struct scimq_doorbell *db);

/* Agent side: binds a new doorbell and its shared word, names the socket
 * in name (a string); returns 0 or a negative SCIMQ_E* code.  The ranks
 * need name, the agent's pid and db->word_fd. */
int scimq__doorbell_open(struct scimq_doorbell *db,
                         char name[SCIMQ_DOORBELL_NAME_MAX]);

/* Agent side: about to sleep (asleep set: ranks ring from now on; look at
 * the completion queue once more before sleeping), or awake again.  Only
 * a change is stored (a full fence each time); nothing without a
 * doorbell. */
void scimq__doorbell_arm(struct scimq_doorbell *db, bool asleep);

/* Agent side: empties the socket after a wake-up. */
void scimq__doorbell_drain(const struct scimq_doorbell *db);

/* Rank side: connects to the doorbell name and maps the shared word
 * word_fd of process agent_pid (without it, every notify rings); returns 0
 * or a negative SCIMQ_E* code. */
int scimq__doorbell_connect(struct scimq_doorbell *db, const char *name,
                            int32_t agent_pid, int32_t word_fd);

/* Rank side: rings (never blocks; a lost ring is harmless, see above). */
void scimq__doorbell_ring(const struct scimq_doorbell *db);

/* Rank side, after posting control messages: rings if the agent may be
 * asleep. */
void scimq__doorbell_notify(const struct scimq_doorbell *db);

/* Either side; db may be closed twice. */
void scimq__doorbell_close(struct scimq_doorbell *db);

#endif /* SCIMQ_MPI_DOORBELL_H */
