/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The session, driven by the I/O thread: takes the ops the API threads
 * post, routes them onto the K streams, matches replies by request id,
 * enforces deadlines, resends unconfirmed PUTs of a dropped stream,
 * reconnects streams with backoff, and shuts everything down.
 *
 * Op lifecycle: posted (c->cmds) -> submitted: written on a usable stream
 * (s->inflight, and in the pending table when a reply is awaited) or
 * queued until one is up (c->queued) -> completed by a reply, an ERROR, a
 * deadline, or the loss of the session.  An op being written is never
 * completed or resent before its write callback: libuv still reads its
 * buffers until then.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <scimq/error.h>

#include "client_internal.h"
#include "common/error_internal.h"
#include "common/log.h"

static void dispatch_queued(struct scimq_client *c);
static void maybe_finalize(struct scimq_client *c);

/* ======================================================================== */
/* Pending-reply table                                                       */
/* ======================================================================== */

static size_t
pending_slot(const struct scimq_client *c, uint64_t rid)
{
    return (size_t) (rid ^ (rid >> 29)) & c->pending_mask;
}

static void
pending_add(struct scimq_client *c, struct op *op)
{
    size_t i = pending_slot(c, op->rid);

    op->hnext = c->pending[i];
    c->pending[i] = op;
    op->pending = true;
}

static struct op *
pending_find(struct scimq_client *c, uint64_t rid)
{
    struct op *op = c->pending[pending_slot(c, rid)];

    while (op != NULL && op->rid != rid)
        op = op->hnext;
    return op;
}

static void
pending_del(struct scimq_client *c, struct op *op)
{
    struct op **pp;

    if (!op->pending)
        return;
    for (pp = &c->pending[pending_slot(c, op->rid)]; *pp != NULL;
         pp = &(*pp)->hnext) {
        if (*pp == op) {
            *pp = op->hnext;
            break;
        }
    }
    op->hnext = NULL;
    op->pending = false;
}

/*
 * A subscribe or limit op by the request id of its LIMIT or GET (rare:
 * failures only).
 */
static struct op *
pending_find_get(struct scimq_client *c, uint64_t get_rid)
{
    for (size_t i = 0; i <= c->pending_mask; i++)
        for (struct op *op = c->pending[i]; op != NULL; op = op->hnext)
            if (op->get_rid_n > 0 && get_rid - op->get_rid < op->get_rid_n)
                return op;
    return NULL;
}

/* Takes an op off the stream it was written on (not while writing). */
static void
op_unlink(struct op *op)
{
    if (op->stream != NULL && op->kind == OP_PUT)
        op->stream->unconfirmed -= op->frame_len;
    op->stream = NULL;
    scimq_list_remove(&op->link);
}

/* ======================================================================== */
/* Completion                                                                */
/* ======================================================================== */

void
scimq__session_complete(struct scimq_client *c, struct op *op, int rc,
                        uint64_t value, char *json)
{
    bool release;

    pending_del(c, op);
    if (op->kind == OP_SEND) {
        free(json);
        scimq__op_free(op);
        return;
    }
    /*
     * An asynchronous PUT hands the blocks back before it leaves the
     * window, so that a flush that returns has seen every free_fn.
     */
    if (op->kind == OP_PUT && op->free_fn != NULL) {
        if (rc < 0)
            SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, CLIENT, 1000,
                             "asynchronous PUT failed: %s", scimq_strerror(rc));
        op->free_fn(op->free_arg);
    }
    pthread_mutex_lock(&c->lock);
    if (op->kind == OP_PUT) {
        c->puts_inflight--;
        if (op->free_fn != NULL && rc < 0 && c->async_err == 0)
            c->async_err = rc;
    }
    release = !op->waited || op->abandoned;
    if (!release) {
        op->rc = rc;
        op->value = value;
        op->json = json;
        json = NULL;
        op->done = true;
    }
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (release) {
        free(json);
        scimq__op_free(op);
    }
}

/* Fails an op that has not been written or whose stream is gone. */
static void
op_fail(struct scimq_client *c, struct op *op, int rc)
{
    scimq__session_complete(c, op, rc, 0, NULL);
}

/*
 * An op whose stream dropped before its reply: a PUT is sent again (a
 * confirmed message is never lost; an unconfirmed one may be duplicated),
 * anything else fails, since the request may or may not have been done.
 */
