/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Tests of libscimq, the client library, against a small fake gateway that
 * runs in a thread of the test: a blocking loopback TCP server (poll() over
 * its sockets) that speaks just enough SciMP through the protocol library:
 * sessions of K streams, AUTH, PUT/PUT_OK, GET/DELIVER within credit,
 * ACK/NACK, EOS after QUEUE_CLOSE, queue management, and switches for
 * failures (cut a stream after N PUTs without confirming the last ones,
 * stay silent on STATS, refuse every HELLO, close every connection).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <scimq/scimq.h>

#include "common/auth.h"
#include "common/param.h"
#include "cunit_main.h"

/* ======================================================================== */
/* Fake gateway                                                              */
/* ======================================================================== */

#define FG_CONNS 32
#define FG_SESSIONS 8
#define FG_QUEUES 32
#define FG_NAME 64
#define FG_RBUF (256u << 10)
/* PUTs before the cut that are not confirmed (odd ones stored, even lost). */
#define FG_CUT_UNCONFIRMED 4u
#define FG_TOKEN "secret-token"
/* A cut stream is closed this long after its first unconfirmed PUT. */
#define FG_CUT_WAIT_MS 200u

struct fg_block {
    char *name;
    uint32_t name_len;
    uint64_t len;
};

struct fg_msg {
    struct fg_msg *next;
    uint64_t msg_id;
    uint32_t nblocks;
    struct fg_block *blocks;
    uint8_t *payload;
    uint64_t len;
    bool leased;
    uint64_t delivery_id;
    int lease_sess;
    int lease_conn;
    uint32_t attempt;
};

struct fg_queue {
    bool used;
    char name[FG_NAME];
    uint8_t kind;
    uint32_t ack_timeout_ms, max_attempts;
    uint64_t max_bytes;
    char dead_letter[FG_NAME];
    bool closed;
    struct fg_msg *head;
    int bind; /* queue slot bound as target, or -1 */
};

struct fg_credit {
    bool used;
    uint32_t msgs;
    uint64_t bytes;
    uint32_t inflight;
    uint64_t last_rid;
};

struct fg_session {
    bool used;
    uint8_t id[SCIMQ_PROTO_SESSION_ID_LEN];
    uint16_t k;
    struct fg_credit cr[FG_QUEUES];
};

struct fg_conn {
    int fd;
    scimq_proto_decoder_t *dec;
    int sess;
    uint16_t index;
    bool welcomed, authed;
    uint8_t nonce[SCIMQ_PROTO_NONCE_LEN];
    uint32_t puts;
    bool bye_sent;
    bool got[FG_QUEUES];
    bool eos_sent[FG_QUEUES];
    uint64_t get_rid[FG_QUEUES];
};

struct fg {
    pthread_t thread;
    int lfd;
    uint16_t port;
    atomic_bool stop;
    pthread_mutex_t lock;
    bool auth;
    /* Switches (lock). */
    uint32_t cut_after; /* stop confirming on the stream that gets this... */
    bool cut_stall;     /* ... and then never close it, or close it: */
    bool cut_done;      /* after its cut_after-th PUT or FG_CUT_WAIT_MS */
    int cut_conn;
    uint64_t cut_since;
    bool mute_stats;
    bool refuse_hello;
    bool kill_all;
    bool bye_all;      /* say BYE on every stream, close on the answer */
    bool half_deliver; /* send the next DELIVER half, then close (FIN) */
    bool datasum;      /* DELIVERs carry a payload CRC */
    /* State (lock). */
    struct fg_conn conns[FG_CONNS];
    struct fg_session sessions[FG_SESSIONS];
    struct fg_queue queues[FG_QUEUES];
    uint64_t next_msg_id, next_did;
    unsigned int rr;
    /* Counters (lock). */
    uint32_t creates, joins, auth_ok, auth_fail, puts, acks, nacks, extends,
        byes, cuts, delivers, max_inflight, bye_answers;
    uint32_t puts_by_index[8];
    uint8_t rbuf[FG_RBUF];
};

static struct fg gw;

static uint64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

static uint64_t
be64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static void
put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t) v;
        v >>= 8;
    }
}

static void fg_conn_close(struct fg *g, int ci, bool abrupt);

