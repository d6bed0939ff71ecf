/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The broker: queues, messages, sessions, deliveries and payload memory,
 * all under gw->lock.
 *
 * Invariants (checked by the tests through the statistics):
 * - A guaranteed message is in exactly one place: its queue's ready list,
 *   its delayed list, or leased to one delivery.  It leaves the gateway only
 *   when acknowledged, dead-lettered into another queue, dropped by an
 *   explicit NACK without a dead-letter queue, or deleted with its queue.
 * - A payload is freed when no message references it (refs) and no frame
 *   is being written from it (pins); fan-out shares one payload.
 * - mem_used counts resident payload bytes; disk_used spill-file bytes.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <utlist.h>

#include <scimq/error.h>

#include "broker.h"
#include "common/auth.h"
#include "common/log.h"
#include "spill.h"
#include "worker.h"

/* Longest queue name. */
#define QUEUE_NAME_MAX 255

uint64_t
gw_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/* The broker exits on allocation failure of its small bookkeeping records
 * (STYLE D2: only the daemon may); payload buffers fail softly. */
static void *
xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);

    if (p == NULL) {
        SCIMQ_LOG_ERROR(GATEWAY, "out of memory for broker bookkeeping");
        abort();
    }
    return p;
}

static char *
xstrndup(const char *s, size_t n)
{
    char *p = xcalloc(1, n + 1);

    memcpy(p, s, n);
    return p;
}

/* ======================================================================== */
/* Names                                                                     */
/* ======================================================================== */

/* Queue names: 1..255 bytes, no control characters. */
static int
name_check(const scimq_proto_str_t *name)
{
    if (name->len == 0)
        return SCIMQ_EINVAL;
    if (name->len > QUEUE_NAME_MAX)
        return SCIMQ_ENAMETOOLONG;
    for (uint16_t i = 0; i < name->len; i++)
        if ((unsigned char) name->ptr[i] < 0x20 || name->ptr[i] == 0x7f)
            return SCIMQ_EINVAL;
    return 0;
}

static struct gw_queue *
queue_find(struct gateway *gw, const char *name, size_t len)
{
    struct gw_queue *q = NULL;

    HASH_FIND(hh, gw->queues, name, len, q);
    return q;
}

static struct gw_queue *
queue_find_str(struct gateway *gw, const scimq_proto_str_t *s)
{
    return queue_find(gw, s->ptr, s->len);
}

/* ======================================================================== */
/* Payloads                                                                  */
/* ======================================================================== */

static void
lru_remove(struct gateway *gw, struct gw_payload *pl)
{
    if (pl->lru_prev)
        pl->lru_prev->lru_next = pl->lru_next;
    else if (gw->lru_head == pl)
        gw->lru_head = pl->lru_next;
    if (pl->lru_next)
        pl->lru_next->lru_prev = pl->lru_prev;
    else if (gw->lru_tail == pl)
        gw->lru_tail = pl->lru_prev;
    pl->lru_prev = pl->lru_next = NULL;
}

static void
lru_append(struct gateway *gw, struct gw_payload *pl)
{
    pl->lru_prev = gw->lru_tail;
    pl->lru_next = NULL;
    if (gw->lru_tail)
        gw->lru_tail->lru_next = pl;
    else
        gw->lru_head = pl;
    gw->lru_tail = pl;
}

static void wake_parked_locked(struct gateway *gw);

static void
payload_free_locked(struct gateway *gw, struct gw_payload *pl)
{
    if (pl->where == GW_PL_SPILLING || pl->where == GW_PL_LOADING)
        return; /* the spill thread finishes first and calls back */
    lru_remove(gw, pl);
    if (pl->data != NULL) {
        free(pl->data);
        gw->mem_used -= pl->len;
    }
    if (pl->has_file) {
        gw_spill_unlink(gw, pl);
        gw->disk_used -= pl->len;
        gw->spill_files--;
    }
    free(pl->blocks);
    free(pl->names);
    free(pl);
    wake_parked_locked(gw);
}

static void
payload_release_locked(struct gateway *gw, struct gw_payload *pl)
{
    if (--pl->refs == 0 && pl->pins == 0)
        payload_free_locked(gw, pl);
}

void
gw_broker_unpin(struct gateway *gw, struct gw_payload *pl)
{
    pthread_mutex_lock(&gw->lock);
    if (--pl->pins == 0 && pl->refs == 0)
        payload_free_locked(gw, pl);
    pthread_mutex_unlock(&gw->lock);
}

/* Room for len more payload bytes, spilling if needed? */
static bool
spill_room_locked(const struct gateway *gw, uint64_t len)
{
    return gw->spill != NULL &&
           gw->disk_used + gw->mem_spilling + len <= gw->opt.disk_limit;
}

/*
 * May a new payload of len bytes be received now?  Under the memory limit,
 * yes.  Over it, only if it can be spilled and the spill thread has caught
 * up with earlier spills: otherwise a producer faster than the disk would
 * grow memory without bound.  The overshoot is at most one payload per
 * producer connection receiving at the same moment.
 */
static bool
memory_room_locked(const struct gateway *gw, uint64_t len)
{
    if (gw->mem_used + len <= gw->opt.memory_limit)
        return true;
    return spill_room_locked(gw, len) && gw->mem_spilling == 0;
}

/*
 * Keeps resident payload memory under the limit: spills the newest
 * resident payloads first (they are delivered last).  A payload that
 * already has a spill file is dropped from memory at once.
 */
static void
spill_maybe_locked(struct gateway *gw)
{
    struct gw_payload *pl = gw->lru_tail;

    while (pl != NULL &&
           gw->mem_used - gw->mem_spilling > gw->opt.memory_limit) {
        struct gw_payload *prev = pl->lru_prev;

        if (pl->where == GW_PL_MEMORY && pl->pins == 0 && pl->refs > 0 &&
            pl->waiters == NULL) {
            if (pl->has_file) {
                free(pl->data);
                pl->data = NULL;
                pl->where = GW_PL_DISK;
                gw->mem_used -= pl->len;
                lru_remove(gw, pl);
            } else if (spill_room_locked(gw, pl->len)) {
                pl->where = GW_PL_SPILLING;
                gw->mem_spilling += pl->len;
                gw_spill_submit(gw, pl, GW_SPILL_WRITE);
            }
        }
        pl = prev;
    }
}

/* ======================================================================== */
/* Deliveries                                                                */
/* ======================================================================== */

static struct gw_consumer *
consumer_of(struct gw_session *s, const struct gw_queue *q)
{
    struct gw_consumer *c;

    for (c = s->consumers; c != NULL; c = c->next)
        if (c->queue == q)
            return c;
    return NULL;
}

