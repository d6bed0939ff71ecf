/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The journal's record codec, and recovery of crafted journal directories
 * into the real broker: what is kept, what is settled, what a damaged
 * record costs.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <scimq/error.h>

#include "cunit_main.h"
#include "gateway/broker.h"
#include "gateway/journal.h"
#include "gateway/journal_codec.h"
#include "gateway/journal_segment.h"
#include "gateway/records.h"
#include "gateway/recovery.h"

/* The segment the records of the codec tests are in, and the journal's
 * salt (format 5's CRC covers the segment's seal, made of both). */
#define TEST_SEG 1u
#define TEST_SALT UINT64_C(0x5eed5a175eed5a17)
#define TEST_SEAL gw_jrec_seal(TEST_SALT, TEST_SEG)

static uint8_t *
encode(uint64_t seg, const struct gw_jrec *r, const void *data, size_t *len)
{
    size_t hlen = gw_jrec_header_len(r);
    uint8_t *buf = calloc(1, hlen + r->data_len);

    gw_jrec_encode(r, buf);
    gw_jrec_set_crc(buf, gw_jrec_crc(buf, hlen, data, r->data_len,
                                     gw_jrec_seal(TEST_SALT, seg)));
    if (r->data_len > 0)
        memcpy(buf + hlen, data, r->data_len);
    *len = hlen + r->data_len;
    return buf;
}

static struct gw_jrec
msg_rec(uint64_t payload_id, const struct gw_jrec_target *t, uint16_t n,
        const struct gw_jrec_block *blocks, uint32_t nb, uint64_t len)
{
    struct gw_jrec r = {.type = GW_JREC_MSG};

    r.payload_id = payload_id;
    r.target = t;
    r.n_targets = n;
    r.blocks = blocks;
    r.block_count = nb;
    r.data_len = len;
    return r;
}

static struct gw_jrec
small_rec(enum gw_jrec_type type, uint64_t qid, uint64_t msg_id,
          uint64_t payload_id, uint32_t attempt)
{
    struct gw_jrec r = {.type = type};

    r.one.qid = qid;
    r.one.msg_id = msg_id;
    r.payload_id = payload_id;
    r.attempt = attempt;
    return r;
}

/* A big-endian u64, as the codec writes it. */
static void
wire_put64_test(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t) v;
}

/* A record as recovery reads it in segment seg. */
static int
decode_in(uint64_t seg, const uint8_t *buf, size_t len, struct gw_jrec *r)
{
    uint64_t body;
    uint32_t flen, crc, got;
    uint8_t type, format, seg_be[8];
    int rc;

    if (len < GW_JREC_PREFIX_LEN)
        return SCIMQ_EPROTO;
    rc = gw_jrec_prefix(buf, &body, &flen, &crc, &type, &format);
    if (rc != 0)
        return rc;
    if (body != len - GW_JREC_PREFIX_LEN)
        return SCIMQ_EPROTO;
    /* The CRC's order, by hand: formats 2 and 3 the body as it lies,
     * formats 4 and 5 the data, then the fields; format 5 then the
     * segment number. */
    got = format >= 4
              ? scimq_proto_crc32c(
                    scimq_proto_crc32c(0, buf + GW_JREC_PREFIX_LEN + flen,
                                       (size_t) (body - flen)),
                    buf + GW_JREC_PREFIX_LEN, flen)
              : scimq_proto_crc32c(0, buf + GW_JREC_PREFIX_LEN, (size_t) body);
    wire_put64_test(seg_be, gw_jrec_seal(TEST_SALT, seg));
    if (format >= 5)
        got = scimq_proto_crc32c(got, seg_be, sizeof(seg_be));
    if (got != crc)
        return SCIMQ_EPROTO_DATASUM;
    return gw_jrec_fields(type, format, buf + GW_JREC_PREFIX_LEN, flen, body,
                          r);
}

static int
decode(const uint8_t *buf, size_t len, struct gw_jrec *r)
{
    return decode_in(TEST_SEG, buf, len, r);
}

/* Rewrites the CRC of a whole record after a test changed its body. */
static void
reseal(uint8_t *buf, size_t len)
{
    /* fields length: u32 at 12, big-endian */
    size_t hlen =
        GW_JREC_PREFIX_LEN + ((size_t) buf[12] << 24 | (size_t) buf[13] << 16 |
                              (size_t) buf[14] << 8 | buf[15]);

    gw_jrec_set_crc(buf,
                    gw_jrec_crc(buf, hlen, buf + hlen, len - hlen, TEST_SEAL));
}

/*
 * Format 3 and 4 MSG records carry flags (a control message's payload);
 * format 2 ones, still read, have none.  Format 4 takes the CRC over the
 * data first.  The layout byte of the prefix tells them apart, so that
 * one segment may hold all three.
 */
