/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What each frame asks for.  A malformed frame or a protocol violation that
 * leaves the stream unusable gets an ERROR naming the problem, then the
 * connection is closed; a request that is well-formed but cannot be served
 * (no such queue, an opcode only the gateway sends, ...) gets an ERROR and
 * the connection stays.
 *
 * Nothing reaches the broker before the peer has authenticated: with a
 * token, HELLO only draws the nonce (and the id of a new session) and the
 * session is created or joined once AUTH proves the token.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <scimq/error.h>
#include <scimq/report.h>

#include "clock.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/param.h"
#include "conn_out.h"
#include "jobs.h" /* REPORT */
#include "report.h"
#include "request.h"

/* The HELLO of a connection, kept until it joins its session (AUTH). */
struct pending_hello {
    scimq_proto_frame_t f;
    char client_name[64];
};

/* The session version both sides speak, or 0. */
static uint8_t
version_pick(const scimq_proto_frame_t *f)
{
    uint8_t v = f->args.hello.version_max < scimq__param_proto_version_max()
                    ? f->args.hello.version_max
                    : scimq__param_proto_version_max();

    if (v < f->args.hello.version_min || v < SCIMQ_PROTO_SESSION_VERSION_MIN)
        return 0;
    return v;
}

static const char *
join_error(int rc)
{
    switch (rc) {
    case SCIMQ_ENOENT:
        return "unknown session id";
    case SCIMQ_EBUSY:
        return "stream index already connected";
    case SCIMQ_EPROTO_VERSION:
        return "the session speaks another protocol version";
    default:
        return "bad stream index or count";
    }
}

/*
 * Joins (or creates, with new_id when not NULL) the session of the HELLO;
 * false when refused.
 */
static bool
join(struct gw_conn *c, const scimq_proto_frame_t *hello, const uint8_t *new_id,
     uint64_t rid)
{
    struct gateway *gw = c->gw;
    uint8_t version = c->version;
    int rc;

    rc = gw_hub_hello(&gw->hub, c->host->index, c->id, hello, new_id,
                      c->version, &version, c->session_id);
    if (rc != 0) {
        gw_conn_fail(c, rid, rc, join_error(rc));
        return false;
    }
    if (version != c->version) {
        /* A stream may not speak another version than its session. */
        gw_hub_stream_down(&gw->hub, c->host->index, c->id, false);
        gw_conn_fail(c, rid, SCIMQ_EPROTO_VERSION,
                     join_error(SCIMQ_EPROTO_VERSION));
        return false;
    }
    c->in_session = true;
    gw_connreg_joined(&gw->conns, &c->info, c->session_id,
                      hello->args.hello.stream_index);
    return true;
}

static void
handle_hello(struct gw_conn *c, const scimq_proto_frame_t *f)
{
    static const uint8_t zero[SCIMQ_PROTO_SESSION_ID_LEN];
    struct gateway *gw = c->gw;
    /* On the admin socket the kernel has checked who connects (its file
     * permissions): that is the proof, and the data token is not asked. */
    bool auth = gw->opt.token != NULL && !c->info.admin;
    scimq_proto_frame_t w = {.opcode = SCIMQ_PROTO_OP_WELCOME,
                             .request_id = f->request_id};

    c->version = version_pick(f);
    if (c->version == 0) {
        char text[96];

        snprintf(text, sizeof(text),
                 "no common session protocol version (gateway speaks %d..%d)",
                 SCIMQ_PROTO_SESSION_VERSION_MIN,
                 scimq__param_proto_version_max());
        gw_conn_fail(c, f->request_id, SCIMQ_EPROTO_VERSION, text);
        return;
    }
    if (auth) {
        struct pending_hello *ph = calloc(1, sizeof(*ph));

        if (ph == NULL ||
            scimq__random_bytes(c->nonce, sizeof(c->nonce)) != 0) {
            free(ph);
            gw_conn_fail(c, f->request_id, SCIMQ_EIO, "no randomness");
            return;
        }
        /* The session id the MAC covers: the one named, or a new one. */
        memcpy(c->session_id, f->args.hello.session_id, sizeof(c->session_id));
        if (memcmp(c->session_id, zero, sizeof(zero)) == 0 &&
            scimq__random_bytes(c->session_id, sizeof(c->session_id)) != 0) {
            free(ph);
            gw_conn_fail(c, f->request_id, SCIMQ_EIO, "no randomness");
            return;
        }
        ph->f = *f;
        snprintf(ph->client_name, sizeof(ph->client_name), "%.*s",
                 f->args.hello.client_name.len, f->args.hello.client_name.ptr);
        ph->f.args.hello.client_name.ptr = ph->client_name;
        ph->f.args.hello.client_name.len = (uint16_t) strlen(ph->client_name);
        ph->f.block_count = 0;
        ph->f.blocks = NULL;
        c->pending_hello = ph;
        c->phase = GW_CONN_AUTH;
    } else {
        /* No secret to prove: the nonce stays all zero (spec §6.2). */
        memset(c->nonce, 0, sizeof(c->nonce));
        if (!join(c, f, NULL, f->request_id))
            return;
        c->phase = GW_CONN_READY;
        gw_connreg_authed(&gw->conns, &c->info);
    }
    w.args.welcome.version = c->version;
    w.args.welcome.auth_required = auth;
    w.args.welcome.stream_index = f->args.hello.stream_index;
    w.args.welcome.max_payload = gw->opt.limits.max_payload_len;
    memcpy(w.args.welcome.session_id, c->session_id, sizeof(c->session_id));
    memcpy(w.args.welcome.nonce, c->nonce, sizeof(c->nonce));
    w.args.welcome.server_name.ptr = "scimq-gateway " PACKAGE_VERSION;
    w.args.welcome.server_name.len =
        (uint16_t) strlen(w.args.welcome.server_name.ptr);
    (void) gw_conn_send(c, &w, NULL, 0, NULL);
}

