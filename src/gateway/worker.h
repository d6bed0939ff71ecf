/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Worker threads: one libuv loop each, a listening socket (SO_REUSEPORT),
 * the connections it accepted, and the mailbox through which the hub
 * hands it the broker's actions.
 */
#ifndef SCIMQ_GATEWAY_WORKER_H
#define SCIMQ_GATEWAY_WORKER_H

#include <pthread.h>
#include <stdbool.h>

#include <uv.h>

#include "conn.h"
#include "gateway.h"
#include "mailbox.h"

struct gw_worker {
    int index;
    struct gateway *gw;
    pthread_t thread;
    uv_loop_t loop;
    uv_tcp_t listener;
    bool listening;
    /* Worker 0 only: the administration socket (adminsock.h). */
    uv_pipe_t admin;
    bool admin_listening;
    /* Out of descriptors (worker.c): a descriptor kept for pausing, and
     * the listening socket while paused (-1 when not). */
    int reserve, paused_fd;
    bool listener_closed;
    uv_timer_t timer; /* connection timeouts; the broker's clock on 0 */
    /* Gathered output is written before the loop polls (what timers and
     * deferred actions queued) and after it handled I/O (replies to what
     * was read, actions from other threads): once per loop turn. */
    uv_prepare_t flush_prepare;
    uv_check_t flush_check;
    uint64_t last_timeout_check;
    struct gw_mailbox mailbox;
    struct gw_conn_host host;
    bool stopping;
};

/*
 * Binds every worker's listener to host:port (SO_REUSEPORT; port 0 picks a
 * free port, shared by all workers) and worker 0's administration socket
 * (gw->admin_path, from gateway_admin_socket and the port), attaches the
 * mailboxes to the hub and starts the threads.  *port_p returns the port.
 * 0 or a SCIMQ_E* code; err says why the admin socket failed.
 */
int gw_workers_start(struct gateway *gw, uint16_t *port_p, char *err,
                     size_t errlen);

/* Every worker says BYE, closes its connections and leaves its loop;
 * joined.  Actions for them from now on are dropped (closed mailboxes). */
void gw_workers_stop(struct gateway *gw);
/* Frees the workers once nothing can post to them (the spill thread has
 * stopped too). */
void gw_workers_free(struct gateway *gw);

/* Draining: no worker accepts connections any more. */
void gw_workers_stop_listening(struct gateway *gw);

#endif /* SCIMQ_GATEWAY_WORKER_H */
