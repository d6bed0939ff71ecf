/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Queue administration: declare, delete, bind / unbind, close, move.
 * The entry points are declared in broker.h with the other events.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utlist.h>

#include <scimq/error.h>

#include "bcast.h"
#include "broker.h"
#include "dispatch.h"
#include "durable.h"
#include "lease.h"
#include "queue.h"
#include "records.h"
#include "store.h"

static bool
str_eq(const char *s, const scimq_proto_str_t *p)
{
    return s != NULL && strlen(s) == p->len && memcmp(s, p->ptr, p->len) == 0;
}

/*
 * A queue's durability from QUEUE_DECLARE.kind: the gateway's mode for
 * guaranteed queues unless the declare names one.  Best-effort queues are
 * never journaled; batch and sync need a journal.
 */
static int
declared_durability(const struct gw_broker *b, uint8_t wire,
                    enum gw_durability *d)
{
    unsigned int kind = wire & SCIMQ_PROTO_QUEUE_KIND_MASK;
    unsigned int asked = wire >> SCIMQ_PROTO_QUEUE_DURABILITY_SHIFT;

    if (kind > SCIMQ_PROTO_QUEUE_BEST_EFFORT ||
        asked > SCIMQ_PROTO_DURABILITY_SYNC)
        return SCIMQ_EINVAL;
    if (kind == SCIMQ_PROTO_QUEUE_BEST_EFFORT) {
        *d = GW_DURABLE_MEMORY;
        return asked <= SCIMQ_PROTO_DURABILITY_MEMORY ? 0 : SCIMQ_EINVAL;
    }
    switch (asked) {
    case SCIMQ_PROTO_DURABILITY_DEFAULT:
        *d = b->j.on ? b->j.durability : GW_DURABLE_MEMORY;
        return 0;
    case SCIMQ_PROTO_DURABILITY_MEMORY:
        *d = GW_DURABLE_MEMORY;
        return 0;
    default:
        *d = asked == SCIMQ_PROTO_DURABILITY_SYNC ? GW_DURABLE_SYNC
                                                  : GW_DURABLE_BATCH;
        return b->j.on ? 0 : SCIMQ_ENOTSUP;
    }
}

int
gw_broker_declare(struct gw_broker *b, uint64_t now,
                  const scimq_proto_frame_t *f, uint64_t *created_p,
                  struct gw_actions *out)
{
    const typeof(f->args.declare) *a = &f->args.declare;
    uint32_t timeout =
        a->ack_timeout_ms ? a->ack_timeout_ms : b->set.ack_timeout_ms;
    uint8_t kind = a->kind & SCIMQ_PROTO_QUEUE_KIND_MASK;
    enum gw_durability durability;
    struct gw_queue *q;
    int rc = gw_queue_name_check(&a->queue);

