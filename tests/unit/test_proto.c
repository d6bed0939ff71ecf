/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the SciMP wire protocol library: CRC32C, the frame encoder
 * and the incremental decoder.  Every test asserts exact outcomes (bytes,
 * counts and error codes) because peers, fuzzers and doc/scimp.md rely on
 * the decoder reporting the same first error for the same input.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <scimq/error.h>
#include <scimq/proto.h>

#include "cunit_main.h"
#include "protocol/wire.h"

/* ======================================================================== */
/* Helpers: frames with non-trivial contents                                 */
/* ======================================================================== */

/* A string argument from a literal; the length excludes the NUL. */
#define STR(s)                                                                 \
    (scimq_proto_str_t)                                                        \
    {                                                                          \
        (s), (uint16_t) (sizeof(s) - 1)                                        \
    }

/* Sizes of the test blocks: the middle one has no name, the last no data. */
#define BLOCK0_LEN 100u
#define BLOCK1_LEN 7u
#define TEST_BLOCKS 3u

static uint8_t block0_data[BLOCK0_LEN];
static uint8_t block1_data[BLOCK1_LEN];

/*
 * Fills a byte array with a pattern that differs per position and per seed,
 * so a misplaced or swapped byte never compares equal by accident.
 */
static void
pattern_fill(uint8_t *p, size_t len, unsigned int seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t) (i * 31u + seed * 7u + 1u);
}

/*
 * One fill function per args union member (named as in the opcode map),
 * with every byte of every integer distinct so byte order mistakes show.
 */
static void
fill_none(scimq_proto_args_t *a)
{
    (void) a;
}

static void
fill_hello(scimq_proto_args_t *a)
{
    a->hello.version_min = 1;
    a->hello.version_max = 3;
    a->hello.stream_index = 0x0102;
    a->hello.stream_count = 0x0203;
    a->hello.features = 0x0123456789ABCDEFull;
    pattern_fill(a->hello.session_id, sizeof(a->hello.session_id), 1);
    a->hello.client_name = STR("client-\x01\xff");
}

static void
fill_welcome(scimq_proto_args_t *a)
{
    a->welcome.version = 0xA5;
    a->welcome.auth_required = 1;
    a->welcome.stream_index = 0xBEEF;
    a->welcome.max_payload = 0xFEDCBA9876543210ull;
    pattern_fill(a->welcome.session_id, sizeof(a->welcome.session_id), 2);
    pattern_fill(a->welcome.nonce, sizeof(a->welcome.nonce), 3);
    a->welcome.server_name = STR("gateway-0");
}

static void
fill_auth(scimq_proto_args_t *a)
{
    pattern_fill(a->auth.mac, sizeof(a->auth.mac), 4);
}

static void
fill_ok(scimq_proto_args_t *a)
{
    a->ok.value = 0x8877665544332211ull;
}

static void
fill_error(scimq_proto_args_t *a)
{
    a->error.code = SCIMQ_EPROTO_ARGS;
    a->error.text = STR("malformed operation arguments");
}

static void
fill_ping(scimq_proto_args_t *a)
{
    a->ping.timestamp_ns = 0x1122334455667788ull;
}

static void
fill_queue(scimq_proto_args_t *a)
{
    a->queue.queue = STR("queue.alpha");
}

static void
fill_put_ok(scimq_proto_args_t *a)
{
    a->put_ok.msg_id = 0xF0E1D2C3B4A59687ull;
}

static void
fill_get(scimq_proto_args_t *a)
{
    a->get.credit_msgs = 0x89ABCDEFu;
    a->get.credit_bytes = 0x0F1E2D3C4B5A6978ull;
    a->get.queue = STR("get-queue");
}

static void
fill_deliver(scimq_proto_args_t *a)
{
    a->deliver.delivery_id = 0x1020304050607080ull;
    a->deliver.msg_id = 0x8070605040302010ull;
    a->deliver.attempt = 0xA1B2C3D4u;
    a->deliver.queue = STR("dq");
}

static void
fill_ack(scimq_proto_args_t *a)
{
    a->ack.delivery_id = 0x0A0B0C0D0E0F1011ull;
}

static void
fill_limit(scimq_proto_args_t *a)
{
    a->limit.max_message = 0x0123456789ABCDEFull ^ 0xFF00FF00FF00FF00ull;
    a->limit.queue = STR("limited.queue");
}

static void
fill_nack(scimq_proto_args_t *a)
{
    a->nack.delivery_id = 0x1112131415161718ull;
    a->nack.delay_ms = 0x01020304u;
    a->nack.requeue = 1;
}

static void
fill_extend(scimq_proto_args_t *a)
{
    a->extend.delivery_id = 0x2122232425262728ull;
    a->extend.lease_ms = 0xC0FFEE01u;
}

static void
fill_declare(scimq_proto_args_t *a)
{
    a->declare.kind = SCIMQ_PROTO_QUEUE_BEST_EFFORT;
    a->declare.ack_timeout_ms = 0x00112233u;
    a->declare.max_attempts = 0x44556677u;
    a->declare.max_bytes = 0x8899AABBCCDDEEFFull;
    a->declare.queue = STR("declared");
    a->declare.dead_letter = STR("dead.letters");
}

static void
fill_pair(scimq_proto_args_t *a)
{
    a->pair.queue = STR("source");
    a->pair.target = STR("target-queue");
}

static void
fill_move(scimq_proto_args_t *a)
{
    a->move.max_msgs = 0x3132333435363738ull;
    a->move.queue = STR("from");
    a->move.target = STR("to-queue");
}

/* REPORT (40): the frame carries the body as a string; its own codec is
 * tested in tests/ops/test_jobs.c. */
static void
fill_report(scimq_proto_args_t *a)
{
    a->report.body = STR("\x01 a report body");
}

/* Ranges with a gap; the last ends at 2^64 - 1 (the largest id). */
static const scimq_proto_range_t fill_ranges[3] = {
    {1, 64}, {100, 1}, {UINT64_MAX - 9, 10}};

static void
fill_ack_range(scimq_proto_args_t *a)
{
    a->ack_range.ranges.list = fill_ranges;
    a->ack_range.ranges.n = 3;
}

static void
fill_nack_range(scimq_proto_args_t *a)
{
    a->nack_range.delay_ms = 250;
    a->nack_range.requeue = 1;
    a->nack_range.ranges.list = fill_ranges;
    a->nack_range.ranges.n = 3;
}

static void
fill_put_ok_range(scimq_proto_args_t *a)
{
    a->put_ok_range.count = 4096;
    a->put_ok_range.msg_id = UINT64_C(0x0123456789abcdef);
}

static void
fill_args(unsigned int op, scimq_proto_args_t *a)
{
    memset(a, 0, sizeof(*a));
    switch (op) {
#define FILL_CASE(name, num, kind, blocks)                                     \
    case num:                                                                  \
        fill_##kind(a);                                                        \
        break;
        SCIMQ_PROTO_OPCODE_MAP(FILL_CASE)
#undef FILL_CASE
    default:
        break;
    }
}

/* Checks that a decoded string has the expected length and bytes. */
static void
check_str(const scimq_proto_str_t *want, const scimq_proto_str_t *got)
{
    CU_ASSERT_EQUAL(got->len, want->len);
    if (got->len == want->len && want->len > 0) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(got->ptr);
        CU_ASSERT_EQUAL(memcmp(got->ptr, want->ptr, want->len), 0);
    }
}

/* One comparison function per args union member, field by field. */
static void
check_none(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    (void) w;
    (void) g;
}

static void
check_hello(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->hello.version_min, w->hello.version_min);
    CU_ASSERT_EQUAL(g->hello.version_max, w->hello.version_max);
    CU_ASSERT_EQUAL(g->hello.stream_index, w->hello.stream_index);
    CU_ASSERT_EQUAL(g->hello.stream_count, w->hello.stream_count);
    CU_ASSERT_EQUAL(g->hello.features, w->hello.features);
    CU_ASSERT_EQUAL(memcmp(g->hello.session_id, w->hello.session_id,
                           sizeof(w->hello.session_id)),
                    0);
    check_str(&w->hello.client_name, &g->hello.client_name);
}

static void
check_welcome(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->welcome.version, w->welcome.version);
    CU_ASSERT_EQUAL(g->welcome.auth_required, w->welcome.auth_required);
    CU_ASSERT_EQUAL(g->welcome.stream_index, w->welcome.stream_index);
    CU_ASSERT_EQUAL(g->welcome.max_payload, w->welcome.max_payload);
    CU_ASSERT_EQUAL(memcmp(g->welcome.session_id, w->welcome.session_id,
                           sizeof(w->welcome.session_id)),
                    0);
    CU_ASSERT_EQUAL(
        memcmp(g->welcome.nonce, w->welcome.nonce, sizeof(w->welcome.nonce)),
        0);
    check_str(&w->welcome.server_name, &g->welcome.server_name);
}

static void
check_auth(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(memcmp(g->auth.mac, w->auth.mac, sizeof(w->auth.mac)), 0);
}

static void
check_ok(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->ok.value, w->ok.value);
}

static void
check_error(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->error.code, w->error.code);
    check_str(&w->error.text, &g->error.text);
}

static void
check_ping(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->ping.timestamp_ns, w->ping.timestamp_ns);
}

static void
check_queue(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    check_str(&w->queue.queue, &g->queue.queue);
}

static void
check_put_ok(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->put_ok.msg_id, w->put_ok.msg_id);
}

static void
check_get(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->get.credit_msgs, w->get.credit_msgs);
    CU_ASSERT_EQUAL(g->get.credit_bytes, w->get.credit_bytes);
    check_str(&w->get.queue, &g->get.queue);
}

static void
check_deliver(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->deliver.delivery_id, w->deliver.delivery_id);
    CU_ASSERT_EQUAL(g->deliver.msg_id, w->deliver.msg_id);
    CU_ASSERT_EQUAL(g->deliver.attempt, w->deliver.attempt);
    check_str(&w->deliver.queue, &g->deliver.queue);
}

static void
check_ack(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->ack.delivery_id, w->ack.delivery_id);
}

static void
check_limit(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->limit.max_message, w->limit.max_message);
    check_str(&w->limit.queue, &g->limit.queue);
}

static void
check_nack(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->nack.delivery_id, w->nack.delivery_id);
    CU_ASSERT_EQUAL(g->nack.delay_ms, w->nack.delay_ms);
    CU_ASSERT_EQUAL(g->nack.requeue, w->nack.requeue);
}

static void
check_extend(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->extend.delivery_id, w->extend.delivery_id);
    CU_ASSERT_EQUAL(g->extend.lease_ms, w->extend.lease_ms);
}

static void
check_declare(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->declare.kind, w->declare.kind);
    CU_ASSERT_EQUAL(g->declare.ack_timeout_ms, w->declare.ack_timeout_ms);
    CU_ASSERT_EQUAL(g->declare.max_attempts, w->declare.max_attempts);
    CU_ASSERT_EQUAL(g->declare.max_bytes, w->declare.max_bytes);
    check_str(&w->declare.queue, &g->declare.queue);
    check_str(&w->declare.dead_letter, &g->declare.dead_letter);
}

static void
check_pair(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    check_str(&w->pair.queue, &g->pair.queue);
    check_str(&w->pair.target, &g->pair.target);
}

static void
check_move(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->move.max_msgs, w->move.max_msgs);
    check_str(&w->move.queue, &g->move.queue);
    check_str(&w->move.target, &g->move.target);
}

static void
check_report(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    check_str(&w->report.body, &g->report.body);
}

static void
check_ranges(const scimq_proto_ranges_t *w, const scimq_proto_ranges_t *g)
{
    CU_ASSERT_EQUAL(g->n, w->n);
    CU_ASSERT_PTR_NULL(g->list); /* decoded: read from the wire bytes */
    for (unsigned int i = 0; i < w->n && i < g->n; i++) {
        scimq_proto_range_t a = scimq_proto_range_at(w, i);
        scimq_proto_range_t b = scimq_proto_range_at(g, i);

        CU_ASSERT_EQUAL(a.first, b.first);
        CU_ASSERT_EQUAL(a.count, b.count);
    }
}

static void
check_ack_range(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    check_ranges(&w->ack_range.ranges, &g->ack_range.ranges);
}

static void
check_nack_range(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->nack_range.delay_ms, w->nack_range.delay_ms);
    CU_ASSERT_EQUAL(g->nack_range.requeue, w->nack_range.requeue);
    check_ranges(&w->nack_range.ranges, &g->nack_range.ranges);
}

static void
check_put_ok_range(const scimq_proto_args_t *w, const scimq_proto_args_t *g)
{
    CU_ASSERT_EQUAL(g->put_ok_range.count, w->put_ok_range.count);
    CU_ASSERT_EQUAL(g->put_ok_range.msg_id, w->put_ok_range.msg_id);
}

static void
check_args(unsigned int op, const scimq_proto_args_t *w,
           const scimq_proto_args_t *g)
{
    switch (op) {
#define CHECK_CASE(name, num, kind, blocks)                                    \
    case num:                                                                  \
        check_##kind(w, g);                                                    \
        break;
        SCIMQ_PROTO_OPCODE_MAP(CHECK_CASE)
#undef CHECK_CASE
    default:
        CU_FAIL("opcode without an args comparison");
        break;
    }
}

/*
 * Builds a frame of opcode op with non-trivial args and, for opcodes that
 * carry blocks, three blocks: a named one with data, one without a name,
 * and a named one without data.  blocks must hold TEST_BLOCKS entries.
 */
static void
build_frame(unsigned int op, uint16_t flags, scimq_proto_frame_t *f,
            scimq_proto_block_t *blocks)
{
    memset(f, 0, sizeof(*f));
    f->opcode = (uint8_t) op;
    f->flags = flags;
    f->request_id = 0x0102030405060708ull ^ ((uint64_t) op << 56);
    fill_args(op, &f->args);
    if (!scimq_proto_opcode_has_blocks(op))
        return;

    pattern_fill(block0_data, sizeof(block0_data), op);
    pattern_fill(block1_data, sizeof(block1_data), op + 1);
    blocks[0] = (scimq_proto_block_t){"alpha", 5, block0_data, BLOCK0_LEN};
    blocks[1] = (scimq_proto_block_t){NULL, 0, block1_data, BLOCK1_LEN};
    blocks[2] = (scimq_proto_block_t){"empty", 5, NULL, 0};
    f->blocks = blocks;
    f->block_count = TEST_BLOCKS;
}

/* Sum of the block lengths of a frame built in memory. */
static uint64_t
frame_payload_len(const scimq_proto_frame_t *f)
{
    uint64_t sum = 0;

    for (uint32_t i = 0; i < f->block_count; i++)
        sum += f->blocks[i].len;
    return sum;
}

/* Compares a decoded frame with the frame that was encoded. */
static void
check_frame(const scimq_proto_frame_t *want, const scimq_proto_frame_t *got)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    CU_ASSERT_EQUAL(got->version, SCIMQ_PROTO_FRAME_VERSION);
    CU_ASSERT_EQUAL(got->opcode, want->opcode);
    CU_ASSERT_EQUAL(got->flags, want->flags);
    CU_ASSERT_EQUAL(got->request_id, want->request_id);
    CU_ASSERT_EQUAL(got->payload_len, frame_payload_len(want));
    check_args(want->opcode, &want->args, &got->args);
    CU_ASSERT_EQUAL_FATAL(got->block_count, want->block_count);
    if (want->block_count == 0) {
        CU_ASSERT_PTR_NULL(got->blocks);
    }
    for (uint32_t i = 0; i < want->block_count; i++) {
        const scimq_proto_block_t *w = &want->blocks[i];
        const scimq_proto_block_t *g = &got->blocks[i];

        CU_ASSERT_EQUAL(g->name_len, w->name_len);
        if (w->name_len == 0) {
            CU_ASSERT_PTR_NULL(g->name);
        } else if (g->name_len == w->name_len) {
            CU_ASSERT_EQUAL(memcmp(g->name, w->name, w->name_len), 0);
        }
        CU_ASSERT_EQUAL(g->len, w->len);
        if (w->len > 0 && g->len == w->len) {
            CU_ASSERT_PTR_NOT_NULL_FATAL(g->data);
            CU_ASSERT_EQUAL(memcmp(g->data, w->data, (size_t) w->len), 0);
        }
    }
}

/* Encodes f into a malloc'd buffer, asserting success. */
static uint8_t *
encode(const scimq_proto_frame_t *f, size_t *len_p)
{
    uint8_t *buf = NULL;
    int rc = scimq_proto_encode_alloc(f, &buf, len_p);

    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    return buf;
}

/* Creates a decoder with lim (NULL: defaults), asserting success. */
static scimq_proto_decoder_t *
decoder_new(const scimq_proto_limits_t *lim)
{
    scimq_proto_decoder_t *dec = NULL;
    int rc = scimq_proto_decoder_create(lim, &dec);

    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dec);
    return dec;
}

/* ======================================================================== */
/* Helpers: feeding a decoder                                                */
/* ======================================================================== */

/* The three ways a connection can hand bytes to the decoder. */
enum feed_style {
    FEED_WHOLE, /* one scimq_proto_decoder_feed() of all bytes available */
    FEED_BYTES, /* one byte per scimq_proto_decoder_feed() call */
    FEED_IOV    /* _iov() + copy into the iovecs + _advance(), as readv() */
};