static void
op_requeue_or_fail(struct scimq_client *c, struct op *op)
{
    if (op->kind == OP_PUT && !c->stopping && c->dead == 0 &&
        op->sends < CLIENT_PUT_MAX_SENDS) {
        op->deadline_ns = 0;
        scimq_list_append(&c->queued, &op->link);
        return;
    }
    if (op->kind == OP_PUT && !c->stopping && c->dead == 0)
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, CLIENT, 1000,
                         "PUT given up after %u sends: each time, its "
                         "stream dropped before the PUT_OK",
                         (unsigned) op->sends);
    op_fail(c, op,
            c->dead != 0  ? c->dead
            : c->stopping ? SCIMQ_ECANCELED
                          : SCIMQ_ECONNRESET);
}

/* ======================================================================== */
/* Routing                                                                   */
/* ======================================================================== */

/*
 * The usable stream for an op: the preferred one if it is up, else the one
 * with the fewest unconfirmed PUT bytes (PUTs) or the shortest write queue
 * (everything else).  Ties go round-robin so that small messages spread
 * over the K streams too.
 */
static struct stream *
pick_stream(struct scimq_client *c, const struct op *op)
{
    struct stream *best = NULL;
    uint64_t best_load = UINT64_MAX;

    if (op->prefer_stream >= 0 && op->prefer_stream < c->nstreams &&
        c->streams[op->prefer_stream].state == SS_UP)
        return &c->streams[op->prefer_stream];
    for (uint16_t k = 0; k < c->nstreams; k++) {
        struct stream *s = &c->streams[(c->rr + k) % c->nstreams];
        uint64_t load;

        if (s->state != SS_UP)
            continue;
        load = op->kind == OP_PUT
                   ? s->unconfirmed
                   : uv_stream_get_write_queue_size((uv_stream_t *) &s->tcp);
        if (load < best_load) {
            best = s;
            best_load = load;
        }
    }
    if (best != NULL)
        c->rr = (uint16_t) ((best->index + 1) % c->nstreams);
    return best;
}

static void
send_on(struct scimq_client *c, struct stream *s, struct op *op)
{
    int rc;

    if (op->kind == OP_PUT || op->kind == OP_REQUEST) {
        if (!op->pending)
            pending_add(c, op);
        scimq_list_append(&s->inflight, &op->link);
        if (op->kind == OP_PUT) {
            s->unconfirmed += op->frame_len;
            op->sends++;
            op->deadline_ns = 0; /* set once written */
        }
    }
    rc = scimq__conn_write(s, op);
    if (rc == 0)
        return;
    if (op->kind == OP_SEND)
        scimq__op_free(op);
    /* A tracked op is on s->inflight: the drop hands it back. */
    scimq__conn_fail(s, rc);
}

void
scimq__session_submit(struct scimq_client *c, struct op *op)
{
    struct stream *s;

    if (c->dead != 0) {
        op_fail(c, op, c->dead);
        return;
    }
    if (c->stopping) {
        op_fail(c, op, SCIMQ_ECANCELED);
        return;
    }
    s = pick_stream(c, op);
    if (s == NULL) {
        scimq_list_append(&c->queued, &op->link);
        return;
    }
    send_on(c, s, op);
}

static void
dispatch_queued(struct scimq_client *c)
{
    struct scimq_list todo, *e;

    scimq_list_init(&todo);
    scimq_list_splice(&todo, &c->queued);
    while ((e = scimq_list_pop(&todo)) != NULL)
        scimq__session_submit(c, SCIMQ_CONTAINER_OF(e, struct op, link));
}

/* ======================================================================== */
/* Replies                                                                   */
/* ======================================================================== */

static void
reply(struct scimq_client *c, struct op *op, int rc, uint64_t value, char *json)
{
    pending_del(c, op);
    op_unlink(op);
    if (op->writing) {
        /* The write callback completes it: libuv may still hold its iov. */
        op->replied = true;
        op->reply_rc = rc;
        op->reply_value = value;
        op->reply_json = json;
        return;
    }
    scimq__session_complete(c, op, rc, value, json);
}

/* The JSON document of an OK reply, NUL-terminated, or NULL. */
static char *
take_json(struct stream *s, const scimq_proto_frame_t *f)
{
    uint8_t *buf = s->rx_buf;

    if (buf == NULL || s->rx_user)
        return NULL;
    for (uint32_t i = 0; i < f->block_count; i++) {
        const scimq_proto_block_t *b = &f->blocks[i];

        if (b->name_len == 4 && memcmp(b->name, "json", 4) == 0) {
            memmove(buf, b->data, (size_t) b->len);
            buf[b->len] = '\0';
            s->rx_buf = NULL;
            return (char *) buf;
        }
    }
    return NULL;
}

