/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node agent: a thread in the node's first rank.  It pulls messages
 * from the gateway (libscimq, S streams) straight into a pool of
 * pre-faulted, registered buffers, and hands them to the node's ranks as
 * they ask.  It is the passive side of every RMA read.
 *
 * Waiting: with nothing to do the agent sleeps in poll() on what can
 * bring work (agent_wait()): the gateway source's eventfd (a message
 * arrived, source.c), and the ranks' control messages: the completion
 * queue's own descriptor where the provider has one (FI_WAIT_FD, e.g.
 * tcp;ofi_rxm, whose reads then also wake it to progress them), else a
 * doorbell the ranks ring after each batch of control messages, when the
 * agent said it may be asleep (doorbell.h; shm, whose ranks copy by
 * themselves through CMA and need
 * no progress from the agent, except while a read is slow: see
 * prefetch.c).  It wakes at the latest for the next liveness check, and
 * every millisecond while one of its sends is in flight or when nothing
 * can wake it.
 *
 * Pool and credit: the pool is one registered region of chunks
 * (SCIMQ_MPI_POOL_CHUNK, ctrl.h); a message takes as many contiguous chunks as
 * its block table room and payload need (slot_alloc(), first fit from a roving
 * start), and its "slot" is the number of its first chunk.  The client asks the
 * gateway for credit by bytes (a window of at most SCIMQ_MPI_CREDIT_BYTES,
 * half the pool) with a message count bounded by what the pool holds of
 * the smallest messages, so that what is in flight always fits (see
 * agent_size()).  Chunks come back when the rank that processed their
 * message says DONE (and the message is acknowledged to the gateway).
 *
 * Size: the largest message comes from the gateway (WELCOME max_payload,
 * scimq_client_max_payload()), bounded by the pool budget
 * (SCIMQ_MPI_POOL_BYTES: a slot for each message the node's ranks may
 * hold) or by SCIMQ_MPI_MAX_MESSAGE when that is set; the ranks size their
 * buffers from the agent's choice (info->slot_size).  The agent states
 * the limit to libscimq, which tells a version-2 gateway (which then never
 * sends a larger message: it dead-letters one no consumer can take) and
 * otherwise dead-letters a larger delivery itself (NACK requeue=0).  A
 * larger message is never requeued: it would come back here forever.
 *
 * Leases: libscimq extends the lease of every message the agent holds
 * (in the pool, ready or assigned) every half ack timeout, up to
 * SCIMQ_MPI_MAX_HOLD_MS, so a rank may work on a message for longer than
 * the queue's ack timeout without it being delivered again.  That is only
 * safe because the agent notices dead ranks: every SCIMQ_MPI_LIVENESS_MS it
 * checks the process of each rank of its node (they share its kernel), and a
 * failed send to a rank counts too; the messages of a dead rank go back
 * to the gateway at once (NACK requeue), for another rank or job.  A rank
 * that is alive but hung keeps its message until the maximum hold, then
 * the lease runs out and the gateway delivers it again.
 *
 * Puts: a rank's scimq_mpi_put() goes through its agent, so that a job
 * opens one gateway session per agent, not one per rank.  The rank sends
 * PUT naming its put buffer; the agent takes room in the pool, reads the
 * message there (fi_read), and its put thread PUTs it on the source's
 * session, waiting for the gateway's confirmation (libscimq's blocking
 * put, so the rank learns the real result), and answers PUT_DONE.  One
 * put per rank is in flight; a full pool answers SCIMQ_ENOBUFS and the
 * rank asks again.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <scimq/error.h>

#include "common/log.h"
#include "common/param.h"
#include "common/topo.h"
#include "agent.h"
#include "backoff.h"
#include "bcast.h"
#include "ctrl.h"
#include "doorbell.h"
#include "proc.h"
#include "protocol/wire.h"
#include "report.h" /* per-MPI-job reports */
#include "source.h"

/* How long the agent keeps polling (yielding) after it last had work
 * before it sleeps in poll() (agent_main()). */
#define AGENT_SPIN_NS 200000u
/* How often the pool's endpoint is polled where nothing but housekeeping
 * needs it (poll_target()). */
#define TARGET_POLL_NS 50000u

/* Credit window in bytes, unless SCIMQ_MPI_CREDIT_BYTES says otherwise:
 * bandwidth x delay of a long-haul link with room to spare. */
#define CREDIT_BYTES_DEFAULT (64ull << 20)
/* Pool budget when neither SCIMQ_MPI_POOL_BYTES nor SCIMQ_MPI_MAX_MESSAGE
 * is set (then the largest message is what this budget allows). */
#define POOL_BYTES_DEFAULT (256ull << 20)

/* One per chunk; a message's state lives in its first chunk's entry. */
struct agent_slot {
    bool allocated;       /* holds (or receives) a payload */
    uint32_t run;         /* first chunk: chunks the allocation takes */
    uint32_t alloc_gen;   /* names one allocation (see slot_free) */
    scimq_message_t *msg; /* after scimq_client_get() */
    int rank;             /* assigned to, or -1 (and for a control message) */
    uint64_t gen;
    /* A control message: a copy for every rank (bcast.h), its block table
     * written once, before the first copy is read. */
    struct scimq_mpi_bcast *bcast;
    uint32_t meta_len;
};

/* A rank's put: its read into the pool, then the put thread's PUT. */
struct agent_put {
    struct scimq_mpi_op op; /* the read (OP_READ, peer: the rank) */
    bool busy;
    uint32_t seq;  /* the rank's put number, answered in PUT_DONE */
    uint32_t slot; /* first pool chunk */
    uint32_t meta_len;
    uint64_t payload_len;
    int rc;
};

struct scimq_mpi_agent {
    struct scimq_mpi_agent_config cfg;
    pthread_t thread;
    bool started;
    atomic_bool stop, exited;

    /* Puts (see the top): the put thread PUTs what was read. */
    struct agent_put *puts; /* per rank */
    pthread_t put_thread;
    bool put_started, put_quit; /* put_quit: under put_lock */
    pthread_mutex_t put_lock;
    pthread_cond_t put_cv;
    int *put_jobs, put_jobs_head, put_jobs_n; /* ranks read, to PUT */
    int *put_done, put_done_head, put_done_n; /* ranks PUT, to answer */
    int put_efd;                              /* the put thread's news */

    struct scimq_fabric fab;
    /* The endpoint the ranks read the pool from, apart from fab (see "Two
     * endpoints"), and the pool's registration there. */
    struct scimq_fabric target;
    struct scimq_fabric_mr target_mr;
    uint64_t target_polled_ns;
    struct scimq_doorbell bell; /* the ranks' doorbell: fd -1 when
                                   fab.wait_fd does */
    char bell_name[SCIMQ_DOORBELL_NAME_MAX];
    struct scimq_fabric_mr pool_mr, ops_mr;
    uint8_t *pool;
    size_t pool_len;
    size_t slot_size;     /* a rank's buffer: block table room + largest */
    uint64_t max_payload; /* the largest message taken */
    uint32_t nslots;      /* chunks */
    uint32_t rover;       /* where the next first-fit search starts */
    uint32_t free_chunks; /* not allocated; under slot_lock */
    struct agent_slot *slots;
    pthread_mutex_t slot_lock; /* allocated flags: client I/O thread too */
    uint32_t *ready;           /* FIFO of slots got but not assigned */
    uint32_t ready_head, ready_n;
    /* Control messages whose copies are not all settled, in the order
     * they came (each rank gets them in that order, before data). */
    uint32_t *bcasts;
    uint32_t nbcast;

    atomic_bool too_large_logged; /* slot_alloc said EMSGSIZE once */

    int nranks;
    fi_addr_t *rank_fa;
    pid_t *rank_pid;
    int *want;     /* credits: messages each rank asked for */
    int *assigned; /* messages assigned to each rank, not settled */
    bool *gone;
    int credits_max; /* want + assigned, per rank */
    uint64_t inline_max;
    int ngone, rr;
    uint64_t next_liveness_ns;

