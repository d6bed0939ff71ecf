/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * net_fuzz: the gateway's network fuzzer.
 *
 *   net_fuzz record LISTEN_PORT GW_HOST GW_PORT OUTDIR SECONDS
 *       a relay on 127.0.0.1:LISTEN_PORT (0: any; the first JSON line says
 *       which) to the gateway: every connection a
 *       client makes through it is passed both ways, and what the client
 *       sent is saved to OUTDIR/session-N.bin (valid sessions, recorded).
 *       Ends after SECONDS or on SIGTERM.
 *   net_fuzz replay HOST PORT DIR SECONDS CONNS SEED [SOURCE_ADDR]
 *       splits every recording of DIR into its frames, and for SECONDS
 *       keeps CONNS connections (from SOURCE_ADDR if given) sending mutated
 *       copies: bytes flipped, frames truncated, length fields changed,
 *       frames duplicated, dropped and reordered, garbage inserted.  What
 *       the gateway answers is decoded: ERRORs are counted by code.
 *       Prints one JSON line of figures.
 *
 * Single-threaded, poll(2); every loop is bounded by the time given.
 */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <scimq/error.h>
#include <scimq/proto.h>

#define MAX_RELAYS 32
#define MAX_CONNS 512
#define MAX_RECORDINGS 64
/* Bytes one mutated session may send (the rest is cut off). */
#define MAX_SESSION (8u << 20)

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
    fprintf(stderr, "net_fuzz: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void
addr_make(const char *host, const char *port, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t) atoi(port));
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
        fprintf(stderr, "net_fuzz: %s: not an IPv4 address\n", host);
        exit(2);
    }
}

static void
nonblock(int fd)
{
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
        die("fcntl");
}

/* ======================================================================== */
/* record                                                                    */
/* ======================================================================== */

struct relay {
    int cfd, sfd; /* client side, gateway side */
    FILE *out;    /* what the client sent */
};

static void
relay_close(struct relay *r)
{
    close(r->cfd);
    close(r->sfd);
    fclose(r->out);
    r->cfd = r->sfd = -1;
    r->out = NULL;
}