/* Posts the DELIVER frame of d, or waits for its payload to be loaded. */
static void
delivery_send_locked(struct gateway *gw, struct gw_delivery *d,
                     struct gw_payload *pl, uint64_t msg_id, uint32_t attempt,
                     const char *queue)
{
    struct gw_stream *st = &d->session->streams[d->stream];
    struct gw_action *a;

    if (pl->data == NULL) {
        /* On disk: queue behind the load; it resends when loaded. */
        d->waiter_next = pl->waiters;
        pl->waiters = d;
        if (pl->where == GW_PL_DISK) {
            pl->where = GW_PL_LOADING;
            gw_spill_submit(gw, pl, GW_SPILL_READ);
        }
        return;
    }
    a = gw_action_new(GW_ACT_DELIVER, d->conn_id);
    a->request_id = d->request_id;
    a->delivery_id = d->id;
    a->msg_id = msg_id;
    a->attempt = attempt;
    a->payload = pl;
    a->text = strdup(queue);
    if (a->text == NULL) {
        SCIMQ_LOG_ERROR(GATEWAY, "out of memory");
        abort();
    }
    pl->pins++;
    d->sent = true;
    gw_worker_post(gw, st->worker, a);
}

static void
delivery_free_locked(struct gateway *gw, struct gw_delivery *d)
{
    struct gw_payload *pl = NULL;

    if (d->msg != NULL)
        pl = d->msg->payload;
    HASH_DEL(gw->deliveries, d);
    /* Drop it from its payload's load waiters, if it was waiting. */
    if (pl != NULL) {
        struct gw_delivery **pp = &pl->waiters;

        while (*pp != NULL && *pp != d)
            pp = &(*pp)->waiter_next;
        if (*pp == d)
            *pp = d->waiter_next;
    }
    free(d);
}

static void
msg_free_locked(struct gateway *gw, struct gw_msg *m)
{
    m->queue->bytes -= m->payload->len;
    payload_release_locked(gw, m->payload);
    free(m);
}

static void dispatch_locked(struct gateway *gw, struct gw_queue *q);
static void eos_check_locked(struct gateway *gw, struct gw_queue *q);

/*
 * Ends the lease accounting of delivery d and frees it; d->msg stays
 * valid and belongs to the caller again (requeue, free, dead-letter).
 */
static struct gw_msg *
lease_release_locked(struct gateway *gw, struct gw_delivery *d)
{
    struct gw_session *s = d->session;
    struct gw_msg *m = d->msg;
    struct gw_consumer *c = consumer_of(s, m->queue);

    if (c != NULL && c->inflight > 0)
        c->inflight--;
    s->inflight--;
    /* A stream that reconnected since started counting from zero. */
    if (s->streams[d->stream].conn_id == d->conn_id)
        s->streams[d->stream].bytes_inflight -= d->bytes;
    m->queue->n_leased--;
    m->delivery = NULL;
    delivery_free_locked(gw, d);
    return m;
}

/* Appends a new message for payload pl to q (one payload reference). */
static struct gw_msg *
msg_append_locked(struct gateway *gw, struct gw_queue *q, struct gw_payload *pl)
{
    struct gw_msg *m = xcalloc(1, sizeof(*m));

    m->id = ++gw->next_msg_id;
    m->payload = pl;
    m->queue = q;
    m->state = GW_MSG_READY;
    pl->refs++;
    DL_APPEND(q->ready, m);
    q->n_ready++;
    q->bytes += pl->len;
    return m;
}

/*
 * A message leaves the queue for good through its dead-letter queue (as a
 * new message there) or, without one, is dropped and counted.
 */
static void
dead_letter_locked(struct gateway *gw, struct gw_msg *m)
{
    struct gw_queue *q = m->queue;
    struct gw_queue *dlq = NULL;

    if (q->dead_letter != NULL)
        dlq = queue_find(gw, q->dead_letter, strlen(q->dead_letter));
    q->c.dead_lettered++;
    if (dlq != NULL && dlq != q) {
        msg_append_locked(gw, dlq, m->payload);
        dlq->c.put++;
        dlq->c.put_bytes += m->payload->len;
        dispatch_locked(gw, dlq);
    } else {
        q->c.dropped++;
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, QUEUE, 10000,
                         "queue %s: message %" PRIu64 " dropped after %u "
                         "attempts (no dead-letter queue)",
                         q->name, m->id, m->attempt);
    }
    msg_free_locked(gw, m);
}

/*
 * Makes a leased or new message ready again, or dead-letters it when its
 * attempts are used up.  delay_ms > 0 parks it on the delayed list.
 */
static void
requeue_locked(struct gateway *gw, struct gw_msg *m, uint32_t delay_ms,
               bool front)
{
    struct gw_queue *q = m->queue;

    if (q->max_attempts > 0 && m->attempt >= q->max_attempts) {
        dead_letter_locked(gw, m);
        return;
    }
    q->c.redelivered++;
    if (delay_ms > 0) {
        m->state = GW_MSG_DELAYED;
        m->ready_at_ms = gw_now_ms() + delay_ms;
        DL_APPEND(q->delayed, m);
        q->n_delayed++;
        return;
    }
    m->state = GW_MSG_READY;
    if (front)
        DL_PREPEND(q->ready, m);
    else
        DL_APPEND(q->ready, m);
    q->n_ready++;
}

/* Ends a lease without acknowledgement: the message goes back. */
static void
unlease_locked(struct gateway *gw, struct gw_delivery *d, uint32_t delay_ms)
{
    requeue_locked(gw, lease_release_locked(gw, d), delay_ms, true);
}

/* Picks the connected stream of s with the fewest bytes in flight. */
static int
stream_pick(const struct gw_session *s)
{
    int best = -1;

    for (int i = 0; i < s->stream_count; i++) {
        if (s->streams[i].conn_id == 0)
            continue;
        if (best < 0 ||
            s->streams[i].bytes_inflight < s->streams[best].bytes_inflight)
            best = i;
    }
    return best;
}

static bool
consumer_can_take(const struct gw_consumer *c, uint64_t len)
{
    if (c->credit_msgs == 0)
        return false;
    /* A message larger than the byte window still goes to an idle
     * consumer, so it cannot get stuck. */
    return len <= c->credit_bytes || c->inflight == 0;
}

/* Hands the head message of q to consumer c of session s. */
static void
deliver_locked(struct gateway *gw, struct gw_queue *q, struct gw_session *s,
               struct gw_consumer *c)
{
    struct gw_msg *m = q->ready;
    struct gw_payload *pl = m->payload;
    struct gw_delivery *d;
    int i = stream_pick(s);

    if (i < 0)
        return;
    DL_DELETE(q->ready, m);
    q->n_ready--;
    m->attempt++;

    d = xcalloc(1, sizeof(*d));
    d->id = ++gw->next_delivery_id;
    d->session = s;
    d->stream = i;
    d->conn_id = s->streams[i].conn_id;
    d->request_id = c->request_id;
    d->bytes = pl->len;
    c->credit_msgs--;
    c->credit_bytes -= pl->len < c->credit_bytes ? pl->len : c->credit_bytes;
    q->c.delivered++;
    q->c.delivered_bytes += pl->len;