    struct scimq_mpi_op *ops; /* nrecv receives, then nsend sends */
    int nrecv, nsend;
    /* Receives completed, in the order they completed: a rank's DONE and
     * its BYE must be handled in the order it sent them. */
    int *arrived, arrived_head, arrived_n;
    cpu_set_t rank_cpus; /* union of the node's ranks' bindings */

    const struct scimq_mpi_source_ops *src_ops; /* the gateway, or a hook */
    void *src;
    bool eos;
    int error;
    struct scimq_mpi_report *report; /* REPORTs (report.c), or NULL */
};

/* ------------------------------------------------------------------------ */
/* Pool slots (payload_alloc / payload_release of the client)               */
/* ------------------------------------------------------------------------ */

/* The first of need free chunks in a row within [from, to), or -1. */
static int64_t
find_run_locked(const struct scimq_mpi_agent *a, uint32_t from, uint32_t to,
                uint32_t need)
{
    uint32_t run = 0;

    for (uint32_t i = from; i < to; i++) {
        run = a->slots[i].allocated ? 0 : run + 1;
        if (run == need)
            return (int64_t) i + 1 - need;
    }
    return -1;
}

static int
slot_alloc(void *arg, uint64_t len, void **buf_p, void **ctx_p)
{
    struct scimq_mpi_agent *a = arg;
    int rc = SCIMQ_ENOBUFS;

    uint32_t need;
    int64_t first;

    if (len > a->max_payload) {
        /* libscimq dead-letters it (NACK requeue=0): say so once. */
        if (!atomic_exchange(&a->too_large_logged, true))
            SCIMQ_LOG_ERROR(MPI,
                            "agent: a message of %" PRIu64 " bytes is larger "
                            "than the ranks take (%" PRIu64 " bytes): "
                            "dead-lettered, not requeued; raise "
                            "SCIMQ_MPI_POOL_BYTES or SCIMQ_MPI_MAX_MESSAGE to "
                            "take such messages",
                            len, a->max_payload);
        return SCIMQ_EMSGSIZE;
    }
    need = (uint32_t) ((SCIMQ_MPI_SLOT_META + len + SCIMQ_MPI_POOL_CHUNK - 1) /
                       SCIMQ_MPI_POOL_CHUNK);
    pthread_mutex_lock(&a->slot_lock);
    /* First fit from the rover, then from the start (a run never wraps).
     * A full pool (the usual state while ranks keep up: the agent asks
     * for more on every turn) fails without a scan of every chunk. */
    first = -1;
    if (need <= a->free_chunks) {
        first = find_run_locked(a, a->rover, a->nslots, need);
        if (first < 0)
            first = find_run_locked(a, 0, a->nslots, need);
    }
    if (first >= 0) {
        struct agent_slot *s = &a->slots[first];

        for (uint32_t j = (uint32_t) first; j < (uint32_t) first + need; j++)
            a->slots[j].allocated = true;
        a->free_chunks -= need;
        s->run = need;
        s->alloc_gen++;
        a->rover =
            (uint32_t) first + need < a->nslots ? (uint32_t) first + need : 0;
        *buf_p = a->pool + (size_t) first * SCIMQ_MPI_POOL_CHUNK +
                 SCIMQ_MPI_SLOT_META;
        *ctx_p = (void *) (uintptr_t) (((uint64_t) s->alloc_gen << 32) |
                                       (uint64_t) (first + 1));
        rc = 0;
    }
    pthread_mutex_unlock(&a->slot_lock);
    return rc;
}

/* Frees the chunks of the allocation that starts at chunk i; locked. */
static void
run_free_locked(struct scimq_mpi_agent *a, uint32_t i)
{
    for (uint32_t j = i; j < i + a->slots[i].run && j < a->nslots; j++) {
        a->free_chunks += a->slots[j].allocated;
        a->slots[j].allocated = false;
    }
    a->slots[i].run = 0;
}

static uint32_t
ctx_slot(const void *ctx)
{
    return (uint32_t) ((uintptr_t) ctx & 0xffffffffu) - 1;
}

static void
slot_release(void *arg, void *buf, void *ctx)
{
    struct scimq_mpi_agent *a = arg;
    uint32_t i = ctx_slot(ctx);

    (void) buf;
    pthread_mutex_lock(&a->slot_lock);
    /* A slot freed early by slot_free() may already hold the next one. */
    if (a->slots[i].alloc_gen == (uint32_t) ((uintptr_t) ctx >> 32))
        run_free_locked(a, i);
    pthread_mutex_unlock(&a->slot_lock);
}

/*
 * Frees a slot before its message is acknowledged: the acknowledgement
 * also returns credit, and the next delivery must find a free slot.
 */
static void
slot_free(struct scimq_mpi_agent *a, uint32_t i)
{
    pthread_mutex_lock(&a->slot_lock);
    run_free_locked(a, i);
    a->slots[i].alloc_gen++;
    pthread_mutex_unlock(&a->slot_lock);
}

/*
 * Settles the message in slot with the gateway (how: SCIMQ_SRC_*), frees
 * its slot first (the next delivery must find room) and forgets it.
 */
static void
slot_settle(struct scimq_mpi_agent *a, uint32_t i, int how)
{
    struct agent_slot *s = &a->slots[i];

    slot_free(a, i);
    (void) a->src_ops->settle(a->src, s->msg, how);
    a->src_ops->free(a->src, s->msg);
    s->msg = NULL;
    s->rank = -1;
}

/* ------------------------------------------------------------------------ */
/* Control messages                                                          */
/* ------------------------------------------------------------------------ */

static void rank_gone(struct scimq_mpi_agent *a, int rank, const char *why);
static void put_read_done(struct scimq_mpi_agent *a, int rank, int rc);
static void put_start(struct scimq_mpi_agent *a,
                      const struct scimq_mpi_ctrl *c);

/*
 * Reaps completions: sends free their buffer, receives are marked for the
 * main loop.  A failed send means the rank's endpoint is gone: the rank is
 * taken as dead.  A failed receive is posted again.  Returns the number of
 * completions, or 0 after an error completion.
 */
static int
reap(struct scimq_mpi_agent *a)
{
    struct scimq_fabric_cqe cqe[16];
    int n = scimq__fabric_poll(&a->fab, cqe, 16);

    if (n < 0) {
        struct scimq_mpi_op *op = cqe[0].context;

        if (op != NULL && op->kind == OP_SEND) {
            op->busy = false;
            if (op->peer >= 0 && op->peer < a->nranks && !a->gone[op->peer])
                rank_gone(a, op->peer, "a send to it failed");
        } else if (op != NULL && op->kind == OP_RECV) {
            (void) scimq__fabric_recv(&a->fab, &op->msg, sizeof(op->msg),
                                      a->ops_mr.desc, op);
        } else if (op != NULL && op->kind == OP_READ) {
            put_read_done(a, op->peer, SCIMQ_EFABRIC);
        }
        return 0;
    }
    for (int k = 0; k < n; k++) {
        struct scimq_mpi_op *op = cqe[k].context;

        if (op->kind == OP_SEND) {
            op->busy = false;
        } else if (op->kind == OP_READ) {
            put_read_done(a, op->peer, 0);
        } else if (op->kind == OP_RECV) {
            op->pending = true; /* the main loop handles it */
            op->len = cqe[k].len;
            a->arrived[(a->arrived_head + a->arrived_n) % a->nrecv] = op->index;
            a->arrived_n++;
        }
    }
    return n;
}

/*
 * Sends len bytes to rank: a header alone from a send buffer of its own
 * (buf NULL: msg), or an inline MSG straight from its pool slot (buf,
 * registered in the pool; the slot stays allocated until the rank settles
 * the message, so the bytes stay put while the send is in flight).
 */
