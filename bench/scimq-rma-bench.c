/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scimq-rma-bench: the agent-to-rank RMA hop of libscimq-mpi, measured
 * against a raw fi_read of the same bytes on the same provider, in the same
 * run.
 *
 *   mpirun -np 2 --oversubscribe bench/scimq-rma-bench
 *          [--sizes 64KiB,1MiB,16MiB] [--provider 'shm,tcp;ofi_rxm']
 *          [--trials 7] [--iters 500] [--hop-poll runtime|spin]
 *
 * Rank 0 plays a node agent: a pool of two pre-faulted slots registered
 * with libfabric (the runtime's two slots per rank, one rank), and a
 * progress thread that polls its completion queue and answers requests.
 * Rank 1 plays a rank.  For every (provider, size), trials alternate:
 *
 *   hop  the runtime's exchange, same control structure and checks: the
 *        rank sends WANT (then DONE+WANT for each next message), the agent
 *        writes the block table in front of a slot's payload and answers
 *        MSG (address, key, lengths), the rank validates it, fi_reads
 *        block table and payload into its registered buffer with one read,
 *        waits for completion and parses the table;
 *   raw  back-to-back fi_reads of the same bytes from the same slots into
 *        the same buffer, no control messages.
 *
 * Both count payload bytes only.  In the hop both sides poll with the
 * runtime's back-off (--hop-poll spin: yield only, which isolates the cost
 * of the protocol from that of the back-off); in the reference both poll
 * with sched_yield and never sleep, so it is what the provider can do.
 * It prints min / Q1 / median / Q3 / max of each and the ratio of the
 * medians, then one JSON line with everything.
 */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <mpi.h>

#include <scimq/error.h>

#include "common/param.h"
#include "mpi/fabric.h"
#include "mpi/runtime.h"
#include "protocol/wire.h"
#include "tools/dist.h"

#define NAME "scimq-rma-bench"
#define MAX_LIST 16
#define MAX_TRIALS 1000
#define WARMUP_ITERS 20
/* Bound on any one wait: a dead peer must not hang the job. */
#define WAIT_LIMIT_S 30
/* The runtime's default: two slots per rank, and this node has one rank. */
#define POOL_SLOTS 2
/* One block named "data": count, then name length, data length, name. */
#define BLOCK_NAME "data"
#define META_LEN (4u + 12u + (uint32_t) (sizeof(BLOCK_NAME) - 1))
#define FILL 0x5a

/* Operations, in registered memory as the runtime keeps them. */
#define AGENT_OPS 4 /* 0-1 receives, 2-3 sends */
#define RANK_OPS 5  /* 0-1 receives, 2-3 sends, 4 the read */
#define OP_RECV0 0
#define OP_SEND0 2
#define OP_READ0 4

enum poll_mode { POLL_RUNTIME, POLL_SPIN };

struct cfg {
    uint64_t sizes[MAX_LIST];
    int n_sizes;
    char *providers[MAX_LIST];
    int n_providers;
    int trials;
    uint64_t iters;
    int hop_poll;
};

struct agent {
    struct scimq_fabric fab;
    struct scimq_fabric_mr pool_mr, ops_mr;
    uint8_t *pool;
    size_t pool_len, slot_size;
    struct scimq_mpi_op *ops;
    fi_addr_t rank_fa;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    atomic_int mode;
    atomic_int error;
    /* Owned by the progress thread once started. */
    bool held[POOL_SLOTS];
    uint64_t gen[POOL_SLOTS];
    uint32_t next_slot;
    uint64_t msg_id;
    bool want;
    uint64_t want_size;
};

struct rank {
    struct scimq_fabric fab;
    struct scimq_fabric_mr buf_mr, ops_mr;
    uint8_t *buf;
    size_t buf_size;
    struct scimq_mpi_op *ops;
    fi_addr_t agent_fa;
    struct scimq_mpi_agent_info ai;
    uint64_t max_payload;
    uint32_t slot;
    uint64_t gen;
};

/* ------------------------------------------------------------------------ */
/* Polling                                                                   */
/* ------------------------------------------------------------------------ */

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* Yield rather than spin flat out: three threads share two cores here. */
static void
idle(int mode, unsigned int *spins)
{
    if (mode == POLL_RUNTIME)
        scimq__mpi_backoff(spins);
    else
        sched_yield();
}

/* Waits for a non-blocking collective without spinning: rank 0's main
 * thread waits here while the trial runs, and a blocking MPI call would
 * busy-poll a core that the agent's progress thread and rank 1 need. */
static int
sleepy_wait(MPI_Request *req)
{
    struct timespec ts = {0, 200000};
    int done = 0;

    for (;;) {
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return SCIMQ_EMPI;
        if (done)
            return 0;
        nanosleep(&ts, NULL);
    }
}

