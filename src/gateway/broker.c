/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The broker's events: sessions and their streams, producing, consuming
 * and the timer.  Every event sets the clock and the action list, does its
 * work, then dispatches the queues it touched and lets the store spill
 * ahead (event_end), so that the modules below never call each other in a
 * circle: queue and lease only mark queues, dispatch hands messages out.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utlist.h>

#include <scimq/error.h>

#include "bcast.h"
#include "broker.h"
#include "common/log.h"
#include "compact.h"
#include "dispatch.h"
#include "durable.h"
#include "lease.h"
#include "queue.h"
#include "records.h"
#include "store.h"

void
gw_event_begin(struct gw_broker *b, uint64_t now, struct gw_actions *out)
{
    b->now = now;
    b->out = out;
}

void
gw_event_end(struct gw_broker *b)
{
    gw_dispatch_pending(b);
    gw_compact_check(b);
    gw_store_balance(&b->store, b->now, b->out);
    b->out = NULL;
}

int
gw_broker_new(const struct gw_broker_settings *set, struct gw_broker **b_p)
{
    struct gw_broker *b = calloc(1, sizeof(*b));
    int rc;

    *b_p = NULL;
    if (b == NULL)
        return SCIMQ_ENOMEM;
    b->set = *set;
    b->j.on = set->journal;
    b->j.durability = (enum gw_durability) set->durability;
    b->j.compact_percent = set->compact_percent;
    gw_heap_init(&b->leases);
    gw_heap_init(&b->delays);
    rc = gw_store_init(&b->store, set->memory_limit, set->chunk_size,
                       set->spill || set->journal, set->disk_limit);
    if (rc == 0)
        gw_store_set_max_receiving(&b->store, set->max_receiving);
    if (rc != 0) {
        gw_store_fini(&b->store);
        free(b);
        return rc;
    }
    *b_p = b;
    return 0;
}

int
gw_broker_prefault(struct gw_broker *b)
{
    return gw_pool_prefault_start(&b->store.pool);
}

static void
consumer_free(struct gw_consumer *c)
{
    free(c->queue_name);
    free(c);
}

void
gw_broker_free(struct gw_broker *b)
{
    struct gw_actions dropped = {NULL, NULL};
    struct gw_queue *q, *qt;
    struct gw_session *s, *st;
    struct gw_link *l, *lt;
    struct gw_action *a;

    if (b == NULL)
        return;
    /* What is still queued stays in the journal for the next start. */
    b->j.on = false;
    while (b->j.confirms != NULL) {
        struct gw_confirm *c = b->j.confirms;

        b->j.confirms = c->next;
        free(c);
    }
    gw_event_begin(b, b->now, &dropped);
    HASH_ITER(hh, b->sessions, s, st)
    {
        struct gw_delivery *d, *dt;
        struct gw_consumer *c, *ct;

        DL_FOREACH_SAFE(s->deliveries, d, dt)
        gw_queue_msg_free(b, gw_lease_end(b, d));
        LL_FOREACH_SAFE2(s->consumers, c, ct, snext) consumer_free(c);
        HASH_DEL(b->sessions, s);
        free(s);
    }
    HASH_ITER(hh, b->links, l, lt)
    {
        HASH_DEL(b->links, l);
        free(l);
    }
    HASH_ITER(hh, b->queues, q, qt)
    {
        struct gw_msg *m, *mt;
        struct gw_binding *bd, *bt;

        DL_FOREACH_SAFE(q->ready, m, mt)
        {
            gw_queue_unlink(q, m);
            gw_queue_msg_free(b, m);
        }
        DL_FOREACH_SAFE(q->delayed, m, mt)
        {
            gw_queue_unlink(q, m);
            gw_queue_msg_free(b, m);
        }
        if ((m = gw_bcast_drop(q)) != NULL)
            gw_queue_msg_free(b, m);
        LL_FOREACH_SAFE(q->bindings, bd, bt) free(bd);
        HASH_DEL(b->queues, q);
        free(q->name);
        free(q->dead_letter);
        free(q);
    }
    /* Nobody carries these out any more (files are the caller's). */
    while ((a = gw_actions_pop(&dropped)) != NULL)
        gw_action_free(a);
    gw_heap_fini(&b->leases);
    gw_heap_fini(&b->delays);
    gw_store_fini(&b->store);
    free(b);
}