static int
send_to(struct scimq_mpi_agent *a, int rank, const struct scimq_mpi_ctrl *msg,
        const void *buf, size_t len)
{
    unsigned int spins = 0;

    for (;;) {
        for (int i = 0; i < a->nsend; i++) {
            struct scimq_mpi_op *op = &a->ops[a->nrecv + i];
            int rc;

            if (op->busy)
                continue;
            op->peer = rank;
            if (buf == NULL) {
                op->msg = *msg;
                rc = scimq__fabric_send(&a->fab, &op->msg, SCIMQ_MPI_CTRL_LEN,
                                        a->ops_mr.desc, a->rank_fa[rank], op);
            } else {
                rc = scimq__fabric_send(&a->fab, buf, len, a->pool_mr.desc,
                                        a->rank_fa[rank], op);
            }
            if (rc == SCIMQ_EAGAIN)
                break; /* progress, then retry */
            if (rc != 0)
                return rc;
            op->busy = true;
            return 0;
        }
        /* All send buffers busy: reap completions. */
        (void) reap(a);
        if (a->gone[rank])
            return SCIMQ_ECONNRESET;
        scimq__mpi_backoff(&spins);
        if (spins > 100000)
            return SCIMQ_ETIMEDOUT;
    }
}

static int
send_ctrl(struct scimq_mpi_agent *a, int rank, const struct scimq_mpi_ctrl *msg)
{
    return send_to(a, rank, msg, NULL, SCIMQ_MPI_CTRL_LEN);
}

/* Writes the block table before the payload; returns its length. */
static uint32_t
write_meta(struct scimq_mpi_agent *a, uint32_t slot, const scimq_message_t *m)
{
    uint8_t *payload =
        a->pool + (size_t) slot * SCIMQ_MPI_POOL_CHUNK + SCIMQ_MPI_SLOT_META;
    uint8_t tmp[SCIMQ_MPI_SLOT_META];
    size_t len = 4;
    uint32_t n = m->block_count < SCIMQ_MPI_MAX_BLOCKS ? m->block_count
                                                       : SCIMQ_MPI_MAX_BLOCKS;

    /* count u32, then per block: name length u32, data length u64, name */
    wire_put32(tmp, n);
    for (uint32_t i = 0; i < n; i++) {
        const char *name = m->blocks[i].name ? m->blocks[i].name : "";
        size_t nl = strlen(name);

        if (len + 12 + nl > SCIMQ_MPI_META_MAX) {
            nl = 0; /* names that do not fit are dropped, lengths kept */
            name = "";
        }
        wire_put32(tmp + len, (uint32_t) nl);
        wire_put64(tmp + len + 4, m->blocks[i].len);
        memcpy(tmp + len + 12, name, nl);
        len += 12 + nl;
    }
    memcpy(payload - len, tmp, len);
    return (uint32_t) len;
}

/*
 * Hands the message in slot to rank: inline (header, block table and
 * payload in one send from the slot) up to inline_max bytes, else a MSG
 * naming the slot for the rank to read.
 */
static void
assign(struct scimq_mpi_agent *a, int rank, uint32_t slot)
{
    struct agent_slot *s = &a->slots[slot];
    struct scimq_mpi_ctrl msg;
    uint8_t *payload =
        a->pool + (size_t) slot * SCIMQ_MPI_POOL_CHUNK + SCIMQ_MPI_SLOT_META;
    uint64_t len;
    int rc;

    scimq__ctrl_init(&msg, CTRL_MSG, (uint32_t) rank);
    msg.slot = slot;
    msg.meta_len = write_meta(a, slot, s->msg);
    s->gen++;
    s->rank = rank;
    msg.gen = s->gen;
    msg.payload_len = s->msg->payload_len;
    msg.msg_id = s->msg->msg_id;
    msg.attempt = s->msg->attempt;
    len = msg.meta_len + s->msg->payload_len;
    a->want[rank]--;
    a->assigned[rank]++;
    if (s->msg->payload_len <= a->inline_max) {
        uint8_t *hdr = payload - msg.meta_len - SCIMQ_MPI_CTRL_LEN;

        msg.inline_len = (uint32_t) len;
        memcpy(hdr, &msg, sizeof(msg));
        rc = send_to(a, rank, NULL, hdr, SCIMQ_MPI_CTRL_LEN + len);
    } else {
        /* Validated here, where the layout is known: inside the slot. */
        msg.raddr = scimq__fabric_remote_addr(&a->target, &a->target_mr,
                                              payload - msg.meta_len);
        msg.key = a->target_mr.key;
        rc = send_ctrl(a, rank, &msg);
    }
    if (rc == 0) /* REPORT: one more handed to rank (report.c) */
        scimq__report_assigned(a->report, rank, slot);
    if (rc != 0) {
        SCIMQ_LOG_ERROR(MPI, "agent: cannot send to rank %d: %s", rank,
                        scimq_strerror(rc));
        /* The message goes back to the gateway for someone else (unless
         * the rank was found dead meanwhile, which gave it back). */
        if (s->msg != NULL) {
            slot_settle(a, slot, SCIMQ_SRC_REQUEUE);
            a->assigned[rank]--;
        }
    }
}

/*
 * Hands rank its copy of the control message in slot: always by reference
 * (every rank reads the one slot; an inline send would need a header of
 * its own per rank in the slot).  A copy handed out again (given back)
 * counts as a later attempt.
 */
static void
assign_copy(struct scimq_mpi_agent *a, int rank, uint32_t slot)
{
    struct agent_slot *s = &a->slots[slot];
    uint8_t *payload =
        a->pool + (size_t) slot * SCIMQ_MPI_POOL_CHUNK + SCIMQ_MPI_SLOT_META;
    struct scimq_mpi_ctrl msg;
    int rc;

    scimq__ctrl_init(&msg, CTRL_MSG, (uint32_t) rank);
    msg.flags = CTRL_F_BROADCAST;
    msg.slot = slot;
    msg.gen = s->gen;
    msg.meta_len = s->meta_len;
    msg.payload_len = s->msg->payload_len;
    msg.msg_id = s->msg->msg_id;
    msg.attempt = s->msg->attempt + scimq__bcast_sent(s->bcast, rank);
    msg.raddr = scimq__fabric_remote_addr(&a->target, &a->target_mr,
                                          payload - s->meta_len);
    msg.key = a->target_mr.key;
    a->want[rank]--;
    a->assigned[rank]++;
    rc = send_ctrl(a, rank, &msg);
    if (rc != 0 && scimq__bcast_held(s->bcast, rank)) {
        /* Not found dead meanwhile: offered again on the next turn. */
        SCIMQ_LOG_ERROR(MPI, "agent: cannot send to rank %d: %s", rank,
                        scimq_strerror(rc));
        scimq__bcast_unsent(s->bcast, rank);
        a->want[rank]++;
        a->assigned[rank]--;
    }
}

/* Every copy of the control message in slot is settled: settles it with
 * the gateway (bcast.h says how) and frees its slot.  One that no rank saw
 * because every rank has left stays in the pool: given back now, it would
 * come straight back to this agent; scimq__agent_destroy() gives it back
 * with the rest. */
static void
bcast_finish(struct scimq_mpi_agent *a, uint32_t slot,
             enum scimq_bcast_outcome how)
{
    struct agent_slot *s = &a->slots[slot];
    uint32_t i = 0;

    if (how != SCIMQ_BCAST_ACK && how != SCIMQ_BCAST_REJECT)
        return;
    while (i < a->nbcast && a->bcasts[i] != slot)
        i++;
    if (i < a->nbcast) {
        memmove(&a->bcasts[i], &a->bcasts[i + 1],
                (a->nbcast - i - 1) * sizeof(a->bcasts[0]));
        a->nbcast--;
    }
    /* A rejected copy is settled for this consumer only: the gateway does
     * not dead-letter a control message (NACK requeue=0). */
    slot_settle(a, slot,
                how == SCIMQ_BCAST_ACK ? SCIMQ_SRC_ACK : SCIMQ_SRC_DEADLETTER);
    scimq__bcast_destroy(s->bcast);
    s->bcast = NULL;
}

