/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Worker threads: each owns a libuv loop, a listening socket bound with
 * SO_REUSEPORT (the kernel spreads connections over the workers), its
 * connections and a mailbox.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <scimq/error.h>

#include "broker.h"
#include "common/error_internal.h"
#include "common/log.h"
#include "common/net.h"
#include "common/topo.h"
#include "conn.h"
#include "worker.h"

/* How often connection timeouts are checked; the broker ticks on worker 0. */
#define WORKER_TICK_MS 100
#define WORKER_TIMEOUT_CHECK_MS 1000

struct gw_action *
gw_action_new(enum gw_action_kind kind, uint64_t conn_id)
{
    struct gw_action *a = calloc(1, sizeof(*a));

    if (a == NULL) {
        SCIMQ_LOG_ERROR(GATEWAY, "out of memory for a worker action");
        abort();
    }
    a->kind = kind;
    a->conn_id = conn_id;
    return a;
}

void
gw_action_free(struct gw_action *a)
{
    free(a->text);
    free(a);
}

void
gw_worker_post(struct gateway *gw, int worker, struct gw_action *a)
{
    struct gw_worker *w = &gw->workers[worker];

    pthread_mutex_lock(&w->mb_lock);
    if (w->mb_closed) {
        /* The loop is gone (shutdown): nobody will run it. */
        pthread_mutex_unlock(&w->mb_lock);
        if (a->kind == GW_ACT_DELIVER)
            gw_broker_unpin(gw, a->payload);
        gw_action_free(a);
        return;
    }
    a->next = NULL;
    if (w->mb_tail)
        w->mb_tail->next = a;
    else
        w->mb_head = a;
    w->mb_tail = a;
    pthread_mutex_unlock(&w->mb_lock);
    uv_async_send(&w->wakeup);
}

static void
close_walk(uv_handle_t *h, void *arg)
{
    (void) arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void
worker_stop(struct gw_worker *w)
{
    struct gw_conn *c, *tmp;

    if (w->stopping)
        return;
    w->stopping = true;
    pthread_mutex_lock(&w->mb_lock);
    w->mb_closed = true;
    pthread_mutex_unlock(&w->mb_lock);
    HASH_ITER(hh, w->conns, c, tmp) gw_conn_close(c, NULL);
    /* Connections were closed with their own callbacks; the rest (timer,
     * listener, the mailbox wake-up) have none. */
    uv_walk(&w->loop, close_walk, NULL);
}

static void
on_wakeup(uv_async_t *h)
{
    struct gw_worker *w = h->data;
    struct gw_action *a;

    /* Wake-ups coalesce: take the whole mailbox each time. */
    pthread_mutex_lock(&w->mb_lock);
    a = w->mb_head;
    w->mb_head = w->mb_tail = NULL;
    pthread_mutex_unlock(&w->mb_lock);
    while (a != NULL) {
        struct gw_action *next = a->next;

        switch (a->kind) {
        case GW_ACT_STOP:
            gw_action_free(a);
            worker_stop(w);
            break;
        case GW_ACT_STOP_LISTEN:
            if (w->listening) {
                uv_close((uv_handle_t *) &w->listener, NULL);
                w->listening = false;
            }
            gw_action_free(a);
            break;
        default:
            if (w->stopping) {
                if (a->kind == GW_ACT_DELIVER)
                    gw_broker_unpin(w->gw, a->payload);
                gw_action_free(a);
            } else {
                gw_conn_action(w, a);
            }
            break;
        }
        a = next;
    }
}

static void
on_connection(uv_stream_t *server, int status)
{
    struct gw_worker *w = server->data;

    if (status < 0) {
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 5000, "accept: %s",
                         uv_strerror(status));
        return;
    }
    gw_conn_accept(w);
}

static void
on_timer(uv_timer_t *t)
{
    struct gw_worker *w = t->data;
    static _Thread_local uint64_t last_check;
    uint64_t now = gw_now_ms();

    if (w->index == 0)
        gw_broker_tick(w->gw);
    if (now - last_check >= WORKER_TIMEOUT_CHECK_MS) {
        last_check = now;
        gw_conn_check_timeouts(w, now);
    }
}

static void *
worker_main(void *arg)
{
    struct gw_worker *w = arg;

    scimq__topo_bind_thread(w->index, w->gw->n_workers);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    /* Let close callbacks of the last handles run. */
    uv_run(&w->loop, UV_RUN_NOWAIT);
    return NULL;
}

/*
 * A non-blocking listening socket bound with SO_REUSEPORT, so that every
 * worker can bind the same port.
 */
static int
listen_socket(const struct sockaddr *sa, socklen_t len, int *fd_p)
{
    int one = 1, fd, rc;

    fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return scimq__err_from_errno(errno);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
        bind(fd, sa, len) != 0) {
        rc = scimq__err_from_errno(errno);
        close(fd);
        return rc;
    }
    /* Buffers set on the listener are inherited by accepted sockets, so
     * large windows are negotiated from the first SYN. */
    scimq__sock_tune_default(fd);
    *fd_p = fd;
    return 0;
}

