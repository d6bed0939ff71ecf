/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rank's side of the agent-to-rank hop: its endpoint, its registered
 * message buffers and the progress thread that keeps up to P messages
 * ready in them while the application computes (prefetch.c).
 */
#ifndef SCIMQ_MPI_PREFETCH_H
#define SCIMQ_MPI_PREFETCH_H

#include <stdbool.h>
#include <stdint.h>

#include <scimq/client.h>

#include "agent.h"
#include "ctrl.h"

struct scimq_mpi_prefetch;

struct scimq_mpi_prefetch_cfg {
    const char *provider;
    uint64_t max_message; /* largest payload a buffer takes */
    int depth;            /* P >= 0, or -1: auto */
    uint32_t node_rank;   /* this rank's number for its agent */
    int world_rank;       /* for log lines */
};

/* A message in one of the rank's buffers, handed to the application. */
struct scimq_mpi_ready {
    struct scimq_mpi_ctrl m; /* the MSG that announced it */
    const uint8_t *meta;     /* m.meta_len bytes: the block table */
    uint8_t *payload;        /* m.payload_len bytes */
};

/* Opens the endpoint and the buffers (touched and registered now); the
 * endpoint's address is then in scimq__prefetch_addr(). */
int scimq__prefetch_open(const struct scimq_mpi_prefetch_cfg *cfg,
                         struct scimq_mpi_prefetch **pf_p);
const uint8_t *scimq__prefetch_addr(const struct scimq_mpi_prefetch *pf);

/* Connects to the agent described by ai and starts the progress thread;
 * from then on only that thread drives the endpoint.  agent_local: the
 * agent runs on this host (its process is watched). */
int scimq__prefetch_start(struct scimq_mpi_prefetch *pf,
                          const struct scimq_mpi_agent_info *ai,
                          bool agent_local);

/*
 * Waits until a message is ready (none may be in hand) and hands it out.
 * stop, polled while waiting, ends the wait with SCIMQ_ESTOPPED.  Returns
 * 0, SCIMQ_EOS (the queue is drained and nothing is left here),
 * SCIMQ_EAGAIN (deadline_ns was now and nothing was ready),
 * SCIMQ_ETIMEDOUT, or the error that ended the hop.
 */
int scimq__prefetch_take(struct scimq_mpi_prefetch *pf,
                         struct scimq_mpi_ready *out, uint64_t deadline_ns,
                         bool (*stop)(void));

/* Settles the message in hand: CTRL_DONE, CTRL_NACK (flags: REQUEUE)
 * release it; CTRL_EXTEND (lease_ms) keeps it in hand. */
int scimq__prefetch_settle(struct scimq_mpi_prefetch *pf, uint16_t type,
                           uint16_t flags, uint32_t lease_ms);

/* Leaves: one BYE, acknowledging the message in hand if done; whatever
 * the agent had chosen for this rank (prefetched or on its way) goes back
 * to the gateway.  Nothing is asked or handed out afterwards. */
int scimq__prefetch_bye(struct scimq_mpi_prefetch *pf, bool done);

/*
 * Publishes a message through the agent, on its gateway session (so that
 * a job opens one session per agent, not one per rank): copies the blocks
 * into this rank's put buffer (registered, as large as a message buffer),
 * sends PUT, and waits until the agent has read it and the gateway has
 * confirmed it (PUT_DONE).  Callers are taken one at a time.  Allowed
 * until the endpoint closes, also after a stop or the end of the stream.
 * Returns 0, the PUT's error (SCIMQ_ENOENT, SCIMQ_ECLOSED, ...),
 * SCIMQ_EMSGSIZE (larger than the put buffer, or than the block table
 * room), SCIMQ_ENOTSUP (the agent has no gateway session), the error that
 * ended the hop, or SCIMQ_ETIMEDOUT (PUT_TIMEOUT_NS).
 */
int scimq__prefetch_put(struct scimq_mpi_prefetch *pf, const char *queue,
                        const scimq_block_t *blocks, uint32_t count);

/* Lets queued control messages leave (bounded), stops the thread and
 * closes the endpoint. */
void scimq__prefetch_close(struct scimq_mpi_prefetch *pf);

/* The depth in use (auto: the current choice). */
int scimq__prefetch_depth(const struct scimq_mpi_prefetch *pf);

#endif /* SCIMQ_MPI_PREFETCH_H */
