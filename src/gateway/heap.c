/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdlib.h>

#include "common/log.h"
#include "heap.h"

void
gw_heap_init(struct gw_heap *h)
{
    h->v = NULL;
    h->n = h->cap = 0;
}

void
gw_heap_fini(struct gw_heap *h)
{
    for (size_t i = 0; i < h->n; i++)
        h->v[i]->slot = GW_HEAP_NONE;
    free(h->v);
    gw_heap_init(h);
}

static void
place(struct gw_heap *h, size_t i, struct gw_heap_node *n)
{
    h->v[i] = n;
    n->slot = i;
}

static void
sift_up(struct gw_heap *h, size_t i)
{
    struct gw_heap_node *n = h->v[i];

    while (i > 0) {
        size_t parent = (i - 1) / 2;

        if (h->v[parent]->key <= n->key)
            break;
        place(h, i, h->v[parent]);
        i = parent;
    }
    place(h, i, n);
}

static void
sift_down(struct gw_heap *h, size_t i)
{
    struct gw_heap_node *n = h->v[i];

    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, min = i;
        uint64_t key = n->key;

        if (l < h->n && h->v[l]->key < key) {
            min = l;
            key = h->v[l]->key;
        }
        if (r < h->n && h->v[r]->key < key)
            min = r;
        if (min == i)
            break;
        place(h, i, h->v[min]);
        i = min;
    }
    place(h, i, n);
}

void
gw_heap_push(struct gw_heap *h, struct gw_heap_node *n, uint64_t key)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        struct gw_heap_node **v = realloc(h->v, cap * sizeof(*v));

        if (v == NULL) {
            /* The daemon's bookkeeping: see xcalloc in broker.c. */
            SCIMQ_LOG_ERROR(GATEWAY, "out of memory for a timer heap");
            abort();
        }
        h->v = v;
        h->cap = cap;
    }
    n->key = key;
    place(h, h->n++, n);
    sift_up(h, n->slot);
}

void
gw_heap_remove(struct gw_heap *h, struct gw_heap_node *n)
{
    size_t i = n->slot;

    if (i == GW_HEAP_NONE || i >= h->n || h->v[i] != n)
        return;
    n->slot = GW_HEAP_NONE;
    if (--h->n == i)
        return;
    place(h, i, h->v[h->n]);
    /* The moved node may belong above or below its new slot. */
    if (i > 0 && h->v[(i - 1) / 2]->key > h->v[i]->key)
        sift_up(h, i);
    else
        sift_down(h, i);
}

void
gw_heap_update(struct gw_heap *h, struct gw_heap_node *n, uint64_t key)
{
    uint64_t old = n->key;

    n->key = key;
    if (key < old)
        sift_up(h, n->slot);
    else
        sift_down(h, n->slot);
}

struct gw_heap_node *
gw_heap_pop_due(struct gw_heap *h, uint64_t now)
{
    struct gw_heap_node *n = gw_heap_top(h);

    if (n == NULL || n->key > now)
        return NULL;
    gw_heap_remove(h, n);
    return n;
}