/* Sends a frame with blocking writes; a failure closes the connection. */
static void
fg_send(struct fg *g, int ci, const scimq_proto_frame_t *f)
{
    struct fg_conn *cn = &g->conns[ci];
    size_t hdr_len, iovcnt;
    struct iovec *iov = NULL, *v;
    uint8_t *hdr = NULL;
    struct msghdr mh;
    ssize_t n;

    if (cn->fd < 0)
        return;
    if (scimq_proto_encode_size(f, &hdr_len, &iovcnt) != 0)
        goto fail;
    hdr = malloc(hdr_len);
    iov = calloc(iovcnt, sizeof(*iov));
    if (hdr == NULL || iov == NULL ||
        scimq_proto_encode(f, hdr, hdr_len, iov, iovcnt, &iovcnt, NULL) != 0)
        goto fail;
    v = iov;
    while (iovcnt > 0) {
        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = v;
        mh.msg_iovlen = iovcnt;
        n = sendmsg(cn->fd, &mh, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            goto fail;
        while (iovcnt > 0 && (size_t) n >= v->iov_len) {
            n -= (ssize_t) v->iov_len;
            v++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            v->iov_base = (char *) v->iov_base + n;
            v->iov_len -= (size_t) n;
        }
    }
    free(iov);
    free(hdr);
    return;
fail:
    free(iov);
    free(hdr);
    fg_conn_close(g, ci, true);
}

static void
fg_error(struct fg *g, int ci, uint64_t rid, int code, const char *text)
{
    scimq_proto_frame_t f;

    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_ERROR;
    f.request_id = rid;
    f.args.error.code = code;
    f.args.error.text.ptr = text;
    f.args.error.text.len = (uint16_t) strlen(text);
    fg_send(g, ci, &f);
}

static void
fg_ok(struct fg *g, int ci, uint64_t rid, uint64_t value, const char *json)
{
    scimq_proto_frame_t f;
    scimq_proto_block_t b;

    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_OK;
    f.request_id = rid;
    f.args.ok.value = value;
    if (json != NULL) {
        b.name = "json";
        b.name_len = 4;
        b.data = (void *) (uintptr_t) json;
        b.len = strlen(json);
        f.block_count = 1;
        f.blocks = &b;
    }
    fg_send(g, ci, &f);
}

static int
fg_queue_find(struct fg *g, const char *name, size_t len)
{
    for (int i = 0; i < FG_QUEUES; i++)
        if (g->queues[i].used && strlen(g->queues[i].name) == len &&
            memcmp(g->queues[i].name, name, len) == 0)
            return i;
    return -1;
}

static int
fg_queue_find_str(struct fg *g, const scimq_proto_str_t *s)
{
    return fg_queue_find(g, s->ptr, s->len);
}

static void
fg_msg_free(struct fg_msg *m)
{
    for (uint32_t i = 0; i < m->nblocks; i++)
        free(m->blocks[i].name);
    free(m->blocks);
    free(m->payload);
    free(m);
}

static void
fg_queue_append(struct fg_queue *q, struct fg_msg *m)
{
    struct fg_msg **pp = &q->head;

    while (*pp != NULL)
        pp = &(*pp)->next;
    m->next = NULL;
    *pp = m;
}

static void
fg_queue_unlink(struct fg_queue *q, struct fg_msg *m)
{
    for (struct fg_msg **pp = &q->head; *pp != NULL; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            return;
        }
}

/* A copy of a message (blocks and payload), for bindings. */
static struct fg_msg *
fg_msg_copy(const struct fg_msg *src, uint64_t id)
{
    struct fg_msg *m = calloc(1, sizeof(*m));

    m->msg_id = id;
    m->nblocks = src->nblocks;
    m->blocks = calloc(src->nblocks + 1, sizeof(*m->blocks));
    for (uint32_t i = 0; i < src->nblocks; i++) {
        m->blocks[i] = src->blocks[i];
        m->blocks[i].name = strdup(src->blocks[i].name);
    }
    m->len = src->len;
    m->payload = malloc(src->len + 1);
    if (src->len > 0)
        memcpy(m->payload, src->payload, src->len);
    return m;
}

/* Closed and drained queues: one EOS to each stream that sent a GET. */
static void
fg_check_eos(struct fg *g, int qi)
{
    struct fg_queue *q = &g->queues[qi];
    scimq_proto_frame_t f;

    if (!q->used || !q->closed || q->head != NULL)
        return;
    for (int ci = 0; ci < FG_CONNS; ci++) {
        struct fg_conn *cn = &g->conns[ci];

        if (cn->fd < 0 || !cn->got[qi] || cn->eos_sent[qi])
            continue;
        memset(&f, 0, sizeof(f));
        f.opcode = SCIMQ_PROTO_OP_EOS;
        f.request_id = cn->get_rid[qi];
        f.args.queue.queue.ptr = q->name;
        f.args.queue.queue.len = (uint16_t) strlen(q->name);
        cn->eos_sent[qi] = true;
        fg_send(g, ci, &f);
    }
}

/* Sends the first half of a frame, then closes the stream (a crash). */
static void
fg_send_half(struct fg *g, int ci, const scimq_proto_frame_t *f)
{
    uint8_t *buf = NULL;
    size_t len = 0;

    if (scimq_proto_encode_alloc(f, &buf, &len) == 0)
        (void) send(g->conns[ci].fd, buf, len / 2, MSG_NOSIGNAL);
    free(buf);
    fg_conn_close(g, ci, false);
}

/* A live stream of a session, round-robin. */
static int
fg_pick_conn(struct fg *g, int si)
{
    for (int k = 0; k < FG_CONNS; k++) {
        int ci = (int) ((g->rr + (unsigned int) k) % FG_CONNS);

        if (g->conns[ci].fd >= 0 && g->conns[ci].sess == si &&
            g->conns[ci].authed) {
            g->rr = (unsigned int) ci + 1;
            return ci;
        }
    }
    return -1;
}

static void
fg_dispatch(struct fg *g)
{
    for (int si = 0; si < FG_SESSIONS; si++) {
        struct fg_session *s = &g->sessions[si];

        if (!s->used)
            continue;
        for (int qi = 0; qi < FG_QUEUES; qi++) {
            struct fg_credit *cr = &s->cr[qi];
            struct fg_queue *q = &g->queues[qi];

            while (cr->used && q->used && cr->msgs > 0) {
                scimq_proto_block_t blocks[8];
                scimq_proto_frame_t f;
                struct fg_msg *m = q->head;
                uint64_t off = 0;
                int ci;

                while (m != NULL && m->leased)
                    m = m->next;
                if (m == NULL || (m->len > cr->bytes && cr->inflight > 0))
                    break;
                ci = fg_pick_conn(g, si);
                if (ci < 0)
                    break;
                memset(&f, 0, sizeof(f));
                f.opcode = SCIMQ_PROTO_OP_DELIVER;
                f.flags = g->datasum ? SCIMQ_PROTO_F_DATASUM : 0;
                f.request_id = cr->last_rid;
                f.args.deliver.delivery_id = ++g->next_did;
                f.args.deliver.msg_id = m->msg_id;
                f.args.deliver.attempt = ++m->attempt;
                f.args.deliver.queue.ptr = q->name;
                f.args.deliver.queue.len = (uint16_t) strlen(q->name);
                for (uint32_t i = 0; i < m->nblocks && i < 8; i++) {
                    blocks[i].name = m->blocks[i].name;
                    blocks[i].name_len = m->blocks[i].name_len;
                    blocks[i].data = m->payload + off;
                    blocks[i].len = m->blocks[i].len;
                    off += m->blocks[i].len;
                }
                f.block_count = m->nblocks;
                f.blocks = blocks;
                cr->msgs--;
                cr->bytes = cr->bytes > m->len ? cr->bytes - m->len : 0;
                g->delivers++;
                if (q->kind == SCIMQ_PROTO_QUEUE_GUARANTEED) {
                    m->leased = true;
                    m->delivery_id = f.args.deliver.delivery_id;
                    m->lease_sess = si;
                    m->lease_conn = ci;
                    cr->inflight++;
                    if (cr->inflight > g->max_inflight)
                        g->max_inflight = cr->inflight;
                    if (g->half_deliver) {
                        /* Requeued by the close, its credit refunded. */
                        g->half_deliver = false;
                        fg_send_half(g, ci, &f);
                        continue;
                    }
                    fg_send(g, ci, &f);
                } else {
                    fg_queue_unlink(q, m);
                    fg_send(g, ci, &f);
                    fg_msg_free(m);
                }
            }
        }
    }
    for (int qi = 0; qi < FG_QUEUES; qi++)
        fg_check_eos(g, qi);
}

/*
 * Unsettled deliveries go back to ready when their stream or session ends;
 * like the real gateway, a stream's requeued deliveries give their credit
 * back (the client cannot know which of them it lost).
 */
static void
fg_requeue(struct fg *g, int si, int ci)
{
    for (int qi = 0; qi < FG_QUEUES; qi++)
        for (struct fg_msg *m = g->queues[qi].head; m != NULL; m = m->next)
            if (m->leased && m->lease_sess == si &&
                (ci < 0 || m->lease_conn == ci)) {
                struct fg_credit *cr = &g->sessions[si].cr[qi];

                m->leased = false;
                if (cr->inflight > 0)
                    cr->inflight--;
                if (ci >= 0) {
                    cr->msgs++;
                    cr->bytes += m->len;
                }
            }
}

static void
fg_conn_close(struct fg *g, int ci, bool abrupt)
{
    struct fg_conn *cn = &g->conns[ci];
    int si = cn->sess;
    bool last = true;

    if (cn->fd < 0)
        return;
    if (abrupt) {
        struct linger lg = {1, 0};

        /* An RST, as when a process dies. */
        (void) setsockopt(cn->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    close(cn->fd);
    cn->fd = -1;
    scimq_proto_decoder_destroy(cn->dec);
    cn->dec = NULL;
    if (si < 0)
        return;
    fg_requeue(g, si, ci);
    for (int i = 0; i < FG_CONNS; i++)
        if (g->conns[i].fd >= 0 && g->conns[i].sess == si)
            last = false;
    /* The session ends with its last stream (doc/scimp.md, 6.2). */
    if (last) {
        fg_requeue(g, si, -1);
        memset(&g->sessions[si], 0, sizeof(g->sessions[si]));
    }
    fg_dispatch(g);
}

static void
fg_hello(struct fg *g, int ci, const scimq_proto_frame_t *f)
{
    static const uint8_t zero[SCIMQ_PROTO_SESSION_ID_LEN];
    struct fg_conn *cn = &g->conns[ci];
    const uint8_t *sid = f->args.hello.session_id;
    scimq_proto_frame_t w;
    int si = -1;

    if (cn->welcomed) {
        fg_error(g, ci, f->request_id, SCIMQ_ESTATE, "second HELLO");
        fg_conn_close(g, ci, false);
        return;
    }
    if (g->refuse_hello) {
        fg_error(g, ci, f->request_id, SCIMQ_ESHUTDOWN, "shutting down");
        fg_conn_close(g, ci, false);
        return;
    }
    if (memcmp(sid, zero, sizeof(zero)) == 0) {
        for (si = 0; si < FG_SESSIONS && g->sessions[si].used; si++)
            ;
        if (si == FG_SESSIONS) {
            fg_error(g, ci, f->request_id, SCIMQ_ENOMEM, "no session slot");
            fg_conn_close(g, ci, false);
            return;
        }
        memset(&g->sessions[si], 0, sizeof(g->sessions[si]));
        g->sessions[si].used = true;
        g->sessions[si].k = f->args.hello.stream_count;
        (void) scimq__random_bytes(g->sessions[si].id,
                                   SCIMQ_PROTO_SESSION_ID_LEN);
        g->sessions[si].id[0] |= 1;
        g->creates++;
    } else {
        for (si = 0; si < FG_SESSIONS; si++)
            if (g->sessions[si].used &&
                memcmp(g->sessions[si].id, sid, sizeof(zero)) == 0)
                break;
        if (si == FG_SESSIONS) {
            fg_error(g, ci, f->request_id, SCIMQ_ENOENT, "no such session");
            fg_conn_close(g, ci, false);
            return;
        }
        if (g->sessions[si].k != f->args.hello.stream_count) {
            fg_error(g, ci, f->request_id, SCIMQ_EINVAL, "stream_count");
            fg_conn_close(g, ci, false);
            return;
        }
        for (int i = 0; i < FG_CONNS; i++)
            if (i != ci && g->conns[i].fd >= 0 && g->conns[i].sess == si &&
                g->conns[i].index == f->args.hello.stream_index) {
                fg_error(g, ci, f->request_id, SCIMQ_EBUSY, "index in use");
                fg_conn_close(g, ci, false);
                return;
            }
        g->joins++;
    }
    cn->sess = si;
    cn->index = f->args.hello.stream_index;
    cn->welcomed = true;
    cn->authed = !g->auth;
    memset(cn->nonce, 0, sizeof(cn->nonce));
    if (g->auth)
        (void) scimq__random_bytes(cn->nonce, sizeof(cn->nonce));
    memset(&w, 0, sizeof(w));
    w.opcode = SCIMQ_PROTO_OP_WELCOME;
    w.request_id = f->request_id;
    w.args.welcome.version = 1;
    w.args.welcome.auth_required = g->auth ? 1 : 0;
    w.args.welcome.stream_index = cn->index;
    w.args.welcome.max_payload = SCIMQ_PROTO_DEFAULT_MAX_PAYLOAD_LEN;
    memcpy(w.args.welcome.session_id, g->sessions[si].id, sizeof(zero));
    memcpy(w.args.welcome.nonce, cn->nonce, sizeof(cn->nonce));
    w.args.welcome.server_name.ptr = "fake";
    w.args.welcome.server_name.len = 4;
    fg_send(g, ci, &w);
}

static struct fg_msg *
fg_msg_from_put(struct fg *g, struct fg_conn *cn, const scimq_proto_frame_t *f)
{
    struct fg_msg *m = calloc(1, sizeof(*m));
    void *payload = NULL;

    scimq_proto_decoder_take_payload(cn->dec, &payload);
    m->msg_id = ++g->next_msg_id;
    m->nblocks = f->block_count;
    m->blocks = calloc(f->block_count + 1, sizeof(*m->blocks));
    for (uint32_t i = 0; i < f->block_count; i++) {
        m->blocks[i].name = calloc(1, f->blocks[i].name_len + 1);
        if (f->blocks[i].name_len > 0)
            memcpy(m->blocks[i].name, f->blocks[i].name, f->blocks[i].name_len);
        m->blocks[i].name_len = f->blocks[i].name_len;
        m->blocks[i].len = f->blocks[i].len;
    }
    m->payload = payload;
    m->len = f->payload_len;
    return m;
}

static void
fg_put(struct fg *g, int ci, const scimq_proto_frame_t *f)
{
    struct fg_conn *cn = &g->conns[ci];
    int qi = fg_queue_find_str(g, &f->args.queue.queue);
    struct fg_queue *q;
    struct fg_msg *m;
    scimq_proto_frame_t r;

    if (qi < 0) {
        fg_error(g, ci, f->request_id, SCIMQ_ENOENT, "no such queue");
        return;
    }
    q = &g->queues[qi];
    if (q->closed) {
        fg_error(g, ci, f->request_id, SCIMQ_ECLOSED, "queue closed");
        return;
    }
    cn->puts++;
    g->puts++;
    g->puts_by_index[cn->index % 8]++;
    if (g->cut_after > 0 && !g->cut_done &&
        (g->cut_conn == ci ||
         (g->cut_conn < 0 && cn->puts + FG_CUT_UNCONFIRMED > g->cut_after))) {
        /* Never confirmed: odd ones stored (duplicates), even ones lost. */
        if (g->cut_conn < 0) {
            g->cut_conn = ci;
            g->cut_since = now_ms();
        }
        if (cn->puts % 2 == 1)
            fg_queue_append(q, fg_msg_from_put(g, cn, f));
        if (cn->puts >= g->cut_after && !g->cut_stall) {
            g->cut_done = true;
            g->cuts++;
            fg_conn_close(g, ci, true);
        }
        return;
    }
    m = fg_msg_from_put(g, cn, f);
    if (q->bind >= 0 && g->queues[q->bind].used)
        fg_queue_append(&g->queues[q->bind], fg_msg_copy(m, ++g->next_msg_id));
    fg_queue_append(q, m);
    if (f->flags & SCIMQ_PROTO_F_CONFIRM) {
        memset(&r, 0, sizeof(r));
        r.opcode = SCIMQ_PROTO_OP_PUT_OK;
        r.request_id = f->request_id;
        r.args.put_ok.msg_id = m->msg_id;
        fg_send(g, ci, &r);
    }
    fg_dispatch(g);
}

static struct fg_msg *
fg_find_delivery(struct fg *g, int si, uint64_t did, int *qi_p)
{
    for (int qi = 0; qi < FG_QUEUES; qi++)
        for (struct fg_msg *m = g->queues[qi].head; m != NULL; m = m->next)
            if (m->leased && m->delivery_id == did && m->lease_sess == si) {
                *qi_p = qi;
                return m;
            }
    return NULL;
}

static void
fg_settle(struct fg *g, int ci, const scimq_proto_frame_t *f)
{
    int si = g->conns[ci].sess, qi = -1;
    uint64_t did = f->opcode == SCIMQ_PROTO_OP_ACK ? f->args.ack.delivery_id
                                                   : f->args.nack.delivery_id;
    struct fg_msg *m = fg_find_delivery(g, si, did, &qi);

    if (f->opcode == SCIMQ_PROTO_OP_ACK)
        g->acks++;
    else
        g->nacks++;
    if (m == NULL)
        return;
    if (g->sessions[si].cr[qi].inflight > 0)
        g->sessions[si].cr[qi].inflight--;
    if (f->opcode == SCIMQ_PROTO_OP_NACK && f->args.nack.requeue) {
        m->leased = false;
    } else {
        fg_queue_unlink(&g->queues[qi], m);
        fg_msg_free(m);
    }
    fg_dispatch(g);
}

static void
fg_declare(struct fg *g, int ci, const scimq_proto_frame_t *f)
{
    const scimq_proto_str_t *name = &f->args.declare.queue;
    const scimq_proto_str_t *dl = &f->args.declare.dead_letter;
    int qi = fg_queue_find_str(g, name);
    struct fg_queue *q;

    if (name->len == 0 || name->len >= FG_NAME || dl->len >= FG_NAME) {
        fg_error(g, ci, f->request_id, SCIMQ_EINVAL, "bad name");
        return;
    }
    if (dl->len > 0 && fg_queue_find_str(g, dl) < 0) {
        fg_error(g, ci, f->request_id, SCIMQ_ENOENT, "no dead-letter queue");
        return;
    }
    if (qi >= 0) {
        q = &g->queues[qi];
        if (q->kind != f->args.declare.kind ||
            q->ack_timeout_ms != f->args.declare.ack_timeout_ms ||
            q->max_attempts != f->args.declare.max_attempts ||
            q->max_bytes != f->args.declare.max_bytes ||
            strlen(q->dead_letter) != dl->len ||
            memcmp(q->dead_letter, dl->ptr, dl->len) != 0)
            fg_error(g, ci, f->request_id, SCIMQ_EEXIST, "differs");
        else
            fg_ok(g, ci, f->request_id, 0, NULL);
        return;
    }
    for (qi = 0; qi < FG_QUEUES && g->queues[qi].used; qi++)
        ;
    if (qi == FG_QUEUES) {
        fg_error(g, ci, f->request_id, SCIMQ_ENOSPC, "too many queues");
        return;
    }
    q = &g->queues[qi];
    memset(q, 0, sizeof(*q));
    q->used = true;
    memcpy(q->name, name->ptr, name->len);
    memcpy(q->dead_letter, dl->ptr, dl->len);
    q->kind = f->args.declare.kind;
    q->ack_timeout_ms = f->args.declare.ack_timeout_ms;
    q->max_attempts = f->args.declare.max_attempts;
    q->max_bytes = f->args.declare.max_bytes;
    q->bind = -1;
    for (int i = 0; i < FG_CONNS; i++) {
        g->conns[i].got[qi] = false;
        g->conns[i].eos_sent[qi] = false;
    }
    for (int si = 0; si < FG_SESSIONS; si++)
        memset(&g->sessions[si].cr[qi], 0, sizeof(g->sessions[si].cr[qi]));
    fg_ok(g, ci, f->request_id, 1, NULL);
}

static void
fg_queue_op(struct fg *g, int ci, const scimq_proto_frame_t *f)
{
    const scimq_proto_str_t *name = &f->args.queue.queue;
    int qi = fg_queue_find_str(g, name);
    uint64_t n = 0;

    if (qi < 0) {
        fg_error(g, ci, f->request_id, SCIMQ_ENOENT, "no such queue");
        return;
    }
    if (f->opcode == SCIMQ_PROTO_OP_QUEUE_CLOSE) {
        g->queues[qi].closed = true;
        fg_ok(g, ci, f->request_id, 0, NULL);
        fg_check_eos(g, qi);
        return;
    }
    /* QUEUE_DELETE */
    while (g->queues[qi].head != NULL) {
        struct fg_msg *m = g->queues[qi].head;

        g->queues[qi].head = m->next;
        fg_msg_free(m);
        n++;
    }
    g->queues[qi].used = false;
    for (int i = 0; i < FG_QUEUES; i++)
        if (g->queues[i].bind == qi)
            g->queues[i].bind = -1;
    fg_ok(g, ci, f->request_id, n, NULL);
}

static void
fg_pair(struct fg *g, int ci, const scimq_proto_frame_t *f)
{
    int qi = fg_queue_find_str(g, &f->args.pair.queue);
    int ti = fg_queue_find_str(g, &f->args.pair.target);

    if (qi < 0 || ti < 0) {
        fg_error(g, ci, f->request_id, SCIMQ_ENOENT, "no such queue");
        return;
    }
    if (f->opcode == SCIMQ_PROTO_OP_QUEUE_BIND) {
        g->queues[qi].bind = ti;
    } else if (g->queues[qi].bind == ti) {
        g->queues[qi].bind = -1;
    } else {
        fg_error(g, ci, f->request_id, SCIMQ_ENOENT, "no such binding");
        return;
    }
    fg_ok(g, ci, f->request_id, 0, NULL);
}

static void
fg_move(struct fg *g, int ci, const scimq_proto_frame_t *f)
{
    int qi = fg_queue_find_str(g, &f->args.move.queue);
    int ti = fg_queue_find_str(g, &f->args.move.target);
    uint64_t n = 0;
    struct fg_msg *m, *next;

    if (qi < 0 || ti < 0) {
        fg_error(g, ci, f->request_id, SCIMQ_ENOENT, "no such queue");
        return;
    }
    for (m = g->queues[qi].head; m != NULL; m = next) {
        next = m->next;
        if (m->leased)
            continue;
        if (f->args.move.max_msgs != 0 && n >= f->args.move.max_msgs)
            break;
        fg_queue_unlink(&g->queues[qi], m);
        m->attempt = 0;
        fg_queue_append(&g->queues[ti], m);
        n++;
    }
    fg_ok(g, ci, f->request_id, n, NULL);
    fg_dispatch(g);
}

static void
fg_list(struct fg *g, int ci, const scimq_proto_frame_t *f)
{
    const scimq_proto_str_t *p = &f->args.queue.queue;
    char json[4096];
    size_t len;
    uint64_t n = 0;

    len = (size_t) snprintf(json, sizeof(json), "{\"queues\":[");
    for (int qi = 0; qi < FG_QUEUES; qi++) {
        if (!g->queues[qi].used ||
            strncmp(g->queues[qi].name, p->ptr != NULL ? p->ptr : "", p->len) !=
                0)
            continue;
        len += (size_t) snprintf(json + len, sizeof(json) - len, "%s\"%s\"",
                                 n > 0 ? "," : "", g->queues[qi].name);
        n++;
    }
    snprintf(json + len, sizeof(json) - len, "]}");
    fg_ok(g, ci, f->request_id, n, json);
}

static void
fg_get(struct fg *g, int ci, const scimq_proto_frame_t *f)
{
    struct fg_conn *cn = &g->conns[ci];
    int qi = fg_queue_find_str(g, &f->args.get.queue);
    struct fg_credit *cr;

    if (qi < 0) {
        fg_error(g, ci, f->request_id, SCIMQ_ENOENT, "no such queue");
        return;
    }
    cr = &g->sessions[cn->sess].cr[qi];
    cr->used = true;
    cr->msgs += f->args.get.credit_msgs;
    cr->bytes += f->args.get.credit_bytes;
    cr->last_rid = f->request_id;
    cn->got[qi] = true;
    cn->get_rid[qi] = f->request_id;
    fg_dispatch(g);
}

static void
fg_frame(struct fg *g, int ci, const scimq_proto_frame_t *f)
{
    struct fg_conn *cn = &g->conns[ci];
    scimq_proto_frame_t r;

    switch (f->opcode) {
    case SCIMQ_PROTO_OP_HELLO:
        fg_hello(g, ci, f);
        return;
    case SCIMQ_PROTO_OP_PING:
        memset(&r, 0, sizeof(r));
        r.opcode = SCIMQ_PROTO_OP_PONG;
        r.request_id = f->request_id;
        r.args.ping.timestamp_ns = f->args.ping.timestamp_ns;
        fg_send(g, ci, &r);
        return;
    case SCIMQ_PROTO_OP_AUTH:
        if (!cn->welcomed || !g->auth || cn->authed) {
            fg_error(g, ci, f->request_id, SCIMQ_ESTATE, "unexpected AUTH");
            fg_conn_close(g, ci, false);
        } else if (scimq__auth_check(
                       (const uint8_t *) FG_TOKEN, strlen(FG_TOKEN), cn->nonce,
                       g->sessions[cn->sess].id, f->args.auth.mac)) {
            cn->authed = true;
            g->auth_ok++;
            fg_ok(g, ci, f->request_id, 0, NULL);
            fg_dispatch(g);
        } else {
            g->auth_fail++;
            fg_error(g, ci, f->request_id, SCIMQ_EAUTH, "bad MAC");
            fg_conn_close(g, ci, false);
        }
        return;
    default:
        break;
    }
    if (!cn->welcomed || !cn->authed) {
        fg_error(g, ci, f->request_id,
                 cn->welcomed ? SCIMQ_EAUTH : SCIMQ_ESTATE, "not ready");
        fg_conn_close(g, ci, false);
        return;
    }
    switch (f->opcode) {
    case SCIMQ_PROTO_OP_BYE:
        if (cn->bye_sent) {
            /* The answer to our BYE. */
            g->bye_answers++;
            fg_conn_close(g, ci, false);
            break;
        }
        g->byes++;
        memset(&r, 0, sizeof(r));
        r.opcode = SCIMQ_PROTO_OP_BYE;
        r.request_id = f->request_id;
        fg_send(g, ci, &r);
        fg_conn_close(g, ci, false);
        break;
    case SCIMQ_PROTO_OP_PUT:
        fg_put(g, ci, f);
        break;
    case SCIMQ_PROTO_OP_GET:
        fg_get(g, ci, f);
        break;
    case SCIMQ_PROTO_OP_ACK:
    case SCIMQ_PROTO_OP_NACK:
        fg_settle(g, ci, f);
        break;
    case SCIMQ_PROTO_OP_EXTEND:
        g->extends++;
        break;
    case SCIMQ_PROTO_OP_QUEUE_DECLARE:
        fg_declare(g, ci, f);
        break;
    case SCIMQ_PROTO_OP_QUEUE_DELETE:
    case SCIMQ_PROTO_OP_QUEUE_CLOSE:
        fg_queue_op(g, ci, f);
        break;
    case SCIMQ_PROTO_OP_QUEUE_BIND:
    case SCIMQ_PROTO_OP_QUEUE_UNBIND:
        fg_pair(g, ci, f);
        break;
    case SCIMQ_PROTO_OP_QUEUE_MOVE:
        fg_move(g, ci, f);
        break;
    case SCIMQ_PROTO_OP_QUEUE_LIST:
        fg_list(g, ci, f);
        break;
    case SCIMQ_PROTO_OP_STATS:
        if (!g->mute_stats) {
            char json[64];

            snprintf(json, sizeof(json), "{\"puts\":%u}", g->puts);
            fg_ok(g, ci, f->request_id, 0, json);
        }
        break;
    default:
        fg_error(g, ci, f->request_id, SCIMQ_ENOTSUP, "not for a gateway");
        break;
    }
}

static void
fg_read(struct fg *g, int ci)
{
    struct fg_conn *cn = &g->conns[ci];
    ssize_t n = recv(cn->fd, g->rbuf, sizeof(g->rbuf), 0);
    size_t off = 0, used;
    int rc;

    if (n <= 0) {
        fg_conn_close(g, ci, false);
        return;
    }
    while (off < (size_t) n && cn->fd >= 0) {
        rc = scimq_proto_decoder_feed(cn->dec, g->rbuf + off, (size_t) n - off,
                                      &used);
        off += used;
        if (rc < 0) {
            fg_conn_close(g, ci, true);
            return;
        }
        if (rc == SCIMQ_PROTO_HEADER_READY &&
            scimq_proto_decoder_alloc_payload(cn->dec) != 0) {
            fg_conn_close(g, ci, true);
            return;
        }
        if (rc == SCIMQ_PROTO_FRAME_DONE)
            fg_frame(g, ci, scimq_proto_decoder_frame(cn->dec));
    }
}

static void
fg_accept(struct fg *g)
{
    int fd = accept(g->lfd, NULL, NULL), one = 1;

    if (fd < 0)
        return;
    (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (int ci = 0; ci < FG_CONNS; ci++) {
        struct fg_conn *cn = &g->conns[ci];

        if (cn->fd >= 0)
            continue;
        memset(cn, 0, sizeof(*cn));
        if (scimq_proto_decoder_create(NULL, &cn->dec) != 0)
            break;
        cn->fd = fd;
        cn->sess = -1;
        return;
    }
    close(fd);
}

static void *
fg_main(void *arg)
{
    struct fg *g = arg;
    struct pollfd pfd[FG_CONNS + 1];
    int map[FG_CONNS + 1];

    while (!atomic_load(&g->stop)) {
        int n = 0;

        pthread_mutex_lock(&g->lock);
        /* A cut stream whose client sends nothing more there is cut now. */
        if (g->cut_conn >= 0 && !g->cut_done && !g->cut_stall &&
            now_ms() - g->cut_since >= FG_CUT_WAIT_MS) {
            g->cut_done = true;
            g->cuts++;
            fg_conn_close(g, g->cut_conn, true);
        }
        if (g->cut_conn >= 0 && g->conns[g->cut_conn].fd < 0) {
            g->cut_conn = -1; /* closed by the client (stall): once only */
            g->cut_done = true;
        }
        if (g->bye_all) {
            g->bye_all = false;
            for (int ci = 0; ci < FG_CONNS; ci++) {
                scimq_proto_frame_t b;

                if (g->conns[ci].fd < 0 || g->conns[ci].bye_sent)
                    continue;
                memset(&b, 0, sizeof(b));
                b.opcode = SCIMQ_PROTO_OP_BYE;
                g->conns[ci].bye_sent = true;
                fg_send(g, ci, &b);
            }
        }
        if (g->kill_all) {
            g->kill_all = false;
            for (int ci = 0; ci < FG_CONNS; ci++)
                fg_conn_close(g, ci, true);
        }
        pfd[n].fd = g->lfd;
        pfd[n].events = POLLIN;
        map[n++] = -1;
        for (int ci = 0; ci < FG_CONNS; ci++)
            if (g->conns[ci].fd >= 0) {
                pfd[n].fd = g->conns[ci].fd;
                pfd[n].events = POLLIN;
                map[n++] = ci;
            }
        pthread_mutex_unlock(&g->lock);
        if (poll(pfd, (nfds_t) n, 20) <= 0)
            continue;
        pthread_mutex_lock(&g->lock);
        for (int i = 0; i < n; i++) {
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (map[i] < 0)
                fg_accept(g);
            else if (g->conns[map[i]].fd == pfd[i].fd)
                fg_read(g, map[i]);
        }
        pthread_mutex_unlock(&g->lock);
    }
    return NULL;
}

static int
fg_start(struct fg *g, bool auth)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int one = 1;

    memset(g, 0, sizeof(*g));
    pthread_mutex_init(&g->lock, NULL);
    g->auth = auth;
    g->cut_conn = -1;
    g->datasum = scimq__param_bool(SCIMQ_PARAM_PROTO_DATASUM) != 0;
    for (int ci = 0; ci < FG_CONNS; ci++)
        g->conns[ci].fd = -1;
    g->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (g->lfd < 0)
        return -1;
    (void) setsockopt(g->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(g->lfd, (struct sockaddr *) &sa, sizeof(sa)) != 0 ||
        listen(g->lfd, 64) != 0 ||
        getsockname(g->lfd, (struct sockaddr *) &sa, &len) != 0)
        return -1;
    g->port = ntohs(sa.sin_port);
    return pthread_create(&g->thread, NULL, fg_main, g) == 0 ? 0 : -1;
}

static void
fg_stop(struct fg *g)
{
    atomic_store(&g->stop, true);
    pthread_join(g->thread, NULL);
    for (int ci = 0; ci < FG_CONNS; ci++)
        fg_conn_close(g, ci, false);
    for (int qi = 0; qi < FG_QUEUES; qi++)
        while (g->queues[qi].head != NULL) {
            struct fg_msg *m = g->queues[qi].head;

            g->queues[qi].head = m->next;
            fg_msg_free(m);
        }
    close(g->lfd);
    pthread_mutex_destroy(&g->lock);
}

/* Runs a statement with the gateway's lock held. */
#define FG_LOCKED(stmt)                                                        \
    do {                                                                       \
        pthread_mutex_lock(&gw.lock);                                          \
        stmt;                                                                  \
        pthread_mutex_unlock(&gw.lock);                                        \
    } while (0)

/* ======================================================================== */
/* Helpers                                                                   */
/* ======================================================================== */

static char url[64];

static void
sleep_ms(unsigned int ms)
{
    struct timespec ts = {(time_t) (ms / 1000), (long) (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Test payload of message seq: its number big-endian, then xorshift bytes. */
static void
fill_pattern(uint8_t *buf, uint64_t len, uint64_t seq)
{
    uint64_t x = seq * UINT64_C(0x9E3779B97F4A7C15) + 1;

    for (uint64_t i = 0; i < len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(buf + i, &x, len - i < 8 ? (size_t) (len - i) : 8);
    }
    if (len >= 8)
        put_be64(buf, seq);
}

static bool
check_pattern(const uint8_t *buf, uint64_t len, uint64_t seq)
{
    uint8_t *want = malloc(len > 0 ? len : 1);
    bool ok;

    fill_pattern(want, len, seq);
    ok = memcmp(want, buf, len) == 0;
    free(want);
    return ok;
}

/* Sizes of the producer test: 1 KiB .. 4 MiB, mostly small. */
static uint64_t
put_size(uint64_t seq)
{
    if (seq % 25 == 0)
        return 4u << 20;
    if (seq % 10 == 5)
        return 1u << 20;
    return 1024 + (seq * 7919) % (60u << 10);
}

static scimq_client_t *
open_client(uint32_t k)
{
    scimq_client_options_t o;
    scimq_client_t *c = NULL;
    int rc;

    scimq_client_options_default(&o);
    o.streams = k;
    o.client_name = "test_client";
    o.connect_timeout_ms = 3000;
    o.reconnect_ms = 5000;
    o.request_timeout_ms = 5000;
    rc = scimq_client_open(url, &o, &c);
    CU_ASSERT_EQUAL(rc, 0);
    return rc == 0 ? c : NULL;
}

static void
declare(scimq_client_t *c, const char *queue, enum scimq_queue_kind kind)
{
    scimq_queue_options_t qo;

    memset(&qo, 0, sizeof(qo));
    qo.kind = kind;
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, queue, &qo), 0);
}

/*
 * Checks a queue of the fake gateway: every message seq in [0, n) is
 * there (exactly once, or at least once), with the right bytes; the data
 * block is the last one and starts with seq.
 */
static void
verify_queue(const char *queue, uint64_t n, uint64_t (*size)(uint64_t),
             bool exactly_once)
{
    uint32_t *seen = calloc(n, sizeof(*seen));
    uint64_t total = 0, bad = 0, dups = 0;
    int qi;

    pthread_mutex_lock(&gw.lock);
    qi = fg_queue_find(&gw, queue, strlen(queue));
    CU_ASSERT_FATAL(qi >= 0);
    for (struct fg_msg *m = gw.queues[qi].head; m != NULL; m = m->next) {
        const struct fg_block *d;
        uint64_t seq, off = m->len;

        total++;
        if (m->nblocks == 0) {
            bad++;
            continue;
        }
        d = &m->blocks[m->nblocks - 1];
        off -= d->len;
        if (d->len < 8 || strcmp(d->name, "data") != 0) {
            bad++;
            continue;
        }
        seq = be64(m->payload + off);
        if (seq >= n || d->len != size(seq) ||
            !check_pattern(m->payload + off, d->len, seq)) {
            bad++;
            continue;
        }
        if (seen[seq]++ > 0)
            dups++;
    }
    pthread_mutex_unlock(&gw.lock);
    CU_ASSERT_EQUAL(bad, 0);
    for (uint64_t i = 0; i < n; i++)
        if (seen[i] == 0) {
            CU_FAIL("a confirmed message is missing");
            break;
        }
    if (exactly_once) {
        CU_ASSERT_EQUAL(total, n);
        CU_ASSERT_EQUAL(dups, 0);
    } else {
        CU_ASSERT(total >= n);
    }
    free(seen);
}

/* ======================================================================== */
/* Producing                                                                 */
/* ======================================================================== */

static atomic_uint freed_count;

static void
free_buffer(void *arg)
{
    free(arg);
    atomic_fetch_add(&freed_count, 1);
}

/* Puts message seq: a "meta" block for every third, then "data". */
static int
put_one(scimq_client_t *c, const char *queue, uint64_t seq,
        uint64_t (*size)(uint64_t), bool async)
{
    uint64_t len = size(seq);
    uint8_t *buf = malloc(len), meta[16];
    scimq_block_t b[2];
    uint32_t n = 0;
    int rc;

    fill_pattern(buf, len, seq);
    put_be64(meta, seq);
    put_be64(meta + 8, len);
    if (seq % 3 == 0) {
        b[n].name = "meta";
        b[n].data = meta;
        b[n++].len = sizeof(meta);
    }
    b[n].name = "data";
    b[n].data = buf;
    b[n++].len = len;
    /* meta is copied into nothing: an async PUT must own every block. */
    if (async && n == 2) {
        uint8_t *both = malloc(sizeof(meta) + len);

        memcpy(both, meta, sizeof(meta));
        memcpy(both + sizeof(meta), buf, len);
        free(buf);
        buf = both;
        b[0].data = both;
        b[1].data = both + sizeof(meta);
    }
    rc = scimq_client_put(c, queue, b, n, async ? free_buffer : NULL, buf);
    if (!async || rc != 0)
        free(buf);
    if (rc != 0)
        fprintf(stderr, "put %llu to %s: %s\n", (unsigned long long) seq, queue,
                scimq_err_name(rc));
    return rc;
}

struct producer {
    scimq_client_t *c;
    const char *queue;
    uint64_t first, count;
    uint64_t (*size)(uint64_t);
    int failures;
};

static void *
producer_main(void *arg)
{
    struct producer *p = arg;

    for (uint64_t seq = p->first; seq < p->first + p->count; seq++)
        if (put_one(p->c, p->queue, seq, p->size, seq % 2 == 1) != 0)
            p->failures++;
    return NULL;
}

/* 200 PUTs of 1 KiB .. 4 MiB, half with free_fn, from `threads` threads. */
static void
run_puts(uint32_t k, unsigned int threads, const char *queue)
{
    struct producer p[4];
    pthread_t t[4];
    scimq_client_t *c = open_client(k);
    const uint64_t n = 200;
    unsigned int async = 0;

    uint32_t by_index[8], used = 0;

    CU_ASSERT_FATAL(c != NULL);
    declare(c, queue, SCIMQ_QUEUE_GUARANTEED);
    atomic_store(&freed_count, 0);
    FG_LOCKED(memset(gw.puts_by_index, 0, sizeof(gw.puts_by_index)));
    for (unsigned int i = 0; i < threads; i++) {
        p[i].c = c;
        p[i].queue = queue;
        p[i].first = n / threads * i;
        p[i].count = n / threads;
        p[i].size = put_size;
        p[i].failures = 0;
        CU_ASSERT_FATAL(pthread_create(&t[i], NULL, producer_main, &p[i]) == 0);
    }
    for (unsigned int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        CU_ASSERT_EQUAL(p[i].failures, 0);
    }
    for (uint64_t seq = 0; seq < n; seq++)
        async += seq % 2 == 1;
    CU_ASSERT_EQUAL(scimq_client_flush(c, 10000), 0);
    /* Every free_fn ran once the PUTs were confirmed. */
    CU_ASSERT_EQUAL(atomic_load(&freed_count), async);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    verify_queue(queue, n, put_size, true);
    /* The PUTs went out over the K streams (parallel dispatch). */
    FG_LOCKED(memcpy(by_index, gw.puts_by_index, sizeof(by_index)));
    for (unsigned int i = 0; i < 8; i++)
        used += by_index[i] > 0;
    CU_ASSERT_EQUAL(used, k);
}

static void
test_put_k1(void)
{
    run_puts(1, 1, "puts1");
}

static void
test_put_k4(void)
{
    run_puts(4, 4, "puts4");
}

static void
test_put_errors(void)
{
    scimq_client_t *c = open_client(2);
    scimq_block_t b = {"data", "x", 1};
    uint8_t *buf;

    CU_ASSERT_FATAL(c != NULL);
    /* Refused by the gateway, synchronously. */
    CU_ASSERT_EQUAL(scimq_client_put(c, "nosuch", &b, 1, NULL, NULL),
                    SCIMQ_ENOENT);
    /* Asynchronously: reported by flush, and free_fn still runs. */
    atomic_store(&freed_count, 0);
    buf = calloc(1, 16);
    b.data = buf;
    CU_ASSERT_EQUAL(scimq_client_put(c, "nosuch", &b, 1, free_buffer, buf), 0);
    CU_ASSERT_EQUAL(scimq_client_flush(c, 5000), SCIMQ_ENOENT);
    CU_ASSERT_EQUAL(atomic_load(&freed_count), 1);
    CU_ASSERT_EQUAL(scimq_client_flush(c, 0), 0);
    /* Closed queue. */
    declare(c, "closedq", SCIMQ_QUEUE_GUARANTEED);
    CU_ASSERT_EQUAL(scimq_client_queue_close(c, "closedq"), 0);
    b.data = "x";
    CU_ASSERT_EQUAL(scimq_client_put(c, "closedq", &b, 1, NULL, NULL),
                    SCIMQ_ECLOSED);
    /* Bad arguments. */
    CU_ASSERT_EQUAL(scimq_client_put(c, "", &b, 1, NULL, NULL), SCIMQ_EINVAL);
    CU_ASSERT_EQUAL(scimq_client_put(c, NULL, &b, 1, NULL, NULL), SCIMQ_EINVAL);
    CU_ASSERT_EQUAL(scimq_client_put(c, "q", NULL, 1, NULL, NULL),
                    SCIMQ_EINVAL);
    CU_ASSERT_EQUAL(scimq_client_put(NULL, "q", &b, 1, NULL, NULL),
                    SCIMQ_EINVAL);
    /* An empty message is a message. */
    declare(c, "emptyq", SCIMQ_QUEUE_GUARANTEED);
    CU_ASSERT_EQUAL(scimq_client_put(c, "emptyq", NULL, 0, NULL, NULL), 0);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
}

static uint64_t
small_size(uint64_t seq)
{
    return 4096 + (seq * 4099) % (60u << 10);
}

/*
 * A stream stops confirming after some PUTs and is cut (the gateway closes
 * it).  Its unconfirmed PUTs are sent again: none is lost.  (A stream that
 * is merely slow to confirm is left alone: that is back-pressure from a
 * full gateway, and the client waits; dead peers are found by TCP.)
 */
static void
run_cut(uint32_t k, const char *queue, bool stall)
{
    uint32_t creates0, joins0, creates, joins, cuts;
    scimq_client_options_t o;
    scimq_client_t *c = NULL;
    const uint64_t n = 100;
    unsigned int async = 0;
    int fails = 0;

    scimq_client_options_default(&o);
    o.streams = k;
    o.request_timeout_ms = stall ? 500 : 5000;
    CU_ASSERT_EQUAL_FATAL(scimq_client_open(url, &o, &c), 0);
    declare(c, queue, SCIMQ_QUEUE_GUARANTEED);
    FG_LOCKED(gw.cut_after = 20; gw.cut_stall = stall; gw.cut_done = false;
              gw.cut_conn = -1; gw.cuts = 0; creates0 = gw.creates;
              joins0 = gw.joins);
    atomic_store(&freed_count, 0);
    for (uint64_t seq = 0; seq < n; seq++) {
        fails += put_one(c, queue, seq, small_size, seq % 4 != 0) != 0;
        async += seq % 4 != 0;
    }
    CU_ASSERT_EQUAL(fails, 0);
    CU_ASSERT_EQUAL(scimq_client_flush(c, 15000), 0);
    CU_ASSERT_EQUAL(atomic_load(&freed_count), async);
    /* The dropped stream comes back (a join, or a new session if K=1). */
    for (uint64_t t0 = now_ms(); now_ms() - t0 < 5000; sleep_ms(10)) {
        FG_LOCKED(creates = gw.creates; joins = gw.joins);
        if (k == 1 ? creates > creates0 : joins > joins0)
            break;
    }
    CU_ASSERT_EQUAL(scimq_client_ping(c, NULL), 0);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    FG_LOCKED(gw.cut_after = 0; gw.cut_stall = false; cuts = gw.cuts;
              creates = gw.creates; joins = gw.joins);
    CU_ASSERT_EQUAL(cuts, stall ? 0 : 1);
    /* The stream came back: with K=1 the session ended with it. */
    if (k == 1) {
        CU_ASSERT(creates >= creates0 + 1);
    } else {
        CU_ASSERT(joins >= joins0 + 1);
    }
    verify_queue(queue, n, small_size, false);
}

static void
test_cut_k1(void)
{
    run_cut(1, "cut1", false);
}

static void
test_cut_k3(void)
{
    run_cut(3, "cut3", false);
}

/* ======================================================================== */
/* Consuming                                                                 */
/* ======================================================================== */

static uint64_t
consume_size(uint64_t seq)
{
    return 100 + (seq * 6151) % (300u << 10);
}

/* Checks a received test message (meta block for every third). */
static uint64_t
check_message(const scimq_message_t *m, const char *queue,
              uint64_t (*size)(uint64_t))
{
    const scimq_block_t *d;
    uint64_t seq;

    CU_ASSERT_STRING_EQUAL(m->queue, queue);
    CU_ASSERT_FATAL(m->block_count >= 1 && m->block_count <= 2);
    d = &m->blocks[m->block_count - 1];
    CU_ASSERT_STRING_EQUAL(d->name, "data");
    CU_ASSERT_FATAL(d->len >= 8);
    seq = be64(d->data);
    CU_ASSERT_EQUAL(d->len, size(seq));
    CU_ASSERT(check_pattern(d->data, d->len, seq));
    CU_ASSERT_EQUAL(m->block_count, seq % 3 == 0 ? 2u : 1u);
    if (m->block_count == 2) {
        CU_ASSERT_STRING_EQUAL(m->blocks[0].name, "meta");
        CU_ASSERT_EQUAL(m->blocks[0].len, 16);
        CU_ASSERT_EQUAL(be64(m->blocks[0].data), seq);
        /* Blocks lie back to back in the one payload buffer. */
        CU_ASSERT_PTR_EQUAL((const uint8_t *) m->blocks[0].data + 16, d->data);
    }
    CU_ASSERT_PTR_EQUAL(m->blocks[0].data, m->payload);
    return seq;
}

static void
test_consume(void)
{
    scimq_client_t *c = open_client(2);
    scimq_message_t *m = NULL;
    bool seen[50] = {false};
    uint32_t max_inflight, acks0, acks;
    uint64_t t0;

    CU_ASSERT_FATAL(c != NULL);
    declare(c, "cq", SCIMQ_QUEUE_GUARANTEED);
    for (uint64_t seq = 0; seq < 50; seq++)
        CU_ASSERT_EQUAL(put_one(c, "cq", seq, consume_size, false), 0);
    /* Nothing subscribed: nothing there. */
    CU_ASSERT_EQUAL(scimq_client_get(c, &m, 0), SCIMQ_EAGAIN);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "nosuch", 4, 1 << 20),
                    SCIMQ_ENOENT);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "cq", 0, 1 << 20), SCIMQ_EINVAL);
    FG_LOCKED(gw.max_inflight = 0; acks0 = gw.acks);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "cq", 4, 1 << 20), 0);
    for (int i = 0; i < 50; i++) {
        uint64_t seq;

        CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m, 5000), 0);
        seq = check_message(m, "cq", consume_size);
        CU_ASSERT_EQUAL(m->attempt, 1);
        CU_ASSERT(seq < 50 && !seen[seq]);
        if (seq < 50)
            seen[seq] = true;
        CU_ASSERT_EQUAL(scimq_client_ack(c, m), 0);
        scimq_message_free(c, m);
    }
    FG_LOCKED(max_inflight = gw.max_inflight);
    CU_ASSERT(max_inflight >= 1 && max_inflight <= 4);
    /* Drained but open: nothing yet. */
    CU_ASSERT_EQUAL(scimq_client_get(c, &m, 0), SCIMQ_EAGAIN);
    t0 = now_ms();
    CU_ASSERT_EQUAL(scimq_client_get(c, &m, 200), SCIMQ_ETIMEDOUT);
    CU_ASSERT(now_ms() - t0 >= 150);
    CU_ASSERT_EQUAL(scimq_client_queue_close(c, "cq"), 0);
    CU_ASSERT_EQUAL(scimq_client_get(c, &m, 5000), SCIMQ_EOS);
    CU_ASSERT_EQUAL(scimq_client_get(c, &m, 0), SCIMQ_EOS);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    FG_LOCKED(acks = gw.acks);
    CU_ASSERT_EQUAL(acks - acks0, 50);
}