static void
handle_auth(struct gw_conn *c, const scimq_proto_frame_t *f)
{
    struct gateway *gw = c->gw;
    struct pending_hello *ph = c->pending_hello;
    scimq_proto_frame_t hello;
    bool ok;

    if (!scimq__auth_check(gw->opt.token, gw->opt.token_len, c->nonce,
                           c->session_id, f->args.auth.mac)) {
        atomic_fetch_add(&gw->conns.auth_failures, 1);
        gw_conn_fail(c, f->request_id, SCIMQ_EAUTH, "authentication failed");
        return;
    }
    c->pending_hello = NULL;
    hello = ph->f;
    ok = join(c, &hello, c->session_id, f->request_id);
    free(ph);
    if (!ok)
        return;
    c->phase = GW_CONN_READY;
    gw_connreg_authed(&gw->conns, &c->info);
    gw_conn_send_ok(c, f->request_id, 0, NULL);
}

/* Replies OK(value) or ERROR(rc) to a management request. */
static void
reply(struct gw_conn *c, const scimq_proto_frame_t *f, int rc, uint64_t value)
{
    if (rc == 0)
        gw_conn_send_ok(c, f->request_id, value, NULL);
    else
        gw_conn_send_error(c, f->request_id, rc, scimq_strerror(rc));
}

int
gw_request_put_flags(const struct gw_conn *c, const scimq_proto_frame_t *f)
{
    if ((f->flags & SCIMQ_PROTO_F_BROADCAST) &&
        c->version < SCIMQ_PROTO_SESSION_VERSION_CONTROL)
        return SCIMQ_EPROTO_FLAGS;
    return 0;
}

static void
handle_put(struct gw_conn *c, const scimq_proto_frame_t *f)
{
    struct gw_hub *hub = &c->gw->hub;
    struct gw_payload *pl = c->pl;
    uint64_t msg_id = 0;
    uint32_t data_crc;
    bool deferred = false;
    int rc = c->put_err;

    c->pl = NULL;
    c->put_err = 0;
    if (rc == 0 && pl == NULL)
        rc = gw_request_put_flags(c, f);
    if (rc == 0 && pl == NULL) {
        /* An empty message has no payload to read, so it skipped the
         * header-time admission: admit it now.  It cannot wait for
         * memory (the frame is over), so a full gateway refuses it. */
        rc = gw_hub_put_begin(hub, c->host->index, c->id, f, &pl);
        if (rc == SCIMQ_EAGAIN) {
            gw_hub_unpark(hub, c->id);
            rc = SCIMQ_ENOSPC;
        }
    }
    /* The decoder took the payload's CRC for the journal (conn.c). */
    data_crc = scimq_proto_decoder_payload_crc(c->dec);
    if (rc == 0)
        rc = gw_hub_put_commit(hub, c->host->index, c->id, f, pl,
                               hub->journal != NULL ? &data_crc : NULL, &msg_id,
                               &deferred);
    if (rc != 0) {
        gw_conn_send_error(c, f->request_id, rc,
                           rc == SCIMQ_EPROTO_FLAGS
                               ? "BROADCAST (a control message) needs "
                                 "session version 4"
                               : scimq_strerror(rc));
        return;
    }
    /* Durable queues: the PUT_OK comes with the journal (GW_ACT_PUT_OK). */
    if ((f->flags & SCIMQ_PROTO_F_CONFIRM) && !deferred) {
        scimq_proto_frame_t ok = {.opcode = SCIMQ_PROTO_OP_PUT_OK,
                                  .request_id = f->request_id};

        ok.args.put_ok.msg_id = msg_id;
        (void) gw_conn_send(c, &ok, NULL, 0, NULL);
    }
}

