/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The libscimq API.  Calls run in the caller's thread: they validate,
 * encode their frames (PUT payloads stay in the caller's buffers: the op
 * holds iovecs over them), post an op to the I/O thread and wait on the
 * handle's condition variable for its result.  Every wait is bounded by a
 * deadline that the I/O thread enforces (request timeout, confirmation
 * timeout, connect timeout, reconnect_ms); waits that can give up safely
 * also carry a deadline of their own.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>

#include <jansson.h>

#include <scimq/error.h>

#include "client_internal.h"
#include "common/auth.h"
#include "common/error_internal.h"
#include "common/log.h"
#include "common/net.h"
#include "common/param.h"

/* Most addresses of the gateway's name that connects try in turn. */
#define CLIENT_MAX_ADDRS 16
/* Largest K. */
#define CLIENT_MAX_STREAMS 64
/* Slack on the caller's side of a wait the I/O thread bounds itself. */
#define CLIENT_WAIT_SLACK_MS 5000u
/* Block descriptors kept on the stack by put. */
#define CLIENT_PUT_STACK_BLOCKS 8

/* ======================================================================== */
/* Helpers                                                                   */
/* ======================================================================== */

uint64_t
scimq__client_rid(struct scimq_client *c)
{
    /* 2^63 requests would take centuries: the GET bit is never reached. */
    return atomic_fetch_add(&c->next_rid, 1);
}