/* Rank settled (DONE or NACK) the copy of the control message in slot it
 * holds (settle() checked that). */
static void
settle_copy(struct scimq_mpi_agent *a, const struct scimq_mpi_ctrl *c)
{
    struct agent_slot *s = &a->slots[c->slot];
    enum scimq_bcast_settle how = SCIMQ_BCAST_DONE;

    a->assigned[c->rank]--;
    if (c->type == CTRL_NACK)
        how = (c->flags & CTRL_F_REQUEUE) ? SCIMQ_BCAST_REQUEUE
                                          : SCIMQ_BCAST_REJECTED;
    bcast_finish(a, c->slot, scimq__bcast_settle(s->bcast, (int) c->rank, how));
}

/* Whether rank holds the message in slot under generation gen. */
static bool
holds(const struct scimq_mpi_agent *a, int rank, uint32_t slot, uint64_t gen)
{
    const struct agent_slot *s = &a->slots[slot];

    if (s->msg == NULL || s->gen != gen)
        return false;
    return s->bcast != NULL ? scimq__bcast_held(s->bcast, rank)
                            : s->rank == rank;
}

/* Settles the message in slot on behalf of rank (DONE or NACK). */
static void
settle(struct scimq_mpi_agent *a, const struct scimq_mpi_ctrl *c)
{
    if (c->slot >= a->nslots || !holds(a, (int) c->rank, c->slot, c->gen))
        return; /* stale: the slot moved on */
    if (a->slots[c->slot].bcast != NULL) {
        settle_copy(a, c);
        return;
    }
    a->assigned[c->rank]--;
    /* REPORT: per-rank acks and service time (report.c) */
    scimq__report_settled(a->report, (int) c->rank, c->slot,
                          c->type == CTRL_DONE);
    slot_settle(a, c->slot,
                c->type == CTRL_DONE          ? SCIMQ_SRC_ACK
                : (c->flags & CTRL_F_REQUEUE) ? SCIMQ_SRC_REQUEUE
                                              : SCIMQ_SRC_DEADLETTER);
}

/*
 * Gives back every message held for a rank that left (BYE) or died (why
 * says how it was noticed): requeued at once, for another rank or job.
 */
static void
rank_gone(struct scimq_mpi_agent *a, int rank, const char *why)
{
    unsigned int n = 0;

    for (uint32_t i = 0; i < a->nslots; i++) {
        struct agent_slot *s = &a->slots[i];

        if (s->msg != NULL && s->rank == rank) {
            a->assigned[rank]--;
            slot_settle(a, i, SCIMQ_SRC_REQUEUE);
            n++;
        }
    }
    /* Its copies of control messages: settled for it (backwards: a
     * finished one leaves the list). */
    for (uint32_t i = a->nbcast; i-- > 0;) {
        uint32_t slot = a->bcasts[i];
        bool held;
        enum scimq_bcast_outcome how =
            scimq__bcast_gone(a->slots[slot].bcast, rank, &held);

        if (held)
            a->assigned[rank]--;
        bcast_finish(a, slot, how);
    }
    if (why != NULL && !a->gone[rank])
        SCIMQ_LOG_WARN(MPI,
                       "agent: node rank %d (pid %ld) is dead (%s): %u "
                       "message%s given back to the gateway",
                       rank, (long) a->rank_pid[rank], why, n,
                       n == 1 ? "" : "s");
    if (!a->gone[rank]) {
        a->gone[rank] = true;
        a->ngone++;
    }
    a->want[rank] = 0;
}

/* Every SCIMQ_MPI_LIVENESS_MS: the processes of the node's other ranks. */
static void
liveness(struct scimq_mpi_agent *a)
{
    uint64_t now = scimq__mpi_now_ns();

    if (now < a->next_liveness_ns)
        return;
    a->next_liveness_ns = now + (uint64_t) SCIMQ_MPI_LIVENESS_MS * 1000000u;
    for (int r = 0; r < a->nranks; r++)
        if (!a->gone[r] && a->rank_pid[r] > 0 && a->rank_pid[r] != getpid() &&
            scimq__mpi_pid_dead(a->rank_pid[r]))
            rank_gone(a, r, "its process ended");
}

/* One credit more for rank, within what it may hold. */
static void
credit(struct scimq_mpi_agent *a, int rank)
{
    if (a->want[rank] + a->assigned[rank] >= a->credits_max) {
        SCIMQ_LOG_ERROR(MPI,
                        "agent: node rank %d asks for more than %d messages "
                        "at once: credit ignored",
                        rank, a->credits_max);
        return;
    }
    a->want[rank]++;
}

