/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Received messages: payload destinations, DELIVER -> scimq_message_t, the
 * local FIFO, EOS, settlement (ACK / NACK / EXTEND) and the credit window.
 *
 * Credit rule.  A subscription asks for credit_msgs / credit_bytes once;
 * afterwards each delivery gives back exactly one GET(queue, 1, payload
 * length) when it is settled (ack or nack) or, if it never is, when the
 * message is freed.  DELIVER does not say whether the queue is guaranteed
 * or best-effort, and this single rule is right for both: a guaranteed
 * delivery counts against the window until the consumer is done with it,
 * a best-effort one (settled by the gateway when sent) until the consumer
 * has taken it out of the library.  Each message tops up at most once
 * (the "credited" flag), and messages of a session that was replaced do
 * not top up the new one (epoch).  When a connection drops, the gateway
 * requeues what was unsettled on it and gives that credit back itself, so
 * messages that came on a connection since lost do not top up either
 * (stream generation).
 *
 * Size limit.  A queue with a limit (scimq_client_limit()) never hands the
 * consumer a larger message: a larger DELIVER is discarded as it is read
 * and given back with NACK requeue=0, so the gateway dead-letters it (or
 * drops it without a dead-letter queue) instead of delivering it again and
 * again.  The same happens when payload_alloc answers SCIMQ_EMSGSIZE.  A
 * version-2 gateway knows the limit and never sends such a message; a
 * version-1 gateway cannot be told, and this is then the only guard.
 *
 * Leases (opts.auto_extend).  Every guaranteed delivery of a queue whose
 * ack timeout is known joins its subscription's held list when it is read
 * and leaves it when it is settled or freed; the I/O thread's tick sends
 * EXTEND for those due (every half lease) until max_hold_ms, in batches.
 * A delivery whose connection was lost is dropped from the list (the
 * gateway has requeued it).  An ACK or NACK after the known lease end, or
 * after the connection was lost, is late: counted and logged.
 */
#include "config.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <scimq/error.h>

#include "client_internal.h"
#include "common/log.h"

/* Pause before a delivery that could not be stored comes back. */
#define CLIENT_NACK_NOMEM_DELAY_MS 100u
/* EXTEND frames per operation (the rest are sent on the next tick). */
#define CLIENT_EXTEND_BATCH 64u

/* ======================================================================== */
/* Allocator context                                                         */
/* ======================================================================== */

int
scimq__msg_ctx_create(scimq_release_fn release, void *arg,
                      struct scimq_client *c, struct msg_ctx **ctx_p)
{
    struct msg_ctx *ctx = calloc(1, sizeof(*ctx));

    if (ctx == NULL)
        return SCIMQ_ENOMEM;
    if (pthread_mutex_init(&ctx->lock, NULL) != 0) {
        free(ctx);
        return SCIMQ_ENOMEM;
    }
    atomic_init(&ctx->refs, 1);
    ctx->client = c;
    ctx->release = release;
    ctx->arg = arg;
    *ctx_p = ctx;
    return 0;
}

