/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connections: accept, read and decode, handle requests, write replies and
 * deliveries, close.
 *
 * A malformed frame or a protocol violation gets an ERROR frame naming the
 * problem, then the connection is closed; nothing else is affected.  A
 * request that is well-formed but cannot be served (no such queue, ...)
 * gets an ERROR and the connection stays.
 */
#include "config.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <scimq/error.h>

#include "common/auth.h"
#include "common/log.h"
#include "common/net.h"
#include "common/param.h"
#include "conn.h"

/* Staging buffer for frame headers (payloads bypass it). */
#define CONN_STAGE_LEN (64u << 10)
/* Header buffer for frames without big args (grown when needed). */
#define CONN_SMALL_HDR 256

static void conn_process(struct gw_conn *c);

/* ======================================================================== */
/* Writing                                                                   */
/* ======================================================================== */

struct conn_write {
    uv_write_t req;
    struct gw_conn *c;
    struct gw_payload *payload; /* pinned for a DELIVER, else NULL */
    void *owned;                /* freed with the write (JSON text) */
    uint8_t *hdr;
    uint64_t bytes;
    unsigned int nbufs;
    uv_buf_t bufs[];
};

static void
conn_maybe_finish(struct gw_conn *c)
{
    if (c->close_after_write && c->writes_pending == 0)
        gw_conn_close(c, NULL);
}

static void
on_write(uv_write_t *req, int status)
{
    struct conn_write *wr = (struct conn_write *) req;
    struct gw_conn *c = wr->c;

    c->writes_pending--;
    if (status == 0) {
        c->info.bytes_out += wr->bytes;
        c->info.frames_out++;
    }
    if (wr->payload != NULL)
        gw_broker_unpin(c->gw, wr->payload);
    free(wr->owned);
    free(wr->hdr);
    free(wr);
    if (status < 0 && status != UV_ECANCELED)
        gw_conn_close(c, uv_strerror(status));
    else
        conn_maybe_finish(c);
}

/*
 * Encodes f and queues it.  The payload (if any) is pinned by the caller
 * and unpinned when the write completes, whatever happens; owned (if any)
 * holds block data the frame points to and is freed the same way.
 */
static int
conn_send_owned(struct gw_conn *c, const scimq_proto_frame_t *f,
                struct gw_payload *payload, void *owned)
{
    struct conn_write *wr = NULL;
    struct iovec *iov = NULL;
    size_t hdr_len, iovcnt;
    uint64_t total;
    int rc;

    rc = scimq_proto_encode_size(f, &hdr_len, &iovcnt);
    if (rc != 0)
        goto fail;
    wr = calloc(1, sizeof(*wr) + iovcnt * sizeof(uv_buf_t));
    iov = calloc(iovcnt, sizeof(*iov));
    rc = SCIMQ_ENOMEM;
    if (wr == NULL || iov == NULL || (wr->hdr = malloc(hdr_len)) == NULL)
        goto fail;
    rc = scimq_proto_encode(f, wr->hdr, hdr_len, iov, iovcnt, &iovcnt, &total);
    if (rc != 0)
        goto fail;
    for (size_t i = 0; i < iovcnt; i++)
        wr->bufs[i] =
            uv_buf_init(iov[i].iov_base, (unsigned int) iov[i].iov_len);
    free(iov);
    iov = NULL;
    wr->c = c;
    wr->payload = payload;
    wr->owned = owned;
    wr->bytes = total;
    wr->nbufs = (unsigned int) iovcnt;
    rc = uv_write(&wr->req, (uv_stream_t *) &c->tcp, wr->bufs, wr->nbufs,
                  on_write);
    if (rc != 0) {
        rc = SCIMQ_ECONNRESET;
        goto fail;
    }
    c->writes_pending++;
    return 0;
fail:
    if (payload != NULL)
        gw_broker_unpin(c->gw, payload);
    if (wr != NULL)
        free(wr->hdr);
    free(wr);
    free(iov);
    free(owned);
    SCIMQ_LOG_WARN(GATEWAY, "connection %" PRIu64 ": cannot send %s: %s", c->id,
                   scimq_proto_opcode_name(f->opcode), scimq_strerror(rc));
    return rc;
}

