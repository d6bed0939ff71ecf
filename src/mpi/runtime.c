/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libscimq-mpi, the rank side: collective start-up, next/ack/nack/extend,
 * put, finalize.
 *
 * A rank is always the active side of the agent-to-rank hop: it asks (one
 * WANT at a time), receives a MSG naming a slot in the agent's pool,
 * checks it, and reads the slot with one fi_read into its own registered
 * buffer.  The agent, which polls all the time, is the passive side.
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <scimq/error.h>

#include "common/log.h"
#include "common/param.h"
#include "protocol/wire.h"
#include "runtime.h"

/* Rank operations: 2 receives, 2 sends, 1 read. */
#define RANK_OPS 5
#define RANK_OP_RECV0 0
#define RANK_OP_SEND0 2
#define RANK_OP_READ 4

static scimq_mpi_t *default_ctx;

/*
 * Stop requests (scimq_mpi_stop(), from a signal handler or not): one
 * lock-free flag, which is async-signal-safe, read by next() as it polls.
 * A stopped process stays stopped.
 */
static atomic_int stop_requested;

/* Stop signals installed by the first init, restored by the last finalize. */
#define STOP_SIGNALS_MAX 8
static int stop_signals[STOP_SIGNALS_MAX], nstop_signals, live_contexts;

void
scimq_mpi_stop(void)
{
    atomic_store_explicit(&stop_requested, 1, memory_order_relaxed);
}

static void
on_stop_signal(int sig)
{
    (void) sig;
    scimq_mpi_stop();
}

static int
signal_by_name(const char *name)
{
    static const struct {
        const char *name;
        int sig;
    } table[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM},
                 {"INT", SIGINT},   {"HUP", SIGHUP},   {"XCPU", SIGXCPU},
                 {"URG", SIGURG},   {"CONT", SIGCONT}};
    char *end;
    long n;

    if (strncmp(name, "SIG", 3) == 0)
        name += 3;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strcmp(name, table[i].name) == 0)
            return table[i].sig;
    n = strtol(name, &end, 10);
    return *name != '\0' && *end == '\0' && n > 0 && n < NSIG ? (int) n : -1;
}

/*
 * Installs on_stop_signal for each signal of $SCIMQ_MPI_STOP_SIGNALS
 * (default USR1) whose disposition is the default one.  Returns 0 or
 * SCIMQ_ECONFIG for a name it does not know.
 */
static int
stop_signals_install(int rank)
{
    const char *e = getenv("SCIMQ_MPI_STOP_SIGNALS");
    char list[256], *save = NULL, *tok;
    int sigs[STOP_SIGNALS_MAX], n = 0;

    snprintf(list, sizeof(list), "%s", e != NULL ? e : "USR1");
    for (tok = strtok_r(list, ", ", &save); tok != NULL;
         tok = strtok_r(NULL, ", ", &save)) {
        int sig;

        if (strcmp(tok, "none") == 0 || strcmp(tok, "NONE") == 0)
            continue;
        sig = signal_by_name(tok);
        if (sig < 0 || n == STOP_SIGNALS_MAX) {
            if (rank == 0)
                SCIMQ_LOG_ERROR(MPI,
                                "SCIMQ_MPI_STOP_SIGNALS: '%s' is not a signal "
                                "(names such as USR1,TERM, or none)",
                                tok);
            return SCIMQ_ECONFIG;
        }
        sigs[n++] = sig;
    }
    for (int i = 0; i < n; i++) {
        struct sigaction old, sa;

        if (sigaction(sigs[i], NULL, &old) != 0)
            continue;
        if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) {
            if (rank == 0)
                SCIMQ_LOG_INFO(MPI,
                               "signal %d has a handler already: left to the "
                               "program (it may call scimq_mpi_stop())",
                               sigs[i]);
            continue;
        }
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_stop_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sigs[i], &sa, NULL) == 0)
            stop_signals[nstop_signals++] = sigs[i];
    }
    return 0;
}