static void
msg_ctx_unref(struct msg_ctx *ctx)
{
    if (atomic_fetch_sub(&ctx->refs, 1) != 1)
        return;
    for (unsigned int i = 0; i < ctx->cache_n; i++)
        free(ctx->cache[i]);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

void
scimq__msg_ctx_detach(struct msg_ctx *ctx)
{
    /* Waits for a scimq_message_free() that is topping up credit. */
    pthread_mutex_lock(&ctx->lock);
    ctx->client = NULL;
    pthread_mutex_unlock(&ctx->lock);
    msg_ctx_unref(ctx);
}

/* ======================================================================== */
/* Payload buffers                                                           */
/* ======================================================================== */

/*
 * Payloads of CLIENT_PAYLOAD_CACHE_MIN bytes or more that malloc gave are
 * kept when their message is freed (up to CLIENT_PAYLOAD_CACHE_N buffers
 * and CLIENT_PAYLOAD_CACHE_BYTES) and given to the next DELIVER they fit.
 * The I/O thread allocates them and the application frees them: freed
 * back to malloc, a run of them at the top of the I/O thread's heap is
 * returned to the kernel (madvise) and the next ones fault in their pages
 * again, zeroed: at 64 KiB, 16 page faults and 64 KiB cleared per message.
 */
#define CLIENT_PAYLOAD_CACHE_MIN (16u << 10)
#define CLIENT_PAYLOAD_CACHE_BYTES (4u << 20)

/* A buffer of at least len bytes (len >= 1): a kept one, else malloc's. */
static void *
payload_buf_get(struct msg_ctx *ctx, size_t len)
{
    void *buf = NULL;

    if (len >= CLIENT_PAYLOAD_CACHE_MIN) {
        pthread_mutex_lock(&ctx->lock);
        for (unsigned int i = ctx->cache_n; i-- > 0;) {
            /* Not twice as large: a big buffer waits for a big message. */
            if (ctx->cache_cap[i] >= len && ctx->cache_cap[i] / 2 <= len) {
                buf = ctx->cache[i];
                ctx->cache_bytes -= ctx->cache_cap[i];
                ctx->cache_n--;
                ctx->cache[i] = ctx->cache[ctx->cache_n];
                ctx->cache_cap[i] = ctx->cache_cap[ctx->cache_n];
                break;
            }
        }
        pthread_mutex_unlock(&ctx->lock);
    }
    return buf != NULL ? buf : malloc(len);
}

/* Keeps buf (from payload_buf_get) for a later DELIVER, or frees it. */
static void
payload_buf_put(struct msg_ctx *ctx, void *buf)
{
    size_t cap = malloc_usable_size(buf);

    if (cap >= CLIENT_PAYLOAD_CACHE_MIN) {
        pthread_mutex_lock(&ctx->lock);
        if (ctx->cache_n < CLIENT_PAYLOAD_CACHE_N &&
            ctx->cache_bytes + cap <= CLIENT_PAYLOAD_CACHE_BYTES) {
            ctx->cache[ctx->cache_n] = buf;
            ctx->cache_cap[ctx->cache_n++] = cap;
            ctx->cache_bytes += cap;
            buf = NULL;
        }
        pthread_mutex_unlock(&ctx->lock);
    }
    free(buf);
}

/* ======================================================================== */
/* Payload destinations                                                      */
/* ======================================================================== */

/* A DELIVER over its queue's limit (see "Size limit" above). */
static bool
too_large(struct scimq_client *c, const scimq_proto_frame_t *f)
{
    const scimq_proto_str_t *q = &f->args.deliver.queue;
    struct qlimit *ql;
    bool over = false;

    pthread_mutex_lock(&c->lock);
    ql = scimq__qlimit_find(c, q->ptr, q->len);
    if (ql != NULL && ql->max_message != 0 && f->payload_len > ql->max_message)
        over = true;
    pthread_mutex_unlock(&c->lock);
    return over;
}

int
scimq__msg_payload_dest(struct scimq_client *c, struct stream *s,
                        const scimq_proto_frame_t *f)
{
    uint64_t len = f->payload_len;
    void *buf = NULL, *ctx = NULL;
    int rc;

    s->rx_drop_rc = 0;
    s->rx_user = false;
    if (f->opcode == SCIMQ_PROTO_OP_DELIVER && too_large(c, f)) {
        /* Discarded as it is read; scimq__msg_deliver() dead-letters it. */
        s->rx_drop_rc = SCIMQ_EMSGSIZE;
    } else if (f->opcode == SCIMQ_PROTO_OP_DELIVER) {
        if (c->opts.payload_alloc != NULL) {
            rc = c->opts.payload_alloc(c->opts.alloc_arg, len, &buf, &ctx);
            if (rc < 0 || buf == NULL) {
                s->rx_drop_rc = rc < 0 ? rc : SCIMQ_ENOMEM;
                buf = NULL;
            } else {
                s->rx_user = true;
            }
        } else {
            /* len <= max_payload <= SIZE_MAX: the decoder checked it. */
            buf = payload_buf_get(c->mctx, len > 0 ? (size_t) len : 1);
            if (buf == NULL)
                s->rx_drop_rc = SCIMQ_ENOMEM;
        }
    } else if (f->opcode == SCIMQ_PROTO_OP_OK) {
        /* Room for the NUL that makes the JSON a C string. */
        buf = len < SIZE_MAX ? malloc((size_t) len + 1) : NULL;
        if (buf == NULL)
            s->rx_drop_rc = SCIMQ_ENOMEM;
    }
    if (s->rx_drop_rc < 0 && s->rx_drop_rc != SCIMQ_EMSGSIZE)
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, CLIENT, 1000,
                         "no buffer for a %llu-byte payload: %s",
                         (unsigned long long) len,
                         scimq_strerror(s->rx_drop_rc));
    s->rx_buf = buf;
    s->rx_ctx = ctx;
    /* An empty message: nothing to read, the frame is complete. */
    if (!s->rx_payload)
        return 0;
    /* NULL discards the payload and keeps the stream in sync. */
    return scimq_proto_decoder_set_payload(s->dec, buf, len);
}