static int
conn_send(struct gw_conn *c, const scimq_proto_frame_t *f,
          struct gw_payload *payload)
{
    return conn_send_owned(c, f, payload, NULL);
}

static void
send_error(struct gw_conn *c, uint64_t request_id, int code, const char *text)
{
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_ERROR,
                             .request_id = request_id};

    f.args.error.code = code;
    f.args.error.text.ptr = text;
    f.args.error.text.len = (uint16_t) strnlen(text, 1024);
    (void) conn_send(c, &f, NULL);
}

/* Sends ERROR, then closes once it is written. */
static void
fail_conn(struct gw_conn *c, uint64_t request_id, int code, const char *text)
{
    if (c->closing || c->close_after_write)
        return;
    SCIMQ_LOG_INFO(GATEWAY, "connection %" PRIu64 " (%s): %s (%s); closing",
                   c->id, c->info.peer, text, scimq_err_name(code));
    send_error(c, request_id, code, text);
    c->close_after_write = true;
    if (c->reading) {
        uv_read_stop((uv_stream_t *) &c->tcp);
        c->reading = false;
    }
    conn_maybe_finish(c);
}

/* OK(value); with json, the text becomes its "json" block and is freed
 * once written. */
static void
send_ok(struct gw_conn *c, uint64_t request_id, uint64_t value, char *json)
{
    scimq_proto_block_t blk = {"json", 4, json, json ? strlen(json) : 0};
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_OK,
                             .request_id = request_id};

    f.args.ok.value = value;
    if (json != NULL) {
        f.block_count = 1;
        f.blocks = &blk;
    }
    (void) conn_send_owned(c, &f, NULL, json);
}

static void
send_json(struct gw_conn *c, uint64_t request_id, uint64_t value, json_t *doc)
{
    char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);

    json_decref(doc);
    if (text == NULL) {
        send_error(c, request_id, SCIMQ_ENOMEM, "out of memory");
        return;
    }
    send_ok(c, request_id, value, text);
}

/* ======================================================================== */
/* Requests                                                                  */
/* ======================================================================== */

static bool
admin_allowed(const struct gw_conn *c)
{
    return c->info.loopback || c->gw->opt.remote_admin;
}

static void
handle_hello(struct gw_conn *c, const scimq_proto_frame_t *f)
{
    struct gateway *gw = c->gw;
    scimq_proto_frame_t w = {.opcode = SCIMQ_PROTO_OP_WELCOME,
                             .request_id = f->request_id};
    int rc;

    if (f->args.hello.version_min > SCIMQ_PROTO_VERSION ||
        f->args.hello.version_max < SCIMQ_PROTO_VERSION) {
        fail_conn(c, f->request_id, SCIMQ_EPROTO_VERSION,
                  "no common session protocol version (gateway speaks 1)");
        return;
    }
    rc = gw_broker_hello(gw, &c->info, f, c->session_id);
    if (rc != 0) {
        fail_conn(c, f->request_id, rc,
                  rc == SCIMQ_ENOENT  ? "unknown session id"
                  : rc == SCIMQ_EBUSY ? "stream index already connected"
                                      : "bad stream index or count");
        return;
    }
    if (scimq__random_bytes(c->nonce, sizeof(c->nonce)) != 0) {
        fail_conn(c, f->request_id, SCIMQ_EIO, "no randomness");
        return;
    }
    w.args.welcome.version = SCIMQ_PROTO_VERSION;
    w.args.welcome.auth_required = gw->opt.token != NULL;
    w.args.welcome.stream_index = f->args.hello.stream_index;
    w.args.welcome.max_payload = gw->opt.limits.max_payload_len;
    memcpy(w.args.welcome.session_id, c->session_id, sizeof(c->session_id));
    memcpy(w.args.welcome.nonce, c->nonce, sizeof(c->nonce));
    w.args.welcome.server_name.ptr = "scimq-gateway " PACKAGE_VERSION;
    w.args.welcome.server_name.len =
        (uint16_t) strlen(w.args.welcome.server_name.ptr);
    c->phase = gw->opt.token != NULL ? GW_CONN_AUTH : GW_CONN_READY;
    (void) conn_send(c, &w, NULL);
}

