/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Invariant: a message is in exactly one place: its queue's ready list, its
 * delayed list (and the broker's delay heap), or its leased list with one
 * delivery.  It leaves the gateway only when acknowledged, dead-lettered
 * into another queue, dropped (counted), or deleted with its queue.
 */
#include "config.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <utlist.h>

#include <scimq/error.h>

#include "bcast.h"
#include "durable.h"
#include "queue.h"
#include "store.h"

int
gw_queue_name_check(const scimq_proto_str_t *name)
{
    if (name->len == 0)
        return SCIMQ_EINVAL;
    if (name->len > GW_QUEUE_NAME_MAX)
        return SCIMQ_ENAMETOOLONG;
    for (uint16_t i = 0; i < name->len; i++)
        if ((unsigned char) name->ptr[i] < 0x20 || name->ptr[i] == 0x7f)
            return SCIMQ_EINVAL;
    return 0;
}

struct gw_queue *
gw_queue_find(struct gw_broker *b, const char *name, size_t len)
{
    struct gw_queue *q = NULL;

    HASH_FIND(hh, b->queues, name, len, q);
    return q;
}

struct gw_queue *
gw_queue_find_str(struct gw_broker *b, const scimq_proto_str_t *s)
{
    return gw_queue_find(b, s->ptr, s->len);
}

void
gw_queue_touch(struct gw_broker *b, struct gw_queue *q)
{
    if (q == NULL || q->dirty)
        return;
    q->dirty = true;
    q->dirty_next = b->dirty;
    b->dirty = q;
}

struct gw_msg *
gw_queue_append(struct gw_broker *b, struct gw_queue *q, struct gw_payload *pl)
{
    return gw_queue_insert(b, q, pl, ++b->next_msg_id, 0);
}

struct gw_msg *
gw_queue_insert(struct gw_broker *b, struct gw_queue *q, struct gw_payload *pl,
                uint64_t msg_id, uint32_t attempt)
{
    struct gw_msg *m = gw_xcalloc(1, sizeof(*m));

    m->id = msg_id;
    m->attempt = attempt;
    m->payload = pl;
    m->queue = q;
    m->state = GW_MSG_READY;
    gw_heap_node_init(&m->delay);
    gw_store_ref(pl);
    DL_APPEND2(pl->msgs, m, pl_prev, pl_next);
    DL_APPEND(q->ready, m);
    q->n_ready++;
    q->bytes += pl->len;
    gw_queue_touch(b, q);
    return m;
}

void
gw_queue_unlink(struct gw_queue *q, struct gw_msg *m)
{
    switch (m->state) {
    case GW_MSG_READY:
        DL_DELETE(q->ready, m);
        q->n_ready--;
        break;
    case GW_MSG_DELAYED:
        DL_DELETE(q->delayed, m);
        q->n_delayed--;
        break;
    case GW_MSG_LEASED:
        DL_DELETE(q->leased, m);
        q->n_leased--;
        break;
    case GW_MSG_BCAST:
        break; /* on none of q's lists */
    }
    m->prev = m->next = NULL;
}

void
gw_queue_lease(struct gw_queue *q, struct gw_msg *m)
{
    m->state = GW_MSG_LEASED;
    DL_APPEND(q->leased, m);
    q->n_leased++;
}

void
gw_queue_msg_free(struct gw_broker *b, struct gw_msg *m)
{
    if (gw_bcast_is_copy(m)) {
        /* One consumer is done with a control message. */
        gw_queue_touch(b, m->queue);
        gw_bcast_copy_settled(m);
        return;
    }
    gw_durable_settle(b, m);
    m->queue->bytes -= m->payload->len;
    gw_heap_remove(&b->delays, &m->delay);
    DL_DELETE2(m->payload->msgs, m, pl_prev, pl_next);
    gw_store_unref(&b->store, m->payload, b->out);
    gw_queue_touch(b, m->queue);
    free(m);
}

void
gw_queue_dead_letter(struct gw_broker *b, struct gw_msg *m,
                     enum gw_dead_reason why)
{
    static const char *const reasons[] = {
        [GW_DEAD_NACK] = "rejected by its consumer",
        [GW_DEAD_ATTEMPTS] = "attempts used up",
        [GW_DEAD_TOO_LARGE] = "larger than every consumer accepts",
    };
    struct gw_queue *q = m->queue;
    struct gw_queue *dlq = NULL;

    if (gw_bcast_is_copy(m)) {
        /* Its consumer refused it: that consumer is done with it (the
         * control message itself is not dead-lettered). */
        gw_queue_msg_free(b, m);
        return;
    }
    if (q->dead_letter != NULL)
        dlq = gw_queue_find(b, q->dead_letter, strlen(q->dead_letter));
    q->c.dead_lettered++;
    if (why == GW_DEAD_TOO_LARGE)
        q->c.too_large++;
    if (dlq != NULL && dlq != q) {
        gw_durable_enqueue(b, gw_queue_append(b, dlq, m->payload));
        dlq->c.put++;
        dlq->c.put_bytes += m->payload->len;
        GW_NOTE_SPARSE(b->out, SCIMQ_LOG_WARN, QUEUE, 10000,
                       "queue %s: message %" PRIu64 " (%" PRIu64
                       " B, attempt %u) dead-lettered to %s: %s",
                       q->name, m->id, m->payload->len, m->attempt, dlq->name,
                       reasons[why]);
    } else {
        q->c.dropped++;
        GW_NOTE_SPARSE(b->out, SCIMQ_LOG_WARN, QUEUE, 10000,
                       "queue %s: message %" PRIu64 " (%" PRIu64
                       " B, attempt %u) dropped, no dead-letter queue: %s",
                       q->name, m->id, m->payload->len, m->attempt,
                       reasons[why]);
    }
    gw_queue_msg_free(b, m);
}

void
gw_queue_requeue(struct gw_broker *b, struct gw_msg *m, uint32_t delay_ms)
{
    struct gw_queue *q = m->queue;

    if (q->max_attempts > 0 && m->attempt >= q->max_attempts) {
        gw_queue_dead_letter(b, m, GW_DEAD_ATTEMPTS);
        return;
    }
    q->c.redelivered++;
    if (gw_bcast_is_copy(m)) {
        /* Again to the same consumer, as soon as it has credit. */
        gw_bcast_copy_back(m);
        gw_queue_touch(b, q);
        return;
    }
    if (delay_ms > 0) {
        m->state = GW_MSG_DELAYED;
        DL_APPEND(q->delayed, m);
        q->n_delayed++;
        gw_heap_push(&b->delays, &m->delay, b->now + delay_ms);
        return;
    }
    m->state = GW_MSG_READY;
    DL_PREPEND(q->ready, m);
    q->n_ready++;
    gw_queue_touch(b, q);
}

void
gw_queue_delays_due(struct gw_broker *b)
{
    struct gw_heap_node *n;

    while ((n = gw_heap_pop_due(&b->delays, b->now)) != NULL) {
        struct gw_msg *m =
            (struct gw_msg *) ((char *) n - offsetof(struct gw_msg, delay));
        struct gw_queue *q = m->queue;

        gw_queue_unlink(q, m);
        m->state = GW_MSG_READY;
        DL_APPEND(q->ready, m);
        q->n_ready++;
        gw_queue_touch(b, q);
    }
}

static int
put_check_one(const struct gw_queue *q, uint64_t len)
{
    if (q->closed)
        return SCIMQ_ECLOSED;
    if (q->max_bytes > 0 && len > q->max_bytes)
        return SCIMQ_EMSGSIZE;
    if (q->max_bytes > 0 && q->kind == SCIMQ_PROTO_QUEUE_GUARANTEED &&
        q->bytes + len > q->max_bytes)
        return SCIMQ_ENOSPC;
    return 0;
}

int
gw_queue_put_check(const struct gw_queue *q, uint64_t len)
{
    int rc = put_check_one(q, len);

    /* All or nothing: every bound target must take it too. */
    for (struct gw_binding *bd = q->bindings; rc == 0 && bd != NULL;
         bd = bd->next)
        rc = put_check_one(bd->target, len);
    return rc;
}

void
gw_queue_make_room(struct gw_broker *b, struct gw_queue *q, uint64_t len)
{
    if (q->kind != SCIMQ_PROTO_QUEUE_BEST_EFFORT || q->max_bytes == 0)
        return;
    while (q->ready != NULL && q->bytes + len > q->max_bytes) {
        struct gw_msg *m = q->ready;

        gw_queue_unlink(q, m);
        q->c.dropped++;
        gw_queue_msg_free(b, m);
    }
}