/* ======================================================================== */
/* Sessions                                                                  */
/* ======================================================================== */

static struct gw_link *
link_find(struct gw_broker *b, uint64_t conn_id)
{
    struct gw_link *l = NULL;

    HASH_FIND(hh, b->links, &conn_id, sizeof(conn_id), l);
    return l;
}

int
gw_broker_hello(struct gw_broker *b, uint64_t now, uint64_t conn_id, int worker,
                const scimq_proto_frame_t *hello,
                const uint8_t new_id[SCIMQ_PROTO_SESSION_ID_LEN],
                uint8_t version, uint8_t *version_p,
                uint8_t sid_out[SCIMQ_PROTO_SESSION_ID_LEN],
                struct gw_actions *out)
{
    static const uint8_t zero[SCIMQ_PROTO_SESSION_ID_LEN];
    const uint8_t *sid = hello->args.hello.session_id;
    uint16_t idx = hello->args.hello.stream_index;
    uint16_t count = hello->args.hello.stream_count;
    struct gw_session *s = NULL;
    struct gw_link *l;
    int rc = 0;

    if (count > GW_MAX_STREAMS || idx >= count || link_find(b, conn_id) != NULL)
        return SCIMQ_EINVAL;
    gw_event_begin(b, now, out);
    if (memcmp(sid, zero, sizeof(zero)) == 0) {
        HASH_FIND(hh, b->sessions, new_id, SCIMQ_PROTO_SESSION_ID_LEN, s);
        if (s != NULL || memcmp(new_id, zero, sizeof(zero)) == 0) {
            rc = SCIMQ_EINVAL; /* the caller's dice: one in 2^128 */
            goto out;
        }
        s = gw_xcalloc(1, sizeof(*s));
        memcpy(s->id, new_id, sizeof(s->id));
        s->stream_count = count;
        s->version = version;
        snprintf(s->client_name, sizeof(s->client_name), "%.*s",
                 hello->args.hello.client_name.len,
                 hello->args.hello.client_name.ptr);
        HASH_ADD(hh, b->sessions, id, sizeof(s->id), s);
    } else {
        HASH_FIND(hh, b->sessions, sid, SCIMQ_PROTO_SESSION_ID_LEN, s);
        if (s == NULL) {
            rc = SCIMQ_ENOENT;
            goto out;
        }
        if (s->stream_count != count) {
            rc = SCIMQ_EINVAL;
            goto out;
        }
        if (s->streams[idx].conn_id != 0) {
            rc = SCIMQ_EBUSY;
            goto out;
        }
    }
    s->streams[idx].conn_id = conn_id;
    s->streams[idx].worker = worker;
    s->streams[idx].bytes_queued = 0;
    s->connected++;
    l = gw_xcalloc(1, sizeof(*l));
    l->conn_id = conn_id;
    l->session = s;
    l->stream = idx;
    HASH_ADD(hh, b->links, conn_id, sizeof(l->conn_id), l);
    memcpy(sid_out, s->id, SCIMQ_PROTO_SESSION_ID_LEN);
    *version_p = s->version;
    /* A (re)connected stream may carry deliveries that waited for one. */
    for (struct gw_consumer *c = s->consumers; c != NULL; c = c->snext) {
        gw_dispatch_consumer_update(b, c);
        gw_queue_touch(b, c->queue);
    }
out:
    gw_event_end(b);
    return rc;
}

static void
session_end(struct gw_broker *b, struct gw_session *s)
{
    struct gw_delivery *d, *dt;
    struct gw_consumer *c, *ct;

    DL_FOREACH_SAFE(s->deliveries, d, dt) gw_lease_unlease(b, d, 0);
    LL_FOREACH_SAFE2(s->consumers, c, ct, snext)
    {
        if (c->active)
            DL_DELETE2(c->queue->active, c, aprev, anext);
        if (c->queue != NULL) {
            /* The copies of a control message it has not had yet, and
             * those it had (given back above), are settled for it. */
            gw_bcast_consumer_gone(c);
            DL_DELETE2(c->queue->consumers, c, qprev, qnext);
            gw_queue_touch(b, c->queue);
        }
        consumer_free(c);
    }
    HASH_DEL(b->sessions, s);
    free(s);
}

