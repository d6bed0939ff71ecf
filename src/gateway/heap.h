/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An intrusive binary min-heap of deadlines.  Records embed a gw_heap_node
 * and remember their slot, so a lease can be renewed or cancelled in
 * O(log n) and the earliest deadline is read in O(1): the broker's timers
 * never scan what is not due.
 */
#ifndef SCIMQ_GATEWAY_HEAP_H
#define SCIMQ_GATEWAY_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_HEAP_NONE ((size_t) -1)

struct gw_heap_node {
    uint64_t key; /* deadline, ms */
    size_t slot;  /* index in the heap, GW_HEAP_NONE when not in one */
};

struct gw_heap {
    struct gw_heap_node **v;
    size_t n, cap;
};

void gw_heap_init(struct gw_heap *h);
void gw_heap_fini(struct gw_heap *h);

static inline void
gw_heap_node_init(struct gw_heap_node *n)
{
    n->slot = GW_HEAP_NONE;
}

static inline bool
gw_heap_node_queued(const struct gw_heap_node *n)
{
    return n->slot != GW_HEAP_NONE;
}

/* Inserts n with deadline key (n must not be in a heap). */
void gw_heap_push(struct gw_heap *h, struct gw_heap_node *n, uint64_t key);
/* Removes n if it is in h. */
void gw_heap_remove(struct gw_heap *h, struct gw_heap_node *n);
/* Moves n (in h) to a new deadline. */
void gw_heap_update(struct gw_heap *h, struct gw_heap_node *n, uint64_t key);
/* The earliest node, or NULL. */
static inline struct gw_heap_node *
gw_heap_top(const struct gw_heap *h)
{
    return h->n > 0 ? h->v[0] : NULL;
}

/* The earliest node if its deadline is <= now (removed), else NULL. */
struct gw_heap_node *gw_heap_pop_due(struct gw_heap *h, uint64_t now);

#endif /* SCIMQ_GATEWAY_HEAP_H */
