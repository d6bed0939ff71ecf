/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Worker threads: each owns a libuv loop, a listening socket bound with
 * SO_REUSEPORT (the kernel spreads connections over the workers), its
 * connections and a mailbox.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <scimq/error.h>

#include "common/error_internal.h"
#include "common/log.h"
#include "common/net.h"
#include "adminsock.h"
#include "common/topo.h"
#include "conn_out.h"
#include "worker.h"

/* The broker's clock ticks on worker 0; connection timeouts every second. */
#define WORKER_TICK_MS 100
#define WORKER_TIMEOUT_CHECK_MS 1000

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
    struct gw_actions left = {NULL, NULL};

    if (w->stopping)
        return;
    w->stopping = true;
    if (w->paused_fd >= 0) {
        close(w->paused_fd);
        w->paused_fd = -1;
    }
    if (w->reserve >= 0) {
        close(w->reserve);
        w->reserve = -1;
    }
    gw_conn_close_all(&w->host);
    gw_mailbox_close(&w->mailbox, &left);
    /* What was still for this worker: the hub drops it (pins go back). */
    gw_hub_route(&w->gw->hub, w->index, &left);
    /* Connections were closed with their own callbacks; the rest (timer,
     * listener) have none. */
    uv_walk(&w->loop, close_walk, NULL);
}

static void
on_actions(struct gw_mailbox *mb, struct gw_actions *list)
{
    struct gw_worker *w = mb->owner;
    struct gw_action *a;

    while ((a = gw_actions_pop(list)) != NULL) {
        switch (a->kind) {
        case GW_ACT_STOP:
            gw_action_free(a);
            /* Later actions of this batch: dropped with the mailbox. */
            worker_stop(w);
            gw_hub_route(&w->gw->hub, w->index, list);
            return;
        case GW_ACT_STOP_LISTEN:
            if (w->listening) {
                uv_close((uv_handle_t *) &w->listener, NULL);
                w->listening = false;
            }
            if (w->paused_fd >= 0) {
                close(w->paused_fd);
                w->paused_fd = -1;
            }
            gw_action_free(a);
            break;
        default:
            gw_conn_action(&w->host, a);
            break;
        }
    }
}

static void on_connection(uv_stream_t *server, int status);

static void
on_flush_prepare(uv_prepare_t *h)
{
    struct gw_worker *w = h->data;

    gw_conn_flush_dirty(&w->host);
}

static void
on_flush_check(uv_check_t *h)
{
    struct gw_worker *w = h->data;

    gw_conn_flush_dirty(&w->host);
}

static int
reserve_open(void)
{
    return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void
on_listener_closed(uv_handle_t *h)
{
    struct gw_worker *w = h->data;

    w->listener_closed = true;
}

/*
 * Out of descriptors, and libuv's own reserve is spent (it has one per
 * loop: it accepts and closes what is pending with it, and calls us only
 * when it could not): libuv would call us again at once for as long as
 * connections wait, a spin.  Accepting pauses instead: the listening
 * socket moves onto this worker's reserve descriptor (dup2 needs no free
 * one) and its handle closes, so nothing polls it; on_timer resumes it
 * once a new reserve can be opened, that is once descriptors are free.
 * Connections wait in the kernel's backlog meanwhile.
 */
static void
accept_pause(struct gw_worker *w)
{
    struct rlimit rl = {0, 0};
    uv_os_fd_t fd;

    if (w->paused_fd >= 0 || w->reserve < 0 ||
        uv_fileno((uv_handle_t *) &w->listener, &fd) != 0 ||
        dup2(fd, w->reserve) < 0)
        return;
    w->paused_fd = w->reserve;
    w->reserve = -1;
    w->listening = false;
    w->listener_closed = false;
    uv_close((uv_handle_t *) &w->listener, on_listener_closed);
    gw_connreg_reject(&w->gw->conns, GW_REJECT_FDS);
    (void) getrlimit(RLIMIT_NOFILE, &rl);
    SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 5000,
                     "worker %d: out of file descriptors (limit %" PRIu64
                     "): accepting paused until some are free",
                     w->index, (uint64_t) rl.rlim_cur);
}

static void
accept_resume(struct gw_worker *w)
{
    int reserve;

    if (w->paused_fd < 0 || !w->listener_closed)
        return;
    reserve = reserve_open();
    if (reserve < 0)
        return; /* still none free: try again at the next tick */
    uv_tcp_init(&w->loop, &w->listener);
    w->listener.data = w;
    if (uv_tcp_open(&w->listener, w->paused_fd) != 0 ||
        uv_listen((uv_stream_t *) &w->listener, 511, on_connection) != 0) {
        SCIMQ_LOG_ERROR(GATEWAY, "worker %d: cannot listen again", w->index);
        close(reserve);
        w->listener_closed = false;
        uv_close((uv_handle_t *) &w->listener, on_listener_closed);
        w->paused_fd = -1; /* closed with the handle */
        return;
    }
    w->paused_fd = -1;
    w->reserve = reserve;
    w->listening = true;
    SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 5000,
                     "worker %d: accepting again", w->index);
}

