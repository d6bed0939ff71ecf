/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scimq-scimp: generate and dump SciMP frame streams.
 *
 *   scimq-scimp gen  [--count N] [--size SIZE] [--queue Q] [--datasum]
 *                    [--all-opcodes] [--output FILE]
 *   scimq-scimp dump [--quiet] [--verify] [FILE]
 *
 * gen writes PUT frames carrying self-verifying synthetic payloads with
 * writev() straight from the payload buffer; dump decodes a stream with the
 * incremental decoder, reading each payload with readv() straight into its
 * final buffer, verifies the payloads and ends with one JSON line.  Piped
 * together they exercise the whole protocol library on real file
 * descriptors; dump is also the tool for inspecting captured traffic.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include <scimq/scimq.h>

#include "common/log.h"
#include "common/param.h"
#include "iofd.h"
#include "seqset.h"
#include "synth.h"

/* Staging buffer for headers; payloads bypass it. */
#define DUMP_STAGE_LEN (256u << 10)

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: scimq-scimp gen  [--count N] [--size SIZE] [--queue Q]\n"
            "                        [--datasum] [--broadcast] "
            "[--all-opcodes | --only OPCODE]\n"
            "                        [--output FILE]\n"
            "       scimq-scimp dump [--quiet] [--verify] [FILE]\n"
            "       scimq-scimp --list-params | --version\n"
            "SIZE takes B, KiB, MiB, GiB suffixes.  gen writes to stdout "
            "unless --output;\n"
            "dump reads stdin unless FILE and ends with a JSON summary.\n"
            "--broadcast sets BROADCAST (control messages, session version "
            "4) on the\n"
            "PUTs and DELIVERs it writes.\n");
}

/* ======================================================================== */
/* gen                                                                       */
/* ======================================================================== */

/*
 * One sample frame of every opcode but PUT (the PUT stream follows): a tour
 * of the protocol.  The DELIVER carries a small "meta" block, not a "data"
 * block, so that dump --verify counts only the synthetic PUTs.  bcast:
 * flags of the DELIVER only (BROADCAST is for PUT and DELIVER).
 */