int
scimq__session_frame(struct scimq_client *c, struct stream *s,
                     const scimq_proto_frame_t *f)
{
    struct op *op;
    int code;

    switch (f->opcode) {
    case SCIMQ_PROTO_OP_DELIVER:
        return scimq__msg_deliver(c, s, f);
    case SCIMQ_PROTO_OP_EOS:
        scimq__msg_eos(c, f);
        return 0;
    case SCIMQ_PROTO_OP_PUT_OK:
        op = pending_find(c, f->request_id);
        if (op != NULL && op->kind == OP_PUT)
            reply(c, op, 0, f->args.put_ok.msg_id, NULL);
        return 0;
    case SCIMQ_PROTO_OP_PUT_OK_RANGE:
        /* Session version 3: the PUT_OKs of consecutive requests. */
        for (uint32_t i = 0; i < f->args.put_ok_range.count; i++) {
            op = pending_find(c, f->request_id + i);
            if (op != NULL && op->kind == OP_PUT)
                reply(c, op, 0, f->args.put_ok_range.msg_id + i, NULL);
        }
        return 0;
    case SCIMQ_PROTO_OP_OK:
        op = pending_find(c, f->request_id);
        if (op != NULL && op->kind == OP_REQUEST) {
            code = f->payload_len > 0 && s->rx_drop_rc < 0 ? s->rx_drop_rc : 0;
            reply(c, op, code, f->args.ok.value,
                  code == 0 ? take_json(s, f) : NULL);
        }
        return 0;
    case SCIMQ_PROTO_OP_PONG:
        op = pending_find(c, f->request_id);
        if (op != NULL && op->kind == OP_REQUEST)
            reply(c, op, 0, uv_hrtime() - f->args.ping.timestamp_ns, NULL);
        return 0;
    case SCIMQ_PROTO_OP_ERROR:
        code = f->args.error.code < 0 ? f->args.error.code : SCIMQ_EPROTO;
        if (f->request_id & CLIENT_RID_SUB_BIT) {
            op = pending_find_get(c, f->request_id);
            if (op != NULL)
                reply(c, op, code, 0, NULL);
            else
                scimq__msg_get_error(
                    c, (uint32_t) ((f->request_id & ~CLIENT_RID_SUB_BIT) >> 32),
                    code);
            return 0;
        }
        op = pending_find(c, f->request_id);
        if (op != NULL) {
            reply(c, op, code, 0, NULL);
            return 0;
        }
        SCIMQ_LOG_WARN(CLIENT, "stream %u: gateway error %s (%d): %.*s",
                       s->index, scimq_err_name(code), code,
                       (int) f->args.error.text.len, f->args.error.text.ptr);
        return 0;
    default:
        SCIMQ_LOG_WARN(CLIENT, "stream %u: unexpected %s frame ignored",
                       s->index, scimq_proto_opcode_name(f->opcode));
        return 0;
    }
}

void
scimq__session_write_done(struct scimq_client *c, struct stream *s,
                          struct op *op, int status)
{
    int rc = status < 0 ? scimq__err_from_errno(-status) : 0;

    op->writing = false;
    if (op->kind == OP_SEND) {
        scimq__op_free(op);
    } else if (op->replied) {
        op->replied = false;
        scimq__session_complete(c, op, op->reply_rc, op->reply_value,
                                op->reply_json);
    } else if (op->orphaned) {
        op->orphaned = false;
        op_requeue_or_fail(c, op);
        if (!c->stopping)
            dispatch_queued(c);
        return;
    }
    /*
     * A PUT has no confirmation deadline: a gateway that is full stops
     * reading (back-pressure) and confirms late, by design.  A dead peer is
     * detected by TCP (errors, keepalive), never by a timer here.
     */
    /* A failed write drops the stream, which hands its ops back. */
    if (rc < 0)
        scimq__conn_fail(s, rc);
}

/* ======================================================================== */
/* Streams                                                                   */
/* ======================================================================== */

void
scimq__session_stream_up(struct scimq_client *c, struct stream *s)
{
    bool all = true;

    if (c->opening) {
        if (s->index == 0)
            for (uint16_t i = 1; i < c->nstreams; i++)
                scimq__conn_start(&c->streams[i]);
        for (uint16_t i = 0; i < c->nstreams; i++)
            all = all && c->streams[i].state == SS_UP;
        if (all) {
            c->opening = false;
            scimq__session_complete(c, c->open_op, 0, 0, NULL);
            c->open_op = NULL;
        }
    }
    dispatch_queued(c);
}

