/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <utlist.h>

#include "bcast.h"
#include "dispatch.h"
#include "lease.h"
#include "queue.h"
#include "store.h"

static bool
consumer_wants(const struct gw_consumer *c)
{
    return c->queue != NULL && c->credit_msgs > 0 && c->session->connected > 0;
}

void
gw_dispatch_consumer_update(struct gw_broker *b, struct gw_consumer *c)
{
    struct gw_queue *q = c->queue;
    bool want = consumer_wants(c);

    if (want == c->active)
        return;
    if (want) {
        DL_APPEND2(q->active, c, aprev, anext);
        gw_queue_touch(b, q);
    } else if (q != NULL) {
        DL_DELETE2(q->active, c, aprev, anext);
    }
    c->active = want;
}

/*
 * The connected stream of s with the fewest bytes queued for writing; ties
 * go round robin from the stream after the last one chosen, so idle streams
 * share the load instead of the first one taking it all.
 */
static int
stream_pick(struct gw_session *s)
{
    int best = -1;

    for (int k = 0; k < s->stream_count; k++) {
        int i = (s->next_stream + k) % s->stream_count;

        if (s->streams[i].conn_id == 0)
            continue;
        if (best < 0 ||
            s->streams[i].bytes_queued < s->streams[best].bytes_queued)
            best = i;
    }
    if (best >= 0)
        s->next_stream = (uint16_t) ((best + 1) % s->stream_count);
    return best;
}

/* Emits the DELIVER of d (its payload is in memory). */
static void
send_delivery(struct gw_broker *b, struct gw_delivery *d)
{
    struct gw_msg *m = d->msg;
    struct gw_stream *st = &d->session->streams[d->stream];
    struct gw_action *a;

    if (st->conn_id != d->conn_id) {
        /* The stream was cut while the payload was being read back: the
         * stream's close already gave the message back (never here). */
        return;
    }
    a = gw_action_new(GW_ACT_DELIVER);
    a->worker = st->worker;
    a->conn_id = d->conn_id;
    a->request_id = d->request_id;
    a->delivery_id = d->id;
    a->msg_id = m->id;
    a->attempt = m->attempt;
    a->payload = m->payload;
    a->len = m->payload->len;
    a->text = gw_xstrdup(m->queue->name);
    gw_store_pin(m->payload);
    st->bytes_queued += m->payload->len;
    gw_actions_push(b->out, a);
    gw_lease_sent(b, d);
}

static void
deliver(struct gw_broker *b, struct gw_consumer *c, struct gw_msg *m,
        uint16_t stream)
{
    struct gw_payload *pl = m->payload;
    struct gw_delivery *d = gw_lease_begin(b, c, m, stream);

    if (gw_store_want(&b->store, pl, b->now, b->out)) {
        send_delivery(b, d);
        return;
    }
    d->waiter_next = pl->waiters;
    pl->waiters = d;
}

void
gw_dispatch_loaded(struct gw_broker *b, struct gw_payload *pl)
{
    struct gw_delivery *d;

    while ((d = pl->waiters) != NULL) {
        pl->waiters = d->waiter_next;
        d->waiter_next = NULL;
        send_delivery(b, d);
    }
}

/*
 * The next consumer of the active list that can take a message of len
 * bytes: within its LIMIT, and within its byte credit unless it has
 * nothing in flight (so a message larger than the window cannot get
 * stuck).  *fits_any tells whether any consumer's LIMIT admits it.
 */
static struct gw_consumer *
consumer_pick(struct gw_queue *q, uint64_t len, bool *fits_any)
{
    struct gw_consumer *c;

    *fits_any = false;
    DL_FOREACH2(q->active, c, anext)
    {
        if (c->max_message > 0 && len > c->max_message)
            continue;
        *fits_any = true;
        if (len <= c->credit_bytes || c->inflight == 0)
            return c;
    }
    return NULL;
}

/*
 * Data messages, round robin, until the queue runs dry, credit runs out or
 * a control message comes to the head.  True in that last case.
 */