static void
test_codec_formats(void)
{
    struct gw_jrec_target t = {7, 100, 1};
    struct gw_jrec_block bl = {"run", 3, 4};
    struct gw_jrec r = msg_rec(42, &t, 1, &bl, 1, 4), d;
    size_t len, len2;
    uint8_t *buf, *buf2;

    r.flags = GW_JREC_F_CONTROL;
    buf = encode(TEST_SEG, &r, "HEAD", &len);
    CU_ASSERT(buf[20] == GW_JREC_MSG && buf[21] == GW_JREC_FORMAT);
    /* payload id u64, then flags u16 */
    CU_ASSERT(buf[GW_JREC_PREFIX_LEN + 8] == 0 &&
              buf[GW_JREC_PREFIX_LEN + 9] == 1);
    CU_ASSERT_FATAL(decode(buf, len, &d) == 0);
    CU_ASSERT(d.format == GW_JREC_FORMAT && d.flags == GW_JREC_F_CONTROL);
    /* The same bytes in another segment (a reused file's old record) do
     * not check. */
    CU_ASSERT(decode_in(TEST_SEG + 1, buf, len, &d) == SCIMQ_EPROTO_DATASUM);
    CU_ASSERT(decode_in(TEST_SEG, buf, len, &d) == 0);
    /* Its CRC from the data's, as the journal thread finishes it. */
    CU_ASSERT(gw_jrec_crc_fields(buf, len - 4, scimq_proto_crc32c(0, "HEAD", 4),
                                 TEST_SEAL) ==
              gw_jrec_crc(buf, len - 4, "HEAD", 4, TEST_SEAL));
    CU_ASSERT(d.payload_id == 42 && d.n_targets == 1 && d.data_len == 4);
    CU_ASSERT(gw_jrec_target_at(&d, 0).msg_id == 100);
    CU_ASSERT(gw_jrec_target_at(&d, 0).attempt == 1);
    CU_ASSERT(memcmp(gw_jrec_block_at(&d, 0).name, "run", 3) == 0);
    /* A flag this format does not know: not a record. */
    buf[GW_JREC_PREFIX_LEN + 9] = 0x02;
    reseal(buf, len);
    CU_ASSERT(decode(buf, len, &d) == SCIMQ_EPROTO);
    /* An unknown layout byte: not a record. */
    buf[GW_JREC_PREFIX_LEN + 9] = 0x01;
    buf[21] = GW_JREC_FORMAT + 1;
    reseal(buf, len);
    CU_ASSERT(decode(buf, len, &d) == SCIMQ_EPROTO);
    buf[21] = 1;
    CU_ASSERT(decode(buf, len, &d) == SCIMQ_EPROTO);
    free(buf);

    /* Format 4: the data first, no segment number: it checks in any
     * segment. */
    r.format = 4;
    buf = encode(TEST_SEG, &r, "HEAD", &len);
    CU_ASSERT(buf[21] == 4);
    CU_ASSERT(decode_in(TEST_SEG + 1, buf, len, &d) == 0);
    CU_ASSERT(d.format == 4 && d.flags == GW_JREC_F_CONTROL);
    free(buf);

    /* Format 3: the same fields, the CRC over the fields first. */
    r.format = 3;
    buf = encode(TEST_SEG, &r, "HEAD", &len);
    CU_ASSERT(buf[21] == 3);
    CU_ASSERT_FATAL(decode(buf, len, &d) == 0);
    CU_ASSERT(d.format == 3 && d.flags == GW_JREC_F_CONTROL);
    CU_ASSERT(gw_jrec_crc(buf, len - 4, "HEAD", 4, TEST_SEAL) ==
              scimq_proto_crc32c(0, buf + GW_JREC_PREFIX_LEN,
                                 len - GW_JREC_PREFIX_LEN));
    /* Read as format 4 its CRC does not hold. */
    buf[21] = 4;
    CU_ASSERT(decode(buf, len, &d) == SCIMQ_EPROTO_DATASUM);

    /* The same record in format 2: two bytes shorter, layout byte 0, and
     * decoded without flags. */
    r.format = GW_JREC_FORMAT_MIN;
    buf2 = encode(TEST_SEG, &r, "HEAD", &len2);
    CU_ASSERT(len2 + 2 == len);
    CU_ASSERT(buf2[21] == 0);
    CU_ASSERT(gw_jrec_crc(buf2, len2 - 4, "HEAD", 4, TEST_SEAL) ==
              scimq_proto_crc32c(0, buf2 + GW_JREC_PREFIX_LEN,
                                 len2 - GW_JREC_PREFIX_LEN));
    /* payload id u64, then the target count u16 at once */
    CU_ASSERT(buf2[GW_JREC_PREFIX_LEN + 8] == 0 &&
              buf2[GW_JREC_PREFIX_LEN + 9] == 1);
    CU_ASSERT_FATAL(decode(buf2, len2, &d) == 0);
    CU_ASSERT(d.format == 2 && d.flags == 0);
    CU_ASSERT(d.payload_id == 42 && d.n_targets == 1 && d.data_len == 4);
    CU_ASSERT(gw_jrec_target_at(&d, 0).qid == 7);
    CU_ASSERT(gw_jrec_target_at(&d, 0).msg_id == 100);
    CU_ASSERT(memcmp(gw_jrec_block_at(&d, 0).name, "run", 3) == 0);
    /* Read as format 3 it does not parse (its lengths do not add up). */
    buf2[21] = 3;
    CU_ASSERT(decode(buf2, len2, &d) == SCIMQ_EPROTO);
    free(buf2);
    free(buf);

    /* Small records are the same in both formats. */
    r = small_rec(GW_JREC_SETTLE, 3, 77, 0, 0);
    r.format = GW_JREC_FORMAT_MIN;
    buf = encode(TEST_SEG, &r, NULL, &len);
    r.format = GW_JREC_FORMAT;
    buf2 = encode(TEST_SEG, &r, NULL, &len2);
    CU_ASSERT(len == len2 && buf[21] == 0 && buf2[21] == GW_JREC_FORMAT);
    CU_ASSERT_FATAL(decode(buf, len, &d) == 0);
    CU_ASSERT(d.one.qid == 3 && d.one.msg_id == 77);
    free(buf2);
    free(buf);
}