/*
 * No reply will come on s any more: hand its ops back.  going_away: the
 * gateway said BYE (it shuts down).  Its other streams are about to say
 * the same, and a PUT handed from one to the next would use up its sends
 * within one shutdown; so such a hand-back does not count as a send (a
 * bounded number of times, in case a gateway says BYE on every stream it
 * accepts).
 */
void
scimq__session_stream_gone(struct scimq_client *c, struct stream *s,
                           bool going_away)
{
    struct scimq_list *e;

    while ((e = scimq_list_pop(&s->inflight)) != NULL) {
        struct op *op = SCIMQ_CONTAINER_OF(e, struct op, link);

        if (op->kind == OP_PUT)
            s->unconfirmed -= op->frame_len;
        op->stream = NULL;
        if (op->writing) {
            op->orphaned = true;
            continue;
        }
        if (going_away && op->kind == OP_PUT && op->sends > 0 &&
            op->bye_refunds < CLIENT_PUT_MAX_SENDS) {
            op->sends--;
            op->bye_refunds++;
        }
        op_requeue_or_fail(c, op);
    }
    s->unconfirmed = 0;
    if (!c->stopping)
        dispatch_queued(c);
}

/* Stops everything: no reconnection, every stream closes. */
static void
session_stop(struct scimq_client *c)
{
    c->stopping = true;
    for (uint16_t i = 0; i < c->nstreams; i++) {
        struct stream *s = &c->streams[i];

        switch (s->state) {
        case SS_IDLE:
        case SS_WAIT:
            uv_timer_stop(&s->timer);
            s->state = SS_DEAD;
            break;
        case SS_CONNECTING:
        case SS_HELLO:
        case SS_AUTH:
        case SS_UP:
        case SS_BYE:
            scimq__conn_fail(s, SCIMQ_ECANCELED);
            break;
        default:
            break;
        }
    }
    maybe_finalize(c);
}

void
scimq__session_stream_down(struct scimq_client *c, struct stream *s, int rc)
{
    if (s->down_since_ns == 0)
        s->down_since_ns = uv_hrtime();
    scimq__session_stream_gone(c, s, false);
    if (c->opening && !c->stopping) {
        c->open_rc = rc != 0 ? rc : SCIMQ_ECONNRESET;
        session_stop(c);
    }
}

/* Every stream given up: the session is lost for good. */
static void
session_dead(struct scimq_client *c, int rc)
{
    struct scimq_list *e;

    SCIMQ_LOG_ERROR(CLIENT, "every stream is lost; giving up after %u ms",
                    c->opts.reconnect_ms);
    pthread_mutex_lock(&c->lock);
    if (c->dead == 0)
        c->dead = rc;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    while ((e = scimq_list_pop(&c->queued)) != NULL)
        op_fail(c, SCIMQ_CONTAINER_OF(e, struct op, link), rc);
}

static void
on_backoff(uv_timer_t *t)
{
    struct stream *s = t->data;

    if (s->state == SS_WAIT && !s->c->stopping)
        scimq__conn_start(s);
}

void
scimq__session_stream_closed(struct scimq_client *c, struct stream *s)
{
    uint64_t now = uv_hrtime(), elapsed_ms, delay;
    bool all_dead = true;

    if (c->stopping) {
        s->state = SS_DEAD;
        maybe_finalize(c);
        return;
    }
    if (s->down_since_ns == 0)
        s->down_since_ns = now;
    elapsed_ms = (now - s->down_since_ns) / UINT64_C(1000000);
    if (elapsed_ms >= c->opts.reconnect_ms) {
        SCIMQ_LOG_WARN(CLIENT, "stream %u: not reconnected within %u ms: %s",
                       s->index, c->opts.reconnect_ms,
                       scimq_strerror(s->last_err));
        s->state = SS_DEAD;
        for (uint16_t i = 0; i < c->nstreams; i++)
            all_dead = all_dead && c->streams[i].state == SS_DEAD;
        if (all_dead)
            session_dead(c, SCIMQ_ECONNRESET);
        return;
    }
    delay = s->backoff_ms;
    if (delay > c->opts.reconnect_ms - elapsed_ms)
        delay = c->opts.reconnect_ms - elapsed_ms;
    s->backoff_ms = s->backoff_ms * 2 > CLIENT_BACKOFF_MAX_MS
                        ? CLIENT_BACKOFF_MAX_MS
                        : s->backoff_ms * 2;
    s->state = SS_WAIT;
    uv_timer_start(&s->timer, on_backoff, delay, 0);
}

