/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent-to-rank protocol of libscimq-mpi: libfabric messages between
 * the ranks of a (pseudo-)node and its agent, each one header (struct
 * scimq_mpi_ctrl, versioned, every field checked by scimq__ctrl_check(),
 * ctrl.c):
 *
 *   rank  -> agent  WANT             one credit: "send me one message"
 *   agent -> rank   MSG slot,gen,... a message: inline (block table and
 *                                    payload follow the header in the same
 *                                    libfabric message) or by reference
 *                                    (the rank reads it at raddr/key);
 *                   (+BROADCAST flag: a copy of a control message, which
 *                                    every rank gets)
 *   rank  -> agent  DONE slot,gen    processed: ack it to the gateway
 *                   (+WANT flag: and one credit more)
 *   rank  -> agent  NACK / EXTEND    give back / keep the lease alive
 *   agent -> rank   EOS | ERR code   end of stream / the agent failed
 *   rank  -> agent  BYE              this rank leaves (+DONE flag: and the
 *                                    message in hand is done)
 *   rank  -> agent  PUT slot,raddr.. publish the message in the rank's put
 *                                    buffer (queue name and block table,
 *                                    then payload; the agent reads it and
 *                                    PUTs it on its gateway session)
 *   agent -> rank   PUT_DONE slot,code  its result (slot: the rank's put
 *                                    number)
 *
 * A rank holds at most P + 1 credits and messages together (P, the
 * prefetch depth, prefetch.c), so a busy rank simply does not ask: that is
 * the whole load-balancing mechanism.
 *
 * Pool slot layout: [ .. header | meta | payload ], the payload at
 * SLOT_META bytes into the slot, the block table (meta) written just
 * before it and, for an inline MSG, the header before that, so one read
 * (or one send) carries everything.
 */
#ifndef SCIMQ_MPI_CTRL_H
#define SCIMQ_MPI_CTRL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric.h"

#define SCIMQ_MPI_CTRL_MAGIC 0x53514d43u /* "SQMC" */
/* Bumped on any change of the header or of its rules. */
#define SCIMQ_MPI_CTRL_VERSION 4u
/* Pool chunk: the unit of the agent's allocation (a payload, its block
 * table and an inline header take whole chunks, agent.c). */
#define SCIMQ_MPI_POOL_CHUNK (64u << 10)
/* Room for the block table (and an inline header) before each payload. */
#define SCIMQ_MPI_SLOT_META 4096u
/* Blocks per message the runtime hands to ranks. */
#define SCIMQ_MPI_MAX_BLOCKS 64u
/* Prefetch depth: the largest P, and the bound of "auto". */
#define SCIMQ_MPI_PREFETCH_MAX 8
#define SCIMQ_MPI_PREFETCH_AUTO_MAX 4
/* Default inline threshold (payload bytes), measured with
 * bench/scimq-rma-bench (bench/README.md). */
#define SCIMQ_MPI_INLINE_DEFAULT (4u << 10)

enum scimq_mpi_ctrl_type {
    CTRL_WANT = 1,
    CTRL_DONE,
    CTRL_NACK,
    CTRL_EXTEND,
    CTRL_BYE,
    CTRL_MSG,
    CTRL_EOS,
    CTRL_ERR,
    CTRL_PUT,     /* rank -> agent */
    CTRL_PUT_DONE /* agent -> rank */
};

#define CTRL_F_WANT (1u << 0)    /* DONE/NACK: and one credit more */
#define CTRL_F_REQUEUE (1u << 1) /* NACK: requeue (else dead-letter) */
/* BYE: the message in hand (slot, gen) is done: acknowledged before the
 * rest is given back (one message, so the two cannot cross). */
#define CTRL_F_DONE (1u << 2)
/* MSG: a control message (SCIMQ_MESSAGE_CONTROL), of which every rank gets
 * a copy (bcast.h); always by reference. */
#define CTRL_F_BROADCAST (1u << 3)

/* Host layout: agent and ranks are one build on one kind of machine, and
 * the version and header length say so on every message. */
struct scimq_mpi_ctrl {
    uint32_t magic;   /* SCIMQ_MPI_CTRL_MAGIC */
    uint16_t version; /* SCIMQ_MPI_CTRL_VERSION */
    uint16_t hdr_len; /* sizeof(struct scimq_mpi_ctrl) */
    uint16_t type;
    uint16_t flags;
    uint32_t rank; /* the rank (of the node) that sends or is sent to */
    uint32_t slot;
    uint32_t attempt;
    uint64_t gen; /* slot generation: a stale DONE is ignored */
    uint64_t raddr;
    uint64_t key;
    uint64_t payload_len;
    uint64_t msg_id;
    uint32_t meta_len;
    uint32_t inline_len; /* bytes after the header: meta_len + payload_len
                            for an inline MSG, else 0 */
    int32_t code;
    uint32_t lease_ms;
};

#define SCIMQ_MPI_CTRL_LEN ((uint32_t) sizeof(struct scimq_mpi_ctrl))
/* The longest block table: the slot's room less an inline header. */
#define SCIMQ_MPI_META_MAX (SCIMQ_MPI_SLOT_META - SCIMQ_MPI_CTRL_LEN)

/* A header of type for rank, every other field zero. */
void scimq__ctrl_init(struct scimq_mpi_ctrl *c, uint16_t type, uint32_t rank);

/*
 * Checks a received control message of len bytes against the protocol:
 * magic, version, header length, a type valid in this direction
 * (to_agent), its flags, the total length, and that every field the type
 * does not use is zero.  Returns 0 or SCIMQ_EPROTO_{MAGIC,VERSION,HDRLEN,
 * OPCODE,FLAGS,LENGTHS,RESERVED,ARGS}.  What depends on the receiver's
 * state (rank and slot numbers, addresses, sizes) the receiver checks.
 */
int scimq__ctrl_check(const struct scimq_mpi_ctrl *c, size_t len,
                      bool to_agent);

/* Logs a failed check, naming a version mismatch plainly (the two sides
 * are different builds of libscimq-mpi). */
void scimq__ctrl_log_bad(const char *who, const struct scimq_mpi_ctrl *c,
                         size_t len, int rc);

/* A libfabric operation context (FI_CONTEXT2 comes first). */
struct scimq_mpi_op {
    struct fi_context2 fictx;
    int kind;     /* OP_RECV, OP_SEND, OP_READ */
    int index;    /* position in its array */
    int peer;     /* agent sends: the node rank sent to */
    bool busy;    /* a send in flight */
    bool pending; /* a receive completed, not yet handled */
    size_t len;   /* a completed receive's length */
    struct scimq_mpi_ctrl msg;
};

enum { OP_RECV = 1, OP_SEND, OP_READ };

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

#endif /* SCIMQ_MPI_CTRL_H */