/* Every rank leaves with the lowest (worst) of their results. */
static int
agree(int rc)
{
    MPI_Request req;
    int all = rc;

    if (MPI_Iallreduce(&rc, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req) !=
            MPI_SUCCESS ||
        sleepy_wait(&req) != 0)
        return SCIMQ_EMPI;
    return all;
}

/* Pre-faulted memory: first-touch page faults are slow on the VMs this
 * runs on (seconds per GiB) and must not land in a trial. */
static uint8_t *
alloc_prefaulted(size_t len)
{
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED)
        return NULL;
    (void) madvise(p, len, MADV_HUGEPAGE);
    memset(p, FILL, len);
    return p;
}

/* ------------------------------------------------------------------------ */
/* Rank 0: the agent                                                         */
/* ------------------------------------------------------------------------ */

static int
agent_send(struct agent *a, const struct scimq_mpi_ctrl *msg)
{
    unsigned int spins = 0;

    for (;;) {
        struct scimq_fabric_cqe cqe[16];
        int n;

        for (int i = OP_SEND0; i < OP_SEND0 + 2; i++) {
            struct scimq_mpi_op *op = &a->ops[i];
            int rc;

            if (op->busy)
                continue;
            op->msg = *msg;
            op->msg.magic = SCIMQ_MPI_CTRL_MAGIC;
            rc = scimq__fabric_send(&a->fab, &op->msg, sizeof(op->msg),
                                    a->ops_mr.desc, a->rank_fa, op);
            if (rc == SCIMQ_EAGAIN)
                break;
            if (rc != 0)
                return rc;
            op->busy = true;
            return 0;
        }
        /* No room: reap completions, keep receives for the main loop. */
        n = scimq__fabric_poll(&a->fab, cqe, 16);
        if (n < 0)
            return n;
        for (int k = 0; k < n; k++) {
            struct scimq_mpi_op *op = cqe[k].context;

            if (op->kind == OP_SEND)
                op->busy = false;
            else if (op->kind == OP_RECV)
                op->pending = true;
        }
        scimq__mpi_backoff(&spins);
        if (spins > 100000)
            return SCIMQ_ETIMEDOUT;
    }
}

/* Hands the next free slot to the rank, as the runtime's assign() does:
 * block table in front of the payload, a fresh generation, one MSG.  The
 * payload's first 8 bytes carry the message id, which the rank checks to
 * know the read really landed. */
static int
agent_assign(struct agent *a)
{
    struct scimq_mpi_ctrl msg = {.type = CTRL_MSG};
    uint32_t slot = POOL_SLOTS;
    uint8_t *payload;

    for (uint32_t k = 0; k < POOL_SLOTS; k++) {
        uint32_t s = (a->next_slot + k) % POOL_SLOTS;

        if (!a->held[s]) {
            slot = s;
            break;
        }
    }
    if (slot == POOL_SLOTS)
        return SCIMQ_ENOBUFS; /* the rank holds too many: its bug */
    if (a->want_size == 0 ||
        a->want_size > a->slot_size - SCIMQ_MPI_SLOT_META) {
        msg.type = CTRL_ERR;
        msg.code = SCIMQ_EMSGSIZE;
        a->want = false;
        return agent_send(a, &msg);
    }
    a->next_slot = (slot + 1) % POOL_SLOTS;
    payload = a->pool + (size_t) slot * a->slot_size + SCIMQ_MPI_SLOT_META;
    wire_put32(payload - META_LEN, 1);
    wire_put32(payload - META_LEN + 4, (uint32_t) (sizeof(BLOCK_NAME) - 1));
    wire_put64(payload - META_LEN + 8, a->want_size);
    memcpy(payload - META_LEN + 16, BLOCK_NAME, sizeof(BLOCK_NAME) - 1);
    a->msg_id++;
    memcpy(payload, &a->msg_id, sizeof(a->msg_id));
    a->held[slot] = true;
    a->gen[slot]++;
    msg.slot = slot;
    msg.gen = a->gen[slot];
    msg.meta_len = META_LEN;
    msg.payload_len = a->want_size;
    msg.raddr =
        scimq__fabric_remote_addr(&a->fab, &a->pool_mr, payload - META_LEN);
    msg.key = a->pool_mr.key;
    msg.msg_id = a->msg_id;
    msg.attempt = 1;
    a->want = false;
    if (atomic_load(&a->mode) == POLL_RUNTIME)
        scimq__mpi_hot(); /* as the runtime's agent: a read follows */
    return agent_send(a, &msg);
}

/* The rank names the payload size it wants in payload_len of WANT and
 * DONE (a field the runtime leaves unused in that direction). */
static void
agent_handle(struct agent *a, const struct scimq_mpi_ctrl *c)
{
    if (c->magic != SCIMQ_MPI_CTRL_MAGIC)
        return;
    switch (c->type) {
    case CTRL_WANT:
        a->want = true;
        a->want_size = c->payload_len;
        break;
    case CTRL_DONE:
        if (c->slot < POOL_SLOTS && a->held[c->slot] &&
            a->gen[c->slot] == c->gen)
            a->held[c->slot] = false;
        if (c->flags & CTRL_F_WANT) {
            a->want = true;
            a->want_size = c->payload_len;
        }
        break;
    default:
        break;
    }
}