/* Passes what from has to to; false when either side is done. */
static bool
relay_pass(int from, int to, FILE *save)
{
    uint8_t buf[64 << 10];
    ssize_t n = recv(from, buf, sizeof(buf), 0), off = 0;

    if (n <= 0)
        return false;
    if (save != NULL && fwrite(buf, 1, (size_t) n, save) != (size_t) n)
        die("write recording");
    while (off < n) {
        ssize_t w = send(to, buf + off, (size_t) (n - off), MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        off += w;
    }
    return true;
}

static int
mode_record(int lport, const struct sockaddr_in *gw, const char *dir, int secs)
{
    struct sockaddr_in la = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t) lport)};
    struct relay relays[MAX_RELAYS];
    uint64_t end = now_ms() + (uint64_t) secs * 1000u;
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1, sessions = 0;

    la.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < MAX_RELAYS; i++)
        relays[i].cfd = relays[i].sfd = -1;
    if (lfd < 0 ||
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(lfd, (struct sockaddr *) &la, sizeof(la)) != 0 ||
        listen(lfd, 64) != 0)
        die("listen");
    {
        socklen_t sl = sizeof(la);

        if (getsockname(lfd, (struct sockaddr *) &la, &sl) != 0)
            die("getsockname");
        printf("{\"tool\":\"net_fuzz\",\"mode\":\"record\",\"port\":%u}\n",
               ntohs(la.sin_port));
    }
    while (!stop && now_ms() < end) {
        struct pollfd p[1 + 2 * MAX_RELAYS];
        int n = 0;

        p[n++] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (int i = 0; i < MAX_RELAYS; i++) {
            p[n++] = (struct pollfd){.fd = relays[i].cfd, .events = POLLIN};
            p[n++] = (struct pollfd){.fd = relays[i].sfd, .events = POLLIN};
        }
        if (poll(p, (nfds_t) n, 100) <= 0)
            continue;
        if (p[0].revents & POLLIN) {
            int cfd = accept(lfd, NULL, NULL), sfd, slot = -1;
            char path[4096];

            for (int i = 0; i < MAX_RELAYS && cfd >= 0; i++)
                if (relays[i].cfd < 0)
                    slot = i;
            if (cfd >= 0 && slot < 0) {
                close(cfd);
            } else if (cfd >= 0) {
                sfd = socket(AF_INET, SOCK_STREAM, 0);
                if (sfd < 0 || connect(sfd, (const struct sockaddr *) gw,
                                       sizeof(*gw)) != 0)
                    die("connect to the gateway");
                snprintf(path, sizeof(path), "%s/session-%d.bin", dir,
                         sessions++);
                relays[slot].out = fopen(path, "wb");
                if (relays[slot].out == NULL)
                    die(path);
                relays[slot].cfd = cfd;
                relays[slot].sfd = sfd;
            }
        }
        for (int i = 0; i < MAX_RELAYS; i++) {
            struct relay *r = &relays[i];
            short cre = p[1 + 2 * i].revents, sre = p[2 + 2 * i].revents;

            if (r->cfd < 0)
                continue;
            if (((cre & (POLLIN | POLLHUP | POLLERR)) &&
                 !relay_pass(r->cfd, r->sfd, r->out)) ||
                ((sre & (POLLIN | POLLHUP | POLLERR)) &&
                 !relay_pass(r->sfd, r->cfd, NULL)))
                relay_close(r);
        }
    }
    for (int i = 0; i < MAX_RELAYS; i++)
        if (relays[i].cfd >= 0)
            relay_close(&relays[i]);
    close(lfd);
    printf("{\"tool\":\"net_fuzz\",\"mode\":\"record\",\"sessions\":%d}\n",
           sessions);
    return 0;
}

/* ======================================================================== */
/* replay                                                                    */
/* ======================================================================== */

/* A recorded session, cut into its frames. */
struct recording {
    uint8_t *data;
    size_t len;
    size_t *frame_end; /* offset just past each frame */
    size_t nframes;
};

static struct recording recs[MAX_RECORDINGS];
static size_t nrecs;

static uint64_t rng_state;

static uint64_t
rng(void)
{
    /* xorshift64*: reproducible from the seed. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static size_t
pick(size_t n)
{
    return n == 0 ? 0 : (size_t) (rng() % n);
}

static void
recording_load(const char *path)
{
    struct recording *r = &recs[nrecs];
    scimq_proto_decoder_t *dec;
    FILE *fp = fopen(path, "rb");
    size_t off = 0, cap = 64;
    long len;

    if (fp == NULL || fseek(fp, 0, SEEK_END) != 0 || (len = ftell(fp)) <= 0) {
        if (fp != NULL)
            fclose(fp);
        return;
    }
    rewind(fp);
    r->len = (size_t) len;
    r->data = malloc(r->len);
    r->frame_end = malloc(cap * sizeof(*r->frame_end));
    if (r->data == NULL || r->frame_end == NULL ||
        fread(r->data, 1, r->len, fp) != r->len)
        die("read recording");
    fclose(fp);
    if (scimq_proto_decoder_create(NULL, &dec) != 0)
        die("decoder");
    while (off < r->len) {
        size_t used = 0;
        int ev =
            scimq_proto_decoder_feed(dec, r->data + off, r->len - off, &used);

        off += used;
        if (ev < 0)
            break; /* a recording ends where the client stopped */
        if (ev == SCIMQ_PROTO_HEADER_READY)
            (void) scimq_proto_decoder_set_payload(dec, NULL, 0);
        if (ev == SCIMQ_PROTO_FRAME_DONE) {
            if (r->nframes == cap) {
                cap *= 2;
                r->frame_end =
                    realloc(r->frame_end, cap * sizeof(*r->frame_end));
                if (r->frame_end == NULL)
                    die("realloc");
            }
            r->frame_end[r->nframes++] = off;
        }
        if (used == 0 && ev == 0)
            break;
    }
    scimq_proto_decoder_destroy(dec);
    if (r->nframes > 0)
        nrecs++;
    else
        free(r->data);
}