static void
payload_release(struct msg_ctx *mctx, bool user, void *buf, void *ctx)
{
    if (buf == NULL)
        return;
    if (user && mctx->release != NULL)
        mctx->release(mctx->arg, buf, ctx);
    else
        payload_buf_put(mctx, buf);
}

void
scimq__msg_payload_drop(struct scimq_client *c, struct stream *s)
{
    payload_release(c->mctx, s->rx_user, s->rx_buf, s->rx_ctx);
    s->rx_buf = NULL;
    s->rx_ctx = NULL;
    s->rx_user = false;
}

/* ======================================================================== */
/* Subscriptions                                                             */
/* ======================================================================== */

uint64_t
scimq__sub_rid(struct sub *sub)
{
    return CLIENT_RID_SUB_BIT | ((uint64_t) sub->id << 32) | sub->get_seq++;
}

struct sub *
scimq__sub_find(struct scimq_client *c, const char *queue, size_t len)
{
    struct scimq_list *e, *tmp;

    SCIMQ_LIST_FOREACH (e, tmp, &c->subs) {
        struct sub *sub = SCIMQ_CONTAINER_OF(e, struct sub, link);

        if (strlen(sub->queue) == len && memcmp(sub->queue, queue, len) == 0)
            return sub;
    }
    return NULL;
}

struct qlimit *
scimq__qlimit_find(struct scimq_client *c, const char *queue, size_t len)
{
    struct scimq_list *e, *tmp;

    SCIMQ_LIST_FOREACH (e, tmp, &c->qlimits) {
        struct qlimit *ql = SCIMQ_CONTAINER_OF(e, struct qlimit, link);

        if (strlen(ql->queue) == len && memcmp(ql->queue, queue, len) == 0)
            return ql;
    }
    return NULL;
}

bool
scimq__limit_frame(struct scimq_client *c, struct sub *sub,
                   scimq_proto_frame_t *f)
{
    struct qlimit *ql;

    if (c->version < 2)
        return false;
    ql = scimq__qlimit_find(c, sub->queue, strlen(sub->queue));
    if (ql == NULL || ql->max_message == 0)
        return false; /* no limit is what a new session starts with */
    memset(f, 0, sizeof(*f));
    f->opcode = SCIMQ_PROTO_OP_LIMIT;
    f->request_id = scimq__sub_rid(sub);
    f->args.limit.max_message = ql->max_message;
    f->args.limit.queue.ptr = sub->queue;
    f->args.limit.queue.len = (uint16_t) strlen(sub->queue);
    return true;
}

static struct sub *
sub_by_id(struct scimq_client *c, uint32_t id)
{
    struct scimq_list *e, *tmp;

    SCIMQ_LIST_FOREACH (e, tmp, &c->subs) {
        struct sub *sub = SCIMQ_CONTAINER_OF(e, struct sub, link);

        if (sub->id == id)
            return sub;
    }
    return NULL;
}

/*
 * The credit one settled delivery gives back (lock held): one message and
 * its bytes, less what a shrunk window still owes.  Returns false when
 * nothing is to be sent.
 */
static bool
topup_frame(struct scimq_client *c, const char *queue, uint64_t len,
            scimq_proto_frame_t *f)
{
    struct sub *sub = scimq__sub_find(c, queue, strlen(queue));
    uint32_t msgs = 1;
    uint64_t take;

    if (sub == NULL || sub->eos || sub->err != 0)
        return false;
    if (sub->debt_msgs > 0) {
        sub->debt_msgs--;
        msgs = 0;
    }
    take = sub->debt_bytes < len ? sub->debt_bytes : len;
    sub->debt_bytes -= take;
    len -= take;
    if (msgs == 0 && len == 0)
        return false;
    memset(f, 0, sizeof(*f));
    f->opcode = SCIMQ_PROTO_OP_GET;
    f->request_id = scimq__sub_rid(sub);
    f->args.get.credit_msgs = msgs;
    f->args.get.credit_bytes = len;
    f->args.get.queue.ptr = sub->queue;
    f->args.get.queue.len = (uint16_t) strlen(sub->queue);
    return true;
}

/*
 * Session version 3: an ACK joins the ones gathered for the I/O thread,
 * and the credit it gives back joins its subscription's top-up (lock
 * held).  The first one of a turn wakes the I/O thread.
 */
