/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A minimal intrusive, circular, doubly linked list for the client.  An
 * element embeds a struct scimq_list and can be unlinked in O(1) without
 * knowing which list it is on, which the client needs to move operations
 * between the command queue, the wait queue and a stream's in-flight list.
 */
#ifndef SCIMQ_CLIENT_LIST_H
#define SCIMQ_CLIENT_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct scimq_list {
    struct scimq_list *prev, *next;
};

#define SCIMQ_CONTAINER_OF(ptr, type, member)                                  \
    ((type *) (void *) ((char *) (ptr) -offsetof(type, member)))

/* An empty list (or an unlinked element) points to itself. */
static inline void
scimq_list_init(struct scimq_list *l)
{
    l->prev = l;
    l->next = l;
}

static inline bool
scimq_list_empty(const struct scimq_list *l)
{
    return l->next == l;
}

static inline void
scimq_list_append(struct scimq_list *l, struct scimq_list *e)
{
    e->prev = l->prev;
    e->next = l;
    l->prev->next = e;
    l->prev = e;
}

/* Unlinks e and leaves it pointing to itself, so removing twice is safe. */
static inline void
scimq_list_remove(struct scimq_list *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    scimq_list_init(e);
}

/* Removes and returns the first element, or NULL when l is empty. */
static inline struct scimq_list *
scimq_list_pop(struct scimq_list *l)
{
    struct scimq_list *e = l->next;

    if (e == l)
        return NULL;
    scimq_list_remove(e);
    return e;
}

/* Moves every element of from to the end of to; from becomes empty. */
static inline void
scimq_list_splice(struct scimq_list *to, struct scimq_list *from)
{
    if (scimq_list_empty(from))
        return;
    from->next->prev = to->prev;
    to->prev->next = from->next;
    from->prev->next = to;
    to->prev = from->prev;
    scimq_list_init(from);
}

/* Iterates safely against removal of the current element. */
#define SCIMQ_LIST_FOREACH(e, tmp, l)                                          \
    for ((e) = (l)->next, (tmp) = (e)->next; (e) != (l);                       \
         (e) = (tmp), (tmp) = (e)->next)

#endif /* SCIMQ_CLIENT_LIST_H */