static void
handle_auth(struct gw_conn *c, const scimq_proto_frame_t *f)
{
    struct gateway *gw = c->gw;

    if (!scimq__auth_check(gw->opt.token, gw->opt.token_len, c->nonce,
                           c->session_id, f->args.auth.mac)) {
        pthread_mutex_lock(&gw->lock);
        gw->st.auth_failures++;
        pthread_mutex_unlock(&gw->lock);
        fail_conn(c, f->request_id, SCIMQ_EAUTH, "authentication failed");
        return;
    }
    c->phase = GW_CONN_READY;
    send_ok(c, f->request_id, 0, NULL);
}

/* Replies OK(value) or ERROR(rc) to a management request. */
static void
reply(struct gw_conn *c, const scimq_proto_frame_t *f, int rc, uint64_t value)
{
    if (rc == 0)
        send_ok(c, f->request_id, value, NULL);
    else
        send_error(c, f->request_id, rc, scimq_strerror(rc));
}

static void
handle_put(struct gw_conn *c, const scimq_proto_frame_t *f)
{
    struct gw_payload *pl = c->pl;
    uint64_t msg_id = 0;
    int rc = c->put_err;

    c->pl = NULL;
    c->put_err = 0;
    if (rc == 0 && pl == NULL) {
        /* An empty message never went through HEADER_READY. */
        rc = gw_broker_put_begin(c->gw, &c->info, f, &pl);
        if (rc == SCIMQ_EAGAIN)
            rc = SCIMQ_ENOSPC; /* cannot happen for 0 bytes; be safe */
    }
    if (rc == 0)
        rc = gw_broker_put_commit(c->gw, f, pl, &msg_id);
    if (rc != 0) {
        send_error(c, f->request_id, rc, scimq_strerror(rc));
        return;
    }
    if (f->flags & SCIMQ_PROTO_F_CONFIRM) {
        scimq_proto_frame_t ok = {.opcode = SCIMQ_PROTO_OP_PUT_OK,
                                  .request_id = f->request_id};

        ok.args.put_ok.msg_id = msg_id;
        (void) conn_send(c, &ok, NULL);
    }
}