void
gw_broker_stream_down(struct gw_broker *b, uint64_t now, uint64_t conn_id,
                      bool bye, struct gw_actions *out)
{
    struct gw_link *l = link_find(b, conn_id);
    struct gw_session *s;
    struct gw_delivery *d, *dt;
    uint16_t i;

    gw_event_begin(b, now, out);
    gw_store_unpark(&b->store, conn_id);
    if (l == NULL)
        goto out;
    s = l->session;
    i = l->stream;
    HASH_DEL(b->links, l);
    free(l);
    s->streams[i].conn_id = 0;
    s->streams[i].bytes_queued = 0;
    s->connected--;
    if (s->connected == 0) {
        session_end(b, s);
        goto out;
    }
    /*
     * What was in flight on a lost stream may not have arrived whole: it
     * is requeued, and its credit given back, since the client cannot know
     * which of those deliveries it lost (it does not top them up).  After
     * a BYE the client is closing: its ACKs of what came on this stream
     * may still come on another, and what it leaves unsettled goes back
     * at the session's end.
     */
    DL_FOREACH_SAFE(s->deliveries, d, dt)
    {
        if (bye || d->conn_id != conn_id)
            continue;
        d->consumer->credit_msgs++;
        d->consumer->credit_bytes += d->bytes;
        gw_dispatch_consumer_update(b, d->consumer);
        gw_lease_unlease(b, d, 0);
    }
    /* An end of stream owed to this stream is owed to the session: it
     * goes to another of its streams (the client need not ask again). */
    for (struct gw_consumer *c = s->consumers; c != NULL; c = c->snext) {
        if (!(c->eos_owed & (1ull << i)))
            continue;
        c->eos_owed &= ~(1ull << i);
        for (uint16_t k = 0; k < s->stream_count; k++) {
            if (s->streams[k].conn_id == 0)
                continue;
            if (!(c->eos_owed & (1ull << k))) {
                c->eos_owed |= 1ull << k;
                c->stream_rid[k] = c->stream_rid[i];
            }
            break;
        }
        gw_queue_touch(b, c->queue);
    }
out:
    gw_event_end(b);
}

/* ======================================================================== */
/* Producing                                                                 */
/* ======================================================================== */

int
gw_broker_put_begin(struct gw_broker *b, uint64_t now, uint64_t conn_id,
                    int worker, const scimq_proto_frame_t *f,
                    struct gw_payload **pl_p, struct gw_actions *out)
{
    struct gw_queue *q;
    int rc;

    *pl_p = NULL;
    if (b->draining)
        return SCIMQ_ESHUTDOWN;
    if (link_find(b, conn_id) == NULL)
        return SCIMQ_ESTATE;
    rc = gw_queue_name_check(&f->args.queue.queue);
    if (rc != 0)
        return rc;
    gw_event_begin(b, now, out);
    q = gw_queue_find_str(b, &f->args.queue.queue);
    rc = q == NULL ? SCIMQ_ENOENT : gw_queue_put_check(q, f->payload_len);
    if (rc == 0 && gw_durable_journal_full(b, q, f->payload_len))
        rc = SCIMQ_EAGAIN; /* the disk limit: wait like for memory */
    if (rc == 0)
        rc = gw_store_payload_new(&b->store, f, now, out, pl_p);
    if (rc == 0)
        (*pl_p)->control = (f->flags & SCIMQ_PROTO_F_BROADCAST) != 0;
    if (rc == SCIMQ_EAGAIN) {
        gw_store_park(&b->store, worker, conn_id, f->payload_len);
        GW_NOTE_SPARSE(out, SCIMQ_LOG_WARN, GATEWAY, 5000,
                       "payload memory full (%llu of %llu B), or PUTs being "
                       "received hold their share (gateway_max_receiving): "
                       "back-pressuring producers",
                       (unsigned long long) gw_pool_used(&b->store.pool),
                       (unsigned long long) b->store.pool.size);
    }
    gw_event_end(b);
    return rc;
}

int
gw_broker_put_commit(struct gw_broker *b, uint64_t now, uint64_t conn_id,
                     int worker, const scimq_proto_frame_t *f,
                     struct gw_payload *pl, const uint32_t *data_crc,
                     uint64_t *msg_id_p, bool *deferred_p,
                     struct gw_actions *out)
{
    struct gw_msg *msgs[1 + GW_MAX_BINDINGS];
    struct gw_queue *q;
    size_t n = 0;
    int rc;