static void
stop_signals_restore(void)
{
    for (int i = 0; i < nstop_signals; i++) {
        struct sigaction cur, sa;

        /* Only ours: the program may have replaced it since. */
        if (sigaction(stop_signals[i], NULL, &cur) != 0 ||
            (cur.sa_flags & SA_SIGINFO) != 0 ||
            cur.sa_handler != on_stop_signal)
            continue;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        (void) sigaction(stop_signals[i], &sa, NULL);
    }
    nstop_signals = 0;
}

static const char *
env_or(const char *value, const char *env, const char *fallback)
{
    const char *e;

    if (value != NULL && value[0] != '\0')
        return value;
    e = getenv(env);
    return e != NULL && e[0] != '\0' ? e : fallback;
}

void
scimq_mpi_options_default(scimq_mpi_options_t *o)
{
    memset(o, 0, sizeof(*o));
}

/* Fills unset options from the environment and the defaults. */
static int
options_resolve(scimq_mpi_t *ctx, const scimq_mpi_options_t *in)
{
    uint64_t v;
    const char *e;

    if (in != NULL)
        ctx->opt = *in;
    ctx->provider =
        strdup(env_or(ctx->opt.provider, "SCIMQ_MPI_PROVIDER", "shm"));
    e = getenv("SCIMQ_MPI_STREAMS");
    if (ctx->opt.streams == 0)
        ctx->opt.streams =
            e != NULL && scimq__parse_size(e, &v) == 0 && v > 0 && v <= 64
                ? (uint32_t) v
                : 2;
    e = getenv("SCIMQ_MPI_MAX_MESSAGE");
    if (ctx->opt.max_message == 0)
        ctx->opt.max_message =
            e != NULL && scimq__parse_size(e, &v) == 0 && v > 0 ? v : 16u << 20;
    e = getenv("SCIMQ_MPI_SLOTS_PER_RANK");
    if (ctx->opt.slots_per_rank == 0)
        ctx->opt.slots_per_rank =
            e != NULL && scimq__parse_size(e, &v) == 0 && v > 0 && v <= 64
                ? (uint32_t) v
                : 2;
    e = getenv("SCIMQ_MPI_MAX_HOLD_MS");
    if (ctx->opt.max_hold_ms == 0)
        ctx->opt.max_hold_ms =
            e != NULL && scimq__parse_size(e, &v) == 0 && v > 0 ? v : 3600000;
    e = env_or(ctx->opt.token_file, "SCIMQ_TOKEN_FILE", NULL);
    ctx->token_file = e != NULL ? strdup(e) : NULL;
    return ctx->provider != NULL ? 0 : SCIMQ_ENOMEM;
}

