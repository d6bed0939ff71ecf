/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The copies of one control message (SCIMQ_MESSAGE_CONTROL: a run header,
 * an end of series) that an agent hands to every rank it serves, and what
 * the agent then tells the gateway (bcast.c).  Bookkeeping only: the agent
 * sends the copies and settles the message (agent.c).
 *
 * Each rank's copy is to send, out (handed to the rank, not settled) or
 * settled.  A copy the rank gives back (NACK with requeue) is to send
 * again, to the same rank; a copy it rejects (NACK without requeue), or
 * whose rank leaves or dies, is settled for that rank.  Once every copy is
 * settled the message is settled once with the gateway:
 *
 *   SCIMQ_BCAST_ACK      a rank processed it (DONE): acknowledged
 *   SCIMQ_BCAST_REJECT   every rank that saw it rejected it: settled for
 *                        this agent without an acknowledgement (the
 *                        gateway does not dead-letter a control copy)
 *   SCIMQ_BCAST_GIVE_BACK  every rank left before it saw it: the agent
 *                        keeps it and gives it back when it closes
 */
#ifndef SCIMQ_MPI_BCAST_H
#define SCIMQ_MPI_BCAST_H

#include <stdbool.h>
#include <stdint.h>

enum scimq_bcast_outcome {
    SCIMQ_BCAST_PENDING = 0, /* copies still to send or out */
    SCIMQ_BCAST_ACK,
    SCIMQ_BCAST_REJECT,
    SCIMQ_BCAST_GIVE_BACK
};

/* How a rank settled its copy. */
enum scimq_bcast_settle {
    SCIMQ_BCAST_DONE,    /* processed */
    SCIMQ_BCAST_REQUEUE, /* give it to me again */
    SCIMQ_BCAST_REJECTED /* not for me */
};

struct scimq_mpi_bcast;

/* The copies of one message for nranks ranks; gone[r] (may be NULL): rank
 * r has left already and gets none.  NULL when out of memory. */
struct scimq_mpi_bcast *scimq__bcast_create(int nranks, const bool *gone);
void scimq__bcast_destroy(struct scimq_mpi_bcast *b);

/* Whether rank's copy is still to be sent (b NULL: no). */
bool scimq__bcast_to_send(const struct scimq_mpi_bcast *b, int rank);

/* Rank's copy is handed out; returns how often it was handed out before
 * (0 the first time: the attempt the rank sees is the gateway's plus
 * that). */
uint32_t scimq__bcast_sent(struct scimq_mpi_bcast *b, int rank);

/* Rank's copy could not be handed out after all: to send again. */
void scimq__bcast_unsent(struct scimq_mpi_bcast *b, int rank);

/* Whether rank holds its copy (handed out, not settled; b NULL: no). */
bool scimq__bcast_held(const struct scimq_mpi_bcast *b, int rank);

/* Rank settled the copy it holds (nothing happens for a copy it does not
 * hold); returns the outcome, PENDING while other copies are not
 * settled. */
enum scimq_bcast_outcome scimq__bcast_settle(struct scimq_mpi_bcast *b,
                                             int rank,
                                             enum scimq_bcast_settle how);

/* Rank left or died: its copy, whatever its state, is settled for it;
 * *held_p: it held it (its credit comes back).  Returns the outcome. */
enum scimq_bcast_outcome scimq__bcast_gone(struct scimq_mpi_bcast *b, int rank,
                                           bool *held_p);

/* The outcome so far. */
enum scimq_bcast_outcome scimq__bcast_outcome(const struct scimq_mpi_bcast *b);

#endif /* SCIMQ_MPI_BCAST_H */
