/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gw_peer: badly behaved peers for the gateway's limit tests.  Each mode
 * runs for a bounded time and prints one JSON line of what it saw.
 *
 *   gw_peer pings HOST PORT SECONDS
 *       sends PINGs as fast as the socket takes them and never reads;
 *       reports whether (and when) the gateway closed the connection.
 *   gw_peer hold HOST PORT N SECONDS [SOURCE_ADDR]
 *       opens N connections (from SOURCE_ADDR if given) that never say
 *       HELLO and holds them; reports how many connected and how many the
 *       gateway closed (each closed one is closed here at once).
 *       Once every connect is done and nothing was closed for a second,
 *       it prints the report with "settled":true, and holds on; SIGTERM
 *       ends the hold early (the final report is still printed).
 *   gw_peer drip HOST PORT QUEUE INTERVAL_MS SECONDS
 *       HELLO, then a PUT of 1 MiB to QUEUE whose header goes at once and
 *       whose payload goes one byte per INTERVAL_MS; reports the ERROR the
 *       gateway answered with and when.
 *   gw_peer admin HOST PORT QUEUE [TOKEN_FILE]
 *       HELLO (and AUTH with the token), then QUEUE_DELETE QUEUE on the data
 *       port; reports the answer ("ok" or the ERROR's code and text).
 *   gw_peer hijack HOST PORT SESSION_HEX STREAM COUNT QUEUE SECONDS
 *       HELLO naming another session's id (32 hex digits) and stream index,
 *       never AUTH; after WELCOME a GET of QUEUE (none if "-"); until
 *       SECONDS pass (or SIGTERM) counts every frame the gateway sends,
 *       DELIVERs apart, and says whether it closed the connection.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <scimq/error.h>
#include <scimq/proto.h>

#include "common/auth.h"

static volatile sig_atomic_t stop;

static void
on_term(int sig)
{
    (void) sig;
    stop = 1;
}

static uint64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

static void
die(const char *what)
{
    fprintf(stderr, "gw_peer: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void
addr_make(const char *host, const char *port, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t) atoi(port));
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
        fprintf(stderr, "gw_peer: %s: not an IPv4 address\n", host);
        exit(2);
    }
}

static void
nonblock(int fd)
{
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
        die("fcntl");
}

/* A blocking connection, with a small receive buffer when asked. */
static int
connect_to(const struct sockaddr_in *sa, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        die("socket");
    if (rcvbuf > 0)
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    if (connect(fd, (const struct sockaddr *) sa, sizeof(*sa)) != 0)
        die("connect");
    return fd;
}

static uint8_t *
frame_alloc(const scimq_proto_frame_t *f, size_t *len)
{
    uint8_t *buf = NULL;

    if (scimq_proto_encode_alloc(f, &buf, len) != 0) {
        fprintf(stderr, "gw_peer: cannot encode %s\n",
                scimq_proto_opcode_name(f->opcode));
        exit(1);
    }
    return buf;
}

/* ------------------------------------------------------------------------ */

static int
mode_pings(const struct sockaddr_in *sa, int secs)
{
    enum { BATCH = 1024 };
    scimq_proto_frame_t ping = {.opcode = SCIMQ_PROTO_OP_PING};
    size_t one_len, off = 0, len;
    uint8_t *one = frame_alloc(&ping, &one_len), *buf;
    uint64_t start = now_ms(), end = start + (uint64_t) secs * 1000u;
    uint64_t sent = 0, closed_ms = 0;
    int fd = connect_to(sa, 4096);

    len = one_len * BATCH;
    buf = malloc(len);
    if (buf == NULL)
        die("malloc");
    for (int i = 0; i < BATCH; i++)
        memcpy(buf + (size_t) i * one_len, one, one_len);
    nonblock(fd);
    while (now_ms() < end && closed_ms == 0) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};

        if (poll(&p, 1, 100) < 0 && errno != EINTR)
            die("poll");
        if (p.revents & (POLLERR | POLLHUP)) {
            closed_ms = now_ms() - start;
            break;
        }
        if (!(p.revents & POLLOUT))
            continue;
        ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);

        if (n > 0) {
            sent += (uint64_t) n;
            off = (off + (size_t) n) % one_len;
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            closed_ms = now_ms() - start;
        }
    }
    printf("{\"tool\":\"gw_peer\",\"mode\":\"pings\",\"sent_bytes\":%" PRIu64
           ",\"pings\":%" PRIu64 ",\"closed\":%s,\"closed_after_ms\":%" PRIu64
           "}\n",
           sent, sent / one_len, closed_ms ? "true" : "false", closed_ms);
    close(fd);
    free(buf);
    free(one);
    return 0;
}

