/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libscimq-mpi, the rank side: collective start-up, next/ack/nack/extend,
 * put, finalize, stop.
 *
 * A rank's endpoint and buffers belong to its progress thread
 * (prefetch.c), which keeps up to P messages ready; next() takes one from
 * there, and hands back the previous one (DONE).  The agent (agent.c), on
 * each (pseudo-)node's first rank, is the other side of the hop.
 */
#include "config.h"

#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <scimq/error.h>

#include "common/log.h"
#include "backoff.h"
#include "common/param.h"
#include "prefetch.h"
#include "proc.h"
#include "protocol/wire.h"
#include "runtime.h"

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
    /* 0: the gateway's, within the pool budget (agent.c, agent_size()). */
    e = getenv("SCIMQ_MPI_MAX_MESSAGE");
    if (ctx->opt.max_message == 0 && e != NULL && e[0] != '\0' &&
        (scimq__parse_size(e, &ctx->opt.max_message) != 0 ||
         ctx->opt.max_message == 0))
        return SCIMQ_ECONFIG;
    e = env_or(ctx->opt.prefetch, "SCIMQ_MPI_PREFETCH", "1");
    if (strcmp(e, "auto") == 0)
        ctx->prefetch = -1;
    else if (scimq__parse_size(e, &v) == 0 && v <= SCIMQ_MPI_PREFETCH_MAX)
        ctx->prefetch = (int) v;
    else
        return SCIMQ_ECONFIG;
    /* A slot for each message a rank may hold, and one ready. */
    e = getenv("SCIMQ_MPI_SLOTS_PER_RANK");
    if (ctx->opt.slots_per_rank == 0)
        ctx->opt.slots_per_rank =
            e != NULL && scimq__parse_size(e, &v) == 0 && v > 0 && v <= 64
                ? (uint32_t) v
                : (uint32_t) (ctx->prefetch < 0 ? SCIMQ_MPI_PREFETCH_AUTO_MAX
                                                : ctx->prefetch) +
                      2;
    e = getenv("SCIMQ_MPI_POOL_BYTES");
    if (ctx->opt.pool_bytes == 0 && e != NULL && e[0] != '\0' &&
        scimq__parse_size(e, &ctx->opt.pool_bytes) != 0)
        return SCIMQ_ECONFIG;
    e = getenv("SCIMQ_MPI_INLINE_MAX");
    ctx->inline_max = ctx->opt.inline_max != 0 ? ctx->opt.inline_max
                      : e != NULL              ? UINT64_MAX
                                               : SCIMQ_MPI_INLINE_DEFAULT;
    if (ctx->inline_max == UINT64_MAX &&
        (scimq__parse_size(e, &ctx->inline_max) != 0 ||
         ctx->inline_max > (64u << 20)))
        return SCIMQ_ECONFIG;
    e = getenv("SCIMQ_MPI_MAX_HOLD_MS");
    if (ctx->opt.max_hold_ms == 0)
        ctx->opt.max_hold_ms =
            e != NULL && scimq__parse_size(e, &v) == 0 && v > 0 ? v : 3600000;
    e = env_or(ctx->opt.token_file, "SCIMQ_TOKEN_FILE", NULL);
    ctx->token_file = e != NULL ? strdup(e) : NULL;
    e = env_or(ctx->opt.agent_core, "SCIMQ_MPI_AGENT_CORE", "auto");
    if (strcmp(e, "auto") != 0 && strcmp(e, "nic") != 0 &&
        strcmp(e, "none") != 0 &&
        (scimq__parse_size(e, &v) != 0 || v >= CPU_SETSIZE))
        return SCIMQ_ECONFIG;
    ctx->agent_core = strdup(e);
    if (ctx->agent_core == NULL)
        return SCIMQ_ENOMEM;
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
/* next                                                                      */
/* ------------------------------------------------------------------------ */

/* flags took what was padding before it: on LP64 the struct keeps its
 * size and every offset, so programs built before it still run. */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(scimq_mpi_msg_t) == 56 &&
                   offsetof(scimq_mpi_msg_t, handle) == 48,
               "scimq_mpi_msg_t changed its layout");
#endif