static void
on_connection(uv_stream_t *server, int status)
{
    struct gw_worker *w = server->data;

    if (status == UV_EMFILE || status == UV_ENFILE) {
        accept_pause(w);
        return;
    }
    if (status < 0) {
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 5000, "accept: %s",
                         uv_strerror(status));
        return;
    }
    gw_conn_accept(&w->host, server, false);
}

/* The admin socket: only its owner (or group) can connect at all. */
static void
on_admin_connection(uv_stream_t *server, int status)
{
    struct gw_worker *w = server->data;

    if (status < 0) {
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 5000, "admin socket: %s",
                         uv_strerror(status));
        return;
    }
    gw_conn_accept(&w->host, server, true);
}

/*
 * Worker 0 listens on the admin socket (gateway_admin_socket), made safe to
 * bind and given its permissions (adminsock.h).  Runs before the worker
 * threads.  0, or a SCIMQ_E* code with err set.
 */
static int
admin_listen(struct gateway *gw, uint16_t port, char *err, size_t errlen)
{
    struct gw_worker *w = &gw->workers[0];
    bool is_default;
    mode_t old;
    int rc;

    rc = gw_adminsock_path(gw->opt.admin_socket, port, gw->admin_path,
                           sizeof(gw->admin_path), &is_default);
    if (rc != 0) {
        snprintf(err, errlen, "'%s': longer than a socket path may be",
                 gw->opt.admin_socket);
        gw->admin_path[0] = '\0';
        return rc;
    }
    if (gw->admin_path[0] == '\0')
        return 0;
    rc = gw_adminsock_prepare(gw->admin_path, is_default, err, errlen);
    if (rc != 0) {
        gw->admin_path[0] = '\0';
        return rc;
    }
    uv_pipe_init(&w->loop, &w->admin, 0);
    w->admin.data = w;
    /* Born owner-only (no thread creates files yet): nobody else can
     * connect before its mode is set, whatever the umask. */
    old = umask(0177);
    rc = uv_pipe_bind(&w->admin, gw->admin_path);
    umask(old);
    if (rc != 0) {
        snprintf(err, errlen, "cannot bind %s: %s", gw->admin_path,
                 uv_strerror(rc));
        uv_close((uv_handle_t *) &w->admin, NULL);
        gw->admin_path[0] = '\0';
        return scimq__err_from_errno(-rc);
    }
    rc = gw_adminsock_secure(gw->admin_path, gw->opt.admin_group, err, errlen);
    if (rc == 0) {
        int lrc = uv_listen((uv_stream_t *) &w->admin, 64, on_admin_connection);

        if (lrc != 0) {
            snprintf(err, errlen, "cannot listen on %s: %s", gw->admin_path,
                     uv_strerror(lrc));
            rc = scimq__err_from_errno(-lrc);
        }
    }
    if (rc != 0) {
        uv_close((uv_handle_t *) &w->admin, NULL);
        unlink(gw->admin_path);
        gw->admin_path[0] = '\0';
        return rc;
    }
    w->admin_listening = true;
    return 0;
}

static void
on_timer(uv_timer_t *t)
{
    struct gw_worker *w = t->data;
    uint64_t now = gw_now_ms();

    if (w->index == 0) {
        gw_hub_tick(&w->gw->hub, w->index);
        gw_connreg_rates(&w->gw->conns, now);
    }
    if (w->paused_fd >= 0 && !w->stopping)
        accept_resume(w);
    if (now - w->last_timeout_check >= WORKER_TIMEOUT_CHECK_MS) {
        w->last_timeout_check = now;
        gw_conn_check_timeouts(&w->host, now);
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
    w->paused_fd = -1;
    w->reserve = reserve_open();
    if (w->reserve < 0)
        return scimq__err_from_errno(errno);
    rc = uv_loop_init(&w->loop);
    if (rc != 0)
        return scimq__err_from_errno(-rc);
    rc = gw_mailbox_init(&w->mailbox, &w->loop, on_actions, w);
    if (rc != 0)
        return rc;
    w->host.index = index;
    w->host.loop = &w->loop;
    w->host.gw = gw;
    w->host.conns = NULL;
    w->host.output_drained = gw_conn_output_drained;
    /* Unreferenced: they keep no loop alive, they only run with it. */
    uv_prepare_init(&w->loop, &w->flush_prepare);
    w->flush_prepare.data = w;
    uv_prepare_start(&w->flush_prepare, on_flush_prepare);
    uv_unref((uv_handle_t *) &w->flush_prepare);
    uv_check_init(&w->loop, &w->flush_check);
    w->flush_check.data = w;
    uv_check_start(&w->flush_check, on_flush_check);
    uv_unref((uv_handle_t *) &w->flush_check);
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

static void
set_port(struct sockaddr_storage *ss, uint16_t port)
{
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *) ss)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *) ss)->sin6_port = htons(port);
}