/* ------------------------------------------------------------------------ */

static void
nofile_raise(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void) setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void
hold_report(int opened, int connected, int failed, int closed, int pending,
            bool settled)
{
    printf("{\"tool\":\"gw_peer\",\"mode\":\"hold\",\"opened\":%d,"
           "\"connected\":%d,\"failed\":%d,\"closed_by_gateway\":%d,"
           "\"held\":%d,\"unfinished\":%d,\"settled\":%s}\n",
           opened, connected, failed, closed, connected - closed, pending,
           settled ? "true" : "false");
}

static int
mode_hold(const struct sockaddr_in *sa, int n, int secs, const char *source)
{
    struct pollfd *p = calloc((size_t) n, sizeof(*p));
    uint64_t start = now_ms(), end = start + (uint64_t) secs * 1000u;
    int opened = 0, connected = 0, failed = 0, closed = 0, pending;
    uint64_t last_event;
    bool settled = false;
    struct sockaddr_in src;

    if (p == NULL)
        die("calloc");
    nofile_raise();
    if (source != NULL)
        addr_make(source, "0", &src);
    for (int i = 0; i < n; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

        p[i].fd = -1;
        if (fd < 0) {
            failed++;
            continue;
        }
        if (source != NULL &&
            bind(fd, (struct sockaddr *) &src, sizeof(src)) != 0)
            die("bind");
        if (connect(fd, (const struct sockaddr *) sa, sizeof(*sa)) != 0 &&
            errno != EINPROGRESS) {
            close(fd);
            failed++;
            continue;
        }
        opened++;
        p[i].fd = fd;
        p[i].events = POLLOUT;
    }
    /* Until every connect is done (or the time is up), then until the end:
     * whatever becomes readable is the gateway's ERROR or its close. */
    pending = opened;
    last_event = now_ms();
    while (now_ms() < end && !stop) {
        int rc = poll(p, (nfds_t) n, 100);

        if (rc > 0)
            last_event = now_ms();
        if (!settled && pending == 0 && now_ms() - last_event >= 1000) {
            settled = true;
            hold_report(opened, connected, failed, closed, pending, true);
        }

        if (rc < 0 && errno != EINTR)
            die("poll");
        for (int i = 0; rc > 0 && i < n; i++) {
            if (p[i].fd < 0 || p[i].revents == 0)
                continue;
            if (p[i].events == POLLOUT) {
                int err = 0;
                socklen_t el = sizeof(err);

                (void) getsockopt(p[i].fd, SOL_SOCKET, SO_ERROR, &err, &el);
                pending--;
                if (err != 0) {
                    failed++;
                    close(p[i].fd);
                    p[i].fd = -1;
                    continue;
                }
                connected++;
                p[i].events = POLLIN;
                continue;
            }
            /* Readable: drain what came; EOF or an error is the close. */
            char junk[4096];
            ssize_t got;

            while ((got = recv(p[i].fd, junk, sizeof(junk), 0)) > 0)
                ;
            if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
                closed++;
                close(p[i].fd);
                p[i].fd = -1;
            }
        }
    }
    hold_report(opened, connected, failed, closed, pending, false);
    for (int i = 0; i < n; i++)
        if (p[i].fd >= 0)
            close(p[i].fd);
    free(p);
    return 0;
}

/* ------------------------------------------------------------------------ */

/* Sends all of buf (blocking socket). */
static void
send_all(int fd, const uint8_t *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("send");
        buf += n;
        len -= (size_t) n;
    }
}

/*
 * Reads what is there (waiting up to wait_ms) and decodes it; returns the
 * opcode of the first ERROR or WELCOME seen (0: none yet, -1: closed).
 */
static int
read_frames(int fd, scimq_proto_decoder_t *dec, int wait_ms,
            scimq_proto_frame_t *out, char *text, size_t text_cap)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    uint8_t buf[4096];
    ssize_t got;
    size_t off = 0;

    if (poll(&p, 1, wait_ms) <= 0)
        return 0;
    got = recv(fd, buf, sizeof(buf), 0);
    if (got <= 0)
        return -1;
    while (off < (size_t) got) {
        size_t used = 0;
        int ev =
            scimq_proto_decoder_feed(dec, buf + off, (size_t) got - off, &used);

        off += used;
        if (ev < 0)
            return -1;
        if (ev == SCIMQ_PROTO_HEADER_READY)
            (void) scimq_proto_decoder_set_payload(dec, NULL, 0);
        if (ev != SCIMQ_PROTO_FRAME_DONE)
            continue;
        const scimq_proto_frame_t *f = scimq_proto_decoder_frame(dec);

        if (f->opcode == SCIMQ_PROTO_OP_ERROR ||
            f->opcode == SCIMQ_PROTO_OP_WELCOME) {
            *out = *f;
            if (f->opcode == SCIMQ_PROTO_OP_ERROR)
                snprintf(text, text_cap, "%.*s", (int) f->args.error.text.len,
                         f->args.error.text.ptr);
            return f->opcode;
        }
    }
    return 0;
}