    *created_p = 0;
    if (rc == 0 && a->dead_letter.len > 0)
        rc = gw_queue_name_check(&a->dead_letter);
    if (rc == 0)
        rc = declared_durability(b, a->kind, &durability);
    if (rc != 0)
        return rc;
    q = gw_queue_find_str(b, &a->queue);
    if (q != NULL) {
        bool same_dlq = (q->dead_letter == NULL && a->dead_letter.len == 0) ||
                        str_eq(q->dead_letter, &a->dead_letter);

        return q->kind == kind && q->durability == durability &&
                       q->ack_timeout_ms == timeout &&
                       q->max_attempts == a->max_attempts &&
                       q->max_bytes == a->max_bytes && same_dlq
                   ? 0
                   : SCIMQ_EEXIST;
    }
    if (a->dead_letter.len > 0) {
        /* The dead-letter queue must exist and be another queue. */
        if (a->dead_letter.len == a->queue.len &&
            memcmp(a->dead_letter.ptr, a->queue.ptr, a->queue.len) == 0)
            return SCIMQ_EINVAL;
        if (gw_queue_find_str(b, &a->dead_letter) == NULL)
            return SCIMQ_ENOENT;
    }
    gw_event_begin(b, now, out);
    q = gw_xcalloc(1, sizeof(*q));
    q->qid = ++b->j.next_qid;
    q->durability = durability;
    q->name = gw_xstrndup(a->queue.ptr, a->queue.len);
    q->kind = kind;
    q->ack_timeout_ms = timeout;
    q->max_attempts = a->max_attempts;
    q->max_bytes = a->max_bytes;
    if (a->dead_letter.len > 0)
        q->dead_letter = gw_xstrndup(a->dead_letter.ptr, a->dead_letter.len);
    HASH_ADD_KEYPTR(hh, b->queues, q->name, a->queue.len, q);
    /* Consumers of a deleted queue of that name take it up again. */
    for (struct gw_session *s = b->sessions; s != NULL; s = s->hh.next) {
        for (struct gw_consumer *c = s->consumers; c != NULL; c = c->snext) {
            if (c->queue == NULL && strcmp(c->queue_name, q->name) == 0) {
                c->queue = q;
                DL_APPEND2(q->consumers, c, qprev, qnext);
                gw_dispatch_consumer_update(b, c);
            }
        }
    }
    GW_NOTE(out, SCIMQ_LOG_INFO, QUEUE,
            "queue %s declared (%s, ack timeout %u ms, durability %s)", q->name,
            q->kind ? "best-effort" : "guaranteed", timeout,
            gw_durability_name(q->durability));
    *created_p = 1;
    gw_durable_topology(b);
    gw_event_end(b);
    return 0;
}

static void
bindings_drop_target(struct gw_broker *b, struct gw_queue *target)
{
    struct gw_queue *o, *ot;

    HASH_ITER(hh, b->queues, o, ot)
    {
        struct gw_binding **pp = &o->bindings;

        while (*pp != NULL) {
            if ((*pp)->target == target) {
                struct gw_binding *bd = *pp;

                *pp = bd->next;
                free(bd);
            } else {
                pp = &(*pp)->next;
            }
        }
    }
}

static void
dirty_remove(struct gw_broker *b, struct gw_queue *q)
{
    struct gw_queue **pp = &b->dirty;

    while (*pp != NULL && *pp != q)
        pp = &(*pp)->dirty_next;
    if (*pp == q)
        *pp = q->dirty_next;
    q->dirty = false;
}

int
gw_broker_delete(struct gw_broker *b, uint64_t now,
                 const scimq_proto_str_t *name, uint64_t *discarded_p,
                 struct gw_actions *out)
{
    struct gw_queue *q = gw_queue_find_str(b, name);
    struct gw_consumer *c, *ct;
    struct gw_msg *m, *mt;
    uint64_t n = 0;

    if (q == NULL)
        return SCIMQ_ENOENT;
    gw_event_begin(b, now, out);
    DL_FOREACH_SAFE(q->leased, m, mt)
    {
        gw_queue_msg_free(b, gw_lease_end(b, m->delivery));
        n++;
    }
    DL_FOREACH_SAFE(q->ready, m, mt)
    {
        gw_queue_unlink(q, m);
        gw_queue_msg_free(b, m);
        n++;
    }
    DL_FOREACH_SAFE(q->delayed, m, mt)
    {
        gw_queue_unlink(q, m);
        gw_queue_msg_free(b, m);
        n++;
    }
    if ((m = gw_bcast_drop(q)) != NULL) {
        gw_queue_msg_free(b, m);
        n++;
    }
    /* Its consumers learn it is gone, on the stream of their last GET. */
    DL_FOREACH_SAFE2(q->consumers, c, ct, qnext)
    {
        struct gw_session *s = c->session;

        if (c->active)
            DL_DELETE2(q->active, c, aprev, anext);
        c->active = false;
        DL_DELETE2(q->consumers, c, qprev, qnext);
        c->queue = NULL;
        c->inflight = 0;
        c->eos_owed = 0;
        for (int i = 0; i < s->stream_count; i++) {
            struct gw_action *a;

            if (s->streams[i].conn_id == 0)
                continue;
            a = gw_action_new(GW_ACT_ERROR);
            a->worker = s->streams[i].worker;
            a->conn_id = s->streams[i].conn_id;
            a->request_id = c->request_id;
            a->code = SCIMQ_ENOENT;
            if (asprintf(&a->text, "queue %s deleted", q->name) < 0)
                abort();
            gw_actions_push(out, a);
            break;
        }
    }
    bindings_drop_target(b, q);
    while (q->bindings != NULL) {
        struct gw_binding *bd = q->bindings;

        q->bindings = bd->next;
        free(bd);
    }
    dirty_remove(b, q);
    HASH_DEL(b->queues, q);
    GW_NOTE(out, SCIMQ_LOG_INFO, QUEUE,
            "queue %s deleted (%" PRIu64 " messages)", q->name, n);
    free(q->name);
    free(q->dead_letter);
    free(q);
    *discarded_p = n;
    gw_durable_topology(b);
    gw_event_end(b);
    return 0;
}