    /* A lease until settled (guaranteed) or until the frame is posted. */
    d->msg = m;
    d->deadline_ms = gw_now_ms() + q->ack_timeout_ms;
    m->state = GW_MSG_LEASED;
    m->delivery = d;
    q->n_leased++;
    c->inflight++;
    s->inflight++;
    s->streams[i].bytes_inflight += d->bytes;
    HASH_ADD(hh, gw->deliveries, id, sizeof(d->id), d);
    delivery_send_locked(gw, d, pl, m->id, m->attempt, q->name);
    /* Best effort: the message is gone once its frame is posted; if the
     * payload is being loaded, that happens in gw_broker_loaded_locked(). */
    if (q->kind != SCIMQ_PROTO_QUEUE_GUARANTEED && d->sent)
        msg_free_locked(gw, lease_release_locked(gw, d));
}

/* Delivers ready messages of q while some consumer has credit. */
static void
dispatch_locked(struct gateway *gw, struct gw_queue *q)
{
    while (q->ready != NULL) {
        struct gw_session *s, *pick = NULL;
        struct gw_consumer *pc = NULL;
        uint64_t len = q->ready->payload->len;

        for (s = gw->sessions; s != NULL; s = s->hh.next) {
            struct gw_consumer *c = consumer_of(s, q);

            if (c == NULL || !consumer_can_take(c, len) || s->connected == 0)
                continue;
            /*
             * The session with the fewest unsettled messages goes first:
             * a busy consumer asks less and gets less, so a straggler never
             * holds messages that others could take.
             */
            if (pick == NULL || c->inflight < pc->inflight) {
                pick = s;
                pc = c;
            }
        }
        if (pick == NULL)
            return;
        deliver_locked(gw, q, pick, pc);
    }
}

/* Sends EOS to every consumer of a closed, drained queue. */
static void
eos_check_locked(struct gateway *gw, struct gw_queue *q)
{
    struct gw_session *s;

    if (!q->closed || q->n_ready || q->n_delayed || q->n_leased)
        return;
    for (s = gw->sessions; s != NULL; s = s->hh.next) {
        struct gw_consumer *c = consumer_of(s, q);
        struct gw_action *a;
        int i = stream_pick(s);

        if (c == NULL || c->eos_sent || i < 0)
            continue;
        a = gw_action_new(GW_ACT_EOS, s->streams[i].conn_id);
        a->request_id = c->request_id;
        a->text = strdup(q->name);
        if (a->text == NULL)
            abort();
        gw_worker_post(gw, s->streams[i].worker, a);
        c->eos_sent = true;
    }
}

/* ======================================================================== */
/* Back-pressure                                                             */
/* ======================================================================== */

static void
wake_parked_locked(struct gateway *gw)
{
    size_t i = 0;

    while (i < gw->n_parked) {
        struct gw_parked *p = &gw->parked[i];

        if (!memory_room_locked(gw, p->need)) {
            i++;
            continue;
        }
        gw_worker_post(gw, p->worker, gw_action_new(GW_ACT_RESUME, p->conn_id));
        gw->parked[i] = gw->parked[--gw->n_parked];
    }
}

static void
park_locked(struct gateway *gw, struct gw_conn_info *ci, uint64_t need)
{
    if (gw->n_parked == gw->cap_parked) {
        size_t cap = gw->cap_parked ? gw->cap_parked * 2 : 16;
        struct gw_parked *p = realloc(gw->parked, cap * sizeof(*p));

        if (p == NULL)
            abort();
        gw->parked = p;
        gw->cap_parked = cap;
    }
    gw->parked[gw->n_parked++] = (struct gw_parked){ci->worker, ci->id, need};
    SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 5000,
                     "memory (%" PRIu64 " B) and spill space (%" PRIu64
                     " B) full: back-pressuring producers",
                     gw->mem_used, gw->disk_used);
}

void
gw_broker_unpark(struct gateway *gw, uint64_t conn_id)
{
    pthread_mutex_lock(&gw->lock);
    for (size_t i = 0; i < gw->n_parked; i++) {
        if (gw->parked[i].conn_id == conn_id) {
            gw->parked[i] = gw->parked[--gw->n_parked];
            break;
        }
    }
    pthread_mutex_unlock(&gw->lock);
}

/* ======================================================================== */
/* Life cycle and connections                                                */
/* ======================================================================== */

int
gw_broker_init(struct gateway *gw)
{
    int rc = pthread_mutex_init(&gw->lock, NULL);

    if (rc != 0)
        return SCIMQ_ENOMEM;
    gw->start_ms = gw_now_ms();
    gw->rate_t_ms = gw->start_ms;
    return 0;
}

void
gw_broker_fini(struct gateway *gw)
{
    struct gw_queue *q, *qt;
    struct gw_session *s, *st;
    struct gw_delivery *d, *dt;

    pthread_mutex_lock(&gw->lock);
    HASH_ITER(hh, gw->deliveries, d, dt)
    {
        struct gw_msg *m = d->msg;

        HASH_DEL(gw->deliveries, d);
        if (m != NULL) {
            m->queue->n_leased--;
            msg_free_locked(gw, m);
        }
        free(d);
    }
    HASH_ITER(hh, gw->queues, q, qt)
    {
        struct gw_msg *m, *mt;
        struct gw_binding *b, *bt;

        DL_FOREACH_SAFE(q->ready, m, mt)
        {
            DL_DELETE(q->ready, m);
            msg_free_locked(gw, m);
        }
        DL_FOREACH_SAFE(q->delayed, m, mt)
        {
            DL_DELETE(q->delayed, m);
            msg_free_locked(gw, m);
        }
        LL_FOREACH_SAFE(q->bindings, b, bt) free(b);
        HASH_DEL(gw->queues, q);
        free(q->name);
        free(q->dead_letter);
        free(q);
    }
    HASH_ITER(hh, gw->sessions, s, st)
    {
        struct gw_consumer *c, *ct;

        LL_FOREACH_SAFE(s->consumers, c, ct)
        {
            free(c->queue_name);
            free(c);
        }
        HASH_DEL(gw->sessions, s);
        free(s);
    }
    free(gw->parked);
    gw->parked = NULL;
    gw->n_parked = gw->cap_parked = 0;
    pthread_mutex_unlock(&gw->lock);
}

void
gw_broker_conn_register(struct gateway *gw, struct gw_conn_info *ci)
{
    pthread_mutex_lock(&gw->lock);
    HASH_ADD(hh, gw->conns, id, sizeof(ci->id), ci);
    gw->st.connections_total++;
    pthread_mutex_unlock(&gw->lock);
}