static void
test_nack_extend(void)
{
    scimq_client_t *c = open_client(1);
    scimq_message_t *m = NULL;
    uint32_t nacks0, extends0, nacks, extends;

    CU_ASSERT_FATAL(c != NULL);
    declare(c, "nq", SCIMQ_QUEUE_GUARANTEED);
    CU_ASSERT_EQUAL(put_one(c, "nq", 7, consume_size, false), 0);
    FG_LOCKED(nacks0 = gw.nacks; extends0 = gw.extends);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "nq", 1, 1 << 20), 0);
    CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m, 5000), 0);
    CU_ASSERT_EQUAL(m->attempt, 1);
    CU_ASSERT_EQUAL(scimq_client_nack(c, m, 1, 0), 0);
    scimq_message_free(c, m);
    /* Back with the next attempt: the NACK topped the credit up. */
    CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m, 5000), 0);
    CU_ASSERT_EQUAL(check_message(m, "nq", consume_size), 7);
    CU_ASSERT_EQUAL(m->attempt, 2);
    CU_ASSERT_EQUAL(scimq_client_extend(c, m, 1000), 0);
    CU_ASSERT_EQUAL(scimq_client_ack(c, m), 0);
    scimq_message_free(c, m);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    FG_LOCKED(nacks = gw.nacks; extends = gw.extends);
    CU_ASSERT_EQUAL(nacks - nacks0, 1);
    CU_ASSERT_EQUAL(extends - extends0, 1);
}

