/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One SciMP stream on libuv: connect with a timeout (trying every resolved
 * address), the HELLO / WELCOME / AUTH handshake, zero-copy reading through
 * the incremental decoder, writing an op's iovecs, and dropping the stream.
 * What a dropped stream means for the session (resending, reconnecting) is
 * decided in session.c.
 */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <scimq/error.h>

#include "client_internal.h"
#include "common/auth.h"
#include "common/error_internal.h"
#include "common/log.h"
#include "common/net.h"
#include "common/param.h"

/*
 * libuv documents that uv_buf_t may be cast to struct iovec on Unix; the
 * encoder produces iovecs, so they are handed to uv_write() as they are.
 */
_Static_assert(sizeof(uv_buf_t) == sizeof(struct iovec) &&
                   offsetof(uv_buf_t, base) ==
                       offsetof(struct iovec, iov_base) &&
                   offsetof(uv_buf_t, len) == offsetof(struct iovec, iov_len),
               "uv_buf_t is not layout-compatible with struct iovec");

static void on_tcp_closed(uv_handle_t *h);
static void connect_addr(struct stream *s);

static uint64_t
ms_to_ns(uint64_t ms)
{
    return ms * UINT64_C(1000000);
}

bool
scimq__conn_has_socket(const struct stream *s)
{
    switch (s->state) {
    case SS_CONNECTING:
    case SS_HELLO:
    case SS_AUTH:
    case SS_UP:
    case SS_BYE:
    case SS_CLOSING:
        return true;
    default:
        return false;
    }
}

/* True while frames read from s are to be handled. */
static bool
conn_reading(const struct stream *s)
{
    return s->state == SS_HELLO || s->state == SS_AUTH || s->state == SS_UP ||
           s->state == SS_BYE;
}

int
scimq__conn_init(struct scimq_client *c, struct stream *s, uint16_t index)
{
    int rc;

    s->c = c;
    s->index = index;
    s->state = SS_IDLE;
    s->backoff_ms = CLIENT_BACKOFF_MIN_MS;
    scimq_list_init(&s->inflight);
    rc = scimq_proto_decoder_create(&c->limits, &s->dec);
    if (rc < 0)
        return rc;
    rc = uv_timer_init(&c->loop, &s->timer);
    if (rc < 0) {
        scimq_proto_decoder_destroy(s->dec);
        s->dec = NULL;
        return scimq__err_from_errno(-rc);
    }
    s->timer.data = s;
    return 0;
}

void
scimq__conn_fini(struct stream *s)
{
    scimq__tls_free(s->tls);
    s->tls = NULL;
    free(s->cipher);
    s->cipher = NULL;
    scimq__msg_payload_drop(s->c, s);
    scimq_proto_decoder_destroy(s->dec);
    s->dec = NULL;
    free(s->outq);
    s->outq = NULL;
    s->outq_n = s->outq_cap = 0;
}

/* Socket options: the caller's, or the param table's where left at 0. */
static void
conn_tune(struct scimq_client *c, int fd)
{
    const scimq_client_options_t *o = &c->opts;

    if (o->sndbuf == 0 && o->rcvbuf == 0 && o->congestion == NULL) {
        scimq__sock_tune_default(fd);
        return;
    }
    scimq__sock_tune(
        fd,
        o->sndbuf != 0 ? o->sndbuf : scimq__param_size(SCIMQ_PARAM_NET_SNDBUF),
        o->rcvbuf != 0 ? o->rcvbuf : scimq__param_size(SCIMQ_PARAM_NET_RCVBUF),
        o->congestion != NULL ? o->congestion
                              : scimq__param_str(SCIMQ_PARAM_NET_CONGESTION));
}

/* ======================================================================== */
/* Writing                                                                   */
/* ======================================================================== */

static void
on_write(uv_write_t *req, int status)
{
    struct op *op = req->data;
    struct stream *s = req->handle->data;

    free(op->cipher);
    op->cipher = NULL;
    scimq__session_write_done(s->c, s, op, status);
}

/* TLS records of their own (handshake, alerts): a buffer and its write. */
struct tls_out {
    uv_write_t req;
    uint8_t data[];
};

