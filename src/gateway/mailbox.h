/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A worker's mailbox: actions for its connections.  Other threads post
 * (locked; a uv_async_t wakes the loop, and wake-ups coalesce, so the
 * whole box is taken each time); the worker's own thread defers actions
 * it produced itself to the next turn of its loop (no lock, no system
 * call: a uv_idle_t keeps the loop from sleeping while some are due).
 */
#ifndef SCIMQ_GATEWAY_MAILBOX_H
#define SCIMQ_GATEWAY_MAILBOX_H

#include <pthread.h>
#include <stdbool.h>

#include <uv.h>

#include "action.h"

struct gw_mailbox {
    pthread_mutex_t lock;
    struct gw_actions posted; /* from other threads (lock) */
    bool closed;              /* the loop is gone: posts are refused */
    uv_async_t wakeup;
    struct gw_actions local; /* from the worker's own thread */
    uv_idle_t idle;
    void (*run)(struct gw_mailbox *mb, struct gw_actions *list);
    void *owner;
};

/*
 * Sets the box up on loop; run() is called on the loop's thread with the
 * actions that arrived (it owns them).
 */
int gw_mailbox_init(struct gw_mailbox *mb, uv_loop_t *loop,
                    void (*run)(struct gw_mailbox *, struct gw_actions *),
                    void *owner);
/* Closes the handles (on the loop's thread) and refuses later posts;
 * actions still in the box are moved to *left. */
void gw_mailbox_close(struct gw_mailbox *mb, struct gw_actions *left);
/* After the loop ended: frees the lock. */
void gw_mailbox_destroy(struct gw_mailbox *mb);

/* From any thread.  Returns false when the box is closed (the caller
 * still owns a). */
bool gw_mailbox_post(struct gw_mailbox *mb, struct gw_action *a);
/* From the loop's own thread: run at the next turn of the loop.  Returns
 * false when the box is closed (the caller still owns a). */
bool gw_mailbox_defer(struct gw_mailbox *mb, struct gw_action *a);

#endif /* SCIMQ_GATEWAY_MAILBOX_H */