/* Every rank ends a collective step with the same result. */
static int
agree(MPI_Comm comm, int rc)
{
    int all = rc;

    if (MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
        return SCIMQ_EMPI;
    return all;
}

/* ------------------------------------------------------------------------ */
/* Control messages                                                          */
/* ------------------------------------------------------------------------ */

static int
progress(scimq_mpi_t *ctx, struct scimq_mpi_op **recv_p,
         struct scimq_mpi_op **read_p)
{
    struct scimq_fabric_cqe cqe[8];
    int n = scimq__fabric_poll(&ctx->fab, cqe, 8);

    if (n < 0) {
        struct scimq_mpi_op *op = cqe[0].context;

        /* A failed read is fatal for this message and this endpoint. */
        if (op != NULL && op->kind == OP_READ && read_p != NULL)
            *read_p = op;
        return n;
    }
    for (int i = 0; i < n; i++) {
        struct scimq_mpi_op *op = cqe[i].context;

        if (op->kind == OP_SEND)
            op->busy = false;
        else if (op->kind == OP_RECV && recv_p != NULL && *recv_p == NULL)
            *recv_p = op;
        else if (op->kind == OP_RECV)
            op->pending = true; /* handled by the next next() */
        else if (op->kind == OP_READ && read_p != NULL)
            *read_p = op;
    }
    return n;
}

static int
send_ctrl(scimq_mpi_t *ctx, uint16_t type, uint16_t flags, uint32_t lease_ms)
{
    unsigned int spins = 0;

    for (;;) {
        for (int i = RANK_OP_SEND0; i < RANK_OP_SEND0 + 2; i++) {
            struct scimq_mpi_op *op = &ctx->ops[i];
            int rc;

            if (op->busy)
                continue;
            memset(&op->msg, 0, sizeof(op->msg));
            op->msg.magic = SCIMQ_MPI_CTRL_MAGIC;
            op->msg.type = type;
            op->msg.flags = flags;
            op->msg.rank = (uint32_t) ctx->node_rank;
            op->msg.slot = ctx->slot;
            op->msg.gen = ctx->gen;
            op->msg.lease_ms = lease_ms;
            rc = scimq__fabric_send(&ctx->fab, &op->msg, sizeof(op->msg),
                                    ctx->ops_mr.desc, ctx->agent_fa, op);
            if (rc == 0) {
                op->busy = true;
                /* An answer (or our read's completion) comes soon. */
                scimq__mpi_hot();
                return 0;
            }
            if (rc != SCIMQ_EAGAIN)
                return rc;
        }
        if (progress(ctx, NULL, NULL) < 0)
            return SCIMQ_EFABRIC;
        scimq__mpi_backoff(&spins);
        if (spins > 200000)
            return SCIMQ_ETIMEDOUT;
    }
}

static int
repost_recv(scimq_mpi_t *ctx, struct scimq_mpi_op *op)
{
    op->pending = false;
    return scimq__fabric_recv(&ctx->fab, &op->msg, sizeof(op->msg),
                              ctx->ops_mr.desc, op);
}

/* Checks a MSG against what the agent announced before any RMA: a bad
 * read would break the endpoint for good. */
static int
msg_check(const scimq_mpi_t *ctx, const struct scimq_mpi_ctrl *m)
{
    uint64_t lo = ctx->ai.pool_raddr, hi = lo + ctx->ai.pool_len;

    if (m->key != ctx->ai.pool_key || m->meta_len > SCIMQ_MPI_SLOT_META ||
        m->read_len != m->meta_len + m->payload_len ||
        m->payload_len > ctx->buf_size - SCIMQ_MPI_SLOT_META || m->raddr < lo ||
        m->raddr > hi || m->read_len > hi - m->raddr)
        return SCIMQ_EPROTO;
    return 0;
}

/* Parses the block table that precedes the payload in the buffer. */
static int
meta_parse(scimq_mpi_t *ctx, const struct scimq_mpi_ctrl *m,
           scimq_mpi_msg_t *out)
{
    const uint8_t *meta = ctx->buf + SCIMQ_MPI_SLOT_META - m->meta_len;
    const uint8_t *end = ctx->buf + SCIMQ_MPI_SLOT_META;
    uint8_t *data = ctx->buf + SCIMQ_MPI_SLOT_META;
    size_t names = 0;
    uint64_t off = 0;
    uint32_t n;

    if (m->meta_len < 4)
        return SCIMQ_EPROTO;
    n = wire_get32(meta);
    meta += 4;
    if (n > SCIMQ_MPI_MAX_BLOCKS)
        return SCIMQ_EPROTO;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nl;
        uint64_t len;

        if (end - meta < 12)
            return SCIMQ_EPROTO;
        nl = wire_get32(meta);
        len = wire_get64(meta + 4);
        meta += 12;
        if ((size_t) (end - meta) < nl || names + nl + 1 > sizeof(ctx->names) ||
            off + len > m->payload_len)
            return SCIMQ_EPROTO;
        memcpy(ctx->names + names, meta, nl);
        ctx->names[names + nl] = '\0';
        ctx->blocks[i].name = ctx->names + names;
        ctx->blocks[i].data = data + off;
        ctx->blocks[i].len = len;
        names += nl + 1;
        meta += nl;
        off += len;
    }
    out->data = data;
    out->len = m->payload_len;
    out->block_count = n;
    out->blocks = ctx->blocks;
    out->msg_id = m->msg_id;
    out->attempt = m->attempt;
    out->handle = ((uint64_t) m->slot << 48) ^ m->gen;
    return 0;
}