static void
on_tls_out(uv_write_t *req, int status)
{
    (void) status; /* a failed write shows as a failed read too */
    free(req);
}

/* TLS: sends the ciphertext waiting.  0 or a SCIMQ_E* code. */
static int
conn_tls_flush(struct stream *s)
{
    size_t len = s->tls != NULL ? scimq__tls_pending(s->tls) : 0;
    struct tls_out *o;
    uv_buf_t buf;
    int rc;

    if (len == 0)
        return 0;
    o = malloc(sizeof(*o) + len);
    if (o == NULL)
        return SCIMQ_ENOMEM;
    buf = uv_buf_init((char *) o->data,
                      (unsigned int) scimq__tls_take(s->tls, o->data, len));
    rc = uv_write(&o->req, (uv_stream_t *) &s->tcp, &buf, 1, on_tls_out);
    if (rc < 0) {
        free(o);
        return scimq__err_from_errno(-rc);
    }
    return 0;
}

/*
 * One write of gathered ops: their iovecs back to back, and the ops to
 * complete when it is done.
 */
struct conn_batch {
    uv_write_t req;
    struct stream *s;
    size_t n;
    struct op *ops[];
};

/* Gathered writes wait no longer than this many ops or bytes. */
#define CLIENT_BATCH_OPS 256u
#define CLIENT_BATCH_BYTES (256u << 10)

static void
on_batch_write(uv_write_t *req, int status)
{
    struct conn_batch *b = (struct conn_batch *) req;

    for (size_t i = 0; i < b->n; i++)
        scimq__session_write_done(b->s->c, b->s, b->ops[i], status);
    free(b);
}

/* Writes s's gathered ops in one uv_write.  0 or an error. */
static int
conn_flush(struct stream *s)
{
    struct conn_batch *b;
    uv_buf_t *bufs;
    size_t nbufs = 0, n = s->outq_n;
    int rc;

    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        nbufs += s->outq[i]->iovcnt;
    b = malloc(sizeof(*b) + n * sizeof(b->ops[0]) + nbufs * sizeof(*bufs));
    if (b == NULL)
        return SCIMQ_ENOMEM;
    bufs = (uv_buf_t *) (void *) (b->ops + n);
    b->s = s;
    b->n = n;
    nbufs = 0;
    for (size_t i = 0; i < n; i++) {
        struct op *op = s->outq[i];

        b->ops[i] = op;
        for (unsigned int k = 0; k < op->iovcnt; k++)
            bufs[nbufs++] = uv_buf_init(op->iov[k].iov_base,
                                        (unsigned int) op->iov[k].iov_len);
    }
    s->outq_n = 0;
    s->outq_bytes = 0;
    /* libuv copies the array of buffers; the bytes stay the ops'. */
    rc = uv_write(&b->req, (uv_stream_t *) &s->tcp, bufs, (unsigned int) nbufs,
                  on_batch_write);
    if (rc < 0) {
        for (size_t i = 0; i < n; i++)
            b->ops[i]->writing = false;
        free(b);
        return scimq__err_from_errno(-rc);
    }
    return 0;
}

/* Only keeps the loop from blocking in poll; the check handle flushes. */
static void
on_flush_idle(uv_idle_t *h)
{
    (void) h;
}

void
scimq__conn_flush_all(struct scimq_client *c, bool force)
{
    uint64_t now = c->coalesce_ns > 0 && !force ? uv_hrtime() : 0;
    bool waiting = false;

    for (uint16_t i = 0; i < c->nstreams; i++) {
        struct stream *s = &c->streams[i];
        int rc;

        if (s->outq_n == 0)
            continue;
        if (now != 0 && now - s->outq_since_ns < c->coalesce_ns &&
            s->outq_n < CLIENT_BATCH_OPS &&
            s->outq_bytes < CLIENT_BATCH_BYTES) {
            waiting = true; /* others may still come to share it */
            continue;
        }
        rc = conn_flush(s);
        if (rc < 0)
            scimq__conn_fail(s, rc);
    }
    if (waiting)
        uv_idle_start(&c->flush_idle, on_flush_idle);
    else
        uv_idle_stop(&c->flush_idle);
}

