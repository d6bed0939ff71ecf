/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Invariants:
 * - resident counts the payload bytes whose data is in memory (MEMORY);
 *   mem_spilling the pool bytes of payloads whose spill is being written.
 * - A payload is freed when no message references it and no frame or
 *   journal job holds it (pins), once a read of it is done.
 * - A payload on the LRU list is resident and committed.
 */
#include "config.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <scimq/error.h>

#include "journal_codec.h"
#include "store.h"

/* Above this share of the arena in use, waiting payloads are spilled
 * ahead of need, so that producers rarely have to wait for the disk. */
#define HIGH_WATER_NUM 3
#define HIGH_WATER_DEN 4

int
gw_store_init(struct gw_store *st, uint64_t bytes, uint64_t chunk,
              bool segments, uint64_t disk_limit)
{
    memset(st, 0, sizeof(*st));
    st->journal = segments;
    st->disk_limit = disk_limit;
    gw_heap_init(&st->retries);
    return gw_pool_init(&st->pool, bytes, chunk);
}

void
gw_store_set_max_receiving(struct gw_store *st, uint64_t bytes)
{
    st->max_receiving = bytes > 0 ? bytes : st->pool.size / 2;
}

void
gw_store_fini(struct gw_store *st)
{
    while (st->segments != NULL) {
        struct gw_segment *g = st->segments;

        st->segments = g->next;
        free(g);
    }
    st->segments_tail = NULL;
    gw_heap_fini(&st->retries);
    gw_pool_fini(&st->pool);
    free(st->parked);
    st->parked = NULL;
    st->n_parked = st->cap_parked = 0;
}

static void
lru_remove(struct gw_store *st, struct gw_payload *pl)
{
    if (pl->lru_prev)
        pl->lru_prev->lru_next = pl->lru_next;
    else if (st->lru_head == pl)
        st->lru_head = pl->lru_next;
    if (pl->lru_next)
        pl->lru_next->lru_prev = pl->lru_prev;
    else if (st->lru_tail == pl)
        st->lru_tail = pl->lru_prev;
    pl->lru_prev = pl->lru_next = NULL;
}

static void
lru_append(struct gw_store *st, struct gw_payload *pl)
{
    pl->lru_prev = st->lru_tail;
    pl->lru_next = NULL;
    if (st->lru_tail)
        st->lru_tail->lru_next = pl;
    else
        st->lru_head = pl;
    st->lru_tail = pl;
}

static void
load_queue_remove(struct gw_store *st, struct gw_payload *pl)
{
    struct gw_payload **pp = &st->load_head, *prev = NULL;

    if (!pl->load_queued)
        return;
    while (*pp != NULL && *pp != pl) {
        prev = *pp;
        pp = &(*pp)->load_next;
    }
    if (*pp == pl) {
        *pp = pl->load_next;
        if (st->load_tail == pl)
            st->load_tail = prev;
    }
    pl->load_next = NULL;
    pl->load_queued = false;
}

/* Drops the bytes of a payload that has a complete file. */
static void
evict(struct gw_store *st, struct gw_payload *pl)
{
    gw_pool_free(&st->pool, pl->data, pl->len);
    pl->data = NULL;
    pl->where = GW_PL_DISK;
    st->resident -= pl->len;
    lru_remove(st, pl);
}

static void room_changed(struct gw_store *st, struct gw_actions *out);

/* Would a PUT of cost pool bytes exceed what PUTs being received may hold?
 * One alone may always take the whole pool (a message as large as the
 * limit still goes). */
static bool
receiving_full(const struct gw_store *st, uint64_t cost)
{
    return st->receiving > 0 && st->receiving + cost > st->max_receiving;
}

/* The PUT of pl is received (committed) or given up. */
static void
received(struct gw_store *st, struct gw_payload *pl, struct gw_actions *out)
{
    if (!pl->receiving)
        return;
    pl->receiving = false;
    st->receiving -= gw_pool_cost(&st->pool, pl->len);
    room_changed(st, out);
}