/*
 * A DELIVER cut short by a stream drop is requeued by the gateway, which
 * gives its credit back: a window of 1 must not stall, and the client must
 * not top it up a second time.
 */
static void
test_half_deliver(void)
{
    scimq_client_t *c = open_client(2);
    scimq_message_t *m = NULL;
    bool seen[3] = {false};

    CU_ASSERT_FATAL(c != NULL);
    declare(c, "hq", SCIMQ_QUEUE_GUARANTEED);
    for (uint64_t seq = 0; seq < 3; seq++)
        CU_ASSERT_EQUAL(put_one(c, "hq", seq, consume_size, false), 0);
    FG_LOCKED(gw.half_deliver = true);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "hq", 1, 1 << 20), 0);
    for (int i = 0; i < 3; i++) {
        uint64_t seq;

        CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m, 5000), 0);
        seq = check_message(m, "hq", consume_size);
        CU_ASSERT(seq < 3 && !seen[seq]);
        if (seq < 3)
            seen[seq] = true;
        CU_ASSERT_EQUAL(scimq_client_ack(c, m), 0);
        scimq_message_free(c, m);
    }
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
}

/* Best-effort: freeing a message without ack gives its credit back. */
static void
test_best_effort(void)
{
    scimq_client_t *c = open_client(2);
    scimq_message_t *m = NULL;

    CU_ASSERT_FATAL(c != NULL);
    declare(c, "beq", SCIMQ_QUEUE_BEST_EFFORT);
    for (uint64_t seq = 0; seq < 10; seq++)
        CU_ASSERT_EQUAL(put_one(c, "beq", seq, consume_size, false), 0);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "beq", 2, 1 << 20), 0);
    for (int i = 0; i < 10; i++) {
        CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m, 5000), 0);
        (void) check_message(m, "beq", consume_size);
        scimq_message_free(c, m);
    }
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
}