static void
test_codec(void)
{
    struct gw_jrec_target t[2] = {{7, 100, 0}, {9, 101, 3}};
    struct gw_jrec_block bl[2] = {{"image", 5, 6}, {"", 0, 4}};
    struct gw_jrec r = msg_rec(42, t, 2, bl, 2, 10), d;
    size_t len;
    uint8_t *buf = encode(TEST_SEG, &r, "abcdefghij", &len);

    CU_ASSERT_FATAL(decode(buf, len, &d) == 0);
    CU_ASSERT(d.type == GW_JREC_MSG && d.payload_id == 42);
    CU_ASSERT(d.n_targets == 2 && d.block_count == 2 && d.data_len == 10);
    CU_ASSERT(gw_jrec_target_at(&d, 1).qid == 9);
    CU_ASSERT(gw_jrec_target_at(&d, 1).msg_id == 101);
    CU_ASSERT(gw_jrec_target_at(&d, 1).attempt == 3);
    CU_ASSERT(gw_jrec_block_at(&d, 0).len == 6);
    CU_ASSERT(memcmp(gw_jrec_block_at(&d, 0).name, "image", 5) == 0);
    CU_ASSERT(gw_jrec_block_at(&d, 1).name_len == 0);
    /* Every byte of the body is covered: a flipped data bit is found. */
    buf[len - 1] ^= 1;
    CU_ASSERT(decode(buf, len, &d) == SCIMQ_EPROTO_DATASUM);
    buf[len - 1] ^= 1;
    buf[0] ^= 0xff; /* magic */
    CU_ASSERT(decode(buf, len, &d) == SCIMQ_EPROTO);
    free(buf);

    for (int type = GW_JREC_ENQUEUE; type <= GW_JREC_SETTLE; type++) {
        r = small_rec((enum gw_jrec_type) type, 3, 77, 5, 2);
        buf = encode(TEST_SEG, &r, NULL, &len);
        CU_ASSERT_FATAL(decode(buf, len, &d) == 0);
        CU_ASSERT(d.type == (enum gw_jrec_type) type);
        CU_ASSERT(d.one.qid == 3 && d.one.msg_id == 77);
        if (type != GW_JREC_SETTLE)
            CU_ASSERT(d.attempt == 2);
        if (type == GW_JREC_ENQUEUE)
            CU_ASSERT(d.payload_id == 5);
        /* A record cut short or one byte too long is not a record. */
        CU_ASSERT(decode(buf, len - 1, &d) != 0);
        free(buf);
    }
    /* PAD: zeros under a CRC, bounded. */
    buf = calloc(1, GW_JREC_MAX_PAD + 8);
    gw_jrec_pad(buf, 100, TEST_SEAL);
    CU_ASSERT_FATAL(decode(buf, 100, &d) == 0);
    CU_ASSERT(d.type == GW_JREC_PAD && d.n_targets == 0);
    CU_ASSERT(d.format == GW_JREC_FORMAT);
    CU_ASSERT(decode_in(TEST_SEG + 1, buf, 100, &d) == SCIMQ_EPROTO_DATASUM);
    buf[60] = 1;
    CU_ASSERT(decode(buf, 100, &d) == SCIMQ_EPROTO_DATASUM);
    gw_jrec_pad(buf, GW_JREC_MAX_PAD, TEST_SEAL);
    CU_ASSERT(decode(buf, GW_JREC_MAX_PAD, &d) == 0);
    wire_put64_test(buf + 4, GW_JREC_MAX_PAD); /* one byte too long */
    CU_ASSERT(decode(buf, GW_JREC_MAX_PAD + 1, &d) == SCIMQ_EPROTO);
    free(buf);
    /* Block lengths that do not add up to the data. */
    r = msg_rec(1, t, 1, bl, 2, 11);
    buf = encode(TEST_SEG, &r, "abcdefghijk", &len);
    CU_ASSERT(decode(buf, len, &d) == SCIMQ_EPROTO);
    free(buf);
}

/* ------------------------------------------------------------------------ */

static char dir[64];

static void
put_file(const char *name, const void *data, size_t len, int flags)
{
    char path[256];
    int fd;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fd = open(path, O_WRONLY | O_CREAT | flags, 0600);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_FATAL(write(fd, data, len) == (ssize_t) len);
    close(fd);
}

/* The topology file of one guaranteed queue "in" (qid 1, sync), in the
 * given topology format version. */
static void
put_one_queue_topology(int version)
{
    char topo[512];
    int n = snprintf(topo, sizeof(topo),
                     "{\"version\":%d,\"next_qid\":1,\"queues\":["
                     "{\"qid\":1,\"name\":\"in\",\"kind\":0,"
                     "\"ack_timeout_ms\":5000,\"max_attempts\":0,"
                     "\"max_bytes\":0,\"closed\":false,"
                     "\"durability\":\"sync\"}],\"bindings\":[]}",
                     version);

    CU_ASSERT_FATAL(n > 0 && (size_t) n < sizeof(topo));
    put_file(GW_JOURNAL_TOPOLOGY_FILE, topo, (size_t) n, O_TRUNC);
}

/* The broker settings of the recovery tests: a journal, sync queues. */
static struct gw_broker_settings
journal_settings(void)
{
    struct gw_broker_settings set = {.ack_timeout_ms = 5000,
                                     .memory_limit = 1 << 20,
                                     .chunk_size = 64 << 10,
                                     .journal = true,
                                     .durability = 2};

    return set;
}

/* The journal's salt file, with TEST_SALT. */
static void
put_salt(void)
{
    char text[32];

    snprintf(text, sizeof(text), "%016llx\n", (unsigned long long) TEST_SALT);
    put_file(GW_JOURNAL_SALT_FILE, text, strlen(text), O_TRUNC);
}

static void
append_rec(const char *seg, const struct gw_jrec *r, const void *data)
{
    size_t len;
    uint8_t *buf = encode(strtoull(seg, NULL, 16), r, data, &len);

    put_file(seg, buf, len, O_APPEND);
    free(buf);
}

/* The journal thread's report of an action (it frees the action after):
 * counts the written ones. */
static void
count_done(void *arg, struct gw_action *job, int rc)
{
    (void) job;
    if (rc == 0)
        __atomic_add_fetch((int *) arg, 1, __ATOMIC_SEQ_CST);
}

