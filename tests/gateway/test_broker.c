/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The real broker, driven by hand from one thread with its own clock (the
 * SPDK way of testing a poller): every event goes in through broker.h and
 * every decision comes out as actions, which the tests read and answer
 * (a DELIVER is "written", a spill job "completes").  No socket, no thread,
 * no sleep.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <scimq/error.h>

#include "cunit_main.h"
#include "gateway/broker.h"
#include "gateway/journal_codec.h"
#include "gateway/records.h"
#include "gateway/store.h"

#define KiB 1024u
#define MiB (1024u * 1024u)
/* Byte credit that never binds. */
#define ANY_BYTES (UINT64_C(1) << 40)

static struct gw_broker *b;
static struct gw_actions out;
static uint64_t now = 1000000;

static void
drop_all(void)
{
    struct gw_action *a;

    while ((a = gw_actions_pop(&out)) != NULL)
        gw_action_free(a);
}

static void
setup(uint64_t limit, uint64_t chunk, bool spill)
{
    struct gw_broker_settings set = {.ack_timeout_ms = 5000,
                                     .memory_limit = limit,
                                     .chunk_size = chunk,
                                     .spill = spill,
                                     .disk_limit = 1024 * MiB};

    CU_ASSERT_FATAL(gw_broker_new(&set, &b) == 0);
    out.head = out.tail = NULL;
}

static void
teardown(void)
{
    drop_all();
    gw_broker_free(b);
    b = NULL;
}

static scimq_proto_str_t
str(const char *s)
{
    return (scimq_proto_str_t){s, (uint16_t) strlen(s)};
}

/* A session of `count` streams whose stream i is connection conn0 + i. */
static void
session(uint64_t conn0, uint16_t count, uint8_t version)
{
    uint8_t id[SCIMQ_PROTO_SESSION_ID_LEN] = {0}, sid[sizeof(id)], v = 0;
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_HELLO};

    memset(id, (int) conn0, sizeof(id));
    f.args.hello.stream_count = count;
    for (uint16_t i = 0; i < count; i++) {
        f.args.hello.stream_index = i;
        CU_ASSERT_FATAL(gw_broker_hello(b, now, conn0 + i, (int) i, &f, id,
                                        version, &v, sid, &out) == 0);
        CU_ASSERT(v == version);
        memcpy(f.args.hello.session_id, sid, sizeof(sid));
    }
}

static void
declare(const char *name, uint8_t kind, uint32_t max_attempts, const char *dlq)
{
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_QUEUE_DECLARE};
    uint64_t created = 0;

    f.args.declare.kind = kind;
    f.args.declare.max_attempts = max_attempts;
    f.args.declare.queue = str(name);
    if (dlq != NULL)
        f.args.declare.dead_letter = str(dlq);
    CU_ASSERT_FATAL(gw_broker_declare(b, now, &f, &created, &out) == 0);
    CU_ASSERT(created == 1);
}

static scimq_proto_frame_t
put_frame(const char *queue, uint64_t len, scimq_proto_block_t *blk)
{
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_PUT};

    f.args.queue.queue = str(queue);
    blk->name = "data";
    blk->name_len = 4;
    blk->data = NULL;
    blk->len = len;
    f.block_count = 1;
    f.blocks = blk;
    f.payload_len = len;
    return f;
}

/* PUT of len bytes of `fill` from connection conn; returns the rc of the
 * header-time admission (the commit's on success). */
static int
put_flags(uint64_t conn, const char *queue, uint64_t len, uint8_t fill,
          uint16_t flags)
{
    scimq_proto_block_t blk;
    scimq_proto_frame_t f = put_frame(queue, len, &blk);
    struct gw_payload *pl = NULL;
    uint64_t id = 0;
    bool deferred = false;
    int rc;

    f.flags = flags;
    rc = gw_broker_put_begin(b, now, conn, 0, &f, &pl, &out);

    if (rc != 0)
        return rc;
    memset(pl->data, fill, len);
    rc = gw_broker_put_commit(b, now, conn, 0, &f, pl, NULL, &id, &deferred,
                              &out);
    CU_ASSERT(deferred == b->j.on); /* durable queues wait for it */
    return rc;
}

static int
put(uint64_t conn, const char *queue, uint64_t len, uint8_t fill)
{
    return put_flags(conn, queue, len, fill, 0);
}

static void
get(uint64_t conn, const char *queue, uint32_t msgs, uint64_t bytes,
    uint64_t rid)
{
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_GET, .request_id = rid};

    f.args.get.credit_msgs = msgs;
    f.args.get.credit_bytes = bytes;
    f.args.get.queue = str(queue);
    CU_ASSERT_FATAL(gw_broker_get(b, now, conn, &f, &out) == 0);
}

static bool
settle(uint64_t conn, uint8_t op, uint64_t delivery, uint8_t requeue)
{
    scimq_proto_frame_t f = {.opcode = op};

    if (op == SCIMQ_PROTO_OP_NACK) {
        f.args.nack.delivery_id = delivery;
        f.args.nack.requeue = requeue;
    } else {
        f.args.ack.delivery_id = delivery;
    }
    return gw_broker_settle(b, now, conn, &f, &out);
}

/* The next action of a kind (others before it are dropped), or NULL;
 * a DELIVER is "written" at once, so its pin goes back. */
struct seen {
    enum gw_action_kind kind;
    uint64_t conn_id, request_id, delivery_id, msg_id, len;
    uint32_t attempt;
    uint8_t first_byte;
    struct gw_payload *payload;
    uint64_t payload_id;
    uint8_t *buf;
    bool found;
};

static struct seen
next(enum gw_action_kind kind)
{
    struct seen s = {.found = false};
    struct gw_action *a;

    while ((a = gw_actions_pop(&out)) != NULL) {
        if (a->kind != kind) {
            if (a->kind == GW_ACT_DELIVER)
                gw_broker_written(b, now, a->conn_id, a->payload, a->len, &out);
            gw_action_free(a);
            continue;
        }
        s = (struct seen){.kind = a->kind,
                          .conn_id = a->conn_id,
                          .request_id = a->request_id,
                          .delivery_id = a->delivery_id,
                          .msg_id = a->msg_id,
                          .len = a->len,
                          .attempt = a->attempt,
                          .payload = a->payload,
                          .payload_id = a->payload_id,
                          .buf = a->buf,
                          .found = true};
        if (kind == GW_ACT_DELIVER) {
            s.first_byte = a->len > 0 ? a->payload->data[0] : 0;
            gw_broker_written(b, now, a->conn_id, a->payload, a->len, &out);
        }
        gw_action_free(a);
        return s;
    }
    return s;
}

static const struct gw_queue *
queue(const char *name)
{
    const struct gw_queue *q = NULL;

    HASH_FIND(hh, b->queues, name, strlen(name), q);
    CU_ASSERT_FATAL(q != NULL);
    return q;
}