/* The progress thread: polls all the time (the passive side of every read
 * must, or reads stall on tcp;ofi_rxm and outside shm's fast path), handles
 * control messages, answers requests. */
static void *
agent_main(void *arg)
{
    struct agent *a = arg;
    unsigned int spins = 0;

    while (!atomic_load(&a->stop)) {
        struct scimq_fabric_cqe cqe[16];
        bool busy = false;
        int n = scimq__fabric_poll(&a->fab, cqe, 16);

        if (n < 0) {
            struct scimq_mpi_op *op = cqe[0].context;

            atomic_store(&a->error, n);
            if (op != NULL && op->kind == OP_SEND)
                op->busy = false;
            else if (op != NULL && op->kind == OP_RECV)
                (void) scimq__fabric_recv(&a->fab, &op->msg, sizeof(op->msg),
                                          a->ops_mr.desc, op);
            continue;
        }
        for (int i = 0; i < n; i++) {
            struct scimq_mpi_op *op = cqe[i].context;

            busy = true;
            if (op->kind == OP_SEND)
                op->busy = false;
            else if (op->kind == OP_RECV)
                op->pending = true;
        }
        for (int i = OP_RECV0; i < OP_RECV0 + 2; i++) {
            struct scimq_mpi_op *op = &a->ops[i];

            if (!op->pending)
                continue;
            op->pending = false;
            agent_handle(a, &op->msg);
            (void) scimq__fabric_recv(&a->fab, &op->msg, sizeof(op->msg),
                                      a->ops_mr.desc, op);
            busy = true;
        }
        if (a->want) {
            int rc = agent_assign(a);

            if (rc != 0)
                atomic_store(&a->error, rc);
            busy = true;
        }
        if (busy)
            spins = 0;
        else
            idle(atomic_load(&a->mode), &spins);
    }
    return NULL;
}

/* Opens the endpoint and registers the pool and the operations. */
static int
agent_open(struct agent *a, const char *provider,
           struct scimq_mpi_agent_info *info)
{
    int rc = scimq__fabric_open(&a->fab, provider);

    if (rc != 0)
        return rc;
    /* Keys as the runtime picks them: pool 1, operations 2. */
    rc = scimq__fabric_mr_reg(&a->fab, a->pool, a->pool_len, 1, &a->pool_mr);
    if (rc == 0)
        rc = scimq__fabric_mr_reg(&a->fab, a->ops, AGENT_OPS * sizeof(*a->ops),
                                  2, &a->ops_mr);
    if (rc != 0)
        return rc;
    memset(info, 0, sizeof(*info));
    memcpy(info->addr, a->fab.addr, a->fab.addr_len);
    info->addr_len = a->fab.addr_len;
    info->pool_raddr = scimq__fabric_remote_addr(&a->fab, &a->pool_mr, a->pool);
    info->pool_len = a->pool_len;
    info->pool_key = a->pool_mr.key;
    info->slot_size = a->slot_size;
    return 0;
}

static int
agent_start(struct agent *a, const uint8_t *rank_addr)
{
    int rc = scimq__fabric_av_insert(&a->fab, rank_addr, &a->rank_fa);

    memset(a->held, 0, sizeof(a->held));
    a->want = false;
    atomic_store(&a->stop, false);
    atomic_store(&a->error, 0);
    for (int i = 0; i < AGENT_OPS; i++) {
        memset(&a->ops[i], 0, sizeof(a->ops[i]));
        a->ops[i].kind = i < OP_SEND0 ? OP_RECV : OP_SEND;
        a->ops[i].index = i;
    }
    for (int i = OP_RECV0; rc == 0 && i < OP_RECV0 + 2; i++)
        rc = scimq__fabric_recv(&a->fab, &a->ops[i].msg, sizeof(a->ops[i].msg),
                                a->ops_mr.desc, &a->ops[i]);
    if (rc == 0 && pthread_create(&a->thread, NULL, agent_main, a) != 0)
        rc = SCIMQ_ENOMEM;
    a->started = rc == 0;
    return rc;
}

static void
agent_close(struct agent *a)
{
    if (a->started) {
        atomic_store(&a->stop, true);
        pthread_join(a->thread, NULL);
        a->started = false;
    }
    scimq__fabric_mr_dereg(&a->ops_mr);
    scimq__fabric_mr_dereg(&a->pool_mr);
    scimq__fabric_close(&a->fab);
}

/* ------------------------------------------------------------------------ */
/* Rank 1: the rank                                                          */
/* ------------------------------------------------------------------------ */

static int
rank_progress(struct rank *r, struct scimq_mpi_op **recv_p,
              struct scimq_mpi_op **read_p)
{
    struct scimq_fabric_cqe cqe[8];
    int n = scimq__fabric_poll(&r->fab, cqe, 8);