/*
 * A new session replaced a lost one: its credit is gone, so every live
 * subscription asks for its whole window again, and messages of the old
 * session no longer top anything up (their epoch is stale).
 */
void
scimq__session_renewed(struct scimq_client *c)
{
    struct scimq_list *e, *tmp, ops;
    scimq_proto_frame_t f[2];
    struct op *op;
    size_t n;

    scimq_list_init(&ops);
    pthread_mutex_lock(&c->lock);
    c->epoch++;
    SCIMQ_LIST_FOREACH (e, tmp, &c->subs) {
        struct sub *sub = SCIMQ_CONTAINER_OF(e, struct sub, link);

        sub->debt_msgs = 0;
        sub->debt_bytes = 0;
        if (sub->eos || sub->err != 0)
            continue;
        /* A limit is per session: the new one hears it before the GET. */
        memset(f, 0, sizeof(f));
        n = scimq__limit_frame(c, sub, &f[0]) ? 1 : 0;
        f[n].opcode = SCIMQ_PROTO_OP_GET;
        f[n].request_id = scimq__sub_rid(sub);
        f[n].args.get.credit_msgs = sub->window_msgs;
        f[n].args.get.credit_bytes = sub->window_bytes;
        f[n].args.get.queue.ptr = sub->queue;
        f[n].args.get.queue.len = (uint16_t) strlen(sub->queue);
        if (scimq__op_frames(OP_SEND, f, n + 1, &op) == 0)
            scimq_list_append(&ops, &op->link);
        else
            SCIMQ_LOG_ERROR(CLIENT, "cannot renew the credit of %s",
                            sub->queue);
    }
    pthread_mutex_unlock(&c->lock);
    SCIMQ_LOG_WARN(CLIENT, "new session: credit of %s renewed",
                   scimq_list_empty(&ops) ? "no subscription" : "every queue");
    while ((e = scimq_list_pop(&ops)) != NULL)
        scimq__session_submit(c, SCIMQ_CONTAINER_OF(e, struct op, link));
}

/* ======================================================================== */
/* Housekeeping                                                              */
/* ======================================================================== */

/*
 * Completes the requests whose deadline passed (queue management, PING).
 * Ops being written are left alone: libuv still holds their buffers.
 */
static void
expire_ops(struct scimq_client *c, uint64_t now)
{
    struct scimq_list *e, *tmp;

    for (size_t i = 0; i <= c->pending_mask; i++) {
        struct op *op = c->pending[i];

        while (op != NULL) {
            struct op *next = op->hnext;

            if (op->deadline_ns != 0 && now >= op->deadline_ns &&
                !op->writing && !op->orphaned && op->kind != OP_PUT) {
                op_unlink(op);
                op_fail(c, op, SCIMQ_ETIMEDOUT);
            }
            op = next;
        }
    }
    SCIMQ_LIST_FOREACH (e, tmp, &c->queued) {
        struct op *op = SCIMQ_CONTAINER_OF(e, struct op, link);

        if (op->kind == OP_REQUEST && op->deadline_ns != 0 &&
            now >= op->deadline_ns) {
            scimq_list_remove(&op->link);
            op_fail(c, op, SCIMQ_ETIMEDOUT);
        }
    }
}

void
scimq__session_tick(uv_timer_t *timer)
{
    struct scimq_client *c = timer->data;
    uint64_t now = uv_hrtime();

    expire_ops(c, now);
    if (c->opts.auto_extend && !c->stopping)
        scimq__msg_extend_due(c, now);
    for (uint16_t i = 0; i < c->nstreams; i++) {
        struct stream *s = &c->streams[i];

        /*
         * No write-stall detection: a write queue that does not move is
         * what back-pressure from a full gateway looks like.
         */
        if (s->state == SS_BYE && now >= s->bye_deadline_ns)
            scimq__conn_fail(s, 0);
    }
}

/* ======================================================================== */
/* Open, close, shutdown                                                     */
/* ======================================================================== */

/*
 * Once no socket is left (so no write callback is outstanding), fails what
 * is left, closes the remaining handles and completes the open or close:
 * uv_run() then returns and the I/O thread ends.
 */
