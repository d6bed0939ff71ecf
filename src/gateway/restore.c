/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rebuilding the broker from the journal (recovery.c reads it), before the
 * gateway serves: queues with their settings and ids, bindings, and every
 * message that was queued and not settled, in message-id order per queue,
 * with its attempt count.  Payloads are restored as "in the journal": their
 * bytes are read back when they are delivered, so recovery holds no payload
 * in memory.  Nothing here writes to the journal.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <scimq/error.h>

#include "broker.h"
#include "durable.h"
#include "queue.h"
#include "records.h"
#include "store.h"

static struct gw_queue *
by_qid(struct gw_broker *b, uint64_t qid)
{
    struct gw_queue *q, *qt;

    HASH_ITER(hh, b->queues, q, qt)
    if (q->qid == qid)
        return q;
    return NULL;
}

int
gw_broker_restore_queue(struct gw_broker *b, const struct gw_restored_queue *r)
{
    struct gw_queue *q;
    size_t len = strlen(r->name);

    if (len == 0 || len > 255 || by_qid(b, r->qid) != NULL)
        return SCIMQ_EINVAL;
    HASH_FIND(hh, b->queues, r->name, len, q);
    if (q != NULL)
        return SCIMQ_EEXIST;
    q = gw_xcalloc(1, sizeof(*q));
    q->qid = r->qid;
    q->name = gw_xstrdup(r->name);
    q->kind =
        r->kind ? SCIMQ_PROTO_QUEUE_BEST_EFFORT : SCIMQ_PROTO_QUEUE_GUARANTEED;
    q->ack_timeout_ms = r->ack_timeout_ms;
    q->max_attempts = r->max_attempts;
    q->max_bytes = r->max_bytes;
    if (r->dead_letter != NULL && r->dead_letter[0] != '\0')
        q->dead_letter = gw_xstrdup(r->dead_letter);
    q->closed = r->closed;
    q->durability = (enum gw_durability) r->durability;
    HASH_ADD_KEYPTR(hh, b->queues, q->name, len, q);
    if (r->qid >= b->j.next_qid)
        b->j.next_qid = r->qid;
    return 0;
}

int
gw_broker_restore_binding(struct gw_broker *b, uint64_t qid, uint64_t target)
{
    struct gw_queue *q = by_qid(b, qid), *t = by_qid(b, target);
    struct gw_binding *bd;

    if (q == NULL || t == NULL || q == t)
        return SCIMQ_ENOENT;
    bd = gw_xcalloc(1, sizeof(*bd));
    bd->target = t;
    bd->next = q->bindings;
    q->bindings = bd;
    return 0;
}

bool
gw_broker_restore_has_queue(struct gw_broker *b, uint64_t qid)
{
    return by_qid(b, qid) != NULL;
}

struct gw_payload *
gw_broker_restore_payload(struct gw_broker *b, uint64_t payload_id,
                          const struct gw_restored_block *blocks,
                          uint32_t block_count, uint64_t len, uint64_t seg,
                          uint64_t off, bool control)
{
    struct gw_payload *pl = gw_xcalloc(1, sizeof(*pl));
    size_t names = 0;

    for (uint32_t i = 0; i < block_count; i++)
        names += blocks[i].name_len;
    pl->names = gw_xcalloc(1, names + 1);
    if (block_count > 0)
        pl->blocks = gw_xcalloc(block_count, sizeof(*pl->blocks));
    names = 0;
    for (uint32_t i = 0; i < block_count; i++) {
        pl->blocks[i].name = pl->names + names;
        pl->blocks[i].name_len = blocks[i].name_len;
        pl->blocks[i].len = blocks[i].len;
        memcpy(pl->names + names, blocks[i].name, blocks[i].name_len);
        names += blocks[i].name_len;
    }
    pl->id = payload_id;
    pl->len = len;
    pl->block_count = block_count;
    pl->control = control;
    pl->where = GW_PL_DISK;
    gw_heap_node_init(&pl->retry);
    if (payload_id > b->store.next_payload_id)
        b->store.next_payload_id = payload_id;
    gw_store_journal_written(&b->store, pl, seg, off, 0, b->out);
    b->j.c.recovered_bytes += len;
    return pl;
}

int
gw_broker_restore_msg(struct gw_broker *b, uint64_t qid, uint64_t msg_id,
                      struct gw_payload *pl, uint32_t attempt)
{
    struct gw_queue *q = by_qid(b, qid);

    if (q == NULL)
        return SCIMQ_ENOENT;
    gw_queue_insert(b, q, pl, msg_id, attempt);
    if (msg_id > b->next_msg_id)
        b->next_msg_id = msg_id;
    b->j.c.recovered_messages++;
    return 0;
}

void
gw_broker_restore_begin(struct gw_broker *b, struct gw_actions *out)
{
    gw_event_begin(b, 0, out);
    /* Segments are counted before the payloads in them are all known. */
    b->store.restoring = true;
}

void
gw_broker_restore_end(struct gw_broker *b, const struct gw_restore_totals *t)
{
    if (t->next_msg_id > b->next_msg_id)
        b->next_msg_id = t->next_msg_id;
    if (t->next_payload_id > b->store.next_payload_id)
        b->store.next_payload_id = t->next_payload_id;
    if (t->next_qid > b->j.next_qid)
        b->j.next_qid = t->next_qid;
    for (uint64_t s = 0; s < t->n_segments; s++)
        gw_store_journal_written(&b->store, NULL, t->segments[s].seg, 0,
                                 t->segments[s].bytes, b->out);
    b->j.c.recovered_queues = HASH_COUNT(b->queues);
    b->j.c.recovered_segments = t->n_segments;
    b->j.c.truncated_bytes = t->truncated_bytes;
    if (t->rewrite_topology)
        gw_durable_topology(b);
    /* New records go to a segment of their own; the old segments with
     * nothing left in them go now. */
    b->store.restoring = false;
    gw_store_journal_written(&b->store, NULL, t->first_new_segment, 0, 0,
                             b->out);
    gw_event_end(b);
}