static int
gen_tour(int fd, uint64_t *req, uint16_t flags, uint16_t bcast,
         const char *only, uint64_t *frames, uint64_t *bytes)
{
    static const char json[] =
        "{\"queues\":[{\"name\":\"demo\",\"kind\":\"guaranteed\"}]}";
    static const char meta[] = "{\"camera\":\"piv0\",\"frame\":1}";
    scimq_proto_block_t blk = {"json", 4, (void *) json, sizeof(json) - 1};
    scimq_proto_block_t mblk = {"meta", 4, (void *) meta, sizeof(meta) - 1};
    /* Two ranges with a gap, as a consumer that settled out of order. */
    static const scimq_proto_range_t ranges[2] = {{1, 64}, {100, 3}};
    scimq_proto_frame_t f;
    uint8_t *buf;
    size_t len;
    int rc;

#define STR(s) ((scimq_proto_str_t){s, (uint16_t) (sizeof(s) - 1)})
    for (unsigned int op = 1; op < 256; op++) {
        if (scimq_proto_opcode_name(op) == NULL || op == SCIMQ_PROTO_OP_PUT ||
            (only != NULL && strcmp(only, scimq_proto_opcode_name(op)) != 0))
            continue;
        memset(&f, 0, sizeof(f));
        f.opcode = (uint8_t) op;
        f.request_id = ++*req;
        f.flags = flags | (op == SCIMQ_PROTO_OP_DELIVER ? bcast : 0);
        switch (op) {
        case SCIMQ_PROTO_OP_HELLO:
            f.args.hello.version_min = SCIMQ_PROTO_SESSION_VERSION_MIN;
            f.args.hello.version_max = SCIMQ_PROTO_SESSION_VERSION_MAX;
            f.args.hello.stream_count = 4;
            f.args.hello.client_name = STR("scimq-scimp");
            break;
        case SCIMQ_PROTO_OP_WELCOME:
            f.args.welcome.version = SCIMQ_PROTO_SESSION_VERSION_MAX;
            f.args.welcome.max_payload = SCIMQ_PROTO_DEFAULT_MAX_PAYLOAD_LEN;
            f.args.welcome.server_name = STR("scimq-gateway");
            break;
        case SCIMQ_PROTO_OP_OK:
            f.block_count = 1;
            f.blocks = &blk;
            break;
        case SCIMQ_PROTO_OP_ERROR:
            f.args.error.code = SCIMQ_ENOENT;
            f.args.error.text = STR("no such queue: demo2");
            break;
        case SCIMQ_PROTO_OP_GET:
            f.args.get.credit_msgs = 8;
            f.args.get.credit_bytes = 128u << 20;
            f.args.get.queue = STR("demo");
            break;
        case SCIMQ_PROTO_OP_QUEUE_DECLARE:
            f.args.declare.ack_timeout_ms = 30000;
            f.args.declare.max_attempts = 5;
            f.args.declare.queue = STR("demo");
            f.args.declare.dead_letter = STR("demo.dead");
            break;
        case SCIMQ_PROTO_OP_QUEUE_BIND:
        case SCIMQ_PROTO_OP_QUEUE_UNBIND:
            f.args.pair.queue = STR("demo");
            f.args.pair.target = STR("demo.store");
            break;
        case SCIMQ_PROTO_OP_QUEUE_MOVE:
            f.args.move.max_msgs = 100;
            f.args.move.queue = STR("demo.dead");
            f.args.move.target = STR("demo");
            break;
        case SCIMQ_PROTO_OP_PUT_OK:
            f.args.put_ok.msg_id = *req;
            break;
        case SCIMQ_PROTO_OP_ACK:
            f.args.ack.delivery_id = *req;
            break;
        case SCIMQ_PROTO_OP_NACK:
            f.args.nack.delivery_id = *req;
            f.args.nack.requeue = 1;
            break;
        case SCIMQ_PROTO_OP_EXTEND:
            f.args.extend.delivery_id = *req;
            f.args.extend.lease_ms = 60000;
            break;
        case SCIMQ_PROTO_OP_PING:
        case SCIMQ_PROTO_OP_PONG:
            f.args.ping.timestamp_ns = (uint64_t) (now_s() * 1e9);
            break;
        case SCIMQ_PROTO_OP_DELIVER:
            f.args.deliver.delivery_id = *req;
            f.args.deliver.msg_id = *req;
            f.args.deliver.attempt = 1;
            f.args.deliver.queue = STR("demo");
            f.block_count = 1;
            f.blocks = &mblk;
            break;
        case SCIMQ_PROTO_OP_LIMIT:
            f.args.limit.max_message = 16u << 20;
            f.args.limit.queue = STR("demo");
            break;
        case SCIMQ_PROTO_OP_ACK_RANGE:
            f.args.ack_range.ranges.list = ranges;
            f.args.ack_range.ranges.n = 2;
            break;
        case SCIMQ_PROTO_OP_NACK_RANGE:
            f.args.nack_range.delay_ms = 100;
            f.args.nack_range.requeue = 1;
            f.args.nack_range.ranges.list = ranges;
            f.args.nack_range.ranges.n = 2;
            break;
        case SCIMQ_PROTO_OP_PUT_OK_RANGE:
            f.args.put_ok_range.count = 16;
            f.args.put_ok_range.msg_id = *req;
            break;
        default:
            if (op == SCIMQ_PROTO_OP_EOS || op >= SCIMQ_PROTO_OP_QUEUE_DELETE)
                f.args.queue.queue = STR("demo");
            break;
        }
        rc = scimq_proto_encode_alloc(&f, &buf, &len);
        if (rc != 0)
            return rc;
        rc = scimq__write_all(fd, buf, len);
        free(buf);
        if (rc != 0)
            return rc;
        *bytes += len;
        ++*frames;
    }
#undef STR
    return 0;
}

