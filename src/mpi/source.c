/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The gateway as an agent's message source: one libscimq session of S
 * streams, payloads received straight into the pool (payload_alloc), a
 * credit window in bytes and messages that the agent chooses once it
 * knows the gateway's largest message (WELCOME), that largest message
 * stated before the first GET,
 * leases extended while messages are held (auto_extend, up to
 * max_hold_ms).
 *
 * So that an idle agent can sleep in the kernel, a receiver thread waits
 * in scimq_client_get() (libscimq's own condition variable) and passes
 * each message on through a small FIFO and an eventfd the agent polls
 * together with its fabric.  The FIFO never holds more than the credit
 * (one message per pool slot), since every message in it is unsettled.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <scimq/error.h>

#include "common/log.h"
#include "source.h"

const struct scimq_mpi_source_ops *scimq__mpi_source_hook;

/* How long the receiver waits in one get: the bound of close(). */
#define GW_GET_WAIT_MS 100

struct gw_source {
    scimq_client_t *c;
    pthread_t thread;
    bool started;
    atomic_bool quit;
    int efd; /* eventfd: a message (or the end) for the agent */

    pthread_mutex_t lock;
    scimq_message_t **fifo; /* cap entries */
    uint32_t cap, head, n;
    int end_rc; /* SCIMQ_EOS or the error that ended receiving, once the
                   FIFO is empty; 0 while receiving */
};

static void
gw_wake(struct gw_source *g)
{
    uint64_t one = 1;

    /* EAGAIN only at a counter near 2^64: the agent is due anyway. */
    (void) !write(g->efd, &one, sizeof(one));
}

static void *
gw_receiver(void *arg)
{
    struct gw_source *g = arg;

    (void) pthread_setname_np(pthread_self(), "scimq-agent-rx");
    while (!atomic_load(&g->quit)) {
        scimq_message_t *m;
        int rc = scimq_client_get(g->c, &m, GW_GET_WAIT_MS);

        if (rc == SCIMQ_ETIMEDOUT || rc == SCIMQ_EAGAIN)
            continue;
        pthread_mutex_lock(&g->lock);
        if (rc == 0 && g->n == g->cap) {
            /* More unsettled messages than credit: the library broke its
             * word; give it back rather than lose it. */
            pthread_mutex_unlock(&g->lock);
            SCIMQ_LOG_ERROR(MPI,
                            "agent: delivery beyond the credit of %u: "
                            "requeued",
                            g->cap);
            (void) scimq_client_nack(g->c, m, 1, 0);
            scimq_message_free(g->c, m);
            continue;
        }
        if (rc == 0) {
            g->fifo[(g->head + g->n) % g->cap] = m;
            g->n++;
        } else {
            g->end_rc = rc;
        }
        pthread_mutex_unlock(&g->lock);
        gw_wake(g);
        if (rc != 0)
            break;
    }
    return NULL;
}

static void gw_close(void *src);

static int
gw_open(const struct scimq_mpi_source_cfg *cfg, void **src_p)
{
    scimq_client_options_t co;
    scimq_client_t *c = NULL;
    struct gw_source *g;
    struct scimq_mpi_source_credit cr;
    int rc;

    scimq_client_options_default(&co);
    co.streams = cfg->streams;
    co.client_name = "scimq-mpi-agent";
    co.token_file = cfg->token_file;
    co.payload_alloc = cfg->alloc;
    co.payload_release = cfg->release;
    co.alloc_arg = cfg->alloc_arg;
    /* Long work is not redelivered; dead ranks are noticed (liveness). */
    co.auto_extend = 1;
    co.max_hold_ms = cfg->max_hold_ms;
    rc = scimq_client_open(cfg->url, &co, &c);
    if (rc != 0) {
        SCIMQ_LOG_ERROR(MPI, "agent: cannot connect to %s: %s", cfg->url,
                        scimq_strerror(rc));
        return rc;
    }
    /* The pool is sized from the gateway's largest message. */
    rc = cfg->sized(cfg->alloc_arg, scimq_client_max_payload(c), &cr);
    if (rc != 0)
        goto fail;
    /* The largest message a rank takes, before the first GET. */
    rc = scimq_client_limit(c, cfg->queue, cr.max_payload);
    if (rc != 0) {
        SCIMQ_LOG_ERROR(MPI, "agent: cannot state the message limit on %s: %s",
                        cfg->queue, scimq_strerror(rc));
        goto fail;
    }
    if (scimq_client_session_version(c) < 2)
        SCIMQ_LOG_INFO(MPI,
                       "agent: the gateway speaks SciMP session version %u "
                       "and cannot be told the largest message (%" PRIu64
                       " bytes): larger ones are dead-lettered here (NACK "
                       "requeue=0)",
                       scimq_client_session_version(c), cr.max_payload);
    /* Credit by bytes (and a generous count): what is in flight fits the
     * pool (agent.c). */
    rc = scimq_client_subscribe(c, cfg->queue, cr.messages, cr.bytes);
    if (rc != 0) {
        SCIMQ_LOG_ERROR(MPI, "agent: cannot consume %s: %s", cfg->queue,
                        scimq_strerror(rc));
        goto fail;
    }
    g = calloc(1, sizeof(*g));
    if (g == NULL) {
        rc = SCIMQ_ENOMEM;
        goto fail;
    }
    g->c = c;
    g->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g->cap = cr.messages + 1;
    g->fifo = calloc(g->cap, sizeof(*g->fifo));
    pthread_mutex_init(&g->lock, NULL);
    if (g->efd < 0 || g->fifo == NULL ||
        pthread_create(&g->thread, NULL, gw_receiver, g) != 0) {
        rc = g->efd < 0 ? -errno : SCIMQ_ENOMEM;
        gw_close(g); /* closes c */
        return rc;
    }
    g->started = true;
    *src_p = g;
    return 0;
fail:
    (void) scimq_client_close(c);
    return rc;
}

static int
gw_get(void *src, scimq_message_t **m_p)
{
    struct gw_source *g = src;
    int rc = SCIMQ_EAGAIN;

    pthread_mutex_lock(&g->lock);
    if (g->n > 0) {
        *m_p = g->fifo[g->head];
        g->head = (g->head + 1) % g->cap;
        g->n--;
        rc = 0;
    } else if (g->end_rc != 0) {
        rc = g->end_rc;
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

static int
gw_wait_fd(void *src)
{
    return ((struct gw_source *) src)->efd;
}

static int
gw_settle(void *src, scimq_message_t *m, int how)
{
    struct gw_source *g = src;

    if (how == SCIMQ_SRC_ACK)
        return scimq_client_ack(g->c, m);
    return scimq_client_nack(g->c, m, how == SCIMQ_SRC_REQUEUE, 0);
}

static int
gw_extend(void *src, scimq_message_t *m, uint32_t lease_ms)
{
    return scimq_client_extend(((struct gw_source *) src)->c, m, lease_ms);
}

static void
gw_free(void *src, scimq_message_t *m)
{
    scimq_message_free(((struct gw_source *) src)->c, m);
}

static void
gw_close(void *src)
{
    struct gw_source *g = src;

    if (g->started) {
        atomic_store(&g->quit, true);
        pthread_join(g->thread, NULL);
    }
    /* What the agent never took goes back to the gateway. */
    while (g->n > 0) {
        scimq_message_t *m = g->fifo[g->head];

        g->head = (g->head + 1) % g->cap;
        g->n--;
        (void) scimq_client_nack(g->c, m, 1, 0);
        scimq_message_free(g->c, m);
    }
    (void) scimq_client_close(g->c);
    if (g->efd >= 0)
        close(g->efd);
    free(g->fifo);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* The session the agent's REPORT goes on (report.c). */
static scimq_client_t *
gw_session(void *src)
{
    struct gw_source *g = src;

    return g->c;
}

const struct scimq_mpi_source_ops scimq__mpi_gateway_source = {
    .open = gw_open,
    .get = gw_get,
    .wait_fd = gw_wait_fd,
    .settle = gw_settle,
    .extend = gw_extend,
    .free = gw_free,
    .close = gw_close,
    .session = gw_session,
};