/* Reads the announced slot into this rank's buffer. */
static int
fetch(scimq_mpi_t *ctx, const struct scimq_mpi_ctrl *m)
{
    struct scimq_mpi_op *rd = &ctx->ops[RANK_OP_READ];
    uint8_t *dst = ctx->buf + SCIMQ_MPI_SLOT_META - m->meta_len;
    unsigned int spins = 0;
    int rc;

    do {
        rc = scimq__fabric_read(&ctx->fab, dst, m->read_len, ctx->buf_mr.desc,
                                ctx->agent_fa, m->raddr, m->key, rd);
        if (rc == SCIMQ_EAGAIN) {
            (void) progress(ctx, NULL, NULL);
            scimq__mpi_backoff(&spins);
        }
    } while (rc == SCIMQ_EAGAIN && spins < 200000);
    if (rc != 0)
        return rc;
    for (spins = 0;;) {
        struct scimq_mpi_op *done = NULL;

        rc = progress(ctx, NULL, &done);
        if (rc < 0)
            return SCIMQ_EFABRIC;
        if (done == rd)
            return 0;
        if (rc == 0)
            scimq__mpi_backoff(&spins);
    }
}

/* ------------------------------------------------------------------------ */
/* next                                                                      */
/* ------------------------------------------------------------------------ */

/* Takes a control message that arrived earlier, if any. */
static struct scimq_mpi_op *
pending_recv(scimq_mpi_t *ctx)
{
    for (int i = RANK_OP_RECV0; i < RANK_OP_RECV0 + 2; i++)
        if (ctx->ops[i].pending)
            return &ctx->ops[i];
    return NULL;
}

static bool
stop_pending(const scimq_mpi_t *ctx)
{
    return ctx->stopped ||
           atomic_load_explicit(&stop_requested, memory_order_relaxed) != 0;
}

/*
 * A stop: the rank says BYE, acknowledging the message in hand with it,
 * so its agent gives back to the gateway whatever else it had chosen for
 * it (a MSG answering an outstanding WANT is never read).
 */
static int
stop(scimq_mpi_t *ctx)
{
    int rc = 0;

    if (ctx->stopped)
        return SCIMQ_ESTOPPED;
    ctx->stopped = true;
    /* DONE and BYE as two sends may arrive in either order, and a BYE
     * first would give back the message just processed. */
    rc = send_ctrl(ctx, CTRL_BYE, ctx->holding ? CTRL_F_DONE : 0, 0);
    ctx->holding = false;
    ctx->want_out = false;
    SCIMQ_LOG_INFO(MPI, "rank %d: stop requested after %" PRIu64 " messages",
                   ctx->rank, ctx->messages);
    if (rc != 0)
        return ctx->error = rc;
    return SCIMQ_ESTOPPED;
}