static void
on_flush_prepare(uv_prepare_t *h)
{
    scimq__conn_flush_all(h->data, false);
}

static void
on_flush_check(uv_check_t *h)
{
    scimq__conn_flush_all(h->data, false);
}

void
scimq__conn_flush_init(struct scimq_client *c)
{
    int64_t us = scimq__param_int(SCIMQ_PARAM_CLIENT_COALESCE_US);

    c->coalesce_ns = us > 0 ? (uint64_t) us * 1000u : 0;
    uv_prepare_init(&c->loop, &c->flush_prepare);
    c->flush_prepare.data = c;
    uv_prepare_start(&c->flush_prepare, on_flush_prepare);
    uv_unref((uv_handle_t *) &c->flush_prepare);
    uv_check_init(&c->loop, &c->flush_check);
    c->flush_check.data = c;
    uv_check_start(&c->flush_check, on_flush_check);
    uv_unref((uv_handle_t *) &c->flush_check);
    uv_idle_init(&c->loop, &c->flush_idle);
    c->flush_idle.data = c;
}

int
scimq__conn_write(struct stream *s, struct op *op)
{
    uv_buf_t cbuf;
    int rc;

    op->wreq.data = op;
    op->stream = s;
    op->writing = true;
    if (s->tls == NULL) {
        if (s->outq_n == s->outq_cap) {
            size_t cap = s->outq_cap ? 2 * s->outq_cap : 64;
            struct op **q = realloc(s->outq, cap * sizeof(*q));

            if (q == NULL) {
                op->writing = false;
                return SCIMQ_ENOMEM;
            }
            s->outq = q;
            s->outq_cap = cap;
        }
        if (s->outq_n == 0)
            s->outq_since_ns = uv_hrtime();
        s->outq[s->outq_n++] = op;
        s->outq_bytes += op->frame_len;
        return 0;
    }
    {
        /* Encrypted as one buffer; the op's bytes stay as they are (a
         * resend on another stream encrypts them again). */
        size_t len;

        for (unsigned int i = 0; i < op->iovcnt; i++) {
            rc = scimq__tls_write(s->tls, op->iov[i].iov_base,
                                  op->iov[i].iov_len);
            if (rc < 0) {
                op->writing = false;
                return rc;
            }
        }
        len = scimq__tls_pending(s->tls);
        free(op->cipher);
        op->cipher = malloc(len > 0 ? len : 1);
        if (op->cipher == NULL) {
            op->writing = false;
            return SCIMQ_ENOMEM;
        }
        cbuf = uv_buf_init((char *) op->cipher, (unsigned int) scimq__tls_take(
                                                    s->tls, op->cipher, len));
        rc = uv_write(&op->wreq, (uv_stream_t *) &s->tcp, &cbuf, 1, on_write);
    }
    if (rc < 0) {
        free(op->cipher);
        op->cipher = NULL;
        op->writing = false;
        return scimq__err_from_errno(-rc);
    }
    return 0;
}

/* Sends one control frame that expects no routing (handshake, PONG, BYE). */
static int
conn_send_ctl(struct stream *s, const scimq_proto_frame_t *f)
{
    struct op *op;
    int rc;

    rc = scimq__op_frames(OP_SEND, f, 1, &op);
    if (rc < 0)
        return rc;
    rc = scimq__conn_write(s, op);
    if (rc < 0)
        scimq__op_free(op);
    return rc;
}

/* ======================================================================== */
/* Dropping                                                                  */
/* ======================================================================== */