    if (n < 0)
        return n;
    for (int i = 0; i < n; i++) {
        struct scimq_mpi_op *op = cqe[i].context;

        if (op->kind == OP_SEND)
            op->busy = false;
        else if (op->kind == OP_RECV && recv_p != NULL && *recv_p == NULL)
            *recv_p = op;
        else if (op->kind == OP_RECV)
            op->pending = true;
        else if (op->kind == OP_READ && read_p != NULL)
            *read_p = op;
    }
    return n;
}

static int
rank_send(struct rank *r, uint16_t type, uint16_t flags, uint64_t size,
          int mode)
{
    unsigned int spins = 0;

    for (;;) {
        for (int i = OP_SEND0; i < OP_SEND0 + 2; i++) {
            struct scimq_mpi_op *op = &r->ops[i];
            int rc;

            if (op->busy)
                continue;
            memset(&op->msg, 0, sizeof(op->msg));
            op->msg.magic = SCIMQ_MPI_CTRL_MAGIC;
            op->msg.type = type;
            op->msg.flags = flags;
            op->msg.rank = 1;
            op->msg.slot = r->slot;
            op->msg.gen = r->gen;
            op->msg.payload_len = size;
            rc = scimq__fabric_send(&r->fab, &op->msg, sizeof(op->msg),
                                    r->ops_mr.desc, r->agent_fa, op);
            if (rc == 0) {
                op->busy = true;
                if (mode == POLL_RUNTIME)
                    scimq__mpi_hot(); /* as the runtime's ranks */
                return 0;
            }
            if (rc != SCIMQ_EAGAIN)
                return rc;
        }
        if (rank_progress(r, NULL, NULL) < 0)
            return SCIMQ_EFABRIC;
        idle(mode, &spins);
        if (spins > 200000)
            return SCIMQ_ETIMEDOUT;
    }
}

/* Waits until no send is in flight (before a phase ends). */
static int
rank_drain_sends(struct rank *r)
{
    unsigned int spins = 0;

    while (r->ops[OP_SEND0].busy || r->ops[OP_SEND0 + 1].busy) {
        if (rank_progress(r, NULL, NULL) < 0)
            return SCIMQ_EFABRIC;
        scimq__mpi_backoff(&spins);
        if (spins > 20000)
            return SCIMQ_ETIMEDOUT;
    }
    return 0;
}

/* One read of len bytes at raddr into dst, waited for. */
static int
rank_read(struct rank *r, uint8_t *dst, uint64_t len, uint64_t raddr, int mode)
{
    struct scimq_mpi_op *rd = &r->ops[OP_READ0];
    unsigned int spins = 0, polls = 0;
    double deadline = now_s() + WAIT_LIMIT_S;
    int rc;

    do {
        rc = scimq__fabric_read(&r->fab, dst, len, r->buf_mr.desc, r->agent_fa,
                                raddr, r->ai.pool_key, rd);
        if (rc == SCIMQ_EAGAIN) {
            (void) rank_progress(r, NULL, NULL);
            idle(mode, &spins);
        }
    } while (rc == SCIMQ_EAGAIN && spins < 200000);
    if (rc != 0)
        return rc;
    for (spins = 0;;) {
        struct scimq_mpi_op *done = NULL;

        rc = rank_progress(r, NULL, &done);
        if (rc < 0)
            return SCIMQ_EFABRIC;
        if (done == rd)
            return 0;
        if (rc == 0) {
            if (++polls % 1024 == 0 && now_s() > deadline)
                return SCIMQ_ETIMEDOUT;
            idle(mode, &spins);
        }
    }
}

/* The runtime's msg_check(): a bad read would break the endpoint. */
static int
rank_check(const struct rank *r, const struct scimq_mpi_ctrl *m, uint64_t size)
{
    uint64_t lo = r->ai.pool_raddr, hi = lo + r->ai.pool_len;

    if (m->key != r->ai.pool_key || m->meta_len > SCIMQ_MPI_SLOT_META ||
        m->payload_len > r->max_payload || m->payload_len != size ||
        m->raddr < lo || m->raddr > hi ||
        m->meta_len + m->payload_len > hi - m->raddr)
        return SCIMQ_EPROTO;
    return 0;
}

/* The block table the runtime parses after each read (one block here). */
static int
rank_parse(const struct rank *r, const struct scimq_mpi_ctrl *m)
{
    const uint8_t *meta = r->buf + SCIMQ_MPI_SLOT_META - m->meta_len;
    uint64_t id;

    if (m->meta_len != META_LEN || wire_get32(meta) != 1 ||
        wire_get32(meta + 4) != sizeof(BLOCK_NAME) - 1 ||
        wire_get64(meta + 8) != m->payload_len ||
        memcmp(meta + 16, BLOCK_NAME, sizeof(BLOCK_NAME) - 1) != 0)
        return SCIMQ_EPROTO;
    memcpy(&id, r->buf + SCIMQ_MPI_SLOT_META, sizeof(id));
    return id == m->msg_id ? 0 : SCIMQ_EPROTO_DATASUM;
}

