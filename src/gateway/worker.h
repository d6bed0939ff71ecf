/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Worker threads: one libuv loop each, a listening socket (SO_REUSEPORT),
 * the connections it accepted, and a mailbox for actions posted by other
 * threads (uv_async_t wake-ups may coalesce, so the mailbox is drained
 * whole on every wake-up).
 */
#ifndef SCIMQ_GATEWAY_WORKER_H
#define SCIMQ_GATEWAY_WORKER_H

#include "gateway.h"

enum gw_action_kind {
    GW_ACT_DELIVER,     /* write a DELIVER frame (payload pinned) */
    GW_ACT_EOS,         /* write an EOS frame */
    GW_ACT_ERROR,       /* write an ERROR frame (connection stays) */
    GW_ACT_RESUME,      /* a parked producer may read again */
    GW_ACT_STOP_LISTEN, /* draining: accept no more connections */
    GW_ACT_STOP         /* close everything and leave the loop */
};

struct gw_action {
    enum gw_action_kind kind;
    uint64_t conn_id;
    uint64_t request_id;
    uint64_t delivery_id, msg_id;
    uint32_t attempt;
    struct gw_payload *payload; /* DELIVER: pinned */
    char *text;                 /* queue name (DELIVER, EOS) or message */
    int code;                   /* ERROR */
    struct gw_action *next;
};

struct gw_conn;

struct gw_worker {
    int index;
    struct gateway *gw;
    pthread_t thread;
    uv_loop_t loop;
    uv_async_t wakeup;
    uv_tcp_t listener;
    bool listening;
    uv_timer_t timer; /* connection timeouts; broker tick on worker 0 */
    pthread_mutex_t mb_lock;
    struct gw_action *mb_head, *mb_tail;
    bool mb_closed;        /* stopping: posts are dropped (mb_lock) */
    struct gw_conn *conns; /* by id (uthash) */
    bool stopping;
};

/* Posts an action to a worker; the worker owns it afterwards.  Callable
 * from any thread, with or without gw->lock held. */
void gw_worker_post(struct gateway *gw, int worker, struct gw_action *a);

/* Allocates an action (never NULL: the daemon exits on OOM here). */
struct gw_action *gw_action_new(enum gw_action_kind kind, uint64_t conn_id);
void gw_action_free(struct gw_action *a);

/*
 * Binds every worker's listener to host:port (SO_REUSEPORT; port 0 picks a
 * free port, shared by all workers) and starts the threads.
 * *port_p returns the port.  Returns 0 or a SCIMQ_E* code.
 */
int gw_workers_start(struct gateway *gw, uint16_t *port_p);

/* Posts GW_ACT_STOP to every worker and joins them. */
void gw_workers_stop(struct gateway *gw);

/* Posts GW_ACT_STOP_LISTEN to every worker. */
void gw_workers_stop_listening(struct gateway *gw);

#endif /* SCIMQ_GATEWAY_WORKER_H */