void
scimq__conn_fail(struct stream *s, int rc)
{
    struct scimq_client *c = s->c;

    if (!scimq__conn_has_socket(s) || s->state == SS_CLOSING)
        return;
    if (rc != 0 && !c->stopping && rc != SCIMQ_EAGAIN)
        SCIMQ_LOG_WARN(CLIENT, "stream %u: connection lost: %s", s->index,
                       scimq_strerror(rc));
    s->state = SS_CLOSING;
    s->last_err = rc;
    if (c->creator == s)
        c->creator = NULL;
    uv_timer_stop(&s->timer);
    /* What was gathered becomes a write that the close cancels, so its
     * ops complete as every other unfinished write's do. */
    if (conn_flush(s) < 0) {
        for (size_t i = 0; i < s->outq_n; i++)
            scimq__session_write_done(c, s, s->outq[i], UV_ECANCELED);
        s->outq_n = 0;
        s->outq_bytes = 0;
    }
    /* Closing stops reading and cancels writes (their callbacks run). */
    if (!uv_is_closing((uv_handle_t *) &s->tcp))
        uv_close((uv_handle_t *) &s->tcp, on_tcp_closed);
    /*
     * The gateway requeues every unsettled delivery of this connection and
     * gives their credit back itself; messages received on it must not top
     * the credit up again when they are settled (see message.c).
     */
    atomic_fetch_add(&s->gen, 1);
    scimq__msg_payload_drop(c, s);
    s->rx_payload = false;
    s->direct = false;
    s->rx_drop_rc = 0;
    scimq_proto_decoder_reset(s->dec);
    scimq__session_stream_down(c, s, rc);
}

static void
on_tcp_closed(uv_handle_t *h)
{
    struct stream *s = h->data;

    /* A refused address while others remain: try the next one. */
    if (s->state == SS_CONNECTING && s->addr_idx + 1 < s->c->naddrs) {
        s->addr_idx++;
        connect_addr(s);
        return;
    }
    scimq__session_stream_closed(s->c, s);
}

/* ======================================================================== */
/* Handshake                                                                 */
/* ======================================================================== */

static void
conn_up(struct stream *s)
{
    struct scimq_client *c = s->c;

    uv_timer_stop(&s->timer);
    s->state = SS_UP;
    s->down_since_ns = 0;
    s->backoff_ms = CLIENT_BACKOFF_MIN_MS;
    if (c->creator == s)
        c->creator = NULL;
    SCIMQ_LOG_INFO(CLIENT, "stream %u of %u up", s->index, c->nstreams);
    scimq__session_stream_up(c, s);
}

static int
conn_send_hello(struct stream *s)
{
    struct scimq_client *c = s->c;
    scimq_proto_frame_t f;

    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_HELLO;
    f.request_id = s->hello_rid = scimq__client_rid(c);
    f.args.hello.version_min = SCIMQ_PROTO_SESSION_VERSION_MIN;
    f.args.hello.version_max = scimq__param_proto_version_max();
    f.args.hello.stream_index = s->index;
    f.args.hello.stream_count = c->nstreams;
    if (c->have_session)
        memcpy(f.args.hello.session_id, c->session_id,
               SCIMQ_PROTO_SESSION_ID_LEN);
    /* Remember which session this HELLO joins, to judge an ENOENT. */
    memcpy(s->hello_sid, f.args.hello.session_id, SCIMQ_PROTO_SESSION_ID_LEN);
    f.args.hello.client_name.ptr = c->client_name;
    f.args.hello.client_name.len = (uint16_t) strlen(c->client_name);
    s->state = SS_HELLO;
    return conn_send_ctl(s, &f);
}