/*
 * Close with deliveries never handed out: they go back with NACK; the one
 * the caller holds stays valid after close.
 */
static void
test_close_with_fifo(void)
{
    scimq_client_t *c = open_client(2);
    scimq_message_t *m = NULL;
    uint32_t nacks0, nacks, delivers0, delivers = 0;
    uint64_t t0;

    CU_ASSERT_FATAL(c != NULL);
    declare(c, "fq", SCIMQ_QUEUE_GUARANTEED);
    for (uint64_t seq = 0; seq < 10; seq++)
        CU_ASSERT_EQUAL(put_one(c, "fq", seq, consume_size, false), 0);
    FG_LOCKED(nacks0 = gw.nacks; delivers0 = gw.delivers);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "fq", 10, 16 << 20), 0);
    CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m, 5000), 0);
    t0 = now_ms();
    while (delivers - delivers0 < 10 && now_ms() - t0 < 5000) {
        sleep_ms(10);
        FG_LOCKED(delivers = gw.delivers);
    }
    sleep_ms(200); /* let the client read them */
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    FG_LOCKED(nacks = gw.nacks);
    CU_ASSERT_EQUAL(nacks - nacks0, 9);
    (void) check_message(m, "fq", consume_size);
    scimq_message_free(NULL, m);
}