static void
handle_ready(struct gw_conn *c, const scimq_proto_frame_t *f)
{
    struct gateway *gw = c->gw;
    uint64_t value = 0;
    int rc;

    switch (f->opcode) {
    case SCIMQ_PROTO_OP_PUT:
        handle_put(c, f);
        return;
    case SCIMQ_PROTO_OP_GET:
        rc = gw_broker_get(gw, &c->info, f);
        if (rc != 0)
            send_error(c, f->request_id, rc, scimq_strerror(rc));
        return;
    case SCIMQ_PROTO_OP_ACK:
    case SCIMQ_PROTO_OP_NACK:
    case SCIMQ_PROTO_OP_EXTEND:
        gw_broker_settle(gw, &c->info, f);
        return;
    case SCIMQ_PROTO_OP_QUEUE_DECLARE:
        rc = gw_broker_declare(gw, f, &value);
        reply(c, f, rc, value);
        return;
    case SCIMQ_PROTO_OP_QUEUE_CLOSE:
        reply(c, f, gw_broker_close_queue(gw, &f->args.queue.queue), 0);
        return;
    case SCIMQ_PROTO_OP_QUEUE_LIST: {
        json_t *doc = gw_broker_list(gw, &f->args.queue.queue, &value);

        send_json(c, f->request_id, value, doc);
        return;
    }
    case SCIMQ_PROTO_OP_STATS:
        send_json(c, f->request_id, 0,
                  gw_broker_stats(gw, &f->args.queue.queue));
        return;
    case SCIMQ_PROTO_OP_PING: {
        scimq_proto_frame_t pong = {.opcode = SCIMQ_PROTO_OP_PONG,
                                    .request_id = f->request_id};

        pong.args.ping.timestamp_ns = f->args.ping.timestamp_ns;
        (void) conn_send(c, &pong, NULL);
        return;
    }
    case SCIMQ_PROTO_OP_BYE: {
        scimq_proto_frame_t bye = {.opcode = SCIMQ_PROTO_OP_BYE,
                                   .request_id = f->request_id};

        (void) conn_send(c, &bye, NULL);
        c->close_after_write = true;
        return;
    }
    default:
        break;
    }

    /* Administration: loopback peers only, unless allowed. */
    if (!admin_allowed(c)) {
        switch (f->opcode) {
        case SCIMQ_PROTO_OP_QUEUE_DELETE:
        case SCIMQ_PROTO_OP_QUEUE_BIND:
        case SCIMQ_PROTO_OP_QUEUE_UNBIND:
        case SCIMQ_PROTO_OP_QUEUE_MOVE:
            send_error(c, f->request_id, SCIMQ_EPERM,
                       "administration is allowed from loopback only");
            return;
        default:
            break;
        }
    }
    switch (f->opcode) {
    case SCIMQ_PROTO_OP_QUEUE_DELETE:
        rc = gw_broker_delete(gw, &f->args.queue.queue, &value);
        reply(c, f, rc, value);
        return;
    case SCIMQ_PROTO_OP_QUEUE_BIND:
    case SCIMQ_PROTO_OP_QUEUE_UNBIND:
        rc = gw_broker_bind(gw, &f->args.pair.queue, &f->args.pair.target,
                            f->opcode == SCIMQ_PROTO_OP_QUEUE_BIND);
        reply(c, f, rc, 0);
        return;
    case SCIMQ_PROTO_OP_QUEUE_MOVE:
        rc = gw_broker_move(gw, &f->args.move.queue, &f->args.move.target,
                            f->args.move.max_msgs, &value);
        reply(c, f, rc, value);
        return;
    default:
        /* Frames only the gateway sends (WELCOME, DELIVER, ...). */
        fail_conn(c, f->request_id, SCIMQ_ENOTSUP,
                  "opcode not accepted by the gateway");
        return;
    }
}

static void
handle_frame(struct gw_conn *c, const scimq_proto_frame_t *f)
{
    c->info.frames_in++;
    if (f->opcode == SCIMQ_PROTO_OP_PING && c->phase != GW_CONN_READY) {
        handle_ready(c, f); /* PING is answered in every phase */
        return;
    }
    switch (c->phase) {
    case GW_CONN_HELLO:
        if (f->opcode == SCIMQ_PROTO_OP_HELLO)
            handle_hello(c, f);
        else
            fail_conn(c, f->request_id, SCIMQ_ESTATE, "HELLO expected");
        return;
    case GW_CONN_AUTH:
        if (f->opcode == SCIMQ_PROTO_OP_AUTH)
            handle_auth(c, f);
        else
            fail_conn(c, f->request_id, SCIMQ_EAUTH, "authentication required");
        return;
    case GW_CONN_READY:
        if (f->opcode == SCIMQ_PROTO_OP_HELLO ||
            f->opcode == SCIMQ_PROTO_OP_AUTH)
            fail_conn(c, f->request_id, SCIMQ_ESTATE,
                      "session already established");
        else
            handle_ready(c, f);
        return;
    }
}

/* ======================================================================== */
/* Reading                                                                   */
/* ======================================================================== */