/* The segment numbered seg (created, newest last, when first seen). */
static struct gw_segment *
segment_get(struct gw_store *st, uint64_t seg)
{
    struct gw_segment *g;

    for (g = st->segments; g != NULL; g = g->next)
        if (g->seg == seg)
            return g;
    g = gw_xcalloc(1, sizeof(*g));
    g->seg = seg;
    if (st->segments_tail != NULL && st->segments_tail->seg > seg) {
        /* Recovery meets segments in order; keep the list sorted anyway. */
        struct gw_segment **pp = &st->segments;

        while ((*pp)->seg < seg)
            pp = &(*pp)->next;
        g->next = *pp;
        *pp = g;
        return g;
    }
    if (st->segments_tail)
        st->segments_tail->next = g;
    else
        st->segments = g;
    st->segments_tail = g;
    return g;
}

/*
 * Deletes the oldest segments while nothing in them is live.  Only from
 * the oldest: a later segment may hold the SETTLE of a message whose MSG
 * record is in an older one, and recovery must not meet the MSG without it.
 */
static void
segments_drop(struct gw_store *st, struct gw_actions *out)
{
    while (st->segments != NULL && st->segments->live == 0 &&
           st->segments->seg != st->j_active) {
        struct gw_segment *g = st->segments;
        struct gw_action *a = gw_action_new(GW_ACT_JOURNAL_DROP);

        a->seg = g->seg;
        gw_actions_push(out, a);
        st->j_bytes -= g->bytes;
        st->dropped_segments++;
        st->segments = g->next;
        if (st->segments == NULL)
            st->segments_tail = NULL;
        free(g);
        room_changed(st, out);
    }
}

void
gw_store_journal_written(struct gw_store *st, struct gw_payload *pl,
                         uint64_t seg, uint64_t off, uint64_t bytes,
                         struct gw_actions *out)
{
    struct gw_segment *g = segment_get(st, seg);

    g->bytes += bytes;
    st->j_bytes += bytes;
    if (pl != NULL) {
        if (pl->moving) {
            /* Compaction wrote it again: the old copy is dead. */
            struct gw_segment *old = segment_get(st, pl->seg);

            old->live--;
            old->live_bytes -= pl->len;
            pl->moving = false;
            st->moving--;
        }
        pl->journal = GW_PLJ_DONE;
        pl->seg = seg;
        pl->off = off;
        g->live++;
        g->live_bytes += pl->len;
    }
    if (seg > st->j_active)
        st->j_active = seg;
    if (!st->restoring)
        segments_drop(st, out);
}

void
gw_store_move_failed(struct gw_store *st, struct gw_payload *pl)
{
    /* Its old copy stays where it is, and still counts. */
    pl->moving = false;
    st->moving--;
}

static void
payload_free(struct gw_store *st, struct gw_payload *pl, struct gw_actions *out)
{
    if (pl->where == GW_PL_LOADING)
        return; /* the journal thread finishes first, then it is freed */
    if (pl->where == GW_PL_MEMORY) {
        lru_remove(st, pl);
        st->resident -= pl->len;
    }
    if (pl->receiving) { /* its PUT was given up */
        pl->receiving = false;
        st->receiving -= gw_pool_cost(&st->pool, pl->len);
    }
    gw_pool_free(&st->pool, pl->data, pl->len);
    load_queue_remove(st, pl);
    gw_heap_remove(&st->retries, &pl->retry);
    if (pl->moving) /* settled while compaction waited for its bytes */
        st->moving--;
    if (pl->spilled)
        st->spill_bytes -= pl->len;
    if (pl->journal == GW_PLJ_DONE) {
        struct gw_segment *g = segment_get(st, pl->seg);

        if (g->live > 0)
            g->live--;
        g->live_bytes -= g->live_bytes < pl->len ? g->live_bytes : pl->len;
        if (!st->restoring)
            segments_drop(st, out);
    }
    free(pl->blocks);
    free(pl->names);
    free(pl);
    room_changed(st, out);
}