static atomic_int allocs, releases, alloc_failures;

static int
test_alloc(void *arg, uint64_t len, void **buf_p, void **ctx_p)
{
    CU_ASSERT_PTR_EQUAL(arg, &allocs);
    /* The first one fails: the delivery must come back later. */
    if (atomic_fetch_add(&alloc_failures, 1) == 0)
        return SCIMQ_ENOMEM;
    *buf_p = malloc(len);
    *ctx_p = (void *) (uintptr_t) 42;
    atomic_fetch_add(&allocs, 1);
    return *buf_p != NULL ? 0 : SCIMQ_ENOMEM;
}

static void
test_release(void *arg, void *buf, void *ctx)
{
    CU_ASSERT_PTR_EQUAL(arg, &allocs);
    CU_ASSERT_EQUAL((uintptr_t) ctx, 42);
    free(buf);
    atomic_fetch_add(&releases, 1);
}

static void
test_user_allocator(void)
{
    scimq_client_options_t o;
    scimq_client_t *c = NULL;
    scimq_message_t *m = NULL;
    bool seen[5] = {false};
    uint32_t nacks0, nacks;

    scimq_client_options_default(&o);
    o.payload_alloc = test_alloc;
    o.payload_release = test_release;
    o.alloc_arg = &allocs;
    atomic_store(&allocs, 0);
    atomic_store(&releases, 0);
    atomic_store(&alloc_failures, 0);
    CU_ASSERT_EQUAL_FATAL(scimq_client_open(url, &o, &c), 0);
    declare(c, "aq", SCIMQ_QUEUE_GUARANTEED);
    for (uint64_t seq = 0; seq < 5; seq++)
        CU_ASSERT_EQUAL(put_one(c, "aq", seq, consume_size, false), 0);
    FG_LOCKED(nacks0 = gw.nacks);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "aq", 2, 1 << 20), 0);
    for (int i = 0; i < 5; i++) {
        uint64_t seq;

        CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m, 5000), 0);
        CU_ASSERT_EQUAL((uintptr_t) m->payload_ctx, 42);
        seq = check_message(m, "aq", consume_size);
        CU_ASSERT(seq < 5 && !seen[seq]);
        if (seq < 5)
            seen[seq] = true;
        CU_ASSERT_EQUAL(scimq_client_ack(c, m), 0);
        scimq_message_free(c, m);
    }
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    CU_ASSERT(atomic_load(&allocs) >= 5);
    CU_ASSERT_EQUAL(atomic_load(&allocs), atomic_load(&releases));
    FG_LOCKED(nacks = gw.nacks);
    CU_ASSERT_EQUAL(nacks - nacks0, 1); /* the one without a buffer */
}