static void
read_stop(struct gw_conn *c)
{
    if (c->reading) {
        uv_read_stop((uv_stream_t *) &c->tcp);
        c->reading = false;
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void
read_start(struct gw_conn *c)
{
    if (!c->reading && !c->closing && !c->close_after_write && !c->parked) {
        if (uv_read_start((uv_stream_t *) &c->tcp, on_alloc, on_read) == 0)
            c->reading = true;
    }
}

/*
 * The header of a frame is in.  For a PUT, reserve the payload buffer so
 * the rest is read straight into it; when memory and disk are full the
 * connection is parked (stops reading: TCP back-pressure to the producer)
 * until the broker resumes it.  Returns false when parked.
 */
static bool
on_header(struct gw_conn *c)
{
    const scimq_proto_frame_t *f = scimq_proto_decoder_frame(c->dec);
    int rc = SCIMQ_ENOTSUP;

    if (f->opcode == SCIMQ_PROTO_OP_PUT && c->phase == GW_CONN_READY) {
        rc = gw_broker_put_begin(c->gw, &c->info, f, &c->pl);
        if (rc == SCIMQ_EAGAIN) {
            c->parked = true;
            read_stop(c);
            return false;
        }
        if (rc == 0) {
            (void) scimq_proto_decoder_set_payload(c->dec, c->pl->data,
                                                   c->pl->len);
            c->in_payload = true;
            return true;
        }
    }
    /* Refused or unexpected payload: read and discard it, answer at the
     * end of the frame (the connection stays usable). */
    c->put_err = rc;
    (void) scimq_proto_decoder_set_payload(c->dec, NULL, 0);
    c->in_payload = true;
    return true;
}

/* Acts on one decoder result; false when processing must stop. */
static bool
on_event(struct gw_conn *c, int ev)
{
    const scimq_proto_frame_t *f;
    uint64_t rid = 0;

    if (ev < 0) {
        (void) scimq_proto_decoder_request_id(c->dec, &rid);
        pthread_mutex_lock(&c->gw->lock);
        c->gw->st.protocol_errors++;
        pthread_mutex_unlock(&c->gw->lock);
        fail_conn(c, rid, ev, scimq_strerror(ev));
        return false;
    }
    if (ev == SCIMQ_PROTO_HEADER_READY)
        return on_header(c);
    if (ev == SCIMQ_PROTO_FRAME_DONE) {
        f = scimq_proto_decoder_frame(c->dec);
        c->in_payload = false;
        if (f->opcode != SCIMQ_PROTO_OP_PUT && c->put_err != 0) {
            c->put_err = 0;
            fail_conn(c, f->request_id, SCIMQ_ENOTSUP,
                      "this opcode may not carry blocks from a client");
            return false;
        }
        handle_frame(c, f);
        return !c->closing && !c->close_after_write;
    }
    return true;
}

/* Feeds staged bytes to the decoder until they run out or we must stop. */
static void
conn_process(struct gw_conn *c)
{
    while (c->stage_off < c->stage_len && !c->closing &&
           !c->close_after_write && !c->parked) {
        size_t used = 0;
        int ev = scimq_proto_decoder_feed(c->dec, c->stage + c->stage_off,
                                          c->stage_len - c->stage_off, &used);

        c->stage_off += used;
        if (!on_event(c, ev))
            return;
    }
}

static void
on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct gw_conn *c = h->data;
    struct iovec iov;

    (void) suggested;
    if (c->in_payload && scimq_proto_decoder_iov(c->dec, &iov, 1) == 1 &&
        iov.iov_base != NULL) {
        /* Zero-copy: the kernel writes into the message's own buffer. */
        size_t len = iov.iov_len > (1u << 30) ? (1u << 30) : iov.iov_len;

        *buf = uv_buf_init(iov.iov_base, (unsigned int) len);
        return;
    }
    *buf = uv_buf_init((char *) c->stage, CONN_STAGE_LEN);
}

static void
on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct gw_conn *c = s->data;
    uint64_t now = gw_now_ms();

    if (nread < 0) {
        if (!scimq_proto_decoder_idle(c->dec) && nread == UV_EOF)
            SCIMQ_LOG_INFO(GATEWAY,
                           "connection %" PRIu64 " (%s): closed inside a frame",
                           c->id, c->info.peer);
        gw_conn_close(c, nread == UV_EOF ? NULL : uv_strerror((int) nread));
        return;
    }
    if (nread == 0)
        return;
    if (scimq_proto_decoder_idle(c->dec))
        c->frame_start_ms = now;
    c->last_read_ms = now;
    c->info.bytes_in += (uint64_t) nread;
    if (buf->base == (char *) c->stage) {
        c->stage_len = (size_t) nread;
        c->stage_off = 0;
        conn_process(c);
        return;
    }
    if (on_event(c, scimq_proto_decoder_advance(c->dec, (size_t) nread)))
        conn_process(c);
}

/* ======================================================================== */
/* Life cycle                                                                */
/* ======================================================================== */