void
gw_broker_conn_unregister(struct gateway *gw, struct gw_conn_info *ci)
{
    pthread_mutex_lock(&gw->lock);
    HASH_DEL(gw->conns, ci);
    gw->st.bytes_in += ci->bytes_in;
    gw->st.bytes_out += ci->bytes_out;
    gw->st.frames_in += ci->frames_in;
    gw->st.frames_out += ci->frames_out;
    pthread_mutex_unlock(&gw->lock);
}

/* ======================================================================== */
/* Sessions                                                                  */
/* ======================================================================== */

int
gw_broker_hello(struct gateway *gw, struct gw_conn_info *ci,
                const scimq_proto_frame_t *f,
                uint8_t sid_out[SCIMQ_PROTO_SESSION_ID_LEN])
{
    static const uint8_t zero[SCIMQ_PROTO_SESSION_ID_LEN];
    const uint8_t *sid = f->args.hello.session_id;
    uint16_t idx = f->args.hello.stream_index;
    uint16_t count = f->args.hello.stream_count;
    struct gw_session *s = NULL;
    int rc = 0;

    if (count > GW_MAX_STREAMS)
        return SCIMQ_EINVAL;
    pthread_mutex_lock(&gw->lock);
    if (memcmp(sid, zero, sizeof(zero)) == 0) {
        s = xcalloc(1, sizeof(*s));
        do {
            if (scimq__random_bytes(s->id, sizeof(s->id)) != 0) {
                free(s);
                rc = SCIMQ_EIO;
                goto out;
            }
        } while (memcmp(s->id, zero, sizeof(zero)) == 0);
        s->stream_count = count;
        snprintf(s->client_name, sizeof(s->client_name), "%.*s",
                 f->args.hello.client_name.len, f->args.hello.client_name.ptr);
        HASH_ADD(hh, gw->sessions, id, sizeof(s->id), s);
    } else {
        HASH_FIND(hh, gw->sessions, sid, SCIMQ_PROTO_SESSION_ID_LEN, s);
        if (s == NULL) {
            rc = SCIMQ_ENOENT;
            goto out;
        }
        if (s->stream_count != count) {
            rc = SCIMQ_EINVAL;
            goto out;
        }
        if (s->streams[idx].conn_id != 0) {
            rc = SCIMQ_EBUSY;
            goto out;
        }
    }
    s->streams[idx].conn_id = ci->id;
    s->streams[idx].worker = ci->worker;
    s->streams[idx].bytes_inflight = 0;
    s->connected++;
    ci->session = s;
    ci->stream = idx;
    memcpy(sid_out, s->id, SCIMQ_PROTO_SESSION_ID_LEN);
    /* A (re)connected stream may unblock deliveries waiting for one. */
    for (struct gw_consumer *c = s->consumers; c != NULL; c = c->next)
        if (c->queue != NULL)
            dispatch_locked(gw, c->queue);
out:
    pthread_mutex_unlock(&gw->lock);
    return rc;
}

static void
session_end_locked(struct gateway *gw, struct gw_session *s)
{
    struct gw_delivery *d, *dt;
    struct gw_consumer *c, *ct;
    struct gw_queue *q, *qt;

    HASH_ITER(hh, gw->deliveries, d, dt)
    {
        if (d->session == s)
            unlease_locked(gw, d, 0);
    }
    LL_FOREACH_SAFE(s->consumers, c, ct)
    {
        free(c->queue_name);
        free(c);
    }
    s->consumers = NULL;
    HASH_DEL(gw->sessions, s);
    free(s);
    /* Requeued messages go to the remaining consumers. */
    HASH_ITER(hh, gw->queues, q, qt)
    {
        dispatch_locked(gw, q);
        eos_check_locked(gw, q);
    }
}

void
gw_broker_stream_closed(struct gateway *gw, struct gw_conn_info *ci)
{
    struct gw_session *s = ci->session;
    struct gw_delivery *d, *dt;
    struct gw_queue *q, *qt;

    if (s == NULL)
        return;
    pthread_mutex_lock(&gw->lock);
    if (s->streams[ci->stream].conn_id == ci->id) {
        s->streams[ci->stream].conn_id = 0;
        s->streams[ci->stream].bytes_inflight = 0;
        s->connected--;
    }
    ci->session = NULL;
    if (s->connected == 0) {
        session_end_locked(gw, s);
        goto out;
    }
    /*
     * What was in flight on this stream may not have arrived whole: it is
     * requeued, and its credit given back, since the client cannot know
     * which of those deliveries it lost (it does not top them up).
     */
    HASH_ITER(hh, gw->deliveries, d, dt)
    {
        if (d->session == s && d->conn_id == ci->id) {
            struct gw_consumer *c = consumer_of(s, d->msg->queue);

            if (c != NULL) {
                c->credit_msgs++;
                c->credit_bytes += d->bytes;
            }
            unlease_locked(gw, d, 0);
        }
    }
    HASH_ITER(hh, gw->queues, q, qt) dispatch_locked(gw, q);
out:
    pthread_mutex_unlock(&gw->lock);
}

/* ======================================================================== */
/* Queue management                                                          */
/* ======================================================================== */

int
gw_broker_declare(struct gateway *gw, const scimq_proto_frame_t *f,
                  uint64_t *created_p)
{
    const typeof(f->args.declare) *a = &f->args.declare;
    uint32_t timeout =
        a->ack_timeout_ms ? a->ack_timeout_ms : gw->opt.ack_timeout_ms;
    struct gw_queue *q;
    int rc = name_check(&a->queue);

    if (rc == 0 && a->dead_letter.len > 0)
        rc = name_check(&a->dead_letter);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&gw->lock);
    q = queue_find_str(gw, &a->queue);
    if (q != NULL) {
        bool same_dlq = (q->dead_letter == NULL && a->dead_letter.len == 0) ||
                        (q->dead_letter != NULL &&
                         strlen(q->dead_letter) == a->dead_letter.len &&
                         memcmp(q->dead_letter, a->dead_letter.ptr,
                                a->dead_letter.len) == 0);

        rc = (q->kind == a->kind && q->ack_timeout_ms == timeout &&
              q->max_attempts == a->max_attempts &&
              q->max_bytes == a->max_bytes && same_dlq)
                 ? 0
                 : SCIMQ_EEXIST;
        *created_p = 0;
        goto out;
    }
    if (a->dead_letter.len > 0) {
        /* The dead-letter queue must exist and be another queue. */
        if (a->dead_letter.len == a->queue.len &&
            memcmp(a->dead_letter.ptr, a->queue.ptr, a->queue.len) == 0) {
            rc = SCIMQ_EINVAL;
            goto out;
        }
        if (queue_find_str(gw, &a->dead_letter) == NULL) {
            rc = SCIMQ_ENOENT;
            goto out;
        }
    }
    q = xcalloc(1, sizeof(*q));
    q->name = xstrndup(a->queue.ptr, a->queue.len);
    q->kind = a->kind;
    q->ack_timeout_ms = timeout;
    q->max_attempts = a->max_attempts;
    q->max_bytes = a->max_bytes;
    if (a->dead_letter.len > 0)
        q->dead_letter = xstrndup(a->dead_letter.ptr, a->dead_letter.len);
    HASH_ADD_KEYPTR(hh, gw->queues, q->name, a->queue.len, q);
    /* Sessions that asked for it before it existed start consuming now. */
    for (struct gw_session *s = gw->sessions; s != NULL; s = s->hh.next)
        for (struct gw_consumer *c = s->consumers; c != NULL; c = c->next)
            if (c->queue == NULL && strcmp(c->queue_name, q->name) == 0)
                c->queue = q;
    SCIMQ_LOG_INFO(QUEUE, "queue %s declared (%s, ack timeout %u ms)", q->name,
                   q->kind ? "best-effort" : "guaranteed", timeout);
    *created_p = 1;