/* ======================================================================== */
/* Queue management                                                          */
/* ======================================================================== */

static void
test_admin(void)
{
    scimq_client_t *c = open_client(2);
    scimq_queue_options_t qo;
    uint64_t v = 99, rtt = 0;
    char *json = NULL;

    CU_ASSERT_FATAL(c != NULL);
    memset(&qo, 0, sizeof(qo));
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "a1", &qo), 0);
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "a1", &qo), 0);
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "a2", NULL), 0);
    qo.kind = SCIMQ_QUEUE_BEST_EFFORT;
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "a1", &qo), SCIMQ_EEXIST);
    qo.dead_letter = "nope";
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "a3", &qo), SCIMQ_ENOENT);
    qo.kind = 7;
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "a3", &qo), SCIMQ_EINVAL);
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "", NULL), SCIMQ_EINVAL);

    CU_ASSERT_EQUAL(scimq_client_queue_list(c, "a", &json), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    CU_ASSERT_STRING_EQUAL(json, "{\"queues\":[\"a1\",\"a2\"]}");
    free(json);
    CU_ASSERT_EQUAL(scimq_client_queue_list(c, NULL, &json), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"a1\""));
    free(json);
    CU_ASSERT_EQUAL(scimq_client_stats(c, NULL, &json), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"puts\""));
    free(json);

    CU_ASSERT_EQUAL(scimq_client_queue_bind(c, "a1", "a2"), 0);
    CU_ASSERT_EQUAL(put_one(c, "a1", 1, consume_size, false), 0);
    CU_ASSERT_EQUAL(scimq_client_queue_unbind(c, "a1", "a2"), 0);
    CU_ASSERT_EQUAL(scimq_client_queue_unbind(c, "a1", "a2"), SCIMQ_ENOENT);
    CU_ASSERT_EQUAL(scimq_client_queue_bind(c, "a1", "zz"), SCIMQ_ENOENT);
    CU_ASSERT_EQUAL(put_one(c, "a1", 2, consume_size, false), 0);
    CU_ASSERT_EQUAL(put_one(c, "a1", 3, consume_size, false), 0);
    /* a1 holds 3 messages, a2 the bound copy of the first. */
    CU_ASSERT_EQUAL(scimq_client_queue_move(c, "a1", "a2", 2, &v), 0);
    CU_ASSERT_EQUAL(v, 2);
    CU_ASSERT_EQUAL(scimq_client_queue_move(c, "a1", "zz", 0, &v),
                    SCIMQ_ENOENT);
    CU_ASSERT_EQUAL(scimq_client_queue_delete(c, "a2", &v), 0);
    CU_ASSERT_EQUAL(v, 3);
    CU_ASSERT_EQUAL(scimq_client_queue_delete(c, "a2", &v), SCIMQ_ENOENT);
    CU_ASSERT_EQUAL(scimq_client_queue_delete(c, "a1", NULL), 0);
    CU_ASSERT_EQUAL(scimq_client_queue_close(c, "a1"), SCIMQ_ENOENT);

    CU_ASSERT_EQUAL(scimq_client_ping(c, &rtt), 0);
    CU_ASSERT(rtt > 0 && rtt < UINT64_C(5000000000));
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
}

/* A reply that never comes: the request times out, the client goes on. */
static void
test_request_timeout(void)
{
    scimq_client_options_t o;
    scimq_client_t *c = NULL;
    char *json = NULL;
    uint64_t t0, dt;

    scimq_client_options_default(&o);
    o.request_timeout_ms = 300;
    CU_ASSERT_EQUAL_FATAL(scimq_client_open(url, &o, &c), 0);
    FG_LOCKED(gw.mute_stats = true);
    t0 = now_ms();
    CU_ASSERT_EQUAL(scimq_client_stats(c, "", &json), SCIMQ_ETIMEDOUT);
    dt = now_ms() - t0;
    CU_ASSERT(dt >= 250 && dt < 2000);
    CU_ASSERT_PTR_NULL(json);
    FG_LOCKED(gw.mute_stats = false);
    CU_ASSERT_EQUAL(scimq_client_ping(c, NULL), 0);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
}

/* The gateway says BYE on every stream: the client answers, reconnects. */
static void
test_gateway_bye(void)
{
    scimq_client_t *c = open_client(2);
    uint32_t answers0, answers = 0, creates0, creates = 0;

    CU_ASSERT_FATAL(c != NULL);
    declare(c, "byeq", SCIMQ_QUEUE_GUARANTEED);
    FG_LOCKED(answers0 = gw.bye_answers; creates0 = gw.creates;
              gw.bye_all = true);
    for (uint64_t t0 = now_ms(); now_ms() - t0 < 5000; sleep_ms(10)) {
        FG_LOCKED(answers = gw.bye_answers; creates = gw.creates);
        if (answers - answers0 == 2 && creates > creates0)
            break;
    }
    CU_ASSERT_EQUAL(answers - answers0, 2);
    /* Both streams closed: the session ended, a new one was made. */
    CU_ASSERT(creates > creates0);
    for (uint64_t seq = 0; seq < 10; seq++)
        CU_ASSERT_EQUAL(put_one(c, "byeq", seq, small_size, seq % 2 == 1), 0);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    verify_queue("byeq", 10, small_size, true);
}