static const enum feed_style all_styles[] = {FEED_WHOLE, FEED_BYTES, FEED_IOV};
#define N_STYLES (sizeof(all_styles) / sizeof(all_styles[0]))

/* How to run the decoder over a buffer, and what happened. */
struct decode_run {
    enum feed_style style;
    void *payload;        /* caller's payload buffer; NULL: alloc_payload */
    uint64_t payload_cap; /* its size */
    size_t used;          /* out: bytes consumed */
    unsigned int header_ready; /* out: HEADER_READY events seen */
};

/*
 * Plays the part of readv(): asks the decoder where the bytes go, copies
 * as many as are available there, and reports them.  The iovecs must never
 * ask for more than need(), or a read could swallow the next frame.
 */
static int
feed_iov(scimq_proto_decoder_t *dec, const uint8_t *in, size_t len,
         size_t *used_p)
{
    struct iovec iov[4];
    uint64_t need = scimq_proto_decoder_need(dec), total = 0;
    size_t niov = scimq_proto_decoder_iov(dec, iov, 4), copied = 0;

    for (size_t i = 0; i < niov; i++)
        total += iov[i].iov_len;
    if (niov > 0) {
        CU_ASSERT(total <= need);
    }
    for (size_t i = 0; i < niov && copied < len; i++) {
        size_t k =
            len - copied < iov[i].iov_len ? len - copied : iov[i].iov_len;

        memcpy(iov[i].iov_base, in + copied, k);
        copied += k;
    }
    *used_p = copied;
    return scimq_proto_decoder_advance(dec, copied);
}

/*
 * Runs the decoder over buf until a frame is done, an error occurs or the
 * bytes run out (then NEED_MORE).  At HEADER_READY the payload goes to the
 * caller's buffer, or to one the decoder allocates.  Returns the last
 * event or error.
 */
static int
decode_run(scimq_proto_decoder_t *dec, const uint8_t *buf, size_t len,
           struct decode_run *r)
{
    int rc = SCIMQ_PROTO_NEED_MORE;

    r->used = 0;
    r->header_ready = 0;
    while (r->used < len) {
        size_t n = 0;

        switch (r->style) {
        case FEED_WHOLE:
            rc =
                scimq_proto_decoder_feed(dec, buf + r->used, len - r->used, &n);
            break;
        case FEED_BYTES:
            rc = scimq_proto_decoder_feed(dec, buf + r->used, 1, &n);
            break;
        case FEED_IOV:
        default:
            rc = feed_iov(dec, buf + r->used, len - r->used, &n);
            break;
        }
        r->used += n;
        if (rc == SCIMQ_PROTO_HEADER_READY) {
            int prc;

            r->header_ready++;
            if (r->payload != NULL)
                prc = scimq_proto_decoder_set_payload(dec, r->payload,
                                                      r->payload_cap);
            else
                prc = scimq_proto_decoder_alloc_payload(dec);
            CU_ASSERT_EQUAL(prc, 0);
            if (prc != 0)
                return prc;
            rc = SCIMQ_PROTO_NEED_MORE;
            continue;
        }
        if (rc != SCIMQ_PROTO_NEED_MORE)
            break;
        if (n == 0) {
            /* No progress without an event would loop forever. */
            CU_FAIL("decoder consumed nothing and reported nothing");
            break;
        }
    }
    return rc;
}

/* decode_run() with a given style and a decoder-allocated payload. */
static int
decode_simple(scimq_proto_decoder_t *dec, const uint8_t *buf, size_t len,
              enum feed_style style, size_t *used_p)
{
    struct decode_run r = {style, NULL, 0, 0, 0};
    int rc = decode_run(dec, buf, len, &r);

    if (used_p != NULL)
        *used_p = r.used;
    return rc;
}

/*
 * Encodes the test frame of opcode op, decodes it in the given style and
 * compares every field.  FEED_IOV decodes the payload zero-copy into a
 * buffer of the test's own; the other styles let the decoder allocate it.
 */
static void
round_trip(unsigned int op, uint16_t flags, enum feed_style style)
{
    scimq_proto_block_t blocks[TEST_BLOCKS];
    scimq_proto_frame_t f;
    scimq_proto_decoder_t *dec;
    struct decode_run r = {style, NULL, 0, 0, 0};
    const scimq_proto_frame_t *got;
    uint64_t payload_len;
    uint8_t *buf, *caller = NULL;
    size_t len;
    int rc;

    build_frame(op, flags, &f, blocks);
    payload_len = frame_payload_len(&f);
    buf = encode(&f, &len);
    dec = decoder_new(NULL);
    if (style == FEED_IOV) {
        caller = malloc((size_t) payload_len + 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(caller);
        r.payload = caller;
        r.payload_cap = payload_len;
    }

    rc = decode_run(dec, buf, len, &r);
    CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_FRAME_DONE);
    CU_ASSERT_EQUAL(r.used, len);
    /* HEADER_READY is only reported when there is a payload to place. */
    CU_ASSERT_EQUAL(r.header_ready, payload_len > 0 ? 1u : 0u);
    CU_ASSERT_TRUE(scimq_proto_decoder_idle(dec));
    got = scimq_proto_decoder_frame(dec);
    check_frame(&f, got);
    if (caller != NULL && got != NULL) {
        for (uint32_t i = 0; i < got->block_count; i++) {
            const uint8_t *d = got->blocks[i].data;

            /* Zero copy: the blocks are views of the caller's buffer. */
            CU_ASSERT(d >= caller &&
                      d + got->blocks[i].len <= caller + payload_len);
        }
    }
    scimq_proto_decoder_destroy(dec);
    free(caller);
    free(buf);
}

/* ======================================================================== */
/* CRC32C, golden frame, round trip of every opcode                          */
/* ======================================================================== */

static void
test_crc32c(void)
{
    static const char digits[] = "123456789";
    uint32_t half;

    CU_ASSERT_EQUAL(scimq_proto_crc32c(0, digits, 9), 0xE3069283u);
    /* Chaining: the CRC of the halves equals the CRC of the whole. */
    half = scimq_proto_crc32c(0, digits, 4);
    CU_ASSERT_EQUAL(scimq_proto_crc32c(half, digits + 4, 5), 0xE3069283u);
    for (size_t cut = 0; cut <= 9; cut++) {
        half = scimq_proto_crc32c(0, digits, cut);
        CU_ASSERT_EQUAL(scimq_proto_crc32c(half, digits + cut, 9 - cut),
                        0xE3069283u);
    }
    /* No bytes leave the CRC unchanged, whatever it was. */
    CU_ASSERT_EQUAL(scimq_proto_crc32c(0, "", 0), 0u);
    CU_ASSERT_EQUAL(scimq_proto_crc32c(0xE3069283u, "", 0), 0xE3069283u);
    CU_ASSERT_EQUAL(scimq_proto_crc32c(0x12345678u, NULL, 0), 0x12345678u);
}

/* doc/scimp.md, section 9.1. */
static const uint8_t golden_ping[48] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x06, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04,
    0x05, 0x06, 0x07, 0x08, 0x00, 0x00, 0x00, 0x30, 0x00, 0x08, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xe9, 0x2b, 0xfe, 0xd4, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};

/* The golden PING of the specification, as a frame in memory. */
static void
golden_ping_frame(scimq_proto_frame_t *f)
{
    memset(f, 0, sizeof(*f));
    f->opcode = SCIMQ_PROTO_OP_PING;
    f->request_id = 0x0102030405060708ull;
    f->args.ping.timestamp_ns = 0x1122334455667788ull;
}

static void
test_golden_ping(void)
{
    scimq_proto_frame_t f;
    scimq_proto_decoder_t *dec;
    const scimq_proto_frame_t *got;
    uint8_t *buf;
    size_t len, used;
    int rc;

    golden_ping_frame(&f);
    buf = encode(&f, &len);
    CU_ASSERT_EQUAL_FATAL(len, sizeof(golden_ping));
    CU_ASSERT_EQUAL(memcmp(buf, golden_ping, sizeof(golden_ping)), 0);
    free(buf);

    /* The vector decodes back, in a single event, with no payload. */
    dec = decoder_new(NULL);
    rc = scimq_proto_decoder_feed(dec, golden_ping, sizeof(golden_ping), &used);
    CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_FRAME_DONE);
    CU_ASSERT_EQUAL(used, sizeof(golden_ping));
    got = scimq_proto_decoder_frame(dec);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    CU_ASSERT_EQUAL(got->opcode, SCIMQ_PROTO_OP_PING);
    CU_ASSERT_EQUAL(got->flags, 0);
    CU_ASSERT_EQUAL(got->request_id, 0x0102030405060708ull);
    CU_ASSERT_EQUAL(got->args.ping.timestamp_ns, 0x1122334455667788ull);
    CU_ASSERT_EQUAL(got->block_count, 0);
    CU_ASSERT_EQUAL(got->payload_len, 0);
    scimq_proto_decoder_destroy(dec);
}

static void
test_opcode_table(void)
{
    unsigned int known = 0;

    CU_ASSERT_STRING_EQUAL(scimq_proto_opcode_name(SCIMQ_PROTO_OP_PUT), "PUT");
    CU_ASSERT_STRING_EQUAL(scimq_proto_opcode_name(SCIMQ_PROTO_OP_STATS),
                           "STATS");
    CU_ASSERT_PTR_NULL(scimq_proto_opcode_name(0));
    CU_ASSERT_PTR_NULL(scimq_proto_opcode_name(9));
    CU_ASSERT_EQUAL(SCIMQ_PROTO_OP_LIMIT, 24);
    CU_ASSERT_STRING_EQUAL(scimq_proto_opcode_name(SCIMQ_PROTO_OP_LIMIT),
                           "LIMIT");
    CU_ASSERT_FALSE(scimq_proto_opcode_has_blocks(SCIMQ_PROTO_OP_LIMIT));
    /* Session version 3: the range frames 25-27; 28-31 stay free. */
    CU_ASSERT_EQUAL(SCIMQ_PROTO_OP_ACK_RANGE, 25);
    CU_ASSERT_EQUAL(SCIMQ_PROTO_OP_NACK_RANGE, 26);
    CU_ASSERT_EQUAL(SCIMQ_PROTO_OP_PUT_OK_RANGE, 27);
    CU_ASSERT_STRING_EQUAL(scimq_proto_opcode_name(27), "PUT_OK_RANGE");
    CU_ASSERT_FALSE(scimq_proto_opcode_has_blocks(SCIMQ_PROTO_OP_ACK_RANGE));
    CU_ASSERT_PTR_NULL(scimq_proto_opcode_name(28));
    /* Session versions 2 and 3 keep the frame layout of version 1. */
    CU_ASSERT_EQUAL(SCIMQ_PROTO_FRAME_VERSION, 1);
    CU_ASSERT_EQUAL(SCIMQ_PROTO_SESSION_VERSION_MIN, 1);
    CU_ASSERT_EQUAL(SCIMQ_PROTO_SESSION_VERSION_MAX, 4);
    CU_ASSERT_EQUAL(SCIMQ_PROTO_SESSION_VERSION_CONTROL, 4);
    CU_ASSERT_EQUAL(SCIMQ_PROTO_F_BROADCAST, 0x0004);
    CU_ASSERT_PTR_NULL(scimq_proto_opcode_name(255));
    CU_ASSERT_PTR_NULL(scimq_proto_opcode_name(256));
    CU_ASSERT_PTR_NULL(scimq_proto_opcode_name(0x110));
    for (unsigned int op = 0; op <= 256; op++) {
        if (scimq_proto_opcode_name(op) != NULL)
            known++;
    }
    CU_ASSERT_EQUAL(known, 29);
    /* Only OK, PUT and DELIVER carry blocks. */
    CU_ASSERT_TRUE(scimq_proto_opcode_has_blocks(SCIMQ_PROTO_OP_OK));
    CU_ASSERT_TRUE(scimq_proto_opcode_has_blocks(SCIMQ_PROTO_OP_PUT));
    CU_ASSERT_TRUE(scimq_proto_opcode_has_blocks(SCIMQ_PROTO_OP_DELIVER));
    CU_ASSERT_FALSE(scimq_proto_opcode_has_blocks(SCIMQ_PROTO_OP_EOS));
    CU_ASSERT_FALSE(scimq_proto_opcode_has_blocks(SCIMQ_PROTO_OP_PING));
    CU_ASSERT_FALSE(scimq_proto_opcode_has_blocks(0));
}

static void
test_roundtrip_all(void)
{
    unsigned int tested = 0;

    for (unsigned int op = 1; op <= 255; op++) {
        if (scimq_proto_opcode_name(op) == NULL)
            continue;
        round_trip(op, 0, FEED_WHOLE);
        tested++;
    }
    CU_ASSERT_EQUAL(tested, 29);
}

/* ======================================================================== */
/* Test vectors of doc/scimp.md, sections 9.2 to 9.4                         */
/* ======================================================================== */

/* The frames, byte for byte as the specification lists them. */
static const uint8_t vec_put_synth[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x10, 0x00, 0x03, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x3e, 0x00, 0x06,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0c, 0x5d, 0xdb, 0x7e, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x04, 0x64, 0x65,
    0x6d, 0x6f, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x20, 0x64, 0x61, 0x74, 0x61, 0x53, 0x43, 0x49, 0x4d,
    0x51, 0x53, 0x59, 0x4e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00,
    0x00, 0x00, 0xb5, 0xb4, 0xbe, 0x98, 0x9d, 0x9b, 0xfa, 0x72};
static const uint8_t vec_error[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x3e, 0x00, 0x16,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x85, 0x62, 0xbc, 0x6b, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xfe,
    0x00, 0x10, 0x6e, 0x6f, 0x20, 0x73, 0x75, 0x63, 0x68, 0x20, 0x71,
    0x75, 0x65, 0x75, 0x65, 0x3a, 0x20, 0x71};