static int
cmd_gen(int argc, char **argv)
{
    static const struct option opts[] = {
        {"count", required_argument, NULL, 'n'},
        {"size", required_argument, NULL, 's'},
        {"queue", required_argument, NULL, 'q'},
        {"output", required_argument, NULL, 'o'},
        {"datasum", no_argument, NULL, 'd'},
        {"all-opcodes", no_argument, NULL, 'a'},
        {"only", required_argument, NULL, 'O'},
        {"broadcast", no_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    uint16_t bcast = 0;
    uint64_t count = 10, size = 1u << 20, req = 0, bytes = 0, frames = 0;
    const char *queue = "demo", *output = NULL, *only = NULL;
    bool tour = false;
    uint16_t flags = scimq__param_bool(SCIMQ_PARAM_PROTO_DATASUM)
                         ? SCIMQ_PROTO_F_DATASUM
                         : 0;
    uint8_t hdr[1024];
    void *payload = NULL;
    double t0, dt;
    int c, fd = STDOUT_FILENO, rc = 0;

    while ((c = getopt_long(argc, argv, "n:s:q:o:daO:bh", opts, NULL)) != -1) {
        switch (c) {
        case 'b':
            bcast = SCIMQ_PROTO_F_BROADCAST;
            break;
        case 'n':
            if (scimq__parse_size(optarg, &count) != 0) {
                fprintf(stderr, "scimq-scimp: bad --count '%s'\n", optarg);
                return 2;
            }
            break;
        case 's':
            if (scimq__parse_size(optarg, &size) != 0 ||
                size < SCIMQ_SYNTH_HEADER_LEN || size > SIZE_MAX / 2) {
                fprintf(stderr,
                        "scimq-scimp: bad --size '%s' (32 B or more, e.g. "
                        "16MiB)\n",
                        optarg);
                return 2;
            }
            break;
        case 'q':
            queue = optarg;
            if (strlen(queue) > SCIMQ_PROTO_MAX_STRING_LEN) {
                fprintf(stderr, "scimq-scimp: --queue too long\n");
                return 2;
            }
            break;
        case 'o':
            output = optarg;
            break;
        case 'd':
            flags |= SCIMQ_PROTO_F_DATASUM;
            break;
        case 'a':
            tour = true;
            break;
        case 'O':
            only = optarg;
            tour = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (output != NULL) {
        fd = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "scimq-scimp: %s: %s\n", output, strerror(errno));
            return 1;
        }
    }
    payload = malloc((size_t) size);
    if (payload == NULL) {
        fprintf(stderr, "scimq-scimp: cannot allocate %" PRIu64 " bytes\n",
                size);
        rc = SCIMQ_ENOMEM;
        goto out;
    }

    t0 = now_s();
    if (tour &&
        (rc = gen_tour(fd, &req, flags, bcast, only, &frames, &bytes)) != 0)
        goto out;
    for (uint64_t seq = 0; seq < count; seq++) {
        scimq_proto_block_t blk = {"data", 4, payload, size};
        scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_PUT,
                                 .flags = flags | bcast | SCIMQ_PROTO_F_CONFIRM,
                                 .request_id = ++req,
                                 .block_count = 1,
                                 .blocks = &blk};
        struct iovec iov[3];
        size_t iovcnt;
        uint64_t len;

        f.args.queue.queue.ptr = queue;
        f.args.queue.queue.len = (uint16_t) strlen(queue);
        (void) scimq__synth_fill(payload, (size_t) size, seq);
        rc = scimq_proto_encode(&f, hdr, sizeof(hdr), iov, 3, &iovcnt, &len);
        if (rc == 0)
            rc = scimq__writev_all(fd, iov, (int) iovcnt);
        if (rc != 0)
            goto out;
        bytes += len;
        frames++;
    }
    dt = now_s() - t0;
    fprintf(stderr,
            "{\"tool\":\"scimq-scimp gen\",\"frames\":%" PRIu64
            ",\"wire_bytes\":%" PRIu64 ",\"seconds\":%.3f}\n",
            frames, bytes, dt);
out:
    if (rc != 0)
        fprintf(stderr, "scimq-scimp gen: %s (%s)\n", scimq_strerror(rc),
                scimq_err_name(rc));
    free(payload);
    if (fd != STDOUT_FILENO)
        close(fd);
    return rc == 0 ? 0 : 1;
}

/* ======================================================================== */
/* dump                                                                      */
/* ======================================================================== */

struct dump_stats {
    uint64_t frames;
    uint64_t by_opcode[256];
    uint64_t wire_bytes;
    uint64_t payload_bytes;
    uint64_t verified;
    uint64_t corrupt;
    uint64_t not_synthetic;
    struct scimq_seqset seqs;
};

static void
print_ranges(const scimq_proto_ranges_t *r)
{
    printf(" ids=");
    for (unsigned int i = 0; i < r->n; i++) {
        scimq_proto_range_t g = scimq_proto_range_at(r, i);

        printf("%s%" PRIu64 "..%" PRIu64, i > 0 ? "," : "", g.first,
               g.first + (g.count - 1));
    }
}

static void
print_frame(const scimq_proto_frame_t *f, uint64_t n)
{
    const scimq_proto_args_t *a = &f->args;

    printf("#%" PRIu64 " %-13s req=%" PRIu64 "%s%s%s", n,
           scimq_proto_opcode_name(f->opcode), f->request_id,
           (f->flags & SCIMQ_PROTO_F_DATASUM) ? " +datasum" : "",
           (f->flags & SCIMQ_PROTO_F_CONFIRM) ? " +confirm" : "",
           (f->flags & SCIMQ_PROTO_F_BROADCAST) ? " +broadcast" : "");
    switch (f->opcode) {
    case SCIMQ_PROTO_OP_HELLO:
        printf(" versions=%u..%u stream=%u/%u client=%.*s",
               a->hello.version_min, a->hello.version_max,
               a->hello.stream_index, a->hello.stream_count,
               a->hello.client_name.len, a->hello.client_name.ptr);
        break;
    case SCIMQ_PROTO_OP_WELCOME:
        printf(" version=%u auth=%u max_payload=%" PRIu64 " server=%.*s",
               a->welcome.version, a->welcome.auth_required,
               a->welcome.max_payload, a->welcome.server_name.len,
               a->welcome.server_name.ptr);
        break;
    case SCIMQ_PROTO_OP_ERROR:
        printf(" code=%s text=\"%.*s\"", scimq_err_name(a->error.code),
               a->error.text.len, a->error.text.ptr);
        break;
    case SCIMQ_PROTO_OP_GET:
        printf(" queue=%.*s credits=%u msgs/%" PRIu64 " bytes",
               a->get.queue.len, a->get.queue.ptr, a->get.credit_msgs,
               a->get.credit_bytes);
        break;
    case SCIMQ_PROTO_OP_DELIVER:
        printf(" queue=%.*s delivery=%" PRIu64 " msg=%" PRIu64 " attempt=%u",
               a->deliver.queue.len, a->deliver.queue.ptr,
               a->deliver.delivery_id, a->deliver.msg_id, a->deliver.attempt);
        break;
    case SCIMQ_PROTO_OP_LIMIT:
        printf(" queue=%.*s max_message=%" PRIu64 "%s", a->limit.queue.len,
               a->limit.queue.ptr, a->limit.max_message,
               a->limit.max_message == 0 ? " (no limit)" : "");
        break;
    case SCIMQ_PROTO_OP_ACK_RANGE:
        print_ranges(&a->ack_range.ranges);
        break;
    case SCIMQ_PROTO_OP_NACK_RANGE:
        printf(" requeue=%u delay=%ums", a->nack_range.requeue,
               a->nack_range.delay_ms);
        print_ranges(&a->nack_range.ranges);
        break;
    case SCIMQ_PROTO_OP_PUT_OK_RANGE:
        printf(" count=%u msg=%" PRIu64 "..%" PRIu64, a->put_ok_range.count,
               a->put_ok_range.msg_id,
               a->put_ok_range.msg_id + (a->put_ok_range.count - 1));
        break;
    case SCIMQ_PROTO_OP_QUEUE_DECLARE:
        printf(" queue=%.*s kind=%s ack_timeout=%ums attempts=%u dlq=%.*s",
               a->declare.queue.len, a->declare.queue.ptr,
               a->declare.kind ? "best-effort" : "guaranteed",
               a->declare.ack_timeout_ms, a->declare.max_attempts,
               a->declare.dead_letter.len, a->declare.dead_letter.ptr);
        break;
    case SCIMQ_PROTO_OP_QUEUE_BIND:
    case SCIMQ_PROTO_OP_QUEUE_UNBIND:
        printf(" queue=%.*s target=%.*s", a->pair.queue.len, a->pair.queue.ptr,
               a->pair.target.len, a->pair.target.ptr);
        break;
    case SCIMQ_PROTO_OP_QUEUE_MOVE:
        printf(" queue=%.*s target=%.*s max=%" PRIu64, a->move.queue.len,
               a->move.queue.ptr, a->move.target.len, a->move.target.ptr,
               a->move.max_msgs);
        break;
    case SCIMQ_PROTO_OP_PUT:
    case SCIMQ_PROTO_OP_EOS:
    case SCIMQ_PROTO_OP_QUEUE_DELETE:
    case SCIMQ_PROTO_OP_QUEUE_LIST:
    case SCIMQ_PROTO_OP_QUEUE_CLOSE:
    case SCIMQ_PROTO_OP_STATS:
        printf(" queue=%.*s", a->queue.queue.len, a->queue.queue.ptr);
        break;
    default:
        break;
    }
    for (uint32_t i = 0; i < f->block_count; i++)
        printf(" [%.*s:%" PRIu64 "]", (int) f->blocks[i].name_len,
               f->blocks[i].name ? f->blocks[i].name : "", f->blocks[i].len);
    printf("\n");
}

/* Verifies the synthetic payload of a PUT or DELIVER ("data" block). */
static void
verify_frame(const scimq_proto_frame_t *f, struct dump_stats *st)
{
    uint64_t seq;
    int rc;

    if (f->opcode != SCIMQ_PROTO_OP_PUT && f->opcode != SCIMQ_PROTO_OP_DELIVER)
        return;
    for (uint32_t i = 0; i < f->block_count; i++) {
        const scimq_proto_block_t *b = &f->blocks[i];

        if (b->name_len != 4 || memcmp(b->name, "data", 4) != 0)
            continue;
        rc = scimq__synth_verify(b->data, (size_t) b->len, &seq);
        if (rc == 0 && scimq__seqset_add(&st->seqs, seq) >= 0)
            st->verified++;
        else if (rc == SCIMQ_EINVAL)
            st->not_synthetic++;
        else
            st->corrupt++;
    }
}

static void
dump_summary(const struct dump_stats *st, double seconds, bool verify, int err,
             uint64_t offset)
{
    json_t *by_op = json_object(), *root;
    char *text;

    for (unsigned int op = 0; op < 256; op++)
        if (st->by_opcode[op] > 0)
            json_object_set_new(by_op, scimq_proto_opcode_name(op),
                                json_integer((json_int_t) st->by_opcode[op]));
    root = json_pack(
        "{s:s, s:I, s:o, s:I, s:I, s:f, s:f}", "tool", "scimq-scimp dump",
        "frames", (json_int_t) st->frames, "by_opcode", by_op, "wire_bytes",
        (json_int_t) st->wire_bytes, "payload_bytes",
        (json_int_t) st->payload_bytes, "seconds", seconds, "mib_per_s",
        seconds > 0 ? (double) st->wire_bytes / seconds / 1048576.0 : 0.0);
    if (verify) {
        json_object_set_new(root, "verified",
                            json_integer((json_int_t) st->verified));
        json_object_set_new(root, "corrupt",
                            json_integer((json_int_t) st->corrupt));
        json_object_set_new(root, "not_synthetic",
                            json_integer((json_int_t) st->not_synthetic));
        json_object_set_new(
            root, "lost",
            json_integer((json_int_t) scimq__seqset_missing(&st->seqs, 0)));
        json_object_set_new(root, "duplicates",
                            json_integer((json_int_t) st->seqs.duplicates));
    }
    if (err != 0) {
        json_object_set_new(root, "error", json_string(scimq_err_name(err)));
        json_object_set_new(root, "error_text",
                            json_string(scimq_strerror(err)));
        json_object_set_new(root, "error_offset",
                            json_integer((json_int_t) offset));
    } else {
        json_object_set_new(root, "error", json_null());
    }
    text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text != NULL)
        printf("%s\n", text);
    free(text);
    json_decref(root);
}

