/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent-to-rank control message: one header format, one checker.
 *
 * Both sides check every message they receive before acting on it: a
 * malformed one must never reach an RMA (a bad read is destructive on some
 * providers, fabric.h) nor settle a message that is not its sender's.  The
 * checks here are the stateless ones: the format, the version, and that
 * each type carries exactly the fields it uses (the others zero, so a
 * later version cannot be half understood).  Rank and slot numbers,
 * addresses and sizes are checked by the receiver, which knows them.
 */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include <scimq/error.h>

#include "common/log.h"
#include "ctrl.h"

void
scimq__ctrl_init(struct scimq_mpi_ctrl *c, uint16_t type, uint32_t rank)
{
    memset(c, 0, sizeof(*c));
    c->magic = SCIMQ_MPI_CTRL_MAGIC;
    c->version = SCIMQ_MPI_CTRL_VERSION;
    c->hdr_len = (uint16_t) SCIMQ_MPI_CTRL_LEN;
    c->type = type;
    c->rank = rank;
}

/* Which fields a type may set (besides magic, version, length, type,
 * flags and rank, which every message has). */
enum {
    F_SLOT = 1u << 0, /* slot and gen */
    F_LEASE = 1u << 1,
    F_MSG = 1u << 2, /* attempt, raddr, key, payload_len, msg_id, meta_len,
                        inline_len */
    F_CODE = 1u << 3
};

struct type_rule {
    bool to_agent;
    uint16_t flags;  /* allowed flags */
    unsigned fields; /* allowed fields */
};

static const struct type_rule rules[] = {
    [CTRL_WANT] = {true, 0, 0},
    [CTRL_DONE] = {true, CTRL_F_WANT, F_SLOT},
    [CTRL_NACK] = {true, CTRL_F_WANT | CTRL_F_REQUEUE, F_SLOT},
    [CTRL_EXTEND] = {true, 0, F_SLOT | F_LEASE},
    [CTRL_BYE] = {true, CTRL_F_DONE, F_SLOT},
    [CTRL_MSG] = {false, CTRL_F_BROADCAST, F_SLOT | F_MSG},
    [CTRL_EOS] = {false, 0, 0},
    [CTRL_ERR] = {false, 0, F_CODE},
    [CTRL_PUT] = {true, 0, F_SLOT | F_MSG},
    [CTRL_PUT_DONE] = {false, 0, F_SLOT | F_CODE},
};

int
scimq__ctrl_check(const struct scimq_mpi_ctrl *c, size_t len, bool to_agent)
{
    const struct type_rule *r;

    if (len < offsetof(struct scimq_mpi_ctrl, type))
        return SCIMQ_EPROTO_HDRLEN;
    if (c->magic != SCIMQ_MPI_CTRL_MAGIC)
        return SCIMQ_EPROTO_MAGIC;
    if (c->version != SCIMQ_MPI_CTRL_VERSION)
        return SCIMQ_EPROTO_VERSION;
    if (c->hdr_len != SCIMQ_MPI_CTRL_LEN || len < SCIMQ_MPI_CTRL_LEN)
        return SCIMQ_EPROTO_HDRLEN;
    if (c->type == 0 || c->type >= sizeof(rules) / sizeof(rules[0]) ||
        rules[c->type].to_agent != to_agent)
        return SCIMQ_EPROTO_OPCODE;
    r = &rules[c->type];
    if ((c->flags & ~r->flags) != 0)
        return SCIMQ_EPROTO_FLAGS;
    if (len != (size_t) SCIMQ_MPI_CTRL_LEN + c->inline_len)
        return SCIMQ_EPROTO_LENGTHS;
    /* A BYE names a slot only with the DONE flag. */
    if ((!(r->fields & F_SLOT) ||
         (c->type == CTRL_BYE && !(c->flags & CTRL_F_DONE))) &&
        (c->slot != 0 || c->gen != 0))
        return SCIMQ_EPROTO_RESERVED;
    if (!(r->fields & F_LEASE) && c->lease_ms != 0)
        return SCIMQ_EPROTO_RESERVED;
    if (!(r->fields & F_CODE) && c->code != 0)
        return SCIMQ_EPROTO_RESERVED;
    if (!(r->fields & F_MSG) &&
        (c->attempt != 0 || c->raddr != 0 || c->key != 0 ||
         c->payload_len != 0 || c->msg_id != 0 || c->meta_len != 0 ||
         c->inline_len != 0))
        return SCIMQ_EPROTO_RESERVED;
    switch (c->type) {
    case CTRL_EXTEND:
        return c->lease_ms != 0 ? 0 : SCIMQ_EPROTO_ARGS;
    case CTRL_ERR:
        return c->code != 0 ? 0 : SCIMQ_EPROTO_ARGS;
    case CTRL_PUT:
        /* A put number (slot), the rank's buffer (raddr, key), the queue
         * and block table (meta_len) and the payload; nothing inline, no
         * generation, attempt or id (the gateway gives those). */
        if (c->gen != 0 || c->attempt != 0 || c->msg_id != 0 ||
            c->inline_len != 0)
            return SCIMQ_EPROTO_RESERVED;
        return c->meta_len >= 12 && c->meta_len <= SCIMQ_MPI_META_MAX
                   ? 0
                   : SCIMQ_EPROTO_ARGS;
    case CTRL_PUT_DONE:
        return c->gen == 0 ? 0 : SCIMQ_EPROTO_RESERVED;
    case CTRL_MSG:
        /* A block table (at least its count) that fits the slot's room,
         * and either everything inline or nothing (then an address). */
        if (c->attempt == 0 || c->meta_len < 4 ||
            c->meta_len > SCIMQ_MPI_META_MAX)
            return SCIMQ_EPROTO_ARGS;
        if (c->inline_len != 0 &&
            ((uint64_t) c->inline_len != c->meta_len + c->payload_len ||
             c->raddr != 0 || c->key != 0))
            return SCIMQ_EPROTO_LENGTHS;
        /* A control message's copies are read from one slot. */
        if ((c->flags & CTRL_F_BROADCAST) && c->inline_len != 0)
            return SCIMQ_EPROTO_FLAGS;
        return 0;
    default:
        return 0;
    }
}

void
scimq__ctrl_log_bad(const char *who, const struct scimq_mpi_ctrl *c, size_t len,
                    int rc)
{
    if (rc == SCIMQ_EPROTO_VERSION)
        SCIMQ_LOG_ERROR(MPI,
                        "%s: control message of version %u, this build "
                        "speaks %u: agent and ranks must run the same "
                        "libscimq-mpi",
                        who, (unsigned) c->version,
                        (unsigned) SCIMQ_MPI_CTRL_VERSION);
    else
        SCIMQ_LOG_ERROR(
            MPI,
            "%s: malformed control message (%zu bytes, type %u, "
            "flags %#x): %s",
            who, len,
            len >= offsetof(struct scimq_mpi_ctrl, flags) ? (unsigned) c->type
                                                          : 0u,
            len >= offsetof(struct scimq_mpi_ctrl, rank) ? (unsigned) c->flags
                                                         : 0u,
            scimq_strerror(rc));
}