static const uint8_t vec_bye[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x28,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd4, 0xa1,
    0x6b, 0x33, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
static const uint8_t vec_ping_sum[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x06, 0x00, 0x01, 0x01, 0x02, 0x03,
    0x04, 0x05, 0x06, 0x07, 0x08, 0x00, 0x00, 0x00, 0x30, 0x00, 0x08,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x50, 0xc2, 0x1b, 0x24, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x11, 0x22, 0x33, 0x44,
    0x55, 0x66, 0x77, 0x88, 0x00, 0x00, 0x00, 0x00};
static const uint8_t vec_get[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x3a, 0x00, 0x12, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xf8, 0xb5, 0x23, 0x16, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x10, 0x00, 0x00, 0x00, 0x04, 0x64, 0x65, 0x6d, 0x6f};
static const uint8_t vec_ok_json[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x40, 0x00, 0x08,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x75, 0x2b, 0x7f, 0xa6, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x02, 0x6a, 0x73, 0x6f, 0x6e, 0x7b, 0x7d};
static const uint8_t vec_put_two[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x10, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x47, 0x00, 0x03, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x02, 0xee, 0x88, 0x98, 0x92, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x05, 0x00, 0x01, 0x71, 0x00, 0x00, 0x00, 0x04, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x6d, 0x65, 0x74, 0x61, 0x61,
    0x62, 0x78, 0x79, 0x7a, 0xd7, 0x39, 0x65, 0x72};
static const uint8_t vec_hello[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x4c, 0x00, 0x24,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd4, 0xde, 0xf4, 0x0d, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00,
    0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x64, 0x65, 0x74, 0x30};
static const uint8_t vec_welcome[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x68, 0x00, 0x40, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x0e, 0xbe, 0xf2, 0x19, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x40, 0x00, 0x00, 0x00, 0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
    0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf, 0x00, 0x01, 0x02, 0x03,
    0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b,
    0x1c, 0x1d, 0x1e, 0x1f, 0x00, 0x02, 0x67, 0x77};
static const uint8_t vec_auth[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x48, 0x00, 0x20, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x94, 0x65, 0xfc, 0x58, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x02, 0xc2, 0xa9, 0xc2, 0x7c, 0x84, 0x14, 0xe5,
    0xa9, 0x9c, 0x70, 0x49, 0xa4, 0xd8, 0x22, 0x4e, 0xb2, 0xb2, 0xf4, 0xc5,
    0xf9, 0xf0, 0xa0, 0x15, 0x15, 0x9f, 0xfc, 0xf6, 0x5d, 0x8c, 0x37, 0xd1};
static const uint8_t vec_ok_auth[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x30, 0x00, 0x08, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x10, 0x3c, 0x62, 0x58, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};

static const uint8_t vec_limit[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x36, 0x00, 0x0e,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa7, 0xdf, 0x10, 0x5a, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x04, 0x64, 0x65, 0x6d, 0x6f};
/* Control messages (session version 4): BROADCAST on PUT and DELIVER. */
static const uint8_t vec_put_control[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x10, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x3c, 0x00, 0x05, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x01, 0xb1, 0xbc, 0x03, 0xa8, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x08, 0x00, 0x03, 0x72, 0x75, 0x6e, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x68, 0x64, 0x72,
    0x72, 0x75, 0x6e, 0x20, 0x30, 0x30, 0x34, 0x32};
static const uint8_t vec_deliver_control[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x13, 0x00, 0x04, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x50, 0x00, 0x19,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xd9, 0xe3, 0x61, 0x65, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x0c, 0x00, 0x00, 0x00, 0x01, 0x00, 0x03, 0x72, 0x75, 0x6e, 0x00,
    0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08,
    0x68, 0x64, 0x72, 0x72, 0x75, 0x6e, 0x20, 0x30, 0x30, 0x34, 0x32};

/* Storage a vector's frame may point into. */
struct vec_frame {
    scimq_proto_frame_t f;
    scimq_proto_block_t blocks[2];
    uint8_t data[32];
};

static void
vec_build_put_synth(struct vec_frame *v)
{
    /* Synthetic message 0 (Appendix A): frame bytes 62..93. */
    memcpy(v->data, vec_put_synth + 62, 32);
    v->f.opcode = SCIMQ_PROTO_OP_PUT;
    v->f.flags = SCIMQ_PROTO_F_DATASUM | SCIMQ_PROTO_F_CONFIRM;
    v->f.request_id = 1;
    v->f.args.queue.queue = STR("demo");
    v->blocks[0] = (scimq_proto_block_t){"data", 4, v->data, 32};
    v->f.blocks = v->blocks;
    v->f.block_count = 1;
}

static void
vec_build_error(struct vec_frame *v)
{
    v->f.opcode = SCIMQ_PROTO_OP_ERROR;
    v->f.request_id = 7;
    v->f.args.error.code = SCIMQ_ENOENT;
    v->f.args.error.text = STR("no such queue: q");
}

static void
vec_build_bye(struct vec_frame *v)
{
    v->f.opcode = SCIMQ_PROTO_OP_BYE;
    v->f.request_id = 1;
}

static void
vec_build_ping_sum(struct vec_frame *v)
{
    golden_ping_frame(&v->f);
    v->f.flags = SCIMQ_PROTO_F_DATASUM;
}

static void
vec_build_get(struct vec_frame *v)
{
    v->f.opcode = SCIMQ_PROTO_OP_GET;
    v->f.request_id = 2;
    v->f.args.get.credit_msgs = 8;
    v->f.args.get.credit_bytes = 1u << 20;
    v->f.args.get.queue = STR("demo");
}

static void
vec_build_ok_json(struct vec_frame *v)
{
    memcpy(v->data, "{}", 2);
    v->f.opcode = SCIMQ_PROTO_OP_OK;
    v->f.request_id = 3;
    v->f.args.ok.value = 1;
    v->blocks[0] = (scimq_proto_block_t){"json", 4, v->data, 2};
    v->f.blocks = v->blocks;
    v->f.block_count = 1;
}

static void
vec_build_put_two(struct vec_frame *v)
{
    memcpy(v->data, "abxyz", 5);
    v->f.opcode = SCIMQ_PROTO_OP_PUT;
    v->f.flags = SCIMQ_PROTO_F_DATASUM | SCIMQ_PROTO_F_CONFIRM;
    v->f.request_id = 4;
    v->f.args.queue.queue = STR("q");
    v->blocks[0] = (scimq_proto_block_t){"meta", 4, v->data, 2};
    v->blocks[1] = (scimq_proto_block_t){NULL, 0, v->data + 2, 3};
    v->f.blocks = v->blocks;
    v->f.block_count = 2;
}

static void
vec_build_limit(struct vec_frame *v)
{
    v->f.opcode = SCIMQ_PROTO_OP_LIMIT;
    v->f.request_id = 5;
    v->f.args.limit.max_message = 16u << 20;
    v->f.args.limit.queue = STR("demo");
}

static void
vec_build_hello(struct vec_frame *v)
{
    v->f.opcode = SCIMQ_PROTO_OP_HELLO;
    v->f.request_id = 1;
    v->f.args.hello.version_min = 1;
    v->f.args.hello.version_max = 1;
    v->f.args.hello.stream_index = 0;
    v->f.args.hello.stream_count = 2;
    v->f.args.hello.client_name = STR("det0");
}

static void
vec_build_welcome(struct vec_frame *v)
{
    v->f.opcode = SCIMQ_PROTO_OP_WELCOME;
    v->f.request_id = 1;
    v->f.args.welcome.version = 1;
    v->f.args.welcome.auth_required = 1;
    v->f.args.welcome.max_payload = 1ull << 30;
    for (unsigned int i = 0; i < SCIMQ_PROTO_SESSION_ID_LEN; i++)
        v->f.args.welcome.session_id[i] = (uint8_t) (0xa0 + i);
    for (unsigned int i = 0; i < SCIMQ_PROTO_NONCE_LEN; i++)
        v->f.args.welcome.nonce[i] = (uint8_t) i;
    v->f.args.welcome.server_name = STR("gw");
}

static void
vec_build_auth(struct vec_frame *v)
{
    static const uint8_t mac[SCIMQ_PROTO_MAC_LEN] = {
        0x02, 0xc2, 0xa9, 0xc2, 0x7c, 0x84, 0x14, 0xe5, 0xa9, 0x9c, 0x70,
        0x49, 0xa4, 0xd8, 0x22, 0x4e, 0xb2, 0xb2, 0xf4, 0xc5, 0xf9, 0xf0,
        0xa0, 0x15, 0x15, 0x9f, 0xfc, 0xf6, 0x5d, 0x8c, 0x37, 0xd1};

    v->f.opcode = SCIMQ_PROTO_OP_AUTH;
    v->f.request_id = 2;
    memcpy(v->f.args.auth.mac, mac, sizeof(mac));
}

static void
vec_build_ok_auth(struct vec_frame *v)
{
    v->f.opcode = SCIMQ_PROTO_OP_OK;
    v->f.request_id = 2;
}

static void
vec_build_put_control(struct vec_frame *v)
{
    memcpy(v->data, "run 0042", 8);
    v->f.opcode = SCIMQ_PROTO_OP_PUT;
    v->f.flags = SCIMQ_PROTO_F_BROADCAST | SCIMQ_PROTO_F_CONFIRM;
    v->f.request_id = 3;
    v->f.args.queue.queue = STR("run");
    v->blocks[0] = (scimq_proto_block_t){"hdr", 3, v->data, 8};
    v->f.blocks = v->blocks;
    v->f.block_count = 1;
}

static void
vec_build_deliver_control(struct vec_frame *v)
{
    memcpy(v->data, "run 0042", 8);
    v->f.opcode = SCIMQ_PROTO_OP_DELIVER;
    v->f.flags = SCIMQ_PROTO_F_BROADCAST;
    v->f.request_id = 2;
    v->f.args.deliver.delivery_id = 7;
    v->f.args.deliver.msg_id = 12;
    v->f.args.deliver.attempt = 1;
    v->f.args.deliver.queue = STR("run");
    v->blocks[0] = (scimq_proto_block_t){"hdr", 3, v->data, 8};
    v->f.blocks = v->blocks;
    v->f.block_count = 1;
}

static const struct {
    const char *name;
    const uint8_t *bytes;
    size_t len;
    void (*build)(struct vec_frame *v);
} spec_vectors[] = {
#define VEC(n)                                                                 \
    {                                                                          \
#n, vec_##n, sizeof(vec_##n), vec_build_##n                            \
    }
    VEC(put_synth),   VEC(error),
    VEC(bye),         VEC(ping_sum),
    VEC(get),         VEC(ok_json),
    VEC(put_two),     VEC(hello),
    VEC(welcome),     VEC(auth),
    VEC(ok_auth),     VEC(limit),
    VEC(put_control), VEC(deliver_control),
#undef VEC
};

static void
test_spec_vectors(void)
{
    for (size_t i = 0; i < sizeof(spec_vectors) / sizeof(spec_vectors[0]);
         i++) {
        struct vec_frame v;
        uint8_t *buf;
        size_t len;

        memset(&v, 0, sizeof(v));
        spec_vectors[i].build(&v);
        buf = encode(&v.f, &len);
        CU_ASSERT_EQUAL(len, spec_vectors[i].len);
        if (len != spec_vectors[i].len ||
            memcmp(buf, spec_vectors[i].bytes, len) != 0) {
            CU_FAIL("encoding differs from doc/scimp.md");
            fprintf(stderr, "\n  vector %s differs\n", spec_vectors[i].name);
        }
        free(buf);

        /* And the listed bytes decode to the same frame, in every style. */
        for (size_t s = 0; s < N_STYLES; s++) {
            scimq_proto_decoder_t *dec = decoder_new(NULL);
            size_t used = 0;

            CU_ASSERT_EQUAL(decode_simple(dec, spec_vectors[i].bytes,
                                          spec_vectors[i].len, all_styles[s],
                                          &used),
                            SCIMQ_PROTO_FRAME_DONE);
            CU_ASSERT_EQUAL(used, spec_vectors[i].len);
            check_frame(&v.f, scimq_proto_decoder_frame(dec));
            scimq_proto_decoder_destroy(dec);
        }
    }
}

/* ======================================================================== */
/* Feeding styles, DATASUM, frames back to back                              */
/* ======================================================================== */

static void
test_roundtrip_styles(void)
{
    static const uint16_t flag_sets[] = {0, SCIMQ_PROTO_F_DATASUM};

    for (unsigned int op = 1; op <= 255; op++) {
        if (scimq_proto_opcode_name(op) == NULL)
            continue;
        for (size_t s = 0; s < N_STYLES; s++) {
            for (size_t k = 0; k < 2; k++)
                round_trip(op, flag_sets[k], all_styles[s]);
        }
    }
    /* CONFIRM is allowed on PUT only, alone or with DATASUM. */
    for (size_t s = 0; s < N_STYLES; s++) {
        round_trip(SCIMQ_PROTO_OP_PUT, SCIMQ_PROTO_F_CONFIRM, all_styles[s]);
        round_trip(SCIMQ_PROTO_OP_PUT,
                   SCIMQ_PROTO_F_CONFIRM | SCIMQ_PROTO_F_DATASUM,
                   all_styles[s]);
    }
    /* BROADCAST (control messages) on PUT and DELIVER, with the others. */
    for (size_t s = 0; s < N_STYLES; s++) {
        round_trip(SCIMQ_PROTO_OP_PUT,
                   SCIMQ_PROTO_F_BROADCAST | SCIMQ_PROTO_F_CONFIRM |
                       SCIMQ_PROTO_F_DATASUM,
                   all_styles[s]);
        round_trip(SCIMQ_PROTO_OP_DELIVER, SCIMQ_PROTO_F_BROADCAST,
                   all_styles[s]);
        round_trip(SCIMQ_PROTO_OP_DELIVER,
                   SCIMQ_PROTO_F_BROADCAST | SCIMQ_PROTO_F_DATASUM,
                   all_styles[s]);
    }
}

/* Opcodes and flags of the frames sent back to back in one buffer. */
static const struct {
    unsigned int op;
    uint16_t flags;
} stream_frames[] = {
    {SCIMQ_PROTO_OP_HELLO, 0},
    {SCIMQ_PROTO_OP_PUT, SCIMQ_PROTO_F_DATASUM | SCIMQ_PROTO_F_CONFIRM},
    {SCIMQ_PROTO_OP_PING, SCIMQ_PROTO_F_DATASUM},
    {SCIMQ_PROTO_OP_DELIVER, 0},
    {SCIMQ_PROTO_OP_OK, SCIMQ_PROTO_F_DATASUM},
    {SCIMQ_PROTO_OP_BYE, 0},
};
#define N_STREAM_FRAMES (sizeof(stream_frames) / sizeof(stream_frames[0]))

static void
test_back_to_back(void)
{
    scimq_proto_block_t blocks[TEST_BLOCKS];
    scimq_proto_frame_t f;
    size_t lens[N_STREAM_FRAMES], total = 0;
    uint8_t *stream, *buf;

    for (size_t i = 0; i < N_STREAM_FRAMES; i++) {
        build_frame(stream_frames[i].op, stream_frames[i].flags, &f, blocks);
        buf = encode(&f, &lens[i]);
        free(buf);
        total += lens[i];
    }
    stream = malloc(total);
    CU_ASSERT_PTR_NOT_NULL_FATAL(stream);
    total = 0;
    for (size_t i = 0; i < N_STREAM_FRAMES; i++) {
        build_frame(stream_frames[i].op, stream_frames[i].flags, &f, blocks);
        buf = encode(&f, &lens[i]);
        memcpy(stream + total, buf, lens[i]);
        free(buf);
        total += lens[i];
    }

    for (size_t s = 0; s < N_STYLES; s++) {
        scimq_proto_decoder_t *dec = decoder_new(NULL);
        size_t off = 0;

        for (size_t i = 0; i < N_STREAM_FRAMES; i++) {
            size_t used = 0;
            int rc = decode_simple(dec, stream + off, total - off,
                                   all_styles[s], &used);

            /* Each call stops exactly at the end of its frame. */
            CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_FRAME_DONE);
            CU_ASSERT_EQUAL(used, lens[i]);
            /* The blocks' data is static and shared: rebuild to compare. */
            build_frame(stream_frames[i].op, stream_frames[i].flags, &f,
                        blocks);
            check_frame(&f, scimq_proto_decoder_frame(dec));
            off += used;
            if (rc != SCIMQ_PROTO_FRAME_DONE)
                break;
        }
        CU_ASSERT_EQUAL(off, total);
        CU_ASSERT_TRUE(scimq_proto_decoder_idle(dec));
        scimq_proto_decoder_destroy(dec);
    }
    free(stream);
}

/* A frame whose blocks are all empty has no payload to place. */
static void
test_header_ready_needs_payload(void)
{
    scimq_proto_block_t blk = {"name-only", 9, NULL, 0};
    scimq_proto_frame_t f;
    scimq_proto_decoder_t *dec;
    uint8_t *buf;
    size_t len, used;
    int rc;

    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_PUT;
    f.args.queue.queue = STR("q");
    f.blocks = &blk;
    f.block_count = 1;
    for (size_t s = 0; s < N_STYLES; s++) {
        struct decode_run r = {all_styles[s], NULL, 0, 0, 0};

        f.flags = 0;
        buf = encode(&f, &len);
        dec = decoder_new(NULL);
        rc = decode_run(dec, buf, len, &r);
        CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_FRAME_DONE);
        CU_ASSERT_EQUAL(r.used, len);
        CU_ASSERT_EQUAL(r.header_ready, 0);
        check_frame(&f, scimq_proto_decoder_frame(dec));
        scimq_proto_decoder_destroy(dec);
        free(buf);

        /* With DATASUM the empty payload still has its (zero) trailer. */
        f.flags = SCIMQ_PROTO_F_DATASUM;
        buf = encode(&f, &len);
        CU_ASSERT_EQUAL(memcmp(buf + len - 4, "\0\0\0\0", 4), 0);
        dec = decoder_new(NULL);
        rc = scimq_proto_decoder_feed(dec, buf, len - 4, &used);
        CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_NEED_MORE);
        CU_ASSERT_EQUAL(used, len - 4);
        CU_ASSERT_EQUAL(scimq_proto_decoder_need(dec), 4);
        rc = decode_run(dec, buf + len - 4, 4, &r);
        CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_FRAME_DONE);
        CU_ASSERT_EQUAL(r.header_ready, 0);
        check_frame(&f, scimq_proto_decoder_frame(dec));
        scimq_proto_decoder_destroy(dec);
        free(buf);
    }
}

/* ======================================================================== */
/* Malformed frames                                                          */
/* ======================================================================== */

/* Offsets of the fixed header fields (doc/scimp.md, "Fixed header"). */
enum {
    OFF_MAGIC = 0,
    OFF_VERSION = 4,
    OFF_OPCODE = 5,
    OFF_FLAGS = 6,
    OFF_REQUEST_ID = 8,
    OFF_HEADER_LEN = 16,
    OFF_ARGS_LEN = 20,
    OFF_RESERVED = 22,
    OFF_BLOCK_COUNT = 24,
    OFF_HEADER_SUM = 28,
    OFF_PAYLOAD_LEN = 32
};

/* Writes a big-endian field of width 1, 2, 4 or 8 bytes. */
static void
patch(uint8_t *buf, size_t off, unsigned int width, uint64_t v)
{
    switch (width) {
    case 1:
        wire_put8(buf + off, (uint8_t) v);
        break;
    case 2:
        wire_put16(buf + off, (uint16_t) v);
        break;
    case 4:
        wire_put32(buf + off, (uint32_t) v);
        break;
    default:
        wire_put64(buf + off, v);
        break;
    }
}

/*
 * Recomputes the header checksum after a patch, so that the decoder gets
 * past it and reports the error the patch was made for: CRC32C over the
 * header_len bytes with the checksum field read as zero.
 */
static void
reseal(uint8_t *buf, size_t len)
{
    uint32_t hlen = wire_get32(buf + OFF_HEADER_LEN);

    CU_ASSERT_FATAL(hlen >= SCIMQ_PROTO_FIXED_LEN && hlen <= len);
    wire_put32(buf + OFF_HEADER_SUM, 0);
    wire_put32(buf + OFF_HEADER_SUM, scimq_proto_crc32c(0, buf, hlen));
}

/* Where the block table starts in an encoded frame. */
static size_t
table_off(const uint8_t *buf)
{
    return SCIMQ_PROTO_FIXED_LEN + wire_get16(buf + OFF_ARGS_LEN);
}

/* Where the names start in an encoded frame. */
static size_t
names_off(const uint8_t *buf)
{
    return table_off(buf) + (size_t) wire_get32(buf + OFF_BLOCK_COUNT) *
                                SCIMQ_PROTO_BLOCK_ENTRY_LEN;
}