/* Figures of the run. */
static struct {
    uint64_t connections, connect_failed, frames, bytes, closed_by_gateway;
    uint64_t answers, errors_total;
    uint64_t mutations[7];
    uint64_t errors[64];
    int32_t codes[64];
    int ncodes;
} fig;

static const char *const mutation_names[7] = {
    "flip", "truncate", "length", "duplicate", "drop", "reorder", "garbage"};

static void
error_count(int32_t code)
{
    fig.errors_total++;
    for (int i = 0; i < fig.ncodes; i++)
        if (fig.codes[i] == code) {
            fig.errors[i]++;
            return;
        }
    if (fig.ncodes < 64) {
        fig.codes[fig.ncodes] = code;
        fig.errors[fig.ncodes++] = 1;
    }
}

/* Appends len bytes to a growing session buffer (bounded). */
static void
emit(uint8_t *out, size_t *n, const uint8_t *p, size_t len)
{
    if (*n + len > MAX_SESSION)
        len = MAX_SESSION - *n;
    memcpy(out + *n, p, len);
    *n += len;
}

/*
 * A mutated copy of recording r in out: each frame is kept, or mutated in
 * one of seven ways, with about one frame in four touched.  Returns its
 * length.
 */
static size_t
mutate(const struct recording *r, uint8_t *out)
{
    size_t n = 0;
    bool cut = false;

    for (size_t i = 0; i < r->nframes && !cut && n < MAX_SESSION; i++) {
        size_t start = i == 0 ? 0 : r->frame_end[i - 1];
        size_t flen = r->frame_end[i] - start, at = n;
        const uint8_t *fp = r->data + start;
        unsigned int m = (unsigned int) pick(28);

        if (m >= 7) {
            emit(out, &n, fp, flen);
            continue;
        }
        fig.mutations[m]++;
        switch (m) {
        case 0: /* flip 1..8 bytes, mostly in the header */
            emit(out, &n, fp, flen);
            for (int k = 1 + (int) pick(8); k > 0 && n > at; k--) {
                size_t span = n - at < 64 || pick(2) ? n - at : 64;

                out[at + pick(span)] ^= (uint8_t) (1u << pick(8));
            }
            break;
        case 1: /* truncated: the session ends inside the frame */
            emit(out, &n, fp, pick(flen));
            cut = true;
            break;
        case 2: /* a length (or any header word) changed */
            emit(out, &n, fp, flen);
            if (n - at >= 8) {
                size_t off = at + pick((n - at < 48 ? n - at : 48) - 3);
                uint32_t v = pick(2) ? (uint32_t) rng() : UINT32_MAX;

                memcpy(out + off, &v, sizeof(v));
            }
            break;
        case 3: /* duplicated */
            emit(out, &n, fp, flen);
            emit(out, &n, fp, flen);
            break;
        case 4: /* dropped */
            break;
        case 5: /* swapped with the next frame */
            if (i + 1 < r->nframes) {
                size_t nlen = r->frame_end[i + 1] - r->frame_end[i];

                emit(out, &n, r->data + r->frame_end[i], nlen);
                i++;
            }
            emit(out, &n, fp, flen);
            break;
        default: { /* garbage before the frame */
            uint8_t junk[256];
            size_t jl = 1 + pick(sizeof(junk));

            for (size_t k = 0; k < jl; k++)
                junk[k] = (uint8_t) rng();
            emit(out, &n, junk, jl);
            emit(out, &n, fp, flen);
            break;
        }
        }
        fig.frames++;
    }
    return n;
}