out:
    pthread_mutex_unlock(&gw->lock);
    return rc;
}

int
gw_broker_delete(struct gateway *gw, const scimq_proto_str_t *name,
                 uint64_t *discarded_p)
{
    struct gw_queue *q, *o, *ot;
    struct gw_delivery *d, *dt;
    struct gw_msg *m, *mt;
    uint64_t n = 0;
    int rc = 0;

    pthread_mutex_lock(&gw->lock);
    q = queue_find_str(gw, name);
    if (q == NULL) {
        rc = SCIMQ_ENOENT;
        goto out;
    }
    HASH_ITER(hh, gw->deliveries, d, dt)
    {
        if (d->msg != NULL && d->msg->queue == q) {
            msg_free_locked(gw, lease_release_locked(gw, d));
            n++;
        }
    }
    DL_FOREACH_SAFE(q->ready, m, mt)
    {
        DL_DELETE(q->ready, m);
        msg_free_locked(gw, m);
        n++;
    }
    DL_FOREACH_SAFE(q->delayed, m, mt)
    {
        DL_DELETE(q->delayed, m);
        msg_free_locked(gw, m);
        n++;
    }
    /* Consumers of the queue learn it is gone; bindings to it vanish. */
    for (struct gw_session *s = gw->sessions; s != NULL; s = s->hh.next) {
        struct gw_consumer *c = consumer_of(s, q);
        int i = stream_pick(s);

        if (c == NULL)
            continue;
        c->queue = NULL;
        c->inflight = 0;
        if (i >= 0) {
            struct gw_action *a =
                gw_action_new(GW_ACT_ERROR, s->streams[i].conn_id);

            a->request_id = c->request_id;
            a->code = SCIMQ_ENOENT;
            if (asprintf(&a->text, "queue %s deleted", q->name) < 0)
                abort();
            gw_worker_post(gw, s->streams[i].worker, a);
        }
    }
    HASH_ITER(hh, gw->queues, o, ot)
    {
        struct gw_binding **pp = &o->bindings;

        while (*pp != NULL) {
            if ((*pp)->target == q) {
                struct gw_binding *b = *pp;

                *pp = b->next;
                free(b);
            } else {
                pp = &(*pp)->next;
            }
        }
    }
    while (q->bindings != NULL) {
        struct gw_binding *b = q->bindings;

        q->bindings = b->next;
        free(b);
    }
    HASH_DEL(gw->queues, q);
    SCIMQ_LOG_INFO(QUEUE, "queue %s deleted (%" PRIu64 " messages)", q->name,
                   n);
    free(q->name);
    free(q->dead_letter);
    free(q);
    *discarded_p = n;
out:
    pthread_mutex_unlock(&gw->lock);
    return rc;
}

int
gw_broker_bind(struct gateway *gw, const scimq_proto_str_t *queue,
               const scimq_proto_str_t *target, bool bind)
{
    struct gw_queue *q, *t;
    struct gw_binding **pp;
    int rc = 0;

    pthread_mutex_lock(&gw->lock);
    q = queue_find_str(gw, queue);
    t = queue_find_str(gw, target);
    if (q == NULL || t == NULL) {
        rc = SCIMQ_ENOENT;
        goto out;
    }
    if (q == t) {
        rc = SCIMQ_EINVAL;
        goto out;
    }
    for (pp = &q->bindings; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->target == t)
            break;
    if (bind && *pp == NULL) {
        *pp = xcalloc(1, sizeof(**pp));
        (*pp)->target = t;
    } else if (!bind && *pp != NULL) {
        struct gw_binding *b = *pp;

        *pp = b->next;
        free(b);
    } else if (!bind) {
        rc = SCIMQ_ENOENT;
    }
out:
    pthread_mutex_unlock(&gw->lock);
    return rc;
}

int
gw_broker_close_queue(struct gateway *gw, const scimq_proto_str_t *name)
{
    struct gw_queue *q;
    int rc = 0;

    pthread_mutex_lock(&gw->lock);
    q = queue_find_str(gw, name);
    if (q == NULL) {
        rc = SCIMQ_ENOENT;
    } else {
        if (!q->closed)
            SCIMQ_LOG_INFO(QUEUE, "queue %s closed (end of stream)", q->name);
        q->closed = true;
        eos_check_locked(gw, q);
    }
    pthread_mutex_unlock(&gw->lock);
    return rc;
}

int
gw_broker_move(struct gateway *gw, const scimq_proto_str_t *queue,
               const scimq_proto_str_t *target, uint64_t max, uint64_t *moved_p)
{
    struct gw_queue *q, *t;
    uint64_t n = 0;
    int rc = 0;

    pthread_mutex_lock(&gw->lock);
    q = queue_find_str(gw, queue);
    t = queue_find_str(gw, target);
    if (q == NULL || t == NULL) {
        rc = SCIMQ_ENOENT;
        goto out;
    }
    if (q == t || t->closed) {
        rc = q == t ? SCIMQ_EINVAL : SCIMQ_ECLOSED;
        goto out;
    }
    while (q->ready != NULL && (max == 0 || n < max)) {
        struct gw_msg *m = q->ready;

        DL_DELETE(q->ready, m);
        q->n_ready--;
        q->bytes -= m->payload->len;
        m->queue = t;
        m->attempt = 0;
        DL_APPEND(t->ready, m);
        t->n_ready++;
        t->bytes += m->payload->len;
        t->c.moved_in++;
        n++;
    }
    *moved_p = n;
    dispatch_locked(gw, t);
    eos_check_locked(gw, q);
out:
    pthread_mutex_unlock(&gw->lock);
    return rc;
}

/* ======================================================================== */
/* Producing                                                                 */
/* ======================================================================== */