/* Encodes the test frame of opcode op (see build_frame()). */
static uint8_t *
encode_test_frame(unsigned int op, uint16_t flags, size_t *len_p)
{
    scimq_proto_block_t blocks[TEST_BLOCKS];
    scimq_proto_frame_t f;

    build_frame(op, flags, &f, blocks);
    return encode(&f, len_p);
}

/*
 * Feeds a malformed frame in every style and expects the error want.  The
 * error must stick (same code, nothing consumed, no iovecs), and a reset
 * must bring the decoder back: a good frame then decodes.
 */
static void
expect_error(const uint8_t *buf, size_t len, const scimq_proto_limits_t *lim,
             int want)
{
    static const uint8_t bye[40] = {0x53, 0x43, 0x4d, 0x50, 0x01, 0x08};
    uint8_t good[sizeof(bye)];

    /* A BYE is only a fixed header, so it fits every limit. */
    memcpy(good, bye, sizeof(bye));
    patch(good, OFF_HEADER_LEN, 4, SCIMQ_PROTO_FIXED_LEN);
    reseal(good, sizeof(good));

    for (size_t s = 0; s < N_STYLES; s++) {
        scimq_proto_decoder_t *dec = decoder_new(lim);
        struct iovec iov[2];
        size_t used = 99;
        int rc;

        rc = decode_simple(dec, buf, len, all_styles[s], NULL);
        CU_ASSERT_EQUAL(rc, want);
        if (rc != want)
            fprintf(stderr, "\n  style %zu: got %d, want %d\n", s, rc, want);
        rc = scimq_proto_decoder_feed(dec, buf, len, &used);
        CU_ASSERT_EQUAL(rc, want);
        CU_ASSERT_EQUAL(used, 0);
        CU_ASSERT_EQUAL(scimq_proto_decoder_iov(dec, iov, 2), 0);
        CU_ASSERT_EQUAL(scimq_proto_decoder_advance(dec, 0), want);
        CU_ASSERT_EQUAL(scimq_proto_decoder_need(dec), 0);
        CU_ASSERT_FALSE(scimq_proto_decoder_idle(dec));

        scimq_proto_decoder_reset(dec);
        CU_ASSERT_TRUE(scimq_proto_decoder_idle(dec));
        rc = decode_simple(dec, good, sizeof(good), all_styles[s], &used);
        CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_FRAME_DONE);
        CU_ASSERT_EQUAL(used, sizeof(good));
        scimq_proto_decoder_destroy(dec);
    }
}

/* Limits with the defaults except where a test says otherwise. */
static scimq_proto_limits_t
limits(void)
{
    scimq_proto_limits_t lim;

    scimq_proto_limits_default(&lim);
    return lim;
}

static void
test_reseal_matches_encoder(void)
{
    uint8_t *buf;
    size_t len;
    uint32_t sum;

    /* The test's own checksum must agree with the encoder's. */
    buf = encode_test_frame(SCIMQ_PROTO_OP_PUT, SCIMQ_PROTO_F_DATASUM, &len);
    sum = wire_get32(buf + OFF_HEADER_SUM);
    reseal(buf, len);
    CU_ASSERT_EQUAL(wire_get32(buf + OFF_HEADER_SUM), sum);
    free(buf);
}

static void
test_bad_magic(void)
{
    scimq_proto_decoder_t *dec;
    uint8_t buf[sizeof(golden_ping)];
    size_t used;
    int rc;

    for (size_t i = 0; i < 4; i++) {
        memcpy(buf, golden_ping, sizeof(buf));
        buf[i] ^= 0x20;
        expect_error(buf, sizeof(buf), NULL, SCIMQ_EPROTO_MAGIC);
    }

    /* Garbage is refused at its first byte, without waiting for more. */
    dec = decoder_new(NULL);
    rc = scimq_proto_decoder_feed(dec, "GET / HTTP/1.1", 1, &used);
    CU_ASSERT_EQUAL(rc, SCIMQ_EPROTO_MAGIC);
    CU_ASSERT_EQUAL(used, 1);
    scimq_proto_decoder_reset(dec);
    /* A correct prefix of the magic is merely incomplete. */
    rc = scimq_proto_decoder_feed(dec, "SCM", 3, &used);
    CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_NEED_MORE);
    CU_ASSERT_EQUAL(used, 3);
    CU_ASSERT_EQUAL(scimq_proto_decoder_need(dec), 37);
    rc = scimq_proto_decoder_feed(dec, "Q", 1, &used);
    CU_ASSERT_EQUAL(rc, SCIMQ_EPROTO_MAGIC);
    scimq_proto_decoder_destroy(dec);
}

static void
test_bad_version(void)
{
    static const uint8_t versions[] = {0, 2, 0xFF};
    scimq_proto_decoder_t *dec;
    uint8_t buf[sizeof(golden_ping)];
    size_t used;
    int rc;

    for (size_t i = 0; i < sizeof(versions); i++) {
        memcpy(buf, golden_ping, sizeof(buf));
        buf[OFF_VERSION] = versions[i];
        reseal(buf, sizeof(buf));
        expect_error(buf, sizeof(buf), NULL, SCIMQ_EPROTO_VERSION);
    }
    /* The version is judged at the fifth byte. */
    dec = decoder_new(NULL);
    rc = scimq_proto_decoder_feed(dec, "SCMP\x02", 5, &used);
    CU_ASSERT_EQUAL(rc, SCIMQ_EPROTO_VERSION);
    CU_ASSERT_EQUAL(used, 5);
    scimq_proto_decoder_destroy(dec);
}

static void
test_bad_opcode(void)
{
    static const uint8_t opcodes[] = {0, 9, 15, 28, 31, 41, 255};
    uint8_t buf[sizeof(golden_ping)];

    for (size_t i = 0; i < sizeof(opcodes); i++) {
        memcpy(buf, golden_ping, sizeof(buf));
        buf[OFF_OPCODE] = opcodes[i];
        reseal(buf, sizeof(buf));
        expect_error(buf, sizeof(buf), NULL, SCIMQ_EPROTO_OPCODE);
    }
}

static void
test_bad_flags(void)
{
    static const uint16_t bad[] = {1u << 3, 1u << 8, 1u << 15, 0xFFFF};
    uint8_t buf[sizeof(golden_ping)];
    uint8_t *deliver;
    size_t len;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(buf, golden_ping, sizeof(buf));
        patch(buf, OFF_FLAGS, 2, bad[i]);
        reseal(buf, sizeof(buf));
        expect_error(buf, sizeof(buf), NULL, SCIMQ_EPROTO_FLAGS);
    }
    /* CONFIRM belongs to PUT only. */
    memcpy(buf, golden_ping, sizeof(buf));
    patch(buf, OFF_FLAGS, 2, SCIMQ_PROTO_F_CONFIRM);
    reseal(buf, sizeof(buf));
    expect_error(buf, sizeof(buf), NULL, SCIMQ_EPROTO_FLAGS);

    deliver = encode_test_frame(SCIMQ_PROTO_OP_DELIVER, 0, &len);
    patch(deliver, OFF_FLAGS, 2, SCIMQ_PROTO_F_CONFIRM | SCIMQ_PROTO_F_DATASUM);
    reseal(deliver, len);
    expect_error(deliver, len, NULL, SCIMQ_EPROTO_FLAGS);
    free(deliver);

    /* BROADCAST belongs to PUT and DELIVER only. */
    memcpy(buf, golden_ping, sizeof(buf));
    patch(buf, OFF_FLAGS, 2, SCIMQ_PROTO_F_BROADCAST);
    reseal(buf, sizeof(buf));
    expect_error(buf, sizeof(buf), NULL, SCIMQ_EPROTO_FLAGS);
}

static void
test_reserved(void)
{
    uint8_t buf[sizeof(golden_ping)];

    for (unsigned int bit = 0; bit < 16; bit += 5) {
        memcpy(buf, golden_ping, sizeof(buf));
        patch(buf, OFF_RESERVED, 2, 1u << bit);
        reseal(buf, sizeof(buf));
        expect_error(buf, sizeof(buf), NULL, SCIMQ_EPROTO_RESERVED);
    }
}

static void
test_block_count(void)
{
    scimq_proto_limits_t lim = limits();
    scimq_proto_decoder_t *dec;
    uint8_t buf[sizeof(golden_ping)];
    uint8_t *put;
    size_t len, used;

    /* Three blocks against a limit of two; exactly three is fine. */
    put = encode_test_frame(SCIMQ_PROTO_OP_PUT, 0, &len);
    lim.max_blocks = TEST_BLOCKS - 1;
    expect_error(put, len, &lim, SCIMQ_EPROTO_BLOCKS);
    lim.max_blocks = TEST_BLOCKS;
    dec = decoder_new(&lim);
    CU_ASSERT_EQUAL(decode_simple(dec, put, len, FEED_WHOLE, &used),
                    SCIMQ_PROTO_FRAME_DONE);
    scimq_proto_decoder_destroy(dec);

    /* The same blocks on EOS, which has the same args but no blocks. */
    patch(put, OFF_OPCODE, 1, SCIMQ_PROTO_OP_EOS);
    reseal(put, len);
    expect_error(put, len, NULL, SCIMQ_EPROTO_BLOCKS);
    free(put);

    memcpy(buf, golden_ping, sizeof(buf));
    patch(buf, OFF_BLOCK_COUNT, 4, 1);
    reseal(buf, sizeof(buf));
    expect_error(buf, sizeof(buf), NULL, SCIMQ_EPROTO_BLOCKS);
}

static void
test_payload_limit(void)
{
    scimq_proto_limits_t lim = limits();
    scimq_proto_decoder_t *dec;
    uint8_t buf[sizeof(golden_ping)];
    uint8_t *put;
    size_t len, used;

    put = encode_test_frame(SCIMQ_PROTO_OP_PUT, SCIMQ_PROTO_F_DATASUM, &len);
    lim.max_payload_len = BLOCK0_LEN + BLOCK1_LEN - 1;
    expect_error(put, len, &lim, SCIMQ_EPROTO_TOOBIG);
    lim.max_payload_len = BLOCK0_LEN + BLOCK1_LEN;
    dec = decoder_new(&lim);
    CU_ASSERT_EQUAL(decode_simple(dec, put, len, FEED_WHOLE, &used),
                    SCIMQ_PROTO_FRAME_DONE);
    scimq_proto_decoder_destroy(dec);
    free(put);

    /* The default limit is 1 GiB. */
    memcpy(buf, golden_ping, sizeof(buf));
    patch(buf, OFF_PAYLOAD_LEN, 8, (1ull << 30) + 1);
    reseal(buf, sizeof(buf));
    expect_error(buf, sizeof(buf), NULL, SCIMQ_EPROTO_TOOBIG);

    /* Without blocks there can be no payload. */
    memcpy(buf, golden_ping, sizeof(buf));
    patch(buf, OFF_PAYLOAD_LEN, 8, 1);
    reseal(buf, sizeof(buf));
    expect_error(buf, sizeof(buf), NULL, SCIMQ_EPROTO_LENGTHS);
}

static void
test_header_len(void)
{
    scimq_proto_limits_t lim = limits();
    uint8_t buf[sizeof(golden_ping)];
    uint8_t *put;
    size_t len;

    /* Shorter than fixed header + args (48). */
    static const uint32_t short_lens[] = {0, 39, 40, 47};
    for (size_t i = 0; i < sizeof(short_lens) / sizeof(short_lens[0]); i++) {
        memcpy(buf, golden_ping, sizeof(buf));
        patch(buf, OFF_HEADER_LEN, 4, short_lens[i]);
        expect_error(buf, sizeof(buf), NULL, SCIMQ_EPROTO_HDRLEN);
    }
    /* Longer than the receiver allows. */
    lim.max_header_len = sizeof(golden_ping) - 1;
    expect_error(golden_ping, sizeof(golden_ping), &lim, SCIMQ_EPROTO_HDRLEN);

    /* Shorter than the block table of a PUT. */
    put = encode_test_frame(SCIMQ_PROTO_OP_PUT, 0, &len);
    patch(put, OFF_HEADER_LEN, 4, names_off(put) - 1);
    expect_error(put, len, NULL, SCIMQ_EPROTO_HDRLEN);
    free(put);
}

static void
test_name_len(void)
{
    scimq_proto_limits_t lim = limits();
    scimq_proto_block_t blk = {"alpha", 5, block0_data, 10};
    scimq_proto_frame_t f;
    uint8_t ping[sizeof(golden_ping) + 1];
    uint8_t *buf;
    size_t len;

    /*
     * The test frame's names total 10 bytes, within 3 * 4: the per-block
     * check (5 > 4) catches it once the header is in.
     */
    buf = encode_test_frame(SCIMQ_PROTO_OP_PUT, 0, &len);
    lim.max_name_len = 4;
    expect_error(buf, len, &lim, SCIMQ_EPROTO_NAMELEN);
    free(buf);

    /* One block: the names are over 1 * 4 already in the fixed header. */
    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_PUT;
    f.blocks = &blk;
    f.block_count = 1;
    buf = encode(&f, &len);
    expect_error(buf, len, &lim, SCIMQ_EPROTO_NAMELEN);
    lim.max_name_len = 0;
    expect_error(buf, len, &lim, SCIMQ_EPROTO_NAMELEN);

    /* A name longer than the bytes left in the header. */
    patch(buf, table_off(buf), 4, 6);
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_HDRLEN);
    /* A name shorter than them: bytes left over after the names. */
    patch(buf, table_off(buf), 4, 4);
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_HDRLEN);
    free(buf);

    /* Without blocks, any header byte after the args is a name byte. */
    memcpy(ping, golden_ping, sizeof(golden_ping));
    ping[sizeof(golden_ping)] = 0;
    patch(ping, OFF_HEADER_LEN, 4, sizeof(ping));
    reseal(ping, sizeof(ping));
    expect_error(ping, sizeof(ping), NULL, SCIMQ_EPROTO_NAMELEN);
}

static void
test_header_sum(void)
{
    uint8_t *buf;
    size_t len;
    const size_t offsets[] = {
        OFF_REQUEST_ID + 7,
        OFF_HEADER_SUM,
        OFF_HEADER_SUM + 3,
        SCIMQ_PROTO_FIXED_LEN + 2, /* args: inside the queue name */
        0,                         /* block table (set below) */
        0,                         /* names (set below) */
    };
    size_t offs[sizeof(offsets) / sizeof(offsets[0])];

    buf = encode_test_frame(SCIMQ_PROTO_OP_PUT, SCIMQ_PROTO_F_DATASUM, &len);
    memcpy(offs, offsets, sizeof(offs));
    offs[4] = table_off(buf) + 11; /* low byte of block 0's data length */
    offs[5] = names_off(buf) + 1;  /* second letter of "alpha" */
    for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
        buf[offs[i]] ^= 0x01;
        expect_error(buf, len, NULL, SCIMQ_EPROTO_HDRSUM);
        buf[offs[i]] ^= 0x01;
    }
    free(buf);
}

static void
test_data_sum(void)
{
    uint8_t *buf;
    size_t len, hlen;

    buf =
        encode_test_frame(SCIMQ_PROTO_OP_DELIVER, SCIMQ_PROTO_F_DATASUM, &len);
    hlen = wire_get32(buf + OFF_HEADER_LEN);
    /* First and last data byte, and the trailer itself. */
    const size_t offs[] = {hlen, len - 5, len - 4, len - 1};
    for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
        buf[offs[i]] ^= 0x80;
        expect_error(buf, len, NULL, SCIMQ_EPROTO_DATASUM);
        buf[offs[i]] ^= 0x80;
    }
    free(buf);
}

static void
test_block_lengths(void)
{
    uint8_t *buf;
    size_t len, t;

    /* Block 0 one byte longer: the table no longer adds up. */
    buf = encode_test_frame(SCIMQ_PROTO_OP_OK, 0, &len);
    t = table_off(buf);
    patch(buf, t + 4, 8, BLOCK0_LEN + 1);
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_LENGTHS);
    /* Moving a byte from one block to another is fine. */
    patch(buf, t + 4 + SCIMQ_PROTO_BLOCK_ENTRY_LEN, 8, BLOCK1_LEN - 1);
    reseal(buf, len);
    {
        scimq_proto_decoder_t *dec = decoder_new(NULL);
        const scimq_proto_frame_t *got;
        size_t used;

        CU_ASSERT_EQUAL(decode_simple(dec, buf, len, FEED_WHOLE, &used),
                        SCIMQ_PROTO_FRAME_DONE);
        got = scimq_proto_decoder_frame(dec);
        CU_ASSERT_PTR_NOT_NULL_FATAL(got);
        CU_ASSERT_EQUAL(got->blocks[0].len, BLOCK0_LEN + 1);
        CU_ASSERT_EQUAL(got->blocks[1].len, BLOCK1_LEN - 1);
        scimq_proto_decoder_destroy(dec);
    }
    free(buf);
}

