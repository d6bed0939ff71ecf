/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <inttypes.h>

#include <utlist.h>

#include "compact.h"
#include "durable.h"
#include "store.h"

/* The payload's move is written now, or it waits to be read back. */
static void
move_or_load(struct gw_broker *b, struct gw_payload *pl)
{
    if (pl->where != GW_PL_MEMORY) {
        (void) gw_store_want(&b->store, pl, b->now, b->out);
        return;
    }
    if (gw_durable_move(b, pl))
        return;
    if (pl->spilled)
        gw_store_respill(&b->store, pl, b->out); /* of memory queues only */
    else
        gw_store_move_failed(&b->store, pl); /* settled meanwhile */
}

/* Every message list of a queue, for the scan. */
static void
mark_list(struct gw_broker *b, struct gw_msg *list, uint64_t seg,
          struct gw_payload ***found, size_t *n, size_t *cap)
{
    struct gw_msg *m;

    DL_FOREACH(list, m)
    {
        struct gw_payload *pl = m->payload;

        if (pl->journal != GW_PLJ_DONE || pl->seg != seg || pl->moving)
            continue;
        pl->moving = true;
        b->store.moving++;
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 64;
            *found = gw_xrealloc(*found, *cap * sizeof(**found));
        }
        (*found)[(*n)++] = pl;
    }
}

void
gw_compact_check(struct gw_broker *b)
{
    struct gw_store *st = &b->store;
    const struct gw_segment *g = st->segments;
    struct gw_payload **found = NULL;
    size_t n = 0, cap = 0;
    struct gw_queue *q, *qt;

    if (!st->journal || b->j.compact_percent == 0 || st->restoring ||
        st->moving > 0 || b->now < b->j.compact_retry_at || g == NULL ||
        g->seg == st->j_active || g->live == 0 || g->bytes == 0 ||
        g->live_bytes * 100 >= g->bytes * b->j.compact_percent)
        return;
    /* Which payloads are in it: those of the messages of every queue
     * (durable ones, and spilled ones of memory queues). */
    HASH_ITER(hh, b->queues, q, qt)
    {
        mark_list(b, q->ready, g->seg, &found, &n, &cap);
        mark_list(b, q->delayed, g->seg, &found, &n, &cap);
        mark_list(b, q->leased, g->seg, &found, &n, &cap);
    }
    if (n == 0) {
        /* Live by the counts, but no message found: wait, do not scan
         * again at every event. */
        b->j.compact_retry_at = b->now + GW_STORE_RETRY_MAX_MS;
        return;
    }
    b->j.c.compactions++;
    GW_NOTE(b->out, SCIMQ_LOG_INFO, GATEWAY,
            "journal: compacting segment %016" PRIx64 " (%" PRIu64
            " live B of %" PRIu64 "): moving %zu payloads",
            g->seg, g->live_bytes, g->bytes, n);
    for (size_t i = 0; i < n; i++)
        move_or_load(b, found[i]);
    free(found);
}

void
gw_compact_loaded(struct gw_broker *b, struct gw_payload *pl)
{
    /* Once written again it stays in memory until the write is in (the
     * append pins it), so a load always finds it still waiting. */
    if (pl->moving)
        move_or_load(b, pl);
}
