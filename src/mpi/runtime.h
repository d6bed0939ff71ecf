/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libscimq-mpi internals shared by the rank side (runtime.c) and the agent
 * (agent.c).
 *
 * The agent-to-rank protocol (libfabric messages on one node, between
 * processes of the same build, so a fixed C layout is fine):
 *
 *   rank  -> agent  WANT             "give me a message when you have one"
 *   agent -> rank   MSG slot,gen,... "read read_len bytes at raddr/key"
 *   rank  -> agent  DONE slot,gen    processed: ack it to the gateway
 *                   (+WANT flag: and give me the next one)
 *   rank  -> agent  NACK / EXTEND    give back / keep the lease alive
 *   agent -> rank   EOS | ERR code   end of stream / the agent failed
 *   rank  -> agent  BYE              this rank leaves
 *
 * A rank has at most one WANT outstanding, so a rank that is busy simply
 * does not ask: that is the whole load-balancing mechanism.
 *
 * Pool slot layout: [ .. meta | payload ], the payload at SLOT_META bytes
 * into the slot, the block table (meta) written just before it, so one
 * read fetches both.
 */
#ifndef SCIMQ_MPI_RUNTIME_H
#define SCIMQ_MPI_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <scimq/mpi.h>

#include "fabric.h"

#define SCIMQ_MPI_CTRL_MAGIC 0x53514d43u /* "SQMC" */
/* Room for the block table in front of each payload. */
#define SCIMQ_MPI_SLOT_META 4096u
/* Blocks per message the runtime hands to ranks. */
#define SCIMQ_MPI_MAX_BLOCKS 64u

enum scimq_mpi_ctrl_type {
    CTRL_WANT = 1,
    CTRL_DONE,
    CTRL_NACK,
    CTRL_EXTEND,
    CTRL_BYE,
    CTRL_MSG,
    CTRL_EOS,
    CTRL_ERR
};

#define CTRL_F_WANT (1u << 0)    /* DONE/NACK: and send the next one */
#define CTRL_F_REQUEUE (1u << 1) /* NACK: requeue (else dead-letter) */
/* BYE: the message in hand (slot, gen) is done: acknowledged before the
 * rest is given back (one message, so the two cannot cross). */
#define CTRL_F_DONE (1u << 2)

struct scimq_mpi_ctrl {
    uint32_t magic;
    uint16_t type;
    uint16_t flags;
    uint32_t rank; /* sender's rank on the node */
    uint32_t slot;
    uint64_t gen; /* slot generation: a stale DONE is ignored */
    uint64_t raddr;
    uint64_t key;
    uint64_t read_len;
    uint64_t payload_len;
    uint64_t msg_id;
    uint32_t meta_len;
    uint32_t attempt;
    int32_t code;
    uint32_t lease_ms;
};

/* A libfabric operation context (FI_CONTEXT2 comes first). */
struct scimq_mpi_op {
    struct fi_context2 fictx;
    int kind;     /* OP_RECV, OP_SEND, OP_READ */
    int index;    /* position in its array */
    int peer;     /* agent sends: the node rank sent to */
    bool busy;    /* a send in flight */
    bool pending; /* a receive completed, not yet handled */
    struct scimq_mpi_ctrl msg;
};

enum { OP_RECV = 1, OP_SEND, OP_READ };

/* What every rank learns about its node's agent at init. */
struct scimq_mpi_agent_info {
    uint8_t addr[SCIMQ_FABRIC_ADDR_MAX];
    uint64_t addr_len;
    uint64_t pool_raddr; /* remote address of the pool's first byte */
    uint64_t pool_len;
    uint64_t pool_key;
    uint64_t slot_size;
    int32_t rc; /* the agent's start-up result */
};

struct scimq_mpi_agent;

struct scimq_mpi {
    MPI_Comm comm, node_comm;
    int rank, size, node_rank, node_size;
    char *url, *queue, *provider, *token_file;
    scimq_mpi_options_t opt;

    struct scimq_fabric fab;
    struct scimq_fabric_mr buf_mr, ops_mr;
    uint8_t *buf; /* SLOT_META + max_message */
    size_t buf_size;
    struct scimq_mpi_op *ops; /* 0-1: receives, 2-3: sends, 4: read */
    fi_addr_t agent_fa;
    struct scimq_mpi_agent_info ai;

    bool holding, want_out, eos;
    bool stopped; /* a stop was handled: DONE and BYE sent */
    int error;
    uint32_t slot;
    uint64_t gen;
    scimq_block_t blocks[SCIMQ_MPI_MAX_BLOCKS];
    char names[SCIMQ_MPI_SLOT_META];

    uint64_t messages, bytes;
    scimq_client_t *put_client;
    pthread_mutex_t put_lock;

    struct scimq_mpi_agent *agent; /* node rank 0 only */
};

/* Agent life cycle (node rank 0). */
int scimq__agent_create(scimq_mpi_t *ctx, struct scimq_mpi_agent **a_p,
                        struct scimq_mpi_agent_info *info);
/* Learns the ranks' addresses and process ids (for the liveness check)
 * and starts the agent thread. */
int scimq__agent_start(struct scimq_mpi_agent *a, const uint8_t *addrs,
                       size_t addr_stride, const int32_t *pids, int nranks);
/* Waits for every rank's BYE (or stop), returns unassigned messages to the
 * gateway and frees the agent. */
void scimq__agent_destroy(struct scimq_mpi_agent *a);

/*
 * Size of a pool slot and of a rank's buffer: the block table room plus
 * max_message, rounded up to 2 MiB (transparent huge pages).  Agent and
 * ranks compute it alike, so a message that fits a slot fits every rank.
 */
static inline size_t
scimq__mpi_slot_size(uint64_t max_message)
{
    size_t huge = 2u << 20;

    return (SCIMQ_MPI_SLOT_META + (size_t) max_message + huge - 1) &
           ~(huge - 1);
}

/* Polls with a back-off that stays cheap on oversubscribed nodes, except
 * for a few milliseconds after scimq__mpi_hot() (backoff.c). */
void scimq__mpi_backoff(unsigned int *spins);
void scimq__mpi_hot(void);

/* Nanoseconds on CLOCK_MONOTONIC (backoff.c). */
uint64_t scimq__mpi_now_ns(void);

#endif /* SCIMQ_MPI_RUNTIME_H */