/* REPORT: an MPI agent's figures, kept by jobs.c; nothing answers a good
 * one (like ACK), a bad one gets an ERROR naming the rule it broke. */
static void
handle_report(struct gw_conn *c, const scimq_proto_frame_t *f)
{
    const char *why = NULL;
    int rc;

    if (c->version < SCIMQ_PROTO_SESSION_VERSION_REPORT) {
        gw_conn_send_error(c, f->request_id, SCIMQ_ESTATE,
                           "REPORT needs session version 3");
        return;
    }
    rc = gw_jobs_put(&c->gw->jobs, c->session_id, c->info.peer,
                     &f->args.report.body, gw_now_ms(), &why);
    if (rc == 0)
        return;
    SCIMQ_LOG_INFO(GATEWAY, "connection %" PRIu64 " (%s): REPORT refused: %s",
                   c->id, c->info.peer, why ? why : scimq_strerror(rc));
    gw_conn_send_error(c, f->request_id, rc,
                       why != NULL ? why : scimq_strerror(rc));
}

static void
handle_stats(struct gw_conn *c, const scimq_proto_frame_t *f)
{
    gw_conn_send_json(c, f->request_id, 0,
                      gw_report_stats(c->gw, &f->args.queue.queue));
}

/*
 * Administration (it destroys or redirects other people's data): only on
 * the admin socket, whose file permissions say who may connect.  The data
 * port's peers, token or not, are refused; their address proves nothing
 * (every user of a login node is a loopback peer).
 */
static void
handle_admin(struct gw_conn *c, const scimq_proto_frame_t *f)
{
    struct gw_hub *hub = &c->gw->hub;
    int self = c->host->index;
    uint64_t value = 0;
    int rc;

    if (!c->info.admin) {
        gw_conn_send_error(c, f->request_id, SCIMQ_EPERM,
                           "administration only through the admin socket "
                           "(scimqctl as the gateway's user, on its host)");
        return;
    }
    switch (f->opcode) {
    case SCIMQ_PROTO_OP_QUEUE_DELETE:
        rc = gw_hub_delete(hub, self, &f->args.queue.queue, &value);
        break;
    case SCIMQ_PROTO_OP_QUEUE_BIND:
    case SCIMQ_PROTO_OP_QUEUE_UNBIND:
        rc = gw_hub_bind(hub, self, &f->args.pair.queue, &f->args.pair.target,
                         f->opcode == SCIMQ_PROTO_OP_QUEUE_BIND);
        break;
    default: /* QUEUE_MOVE */
        rc = gw_hub_move(hub, self, &f->args.move.queue, &f->args.move.target,
                         f->args.move.max_msgs, &value);
        break;
    }
    reply(c, f, rc, value);
}

/*
 * ACK_RANGE / NACK_RANGE: each id settled as its own ACK or NACK would be
 * (unknown ones ignored and counted).  The framing bounds the work: at
 * most SCIMQ_PROTO_MAX_RANGE_IDS ids in a frame.
 */
static void
handle_settle_ranges(struct gw_conn *c, const scimq_proto_frame_t *f)
{
    struct gw_hub *hub = &c->gw->hub;
    const scimq_proto_ranges_t *r;
    scimq_proto_frame_t one = {.request_id = f->request_id};

    if (c->version < SCIMQ_PROTO_SESSION_VERSION_RANGES) {
        gw_conn_send_error(c, f->request_id, SCIMQ_ESTATE,
                           "range frames need session version 3");
        return;
    }
    if (f->opcode == SCIMQ_PROTO_OP_ACK_RANGE) {
        one.opcode = SCIMQ_PROTO_OP_ACK;
        r = &f->args.ack_range.ranges;
    } else {
        one.opcode = SCIMQ_PROTO_OP_NACK;
        one.args.nack.delay_ms = f->args.nack_range.delay_ms;
        one.args.nack.requeue = f->args.nack_range.requeue;
        r = &f->args.nack_range.ranges;
    }
    for (unsigned int i = 0; i < r->n; i++) {
        scimq_proto_range_t g = scimq_proto_range_at(r, i);

        for (uint32_t k = 0; k < g.count; k++) {
            /* delivery_id is the first field of ACK and NACK alike */
            one.args.ack.delivery_id = g.first + k;
            if (one.opcode == SCIMQ_PROTO_OP_NACK)
                one.args.nack.delivery_id = g.first + k;
            (void) gw_hub_settle(hub, c->host->index, c->id, &one);
        }
    }
}