struct fconn {
    int fd;
    uint8_t *buf;
    size_t len, off;
    uint64_t linger_until; /* after sending: read answers until then */
    scimq_proto_decoder_t *dec;
    bool dead;
};

static void
fconn_end(struct fconn *c)
{
    close(c->fd);
    c->fd = -1;
    scimq_proto_decoder_reset(c->dec);
}

static bool
fconn_start(struct fconn *c, const struct sockaddr_in *sa,
            const struct sockaddr_in *src)
{
    const struct recording *r = &recs[pick(nrecs)];

    c->len = mutate(r, c->buf);
    c->off = 0;
    c->linger_until = 0;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0)
        return false;
    if (src != NULL &&
        bind(c->fd, (const struct sockaddr *) src, sizeof(*src)) != 0) {
        close(c->fd);
        c->fd = -1;
        return false;
    }
    if (connect(c->fd, (const struct sockaddr *) sa, sizeof(*sa)) != 0) {
        fig.connect_failed++;
        close(c->fd);
        c->fd = -1;
        return false;
    }
    nonblock(c->fd);
    fig.connections++;
    return true;
}

/* Reads and decodes what the gateway answered; false once it closed. */
static bool
fconn_read(struct fconn *c)
{
    uint8_t buf[64 << 10];
    ssize_t got = recv(c->fd, buf, sizeof(buf), 0);
    size_t off = 0;

    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
        return false;
    while (got > 0 && off < (size_t) got) {
        size_t used = 0;
        int ev = scimq_proto_decoder_feed(c->dec, buf + off, (size_t) got - off,
                                          &used);

        off += used;
        if (ev < 0) {
            /* A gateway sends valid frames: this would be a finding. */
            fprintf(stderr, "net_fuzz: the gateway sent an invalid frame\n");
            exit(3);
        }
        if (ev == SCIMQ_PROTO_HEADER_READY)
            (void) scimq_proto_decoder_set_payload(c->dec, NULL, 0);
        if (ev == SCIMQ_PROTO_FRAME_DONE) {
            const scimq_proto_frame_t *f = scimq_proto_decoder_frame(c->dec);

            fig.answers++;
            if (f->opcode == SCIMQ_PROTO_OP_ERROR)
                error_count(f->args.error.code);
        }
    }
    return true;
}