static void
maybe_free(struct gw_store *st, struct gw_payload *pl, struct gw_actions *out)
{
    if (pl->refs == 0 && pl->pins == 0)
        payload_free(st, pl, out);
}

void
gw_store_unref(struct gw_store *st, struct gw_payload *pl,
               struct gw_actions *out)
{
    pl->refs--;
    maybe_free(st, pl, out);
}

void
gw_store_unpin(struct gw_store *st, struct gw_payload *pl,
               struct gw_actions *out)
{
    pl->pins--;
    maybe_free(st, pl, out);
}

static bool
spillable(const struct gw_payload *pl)
{
    return pl->where == GW_PL_MEMORY && pl->pins == 0 && pl->refs > 0 &&
           pl->waiters == NULL && pl->len > 0;
}

/*
 * A spill: the payload's MSG record, with no target (recovery skips it),
 * appended to the segments; once written its memory can go.  Only the
 * durable queues' records are recovered, so a spill of a memory queue's
 * payload is the same record without targets.
 */
uint8_t *
gw_store_msg_header(const struct gw_payload *pl,
                    const struct gw_jrec_target *targets, uint16_t n,
                    uint32_t *len)
{
    struct gw_jrec_block *blocks =
        gw_xcalloc(pl->block_count + 1, sizeof(*blocks));
    struct gw_jrec r = {.type = GW_JREC_MSG};
    uint8_t *buf;

    for (uint32_t i = 0; i < pl->block_count; i++)
        blocks[i] = (struct gw_jrec_block){
            pl->blocks[i].name, pl->blocks[i].name_len, pl->blocks[i].len};
    r.payload_id = pl->id;
    r.flags = pl->control ? GW_JREC_F_CONTROL : 0;
    r.target = targets;
    r.n_targets = n;
    r.block_count = pl->block_count;
    r.blocks = blocks;
    r.data_len = pl->len;
    *len = (uint32_t) gw_jrec_header_len(&r);
    buf = gw_xcalloc(1, *len);
    gw_jrec_encode(&r, buf); /* the journal thread adds the CRC */
    free(blocks);
    return buf;
}

void
gw_store_give_crc(struct gw_payload *pl, struct gw_action *a)
{
    a->data_crc_ok = pl->data_crc_ok;
    a->data_crc = pl->data_crc;
    pl->data_crc_ok = false;
}

static void
spill_append(struct gw_store *st, struct gw_payload *pl, struct gw_actions *out)
{
    struct gw_action *a = gw_action_new(GW_ACT_JOURNAL_APPEND);

    a->buf = gw_store_msg_header(pl, NULL, 0, &a->hdr_len);
    a->spill = true;
    a->payload = pl;
    a->payload_id = pl->id;
    a->len = pl->len;
    gw_store_give_crc(pl, a);
    /* Being moved by compaction, it keeps its old copy until this one is
     * in; otherwise it is not in a segment until then. */
    if (!pl->moving) {
        pl->journal = GW_PLJ_PENDING;
        st->mem_spilling += gw_pool_cost(&st->pool, pl->len);
    }
    gw_store_pin(pl); /* its bytes stay put while they are written */
    gw_actions_push(out, a);
}

void
gw_store_respill(struct gw_store *st, struct gw_payload *pl,
                 struct gw_actions *out)
{
    spill_append(st, pl, out);
}

/*
 * Frees memory by spilling the newest resident payloads (they are
 * delivered last) until the arena is under its high-water mark and a
 * payload of need bytes would fit, or the first one that waits (a load,
 * then a parked producer).  A payload already in a segment is dropped
 * from memory at once.
 */