static int
mode_drip(const struct sockaddr_in *sa, const char *queue, int interval_ms,
          int secs)
{
    enum { LEN = 1 << 20 };
    scimq_proto_frame_t hello = {.opcode = SCIMQ_PROTO_OP_HELLO,
                                 .request_id = 1},
                        put = {.opcode = SCIMQ_PROTO_OP_PUT, .request_id = 2},
                        got;
    scimq_proto_block_t blk = {"data", 4, NULL, LEN};
    scimq_proto_decoder_t *dec;
    uint8_t *hbuf, *pbuf, *payload = calloc(1, LEN);
    size_t hlen, plen, header, sent = 0;
    uint64_t start, end;
    char text[1100] = "";
    int fd = connect_to(sa, 0), r = 0;

    if (payload == NULL || scimq_proto_decoder_create(NULL, &dec) != 0)
        die("setup");
    hello.args.hello.version_min = SCIMQ_PROTO_SESSION_VERSION_MIN;
    hello.args.hello.version_max = SCIMQ_PROTO_SESSION_VERSION_MAX;
    hello.args.hello.stream_count = 1;
    hello.args.hello.client_name.ptr = "gw_peer";
    hello.args.hello.client_name.len = 7;
    hbuf = frame_alloc(&hello, &hlen);
    send_all(fd, hbuf, hlen);
    for (int i = 0; i < 100 && r == 0; i++)
        r = read_frames(fd, dec, 100, &got, text, sizeof(text));
    if (r != SCIMQ_PROTO_OP_WELCOME) {
        fprintf(stderr, "gw_peer: no WELCOME\n");
        return 1;
    }
    put.args.queue.queue.ptr = queue;
    put.args.queue.queue.len = (uint16_t) strlen(queue);
    blk.data = payload;
    put.block_count = 1;
    put.blocks = &blk;
    pbuf = frame_alloc(&put, &plen);
    header = plen - LEN;
    send_all(fd, pbuf, header);
    start = now_ms();
    end = start + (uint64_t) secs * 1000u;
    r = 0;
    while (r == 0 && now_ms() < end && sent < LEN) {
        send_all(fd, pbuf + header + sent, 1);
        sent++;
        r = read_frames(fd, dec, interval_ms, &got, text, sizeof(text));
    }
    printf("{\"tool\":\"gw_peer\",\"mode\":\"drip\",\"dripped\":%zu,"
           "\"after_ms\":%" PRIu64 ",\"closed\":%s,\"error\":\"%s\","
           "\"text\":\"%s\"}\n",
           sent, now_ms() - start, r != 0 ? "true" : "false",
           r == SCIMQ_PROTO_OP_ERROR ? scimq_err_name(got.args.error.code) : "",
           text);
    scimq_proto_decoder_destroy(dec);
    close(fd);
    free(hbuf);
    free(pbuf);
    free(payload);
    return 0;
}

/* ------------------------------------------------------------------------ */

/* Frames read from a socket, one at a time (payloads skipped). */
struct reader {
    int fd;
    scimq_proto_decoder_t *dec;
    uint8_t buf[64 << 10];
    size_t len, off;
};

/*
 * The next whole frame, waiting until deadline_ms: 1 (*f valid until the
 * next call), 0 at the deadline, -1 when the peer closed or sent garbage.
 */
