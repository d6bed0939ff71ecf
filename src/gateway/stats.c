/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "stats.h"

static bool
selected(const struct gw_queue *q, enum gw_snap_filter filter,
         const scimq_proto_str_t *name)
{
    size_t len = strlen(q->name);

    if (filter == GW_SNAP_ALL || name == NULL || name->len == 0)
        return true;
    if (filter == GW_SNAP_NAME && len != name->len)
        return false;
    return len >= name->len && memcmp(q->name, name->ptr, name->len) == 0;
}

void
gw_stats_snapshot(const struct gw_broker *b, enum gw_snap_filter filter,
                  const scimq_proto_str_t *name, struct gw_snapshot *s)
{
    const struct gw_queue *q, *qt;
    const struct gw_store *st = &b->store;
    size_t i = 0;

    memset(s, 0, sizeof(*s));
    s->queues = gw_xcalloc(HASH_COUNT(b->queues) + 1, sizeof(*s->queues));
    HASH_ITER(hh, b->queues, q, qt)
    {
        struct gw_queue_snap *qs = &s->queues[i];
        size_t nb = 0;

        s->ready += q->n_ready + q->n_delayed;
        s->in_flight += q->n_leased;
        if (!selected(q, filter, name))
            continue;
        qs->name = gw_xstrdup(q->name);
        if (q->dead_letter != NULL)
            qs->dead_letter = gw_xstrdup(q->dead_letter);
        for (const struct gw_binding *bd = q->bindings; bd; bd = bd->next)
            nb++;
        qs->bindings = gw_xcalloc(nb + 1, sizeof(*qs->bindings));
        for (const struct gw_binding *bd = q->bindings; bd; bd = bd->next)
            qs->bindings[qs->n_bindings++] = gw_xstrdup(bd->target->name);
        for (const struct gw_consumer *c = q->consumers; c; c = c->qnext)
            qs->consumers++;
        qs->kind = q->kind;
        qs->closed = q->closed;
        qs->durability = gw_durability_name(q->durability);
        qs->ready = q->n_ready;
        qs->delayed = q->n_delayed;
        qs->in_flight = q->n_leased;
        qs->bytes = q->bytes;
        qs->ack_timeout_ms = q->ack_timeout_ms;
        qs->max_attempts = q->max_attempts;
        qs->max_bytes = q->max_bytes;
        qs->c = q->c;
        i++;
    }
    s->n_queues = i;
    s->sessions = HASH_COUNT(b->sessions);
    s->settlements_ignored = b->settlements_ignored;
    s->pool_size = st->pool.size;
    s->pool_used = gw_pool_used(&st->pool);
    s->chunk = st->pool.chunk;
    s->prefaulted = atomic_load(&st->pool.prefaulted);
    s->prefault = !st->pool.prefaulting                  ? "off"
                  : atomic_load(&st->pool.prefault_done) ? "done"
                                                         : "running";
    s->resident = st->resident;
    s->spilling = st->mem_spilling;
    s->disk_limit = st->journal ? st->disk_limit : 0;
    s->spill_bytes = st->spill_bytes;
    s->receiving = st->receiving;
    s->max_receiving = st->max_receiving;
    s->parked = st->n_parked;
    s->sc = st->c;
    s->journal = b->j.on;
    s->durability =
        gw_durability_name(b->j.on ? b->j.durability : GW_DURABLE_MEMORY);
    s->j_bytes = st->j_bytes;
    for (const struct gw_segment *g = st->segments; g; g = g->next)
        s->j_segments++;
    s->j_dropped = st->dropped_segments;
    for (const struct gw_confirm *c = b->j.confirms; c; c = c->next)
        s->j_pending_confirms++;
    s->jc = b->j.c;
}

void
gw_snapshot_free(struct gw_snapshot *s)
{
    for (size_t i = 0; i < s->n_queues; i++) {
        struct gw_queue_snap *qs = &s->queues[i];

        for (size_t j = 0; j < qs->n_bindings; j++)
            free(qs->bindings[j]);
        free(qs->bindings);
        free(qs->name);
        free(qs->dead_letter);
    }
    free(s->queues);
    memset(s, 0, sizeof(*s));
}