static void
test_lengths_wrap(void)
{
    static const uint64_t pairs[][2] = {
        {UINT64_MAX, 1},
        {1ull << 63, 1ull << 63},
        {UINT64_MAX, UINT64_MAX - 5}, /* sum wraps to 2^64 - 7 */
    };
    static uint8_t d[2] = {1, 2};
    scimq_proto_block_t blocks[2] = {{"a", 1, &d[0], 1}, {"b", 1, &d[1], 1}};
    scimq_proto_limits_t lim = limits();
    scimq_proto_frame_t f;
    uint8_t *buf;
    size_t len, t, hlen;

    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_PUT;
    f.blocks = blocks;
    f.block_count = 2;
    buf = encode(&f, &len);
    t = table_off(buf);
    hlen = wire_get32(buf + OFF_HEADER_LEN);
    lim.max_payload_len = UINT64_MAX;
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        /*
         * payload_len is what the wrapped sum would be, so only the
         * overflow check can catch it; send the header alone.
         */
        uint64_t wrapped = pairs[i][0] + pairs[i][1];

        patch(buf, t + 4, 8, pairs[i][0]);
        patch(buf, t + 4 + SCIMQ_PROTO_BLOCK_ENTRY_LEN, 8, pairs[i][1]);
        patch(buf, OFF_PAYLOAD_LEN, 8, wrapped);
        reseal(buf, len);
        expect_error(buf, wrapped == 0 ? hlen : hlen + 2,
                     wrapped == 0 ? NULL : &lim, SCIMQ_EPROTO_LENGTHS);
    }
    free(buf);
}

static void
test_huge_block_count(void)
{
    scimq_proto_limits_t lim = limits();
    uint8_t *buf;
    size_t len;

    /*
     * 2^32 - 1 blocks pass the (huge) block limit but cannot fit in any
     * header: refused from the fixed header, before allocating anything.
     */
    buf = encode_test_frame(SCIMQ_PROTO_OP_PUT, 0, &len);
    patch(buf, OFF_BLOCK_COUNT, 4, UINT32_MAX);
    reseal(buf, len);
    lim.max_blocks = UINT32_MAX;
    lim.max_header_len = SCIMQ_PROTO_MAX_HEADER_CAP;
    lim.max_name_len = UINT32_MAX;
    expect_error(buf, len, &lim, SCIMQ_EPROTO_HDRLEN);
    free(buf);
}

/* Crafts args of the wrong size by moving the end of the args. */
static void
test_args_size(void)
{
    scimq_proto_frame_t f;
    uint8_t *buf, *big;
    size_t len;

    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_ACK;
    f.args.ack.delivery_id = 42;
    buf = encode(&f, &len);
    CU_ASSERT_EQUAL_FATAL(len, 48);

    /* Truncated: 7 of the 8 bytes of delivery_id. */
    patch(buf, OFF_ARGS_LEN, 2, 7);
    patch(buf, OFF_HEADER_LEN, 4, 47);
    reseal(buf, 47);
    expect_error(buf, 47, NULL, SCIMQ_EPROTO_ARGS);
    /* No args at all. */
    patch(buf, OFF_ARGS_LEN, 2, 0);
    patch(buf, OFF_HEADER_LEN, 4, 40);
    reseal(buf, 40);
    expect_error(buf, 40, NULL, SCIMQ_EPROTO_ARGS);

    /* One trailing byte after the last field. */
    big = calloc(1, 49);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    memcpy(big, buf, 48);
    patch(big, OFF_ARGS_LEN, 2, 9);
    patch(big, OFF_HEADER_LEN, 4, 49);
    reseal(big, 49);
    expect_error(big, 49, NULL, SCIMQ_EPROTO_ARGS);
    /* BYE has no args: a single args byte is too many. */
    patch(big, OFF_OPCODE, 1, SCIMQ_PROTO_OP_BYE);
    patch(big, OFF_ARGS_LEN, 2, 1);
    patch(big, OFF_HEADER_LEN, 4, 41);
    reseal(big, 41);
    expect_error(big, 41, NULL, SCIMQ_EPROTO_ARGS);
    free(big);
    free(buf);
}

static void
test_args_string(void)
{
    uint8_t *buf;
    size_t len;
    uint16_t slen;

    /* QUEUE_DELETE: args are the queue name only (u16 length + bytes). */
    buf = encode_test_frame(SCIMQ_PROTO_OP_QUEUE_DELETE, 0, &len);
    slen = wire_get16(buf + SCIMQ_PROTO_FIXED_LEN);
    CU_ASSERT_EQUAL_FATAL(slen, 11);
    patch(buf, SCIMQ_PROTO_FIXED_LEN, 2, slen + 1);
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_ARGS);
    patch(buf, SCIMQ_PROTO_FIXED_LEN, 2, 0xFFFF);
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_ARGS);
    /* Shorter string: the rest of the args is trailing garbage. */
    patch(buf, SCIMQ_PROTO_FIXED_LEN, 2, slen - 1);
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_ARGS);
    free(buf);

    /* QUEUE_BIND: the second string's length runs past the end. */
    buf = encode_test_frame(SCIMQ_PROTO_OP_QUEUE_BIND, 0, &len);
    slen = wire_get16(buf + SCIMQ_PROTO_FIXED_LEN);
    patch(buf, SCIMQ_PROTO_FIXED_LEN + 2 + slen, 2, 13);
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_ARGS);
    free(buf);
}

/*
 * LIMIT (session version 2): a u64 and a string, exactly.  Every way of
 * getting the length wrong is SCIMQ_EPROTO_ARGS.
 */
static void
test_args_limit(void)
{
    const size_t a = SCIMQ_PROTO_FIXED_LEN;
    uint8_t *buf, *big;
    size_t len;
    uint16_t slen;

    buf = encode_test_frame(SCIMQ_PROTO_OP_LIMIT, 0, &len);
    slen = wire_get16(buf + a + 8);
    CU_ASSERT_EQUAL_FATAL(slen, 13);
    CU_ASSERT_EQUAL_FATAL(len, a + 8 + 2 + slen);
    CU_ASSERT_EQUAL(wire_get64(buf + a),
                    0x0123456789ABCDEFull ^ 0xFF00FF00FF00FF00ull);

    /* The queue name runs past the args, or stops short of their end. */
    patch(buf, a + 8, 2, slen + 1u);
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_ARGS);
    patch(buf, a + 8, 2, slen - 1u);
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_ARGS);
    patch(buf, a + 8, 2, slen);

    /* Only the u64, no string length. */
    patch(buf, OFF_ARGS_LEN, 2, 8);
    patch(buf, OFF_HEADER_LEN, 4, a + 8);
    reseal(buf, a + 8);
    expect_error(buf, a + 8, NULL, SCIMQ_EPROTO_ARGS);
    /* Seven bytes of the u64. */
    patch(buf, OFF_ARGS_LEN, 2, 7);
    patch(buf, OFF_HEADER_LEN, 4, a + 7);
    reseal(buf, a + 7);
    expect_error(buf, a + 7, NULL, SCIMQ_EPROTO_ARGS);
    free(buf);

    /* One byte after the queue name. */
    buf = encode_test_frame(SCIMQ_PROTO_OP_LIMIT, 0, &len);
    big = calloc(1, len + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    memcpy(big, buf, len);
    patch(big, OFF_ARGS_LEN, 2, len + 1 - a);
    patch(big, OFF_HEADER_LEN, 4, len + 1);
    reseal(big, len + 1);
    expect_error(big, len + 1, NULL, SCIMQ_EPROTO_ARGS);
    free(big);
    free(buf);

    /* Blocks are not allowed on LIMIT. */
    {
        scimq_proto_frame_t f;
        scimq_proto_block_t blk = {"data", 4, block0_data, 1};
        uint8_t *out = NULL;
        size_t out_len;

        memset(&f, 0, sizeof(f));
        f.opcode = SCIMQ_PROTO_OP_LIMIT;
        f.args.limit.queue = STR("q");
        f.blocks = &blk;
        f.block_count = 1;
        CU_ASSERT_EQUAL(scimq_proto_encode_alloc(&f, &out, &out_len),
                        SCIMQ_EPROTO_BLOCKS);
        CU_ASSERT_PTR_NULL(out);
    }
}

/* Sets one enum byte of an encoded frame's args and decodes it. */
static void
check_enum_byte(unsigned int op, size_t arg_off, unsigned int max)
{
    uint8_t *buf;
    size_t len;

    buf = encode_test_frame(op, 0, &len);
    for (unsigned int v = 0; v <= 255; v++) {
        buf[SCIMQ_PROTO_FIXED_LEN + arg_off] = (uint8_t) v;
        reseal(buf, len);
        if (v > max) {
            /* Check the whole error behaviour for a few values only. */
            if (v == max + 1 || v == 255) {
                expect_error(buf, len, NULL, SCIMQ_EPROTO_ARGS);
            } else {
                scimq_proto_decoder_t *dec = decoder_new(NULL);

                CU_ASSERT_EQUAL(decode_simple(dec, buf, len, FEED_WHOLE, NULL),
                                SCIMQ_EPROTO_ARGS);
                scimq_proto_decoder_destroy(dec);
            }
        } else {
            scimq_proto_decoder_t *dec = decoder_new(NULL);

            CU_ASSERT_EQUAL(decode_simple(dec, buf, len, FEED_WHOLE, NULL),
                            SCIMQ_PROTO_FRAME_DONE);
            scimq_proto_decoder_destroy(dec);
        }
    }
    free(buf);
}

static void
test_args_enum(void)
{
    /* Offsets in the args: see the field tables in doc/scimp.md 3. */
    check_enum_byte(SCIMQ_PROTO_OP_NACK, 8 + 4, 1); /* requeue */
    check_enum_byte(SCIMQ_PROTO_OP_WELCOME, 1, 1);  /* auth_required */
    /* kind | durability << 4: the gateway checks the combination. */
    check_enum_byte(SCIMQ_PROTO_OP_QUEUE_DECLARE, 0, 0x31);
}

static void
test_args_hello(void)
{
    uint8_t *buf;
    size_t len;
    const size_t a = SCIMQ_PROTO_FIXED_LEN;

    /* HELLO args: version_min, version_max, stream_index, stream_count. */
    buf = encode_test_frame(SCIMQ_PROTO_OP_HELLO, 0, &len);
    patch(buf, a + 2, 2, 5);
    patch(buf, a + 4, 2, 5);
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_ARGS); /* index == count */
    patch(buf, a + 2, 2, 0);
    patch(buf, a + 4, 2, 0);
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_ARGS); /* no streams */
    patch(buf, a + 4, 2, 1);
    patch(buf, a + 0, 1, 4);
    patch(buf, a + 1, 1, 3);
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_ARGS); /* min > max */
    patch(buf, a + 1, 1, 4);
    reseal(buf, len);
    {
        /* min == max, index 0 of 1: valid. */
        scimq_proto_decoder_t *dec = decoder_new(NULL);

        CU_ASSERT_EQUAL(decode_simple(dec, buf, len, FEED_BYTES, NULL),
                        SCIMQ_PROTO_FRAME_DONE);
        scimq_proto_decoder_destroy(dec);
    }
    free(buf);
}

/*
 * The range frames (session version 3): the ACK_RANGE vector of
 * doc/scimp.md 9.3 byte for byte, and every way to break the one encoding of a
 * set of ids, refused by the encoder and, resealed by hand, by the decoder.
 */
static const uint8_t vec_ack_range[] = {
    0x53, 0x43, 0x4d, 0x50, 0x01, 0x19, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x42, 0x00, 0x1a,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x6b, 0x1d, 0xdb, 0x9d, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x40, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x64, 0x00, 0x00, 0x00, 0x03};

static void
test_args_ranges(void)
{
    scimq_proto_range_t r[2] = {{1, 64}, {100, 3}};
    scimq_proto_frame_t f;
    const size_t a = SCIMQ_PROTO_FIXED_LEN;
    uint8_t *buf;
    size_t len;

    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_ACK_RANGE;
    f.request_id = 6;
    f.args.ack_range.ranges.list = r;
    f.args.ack_range.ranges.n = 2;
    buf = encode(&f, &len);
    CU_ASSERT_EQUAL_FATAL(len, sizeof(vec_ack_range));
    CU_ASSERT_EQUAL(memcmp(buf, vec_ack_range, len), 0);
    free(buf);

    /* The encoder refuses what is not the one encoding. */
    f.args.ack_range.ranges.n = 0; /* no id at all */
    CU_ASSERT_EQUAL(scimq_proto_encode_alloc(&f, &buf, &len),
                    SCIMQ_EPROTO_ARGS);
    f.args.ack_range.ranges.n = 2;
    r[1].first = 65; /* touches 1..64: one range 1..67 */
    CU_ASSERT_EQUAL(scimq_proto_encode_alloc(&f, &buf, &len),
                    SCIMQ_EPROTO_ARGS);
    r[1].first = 10; /* overlaps, descends */
    CU_ASSERT_EQUAL(scimq_proto_encode_alloc(&f, &buf, &len),
                    SCIMQ_EPROTO_ARGS);
    r[1].first = 100;
    r[1].count = 0; /* empty range */
    CU_ASSERT_EQUAL(scimq_proto_encode_alloc(&f, &buf, &len),
                    SCIMQ_EPROTO_ARGS);
    r[1].first = UINT64_MAX - 1; /* runs past 2^64 - 1 */
    r[1].count = 3;
    CU_ASSERT_EQUAL(scimq_proto_encode_alloc(&f, &buf, &len),
                    SCIMQ_EPROTO_ARGS);
    r[1].count = 2; /* ends at 2^64 - 1: valid */
    buf = encode(&f, &len);
    free(buf);
    r[1].first = 1000; /* 64 + 65472 = SCIMQ_PROTO_MAX_RANGE_IDS: valid */
    r[1].count = SCIMQ_PROTO_MAX_RANGE_IDS - 64;
    buf = encode(&f, &len);
    free(buf);
    r[1].count++; /* one id more than a frame may name */
    CU_ASSERT_EQUAL(scimq_proto_encode_alloc(&f, &buf, &len),
                    SCIMQ_EPROTO_ARGS);
    memset(&f.args, 0, sizeof(f.args));
    f.opcode = SCIMQ_PROTO_OP_PUT_OK_RANGE;
    f.args.put_ok_range.count = 0;
    CU_ASSERT_EQUAL(scimq_proto_encode_alloc(&f, &buf, &len),
                    SCIMQ_EPROTO_ARGS);
    f.args.put_ok_range.count = 2;
    f.args.put_ok_range.msg_id = UINT64_MAX;
    CU_ASSERT_EQUAL(scimq_proto_encode_alloc(&f, &buf, &len),
                    SCIMQ_EPROTO_ARGS);

    /* The decoder refuses the same, and a count running past args_len. */
    memcpy(r, (scimq_proto_range_t[2]){{1, 64}, {100, 3}}, sizeof(r));
    memset(&f.args, 0, sizeof(f.args));
    f.opcode = SCIMQ_PROTO_OP_ACK_RANGE;
    f.args.ack_range.ranges.list = r;
    f.args.ack_range.ranges.n = 2;
    buf = encode(&f, &len);
    patch(buf, a + 14, 8, 65); /* second range touches the first */
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_ARGS);
    patch(buf, a + 14, 8, 100);
    patch(buf, a + 22, 4, 0); /* empty range */
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_ARGS);
    patch(buf, a + 22, 4, 3);
    patch(buf, a, 2, 3); /* three ranges announced, two there */
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_ARGS);
    patch(buf, a, 2, 0); /* none announced, 24 bytes left over */
    reseal(buf, len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_ARGS);
    free(buf);

    /* SCIMQ_PROTO_MAX_RANGES fit the args (8192 ids); one more does not. */
    {
        static scimq_proto_range_t many[SCIMQ_PROTO_MAX_RANGES + 1];
        scimq_proto_decoder_t *dec;

        for (unsigned int i = 0; i <= SCIMQ_PROTO_MAX_RANGES; i++)
            many[i] = (scimq_proto_range_t){(uint64_t) i * 3, 2};
        memset(&f.args, 0, sizeof(f.args));
        f.opcode = SCIMQ_PROTO_OP_NACK_RANGE;
        f.args.nack_range.ranges.list = many;
        f.args.nack_range.ranges.n = SCIMQ_PROTO_MAX_RANGES;
        buf = encode(&f, &len);
        dec = decoder_new(NULL);
        CU_ASSERT_EQUAL(decode_simple(dec, buf, len, FEED_WHOLE, NULL),
                        SCIMQ_PROTO_FRAME_DONE);
        scimq_proto_decoder_destroy(dec);
        free(buf);
        f.args.nack_range.ranges.n = SCIMQ_PROTO_MAX_RANGES + 1;
        CU_ASSERT_EQUAL(scimq_proto_encode_alloc(&f, &buf, &len),
                        SCIMQ_EPROTO_ARGS);
    }
}

/* ======================================================================== */
/* Truncation and boundaries                                                 */
/* ======================================================================== */

/*
 * What need() must say after the first p bytes of a frame whose header is
 * hlen bytes and whole length len: the rest of the current phase.
 */
static uint64_t
expected_need(size_t p, size_t hlen, size_t len)
{
    if (p < SCIMQ_PROTO_FIXED_LEN)
        return SCIMQ_PROTO_FIXED_LEN - p;
    if (p < hlen)
        return hlen - p;
    return len - p; /* payload and trailer */
}

