/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connections: accept, read and decode, timeouts, and the broker's actions
 * for them.
 */
#include "config.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <scimq/error.h>

#include "common/log.h"
#include "common/net.h"
#include "conn.h"
#include "conn_out.h"
#include "request.h"
#include "records.h"

/* Staging buffer for frame headers (payloads bypass it). */
#define CONN_STAGE_LEN (64u << 10)
/* Most payload bytes one read() may take (libuv buffers are unsigned). */
#define CONN_READ_MAX (1u << 30)

static void conn_process(struct gw_conn *c);
static void tls_pump(struct gw_conn *c);

/* ======================================================================== */
/* Reading                                                                   */
/* ======================================================================== */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void
read_start(struct gw_conn *c)
{
    if (!c->reading && !c->closing && !c->close_after_write && !c->parked &&
        !c->out_blocked) {
        if (uv_read_start((uv_stream_t *) &c->tcp, on_alloc, on_read) == 0)
            c->reading = true;
    }
}

/* Reading resumes after the gateway held it up: the frame's clock
 * restarts, so that wait does not count against the peer's rate. */
static void
frame_clock_restart(struct gw_conn *c)
{
    c->frame_start_ms = c->last_read_ms = gw_now_ms();
    c->frame_bytes = 0;
}

/*
 * The header of a frame is in.  For a PUT, the payload is admitted and its
 * buffer reserved, so the rest is read straight into it; when it does not
 * fit the connection is parked (stops reading: TCP back-pressure to the
 * producer) until the broker resumes it.  Returns false when parked.
 */