/* PUTs land in the queue and every bound target: all or nothing. */
static int
put_check_locked(const struct gw_queue *q, uint64_t len)
{
    if (q->closed)
        return SCIMQ_ECLOSED;
    if (q->max_bytes > 0 && len > q->max_bytes)
        return SCIMQ_EMSGSIZE;
    if (q->max_bytes > 0 && q->kind == SCIMQ_PROTO_QUEUE_GUARANTEED &&
        q->bytes + len > q->max_bytes)
        return SCIMQ_ENOSPC;
    for (struct gw_binding *b = q->bindings; b != NULL; b = b->next) {
        struct gw_queue *t = b->target;

        if (t->closed)
            return SCIMQ_ECLOSED;
        if (t->max_bytes > 0 && len > t->max_bytes)
            return SCIMQ_EMSGSIZE;
        if (t->max_bytes > 0 && t->kind == SCIMQ_PROTO_QUEUE_GUARANTEED &&
            t->bytes + len > t->max_bytes)
            return SCIMQ_ENOSPC;
    }
    return 0;
}

int
gw_broker_put_begin(struct gateway *gw, struct gw_conn_info *ci,
                    const scimq_proto_frame_t *f, struct gw_payload **pl_p)
{
    struct gw_payload *pl = NULL;
    struct gw_queue *q;
    size_t names = 0;
    int rc;

    if (atomic_load(&gw->draining))
        return SCIMQ_ESHUTDOWN;
    rc = name_check(&f->args.queue.queue);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&gw->lock);
    q = queue_find_str(gw, &f->args.queue.queue);
    rc = q == NULL ? SCIMQ_ENOENT : put_check_locked(q, f->payload_len);
    if (rc != 0)
        goto out;
    if (!memory_room_locked(gw, f->payload_len)) {
        park_locked(gw, ci, f->payload_len);
        rc = SCIMQ_EAGAIN;
        goto out;
    }
    pl = calloc(1, sizeof(*pl));
    if (pl != NULL && f->block_count > 0)
        pl->blocks = calloc(f->block_count, sizeof(*pl->blocks));
    for (uint32_t i = 0; i < f->block_count; i++)
        names += f->blocks[i].name_len;
    if (pl != NULL)
        pl->names = malloc(names + 1);
    if (pl != NULL && f->payload_len > 0)
        pl->data = malloc((size_t) f->payload_len);
    if (pl == NULL || (f->block_count > 0 && pl->blocks == NULL) ||
        pl->names == NULL || (f->payload_len > 0 && pl->data == NULL)) {
        if (pl != NULL) {
            free(pl->blocks);
            free(pl->names);
            free(pl->data);
            free(pl);
        }
        pl = NULL;
        rc = SCIMQ_ENOMEM;
        goto out;
    }
    pl->id = ++gw->next_payload_id;
    pl->len = f->payload_len;
    pl->block_count = f->block_count;
    names = 0;
    for (uint32_t i = 0; i < f->block_count; i++) {
        pl->blocks[i].name = pl->names + names;
        pl->blocks[i].name_len = f->blocks[i].name_len;
        pl->blocks[i].len = f->blocks[i].len;
        if (f->blocks[i].name_len > 0)
            memcpy(pl->names + names, f->blocks[i].name, f->blocks[i].name_len);
        names += f->blocks[i].name_len;
    }
    pl->where = GW_PL_MEMORY;
    /* Held by the connection until commit or abort. */
    pl->pins = 1;
    gw->mem_used += pl->len;
    gw->st.payload_allocated += pl->len;
out:
    pthread_mutex_unlock(&gw->lock);
    *pl_p = pl;
    return rc;
}

void
gw_broker_put_abort(struct gateway *gw, struct gw_payload *pl)
{
    gw_broker_unpin(gw, pl);
}

/*
 * A best-effort queue with a size cap drops its oldest ready messages to
 * make room (guaranteed queues refuse the PUT instead: put_check_locked).
 */
static void
make_room_locked(struct gateway *gw, struct gw_queue *q, uint64_t len)
{
    if (q->kind != SCIMQ_PROTO_QUEUE_BEST_EFFORT || q->max_bytes == 0)
        return;
    while (q->ready != NULL && q->bytes + len > q->max_bytes) {
        struct gw_msg *m = q->ready;

        DL_DELETE(q->ready, m);
        q->n_ready--;
        q->c.dropped++;
        msg_free_locked(gw, m);
    }
}

int
gw_broker_put_commit(struct gateway *gw, const scimq_proto_frame_t *f,
                     struct gw_payload *pl, uint64_t *msg_id_p)
{
    struct gw_queue *q;
    struct gw_msg *m;
    int rc;

    pthread_mutex_lock(&gw->lock);
    q = queue_find_str(gw, &f->args.queue.queue);
    /* The queue may have been deleted or closed while the payload came. */
    rc = q == NULL ? SCIMQ_ENOENT : put_check_locked(q, pl->len);
    if (rc != 0)
        goto out;
    make_room_locked(gw, q, pl->len);
    m = msg_append_locked(gw, q, pl);
    q->c.put++;
    q->c.put_bytes += pl->len;
    *msg_id_p = m->id;
    for (struct gw_binding *b = q->bindings; b != NULL; b = b->next) {
        make_room_locked(gw, b->target, pl->len);
        msg_append_locked(gw, b->target, pl); /* shared payload, no copy */
        b->target->c.put++;
        b->target->c.put_bytes += pl->len;
    }
    lru_append(gw, pl);
    dispatch_locked(gw, q);
    for (struct gw_binding *b = q->bindings; b != NULL; b = b->next)
        dispatch_locked(gw, b->target);
out:
    /* The connection's pin ends here; messages hold references now. */
    if (--pl->pins == 0 && pl->refs == 0)
        payload_free_locked(gw, pl);
    else if (rc == 0)
        spill_maybe_locked(gw);
    pthread_mutex_unlock(&gw->lock);
    return rc;
}

/* ======================================================================== */
/* Consuming                                                                 */
/* ======================================================================== */

int
gw_broker_get(struct gateway *gw, struct gw_conn_info *ci,
              const scimq_proto_frame_t *f)
{
    const typeof(f->args.get) *a = &f->args.get;
    struct gw_session *s = ci->session;
    struct gw_consumer *c;
    struct gw_queue *q;
    int rc = name_check(&a->queue);

    if (rc != 0)
        return rc;
    pthread_mutex_lock(&gw->lock);
    q = queue_find_str(gw, &a->queue);
    if (q == NULL) {
        rc = SCIMQ_ENOENT;
        goto out;
    }
    c = consumer_of(s, q);
    if (c == NULL) {
        c = xcalloc(1, sizeof(*c));
        c->queue = q;
        c->queue_name = xstrndup(a->queue.ptr, a->queue.len);
        c->next = s->consumers;
        s->consumers = c;
    }
    c->request_id = f->request_id;
    c->credit_msgs += a->credit_msgs;
    if (c->credit_msgs > UINT32_MAX)
        c->credit_msgs = UINT32_MAX;
    c->credit_bytes = c->credit_bytes + a->credit_bytes < c->credit_bytes
                          ? UINT64_MAX
                          : c->credit_bytes + a->credit_bytes;
    dispatch_locked(gw, q);
    eos_check_locked(gw, q);
out:
    pthread_mutex_unlock(&gw->lock);
    return rc;
}