static json_t *
queue_json(const struct gw_queue_snap *q)
{
    json_t *bind = json_array();

    for (size_t i = 0; i < q->n_bindings; i++)
        json_array_append_new(bind, json_string(q->bindings[i]));
    return json_pack(
        "{s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s?, s:o, "
        "s:s, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
        "s:I}}",
        "name", q->name, "kind",
        q->kind == SCIMQ_PROTO_QUEUE_GUARANTEED ? "guaranteed" : "best-effort",
        "closed", q->closed, "ready", (json_int_t) q->ready, "delayed",
        (json_int_t) q->delayed, "in_flight", (json_int_t) q->in_flight,
        "bytes", (json_int_t) q->bytes, "consumers", (json_int_t) q->consumers,
        "ack_timeout_ms", (json_int_t) q->ack_timeout_ms, "max_attempts",
        (json_int_t) q->max_attempts, "max_bytes", (json_int_t) q->max_bytes,
        "dead_letter", q->dead_letter, "bindings", bind, "durability",
        q->durability, "counters", "put", (json_int_t) q->c.put, "put_bytes",
        (json_int_t) q->c.put_bytes, "delivered", (json_int_t) q->c.delivered,
        "delivered_bytes", (json_int_t) q->c.delivered_bytes, "acked",
        (json_int_t) q->c.acked, "nacked", (json_int_t) q->c.nacked,
        "redelivered", (json_int_t) q->c.redelivered, "expired",
        (json_int_t) q->c.expired, "dead_lettered",
        (json_int_t) q->c.dead_lettered, "too_large",
        (json_int_t) q->c.too_large, "dropped", (json_int_t) q->c.dropped,
        "moved_in", (json_int_t) q->c.moved_in);
}

static json_t *
queues_array(const struct gw_snapshot *s)
{
    json_t *arr = json_array();

    for (size_t i = 0; i < s->n_queues; i++)
        json_array_append_new(arr, queue_json(&s->queues[i]));
    return arr;
}

json_t *
gw_stats_queues_json(const struct gw_snapshot *s)
{
    return json_pack("{s:o}", "queues", queues_array(s));
}

void
gw_stats_broker_json(const struct gw_snapshot *s, json_t *root)
{
    json_object_set_new(root, "sessions",
                        json_integer((json_int_t) s->sessions));
    json_object_set_new(root, "settlements_ignored",
                        json_integer((json_int_t) s->settlements_ignored));
    json_object_set_new(root, "payload_allocated",
                        json_integer((json_int_t) s->sc.payload_allocated));
    json_object_set_new(
        root, "memory",
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:s}", "limit",
                  (json_int_t) s->pool_size, "used", (json_int_t) s->pool_used,
                  "resident", (json_int_t) s->resident, "spilling",
                  (json_int_t) s->spilling, "chunk", (json_int_t) s->chunk,
                  "prefaulted", (json_int_t) s->prefaulted, "prefault",
                  s->prefault));
    /* PUTs being received, against their share (gateway_max_receiving),
     * and how many PUTs had to wait for it. */
    json_object_set_new(json_object_get(root, "memory"), "receiving",
                        json_pack("{s:I, s:I, s:I}", "bytes",
                                  (json_int_t) s->receiving, "limit",
                                  (json_int_t) s->max_receiving, "waits",
                                  (json_int_t) s->sc.receiving_waits));
    json_object_set_new(
        root, "spill",
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "limit",
                  (json_int_t) s->disk_limit, "bytes",
                  (json_int_t) s->spill_bytes, "spilled_total",
                  (json_int_t) s->sc.spilled_bytes, "loaded_total",
                  (json_int_t) s->sc.loaded_bytes, "write_errors",
                  (json_int_t) s->sc.spill_write_errors, "read_errors",
                  (json_int_t) s->sc.spill_read_errors));
    json_object_set_new(root, "totals",
                        json_pack("{s:I, s:I, s:I, s:I}", "ready",
                                  (json_int_t) s->ready, "in_flight",
                                  (json_int_t) s->in_flight, "parked_producers",
                                  (json_int_t) s->parked, "parked_total",
                                  (json_int_t) s->sc.parked_total));
    json_object_set_new(root, "queues", queues_array(s));
    json_object_set_new(
        root, "journal",
        json_pack("{s:b, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:{s:I, "
                  "s:I, s:I, s:I, s:I}}",
                  "on", s->journal, "durability", s->durability, "bytes",
                  (json_int_t) s->j_bytes, "segments",
                  (json_int_t) s->j_segments, "segments_dropped",
                  (json_int_t) s->j_dropped, "appends",
                  (json_int_t) s->jc.appends, "append_bytes",
                  (json_int_t) s->jc.append_bytes, "append_errors",
                  (json_int_t) s->jc.append_errors, "confirms_waiting",
                  (json_int_t) s->j_pending_confirms, "recovered", "messages",
                  (json_int_t) s->jc.recovered_messages, "bytes",
                  (json_int_t) s->jc.recovered_bytes, "queues",
                  (json_int_t) s->jc.recovered_queues, "segments",
                  (json_int_t) s->jc.recovered_segments, "truncated_bytes",
                  (json_int_t) s->jc.truncated_bytes));
    json_object_set_new(json_object_get(root, "journal"), "compaction",
                        json_pack("{s:I, s:I, s:I, s:I}", "segments",
                                  (json_int_t) s->jc.compactions,
                                  "moved_payloads",
                                  (json_int_t) s->jc.moved_payloads,
                                  "moved_bytes", (json_int_t) s->jc.moved_bytes,
                                  "errors", (json_int_t) s->jc.move_errors));
}