/* ======================================================================== */

static void
test_lease_expiry(void)
{
    struct seen d1, d2;

    setup(8 * MiB, 64 * KiB, false);
    session(10, 1, 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    CU_ASSERT(put(10, "q", 1000, 7) == 0);
    get(10, "q", 1, 0, 42);
    d1 = next(GW_ACT_DELIVER);
    CU_ASSERT_FATAL(d1.found);
    CU_ASSERT(d1.attempt == 1);
    CU_ASSERT(d1.request_id == 42);
    CU_ASSERT(d1.first_byte == 7);
    CU_ASSERT(queue("q")->n_leased == 1);
    now += 4999;
    gw_broker_tick(b, now, &out);
    CU_ASSERT(queue("q")->c.expired == 0);
    now += 1;
    gw_broker_tick(b, now, &out);
    CU_ASSERT(queue("q")->c.expired == 1);
    CU_ASSERT(queue("q")->n_ready == 1);
    /* Expiry gives no credit back: nothing goes out until a GET. */
    CU_ASSERT(!next(GW_ACT_DELIVER).found);
    get(10, "q", 1, 0, 43);
    d2 = next(GW_ACT_DELIVER);
    CU_ASSERT_FATAL(d2.found);
    CU_ASSERT(d2.attempt == 2);
    CU_ASSERT(d2.msg_id == d1.msg_id);
    /* The late ACK of the expired delivery is ignored and counted. */
    CU_ASSERT(!settle(10, SCIMQ_PROTO_OP_ACK, d1.delivery_id, 0));
    CU_ASSERT(b->settlements_ignored == 1);
    CU_ASSERT(settle(10, SCIMQ_PROTO_OP_ACK, d2.delivery_id, 0));
    CU_ASSERT(queue("q")->c.acked == 1);
    CU_ASSERT(queue("q")->n_leased == 0 && queue("q")->n_ready == 0);
    CU_ASSERT(gw_pool_used(&b->store.pool) == 0);
    teardown();
}

static void
test_extend(void)
{
    struct seen d;
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_EXTEND};

    setup(8 * MiB, 64 * KiB, false);
    session(10, 1, 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    CU_ASSERT(put(10, "q", 10, 1) == 0);
    get(10, "q", 1, 0, 1);
    d = next(GW_ACT_DELIVER);
    now += 4000;
    f.args.extend.delivery_id = d.delivery_id;
    f.args.extend.lease_ms = 10000;
    CU_ASSERT(gw_broker_settle(b, now, 10, &f, &out));
    now += 9999;
    gw_broker_tick(b, now, &out);
    CU_ASSERT(queue("q")->c.expired == 0);
    now += 1;
    gw_broker_tick(b, now, &out);
    CU_ASSERT(queue("q")->c.expired == 1);
    teardown();
}

static void
test_redelivery_order(void)
{
    struct seen d[3], r1, r2;

    setup(8 * MiB, 64 * KiB, false);
    session(10, 1, 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    for (int i = 0; i < 3; i++)
        CU_ASSERT(put(10, "q", 100, (uint8_t) i) == 0);
    get(10, "q", 3, ANY_BYTES, 1);
    for (int i = 0; i < 3; i++) {
        d[i] = next(GW_ACT_DELIVER);
        CU_ASSERT_FATAL(d[i].found);
        CU_ASSERT(d[i].first_byte == i);
    }
    /* Given back in the order 2nd, 1st: both go before anything newer,
     * the first one first. */
    CU_ASSERT(settle(10, SCIMQ_PROTO_OP_NACK, d[1].delivery_id, 1));
    CU_ASSERT(settle(10, SCIMQ_PROTO_OP_NACK, d[0].delivery_id, 1));
    CU_ASSERT(put(10, "q", 100, 3) == 0);
    get(10, "q", 2, ANY_BYTES, 2);
    r1 = next(GW_ACT_DELIVER);
    r2 = next(GW_ACT_DELIVER);
    CU_ASSERT(r1.msg_id == d[0].msg_id && r1.attempt == 2);
    CU_ASSERT(r2.msg_id == d[1].msg_id && r2.attempt == 2);
    CU_ASSERT(queue("q")->c.redelivered == 2);
    CU_ASSERT(queue("q")->n_ready == 1);
    teardown();
}

static void
test_credit_bytes(void)
{
    struct seen d[5];
    int n = 0;

    setup(8 * MiB, 64 * KiB, false);
    session(10, 1, 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    for (int i = 0; i < 5; i++)
        CU_ASSERT(put(10, "q", 1000, (uint8_t) i) == 0);
    get(10, "q", 10, 3000, 1);
    while (n < 5 && (d[n] = next(GW_ACT_DELIVER)).found)
        n++;
    CU_ASSERT(n == 3); /* 3 x 1000 B fill the byte window */
    /* Settling gives the bytes back only through a new GET. */
    CU_ASSERT(settle(10, SCIMQ_PROTO_OP_ACK, d[0].delivery_id, 0));
    CU_ASSERT(!next(GW_ACT_DELIVER).found);
    get(10, "q", 0, 1000, 2);
    CU_ASSERT(next(GW_ACT_DELIVER).found);
    CU_ASSERT(queue("q")->n_ready == 1);
    teardown();

    /* A message larger than the window goes to a consumer with nothing in
     * flight, so it cannot get stuck; the message credit is a hard cap. */
    setup(8 * MiB, 64 * KiB, false);
    session(10, 1, 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    CU_ASSERT(put(10, "q", 100 * KiB, 1) == 0);
    CU_ASSERT(put(10, "q", 100 * KiB, 2) == 0);
    get(10, "q", 5, 10, 1);
    d[0] = next(GW_ACT_DELIVER);
    CU_ASSERT(d[0].found && d[0].len == 100 * KiB);
    CU_ASSERT(!next(GW_ACT_DELIVER).found);
    CU_ASSERT(settle(10, SCIMQ_PROTO_OP_ACK, d[0].delivery_id, 0));
    CU_ASSERT(next(GW_ACT_DELIVER).found);
    teardown();
}

static void
test_fanout_refs(void)
{
    scimq_proto_str_t q = str("in"), t1 = str("a"), t2 = str("b");
    struct seen d[3];
    const char *names[3] = {"in", "a", "b"};

    setup(8 * MiB, 64 * KiB, false);
    session(10, 1, 1);
    for (int i = 0; i < 3; i++)
        declare(names[i], SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    CU_ASSERT(gw_broker_bind(b, now, &q, &t1, true, &out) == 0);
    CU_ASSERT(gw_broker_bind(b, now, &q, &t2, true, &out) == 0);
    CU_ASSERT(put(10, "in", 200 * KiB, 9) == 0);
    /* One payload for three messages: 200 KiB of pool, not 600. */
    CU_ASSERT(gw_pool_used(&b->store.pool) == 256 * KiB);
    CU_ASSERT(queue("a")->ready->payload == queue("in")->ready->payload);
    CU_ASSERT(queue("in")->ready->payload->refs == 3);
    for (int i = 0; i < 3; i++) {
        get(10, names[i], 1, 0, (uint64_t) i + 1);
        d[i] = next(GW_ACT_DELIVER);
        CU_ASSERT_FATAL(d[i].found);
        CU_ASSERT(d[i].first_byte == 9);
    }
    for (int i = 0; i < 2; i++) {
        CU_ASSERT(settle(10, SCIMQ_PROTO_OP_ACK, d[i].delivery_id, 0));
        CU_ASSERT(gw_pool_used(&b->store.pool) == 256 * KiB);
    }
    CU_ASSERT(settle(10, SCIMQ_PROTO_OP_ACK, d[2].delivery_id, 0));
    CU_ASSERT(gw_pool_used(&b->store.pool) == 0);
    CU_ASSERT(b->store.resident == 0);
    teardown();
}

static void
test_dead_letter(void)
{
    struct seen d;

    setup(8 * MiB, 64 * KiB, false);
    session(10, 1, 2);
    declare("dlq", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 2, "dlq");
    /* Attempts used up. */
    CU_ASSERT(put(10, "q", 10, 1) == 0);
    for (int i = 0; i < 2; i++) {
        get(10, "q", 1, 0, 1);
        d = next(GW_ACT_DELIVER);
        CU_ASSERT_FATAL(d.found);
        CU_ASSERT(settle(10, SCIMQ_PROTO_OP_NACK, d.delivery_id, 1));
    }
    CU_ASSERT(queue("q")->c.dead_lettered == 1);
    CU_ASSERT(queue("dlq")->n_ready == 1);
    CU_ASSERT(queue("q")->n_ready == 0);
    /* Rejected. */
    CU_ASSERT(put(10, "q", 10, 2) == 0);
    get(10, "q", 1, 0, 1);
    d = next(GW_ACT_DELIVER);
    CU_ASSERT(settle(10, SCIMQ_PROTO_OP_NACK, d.delivery_id, 0));
    CU_ASSERT(queue("dlq")->n_ready == 2);
    /* Too large for every consumer (LIMIT): dead-lettered, never sent. */
    {
        scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_LIMIT};

        f.args.limit.max_message = 100;
        f.args.limit.queue = str("q");
        CU_ASSERT(gw_broker_limit(b, now, 10, &f, &out) == 0);
    }
    CU_ASSERT(put(10, "q", 101, 3) == 0);
    CU_ASSERT(put(10, "q", 100, 4) == 0);
    get(10, "q", 5, 0, 2);
    d = next(GW_ACT_DELIVER);
    CU_ASSERT(d.found && d.len == 100 && d.first_byte == 4);
    CU_ASSERT(!next(GW_ACT_DELIVER).found);
    CU_ASSERT(queue("q")->c.too_large == 1);
    CU_ASSERT(queue("dlq")->n_ready == 3);
    teardown();

    /* LIMIT needs session version 2. */
    setup(8 * MiB, 64 * KiB, false);
    session(10, 1, 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    {
        scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_LIMIT};

        f.args.limit.max_message = 100;
        f.args.limit.queue = str("q");
        CU_ASSERT(gw_broker_limit(b, now, 10, &f, &out) == SCIMQ_ESTATE);
    }
    teardown();
}

static void
test_eos_per_stream(void)
{
    scimq_proto_str_t name = str("q");
    struct seen d, e1, e2, e3;

    setup(8 * MiB, 64 * KiB, false);
    session(20, 2, 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    CU_ASSERT(put(20, "q", 0, 0) == 0); /* an empty message */
    get(20, "q", 1, 0, 100);
    get(21, "q", 1, 0, 200);
    d = next(GW_ACT_DELIVER);
    CU_ASSERT_FATAL(d.found);
    CU_ASSERT(d.len == 0);
    CU_ASSERT(gw_broker_close_queue(b, now, &name, &out) == 0);
    CU_ASSERT(!next(GW_ACT_EOS).found); /* one still leased */
    CU_ASSERT(settle(20, SCIMQ_PROTO_OP_ACK, d.delivery_id, 0));
    e1 = next(GW_ACT_EOS);
    e2 = next(GW_ACT_EOS);
    CU_ASSERT_FATAL(e1.found && e2.found);
    CU_ASSERT(e1.conn_id != e2.conn_id);
    CU_ASSERT((e1.conn_id == 20 ? e1.request_id : e2.request_id) == 100);
    CU_ASSERT((e1.conn_id == 21 ? e1.request_id : e2.request_id) == 200);
    CU_ASSERT(!next(GW_ACT_EOS).found);
    /* A later GET on the closed, drained queue: EOS again, at once. */
    get(21, "q", 1, 0, 201);
    e3 = next(GW_ACT_EOS);
    CU_ASSERT(e3.found && e3.conn_id == 21 && e3.request_id == 201);
    teardown();

    /* The stream that asked is cut before the end: the end of stream is
     * the session's, and goes to a stream that is left. */
    setup(8 * MiB, 64 * KiB, false);
    session(20, 2, 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    CU_ASSERT(put(20, "q", 10, 1) == 0);
    get(20, "q", 1, 0, 100);
    d = next(GW_ACT_DELIVER);
    CU_ASSERT(settle(20, SCIMQ_PROTO_OP_ACK, d.delivery_id, 0));
    gw_broker_stream_down(b, now, 20, false, &out);
    CU_ASSERT(gw_broker_close_queue(b, now, &name, &out) == 0);
    e1 = next(GW_ACT_EOS);
    CU_ASSERT(e1.found && e1.conn_id == 21 && e1.request_id == 100);
    teardown();
}

static void
test_admission(void)
{
    struct seen d, r;
    scimq_proto_block_t blk;
    scimq_proto_frame_t f;
    struct gw_payload *pl = NULL;

    setup(1 * MiB, 64 * KiB, false);
    session(10, 1, 1);
    session(30, 1, 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    CU_ASSERT(put(10, "q", 600 * KiB, 1) == 0);
    /* Decided before anything is allocated: the producer waits. */
    CU_ASSERT(put(10, "q", 600 * KiB, 2) == SCIMQ_EAGAIN);
    CU_ASSERT(b->store.n_parked == 1);
    CU_ASSERT(gw_pool_used(&b->store.pool) == 640 * KiB);
    /* Never fits: refused. */
    f = put_frame("q", 2 * MiB, &blk);
    CU_ASSERT(gw_broker_put_begin(b, now, 10, 0, &f, &pl, &out) ==
              SCIMQ_EMSGSIZE);
    CU_ASSERT(!next(GW_ACT_RESUME).found);
    get(30, "q", 1, 0, 1);
    d = next(GW_ACT_DELIVER);
    CU_ASSERT(settle(30, SCIMQ_PROTO_OP_ACK, d.delivery_id, 0));
    r = next(GW_ACT_RESUME);
    CU_ASSERT(r.found && r.conn_id == 10);
    CU_ASSERT(b->store.n_parked == 0);
    CU_ASSERT(put(10, "q", 600 * KiB, 2) == 0);
    teardown();
}

static void
test_best_effort_streams(void)
{
    int per_conn[2] = {0, 0};

    setup(16 * MiB, 64 * KiB, false);
    session(40, 2, 1);
    declare("be", SCIMQ_PROTO_QUEUE_BEST_EFFORT, 0, NULL);
    get(40, "be", 8, ANY_BYTES, 1);
    for (int i = 0; i < 4; i++)
        CU_ASSERT(put(40, "be", MiB, (uint8_t) i) == 0);
    /* Frames are not written yet: each goes to the stream with fewer
     * bytes queued, so both streams carry them. */
    for (struct gw_action *a = out.head; a != NULL; a = a->next)
        if (a->kind == GW_ACT_DELIVER)
            per_conn[a->conn_id - 40]++;
    CU_ASSERT(per_conn[0] == 2 && per_conn[1] == 2);
    /* Gone once sent: nothing leased, the payloads wait for their pins. */
    CU_ASSERT(queue("be")->n_leased == 0 && queue("be")->n_ready == 0);
    CU_ASSERT(gw_pool_used(&b->store.pool) == 4 * MiB);
    while (next(GW_ACT_DELIVER).found)
        ;
    CU_ASSERT(gw_pool_used(&b->store.pool) == 0);
    /* Each written before the next arrives: the idle streams take turns. */
    for (int i = 0; i < 4; i++) {
        struct seen d;

        CU_ASSERT(put(40, "be", KiB, (uint8_t) i) == 0);
        d = next(GW_ACT_DELIVER);
        CU_ASSERT(d.found);
        per_conn[d.conn_id - 40]++;
    }
    CU_ASSERT(per_conn[0] == 4 && per_conn[1] == 4);
    teardown();
}

static void
test_stream_down(void)
{
    struct seen d1, d2;

    setup(8 * MiB, 64 * KiB, false);
    session(50, 2, 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    CU_ASSERT(put(50, "q", 1000, 1) == 0);
    CU_ASSERT(put(50, "q", 1000, 2) == 0);
    get(50, "q", 2, ANY_BYTES, 1);
    /* One on each stream (fewest bytes queued). */
    d1 = next(GW_ACT_DELIVER);
    d2 = next(GW_ACT_DELIVER);
    CU_ASSERT_FATAL(d1.found && d2.found && d1.conn_id != d2.conn_id);
    /* Stream 51 is cut: its delivery comes back with its credit, and
     * goes out again on the stream that is left. */
    gw_broker_stream_down(b, now, 51, false, &out);
    d1 = next(GW_ACT_DELIVER);
    CU_ASSERT(d1.found && d1.conn_id == 50 && d1.attempt == 2);
    /* The last stream goes: the session ends, everything is ready. */
    gw_broker_stream_down(b, now, 50, false, &out);
    CU_ASSERT(queue("q")->n_ready == 2 && queue("q")->n_leased == 0);
    CU_ASSERT(HASH_COUNT(b->sessions) == 0);
    teardown();
}

/* A client that closes says BYE on each stream: what came on the first
 * stream to close may be acknowledged on another afterwards; what is left
 * unsettled goes back when the session ends. */
static void
test_stream_bye(void)
{
    struct seen d1, d2, on50, on51;

    setup(8 * MiB, 64 * KiB, false);
    session(50, 2, 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    CU_ASSERT(put(50, "q", 1000, 1) == 0);
    CU_ASSERT(put(50, "q", 1000, 2) == 0);
    get(50, "q", 2, ANY_BYTES, 1);
    d1 = next(GW_ACT_DELIVER);
    d2 = next(GW_ACT_DELIVER);
    CU_ASSERT_FATAL(d1.found && d2.found && d1.conn_id != d2.conn_id);
    on50 = d1.conn_id == 50 ? d1 : d2;
    on51 = d1.conn_id == 50 ? d2 : d1;
    /* BYE on 50: its delivery stays leased, nothing goes out again. */
    gw_broker_stream_down(b, now, 50, true, &out);
    CU_ASSERT(queue("q")->n_leased == 2 && queue("q")->n_ready == 0);
    CU_ASSERT(!next(GW_ACT_DELIVER).found);
    /* Its ACK comes on 51, and counts. */
    CU_ASSERT(settle(51, SCIMQ_PROTO_OP_ACK, on50.delivery_id, 0));
    CU_ASSERT(queue("q")->c.acked == 1 && b->settlements_ignored == 0);
    /* BYE on 51 ends the session: its unsettled delivery goes back. */
    gw_broker_stream_down(b, now, 51, true, &out);
    CU_ASSERT(queue("q")->n_ready == 1 && queue("q")->n_leased == 0);
    CU_ASSERT(queue("q")->ready->id == on51.msg_id);
    CU_ASSERT(HASH_COUNT(b->sessions) == 0);
    teardown();
}

/* A spill: the payload's record without targets, appended to the
 * segments of the spill directory; read back from there. */
static void
test_spill(void)
{
    struct seen w, r, d;
    struct gw_payload *pl;
    struct gw_action job = {.kind = GW_ACT_JOURNAL_APPEND, .spill = true};

    setup(1 * MiB, 64 * KiB, true);
    session(10, 1, 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    CU_ASSERT(put(10, "q", 600 * KiB, 1) == 0);
    CU_ASSERT(put(10, "q", 600 * KiB, 2) == SCIMQ_EAGAIN);
    /* Over the high-water mark: the newest waiting payload goes out. */
    w = next(GW_ACT_JOURNAL_APPEND);
    CU_ASSERT_FATAL(w.found && w.len == 600 * KiB);
    pl = w.payload;
    CU_ASSERT(pl->journal == GW_PLJ_PENDING && pl->pins == 1);
    /* A full disk: the payload stays in memory, and no spill is tried
     * before the backoff ends. */
    job.payload = pl;
    job.len = pl->len;
    gw_broker_io_done(b, now, &job, SCIMQ_ENOSPC, &out);
    CU_ASSERT(b->store.c.spill_write_errors == 1);
    CU_ASSERT(pl->where == GW_PL_MEMORY && pl->journal == GW_PLJ_NONE);
    CU_ASSERT(pl->pins == 0);
    CU_ASSERT(!next(GW_ACT_JOURNAL_APPEND).found);
    now += GW_STORE_RETRY_MIN_MS;
    gw_broker_tick(b, now, &out);
    w = next(GW_ACT_JOURNAL_APPEND);
    CU_ASSERT_FATAL(w.found && w.payload == pl);
    job.seg = 1;
    job.off = 4096;
    job.hdr_len = 64;
    gw_broker_io_done(b, now, &job, 0, &out);
    CU_ASSERT(pl->where == GW_PL_DISK && pl->data == NULL);
    CU_ASSERT(pl->journal == GW_PLJ_DONE && pl->seg == 1 && pl->off == 4096);
    CU_ASSERT(b->store.spill_bytes == 600 * KiB);
    CU_ASSERT(b->store.segments != NULL && b->store.segments->live == 1);
    CU_ASSERT(gw_pool_used(&b->store.pool) == 0);
    CU_ASSERT(next(GW_ACT_RESUME).found);
    /* Delivered: read back from its segment into pool memory, then sent. */
    get(10, "q", 1, 0, 1);
    r = next(GW_ACT_JOURNAL_READ);
    CU_ASSERT_FATAL(r.found && r.buf != NULL && r.len == 600 * KiB);
    {
        struct gw_action rd = {.kind = GW_ACT_JOURNAL_READ, .payload = pl};

        /* A failed read is retried after a backoff; the segment stays. */
        gw_broker_io_done(b, now, &rd, SCIMQ_EIO, &out);
        CU_ASSERT(b->store.c.spill_read_errors == 1);
        CU_ASSERT(!next(GW_ACT_JOURNAL_READ).found);
        now += GW_STORE_RETRY_MIN_MS;
        gw_broker_tick(b, now, &out);
        r = next(GW_ACT_JOURNAL_READ);
        CU_ASSERT_FATAL(r.found);
        memset(r.buf, 1, r.len);
        gw_broker_io_done(b, now, &rd, 0, &out);
    }
    d = next(GW_ACT_DELIVER);
    CU_ASSERT(d.found && d.first_byte == 1 && d.attempt == 1);
    CU_ASSERT(settle(10, SCIMQ_PROTO_OP_ACK, d.delivery_id, 0));
    /* Nothing of it is left in the segment. */
    CU_ASSERT(b->store.spill_bytes == 0 && b->store.segments->live == 0);
    teardown();
}

static void
test_journal_eviction(void)
{
    struct gw_broker_settings set = {.ack_timeout_ms = 5000,
                                     .memory_limit = 1 * MiB,
                                     .chunk_size = 64 * KiB,
                                     .journal = true,
                                     .durability = GW_DURABLE_SYNC,
                                     .disk_limit = 1024 * MiB};
    struct gw_action *appends[2];
    int n = 0;

    CU_ASSERT_FATAL(gw_broker_new(&set, &b) == 0);
    out.head = out.tail = NULL;
    session(10, 1, 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    CU_ASSERT(queue("q")->durability == GW_DURABLE_SYNC);
    CU_ASSERT(put(10, "q", 600 * KiB, 1) == 0);
    /* Its record is being written: pinned, not evictable yet. */
    CU_ASSERT(put(10, "q", 600 * KiB, 2) == SCIMQ_EAGAIN);
    CU_ASSERT(b->store.n_parked == 1);
    for (struct gw_action *a = out.head; a != NULL; a = a->next)
        if (a->kind == GW_ACT_JOURNAL_APPEND && n < 2)
            appends[n++] = a;
    CU_ASSERT_FATAL(n == 1);
    appends[0]->seg = 1;
    appends[0]->off = 100;
    gw_broker_io_done(b, now, appends[0], 0, &out);
    /* Written and synced: evicted, and the producer resumed. */
    CU_ASSERT(queue("q")->ready->payload->where == GW_PL_DISK);
    CU_ASSERT(b->store.n_parked == 0);
    CU_ASSERT(next(GW_ACT_PUT_OK).found == false); /* it had no CONFIRM */
    CU_ASSERT(put(10, "q", 600 * KiB, 2) == 0);
    /* The journal ends (as at exit): its pending append gives its pin back. */
    for (struct gw_action *a; (a = gw_actions_pop(&out)) != NULL;) {
        if (a->kind == GW_ACT_JOURNAL_APPEND)
            gw_broker_io_done(b, now, a, SCIMQ_ESHUTDOWN, &out);
        gw_action_free(a);
    }
    teardown();
}

static void
test_pool(void)
{
    struct gw_pool p;
    void *small[300], *big, *big2;

    CU_ASSERT_FATAL(gw_pool_init(&p, 1 * MiB, 64 * KiB) == 0);
    CU_ASSERT(gw_pool_cost(&p, 0) == 512);
    CU_ASSERT(gw_pool_cost(&p, 32 * KiB) == 32 * KiB);
    CU_ASSERT(gw_pool_cost(&p, 33 * KiB) == 64 * KiB); /* a whole chunk */
    CU_ASSERT(gw_pool_cost(&p, 65 * KiB) == 128 * KiB);
    CU_ASSERT(gw_pool_cost(&p, 1000) == 1024);
    /* 300 slots of 1 KiB share 5 chunks. */
    for (int i = 0; i < 300; i++) {
        small[i] = gw_pool_alloc(&p, 1000);
        CU_ASSERT_FATAL(small[i] != NULL);
        memset(small[i], i, 1000);
    }
    CU_ASSERT(gw_pool_used(&p) == 5 * 64 * KiB);
    for (int i = 0; i < 300; i++)
        CU_ASSERT(((uint8_t *) small[i])[999] == (uint8_t) i);
    /* The 11 chunks after the slabs make one run; then the arena is full. */
    big = gw_pool_alloc(&p, 704 * KiB);
    CU_ASSERT_FATAL(big != NULL);
    CU_ASSERT((uint8_t *) big == p.base + 5 * 64 * KiB);
    CU_ASSERT(gw_pool_alloc(&p, 64 * KiB) == NULL);
    gw_pool_free(&p, big, 704 * KiB);
    for (int i = 0; i < 300; i++)
        gw_pool_free(&p, small[i], 1000);
    CU_ASSERT(gw_pool_used(&p) == 0);
    big = gw_pool_alloc(&p, 700 * KiB);
    CU_ASSERT_FATAL(big != NULL);
    big2 = gw_pool_alloc(&p, 400 * KiB);
    CU_ASSERT(big2 == NULL);
    gw_pool_free(&p, big, 700 * KiB);
    big2 = gw_pool_alloc(&p, MiB);
    CU_ASSERT(big2 == big); /* reused from the start of the arena */
    gw_pool_free(&p, big2, MiB);
    CU_ASSERT(gw_pool_alloc(&p, MiB + 1) == NULL);
    gw_pool_fini(&p);
}

/* QUEUE_DECLARE's durability: what it accepts, and what a PUT then asks
 * of the journal (no record, a record, a synced record). */
static int
declare_rc(const char *name, uint8_t kind, uint8_t durability)
{
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_QUEUE_DECLARE};
    uint64_t created = 0;

    f.args.declare.kind =
        (uint8_t) (kind | durability << SCIMQ_PROTO_QUEUE_DURABILITY_SHIFT);
    f.args.declare.queue = str(name);
    return gw_broker_declare(b, now, &f, &created, &out);
}

/* PUT into queue; 1 if it emitted a synced append, 0 an unsynced one, -1
 * none (and whether its PUT_OK waits for the journal). */
static int
put_append(const char *queue, bool *deferred)
{
    scimq_proto_block_t blk;
    scimq_proto_frame_t f = put_frame(queue, 4 * KiB, &blk);
    struct gw_payload *pl = NULL;
    uint64_t id = 0;
    int found = -1;

    drop_all();
    CU_ASSERT_FATAL(gw_broker_put_begin(b, now, 10, 0, &f, &pl, &out) == 0);
    memset(pl->data, 7, 4 * KiB);
    CU_ASSERT_FATAL(gw_broker_put_commit(b, now, 10, 0, &f, pl, NULL, &id,
                                         deferred, &out) == 0);
    for (struct gw_action *a; (a = gw_actions_pop(&out)) != NULL;) {
        if (a->kind == GW_ACT_JOURNAL_APPEND) {
            found = a->sync;
            gw_broker_io_done(b, now, a, SCIMQ_ESHUTDOWN, &out);
        }
        gw_action_free(a);
    }
    return found;
}

static void
test_queue_durability(void)
{
    struct gw_broker_settings set = {.ack_timeout_ms = 5000,
                                     .memory_limit = 8 * MiB,
                                     .chunk_size = 64 * KiB,
                                     .journal = true,
                                     .durability = GW_DURABLE_BATCH,
                                     .disk_limit = 1024 * MiB};
    bool deferred = true;

    CU_ASSERT_FATAL(gw_broker_new(&set, &b) == 0);
    out.head = out.tail = NULL;
    session(10, 1, 1);
    CU_ASSERT(declare_rc("dflt", SCIMQ_PROTO_QUEUE_GUARANTEED,
                         SCIMQ_PROTO_DURABILITY_DEFAULT) == 0);
    CU_ASSERT(declare_rc("mem", SCIMQ_PROTO_QUEUE_GUARANTEED,
                         SCIMQ_PROTO_DURABILITY_MEMORY) == 0);
    CU_ASSERT(declare_rc("sync", SCIMQ_PROTO_QUEUE_GUARANTEED,
                         SCIMQ_PROTO_DURABILITY_SYNC) == 0);
    CU_ASSERT(queue("dflt")->durability == GW_DURABLE_BATCH);
    CU_ASSERT(queue("mem")->durability == GW_DURABLE_MEMORY);
    CU_ASSERT(queue("sync")->durability == GW_DURABLE_SYNC);
    /* Declared again: the same durability is OK, another one is not. */
    CU_ASSERT(declare_rc("sync", SCIMQ_PROTO_QUEUE_GUARANTEED,
                         SCIMQ_PROTO_DURABILITY_SYNC) == 0);
    CU_ASSERT(declare_rc("sync", SCIMQ_PROTO_QUEUE_GUARANTEED,
                         SCIMQ_PROTO_DURABILITY_DEFAULT) == SCIMQ_EEXIST);
    CU_ASSERT(declare_rc("dflt", SCIMQ_PROTO_QUEUE_GUARANTEED,
                         SCIMQ_PROTO_DURABILITY_BATCH) == 0);
    /* Best-effort queues are never journaled; unknown values refused. */
    CU_ASSERT(declare_rc("be", SCIMQ_PROTO_QUEUE_BEST_EFFORT,
                         SCIMQ_PROTO_DURABILITY_SYNC) == SCIMQ_EINVAL);
    CU_ASSERT(declare_rc("be", SCIMQ_PROTO_QUEUE_BEST_EFFORT,
                         SCIMQ_PROTO_DURABILITY_MEMORY) == 0);
    CU_ASSERT(declare_rc("bad", 2, 0) == SCIMQ_EINVAL);
    /* What a PUT asks of the journal, per queue. */
    CU_ASSERT(put_append("mem", &deferred) == -1 && !deferred);
    CU_ASSERT(put_append("dflt", &deferred) == 0 && deferred);
    CU_ASSERT(put_append("sync", &deferred) == 1 && deferred);
    teardown();

    /* Without a journal: memory only. */
    setup(8 * MiB, 64 * KiB, false);
    CU_ASSERT(declare_rc("q", SCIMQ_PROTO_QUEUE_GUARANTEED,
                         SCIMQ_PROTO_DURABILITY_SYNC) == SCIMQ_ENOTSUP);
    CU_ASSERT(declare_rc("q", SCIMQ_PROTO_QUEUE_GUARANTEED,
                         SCIMQ_PROTO_DURABILITY_MEMORY) == 0);
    CU_ASSERT(queue("q")->durability == GW_DURABLE_MEMORY);
    teardown();
}

/* Completes every journal append in out as written into segment seg;
 * returns how many there were, and the last one's payload. */
static uint32_t last_attempt; /* of the last MSG record's first target */

static int
journal_complete(uint64_t seg, struct gw_payload **last, int *syncs)
{
    struct gw_actions todo = out;
    struct gw_action *a;
    int n = 0;

    out.head = out.tail = NULL;
    while ((a = gw_actions_pop(&todo)) != NULL) {
        if (a->kind == GW_ACT_JOURNAL_APPEND) {
            a->seg = seg;
            a->off = 4096;
            if (last != NULL)
                *last = a->payload;
            if (syncs != NULL)
                *syncs += a->sync;
            if (a->payload != NULL) {
                uint64_t body;
                uint32_t flen, crc;
                uint8_t type, format;
                struct gw_jrec r;

                CU_ASSERT_FATAL(gw_jrec_prefix(a->buf, &body, &flen, &crc,
                                               &type, &format) == 0);
                CU_ASSERT_FATAL(gw_jrec_fields(type, format,
                                               a->buf + GW_JREC_PREFIX_LEN,
                                               flen, body, &r) == 0);
                last_attempt = gw_jrec_target_at(&r, 0).attempt;
            }
            gw_broker_io_done(b, now, a, 0, &out);
            n++;
        }
        gw_action_free(a);
    }
    return n;
}

/* A message nobody consumes, in the oldest segment among settled ones:
 * compaction writes it again (synced, its attempt kept) and the old
 * segment is deleted. */
static void
test_compaction(void)
{
    struct gw_broker_settings set = {.ack_timeout_ms = 5000,
                                     .memory_limit = 8 * MiB,
                                     .chunk_size = 64 * KiB,
                                     .journal = true,
                                     .durability = GW_DURABLE_BATCH,
                                     .compact_percent = 25,
                                     .disk_limit = 1024 * MiB};
    struct gw_payload *stuck = NULL, *moved = NULL;
    uint64_t discarded = 0;
    int syncs = 0, drops = 0;
    scimq_proto_str_t busy;

    CU_ASSERT_FATAL(gw_broker_new(&set, &b) == 0);
    out.head = out.tail = NULL;
    session(10, 1, 1);
    declare("stuck", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    declare("busy", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    CU_ASSERT(put(10, "stuck", 4 * KiB, 1) == 0);
    CU_ASSERT(journal_complete(1, &stuck, NULL) == 1);
    CU_ASSERT_FATAL(stuck != NULL && stuck->seg == 1);
    queue("stuck")->ready->attempt = 2; /* delivered twice before */
    for (int i = 0; i < 10; i++)
        CU_ASSERT(put(10, "busy", 64 * KiB, 2) == 0);
    CU_ASSERT(journal_complete(1, NULL, NULL) == 10);
    CU_ASSERT(b->store.segments->live == 11);
    /* The busy queue goes: its SETTLE records land in segment 2, and
     * segment 1 is live by one 4 KiB payload of 660 KiB. */
    busy = str("busy");
    CU_ASSERT(gw_broker_delete(b, now, &busy, &discarded, &out) == 0);
    CU_ASSERT(discarded == 10);
    CU_ASSERT(b->store.segments->live == 1);
    CU_ASSERT(journal_complete(2, NULL, NULL) == 10);
    /* That event (the last completion) started the compaction. */
    CU_ASSERT(stuck->moving);
    CU_ASSERT(b->j.c.compactions == 1);
    CU_ASSERT(journal_complete(2, &moved, &syncs) == 1);
    CU_ASSERT(moved == stuck && syncs == 1 && last_attempt == 2);
    CU_ASSERT(!stuck->moving && stuck->seg == 2);
    CU_ASSERT(b->j.c.moved_payloads == 1 && b->j.c.moved_bytes == 4 * KiB);
    for (struct gw_action *a = out.head; a != NULL; a = a->next)
        drops += a->kind == GW_ACT_JOURNAL_DROP && a->seg == 1;
    CU_ASSERT(drops == 1);
    CU_ASSERT(b->store.segments->seg == 2);
    CU_ASSERT(queue("stuck")->n_ready == 1 &&
              queue("stuck")->ready->attempt == 2);
    teardown();
}

/* PUTs whose bytes have not come share a bounded part of the memory: a
 * second header waits although the pool has room, and goes on once the
 * first PUT is in; one PUT alone may take more than the share. */
static void
test_receiving_share(void)
{
    struct gw_broker_settings set = {.ack_timeout_ms = 5000,
                                     .memory_limit = 8 * MiB,
                                     .chunk_size = 64 * KiB,
                                     .max_receiving = 4 * MiB};
    scimq_proto_block_t blk1, blk2, blk3;
    scimq_proto_frame_t f1 = put_frame("q", 3 * MiB, &blk1),
                        f2 = put_frame("q", 2 * MiB, &blk2),
                        f3 = put_frame("q", 6 * MiB, &blk3);
    struct gw_payload *p1 = NULL, *p2 = NULL, *p3 = NULL;
    scimq_proto_str_t qname = str("q");
    uint64_t id = 0;
    bool deferred = false;
    struct seen r;

    CU_ASSERT_FATAL(gw_broker_new(&set, &b) == 0);
    out.head = out.tail = NULL;
    session(10, 2, 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    CU_ASSERT(gw_broker_put_begin(b, now, 10, 0, &f1, &p1, &out) == 0);
    CU_ASSERT(b->store.receiving == 3 * MiB);
    CU_ASSERT(gw_broker_put_begin(b, now, 11, 0, &f2, &p2, &out) ==
              SCIMQ_EAGAIN);
    CU_ASSERT(b->store.c.receiving_waits == 1 && b->store.n_parked == 1);
    CU_ASSERT(gw_pool_used(&b->store.pool) == 3 * MiB);
    CU_ASSERT(gw_broker_put_commit(b, now, 10, 0, &f1, p1, NULL, &id, &deferred,
                                   &out) == 0);
    CU_ASSERT(b->store.receiving == 0);
    r = next(GW_ACT_RESUME);
    CU_ASSERT(r.found && r.conn_id == 11);
    CU_ASSERT(gw_broker_put_begin(b, now, 11, 0, &f2, &p2, &out) == 0);
    gw_broker_put_abort(b, now, p2, &out);
    CU_ASSERT(b->store.receiving == 0);
    /* Alone, a PUT may be larger than the share. */
    CU_ASSERT(gw_broker_delete(b, now, &qname, &id, &out) == 0 && id == 1);
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    CU_ASSERT(gw_pool_used(&b->store.pool) == 0);
    CU_ASSERT(gw_broker_put_begin(b, now, 10, 0, &f3, &p3, &out) == 0);
    gw_broker_put_abort(b, now, p3, &out);
    teardown();
}

/*
 * Control messages (bcast.h): held until what came before is settled, one
 * copy to each consumer of version 4 and none to one of version 3, a copy
 * given back goes to the same consumer again, the data behind waits for
 * every copy, a consumer that leaves settles its copy, and the message
 * counts as acknowledged once.
 */
static void
test_control(void)
{
    struct seen d0, c1, c2, again, d1, x;
    uint64_t conn_a, conn_b;

    setup(8 * MiB, 64 * KiB, false);
    session(10, 1, 4); /* A */
    session(20, 1, 4); /* B */
    session(30, 1, 3); /* C, an older client */
    declare("q", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    get(10, "q", 10, ANY_BYTES, 1);
    get(20, "q", 10, ANY_BYTES, 2);
    get(30, "q", 10, ANY_BYTES, 3);
    CU_ASSERT(put(10, "q", 100, 0) == 0);
    CU_ASSERT(put_flags(10, "q", 50, 9, SCIMQ_PROTO_F_BROADCAST) == 0);
    CU_ASSERT(put(10, "q", 100, 1) == 0);
    d0 = next(GW_ACT_DELIVER);
    CU_ASSERT_FATAL(d0.found);
    CU_ASSERT(d0.first_byte == 0);
    /* Data 0 is not settled: the control message and data 1 wait. */
    CU_ASSERT(!next(GW_ACT_DELIVER).found);
    CU_ASSERT(queue("q")->n_ready == 2);
    CU_ASSERT(settle(d0.conn_id, SCIMQ_PROTO_OP_ACK, d0.delivery_id, 0));
    c1 = next(GW_ACT_DELIVER);
    c2 = next(GW_ACT_DELIVER);
    CU_ASSERT_FATAL(c1.found && c2.found);
    CU_ASSERT(c1.first_byte == 9 && c2.first_byte == 9);
    CU_ASSERT(c1.msg_id == c2.msg_id && c1.delivery_id != c2.delivery_id);
    CU_ASSERT((c1.conn_id == 10 && c2.conn_id == 20) ||
              (c1.conn_id == 20 && c2.conn_id == 10));
    /* Not to the version 3 consumer, and nothing else yet. */
    CU_ASSERT(!next(GW_ACT_DELIVER).found);
    conn_a = c1.conn_id == 10 ? c1.delivery_id : c2.delivery_id;
    conn_b = c1.conn_id == 20 ? c1.delivery_id : c2.delivery_id;
    /* A gives its copy back: it comes to A again. */
    CU_ASSERT(settle(10, SCIMQ_PROTO_OP_NACK, conn_a, 1));
    again = next(GW_ACT_DELIVER);
    CU_ASSERT_FATAL(again.found);
    CU_ASSERT(again.conn_id == 10 && again.first_byte == 9);
    CU_ASSERT(again.attempt == 2);
    CU_ASSERT(!next(GW_ACT_DELIVER).found);
    /* B settles; A's copy is still out: data 1 waits. */
    CU_ASSERT(settle(20, SCIMQ_PROTO_OP_ACK, conn_b, 0));
    CU_ASSERT(!next(GW_ACT_DELIVER).found);
    CU_ASSERT(queue("q")->c.acked == 1);
    /* A leaves without settling: its copy is settled for it. */
    gw_broker_stream_down(b, now, 10, false, &out);
    d1 = next(GW_ACT_DELIVER);
    CU_ASSERT_FATAL(d1.found);
    CU_ASSERT(d1.first_byte == 1 && d1.conn_id != 10);
    CU_ASSERT(queue("q")->c.acked == 2); /* data 0 and the control once */
    CU_ASSERT(queue("q")->bc_msg == NULL && queue("q")->bc_left == 0);
    CU_ASSERT(settle(d1.conn_id, SCIMQ_PROTO_OP_ACK, d1.delivery_id, 0));
    CU_ASSERT(queue("q")->c.acked == 3);

    /* Only a version 3 consumer: nobody to give it to, settled at once,
     * and the data behind it flows. */
    declare("old", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    get(30, "old", 10, ANY_BYTES, 4);
    CU_ASSERT(put_flags(20, "old", 50, 9, SCIMQ_PROTO_F_BROADCAST) == 0);
    CU_ASSERT(put(20, "old", 100, 2) == 0);
    x = next(GW_ACT_DELIVER);
    CU_ASSERT_FATAL(x.found);
    CU_ASSERT(x.conn_id == 30 && x.first_byte == 2);
    CU_ASSERT(queue("old")->c.acked == 1);
    CU_ASSERT(!next(GW_ACT_DELIVER).found);
    CU_ASSERT(gw_pool_used(&b->store.pool) > 0);
    CU_ASSERT(settle(30, SCIMQ_PROTO_OP_ACK, x.delivery_id, 0));
    CU_ASSERT(queue("old")->n_ready == 0 && queue("old")->n_leased == 0);
    teardown();
}

/* A control message's copies on a best-effort queue are settled when sent;
 * a queue deleted during a broadcast frees everything. */
static void
test_control_best_effort_delete(void)
{
    struct seen c, d;

    setup(8 * MiB, 64 * KiB, false);
    session(10, 1, 4);
    session(20, 1, 4);
    declare("be", SCIMQ_PROTO_QUEUE_BEST_EFFORT, 0, NULL);
    get(10, "be", 10, ANY_BYTES, 1);
    CU_ASSERT(put_flags(20, "be", 50, 9, SCIMQ_PROTO_F_BROADCAST) == 0);
    CU_ASSERT(put(20, "be", 100, 1) == 0);
    c = next(GW_ACT_DELIVER);
    d = next(GW_ACT_DELIVER);
    CU_ASSERT_FATAL(c.found && d.found);
    CU_ASSERT(c.first_byte == 9 && d.first_byte == 1);
    CU_ASSERT(queue("be")->n_ready == 0 && queue("be")->bc_msg == NULL);

    /* B subscribes without credit: its copy waits; the queue goes. */
    declare("del", SCIMQ_PROTO_QUEUE_GUARANTEED, 0, NULL);
    get(10, "del", 10, ANY_BYTES, 2);
    get(20, "del", 0, 0, 3);
    CU_ASSERT(put_flags(20, "del", 50, 9, SCIMQ_PROTO_F_BROADCAST) == 0);
    c = next(GW_ACT_DELIVER);
    CU_ASSERT_FATAL(c.found && c.conn_id == 10);
    CU_ASSERT(queue("del")->bc_left == 2);
    {
        scimq_proto_str_t name = str("del");
        uint64_t discarded = 0;

        CU_ASSERT(gw_broker_delete(b, now, &name, &discarded, &out) == 0);
        CU_ASSERT(discarded == 2); /* A's copy and the control message */
    }
    drop_all();
    CU_ASSERT(gw_pool_used(&b->store.pool) == 0);
    teardown();
}

static const struct scimq_cunit_test broker_tests[] = {
    {"lease, expiry and late ack", test_lease_expiry, 1},
    {"extend", test_extend, 1},
    {"redelivery order", test_redelivery_order, 1},
    {"credit in messages and bytes", test_credit_bytes, 1},
    {"fan-out shares one payload", test_fanout_refs, 1},
    {"dead-lettering: attempts, NACK, too large", test_dead_letter, 1},
    {"EOS on every stream, again on a later GET", test_eos_per_stream, 1},
    {"admission at the memory limit", test_admission, 1},
    {"best-effort over all streams", test_best_effort_streams, 1},
    {"stream and session down", test_stream_down, 1},
    {"BYE on one stream, ACK on another", test_stream_bye, 1},
    {"spill, spill errors and backoff", test_spill, 1},
    {"journal: eviction resumes producers", test_journal_eviction, 1},
    {"durability per queue", test_queue_durability, 1},
    {"PUTs being received share memory", test_receiving_share, 1},
    {"journal compaction", test_compaction, 1},
    {"payload pool", test_pool, 1},
    {"control messages: order, copies, versions", test_control, 1},
    {"control messages: best-effort, queue deleted",
     test_control_best_effort_delete, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_suite suites[] = {
    {"broker", NULL, NULL, broker_tests}, {NULL, NULL, NULL, NULL}};

SCIMQ_CUNIT_MAIN(suites)