static int
mode_replay(const struct sockaddr_in *sa, const char *dir, int secs, int nconns,
            uint64_t seed, const char *source)
{
    static struct fconn conns[MAX_CONNS];
    struct sockaddr_in src;
    uint64_t end = now_ms() + (uint64_t) secs * 1000u, t0 = now_ms();
    struct dirent *de;
    DIR *d = opendir(dir);
    size_t total_frames = 0;

    if (d == NULL)
        die(dir);
    while ((de = readdir(d)) != NULL && nrecs < MAX_RECORDINGS) {
        char path[4096];

        if (strstr(de->d_name, ".bin") == NULL)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        recording_load(path);
    }
    closedir(d);
    if (nrecs == 0) {
        fprintf(stderr, "net_fuzz: no recording with a whole frame in %s\n",
                dir);
        return 1;
    }
    for (size_t i = 0; i < nrecs; i++)
        total_frames += recs[i].nframes;
    if (source != NULL)
        addr_make(source, "0", &src);
    if (nconns > MAX_CONNS)
        nconns = MAX_CONNS;
    rng_state = seed != 0 ? seed : 1;
    for (int i = 0; i < nconns; i++) {
        conns[i].fd = -1;
        conns[i].buf = malloc(MAX_SESSION);
        if (conns[i].buf == NULL ||
            scimq_proto_decoder_create(NULL, &conns[i].dec) != 0)
            die("setup");
    }
    while (!stop && now_ms() < end) {
        struct pollfd p[MAX_CONNS];
        uint64_t now = now_ms();

        for (int i = 0; i < nconns; i++) {
            struct fconn *c = &conns[i];

            if (c->fd < 0 && !fconn_start(c, sa, source ? &src : NULL))
                c->fd = -1;
            p[i] = (struct pollfd){
                .fd = c->fd,
                .events = (short) (POLLIN | (c->off < c->len ? POLLOUT : 0))};
        }
        if (poll(p, (nfds_t) nconns, 50) < 0 && errno != EINTR)
            die("poll");
        now = now_ms();
        for (int i = 0; i < nconns; i++) {
            struct fconn *c = &conns[i];

            if (c->fd < 0)
                continue;
            if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
                !fconn_read(c)) {
                if (c->off < c->len || c->linger_until > now)
                    fig.closed_by_gateway++;
                fconn_end(c);
                continue;
            }
            if ((p[i].revents & POLLOUT) && c->off < c->len) {
                ssize_t w =
                    send(c->fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL);

                if (w > 0) {
                    c->off += (size_t) w;
                    fig.bytes += (uint64_t) w;
                } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                    fig.closed_by_gateway++;
                    fconn_end(c);
                    continue;
                }
            }
            if (c->off == c->len && c->linger_until == 0)
                c->linger_until = now + 50 + pick(400);
            else if (c->linger_until != 0 && now >= c->linger_until)
                fconn_end(c); /* ends it here: half the time mid-session */
        }
    }
    for (int i = 0; i < nconns; i++) {
        if (conns[i].fd >= 0)
            fconn_end(&conns[i]);
        scimq_proto_decoder_destroy(conns[i].dec);
        free(conns[i].buf);
    }
    printf("{\"tool\":\"net_fuzz\",\"mode\":\"replay\",\"seconds\":%.1f,"
           "\"recordings\":%zu,\"recorded_frames\":%zu,\"connections\":%" PRIu64
           ",\"connect_failed\":%" PRIu64 ",\"mutated_frames\":%" PRIu64
           ",\"bytes\":%" PRIu64 ",\"closed_by_gateway\":%" PRIu64
           ",\"answers\":%" PRIu64 ",\"errors_total\":%" PRIu64
           ",\"mutations\":{",
           (double) (now_ms() - t0) / 1000.0, nrecs, total_frames,
           fig.connections, fig.connect_failed, fig.frames, fig.bytes,
           fig.closed_by_gateway, fig.answers, fig.errors_total);
    for (int i = 0; i < 7; i++)
        printf("%s\"%s\":%" PRIu64, i ? "," : "", mutation_names[i],
               fig.mutations[i]);
    printf("},\"errors\":{");
    for (int i = 0; i < fig.ncodes; i++)
        printf("%s\"%s\":%" PRIu64, i ? "," : "", scimq_err_name(fig.codes[i]),
               fig.errors[i]);
    printf("}}\n");
    for (size_t i = 0; i < nrecs; i++) {
        free(recs[i].data);
        free(recs[i].frame_end);
    }
    return 0;
}

int
main(int argc, char **argv)
{
    struct sockaddr_in sa;

    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGTERM, on_term);
    signal(SIGPIPE, SIG_IGN);
    if (argc >= 7 && strcmp(argv[1], "record") == 0) {
        addr_make(argv[3], argv[4], &sa);
        return mode_record(atoi(argv[2]), &sa, argv[5], atoi(argv[6]));
    }
    if (argc >= 8 && strcmp(argv[1], "replay") == 0) {
        addr_make(argv[2], argv[3], &sa);
        return mode_replay(&sa, argv[4], atoi(argv[5]), atoi(argv[6]),
                           strtoull(argv[7], NULL, 0),
                           argc >= 9 ? argv[8] : NULL);
    }
    fprintf(stderr, "usage: net_fuzz record LISTEN_PORT GW_HOST GW_PORT OUTDIR "
                    "SECONDS\n"
                    "       net_fuzz replay HOST PORT DIR SECONDS CONNS SEED "
                    "[SOURCE_ADDR]\n");
    return 2;
}
