/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scimp_old_peer: a SciMP peer that speaks an older session version with
 * raw frames, as a client built before session version 3 does: one PUT
 * and one PUT_OK per message, one ACK per delivery.  It counts every
 * frame of an opcode its version does not have (newer_opcodes; the test
 * requires 0), so it shows that the gateway speaks to it as it asked.
 *
 *   scimp_old_peer put HOST PORT QUEUE VERSION COUNT SIZE
 *       HELLO offering VERSION..VERSION, then COUNT PUTs with CONFIRM of
 *       SIZE bytes (pattern by message number), 64 in flight at most.
 *   scimp_old_peer get HOST PORT QUEUE VERSION COUNT
 *       HELLO, a GET of COUNT messages, an ACK for each DELIVER.
 *
 * Prints one JSON line: version chosen, frames by kind, the CRC32C of
 * every payload in order (the same for put and get of the same messages)
 * and "error" (null, or what went wrong).  Exit status 0 when all went.
 * Bounded: every read waits at most 30 s.
 */
#include "config.h"

#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <scimq/proto.h>

#define PEER_WAIT_MS 30000
#define PEER_WINDOW 64u

struct peer {
    int fd;
    scimq_proto_decoder_t *dec;
    uint8_t buf[64 << 10];
    size_t len, off;
    uint8_t version;
    uint64_t frames, put_oks, delivers, newer; /* see opcode_newer() */
    uint32_t crc;
    const char *error;
};

/* An opcode a session of this version never carries: LIMIT is version 2,
 * the range frames (25-31) and REPORT are version 3. */
static bool
opcode_newer(uint8_t version, uint8_t opcode)
{
    if (opcode == SCIMQ_PROTO_OP_LIMIT)
        return version < 2;
    return (opcode > SCIMQ_PROTO_OP_LIMIT &&
            opcode < SCIMQ_PROTO_OP_QUEUE_DECLARE) ||
           opcode == SCIMQ_PROTO_OP_REPORT;
}

static int
peer_connect(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int fd = -1, one = 1;

    if (getaddrinfo(host, port, &hints, &ai) != 0 || ai == NULL)
        return -1;
    fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        close(fd);
        fd = -1;
    }
    if (fd >= 0)
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    freeaddrinfo(ai);
    return fd;
}

static int
peer_send(struct peer *p, const scimq_proto_frame_t *f)
{
    uint8_t *buf;
    size_t len, off = 0;

    if (scimq_proto_encode_alloc(f, &buf, &len) != 0)
        return -1;
    while (off < len) {
        ssize_t n = write(p->fd, buf + off, len - off);

        if (n <= 0) {
            free(buf);
            return -1;
        }
        off += (size_t) n;
    }
    free(buf);
    return 0;
}

/* The next whole frame (payload in a decoder buffer), or NULL. */
static const scimq_proto_frame_t *
peer_next(struct peer *p)
{
    for (;;) {
        size_t used = 0;
        int ev;

        if (p->off == p->len) {
            struct pollfd pfd = {p->fd, POLLIN, 0};
            ssize_t n;

            if (poll(&pfd, 1, PEER_WAIT_MS) != 1) {
                p->error = "timed out";
                return NULL;
            }
            n = read(p->fd, p->buf, sizeof(p->buf));
            if (n <= 0) {
                p->error = "connection closed";
                return NULL;
            }
            p->len = (size_t) n;
            p->off = 0;
        }
        ev = scimq_proto_decoder_feed(p->dec, p->buf + p->off, p->len - p->off,
                                      &used);
        p->off += used;
        if (ev < 0) {
            p->error = "malformed frame";
            return NULL;
        }
        if (ev == SCIMQ_PROTO_HEADER_READY &&
            scimq_proto_decoder_alloc_payload(p->dec) != 0) {
            p->error = "out of memory";
            return NULL;
        }
        if (ev == SCIMQ_PROTO_FRAME_DONE) {
            const scimq_proto_frame_t *f = scimq_proto_decoder_frame(p->dec);

            p->frames++;
            if (opcode_newer(p->version, f->opcode))
                p->newer++;
            if (f->opcode == SCIMQ_PROTO_OP_ERROR) {
                p->error = "ERROR from the gateway";
                return NULL;
            }
            return f;
        }
    }
}

static int
peer_hello(struct peer *p, uint8_t version)
{
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_HELLO, .request_id = 1};
    const scimq_proto_frame_t *w;

    f.args.hello.version_min = version;
    f.args.hello.version_max = version;
    f.args.hello.stream_count = 1;
    f.args.hello.client_name.ptr = "scimp_old_peer";
    f.args.hello.client_name.len = 14;
    if (peer_send(p, &f) != 0)
        return -1;
    w = peer_next(p);
    if (w == NULL || w->opcode != SCIMQ_PROTO_OP_WELCOME) {
        p->error = p->error ? p->error : "no WELCOME";
        return -1;
    }
    p->version = w->args.welcome.version;
    if (w->args.welcome.auth_required) {
        p->error = "the gateway asks for AUTH";
        return -1;
    }
    return 0;
}