/* Waits for the agent's answer to a WANT. */
static int
rank_wait_msg(struct rank *r, struct scimq_mpi_ctrl *m, int mode)
{
    unsigned int spins = 0, polls = 0;
    double deadline = now_s() + WAIT_LIMIT_S;

    for (;;) {
        struct scimq_mpi_op *op = NULL;
        int rc;

        for (int i = OP_RECV0; i < OP_RECV0 + 2 && op == NULL; i++)
            if (r->ops[i].pending)
                op = &r->ops[i];
        if (op == NULL && rank_progress(r, &op, NULL) < 0)
            return SCIMQ_EFABRIC;
        if (op == NULL) {
            if (++polls % 1024 == 0 && now_s() > deadline)
                return SCIMQ_ETIMEDOUT;
            idle(mode, &spins);
            continue;
        }
        *m = op->msg;
        op->pending = false;
        rc = scimq__fabric_recv(&r->fab, &op->msg, sizeof(op->msg),
                                r->ops_mr.desc, op);
        if (rc != 0)
            return rc;
        if (m->magic != SCIMQ_MPI_CTRL_MAGIC)
            return SCIMQ_EPROTO;
        if (m->type == CTRL_ERR)
            return m->code != 0 ? m->code : SCIMQ_EIO;
        if (m->type == CTRL_MSG)
            return 0;
    }
}

/* n messages the runtime's way; their total time in *secs. */
static int
hop_trial(struct rank *r, uint64_t size, uint64_t n, int mode, double *secs)
{
    double t0 = now_s();
    int rc = 0;

    for (uint64_t i = 0; i < n && rc == 0; i++) {
        struct scimq_mpi_ctrl m;

        /* Asking for the next acknowledges the previous, as in next(). */
        rc = i == 0 ? rank_send(r, CTRL_WANT, 0, size, mode)
                    : rank_send(r, CTRL_DONE, CTRL_F_WANT, size, mode);
        if (rc == 0)
            rc = rank_wait_msg(r, &m, mode);
        if (rc != 0)
            break;
        r->slot = m.slot;
        r->gen = m.gen;
        rc = rank_check(r, &m, size);
        if (rc == 0) {
            memset(r->buf + SCIMQ_MPI_SLOT_META, 0, sizeof(uint64_t));
            rc = rank_read(r, r->buf + SCIMQ_MPI_SLOT_META - m.meta_len,
                           m.meta_len + m.payload_len, m.raddr, mode);
        }
        if (rc == 0)
            rc = rank_parse(r, &m);
    }
    *secs = now_s() - t0;
    if (rc == 0)
        rc = rank_send(r, CTRL_DONE, 0, 0, mode);
    if (rc == 0)
        rc = rank_drain_sends(r);
    return rc;
}

/* n back-to-back reads of the bytes the hop reads, alternating between
 * the same two slots; their total time in *secs. */
static int
raw_trial(struct rank *r, uint64_t size, uint64_t n, double *secs)
{
    uint64_t len = META_LEN + size, raddr[POOL_SLOTS];
    uint8_t *dst = r->buf + SCIMQ_MPI_SLOT_META - META_LEN;
    double t0;
    int rc = 0;

    for (int s = 0; s < POOL_SLOTS; s++) {
        struct scimq_mpi_ctrl m = {
            .key = r->ai.pool_key, .meta_len = META_LEN, .payload_len = size};

        m.raddr = r->ai.pool_raddr + (uint64_t) s * r->ai.slot_size +
                  SCIMQ_MPI_SLOT_META - META_LEN;
        raddr[s] = m.raddr;
        if (rank_check(r, &m, size) != 0)
            return SCIMQ_EPROTO;
    }
    t0 = now_s();
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        uint64_t stamp = 0;

        memset(r->buf + SCIMQ_MPI_SLOT_META, 0, sizeof(stamp));
        rc = rank_read(r, dst, len, raddr[i % POOL_SLOTS], POLL_SPIN);
        memcpy(&stamp, r->buf + SCIMQ_MPI_SLOT_META, sizeof(stamp));
        if (rc == 0 && stamp == 0)
            rc = SCIMQ_EPROTO_DATASUM; /* the read did not land */
    }
    *secs = now_s() - t0;
    return rc;
}

static int
rank_open(struct rank *r, const char *provider)
{
    int rc = scimq__fabric_open(&r->fab, provider);

    /* Keys as the runtime picks them: buffer 3, operations 4. */
    if (rc == 0)
        rc = scimq__fabric_mr_reg(&r->fab, r->buf, r->buf_size, 3, &r->buf_mr);
    if (rc == 0)
        rc = scimq__fabric_mr_reg(&r->fab, r->ops, RANK_OPS * sizeof(*r->ops),
                                  4, &r->ops_mr);
    return rc;
}