void
gw_broker_settle(struct gateway *gw, struct gw_conn_info *ci,
                 const scimq_proto_frame_t *f)
{
    uint64_t id = f->args.ack.delivery_id; /* first field of all three */
    struct gw_delivery *d = NULL;
    struct gw_queue *q;

    pthread_mutex_lock(&gw->lock);
    HASH_FIND(hh, gw->deliveries, &id, sizeof(id), d);
    /* Unknown, settled, expired or another session's: ignored. */
    if (d == NULL || d->session != ci->session || d->msg == NULL ||
        d->msg->queue->kind != SCIMQ_PROTO_QUEUE_GUARANTEED) {
        gw->st.acks_unknown++;
        goto out;
    }
    q = d->msg->queue;
    switch (f->opcode) {
    case SCIMQ_PROTO_OP_EXTEND:
        d->deadline_ms =
            gw_now_ms() + (f->args.extend.lease_ms ? f->args.extend.lease_ms
                                                   : q->ack_timeout_ms);
        goto out;
    case SCIMQ_PROTO_OP_NACK:
        q->c.nacked++;
        if (f->args.nack.requeue)
            unlease_locked(gw, d, f->args.nack.delay_ms);
        else
            dead_letter_locked(gw, lease_release_locked(gw, d));
        break;
    default: /* ACK */
        q->c.acked++;
        msg_free_locked(gw, lease_release_locked(gw, d));
        break;
    }
    dispatch_locked(gw, q);
    eos_check_locked(gw, q);
out:
    pthread_mutex_unlock(&gw->lock);
}

/* ======================================================================== */
/* Spill completions                                                         */
/* ======================================================================== */

void
gw_broker_spilled_locked(struct gateway *gw, struct gw_payload *pl, int rc)
{
    gw->mem_spilling -= pl->len;
    pl->where = GW_PL_MEMORY;
    if (rc == 0) {
        pl->has_file = true;
        gw->disk_used += pl->len;
        gw->spill_files++;
        gw->st.spilled_bytes += pl->len;
        gw->st.spill_files_total++;
    }
    if (pl->refs == 0 && pl->pins == 0) {
        payload_free_locked(gw, pl);
        return;
    }
    if (rc == 0 && pl->pins == 0 && pl->waiters == NULL &&
        gw->mem_used - gw->mem_spilling > gw->opt.memory_limit) {
        free(pl->data);
        pl->data = NULL;
        pl->where = GW_PL_DISK;
        gw->mem_used -= pl->len;
        lru_remove(gw, pl);
    }
    wake_parked_locked(gw);
    spill_maybe_locked(gw);
}

void
gw_broker_loaded_locked(struct gateway *gw, struct gw_payload *pl,
                        uint8_t *data, int rc)
{
    struct gw_delivery *waiters = pl->waiters, *d;

    pl->where = GW_PL_DISK;
    if (rc == 0) {
        pl->data = data;
        pl->where = GW_PL_MEMORY;
        gw->mem_used += pl->len;
        gw->st.loaded_bytes += pl->len;
        lru_append(gw, pl);
    }
    pl->waiters = NULL;
    if (pl->refs == 0 && pl->pins == 0) {
        payload_free_locked(gw, pl);
        return;
    }
    while ((d = waiters) != NULL) {
        struct gw_msg *m = d->msg;

        waiters = d->waiter_next;
        d->waiter_next = NULL;
        if (rc != 0) {
            /* The spill file is unreadable: the message is lost to disk
             * failure; say so loudly rather than pretend. */
            SCIMQ_LOG_ERROR(GATEWAY,
                            "cannot load spilled payload %" PRIu64 ": %s",
                            pl->id, scimq_strerror(rc));
            continue;
        }
        delivery_send_locked(gw, d, pl, m->id, m->attempt, m->queue->name);
        /* Best effort: the message ends with the send. */
        if (m->queue->kind != SCIMQ_PROTO_QUEUE_GUARANTEED)
            msg_free_locked(gw, lease_release_locked(gw, d));
    }
    spill_maybe_locked(gw);
}

/* ======================================================================== */
/* Timer                                                                     */
/* ======================================================================== */

void
gw_broker_tick(struct gateway *gw)
{
    uint64_t now = gw_now_ms(), in = 0, out = 0;
    struct gw_delivery *d, *dt;
    struct gw_queue *q, *qt;
    struct gw_conn_info *ci, *cit;

    pthread_mutex_lock(&gw->lock);
    HASH_ITER(hh, gw->deliveries, d, dt)
    {
        if (d->msg == NULL || !d->sent ||
            d->msg->queue->kind != SCIMQ_PROTO_QUEUE_GUARANTEED ||
            d->deadline_ms > now)
            continue;
        d->msg->queue->c.expired++;
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_INFO, QUEUE, 5000,
                         "queue %s: lease of message %" PRIu64
                         " expired (attempt %u); requeued",
                         d->msg->queue->name, d->msg->id, d->msg->attempt);
        unlease_locked(gw, d, 0);
    }
    HASH_ITER(hh, gw->queues, q, qt)
    {
        struct gw_msg *m, *mt;

        DL_FOREACH_SAFE(q->delayed, m, mt)
        {
            if (m->ready_at_ms > now)
                continue;
            DL_DELETE(q->delayed, m);
            q->n_delayed--;
            m->state = GW_MSG_READY;
            DL_APPEND(q->ready, m);
            q->n_ready++;
        }
        dispatch_locked(gw, q);
        eos_check_locked(gw, q);
    }
    /* Rates over the last second or so. */
    if (now - gw->rate_t_ms >= 1000) {
        in = gw->st.bytes_in;
        out = gw->st.bytes_out;
        HASH_ITER(hh, gw->conns, ci, cit)
        {
            in += ci->bytes_in;
            out += ci->bytes_out;
        }
        gw->rate_in_bps = (double) (in - gw->rate_in_last) * 1000.0 /
                          (double) (now - gw->rate_t_ms);
        gw->rate_out_bps = (double) (out - gw->rate_out_last) * 1000.0 /
                           (double) (now - gw->rate_t_ms);
        gw->rate_in_last = in;
        gw->rate_out_last = out;
        gw->rate_t_ms = now;
    }
    pthread_mutex_unlock(&gw->lock);
}

uint64_t
gw_broker_leased(struct gateway *gw)
{
    struct gw_queue *q, *qt;
    uint64_t n = 0;

    pthread_mutex_lock(&gw->lock);
    HASH_ITER(hh, gw->queues, q, qt) n += q->n_leased;
    pthread_mutex_unlock(&gw->lock);
    return n;
}

/* ======================================================================== */
/* JSON                                                                      */
/* ======================================================================== */

