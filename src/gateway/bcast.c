/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdlib.h>

#include <utlist.h>

#include "bcast.h"

/* A copy of q's control message for consumer c, unless c's session
 * could not tell a control message from data or c has one already. */
static void
copy_for(struct gw_queue *q, struct gw_consumer *c)
{
    struct gw_msg *m = q->bc_msg, *copy;

    if (c->session->version < SCIMQ_PROTO_SESSION_VERSION_CONTROL ||
        c->bc_seq == q->bc_seq)
        return;
    copy = gw_xcalloc(1, sizeof(*copy));
    copy->id = m->id;
    copy->payload = m->payload; /* m's reference covers the copies */
    copy->queue = q;
    copy->attempt = m->attempt;
    copy->state = GW_MSG_BCAST;
    gw_heap_node_init(&copy->delay);
    copy->copy_of = m;
    copy->copy_for = c;
    c->bc_seq = q->bc_seq;
    DL_APPEND(q->bc_pending, copy);
    q->bc_left++;
}

void
gw_bcast_begin(struct gw_queue *q, struct gw_msg *m)
{
    struct gw_consumer *c;

    m->state = GW_MSG_BCAST;
    q->bc_msg = m;
    q->bc_left = 0;
    q->bc_seq++;
    DL_FOREACH2(q->consumers, c, qnext)
    {
        copy_for(q, c);
    }
}

void
gw_bcast_consumer_joined(struct gw_queue *q, struct gw_consumer *c)
{
    if (q->bc_msg != NULL)
        copy_for(q, c);
}

static bool
can_take(const struct gw_consumer *c)
{
    return c->credit_msgs > 0 && c->session->connected > 0;
}

struct gw_msg *
gw_bcast_next_copy(struct gw_queue *q)
{
    struct gw_msg *copy, *tmp;

    DL_FOREACH_SAFE(q->bc_pending, copy, tmp)
    {
        const struct gw_consumer *c = copy->copy_for;

        if (c->max_message > 0 && copy->payload->len > c->max_message) {
            DL_DELETE(q->bc_pending, copy);
            gw_bcast_copy_settled(copy);
            continue;
        }
        if (!can_take(c))
            continue;
        DL_DELETE(q->bc_pending, copy);
        copy->prev = copy->next = NULL;
        return copy;
    }
    return NULL;
}

struct gw_msg *
gw_bcast_finished(struct gw_queue *q)
{
    struct gw_msg *m = q->bc_msg;

    if (m == NULL || q->bc_left > 0)
        return NULL;
    q->bc_msg = NULL;
    return m;
}

void
gw_bcast_copy_settled(struct gw_msg *copy)
{
    struct gw_queue *q = copy->queue;

    if (q->bc_left > 0)
        q->bc_left--;
    free(copy);
}

void
gw_bcast_copy_back(struct gw_msg *copy)
{
    copy->state = GW_MSG_BCAST;
    DL_APPEND(copy->queue->bc_pending, copy);
}

/* Settles q's waiting copies for consumer c, or all of them (c NULL). */
static void
settle_waiting(struct gw_queue *q, const struct gw_consumer *c)
{
    struct gw_msg *copy, *tmp;

    DL_FOREACH_SAFE(q->bc_pending, copy, tmp)
    {
        if (c != NULL && copy->copy_for != c)
            continue;
        DL_DELETE(q->bc_pending, copy);
        gw_bcast_copy_settled(copy);
    }
}

void
gw_bcast_consumer_gone(struct gw_consumer *c)
{
    if (c->queue != NULL)
        settle_waiting(c->queue, c);
}

struct gw_msg *
gw_bcast_drop(struct gw_queue *q)
{
    struct gw_msg *m = q->bc_msg;

    settle_waiting(q, NULL);
    q->bc_msg = NULL;
    q->bc_left = 0;
    return m;
}