static bool
on_header(struct gw_conn *c)
{
    const scimq_proto_frame_t *f = scimq_proto_decoder_frame(c->dec);
    int rc = SCIMQ_ENOTSUP;

    if (f->opcode == SCIMQ_PROTO_OP_PUT && c->phase == GW_CONN_READY &&
        (rc = gw_request_put_flags(c, f)) == 0) {
        rc = gw_hub_put_begin(&c->gw->hub, c->host->index, c->id, f, &c->pl);
        if (rc == SCIMQ_EAGAIN) {
            c->parked = true;
            gw_conn_read_stop(c);
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
        atomic_fetch_add(&c->gw->conns.protocol_errors, 1);
        gw_conn_fail(c, rid, ev, scimq_strerror(ev));
        return false;
    }
    if (ev == SCIMQ_PROTO_HEADER_READY)
        return on_header(c);
    if (ev == SCIMQ_PROTO_FRAME_DONE) {
        f = scimq_proto_decoder_frame(c->dec);
        c->in_payload = false;
        if (f->opcode != SCIMQ_PROTO_OP_PUT && c->put_err != 0) {
            c->put_err = 0;
            c->info.frames_in++;
            gw_conn_send_error(c, f->request_id, SCIMQ_ENOTSUP,
                               "this opcode may not carry blocks from a "
                               "client");
            return !c->closing && !c->close_after_write;
        }
        gw_request_handle(c, f);
        return !c->closing && !c->close_after_write;
    }
    return true;
}

/* Feeds staged bytes to the decoder until they run out or we must stop. */
static void
conn_process(struct gw_conn *c)
{
    while (c->stage_off < c->stage_len && !c->closing &&
           !c->close_after_write && !c->parked && !c->out_blocked) {
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
    if (c->tls != NULL) {
        /* Ciphertext: decrypted by tls_pump, into the payload buffer. */
        *buf = uv_buf_init((char *) c->cipher, CONN_STAGE_LEN);
        return;
    }
    if (c->in_payload && scimq_proto_decoder_iov(c->dec, &iov, 1) == 1 &&
        iov.iov_base != NULL) {
        /* Zero-copy: the kernel writes into the message's own buffer. */
        size_t len = iov.iov_len > CONN_READ_MAX ? CONN_READ_MAX : iov.iov_len;

        *buf = uv_buf_init(iov.iov_base, (unsigned int) len);
        return;
    }
    *buf = uv_buf_init(
        (char *) c->stage,
        (unsigned int) scimq_proto_decoder_stage_len(c->dec, CONN_STAGE_LEN));
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
    if (scimq_proto_decoder_idle(c->dec)) {
        c->frame_start_ms = now;
        c->frame_bytes = 0;
    }
    c->frame_bytes += (uint64_t) nread;
    c->last_read_ms = now;
    c->info.bytes_in += (uint64_t) nread;
    if (c->tls != NULL) {
        if (scimq__tls_feed(c->tls, buf->base, (size_t) nread) != 0) {
            gw_conn_close(c, "out of memory");
            return;
        }
        tls_pump(c);
        return;
    }
    if (buf->base == (char *) c->stage) {
        c->stage_len = (size_t) nread;
        c->stage_off = 0;
        conn_process(c);
        return;
    }
    if (on_event(c, scimq_proto_decoder_advance(c->dec, (size_t) nread)))
        conn_process(c);
}

/*
 * TLS: plaintext out of the connection's TLS, into the payload buffer
 * when a payload is being read (decrypted in place: one copy fewer than
 * staging it) or into the stage, and processed as read bytes would be.
 * Runs after each read and whenever reading resumes (what TLS buffered is
 * not announced by the socket again).  Bounded by what was fed.
 */
static void
tls_pump(struct gw_conn *c)
{
    while (!c->closing && !c->close_after_write && !c->parked &&
           !c->out_blocked) {
        struct iovec iov;
        void *dst = c->stage;
        size_t cap = CONN_STAGE_LEN;
        bool direct = false;
        ssize_t n;

        if (c->stage_off < c->stage_len) {
            conn_process(c);
            if (c->stage_off < c->stage_len)
                break; /* held up: resumes later */
            continue;
        }
        if (c->in_payload && scimq_proto_decoder_iov(c->dec, &iov, 1) == 1 &&
            iov.iov_base != NULL) {
            dst = iov.iov_base;
            cap = iov.iov_len > CONN_READ_MAX ? CONN_READ_MAX : iov.iov_len;
            direct = true;
        }
        n = scimq__tls_read(c->tls, dst, cap);
        if (n < 0) {
            gw_conn_tls_flush(c); /* the alert, if any */
            atomic_fetch_add(&c->gw->conns.protocol_errors, 1);
            gw_conn_close(c, scimq__tls_error(c->tls));
            return;
        }
        if (n == 0)
            break;
        if (direct) {
            if (!on_event(c, scimq_proto_decoder_advance(c->dec, (size_t) n)))
                break;
            continue;
        }
        c->stage_len = (size_t) n;
        c->stage_off = 0;
        conn_process(c);
    }
    gw_conn_tls_flush(c);
}

/* ======================================================================== */
/* Accepting                                                                 */
/* ======================================================================== */

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
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;

        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
    }
    snprintf(c->info.peer, sizeof(c->info.peer), "%s:%u", host, port);
    memcpy(c->info.addr, host, sizeof(c->info.addr));
}