static void
spill_some(struct gw_store *st, uint64_t need, uint64_t now,
           struct gw_actions *out)
{
    struct gw_pool *p = &st->pool;
    uint64_t high = p->size / HIGH_WATER_DEN * HIGH_WATER_NUM;
    struct gw_payload *pl = st->lru_tail;
    bool evicted = false;
    uint64_t want;

    if (!st->journal || now < st->write_retry_at)
        return;
    if (need == 0 && st->load_head != NULL)
        need = st->load_head->len;
    if (need == 0 && st->n_parked > 0)
        need = st->parked[0].need;
    want = need > 0 ? gw_pool_cost(p, need) : 0;
    while (pl != NULL) {
        struct gw_payload *prev = pl->lru_prev;
        uint64_t in_use = gw_pool_used(p) - st->mem_spilling;

        if (in_use <= high && in_use + want <= p->size)
            break;
        if (spillable(pl)) {
            if (pl->journal == GW_PLJ_DONE) {
                evict(st, pl);
                evicted = true;
            } else if (pl->journal == GW_PLJ_NONE &&
                       st->j_bytes + st->mem_spilling + pl->len <=
                           st->disk_limit) {
                spill_append(st, pl, out);
            }
        }
        pl = prev;
    }
    /* Memory freed at once: whoever waits for it may go on. */
    if (evicted)
        room_changed(st, out);
}

/* Memory may be free again: queued loads first (consumers wait for
 * them), then parked producers, oldest first. */
static void
room_changed(struct gw_store *st, struct gw_actions *out)
{
    struct gw_pool *p = &st->pool;

    while (st->load_head != NULL) {
        struct gw_payload *pl = st->load_head;
        uint8_t *buf = gw_pool_alloc(p, pl->len);
        struct gw_action *a;

        if (buf == NULL)
            break;
        load_queue_remove(st, pl);
        pl->where = GW_PL_LOADING;
        pl->data = buf;
        a = gw_action_new(GW_ACT_JOURNAL_READ);
        a->payload = pl;
        a->payload_id = pl->id;
        a->len = pl->len;
        a->buf = buf;
        a->seg = pl->seg;
        a->off = pl->off;
        gw_actions_push(out, a);
    }
    while (st->n_parked > 0 &&
           gw_pool_cost(p, st->parked[0].need) <= p->size - gw_pool_used(p) &&
           !receiving_full(st, gw_pool_cost(p, st->parked[0].need))) {
        struct gw_action *a = gw_action_new(GW_ACT_RESUME);

        a->worker = st->parked[0].worker;
        a->conn_id = st->parked[0].conn_id;
        gw_actions_push(out, a);
        memmove(&st->parked[0], &st->parked[1],
                (st->n_parked - 1) * sizeof(st->parked[0]));
        st->n_parked--;
    }
}

int
gw_store_payload_new(struct gw_store *st, const scimq_proto_frame_t *f,
                     uint64_t now, struct gw_actions *out,
                     struct gw_payload **pl_p)
{
    struct gw_payload *pl;
    size_t names = 0;
    uint8_t *data;