static int
conn_welcome(struct stream *s, const scimq_proto_frame_t *f)
{
    static const uint8_t zero[SCIMQ_PROTO_SESSION_ID_LEN];
    struct scimq_client *c = s->c;
    scimq_proto_frame_t a;
    int rc;

    if (s->state != SS_HELLO || f->request_id != s->hello_rid)
        return SCIMQ_EPROTO;
    if (f->args.welcome.version < SCIMQ_PROTO_SESSION_VERSION_MIN ||
        f->args.welcome.version > scimq__param_proto_version_max()) {
        SCIMQ_LOG_ERROR(
            CLIENT, "gateway chose session version %u, not one of %u..%u",
            f->args.welcome.version, SCIMQ_PROTO_SESSION_VERSION_MIN,
            scimq__param_proto_version_max());
        return SCIMQ_EPROTO_VERSION;
    }
    if (f->args.welcome.stream_index != s->index ||
        memcmp(f->args.welcome.session_id, zero, sizeof(zero)) == 0)
        return SCIMQ_EPROTO;
    if (!c->have_session) {
        memcpy(c->session_id, f->args.welcome.session_id,
               SCIMQ_PROTO_SESSION_ID_LEN);
        c->have_session = true;
        /* The version is the session's: the renewal below depends on it. */
        pthread_mutex_lock(&c->lock);
        if (c->version != 0 && c->version != f->args.welcome.version)
            SCIMQ_LOG_WARN(CLIENT, "new session speaks version %u (was %u)",
                           f->args.welcome.version, c->version);
        c->version = f->args.welcome.version;
        pthread_mutex_unlock(&c->lock);
        if (c->had_session)
            scimq__session_renewed(c);
        c->had_session = true;
    } else if (memcmp(c->session_id, f->args.welcome.session_id,
                      SCIMQ_PROTO_SESSION_ID_LEN) != 0 ||
               f->args.welcome.version != c->version) {
        /* Every stream of a session speaks the session's version. */
        return SCIMQ_EPROTO;
    }
    pthread_mutex_lock(&c->lock);
    if (c->max_payload == 0 || f->args.welcome.max_payload < c->max_payload)
        c->max_payload = f->args.welcome.max_payload;
    pthread_mutex_unlock(&c->lock);

    if (!f->args.welcome.auth_required) {
        conn_up(s);
        return 0;
    }
    if (c->token == NULL) {
        SCIMQ_LOG_ERROR(CLIENT,
                        "the gateway requires authentication and no token is "
                        "set (token_file or SCIMQ_TOKEN_FILE)");
        return SCIMQ_EAUTH;
    }
    memset(&a, 0, sizeof(a));
    a.opcode = SCIMQ_PROTO_OP_AUTH;
    a.request_id = s->auth_rid = scimq__client_rid(c);
    rc = scimq__auth_mac(c->token, c->token_len, f->args.welcome.nonce,
                         f->args.welcome.session_id, a.args.auth.mac);
    if (rc < 0)
        return rc;
    s->state = SS_AUTH;
    return conn_send_ctl(s, &a);
}

static int
conn_pong(struct stream *s, const scimq_proto_frame_t *f)
{
    scimq_proto_frame_t p;

    memset(&p, 0, sizeof(p));
    p.opcode = SCIMQ_PROTO_OP_PONG;
    p.request_id = f->request_id;
    p.args.ping.timestamp_ns = f->args.ping.timestamp_ns;
    return conn_send_ctl(s, &p);
}

/* Frames before the stream is up: WELCOME, OK to AUTH, ERROR, PING. */
static int
conn_handshake_frame(struct stream *s, const scimq_proto_frame_t *f)
{
    struct scimq_client *c = s->c;
    int code;

    switch (f->opcode) {
    case SCIMQ_PROTO_OP_WELCOME:
        return conn_welcome(s, f);
    case SCIMQ_PROTO_OP_OK:
        if (s->state != SS_AUTH || f->request_id != s->auth_rid)
            return SCIMQ_EPROTO;
        conn_up(s);
        return 0;
    case SCIMQ_PROTO_OP_PING:
        return conn_pong(s, f);
    case SCIMQ_PROTO_OP_BYE:
        /*
         * The gateway shuts down before this stream is up: not a protocol
         * error, just a close; the stream tries again later.
         */
        SCIMQ_LOG_INFO(CLIENT,
                       "stream %u: gateway said BYE during the "
                       "handshake",
                       s->index);
        return SCIMQ_ESHUTDOWN;
    case SCIMQ_PROTO_OP_ERROR:
        code = f->args.error.code < 0 ? f->args.error.code : SCIMQ_EPROTO;
        if (s->state == SS_HELLO && code == SCIMQ_ENOENT && c->have_session &&
            memcmp(s->hello_sid, c->session_id, SCIMQ_PROTO_SESSION_ID_LEN) ==
                0) {
            /*
             * The session ended on the gateway (its last stream closed, or
             * the gateway restarted): the next attempt creates a new one.
             */
            SCIMQ_LOG_WARN(CLIENT, "stream %u: session gone, starting anew",
                           s->index);
            c->have_session = false;
        } else if (!c->stopping) {
            SCIMQ_LOG_ERROR(CLIENT, "stream %u: handshake refused: %s: %.*s",
                            s->index, scimq_strerror(code),
                            (int) f->args.error.text.len,
                            f->args.error.text.ptr);
        }
        return code;
    default:
        return SCIMQ_EPROTO;
    }
}

