/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Prefetch: the rank keeps up to P messages ready in its own registered
 * buffers while the application computes on the one in hand.
 *
 * Who moves the bytes (measured on libfabric 1.17, shm and tcp;ofi_rxm,
 * 64 KiB and 16 MiB): an RMA aimed at a process that does not poll its
 * completion queue waits until it polls again, whichever side starts it.
 * An agent writing into a computing rank's buffers stalls (fi_write
 * returns -FI_EAGAIN for as long as the rank computes), and on shm a
 * rank's fi_read is a copy done inside the call by the calling thread.
 * Either way the transfer overlaps the application's work only if a
 * thread of the rank drives the endpoint meanwhile.  So this module owns
 * the rank's endpoint and runs one progress thread on it, and the
 * application meets that thread under one mutex, to take a ready buffer
 * or to hand back the one it is done with.
 *
 * Who drives.  One thread at a time makes a progress turn (turn(): reap
 * completions, send control messages, post a read), the holder of
 * fab_lock, so FI_THREAD_DOMAIN holds.  That is the progress thread while
 * the application computes, and the application itself while it waits in
 * take() with nothing ready (for URGENT_SPINS idle turns, then it hands
 * back): the thread that needs the message moves it, and the progress
 * thread sleeps meanwhile.  On a rank's one core this saves two thread
 * switches per message, which at 64 KiB cost as much as a third of the
 * copy (bench/README.md).  An application that comes back within
 * FAST_SERVICE_NS (its average service time) does not wake the progress
 * thread at all: it sends its DONE itself on its next take(); the
 * progress thread looks again within PARK_NS.
 *
 * Credits.  The rank has P + 1 buffers (auto: SCIMQ_MPI_PREFETCH_AUTO_MAX
 * + 1), and asks its agent for one message per credit (WANT, or the WANT
 * flag of a DONE).  It keeps credits + messages on their way + ready + in
 * hand at P + 1 at most, so a rank that is slow never holds more than
 * P + 1 messages: the load-balance cost of prefetch is that a rank may
 * sit on up to P messages that an idle rank could have processed, which
 * at the end of a stream is up to P service times of imbalance per rank.
 * With P = 0 the rank asks only while the application waits in next():
 * the synchronous drain of runtime v1.
 *
 * Auto: P follows the bounded-buffer model.  A message must be asked for
 * one fetch time t ahead of its use, and the application uses one every
 * service time s, so P = ceil(t / s) keeps it from waiting (t: from a
 * credit to the message ready here, which includes the agent's wait for
 * the gateway; s: from a message handed out to its release), within
 * [1, SCIMQ_MPI_PREFETCH_AUTO_MAX], both averaged over the last messages.
 *
 * Inline messages (the agent's MSG carries the block table and payload)
 * are copied from the receive buffer into a message buffer, so that every
 * message the application sees lives in one of the P + 1 buffers.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <scimq/error.h>

#include "backoff.h"
#include "common/log.h"
#include "prefetch.h"
#include "proc.h"
#include "protocol/wire.h"

#define NSEND 4
#define NREQ 32
/* Receives posted: one per buffer (at most one MSG each), two for an EOS
 * or ERR and one for a PUT_DONE. */
#define EXTRA_RECV 3
/* How long a put waits for its PUT_DONE at most: the gateway may hold a
 * PUT back for a while (back-pressure), a dead agent is noticed sooner
 * (liveness). */
#define PUT_TIMEOUT_NS (600ull * 1000000000ull)
/* Wait before asking again when the agent's pool had no room. */
#define PUT_RETRY_NS 1000000u
/* How long close() lets queued control messages leave. */
#define CLOSE_DRAIN_NS (2000000000ull)
/* Yields while the application waits before the thread sleeps between
 * polls (some 0.3 ms; then 200 us sleeps, then 1 ms). */
#define URGENT_SPINS 256u
/* Weight of a new sample in the auto averages: 1/8. */
#define EWMA_SHIFT 3
/* An application whose average service time is below this comes back to
 * take() sooner than a wake-up of the progress thread would pay off. */
#define FAST_SERVICE_NS 20000u
/* How long the progress thread sleeps while the application drives (or
 * may soon drive again, see FAST_SERVICE_NS) before it looks again. */
#define PARK_NS 1000000u

enum buf_state { B_FREE, B_POST_READ, B_FILLING, B_READY, B_HELD };
enum { K_RECV = 1, K_SEND, K_READ };

struct pf_op {
    struct fi_context2 fictx; /* first: the libfabric context */
    int kind, index;
    bool busy;
};

struct pf_buf {
    uint8_t *base;           /* buf_size bytes: [ .. meta | payload ] */
    enum buf_state state;    /* under lock */
    struct scimq_mpi_ctrl m; /* the MSG it holds */
    uint64_t credit_ns;      /* when the credit it answers was given */
    struct pf_op read;
};

struct pf_req {
    uint16_t type, flags;
    uint32_t slot, lease_ms;
    uint64_t gen;
    /* PUT */
    uint64_t raddr, key, payload_len;
    uint32_t meta_len;
};

struct scimq_mpi_prefetch {
    struct scimq_mpi_prefetch_cfg cfg;
    struct scimq_fabric fab;
    struct scimq_fabric_mr buf_mr, recv_mr, send_mr, put_mr;
    uint8_t *put_area;          /* buf_size: [ .. meta | payload ] */
    pthread_mutex_t put_serial; /* one put at a time */
    uint8_t *area;              /* nbuf message buffers */
    size_t buf_size, area_len;
    int nbuf;
    struct pf_buf *bufs;

    struct scimq_mpi_agent_info ai;
    fi_addr_t agent_fa;  /* control messages */
    fi_addr_t target_fa; /* reads of the agent's pool */
    uint8_t *recv_area;  /* nrecv receive buffers of recv_size */
    size_t recv_size;
    int nrecv;
    struct pf_op *recv_ops;
    struct scimq_mpi_ctrl *send_hdrs; /* NSEND, registered */
    struct pf_op send_ops[NSEND];

    pthread_t thread;
    bool started;
    /* Held for a progress turn: by the progress thread, or by the
     * application while it drives (take()).  Taken before lock. */
    pthread_mutex_t fab_lock;
    struct scimq_doorbell bell; /* the agent's doorbell (fd -1: none) */
    uint64_t bell_read_ns;      /* a read in flight since: rung again each ms */
    pid_t agent_pid;            /* watched, or 0 */
    uint64_t next_liveness_ns;

    /* Holder of fab_lock only. */
    int credits_out;
    uint64_t credit_ns[SCIMQ_MPI_PREFETCH_MAX + 1]; /* FIFO of credits */
    int credit_head;

    /* Shared, under lock. */
    pthread_mutex_t lock;
    pthread_cond_t app_cv, io_cv;
    int ready[SCIMQ_MPI_PREFETCH_MAX + 1];
    int ready_head, ready_n;
    int held; /* buffer in hand, or -1 */
    struct pf_req req[NREQ];
    int req_head, req_n;
    int depth; /* current P */
    bool app_waiting, eos, bye, quit;
    bool app_driving;    /* the application makes the turns (take()) */
    bool put_waiting;    /* a put awaits its PUT_DONE */
    uint32_t put_seq;    /* the put in flight (its number) */
    uint32_t put_answer; /* the number of the last PUT_DONE */
    int put_rc;          /* and its result */
    int error;
    uint64_t handed_ns, ewma_fetch_ns, ewma_service_ns;
};

int
scimq__prefetch_depth(const struct scimq_mpi_prefetch *pf)
{
    return pf->depth;
}

const uint8_t *
scimq__prefetch_addr(const struct scimq_mpi_prefetch *pf)
{
    return pf->fab.addr;
}

int
scimq__prefetch_open(const struct scimq_mpi_prefetch_cfg *cfg,
                     struct scimq_mpi_prefetch **pf_p)
{
    struct scimq_mpi_prefetch *pf = calloc(1, sizeof(*pf));
    size_t page = (size_t) sysconf(_SC_PAGESIZE);
    int rc;

    if (pf == NULL)
        return SCIMQ_ENOMEM;
    pf->cfg = *cfg;
    pf->held = -1;
    scimq__doorbell_init(&pf->bell);
    pf->depth = cfg->depth < 0 ? 1 : cfg->depth;
    pf->nbuf = (cfg->depth < 0 ? SCIMQ_MPI_PREFETCH_AUTO_MAX : cfg->depth) + 1;
    pthread_mutex_init(&pf->lock, NULL);
    pthread_mutex_init(&pf->fab_lock, NULL);
    pthread_mutex_init(&pf->put_serial, NULL);
    pthread_cond_init(&pf->app_cv, NULL);
    pthread_cond_init(&pf->io_cv, NULL);
    *pf_p = pf;
    rc = scimq__fabric_open(&pf->fab, cfg->provider);
    if (rc != 0)
        return rc;
    pf->buf_size = scimq__mpi_slot_size(cfg->max_message);
    pf->area_len = pf->buf_size * (size_t) pf->nbuf;
    pf->area = mmap(NULL, pf->area_len, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pf->area == MAP_FAILED) {
        pf->area = NULL;
        return SCIMQ_ENOMEM;
    }
    (void) madvise(pf->area, pf->area_len, MADV_HUGEPAGE);
    /* Touch every page now: first-touch faults are slow on the data path. */
    for (size_t off = 0; off < pf->area_len; off += page)
        pf->area[off] = 0;
    rc = scimq__fabric_mr_reg(&pf->fab, pf->area, pf->area_len, 3, &pf->buf_mr);
    if (rc != 0)
        return rc;
    /* The put buffer is not touched now: most ranks put little or
     * nothing, and its pages fault in on the first put. */
    pf->put_area = mmap(NULL, pf->buf_size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pf->put_area == MAP_FAILED) {
        pf->put_area = NULL;
        return SCIMQ_ENOMEM;
    }
    rc = scimq__fabric_mr_reg(&pf->fab, pf->put_area, pf->buf_size, 6,
                              &pf->put_mr);
    if (rc != 0)
        return rc;
    pf->bufs = calloc((size_t) pf->nbuf, sizeof(*pf->bufs));
    if (pf->bufs == NULL)
        return SCIMQ_ENOMEM;
    for (int i = 0; i < pf->nbuf; i++) {
        pf->bufs[i].base = pf->area + (size_t) i * pf->buf_size;
        pf->bufs[i].read.kind = K_READ;
        pf->bufs[i].read.index = i;
    }
    return 0;
}

static uint8_t *
recv_buf(struct scimq_mpi_prefetch *pf, int i)
{
    return pf->recv_area + (size_t) i * pf->recv_size;
}

static int
post_recv(struct scimq_mpi_prefetch *pf, int i)
{
    return scimq__fabric_recv(&pf->fab, recv_buf(pf, i), pf->recv_size,
                              pf->recv_mr.desc, &pf->recv_ops[i]);
}

static void *pf_main(void *arg);

int
scimq__prefetch_start(struct scimq_mpi_prefetch *pf,
                      const struct scimq_mpi_agent_info *ai, bool agent_local)
{
    int rc;

    pf->ai = *ai;
    /* An agent of this host in another process is watched (liveness). */
    pf->agent_pid = agent_local && ai->pid != (int32_t) getpid() ? ai->pid : 0;
    if (ai->credits_max < pf->nbuf) {
        /* Agent and ranks read the same settings; this is a bug. */
        SCIMQ_LOG_ERROR(MPI,
                        "rank %d: the agent allows %d messages per rank, "
                        "this rank wants %d",
                        pf->cfg.world_rank, (int) ai->credits_max, pf->nbuf);
        return SCIMQ_ECONFIG;
    }
    rc = scimq__fabric_av_insert(&pf->fab, ai->addr, &pf->agent_fa);
    if (rc == 0)
        rc = scimq__fabric_av_insert(&pf->fab, ai->target_addr, &pf->target_fa);
    if (rc != 0)
        return rc;
    /* An agent that cannot wait on its completion queue sleeps until its
     * ranks ring (only those of its host can: the others use a provider
     * with a wait object, tcp;ofi_rxm). */
    if (ai->doorbell[0] != '\0' && agent_local) {
        rc = scimq__doorbell_connect(&pf->bell, ai->doorbell, ai->pid,
                                     ai->doorbell_word);
        if (rc != 0)
            return rc;
    }
    pf->nrecv = pf->nbuf + EXTRA_RECV;
    pf->recv_size =
        (SCIMQ_MPI_CTRL_LEN + SCIMQ_MPI_META_MAX + ai->inline_max + 63) &
        ~(size_t) 63;
    pf->recv_area = calloc((size_t) pf->nrecv, pf->recv_size);
    pf->recv_ops = calloc((size_t) pf->nrecv, sizeof(*pf->recv_ops));
    pf->send_hdrs = calloc(NSEND, sizeof(*pf->send_hdrs));
    if (pf->recv_area == NULL || pf->recv_ops == NULL || pf->send_hdrs == NULL)
        return SCIMQ_ENOMEM;
    rc = scimq__fabric_mr_reg(&pf->fab, pf->recv_area,
                              (size_t) pf->nrecv * pf->recv_size, 4,
                              &pf->recv_mr);
    if (rc == 0)
        rc = scimq__fabric_mr_reg(&pf->fab, pf->send_hdrs,
                                  NSEND * sizeof(*pf->send_hdrs), 5,
                                  &pf->send_mr);
    if (rc != 0)
        return rc;
    for (int i = 0; i < NSEND; i++) {
        pf->send_ops[i].kind = K_SEND;
        pf->send_ops[i].index = i;
    }
    for (int i = 0; i < pf->nrecv; i++) {
        pf->recv_ops[i].kind = K_RECV;
        pf->recv_ops[i].index = i;
        rc = post_recv(pf, i);
        if (rc != 0)
            return rc;
    }
    if (pthread_create(&pf->thread, NULL, pf_main, pf) != 0)
        return SCIMQ_ENOMEM;
    pf->started = true;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The progress thread                                                       */
/* ------------------------------------------------------------------------ */

/* Ends the hop with rc (the first error wins); under lock. */
static void
fail_locked(struct scimq_mpi_prefetch *pf, int rc)
{
    if (pf->error == 0)
        pf->error = rc;
    pthread_cond_broadcast(&pf->app_cv);
}

static void
fail(struct scimq_mpi_prefetch *pf, int rc)
{
    pthread_mutex_lock(&pf->lock);
    fail_locked(pf, rc);
    pthread_mutex_unlock(&pf->lock);
}

/* The CLOCK_REALTIME time ns from now, for pthread_cond_timedwait(). */
static struct timespec
after_ns(uint64_t ns)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t) (ns / 1000000000u);
    ts.tv_nsec += (long) (ns % 1000000000u);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static uint64_t
ewma(uint64_t avg, uint64_t sample)
{
    if (avg == 0)
        return sample;
    return avg - (avg >> EWMA_SHIFT) + (sample >> EWMA_SHIFT);
}

/* A buffer's message is complete: ready for the application; under lock. */
static void
ready_locked(struct scimq_mpi_prefetch *pf, int b)
{
    struct pf_buf *buf = &pf->bufs[b];

    buf->state = B_READY;
    pf->ready[(pf->ready_head + pf->ready_n) % pf->nbuf] = b;
    pf->ready_n++;
    pf->ewma_fetch_ns =
        ewma(pf->ewma_fetch_ns, scimq__mpi_now_ns() - buf->credit_ns);
    pthread_cond_signal(&pf->app_cv);
}

/* Checks a MSG by reference against what the agent announced before any
 * RMA: a bad read would break the endpoint for good. */
static int
msg_check(const struct scimq_mpi_prefetch *pf, const struct scimq_mpi_ctrl *m)
{
    uint64_t lo = pf->ai.pool_raddr, hi = lo + pf->ai.pool_len;
    uint64_t len = (uint64_t) m->meta_len + m->payload_len;

    if (m->payload_len > pf->buf_size - SCIMQ_MPI_SLOT_META)
        return SCIMQ_EPROTO_TOOBIG;
    if (m->inline_len != 0)
        return m->payload_len <= pf->ai.inline_max ? 0 : SCIMQ_EPROTO_TOOBIG;
    if (m->key != pf->ai.pool_key || m->raddr < lo || m->raddr > hi ||
        len > hi - m->raddr)
        return SCIMQ_EPROTO_ARGS;
    return 0;
}

static int
post_read(struct scimq_mpi_prefetch *pf, int b)
{
    struct pf_buf *buf = &pf->bufs[b];
    uint8_t *dst = buf->base + SCIMQ_MPI_SLOT_META - buf->m.meta_len;

    return scimq__fabric_read(
        &pf->fab, dst, (size_t) buf->m.meta_len + buf->m.payload_len,
        pf->buf_mr.desc, pf->target_fa, buf->m.raddr, buf->m.key, &buf->read);
}

static void
on_msg(struct scimq_mpi_prefetch *pf, const struct scimq_mpi_ctrl *m)
{
    int b = -1, rc = msg_check(pf, m);

    if (rc == 0 && pf->credits_out == 0)
        rc = SCIMQ_EPROTO_ARGS; /* a message nobody asked for */
    if (rc != 0) {
        SCIMQ_LOG_ERROR(MPI, "rank %d: bad message from the agent: %s",
                        pf->cfg.world_rank, scimq_strerror(rc));
        fail(pf, rc);
        return;
    }
    pthread_mutex_lock(&pf->lock);
    for (int i = 0; i < pf->nbuf && b < 0; i++)
        if (pf->bufs[i].state == B_FREE)
            b = i;
    if (b < 0) {
        /* Credits never exceed free buffers: a bug on one side. */
        fail_locked(pf, SCIMQ_EPROTO_ARGS);
        pthread_mutex_unlock(&pf->lock);
        return;
    }
    pf->credits_out--;
    pf->bufs[b].m = *m;
    pf->bufs[b].credit_ns = pf->credit_ns[pf->credit_head];
    pf->credit_head = (pf->credit_head + 1) % (SCIMQ_MPI_PREFETCH_MAX + 1);
    if (m->inline_len != 0) {
        /* Outside the lock would be nicer; it is at most inline_max. */
        memcpy(pf->bufs[b].base + SCIMQ_MPI_SLOT_META - m->meta_len,
               (const uint8_t *) m + SCIMQ_MPI_CTRL_LEN, m->inline_len);
        ready_locked(pf, b);
    } else {
        pf->bufs[b].state = B_POST_READ;
    }
    pthread_mutex_unlock(&pf->lock);
}

static void
on_recv(struct scimq_mpi_prefetch *pf, struct pf_op *op, size_t len)
{
    const struct scimq_mpi_ctrl *m =
        (const struct scimq_mpi_ctrl *) recv_buf(pf, op->index);
    int rc = scimq__ctrl_check(m, len, false);

    if (rc == 0 && m->rank != pf->cfg.node_rank)
        rc = SCIMQ_EPROTO_ARGS;
    if (rc != 0) {
        scimq__ctrl_log_bad("rank", m, len, rc);
        fail(pf, rc);
    } else if (m->type == CTRL_MSG) {
        on_msg(pf, m);
    } else {
        pthread_mutex_lock(&pf->lock);
        if (m->type == CTRL_PUT_DONE) {
            pf->put_answer = m->slot;
            pf->put_rc = m->code;
            pthread_cond_broadcast(&pf->app_cv);
        } else if (m->type == CTRL_EOS) {
            pf->eos = true;
            pf->credits_out = 0;
            pthread_cond_broadcast(&pf->app_cv);
        } else {
            fail_locked(pf, m->code);
        }
        pthread_mutex_unlock(&pf->lock);
    }
    rc = post_recv(pf, op->index);
    if (rc != 0)
        fail(pf, rc);
}

/* Reaps completions; returns how many (or 0 after a failed one). */
static int
reap(struct scimq_mpi_prefetch *pf)
{
    struct scimq_fabric_cqe cqe[8];
    int n = scimq__fabric_poll(&pf->fab, cqe, 8);

    if (n < 0) {
        struct pf_op *op = cqe[0].context;

        if (op != NULL && op->kind == K_SEND)
            op->busy = false;
        fail(pf, SCIMQ_EFABRIC);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        struct pf_op *op = cqe[i].context;

        if (op->kind == K_SEND) {
            op->busy = false;
        } else if (op->kind == K_RECV) {
            on_recv(pf, op, cqe[i].len);
        } else {
            pthread_mutex_lock(&pf->lock);
            ready_locked(pf, op->index);
            pthread_mutex_unlock(&pf->lock);
        }
    }
    return n;
}

/*
 * Posts the oldest read that is due, one per turn of the loop: on shm a
 * read is a copy done inside the call, so its completion is reaped (and
 * the message handed out, and its DONE sent) before the next copy starts.
 * A provider queue that is full is retried on the next turn.
 */
static bool
post_reads(struct scimq_mpi_prefetch *pf)
{
    int b = -1, rc;

    for (int i = 0; i < pf->nbuf; i++)
        if (pf->bufs[i].state == B_POST_READ && /* fab_lock's state */
            (b < 0 || pf->bufs[i].credit_ns < pf->bufs[b].credit_ns))
            b = i;
    if (b < 0)
        return false;
    rc = post_read(pf, b);
    if (rc == SCIMQ_EAGAIN)
        return false;
    if (rc != 0) {
        fail(pf, rc);
        return false;
    }
    pthread_mutex_lock(&pf->lock);
    pf->bufs[b].state = B_FILLING;
    pthread_mutex_unlock(&pf->lock);
    return true;
}

static struct pf_op *
free_send(struct scimq_mpi_prefetch *pf)
{
    for (int i = 0; i < NSEND; i++)
        if (!pf->send_ops[i].busy)
            return &pf->send_ops[i];
    return NULL;
}

/* Messages this rank has claimed: credits, on their way, ready, in hand;
 * under lock. */
static int
claimed_locked(const struct scimq_mpi_prefetch *pf)
{
    int n = pf->credits_out;

    for (int i = 0; i < pf->nbuf; i++)
        if (pf->bufs[i].state != B_FREE)
            n++;
    return n;
}

static bool
may_ask_locked(const struct scimq_mpi_prefetch *pf)
{
    return !pf->eos && !pf->bye && !pf->quit && pf->error == 0 &&
           claimed_locked(pf) < pf->depth + 1 &&
           (pf->depth > 0 || pf->app_waiting);
}

/* Auto: P = ceil(t / s) within [1, AUTO_MAX]; under lock. */
static void
auto_depth_locked(struct scimq_mpi_prefetch *pf)
{
    uint64_t s = pf->ewma_service_ns, t = pf->ewma_fetch_ns;
    int p;

    if (pf->cfg.depth >= 0 || s == 0 || t == 0)
        return;
    p = (int) ((t + s - 1) / s);
    pf->depth = p < 1                             ? 1
                : p > SCIMQ_MPI_PREFETCH_AUTO_MAX ? SCIMQ_MPI_PREFETCH_AUTO_MAX
                                                  : p;
}

/*
 * Sends what the application queued (DONE, NACK, EXTEND, BYE) and the
 * credits this rank may give, one libfabric send each, as send buffers
 * allow.  Returns whether anything was sent.
 */
static bool
send_pending(struct scimq_mpi_prefetch *pf)
{
    bool did = false;

    for (;;) {
        struct pf_op *op = free_send(pf);
        struct scimq_mpi_ctrl *h;
        bool credit = false;
        int rc;

        if (op == NULL)
            break;
        h = &pf->send_hdrs[op->index];
        pthread_mutex_lock(&pf->lock);
        if (pf->req_n > 0) {
            const struct pf_req *r = &pf->req[pf->req_head];

            scimq__ctrl_init(h, r->type, pf->cfg.node_rank);
            h->flags = r->flags;
            h->slot = r->slot;
            h->gen = r->gen;
            h->lease_ms = r->lease_ms;
            h->raddr = r->raddr;
            h->key = r->key;
            h->payload_len = r->payload_len;
            h->meta_len = r->meta_len;
            pf->req_head = (pf->req_head + 1) % NREQ;
            pf->req_n--;
            /* The message released gives room for the next one. */
            if ((r->type == CTRL_DONE || r->type == CTRL_NACK) &&
                may_ask_locked(pf)) {
                h->flags |= CTRL_F_WANT;
                credit = true;
            }
        } else if (may_ask_locked(pf)) {
            scimq__ctrl_init(h, CTRL_WANT, pf->cfg.node_rank);
            credit = true;
        } else {
            pthread_mutex_unlock(&pf->lock);
            break;
        }
        if (credit) {
            int tail = (pf->credit_head + pf->credits_out) %
                       (SCIMQ_MPI_PREFETCH_MAX + 1);

            pf->credit_ns[tail] = scimq__mpi_now_ns();
            pf->credits_out++;
        }
        pthread_mutex_unlock(&pf->lock);
        do {
            rc = scimq__fabric_send(&pf->fab, h, SCIMQ_MPI_CTRL_LEN,
                                    pf->send_mr.desc, pf->agent_fa, op);
            if (rc == SCIMQ_EAGAIN) {
                (void) reap(pf);
                sched_yield();
            }
        } while (rc == SCIMQ_EAGAIN);
        if (rc != 0) {
            fail(pf, rc);
            break;
        }
        op->busy = true;
        did = true;
    }
    if (did && pf->bell.fd >= 0)
        scimq__doorbell_notify(&pf->bell);
    return did;
}

static bool
sends_busy(const struct scimq_mpi_prefetch *pf)
{
    for (int i = 0; i < NSEND; i++)
        if (pf->send_ops[i].busy)
            return true;
    return false;
}

/* A read in flight, or with untaken also one the provider did not take
 * yet (EAGAIN: on shm the agent's endpoint must first accept this rank);
 * under lock. */
static bool
reads_busy_locked(const struct scimq_mpi_prefetch *pf, bool untaken)
{
    for (int i = 0; i < pf->nbuf; i++)
        if (pf->bufs[i].state == B_FILLING ||
            (untaken && pf->bufs[i].state == B_POST_READ))
            return true;
    return false;
}

/*
 * Idles.  The thread shares its rank's core with the application, so it
 * polls flat out (yielding) only while someone waits on it: a read in
 * flight (on tcp;ofi_rxm a read moves only while this side polls), or the
 * application in next() with nothing ready, for a short while
 * (URGENT_SPINS: an empty queue must not keep a core busy).  Otherwise it
 * sleeps longer and longer (scimq__mpi_backoff_ns()), on io_cv, so that a
 * request of the application wakes it at once; a message announced while
 * the application computes is then noticed within 20 us to 1 ms, well
 * before it is needed when P messages are kept ahead.
 */
static void
idle(struct scimq_mpi_prefetch *pf, unsigned int *spins)
{
    struct timespec ts;
    uint64_t ns;
    bool urgent, reading;

    pthread_mutex_lock(&pf->lock);
    reading = reads_busy_locked(pf, true);
    /* A put waits on this side's polling: for its PUT_DONE, and on
     * tcp;ofi_rxm for the agent's read of the put buffer. */
    urgent = reading || pf->put_waiting ||
             (pf->app_waiting && pf->ready_n == 0 && *spins < URGENT_SPINS);
    pthread_mutex_unlock(&pf->lock);
    /* A read that does not complete at once (shm without CMA, or any
     * protocol where the target side must progress it) or is not taken yet
     * rings the agent's doorbell every millisecond, so a sleeping agent
     * moves it along. */
    if (pf->bell.fd >= 0) {
        uint64_t now = reading ? scimq__mpi_now_ns() : 0;

        if (!reading)
            pf->bell_read_ns = 0;
        else if (pf->bell_read_ns == 0)
            pf->bell_read_ns = now;
        else if (now - pf->bell_read_ns > 1000000u) {
            scimq__doorbell_ring(&pf->bell);
            pf->bell_read_ns = now;
        }
    }
    if (urgent)
        (*spins)++;
    ns = urgent ? 0 : scimq__mpi_backoff_ns(spins);
    if (ns == 0) {
        sched_yield();
        return;
    }
    ts = after_ns(ns);
    pthread_mutex_lock(&pf->lock);
    if (pf->req_n == 0 && !pf->quit && !pf->put_waiting && !may_ask_locked(pf))
        (void) pthread_cond_timedwait(&pf->io_cv, &pf->lock, &ts);
    pthread_mutex_unlock(&pf->lock);
}

/* A rank whose agent died would wait for ever: every LIVENESS_MS, the
 * agent's process, when it runs on this host. */
static void
liveness(struct scimq_mpi_prefetch *pf)
{
    uint64_t now = scimq__mpi_now_ns();

    if (pf->agent_pid <= 0 || now < pf->next_liveness_ns)
        return;
    pf->next_liveness_ns = now + (uint64_t) SCIMQ_MPI_LIVENESS_MS * 1000000u;
    if (scimq__mpi_pid_dead(pf->agent_pid)) {
        SCIMQ_LOG_ERROR(MPI, "rank %d: its agent (pid %ld) is gone",
                        pf->cfg.world_rank, (long) pf->agent_pid);
        pf->agent_pid = 0;
        fail(pf, SCIMQ_ECONNRESET);
    }
}

/* One progress turn; the caller holds fab_lock.  Returns whether it did
 * anything. */
static bool
turn(struct scimq_mpi_prefetch *pf)
{
    bool busy = reap(pf) > 0;

    /* Control first: a DONE or a credit must not wait for a copy. */
    busy |= send_pending(pf);
    busy |= post_reads(pf);
    return busy;
}

/* The progress thread sleeps while the application drives; an
 * application that left take() without waking it (FAST_SERVICE_NS) is
 * looked after again within PARK_NS. */
static void
park(struct scimq_mpi_prefetch *pf)
{
    pthread_mutex_lock(&pf->lock);
    while (pf->app_driving && !pf->quit) {
        struct timespec ts = after_ns(PARK_NS);

        (void) pthread_cond_timedwait(&pf->io_cv, &pf->lock, &ts);
    }
    pthread_mutex_unlock(&pf->lock);
}

static void *
pf_main(void *arg)
{
    struct scimq_mpi_prefetch *pf = arg;
    unsigned int spins = 0;
    uint64_t quit_by = 0;

    (void) pthread_setname_np(pthread_self(), "scimq-prefetch");
    for (;;) {
        bool busy, sending, quit, drained = false, late = false;

        park(pf);
        pthread_mutex_lock(&pf->fab_lock);
        busy = turn(pf);
        sending = sends_busy(pf);
        pthread_mutex_unlock(&pf->fab_lock);
        /* Here only: an application that drives hands back to this thread
         * after URGENT_SPINS idle turns, so a dead agent is still noticed
         * within a liveness period. */
        liveness(pf);
        pthread_mutex_lock(&pf->lock);
        quit = pf->quit;
        if (quit) {
            /* Leave once what was queued has left and no read writes
             * into the buffers, or after CLOSE_DRAIN_NS. */
            if (quit_by == 0)
                quit_by = scimq__mpi_now_ns() + CLOSE_DRAIN_NS;
            late = scimq__mpi_now_ns() > quit_by;
            drained = (pf->req_n == 0 && !reads_busy_locked(pf, false)) ||
                      pf->error != 0 || late;
        }
        pthread_mutex_unlock(&pf->lock);
        if (quit && drained && (!sending || late))
            break;
        if (busy)
            spins = 0;
        else
            idle(pf, &spins);
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* The application's side                                                    */
/* ------------------------------------------------------------------------ */

/* Whether the application comes back to take() sooner than a wake-up
 * of the progress thread would pay off; under lock. */
static bool
fast_locked(const struct scimq_mpi_prefetch *pf)
{
    return pf->ewma_service_ns < FAST_SERVICE_NS;
}

/* Queues a control message for whoever drives next, and wakes the
 * progress thread unless the application will send it itself (wake
 * false); under lock.  The application issues at most a few per message,
 * so a full queue is only waited for. */
static int
request_locked(struct scimq_mpi_prefetch *pf, const struct pf_req *r, bool wake)
{
    for (int i = 0; pf->req_n == NREQ; i++) {
        struct timespec ts = after_ns(1000000u);

        if (pf->error != 0 || i > 5000)
            return pf->error != 0 ? pf->error : SCIMQ_ETIMEDOUT;
        pthread_cond_signal(&pf->io_cv);
        (void) pthread_cond_timedwait(&pf->app_cv, &pf->lock, &ts);
    }
    pf->req[(pf->req_head + pf->req_n) % NREQ] = *r;
    pf->req_n++;
    if (wake)
        pthread_cond_signal(&pf->io_cv);
    return 0;
}

/* Sends what is queued before a ready message is handed out, when the
 * progress thread was not woken for it (fast_locked()) and nothing else
 * drives: credits must keep flowing while messages are ready.  Called
 * and returns under lock. */
static void
send_now_locked(struct scimq_mpi_prefetch *pf)
{
    if (!fast_locked(pf) || (pf->req_n == 0 && !may_ask_locked(pf)) ||
        pthread_mutex_trylock(&pf->fab_lock) != 0)
        return;
    pthread_mutex_unlock(&pf->lock);
    (void) reap(pf);
    (void) send_pending(pf);
    pthread_mutex_unlock(&pf->fab_lock);
    pthread_mutex_lock(&pf->lock);
}

/* The application starts driving (take()): lock held on entry and on
 * return, fab_lock on return. */
static void
drive_begin_locked(struct scimq_mpi_prefetch *pf)
{
    pf->app_driving = true;
    pthread_mutex_unlock(&pf->lock);
    pthread_mutex_lock(&pf->fab_lock);
    pthread_mutex_lock(&pf->lock);
}

/* And stops; wake: the progress thread takes over now (else within
 * PARK_NS); under lock. */
static void
drive_end_locked(struct scimq_mpi_prefetch *pf, bool wake)
{
    pthread_mutex_unlock(&pf->fab_lock);
    pf->app_driving = false;
    if (wake)
        pthread_cond_signal(&pf->io_cv);
}

int
scimq__prefetch_take(struct scimq_mpi_prefetch *pf, struct scimq_mpi_ready *out,
                     uint64_t deadline_ns, bool (*stop)(void))
{
    int rc;

    pthread_mutex_lock(&pf->lock);
    if (pf->held >= 0 || pf->bye) {
        pthread_mutex_unlock(&pf->lock);
        return SCIMQ_ESTATE;
    }
    pf->app_waiting = true;
    if (pf->ready_n > 0)
        send_now_locked(pf);
    for (unsigned int turns = 0, idle_turns = 0;;) {
        struct timespec ts;
        uint64_t now, until;

        if (pf->ready_n > 0) {
            struct pf_buf *buf;
            int b = pf->ready[pf->ready_head];

            pf->ready_head = (pf->ready_head + 1) % pf->nbuf;
            pf->ready_n--;
            buf = &pf->bufs[b];
            buf->state = B_HELD;
            pf->held = b;
            pf->handed_ns = scimq__mpi_now_ns();
            out->m = buf->m;
            out->payload = buf->base + SCIMQ_MPI_SLOT_META;
            out->meta = out->payload - buf->m.meta_len;
            rc = 0;
            break;
        }
        if (pf->error != 0) {
            rc = pf->error;
            break;
        }
        /* Drained: nothing ready, nothing on its way. */
        if (pf->eos && !reads_busy_locked(pf, false) &&
            claimed_locked(pf) == 0) {
            rc = SCIMQ_EOS;
            break;
        }
        if (stop != NULL && stop()) {
            rc = SCIMQ_ESTOPPED;
            break;
        }
        now = scimq__mpi_now_ns();
        /* try_next() (deadline 0) still makes one turn: a fast
         * application's DONE and credit wait for its turns (fast_locked()),
         * and at P = 0 only a waiting application asks. */
        if (now >= deadline_ns && (deadline_ns != 0 || turns > 0)) {
            rc = deadline_ns == 0 ? SCIMQ_EAGAIN : SCIMQ_ETIMEDOUT;
            break;
        }
        if (idle_turns < URGENT_SPINS) {
            /* Nothing ready: move it here rather than wait for the
             * progress thread to be scheduled (see "Who drives"). */
            bool busy;

            if (!pf->app_driving)
                drive_begin_locked(pf);
            pthread_mutex_unlock(&pf->lock);
            busy = turn(pf);
            turns++;
            if (!busy) {
                idle_turns++;
                sched_yield();
            }
            pthread_mutex_lock(&pf->lock);
            continue;
        }
        if (pf->app_driving)
            drive_end_locked(pf, true); /* a long wait: hand it back */
        /* Wake now and then to notice a stop request (set by a signal
         * handler, which cannot signal a condition variable). */
        until = now + 10000000u < deadline_ns ? now + 10000000u : deadline_ns;
        ts = after_ns(until - now);
        (void) pthread_cond_timedwait(&pf->app_cv, &pf->lock, &ts);
    }
    pf->app_waiting = false;
    if (pf->app_driving)
        drive_end_locked(pf, !fast_locked(pf));
    pthread_mutex_unlock(&pf->lock);
    return rc;
}

int
scimq__prefetch_settle(struct scimq_mpi_prefetch *pf, uint16_t type,
                       uint16_t flags, uint32_t lease_ms)
{
    struct pf_req r = {.type = type, .flags = flags, .lease_ms = lease_ms};
    int rc;

    pthread_mutex_lock(&pf->lock);
    if (pf->held < 0) {
        pthread_mutex_unlock(&pf->lock);
        return SCIMQ_ESTATE;
    }
    r.slot = pf->bufs[pf->held].m.slot;
    r.gen = pf->bufs[pf->held].m.gen;
    /* A fast application sends its DONE itself, in its next take(). */
    rc = request_locked(pf, &r, type == CTRL_EXTEND || !fast_locked(pf));
    if (rc == 0 && type != CTRL_EXTEND) {
        pf->ewma_service_ns =
            ewma(pf->ewma_service_ns, scimq__mpi_now_ns() - pf->handed_ns);
        auto_depth_locked(pf);
        pf->bufs[pf->held].state = B_FREE;
        pf->held = -1;
    }
    pthread_mutex_unlock(&pf->lock);
    return rc;
}

int
scimq__prefetch_bye(struct scimq_mpi_prefetch *pf, bool done)
{
    struct pf_req r = {.type = CTRL_BYE};
    int rc;

    pthread_mutex_lock(&pf->lock);
    if (pf->bye) {
        pthread_mutex_unlock(&pf->lock);
        return 0;
    }
    if (done && pf->held >= 0) {
        r.flags = CTRL_F_DONE;
        r.slot = pf->bufs[pf->held].m.slot;
        r.gen = pf->bufs[pf->held].m.gen;
    } else if (pf->req_n > 0 &&
               pf->req[(pf->req_head + pf->req_n - 1) % NREQ].type ==
                   CTRL_DONE) {
        /* The DONE of the message just released is not sent yet: it goes
         * with the BYE, so that the two cannot be taken out of order. */
        struct pf_req *last = &pf->req[(pf->req_head + pf->req_n - 1) % NREQ];

        r.flags = CTRL_F_DONE;
        r.slot = last->slot;
        r.gen = last->gen;
        pf->req_n--;
    }
    rc = request_locked(pf, &r, true);
    pf->bye = true;
    if (pf->held >= 0) {
        pf->bufs[pf->held].state = B_FREE;
        pf->held = -1;
    }
    pthread_mutex_unlock(&pf->lock);
    return rc;
}

/* Writes queue and the block table (as the agent's, queue first) before
 * the payload in the put buffer; returns its length, or 0 when it does not
 * fit the block table room. */
static uint32_t
put_meta(struct scimq_mpi_prefetch *pf, const char *queue,
         const scimq_block_t *blocks, uint32_t count)
{
    uint8_t tmp[SCIMQ_MPI_META_MAX];
    size_t ql = strlen(queue), len = 8 + ql;

    if (len > sizeof(tmp))
        return 0;
    wire_put32(tmp, (uint32_t) ql);
    memcpy(tmp + 4, queue, ql);
    wire_put32(tmp + 4 + ql, count);
    for (uint32_t i = 0; i < count; i++) {
        const char *name = blocks[i].name != NULL ? blocks[i].name : "";
        size_t nl = strlen(name);

        if (len + 12 + nl > sizeof(tmp))
            return 0;
        wire_put32(tmp + len, (uint32_t) nl);
        wire_put64(tmp + len + 4, blocks[i].len);
        memcpy(tmp + len + 12, name, nl);
        len += 12 + nl;
    }
    memcpy(pf->put_area + SCIMQ_MPI_SLOT_META - len, tmp, len);
    return (uint32_t) len;
}

int
scimq__prefetch_put(struct scimq_mpi_prefetch *pf, const char *queue,
                    const scimq_block_t *blocks, uint32_t count)
{
    uint64_t total = 0, deadline = scimq__mpi_now_ns() + PUT_TIMEOUT_NS;
    uint8_t *payload;
    struct pf_req r = {.type = CTRL_PUT};
    int rc;

    if (count > SCIMQ_MPI_MAX_BLOCKS || (count > 0 && blocks == NULL))
        return SCIMQ_EINVAL;
    for (uint32_t i = 0; i < count; i++) {
        if (blocks[i].len > pf->buf_size - SCIMQ_MPI_SLOT_META - total)
            return SCIMQ_EMSGSIZE;
        total += blocks[i].len;
    }
    pthread_mutex_lock(&pf->put_serial);
    r.meta_len = put_meta(pf, queue, blocks, count);
    if (r.meta_len == 0) {
        pthread_mutex_unlock(&pf->put_serial);
        return SCIMQ_EMSGSIZE;
    }
    payload = pf->put_area + SCIMQ_MPI_SLOT_META;
    for (uint32_t i = 0; i < count; i++) {
        if (blocks[i].len > 0)
            memcpy(payload, blocks[i].data, blocks[i].len);
        payload += blocks[i].len;
    }
    r.raddr = scimq__fabric_remote_addr(
        &pf->fab, &pf->put_mr, pf->put_area + SCIMQ_MPI_SLOT_META - r.meta_len);
    r.key = pf->put_mr.key;
    r.payload_len = total;
    pthread_mutex_lock(&pf->lock);
    for (;;) {
        r.slot = ++pf->put_seq;
        rc = request_locked(pf, &r, true);
        if (rc != 0)
            break;
        pf->put_waiting = true;
        while (pf->put_answer != r.slot && pf->error == 0 &&
               scimq__mpi_now_ns() < deadline) {
            struct timespec ts = after_ns(10000000u);

            (void) pthread_cond_timedwait(&pf->app_cv, &pf->lock, &ts);
        }
        pf->put_waiting = false;
        rc = pf->put_answer == r.slot ? pf->put_rc
             : pf->error != 0         ? pf->error
                                      : SCIMQ_ETIMEDOUT;
        /* The agent's pool was full for now: ask again shortly. */
        if (rc != SCIMQ_ENOBUFS || scimq__mpi_now_ns() >= deadline)
            break;
        pthread_mutex_unlock(&pf->lock);
        {
            struct timespec ts = {0, PUT_RETRY_NS};

            nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&pf->lock);
    }
    pthread_mutex_unlock(&pf->lock);
    pthread_mutex_unlock(&pf->put_serial);
    return rc;
}

void
scimq__prefetch_close(struct scimq_mpi_prefetch *pf)
{
    if (pf == NULL)
        return;
    if (pf->started) {
        pthread_mutex_lock(&pf->lock);
        pf->quit = true;
        pthread_cond_signal(&pf->io_cv);
        pthread_mutex_unlock(&pf->lock);
        pthread_join(pf->thread, NULL);
    }
    scimq__fabric_mr_dereg(&pf->put_mr);
    scimq__fabric_mr_dereg(&pf->send_mr);
    scimq__fabric_mr_dereg(&pf->recv_mr);
    scimq__fabric_mr_dereg(&pf->buf_mr);
    scimq__fabric_close(&pf->fab);
    scimq__doorbell_close(&pf->bell);
    if (pf->area != NULL)
        munmap(pf->area, pf->area_len);
    if (pf->put_area != NULL)
        munmap(pf->put_area, pf->buf_size);
    free(pf->bufs);
    free(pf->recv_area);
    free(pf->recv_ops);
    free(pf->send_hdrs);
    pthread_mutex_destroy(&pf->lock);
    pthread_mutex_destroy(&pf->fab_lock);
    pthread_mutex_destroy(&pf->put_serial);
    pthread_cond_destroy(&pf->app_cv);
    pthread_cond_destroy(&pf->io_cv);
    free(pf);
}