static int
ack_gather(struct scimq_client *c, uint64_t delivery_id, const char *queue,
           uint64_t len, uint32_t epoch, bool topup)
{
    scimq_proto_frame_t g;

    if (c->loop_stopped)
        return SCIMQ_ECANCELED;
    if (c->dead != 0)
        return c->dead;
    if (c->n_acks == c->acks_cap) {
        size_t cap = c->acks_cap ? 2 * c->acks_cap : 256;
        uint64_t *a = realloc(c->acks, cap * sizeof(*a));

        if (a == NULL)
            return SCIMQ_ENOMEM;
        c->acks = a;
        c->acks_cap = cap;
    }
    c->acks[c->n_acks++] = delivery_id;
    if (topup && epoch == c->epoch && topup_frame(c, queue, len, &g)) {
        struct sub *sub = scimq__sub_find(c, queue, strlen(queue));

        sub->topup_msgs += g.args.get.credit_msgs;
        sub->topup_bytes += g.args.get.credit_bytes;
    }
    if (c->n_acks == 1)
        uv_async_send(&c->wakeup);
    return 0;
}

static int
id_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

    return x < y ? -1 : x > y;
}

/*
 * The ACK_RANGE frames of n sorted ids (duplicates dropped) into f, ranges
 * into r (room for n).  Returns the number of frames.
 */
static size_t
ack_frames(struct scimq_client *c, const uint64_t *ids, size_t n,
           scimq_proto_range_t *r, scimq_proto_frame_t *f)
{
    size_t nf = 0, nr = 0;
    uint64_t frame_ids = 0;

    for (size_t i = 0; i < n; i++) {
        uint64_t id = ids[i];

        if (nf > 0) {
            scimq_proto_ranges_t *cur = &f[nf - 1].args.ack_range.ranges;
            scimq_proto_range_t *last = &r[nr - 1];
            uint64_t end = last->first + last->count; /* first id after */

            if (id < end)
                continue; /* the same id twice */
            if (frame_ids < SCIMQ_PROTO_MAX_RANGE_IDS) {
                frame_ids++;
                if (id == end) {
                    last->count++;
                    continue;
                }
                if (cur->n < SCIMQ_PROTO_MAX_RANGES) {
                    r[nr++] = (scimq_proto_range_t){id, 1};
                    cur->n++;
                    continue;
                }
            }
        }
        /* A frame of its own: the first, or the last one is full. */
        memset(&f[nf], 0, sizeof(f[nf]));
        f[nf].opcode = SCIMQ_PROTO_OP_ACK_RANGE;
        f[nf].request_id = scimq__client_rid(c);
        f[nf].args.ack_range.ranges.list = &r[nr];
        f[nf].args.ack_range.ranges.n = 1;
        r[nr++] = (scimq_proto_range_t){id, 1};
        nf++;
        frame_ids = 1;
    }
    return nf;
}

void
scimq__msg_flush_acks(struct scimq_client *c)
{
    scimq_proto_frame_t *f = NULL;
    scimq_proto_range_t *r = NULL;
    struct scimq_list *e, *tmp;
    struct op *op = NULL;
    uint64_t *ids;
    size_t n, nf, nsubs = 0;
    int rc = SCIMQ_ENOMEM;

    pthread_mutex_lock(&c->lock);
    n = c->n_acks;
    if (n == 0) {
        pthread_mutex_unlock(&c->lock);
        return;
    }
    ids = c->acks;
    c->acks = NULL;
    c->n_acks = c->acks_cap = 0;
    SCIMQ_LIST_FOREACH (e, tmp, &c->subs)
        nsubs++;
    f = calloc(n + nsubs, sizeof(*f));
    r = calloc(n, sizeof(*r));
    if (f != NULL && r != NULL) {
        qsort(ids, n, sizeof(*ids), id_cmp);
        nf = ack_frames(c, ids, n, r, f);
        /* The credit after the settlements, as per-message top-ups are. */
        SCIMQ_LIST_FOREACH (e, tmp, &c->subs) {
            struct sub *sub = SCIMQ_CONTAINER_OF(e, struct sub, link);

            if (sub->topup_msgs == 0 && sub->topup_bytes == 0)
                continue;
            f[nf].opcode = SCIMQ_PROTO_OP_GET;
            f[nf].request_id = scimq__sub_rid(sub);
            f[nf].args.get.credit_msgs = sub->topup_msgs;
            f[nf].args.get.credit_bytes = sub->topup_bytes;
            f[nf].args.get.queue.ptr = sub->queue;
            f[nf].args.get.queue.len = (uint16_t) strlen(sub->queue);
            sub->topup_msgs = 0;
            sub->topup_bytes = 0;
            nf++;
        }
        rc = scimq__op_frames(OP_SEND, f, nf, &op);
    }
    pthread_mutex_unlock(&c->lock);
    free(f);
    free(r);
    free(ids);
    if (rc < 0) {
        /* Unsent ACKs only delay: the leases expire and redeliver. */
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, CLIENT, 10000,
                         "cannot send %zu ACKs: %s", n, scimq_strerror(rc));
        return;
    }
    scimq__session_submit(c, op);
}

