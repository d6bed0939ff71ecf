/* SPDX-License-Identifier: BSD-3-Clause */
/* The per-rank copies of a control message (bcast.h). */
#include "config.h"

#include <stdlib.h>

#include "bcast.h"

enum copy_state { COPY_TO_SEND = 0, COPY_OUT, COPY_SETTLED };

struct bcast_copy {
    uint8_t state;   /* enum copy_state */
    uint32_t offers; /* times handed out */
};

struct scimq_mpi_bcast {
    int nranks;
    int unsettled; /* copies to send or out */
    unsigned done, rejected;
    struct bcast_copy copy[];
};

struct scimq_mpi_bcast *
scimq__bcast_create(int nranks, const bool *gone)
{
    struct scimq_mpi_bcast *b;

    if (nranks <= 0)
        return NULL;
    b = calloc(1, sizeof(*b) + (size_t) nranks * sizeof(b->copy[0]));
    if (b == NULL)
        return NULL;
    b->nranks = nranks;
    for (int r = 0; r < nranks; r++) {
        if (gone != NULL && gone[r])
            b->copy[r].state = COPY_SETTLED;
        else
            b->unsettled++;
    }
    return b;
}

void
scimq__bcast_destroy(struct scimq_mpi_bcast *b)
{
    free(b);
}

static bool
in_range(const struct scimq_mpi_bcast *b, int rank)
{
    return b != NULL && rank >= 0 && rank < b->nranks;
}

bool
scimq__bcast_to_send(const struct scimq_mpi_bcast *b, int rank)
{
    return in_range(b, rank) && b->copy[rank].state == COPY_TO_SEND;
}

uint32_t
scimq__bcast_sent(struct scimq_mpi_bcast *b, int rank)
{
    if (!scimq__bcast_to_send(b, rank))
        return 0;
    b->copy[rank].state = COPY_OUT;
    return b->copy[rank].offers++;
}

void
scimq__bcast_unsent(struct scimq_mpi_bcast *b, int rank)
{
    if (scimq__bcast_held(b, rank)) {
        b->copy[rank].state = COPY_TO_SEND;
        b->copy[rank].offers--;
    }
}

bool
scimq__bcast_held(const struct scimq_mpi_bcast *b, int rank)
{
    return in_range(b, rank) && b->copy[rank].state == COPY_OUT;
}

enum scimq_bcast_outcome
scimq__bcast_outcome(const struct scimq_mpi_bcast *b)
{
    if (b->unsettled > 0)
        return SCIMQ_BCAST_PENDING;
    if (b->done > 0)
        return SCIMQ_BCAST_ACK;
    return b->rejected > 0 ? SCIMQ_BCAST_REJECT : SCIMQ_BCAST_GIVE_BACK;
}

enum scimq_bcast_outcome
scimq__bcast_settle(struct scimq_mpi_bcast *b, int rank,
                    enum scimq_bcast_settle how)
{
    if (!scimq__bcast_held(b, rank))
        return scimq__bcast_outcome(b);
    if (how == SCIMQ_BCAST_REQUEUE) {
        b->copy[rank].state = COPY_TO_SEND;
        return SCIMQ_BCAST_PENDING;
    }
    b->copy[rank].state = COPY_SETTLED;
    b->unsettled--;
    if (how == SCIMQ_BCAST_DONE)
        b->done++;
    else
        b->rejected++;
    return scimq__bcast_outcome(b);
}

enum scimq_bcast_outcome
scimq__bcast_gone(struct scimq_mpi_bcast *b, int rank, bool *held_p)
{
    *held_p = scimq__bcast_held(b, rank);
    if (in_range(b, rank) && b->copy[rank].state != COPY_SETTLED) {
        b->copy[rank].state = COPY_SETTLED;
        b->unsettled--;
    }
    return scimq__bcast_outcome(b);
}