static int
rank_start(struct rank *r)
{
    int rc = scimq__fabric_av_insert(&r->fab, r->ai.addr, &r->agent_fa);

    for (int i = 0; i < RANK_OPS; i++) {
        memset(&r->ops[i], 0, sizeof(r->ops[i]));
        r->ops[i].kind = i < OP_SEND0   ? OP_RECV
                         : i < OP_READ0 ? OP_SEND
                                        : OP_READ;
        r->ops[i].index = i;
    }
    for (int i = OP_RECV0; rc == 0 && i < OP_RECV0 + 2; i++)
        rc = scimq__fabric_recv(&r->fab, &r->ops[i].msg, sizeof(r->ops[i].msg),
                                r->ops_mr.desc, &r->ops[i]);
    return rc;
}

static void
rank_close(struct rank *r)
{
    scimq__fabric_mr_dereg(&r->ops_mr);
    scimq__fabric_mr_dereg(&r->buf_mr);
    scimq__fabric_close(&r->fab);
}

/* ------------------------------------------------------------------------ */
/* Driver                                                                    */
/* ------------------------------------------------------------------------ */

static const char *
fmt_size(uint64_t v, char *buf, size_t len)
{
    if (v >= (1u << 30) && v % (1u << 30) == 0)
        snprintf(buf, len, "%" PRIu64 "GiB", v >> 30);
    else if (v >= (1u << 20) && v % (1u << 20) == 0)
        snprintf(buf, len, "%" PRIu64 "MiB", v >> 20);
    else if (v >= 1024 && v % 1024 == 0)
        snprintf(buf, len, "%" PRIu64 "KiB", v >> 10);
    else
        snprintf(buf, len, "%" PRIu64 "B", v);
    return buf;
}

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: mpirun -np 2 --oversubscribe " NAME " [options]\n"
            "  --sizes LIST       payload sizes (64KiB,1MiB,16MiB)\n"
            "  --provider LIST    libfabric providers, comma separated "
            "(shm);\n"
            "                     e.g. 'shm,tcp;ofi_rxm'\n"
            "  --trials N         trials per configuration (7)\n"
            "  --iters N          messages (reads) per trial (500)\n"
            "  --hop-poll MODE    runtime (the runtime's back-off) or spin\n"
            "Rank 0 is the agent, rank 1 the rank; exactly 2 ranks.\n");
}

/* Parses the command line; 0, or 2 after a message on rank 0. */
static int
parse_args(int argc, char **argv, struct cfg *cfg, int rank)
{
    static const struct option opts[] = {
        {"sizes", required_argument, NULL, 's'},
        {"provider", required_argument, NULL, 'p'},
        {"providers", required_argument, NULL, 'p'},
        {"trials", required_argument, NULL, 't'},
        {"iters", required_argument, NULL, 'i'},
        {"hop-poll", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    uint64_t v;
    char *save, *tok;
    int ch;

    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 's':
            cfg->n_sizes = 0;
            save = NULL;
            for (tok = strtok_r(optarg, ",", &save);
                 tok != NULL && cfg->n_sizes < MAX_LIST;
                 tok = strtok_r(NULL, ",", &save)) {
                if (scimq__parse_size(tok, &v) != 0 || v == 0 ||
                    v > (1ull << 30))
                    goto bad;
                cfg->sizes[cfg->n_sizes++] = v;
            }
            break;
        case 'p':
            /* Names hold ';' ("tcp;ofi_rxm"), never ','. */
            cfg->n_providers = 0;
            save = NULL;
            for (tok = strtok_r(optarg, ",", &save);
                 tok != NULL && cfg->n_providers < MAX_LIST;
                 tok = strtok_r(NULL, ",", &save))
                cfg->providers[cfg->n_providers++] = tok;
            break;
        case 't':
            if (scimq__parse_size(optarg, &v) != 0 || v < 1 || v > MAX_TRIALS)
                goto bad;
            cfg->trials = (int) v;
            break;
        case 'i':
            if (scimq__parse_size(optarg, &v) != 0 || v < 1)
                goto bad;
            cfg->iters = v;
            break;
        case 'P':
            if (strcmp(optarg, "runtime") == 0)
                cfg->hop_poll = POLL_RUNTIME;
            else if (strcmp(optarg, "spin") == 0)
                cfg->hop_poll = POLL_SPIN;
            else
                goto bad;
            break;
        case 'h':
            if (rank == 0)
                usage(stdout);
            return 1;
        default:
            goto bad;
        }
    }
    if (optind == argc && cfg->n_sizes > 0 && cfg->n_providers > 0)
        return 0;
bad:
    if (rank == 0)
        usage(stderr);
    return 2;
}

/* One configuration: warm-up, then trials alternating hop and raw.  Rank
 * 1 measures; rank 0 receives its times.  Returns 0 or an error code. */
