/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <utlist.h>

#include <scimq/error.h>

#include "durable.h"
#include "journal_codec.h"
#include "store.h"

/* Queues an append of an encoded record header (buf, owned from now on)
 * and, for a MSG, the payload's data. */
static void
append(struct gw_broker *b, uint8_t *buf, uint32_t hlen, struct gw_payload *pl,
       bool sync)
{
    struct gw_action *a = gw_action_new(GW_ACT_JOURNAL_APPEND);

    a->buf = buf; /* the journal thread adds the CRC (over the data too) */
    a->hdr_len = hlen;
    a->seq = ++b->j.seq;
    a->sync = sync;
    if (pl != NULL) {
        /* Its bytes are read by the journal thread: they stay put.  A
         * payload being moved keeps its old copy until the new one is in. */
        gw_store_pin(pl);
        if (!pl->moving)
            pl->journal = GW_PLJ_PENDING;
        a->payload = pl;
        a->payload_id = pl->id;
        a->len = pl->len;
        gw_store_give_crc(pl, a);
    }
    b->j.pending_bytes += hlen + a->len;
    gw_actions_push(b->out, a);
}

/* One MSG record for the durable messages among msgs[0..n), synced when
 * one of their queues (or force_sync) asks for it.  False: none of them is
 * durable, nothing is written. */
static bool
append_msg(struct gw_broker *b, struct gw_payload *pl,
           struct gw_msg *const *msgs, size_t n, bool force_sync)
{
    struct gw_jrec_target targets[GW_JREC_MAX_TARGETS];
    uint16_t nt = 0;
    uint32_t hlen;
    uint8_t *buf;
    bool sync = false;

    for (size_t i = 0; i < n && nt < GW_JREC_MAX_TARGETS; i++) {
        if (!gw_durable_queue(msgs[i]->queue))
            continue;
        targets[nt].qid = msgs[i]->queue->qid;
        targets[nt].msg_id = msgs[i]->id;
        targets[nt].attempt = msgs[i]->attempt;
        nt++;
        sync =
            sync || force_sync || msgs[i]->queue->durability == GW_DURABLE_SYNC;
    }
    if (nt == 0)
        return false;
    buf = gw_store_msg_header(pl, targets, nt, &hlen);
    append(b, buf, hlen, pl, sync);
    return true;
}

bool
gw_durable_journal_full(const struct gw_broker *b, const struct gw_queue *q,
                        uint64_t len)
{
    bool durable = gw_durable_queue(q);

    for (const struct gw_binding *bd = q->bindings; bd; bd = bd->next)
        durable = durable || gw_durable_queue(bd->target);
    return b->j.on && durable &&
           b->store.j_bytes + b->j.pending_bytes + len > b->set.disk_limit;
}

bool
gw_durable_put(struct gw_broker *b, struct gw_payload *pl,
               struct gw_msg *const *msgs, size_t n, int worker,
               uint64_t conn_id, uint64_t request_id, bool reply)
{
    struct gw_confirm *c;
    bool any = false;

    for (size_t i = 0; i < n; i++)
        any = any || gw_durable_queue(msgs[i]->queue);
    if (!b->j.on || !any)
        return false;
    append_msg(b, pl, msgs, n, false);
    c = gw_xcalloc(1, sizeof(*c));
    c->seq = b->j.seq;
    c->worker = worker;
    c->conn_id = conn_id;
    c->request_id = request_id;
    c->msg_id = msgs[0]->id;
    c->reply = reply;
    if (b->j.confirms_tail)
        b->j.confirms_tail->next = c;
    else
        b->j.confirms = c;
    b->j.confirms_tail = c;
    return true;
}

bool
gw_durable_move(struct gw_broker *b, struct gw_payload *pl)
{
    struct gw_msg *msgs[GW_JREC_MAX_TARGETS], *m;
    size_t n = 0;

    DL_FOREACH2(pl->msgs, m, pl_next)
    {
        if (gw_durable_queue(m->queue) && n < GW_JREC_MAX_TARGETS)
            msgs[n++] = m;
    }
    /* Synced: the old segment goes once this is in, whatever the
     * durability of the queues (a crash must find one copy). */
    return n > 0 && append_msg(b, pl, msgs, n, true);
}

static void
append_small(struct gw_broker *b, enum gw_jrec_type type,
             const struct gw_msg *m)
{
    struct gw_jrec r = {.type = type};
    uint32_t hlen;
    uint8_t *buf;

    r.one.qid = m->queue->qid;
    r.one.msg_id = m->id;
    r.payload_id = m->payload->id;
    r.attempt = m->attempt;
    hlen = (uint32_t) gw_jrec_header_len(&r);
    buf = gw_xcalloc(1, hlen);
    gw_jrec_encode(&r, buf);
    append(b, buf, hlen, NULL, false);
}

void
gw_durable_enqueue(struct gw_broker *b, const struct gw_msg *m)
{
    struct gw_msg *one = (struct gw_msg *) m;

    if (!b->j.on || !gw_durable_queue(m->queue))
        return;
    if (m->payload->journal != GW_PLJ_NONE) {
        append_small(b, GW_JREC_ENQUEUE, m);
    } else {
        /* From a memory queue, never spilled (so still in memory): its
         * bytes go to the journal now. */
        append_msg(b, m->payload, &one, 1, false);
    }
}