static int
next_frame(struct reader *r, uint64_t deadline_ms,
           const scimq_proto_frame_t **f)
{
    for (;;) {
        while (r->off < r->len) {
            size_t used = 0;
            int ev = scimq_proto_decoder_feed(r->dec, r->buf + r->off,
                                              r->len - r->off, &used);

            r->off += used;
            if (ev < 0)
                return -1;
            if (ev == SCIMQ_PROTO_HEADER_READY)
                (void) scimq_proto_decoder_set_payload(r->dec, NULL, 0);
            if (ev == SCIMQ_PROTO_FRAME_DONE) {
                *f = scimq_proto_decoder_frame(r->dec);
                return 1;
            }
        }
        uint64_t now = now_ms();
        struct pollfd p = {.fd = r->fd, .events = POLLIN};
        ssize_t got;

        if (now >= deadline_ms || stop)
            return 0;
        if (poll(&p, 1, (int) (deadline_ms - now)) <= 0)
            continue;
        got = recv(r->fd, r->buf, sizeof(r->buf), 0);
        if (got <= 0)
            return -1;
        r->len = (size_t) got;
        r->off = 0;
    }
}

static void
hello_init(scimq_proto_frame_t *h)
{
    memset(h, 0, sizeof(*h));
    h->opcode = SCIMQ_PROTO_OP_HELLO;
    h->request_id = 1;
    h->args.hello.version_min = SCIMQ_PROTO_SESSION_VERSION_MIN;
    h->args.hello.version_max = SCIMQ_PROTO_SESSION_VERSION_MAX;
    h->args.hello.stream_count = 1;
    h->args.hello.client_name.ptr = "gw_peer";
    h->args.hello.client_name.len = 7;
}

static void
send_frame(int fd, const scimq_proto_frame_t *f)
{
    size_t len;
    uint8_t *buf = frame_alloc(f, &len);

    send_all(fd, buf, len);
    free(buf);
}

/* Prints the answer to a request: OK, or an ERROR's code and text. */
static void
answer_print(const char *mode, int r, const scimq_proto_frame_t *f)
{
    if (r == 1 && f->opcode == SCIMQ_PROTO_OP_OK)
        printf("{\"tool\":\"gw_peer\",\"mode\":\"%s\",\"answer\":\"ok\"}\n",
               mode);
    else if (r == 1 && f->opcode == SCIMQ_PROTO_OP_ERROR)
        printf("{\"tool\":\"gw_peer\",\"mode\":\"%s\",\"answer\":\"%s\","
               "\"text\":\"%.*s\"}\n",
               mode, scimq_err_name(f->args.error.code),
               (int) f->args.error.text.len, f->args.error.text.ptr);
    else
        printf("{\"tool\":\"gw_peer\",\"mode\":\"%s\",\"answer\":\"%s\"}\n",
               mode, r < 0 ? "closed" : "none");
}

static int
mode_admin(const struct sockaddr_in *sa, const char *queue,
           const char *token_file)
{
    static struct reader rd;
    const scimq_proto_frame_t *f = NULL;
    scimq_proto_frame_t h, a, del;
    int r;

    rd.fd = connect_to(sa, 0);
    if (scimq_proto_decoder_create(NULL, &rd.dec) != 0)
        die("decoder");
    hello_init(&h);
    send_frame(rd.fd, &h);
    r = next_frame(&rd, now_ms() + 10000, &f);
    if (r != 1 || f->opcode != SCIMQ_PROTO_OP_WELCOME) {
        answer_print("admin", r, f);
        return 1;
    }
    if (f->args.welcome.auth_required) {
        uint8_t *tok = NULL;
        size_t tok_len = 0;

        if (token_file == NULL ||
            scimq__token_load(token_file, &tok, &tok_len) != 0) {
            fprintf(stderr, "gw_peer: the gateway wants a token\n");
            return 1;
        }
        memset(&a, 0, sizeof(a));
        a.opcode = SCIMQ_PROTO_OP_AUTH;
        a.request_id = 2;
        if (scimq__auth_mac(tok, tok_len, f->args.welcome.nonce,
                            f->args.welcome.session_id, a.args.auth.mac) != 0)
            die("mac");
        scimq__token_free(tok, tok_len);
        send_frame(rd.fd, &a);
        r = next_frame(&rd, now_ms() + 10000, &f);
        if (r != 1 || f->opcode != SCIMQ_PROTO_OP_OK) {
            answer_print("admin-auth", r, f);
            return 1;
        }
    }
    memset(&del, 0, sizeof(del));
    del.opcode = SCIMQ_PROTO_OP_QUEUE_DELETE;
    del.request_id = 3;
    del.args.queue.queue.ptr = queue;
    del.args.queue.queue.len = (uint16_t) strlen(queue);
    send_frame(rd.fd, &del);
    r = next_frame(&rd, now_ms() + 10000, &f);
    answer_print("admin", r, f);
    scimq_proto_decoder_destroy(rd.dec);
    close(rd.fd);
    return 0;
}