static void
maybe_finalize(struct scimq_client *c)
{
    struct scimq_list cmds, *e;

    if (!c->stopping || c->finalized)
        return;
    for (uint16_t i = 0; i < c->nstreams; i++)
        if (scimq__conn_has_socket(&c->streams[i]))
            return;
    c->finalized = true;

    scimq_list_init(&cmds);
    pthread_mutex_lock(&c->lock);
    c->loop_stopped = true;
    scimq_list_splice(&cmds, &c->cmds);
    pthread_mutex_unlock(&c->lock);
    scimq_list_splice(&cmds, &c->queued);
    while ((e = scimq_list_pop(&cmds)) != NULL) {
        struct op *op = SCIMQ_CONTAINER_OF(e, struct op, link);

        if (op->kind == OP_CLOSE) {
            /* A close posted after an open that failed: nothing to do. */
            scimq__session_complete(c, op, 0, 0, NULL);
            continue;
        }
        op_fail(c, op, c->dead != 0 ? c->dead : SCIMQ_ECANCELED);
    }
    for (size_t i = 0; i <= c->pending_mask; i++)
        while (c->pending[i] != NULL) {
            struct op *op = c->pending[i];

            op_unlink(op);
            op_fail(c, op, SCIMQ_ECANCELED);
        }

    for (uint16_t i = 0; i < c->nstreams; i++)
        uv_close((uv_handle_t *) &c->streams[i].timer, NULL);
    /* Whatever is still gathered is written (or cancelled) first. */
    scimq__conn_flush_all(c, true);
    uv_close((uv_handle_t *) &c->flush_prepare, NULL);
    uv_close((uv_handle_t *) &c->flush_check, NULL);
    uv_close((uv_handle_t *) &c->flush_idle, NULL);
    uv_close((uv_handle_t *) &c->tick, NULL);
    uv_close((uv_handle_t *) &c->wakeup, NULL);
    if (c->open_op != NULL) {
        scimq__session_complete(c, c->open_op,
                                c->open_rc != 0 ? c->open_rc : SCIMQ_ECANCELED,
                                0, NULL);
        c->open_op = NULL;
    }
    if (c->close_op != NULL) {
        scimq__session_complete(c, c->close_op, 0, 0, NULL);
        c->close_op = NULL;
    }
}

static void
session_open(struct scimq_client *c, struct op *op)
{
    c->open_op = op;
    c->opening = true;
    uv_timer_start(&c->tick, scimq__session_tick, CLIENT_TICK_MS,
                   CLIENT_TICK_MS);
    scimq__conn_start(&c->streams[0]);
}

/*
 * Close: deliveries still in the FIFO go back to the gateway (NACK
 * requeue) before BYE on the same streams; BYE on each stream; the
 * streams close on the answer, EOF or after CLIENT_BYE_WAIT_MS.
 */
static void
session_close(struct scimq_client *c, struct op *op)
{
    c->close_op = op;
    scimq__msg_unhold_all(c);
    scimq__msg_nack_fifo(c);
    c->stopping = true;
    for (uint16_t i = 0; i < c->nstreams; i++) {
        struct stream *s = &c->streams[i];

        switch (s->state) {
        case SS_UP:
            scimq__conn_bye(s);
            break;
        case SS_IDLE:
        case SS_WAIT:
            uv_timer_stop(&s->timer);
            s->state = SS_DEAD;
            break;
        case SS_CONNECTING:
        case SS_HELLO:
        case SS_AUTH:
            scimq__conn_fail(s, SCIMQ_ECANCELED);
            break;
        default:
            break;
        }
    }
    maybe_finalize(c);
}

void
scimq__session_wakeup(uv_async_t *async)
{
    struct scimq_client *c = async->data;
    struct scimq_list todo, *e;

    scimq_list_init(&todo);
    pthread_mutex_lock(&c->lock);
    scimq_list_splice(&todo, &c->cmds);
    pthread_mutex_unlock(&c->lock);
    /* ACKs gathered before these ops were posted go first (a close after
     * them says BYE after them). */
    scimq__msg_flush_acks(c);
    while ((e = scimq_list_pop(&todo)) != NULL) {
        struct op *op = SCIMQ_CONTAINER_OF(e, struct op, link);

        switch (op->kind) {
        case OP_OPEN:
            session_open(c, op);
            break;
        case OP_CLOSE:
            if (c->stopping)
                scimq__session_complete(c, op, 0, 0, NULL);
            else
                session_close(c, op);
            break;
        default:
            scimq__session_submit(c, op);
            break;
        }
    }
}

void *
scimq__session_main(void *arg)
{
    struct scimq_client *c = arg;

    uv_run(&c->loop, UV_RUN_DEFAULT);
    return NULL;
}