/* ======================================================================== */
/* Reading                                                                   */
/* ======================================================================== */

/* A whole frame is in. */
static int
conn_frame(struct stream *s, const scimq_proto_frame_t *f)
{
    struct scimq_client *c = s->c;
    scimq_proto_frame_t b;
    int rc = 0;

    if (s->state == SS_HELLO || s->state == SS_AUTH) {
        rc = conn_handshake_frame(s, f);
    } else if (f->opcode == SCIMQ_PROTO_OP_PING) {
        rc = conn_pong(s, f);
    } else if (f->opcode == SCIMQ_PROTO_OP_BYE) {
        if (s->state == SS_BYE) {
            /* The answer to our BYE: the stream is done. */
            scimq__conn_fail(s, 0);
        } else {
            /*
             * The gateway shuts down: answer, then wait for its close.  It
             * is a cut like any other (try again later): unconfirmed PUTs
             * go out again, confirmed ones are safe.
             */
            SCIMQ_LOG_INFO(CLIENT, "stream %u: gateway said BYE", s->index);
            memset(&b, 0, sizeof(b));
            b.opcode = SCIMQ_PROTO_OP_BYE;
            b.request_id = f->request_id;
            s->state = SS_BYE;
            s->bye_deadline_ns = uv_hrtime() + ms_to_ns(CLIENT_BYE_WAIT_MS);
            scimq__session_stream_gone(c, s, true);
            rc = conn_send_ctl(s, &b);
        }
    } else {
        rc = scimq__session_frame(c, s, f);
    }
    /* A payload nobody took (a discarded frame, an unmatched reply). */
    if (s->rx_buf != NULL)
        scimq__msg_payload_drop(c, s);
    s->rx_drop_rc = 0;
    return rc;
}

/* Acts on a decoder result.  Returns 0 or an error that drops the stream. */
static int
conn_rx_event(struct stream *s, int ev)
{
    const scimq_proto_frame_t *f;

    if (ev < 0)
        return ev;
    switch (ev) {
    case SCIMQ_PROTO_HEADER_READY:
        f = scimq_proto_decoder_frame(s->dec);
        s->rx_payload = true;
        return scimq__msg_payload_dest(s->c, s, f);
    case SCIMQ_PROTO_FRAME_DONE:
        f = scimq_proto_decoder_frame(s->dec);
        /* An empty message has no payload phase, but its consumer's
         * allocator still gives it a place (the MPI agent: a slot). */
        if (!s->rx_payload && f->opcode == SCIMQ_PROTO_OP_DELIVER) {
            int rc = scimq__msg_payload_dest(s->c, s, f);

            if (rc != 0)
                return rc;
        }
        s->rx_payload = false;
        return conn_frame(s, f);
    default:
        return 0;
    }
}

/*
 * Header phase: bytes go to the small staging buffer and are fed to the
 * decoder.  Payload phase: libuv reads straight into the decoder's iov,
 * which is the message's final payload buffer (zero copy).
 */
static void
on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct stream *s = h->data;
    struct iovec iov;

    (void) suggested;
    if (s->tls != NULL) {
        /* Ciphertext: decrypted by conn_tls_rx. */
        s->direct = false;
        buf->base = (char *) s->cipher;
        buf->len = CLIENT_STAGE_LEN;
        return;
    }
    if (s->rx_payload && scimq_proto_decoder_iov(s->dec, &iov, 1) == 1) {
        s->direct = true;
        buf->base = iov.iov_base;
        buf->len = iov.iov_len;
        return;
    }
    s->direct = false;
    buf->base = (char *) s->stage;
    buf->len = scimq_proto_decoder_stage_len(s->dec, sizeof(s->stage));
}