static void
test_every_prefix(void)
{
    uint8_t *buf;
    size_t len, hlen;

    buf =
        encode_test_frame(SCIMQ_PROTO_OP_PUT,
                          SCIMQ_PROTO_F_DATASUM | SCIMQ_PROTO_F_CONFIRM, &len);
    hlen = wire_get32(buf + OFF_HEADER_LEN);
    CU_ASSERT_FATAL(hlen > SCIMQ_PROTO_FIXED_LEN && hlen < len);

    /* A truncated frame is never done and never an error. */
    for (size_t s = 0; s < N_STYLES; s++) {
        for (size_t p = 0; p < len; p++) {
            scimq_proto_decoder_t *dec = decoder_new(NULL);
            struct decode_run r = {all_styles[s], NULL, 0, 0, 0};
            int rc = decode_run(dec, buf, p, &r);

            CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_NEED_MORE);
            CU_ASSERT_EQUAL(r.used, p);
            CU_ASSERT_EQUAL(r.header_ready, p >= hlen ? 1u : 0u);
            CU_ASSERT_EQUAL(scimq_proto_decoder_idle(dec) != 0, p == 0);
            CU_ASSERT_EQUAL(scimq_proto_decoder_need(dec),
                            expected_need(p, hlen, len));
            scimq_proto_decoder_destroy(dec);
        }
    }

    /* The same, one decoder fed byte by byte, with need() at every step. */
    {
        scimq_proto_decoder_t *dec = decoder_new(NULL);
        int rc = SCIMQ_PROTO_NEED_MORE;

        CU_ASSERT_TRUE(scimq_proto_decoder_idle(dec));
        CU_ASSERT_EQUAL(scimq_proto_decoder_need(dec), SCIMQ_PROTO_FIXED_LEN);
        for (size_t p = 0; p < len; p++) {
            size_t used = 0;

            rc = scimq_proto_decoder_feed(dec, buf + p, 1, &used);
            CU_ASSERT_EQUAL(used, 1);
            if (p + 1 == hlen) {
                CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_HEADER_READY);
                CU_ASSERT_EQUAL(scimq_proto_decoder_alloc_payload(dec), 0);
            } else if (p + 1 == len) {
                CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_FRAME_DONE);
            } else {
                CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_NEED_MORE);
            }
            if (p + 1 < len) {
                CU_ASSERT_FALSE(scimq_proto_decoder_idle(dec));
                CU_ASSERT_EQUAL(scimq_proto_decoder_need(dec),
                                expected_need(p + 1, hlen, len));
            }
        }
        CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_FRAME_DONE);
        CU_ASSERT_TRUE(scimq_proto_decoder_idle(dec));
        /* Between frames the next thing needed is a fixed header. */
        CU_ASSERT_EQUAL(scimq_proto_decoder_need(dec), SCIMQ_PROTO_FIXED_LEN);
        scimq_proto_decoder_destroy(dec);
    }
    free(buf);
}

static void
test_zero_blocks(void)
{
    scimq_proto_frame_t f;
    uint8_t *buf;
    size_t len;

    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_PUT;
    f.request_id = 77;
    f.args.queue.queue = STR("empty-put");
    for (unsigned int sum = 0; sum < 2; sum++) {
        f.flags = sum ? SCIMQ_PROTO_F_DATASUM : 0;
        buf = encode(&f, &len);
        /* Fixed header + args (2 + 9), plus the zero trailer with DATASUM. */
        CU_ASSERT_EQUAL(len, 40 + 11 + (sum ? 4u : 0u));
        CU_ASSERT_EQUAL(wire_get32(buf + OFF_BLOCK_COUNT), 0);
        CU_ASSERT_EQUAL(wire_get64(buf + OFF_PAYLOAD_LEN), 0);
        for (size_t s = 0; s < N_STYLES; s++) {
            scimq_proto_decoder_t *dec = decoder_new(NULL);
            struct decode_run r = {all_styles[s], NULL, 0, 0, 0};

            CU_ASSERT_EQUAL(decode_run(dec, buf, len, &r),
                            SCIMQ_PROTO_FRAME_DONE);
            CU_ASSERT_EQUAL(r.used, len);
            CU_ASSERT_EQUAL(r.header_ready, 0);
            check_frame(&f, scimq_proto_decoder_frame(dec));
            scimq_proto_decoder_destroy(dec);
        }
        free(buf);
    }
}

/* Encodes a one-block PUT whose block name is name_len bytes of 'n'. */
static uint8_t *
encode_named(uint32_t name_len, size_t *len_p)
{
    static uint8_t data[3] = {7, 8, 9};
    scimq_proto_block_t blk = {NULL, name_len, data, sizeof(data)};
    scimq_proto_frame_t f;
    char *name = malloc(name_len + 1);
    uint8_t *buf;

    CU_ASSERT_PTR_NOT_NULL_FATAL(name);
    memset(name, 'n', name_len + 1);
    blk.name = name;
    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_PUT;
    f.blocks = &blk;
    f.block_count = 1;
    buf = encode(&f, len_p);
    free(name);
    return buf;
}

/* Decodes buf in one feed with limits lim; returns the event or error. */
static int
decode_with(const scimq_proto_limits_t *lim, const uint8_t *buf, size_t len)
{
    scimq_proto_decoder_t *dec = decoder_new(lim);
    size_t used = 0;
    int rc = decode_simple(dec, buf, len, FEED_WHOLE, &used);

    if (rc == SCIMQ_PROTO_FRAME_DONE) {
        CU_ASSERT_EQUAL(used, len);
    }
    scimq_proto_decoder_destroy(dec);
    return rc;
}

static void
test_name_boundary(void)
{
    scimq_proto_limits_t lim = limits();
    uint8_t *buf;
    size_t len;

    buf = encode_named(SCIMQ_PROTO_DEFAULT_MAX_NAME_LEN, &len);
    CU_ASSERT_EQUAL(decode_with(NULL, buf, len), SCIMQ_PROTO_FRAME_DONE);
    free(buf);
    buf = encode_named(SCIMQ_PROTO_DEFAULT_MAX_NAME_LEN + 1, &len);
    expect_error(buf, len, NULL, SCIMQ_EPROTO_NAMELEN);
    free(buf);

    lim.max_name_len = 10;
    buf = encode_named(10, &len);
    CU_ASSERT_EQUAL(decode_with(&lim, buf, len), SCIMQ_PROTO_FRAME_DONE);
    free(buf);
    buf = encode_named(11, &len);
    CU_ASSERT_EQUAL(decode_with(&lim, buf, len), SCIMQ_EPROTO_NAMELEN);
    free(buf);
}

static void
test_header_boundary(void)
{
    /* Small (fits the first header buffer) and large (grows it). */
    static const uint32_t name_lens[] = {5, 200, 2000};
    scimq_proto_limits_t lim = limits();

    lim.max_name_len = 4096;
    for (size_t i = 0; i < sizeof(name_lens) / sizeof(name_lens[0]); i++) {
        uint8_t *buf, *bigger;
        size_t len, blen;
        uint32_t hlen;

        buf = encode_named(name_lens[i], &len);
        bigger = encode_named(name_lens[i] + 1, &blen);
        hlen = wire_get32(buf + OFF_HEADER_LEN);
        CU_ASSERT_EQUAL(wire_get32(bigger + OFF_HEADER_LEN), hlen + 1);

        /* A header of exactly the limit passes; one byte more fails. */
        lim.max_header_len = hlen;
        CU_ASSERT_EQUAL(decode_with(&lim, buf, len), SCIMQ_PROTO_FRAME_DONE);
        CU_ASSERT_EQUAL(decode_with(&lim, bigger, blen), SCIMQ_EPROTO_HDRLEN);
        lim.max_header_len = hlen - 1;
        CU_ASSERT_EQUAL(decode_with(&lim, buf, len), SCIMQ_EPROTO_HDRLEN);
        free(bigger);
        free(buf);
    }
}

static void
test_huge_payload(void)
{
    const uint64_t big = 5ull << 30;
    static uint8_t dummy;
    scimq_proto_block_t blk = {"big", 3, &dummy, big};
    scimq_proto_limits_t lim = limits();
    scimq_proto_frame_t f;
    scimq_proto_decoder_t *dec;
    const scimq_proto_frame_t *got;
    uint8_t hdr[128], small[16], zeros[1000] = {0};
    struct iovec iov[4], riov[4];
    size_t iovcnt = 0, used = 0, hlen;
    uint64_t frame_len = 0;
    int rc;

    /*
     * Without DATASUM the encoder never reads the data: it only points an
     * iovec at it, so a dummy pointer stands in for 5 GiB.
     */
    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_PUT;
    f.args.queue.queue = STR("q");
    f.blocks = &blk;
    f.block_count = 1;
    rc = scimq_proto_encode(&f, hdr, sizeof(hdr), iov, 4, &iovcnt, &frame_len);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL_FATAL(iovcnt, 2);
    hlen = iov[0].iov_len;
    CU_ASSERT_EQUAL(hlen, 40 + 3 + 12 + 3);
    CU_ASSERT_PTR_EQUAL(iov[1].iov_base, &dummy);
    CU_ASSERT_EQUAL(iov[1].iov_len, big);
    CU_ASSERT_EQUAL(frame_len, hlen + big);
    CU_ASSERT_EQUAL(wire_get64(hdr + OFF_PAYLOAD_LEN), big);

    /* Over the default 1 GiB limit. */
    expect_error(hdr, hlen, NULL, SCIMQ_EPROTO_TOOBIG);

    /* Within a raised limit: the header is accepted. */
    lim.max_payload_len = 8ull << 30;
    dec = decoder_new(&lim);
    rc = scimq_proto_decoder_feed(dec, hdr, hlen, &used);
    CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_HEADER_READY);
    CU_ASSERT_EQUAL(used, hlen);
    got = scimq_proto_decoder_frame(dec);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    CU_ASSERT_EQUAL(got->payload_len, big);
    CU_ASSERT_EQUAL(got->block_count, 1);
    CU_ASSERT_EQUAL(got->blocks[0].len, big);
    CU_ASSERT_EQUAL(scimq_proto_decoder_need(dec), big);

    /* A buffer too small is refused; then discard the payload. */
    CU_ASSERT_EQUAL(scimq_proto_decoder_set_payload(dec, small, sizeof(small)),
                    SCIMQ_ENOBUFS);
    CU_ASSERT_EQUAL(scimq_proto_decoder_set_payload(dec, NULL, 0), 0);
    CU_ASSERT_PTR_NULL(got->blocks[0].data);
    rc = scimq_proto_decoder_feed(dec, zeros, sizeof(zeros), &used);
    CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_NEED_MORE);
    CU_ASSERT_EQUAL(used, sizeof(zeros));
    CU_ASSERT_EQUAL(scimq_proto_decoder_need(dec), big - sizeof(zeros));
    /* Discarded bytes are read into scratch space, a bounded chunk. */
    CU_ASSERT_EQUAL(scimq_proto_decoder_iov(dec, riov, 4), 1);
    CU_ASSERT(riov[0].iov_len > 0 && riov[0].iov_len <= big - sizeof(zeros));
    CU_ASSERT(riov[0].iov_len <= 65536);
    CU_ASSERT_EQUAL(scimq_proto_decoder_advance(dec, 10),
                    SCIMQ_PROTO_NEED_MORE);
    CU_ASSERT_EQUAL(scimq_proto_decoder_need(dec), big - sizeof(zeros) - 10);
    CU_ASSERT_FALSE(scimq_proto_decoder_idle(dec));
    scimq_proto_decoder_destroy(dec);
}

/* Feeds the header of buf and expects HEADER_READY. */
static scimq_proto_decoder_t *
decoder_at_header(const uint8_t *buf, size_t len, size_t *hlen_p)
{
    scimq_proto_decoder_t *dec = decoder_new(NULL);
    size_t used = 0;
    int rc = scimq_proto_decoder_feed(dec, buf, len, &used);

    CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_HEADER_READY);
    CU_ASSERT_EQUAL(used, wire_get32(buf + OFF_HEADER_LEN));
    *hlen_p = used;
    return dec;
}

/*
 * Stage hint: the whole stage after small frames; after a payload of half
 * the stage or more, only what the next header needs (at least 512
 * bytes), so its payload is read straight into its buffer.
 */
static void
test_stage_len(void)
{
    static uint8_t data[40000];
    scimq_proto_block_t blk = {"d", 1, data, sizeof(data)};
    scimq_proto_frame_t f;
    scimq_proto_decoder_t *dec = decoder_new(NULL);
    struct decode_run r = {.style = FEED_WHOLE};
    uint8_t *big, *small;
    size_t big_len, small_len, used = 0;

    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_PUT;
    f.args.queue.queue = STR("q");
    f.blocks = &blk;
    f.block_count = 1;
    big = encode(&f, &big_len);
    blk.len = 100;
    small = encode(&f, &small_len);

    CU_ASSERT_EQUAL(scimq_proto_decoder_stage_len(dec, 65536), 65536);
    CU_ASSERT_EQUAL(decode_run(dec, small, small_len, &r),
                    SCIMQ_PROTO_FRAME_DONE);
    CU_ASSERT_EQUAL(r.header_ready, 1);
    /* After 100 bytes: the whole stage. */
    CU_ASSERT_EQUAL(scimq_proto_decoder_stage_len(dec, 65536), 65536);

    CU_ASSERT_EQUAL(decode_run(dec, big, big_len, &r), SCIMQ_PROTO_FRAME_DONE);
    CU_ASSERT_EQUAL(r.header_ready, 1);
    /* After 40,000 bytes: 512 of a 64 KiB stage; a 16 KiB stage too
     * (40,000 >= 8 KiB); an 128 KiB stage whole (40,000 < 64 KiB). */
    CU_ASSERT_EQUAL(scimq_proto_decoder_stage_len(dec, 65536), 512);
    CU_ASSERT_EQUAL(scimq_proto_decoder_stage_len(dec, 16384), 512);
    CU_ASSERT_EQUAL(scimq_proto_decoder_stage_len(dec, 131072), 131072);
    CU_ASSERT_EQUAL(scimq_proto_decoder_stage_len(dec, 100), 100);
    /* Part of the next fixed header in: still 512 (the rest of it and a
     * typical header's worth). */
    CU_ASSERT_EQUAL(scimq_proto_decoder_feed(dec, small, 10, &used),
                    SCIMQ_PROTO_NEED_MORE);
    CU_ASSERT_EQUAL(scimq_proto_decoder_stage_len(dec, 65536), 512);
    /* The small frame done: the whole stage again. */
    CU_ASSERT_EQUAL(decode_run(dec, small + 10, small_len - 10, &r),
                    SCIMQ_PROTO_FRAME_DONE);
    CU_ASSERT_EQUAL(r.header_ready, 1);
    CU_ASSERT_EQUAL(scimq_proto_decoder_stage_len(dec, 65536), 65536);
    free(big);
    free(small);
    scimq_proto_decoder_destroy(dec);
}

static void
test_payload_destination(void)
{
    const uint64_t plen = BLOCK0_LEN + BLOCK1_LEN;
    scimq_proto_block_t blocks[TEST_BLOCKS];
    scimq_proto_frame_t f;
    scimq_proto_decoder_t *dec;
    const scimq_proto_frame_t *got;
    struct iovec iov[2];
    uint8_t *buf, dest[BLOCK0_LEN + BLOCK1_LEN];
    size_t len, hlen, used = 99;
    int rc;

    build_frame(SCIMQ_PROTO_OP_DELIVER, SCIMQ_PROTO_F_DATASUM, &f, blocks);
    buf = encode(&f, &len);

    /* No header yet: nowhere to put a payload. */
    dec = decoder_new(NULL);
    CU_ASSERT_EQUAL(scimq_proto_decoder_set_payload(dec, dest, plen),
                    SCIMQ_ESTATE);
    CU_ASSERT_EQUAL(scimq_proto_decoder_alloc_payload(dec), SCIMQ_ESTATE);
    CU_ASSERT_PTR_NULL(scimq_proto_decoder_frame(dec));
    scimq_proto_decoder_destroy(dec);

    dec = decoder_at_header(buf, len, &hlen);
    /* The header is known, the data is not placed yet. */
    got = scimq_proto_decoder_frame(dec);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    CU_ASSERT_EQUAL(got->request_id, f.request_id);
    CU_ASSERT_EQUAL(got->args.deliver.msg_id, f.args.deliver.msg_id);
    CU_ASSERT_EQUAL(got->payload_len, plen);
    for (uint32_t i = 0; i < got->block_count; i++) {
        CU_ASSERT_PTR_NULL(got->blocks[i].data);
    }
    /* Feeding before choosing a destination is a usage error, not fatal. */
    rc = scimq_proto_decoder_feed(dec, buf + hlen, len - hlen, &used);
    CU_ASSERT_EQUAL(rc, SCIMQ_ESTATE);
    CU_ASSERT_EQUAL(used, 0);
    CU_ASSERT_EQUAL(scimq_proto_decoder_iov(dec, iov, 2), 0);
    CU_ASSERT_EQUAL(scimq_proto_decoder_advance(dec, 0), SCIMQ_ESTATE);
    CU_ASSERT_EQUAL(scimq_proto_decoder_need(dec), plen + 4);
    CU_ASSERT_EQUAL(scimq_proto_decoder_set_payload(dec, dest, plen - 1),
                    SCIMQ_ENOBUFS);
    CU_ASSERT_EQUAL(scimq_proto_decoder_set_payload(dec, dest, plen), 0);
    /* Only once. */
    CU_ASSERT_EQUAL(scimq_proto_decoder_set_payload(dec, dest, plen),
                    SCIMQ_ESTATE);
    CU_ASSERT_EQUAL(scimq_proto_decoder_alloc_payload(dec), SCIMQ_ESTATE);
    CU_ASSERT_PTR_EQUAL(got->blocks[0].data, dest);
    CU_ASSERT_PTR_EQUAL(got->blocks[1].data, dest + BLOCK0_LEN);
    rc = scimq_proto_decoder_feed(dec, buf + hlen, len - hlen, &used);
    CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_FRAME_DONE);
    CU_ASSERT_EQUAL(used, len - hlen);
    check_frame(&f, scimq_proto_decoder_frame(dec));
    scimq_proto_decoder_destroy(dec);

    /* A discarded payload is still checksummed. */
    dec = decoder_at_header(buf, len, &hlen);
    CU_ASSERT_EQUAL(scimq_proto_decoder_set_payload(dec, NULL, 0), 0);
    rc = scimq_proto_decoder_feed(dec, buf + hlen, len - hlen, &used);
    CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_FRAME_DONE);
    CU_ASSERT_EQUAL(used, len - hlen);
    got = scimq_proto_decoder_frame(dec);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    CU_ASSERT_PTR_NULL(got->blocks[0].data);
    scimq_proto_decoder_destroy(dec);

    buf[hlen + 3] ^= 0x10;
    dec = decoder_at_header(buf, len, &hlen);
    CU_ASSERT_EQUAL(scimq_proto_decoder_set_payload(dec, NULL, 0), 0);
    rc = scimq_proto_decoder_feed(dec, buf + hlen, len - hlen, &used);
    CU_ASSERT_EQUAL(rc, SCIMQ_EPROTO_DATASUM);
    scimq_proto_decoder_destroy(dec);
    free(buf);
}