static json_t *
queue_json_locked(const struct gw_queue *q)
{
    json_t *bind = json_array();

    for (struct gw_binding *b = q->bindings; b != NULL; b = b->next)
        json_array_append_new(bind, json_string(b->target->name));
    return json_pack(
        "{s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s?, s:o, "
        "s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}}",
        "name", q->name, "kind",
        q->kind == SCIMQ_PROTO_QUEUE_GUARANTEED ? "guaranteed" : "best-effort",
        "closed", q->closed, "ready", (json_int_t) q->n_ready, "delayed",
        (json_int_t) q->n_delayed, "in_flight", (json_int_t) q->n_leased,
        "bytes", (json_int_t) q->bytes, "ack_timeout_ms",
        (json_int_t) q->ack_timeout_ms, "max_attempts",
        (json_int_t) q->max_attempts, "max_bytes", (json_int_t) q->max_bytes,
        "dead_letter", q->dead_letter, "bindings", bind, "counters", "put",
        (json_int_t) q->c.put, "put_bytes", (json_int_t) q->c.put_bytes,
        "delivered", (json_int_t) q->c.delivered, "delivered_bytes",
        (json_int_t) q->c.delivered_bytes, "acked", (json_int_t) q->c.acked,
        "nacked", (json_int_t) q->c.nacked, "redelivered",
        (json_int_t) q->c.redelivered, "expired", (json_int_t) q->c.expired,
        "dead_lettered", (json_int_t) q->c.dead_lettered, "dropped",
        (json_int_t) q->c.dropped, "moved_in", (json_int_t) q->c.moved_in);
}

static bool
prefix_match(const char *name, const scimq_proto_str_t *prefix)
{
    return prefix == NULL || prefix->len == 0 ||
           (strlen(name) >= prefix->len &&
            memcmp(name, prefix->ptr, prefix->len) == 0);
}

json_t *
gw_broker_list(struct gateway *gw, const scimq_proto_str_t *prefix,
               uint64_t *count_p)
{
    json_t *arr = json_array();
    struct gw_queue *q, *qt;

    pthread_mutex_lock(&gw->lock);
    HASH_ITER(hh, gw->queues, q, qt)
    {
        if (prefix_match(q->name, prefix))
            json_array_append_new(arr, queue_json_locked(q));
    }
    pthread_mutex_unlock(&gw->lock);
    *count_p = json_array_size(arr);
    return json_pack("{s:o}", "queues", arr);
}

/* Resident set size from /proc/self/statm (bytes; 0 if unknown). */
static uint64_t
rss_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *fp = fopen("/proc/self/statm", "r");

    if (fp == NULL)
        return 0;
    if (fscanf(fp, "%lu %lu", &size, &resident) != 2)
        resident = 0;
    fclose(fp);
    return (uint64_t) resident * (uint64_t) sysconf(_SC_PAGESIZE);
}

json_t *
gw_broker_stats(struct gateway *gw, const scimq_proto_str_t *queue)
{
    json_t *queues = json_array(), *conns = json_array(), *root;
    struct gw_queue *q, *qt;
    struct gw_conn_info *ci, *cit;
    uint64_t in, out, fin, fout, leased = 0, ready = 0;

    pthread_mutex_lock(&gw->lock);
    in = gw->st.bytes_in;
    out = gw->st.bytes_out;
    fin = gw->st.frames_in;
    fout = gw->st.frames_out;
    HASH_ITER(hh, gw->queues, q, qt)
    {
        leased += q->n_leased;
        ready += q->n_ready + q->n_delayed;
        if (queue == NULL || queue->len == 0 ||
            (strlen(q->name) == queue->len &&
             memcmp(q->name, queue->ptr, queue->len) == 0))
            json_array_append_new(queues, queue_json_locked(q));
    }
    HASH_ITER(hh, gw->conns, ci, cit)
    {
        char sid[2 * SCIMQ_PROTO_SESSION_ID_LEN + 1] = "";

        in += ci->bytes_in;
        out += ci->bytes_out;
        fin += ci->frames_in;
        fout += ci->frames_out;
        if (ci->session != NULL)
            for (int i = 0; i < SCIMQ_PROTO_SESSION_ID_LEN; i++)
                snprintf(sid + 2 * i, 3, "%02x", ci->session->id[i]);
        json_array_append_new(
            conns,
            json_pack("{s:I, s:i, s:s, s:s, s:i, s:I, s:I, s:I, s:I, s:i, "
                      "s:i, s:s}",
                      "id", (json_int_t) ci->id, "worker", ci->worker, "peer",
                      ci->peer, "session", sid, "stream",
                      ci->session ? ci->stream : -1, "bytes_in",
                      (json_int_t) ci->bytes_in, "bytes_out",
                      (json_int_t) ci->bytes_out, "frames_in",
                      (json_int_t) ci->frames_in, "frames_out",
                      (json_int_t) ci->frames_out, "sndbuf", ci->sndbuf,
                      "rcvbuf", ci->rcvbuf, "congestion", ci->congestion));
    }
    root = json_pack(
        "{s:s, s:f, s:i, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:I, s:I, s:I, "
        "s:{s:I, s:I, s:I, s:I}, s:{s:s, s:I, s:I, s:I, s:I, s:I}, "
        "s:{s:I, s:I, s:I, s:I}, s:o, s:o}",
        "version", PACKAGE_VERSION, "uptime_s",
        (double) (gw_now_ms() - gw->start_ms) / 1000.0, "workers",
        gw->n_workers, "connections", (json_int_t) HASH_COUNT(gw->conns),
        "connections_accepted", (json_int_t) gw->st.connections_total,
        "sessions", (json_int_t) HASH_COUNT(gw->sessions), "bytes_in",
        (json_int_t) in, "bytes_out", (json_int_t) out, "rate_in_Bps",
        gw->rate_in_bps, "rate_out_Bps", gw->rate_out_bps, "frames_in",
        (json_int_t) fin, "frames_out", (json_int_t) fout, "payload_allocated",
        (json_int_t) gw->st.payload_allocated, "memory", "limit",
        (json_int_t) gw->opt.memory_limit, "used", (json_int_t) gw->mem_used,
        "spilling", (json_int_t) gw->mem_spilling, "rss",
        (json_int_t) rss_bytes(), "spill", "dir",
        gw->opt.spill_dir ? gw->opt.spill_dir : "", "limit",
        (json_int_t) gw->opt.disk_limit, "bytes", (json_int_t) gw->disk_used,
        "files", (json_int_t) gw->spill_files, "spilled_total",
        (json_int_t) gw->st.spilled_bytes, "loaded_total",
        (json_int_t) gw->st.loaded_bytes, "totals", "ready", (json_int_t) ready,
        "in_flight", (json_int_t) leased, "protocol_errors",
        (json_int_t) gw->st.protocol_errors, "parked_producers",
        (json_int_t) gw->n_parked, "queues", queues, "connections_detail",
        conns);
    pthread_mutex_unlock(&gw->lock);
    return root;
}