static void
workers_unwind(struct gateway *gw, int n)
{
    for (int j = 0; j < n; j++) {
        uv_walk(&gw->workers[j].loop, close_walk, NULL);
        uv_run(&gw->workers[j].loop, UV_RUN_DEFAULT);
        uv_loop_close(&gw->workers[j].loop);
        gw_mailbox_destroy(&gw->workers[j].mailbox);
    }
    free(gw->workers);
    gw->workers = NULL;
    gw->n_workers = 0;
}

int
gw_workers_start(struct gateway *gw, uint16_t *port_p, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *ai = NULL;
    struct sockaddr_storage ss;
    struct gw_mailbox **boxes;
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
    set_port(&ss, gw->opt.listen_port);

    gw->workers = calloc((size_t) gw->n_workers, sizeof(*gw->workers));
    boxes = calloc((size_t) gw->n_workers, sizeof(*boxes));
    if (gw->workers == NULL || boxes == NULL) {
        free(gw->workers);
        free(boxes);
        gw->workers = NULL;
        return SCIMQ_ENOMEM;
    }
    for (int i = 0; i < gw->n_workers; i++) {
        rc = worker_init(gw, &gw->workers[i], i, &ss, sslen);
        if (rc != 0) {
            SCIMQ_LOG_ERROR(GATEWAY, "cannot listen on %s:%u: %s",
                            host ? host : "*", gw->opt.listen_port,
                            scimq_strerror(rc));
            workers_unwind(gw, i + 1);
            free(boxes);
            return rc;
        }
        boxes[i] = &gw->workers[i].mailbox;
        /* Port 0: the first worker picked one; the others share it. */
        if (i == 0) {
            struct sockaddr_storage got;
            int len = sizeof(got);

            uv_tcp_getsockname(&gw->workers[0].listener,
                               (struct sockaddr *) &got, &len);
            *port_p = ntohs(got.ss_family == AF_INET
                                ? ((struct sockaddr_in *) &got)->sin_port
                                : ((struct sockaddr_in6 *) &got)->sin6_port);
            set_port(&ss, *port_p);
        }
    }
    err[0] = '\0';
    rc = admin_listen(gw, *port_p, err, errlen);
    if (rc != 0) {
        workers_unwind(gw, gw->n_workers);
        free(boxes);
        return rc;
    }
    gw_hub_attach(&gw->hub, boxes, gw->n_workers);
    for (int i = 0; i < gw->n_workers; i++) {
        if (pthread_create(&gw->workers[i].thread, NULL, worker_main,
                           &gw->workers[i]) != 0) {
            SCIMQ_LOG_ERROR(GATEWAY, "cannot start worker thread %d", i);
            abort(); /* half-started daemon: nothing sane to return to */
        }
    }
    return 0;
}

static void
post_all(struct gateway *gw, enum gw_action_kind kind)
{
    for (int i = 0; i < gw->n_workers; i++) {
        struct gw_action *a = gw_action_new(kind);

        a->worker = i;
        if (!gw_mailbox_post(&gw->workers[i].mailbox, a))
            gw_action_free(a);
    }
}

void
gw_workers_stop_listening(struct gateway *gw)
{
    post_all(gw, GW_ACT_STOP_LISTEN);
}

void
gw_workers_stop(struct gateway *gw)
{
    post_all(gw, GW_ACT_STOP);
    for (int i = 0; i < gw->n_workers; i++) {
        struct gw_worker *w = &gw->workers[i];

        pthread_join(w->thread, NULL);
        if (uv_loop_close(&w->loop) != 0)
            SCIMQ_LOG_WARN(GATEWAY, "worker %d: handles left open", i);
    }
}

void
gw_workers_free(struct gateway *gw)
{
    struct gw_mailbox **boxes = gw->hub.mailboxes;

    gw_hub_attach(&gw->hub, NULL, 0);
    for (int i = 0; i < gw->n_workers; i++)
        gw_mailbox_destroy(&gw->workers[i].mailbox);
    free(boxes);
    free(gw->workers);
    gw->workers = NULL;
    gw->n_workers = 0;
}