int
scimq_mpi_next_timed(scimq_mpi_t *ctx, scimq_mpi_msg_t *msg, int timeout_ms)
{
    uint64_t deadline =
        timeout_ms < 0 ? UINT64_MAX
                       : scimq__mpi_now_ns() + (uint64_t) timeout_ms * 1000000u;
    unsigned int spins = 0;
    int rc;

    if (ctx == NULL || msg == NULL)
        return SCIMQ_EINVAL;
    if (ctx->error != 0)
        return ctx->error;
    if (stop_pending(ctx))
        return stop(ctx);
    /* Asking for the next acknowledges the previous. */
    if (ctx->holding) {
        ctx->holding = false;
        rc = send_ctrl(ctx, CTRL_DONE, ctx->eos ? 0 : CTRL_F_WANT, 0);
        if (rc != 0)
            return ctx->error = rc;
        ctx->want_out = !ctx->eos;
    }
    if (ctx->eos)
        return SCIMQ_EOS;
    if (!ctx->want_out) {
        rc = send_ctrl(ctx, CTRL_WANT, 0, 0);
        if (rc != 0)
            return ctx->error = rc;
        ctx->want_out = true;
    }
    for (;;) {
        struct scimq_mpi_op *op = pending_recv(ctx);
        struct scimq_mpi_ctrl m;

        if (op == NULL && progress(ctx, &op, NULL) < 0)
            return ctx->error = SCIMQ_EFABRIC;
        if (op == NULL && stop_pending(ctx))
            return stop(ctx); /* the BYE gives back what comes */
        if (op == NULL) {
            if (scimq__mpi_now_ns() >= deadline)
                return timeout_ms == 0 ? SCIMQ_EAGAIN : SCIMQ_ETIMEDOUT;
            scimq__mpi_backoff(&spins);
            continue;
        }
        m = op->msg;
        rc = repost_recv(ctx, op);
        if (rc != 0)
            return ctx->error = rc;
        if (m.magic != SCIMQ_MPI_CTRL_MAGIC)
            return ctx->error = SCIMQ_EPROTO;
        ctx->want_out = false;
        if (m.type == CTRL_EOS) {
            ctx->eos = true;
            return SCIMQ_EOS;
        }
        if (m.type == CTRL_ERR)
            return ctx->error = m.code != 0 ? m.code : SCIMQ_EIO;
        if (m.type != CTRL_MSG)
            continue;
        rc = msg_check(ctx, &m);
        if (rc == 0)
            rc = fetch(ctx, &m);
        if (rc == 0)
            rc = meta_parse(ctx, &m, msg);
        ctx->slot = m.slot;
        ctx->gen = m.gen;
        if (rc != 0) {
            SCIMQ_LOG_ERROR(MPI, "rank %d: bad message from the agent: %s",
                            ctx->rank, scimq_strerror(rc));
            /* Return it so that another rank (or job) processes it. */
            (void) send_ctrl(ctx, CTRL_NACK, CTRL_F_REQUEUE, 0);
            return ctx->error = rc;
        }
        ctx->holding = true;
        ctx->messages++;
        ctx->bytes += msg->len;
        return 0;
    }
}

int
scimq_mpi_next(scimq_mpi_msg_t *msg)
{
    if (default_ctx == NULL)
        return SCIMQ_ESTATE;
    return scimq_mpi_next_timed(default_ctx, msg, -1);
}

int
scimq_mpi_try_next(scimq_mpi_t *ctx, scimq_mpi_msg_t *msg)
{
    return scimq_mpi_next_timed(ctx, msg, 0);
}

static int
settle(scimq_mpi_t *ctx, scimq_mpi_msg_t *msg, uint16_t type, uint16_t flags)
{
    int rc;

    if (ctx == NULL)
        ctx = default_ctx;
    if (ctx == NULL || msg == NULL)
        return SCIMQ_EINVAL;
    if (!ctx->holding ||
        msg->handle != (((uint64_t) ctx->slot << 48) ^ ctx->gen))
        return SCIMQ_ESTATE;
    ctx->holding = false;
    rc = send_ctrl(ctx, type, flags, 0);
    msg->data = NULL;
    msg->len = 0;
    return rc;
}

int
scimq_mpi_ack(scimq_mpi_t *ctx, scimq_mpi_msg_t *msg)
{
    return settle(ctx, msg, CTRL_DONE, 0);
}