/* Parses the block table that precedes the payload in the buffer. */
static int
meta_parse(scimq_mpi_t *ctx, const struct scimq_mpi_ready *r,
           scimq_mpi_msg_t *out)
{
    const uint8_t *meta = r->meta;
    const uint8_t *end = r->meta + r->m.meta_len;
    size_t names = 0;
    uint64_t off = 0;
    uint32_t n;

    if (r->m.meta_len < 4)
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
            len > r->m.payload_len - off)
            return SCIMQ_EPROTO;
        memcpy(ctx->names + names, meta, nl);
        ctx->names[names + nl] = '\0';
        ctx->blocks[i].name = ctx->names + names;
        ctx->blocks[i].data = r->payload + off;
        ctx->blocks[i].len = len;
        names += nl + 1;
        meta += nl;
        off += len;
    }
    out->data = r->payload;
    out->len = r->m.payload_len;
    out->block_count = n;
    out->blocks = ctx->blocks;
    out->msg_id = r->m.msg_id;
    out->attempt = r->m.attempt;
    out->flags = (r->m.flags & CTRL_F_BROADCAST) ? SCIMQ_MPI_MSG_CONTROL : 0;
    out->handle = ((uint64_t) r->m.slot << 48) ^ r->m.gen;
    return 0;
}

static bool
stop_flag(void)
{
    return atomic_load_explicit(&stop_requested, memory_order_relaxed) != 0;
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
     * first would give back the message just processed: one BYE. */
    rc = scimq__prefetch_bye(ctx->pf, ctx->holding);
    ctx->holding = false;
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
        : timeout_ms == 0
            ? 0
            : scimq__mpi_now_ns() + (uint64_t) timeout_ms * 1000000u;
    struct scimq_mpi_ready r;
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
        rc = scimq__prefetch_settle(ctx->pf, CTRL_DONE, 0, 0);
        if (rc != 0)
            return ctx->error = rc;
    }
    if (ctx->eos)
        return SCIMQ_EOS;
    rc = scimq__prefetch_take(ctx->pf, &r, deadline, stop_flag);
    if (rc == SCIMQ_ESTOPPED)
        return stop(ctx); /* the BYE gives back what was prefetched */
    if (rc == SCIMQ_EOS) {
        ctx->eos = true;
        return SCIMQ_EOS;
    }
    if (rc == SCIMQ_EAGAIN || rc == SCIMQ_ETIMEDOUT)
        return rc;
    if (rc != 0)
        return ctx->error = rc;
    ctx->slot = r.m.slot;
    ctx->gen = r.m.gen;
    rc = meta_parse(ctx, &r, msg);
    if (rc != 0) {
        SCIMQ_LOG_ERROR(MPI, "rank %d: bad block table from the agent: %s",
                        ctx->rank, scimq_strerror(rc));
        /* Return it so that another rank (or job) processes it. */
        (void) scimq__prefetch_settle(ctx->pf, CTRL_NACK, CTRL_F_REQUEUE, 0);
        return ctx->error = rc;
    }
    ctx->holding = true;
    ctx->messages++;
    ctx->bytes += msg->len;
    return 0;
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
    rc = scimq__prefetch_settle(ctx->pf, type, flags, 0);
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
    if (lease_ms == 0)
        return SCIMQ_EINVAL;
    return scimq__prefetch_settle(ctx->pf, CTRL_EXTEND, 0, lease_ms);
}

/* ------------------------------------------------------------------------ */
/* put, counters                                                             */
/* ------------------------------------------------------------------------ */

/* Through the node's agent and its one gateway session (prefetch.c). */
int
scimq_mpi_put(scimq_mpi_t *ctx, const char *queue, const scimq_block_t *blocks,
              uint32_t block_count)
{
    if (ctx == NULL)
        ctx = default_ctx;
    if (ctx == NULL || queue == NULL || queue[0] == '\0')
        return SCIMQ_EINVAL;
    if (ctx->pf == NULL)
        return SCIMQ_ESTATE;
    return scimq__prefetch_put(ctx->pf, queue, blocks, block_count);
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
    scimq__prefetch_close(ctx->pf);
    free(ctx->url);
    free(ctx->queue);
    free(ctx->provider);
    free(ctx->token_file);
    free(ctx->agent_core);
    if (ctx->node_comm != MPI_COMM_NULL)
        MPI_Comm_free(&ctx->node_comm);
    if (ctx->comm != MPI_COMM_NULL)
        MPI_Comm_free(&ctx->comm);
    free(ctx);
}

static int
env_count(uint32_t value, const char *name, uint32_t *out)
{
    const char *e = getenv(name);
    uint64_t v;

    if (value != 0 || e == NULL || e[0] == '\0') {
        *out = value;
        return 0;
    }
    if (scimq__parse_size(e, &v) != 0 || v > 1u << 20) {
        SCIMQ_LOG_ERROR(MPI, "%s: '%s' is not a count", name, e);
        return SCIMQ_ECONFIG;
    }
    *out = (uint32_t) v;
    return 0;
}

/*
 * Who shares an agent.  Normally the ranks of one host (one agent per
 * node).  SCIMQ_MPI_RANKS_PER_NODE splits each host's ranks into
 * pseudo-nodes of that many ranks, each with its own agent, so that
 * several nodes can be run on one machine; SCIMQ_MPI_INGEST=K gives one
 * agent to K consecutive (pseudo-)nodes, whose other ranks read across
 * the fabric (only the ingest nodes open streams to the gateway).
 * Collective over ctx->comm; sets node_comm, node_rank, node_size,
 * node_index, nodes.
 */