    *pl_p = NULL;
    if (gw_pool_cost(&st->pool, f->payload_len) > gw_pool_capacity(&st->pool))
        return SCIMQ_EMSGSIZE;
    if (receiving_full(st, gw_pool_cost(&st->pool, f->payload_len))) {
        /* Headers whose bytes have not come hold memory nobody can use:
         * together they get a bounded share. */
        st->c.receiving_waits++;
        return SCIMQ_EAGAIN;
    }
    data = gw_pool_alloc(&st->pool, f->payload_len);
    if (data == NULL) {
        /* Evicting journaled payloads frees memory at once: try again. */
        spill_some(st, f->payload_len, now, out);
        data = gw_pool_alloc(&st->pool, f->payload_len);
        if (data == NULL)
            return SCIMQ_EAGAIN;
    }
    pl = gw_xcalloc(1, sizeof(*pl));
    if (f->block_count > 0)
        pl->blocks = gw_xcalloc(f->block_count, sizeof(*pl->blocks));
    for (uint32_t i = 0; i < f->block_count; i++)
        names += f->blocks[i].name_len;
    pl->names = gw_xcalloc(1, names + 1);
    names = 0;
    for (uint32_t i = 0; i < f->block_count; i++) {
        pl->blocks[i].name = pl->names + names;
        pl->blocks[i].name_len = f->blocks[i].name_len;
        pl->blocks[i].len = f->blocks[i].len;
        if (f->blocks[i].name_len > 0)
            memcpy(pl->names + names, f->blocks[i].name, f->blocks[i].name_len);
        names += f->blocks[i].name_len;
    }
    pl->id = ++st->next_payload_id;
    pl->len = f->payload_len;
    pl->block_count = f->block_count;
    pl->data = data;
    pl->where = GW_PL_MEMORY;
    pl->pins = 1; /* the receiving connection, until commit or abort */
    pl->receiving = true;
    st->receiving += gw_pool_cost(&st->pool, pl->len);
    gw_heap_node_init(&pl->retry);
    st->resident += pl->len;
    st->c.payload_allocated += pl->len;
    *pl_p = pl;
    return 0;
}

void
gw_store_park(struct gw_store *st, int worker, uint64_t conn_id, uint64_t need)
{
    if (st->n_parked == st->cap_parked) {
        size_t cap = st->cap_parked ? st->cap_parked * 2 : 16;
        struct gw_parked *p = realloc(st->parked, cap * sizeof(*p));

        if (p == NULL)
            abort(); /* bookkeeping: see gw_xcalloc */
        st->parked = p;
        st->cap_parked = cap;
    }
    st->parked[st->n_parked++] = (struct gw_parked){worker, conn_id, need};
    st->c.parked_total++;
}

void
gw_store_unpark(struct gw_store *st, uint64_t conn_id)
{
    for (size_t i = 0; i < st->n_parked; i++) {
        if (st->parked[i].conn_id == conn_id) {
            memmove(&st->parked[i], &st->parked[i + 1],
                    (st->n_parked - i - 1) * sizeof(st->parked[0]));
            st->n_parked--;
            return;
        }
    }
}

void
gw_store_committed(struct gw_store *st, struct gw_payload *pl,
                   struct gw_actions *out)
{
    if (pl->where == GW_PL_MEMORY && pl->lru_prev == NULL && st->lru_head != pl)
        lru_append(st, pl);
    received(st, pl, out);
}

void
gw_store_balance(struct gw_store *st, uint64_t now, struct gw_actions *out)
{
    spill_some(st, 0, now, out);
}

/* Starts reading a payload back, or queues it until memory is free. */
static void
load(struct gw_store *st, struct gw_payload *pl, uint64_t now,
     struct gw_actions *out)
{
    if (pl->load_queued)
        return;
    pl->load_queued = true;
    if (st->load_tail)
        st->load_tail->load_next = pl;
    else
        st->load_head = pl;
    st->load_tail = pl;
    room_changed(st, out);
    if (pl->load_queued)
        spill_some(st, pl->len, now, out);
}

bool
gw_store_want(struct gw_store *st, struct gw_payload *pl, uint64_t now,
              struct gw_actions *out)
{
    switch (pl->where) {
    case GW_PL_MEMORY:
        return true;
    case GW_PL_LOADING:
        return false;
    case GW_PL_DISK:
    default:
        /* After a read error the retry timer decides when. */
        if (!gw_heap_node_queued(&pl->retry))
            load(st, pl, now, out);
        return false;
    }
}

static uint32_t
backoff_ms(uint32_t failures)
{
    uint64_t ms = GW_STORE_RETRY_MIN_MS;

    for (uint32_t i = 1; i < failures && ms < GW_STORE_RETRY_MAX_MS; i++)
        ms *= 2;
    return ms < GW_STORE_RETRY_MAX_MS ? (uint32_t) ms : GW_STORE_RETRY_MAX_MS;
}