static void
on_close(uv_handle_t *h)
{
    struct gw_conn *c = h->data;

    atomic_fetch_sub(&c->gw->n_connections, 1);
    scimq_proto_decoder_destroy(c->dec);
    free(c->stage);
    free(c);
}

void
gw_conn_close(struct gw_conn *c, const char *why)
{
    if (c->closing)
        return;
    c->closing = true;
    if (why != NULL)
        SCIMQ_LOG_INFO(GATEWAY, "connection %" PRIu64 " (%s) closed: %s", c->id,
                       c->info.peer, why);
    read_stop(c);
    if (c->pl != NULL) {
        gw_broker_put_abort(c->gw, c->pl);
        c->pl = NULL;
    }
    if (c->parked)
        gw_broker_unpark(c->gw, c->id);
    gw_broker_stream_closed(c->gw, &c->info);
    gw_broker_conn_unregister(c->gw, &c->info);
    HASH_DEL(c->w->conns, c);
    /* Pending writes complete (cancelled) before on_close runs. */
    uv_close((uv_handle_t *) &c->tcp, on_close);
}

static void
peer_describe(struct gw_conn *c)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;

    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *) &ss, &len) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *) &ss;

        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
        c->info.loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;

        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
        c->info.loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
                           (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) &&
                            in6->sin6_addr.s6_addr[12] == 127);
    }
    snprintf(c->info.peer, sizeof(c->info.peer), "%s:%u", host, port);
}

void
gw_conn_accept(struct gw_worker *w)
{
    struct gateway *gw = w->gw;
    struct gw_conn *c = calloc(1, sizeof(*c));
    struct scimq_sock_info si;
    uv_os_fd_t fd;
    int rc;

    if (c == NULL || (c->stage = malloc(CONN_STAGE_LEN)) == NULL ||
        scimq_proto_decoder_create(&gw->opt.limits, &c->dec) != 0) {
        /* Accept and drop, or the listener keeps waking up for it. */
        uv_tcp_t *tmp = malloc(sizeof(*tmp));

        SCIMQ_LOG_SPARSE(SCIMQ_LOG_ERROR, GATEWAY, 5000,
                         "out of memory accepting a connection");
        if (c != NULL) {
            free(c->stage);
            free(c);
        }
        if (tmp != NULL && uv_tcp_init(&w->loop, tmp) == 0 &&
            uv_accept((uv_stream_t *) &w->listener, (uv_stream_t *) tmp) == 0)
            uv_close((uv_handle_t *) tmp, (uv_close_cb) free);
        else
            free(tmp);
        return;
    }
    uv_tcp_init(&w->loop, &c->tcp);
    c->tcp.data = c;
    c->w = w;
    c->gw = gw;
    c->id = atomic_fetch_add(&gw->next_conn_id, 1) + 1;
    atomic_fetch_add(&gw->n_connections, 1);
    rc = uv_accept((uv_stream_t *) &w->listener, (uv_stream_t *) &c->tcp);
    if (rc != 0) {
        c->closing = true;
        uv_close((uv_handle_t *) &c->tcp, on_close);
        return;
    }
    c->info.id = c->id;
    c->info.worker = w->index;
    c->info.stream = -1;
    peer_describe(c);
    if (uv_fileno((uv_handle_t *) &c->tcp, &fd) == 0) {
        scimq__sock_tune_default(fd);
        scimq__sock_info(fd, &si);
        c->info.fd = fd;
        c->info.sndbuf = si.sndbuf;
        c->info.rcvbuf = si.rcvbuf;
        memcpy(c->info.congestion, si.congestion, sizeof(si.congestion));
    }
    c->accepted_ms = c->last_read_ms = gw_now_ms();
    HASH_ADD(hh, w->conns, id, sizeof(c->id), c);
    gw_broker_conn_register(gw, &c->info);
    if (atomic_load(&gw->n_connections) > gw->opt.max_connections) {
        fail_conn(c, 0, SCIMQ_EBUSY, "too many connections");
        return;
    }
    read_start(c);
}

/* ======================================================================== */
/* Actions from the broker                                                   */
/* ======================================================================== */