static int
node_group(scimq_mpi_t *ctx)
{
    MPI_Comm host = MPI_COMM_NULL, pseudo = MPI_COMM_NULL,
             leaders = MPI_COMM_NULL;
    uint32_t per_node, ingest;
    int host_rank, pn_rank, index = 0, group, rc;

    rc = env_count(ctx->opt.ranks_per_node, "SCIMQ_MPI_RANKS_PER_NODE",
                   &per_node);
    if (rc == 0)
        rc = env_count(ctx->opt.ingest, "SCIMQ_MPI_INGEST", &ingest);
    if ((rc = agree(ctx->comm, rc)) != 0)
        return rc;
    if (ingest == 0)
        ingest = 1;
    rc = SCIMQ_EMPI;
    if (MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                            &host) != MPI_SUCCESS)
        goto out;
    MPI_Comm_rank(host, &host_rank);
    /* A host is named by its lowest rank. */
    if (MPI_Allreduce(&ctx->rank, &ctx->host_id, 1, MPI_INT, MPI_MIN, host) !=
            MPI_SUCCESS ||
        MPI_Comm_split(host, per_node > 0 ? host_rank / (int) per_node : 0,
                       host_rank, &pseudo) != MPI_SUCCESS)
        goto out;
    MPI_Comm_rank(pseudo, &pn_rank);
    /* Number the (pseudo-)nodes by their first ranks, in rank order. */
    if (MPI_Comm_split(ctx->comm, pn_rank == 0 ? 0 : MPI_UNDEFINED, ctx->rank,
                       &leaders) != MPI_SUCCESS)
        goto out;
    if (leaders != MPI_COMM_NULL) {
        MPI_Comm_rank(leaders, &index);
        MPI_Comm_size(leaders, &ctx->nodes);
    }
    if (MPI_Bcast(&index, 1, MPI_INT, 0, pseudo) != MPI_SUCCESS ||
        MPI_Bcast(&ctx->nodes, 1, MPI_INT, 0, pseudo) != MPI_SUCCESS)
        goto out;
    group = index / (int) ingest;
    ctx->node_index = group;
    ctx->nodes = (ctx->nodes + (int) ingest - 1) / (int) ingest;
    if (MPI_Comm_split(ctx->comm, group, ctx->rank, &ctx->node_comm) !=
        MPI_SUCCESS)
        goto out;
    MPI_Comm_rank(ctx->node_comm, &ctx->node_rank);
    MPI_Comm_size(ctx->node_comm, &ctx->node_size);
    ctx->agent_host_id = ctx->host_id;
    if (MPI_Bcast(&ctx->agent_host_id, 1, MPI_INT, 0, ctx->node_comm) !=
        MPI_SUCCESS)
        goto out;
    rc = 0;
out:
    if (leaders != MPI_COMM_NULL)
        MPI_Comm_free(&leaders);
    if (pseudo != MPI_COMM_NULL)
        MPI_Comm_free(&pseudo);
    if (host != MPI_COMM_NULL)
        MPI_Comm_free(&host);
    return rc;
}

int
scimq_mpi_node(const scimq_mpi_t *ctx, int *node_p, int *node_rank_p,
               int *nodes_p)
{
    if (ctx == NULL)
        ctx = default_ctx;
    if (ctx == NULL)
        return SCIMQ_ESTATE;
    if (node_p != NULL)
        *node_p = ctx->node_index;
    if (node_rank_p != NULL)
        *node_rank_p = ctx->node_rank;
    if (nodes_p != NULL)
        *nodes_p = ctx->nodes;
    return 0;
}

/* This rank's endpoint and buffers (prefetch.c), as large as its agent's
 * largest message. */
static int
rank_open(scimq_mpi_t *ctx)
{
    struct scimq_mpi_prefetch_cfg cfg = {
        .provider = ctx->provider,
        .max_message = ctx->ai.slot_size - SCIMQ_MPI_SLOT_META,
        .depth = ctx->prefetch,
        .node_rank = (uint32_t) ctx->node_rank,
        .world_rank = ctx->rank,
    };

    return scimq__prefetch_open(&cfg, &ctx->pf);
}