void
gw_durable_attempt(struct gw_broker *b, const struct gw_msg *m)
{
    if (b->j.on && gw_durable_queue(m->queue))
        append_small(b, GW_JREC_ATTEMPT, m);
}

void
gw_durable_settle(struct gw_broker *b, const struct gw_msg *m)
{
    if (b->j.on && gw_durable_queue(m->queue))
        append_small(b, GW_JREC_SETTLE, m);
}

json_t *
gw_durable_topology_json(const struct gw_broker *b)
{
    json_t *queues = json_array(), *binds = json_array();
    const struct gw_queue *q, *qt;

    HASH_ITER(hh, b->queues, q, qt)
    {
        json_array_append_new(
            queues, json_pack("{s:I, s:s, s:i, s:I, s:I, s:I, s:s?, s:b, s:s}",
                              "qid", (json_int_t) q->qid, "name", q->name,
                              "kind", (int) q->kind, "ack_timeout_ms",
                              (json_int_t) q->ack_timeout_ms, "max_attempts",
                              (json_int_t) q->max_attempts, "max_bytes",
                              (json_int_t) q->max_bytes, "dead_letter",
                              q->dead_letter, "closed", q->closed, "durability",
                              gw_durability_name(q->durability)));
        for (const struct gw_binding *bd = q->bindings; bd; bd = bd->next)
            json_array_append_new(binds,
                                  json_pack("[I, I]", (json_int_t) q->qid,
                                            (json_int_t) bd->target->qid));
    }
    return json_pack("{s:i, s:I, s:o, s:o}", "version", GW_JREC_FORMAT,
                     "next_qid", (json_int_t) b->j.next_qid, "queues", queues,
                     "bindings", binds);
}

void
gw_durable_topology(struct gw_broker *b)
{
    struct gw_action *a;
    json_t *doc;

    if (!b->j.on)
        return;
    doc = gw_durable_topology_json(b);
    a = gw_action_new(GW_ACT_JOURNAL_TOPOLOGY);
    a->text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(doc);
    if (a->text == NULL) {
        gw_action_free(a);
        GW_NOTE(b->out, SCIMQ_LOG_ERROR, GATEWAY,
                "out of memory for the queue topology: not journaled");
        return;
    }
    gw_actions_push(b->out, a);
}

/* The PUT_OK (or ERROR) waiting for append seq, if any. */
static void
confirm(struct gw_broker *b, uint64_t seq, int rc)
{
    struct gw_confirm **pp = &b->j.confirms, *c, *prev = NULL;
    struct gw_action *a;

    while (*pp != NULL && (*pp)->seq != seq) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if ((c = *pp) == NULL)
        return;
    *pp = c->next;
    if (b->j.confirms_tail == c)
        b->j.confirms_tail = prev;
    if (c->reply || rc != 0) {
        a = gw_action_new(rc == 0 ? GW_ACT_PUT_OK : GW_ACT_ERROR);
        a->worker = c->worker;
        a->conn_id = c->conn_id;
        a->request_id = c->request_id;
        a->msg_id = c->msg_id;
        a->code = rc;
        if (rc != 0 && asprintf(&a->text,
                                "journal: %s; the message is queued in "
                                "memory only",
                                scimq_strerror(rc)) < 0)
            a->text = NULL;
        gw_actions_push(b->out, a);
    }
    free(c);
}

void
gw_durable_appended(struct gw_broker *b, const struct gw_action *job, int rc)
{
    struct gw_payload *pl = job->payload;

    if (job->spill) {
        gw_store_spilled(&b->store, pl, job->seg, job->off,
                         job->hdr_len + job->len, rc, b->now, b->out);
        return;
    }
    b->j.pending_bytes -= job->hdr_len + job->len;
    if (rc == 0) {
        b->j.c.appends++;
        b->j.c.append_bytes += job->hdr_len + job->len;
        if (pl != NULL && pl->moving) {
            b->j.c.moved_payloads++;
            b->j.c.moved_bytes += pl->len;
        }
        gw_store_journal_written(&b->store, pl, job->seg, job->off,
                                 job->hdr_len + job->len, b->out);
    } else {
        b->j.c.append_errors++;
        if (pl != NULL && pl->moving) {
            b->j.c.move_errors++;
            gw_store_move_failed(&b->store, pl);
            /* Compaction waits a while before it tries again. */
            b->j.compact_retry_at = b->now + GW_STORE_RETRY_MAX_MS;
        } else if (pl != NULL) {
            pl->journal = GW_PLJ_NONE;
        }
        GW_NOTE_SPARSE(b->out, SCIMQ_LOG_ERROR, GATEWAY, 10000,
                       "journal append failed: %s (%" PRIu64 " errors so far)",
                       scimq_strerror(rc), b->j.c.append_errors);
    }
    confirm(b, job->seq, rc);
    if (pl != NULL)
        gw_store_unpin(&b->store, pl, b->out);
}