static int
run_size(const struct cfg *cfg, int rank, struct agent *a, struct rank *r,
         uint64_t size, double *hop, double *raw)
{
    uint64_t warm = cfg->iters < WARMUP_ITERS ? cfg->iters : WARMUP_ITERS;
    double dummy;
    int rc = 0;

    for (int t = -1; t < cfg->trials && rc == 0; t++) {
        uint64_t n = t < 0 ? warm : cfg->iters;
        double *hop_t = t < 0 ? &dummy : &hop[t];
        double *raw_t = t < 0 ? &dummy : &raw[t];

        /* The agent idles the runtime's way in the hop, never sleeps in
         * the reference; the mode changes only between phases. */
        if (rank == 0)
            atomic_store(&a->mode, cfg->hop_poll);
        rc = agree(0);
        if (rc == 0)
            rc = agree(rank == 1 ? hop_trial(r, size, n, cfg->hop_poll, hop_t)
                                 : 0);
        if (rank == 0 && rc == 0) {
            rc = atomic_load(&a->error);
            atomic_store(&a->mode, POLL_SPIN);
        }
        if (rc == 0)
            rc = agree(rc);
        if (rc == 0)
            rc = agree(rank == 1 ? raw_trial(r, size, n, raw_t) : 0);
    }
    if (rc == 0 && rank == 1) {
        MPI_Send(hop, cfg->trials, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD);
        MPI_Send(raw, cfg->trials, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD);
    } else if (rc == 0 && rank == 0) {
        MPI_Recv(hop, cfg->trials, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        MPI_Recv(raw, cfg->trials, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    }
    return rc;
}

/* Rank 0: one table row and its JSON object. */
static json_t *
report(const struct cfg *cfg, const char *provider, uint64_t size,
       const double *hop_s, const double *raw_s)
{
    double hop_g[MAX_TRIALS], raw_g[MAX_TRIALS], hop_m[MAX_TRIALS],
        raw_m[MAX_TRIALS], bytes = (double) size * (double) cfg->iters;
    struct scimq_dist hg, rg, hm, rm;
    char sz[32];
    double ratio;

    for (int t = 0; t < cfg->trials; t++) {
        hop_g[t] = bytes / hop_s[t] / (double) (1u << 30);
        raw_g[t] = bytes / raw_s[t] / (double) (1u << 30);
        hop_m[t] = (double) cfg->iters / hop_s[t];
        raw_m[t] = (double) cfg->iters / raw_s[t];
    }
    hg = scimq__dist_of(hop_g, cfg->trials);
    rg = scimq__dist_of(raw_g, cfg->trials);
    hm = scimq__dist_of(hop_m, cfg->trials);
    rm = scimq__dist_of(raw_m, cfg->trials);
    ratio = rg.median > 0 ? hg.median / rg.median : 0.0;
    printf("%-12s %6s  %6.2f %6.2f %6.2f %6.2f %6.2f  "
           "%6.2f %6.2f %6.2f %6.2f %6.2f  %5.2f  %9.0f %9.0f\n",
           provider, fmt_size(size, sz, sizeof(sz)), hg.min, hg.q1, hg.median,
           hg.q3, hg.max, rg.min, rg.q1, rg.median, rg.q3, rg.max, ratio,
           hm.median, rm.median);
    fflush(stdout);
    return json_pack("{s:s, s:I, s:I, s:i, s:o, s:o, s:o, s:o, s:f}",
                     "provider", provider, "size", (json_int_t) size,
                     "read_len", (json_int_t) (size + META_LEN), "trials",
                     cfg->trials, "hop_GiB_per_s", scimq__dist_json(&hg),
                     "raw_GiB_per_s", scimq__dist_json(&rg), "hop_msgs_per_s",
                     scimq__dist_json(&hm), "raw_reads_per_s",
                     scimq__dist_json(&rm), "ratio", ratio);
}

/* Everything for one provider; a provider that is missing is skipped. */
static int
run_provider(const struct cfg *cfg, int rank, struct agent *a, struct rank *r,
             const char *provider, json_t *results)
{
    double hop[MAX_TRIALS], raw[MAX_TRIALS];
    uint8_t rank_addr[SCIMQ_FABRIC_ADDR_MAX];
    int rc;

    rc = rank == 0 ? agent_open(a, provider, &r->ai) : rank_open(r, provider);
    rc = agree(rc);
    if (rc == 0) {
        memcpy(rank_addr, r->fab.addr, sizeof(rank_addr));
        if (MPI_Bcast(&r->ai, sizeof(r->ai), MPI_BYTE, 0, MPI_COMM_WORLD) !=
                MPI_SUCCESS ||
            MPI_Bcast(rank_addr, sizeof(rank_addr), MPI_BYTE, 1,
                      MPI_COMM_WORLD) != MPI_SUCCESS)
            rc = SCIMQ_EMPI;
    }
    if (rc == 0)
        rc = agree(rank == 0 ? agent_start(a, rank_addr) : rank_start(r));
    for (int si = 0; si < cfg->n_sizes && rc == 0; si++) {
        rc = run_size(cfg, rank, a, r, cfg->sizes[si], hop, raw);
        if (rc == 0 && rank == 0)
            json_array_append_new(
                results, report(cfg, provider, cfg->sizes[si], hop, raw));
    }
    if (rc != 0 && rank == 0) {
        printf("%-12s  failed or not available: %s\n", provider,
               scimq_strerror(rc));
        json_array_append_new(results,
                              json_pack("{s:s, s:s}", "provider", provider,
                                        "error", scimq_err_name(rc)));
    }
    /* Nothing in flight at either end before the endpoints close. */
    (void) agree(0);
    if (rank == 0)
        agent_close(a);
    else
        rank_close(r);
    (void) agree(0);
    return rc;
}

int
main(int argc, char **argv)
{
    struct cfg cfg = {.trials = 7, .iters = 500, .hop_poll = POLL_RUNTIME};
    struct agent a = {0};
    struct rank r = {0};
    json_t *results = json_array();
    uint64_t max_size = 0;
    size_t huge = 2u << 20;
    int rank, size, provided, rc, failed = 0;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    cfg.sizes[0] = 64u << 10;
    cfg.sizes[1] = 1u << 20;
    cfg.sizes[2] = 16u << 20;
    cfg.n_sizes = 3;
    cfg.providers[0] = "shm";
    cfg.n_providers = 1;
    rc = parse_args(argc, argv, &cfg, rank);
    if (rc == 0 && size != 2) {
        if (rank == 0)
            fprintf(stderr, NAME ": needs exactly 2 ranks (agent, rank)\n");
        rc = 2;
    }
    if (rc != 0) {
        json_decref(results);
        MPI_Finalize();
        return rc == 1 ? 0 : 2;
    }
    for (int i = 0; i < cfg.n_sizes; i++)
        max_size = cfg.sizes[i] > max_size ? cfg.sizes[i] : max_size;

    /* Memory comes first, once, for every provider: the agent's pool of
     * 2 MiB-aligned slots as the runtime lays it out, the rank's buffer. */
    rc = 0;
    if (rank == 0) {
        a.slot_size = (SCIMQ_MPI_SLOT_META + max_size + huge - 1) & ~(huge - 1);
        a.pool_len = a.slot_size * POOL_SLOTS;
        a.pool = alloc_prefaulted(a.pool_len);
        a.ops = calloc(AGENT_OPS, sizeof(*a.ops));
        rc = a.pool && a.ops ? 0 : SCIMQ_ENOMEM;
    } else {
        r.max_payload = max_size;
        r.buf_size = SCIMQ_MPI_SLOT_META + max_size;
        r.buf = alloc_prefaulted(r.buf_size);
        r.ops = calloc(RANK_OPS, sizeof(*r.ops));
        rc = r.buf && r.ops ? 0 : SCIMQ_ENOMEM;
    }
    rc = agree(rc);
    if (rc == 0 && rank == 0) {
        printf("# %d cores; %" PRIu64 " messages per trial, %d trials, hop "
               "polling: %s; GiB/s of payload\n",
               (int) sysconf(_SC_NPROCESSORS_ONLN), cfg.iters, cfg.trials,
               cfg.hop_poll == POLL_RUNTIME ? "runtime back-off" : "spin");
        printf("%-12s %6s  %-34s  %-34s  %5s  %9s %9s\n", "provider", "size",
               "hop GiB/s min/Q1/median/Q3/max",
               "raw fi_read GiB/s min/Q1/med/Q3/max", "ratio", "hop msg/s",
               "raw rd/s");
        fflush(stdout);
    }
    for (int p = 0; p < cfg.n_providers && rc == 0; p++)
        if (run_provider(&cfg, rank, &a, &r, cfg.providers[p], results) != 0)
            failed++;
    if (rank == 0) {
        json_t *o = json_pack("{s:s, s:i, s:I, s:i, s:s, s:o}", "tool", NAME,
                              "ranks", size, "iters", (json_int_t) cfg.iters,
                              "trials", cfg.trials, "hop_poll",
                              cfg.hop_poll == POLL_RUNTIME ? "runtime" : "spin",
                              "results", results);
        char *text;

        json_object_set_new(o, "error",
                            rc != 0 ? json_string(scimq_err_name(rc))
                                    : json_null());
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (text != NULL)
            printf("%s\n", text);
        fflush(stdout);
        free(text);
        json_decref(o);
    } else {
        json_decref(results);
    }
    if (a.pool != NULL)
        munmap(a.pool, a.pool_len);
    if (r.buf != NULL)
        munmap(r.buf, r.buf_size);
    free(a.ops);
    free(r.ops);
    MPI_Finalize();
    return rc != 0 || failed > 0 ? 1 : 0;
}