int
gw_broker_bind(struct gw_broker *b, uint64_t now,
               const scimq_proto_str_t *queue, const scimq_proto_str_t *target,
               bool bind, struct gw_actions *out)
{
    struct gw_queue *q = gw_queue_find_str(b, queue);
    struct gw_queue *t = gw_queue_find_str(b, target);
    struct gw_binding **pp;
    size_t n = 0;

    if (q == NULL || t == NULL)
        return SCIMQ_ENOENT;
    if (q == t)
        return SCIMQ_EINVAL;
    for (pp = &q->bindings; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->target == t)
            break;
        n++;
    }
    if (bind && *pp == NULL && n >= GW_MAX_BINDINGS)
        return SCIMQ_ENOSPC; /* a PUT's fan-out is bounded */
    if (bind && *pp == NULL) {
        *pp = gw_xcalloc(1, sizeof(**pp));
        (*pp)->target = t;
    } else if (!bind && *pp != NULL) {
        struct gw_binding *bd = *pp;

        *pp = bd->next;
        free(bd);
    } else if (!bind) {
        return SCIMQ_ENOENT;
    }
    gw_event_begin(b, now, out);
    gw_durable_topology(b);
    gw_event_end(b);
    return 0;
}

int
gw_broker_close_queue(struct gw_broker *b, uint64_t now,
                      const scimq_proto_str_t *name, struct gw_actions *out)
{
    struct gw_queue *q = gw_queue_find_str(b, name);

    if (q == NULL)
        return SCIMQ_ENOENT;
    gw_event_begin(b, now, out);
    if (!q->closed)
        GW_NOTE(out, SCIMQ_LOG_INFO, QUEUE, "queue %s closed (end of stream)",
                q->name);
    if (!q->closed) {
        q->closed = true;
        gw_durable_topology(b);
    }
    gw_queue_touch(b, q);
    gw_event_end(b);
    return 0;
}

int
gw_broker_move(struct gw_broker *b, uint64_t now,
               const scimq_proto_str_t *queue, const scimq_proto_str_t *target,
               uint64_t max, uint64_t *moved_p, struct gw_actions *out)
{
    struct gw_queue *q = gw_queue_find_str(b, queue);
    struct gw_queue *t = gw_queue_find_str(b, target);
    uint64_t n = 0;

    if (q == NULL || t == NULL)
        return SCIMQ_ENOENT;
    if (q == t)
        return SCIMQ_EINVAL;
    if (t->closed)
        return SCIMQ_ECLOSED;
    gw_event_begin(b, now, out);
    while (q->ready != NULL && (max == 0 || n < max)) {
        struct gw_msg *m = q->ready;

        gw_queue_unlink(q, m);
        gw_durable_settle(b, m);
        q->bytes -= m->payload->len;
        m->queue = t;
        m->attempt = 0;
        m->state = GW_MSG_READY;
        gw_durable_enqueue(b, m);
        DL_APPEND(t->ready, m);
        t->n_ready++;
        t->bytes += m->payload->len;
        t->c.moved_in++;
        n++;
    }
    *moved_p = n;
    gw_queue_touch(b, q);
    gw_queue_touch(b, t);
    gw_event_end(b);
    return 0;
}