/* ======================================================================== */
/* Encoder errors and layout, decoder odds and ends                          */
/* ======================================================================== */

/* Expects the same error from all three encoder entry points. */
static void
expect_encode_error(const scimq_proto_frame_t *f, int want)
{
    uint8_t hdr[256], *buf = NULL;
    struct iovec iov[8];
    size_t hlen = 0, iovcnt = 0, len = 0;

    CU_ASSERT_EQUAL(scimq_proto_encode_size(f, &hlen, &iovcnt), want);
    CU_ASSERT_EQUAL(
        scimq_proto_encode(f, hdr, sizeof(hdr), iov, 8, &iovcnt, NULL), want);
    CU_ASSERT_EQUAL(scimq_proto_encode_alloc(f, &buf, &len), want);
    CU_ASSERT_PTR_NULL(buf);
}

static void
test_encode_errors(void)
{
    static uint8_t d[4];
    scimq_proto_block_t blocks[TEST_BLOCKS];
    scimq_proto_block_t blk;
    scimq_proto_frame_t f;
    char *long1, *long2;

    /* Unknown opcodes. */
    memset(&f, 0, sizeof(f));
    f.opcode = 0;
    expect_encode_error(&f, SCIMQ_EPROTO_OPCODE);
    f.opcode = 9;
    expect_encode_error(&f, SCIMQ_EPROTO_OPCODE);
    f.opcode = 255;
    expect_encode_error(&f, SCIMQ_EPROTO_OPCODE);

    /* Unknown flag, CONFIRM outside PUT, BROADCAST outside PUT/DELIVER. */
    build_frame(SCIMQ_PROTO_OP_PUT, 1u << 3, &f, blocks);
    expect_encode_error(&f, SCIMQ_EPROTO_FLAGS);
    build_frame(SCIMQ_PROTO_OP_GET, SCIMQ_PROTO_F_BROADCAST, &f, blocks);
    expect_encode_error(&f, SCIMQ_EPROTO_FLAGS);
    build_frame(SCIMQ_PROTO_OP_DELIVER, SCIMQ_PROTO_F_CONFIRM, &f, blocks);
    expect_encode_error(&f, SCIMQ_EPROTO_FLAGS);

    /* Blocks on an opcode that has none. */
    build_frame(SCIMQ_PROTO_OP_PUT, 0, &f, blocks);
    f.opcode = SCIMQ_PROTO_OP_EOS;
    expect_encode_error(&f, SCIMQ_EPROTO_BLOCKS);

    /* Args over 65535 bytes: two strings of 40000 bytes. */
    long1 = calloc(1, 40000);
    long2 = calloc(1, 40000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(long1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(long2);
    build_frame(SCIMQ_PROTO_OP_QUEUE_DECLARE, 0, &f, blocks);
    f.args.declare.queue = (scimq_proto_str_t){long1, 40000};
    f.args.declare.dead_letter = (scimq_proto_str_t){long2, 40000};
    expect_encode_error(&f, SCIMQ_EPROTO_ARGS);
    /* One of them alone fits. */
    f.args.declare.dead_letter = STR("");
    {
        uint8_t *buf = NULL;
        size_t len = 0;

        CU_ASSERT_EQUAL(scimq_proto_encode_alloc(&f, &buf, &len), 0);
        CU_ASSERT_EQUAL(len, 40 + 1 + 4 + 4 + 8 + 2 + 40000 + 2);
        free(buf);
    }
    free(long2);
    free(long1);

    /* The encoder refuses what the decoder would refuse. */
    build_frame(SCIMQ_PROTO_OP_NACK, 0, &f, blocks);
    f.args.nack.requeue = 2;
    expect_encode_error(&f, SCIMQ_EPROTO_ARGS);
    build_frame(SCIMQ_PROTO_OP_WELCOME, 0, &f, blocks);
    f.args.welcome.auth_required = 2;
    expect_encode_error(&f, SCIMQ_EPROTO_ARGS);
    build_frame(SCIMQ_PROTO_OP_QUEUE_DECLARE, 0, &f, blocks);
    f.args.declare.kind = 0x40; /* durability 4 (kind | durability << 4) */
    expect_encode_error(&f, SCIMQ_EPROTO_ARGS);
    build_frame(SCIMQ_PROTO_OP_HELLO, 0, &f, blocks);
    f.args.hello.stream_index = f.args.hello.stream_count;
    expect_encode_error(&f, SCIMQ_EPROTO_ARGS);
    f.args.hello.stream_index = 0;
    f.args.hello.stream_count = 0;
    expect_encode_error(&f, SCIMQ_EPROTO_ARGS);
    f.args.hello.stream_count = 1;
    f.args.hello.version_min = 2;
    f.args.hello.version_max = 1;
    expect_encode_error(&f, SCIMQ_EPROTO_ARGS);

    /* Missing memory behind a non-zero length. */
    build_frame(SCIMQ_PROTO_OP_PUT, 0, &f, blocks);
    blocks[0].data = NULL;
    expect_encode_error(&f, SCIMQ_EINVAL);
    build_frame(SCIMQ_PROTO_OP_PUT, 0, &f, blocks);
    blocks[2].name = NULL;
    expect_encode_error(&f, SCIMQ_EINVAL);
    build_frame(SCIMQ_PROTO_OP_PUT, 0, &f, blocks);
    f.blocks = NULL;
    expect_encode_error(&f, SCIMQ_EINVAL);
    build_frame(SCIMQ_PROTO_OP_PUT, 0, &f, blocks);
    f.args.queue.queue.ptr = NULL;
    expect_encode_error(&f, SCIMQ_EINVAL);
    expect_encode_error(NULL, SCIMQ_EINVAL);

    /* Block lengths whose sum overflows 64 bits. */
    memset(&f, 0, sizeof(f));
    f.opcode = SCIMQ_PROTO_OP_PUT;
    blocks[0] = (scimq_proto_block_t){NULL, 0, d, 1ull << 63};
    blocks[1] = (scimq_proto_block_t){NULL, 0, d, 1ull << 63};
    f.blocks = blocks;
    f.block_count = 2;
    expect_encode_error(&f, SCIMQ_EOVERFLOW);

    /* A header over the 16 MiB ceiling (the name is never read). */
    blk = (scimq_proto_block_t){(const char *) d, SCIMQ_PROTO_MAX_HEADER_CAP, d,
                                1};
    f.blocks = &blk;
    f.block_count = 1;
    expect_encode_error(&f, SCIMQ_EPROTO_HDRLEN);
}

static void
test_encode_buffers(void)
{
    scimq_proto_block_t blocks[TEST_BLOCKS];
    scimq_proto_frame_t f;
    uint8_t *hdr, *whole;
    struct iovec iov[8];
    size_t hlen, niov, iovcnt = 0, wlen;
    uint64_t frame_len = 0;

    build_frame(SCIMQ_PROTO_OP_PUT, SCIMQ_PROTO_F_DATASUM, &f, blocks);
    CU_ASSERT_EQUAL(scimq_proto_encode_size(&f, &hlen, &niov), 0);
    /* Header + trailer; header + two non-empty blocks + trailer. */
    CU_ASSERT_EQUAL(hlen, 40 + 13 + 3 * 12 + 10 + 4);
    CU_ASSERT_EQUAL(niov, 4);
    CU_ASSERT_EQUAL(scimq_proto_encode_size(&f, NULL, NULL), 0);
    hdr = malloc(hlen);
    CU_ASSERT_PTR_NOT_NULL_FATAL(hdr);

    /* One byte or one iovec short is refused. */
    CU_ASSERT_EQUAL(
        scimq_proto_encode(&f, hdr, hlen - 1, iov, niov, &iovcnt, NULL),
        SCIMQ_ENOBUFS);
    CU_ASSERT_EQUAL(
        scimq_proto_encode(&f, hdr, hlen, iov, niov - 1, &iovcnt, NULL),
        SCIMQ_ENOBUFS);
    CU_ASSERT_EQUAL(
        scimq_proto_encode(&f, NULL, hlen, iov, niov, &iovcnt, NULL),
        SCIMQ_ENOBUFS);
    CU_ASSERT_EQUAL(
        scimq_proto_encode(&f, hdr, hlen, NULL, niov, &iovcnt, NULL),
        SCIMQ_ENOBUFS);

    /* Exactly the sizes encode_size() gave are enough. */
    CU_ASSERT_EQUAL_FATAL(
        scimq_proto_encode(&f, hdr, hlen, iov, niov, &iovcnt, &frame_len), 0);
    CU_ASSERT_EQUAL_FATAL(iovcnt, niov);
    CU_ASSERT_PTR_EQUAL(iov[0].iov_base, hdr);
    CU_ASSERT_EQUAL(iov[0].iov_len, hlen - 4);
    /* No copy: the iovecs are the caller's block buffers. */
    CU_ASSERT_PTR_EQUAL(iov[1].iov_base, block0_data);
    CU_ASSERT_EQUAL(iov[1].iov_len, BLOCK0_LEN);
    CU_ASSERT_PTR_EQUAL(iov[2].iov_base, block1_data);
    CU_ASSERT_EQUAL(iov[2].iov_len, BLOCK1_LEN);
    CU_ASSERT_PTR_EQUAL(iov[3].iov_base, hdr + hlen - 4);
    CU_ASSERT_EQUAL(iov[3].iov_len, 4);
    CU_ASSERT_EQUAL(
        wire_get32(hdr + hlen - 4),
        scimq_proto_crc32c(scimq_proto_crc32c(0, block0_data, BLOCK0_LEN),
                           block1_data, BLOCK1_LEN));
    CU_ASSERT_EQUAL(frame_len, hlen + BLOCK0_LEN + BLOCK1_LEN);

    /* The iovecs, end to end, are what encode_alloc() produces. */
    whole = encode(&f, &wlen);
    CU_ASSERT_EQUAL_FATAL(wlen, frame_len);
    {
        size_t off = 0;

        for (size_t i = 0; i < iovcnt; i++) {
            CU_ASSERT_EQUAL(
                memcmp(whole + off, iov[i].iov_base, iov[i].iov_len), 0);
            off += iov[i].iov_len;
        }
        CU_ASSERT_EQUAL(off, wlen);
    }
    free(whole);

    /* Without DATASUM: no trailer, one iovec less. */
    f.flags = 0;
    CU_ASSERT_EQUAL(scimq_proto_encode_size(&f, &hlen, &niov), 0);
    CU_ASSERT_EQUAL(hlen, 40 + 13 + 3 * 12 + 10);
    CU_ASSERT_EQUAL(niov, 3);
    CU_ASSERT_EQUAL(scimq_proto_encode(&f, hdr, hlen, iov, 8, &iovcnt, NULL),
                    0);
    CU_ASSERT_EQUAL(iovcnt, 3);
    free(hdr);

    /* encode_size() agrees with encode() for every opcode. */
    for (unsigned int op = 1; op <= 255; op++) {
        uint8_t buf[512];
        uint64_t total = 0;

        if (scimq_proto_opcode_name(op) == NULL)
            continue;
        build_frame(op, SCIMQ_PROTO_F_DATASUM, &f, blocks);
        CU_ASSERT_EQUAL(scimq_proto_encode_size(&f, &hlen, &niov), 0);
        CU_ASSERT_EQUAL_FATAL(
            scimq_proto_encode(&f, buf, sizeof(buf), iov, 8, &iovcnt, &total),
            0);
        CU_ASSERT_EQUAL(iovcnt, niov);
        CU_ASSERT_EQUAL(iov[0].iov_len + 4, hlen);
        CU_ASSERT_EQUAL(total, hlen + frame_payload_len(&f));
    }
}

/*
 * Feeds a frame in chunks of every size, through feed() and through
 * iovecs limited to the chunk (a short readv()), so that chunk edges fall
 * on every byte, including inside the payload/trailer boundary.
 */
/*
 * Decodes buf (one frame) in chunks of chunk bytes into dest, by feed or
 * by iovec (at most iov_max at a time); returns the last result, and in
 * *off_p the bytes taken.
 */
static int
decode_in_chunks(scimq_proto_decoder_t *dec, const uint8_t *buf, size_t len,
                 size_t chunk, bool via_iov, size_t iov_max, uint8_t *dest,
                 size_t cap, size_t *off_p)
{
    size_t off = 0;
    int rc = SCIMQ_PROTO_NEED_MORE;

    while (off < len && rc >= 0 && rc != SCIMQ_PROTO_FRAME_DONE) {
        size_t n = len - off < chunk ? len - off : chunk, used = 0;

        if (via_iov) {
            struct iovec iov[2];
            size_t niov = scimq_proto_decoder_iov(dec, iov, iov_max);

            for (size_t i = 0; i < niov && used < n; i++) {
                size_t k =
                    n - used < iov[i].iov_len ? n - used : iov[i].iov_len;

                memcpy(iov[i].iov_base, buf + off + used, k);
                used += k;
            }
            rc = scimq_proto_decoder_advance(dec, used);
        } else {
            rc = scimq_proto_decoder_feed(dec, buf + off, n, &used);
        }
        off += used;
        if (rc == SCIMQ_PROTO_HEADER_READY) {
            CU_ASSERT_EQUAL(scimq_proto_decoder_set_payload(dec, dest, cap), 0);
            rc = SCIMQ_PROTO_NEED_MORE;
        }
    }
    *off_p = off;
    return rc;
}

static void
test_chunked(void)
{
    scimq_proto_block_t blocks[TEST_BLOCKS];
    scimq_proto_frame_t f;
    uint8_t *buf, dest[BLOCK0_LEN + BLOCK1_LEN];
    size_t len;

    build_frame(SCIMQ_PROTO_OP_PUT, SCIMQ_PROTO_F_DATASUM, &f, blocks);
    buf = encode(&f, &len);
    for (size_t chunk = 1; chunk <= len; chunk++) {
        for (unsigned int via_iov = 0; via_iov < 2; via_iov++) {
            scimq_proto_decoder_t *dec = decoder_new(NULL);
            size_t off;
            /* One iovec at a time when chunk is odd. */
            int rc =
                decode_in_chunks(dec, buf, len, chunk, via_iov != 0,
                                 (chunk & 1) ? 1 : 2, dest, sizeof(dest), &off);

            CU_ASSERT_EQUAL(rc, SCIMQ_PROTO_FRAME_DONE);
            CU_ASSERT_EQUAL(off, len);
            check_frame(&f, scimq_proto_decoder_frame(dec));
            scimq_proto_decoder_destroy(dec);
        }
    }
    free(buf);
}

/* Decodes buf (one PUT) in chunks; the decoder's payload CRC at the end. */
static uint32_t
payload_crc_of(const uint8_t *buf, size_t len, size_t chunk, bool via_iov,
               bool always, uint8_t *dest, size_t cap)
{
    scimq_proto_decoder_t *dec = decoder_new(NULL);
    size_t off;
    uint32_t crc;

    scimq_proto_decoder_set_payload_crc(dec, always);
    CU_ASSERT_EQUAL(
        decode_in_chunks(dec, buf, len, chunk, via_iov, 2, dest, cap, &off),
        SCIMQ_PROTO_FRAME_DONE);
    crc = scimq_proto_decoder_payload_crc(dec);
    scimq_proto_decoder_destroy(dec);
    return crc;
}

/*
 * set_payload_crc: the payload's CRC32C, taken as it arrives, with or
 * without DATASUM, whatever the chunks; without it and without DATASUM, 0.
 */
static void
test_payload_crc(void)
{
    static const uint16_t flag_sets[] = {0, SCIMQ_PROTO_F_DATASUM};
    scimq_proto_block_t blocks[TEST_BLOCKS];
    scimq_proto_frame_t f;
    uint8_t *buf, dest[BLOCK0_LEN + BLOCK1_LEN];
    static const size_t chunks[] = {1, 7, 64, 100000};
    size_t len;

    for (size_t k = 0; k < 2; k++) {
        uint32_t want;

        build_frame(SCIMQ_PROTO_OP_PUT, flag_sets[k], &f, blocks);
        buf = encode(&f, &len);
        for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
            for (int via_iov = 0; via_iov < 2; via_iov++) {
                memset(dest, 0, sizeof(dest));
                CU_ASSERT_EQUAL(payload_crc_of(buf, len, chunks[c],
                                               via_iov != 0, true, dest,
                                               sizeof(dest)),
                                scimq_proto_crc32c(0, dest, sizeof(dest)));
                want = flag_sets[k] != 0
                           ? scimq_proto_crc32c(0, dest, sizeof(dest))
                           : 0;
                CU_ASSERT_EQUAL(payload_crc_of(buf, len, chunks[c],
                                               via_iov != 0, false, dest,
                                               sizeof(dest)),
                                want);
            }
        }
        /* The bytes are the frame's (not zeros): the CRC is not of
         * nothing. */
        CU_ASSERT_NOT_EQUAL(scimq_proto_crc32c(0, dest, sizeof(dest)),
                            scimq_proto_crc32c(0, NULL, 0));
        free(buf);
    }
}

static void
test_advance_misuse(void)
{
    scimq_proto_decoder_t *dec = decoder_new(NULL);
    struct iovec iov[2];
    size_t niov;

    /* Reporting more bytes than the iovecs held is refused, not fatal. */
    niov = scimq_proto_decoder_iov(dec, iov, 2);
    CU_ASSERT_EQUAL(niov, 1);
    CU_ASSERT_EQUAL(iov[0].iov_len, SCIMQ_PROTO_FIXED_LEN);
    CU_ASSERT_EQUAL(scimq_proto_decoder_advance(dec, 41), SCIMQ_EINVAL);
    CU_ASSERT_EQUAL(scimq_proto_decoder_iov(dec, iov, 0), 0);
    niov = scimq_proto_decoder_iov(dec, iov, 2);
    CU_ASSERT_EQUAL_FATAL(niov, 1);
    memcpy(iov[0].iov_base, golden_ping, 40);
    CU_ASSERT_EQUAL(scimq_proto_decoder_advance(dec, 40),
                    SCIMQ_PROTO_NEED_MORE);
    /* Advancing again without asking for iovecs: nothing was described. */
    CU_ASSERT_EQUAL(scimq_proto_decoder_advance(dec, 1), SCIMQ_EINVAL);
    niov = scimq_proto_decoder_iov(dec, iov, 2);
    CU_ASSERT_EQUAL_FATAL(niov, 1);
    CU_ASSERT_EQUAL(iov[0].iov_len, 8);
    memcpy(iov[0].iov_base, golden_ping + 40, 8);
    CU_ASSERT_EQUAL(scimq_proto_decoder_advance(dec, 8),
                    SCIMQ_PROTO_FRAME_DONE);
    scimq_proto_decoder_destroy(dec);
}

static void
test_request_id(void)
{
    scimq_proto_decoder_t *dec = decoder_new(NULL);
    uint8_t buf[sizeof(golden_ping)];
    uint64_t id = 0;
    size_t used;

    CU_ASSERT_EQUAL(scimq_proto_decoder_request_id(dec, &id), SCIMQ_EAGAIN);
    /* 39 bytes of the fixed header: not known yet. */
    memcpy(buf, golden_ping, sizeof(buf));
    buf[SCIMQ_PROTO_FIXED_LEN] ^= 1; /* break the header checksum */
    CU_ASSERT_EQUAL(scimq_proto_decoder_feed(dec, buf, 39, &used),
                    SCIMQ_PROTO_NEED_MORE);
    CU_ASSERT_EQUAL(scimq_proto_decoder_request_id(dec, &id), SCIMQ_EAGAIN);
    CU_ASSERT_EQUAL(scimq_proto_decoder_feed(dec, buf + 39, 1, &used),
                    SCIMQ_PROTO_NEED_MORE);
    CU_ASSERT_EQUAL(scimq_proto_decoder_request_id(dec, &id), 0);
    CU_ASSERT_EQUAL(id, 0x0102030405060708ull);
    /* The frame fails, and its id is still there for the ERROR reply. */
    CU_ASSERT_EQUAL(scimq_proto_decoder_feed(dec, buf + 40, 8, &used),
                    SCIMQ_EPROTO_HDRSUM);
    id = 0;
    CU_ASSERT_EQUAL(scimq_proto_decoder_request_id(dec, &id), 0);
    CU_ASSERT_EQUAL(id, 0x0102030405060708ull);
    scimq_proto_decoder_reset(dec);
    CU_ASSERT_EQUAL(scimq_proto_decoder_request_id(dec, &id), SCIMQ_EAGAIN);

    /* A fixed-header error (opcode) also leaves the id known. */
    memcpy(buf, golden_ping, sizeof(buf));
    buf[OFF_OPCODE] = 9;
    CU_ASSERT_EQUAL(scimq_proto_decoder_feed(dec, buf, sizeof(buf), &used),
                    SCIMQ_EPROTO_OPCODE);
    CU_ASSERT_EQUAL(scimq_proto_decoder_request_id(dec, &id), 0);
    CU_ASSERT_EQUAL(id, 0x0102030405060708ull);
    scimq_proto_decoder_reset(dec);

    /* Bad magic: no fixed header, no id. */
    CU_ASSERT_EQUAL(scimq_proto_decoder_feed(dec, "X", 1, &used),
                    SCIMQ_EPROTO_MAGIC);
    CU_ASSERT_EQUAL(scimq_proto_decoder_request_id(dec, &id), SCIMQ_EAGAIN);
    scimq_proto_decoder_destroy(dec);
}

static void
test_take_payload(void)
{
    scimq_proto_block_t blocks[TEST_BLOCKS];
    scimq_proto_frame_t f;
    scimq_proto_decoder_t *dec;
    const scimq_proto_frame_t *got;
    uint8_t *buf, dest[BLOCK0_LEN + BLOCK1_LEN];
    void *taken = (void *) 1, *again = (void *) 1;
    size_t len, hlen, used;

    build_frame(SCIMQ_PROTO_OP_PUT, SCIMQ_PROTO_F_DATASUM, &f, blocks);
    buf = encode(&f, &len);

    /* Nothing to take before the frame is done. */
    dec = decoder_at_header(buf, len, &hlen);
    CU_ASSERT_EQUAL(scimq_proto_decoder_alloc_payload(dec), 0);
    scimq_proto_decoder_take_payload(dec, &taken);
    CU_ASSERT_PTR_NULL(taken);
    CU_ASSERT_EQUAL(
        scimq_proto_decoder_feed(dec, buf + hlen, len - hlen, &used),
        SCIMQ_PROTO_FRAME_DONE);
    got = scimq_proto_decoder_frame(dec);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    /* The buffer the blocks point into becomes the caller's, once. */
    scimq_proto_decoder_take_payload(dec, &taken);
    CU_ASSERT_PTR_NOT_NULL_FATAL(taken);
    CU_ASSERT_PTR_EQUAL(taken, got->blocks[0].data);
    scimq_proto_decoder_take_payload(dec, &again);
    CU_ASSERT_PTR_NULL(again);
    scimq_proto_decoder_destroy(dec);
    /* Destroying the decoder left it alone: it is still readable. */
    CU_ASSERT_EQUAL(memcmp(taken, block0_data, BLOCK0_LEN), 0);
    CU_ASSERT_EQUAL(
        memcmp((uint8_t *) taken + BLOCK0_LEN, block1_data, BLOCK1_LEN), 0);
    free(taken);

    /* A fresh decoder has nothing to hand over. */
    dec = decoder_new(NULL);
    again = (void *) 1;
    scimq_proto_decoder_take_payload(dec, &again);
    CU_ASSERT_PTR_NULL(again);
    scimq_proto_decoder_destroy(dec);

    /* A caller's buffer is never the decoder's to hand over. */
    dec = decoder_at_header(buf, len, &hlen);
    CU_ASSERT_EQUAL(scimq_proto_decoder_set_payload(dec, dest, sizeof(dest)),
                    0);
    CU_ASSERT_EQUAL(
        scimq_proto_decoder_feed(dec, buf + hlen, len - hlen, &used),
        SCIMQ_PROTO_FRAME_DONE);
    taken = (void *) 1;
    scimq_proto_decoder_take_payload(dec, &taken);
    CU_ASSERT_PTR_NULL(taken);
    scimq_proto_decoder_destroy(dec);
    free(buf);
}

/* Run under valgrind: none of these may leak the allocated payload. */
static void
test_payload_lifetime(void)
{
    scimq_proto_decoder_t *dec;
    uint8_t *buf, *two;
    size_t len, hlen, used;

    buf = encode_test_frame(SCIMQ_PROTO_OP_PUT, SCIMQ_PROTO_F_DATASUM, &len);

    /* Destroyed in the middle of the payload. */
    dec = decoder_at_header(buf, len, &hlen);
    CU_ASSERT_EQUAL(scimq_proto_decoder_alloc_payload(dec), 0);
    CU_ASSERT_EQUAL(scimq_proto_decoder_feed(dec, buf + hlen, 10, &used),
                    SCIMQ_PROTO_NEED_MORE);
    scimq_proto_decoder_destroy(dec);

    /* Destroyed right after allocating. */
    dec = decoder_at_header(buf, len, &hlen);
    CU_ASSERT_EQUAL(scimq_proto_decoder_alloc_payload(dec), 0);
    scimq_proto_decoder_destroy(dec);

    /* Reset in the middle of the payload, then reused. */
    dec = decoder_at_header(buf, len, &hlen);
    CU_ASSERT_EQUAL(scimq_proto_decoder_alloc_payload(dec), 0);
    CU_ASSERT_EQUAL(scimq_proto_decoder_feed(dec, buf + hlen, 10, &used),
                    SCIMQ_PROTO_NEED_MORE);
    scimq_proto_decoder_reset(dec);
    CU_ASSERT_EQUAL(decode_simple(dec, buf, len, FEED_WHOLE, &used),
                    SCIMQ_PROTO_FRAME_DONE);
    scimq_proto_decoder_destroy(dec);

    /* A payload not taken is freed when the next frame starts. */
    two = malloc(2 * len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(two);
    memcpy(two, buf, len);
    memcpy(two + len, buf, len);
    dec = decoder_new(NULL);
    CU_ASSERT_EQUAL(decode_simple(dec, two, 2 * len, FEED_WHOLE, &used),
                    SCIMQ_PROTO_FRAME_DONE);
    CU_ASSERT_EQUAL(used, len);
    CU_ASSERT_EQUAL(decode_simple(dec, two + len, len, FEED_IOV, &used),
                    SCIMQ_PROTO_FRAME_DONE);
    CU_ASSERT_EQUAL(used, len);
    /* A failed frame with an allocated payload, then destroyed. */
    two[2 * len - 1] ^= 1;
    CU_ASSERT_EQUAL(decode_simple(dec, two + len, len, FEED_BYTES, &used),
                    SCIMQ_EPROTO_DATASUM);
    scimq_proto_decoder_destroy(dec);
    free(two);
    free(buf);
}

static void
test_create_limits(void)
{
    scimq_proto_limits_t lim;
    scimq_proto_decoder_t *dec = NULL;
    uint8_t bye[40] = {0x53, 0x43, 0x4d, 0x50, 0x01, SCIMQ_PROTO_OP_BYE};

    scimq_proto_limits_default(&lim);
    CU_ASSERT_EQUAL(lim.max_header_len, 65536);
    CU_ASSERT_EQUAL(lim.max_blocks, 256);
    CU_ASSERT_EQUAL(lim.max_name_len, 255);
    CU_ASSERT_EQUAL(lim.max_payload_len, 1ull << 30);

    lim.max_header_len = SCIMQ_PROTO_FIXED_LEN - 1;
    CU_ASSERT_EQUAL(scimq_proto_decoder_create(&lim, &dec), SCIMQ_EINVAL);
    CU_ASSERT_PTR_NULL(dec);
    lim.max_header_len = 0;
    CU_ASSERT_EQUAL(scimq_proto_decoder_create(&lim, &dec), SCIMQ_EINVAL);
    lim.max_header_len = SCIMQ_PROTO_MAX_HEADER_CAP + 1;
    CU_ASSERT_EQUAL(scimq_proto_decoder_create(&lim, &dec), SCIMQ_EINVAL);
    CU_ASSERT_PTR_NULL(dec);
    CU_ASSERT_EQUAL(scimq_proto_decoder_create(NULL, NULL), SCIMQ_EINVAL);

    lim.max_header_len = SCIMQ_PROTO_MAX_HEADER_CAP;
    CU_ASSERT_EQUAL(scimq_proto_decoder_create(&lim, &dec), 0);
    scimq_proto_decoder_destroy(dec);
    scimq_proto_decoder_destroy(NULL);

    /* The smallest decoder takes a bare fixed header and nothing more. */
    lim.max_header_len = SCIMQ_PROTO_FIXED_LEN;
    patch(bye, OFF_HEADER_LEN, 4, SCIMQ_PROTO_FIXED_LEN);
    reseal(bye, sizeof(bye));
    CU_ASSERT_EQUAL(decode_with(&lim, bye, sizeof(bye)),
                    SCIMQ_PROTO_FRAME_DONE);
    CU_ASSERT_EQUAL(decode_with(&lim, golden_ping, sizeof(golden_ping)),
                    SCIMQ_EPROTO_HDRLEN);
}

/* ======================================================================== */
/* Suites                                                                    */
/* ======================================================================== */

static const struct scimq_cunit_test basic_tests[] = {
    {"CRC32C known answer and chaining", test_crc32c, 1},
    {"golden PING (doc/scimp.md 9.1)", test_golden_ping, 1},
    {"test vectors of doc/scimp.md 9.2-9.4", test_spec_vectors, 1},
    {"opcode names and block rules", test_opcode_table, 1},
    {"LIMIT args of exact length", test_args_limit, 1},
    {"round trip of every opcode", test_roundtrip_all, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_test decode_tests[] = {
    {"round trip in every feeding style, with and without DATASUM",
     test_roundtrip_styles, 1},
    {"frames back to back in one buffer", test_back_to_back, 1},
    {"no HEADER_READY without payload", test_header_ready_needs_payload, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_test malformed_tests[] = {
    {"test checksum helper agrees with the encoder",
     test_reseal_matches_encoder, 1},
    {"bad magic", test_bad_magic, 1},
    {"bad version", test_bad_version, 1},
    {"unknown opcode", test_bad_opcode, 1},
    {"unknown and misplaced flags", test_bad_flags, 1},
    {"reserved field not zero", test_reserved, 1},
    {"block count over limit or not allowed", test_block_count, 1},
    {"payload over limit, payload without blocks", test_payload_limit, 1},
    {"header length out of range", test_header_len, 1},
    {"block names over limit or misplaced", test_name_len, 1},
    {"header checksum mismatch", test_header_sum, 1},
    {"payload checksum mismatch", test_data_sum, 1},
    {"block lengths not adding up", test_block_lengths, 1},
    {"block lengths wrapping around 2^64", test_lengths_wrap, 1},
    {"block count 2^32-1 refused before allocation", test_huge_block_count, 1},
    {"args truncated or with trailing bytes", test_args_size, 1},
    {"args strings running past the end", test_args_string, 1},
    {"enum args out of range", test_args_enum, 1},
    {"HELLO stream and version checks", test_args_hello, 1},
    {"range frames: vector, one encoding, limits", test_args_ranges, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_test boundary_tests[] = {
    {"every prefix needs more, need() and idle() exact", test_every_prefix, 1},
    {"frames without blocks", test_zero_blocks, 1},
    {"block name of exactly the limit", test_name_boundary, 1},
    {"header of exactly the limit", test_header_boundary, 1},
    {"payload over 4 GiB: limit, discard", test_huge_payload, 1},
    {"stage hint after large and small payloads", test_stage_len, 1},
    {"payload destination: ESTATE, ENOBUFS, discard", test_payload_destination,
     1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_test misc_tests[] = {
    {"encoder errors", test_encode_errors, 1},
    {"encoder buffers, sizes and zero-copy iovecs", test_encode_buffers, 1},
    {"chunks of every size, by feed and by iovec", test_chunked, 1},
    {"the payload's CRC without DATASUM (set_payload_crc)", test_payload_crc,
     1},
    {"advance without matching iovecs", test_advance_misuse, 1},
    {"request id of the frame in progress", test_request_id, 1},
    {"take_payload hands over ownership", test_take_payload, 1},
    {"allocated payloads freed on destroy, reset, next frame",
     test_payload_lifetime, 1},
    {"decoder limits at creation", test_create_limits, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_suite suites[] = {
    {"proto_basic", NULL, NULL, basic_tests},
    {"proto_decode", NULL, NULL, decode_tests},
    {"proto_malformed", NULL, NULL, malformed_tests},
    {"proto_boundaries", NULL, NULL, boundary_tests},
    {"proto_misc", NULL, NULL, misc_tests},
    {NULL, NULL, NULL, NULL}};

SCIMQ_CUNIT_MAIN(suites)