static void
handle_ready(struct gw_conn *c, const scimq_proto_frame_t *f)
{
    struct gw_hub *hub = &c->gw->hub;
    int self = c->host->index;
    uint64_t value = 0;
    int rc;

    switch (f->opcode) {
    case SCIMQ_PROTO_OP_PUT:
        handle_put(c, f);
        return;
    case SCIMQ_PROTO_OP_GET:
        rc = gw_hub_get(hub, self, c->id, f);
        if (rc != 0)
            gw_conn_send_error(c, f->request_id, rc, scimq_strerror(rc));
        return;
    case SCIMQ_PROTO_OP_LIMIT:
        rc = gw_hub_limit(hub, self, c->id, f);
        if (rc != 0)
            gw_conn_send_error(c, f->request_id, rc,
                               rc == SCIMQ_ESTATE
                                   ? "LIMIT needs session version 2"
                                   : scimq_strerror(rc));
        return;
    case SCIMQ_PROTO_OP_ACK:
    case SCIMQ_PROTO_OP_NACK:
    case SCIMQ_PROTO_OP_EXTEND:
        (void) gw_hub_settle(hub, self, c->id, f);
        return;
    case SCIMQ_PROTO_OP_ACK_RANGE:
    case SCIMQ_PROTO_OP_NACK_RANGE:
        handle_settle_ranges(c, f);
        return;
    case SCIMQ_PROTO_OP_QUEUE_DECLARE:
        rc = gw_hub_declare(hub, self, f, &value);
        reply(c, f, rc, value);
        return;
    case SCIMQ_PROTO_OP_QUEUE_CLOSE:
        reply(c, f, gw_hub_close_queue(hub, self, &f->args.queue.queue), 0);
        return;
    case SCIMQ_PROTO_OP_QUEUE_LIST: {
        json_t *doc = gw_hub_queue_list(hub, &f->args.queue.queue, &value);

        gw_conn_send_json(c, f->request_id, value, doc);
        return;
    }
    case SCIMQ_PROTO_OP_STATS:
        handle_stats(c, f);
        return;
    case SCIMQ_PROTO_OP_REPORT: /* an MPI agent's figures (jobs.c) */
        handle_report(c, f);
        return;
    case SCIMQ_PROTO_OP_QUEUE_DELETE:
    case SCIMQ_PROTO_OP_QUEUE_BIND:
    case SCIMQ_PROTO_OP_QUEUE_UNBIND:
    case SCIMQ_PROTO_OP_QUEUE_MOVE:
        handle_admin(c, f);
        return;
    case SCIMQ_PROTO_OP_BYE: {
        scimq_proto_frame_t bye = {.opcode = SCIMQ_PROTO_OP_BYE,
                                   .request_id = f->request_id};

        (void) gw_conn_send(c, &bye, NULL, 0, NULL);
        c->said_bye = true;
        c->close_after_write = true;
        gw_conn_read_stop(c);
        return;
    }
    default:
        break;
    }
    gw_conn_send_error(c, f->request_id, SCIMQ_ENOTSUP,
                       "opcode not accepted by the gateway");
}

void
gw_request_handle(struct gw_conn *c, const scimq_proto_frame_t *f)
{
    c->info.frames_in++;
    switch (f->opcode) {
    case SCIMQ_PROTO_OP_PING: { /* answered in every phase */
        scimq_proto_frame_t pong = {.opcode = SCIMQ_PROTO_OP_PONG,
                                    .request_id = f->request_id};

        pong.args.ping.timestamp_ns = f->args.ping.timestamp_ns;
        (void) gw_conn_send(c, &pong, NULL, 0, NULL);
        return;
    }
    case SCIMQ_PROTO_OP_PONG:
        return; /* an answer to nothing we asked: ignored */
    case SCIMQ_PROTO_OP_ERROR:
        SCIMQ_LOG_INFO(GATEWAY,
                       "connection %" PRIu64 " (%s): peer reports %s: %.*s",
                       c->id, c->info.peer, scimq_err_name(f->args.error.code),
                       (int) f->args.error.text.len, f->args.error.text.ptr);
        return;
    default:
        break;
    }
    switch (c->phase) {
    case GW_CONN_HELLO:
        if (f->opcode == SCIMQ_PROTO_OP_HELLO)
            handle_hello(c, f);
        else
            gw_conn_fail(c, f->request_id, SCIMQ_ESTATE, "HELLO expected");
        return;
    case GW_CONN_AUTH:
        if (f->opcode == SCIMQ_PROTO_OP_AUTH)
            handle_auth(c, f);
        else
            gw_conn_fail(c, f->request_id, SCIMQ_EAUTH,
                         "authentication required");
        return;
    case GW_CONN_READY:
        if (f->opcode == SCIMQ_PROTO_OP_HELLO ||
            f->opcode == SCIMQ_PROTO_OP_AUTH)
            gw_conn_fail(c, f->request_id, SCIMQ_ESTATE,
                         "session already established");
        else
            handle_ready(c, f);
        return;
    }
}