/* Every stream lost for longer than reconnect_ms: calls fail. */
static void
test_session_lost(void)
{
    scimq_client_options_t o;
    scimq_client_t *c = NULL;
    scimq_message_t *m = NULL;
    scimq_block_t b = {"data", "x", 1};
    uint64_t t0;
    int rc = 0;

    scimq_client_options_default(&o);
    o.streams = 2;
    o.reconnect_ms = 300;
    o.request_timeout_ms = 3000;
    CU_ASSERT_EQUAL_FATAL(scimq_client_open(url, &o, &c), 0);
    declare(c, "lostq", SCIMQ_QUEUE_GUARANTEED);
    declare(c, "lostsub", SCIMQ_QUEUE_GUARANTEED);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "lostsub", 1, 0), 0);
    FG_LOCKED(gw.refuse_hello = true; gw.kill_all = true);
    t0 = now_ms();
    while (now_ms() - t0 < 5000) {
        rc = scimq_client_put(c, "lostq", &b, 1, NULL, NULL);
        if (rc == SCIMQ_ECONNRESET)
            break;
        sleep_ms(20);
    }
    CU_ASSERT_EQUAL(rc, SCIMQ_ECONNRESET);
    CU_ASSERT(now_ms() - t0 < 3000);
    rc = scimq_client_get(c, &m, 1000);
    CU_ASSERT_EQUAL(rc, SCIMQ_ECONNRESET);
    if (rc != SCIMQ_ECONNRESET)
        fprintf(stderr, "get: %s\n", scimq_err_name(rc));
    CU_ASSERT_EQUAL(scimq_client_ping(c, NULL), SCIMQ_ECONNRESET);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    FG_LOCKED(gw.refuse_hello = false);
}

/* ======================================================================== */
/* Connecting                                                                */
/* ======================================================================== */

static void
test_options_default(void)
{
    scimq_client_options_t o;

    memset(&o, 0xff, sizeof(o));
    scimq_client_options_default(&o);
    CU_ASSERT_EQUAL(o.streams, 1);
    CU_ASSERT_STRING_EQUAL(o.client_name, "libscimq");
    CU_ASSERT_EQUAL(o.confirm_window, 64);
    CU_ASSERT_EQUAL(o.connect_timeout_ms, 10000);
    CU_ASSERT_EQUAL(o.reconnect_ms, 30000);
    CU_ASSERT_EQUAL(o.request_timeout_ms, 30000);
    CU_ASSERT_PTR_NULL(o.token_file);
    CU_ASSERT_PTR_NULL(o.payload_alloc);
    CU_ASSERT_EQUAL(o.sndbuf, 0);
}

static void
test_bad_arguments(void)
{
    scimq_client_options_t o;
    scimq_client_t *c = (scimq_client_t *) &o;

    CU_ASSERT_EQUAL(scimq_client_open(NULL, NULL, &c), SCIMQ_EINVAL);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_EQUAL(scimq_client_open("scimq://127.0.0.1", NULL, &c),
                    SCIMQ_EINVAL);
    CU_ASSERT_EQUAL(scimq_client_open("scimq://:5000", NULL, &c), SCIMQ_EINVAL);
    CU_ASSERT_EQUAL(scimq_client_open("scimq://127.0.0.1:0", NULL, &c),
                    SCIMQ_EINVAL);
    CU_ASSERT_EQUAL(scimq_client_open(url, NULL, NULL), SCIMQ_EINVAL);
    scimq_client_options_default(&o);
    o.streams = 0;
    CU_ASSERT_EQUAL(scimq_client_open(url, &o, &c), SCIMQ_EINVAL);
    o.streams = 65;
    CU_ASSERT_EQUAL(scimq_client_open(url, &o, &c), SCIMQ_EINVAL);
    o.streams = 1;
    o.confirm_window = 0;
    CU_ASSERT_EQUAL(scimq_client_open(url, &o, &c), SCIMQ_EINVAL);
    CU_ASSERT_EQUAL(scimq_client_close(NULL), SCIMQ_EINVAL);
    scimq_message_free(NULL, NULL);
}

static void
test_refused(void)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    scimq_client_t *c = NULL;
    char u[64];
    uint64_t t0;
    int fd;

    /* A port that was free a moment ago: nobody listens there. */
    fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CU_ASSERT_FATAL(bind(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0);
    CU_ASSERT_FATAL(getsockname(fd, (struct sockaddr *) &sa, &len) == 0);
    close(fd);
    snprintf(u, sizeof(u), "scimq://127.0.0.1:%u", ntohs(sa.sin_port));
    t0 = now_ms();
    CU_ASSERT_EQUAL(scimq_client_open(u, NULL, &c), SCIMQ_ECONNREFUSED);
    CU_ASSERT(now_ms() - t0 < 2000);
    CU_ASSERT_PTR_NULL(c);
}

/* ======================================================================== */
/* Authentication                                                            */
/* ======================================================================== */

static char good_token[64], bad_token[64];

static int
write_token(char *path, const char *text)
{
    int fd;

    strcpy(path, "/tmp/scimq-test-token-XXXXXX");
    fd = mkstemp(path);
    if (fd < 0)
        return -1;
    if (write(fd, text, strlen(text)) != (ssize_t) strlen(text)) {
        close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

static int
auth_init(void)
{
    if (fg_start(&gw, true) != 0)
        return 1;
    snprintf(url, sizeof(url), "scimq://127.0.0.1:%u", gw.port);
    if (write_token(good_token, FG_TOKEN "\n") != 0 ||
        write_token(bad_token, "wrong-token") != 0)
        return 1;
    return 0;
}

static int
auth_fini(void)
{
    fg_stop(&gw);
    unlink(good_token);
    unlink(bad_token);
    return 0;
}

static int
open_with_token(const char *path, uint32_t k, scimq_client_t **c_p)
{
    scimq_client_options_t o;

    scimq_client_options_default(&o);
    o.token_file = path;
    o.streams = k;
    o.connect_timeout_ms = 3000;
    return scimq_client_open(url, &o, c_p);
}

static void
test_auth_good(void)
{
    scimq_client_t *c = NULL;
    uint32_t ok0, ok;

    FG_LOCKED(ok0 = gw.auth_ok);
    CU_ASSERT_EQUAL_FATAL(open_with_token(good_token, 3, &c), 0);
    CU_ASSERT_EQUAL(scimq_client_ping(c, NULL), 0);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    FG_LOCKED(ok = gw.auth_ok);
    CU_ASSERT_EQUAL(ok - ok0, 3); /* every stream authenticates */
}

static void
test_auth_bad(void)
{
    scimq_client_t *c = NULL;

    CU_ASSERT_EQUAL(open_with_token(bad_token, 1, &c), SCIMQ_EAUTH);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_EQUAL(open_with_token(bad_token, 2, &c), SCIMQ_EAUTH);
}

static void
test_auth_missing(void)
{
    scimq_client_t *c = NULL;

    unsetenv("SCIMQ_TOKEN_FILE");
    CU_ASSERT_EQUAL(open_with_token(NULL, 1, &c), SCIMQ_EAUTH);
    CU_ASSERT_EQUAL(open_with_token("/nonexistent/token", 1, &c), SCIMQ_EAUTH);
}

static void
test_auth_env(void)
{
    scimq_client_t *c = NULL;

    setenv("SCIMQ_TOKEN_FILE", good_token, 1);
    CU_ASSERT_EQUAL(open_with_token(NULL, 1, &c), 0);
    unsetenv("SCIMQ_TOKEN_FILE");
    if (c != NULL) {
        CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    }
}

/* ======================================================================== */

static int
plain_init(void)
{
    if (fg_start(&gw, false) != 0)
        return 1;
    snprintf(url, sizeof(url), "scimq://127.0.0.1:%u", gw.port);
    return 0;
}

static int
plain_fini(void)
{
    fg_stop(&gw);
    return 0;
}

static const struct scimq_cunit_test client_tests[] = {
    {"options defaults", test_options_default, 1},
    {"bad arguments", test_bad_arguments, 1},
    {"queue management and ping", test_admin, 1},
    {"200 puts, K=1", test_put_k1, 1},
    {"200 puts from 4 threads, K=4", test_put_k4, 1},
    {"put errors", test_put_errors, 1},
    {"stream cut, K=1: session renewed", test_cut_k1, 1},
    {"stream cut, K=3: stream rejoins", test_cut_k3, 1},
    {"consume 50 with credit 4, then EOS", test_consume, 1},
    {"nack and extend", test_nack_extend, 1},
    {"DELIVER cut short: credit given back", test_half_deliver, 1},
    {"best-effort credit on free", test_best_effort, 1},
    {"close returns undelivered messages", test_close_with_fifo, 1},
    {"payload allocator", test_user_allocator, 1},
    {"request timeout", test_request_timeout, 1},
    {"gateway BYE", test_gateway_bye, 1},
    {"session lost", test_session_lost, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_test refused_tests[] = {
    {"connection refused", test_refused, 1}, {NULL, NULL, 0}};

static const struct scimq_cunit_test auth_tests[] = {
    {"right token, K=3", test_auth_good, 1},
    {"wrong token", test_auth_bad, 1},
    {"no token", test_auth_missing, 1},
    {"token from SCIMQ_TOKEN_FILE", test_auth_env, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_suite suites[] = {
    {"client", plain_init, plain_fini, client_tests},
    {"connect", NULL, NULL, refused_tests},
    {"auth", auth_init, auth_fini, auth_tests},
    {NULL, NULL, NULL, NULL}};

SCIMQ_CUNIT_MAIN(suites)