static bool
dispatch_data(struct gw_broker *b, struct gw_queue *q)
{
    while (q->ready != NULL && q->active != NULL) {
        struct gw_msg *m = q->ready;
        bool fits_any;
        struct gw_consumer *c;
        int stream;

        if (gw_bcast_is_control(m))
            return true;
        c = consumer_pick(q, m->payload->len, &fits_any);
        if (c == NULL) {
            if (fits_any)
                return false; /* byte credit: wait for settlements */
            /* Nobody with credit can ever take it: never an endless
             * round of refusals. */
            gw_queue_unlink(q, m);
            gw_queue_dead_letter(b, m, GW_DEAD_TOO_LARGE);
            continue;
        }
        stream = stream_pick(c->session);
        if (stream < 0) {
            gw_dispatch_consumer_update(b, c); /* cannot happen: be safe */
            continue;
        }
        deliver(b, c, m, (uint16_t) stream);
        /* Round robin: the served consumer goes last. */
        DL_DELETE2(q->active, c, aprev, anext);
        DL_APPEND2(q->active, c, aprev, anext);
        gw_dispatch_consumer_update(b, c);
    }
    return false;
}

/*
 * The control message at the head of q (bcast.h): true while it holds the
 * queue.  It starts once nothing put before it is unsettled and someone
 * consumes; its copies go out as their consumers have credit; once they
 * are all settled it leaves the queue, acknowledged once.
 */
static bool
dispatch_control(struct gw_broker *b, struct gw_queue *q)
{
    for (;;) {
        struct gw_msg *m;

        if (q->bc_msg != NULL) {
            struct gw_msg *copy;

            while ((copy = gw_bcast_next_copy(q)) != NULL) {
                struct gw_consumer *c = copy->copy_for;
                int stream = stream_pick(c->session);

                if (stream < 0) { /* cannot happen: can_take() saw one */
                    gw_bcast_copy_back(copy);
                    return true;
                }
                deliver(b, c, copy, (uint16_t) stream);
                gw_dispatch_consumer_update(b, c);
            }
            m = gw_bcast_finished(q);
            if (m == NULL)
                return true; /* copies unsettled: the rest waits */
            if (q->kind == SCIMQ_PROTO_QUEUE_GUARANTEED)
                q->c.acked++;
            gw_queue_msg_free(b, m);
        }
        m = q->ready;
        if (m == NULL || !gw_bcast_is_control(m))
            return false;
        if (q->n_leased > 0 || q->n_delayed > 0 || q->active == NULL)
            return true; /* what came before it is not settled yet */
        gw_queue_unlink(q, m);
        gw_bcast_begin(q, m);
    }
}

static void
dispatch_queue(struct gw_broker *b, struct gw_queue *q)
{
    /* Each round either ends or starts a broadcast: it ends. */
    while (!dispatch_control(b, q) && dispatch_data(b, q))
        ;
}

/* EOS to every stream that asked (GET) since its last EOS. */
static void
eos_send(struct gw_broker *b, struct gw_queue *q)
{
    struct gw_consumer *c;

    DL_FOREACH2(q->consumers, c, qnext)
    {
        struct gw_session *s = c->session;

        for (int i = 0; c->eos_owed != 0 && i < s->stream_count; i++) {
            struct gw_action *a;

            if (!(c->eos_owed & (1ull << i)))
                continue;
            c->eos_owed &= ~(1ull << i);
            if (s->streams[i].conn_id == 0)
                continue;
            a = gw_action_new(GW_ACT_EOS);
            a->worker = s->streams[i].worker;
            a->conn_id = s->streams[i].conn_id;
            a->request_id = c->stream_rid[i];
            a->text = gw_xstrdup(q->name);
            gw_actions_push(b->out, a);
        }
    }
}

void
gw_dispatch_pending(struct gw_broker *b)
{
    /* Dispatching can mark more queues (dead-lettering): loop until none. */
    while (b->dirty != NULL) {
        struct gw_queue *q = b->dirty;

        b->dirty = q->dirty_next;
        q->dirty_next = NULL;
        q->dirty = false;
        dispatch_queue(b, q);
        if (gw_queue_drained(q))
            eos_send(b, q);
    }
}