/* An admin socket peer: who it is, as the kernel says (for logs, STATS). */
static void
peer_describe_unix(struct gw_conn *c)
{
    struct ucred cred = {0, 0, 0};
    socklen_t len = sizeof(cred);
    uv_os_fd_t fd;

    c->info.admin = true;
    snprintf(c->info.addr, sizeof(c->info.addr), "unix");
    if (uv_fileno((uv_handle_t *) &c->pipe, &fd) == 0 &&
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
        snprintf(c->info.peer, sizeof(c->info.peer), "unix:uid=%u,pid=%d",
                 (unsigned int) cred.uid, (int) cred.pid);
    else
        snprintf(c->info.peer, sizeof(c->info.peer), "unix");
}

static void
on_refused_close(uv_handle_t *h)
{
    free(h);
}

/* Accepts and drops, or the listener keeps waking up for the peer. */
static void
accept_and_drop(struct gw_conn_host *host, uv_stream_t *server, bool admin)
{
    union {
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } *tmp = malloc(sizeof(*tmp));

    if (tmp != NULL &&
        (admin ? uv_pipe_init(host->loop, &tmp->pipe, 0)
               : uv_tcp_init(host->loop, &tmp->tcp)) == 0 &&
        uv_accept(server, (uv_stream_t *) tmp) == 0)
        uv_close((uv_handle_t *) tmp, on_refused_close);
    else
        free(tmp);
}

static void
on_accept_failed(uv_handle_t *h)
{
    struct gw_conn *c = h->data;

    atomic_fetch_sub(&c->gw->n_connections, 1);
    scimq_proto_decoder_destroy(c->dec);
    scimq__tls_free(c->tls);
    free(c->cipher);
    free(c->stage);
    free(c);
}

/*
 * Refuses a connection just accepted: its ERROR is written only if the
 * socket takes it at once (it does, on a new connection), and it is closed
 * now, so a flood of refusals holds no descriptors (a refusal waiting for
 * its write would, and libuv accepts a whole backlog in one go).
 */
static void
conn_refuse(struct gw_conn *c, int code, const char *text)
{
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_ERROR};
    uint8_t hdr[256];
    struct iovec iov[2];
    uv_buf_t bufs[2];
    size_t n = 0;
    uint64_t total = 0;

    f.args.error.code = code;
    f.args.error.text.ptr = text;
    f.args.error.text.len = (uint16_t) strlen(text);
    if (scimq_proto_encode(&f, hdr, sizeof(hdr), iov, 2, &n, &total) == 0) {
        for (size_t i = 0; i < n; i++)
            bufs[i] =
                uv_buf_init(iov[i].iov_base, (unsigned int) iov[i].iov_len);
        /* Plain text only: a TLS peer gets no readable ERROR. */
        if (c->tls == NULL)
            (void) uv_try_write((uv_stream_t *) &c->tcp, bufs,
                                (unsigned int) n);
    }
    gw_conn_close(c, NULL);
}

void
gw_conn_accept(struct gw_conn_host *host, uv_stream_t *server, bool admin)
{
    struct gateway *gw = host->gw;
    struct gw_conn *c = calloc(1, sizeof(*c));
    struct scimq_sock_info si;
    enum gw_reject why;
    uv_os_fd_t fd;

    if (c == NULL || (c->stage = malloc(CONN_STAGE_LEN)) == NULL ||
        scimq_proto_decoder_create(&gw->opt.limits, &c->dec) != 0) {
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_ERROR, GATEWAY, 5000,
                         "out of memory accepting a connection");
        if (c != NULL) {
            free(c->stage);
            free(c);
        }
        accept_and_drop(host, server, admin);
        return;
    }
    /* The journal's records carry the payload's CRC: it is taken while
     * the bytes come in, still in the cache. */
    if (gw->hub.journal != NULL)
        scimq_proto_decoder_set_payload_crc(c->dec, 1);
    if (admin)
        uv_pipe_init(host->loop, &c->pipe, 0);
    else
        uv_tcp_init(host->loop, &c->tcp);
    c->tcp.data = c;
    c->host = host;
    c->gw = gw;
    c->id = atomic_fetch_add(&gw->next_conn_id, 1) + 1;
    atomic_fetch_add(&gw->n_connections, 1);
    if (uv_accept(server, (uv_stream_t *) &c->tcp) != 0) {
        c->closing = true;
        uv_close((uv_handle_t *) &c->tcp, on_accept_failed);
        return;
    }
    c->info.id = c->id;
    c->info.worker = host->index;
    c->info.stream = -1;
    if (admin)
        peer_describe_unix(c);
    else
        peer_describe(c);
    if (!admin && uv_fileno((uv_handle_t *) &c->tcp, &fd) == 0) {
        scimq__sock_tune_default(fd);
        scimq__sock_info(fd, &si);
        c->info.sndbuf = si.sndbuf;
        c->info.rcvbuf = si.rcvbuf;
        memcpy(c->info.congestion, si.congestion, sizeof(si.congestion));
    }
    c->accepted_ms = c->last_read_ms = gw_now_ms();
    if (!admin && gw->opt.tls != NULL &&
        ((c->cipher = malloc(CONN_STAGE_LEN)) == NULL ||
         scimq__tls_new(gw->opt.tls, true, NULL, &c->tls) != 0)) {
        /* Not registered yet: closed as a failed accept. */
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_ERROR, GATEWAY, 5000,
                         "out of memory for a TLS connection");
        c->closing = true;
        uv_close((uv_handle_t *) &c->tcp, on_accept_failed);
        return;
    }
    HASH_ADD(hh, host->conns, id, sizeof(c->id), c);
    why = gw_connreg_add(&gw->conns, &c->info, &gw->opt.peer_limits);
    if (atomic_load(&gw->n_connections) > gw->opt.max_connections) {
        atomic_fetch_add(&gw->conns.refused, 1);
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 5000,
                         "refusing connections: %d at once "
                         "(gateway_max_connections, within the descriptor "
                         "limit)",
                         gw->opt.max_connections);
        conn_refuse(c, SCIMQ_EBUSY, "too many connections");
        return;
    }
    if (why != GW_REJECT_COUNT) {
        /* One address may not take the gateway from the others. */
        const char *text = why == GW_REJECT_PER_PEER
                               ? "too many connections from this address"
                               : "too many unauthenticated connections";

        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 5000,
                         "refusing connections from %s: %s (limits: "
                         "gateway_max_conn_per_peer %d, gateway_max_unauth "
                         "%d, gateway_max_unauth_per_peer %d)",
                         c->info.addr, text, gw->opt.peer_limits.per_peer,
                         gw->opt.peer_limits.unauth,
                         gw->opt.peer_limits.unauth_per_peer);
        conn_refuse(c, SCIMQ_EBUSY, text);
        return;
    }
    read_start(c);
}