static int
cmd_dump(int argc, char **argv)
{
    static const struct option opts[] = {{"quiet", no_argument, NULL, 'q'},
                                         {"verify", no_argument, NULL, 'v'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct dump_stats st = {0};
    scimq_proto_decoder_t *dec = NULL;
    scimq_proto_limits_t lim;
    bool quiet = false, verify = false, in_payload = false, eof = false;
    bool failed;
    uint8_t *stage = NULL, *payload = NULL;
    size_t stage_len = 0, stage_off = 0, payload_cap = 0;
    uint64_t offset = 0; /* stream offset of the next unconsumed byte */
    double t0;
    int c, fd = STDIN_FILENO, rc;

    while ((c = getopt_long(argc, argv, "qvh", opts, NULL)) != -1) {
        switch (c) {
        case 'q':
            quiet = true;
            break;
        case 'v':
            verify = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc && strcmp(argv[optind], "-") != 0) {
        fd = open(argv[optind], O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fprintf(stderr, "scimq-scimp: %s: %s\n", argv[optind],
                    strerror(errno));
            return 1;
        }
    }
    scimq__param_proto_limits(&lim);
    rc = scimq_proto_decoder_create(&lim, &dec);
    stage = malloc(DUMP_STAGE_LEN);
    if (rc != 0 || stage == NULL) {
        rc = rc != 0 ? rc : SCIMQ_ENOMEM;
        goto out;
    }

    t0 = now_s();
    for (;;) {
        const scimq_proto_frame_t *f;
        ssize_t n;

        if (stage_off < stage_len) {
            size_t used;

            rc = scimq_proto_decoder_feed(dec, stage + stage_off,
                                          stage_len - stage_off, &used);
            stage_off += used;
            offset += used;
        } else if (eof) {
            /* The stream may only end between frames. */
            rc = scimq_proto_decoder_idle(dec) ? 0 : SCIMQ_EPIPE;
            if (rc != 0)
                fprintf(stderr, "scimq-scimp dump: the stream ends inside "
                                "a frame\n");
            break;
        } else if (in_payload) {
            /* Zero-copy: read the payload straight into its buffer. */
            struct iovec iov[2];
            size_t niov = scimq_proto_decoder_iov(dec, iov, 2);

            n = scimq__readv_some(fd, iov, (int) niov);
            if (n < 0) {
                rc = (int) n;
                break;
            }
            if (n == 0) {
                eof = true;
                continue;
            }
            offset += (uint64_t) n;
            rc = scimq_proto_decoder_advance(dec, (size_t) n);
        } else {
            n = scimq__read_some(fd, stage, DUMP_STAGE_LEN);
            if (n < 0) {
                rc = (int) n;
                break;
            }
            stage_len = (size_t) n;
            stage_off = 0;
            eof = (n == 0);
            continue;
        }

        if (rc < 0)
            break;
        if (rc == SCIMQ_PROTO_HEADER_READY) {
            f = scimq_proto_decoder_frame(dec);
            if (f->payload_len > payload_cap) {
                void *p = realloc(payload, (size_t) f->payload_len);

                if (p == NULL) {
                    rc = SCIMQ_ENOMEM;
                    break;
                }
                payload = p;
                payload_cap = (size_t) f->payload_len;
            }
            rc = scimq_proto_decoder_set_payload(dec, payload, payload_cap);
            if (rc != 0)
                break;
            in_payload = true;
        } else if (rc == SCIMQ_PROTO_FRAME_DONE) {
            f = scimq_proto_decoder_frame(dec);
            in_payload = false;
            st.frames++;
            st.by_opcode[f->opcode]++;
            st.payload_bytes += f->payload_len;
            st.wire_bytes = offset;
            if (!quiet)
                print_frame(f, st.frames);
            if (verify)
                verify_frame(f, &st);
        }
    }
    if (rc < 0)
        fprintf(stderr,
                "scimq-scimp dump: frame %" PRIu64 " near byte %" PRIu64
                ": %s (%s)\n",
                st.frames + 1, offset, scimq_strerror(rc), scimq_err_name(rc));
    dump_summary(&st, now_s() - t0, verify, rc < 0 ? rc : 0, offset);
out:
    if (rc < 0 && dec == NULL)
        fprintf(stderr, "scimq-scimp dump: %s\n", scimq_strerror(rc));
    failed =
        rc < 0 ||
        (verify && (st.corrupt > 0 || scimq__seqset_missing(&st.seqs, 0) > 0));
    scimq_proto_decoder_destroy(dec);
    free(stage);
    free(payload);
    scimq__seqset_fini(&st.seqs);
    if (fd != STDIN_FILENO)
        close(fd);
    return failed ? 1 : 0;
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("scimq-scimp %s (SciMP frame version %d, session versions "
               "%d..%d)\n",
               scimq_version_string(), SCIMQ_PROTO_FRAME_VERSION,
               SCIMQ_PROTO_SESSION_VERSION_MIN,
               SCIMQ_PROTO_SESSION_VERSION_MAX);
        return 0;
    }
    if (strcmp(argv[1], "--list-params") == 0) {
        scimq__param_print(stdout);
        return 0;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "gen") == 0)
        return cmd_gen(argc - 1, argv + 1);
    if (strcmp(argv[1], "dump") == 0)
        return cmd_dump(argc - 1, argv + 1);
    fprintf(stderr, "scimq-scimp: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