void
gw_store_spilled(struct gw_store *st, struct gw_payload *pl, uint64_t seg,
                 uint64_t off, uint64_t bytes, int rc, uint64_t now,
                 struct gw_actions *out)
{
    if (!pl->moving)
        st->mem_spilling -= gw_pool_cost(&st->pool, pl->len);
    if (rc == 0) {
        gw_store_journal_written(st, pl, seg, off, bytes, out);
        if (!pl->spilled)
            st->spill_bytes += pl->len;
        pl->spilled = true;
        st->c.spilled_bytes += pl->len;
        st->write_backoff_ms = 0;
    } else if (pl->moving) {
        gw_store_move_failed(st, pl); /* the old copy stays */
    } else {
        /* Full or failing disk: the payload stays in memory (safe) and
         * no spill is tried again before the backoff ends. */
        pl->journal = GW_PLJ_NONE;
        st->c.spill_write_errors++;
        st->write_backoff_ms = st->write_backoff_ms == 0
                                   ? GW_STORE_RETRY_MIN_MS
                                   : st->write_backoff_ms * 2;
        if (st->write_backoff_ms > GW_STORE_RETRY_MAX_MS)
            st->write_backoff_ms = GW_STORE_RETRY_MAX_MS;
        st->write_retry_at = now + st->write_backoff_ms;
        GW_NOTE_SPARSE(out, SCIMQ_LOG_ERROR, GATEWAY, 10000,
                       "cannot spill payload %" PRIu64 ": %s; it stays in "
                       "memory, next spill in %u ms",
                       pl->id, scimq_strerror(rc), st->write_backoff_ms);
    }
    pl->pins--; /* the append's */
    if (pl->refs == 0 && pl->pins == 0) {
        payload_free(st, pl, out);
        return;
    }
    if (rc == 0 && spillable(pl))
        evict(st, pl);
    room_changed(st, out);
    spill_some(st, 0, now, out);
}

bool
gw_store_loaded(struct gw_store *st, struct gw_payload *pl, int rc,
                uint64_t now, struct gw_actions *out)
{
    if (rc == 0) {
        pl->where = GW_PL_MEMORY;
        pl->read_failures = 0;
        st->resident += pl->len;
        st->c.loaded_bytes += pl->len;
        lru_append(st, pl);
    } else {
        gw_pool_free(&st->pool, pl->data, pl->len);
        pl->data = NULL;
        pl->where = GW_PL_DISK;
        pl->read_failures++;
        st->c.spill_read_errors++;
        gw_heap_push(&st->retries, &pl->retry,
                     now + backoff_ms(pl->read_failures));
        GW_NOTE_SPARSE(out, SCIMQ_LOG_ERROR, GATEWAY, 10000,
                       "cannot read spilled payload %" PRIu64 " back: %s "
                       "(failure %u); retrying in %u ms",
                       pl->id, scimq_strerror(rc), pl->read_failures,
                       backoff_ms(pl->read_failures));
    }
    if (pl->refs == 0 && pl->pins == 0) {
        payload_free(st, pl, out);
        return false;
    }
    if (rc != 0)
        room_changed(st, out);
    return rc == 0;
}

void
gw_store_tick(struct gw_store *st, uint64_t now, struct gw_actions *out)
{
    struct gw_heap_node *n;

    while ((n = gw_heap_pop_due(&st->retries, now)) != NULL) {
        struct gw_payload *pl =
            (struct gw_payload *) ((char *) n -
                                   offsetof(struct gw_payload, retry));

        load(st, pl, now, out);
    }
    if (st->write_retry_at != 0 && now >= st->write_retry_at) {
        st->write_retry_at = 0;
        spill_some(st, 0, now, out);
    }
}