    *deferred_p = false;
    gw_event_begin(b, now, out);
    if (data_crc != NULL) {
        pl->data_crc = *data_crc;
        pl->data_crc_ok = true;
    }
    q = gw_queue_find_str(b, &f->args.queue.queue);
    /* The queue may have been deleted or closed while the payload came. */
    rc = q == NULL ? SCIMQ_ENOENT : gw_queue_put_check(q, pl->len);
    if (rc == 0) {
        gw_queue_make_room(b, q, pl->len);
        msgs[n++] = gw_queue_append(b, q, pl);
        q->c.put++;
        q->c.put_bytes += pl->len;
        *msg_id_p = msgs[0]->id;
        for (struct gw_binding *bd = q->bindings; bd != NULL; bd = bd->next) {
            gw_queue_make_room(b, bd->target, pl->len);
            /* Shared payload, no copy. */
            msgs[n++] = gw_queue_append(b, bd->target, pl);
            bd->target->c.put++;
            bd->target->c.put_bytes += pl->len;
        }
        *deferred_p =
            gw_durable_put(b, pl, msgs, n, worker, conn_id, f->request_id,
                           (f->flags & SCIMQ_PROTO_F_CONFIRM) != 0);
        gw_store_committed(&b->store, pl, out);
    }
    /* The connection's pin ends here; messages hold references now. */
    gw_store_unpin(&b->store, pl, out);
    gw_event_end(b);
    return rc;
}

void
gw_broker_put_abort(struct gw_broker *b, uint64_t now, struct gw_payload *pl,
                    struct gw_actions *out)
{
    gw_event_begin(b, now, out);
    gw_store_unpin(&b->store, pl, out);
    gw_event_end(b);
}

void
gw_broker_unpark(struct gw_broker *b, uint64_t conn_id)
{
    gw_store_unpark(&b->store, conn_id);
}

/* ======================================================================== */
/* Consuming                                                                 */
/* ======================================================================== */

/* The consumer of session s on queue q, created on first use. */
static struct gw_consumer *
consumer_get(struct gw_session *s, struct gw_queue *q)
{
    struct gw_consumer *c;

    for (c = s->consumers; c != NULL; c = c->snext)
        if (c->queue == q)
            return c;
    c = gw_xcalloc(1, sizeof(*c));
    c->queue = q;
    c->queue_name = gw_xstrdup(q->name);
    c->session = s;
    c->snext = s->consumers;
    s->consumers = c;
    DL_APPEND2(q->consumers, c, qprev, qnext);
    gw_bcast_consumer_joined(q, c);
    return c;
}

/* Session and queue of a consumer request. */
static int
consumer_request(struct gw_broker *b, uint64_t conn_id,
                 const scimq_proto_str_t *name, struct gw_link **l_p,
                 struct gw_queue **q_p)
{
    int rc = gw_queue_name_check(name);

    if (rc != 0)
        return rc;
    *l_p = link_find(b, conn_id);
    if (*l_p == NULL)
        return SCIMQ_ESTATE;
    *q_p = gw_queue_find_str(b, name);
    return *q_p == NULL ? SCIMQ_ENOENT : 0;
}

static uint64_t
add_sat(uint64_t a, uint64_t x, uint64_t max)
{
    return a + x < a || a + x > max ? max : a + x;
}

int
gw_broker_get(struct gw_broker *b, uint64_t now, uint64_t conn_id,
              const scimq_proto_frame_t *f, struct gw_actions *out)
{
    const typeof(f->args.get) *a = &f->args.get;
    struct gw_consumer *c;
    struct gw_queue *q;
    struct gw_link *l;
    int rc = consumer_request(b, conn_id, &a->queue, &l, &q);

    if (rc != 0)
        return rc;
    gw_event_begin(b, now, out);
    c = consumer_get(l->session, q);
    c->request_id = f->request_id;
    c->stream_rid[l->stream] = f->request_id;
    c->eos_owed |= 1ull << l->stream; /* answered at once when drained */
    c->credit_msgs = add_sat(c->credit_msgs, a->credit_msgs, UINT32_MAX);
    c->credit_bytes = add_sat(c->credit_bytes, a->credit_bytes, UINT64_MAX);
    gw_dispatch_consumer_update(b, c);
    gw_queue_touch(b, q);
    gw_event_end(b);
    return 0;
}