int
scimq_mpi_nack(scimq_mpi_t *ctx, scimq_mpi_msg_t *msg, int requeue)
{
    return settle(ctx, msg, CTRL_NACK, requeue ? CTRL_F_REQUEUE : 0);
}

int
scimq_mpi_extend(scimq_mpi_t *ctx, const scimq_mpi_msg_t *msg,
                 uint32_t lease_ms)
{
    if (ctx == NULL)
        ctx = default_ctx;
    if (ctx == NULL || msg == NULL || !ctx->holding ||
        msg->handle != (((uint64_t) ctx->slot << 48) ^ ctx->gen))
        return SCIMQ_ESTATE;
    return send_ctrl(ctx, CTRL_EXTEND, 0, lease_ms);
}

/* ------------------------------------------------------------------------ */
/* put, counters                                                             */
/* ------------------------------------------------------------------------ */

int
scimq_mpi_put(scimq_mpi_t *ctx, const char *queue, const scimq_block_t *blocks,
              uint32_t block_count)
{
    int rc = 0;

    if (ctx == NULL)
        ctx = default_ctx;
    if (ctx == NULL || queue == NULL)
        return SCIMQ_EINVAL;
    pthread_mutex_lock(&ctx->put_lock);
    if (ctx->put_client == NULL) {
        scimq_client_options_t o;

        scimq_client_options_default(&o);
        o.client_name = "scimq-mpi-rank";
        o.token_file = ctx->token_file;
        rc = scimq_client_open(ctx->url, &o, &ctx->put_client);
    }
    pthread_mutex_unlock(&ctx->put_lock);
    if (rc != 0)
        return rc;
    return scimq_client_put(ctx->put_client, queue, blocks, block_count, NULL,
                            NULL);
}

int
scimq_mpi_counters(const scimq_mpi_t *ctx, uint64_t *messages_p,
                   uint64_t *bytes_p)
{
    if (ctx == NULL)
        ctx = default_ctx;
    if (ctx == NULL)
        return SCIMQ_ESTATE;
    if (messages_p)
        *messages_p = ctx->messages;
    if (bytes_p)
        *bytes_p = ctx->bytes;
    return 0;
}

scimq_mpi_t *
scimq_mpi_default(void)
{
    return default_ctx;
}

/* ------------------------------------------------------------------------ */
/* init / finalize                                                           */
/* ------------------------------------------------------------------------ */

static void
ctx_free(scimq_mpi_t *ctx)
{
    if (ctx == NULL)
        return;
    if (ctx->put_client != NULL)
        (void) scimq_client_close(ctx->put_client);
    scimq__fabric_mr_dereg(&ctx->ops_mr);
    scimq__fabric_mr_dereg(&ctx->buf_mr);
    scimq__fabric_close(&ctx->fab);
    if (ctx->buf != NULL)
        munmap(ctx->buf, ctx->buf_size);
    free(ctx->ops);
    free(ctx->url);
    free(ctx->queue);
    free(ctx->provider);
    free(ctx->token_file);
    if (ctx->node_comm != MPI_COMM_NULL)
        MPI_Comm_free(&ctx->node_comm);
    if (ctx->comm != MPI_COMM_NULL)
        MPI_Comm_free(&ctx->comm);
    pthread_mutex_destroy(&ctx->put_lock);
    free(ctx);
}