static int
mode_hijack(const struct sockaddr_in *sa, const char *sid_hex, int stream,
            int count, const char *queue, int secs)
{
    static struct reader rd;
    const scimq_proto_frame_t *f = NULL;
    scimq_proto_frame_t h, get;
    uint64_t end;
    unsigned long frames = 0, delivers = 0, welcomes = 0;
    int r = 0, err = 0;

    if (strlen(sid_hex) != 2 * SCIMQ_PROTO_SESSION_ID_LEN) {
        fprintf(stderr, "gw_peer: a session id is 32 hex digits\n");
        return 2;
    }
    hello_init(&h);
    for (int i = 0; i < SCIMQ_PROTO_SESSION_ID_LEN; i++) {
        unsigned int byte;

        if (sscanf(sid_hex + 2 * i, "%2x", &byte) != 1)
            return 2;
        h.args.hello.session_id[i] = (uint8_t) byte;
    }
    h.args.hello.stream_index = (uint16_t) stream;
    h.args.hello.stream_count = (uint16_t) count;
    rd.fd = connect_to(sa, 0);
    if (scimq_proto_decoder_create(NULL, &rd.dec) != 0)
        die("decoder");
    send_frame(rd.fd, &h);
    end = now_ms() + (uint64_t) secs * 1000u;
    while (!stop && (r = next_frame(&rd, end, &f)) == 1) {
        frames++;
        if (f->opcode == SCIMQ_PROTO_OP_DELIVER)
            delivers++;
        if (f->opcode == SCIMQ_PROTO_OP_ERROR && err == 0)
            err = f->args.error.code;
        if (f->opcode == SCIMQ_PROTO_OP_WELCOME && welcomes++ == 0 &&
            strcmp(queue, "-") != 0) {
            /* Asks, as a consumer stream would, without authenticating. */
            memset(&get, 0, sizeof(get));
            get.opcode = SCIMQ_PROTO_OP_GET;
            get.request_id = 2;
            get.args.get.queue.ptr = queue;
            get.args.get.queue.len = (uint16_t) strlen(queue);
            get.args.get.credit_msgs = 64;
            get.args.get.credit_bytes = UINT64_C(1) << 30;
            send_frame(rd.fd, &get);
        }
    }
    printf("{\"tool\":\"gw_peer\",\"mode\":\"hijack\",\"frames\":%lu,"
           "\"welcomes\":%lu,\"delivers\":%lu,\"closed\":%s,"
           "\"error\":\"%s\"}\n",
           frames, welcomes, delivers, r < 0 ? "true" : "false",
           err != 0 ? scimq_err_name(err) : "");
    scimq_proto_decoder_destroy(rd.dec);
    close(rd.fd);
    return 0;
}

/* ------------------------------------------------------------------------ */

int
main(int argc, char **argv)
{
    struct sockaddr_in sa;

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGTERM, on_term);
    if (argc >= 5 && strcmp(argv[1], "pings") == 0) {
        addr_make(argv[2], argv[3], &sa);
        return mode_pings(&sa, atoi(argv[4]));
    }
    if (argc >= 6 && strcmp(argv[1], "hold") == 0) {
        addr_make(argv[2], argv[3], &sa);
        return mode_hold(&sa, atoi(argv[4]), atoi(argv[5]),
                         argc >= 7 ? argv[6] : NULL);
    }
    if (argc >= 7 && strcmp(argv[1], "drip") == 0) {
        addr_make(argv[2], argv[3], &sa);
        return mode_drip(&sa, argv[4], atoi(argv[5]), atoi(argv[6]));
    }
    if (argc >= 5 && strcmp(argv[1], "admin") == 0) {
        addr_make(argv[2], argv[3], &sa);
        return mode_admin(&sa, argv[4], argc >= 6 ? argv[5] : NULL);
    }
    if (argc >= 9 && strcmp(argv[1], "hijack") == 0) {
        addr_make(argv[2], argv[3], &sa);
        return mode_hijack(&sa, argv[4], atoi(argv[5]), atoi(argv[6]), argv[7],
                           atoi(argv[8]));
    }
    fprintf(stderr,
            "usage: gw_peer pings HOST PORT SECONDS\n"
            "       gw_peer admin HOST PORT QUEUE [TOKEN_FILE]\n"
            "       gw_peer hijack HOST PORT SESSION_HEX STREAM COUNT QUEUE "
            "SECONDS\n"
            "       gw_peer hold HOST PORT N SECONDS [SOURCE]\n"
            "       gw_peer drip HOST PORT QUEUE INTERVAL_MS SECONDS\n");
    return 2;
}