static void
handle_ctrl(struct scimq_mpi_agent *a, const struct scimq_mpi_ctrl *c,
            size_t len)
{
    int rc = scimq__ctrl_check(c, len, true);

    if (rc == 0 && c->rank >= (uint32_t) a->nranks)
        rc = SCIMQ_EPROTO_ARGS;
    if (rc == 0 && c->type != CTRL_PUT && c->slot >= a->nslots)
        rc = SCIMQ_EPROTO_ARGS;
    if (rc != 0) {
        scimq__ctrl_log_bad("agent", c, len, rc);
        return;
    }
    /* A rank may still publish results after its BYE (a stop). */
    if (c->type == CTRL_PUT) {
        put_start(a, c);
        return;
    }
    if (a->gone[c->rank])
        return; /* after its BYE, or found dead */
    switch (c->type) {
    case CTRL_WANT:
        credit(a, (int) c->rank);
        break;
    case CTRL_DONE:
    case CTRL_NACK:
        settle(a, c);
        if (c->flags & CTRL_F_WANT)
            credit(a, (int) c->rank);
        break;
    case CTRL_EXTEND:
        if (holds(a, (int) c->rank, c->slot, c->gen))
            (void) a->src_ops->extend(a->src, a->slots[c->slot].msg,
                                      c->lease_ms);
        break;
    case CTRL_BYE:
        if (c->flags & CTRL_F_DONE) {
            struct scimq_mpi_ctrl done = *c;

            done.type = CTRL_DONE;
            settle(a, &done);
        }
        rank_gone(a, (int) c->rank, NULL);
        break;
    default:
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* Puts                                                                      */
/* ------------------------------------------------------------------------ */

static void
put_answer(struct scimq_mpi_agent *a, int rank, uint32_t seq, int rc)
{
    struct scimq_mpi_ctrl c;

    scimq__ctrl_init(&c, CTRL_PUT_DONE, (uint32_t) rank);
    c.slot = seq;
    c.code = rc;
    (void) send_ctrl(a, rank, &c);
}

/* A PUT from rank: room in the pool, then one read of the rank's put
 * buffer into it. */
static void
put_start(struct scimq_mpi_agent *a, const struct scimq_mpi_ctrl *c)
{
    struct agent_put *p = &a->puts[c->rank];
    int rank = (int) c->rank, rc;
    void *buf, *bctx;
    uint8_t *dst;

    if (p->busy) {
        /* One at a time: the rank waits for each answer.  A bug. */
        put_answer(a, rank, c->slot, SCIMQ_EBUSY);
        return;
    }
    if (a->src_ops->session == NULL || a->src_ops->session(a->src) == NULL) {
        put_answer(a, rank, c->slot, SCIMQ_ENOTSUP);
        return;
    }
    if (c->payload_len > a->max_payload) {
        put_answer(a, rank, c->slot, SCIMQ_EMSGSIZE);
        return;
    }
    rc = slot_alloc(a, c->payload_len, &buf, &bctx);
    if (rc != 0) {
        put_answer(a, rank, c->slot, rc); /* ENOBUFS: the rank asks again */
        return;
    }
    p->busy = true;
    p->seq = c->slot;
    p->slot = ctx_slot(bctx);
    p->meta_len = c->meta_len;
    p->payload_len = c->payload_len;
    p->op.kind = OP_READ;
    p->op.peer = rank;
    dst = (uint8_t *) buf - c->meta_len;
    for (int i = 0; i < 1000; i++) {
        rc = scimq__fabric_read(&a->fab, dst, c->meta_len + c->payload_len,
                                a->pool_mr.desc, a->rank_fa[rank], c->raddr,
                                c->key, &p->op);
        if (rc != SCIMQ_EAGAIN)
            break;
        (void) reap(a);
    }
    if (rc != 0)
        put_read_done(a, rank, rc);
}

/* The read of rank's put ended (rc): to the put thread, or answered. */
static void
put_read_done(struct scimq_mpi_agent *a, int rank, int rc)
{
    struct agent_put *p;

    if (rank < 0 || rank >= a->nranks || !a->puts[rank].busy)
        return;
    p = &a->puts[rank];
    if (rc != 0) {
        slot_free(a, p->slot);
        p->busy = false;
        put_answer(a, rank, p->seq, rc);
        return;
    }
    pthread_mutex_lock(&a->put_lock);
    a->put_jobs[(a->put_jobs_head + a->put_jobs_n) % a->nranks] = rank;
    a->put_jobs_n++;
    pthread_cond_signal(&a->put_cv);
    pthread_mutex_unlock(&a->put_lock);
}

/* Parses the queue name and block table the rank wrote before the
 * payload (prefetch.c, put_meta()) and PUTs the message. */
static int
put_publish(struct scimq_mpi_agent *a, const struct agent_put *p)
{
    uint8_t *payload =
        a->pool + (size_t) p->slot * SCIMQ_MPI_POOL_CHUNK + SCIMQ_MPI_SLOT_META;
    const uint8_t *meta = payload - p->meta_len, *end = payload;
    char names[SCIMQ_MPI_SLOT_META], *q = names;
    scimq_block_t blocks[SCIMQ_MPI_MAX_BLOCKS];
    size_t used;
    uint64_t off = 0;
    uint32_t ql = wire_get32(meta), n;

    if (ql == 0 || ql > (size_t) (end - meta) - 8)
        return SCIMQ_EPROTO;
    memcpy(q, meta + 4, ql);
    q[ql] = '\0';
    used = ql + 1;
    meta += 4 + ql;
    n = wire_get32(meta);
    meta += 4;
    if (n > SCIMQ_MPI_MAX_BLOCKS)
        return SCIMQ_EPROTO;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nl;

        if (end - meta < 12)
            return SCIMQ_EPROTO;
        nl = wire_get32(meta);
        blocks[i].len = wire_get64(meta + 4);
        meta += 12;
        if ((size_t) (end - meta) < nl || used + nl + 1 > sizeof(names) ||
            blocks[i].len > p->payload_len - off)
            return SCIMQ_EPROTO;
        memcpy(names + used, meta, nl);
        names[used + nl] = '\0';
        blocks[i].name = names + used;
        blocks[i].data = payload + off;
        used += nl + 1;
        meta += nl;
        off += blocks[i].len;
    }
    if (off != p->payload_len)
        return SCIMQ_EPROTO;
    return scimq_client_put(a->src_ops->session(a->src), q, blocks, n, NULL,
                            NULL);
}

/* The put thread: PUTs what was read, one at a time, and waits for each
 * confirmation here, so that the agent thread never blocks on the
 * gateway. */
static void *
put_main(void *arg)
{
    struct scimq_mpi_agent *a = arg;
    uint64_t one = 1;

    (void) pthread_setname_np(pthread_self(), "scimq-agent-put");
    pthread_mutex_lock(&a->put_lock);
    for (;;) {
        int rank;

        while (!a->put_quit && a->put_jobs_n == 0)
            pthread_cond_wait(&a->put_cv, &a->put_lock);
        if (a->put_quit)
            break;
        rank = a->put_jobs[a->put_jobs_head];
        a->put_jobs_head = (a->put_jobs_head + 1) % a->nranks;
        a->put_jobs_n--;
        pthread_mutex_unlock(&a->put_lock);
        a->puts[rank].rc = put_publish(a, &a->puts[rank]);
        pthread_mutex_lock(&a->put_lock);
        a->put_done[(a->put_done_head + a->put_done_n) % a->nranks] = rank;
        a->put_done_n++;
        (void) !write(a->put_efd, &one, sizeof(one));
    }
    pthread_mutex_unlock(&a->put_lock);
    return NULL;
}

/* Answers the puts the put thread finished and frees their room. */
static bool
put_finish(struct scimq_mpi_agent *a)
{
    bool did = false;

    for (;;) {
        int rank;

        pthread_mutex_lock(&a->put_lock);
        if (a->put_done_n == 0) {
            pthread_mutex_unlock(&a->put_lock);
            return did;
        }
        rank = a->put_done[a->put_done_head];
        a->put_done_head = (a->put_done_head + 1) % a->nranks;
        a->put_done_n--;
        pthread_mutex_unlock(&a->put_lock);
        slot_free(a, a->puts[rank].slot);
        a->puts[rank].busy = false;
        put_answer(a, rank, a->puts[rank].seq, a->puts[rank].rc);
        did = true;
    }
}

/*
 * A control message arrived in slot: a copy for every rank that is still
 * here.  The gateway hands it out only once everything put before it is
 * settled, and holds what was put after it until this agent settles it,
 * so it is in order with the data by construction.
 */
static void
fetch_control(struct scimq_mpi_agent *a, uint32_t slot)
{
    struct agent_slot *s = &a->slots[slot];

    s->bcast = scimq__bcast_create(a->nranks, a->gone);
    if (s->bcast == NULL) {
        SCIMQ_LOG_ERROR(MPI, "agent: out of memory for a control message: "
                             "given back to the gateway");
        slot_settle(a, slot, SCIMQ_SRC_REQUEUE);
        return;
    }
    s->meta_len = write_meta(a, slot, s->msg);
    s->gen++;
    a->bcasts[a->nbcast++] = slot; /* every rank gone: it waits there */
}

/* Takes what the client has received into the ready FIFO (control
 * messages into the list of broadcasts). */
static void
fetch(struct scimq_mpi_agent *a)
{
    while (!a->eos && a->error == 0 && a->ready_n < a->nslots) {
        scimq_message_t *m;
        uint32_t slot;
        int rc = a->src_ops->get(a->src, &m);

        if (rc == SCIMQ_EAGAIN)
            return;
        if (rc == SCIMQ_EOS) {
            a->eos = true;
            return;
        }
        if (rc != 0) {
            SCIMQ_LOG_ERROR(MPI, "agent: gateway connection failed: %s",
                            scimq_strerror(rc));
            a->error = rc;
            return;
        }
        slot = ctx_slot(m->payload_ctx);
        a->slots[slot].msg = m;
        a->slots[slot].rank = -1;
        if (m->flags & SCIMQ_MESSAGE_CONTROL) {
            fetch_control(a, slot);
            continue;
        }
        a->ready[(a->ready_head + a->ready_n) % a->nslots] = slot;
        a->ready_n++;
    }
}

/* Whether a copy of a control message waits for rank (it comes before
 * any data and before the end of the stream). */
static bool
copies_to_send(const struct scimq_mpi_agent *a, int rank)
{
    for (uint32_t i = 0; i < a->nbcast; i++)
        if (scimq__bcast_to_send(a->slots[a->bcasts[i]].bcast, rank))
            return true;
    return false;
}

/* Hands control messages to every rank, and ready messages to waiting
 * ranks, round robin; EOS or errors to waiting ranks once nothing is
 * left. */
static bool
dispatch(struct scimq_mpi_agent *a)
{
    bool did = false, more = true;

    /* Control messages first: each rank gets its copies, in order, with
     * the credits it has. */
    for (uint32_t i = 0; i < a->nbcast; i++) {
        uint32_t slot = a->bcasts[i];

        /* A failed send may find a rank dead, and that may finish this
         * message: it is looked up again each time. */
        for (int r = 0; r < a->nranks && a->slots[slot].bcast != NULL; r++) {
            if (a->want[r] == 0 || a->gone[r] ||
                !scimq__bcast_to_send(a->slots[slot].bcast, r))
                continue;
            assign_copy(a, r, slot);
            did = true;
        }
    }
    /* Round robin, one message per rank and pass, so that credits of
     * several messages do not let one rank take the whole FIFO. */
    while (more && a->ready_n > 0) {
        more = false;
        for (int k = 0; k < a->nranks && a->ready_n > 0; k++) {
            int r = (a->rr + k) % a->nranks;
            uint32_t slot;

            if (a->want[r] == 0 || a->gone[r] || copies_to_send(a, r))
                continue;
            slot = a->ready[a->ready_head];
            a->ready_head = (a->ready_head + 1) % a->nslots;
            a->ready_n--;
            assign(a, r, slot);
            a->rr = (r + 1) % a->nranks;
            did = more = true;
        }
    }
    if (a->ready_n == 0 && (a->eos || a->error != 0)) {
        for (int r = 0; r < a->nranks; r++) {
            struct scimq_mpi_ctrl c;

            if (a->want[r] == 0 || a->gone[r] || copies_to_send(a, r))
                continue;
            scimq__ctrl_init(&c, a->error ? CTRL_ERR : CTRL_EOS, (uint32_t) r);
            c.code = a->error;
            a->want[r] = 0;
            (void) send_ctrl(a, r, &c);
            did = true;
        }
    }
    return did;
}

/*
 * Where the agent thread runs (SCIMQ_MPI_AGENT_CORE).  auto: the highest
 * online CPU no rank of the node is bound to, if any (measured: an agent
 * that polls on a rank's core halves that rank's copy rate on shm), else
 * its own rank's binding, unchanged, so that it shares the core of the
 * rank that hosts it rather than another rank's.
 */
static void
placement(struct scimq_mpi_agent *a)
{
    const char *how = a->cfg.agent_core;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    int cpu = -1;

    if (strcmp(how, "none") == 0)
        return;
    if (strcmp(how, "nic") == 0) {
        (void) scimq__topo_bind_near_nic();
        return;
    }
    if (strcmp(how, "auto") == 0) {
        for (long c = ncpu - 1; c >= 0 && c < CPU_SETSIZE && cpu < 0; c--)
            if (!CPU_ISSET((int) c, &a->rank_cpus))
                cpu = (int) c;
        if (cpu < 0) {
            SCIMQ_LOG_INFO(MPI, "agent: every core runs a rank: it shares "
                                "its own rank's");
            return;
        }
    } else {
        cpu = atoi(how);
    }
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
        SCIMQ_LOG_WARN(MPI, "agent: cannot run on CPU %d: left where it was",
                       cpu);
    else
        SCIMQ_LOG_INFO(MPI, "agent: on CPU %d", cpu);
}

static bool
sends_busy(const struct scimq_mpi_agent *a)
{
    for (int i = 0; i < a->nsend; i++)
        if (a->ops[a->nrecv + i].busy)
            return true;
    return false;
}

/*
 * Sleeps until something may have arrived: a control message or a read
 * request of a rank (completion queue descriptor or doorbell), a message
 * from the gateway (the source's descriptor), or the next liveness check.
 * Returns at once when completions are waiting already (fi_trywait).
 * Every descriptor is emptied before the caller looks at what it stands
 * for, so a wake-up is never lost.
 */
static void
agent_wait(struct scimq_mpi_agent *a)
{
    struct pollfd pfd[5];
    int n = 0, src_fd = -1, timeout_ms;
    uint64_t now = scimq__mpi_now_ns();

    if (a->src_ops->wait_fd != NULL)
        src_fd = a->src_ops->wait_fd(a->src);
    if (a->fab.wait_fd >= 0) {
        if (scimq__fabric_trywait(&a->fab) != 0)
            return;
        pfd[n++] = (struct pollfd){.fd = a->fab.wait_fd, .events = POLLIN};
    }
    if (a->target.wait_fd >= 0) {
        if (scimq__fabric_trywait(&a->target) != 0)
            return;
        pfd[n++] = (struct pollfd){.fd = a->target.wait_fd, .events = POLLIN};
    }
    if (a->bell.fd >= 0)
        pfd[n++] = (struct pollfd){.fd = a->bell.fd, .events = POLLIN};
    if (src_fd >= 0)
        pfd[n++] = (struct pollfd){.fd = src_fd, .events = POLLIN};
    pfd[n++] = (struct pollfd){.fd = a->put_efd, .events = POLLIN};
    timeout_ms = a->next_liveness_ns > now
                     ? (int) ((a->next_liveness_ns - now) / 1000000u) + 1
                     : 1;
    /* A send in flight may need this side's progress to complete; and
     * without a descriptor for each side, look again soon. */
    if (sends_busy(a) || src_fd < 0 || (a->fab.wait_fd < 0 && a->bell.fd < 0))
        timeout_ms = 1;
    (void) poll(pfd, (nfds_t) n, timeout_ms);
    if (a->bell.fd >= 0)
        scimq__doorbell_drain(&a->bell);
    if (src_fd >= 0) {
        uint64_t v;

        (void) !read(src_fd, &v, sizeof(v));
    }
    {
        uint64_t v;

        (void) !read(a->put_efd, &v, sizeof(v));
    }
}

/*
 * Two endpoints.  The ranks' control messages arrive on fab, their reads
 * of the pool go to target.  On shm a reader copies by itself (CMA) while
 * it holds the target endpoint's lock, which that endpoint's own progress
 * takes too: with one endpoint the agent could take no DONE and send no
 * MSG while any rank copied (1.3 ms for a 16 MiB read; at 64 KiB, a third
 * of the agent's time went spinning on that lock, and a rank's next
 * message waited for the end of its copy).  Where the readers move the
 * data (shm), target needs progress only for housekeeping (connection
 * requests, the notice each read leaves behind), every TARGET_POLL_NS and
 * after a sleep; where reads move only while the target polls (tcp;ofi_rxm,
 * whose queue has a wait object), on every turn.  No completion arrives
 * there (a read gives the target none); a failed one is logged.
 */
static void
poll_target(struct scimq_mpi_agent *a, bool now)
{
    struct scimq_fabric_cqe cqe[16];

    if (a->target.wait_fd < 0 && !now) {
        uint64_t t = scimq__mpi_now_ns();

        if (t - a->target_polled_ns < TARGET_POLL_NS)
            return;
        a->target_polled_ns = t;
    }
    (void) scimq__fabric_poll(&a->target, cqe, 16);
}

static void *
agent_main(void *arg)
{
    struct scimq_mpi_agent *a = arg;
    uint64_t last_busy_ns = 0;

    /* Named, so that top -H and ps -L show what takes the CPU. */
    (void) pthread_setname_np(pthread_self(), "scimq-agent");
    placement(a);
    /* Until finalize stops it: a rank that left may still put. */
    while (!atomic_load(&a->stop)) {
        bool busy = reap(a) > 0;

        poll_target(a, false);
        /* Handle what arrived, here or while a send waited for room, in
         * the order it arrived. */
        while (a->arrived_n > 0) {
            struct scimq_mpi_op *op = &a->ops[a->arrived[a->arrived_head]];

            a->arrived_head = (a->arrived_head + 1) % a->nrecv;
            a->arrived_n--;
            op->pending = false;
            handle_ctrl(a, &op->msg, op->len);
            (void) scimq__fabric_recv(&a->fab, &op->msg, sizeof(op->msg),
                                      a->ops_mr.desc, op);
            busy = true;
        }
        if (put_finish(a))
            busy = true;
        if (a->ngone == a->nranks)
            atomic_store(&a->exited, true); /* every rank said BYE */
        liveness(a);
        scimq__report_tick(a->report, a->ready_n, a->assigned); /* REPORT */
        /* Ranks that asked get what is ready before the source is asked
         * for more: a DONE's answer (the next MSG) does not wait for the
         * get that refills the slot it freed. */
        if (dispatch(a))
            busy = true;
        fetch(a);
        if (dispatch(a))
            busy = true;
        /* Spin, then block: a busy stream (small messages: a DONE every
         * few tens of microseconds) keeps the agent awake, where a wake-up
         * from poll() would cost more than the message. */
        if (busy) {
            last_busy_ns = scimq__mpi_now_ns();
            scimq__doorbell_arm(&a->bell, false);
        } else if (scimq__mpi_now_ns() - last_busy_ns < AGENT_SPIN_NS) {
            sched_yield();
        } else if (a->bell.fd >= 0 && !a->bell.armed) {
            /* Ranks ring from now on; the next turn looks once more at
             * what they sent before (doorbell.h). */
            scimq__doorbell_arm(&a->bell, true);
        } else {
            agent_wait(a);
            scimq__doorbell_arm(&a->bell, false);
            poll_target(a, true);
        }
    }
    atomic_store(&a->exited, true);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Life cycle                                                                */
/* ------------------------------------------------------------------------ */

/*
 * Sizes and builds the pool once the gateway's largest message is known
 * (gateway_max, 0: unknown), and says what credit to ask for.
 *
 *   largest   SCIMQ_MPI_MAX_MESSAGE if set, else what the budget allows
 *             (a buffer for each of the P + 2 messages each rank of the
 *             node may hold or have ready, whole 2 MiB pages); never more
 *             than the gateway takes anyway;
 *   pool      SCIMQ_MPI_POOL_BYTES if set, else (with MAX_MESSAGE) those
 *             P + 2 buffers per rank, else 256 MiB; at least one largest;
 *   credit    at most half the pool in bytes (64 MiB, or
 *             SCIMQ_MPI_CREDIT_BYTES, at most) but one largest message at
 *             least, and a message count of an eighth of the chunks: what
 *             is in flight then takes at most about 63 % of the pool,
 *             whatever the mix of sizes, and first fit finds room.
 */
static int
agent_size(void *arg, uint64_t gateway_max, struct scimq_mpi_source_credit *cr)
{
    struct scimq_mpi_agent *a = arg;
    const struct scimq_mpi_agent_config *cfg = &a->cfg;
    size_t page = (size_t) sysconf(_SC_PAGESIZE), huge = 2u << 20;
    int rc;
    uint64_t per_rank = cfg->opt.slots_per_rank, budget = cfg->opt.pool_bytes;
    uint64_t max = cfg->opt.max_message, window;
    const char *e = getenv("SCIMQ_MPI_CREDIT_BYTES");

    if (max == 0) {
        uint64_t room = (budget != 0 ? budget : POOL_BYTES_DEFAULT) /
                        ((uint64_t) a->nranks * per_rank);

        room &= ~(uint64_t) (huge - 1);
        max = (room > huge ? room : huge) - SCIMQ_MPI_SLOT_META;
    }
    if (gateway_max != 0 && gateway_max < max)
        max = gateway_max;
    a->max_payload = max;
    a->slot_size = scimq__mpi_slot_size(max);
    if (budget == 0)
        budget = cfg->opt.max_message != 0
                     ? (uint64_t) a->nranks * per_rank * a->slot_size
                     : POOL_BYTES_DEFAULT;
    if (budget < SCIMQ_MPI_SLOT_META + max)
        budget = SCIMQ_MPI_SLOT_META + max;
    a->nslots =
        (uint32_t) ((budget + SCIMQ_MPI_POOL_CHUNK - 1) / SCIMQ_MPI_POOL_CHUNK);
    a->free_chunks = a->nslots;
    a->pool_len = (size_t) a->nslots * SCIMQ_MPI_POOL_CHUNK;

    /* 2 MiB aligned so that transparent huge pages can back it; bound near
     * the NIC and touched now, because first-touch page faults are slow
     * and must not happen on the data path. */
    a->pool = mmap(NULL, a->pool_len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a->pool == MAP_FAILED) {
        a->pool = NULL;
        return SCIMQ_ENOMEM;
    }
    (void) madvise(a->pool, a->pool_len, MADV_HUGEPAGE);
    scimq__topo_membind_near_nic(a->pool, a->pool_len);
    for (size_t off = 0; off < a->pool_len; off += page)
        a->pool[off] = 0;
    a->slots = calloc(a->nslots, sizeof(*a->slots));
    a->ready = calloc(a->nslots, sizeof(*a->ready));
    a->bcasts = calloc(a->nslots, sizeof(*a->bcasts));
    if (a->slots == NULL || a->ready == NULL || a->bcasts == NULL)
        return SCIMQ_ENOMEM;
    for (uint32_t i = 0; i < a->nslots; i++)
        a->slots[i].rank = -1;

    window = CREDIT_BYTES_DEFAULT;
    if (e != NULL && e[0] != '\0' &&
        (scimq__parse_size(e, &window) != 0 || window == 0)) {
        SCIMQ_LOG_ERROR(MPI, "SCIMQ_MPI_CREDIT_BYTES: '%s' is not a size", e);
        return SCIMQ_ECONFIG;
    }
    if (window > a->pool_len / 2)
        window = a->pool_len / 2;
    if (window < max)
        window = max;
    cr->bytes = window;
    cr->messages = a->nslots / 8 > 0 ? a->nslots / 8 : 1;
    cr->max_payload = max;
    SCIMQ_LOG_INFO(
        MPI,
        "agent: largest message %" PRIu64 " bytes (%s%s), pool "
        "%zu bytes for %d ranks, credit %" PRIu64 " bytes / %u messages",
        max,
        cfg->opt.max_message != 0 ? "SCIMQ_MPI_MAX_MESSAGE" : "pool budget",
        gateway_max != 0 && gateway_max == max ? ", the gateway's" : "",
        a->pool_len, a->nranks, cr->bytes, cr->messages);
    /* Here for the agent's own use (inline sends, reads of put buffers),
     * there for the ranks' reads. */
    rc = scimq__fabric_mr_reg(&a->fab, a->pool, a->pool_len, 1, &a->pool_mr);
    if (rc == 0)
        rc = scimq__fabric_mr_reg(&a->target, a->pool, a->pool_len, 1,
                                  &a->target_mr);
    return rc;
}

int
scimq__agent_create(const struct scimq_mpi_agent_config *cfg,
                    struct scimq_mpi_agent **a_p,
                    struct scimq_mpi_agent_info *info)
{
    struct scimq_mpi_agent *a = calloc(1, sizeof(*a));
    int rc;

    if (a == NULL)
        return SCIMQ_ENOMEM;
    a->cfg = *cfg;
    a->nranks = cfg->node_size;
    scimq__doorbell_init(&a->bell);
    a->put_efd = -1;
    pthread_mutex_init(&a->slot_lock, NULL);
    pthread_mutex_init(&a->put_lock, NULL);
    pthread_cond_init(&a->put_cv, NULL);
    rc = scimq__fabric_open_waitable(&a->fab, cfg->provider);
    if (rc == 0)
        rc = scimq__fabric_open_waitable(&a->target, cfg->provider);
    if (rc != 0)
        goto fail;
    if (a->fab.wait_fd < 0) {
        rc = scimq__doorbell_open(&a->bell, a->bell_name);
        if (rc != 0)
            goto fail;
    }

    a->credits_max =
        (cfg->prefetch < 0 ? SCIMQ_MPI_PREFETCH_AUTO_MAX : cfg->prefetch) + 1;
    a->inline_max = cfg->inline_max;
    a->rank_fa = calloc((size_t) a->nranks, sizeof(*a->rank_fa));
    a->rank_pid = calloc((size_t) a->nranks, sizeof(*a->rank_pid));
    a->want = calloc((size_t) a->nranks, sizeof(*a->want));
    a->assigned = calloc((size_t) a->nranks, sizeof(*a->assigned));
    a->gone = calloc((size_t) a->nranks, sizeof(bool));
    a->nrecv = 4 * a->nranks; /* as many as a rank's send buffers */
    a->nsend = 2 * a->nranks;
    a->ops = calloc((size_t) (a->nrecv + a->nsend), sizeof(*a->ops));
    a->puts = calloc((size_t) a->nranks, sizeof(*a->puts));
    a->put_jobs = calloc((size_t) a->nranks, sizeof(*a->put_jobs));
    a->put_done = calloc((size_t) a->nranks, sizeof(*a->put_done));
    a->arrived = calloc((size_t) a->nrecv, sizeof(*a->arrived));
    rc = SCIMQ_ENOMEM;
    if (!a->rank_fa || !a->rank_pid || !a->want || !a->assigned || !a->gone ||
        !a->ops || !a->arrived || !a->puts || !a->put_jobs || !a->put_done)
        goto fail;
    a->put_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (a->put_efd < 0)
        goto fail;
    if (pthread_create(&a->put_thread, NULL, put_main, a) != 0)
        goto fail;
    a->put_started = true;
    rc = scimq__fabric_mr_reg(&a->fab, a->ops,
                              (size_t) (a->nrecv + a->nsend) * sizeof(*a->ops),
                              2, &a->ops_mr);
    if (rc != 0)
        goto fail;

    {
        struct scimq_mpi_source_cfg sc = {
            .url = cfg->url,
            .queue = cfg->queue,
            .token_file = cfg->token_file,
            .streams = cfg->opt.streams,
            .max_hold_ms = cfg->opt.max_hold_ms,
            .sized = agent_size,
            .alloc = slot_alloc,
            .release = slot_release,
            .alloc_arg = a,
        };

        a->src_ops = scimq__mpi_source_hook != NULL
                         ? scimq__mpi_source_hook
                         : &scimq__mpi_gateway_source;
        rc = a->src_ops->open(&sc, &a->src);
        if (rc != 0) {
            a->src = NULL;
            goto fail;
        }
        /* A source that knows no gateway limit (the benchmark's). */
        if (a->pool == NULL) {
            struct scimq_mpi_source_credit cr;

            rc = agent_size(a, 0, &cr);
            if (rc != 0)
                goto fail;
        }
    }
    /* REPORTs to the gateway on the source's session (report.c) */
    a->report = scimq__report_create(
        cfg->node_index, cfg->nodes, cfg->node_size,
        a->src_ops->session != NULL ? a->src_ops->session(a->src) : NULL,
        a->fab.info->fabric_attr->prov_name, a->nslots, a->slot_size);

    memset(info, 0, sizeof(*info));
    info->doorbell_word = -1;
    if (a->bell.fd >= 0) {
        memcpy(info->doorbell, a->bell_name, sizeof(info->doorbell));
        info->doorbell_word = a->bell.word_fd;
    }
    memcpy(info->addr, a->fab.addr, a->fab.addr_len);
    info->addr_len = a->fab.addr_len;
    memcpy(info->target_addr, a->target.addr, a->target.addr_len);
    info->target_addr_len = a->target.addr_len;
    info->pool_raddr =
        scimq__fabric_remote_addr(&a->target, &a->target_mr, a->pool);
    info->pool_len = a->pool_len;
    info->pool_key = a->target_mr.key;
    info->slot_size = a->slot_size;
    info->inline_max = a->inline_max;
    info->pid = (int32_t) getpid();
    info->credits_max = a->credits_max;
    *a_p = a;
    return 0;
fail:
    scimq__agent_destroy(a);
    return rc;
}

int
scimq__agent_start(struct scimq_mpi_agent *a, const uint8_t *addrs,
                   size_t stride, const int32_t *pids, const void *rank_cpus,
                   int nranks)
{
    const cpu_set_t *cpus = rank_cpus;
    int rc;

    /* The cores the node's ranks are bound to; the agent keeps off them
     * when it can (placement()). */
    CPU_ZERO(&a->rank_cpus);
    for (int r = 0; r < nranks; r++)
        CPU_OR(&a->rank_cpus, &a->rank_cpus, &cpus[r]);
    for (int r = 0; r < nranks; r++) {
        a->rank_pid[r] = (pid_t) pids[r];
        rc = scimq__fabric_av_insert(&a->fab, addrs + (size_t) r * stride,
                                     &a->rank_fa[r]);
        if (rc != 0)
            return rc;
    }
    for (int i = 0; i < a->nrecv + a->nsend; i++) {
        a->ops[i].kind = i < a->nrecv ? OP_RECV : OP_SEND;
        a->ops[i].index = i < a->nrecv ? i : i - a->nrecv;
    }
    for (int i = 0; i < a->nrecv; i++) {
        rc = scimq__fabric_recv(&a->fab, &a->ops[i].msg, sizeof(a->ops[i].msg),
                                a->ops_mr.desc, &a->ops[i]);
        if (rc != 0)
            return rc;
    }
    if (pthread_create(&a->thread, NULL, agent_main, a) != 0)
        return SCIMQ_ENOMEM;
    a->started = true;
    return 0;
}

void
scimq__agent_destroy(struct scimq_mpi_agent *a)
{
    if (a == NULL)
        return;
    if (a->started) {
        struct timespec ms = {0, 1000000};

        /* Every rank sent its last DONE and BYE before finalize's barrier:
         * let the agent see them (so nothing processed is requeued), but
         * wait 10 s at most. */
        for (int i = 0; i < 10000 && !atomic_load(&a->exited); i++)
            nanosleep(&ms, NULL);
        atomic_store(&a->stop, true);
        pthread_join(a->thread, NULL);
    }
    if (a->put_started) {
        /* Every rank's put was answered before its BYE. */
        pthread_mutex_lock(&a->put_lock);
        a->put_quit = true;
        pthread_cond_signal(&a->put_cv);
        pthread_mutex_unlock(&a->put_lock);
        pthread_join(a->put_thread, NULL);
    }
    /* The final REPORT, while the session is still open (report.c) */
    scimq__report_destroy(a->report, a->ready_n, a->assigned);
    a->report = NULL;
    if (a->src != NULL) {
        /* Messages in the pool that no rank processed go back. */
        for (uint32_t i = 0; a->slots && i < a->nslots; i++) {
            if (a->slots[i].msg != NULL) {
                (void) a->src_ops->settle(a->src, a->slots[i].msg,
                                          SCIMQ_SRC_REQUEUE);
                a->src_ops->free(a->src, a->slots[i].msg);
                a->slots[i].msg = NULL;
            }
            scimq__bcast_destroy(a->slots[i].bcast);
        }
        a->src_ops->close(a->src);
    }
    scimq__fabric_mr_dereg(&a->ops_mr);
    scimq__fabric_mr_dereg(&a->pool_mr);
    scimq__fabric_mr_dereg(&a->target_mr);
    scimq__fabric_close(&a->target);
    scimq__fabric_close(&a->fab);
    scimq__doorbell_close(&a->bell);
    if (a->put_efd >= 0)
        close(a->put_efd);
    free(a->puts);
    free(a->put_jobs);
    free(a->put_done);
    pthread_mutex_destroy(&a->put_lock);
    pthread_cond_destroy(&a->put_cv);
    if (a->pool != NULL)
        munmap(a->pool, a->pool_len);
    free(a->slots);
    free(a->ready);
    free(a->bcasts);
    free(a->rank_fa);
    free(a->rank_pid);
    free(a->want);
    free(a->assigned);
    free(a->gone);
    free(a->ops);
    free(a->arrived);
    pthread_mutex_destroy(&a->slot_lock);
    free(a);
}