/* This rank's endpoint, buffer and control operations. */
static int
rank_open(scimq_mpi_t *ctx)
{
    size_t page = (size_t) sysconf(_SC_PAGESIZE);
    int rc = scimq__fabric_open(&ctx->fab, ctx->provider);

    if (rc != 0)
        return rc;
    ctx->buf_size = scimq__mpi_slot_size(ctx->opt.max_message);
    ctx->buf = mmap(NULL, ctx->buf_size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ctx->buf == MAP_FAILED) {
        ctx->buf = NULL;
        return SCIMQ_ENOMEM;
    }
    (void) madvise(ctx->buf, ctx->buf_size, MADV_HUGEPAGE);
    /* Touch every page now: first-touch faults are slow on the data path. */
    for (size_t off = 0; off < ctx->buf_size; off += page)
        ctx->buf[off] = 0;
    rc = scimq__fabric_mr_reg(&ctx->fab, ctx->buf, ctx->buf_size, 3,
                              &ctx->buf_mr);
    if (rc != 0)
        return rc;
    ctx->ops = calloc(RANK_OPS, sizeof(*ctx->ops));
    if (ctx->ops == NULL)
        return SCIMQ_ENOMEM;
    for (int i = 0; i < RANK_OPS; i++) {
        ctx->ops[i].kind = i < RANK_OP_SEND0  ? OP_RECV
                           : i < RANK_OP_READ ? OP_SEND
                                              : OP_READ;
        ctx->ops[i].index = i;
    }
    return scimq__fabric_mr_reg(&ctx->fab, ctx->ops,
                                RANK_OPS * sizeof(*ctx->ops), 4, &ctx->ops_mr);
}

int
scimq_mpi_init(MPI_Comm comm, const char *url, const char *queue,
               const scimq_mpi_options_t *opts, scimq_mpi_t **ctx_p)
{
    scimq_mpi_t *ctx = calloc(1, sizeof(*ctx));
    uint8_t *addrs = NULL;
    int32_t *pids = NULL, pid = (int32_t) getpid();
    int rc = 0, flag = 0;

    MPI_Initialized(&flag);
    if (!flag) {
        free(ctx);
        return SCIMQ_ESTATE;
    }
    if (ctx == NULL)
        rc = SCIMQ_ENOMEM;
    if (agree(comm, rc) != 0) {
        free(ctx);
        return SCIMQ_ENOMEM;
    }
    ctx->comm = ctx->node_comm = MPI_COMM_NULL;
    pthread_mutex_init(&ctx->put_lock, NULL);
    if (MPI_Comm_dup(comm, &ctx->comm) != MPI_SUCCESS ||
        MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                            &ctx->node_comm) != MPI_SUCCESS) {
        rc = SCIMQ_EMPI;
        goto out;
    }
    MPI_Comm_rank(ctx->comm, &ctx->rank);
    MPI_Comm_size(ctx->comm, &ctx->size);
    MPI_Comm_rank(ctx->node_comm, &ctx->node_rank);
    MPI_Comm_size(ctx->node_comm, &ctx->node_size);

    url = env_or(url, "SCIMQ_URL", NULL);
    queue = env_or(queue, "SCIMQ_QUEUE", NULL);
    rc = url == NULL || queue == NULL ? SCIMQ_EINVAL : 0;
    if (rc == 0) {
        ctx->url = strdup(url);
        ctx->queue = strdup(queue);
        rc = ctx->url && ctx->queue ? options_resolve(ctx, opts) : SCIMQ_ENOMEM;
    }
    if (rc == 0 && live_contexts == 0 && nstop_signals == 0)
        rc = stop_signals_install(ctx->rank);
    if ((rc = agree(ctx->comm, rc)) != 0) {
        if (ctx->rank == 0 && rc == SCIMQ_EINVAL)
            SCIMQ_LOG_ERROR(MPI, "no gateway URL or queue (SCIMQ_URL, "
                                 "SCIMQ_QUEUE)");
        goto out;
    }

    /* Every rank's endpoint; then the agent on each node's first rank. */
    rc = agree(ctx->comm, rank_open(ctx));
    if (rc != 0)
        goto out;
    if (ctx->node_rank == 0)
        ctx->ai.rc = scimq__agent_create(ctx, &ctx->agent, &ctx->ai);
    if (MPI_Bcast(&ctx->ai, sizeof(ctx->ai), MPI_BYTE, 0, ctx->node_comm) !=
        MPI_SUCCESS) {
        rc = SCIMQ_EMPI;
        goto out;
    }
    rc = agree(ctx->comm, ctx->ai.rc);
    if (rc != 0)
        goto out;

    /* Addresses: the agent learns its ranks', the ranks their agent's;
     * and the agent its ranks' processes (liveness). */
    addrs = calloc((size_t) ctx->node_size, SCIMQ_FABRIC_ADDR_MAX);
    pids = calloc((size_t) ctx->node_size, sizeof(*pids));
    if (addrs == NULL || pids == NULL ||
        MPI_Gather(ctx->fab.addr, SCIMQ_FABRIC_ADDR_MAX, MPI_BYTE, addrs,
                   SCIMQ_FABRIC_ADDR_MAX, MPI_BYTE, 0,
                   ctx->node_comm) != MPI_SUCCESS ||
        MPI_Gather(&pid, 1, MPI_INT32_T, pids, 1, MPI_INT32_T, 0,
                   ctx->node_comm) != MPI_SUCCESS) {
        rc = SCIMQ_EMPI;
    }
    if (rc == 0)
        rc = scimq__fabric_av_insert(&ctx->fab, ctx->ai.addr, &ctx->agent_fa);
    for (int i = RANK_OP_RECV0; rc == 0 && i < RANK_OP_RECV0 + 2; i++)
        rc = repost_recv(ctx, &ctx->ops[i]);
    if (rc == 0 && ctx->node_rank == 0)
        rc = scimq__agent_start(ctx->agent, addrs, SCIMQ_FABRIC_ADDR_MAX, pids,
                                ctx->node_size);
    rc = agree(ctx->comm, rc);