static void
deadline_after(struct timespec *ts, uint64_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t) (ms / 1000);
    ts->tv_nsec += (long) (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static bool
name_ok(const char *name)
{
    return name != NULL && name[0] != '\0' &&
           strlen(name) <= SCIMQ_PROTO_MAX_STRING_LEN;
}

static void
str_set(scimq_proto_str_t *s, const char *text)
{
    s->ptr = text != NULL ? text : "";
    s->len = (uint16_t) (text != NULL ? strlen(text) : 0);
}

/* ======================================================================== */
/* Ops                                                                       */
/* ======================================================================== */

int
scimq__op_frames(enum op_kind kind, const scimq_proto_frame_t *frames, size_t n,
                 struct op **op_p)
{
    size_t total = 0, len, iovcnt, off = 0;
    struct iovec iov;
    struct op *op;
    int rc;

    for (size_t i = 0; i < n; i++) {
        rc = scimq_proto_encode_size(&frames[i], &len, &iovcnt);
        if (rc < 0)
            return rc;
        if (iovcnt != 1)
            return SCIMQ_EINVAL; /* control frames carry no payload */
        total += len;
    }
    op = calloc(1, sizeof(*op) + sizeof(struct iovec) + total);
    if (op == NULL)
        return SCIMQ_ENOMEM;
    op->iov = (struct iovec *) (void *) (op + 1);
    op->mem = (uint8_t *) (op->iov + 1);
    for (size_t i = 0; i < n; i++) {
        uint64_t flen;

        rc = scimq_proto_encode(&frames[i], op->mem + off, total - off, &iov, 1,
                                &iovcnt, &flen);
        if (rc < 0) {
            free(op);
            return rc;
        }
        off += (size_t) flen;
    }
    op->iov[0].iov_base = op->mem;
    op->iov[0].iov_len = total;
    op->iovcnt = 1;
    op->frame_len = total;
    op->kind = kind;
    op->prefer_stream = -1;
    scimq_list_init(&op->link);
    *op_p = op;
    return 0;
}

void
scimq__op_free(struct op *op)
{
    if (op == NULL)
        return;
    free(op->json);
    free(op);
}

static struct op *
op_bare(enum op_kind kind)
{
    struct op *op = calloc(1, sizeof(*op));

    if (op == NULL)
        return NULL;
    op->kind = kind;
    op->prefer_stream = -1;
    op->waited = true;
    scimq_list_init(&op->link);
    return op;
}

/* Posts with c->lock held. */
static int
post_locked(struct scimq_client *c, struct op *op)
{
    if (c->loop_stopped)
        return SCIMQ_ECANCELED;
    if (c->dead != 0 && op->kind != OP_CLOSE)
        return c->dead;
    scimq_list_append(&c->cmds, &op->link);
    /* Under the lock: the I/O thread closes the handle only after it set
     * loop_stopped under the same lock. */
    uv_async_send(&c->wakeup);
    return 0;
}

int
scimq__client_post(struct scimq_client *c, struct op *op)
{
    int rc;

    pthread_mutex_lock(&c->lock);
    rc = post_locked(c, op);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/*
 * Waits for an op's result.  With limit_ms != 0 the caller gives up after
 * that long and the I/O thread frees the op when it completes it; the
 * result is then SCIMQ_ETIMEDOUT and the op must not be touched again.
 */
static int
op_wait(struct scimq_client *c, struct op *op, uint64_t limit_ms)
{
    struct timespec ts;

    if (limit_ms != 0)
        deadline_after(&ts, limit_ms);
    pthread_mutex_lock(&c->lock);
    while (!op->done) {
        if (limit_ms == 0) {
            pthread_cond_wait(&c->cond, &c->lock);
        } else if (pthread_cond_timedwait(&c->cond, &c->lock, &ts) ==
                       ETIMEDOUT &&
                   !op->done) {
            op->abandoned = true;
            pthread_mutex_unlock(&c->lock);
            SCIMQ_LOG_ERROR(CLIENT, "the I/O thread did not answer in time");
            return SCIMQ_ETIMEDOUT;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return 0;
}

/*
 * One request and its reply (OK, ERROR or PONG) within the request
 * timeout.  value_p and json_p receive the OK's value and JSON block.
 */
static int
request(struct scimq_client *c, scimq_proto_frame_t *frames, size_t n,
        int prefer, uint64_t *value_p, char **json_p)
{
    uint32_t timeout = c->opts.request_timeout_ms;
    struct op *op;
    int rc;

    rc = scimq__op_frames(OP_REQUEST, frames, n, &op);
    if (rc < 0)
        return rc == SCIMQ_ENOMEM ? rc : SCIMQ_EINVAL;
    /*
     * The last frame is the one answered.  The frames before it (LIMIT,
     * GET) have consecutive ids of their own, for an ERROR naming them.
     */
    op->rid = frames[n - 1].request_id;
    op->get_rid = n > 1 ? frames[0].request_id : 0;
    op->get_rid_n = (uint32_t) (n - 1);
    op->prefer_stream = prefer;
    op->waited = true;
    op->deadline_ns = uv_hrtime() + (uint64_t) timeout * UINT64_C(1000000);
    rc = scimq__client_post(c, op);
    if (rc < 0) {
        scimq__op_free(op);
        return rc;
    }
    rc = op_wait(c, op, (uint64_t) timeout + CLIENT_WAIT_SLACK_MS);
    if (rc < 0)
        return rc;
    rc = op->rc;
    if (rc == 0 && value_p != NULL)
        *value_p = op->value;
    if (rc == 0 && json_p != NULL) {
        *json_p = op->json;
        op->json = NULL;
        if (*json_p == NULL)
            rc = SCIMQ_EPROTO; /* an OK without its JSON block */
    }
    scimq__op_free(op);
    return rc;
}

static void
frame_init(scimq_proto_frame_t *f, struct scimq_client *c, int opcode)
{
    memset(f, 0, sizeof(*f));
    f->opcode = (uint8_t) opcode;
    f->request_id = scimq__client_rid(c);
}

/* ======================================================================== */
/* Open and close                                                            */
/* ======================================================================== */

void
scimq_client_options_default(scimq_client_options_t *opts)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof(*opts));
    opts->streams = 1;
    opts->client_name = "libscimq";
    opts->confirm_window = 64;
    opts->connect_timeout_ms = 10000;
    opts->reconnect_ms = 30000;
    opts->request_timeout_ms = 30000;
    opts->max_hold_ms = 3600000;
}

static int
options_check(const scimq_client_options_t *o)
{
    if (o->streams < 1 || o->streams > CLIENT_MAX_STREAMS ||
        o->confirm_window < 1 || o->connect_timeout_ms == 0 ||
        o->request_timeout_ms == 0 || o->request_timeout_ms > INT_MAX ||
        (o->client_name != NULL &&
         strlen(o->client_name) > SCIMQ_PROTO_MAX_STRING_LEN))
        return SCIMQ_EINVAL;
    return 0;
}

static int
resolve(struct scimq_client *c, const char *host, uint16_t port)
{
    struct addrinfo hints, *res = NULL, *ai;
    char serv[8];
    int rc;

    if (port == 0) {
        /* "unix:PATH": one address, a Unix-domain socket. */
        struct sockaddr_un *sun;

        if (strlen(host) >= sizeof(sun->sun_path))
            return SCIMQ_EINVAL;
        c->addrs = calloc(1, sizeof(*c->addrs));
        if (c->addrs == NULL)
            return SCIMQ_ENOMEM;
        sun = (struct sockaddr_un *) &c->addrs[0];
        sun->sun_family = AF_UNIX;
        memcpy(sun->sun_path, host, strlen(host) + 1);
        c->naddrs = 1;
        return 0;
    }

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    hints.ai_flags = AI_NUMERICSERV;
    snprintf(serv, sizeof(serv), "%u", port);
    rc = getaddrinfo(host, serv, &hints, &res);
    if (rc != 0) {
        SCIMQ_LOG_ERROR(CLIENT, "cannot resolve %s: %s", host,
                        gai_strerror(rc));
        switch (rc) {
        case EAI_MEMORY:
            return SCIMQ_ENOMEM;
        case EAI_SYSTEM:
            return scimq__err_from_errno(errno);
        default:
            return SCIMQ_EHOSTUNREACH;
        }
    }
    c->addrs = calloc(CLIENT_MAX_ADDRS, sizeof(*c->addrs));
    if (c->addrs == NULL) {
        freeaddrinfo(res);
        return SCIMQ_ENOMEM;
    }
    for (ai = res; ai != NULL && c->naddrs < CLIENT_MAX_ADDRS;
         ai = ai->ai_next) {
        if (ai->ai_addrlen > sizeof(c->addrs[0]) ||
            (ai->ai_family != AF_INET && ai->ai_family != AF_INET6))
            continue;
        memcpy(&c->addrs[c->naddrs++], ai->ai_addr, ai->ai_addrlen);
    }
    freeaddrinfo(res);
    return c->naddrs > 0 ? 0 : SCIMQ_EHOSTUNREACH;
}

/* Frees what client_setup() made; the loop must have no open handle. */
static void
client_free(struct scimq_client *c)
{
    struct scimq_list *e;

    if (c->streams != NULL)
        for (uint16_t i = 0; i < c->nstreams; i++)
            scimq__conn_fini(&c->streams[i]);
    scimq__msg_unhold_all(c);
    while ((e = scimq_list_pop(&c->fifo)) != NULL)
        scimq__msg_destroy(SCIMQ_CONTAINER_OF(e, struct msg, link));
    while ((e = scimq_list_pop(&c->subs)) != NULL) {
        struct sub *sub = SCIMQ_CONTAINER_OF(e, struct sub, link);

        free(sub->queue);
        free(sub);
    }
    while ((e = scimq_list_pop(&c->qlimits)) != NULL) {
        struct qlimit *ql = SCIMQ_CONTAINER_OF(e, struct qlimit, link);

        free(ql->queue);
        free(ql);
    }
    if (c->mctx != NULL)
        scimq__msg_ctx_detach(c->mctx);
    free(c->streams);
    free(c->pending);
    scimq__msg_acks_free(c);
    free(c->addrs);
    free(c->client_name);
    free(c->congestion);
    scimq__token_free(c->token, c->token_len);
    scimq__tls_ctx_free(c->tls_ctx);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static int
client_setup(struct scimq_client *c, const scimq_client_options_t *opts,
             const char *host, uint16_t port, bool tls)
{
    const char *path;
    size_t slots = 256;
    int rc;

    c->opts = *opts;
    scimq_list_init(&c->cmds);
    scimq_list_init(&c->fifo);
    scimq_list_init(&c->subs);
    scimq_list_init(&c->qlimits);
    scimq_list_init(&c->queued);
    atomic_init(&c->next_rid, 1);
    c->nstreams = (uint16_t) opts->streams;
    c->datasum = scimq__param_bool(SCIMQ_PARAM_PROTO_DATASUM) != 0;
    scimq__param_proto_limits(&c->limits);

    /* The caller's strings are borrowed for the call only. */
    c->client_name =
        strdup(opts->client_name != NULL ? opts->client_name : "libscimq");
    if (c->client_name == NULL)
        return SCIMQ_ENOMEM;
    if (opts->congestion != NULL &&
        (c->congestion = strdup(opts->congestion)) == NULL)
        return SCIMQ_ENOMEM;
    c->opts.client_name = c->client_name;
    c->opts.congestion = c->congestion;
    c->opts.token_file = NULL;

    /*
     * A token that cannot be read is not fatal here: only a gateway that
     * requires authentication needs one (it then fails with SCIMQ_EAUTH).
     */
    path = opts->token_file != NULL ? opts->token_file
                                    : getenv("SCIMQ_TOKEN_FILE");
    if (path != NULL && path[0] != '\0') {
        rc = scimq__token_load(path, &c->token, &c->token_len);
        if (rc < 0) {
            SCIMQ_LOG_WARN(CLIENT, "cannot read token file %s: %s", path,
                           scimq_strerror(rc));
            c->token = NULL;
            c->token_len = 0;
        }
    }

    if (tls) {
        char err[512] = "";

        rc = scimq__tls_ctx_client(scimq__param_str(SCIMQ_PARAM_TLS_CA),
                                   scimq__param_str(SCIMQ_PARAM_TLS_CERT),
                                   scimq__param_str(SCIMQ_PARAM_TLS_KEY),
                                   &c->tls_ctx, err, sizeof(err));
        if (rc < 0) {
            SCIMQ_LOG_ERROR(CLIENT, "TLS: %s", err);
            return rc;
        }
        snprintf(c->tls_host, sizeof(c->tls_host), "%s", host);
    }

    while (slots < 2 * (size_t) opts->confirm_window && slots < (1u << 14))
        slots *= 2;
    c->pending = calloc(slots, sizeof(*c->pending));
    c->streams = calloc(c->nstreams, sizeof(*c->streams));
    if (c->pending == NULL || c->streams == NULL)
        return SCIMQ_ENOMEM;
    c->pending_mask = slots - 1;

    rc = resolve(c, host, port);
    if (rc < 0)
        return rc;
    return scimq__msg_ctx_create(opts->payload_release, opts->alloc_arg, c,
                                 &c->mctx);
}

/* Sets up the loop and its handles; on failure closes what was opened. */
static int
loop_setup(struct scimq_client *c)
{
    uint16_t inited = 0;
    int rc;

    rc = uv_loop_init(&c->loop);
    if (rc < 0)
        return scimq__err_from_errno(-rc);
    rc = uv_async_init(&c->loop, &c->wakeup, scimq__session_wakeup);
    if (rc < 0) {
        rc = scimq__err_from_errno(-rc);
        goto fail_loop;
    }
    c->wakeup.data = c;
    rc = uv_timer_init(&c->loop, &c->tick);
    if (rc < 0) {
        rc = scimq__err_from_errno(-rc);
        goto fail_async;
    }
    c->tick.data = c;
    scimq__conn_flush_init(c);
    for (; inited < c->nstreams; inited++) {
        rc = scimq__conn_init(c, &c->streams[inited], inited);
        if (rc < 0)
            goto fail_streams;
    }
    return 0;

fail_streams:
    for (uint16_t i = 0; i < inited; i++)
        uv_close((uv_handle_t *) &c->streams[i].timer, NULL);
    uv_close((uv_handle_t *) &c->flush_prepare, NULL);
    uv_close((uv_handle_t *) &c->flush_check, NULL);
    uv_close((uv_handle_t *) &c->flush_idle, NULL);
    uv_close((uv_handle_t *) &c->tick, NULL);
fail_async:
    uv_close((uv_handle_t *) &c->wakeup, NULL);
    uv_run(&c->loop, UV_RUN_DEFAULT);
fail_loop:
    (void) uv_loop_close(&c->loop);
    return rc;
}

int
scimq_client_open(const char *url, const scimq_client_options_t *opts,
                  scimq_client_t **c_p)
{
    scimq_client_options_t def;
    char host[SCIMQ_HOST_MAX];
    struct scimq_client *c;
    bool tls = false;
    sigset_t all, old;
    uint16_t port = 0;
    struct op *op;
    int rc;

    if (c_p == NULL)
        return SCIMQ_EINVAL;
    *c_p = NULL;
    if (url == NULL)
        return SCIMQ_EINVAL;
    if (opts == NULL) {
        scimq_client_options_default(&def);
        opts = &def;
    }
    rc = options_check(opts);
    if (rc < 0)
        return rc;
    if (strncmp(url, "scimqs://", 9) == 0) {
        /* TLS around the same protocol (the token still authenticates). */
        tls = true;
        url += 9;
    }
    if (strncmp(url, "unix:", 5) == 0 && url[5] != '\0' &&
        strlen(url + 5) < sizeof(host)) {
        /* A local socket path; port 0 says so to resolve(). */
        memcpy(host, url + 5, strlen(url + 5) + 1);
    } else if (scimq__hostport_parse(url, host, sizeof(host), &port) != 0 ||
               host[0] == '\0' || port == 0) {
        SCIMQ_LOG_ERROR(CLIENT,
                        "bad gateway URL '%s' (scimq://HOST:PORT, "
                        "scimqs://HOST:PORT or unix:PATH)",
                        url);
        return SCIMQ_EINVAL;
    }
    if (tls && port == 0)
        return SCIMQ_EINVAL; /* a local socket needs no TLS */

    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return SCIMQ_ENOMEM;
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        return SCIMQ_ENOMEM;
    }
    {
        pthread_condattr_t ca;

        /* Deadlines use CLOCK_MONOTONIC: wall-clock jumps do not matter. */
        if (pthread_condattr_init(&ca) != 0 ||
            pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
            pthread_cond_init(&c->cond, &ca) != 0) {
            pthread_mutex_destroy(&c->lock);
            free(c);
            return SCIMQ_ENOMEM;
        }
        pthread_condattr_destroy(&ca);
    }
    rc = client_setup(c, opts, host, port, tls);
    if (rc < 0)
        goto fail_free;
    rc = loop_setup(c);
    if (rc < 0)
        goto fail_free;

    op = op_bare(OP_OPEN);
    if (op == NULL) {
        rc = SCIMQ_ENOMEM;
        goto fail_loop;
    }
    /*
     * The I/O thread takes no signal: the application's handlers run in
     * its own threads, and a SIGPIPE from a reset socket stays pending in
     * the I/O thread instead of killing the process.
     */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&c->thread, NULL, scimq__session_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        free(op);
        rc = scimq__err_from_errno(rc);
        goto fail_loop;
    }

    /* Bounded by connect_timeout_ms per stream, enforced by the thread. */
    (void) scimq__client_post(c, op);
    (void) op_wait(c, op, 0);
    rc = op->rc;
    scimq__op_free(op);
    if (rc < 0) {
        /* The thread stopped everything before completing the open. */
        pthread_join(c->thread, NULL);
        (void) uv_loop_close(&c->loop);
        goto fail_free;
    }
    *c_p = c;
    return 0;

fail_loop:
    for (uint16_t i = 0; i < c->nstreams; i++)
        uv_close((uv_handle_t *) &c->streams[i].timer, NULL);
    uv_close((uv_handle_t *) &c->flush_prepare, NULL);
    uv_close((uv_handle_t *) &c->flush_check, NULL);
    uv_close((uv_handle_t *) &c->flush_idle, NULL);
    uv_close((uv_handle_t *) &c->tick, NULL);
    uv_close((uv_handle_t *) &c->wakeup, NULL);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    (void) uv_loop_close(&c->loop);
fail_free:
    client_free(c);
    return rc;
}

int
scimq_client_close(scimq_client_t *c)
{
    struct op *op;
    int rc;

    if (c == NULL)
        return SCIMQ_EINVAL;
    rc = scimq_client_flush(c, (int) c->opts.request_timeout_ms);
    op = op_bare(OP_CLOSE);
    if (op != NULL && scimq__client_post(c, op) == 0) {
        /* Bounded by CLIENT_BYE_WAIT_MS, enforced by the thread. */
        (void) op_wait(c, op, 0);
        scimq__op_free(op);
    } else {
        free(op);
        /*
         * Without memory for the op the thread cannot be asked to stop;
         * the handle cannot be freed safely while it runs.
         */
        if (op == NULL) {
            SCIMQ_LOG_ERROR(CLIENT, "out of memory closing the client");
            return SCIMQ_ENOMEM;
        }
    }
    pthread_join(c->thread, NULL);
    if (uv_loop_close(&c->loop) != 0)
        SCIMQ_LOG_ERROR(CLIENT, "libuv loop still busy at close");
    client_free(c);
    return rc;
}

/* ======================================================================== */
/* Producing                                                                 */
/* ======================================================================== */

/*
 * Waits for room in the confirmation window and posts (lock held).  There
 * is no time limit: a full gateway holds producers back (it stops reading
 * their sockets) for as long as it needs to, and the producer waits; only
 * a session that is gone for good (c->dead) ends the wait.
 */
static int
put_post_locked(struct scimq_client *c, struct op *op)
{
    int rc;

    while (c->puts_inflight >= c->opts.confirm_window && c->dead == 0 &&
           !c->loop_stopped)
        pthread_cond_wait(&c->cond, &c->lock);
    rc = post_locked(c, op);
    if (rc == 0)
        c->puts_inflight++;
    return rc;
}

int
scimq_client_put(scimq_client_t *c, const char *queue,
                 const scimq_block_t *blocks, uint32_t block_count,
                 scimq_free_fn free_fn, void *free_arg)
{
    return scimq_client_put_flags(c, queue, blocks, block_count, 0, free_fn,
                                  free_arg);
}

int
scimq_client_put_flags(scimq_client_t *c, const char *queue,
                       const scimq_block_t *blocks, uint32_t block_count,
                       uint64_t flags, scimq_free_fn free_fn, void *free_arg)
{
    scimq_proto_block_t stack[CLIENT_PUT_STACK_BLOCKS], *pb = stack;
    size_t hdr_len, iovcnt;
    scimq_proto_frame_t f;
    uint64_t payload = 0, max_payload;
    struct op *op = NULL;
    int rc;

    if (c == NULL || !name_ok(queue) || (block_count > 0 && blocks == NULL) ||
        block_count > c->limits.max_blocks || (flags & ~SCIMQ_PUT_CONTROL))
        return SCIMQ_EINVAL;
    /* An older gateway could not tell a control message from data. */
    if ((flags & SCIMQ_PUT_CONTROL) &&
        scimq_client_session_version(c) < SCIMQ_PROTO_SESSION_VERSION_CONTROL)
        return SCIMQ_ENOTSUP;
    if (block_count > CLIENT_PUT_STACK_BLOCKS) {
        pb = calloc(block_count, sizeof(*pb));
        if (pb == NULL)
            return SCIMQ_ENOMEM;
    }
    rc = SCIMQ_EINVAL;
    for (uint32_t i = 0; i < block_count; i++) {
        size_t name_len = blocks[i].name != NULL ? strlen(blocks[i].name) : 0;

        if ((blocks[i].data == NULL && blocks[i].len > 0) ||
            name_len > c->limits.max_name_len || blocks[i].len > SIZE_MAX)
            goto out;
        pb[i].name = blocks[i].name;
        pb[i].name_len = (uint32_t) name_len;
        pb[i].data = (void *) (uintptr_t) blocks[i].data;
        pb[i].len = blocks[i].len;
        if (payload + blocks[i].len < payload) {
            rc = SCIMQ_EMSGSIZE;
            goto out;
        }
        payload += blocks[i].len;
    }
    pthread_mutex_lock(&c->lock);
    max_payload = c->max_payload;
    pthread_mutex_unlock(&c->lock);
    if (payload > max_payload) {
        rc = SCIMQ_EMSGSIZE;
        goto out;
    }

    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_PUT;
    f.flags = SCIMQ_PROTO_F_CONFIRM | (c->datasum ? SCIMQ_PROTO_F_DATASUM : 0);
    if (flags & SCIMQ_PUT_CONTROL)
        f.flags |= SCIMQ_PROTO_F_BROADCAST;
    f.request_id = scimq__client_rid(c);
    str_set(&f.args.queue.queue, queue);
    f.block_count = block_count;
    f.blocks = block_count > 0 ? pb : NULL;
    rc = scimq_proto_encode_size(&f, &hdr_len, &iovcnt);
    /* Stay within what a default-configured gateway accepts. */
    if (rc < 0 || hdr_len > c->limits.max_header_len + 4u) {
        rc = rc == SCIMQ_EOVERFLOW ? SCIMQ_EMSGSIZE : SCIMQ_EINVAL;
        goto out;
    }
    op = calloc(1, sizeof(*op) + iovcnt * sizeof(struct iovec) + hdr_len);
    rc = SCIMQ_ENOMEM;
    if (op == NULL)
        goto out;
    op->iov = (struct iovec *) (void *) (op + 1);
    op->mem = (uint8_t *) (op->iov + iovcnt);
    /* With DATASUM this reads the payload once, in the caller's thread. */
    rc = scimq_proto_encode(&f, op->mem, hdr_len, op->iov, iovcnt, &iovcnt,
                            &op->frame_len);
    if (rc < 0) {
        rc = SCIMQ_EINVAL;
        goto out;
    }
    op->iovcnt = (unsigned int) iovcnt;
    op->kind = OP_PUT;
    op->rid = f.request_id;
    op->prefer_stream = -1;
    op->free_fn = free_fn;
    op->free_arg = free_arg;
    op->waited = free_fn == NULL;
    scimq_list_init(&op->link);

    pthread_mutex_lock(&c->lock);
    rc = put_post_locked(c, op);
    pthread_mutex_unlock(&c->lock);
    if (rc < 0)
        goto out;
    if (free_fn != NULL) {
        /* The I/O thread owns the op and the blocks now. */
        op = NULL;
        rc = 0;
        goto out;
    }
    /*
     * The blocks are the caller's: this wait cannot give up before the
     * I/O thread is done with them.  It is bounded by the confirmation
     * deadline (request timeout after the write), the stall detection and
     * reconnect_ms, all enforced by the thread.
     */
    (void) op_wait(c, op, 0);
    rc = op->rc;
out:
    scimq__op_free(op);
    if (pb != stack)
        free(pb);
    return rc;
}

int
scimq_client_flush(scimq_client_t *c, int timeout_ms)
{
    struct timespec ts;
    int rc = 0;

    if (c == NULL)
        return SCIMQ_EINVAL;
    if (timeout_ms > 0)
        deadline_after(&ts, (uint64_t) timeout_ms);
    pthread_mutex_lock(&c->lock);
    while (c->puts_inflight > 0) {
        if (timeout_ms == 0) {
            rc = SCIMQ_ETIMEDOUT;
            break;
        }
        if (timeout_ms < 0) {
            pthread_cond_wait(&c->cond, &c->lock);
        } else if (pthread_cond_timedwait(&c->cond, &c->lock, &ts) ==
                       ETIMEDOUT &&
                   c->puts_inflight > 0) {
            rc = SCIMQ_ETIMEDOUT;
            break;
        }
    }
    if (rc == 0) {
        rc = c->async_err;
        c->async_err = 0;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* ======================================================================== */
/* Consuming                                                                 */
/* ======================================================================== */

/*
 * The lease auto_extend keeps for deliveries from queue: its ack timeout,
 * from STATS (0 for a best-effort queue, which has no lease).  Returns 0
 * or an error; a gateway that cannot say leaves the lease unknown.
 */
static int
lease_learn(struct scimq_client *c, const char *queue, uint32_t *lease_ms_p)
{
    json_t *root, *q0, *kind, *ack;
    char *text = NULL;
    int rc;

    *lease_ms_p = 0;
    rc = scimq_client_stats(c, queue, &text);
    if (rc < 0)
        return rc;
    root = json_loads(text, 0, NULL);
    free(text);
    q0 = json_array_get(json_object_get(root, "queues"), 0);
    kind = json_object_get(q0, "kind");
    ack = json_object_get(q0, "ack_timeout_ms");
    rc = SCIMQ_EPROTO;
    if (json_is_integer(ack) && json_integer_value(ack) > 0 &&
        json_integer_value(ack) <= UINT32_MAX && json_is_string(kind)) {
        if (strcmp(json_string_value(kind), "best-effort") != 0)
            *lease_ms_p = (uint32_t) json_integer_value(ack);
        rc = 0;
    }
    json_decref(root);
    return rc;
}

int
scimq_client_subscribe(scimq_client_t *c, const char *queue,
                       uint32_t credit_msgs, uint64_t credit_bytes)
{
    scimq_proto_frame_t f[3];
    uint32_t dm = 0, id, lease_ms = 0;
    uint64_t db = 0;
    struct sub *sub;
    bool created = false, known;
    size_t n = 0;
    int rc;

    if (c == NULL || !name_ok(queue) || credit_msgs == 0)
        return SCIMQ_EINVAL;
    pthread_mutex_lock(&c->lock);
    known = scimq__sub_find(c, queue, strlen(queue)) != NULL;
    pthread_mutex_unlock(&c->lock);
    /* Learnt before the first GET, so that the first delivery has it. */
    if (c->opts.auto_extend && !known) {
        rc = lease_learn(c, queue, &lease_ms);
        if (rc == SCIMQ_ENOENT)
            return rc;
        if (rc < 0)
            SCIMQ_LOG_WARN(CLIENT,
                           "cannot learn the ack timeout of %s (%s): its "
                           "leases are not extended",
                           queue, scimq_strerror(rc));
    }
    pthread_mutex_lock(&c->lock);
    rc = c->dead;
    if (rc < 0)
        goto unlock;
    sub = scimq__sub_find(c, queue, strlen(queue));
    if (sub == NULL) {
        rc = SCIMQ_ENOMEM;
        sub = calloc(1, sizeof(*sub));
        if (sub == NULL || (sub->queue = strdup(queue)) == NULL) {
            free(sub);
            goto unlock;
        }
        /* 31 bits: the id shares a GET request id with CLIENT_RID_SUB_BIT. */
        c->next_sub_id = (c->next_sub_id + 1) & 0x7fffffffu;
        sub->id = c->next_sub_id;
        sub->lease_ms = lease_ms;
        scimq_list_init(&sub->held);
        scimq_list_append(&c->subs, &sub->link);
        created = true;
        dm = credit_msgs;
        db = credit_bytes;
    } else {
        /*
         * Credit granted cannot be taken back: a smaller window becomes a
         * debt paid by the next top-ups; a larger one first pays the debt.
         */
        if (credit_msgs >= sub->window_msgs) {
            uint32_t extra = credit_msgs - sub->window_msgs;
            uint32_t pay = extra < sub->debt_msgs ? extra : sub->debt_msgs;

            sub->debt_msgs -= pay;
            dm = extra - pay;
        } else {
            sub->debt_msgs += sub->window_msgs - credit_msgs;
        }
        if (credit_bytes >= sub->window_bytes) {
            uint64_t extra = credit_bytes - sub->window_bytes;
            uint64_t pay = extra < sub->debt_bytes ? extra : sub->debt_bytes;

            sub->debt_bytes -= pay;
            db = extra - pay;
        } else {
            sub->debt_bytes += sub->window_bytes - credit_bytes;
        }
    }
    sub->window_msgs = credit_msgs;
    sub->window_bytes = credit_bytes;
    /* A GET on a closed and drained queue is answered with EOS again. */
    sub->eos = false;
    sub->err = 0;
    id = sub->id;
    memset(f, 0, sizeof(f));
    /* The session's first GET for the queue: the limit goes first. */
    if (created && scimq__limit_frame(c, sub, &f[n]))
        n++;
    f[n].opcode = SCIMQ_PROTO_OP_GET;
    f[n].request_id = scimq__sub_rid(sub);
    f[n].args.get.credit_msgs = dm;
    f[n].args.get.credit_bytes = db;
    str_set(&f[n].args.get.queue, queue);
    n++;
    rc = 0;
unlock:
    pthread_mutex_unlock(&c->lock);
    if (rc < 0)
        return rc;

    /*
     * GET has no reply on success.  A PING right behind it on the same
     * stream makes the result synchronous: the gateway handles the frames
     * of a stream in order, so an ERROR for the GET comes before the PONG.
     */
    frame_init(&f[n], c, SCIMQ_PROTO_OP_PING);
    f[n].args.ping.timestamp_ns = uv_hrtime();
    rc = request(c, f, n + 1, -1, NULL, NULL);
    if (rc < 0 && created) {
        pthread_mutex_lock(&c->lock);
        sub = scimq__sub_find(c, queue, strlen(queue));
        if (sub != NULL && sub->id == id) {
            scimq_list_remove(&sub->link);
            scimq__sub_unhold(sub);
            free(sub->queue);
            free(sub);
        }
        pthread_mutex_unlock(&c->lock);
    }
    return rc;
}

int
scimq_client_limit(scimq_client_t *c, const char *queue, uint64_t max_message)
{
    scimq_proto_frame_t f[2];
    struct qlimit *ql;
    struct sub *sub;
    bool send = false;
    int rc;

    if (c == NULL || !name_ok(queue))
        return SCIMQ_EINVAL;
    pthread_mutex_lock(&c->lock);
    rc = c->dead;
    if (rc < 0)
        goto unlock;
    ql = scimq__qlimit_find(c, queue, strlen(queue));
    if (ql == NULL) {
        rc = SCIMQ_ENOMEM;
        ql = calloc(1, sizeof(*ql));
        if (ql == NULL || (ql->queue = strdup(queue)) == NULL) {
            free(ql);
            goto unlock;
        }
        scimq_list_append(&c->qlimits, &ql->link);
    }
    ql->max_message = max_message;
    rc = 0;
    /*
     * Already consuming: the gateway learns the new limit now (0 included,
     * which lifts an earlier one).  Otherwise it goes before the first GET.
     */
    sub = scimq__sub_find(c, queue, strlen(queue));
    if (sub != NULL && c->version >= 2) {
        memset(f, 0, sizeof(f));
        f[0].opcode = SCIMQ_PROTO_OP_LIMIT;
        f[0].request_id = scimq__sub_rid(sub);
        f[0].args.limit.max_message = max_message;
        str_set(&f[0].args.limit.queue, queue);
        send = true;
    }
unlock:
    pthread_mutex_unlock(&c->lock);
    if (rc < 0 || !send)
        return rc;
    /* No reply on success: a PING behind it makes the result synchronous. */
    frame_init(&f[1], c, SCIMQ_PROTO_OP_PING);
    f[1].args.ping.timestamp_ns = uv_hrtime();
    return request(c, f, 2, -1, NULL, NULL);
}

unsigned int
scimq_client_session_version(scimq_client_t *c)
{
    unsigned int v;

    if (c == NULL)
        return 0;
    pthread_mutex_lock(&c->lock);
    v = c->version;
    pthread_mutex_unlock(&c->lock);
    return v;
}

uint64_t
scimq_client_max_payload(scimq_client_t *c)
{
    uint64_t v;

    if (c == NULL)
        return 0;
    pthread_mutex_lock(&c->lock);
    v = c->max_payload;
    pthread_mutex_unlock(&c->lock);
    return v;
}

/* 0 while some subscription may still deliver; else EOS or its error. */
static int
subs_ended(struct scimq_client *c)
{
    struct scimq_list *e, *tmp;
    int err = 0;

    if (scimq_list_empty(&c->subs))
        return 0;
    SCIMQ_LIST_FOREACH (e, tmp, &c->subs) {
        struct sub *sub = SCIMQ_CONTAINER_OF(e, struct sub, link);

        if (!sub->eos && sub->err == 0)
            return 0;
        if (!sub->eos && err == 0)
            err = sub->err;
    }
    return err != 0 ? err : SCIMQ_EOS;
}

int
scimq_client_get(scimq_client_t *c, scimq_message_t **msg_p, int timeout_ms)
{
    struct scimq_list *e;
    struct timespec ts;
    bool expired = false;
    int rc;

    if (c == NULL || msg_p == NULL)
        return SCIMQ_EINVAL;
    *msg_p = NULL;
    if (timeout_ms > 0)
        deadline_after(&ts, (uint64_t) timeout_ms);
    pthread_mutex_lock(&c->lock);
    for (;;) {
        e = scimq_list_pop(&c->fifo);
        if (e != NULL) {
            *msg_p = &SCIMQ_CONTAINER_OF(e, struct msg, link)->pub;
            rc = 0;
            break;
        }
        rc = c->dead != 0      ? c->dead
             : c->loop_stopped ? SCIMQ_ECANCELED
                               : subs_ended(c);
        if (rc < 0)
            break;
        if (timeout_ms == 0) {
            rc = SCIMQ_EAGAIN;
            break;
        }
        if (expired) {
            rc = SCIMQ_ETIMEDOUT;
            break;
        }
        if (timeout_ms < 0)
            pthread_cond_wait(&c->cond, &c->lock);
        else if (pthread_cond_timedwait(&c->cond, &c->lock, &ts) == ETIMEDOUT)
            expired = true; /* one last look at the FIFO */
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

static struct msg *
msg_of(const scimq_message_t *msg)
{
    return SCIMQ_CONTAINER_OF(msg, struct msg, pub);
}

int
scimq_client_ack(scimq_client_t *c, const scimq_message_t *msg)
{
    if (c == NULL || msg == NULL)
        return SCIMQ_EINVAL;
    return scimq__msg_settle(c, msg_of(msg), SCIMQ_PROTO_OP_ACK, 0, 0);
}

int
scimq_client_nack(scimq_client_t *c, const scimq_message_t *msg, int requeue,
                  uint32_t delay_ms)
{
    if (c == NULL || msg == NULL)
        return SCIMQ_EINVAL;
    return scimq__msg_settle(c, msg_of(msg), SCIMQ_PROTO_OP_NACK, requeue,
                             delay_ms);
}

int
scimq_client_extend(scimq_client_t *c, const scimq_message_t *msg,
                    uint32_t lease_ms)
{
    if (c == NULL || msg == NULL)
        return SCIMQ_EINVAL;
    return scimq__msg_settle(c, msg_of(msg), SCIMQ_PROTO_OP_EXTEND, 0,
                             lease_ms);
}

int
scimq_client_lease_counters(scimq_client_t *c, uint64_t *extends_p,
                            uint64_t *late_p)
{
    if (c == NULL)
        return SCIMQ_EINVAL;
    pthread_mutex_lock(&c->lock);
    if (extends_p != NULL)
        *extends_p = c->extends_sent;
    if (late_p != NULL)
        *late_p = c->late_settles;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

/* ======================================================================== */
/* Queue management                                                          */
/* ======================================================================== */

int
scimq_client_queue_declare(scimq_client_t *c, const char *queue,
                           const scimq_queue_options_t *opts)
{
    scimq_proto_frame_t f;

    if (c == NULL || !name_ok(queue) ||
        (opts != NULL && opts->kind != SCIMQ_QUEUE_GUARANTEED &&
         opts->kind != SCIMQ_QUEUE_BEST_EFFORT) ||
        (opts != NULL && (unsigned) opts->durability > SCIMQ_DURABILITY_SYNC) ||
        (opts != NULL && opts->dead_letter != NULL &&
         strlen(opts->dead_letter) > SCIMQ_PROTO_MAX_STRING_LEN))
        return SCIMQ_EINVAL;
    frame_init(&f, c, SCIMQ_PROTO_OP_QUEUE_DECLARE);
    if (opts != NULL) {
        f.args.declare.kind =
            (uint8_t) (opts->kind | opts->durability
                                        << SCIMQ_PROTO_QUEUE_DURABILITY_SHIFT);
        f.args.declare.ack_timeout_ms = opts->ack_timeout_ms;
        f.args.declare.max_attempts = opts->max_attempts;
        f.args.declare.max_bytes = opts->max_bytes;
        str_set(&f.args.declare.dead_letter, opts->dead_letter);
    } else {
        str_set(&f.args.declare.dead_letter, NULL);
    }
    str_set(&f.args.declare.queue, queue);
    /* OK's value says created (1) or already there (0): both are success. */
    return request(c, &f, 1, -1, NULL, NULL);
}

/* The requests whose args are one queue name. */
static int
queue_request(struct scimq_client *c, int opcode, const char *queue,
              uint64_t *value_p, char **json_p)
{
    scimq_proto_frame_t f;

    frame_init(&f, c, opcode);
    str_set(&f.args.queue.queue, queue);
    return request(c, &f, 1, -1, value_p, json_p);
}

static int
pair_request(struct scimq_client *c, int opcode, const char *queue,
             const char *target)
{
    scimq_proto_frame_t f;

    if (c == NULL || !name_ok(queue) || !name_ok(target))
        return SCIMQ_EINVAL;
    frame_init(&f, c, opcode);
    str_set(&f.args.pair.queue, queue);
    str_set(&f.args.pair.target, target);
    return request(c, &f, 1, -1, NULL, NULL);
}

int
scimq_client_queue_delete(scimq_client_t *c, const char *queue,
                          uint64_t *discarded_p)
{
    if (c == NULL || !name_ok(queue))
        return SCIMQ_EINVAL;
    return queue_request(c, SCIMQ_PROTO_OP_QUEUE_DELETE, queue, discarded_p,
                         NULL);
}

int
scimq_client_queue_bind(scimq_client_t *c, const char *queue,
                        const char *target)
{
    return pair_request(c, SCIMQ_PROTO_OP_QUEUE_BIND, queue, target);
}

int
scimq_client_queue_unbind(scimq_client_t *c, const char *queue,
                          const char *target)
{
    return pair_request(c, SCIMQ_PROTO_OP_QUEUE_UNBIND, queue, target);
}

int
scimq_client_queue_close(scimq_client_t *c, const char *queue)
{
    if (c == NULL || !name_ok(queue))
        return SCIMQ_EINVAL;
    return queue_request(c, SCIMQ_PROTO_OP_QUEUE_CLOSE, queue, NULL, NULL);
}

int
scimq_client_queue_move(scimq_client_t *c, const char *queue,
                        const char *target, uint64_t max_msgs,
                        uint64_t *moved_p)
{
    scimq_proto_frame_t f;

    if (c == NULL || !name_ok(queue) || !name_ok(target))
        return SCIMQ_EINVAL;
    frame_init(&f, c, SCIMQ_PROTO_OP_QUEUE_MOVE);
    f.args.move.max_msgs = max_msgs;
    str_set(&f.args.move.queue, queue);
    str_set(&f.args.move.target, target);
    return request(c, &f, 1, -1, moved_p, NULL);
}

int
scimq_client_queue_list(scimq_client_t *c, const char *prefix, char **json_p)
{
    if (c == NULL || json_p == NULL ||
        (prefix != NULL && strlen(prefix) > SCIMQ_PROTO_MAX_STRING_LEN))
        return SCIMQ_EINVAL;
    *json_p = NULL;
    return queue_request(c, SCIMQ_PROTO_OP_QUEUE_LIST, prefix, NULL, json_p);
}

int
scimq_client_stats(scimq_client_t *c, const char *queue, char **json_p)
{
    if (c == NULL || json_p == NULL ||
        (queue != NULL && strlen(queue) > SCIMQ_PROTO_MAX_STRING_LEN))
        return SCIMQ_EINVAL;
    *json_p = NULL;
    return queue_request(c, SCIMQ_PROTO_OP_STATS, queue, NULL, json_p);
}

int
scimq_client_ping(scimq_client_t *c, uint64_t *rtt_ns_p)
{
    scimq_proto_frame_t f;
    uint64_t rtt = 0;
    int rc;

    if (c == NULL)
        return SCIMQ_EINVAL;
    frame_init(&f, c, SCIMQ_PROTO_OP_PING);
    /* The PONG echoes it; the I/O thread measures against uv_hrtime(). */
    f.args.ping.timestamp_ns = uv_hrtime();
    rc = request(c, &f, 1, 0, &rtt, NULL);
    if (rc == 0 && rtt_ns_p != NULL)
        *rtt_ns_p = rtt;
    return rc;
}