static const struct gw_queue *
queue_named(struct gw_broker *b, const char *name)
{
    const struct gw_queue *q = NULL;

    HASH_FIND(hh, b->queues, name, strlen(name), q);
    return q;
}

static void
test_recovery(void)
{
    const char *topo =
        "{\"version\":2,\"next_qid\":2,\"queues\":["
        "{\"qid\":1,\"name\":\"in\",\"kind\":0,\"ack_timeout_ms\":5000,"
        "\"max_attempts\":0,\"max_bytes\":0,\"closed\":false,"
        "\"durability\":\"sync\"},"
        "{\"qid\":2,\"name\":\"copy\",\"kind\":0,\"ack_timeout_ms\":5000,"
        "\"max_attempts\":3,\"max_bytes\":0,\"closed\":true,"
        "\"durability\":\"sync\"}],\"bindings\":[[1,2]]}";
    struct gw_broker_settings set = journal_settings();
    struct gw_jrec_target both[2] = {{1, 10, 0}, {2, 11, 0}}, gone = {9, 12, 0};
    struct gw_jrec_block bl = {"d", 1, 4};
    struct gw_recovery_report rep;
    struct gw_actions out = {NULL, NULL};
    struct gw_broker *b;
    struct gw_jrec r;
    struct stat st;
    char path[256];
    struct gw_action *a;
    int drops = 0, topo_rewrites = 0;

    snprintf(dir, sizeof(dir), "/tmp/scimq-journal-test.%ld", (long) getpid());
    mkdir(dir, 0700);
    put_file(GW_JOURNAL_TOPOLOGY_FILE, topo, strlen(topo), O_TRUNC);
    put_salt();
    /* Segment 1: message 10/11 in both queues; a message of a deleted
     * queue; an old message settled everywhere. */
    r = msg_rec(1, both, 2, &bl, 1, 4);
    r.format = GW_JREC_FORMAT_MIN; /* written by a format 2 gateway */
    append_rec("0000000000000001.seg", &r, "AAAA");
    r = msg_rec(2, &gone, 1, &bl, 1, 4);
    r.format = GW_JREC_FORMAT_MIN;
    append_rec("0000000000000001.seg", &r, "BBBB");
    /* Segment 2: 10 is acked in "in", 11 was delivered twice in "copy";
     * message 20 (payload 3) comes and is settled; 21 stays. */
    r = small_rec(GW_JREC_SETTLE, 1, 10, 0, 0);
    append_rec("0000000000000002.seg", &r, NULL);
    r = small_rec(GW_JREC_ATTEMPT, 2, 11, 0, 2);
    append_rec("0000000000000002.seg", &r, NULL);
    {
        struct gw_jrec_target t20 = {1, 20, 0}, t21 = {1, 21, 0};

        r = msg_rec(3, &t20, 1, &bl, 1, 4);
        append_rec("0000000000000002.seg", &r, "CCCC");
        r = small_rec(GW_JREC_SETTLE, 1, 20, 0, 0);
        append_rec("0000000000000002.seg", &r, NULL);
        r = msg_rec(4, &t21, 1, &bl, 1, 4);
        append_rec("0000000000000002.seg", &r, "DDDD");
    }
    /* A torn tail: half a record. */
    {
        struct gw_jrec_target t22 = {1, 22, 0};
        size_t len;
        uint8_t *buf;

        r = msg_rec(5, &t22, 1, &bl, 1, 4);
        buf = encode(2, &r, "EEEE", &len);
        put_file("0000000000000002.seg", buf, len / 2, O_APPEND);
        free(buf);
    }

    /* Segment 3: compaction wrote payload 4 again, message 21 at its
     * fourth attempt; a control message 23 (format 3, after the restart
     * of a format 2 journal). */
    {
        struct gw_jrec_target t21 = {1, 21, 4}, t23 = {1, 23, 0};

        r = msg_rec(4, &t21, 1, &bl, 1, 4);
        append_rec("0000000000000003.seg", &r, "DDDD");
        r = msg_rec(6, &t23, 1, &bl, 1, 4);
        r.flags = GW_JREC_F_CONTROL;
        append_rec("0000000000000003.seg", &r, "FFFF");
    }

    CU_ASSERT_FATAL(gw_broker_new(&set, &b) == 0);
    CU_ASSERT_FATAL(gw_recover(dir, b, &out, &rep) == 0);
    CU_ASSERT(rep.messages == 3); /* 11 in copy, 21 and 23 in in */
    CU_ASSERT(rep.bytes == 12);
    CU_ASSERT(rep.segments == 3);
    CU_ASSERT(rep.truncated_bytes > 0);
    CU_ASSERT(rep.resume.first_seg == 4);
    /* Segment 1 holds records of format 2: its file is never reused. */
    CU_ASSERT(rep.resume.reuse_from == 2);
    CU_ASSERT_FATAL(queue_named(b, "in") != NULL);
    CU_ASSERT_FATAL(queue_named(b, "copy") != NULL);
    CU_ASSERT(queue_named(b, "in")->n_ready == 2);
    CU_ASSERT(queue_named(b, "in")->ready->id == 21);
    CU_ASSERT(queue_named(b, "in")->ready->attempt == 4);
    CU_ASSERT(queue_named(b, "in")->ready->payload->seg == 3);
    CU_ASSERT(!queue_named(b, "in")->ready->payload->control);
    /* The control message is one again, after the data put before it. */
    CU_ASSERT_FATAL(queue_named(b, "in")->ready->next != NULL);
    CU_ASSERT(queue_named(b, "in")->ready->next->id == 23);
    CU_ASSERT(queue_named(b, "in")->ready->next->payload->control);
    CU_ASSERT(queue_named(b, "copy")->n_ready == 1);
    CU_ASSERT(queue_named(b, "copy")->ready->id == 11);
    CU_ASSERT(queue_named(b, "copy")->ready->attempt == 2);
    CU_ASSERT(queue_named(b, "copy")->closed);
    CU_ASSERT(queue_named(b, "copy")->max_attempts == 3);
    CU_ASSERT(queue_named(b, "in")->bindings != NULL &&
              queue_named(b, "in")->bindings->target == queue_named(b, "copy"));
    /* Payloads stay in the journal: nothing in memory. */
    CU_ASSERT(queue_named(b, "copy")->ready->payload->where == GW_PL_DISK);
    CU_ASSERT(queue_named(b, "copy")->ready->payload->seg == 1);
    CU_ASSERT(!queue_named(b, "copy")->ready->payload->control);
    CU_ASSERT(gw_pool_used(&b->store.pool) == 0);
    /* Both segments hold live payloads: none is dropped.  The topology
     * file said format 2: it is written again, saying 5. */
    while ((a = gw_actions_pop(&out)) != NULL) {
        drops += a->kind == GW_ACT_JOURNAL_DROP;
        if (a->kind == GW_ACT_JOURNAL_TOPOLOGY) {
            topo_rewrites++;
            CU_ASSERT(a->text != NULL &&
                      strstr(a->text, "\"version\":5") != NULL);
        }
        gw_action_free(a);
    }
    CU_ASSERT(drops == 0);
    CU_ASSERT(topo_rewrites == 1);
    /* The torn tail was cut off the file. */
    snprintf(path, sizeof(path), "%s/0000000000000002.seg", dir);
    CU_ASSERT(stat(path, &st) == 0 &&
              (uint64_t) st.st_size == b->store.segments->next->bytes);
    /* New messages get new ids (the torn 22 was never confirmed). */
    CU_ASSERT(b->next_msg_id == 23);
    CU_ASSERT(b->store.next_payload_id >= 4);
    gw_broker_free(b);
    unlink(path);
    snprintf(path, sizeof(path), "%s/0000000000000001.seg", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/0000000000000003.seg", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/" GW_JOURNAL_SALT_FILE, dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/" GW_JOURNAL_TOPOLOGY_FILE, dir);
    unlink(path);
    rmdir(dir);
}

/*
 * The segment writer: small records gathered, a large aligned payload
 * written from its own memory on a block boundary, a flush mid-block and a
 * seal; then recovery of what it wrote.
 */
static void
test_segment_writer(void)
{
    struct gw_broker_settings set = journal_settings();
    /* Several MiB, and not a whole number of blocks. */
    const uint64_t big_len = (4u << 20) + 200 * 1024 + 100;
    struct gw_jrec_target t10 = {1, 10, 0}, t11 = {1, 11, 0}, t12 = {1, 12, 0};
    struct gw_jrec_target t13 = {1, 13, 0};
    struct gw_jrec_block bl = {"d", 1, 4}, bbl = {"image", 5, big_len};
    struct gw_recovery_report rep;
    struct gw_actions out = {NULL, NULL};
    uint64_t off_small, off_big, off_last, flushed_size, sealed_size;
    struct gw_jseg w;
    struct gw_broker *b;
    struct gw_action *a;
    struct gw_jrec r;
    struct stat st;
    char path[256], path2[256];
    uint8_t *big, *back;
    void *mem = NULL;
    size_t len;
    uint8_t *hdr;
    int fd;

    snprintf(dir, sizeof(dir), "/var/tmp/scimq-jseg-test.%ld", (long) getpid());
    CU_ASSERT_FATAL(mkdir(dir, 0700) == 0);
    put_one_queue_topology(2);
    put_salt();
    CU_ASSERT_FATAL(posix_memalign(&mem, GW_JSEG_ALIGN, big_len) == 0);
    big = mem;
    for (uint64_t i = 0; i < big_len; i++)
        big[i] = (uint8_t) (i * 7 + 3);
    snprintf(path, sizeof(path), "%s/0000000000000001.seg", dir);
    CU_ASSERT_FATAL(gw_jseg_init(&w) == 0);
    CU_ASSERT_FATAL(
        gw_jseg_open(&w, path, 1, gw_jrec_seal(TEST_SALT, 1), false) == 0);

    r = msg_rec(1, &t10, 1, &bl, 1, 4);
    hdr = encode(TEST_SEG, &r, "AAAA", &len);
    CU_ASSERT(gw_jseg_append(&w, hdr, len - 4, (const uint8_t *) "AAAA", 4,
                             &off_small) == 0);
    CU_ASSERT(off_small == len - 4);
    free(hdr);
    r = msg_rec(2, &t11, 1, &bbl, 1, big_len);
    hdr = encode(TEST_SEG, &r, big, &len);
    CU_ASSERT(gw_jseg_append(&w, hdr, len - big_len, big, big_len, &off_big) ==
              0);
    free(hdr);
    /* With direct I/O the data is written from where it is: it starts on
     * a block boundary, and its last partial block went in the same write,
     * so the record is whole already. */
    if (w.direct) {
        CU_ASSERT(off_big % GW_JSEG_ALIGN == 0);
        CU_ASSERT(w.written == w.size);
    }
    r = small_rec(GW_JREC_SETTLE, 1, 10, 0, 0);
    hdr = encode(TEST_SEG, &r, NULL, &len);
    CU_ASSERT(gw_jseg_append(&w, hdr, len, NULL, 0, &off_last) == 0);
    free(hdr);
    CU_ASSERT(gw_jseg_flush(&w) == 0);
    CU_ASSERT(w.written == w.size);
    flushed_size = w.size;
    CU_ASSERT(stat(path, &st) == 0 && (uint64_t) st.st_size >= w.size);
    r = msg_rec(3, &t12, 1, &bl, 1, 4);
    hdr = encode(TEST_SEG, &r, "CCCC", &len);
    CU_ASSERT(gw_jseg_append(&w, hdr, len - 4, (const uint8_t *) "CCCC", 4,
                             &off_last) == 0);
    CU_ASSERT(off_last == flushed_size + len - 4);
    free(hdr);
    CU_ASSERT(gw_jseg_seal(&w) == 0);
    CU_ASSERT(w.size % GW_JSEG_ALIGN == 0 && w.written == w.size);
    CU_ASSERT(stat(path, &st) == 0 && (uint64_t) st.st_size == w.size);
    sealed_size = w.size;
    /* Direct writes go into space reserved ahead (file systems with
     * O_DIRECT here also have fallocate); closing gives it back. */
    if (w.direct) {
        CU_ASSERT(w.reserved != UINT64_MAX && w.reserved >= GW_JSEG_RESERVE);
        CU_ASSERT((uint64_t) st.st_blocks * 512 >= GW_JSEG_RESERVE);
    }
    gw_jseg_close(&w);
    CU_ASSERT(stat(path, &st) == 0 && (uint64_t) st.st_size == sealed_size);
    CU_ASSERT((uint64_t) st.st_blocks * 512 < GW_JSEG_RESERVE / 2);
    gw_jseg_fini(&w);

    /* The bytes read back where the writer said they are. */
    back = malloc(big_len);
    fd = open(path, O_RDONLY);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT(pread(fd, back, big_len, (off_t) off_big) == (ssize_t) big_len);
    CU_ASSERT(memcmp(back, big, big_len) == 0);
    CU_ASSERT(pread(fd, back, 4, (off_t) off_last) == 4);
    CU_ASSERT(memcmp(back, "CCCC", 4) == 0);
    close(fd);

    /* Recovery reads it whole: 11 and 12 are kept, 10 was settled. */
    CU_ASSERT_FATAL(gw_broker_new(&set, &b) == 0);
    CU_ASSERT_FATAL(gw_recover(dir, b, &out, &rep) == 0);
    CU_ASSERT(rep.messages == 2);
    CU_ASSERT(rep.bytes == big_len + 4);
    CU_ASSERT(rep.truncated_bytes == 0);
    CU_ASSERT_FATAL(queue_named(b, "in") != NULL);
    CU_ASSERT_FATAL(queue_named(b, "in")->n_ready == 2);
    CU_ASSERT(queue_named(b, "in")->ready->id == 11);
    CU_ASSERT(queue_named(b, "in")->ready->payload->off == off_big);
    while ((a = gw_actions_pop(&out)) != NULL)
        gw_action_free(a);
    gw_broker_free(b);

    /* The file reused for segment 2 (a spare, journal.h): its new record
     * is read; the old ones behind it do not check as segment 2's, so
     * recovery after a crash cuts them, and a close cuts them too. */
    snprintf(path2, sizeof(path2), "%s/0000000000000002.seg", dir);
    CU_ASSERT_FATAL(rename(path, path2) == 0);
    CU_ASSERT_FATAL(gw_jseg_init(&w) == 0);
    CU_ASSERT_FATAL(
        gw_jseg_open(&w, path2, 2, gw_jrec_seal(TEST_SALT, 2), true) == 0);
    if (w.direct)
        CU_ASSERT(w.reserved == sealed_size);
    r = msg_rec(4, &t13, 1, &bl, 1, 4);
    hdr = encode(2, &r, "DDDD", &len);
    CU_ASSERT(gw_jseg_append(&w, hdr, len - 4, (const uint8_t *) "DDDD", 4,
                             &off_last) == 0);
    free(hdr);
    CU_ASSERT(gw_jseg_seal(&w) == 0);
    CU_ASSERT(w.size < sealed_size);
    CU_ASSERT(stat(path2, &st) == 0 && (uint64_t) st.st_size == sealed_size);
    CU_ASSERT_FATAL(gw_broker_new(&set, &b) == 0);
    CU_ASSERT_FATAL(gw_recover(dir, b, &out, &rep) == 0);
    CU_ASSERT(rep.messages == 1);
    CU_ASSERT(rep.truncated_bytes == sealed_size - w.size);
    CU_ASSERT_FATAL(queue_named(b, "in") != NULL);
    CU_ASSERT_FATAL(queue_named(b, "in")->n_ready == 1);
    CU_ASSERT(queue_named(b, "in")->ready->id == 13);
    while ((a = gw_actions_pop(&out)) != NULL)
        gw_action_free(a);
    gw_broker_free(b);
    gw_jseg_close(&w);
    CU_ASSERT(stat(path2, &st) == 0 && (uint64_t) st.st_size == w.size);
    gw_jseg_fini(&w);

    /* Segment 2 dropped and kept as a spare, no segment left (a run that
     * wrote nothing after recovery dropped the rest): new segments are
     * numbered above the spare's, so its record never checks again. */
    snprintf(path, sizeof(path), "%s/0000000000000002" GW_JOURNAL_SPARE_SUFFIX,
             dir);
    CU_ASSERT_FATAL(rename(path2, path) == 0);
    CU_ASSERT_FATAL(gw_broker_new(&set, &b) == 0);
    CU_ASSERT_FATAL(gw_recover(dir, b, &out, &rep) == 0);
    CU_ASSERT(rep.messages == 0);
    CU_ASSERT(rep.segments == 0);
    CU_ASSERT(rep.resume.first_seg == 3);
    CU_ASSERT(rep.resume.reuse_from == 1);
    while ((a = gw_actions_pop(&out)) != NULL)
        gw_action_free(a);
    gw_broker_free(b);
    /* The journal thread finds the spare and writes segment 3 into it. */
    {
        struct gw_journal *j;
        int appended = 0;
        uint64_t v;

        CU_ASSERT(gw_journal_file_seg("0000000000000002.spare",
                                      GW_JOURNAL_SPARE_SUFFIX, &v) &&
                  v == 2);
        CU_ASSERT(!gw_journal_file_seg("2.spare", GW_JOURNAL_SPARE_SUFFIX, &v));
        CU_ASSERT(!gw_journal_file_seg("000000000000000g.seg",
                                       GW_JOURNAL_SEGMENT_SUFFIX, &v));
        CU_ASSERT_FATAL(gw_journal_start(dir, &rep.resume, 1 << 20, 10,
                                         count_done, &appended, &j) == 0);
        a = gw_action_new(GW_ACT_JOURNAL_APPEND);
        r = small_rec(GW_JREC_SETTLE, 1, 13, 0, 0);
        a->buf = encode(3, &r, NULL, &len);
        a->hdr_len = (uint32_t) len;
        a->seq = 1;
        a->sync = true;
        gw_journal_submit(j, a);
        gw_journal_stop(j);
        CU_ASSERT(appended == 1);
    }
    CU_ASSERT(access(path, F_OK) != 0);
    snprintf(path, sizeof(path), "%s/0000000000000003.seg", dir);
    CU_ASSERT(stat(path, &st) == 0 && st.st_size > 0);
    CU_ASSERT_FATAL(gw_broker_new(&set, &b) == 0);
    CU_ASSERT_FATAL(gw_recover(dir, b, &out, &rep) == 0);
    CU_ASSERT(rep.segments == 1);
    CU_ASSERT(rep.messages == 0);
    CU_ASSERT(rep.resume.first_seg == 4);
    while ((a = gw_actions_pop(&out)) != NULL)
        gw_action_free(a);
    gw_broker_free(b);
    unlink(path);

    free(back);
    free(mem);
    snprintf(path, sizeof(path), "%s/" GW_JOURNAL_SALT_FILE, dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/" GW_JOURNAL_TOPOLOGY_FILE, dir);
    unlink(path);
    CU_ASSERT(rmdir(dir) == 0);
}

/*
 * The salt: a record sealed with another journal's salt (or none) does
 * not check; a record of an older format behind one of this format in a
 * segment is old bytes of a reused file, and is cut even though its CRC
 * checks; a journal of this format without its salt file is refused.
 */
static void
test_salt(void)
{
    struct gw_broker_settings set = journal_settings();
    struct gw_jrec_target t1 = {1, 1, 0}, t2 = {1, 2, 0}, t3 = {1, 3, 0};
    struct gw_jrec_target t4 = {1, 4, 0};
    struct gw_jrec_block bl = {"d", 1, 4};
    struct gw_recovery_report rep;
    struct gw_actions out = {NULL, NULL};
    struct gw_action *a;
    struct gw_broker *b;
    struct gw_jrec r;
    char path[256];
    uint8_t *buf;
    size_t len;

    snprintf(dir, sizeof(dir), "/tmp/scimq-jsalt-test.%ld", (long) getpid());
    CU_ASSERT_FATAL(mkdir(dir, 0700) == 0);
    put_one_queue_topology(5);
    put_salt();
    /* Segment 1: message 1 (this journal's seal), message 2 of format 4
     * (its CRC checks anywhere), message 3. */
    r = msg_rec(1, &t1, 1, &bl, 1, 4);
    append_rec("0000000000000001.seg", &r, "AAAA");
    r = msg_rec(2, &t2, 1, &bl, 1, 4);
    r.format = 4;
    append_rec("0000000000000001.seg", &r, "BBBB");
    r = msg_rec(3, &t3, 1, &bl, 1, 4);
    append_rec("0000000000000001.seg", &r, "CCCC");
    /* Segment 2: a record sealed without the salt (seal = its number). */
    r = msg_rec(4, &t4, 1, &bl, 1, 4);
    len = gw_jrec_header_len(&r);
    buf = calloc(1, len + 4);
    gw_jrec_encode(&r, buf);
    gw_jrec_set_crc(buf, gw_jrec_crc(buf, len, "DDDD", 4, 2));
    memcpy(buf + len, "DDDD", 4);
    put_file("0000000000000002.seg", buf, len + 4, O_TRUNC);
    free(buf);

    CU_ASSERT_FATAL(gw_broker_new(&set, &b) == 0);
    CU_ASSERT_FATAL(gw_recover(dir, b, &out, &rep) == 0);
    CU_ASSERT(rep.messages == 1); /* message 1 only */
    /* Cut: segment 1 behind message 1, segment 2 whole. */
    snprintf(path, sizeof(path), "%s/0000000000000002.seg", dir);
    CU_ASSERT(access(path, F_OK) == 0);
    CU_ASSERT(rep.truncated_bytes > len + 4);
    CU_ASSERT(rep.resume.salt == TEST_SALT);
    CU_ASSERT(rep.resume.reuse_from == 1);
    CU_ASSERT_FATAL(queue_named(b, "in") != NULL);
    CU_ASSERT(queue_named(b, "in")->n_ready == 1);
    CU_ASSERT(queue_named(b, "in")->ready->id == 1);
    while ((a = gw_actions_pop(&out)) != NULL)
        gw_action_free(a);
    gw_broker_free(b);

    /* Without its salt file, the journal is refused (not cut). */
    snprintf(path, sizeof(path), "%s/" GW_JOURNAL_SALT_FILE, dir);
    CU_ASSERT(unlink(path) == 0);
    CU_ASSERT_FATAL(gw_broker_new(&set, &b) == 0);
    CU_ASSERT(gw_recover(dir, b, &out, &rep) != 0);
    while ((a = gw_actions_pop(&out)) != NULL)
        gw_action_free(a);
    gw_broker_free(b);
    CU_ASSERT(access(path, F_OK) != 0);

    for (int i = 1; i <= 2; i++) {
        snprintf(path, sizeof(path), "%s/%016x.seg", dir, i);
        unlink(path);
    }
    snprintf(path, sizeof(path), "%s/" GW_JOURNAL_TOPOLOGY_FILE, dir);
    unlink(path);
    CU_ASSERT(rmdir(dir) == 0);
}

/*
 * Damage anywhere: a segment of 40 records (messages of 1..70 KiB, some
 * settled, PADs from seals) is cut or has one byte flipped at 300 random
 * places.  Recovery keeps exactly the messages whose records end before
 * the damage and are not settled before it, and nothing after it.
 */
static void
test_damage(void)
{
    struct gw_broker_settings set = journal_settings();
    enum { N = 40 };
    uint64_t end[N]; /* where record i ends */
    bool settle[N];  /* record i settles the message of record i - 1 */
    uint64_t size = 0;
    uint8_t *file;
    char path[256];
    struct gw_jseg w;
    void *mem = NULL;
    uint8_t *data;
    unsigned int seed = 12345;

    snprintf(dir, sizeof(dir), "/var/tmp/scimq-jdamage.%ld", (long) getpid());
    CU_ASSERT_FATAL(mkdir(dir, 0700) == 0);
    put_one_queue_topology(2);
    put_salt();
    snprintf(path, sizeof(path), "%s/0000000000000001.seg", dir);
    CU_ASSERT_FATAL(posix_memalign(&mem, GW_JSEG_ALIGN, 70 * 1024) == 0);
    data = mem;
    for (size_t i = 0; i < 70 * 1024; i++)
        data[i] = (uint8_t) (i * 31 + 7);
    CU_ASSERT_FATAL(gw_jseg_init(&w) == 0);
    CU_ASSERT_FATAL(
        gw_jseg_open(&w, path, 1, gw_jrec_seal(TEST_SALT, 1), false) == 0);
    for (int i = 0; i < N; i++) {
        struct gw_jrec_target t = {1, (uint64_t) (100 + i), 0};
        struct gw_jrec_block bl = {"d", 1, 0};
        struct gw_jrec r;
        uint64_t len = 1024u * (uint64_t) (1 + (i * 37) % 70), off;
        size_t hlen;
        uint8_t *hdr;

        settle[i] = i % 5 == 4;
        if (settle[i]) {
            r = small_rec(GW_JREC_SETTLE, 1, (uint64_t) (100 + i - 1), 0, 0);
            len = 0;
        } else {
            bl.len = len;
            r = msg_rec((uint64_t) (i + 1), &t, 1, &bl, 1, len);
        }
        hdr = encode(TEST_SEG, &r, data, &hlen);
        CU_ASSERT_FATAL(gw_jseg_append(&w, hdr, hlen - len, data, len, &off) ==
                        0);
        free(hdr);
        end[i] = w.size;
        if (i % 7 == 6) /* a PAD after it */
            CU_ASSERT_FATAL(gw_jseg_seal(&w) == 0);
    }
    CU_ASSERT_FATAL(gw_jseg_seal(&w) == 0);
    size = w.size;
    gw_jseg_close(&w);
    gw_jseg_fini(&w);
    file = malloc(size);
    {
        int fd = open(path, O_RDONLY);

        CU_ASSERT_FATAL(fd >= 0);
        CU_ASSERT_FATAL(read(fd, file, size) == (ssize_t) size);
        close(fd);
    }

    for (int round = 0; round < 300; round++) {
        uint64_t at = (uint64_t) rand_r(&seed) % size, want = 0;
        uint8_t bit = (uint8_t) (1u << (rand_r(&seed) % 8));
        bool cut = round % 2 == 0;
        struct gw_recovery_report rep;
        struct gw_actions out = {NULL, NULL};
        struct gw_action *a;
        struct gw_broker *b;
        int fd = open(path, O_WRONLY | O_TRUNC);

        CU_ASSERT_FATAL(fd >= 0);
        if (!cut)
            file[at] ^= bit;
        CU_ASSERT_FATAL(write(fd, file, cut ? at : size) ==
                        (ssize_t) (cut ? at : size));
        close(fd);
        if (!cut)
            file[at] ^= bit;
        /* What must come back: records that end before the damage. */
        for (int i = 0; i < N && end[i] <= at; i++) {
            if (settle[i])
                want--;
            else
                want++;
        }
        CU_ASSERT_FATAL(gw_broker_new(&set, &b) == 0);
        CU_ASSERT_FATAL(gw_recover(dir, b, &out, &rep) == 0);
        CU_ASSERT(rep.messages == want);
        if (rep.messages != want)
            fprintf(stderr,
                    "round %d: %s at %llu: %llu recovered, %llu "
                    "expected\n",
                    round, cut ? "cut" : "flip", (unsigned long long) at,
                    (unsigned long long) rep.messages,
                    (unsigned long long) want);
        while ((a = gw_actions_pop(&out)) != NULL)
            gw_action_free(a);
        gw_broker_free(b);
    }
    free(file);
    free(mem);
    unlink(path);
    snprintf(path, sizeof(path), "%s/" GW_JOURNAL_SALT_FILE, dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/" GW_JOURNAL_TOPOLOGY_FILE, dir);
    unlink(path);
    CU_ASSERT(rmdir(dir) == 0);
}

static const struct scimq_cunit_test journal_tests[] = {
    {"record codec", test_codec, 1},
    {"record formats 2 and 3: MSG flags", test_codec_formats, 1},
    {"recovery of a crafted journal", test_recovery, 1},
    {"segment writer", test_segment_writer, 1},
    {"salt: records check only in their own journal", test_salt, 1},
    {"damage anywhere: exactly the records before it", test_damage, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_suite suites[] = {
    {"journal", NULL, NULL, journal_tests}, {NULL, NULL, NULL, NULL}};

SCIMQ_CUNIT_MAIN(suites)