static int
worker_init(struct gateway *gw, struct gw_worker *w, int index,
            struct sockaddr_storage *ss, socklen_t sslen)
{
    int fd = -1, rc;

    w->index = index;
    w->gw = gw;
    pthread_mutex_init(&w->mb_lock, NULL);
    rc = uv_loop_init(&w->loop);
    if (rc != 0)
        return scimq__err_from_errno(-rc);
    uv_async_init(&w->loop, &w->wakeup, on_wakeup);
    w->wakeup.data = w;
    uv_timer_init(&w->loop, &w->timer);
    w->timer.data = w;
    uv_timer_start(&w->timer, on_timer, WORKER_TICK_MS, WORKER_TICK_MS);

    rc = listen_socket((struct sockaddr *) ss, sslen, &fd);
    if (rc != 0)
        return rc;
    uv_tcp_init(&w->loop, &w->listener);
    w->listener.data = w;
    rc = uv_tcp_open(&w->listener, fd);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *) &w->listener, 511, on_connection);
    if (rc != 0)
        return scimq__err_from_errno(-rc);
    w->listening = true;
    return 0;
}

int
gw_workers_start(struct gateway *gw, uint16_t *port_p)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *ai = NULL;
    struct sockaddr_storage ss;
    socklen_t sslen;
    const char *host = gw->opt.listen_host[0] ? gw->opt.listen_host : NULL;
    int rc;

    if (getaddrinfo(host, "0", &hints, &ai) != 0 || ai == NULL) {
        SCIMQ_LOG_ERROR(GATEWAY, "cannot resolve listen address '%s'",
                        host ? host : "*");
        return SCIMQ_EINVAL;
    }
    memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    sslen = ai->ai_addrlen;
    freeaddrinfo(ai);
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *) &ss)->sin_port = htons(gw->opt.listen_port);
    else
        ((struct sockaddr_in6 *) &ss)->sin6_port = htons(gw->opt.listen_port);

    gw->workers = calloc((size_t) gw->n_workers, sizeof(*gw->workers));
    if (gw->workers == NULL)
        return SCIMQ_ENOMEM;
    for (int i = 0; i < gw->n_workers; i++) {
        rc = worker_init(gw, &gw->workers[i], i, &ss, sslen);
        if (rc != 0) {
            SCIMQ_LOG_ERROR(GATEWAY, "cannot listen on %s:%u: %s",
                            host ? host : "*", gw->opt.listen_port,
                            scimq_strerror(rc));
            gw->n_workers = i + 1; /* stop what was set up */
            for (int j = 0; j <= i; j++) {
                uv_walk(&gw->workers[j].loop, close_walk, NULL);
                uv_run(&gw->workers[j].loop, UV_RUN_DEFAULT);
                uv_loop_close(&gw->workers[j].loop);
            }
            free(gw->workers);
            gw->workers = NULL;
            gw->n_workers = 0;
            return rc;
        }
        /* Port 0: the first worker picked one; the others share it. */
        if (i == 0) {
            struct sockaddr_storage got;
            int len = sizeof(got);

            uv_tcp_getsockname(&gw->workers[0].listener,
                               (struct sockaddr *) &got, &len);
            *port_p = ntohs(got.ss_family == AF_INET
                                ? ((struct sockaddr_in *) &got)->sin_port
                                : ((struct sockaddr_in6 *) &got)->sin6_port);
            if (ss.ss_family == AF_INET)
                ((struct sockaddr_in *) &ss)->sin_port = htons(*port_p);
            else
                ((struct sockaddr_in6 *) &ss)->sin6_port = htons(*port_p);
        }
    }
    for (int i = 0; i < gw->n_workers; i++) {
        if (pthread_create(&gw->workers[i].thread, NULL, worker_main,
                           &gw->workers[i]) != 0) {
            SCIMQ_LOG_ERROR(GATEWAY, "cannot start worker thread %d", i);
            abort(); /* half-started daemon: nothing sane to return to */
        }
    }
    return 0;
}

void
gw_workers_stop_listening(struct gateway *gw)
{
    for (int i = 0; i < gw->n_workers; i++)
        gw_worker_post(gw, i, gw_action_new(GW_ACT_STOP_LISTEN, 0));
}

void
gw_workers_stop(struct gateway *gw)
{
    for (int i = 0; i < gw->n_workers; i++)
        gw_worker_post(gw, i, gw_action_new(GW_ACT_STOP, 0));
    for (int i = 0; i < gw->n_workers; i++) {
        struct gw_worker *w = &gw->workers[i];
        struct gw_action *a, *next;

        pthread_join(w->thread, NULL);
        if (uv_loop_close(&w->loop) != 0)
            SCIMQ_LOG_WARN(GATEWAY, "worker %d: handles left open", i);
        /* Actions posted after the loop stopped. */
        for (a = w->mb_head; a != NULL; a = next) {
            next = a->next;
            if (a->kind == GW_ACT_DELIVER)
                gw_broker_unpin(gw, a->payload);
            gw_action_free(a);
        }
        pthread_mutex_destroy(&w->mb_lock);
    }
    free(gw->workers);
    gw->workers = NULL;
    gw->n_workers = 0;
}