void
scimq__msg_acks_free(struct scimq_client *c)
{
    free(c->acks);
    c->acks = NULL;
    c->n_acks = c->acks_cap = 0;
}

/*
 * Sends the frames settling a delivery (first) and topping up its credit.
 * The op is built under the lock, since the GET points into the
 * subscription.
 */
static int
settle_send(struct scimq_client *c, uint64_t delivery_id, const char *queue,
            uint64_t len, uint32_t epoch, bool topup, int opcode, int requeue,
            uint32_t ms)
{
    scimq_proto_frame_t f[2];
    struct op *op = NULL;
    size_t n = 0;
    int rc = 0;

    memset(f, 0, sizeof(f));
    if (opcode == SCIMQ_PROTO_OP_ACK) {
        pthread_mutex_lock(&c->lock);
        if (c->version >= SCIMQ_PROTO_SESSION_VERSION_RANGES) {
            rc = ack_gather(c, delivery_id, queue, len, epoch, topup);
            pthread_mutex_unlock(&c->lock);
            return rc;
        }
        pthread_mutex_unlock(&c->lock);
    }
    if (opcode != 0) {
        f[0].opcode = (uint8_t) opcode;
        f[0].request_id = scimq__client_rid(c);
        switch (opcode) {
        case SCIMQ_PROTO_OP_ACK:
            f[0].args.ack.delivery_id = delivery_id;
            break;
        case SCIMQ_PROTO_OP_NACK:
            f[0].args.nack.delivery_id = delivery_id;
            f[0].args.nack.delay_ms = ms;
            f[0].args.nack.requeue = requeue ? 1 : 0;
            break;
        default:
            f[0].args.extend.delivery_id = delivery_id;
            f[0].args.extend.lease_ms = ms;
            break;
        }
        n = 1;
    }
    pthread_mutex_lock(&c->lock);
    if (topup && epoch == c->epoch && topup_frame(c, queue, len, &f[n]))
        n++;
    if (n > 0)
        rc = scimq__op_frames(OP_SEND, f, n, &op);
    pthread_mutex_unlock(&c->lock);
    if (rc < 0 || n == 0)
        return rc;
    rc = scimq__client_post(c, op);
    if (rc < 0)
        scimq__op_free(op);
    return rc;
}

/* The connection the message came on is still the same one. */
static bool
msg_stream_alive(const struct msg *m)
{
    return m->stream == NULL || atomic_load(&m->stream->gen) == m->stream_gen;
}

/* Leaves the held list (lock held). */
static void
unhold(struct msg *m)
{
    if (m->held) {
        scimq_list_remove(&m->hold_link);
        m->held = false;
    }
}

/*
 * Lease bookkeeping of a settlement: an explicit EXTEND moves the known
 * lease end; an ACK or NACK ends lease keeping and is counted (and
 * logged) when it comes after the lease ended.
 */
static void
lease_settle(struct scimq_client *c, struct msg *m, int opcode, uint32_t ms)
{
    uint64_t now = uv_hrtime(), held_ms;
    bool late;

    pthread_mutex_lock(&c->lock);
    if (opcode == SCIMQ_PROTO_OP_EXTEND) {
        if (ms > 0 && m->lease_end_ns != 0 &&
            now + (uint64_t) ms * 1000000u > m->lease_end_ns)
            m->lease_end_ns = now + (uint64_t) ms * 1000000u;
        pthread_mutex_unlock(&c->lock);
        return;
    }
    unhold(m);
    late = m->lease_lost || !msg_stream_alive(m) ||
           (m->lease_end_ns != 0 && now > m->lease_end_ns);
    if (late)
        c->late_settles++;
    pthread_mutex_unlock(&c->lock);
    if (!late)
        return;
    held_ms = (now - m->arrived_ns) / 1000000u;
    SCIMQ_LOG_SPARSE(
        SCIMQ_LOG_WARN, CLIENT, 1000,
        "%s: %s of message %llu after %llu ms, once its lease "
        "had ended: it is (or will be) delivered again",
        m->pub.queue, opcode == SCIMQ_PROTO_OP_ACK ? "ACK" : "NACK",
        (unsigned long long) m->pub.msg_id, (unsigned long long) held_ms);
}