int
scimq_mpi_init(MPI_Comm comm, const char *url, const char *queue,
               const scimq_mpi_options_t *opts, scimq_mpi_t **ctx_p)
{
    scimq_mpi_t *ctx = calloc(1, sizeof(*ctx));
    uint8_t *addrs = NULL;
    cpu_set_t mine, *cpus = NULL;
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
    if (MPI_Comm_dup(comm, &ctx->comm) != MPI_SUCCESS) {
        rc = SCIMQ_EMPI;
        goto out;
    }
    MPI_Comm_rank(ctx->comm, &ctx->rank);
    MPI_Comm_size(ctx->comm, &ctx->size);

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
    rc = node_group(ctx);
    if (rc != 0)
        goto out;

    /* The agent on each node's first rank (it learns the largest message
     * from the gateway), then every rank's endpoint and buffers. */
    if (ctx->node_rank == 0) {
        struct scimq_mpi_agent_config cfg = {
            .url = ctx->url,
            .queue = ctx->queue,
            .provider = ctx->provider,
            .token_file = ctx->token_file,
            .agent_core = ctx->agent_core,
            .opt = ctx->opt,
            .node_size = ctx->node_size,
            .node_index = ctx->node_index,
            .nodes = ctx->nodes,
            .prefetch = ctx->prefetch,
            .inline_max = ctx->inline_max,
        };

        ctx->ai.rc = scimq__agent_create(&cfg, &ctx->agent, &ctx->ai);
    }
    if (MPI_Bcast(&ctx->ai, sizeof(ctx->ai), MPI_BYTE, 0, ctx->node_comm) !=
        MPI_SUCCESS) {
        rc = SCIMQ_EMPI;
        goto out;
    }
    rc = agree(ctx->comm, ctx->ai.rc);
    if (rc != 0)
        goto out;
    rc = agree(ctx->comm, rank_open(ctx));
    if (rc != 0)
        goto out;

    /* Addresses: the agent learns its ranks', the ranks their agent's;
     * and the agent its ranks' processes (liveness). */
    addrs = calloc((size_t) ctx->node_size, SCIMQ_FABRIC_ADDR_MAX);
    pids = calloc((size_t) ctx->node_size, sizeof(*pids));
    cpus = calloc((size_t) ctx->node_size, sizeof(*cpus));
    CPU_ZERO(&mine);
    (void) sched_getaffinity(0, sizeof(mine), &mine);
    /* Only processes of the agent's own host can be looked at. */
    if (ctx->host_id != ctx->agent_host_id)
        pid = 0;
    if (addrs == NULL || pids == NULL || cpus == NULL ||
        MPI_Gather(&mine, sizeof(mine), MPI_BYTE, cpus, sizeof(mine), MPI_BYTE,
                   0, ctx->node_comm) != MPI_SUCCESS ||
        MPI_Gather(scimq__prefetch_addr(ctx->pf), SCIMQ_FABRIC_ADDR_MAX,
                   MPI_BYTE, addrs, SCIMQ_FABRIC_ADDR_MAX, MPI_BYTE, 0,
                   ctx->node_comm) != MPI_SUCCESS ||
        MPI_Gather(&pid, 1, MPI_INT32_T, pids, 1, MPI_INT32_T, 0,
                   ctx->node_comm) != MPI_SUCCESS) {
        rc = SCIMQ_EMPI;
    }
    if (rc == 0)
        rc = scimq__prefetch_start(ctx->pf, &ctx->ai,
                                   ctx->host_id == ctx->agent_host_id);
    if (rc == 0 && ctx->node_rank == 0)
        rc = scimq__agent_start(ctx->agent, addrs, SCIMQ_FABRIC_ADDR_MAX, pids,
                                cpus, ctx->node_size);
    rc = agree(ctx->comm, rc);
out:
    free(addrs);
    free(pids);
    free(cpus);
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
                       "consuming %s from %s: %d ranks, %d agents, "
                       "provider %s, %u streams per agent, prefetch %d%s",
                       ctx->queue, ctx->url, ctx->size, ctx->nodes,
                       ctx->provider, ctx->opt.streams,
                       ctx->prefetch < 0 ? SCIMQ_MPI_PREFETCH_AUTO_MAX
                                         : ctx->prefetch,
                       ctx->prefetch < 0 ? " (auto, at most)" : "");
    return 0;
}

int
scimq_mpi_finalize(scimq_mpi_t *ctx)
{
    int rc = 0;

    if (ctx == NULL)
        ctx = default_ctx;
    if (ctx == NULL)
        return SCIMQ_ESTATE;
    /* One BYE, acknowledging the message in hand (two sends could cross
     * and give it back). */
    if (!ctx->stopped && (ctx->error == 0 || ctx->error == SCIMQ_EOS))
        rc = scimq__prefetch_bye(ctx->pf, ctx->holding);
    else if (ctx->holding)
        rc = scimq__prefetch_settle(ctx->pf, CTRL_DONE, 0, 0);
    ctx->holding = false;
    /* Let the messages leave before the endpoint closes. */
    scimq__prefetch_close(ctx->pf);
    ctx->pf = NULL;
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