out:
    free(addrs);
    free(pids);
    if (rc != 0) {
        if (ctx->agent != NULL) {
            scimq__agent_destroy(ctx->agent);
            ctx->agent = NULL;
        }
        ctx_free(ctx);
        if (live_contexts == 0)
            stop_signals_restore();
        return rc;
    }
    if (default_ctx == NULL)
        default_ctx = ctx;
    if (ctx_p != NULL)
        *ctx_p = ctx;
    live_contexts++;
    if (ctx->rank == 0)
        SCIMQ_LOG_INFO(MPI,
                       "consuming %s from %s: %d ranks, provider %s, "
                       "%u streams per agent",
                       ctx->queue, ctx->url, ctx->size, ctx->provider,
                       ctx->opt.streams);
    return 0;
}

int
scimq_mpi_finalize(scimq_mpi_t *ctx)
{
    unsigned int spins = 0;
    int rc = 0;

    if (ctx == NULL)
        ctx = default_ctx;
    if (ctx == NULL)
        return SCIMQ_ESTATE;
    if (ctx->holding) {
        ctx->holding = false;
        rc = send_ctrl(ctx, CTRL_DONE, 0, 0);
    }
    if (!ctx->stopped && (ctx->error == 0 || ctx->error == SCIMQ_EOS))
        (void) send_ctrl(ctx, CTRL_BYE, 0, 0);
    /* Let the sends leave before the endpoint closes. */
    while ((ctx->ops[RANK_OP_SEND0].busy || ctx->ops[RANK_OP_SEND0 + 1].busy) &&
           spins < 20000) {
        if (progress(ctx, NULL, NULL) < 0)
            break;
        scimq__mpi_backoff(&spins);
    }
    /* The agent leaves once every rank of its node said BYE. */
    MPI_Barrier(ctx->node_comm);
    if (ctx->agent != NULL) {
        scimq__agent_destroy(ctx->agent);
        ctx->agent = NULL;
    }
    MPI_Barrier(ctx->comm);
    if (default_ctx == ctx)
        default_ctx = NULL;
    ctx_free(ctx);
    if (--live_contexts == 0)
        stop_signals_restore();
    return rc;
}