int
scimq__msg_settle(struct scimq_client *c, struct msg *m, int opcode,
                  int requeue, uint32_t ms)
{
    bool topup = false;

    lease_settle(c, m, opcode, ms);
    /* EXTEND keeps the delivery: it still counts against the window. */
    if (opcode != SCIMQ_PROTO_OP_EXTEND)
        topup = !atomic_exchange(&m->credited, true) && msg_stream_alive(m);
    return settle_send(c, m->pub.delivery_id, m->pub.queue, m->pub.payload_len,
                       m->epoch, topup, opcode, requeue, ms);
}

/* ======================================================================== */
/* Delivery                                                                  */
/* ======================================================================== */

/*
 * Says why a delivery is dead-lettered for its size: in full the first
 * time for a queue with a limit, then now and then with the count.
 */
static void
refused_log(struct scimq_client *c, const char *queue,
            const scimq_proto_frame_t *f)
{
    unsigned long long id = (unsigned long long) f->args.deliver.msg_id;
    unsigned long long len = (unsigned long long) f->payload_len;
    unsigned long long limit = 0, n = 0;
    struct qlimit *ql;
    unsigned int version;

    pthread_mutex_lock(&c->lock);
    version = c->version;
    ql = scimq__qlimit_find(c, queue, strlen(queue));
    if (ql != NULL) {
        limit = ql->max_message;
        n = ++ql->refused;
    }
    pthread_mutex_unlock(&c->lock);
    if (ql == NULL)
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_ERROR, CLIENT, 10000,
                         "%s: message %llu of %llu bytes does not fit the "
                         "consumer's buffers; dead-lettered (NACK requeue=0)",
                         queue, id, len);
    else if (n == 1)
        SCIMQ_LOG_ERROR(CLIENT,
                        "%s: message %llu of %llu bytes is larger than this "
                        "consumer takes (%llu bytes); dead-lettered (NACK "
                        "requeue=0)%s",
                        queue, id, len, limit,
                        version < 2 ? "; the gateway speaks session version "
                                      "1 and cannot be told the limit"
                                    : "");
    else
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, CLIENT, 10000,
                         "%s: message %llu of %llu bytes is larger than this "
                         "consumer takes; dead-lettered (%llu so far)",
                         queue, id, len, n);
}

