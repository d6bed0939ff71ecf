/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>

#include <utlist.h>

#include "durable.h"
#include "lease.h"
#include "queue.h"

struct gw_delivery *
gw_lease_begin(struct gw_broker *b, struct gw_consumer *c, struct gw_msg *m,
               uint16_t stream)
{
    struct gw_session *s = c->session;
    struct gw_queue *q = m->queue;
    struct gw_delivery *d = gw_xcalloc(1, sizeof(*d));
    uint64_t len = m->payload->len;

    gw_queue_unlink(q, m);
    m->attempt++;
    gw_durable_attempt(b, m);
    d->id = ++b->next_delivery_id;
    d->msg = m;
    d->session = s;
    d->consumer = c;
    d->stream = stream;
    d->conn_id = s->streams[stream].conn_id;
    d->request_id = c->request_id;
    d->bytes = len;
    gw_heap_node_init(&d->lease);
    c->credit_msgs--;
    c->credit_bytes -= len < c->credit_bytes ? len : c->credit_bytes;
    c->inflight++;
    s->inflight++;
    q->c.delivered++;
    q->c.delivered_bytes += len;
    m->delivery = d;
    gw_queue_lease(q, m);
    DL_APPEND(s->deliveries, d);
    HASH_ADD(hh, b->deliveries, id, sizeof(d->id), d);
    return d;
}

void
gw_lease_sent(struct gw_broker *b, struct gw_delivery *d)
{
    struct gw_queue *q = d->msg->queue;

    d->sent = true;
    if (q->kind == SCIMQ_PROTO_QUEUE_GUARANTEED)
        gw_heap_push(&b->leases, &d->lease, b->now + q->ack_timeout_ms);
    else
        gw_queue_msg_free(b, gw_lease_end(b, d));
}

struct gw_msg *
gw_lease_end(struct gw_broker *b, struct gw_delivery *d)
{
    struct gw_session *s = d->session;
    struct gw_msg *m = d->msg;
    struct gw_payload *pl = m->payload;
    struct gw_delivery **pp;

    if (d->consumer->inflight > 0)
        d->consumer->inflight--;
    s->inflight--;
    gw_queue_unlink(m->queue, m);
    m->delivery = NULL;
    gw_heap_remove(&b->leases, &d->lease);
    /* It may be waiting for its payload to be read back. */
    for (pp = &pl->waiters; *pp != NULL; pp = &(*pp)->waiter_next) {
        if (*pp == d) {
            *pp = d->waiter_next;
            break;
        }
    }
    DL_DELETE(s->deliveries, d);
    HASH_DEL(b->deliveries, d);
    free(d);
    gw_queue_touch(b, m->queue);
    return m;
}

void
gw_lease_unlease(struct gw_broker *b, struct gw_delivery *d, uint32_t delay_ms)
{
    gw_queue_requeue(b, gw_lease_end(b, d), delay_ms);
}

struct gw_delivery *
gw_lease_find(struct gw_broker *b, uint64_t id)
{
    struct gw_delivery *d = NULL;

    HASH_FIND(hh, b->deliveries, &id, sizeof(id), d);
    return d;
}

void
gw_lease_extend(struct gw_broker *b, struct gw_delivery *d, uint32_t lease_ms)
{
    uint64_t ms = lease_ms ? lease_ms : d->msg->queue->ack_timeout_ms;

    /* A delivery still waiting for its payload has no deadline yet. */
    if (gw_heap_node_queued(&d->lease))
        gw_heap_update(&b->leases, &d->lease, b->now + ms);
}

void
gw_lease_expire_due(struct gw_broker *b)
{
    struct gw_heap_node *n;

    while ((n = gw_heap_pop_due(&b->leases, b->now)) != NULL) {
        struct gw_delivery *d =
            (struct gw_delivery *) ((char *) n -
                                    offsetof(struct gw_delivery, lease));
        struct gw_msg *m = d->msg;

        m->queue->c.expired++;
        GW_NOTE_SPARSE(b->out, SCIMQ_LOG_INFO, QUEUE, 5000,
                       "queue %s: lease of message %" PRIu64
                       " expired (attempt %u); requeued",
                       m->queue->name, m->id, m->attempt);
        gw_lease_unlease(b, d, 0);
    }
}