static void
pattern(uint8_t *b, size_t len, uint64_t n)
{
    for (size_t i = 0; i < len; i++)
        b[i] = (uint8_t) (n * 131u + i * 7u);
}

static int
run_put(struct peer *p, const char *queue, uint64_t count, size_t size)
{
    uint8_t *data = malloc(size > 0 ? size : 1);
    uint64_t sent = 0;
    int rc = 0;

    if (data == NULL)
        return -1;
    while (p->put_oks < count && rc == 0) {
        while (sent < count && sent - p->put_oks < PEER_WINDOW) {
            scimq_proto_block_t blk = {"data", 4, data, size};
            scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_PUT,
                                     .flags = SCIMQ_PROTO_F_CONFIRM,
                                     .request_id = 100 + sent};

            pattern(data, size, sent);
            p->crc = scimq_proto_crc32c(p->crc, data, size);
            f.args.queue.queue.ptr = queue;
            f.args.queue.queue.len = (uint16_t) strlen(queue);
            f.block_count = 1;
            f.blocks = &blk;
            if (peer_send(p, &f) != 0) {
                p->error = "write failed";
                rc = -1;
                break;
            }
            sent++;
        }
        if (rc == 0) {
            const scimq_proto_frame_t *f = peer_next(p);

            if (f == NULL)
                rc = -1;
            else if (f->opcode == SCIMQ_PROTO_OP_PUT_OK)
                p->put_oks++;
        }
    }
    free(data);
    return rc;
}

static int
run_get(struct peer *p, const char *queue, uint64_t count)
{
    scimq_proto_frame_t g = {.opcode = SCIMQ_PROTO_OP_GET, .request_id = 2};

    g.args.get.credit_msgs = (uint32_t) count;
    g.args.get.credit_bytes = UINT64_MAX;
    g.args.get.queue.ptr = queue;
    g.args.get.queue.len = (uint16_t) strlen(queue);
    if (peer_send(p, &g) != 0)
        return -1;
    while (p->delivers < count) {
        const scimq_proto_frame_t *f = peer_next(p);
        scimq_proto_frame_t a = {.opcode = SCIMQ_PROTO_OP_ACK};

        if (f == NULL)
            return -1;
        if (f->opcode != SCIMQ_PROTO_OP_DELIVER)
            continue;
        p->delivers++;
        for (uint32_t i = 0; i < f->block_count; i++)
            p->crc = scimq_proto_crc32c(p->crc, f->blocks[i].data,
                                        (size_t) f->blocks[i].len);
        a.request_id = 1000 + p->delivers;
        a.args.ack.delivery_id = f->args.deliver.delivery_id;
        if (peer_send(p, &a) != 0)
            return -1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    struct peer p;
    int rc = -1;

    memset(&p, 0, sizeof(p));
    if (argc < 7 || (strcmp(argv[1], "put") == 0 && argc < 8)) {
        fprintf(stderr, "usage: scimp_old_peer put|get HOST PORT QUEUE "
                        "VERSION COUNT [SIZE]\n");
        return 2;
    }
    p.fd = peer_connect(argv[2], argv[3]);
    if (p.fd < 0 || scimq_proto_decoder_create(NULL, &p.dec) != 0) {
        p.error = "cannot connect";
    } else if (peer_hello(&p, (uint8_t) atoi(argv[5])) == 0) {
        if (strcmp(argv[1], "put") == 0)
            rc = run_put(&p, argv[4], strtoull(argv[6], NULL, 10),
                         (size_t) strtoull(argv[7], NULL, 10));
        else
            rc = run_get(&p, argv[4], strtoull(argv[6], NULL, 10));
    }
    if (rc != 0 && p.error == NULL)
        p.error = "failed";
    if (rc == 0) {
        /* Goodbye: the last ACKs are in before the close. */
        scimq_proto_frame_t bye = {.opcode = SCIMQ_PROTO_OP_BYE,
                                   .request_id = 3};

        if (peer_send(&p, &bye) == 0)
            (void) peer_next(&p);
    }
    printf("{\"version\":%u,\"frames\":%" PRIu64 ",\"put_ok\":%" PRIu64
           ",\"delivered\":%" PRIu64 ",\"newer_opcodes\":%" PRIu64
           ",\"crc\":%u,\"error\":%s%s%s}\n",
           p.version, p.frames, p.put_oks, p.delivers, p.newer, p.crc,
           rc == 0 ? "" : "\"", rc == 0 ? "null" : p.error,
           rc == 0 ? "" : "\"");
    scimq_proto_decoder_destroy(p.dec);
    if (p.fd >= 0)
        close(p.fd);
    return rc == 0 ? 0 : 1;
}