int
scimq__msg_deliver(struct scimq_client *c, struct stream *s,
                   const scimq_proto_frame_t *f)
{
    const scimq_proto_str_t *q = &f->args.deliver.queue;
    scimq_block_t *blocks;
    size_t size;
    struct msg *m;
    char *p, *queue;
    uint32_t epoch;
    int rc = s->rx_drop_rc;

    if (c->stopping)
        return 0; /* after BYE: the end of the session requeues it */

    size = sizeof(*m) + (size_t) f->block_count * sizeof(scimq_block_t) +
           (size_t) q->len + 1;
    for (uint32_t i = 0; i < f->block_count; i++)
        size += (size_t) f->blocks[i].name_len + 1;
    m = rc == 0 ? malloc(size) : NULL;
    pthread_mutex_lock(&c->lock);
    epoch = c->epoch;
    pthread_mutex_unlock(&c->lock);
    if (m == NULL) {
        char name[SCIMQ_PROTO_MAX_STRING_LEN + 1];

        if (q->len > 0)
            memcpy(name, q->ptr, q->len);
        name[q->len] = '\0';
        if (rc == SCIMQ_EMSGSIZE) {
            /*
             * It will never fit: requeueing would only bring it back,
             * forever.  Dead-letter it; its credit comes back.
             */
            refused_log(c, name, f);
            return settle_send(c, f->args.deliver.delivery_id, name,
                               f->payload_len, epoch, true, SCIMQ_PROTO_OP_NACK,
                               0, 0);
        }
        /*
         * No memory for it: give it back for later, and its credit too so
         * that the consumer does not stall.
         */
        return settle_send(c, f->args.deliver.delivery_id, name, f->payload_len,
                           epoch, true, SCIMQ_PROTO_OP_NACK, 1,
                           CLIENT_NACK_NOMEM_DELAY_MS);
    }

    memset(m, 0, sizeof(*m));
    blocks = (scimq_block_t *) (void *) (m + 1);
    p = (char *) (blocks + f->block_count);
    for (uint32_t i = 0; i < f->block_count; i++) {
        const scimq_proto_block_t *b = &f->blocks[i];

        if (b->name_len > 0)
            memcpy(p, b->name, b->name_len);
        p[b->name_len] = '\0';
        blocks[i].name = p;
        blocks[i].data = b->data;
        blocks[i].len = b->len;
        p += b->name_len + 1;
    }
    queue = p;
    if (q->len > 0)
        memcpy(queue, q->ptr, q->len);
    queue[q->len] = '\0';

    m->pub.delivery_id = f->args.deliver.delivery_id;
    m->pub.msg_id = f->args.deliver.msg_id;
    m->pub.attempt = f->args.deliver.attempt;
    m->pub.queue = queue;
    m->pub.block_count = f->block_count;
    m->pub.blocks = f->block_count > 0 ? blocks : NULL;
    m->pub.payload = s->rx_buf;
    m->pub.payload_len = f->payload_len;
    m->pub.payload_ctx = s->rx_ctx;
    m->pub.flags =
        (f->flags & SCIMQ_PROTO_F_BROADCAST) ? SCIMQ_MESSAGE_CONTROL : 0;
    m->user_payload = s->rx_user;
    m->epoch = epoch;
    m->stream = s;
    m->stream_gen = atomic_load(&s->gen);
    atomic_init(&m->credited, false);
    m->ctx = c->mctx;
    atomic_fetch_add(&m->ctx->refs, 1);
    scimq_list_init(&m->link);
    scimq_list_init(&m->hold_link);
    m->arrived_ns = uv_hrtime();
    /* The message owns the payload now. */
    s->rx_buf = NULL;
    s->rx_ctx = NULL;
    s->rx_user = false;

    pthread_mutex_lock(&c->lock);
    {
        struct sub *sub = scimq__sub_find(c, queue, q->len);

        /* The lease runs from when the gateway sent it: a little earlier. */
        if (sub != NULL && sub->lease_ms > 0) {
            uint64_t lease_ns = (uint64_t) sub->lease_ms * 1000000u;

            m->lease_end_ns = m->arrived_ns + lease_ns;
            m->extend_ns = m->arrived_ns + lease_ns / 2;
            if (c->opts.auto_extend) {
                scimq_list_append(&sub->held, &m->hold_link);
                m->held = true;
            }
        }
    }
    scimq_list_append(&c->fifo, &m->link);
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

void
scimq__msg_eos(struct scimq_client *c, const scimq_proto_frame_t *f)
{
    struct sub *sub;

    pthread_mutex_lock(&c->lock);
    sub = scimq__sub_find(c, f->args.queue.queue.ptr, f->args.queue.queue.len);
    if (sub != NULL && !sub->eos) {
        SCIMQ_LOG_INFO(CLIENT, "end of stream on %s", sub->queue);
        sub->eos = true;
        pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
}

void
scimq__msg_get_error(struct scimq_client *c, uint32_t sub_id, int code)
{
    struct sub *sub;

    pthread_mutex_lock(&c->lock);
    sub = sub_by_id(c, sub_id);
    if (sub != NULL && sub->err == 0) {
        SCIMQ_LOG_WARN(CLIENT, "consuming from %s failed: %s", sub->queue,
                       scimq_strerror(code));
        sub->err = code;
        pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
}

void
scimq__sub_unhold(struct sub *sub)
{
    struct scimq_list *e;

    while ((e = scimq_list_pop(&sub->held)) != NULL)
        SCIMQ_CONTAINER_OF(e, struct msg, hold_link)->held = false;
}

void
scimq__msg_unhold_all(struct scimq_client *c)
{
    struct scimq_list *e, *tmp;

    pthread_mutex_lock(&c->lock);
    SCIMQ_LIST_FOREACH (e, tmp, &c->subs)
        scimq__sub_unhold(SCIMQ_CONTAINER_OF(e, struct sub, link));
    pthread_mutex_unlock(&c->lock);
}

void
scimq__msg_extend_due(struct scimq_client *c, uint64_t now)
{
    scimq_proto_frame_t f[CLIENT_EXTEND_BATCH];
    uint64_t max_hold_ns = c->opts.max_hold_ms * 1000000u;
    struct scimq_list *e, *tmp;
    struct op *op;
    size_t n = 0;

    pthread_mutex_lock(&c->lock);
    SCIMQ_LIST_FOREACH (e, tmp, &c->subs) {
        struct sub *sub = SCIMQ_CONTAINER_OF(e, struct sub, link);
        uint64_t lease_ns = (uint64_t) sub->lease_ms * 1000000u;
        struct scimq_list *h;

        while (n < CLIENT_EXTEND_BATCH && (h = sub->held.next) != &sub->held) {
            struct msg *m = SCIMQ_CONTAINER_OF(h, struct msg, hold_link);

            if (m->extend_ns > now)
                break; /* the rest are due later */
            unhold(m);
            if (!msg_stream_alive(m) || m->epoch != c->epoch) {
                m->lease_lost = true; /* requeued by the gateway */
                continue;
            }
            if (max_hold_ns != 0 && now - m->arrived_ns >= max_hold_ns) {
                SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, CLIENT, 10000,
                                 "%s: message %llu held for %llu ms, the "
                                 "longest kept (max_hold_ms): its lease is "
                                 "left to expire",
                                 sub->queue, (unsigned long long) m->pub.msg_id,
                                 (unsigned long long) c->opts.max_hold_ms);
                continue;
            }
            memset(&f[n], 0, sizeof(f[n]));
            f[n].opcode = SCIMQ_PROTO_OP_EXTEND;
            f[n].request_id = scimq__client_rid(c);
            f[n].args.extend.delivery_id = m->pub.delivery_id;
            f[n].args.extend.lease_ms = sub->lease_ms;
            n++;
            m->extend_ns = now + lease_ns / 2;
            if (now + lease_ns > m->lease_end_ns)
                m->lease_end_ns = now + lease_ns;
            scimq_list_append(&sub->held, &m->hold_link);
            m->held = true;
        }
    }
    c->extends_sent += n;
    pthread_mutex_unlock(&c->lock);
    if (n > 0 && scimq__op_frames(OP_SEND, f, n, &op) == 0)
        scimq__session_submit(c, op);
}

void
scimq__msg_destroy(struct msg *m)
{
    struct msg_ctx *ctx = m->ctx;

    payload_release(ctx, m->user_payload, m->pub.payload, m->pub.payload_ctx);
    msg_ctx_unref(ctx);
    free(m);
}

void
scimq__msg_nack_fifo(struct scimq_client *c)
{
    struct scimq_list fifo, *e;

    scimq_list_init(&fifo);
    pthread_mutex_lock(&c->lock);
    scimq_list_splice(&fifo, &c->fifo);
    pthread_mutex_unlock(&c->lock);
    while ((e = scimq_list_pop(&fifo)) != NULL) {
        struct msg *m = SCIMQ_CONTAINER_OF(e, struct msg, link);
        scimq_proto_frame_t f;
        struct op *op;

        /* Never handed out: back to the gateway at once, no top-up. */
        memset(&f, 0, sizeof(f));
        f.opcode = SCIMQ_PROTO_OP_NACK;
        f.request_id = scimq__client_rid(c);
        f.args.nack.delivery_id = m->pub.delivery_id;
        f.args.nack.requeue = 1;
        if (scimq__op_frames(OP_SEND, &f, 1, &op) == 0)
            scimq__session_submit(c, op);
        scimq__msg_destroy(m);
    }
}

/* ======================================================================== */
/* Public                                                                    */
/* ======================================================================== */

/*
 * c is not used: a message knows its client through its allocator context,
 * so it may be freed with c == NULL and after scimq_client_close().  While
 * the client is open, freeing a message that was never acked or nacked
 * gives its credit back.
 */
void
scimq_message_free(scimq_client_t *c, scimq_message_t *msg)
{
    struct msg *m;
    struct msg_ctx *ctx;

    (void) c;
    if (msg == NULL)
        return;
    m = SCIMQ_CONTAINER_OF(msg, struct msg, pub);
    ctx = m->ctx;
    pthread_mutex_lock(&ctx->lock);
    if (ctx->client != NULL) {
        /* No more extensions for it (close already emptied the lists). */
        pthread_mutex_lock(&ctx->client->lock);
        unhold(m);
        pthread_mutex_unlock(&ctx->client->lock);
    }
    pthread_mutex_unlock(&ctx->lock);
    if (!atomic_exchange(&m->credited, true)) {
        pthread_mutex_lock(&ctx->lock);
        /* The stream is only looked at while its client exists. */
        if (ctx->client != NULL && msg_stream_alive(m))
            (void) settle_send(ctx->client, m->pub.delivery_id, m->pub.queue,
                               m->pub.payload_len, m->epoch, true, 0, 0, 0);
        pthread_mutex_unlock(&ctx->lock);
    }
    scimq__msg_destroy(m);
}