/* ======================================================================== */
/* Actions from the broker                                                   */
/* ======================================================================== */

void
gw_conn_action(struct gw_conn_host *host, struct gw_action *a)
{
    struct gw_conn *c = NULL;

    HASH_FIND(hh, host->conns, &a->conn_id, sizeof(a->conn_id), c);
    if (c != NULL && (c->closing || c->close_after_write))
        c = NULL;
    switch (a->kind) {
    case GW_ACT_DELIVER:
        if (c == NULL) {
            /* Gone: its stream's close already gave the message back. */
            gw_hub_written(&host->gw->hub, host->index, a->conn_id, a->payload,
                           a->len);
            break;
        }
        gw_conn_send_deliver(c, a);
        break;
    case GW_ACT_EOS:
        if (c != NULL) {
            scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_EOS,
                                     .request_id = a->request_id};

            f.args.queue.queue.ptr = a->text;
            f.args.queue.queue.len = (uint16_t) strlen(a->text);
            (void) gw_conn_send(c, &f, NULL, 0, NULL);
        }
        break;
    case GW_ACT_ERROR:
        if (c != NULL)
            gw_conn_send_error(c, a->request_id, a->code,
                               a->text != NULL ? a->text
                                               : scimq_strerror(a->code));
        break;
    case GW_ACT_PUT_OK:
        if (c != NULL) {
            scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_PUT_OK,
                                     .request_id = a->request_id};

            f.args.put_ok.msg_id = a->msg_id;
            (void) gw_conn_send(c, &f, NULL, 0, NULL);
        }
        break;
    case GW_ACT_RESUME:
        if (c != NULL && c->parked) {
            c->parked = false;
            frame_clock_restart(c);
            if (on_header(c)) {
                conn_process(c);
                if (c->tls != NULL)
                    tls_pump(c);
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
gw_conn_output_drained(struct gw_conn *c)
{
    if (!c->out_blocked || c->closing || c->close_after_write)
        return;
    c->out_blocked = false;
    frame_clock_restart(c);
    /* Frames already staged first, then the socket again. */
    conn_process(c);
    if (c->tls != NULL)
        tls_pump(c);
    read_start(c);
}

/* The kernel's TCP_INFO of c's socket into c->info (STATS "tcp"). */
static void
sample_tcp(struct gw_conn *c)
{
    struct scimq_sock_info si;
    uv_os_fd_t fd;

    if (c->info.admin || uv_fileno((uv_handle_t *) &c->tcp, &fd) != 0 ||
        scimq__sock_info(fd, &si) != 0)
        return;
    c->info.rtt_us = si.rtt_us;
    c->info.retransmits = si.retransmits;
    c->info.cwnd = si.cwnd;
    c->info.delivery_rate = si.delivery_rate;
    c->info.busy_us = si.busy_us;
    c->info.rwnd_limited_us = si.rwnd_limited_us;
    c->info.sndbuf_limited_us = si.sndbuf_limited_us;
}

void
gw_conn_check_timeouts(struct gw_conn_host *host, uint64_t now)
{
    struct gateway *gw = host->gw;
    struct gw_conn *c, *tmp;

    HASH_ITER(hh, host->conns, c, tmp)
    {
        if (c->closing)
            continue;
        sample_tcp(c);
        if (c->out_blocked) {
            /* Not read while blocked: only the output deadline (and the
             * HELLO one) apply. */
            if (now - c->out_blocked_ms > gw->opt.output_timeout_ms) {
                gw_connreg_reject(&gw->conns, GW_REJECT_OUTPUT);
                SCIMQ_LOG_WARN(GATEWAY,
                               "connection %" PRIu64 " (%s): does not read "
                               "its replies (%" PRIu64 " B queued, over "
                               "gateway_max_output for %u ms); closing",
                               c->id, c->info.peer, c->out_queued,
                               gw->opt.output_timeout_ms);
                gw_conn_close(c, NULL);
                continue;
            }
        }
        if (c->phase != GW_CONN_READY &&
            now - c->accepted_ms > gw->opt.hello_timeout_ms) {
            gw_conn_fail(c, 0, SCIMQ_ETIMEDOUT,
                         c->phase == GW_CONN_HELLO ? "no HELLO in time"
                                                   : "no AUTH in time");
        } else if (c->out_blocked) {
            continue;
        } else if (!c->parked && !scimq_proto_decoder_idle(c->dec) &&
                   now - c->last_read_ms > gw->opt.idle_timeout_ms) {
            gw_conn_fail(c, 0, SCIMQ_ETIMEDOUT, "stalled inside a frame");
        } else if (!c->parked && !c->in_payload &&
                   !scimq_proto_decoder_idle(c->dec) &&
                   now - c->frame_start_ms > gw->opt.hello_timeout_ms) {
            /* Headers are small: dribbling one out is an attack. */
            gw_conn_fail(c, 0, SCIMQ_ETIMEDOUT, "frame header too slow");
        } else if (!c->parked && gw->opt.min_rate > 0 &&
                   !scimq_proto_decoder_idle(c->dec) &&
                   now - c->frame_start_ms > gw->opt.min_rate_grace_ms &&
                   c->frame_bytes * 1000u <
                       gw->opt.min_rate * (now - c->frame_start_ms)) {
            /* Any byte resets the idle timeout: one a second would hold
             * the connection, and its PUT's reservation, for ever. */
            gw_connreg_reject(&gw->conns, GW_REJECT_SLOW);
            SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 5000,
                             "connection %" PRIu64 " (%s): %" PRIu64
                             " B in %" PRIu64 " ms inside a frame, under "
                             "gateway_min_rate; closing",
                             c->id, c->info.peer, c->frame_bytes,
                             now - c->frame_start_ms);
            gw_conn_fail(c, 0, SCIMQ_ETIMEDOUT,
                         "too slow: under the minimum data rate inside a "
                         "frame");
        }
    }
}

void
gw_conn_close_all(struct gw_conn_host *host)
{
    struct gw_conn *c, *tmp;

    HASH_ITER(hh, host->conns, c, tmp)
    {
        /* BYE tells the client the gateway goes away (spec §6.2); it is
         * written only if it fits in the socket now and no frame is half
         * written, since nothing waits for slow peers at shutdown. */
        scimq_proto_frame_t bye = {.opcode = SCIMQ_PROTO_OP_BYE};
        uint8_t hdr[SCIMQ_PROTO_FIXED_LEN];
        struct iovec iov[1];
        size_t n = 0;
        uint64_t total = 0;

        if (!c->closing && c->writes_pending == 0 && c->tls == NULL &&
            scimq_proto_encode(&bye, hdr, sizeof(hdr), iov, 1, &n, &total) ==
                0 &&
            n == 1) {
            uv_buf_t buf = uv_buf_init((char *) hdr, (unsigned int) total);

            (void) uv_try_write((uv_stream_t *) &c->tcp, &buf, 1);
        }
        gw_conn_close(c, NULL);
    }
    gw_conn_host_out_fini(host);
}