int
gw_broker_limit(struct gw_broker *b, uint64_t now, uint64_t conn_id,
                const scimq_proto_frame_t *f, struct gw_actions *out)
{
    struct gw_consumer *c;
    struct gw_queue *q;
    struct gw_link *l;
    int rc = consumer_request(b, conn_id, &f->args.limit.queue, &l, &q);

    if (rc != 0)
        return rc;
    if (l->session->version < 2)
        return SCIMQ_ESTATE;
    gw_event_begin(b, now, out);
    c = consumer_get(l->session, q);
    c->max_message = f->args.limit.max_message;
    gw_queue_touch(b, q);
    gw_event_end(b);
    return 0;
}

bool
gw_broker_settle(struct gw_broker *b, uint64_t now, uint64_t conn_id,
                 const scimq_proto_frame_t *f, struct gw_actions *out)
{
    uint64_t id = f->args.ack.delivery_id; /* first field of all three */
    struct gw_delivery *d = gw_lease_find(b, id);
    struct gw_link *l = link_find(b, conn_id);
    struct gw_queue *q;

    /* Unknown, settled, expired or another session's: ignored. */
    if (d == NULL || l == NULL || d->session != l->session ||
        d->msg->queue->kind != SCIMQ_PROTO_QUEUE_GUARANTEED) {
        b->settlements_ignored++;
        return false;
    }
    gw_event_begin(b, now, out);
    q = d->msg->queue;
    switch (f->opcode) {
    case SCIMQ_PROTO_OP_EXTEND:
        gw_lease_extend(b, d, f->args.extend.lease_ms);
        break;
    case SCIMQ_PROTO_OP_NACK:
        q->c.nacked++;
        if (f->args.nack.requeue)
            gw_lease_unlease(b, d, f->args.nack.delay_ms);
        else
            gw_queue_dead_letter(b, gw_lease_end(b, d), GW_DEAD_NACK);
        break;
    default: /* ACK */
        /* A control message counts once, when its last copy is settled. */
        if (!gw_bcast_is_copy(d->msg))
            q->c.acked++;
        gw_queue_msg_free(b, gw_lease_end(b, d));
        break;
    }
    gw_event_end(b);
    return true;
}

void
gw_broker_written(struct gw_broker *b, uint64_t now, uint64_t conn_id,
                  struct gw_payload *pl, uint64_t bytes, struct gw_actions *out)
{
    struct gw_link *l = link_find(b, conn_id);

    gw_event_begin(b, now, out);
    if (l != NULL) {
        struct gw_stream *st = &l->session->streams[l->stream];

        st->bytes_queued -= bytes < st->bytes_queued ? bytes : st->bytes_queued;
    }
    gw_store_unpin(&b->store, pl, out);
    gw_event_end(b);
}

void
gw_broker_io_done(struct gw_broker *b, uint64_t now,
                  const struct gw_action *job, int rc, struct gw_actions *out)
{
    struct gw_payload *pl = job->payload;

    gw_event_begin(b, now, out);
    if (job->kind == GW_ACT_JOURNAL_APPEND) {
        gw_durable_appended(b, job, rc);
    } else if (gw_store_loaded(&b->store, pl, rc, now, out)) {
        gw_dispatch_loaded(b, pl);
        gw_compact_loaded(b, pl);
    }
    gw_event_end(b);
}

void
gw_broker_tick(struct gw_broker *b, uint64_t now, struct gw_actions *out)
{
    gw_event_begin(b, now, out);
    gw_lease_expire_due(b);
    gw_queue_delays_due(b);
    gw_store_tick(&b->store, now, out);
    gw_event_end(b);
}

void
gw_broker_drain(struct gw_broker *b)
{
    b->draining = true;
}

uint64_t
gw_broker_leased(const struct gw_broker *b)
{
    const struct gw_queue *q, *qt;
    uint64_t n = 0;

    HASH_ITER(hh, b->queues, q, qt) n += q->n_leased;
    return n;
}