static int
conn_rx_stage(struct stream *s, size_t len)
{
    size_t off = 0, used;
    int rc;

    while (off < len && conn_reading(s)) {
        rc = scimq_proto_decoder_feed(s->dec, s->stage + off, len - off, &used);
        off += used;
        rc = conn_rx_event(s, rc);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/*
 * TLS: the handshake first (then HELLO goes), then plaintext into the
 * payload buffer while a payload is read (decrypted in place) or into the
 * stage, processed as read bytes are.
 */
static int
conn_tls_rx(struct stream *s, const void *data, size_t len)
{
    int rc = scimq__tls_feed(s->tls, data, len);

    if (rc == 0 && s->state == SS_CONNECTING) {
        rc = scimq__tls_handshake(s->tls);
        if (rc < 0)
            SCIMQ_LOG_ERROR(CLIENT, "stream %u: %s", s->index,
                            scimq__tls_error(s->tls));
        if (rc == 1)
            rc = conn_send_hello(s);
        else if (rc == 0)
            return conn_tls_flush(s);
    }
    while (rc >= 0 && conn_reading(s)) {
        struct iovec iov;
        ssize_t n;

        if (s->rx_payload && scimq_proto_decoder_iov(s->dec, &iov, 1) == 1) {
            n = scimq__tls_read(s->tls, iov.iov_base, iov.iov_len);
            if (n > 0)
                rc = conn_rx_event(
                    s, scimq_proto_decoder_advance(s->dec, (size_t) n));
        } else {
            n = scimq__tls_read(s->tls, s->stage, sizeof(s->stage));
            if (n > 0)
                rc = conn_rx_stage(s, (size_t) n);
        }
        if (n < 0) {
            SCIMQ_LOG_ERROR(CLIENT, "stream %u: %s", s->index,
                            scimq__tls_error(s->tls));
            rc = (int) n;
        }
        if (n <= 0)
            break;
    }
    if (rc >= 0)
        rc = conn_tls_flush(s);
    return rc;
}

static void
on_read(uv_stream_t *h, ssize_t nread, const uv_buf_t *buf)
{
    struct stream *s = h->data;
    bool direct = s->direct;
    int rc;

    (void) buf;
    s->direct = false;
    /* Connected, TLS handshake under way: its records are read too. */
    if (nread == 0 ||
        (!conn_reading(s) && !(s->tls != NULL && s->state == SS_CONNECTING)))
        return;
    if (nread < 0) {
        if (nread != UV_EOF)
            rc = scimq__err_from_errno((int) -nread);
        else if (s->state == SS_BYE)
            rc = 0; /* the expected end after BYE */
        else if (scimq_proto_decoder_idle(s->dec))
            rc = SCIMQ_ECONNRESET;
        else
            rc = SCIMQ_EPIPE; /* the stream ended inside a frame */
        scimq__conn_fail(s, rc);
        return;
    }
    if (s->tls != NULL)
        rc = conn_tls_rx(s, buf->base, (size_t) nread);
    else if (direct)
        rc = conn_rx_event(s,
                           scimq_proto_decoder_advance(s->dec, (size_t) nread));
    else
        rc = conn_rx_stage(s, (size_t) nread);
    if (rc < 0)
        scimq__conn_fail(s, rc);
}

/* ======================================================================== */
/* Connecting                                                                */
/* ======================================================================== */

static void
on_connect_timeout(uv_timer_t *t)
{
    struct stream *s = t->data;

    if (s->state == SS_CONNECTING || s->state == SS_HELLO ||
        s->state == SS_AUTH)
        scimq__conn_fail(s, SCIMQ_ETIMEDOUT);
}

static void
on_connect(uv_connect_t *req, int status)
{
    struct stream *s = req->data;
    struct scimq_client *c = s->c;
    int rc;

    /* Closed meanwhile (timeout, shutdown): the close callback decides. */
    if (s->state != SS_CONNECTING || status == UV_ECANCELED)
        return;
    if (status < 0) {
        rc = scimq__err_from_errno(-status);
        if (s->addr_idx + 1 < c->naddrs) {
            /* Keep SS_CONNECTING: on_tcp_closed tries the next address. */
            s->last_err = rc;
            uv_close((uv_handle_t *) &s->tcp, on_tcp_closed);
            return;
        }
        scimq__conn_fail(s, rc);
        return;
    }
    /* Only one stream at a time may create a session (HELLO without id). */
    if (!c->have_session) {
        if (c->creator != NULL && c->creator != s) {
            scimq__conn_fail(s, SCIMQ_EAGAIN);
            return;
        }
        c->creator = s;
    }
    if (c->tls_ctx != NULL) {
        /* A new TLS session per connection; HELLO once it is up. */
        scimq__tls_free(s->tls);
        s->tls = NULL;
        if ((s->cipher == NULL &&
             (s->cipher = malloc(CLIENT_STAGE_LEN)) == NULL) ||
            scimq__tls_new(c->tls_ctx, false, c->tls_host, &s->tls) != 0) {
            scimq__conn_fail(s, SCIMQ_ENOMEM);
            return;
        }
    }
    rc = uv_read_start((uv_stream_t *) &s->tcp, on_alloc, on_read);
    if (rc < 0) {
        scimq__conn_fail(s, scimq__err_from_errno(-rc));
        return;
    }
    if (s->tls != NULL) {
        rc = scimq__tls_handshake(s->tls);
        if (rc >= 0)
            rc = conn_tls_flush(s);
        if (rc < 0)
            scimq__conn_fail(s, rc);
        return;
    }
    rc = conn_send_hello(s);
    if (rc < 0)
        scimq__conn_fail(s, rc);
}

/* One connect to the current address; the timer keeps running. */
static void
connect_addr(struct stream *s)
{
    struct scimq_client *c = s->c;
    const struct sockaddr *sa =
        (const struct sockaddr *) &c->addrs[s->addr_idx];
    uv_os_fd_t fd;
    int rc;

    if (sa->sa_family == AF_UNIX) {
        /* The admin socket: no TCP tuning; errors come to on_connect. */
        rc = uv_pipe_init(&c->loop, &s->pipe, 0);
        if (rc == 0) {
            s->pipe.data = s;
            s->state = SS_CONNECTING;
            s->creq.data = s;
            uv_pipe_connect(&s->creq, &s->pipe,
                            ((const struct sockaddr_un *) sa)->sun_path,
                            on_connect);
            return;
        }
    } else {
        rc = uv_tcp_init_ex(&c->loop, &s->tcp, sa->sa_family);
    }
    if (rc < 0) {
        /* No handle to close: report the drop and the close at once. */
        s->state = SS_CLOSING;
        s->last_err = scimq__err_from_errno(-rc);
        uv_timer_stop(&s->timer);
        if (c->creator == s)
            c->creator = NULL;
        scimq__session_stream_down(c, s, s->last_err);
        scimq__session_stream_closed(c, s);
        return;
    }
    s->tcp.data = s;
    s->state = SS_CONNECTING;
    /* Tuned before connecting, so that buffer sizes shape the handshake. */
    if (uv_fileno((uv_handle_t *) &s->tcp, &fd) == 0)
        conn_tune(c, fd);
    s->creq.data = s;
    rc = uv_tcp_connect(&s->creq, &s->tcp, sa, on_connect);
    if (rc < 0) {
        rc = scimq__err_from_errno(-rc);
        if (s->addr_idx + 1 < c->naddrs) {
            s->last_err = rc;
            uv_close((uv_handle_t *) &s->tcp, on_tcp_closed);
            return;
        }
        scimq__conn_fail(s, rc);
    }
}

void
scimq__conn_start(struct stream *s)
{
    s->addr_idx = 0;
    s->rx_payload = false;
    s->direct = false;
    scimq_proto_decoder_reset(s->dec);
    uv_timer_start(&s->timer, on_connect_timeout, s->c->opts.connect_timeout_ms,
                   0);
    connect_addr(s);
}

void
scimq__conn_bye(struct stream *s)
{
    scimq_proto_frame_t f;
    int rc;

    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_BYE;
    f.request_id = s->bye_rid = scimq__client_rid(s->c);
    s->state = SS_BYE;
    s->bye_deadline_ns = uv_hrtime() + ms_to_ns(CLIENT_BYE_WAIT_MS);
    rc = conn_send_ctl(s, &f);
    if (rc < 0)
        scimq__conn_fail(s, rc);
}
