/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <scimq/error.h>

#include "common/error_internal.h"
#include "mailbox.h"

static void
on_wakeup(uv_async_t *h)
{
    struct gw_mailbox *mb = h->data;
    struct gw_actions list;

    pthread_mutex_lock(&mb->lock);
    list = mb->posted;
    mb->posted.head = mb->posted.tail = NULL;
    pthread_mutex_unlock(&mb->lock);
    if (list.head != NULL)
        mb->run(mb, &list);
}

static void
on_idle(uv_idle_t *h)
{
    struct gw_mailbox *mb = h->data;
    struct gw_actions list = mb->local;

    mb->local.head = mb->local.tail = NULL;
    uv_idle_stop(&mb->idle);
    if (list.head != NULL)
        mb->run(mb, &list);
}

int
gw_mailbox_init(struct gw_mailbox *mb, uv_loop_t *loop,
                void (*run)(struct gw_mailbox *, struct gw_actions *),
                void *owner)
{
    int rc;

    pthread_mutex_init(&mb->lock, NULL);
    mb->posted.head = mb->posted.tail = NULL;
    mb->local.head = mb->local.tail = NULL;
    mb->closed = false;
    mb->run = run;
    mb->owner = owner;
    rc = uv_async_init(loop, &mb->wakeup, on_wakeup);
    if (rc != 0)
        return scimq__err_from_errno(-rc);
    mb->wakeup.data = mb;
    uv_idle_init(loop, &mb->idle);
    mb->idle.data = mb;
    return 0;
}

void
gw_mailbox_close(struct gw_mailbox *mb, struct gw_actions *left)
{
    pthread_mutex_lock(&mb->lock);
    mb->closed = true;
    gw_actions_splice(left, &mb->posted);
    pthread_mutex_unlock(&mb->lock);
    gw_actions_splice(left, &mb->local);
    if (!uv_is_closing((uv_handle_t *) &mb->wakeup))
        uv_close((uv_handle_t *) &mb->wakeup, NULL);
    if (!uv_is_closing((uv_handle_t *) &mb->idle))
        uv_close((uv_handle_t *) &mb->idle, NULL);
}

void
gw_mailbox_destroy(struct gw_mailbox *mb)
{
    pthread_mutex_destroy(&mb->lock);
}

bool
gw_mailbox_post(struct gw_mailbox *mb, struct gw_action *a)
{
    pthread_mutex_lock(&mb->lock);
    if (mb->closed) {
        pthread_mutex_unlock(&mb->lock);
        return false;
    }
    gw_actions_push(&mb->posted, a);
    pthread_mutex_unlock(&mb->lock);
    uv_async_send(&mb->wakeup);
    return true;
}

bool
gw_mailbox_defer(struct gw_mailbox *mb, struct gw_action *a)
{
    /* Same thread as gw_mailbox_close(): no lock needed for closed. */
    if (mb->closed)
        return false;
    if (mb->local.head == NULL)
        uv_idle_start(&mb->idle, on_idle);
    gw_actions_push(&mb->local, a);
    return true;
}