static void
send_deliver(struct gw_conn *c, struct gw_action *a)
{
    struct gw_payload *pl = a->payload;
    scimq_proto_block_t blocks_small[8], *blocks = blocks_small;
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_DELIVER,
                             .request_id = a->request_id};
    uint64_t off = 0;

    if (pl->block_count > 8) {
        blocks = calloc(pl->block_count, sizeof(*blocks));
        if (blocks == NULL) {
            gw_broker_unpin(c->gw, pl);
            gw_conn_close(c, "out of memory");
            return;
        }
    }
    for (uint32_t i = 0; i < pl->block_count; i++) {
        blocks[i].name = pl->blocks[i].name;
        blocks[i].name_len = pl->blocks[i].name_len;
        blocks[i].data = pl->data + off;
        blocks[i].len = pl->blocks[i].len;
        off += pl->blocks[i].len;
    }
    if (scimq__param_bool(SCIMQ_PARAM_PROTO_DATASUM))
        f.flags |= SCIMQ_PROTO_F_DATASUM;
    f.args.deliver.delivery_id = a->delivery_id;
    f.args.deliver.msg_id = a->msg_id;
    f.args.deliver.attempt = a->attempt;
    f.args.deliver.queue.ptr = a->text;
    f.args.deliver.queue.len = (uint16_t) strlen(a->text);
    f.block_count = pl->block_count;
    f.blocks = blocks;
    /* The pin passes to the write, which releases it when done. */
    if (conn_send(c, &f, pl) != 0)
        gw_conn_close(c, "cannot send a delivery");
    if (blocks != blocks_small)
        free(blocks);
}

void
gw_conn_action(struct gw_worker *w, struct gw_action *a)
{
    struct gw_conn *c = NULL;

    HASH_FIND(hh, w->conns, &a->conn_id, sizeof(a->conn_id), c);
    if (c != NULL && (c->closing || c->close_after_write))
        c = NULL;
    switch (a->kind) {
    case GW_ACT_DELIVER:
        if (c == NULL) {
            /* Gone: the broker already requeued the delivery. */
            gw_broker_unpin(w->gw, a->payload);
            break;
        }
        send_deliver(c, a);
        break;
    case GW_ACT_EOS:
        if (c != NULL) {
            scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_EOS,
                                     .request_id = a->request_id};

            f.args.queue.queue.ptr = a->text;
            f.args.queue.queue.len = (uint16_t) strlen(a->text);
            (void) conn_send(c, &f, NULL);
        }
        break;
    case GW_ACT_ERROR:
        if (c != NULL)
            send_error(c, a->request_id, a->code, a->text);
        break;
    case GW_ACT_RESUME:
        if (c != NULL && c->parked) {
            c->parked = false;
            if (on_header(c)) {
                conn_process(c);
                read_start(c);
            }
        }
        break;
    default:
        break;
    }
    gw_action_free(a);
}

void
gw_conn_check_timeouts(struct gw_worker *w, uint64_t now)
{
    struct gateway *gw = w->gw;
    struct gw_conn *c, *tmp;

    HASH_ITER(hh, w->conns, c, tmp)
    {
        if (c->closing)
            continue;
        if (c->phase != GW_CONN_READY &&
            now - c->accepted_ms > gw->opt.hello_timeout_ms) {
            fail_conn(c, 0, SCIMQ_ETIMEDOUT,
                      c->phase == GW_CONN_HELLO ? "no HELLO in time"
                                                : "no AUTH in time");
        } else if (!c->parked && !scimq_proto_decoder_idle(c->dec) &&
                   now - c->last_read_ms > gw->opt.idle_timeout_ms) {
            fail_conn(c, 0, SCIMQ_ETIMEDOUT, "stalled inside a frame");
        } else if (!c->parked && !c->in_payload &&
                   !scimq_proto_decoder_idle(c->dec) &&
                   now - c->frame_start_ms > gw->opt.hello_timeout_ms) {
            /* Headers are small: dribbling one out is an attack. */
            fail_conn(c, 0, SCIMQ_ETIMEDOUT, "frame header too slow");
        }
    }
}
