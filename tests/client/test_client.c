/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Tests of libscimq, the client library, against the real gateway: the
 * scimq-gateway of this build tree runs as a child process of the test
 * (--listen 127.0.0.1:0 --port-file), started by each suite and stopped by
 * PID at its end (SIGTERM, then SIGKILL after a bound).
 *
 * Failures come from real parts.  A small TCP proxy in a thread of the
 * test sits between client and gateway where a test needs it; it frames
 * both directions with the protocol library's decoder, counts frames, and
 * on request cuts a stream after N PUTs without confirming the last ones,
 * swallows STATS requests, or passes half a DELIVER and closes.  The
 * gateway's own behaviour does the rest: SIGTERM and a restart for its BYE,
 * SIGKILL for a lost session, a token file for authentication,
 * QUEUE_CLOSE for end of stream, lease expiry for redelivery.  What a
 * gateway holds is checked by draining the queue with a consumer and from
 * STATS (members documented in doc/scimp.md, QUEUE_LIST and STATS).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include <scimq/scimq.h>

#include "cunit_main.h"

/* ======================================================================== */
/* Small helpers                                                             */
/* ======================================================================== */

/* SCIMQ_TEST_TIMEOUT_MULTIPLIER: every bound below is scaled by it. */
static int mult = 1;

static void gw_kill_all(void);

static void
env_init(void)
{
    static bool done;
    const char *m = getenv("SCIMQ_TEST_TIMEOUT_MULTIPLIER");

    if (done)
        return;
    done = true;
    if (m != NULL && atoi(m) > 1)
        mult = atoi(m);
    atexit(gw_kill_all);
}

static int
scaled(int ms)
{
    env_init();
    return ms * mult;
}

static uint64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

static void
sleep_ms(unsigned int ms)
{
    struct timespec ts = {(time_t) (ms / 1000), (long) (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static uint64_t
be64(const void *v)
{
    const uint8_t *p = v;
    uint64_t x = 0;

    for (int i = 0; i < 8; i++)
        x = (x << 8) | p[i];
    return x;
}

static void
put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t) v;
        v >>= 8;
    }
}

/* ======================================================================== */
/* The gateway, a child process                                              */
/* ======================================================================== */

#define GW_START_MS 10000 /* for the port file */
#define GW_STOP_MS 10000  /* after SIGTERM, before SIGKILL */
#define GW_REGISTRY 8
#define GW_TOKEN "secret-token"

struct gateway {
    pid_t pid;
    uint16_t port;
    char dir[256]; /* port file, log and token file */
    char url[64];
    char admin_url[320]; /* unix:PATH of its admin socket */
};

/*
 * Every gateway still running (its PID and directory, copied: a test that
 * stops half-way, when a fatal assertion jumps out of it, leaves its own
 * struct gateway behind), so that suite cleanups and exit kill what is
 * left.  The children also get SIGKILL if this process dies
 * (PR_SET_PDEATHSIG; they are forked from the main thread, which lives as
 * long as the process).
 */
static struct {
    pid_t pid;
    char dir[256];
} gw_running[GW_REGISTRY];

static void
gw_path(const struct gateway *g, const char *leaf, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", g->dir, leaf);
}

/* Where the build tree's gateway is ($top_builddir, or found from here). */
static int
gw_binary(char *buf, size_t cap)
{
    const char *top = getenv("top_builddir");
    char self[PATH_MAX];
    ssize_t n;
    int len;

    if (top != NULL && top[0] != '\0') {
        len = snprintf(buf, cap, "%s/src/gateway/scimq-gateway", top);
    } else {
        /* Run by hand: this binary is tests/client/test_client. */
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
            return -1;
        self[n] = '\0';
        for (int i = 0; i < 3; i++) {
            char *slash = strrchr(self, '/');

            if (slash != NULL)
                *slash = '\0';
        }
        len = snprintf(buf, cap, "%s/src/gateway/scimq-gateway", self);
    }
    if (len < 0 || (size_t) len >= cap)
        return -1;
    if (access(buf, X_OK) != 0) {
        fprintf(stderr, "%s: %s (build the tree first: make)\n", buf,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* Prints the end of the gateway's log (stdout and stderr). */
static void
gw_dump_log(const struct gateway *g)
{
    char path[320], line[1024];
    long lines = 0, skip;
    FILE *fp;

    gw_path(g, "gateway.log", path, sizeof(path));
    fp = fopen(path, "r");
    if (fp == NULL)
        return;
    while (fgets(line, sizeof(line), fp) != NULL)
        lines++;
    rewind(fp);
    skip = lines > 40 ? lines - 40 : 0;
    fprintf(stderr, "---- %s (last %ld lines) ----\n", path, lines - skip);
    while (fgets(line, sizeof(line), fp) != NULL)
        if (skip-- <= 0)
            fputs(line, stderr);
    fprintf(stderr, "----\n");
    fclose(fp);
}

/* Removes a stopped gateway's files and forgets it. */
static void
gw_cleanup(pid_t pid, const char *dir)
{
    static const char *const leaves[] = {"gateway.port", "gateway.log", "token",
                                         "admin.sock"};
    char path[320];

    for (int i = 0; i < GW_REGISTRY; i++)
        if (gw_running[i].pid == pid && pid > 0)
            gw_running[i].pid = 0;
    for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, leaves[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void
gw_forget(struct gateway *g)
{
    gw_cleanup(g->pid, g->dir);
    g->pid = 0;
}

/* Waits up to ms for the gateway to exit; true with its wait status. */
static bool
gw_wait(struct gateway *g, int ms, int *status_p)
{
    uint64_t t0 = now_ms();

    for (;;) {
        pid_t r = waitpid(g->pid, status_p, WNOHANG);

        if (r == g->pid || (r < 0 && errno == ECHILD))
            return true;
        if (now_ms() - t0 >= (uint64_t) ms)
            return false;
        sleep_ms(10);
    }
}

/*
 * Starts a gateway on 127.0.0.1, any free port; with a token, clients
 * must authenticate with it.  Returns 0 once it listens (its port file is
 * there), -1 with the reason on stderr.
 */
static int
gw_start(struct gateway *g, const char *token)
{
    const char *tmp = getenv("TMPDIR");
    char bin[PATH_MAX], port_file[320], log[320], tok[320], line[128];
    char admin[300];
    char *argv[18];
    int argc = 0, fd, status, slot = -1;
    uint64_t t0;
    pid_t parent = getpid();
    FILE *fp;

    memset(g, 0, sizeof(*g));
    for (int i = 0; i < GW_REGISTRY; i++)
        if (gw_running[i].pid == 0)
            slot = i;
    if (slot < 0 || gw_binary(bin, sizeof(bin)) != 0)
        return -1;
    snprintf(g->dir, sizeof(g->dir), "%s/scimq-client-test.XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(g->dir) == NULL) {
        fprintf(stderr, "mkdtemp %s: %s\n", g->dir, strerror(errno));
        return -1;
    }
    gw_path(g, "gateway.port", port_file, sizeof(port_file));
    gw_path(g, "gateway.log", log, sizeof(log));
    gw_path(g, "token", tok, sizeof(tok));
    gw_path(g, "admin.sock", admin, sizeof(admin));
    snprintf(g->admin_url, sizeof(g->admin_url), "unix:%s", admin);
    argv[argc++] = bin;
    argv[argc++] = "--listen";
    argv[argc++] = "127.0.0.1:0";
    argv[argc++] = "--port-file";
    argv[argc++] = port_file;
    argv[argc++] = "--workers";
    argv[argc++] = "2";
    /* The tests hold at most some 60 MiB of payload at a time. */
    argv[argc++] = "--memory-limit";
    argv[argc++] = "256MiB";
    argv[argc++] = "--log-level";
    argv[argc++] = "warn";
    argv[argc++] = "--admin-socket";
    argv[argc++] = admin;
    if (token != NULL) {
        fd = open(tok, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 ||
            write(fd, token, strlen(token)) != (ssize_t) strlen(token)) {
            fprintf(stderr, "%s: %s\n", tok, strerror(errno));
            if (fd >= 0)
                close(fd);
            rmdir(g->dir);
            return -1;
        }
        close(fd);
        argv[argc++] = "--token-file";
        argv[argc++] = tok;
    }
    argv[argc] = NULL;

    g->pid = fork();
    if (g->pid < 0) {
        fprintf(stderr, "fork: %s\n", strerror(errno));
        gw_forget(g);
        return -1;
    }
    if (g->pid == 0) {
        /* Only async-signal-safe calls between fork and exec. */
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            (void) dup2(fd, STDOUT_FILENO);
            (void) dup2(fd, STDERR_FILENO);
            if (fd > STDERR_FILENO)
                close(fd);
        }
        execv(bin, argv);
        _exit(127);
    }
    gw_running[slot].pid = g->pid;
    snprintf(gw_running[slot].dir, sizeof(gw_running[slot].dir), "%s", g->dir);

    /* The port file appears (atomically) once it listens. */
    for (t0 = now_ms();; sleep_ms(10)) {
        if (waitpid(g->pid, &status, WNOHANG) == g->pid) {
            fprintf(stderr, "the gateway exited at start (status 0x%x)\n",
                    (unsigned int) status);
            gw_dump_log(g);
            gw_forget(g);
            return -1;
        }
        fp = fopen(port_file, "r");
        if (fp != NULL) {
            char *colon = NULL;

            if (fgets(line, sizeof(line), fp) != NULL)
                colon = strrchr(line, ':');
            fclose(fp);
            if (colon != NULL && atoi(colon + 1) > 0) {
                g->port = (uint16_t) atoi(colon + 1);
                break;
            }
        }
        if (now_ms() - t0 > (uint64_t) scaled(GW_START_MS)) {
            fprintf(stderr, "no port file from the gateway after %d ms\n",
                    scaled(GW_START_MS));
            kill(g->pid, SIGKILL);
            (void) gw_wait(g, scaled(GW_STOP_MS), &status);
            gw_dump_log(g);
            gw_forget(g);
            return -1;
        }
    }
    snprintf(g->url, sizeof(g->url), "scimq://127.0.0.1:%u", g->port);
    return 0;
}

/*
 * Stops a gateway: SIGTERM (it drains, then exits), SIGKILL if it has not
 * exited within the bound.  Returns 0 when it exited by itself with status
 * 0, -1 otherwise (the log is printed).
 */
static int
gw_stop(struct gateway *g)
{
    int status = 0, rc = 0;

    if (g->pid <= 0)
        return 0;
    kill(g->pid, SIGTERM);
    if (!gw_wait(g, scaled(GW_STOP_MS), &status)) {
        fprintf(stderr, "the gateway ignored SIGTERM for %d ms: SIGKILL\n",
                scaled(GW_STOP_MS));
        kill(g->pid, SIGKILL);
        (void) gw_wait(g, scaled(GW_STOP_MS), &status);
        rc = -1;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "the gateway ended with status 0x%x\n",
                (unsigned int) status);
        rc = -1;
    }
    if (rc != 0)
        gw_dump_log(g);
    gw_forget(g);
    return rc;
}

/* Kills a gateway at once (a crash) and reaps it. */
static void
gw_kill(struct gateway *g)
{
    int status;

    if (g->pid <= 0)
        return;
    kill(g->pid, SIGKILL);
    (void) gw_wait(g, scaled(GW_STOP_MS), &status);
    gw_forget(g);
}

static void
gw_kill_all(void)
{
    for (int i = 0; i < GW_REGISTRY; i++) {
        pid_t pid = gw_running[i].pid;
        int status;

        if (pid <= 0)
            continue;
        kill(pid, SIGKILL);
        (void) waitpid(pid, &status, 0);
        gw_cleanup(pid, gw_running[i].dir);
    }
}

/* ======================================================================== */
/* Fault-injecting proxy                                                     */
/* ======================================================================== */

/*
 * A TCP proxy in a thread (poll() over non-blocking sockets).  Every
 * accepted client connection gets its own connection to the gateway; each
 * direction is a "flow" whose bytes are framed with the protocol decoder
 * (payloads discarded: only headers and args are looked at) and kept until
 * the frame is complete, then forwarded whole, dropped, or cut.  A flow
 * reads its source only while the bytes waiting for the other side stay
 * under PX_OUT_CAP, so a slow side slows the other down as TCP would.
 *
 * Ends are passed on: EOF on one side shuts the other side's write half
 * once everything before it was written.  A cut closes the gateway side at
 * once (what the proxy had not yet written there is lost), writes to the
 * client what was already decided for it, then shuts the client's write
 * half and reads (and discards) until the client closes, so the client
 * sees every reply sent before the cut.
 */
#define PX_CONNS 48
#define PX_CHUNK (256u << 10)
#define PX_OUT_CAP (8u << 20)
/* A cut stream's last PUTs before the cut are not confirmed... */
#define PX_CUT_UNCONFIRMED 4u
/* ... and it is cut this long after the first of them, if the client
 * sends it no more PUTs (it may wait for a confirmation that never comes,
 * or send on its other streams). */
#define PX_CUT_WAIT_MS 200u
#define PX_NAME 64

enum { PX_C2G = 0, PX_G2C = 1 };

enum px_action { PX_FORWARD, PX_DROP, PX_CUT, PX_HALF };

struct px_buf {
    uint8_t *p;
    size_t len, cap;
};

struct px_flow {
    scimq_proto_decoder_t *dec;
    struct px_buf frame; /* the frame being decoded, as received */
    struct px_buf out;   /* decided bytes for the other side */
    size_t out_off;      /* of them, already written */
    bool raw;            /* framing lost: the rest passes through as is */
    bool eof;            /* the source ended (or was closed by a cut) */
    bool sink_dead;      /* the other side cannot be written: discard */
    bool shut;           /* the other side's write half was shut */
};

struct px_conn {
    bool used;
    unsigned int gen;
    int fd[2];              /* [PX_C2G] client side, [PX_G2C] gateway side */
    struct px_flow flow[2]; /* flow[d] reads fd[d], writes fd[1 - d] */
    uint16_t index;         /* the HELLO's stream index */
    bool join;              /* the HELLO named a session */
    uint64_t hello_rid, auth_rid;
    bool auth_pending;
    bool client_bye, gw_bye; /* who said BYE first */
    uint32_t puts;
    /* Confirmed PUTs forwarded to the gateway whose reply was not (yet)
     * forwarded to the client: the client may send them again. */
    uint64_t *open;
    size_t n_open, cap_open;
    /* PUTs of the cut stream that are stored but never confirmed. */
    uint64_t swallow[PX_CUT_UNCONFIRMED];
    unsigned int n_swallow;
    /* GET and EOS frames of the watched queue on this stream. */
    uint32_t watch_gets, watch_eos;
    uint64_t watch_get_rid;
};

struct px_counts {
    uint32_t accepted, refused; /* connections; refused: no gateway */
    uint32_t creates, joins;    /* WELCOMEs to a new / joining HELLO */
    uint32_t auth_ok;           /* OK replies to AUTH */
    uint32_t puts, puts_by_index[8];
    uint32_t acks, nacks, extends; /* from the client */
    uint32_t ack_frames;           /* ACK_RANGE frames (acks counts ids) */
    uint32_t delivers;             /* forwarded to the client */
    uint32_t gw_byes, bye_answers; /* BYE started by the gateway; answers */
    uint32_t cuts, halves, muted;  /* faults done */
    uint32_t eos_wrong_rid;        /* EOS of the watched queue */
    /* PUTs that were forwarded and whose confirmation the client may never
     * have seen because their stream ended: the duplicates the client may
     * cause by sending them again are bounded by this. */
    uint32_t maybe_dups;
    uint64_t half_msg_id; /* the DELIVER passed by half */
};

struct proxy {
    pthread_t thread;
    bool running;
    pthread_mutex_t lock;
    atomic_bool stop;
    int lfd;
    uint16_t port;
    char url[64];
    /* Switches, counters and connections (lock). */
    uint16_t upstream;   /* the gateway's port; 0: refuse every client */
    uint32_t cut_after;  /* cut the stream that gets this many PUTs */
    int cut_conn;        /* the stream being cut, or -1 */
    uint64_t cut_since;  /* its first unconfirmed PUT */
    bool cut_done;       /* once per test */
    bool mute_stats;     /* drop every STATS request */
    bool half_deliver;   /* the next DELIVER: half of it, then close */
    char watch[PX_NAME]; /* queue whose GETs and EOSes are tallied */
    struct px_counts n;
    struct px_conn conns[PX_CONNS];
    uint8_t rbuf[PX_CHUNK];
};

static struct proxy px;

/* Runs a statement with the proxy's lock held. */
#define PX_LOCKED(stmt)                                                        \
    do {                                                                       \
        pthread_mutex_lock(&px.lock);                                          \
        stmt;                                                                  \
        pthread_mutex_unlock(&px.lock);                                        \
    } while (0)

static int
px_append(struct px_buf *b, const void *data, size_t len)
{
    if (b->len + len > b->cap) {
        size_t cap = b->cap > 0 ? b->cap : 4096;
        uint8_t *p;

        while (cap < b->len + len)
            cap *= 2;
        p = realloc(b->p, cap);
        if (p == NULL)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, len);
    b->len += len;
    return 0;
}

static size_t
px_pending(const struct px_flow *fl)
{
    return fl->out.len - fl->out_off;
}

static bool
rid_add(uint64_t **v, size_t *n, size_t *cap, uint64_t rid)
{
    if (*n == *cap) {
        size_t c = *cap > 0 ? *cap * 2 : 64;
        uint64_t *p = realloc(*v, c * sizeof(*p));

        if (p == NULL)
            return false;
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = rid;
    return true;
}

static bool
rid_remove(uint64_t *v, size_t *n, uint64_t rid)
{
    for (size_t i = 0; i < *n; i++)
        if (v[i] == rid) {
            v[i] = v[--*n];
            return true;
        }
    return false;
}

static bool
px_watched(const struct proxy *p, const scimq_proto_str_t *q)
{
    return p->watch[0] != '\0' && q->len == strlen(p->watch) &&
           memcmp(q->ptr, p->watch, q->len) == 0;
}

static void
px_conn_free(struct proxy *p, int ci)
{
    struct px_conn *cn = &p->conns[ci];
    unsigned int gen = cn->gen;

    for (int d = 0; d < 2; d++) {
        if (cn->fd[d] >= 0)
            close(cn->fd[d]);
        scimq_proto_decoder_destroy(cn->flow[d].dec);
        free(cn->flow[d].frame.p);
        free(cn->flow[d].out.p);
    }
    p->n.maybe_dups += (uint32_t) cn->n_open;
    free(cn->open);
    if (p->cut_conn == ci) {
        p->cut_conn = -1;
        p->cut_done = true;
    }
    memset(cn, 0, sizeof(*cn));
    cn->gen = gen + 1;
    cn->fd[0] = cn->fd[1] = -1;
}

/* Resets both sides (RST), as when a process dies. */
static void
px_abort(struct proxy *p, int ci)
{
    struct linger lg = {1, 0};

    for (int d = 0; d < 2; d++)
        if (p->conns[ci].fd[d] >= 0)
            (void) setsockopt(p->conns[ci].fd[d], SOL_SOCKET, SO_LINGER, &lg,
                              sizeof(lg));
    px_conn_free(p, ci);
}

/* Cuts the stream: the gateway side goes now, the client side drains. */
static void
px_cut(struct proxy *p, int ci)
{
    struct px_conn *cn = &p->conns[ci];

    if (cn->fd[PX_G2C] >= 0)
        close(cn->fd[PX_G2C]);
    cn->fd[PX_G2C] = -1;
    cn->flow[PX_G2C].eof = true;
    cn->flow[PX_G2C].frame.len = 0;
    cn->flow[PX_C2G].sink_dead = true;
    cn->flow[PX_C2G].frame.len = 0;
    cn->flow[PX_C2G].out.len = cn->flow[PX_C2G].out_off = 0;
    /* No reply comes any more: those still open may be sent again. */
    p->n.maybe_dups += (uint32_t) cn->n_open;
    cn->n_open = 0;
}

static void
px_out(struct proxy *p, int ci, int d, const void *data, size_t len)
{
    struct px_flow *fl = &p->conns[ci].flow[d];

    if (fl->sink_dead || len == 0)
        return;
    if (fl->out_off > 0 && fl->out_off == fl->out.len)
        fl->out.len = fl->out_off = 0;
    if (px_append(&fl->out, data, len) != 0)
        fl->sink_dead = true; /* out of memory: the test fails on counts */
}

/* A PUT from the client: counted, and the cut decided. */
static enum px_action
px_put(struct proxy *p, int ci, const scimq_proto_frame_t *f)
{
    struct px_conn *cn = &p->conns[ci];
    bool confirm = (f->flags & SCIMQ_PROTO_F_CONFIRM) != 0;

    cn->puts++;
    p->n.puts++;
    p->n.puts_by_index[cn->index % 8]++;
    if (p->cut_after > 0 && !p->cut_done &&
        (p->cut_conn == ci ||
         (p->cut_conn < 0 && cn->puts + PX_CUT_UNCONFIRMED > p->cut_after))) {
        if (p->cut_conn < 0) {
            p->cut_conn = ci;
            p->cut_since = now_ms();
        }
        if (cn->puts >= p->cut_after) {
            p->cut_done = true;
            return PX_CUT;
        }
        /* Odd ones reach the gateway (stored, never confirmed: sent again,
         * duplicates), even ones are lost on the way. */
        if (cn->puts % 2 == 0)
            return PX_DROP;
        if (confirm && cn->n_swallow < PX_CUT_UNCONFIRMED)
            cn->swallow[cn->n_swallow++] = f->request_id;
    }
    if (confirm &&
        !rid_add(&cn->open, &cn->n_open, &cn->cap_open, f->request_id))
        p->n.maybe_dups++; /* cannot track it: count it as open */
    return PX_FORWARD;
}

static enum px_action
px_from_client(struct proxy *p, int ci, const scimq_proto_frame_t *f)
{
    static const uint8_t zero[SCIMQ_PROTO_SESSION_ID_LEN];
    struct px_conn *cn = &p->conns[ci];

    switch (f->opcode) {
    case SCIMQ_PROTO_OP_HELLO:
        cn->hello_rid = f->request_id;
        cn->index = f->args.hello.stream_index;
        cn->join = memcmp(f->args.hello.session_id, zero, sizeof(zero)) != 0;
        break;
    case SCIMQ_PROTO_OP_AUTH:
        cn->auth_rid = f->request_id;
        cn->auth_pending = true;
        break;
    case SCIMQ_PROTO_OP_PUT:
        return px_put(p, ci, f);
    case SCIMQ_PROTO_OP_GET:
        if (px_watched(p, &f->args.get.queue)) {
            cn->watch_gets++;
            cn->watch_get_rid = f->request_id;
        }
        break;
    case SCIMQ_PROTO_OP_ACK:
        p->n.acks++;
        break;
    case SCIMQ_PROTO_OP_ACK_RANGE: /* session version 3: every id named */
        p->n.ack_frames++;
        for (unsigned int i = 0; i < f->args.ack_range.ranges.n; i++)
            p->n.acks +=
                scimq_proto_range_at(&f->args.ack_range.ranges, i).count;
        break;
    case SCIMQ_PROTO_OP_NACK:
        p->n.nacks++;
        break;
    case SCIMQ_PROTO_OP_EXTEND:
        p->n.extends++;
        break;
    case SCIMQ_PROTO_OP_STATS:
        if (p->mute_stats) {
            p->n.muted++;
            return PX_DROP;
        }
        break;
    case SCIMQ_PROTO_OP_BYE:
        if (cn->gw_bye)
            p->n.bye_answers++;
        else
            cn->client_bye = true;
        break;
    default:
        break;
    }
    return PX_FORWARD;
}

static enum px_action
px_from_gateway(struct proxy *p, int ci, const scimq_proto_frame_t *f)
{
    struct px_conn *cn = &p->conns[ci];

    switch (f->opcode) {
    case SCIMQ_PROTO_OP_WELCOME:
        if (f->request_id == cn->hello_rid) {
            if (cn->join)
                p->n.joins++;
            else
                p->n.creates++;
        }
        break;
    case SCIMQ_PROTO_OP_OK:
        if (cn->auth_pending && f->request_id == cn->auth_rid) {
            cn->auth_pending = false;
            p->n.auth_ok++;
        }
        break;
    case SCIMQ_PROTO_OP_ERROR:
    case SCIMQ_PROTO_OP_PUT_OK:
        if (f->opcode == SCIMQ_PROTO_OP_ERROR && cn->auth_pending &&
            f->request_id == cn->auth_rid)
            cn->auth_pending = false;
        for (unsigned int i = 0; i < cn->n_swallow; i++)
            if (cn->swallow[i] == f->request_id) {
                cn->swallow[i] = cn->swallow[--cn->n_swallow];
                return PX_DROP;
            }
        (void) rid_remove(cn->open, &cn->n_open, f->request_id);
        break;
    case SCIMQ_PROTO_OP_DELIVER:
        if (p->half_deliver) {
            p->half_deliver = false;
            p->n.half_msg_id = f->args.deliver.msg_id;
            return PX_HALF;
        }
        p->n.delivers++;
        break;
    case SCIMQ_PROTO_OP_EOS:
        if (px_watched(p, &f->args.queue.queue)) {
            cn->watch_eos++;
            if (f->request_id != cn->watch_get_rid)
                p->n.eos_wrong_rid++;
        }
        break;
    case SCIMQ_PROTO_OP_BYE:
        if (!cn->client_bye) {
            cn->gw_bye = true;
            p->n.gw_byes++;
        }
        break;
    default:
        break;
    }
    return PX_FORWARD;
}

/* Frames bytes read from side d and acts on each whole frame. */
static void
px_process(struct proxy *p, int ci, int d, const uint8_t *data, size_t n)
{
    struct px_conn *cn = &p->conns[ci];
    struct px_flow *fl = &cn->flow[d];
    size_t off = 0, used;
    enum px_action act;
    int rc;

    while (off < n) {
        if (fl->raw) {
            px_out(p, ci, d, data + off, n - off);
            return;
        }
        used = 0;
        rc = scimq_proto_decoder_feed(fl->dec, data + off, n - off, &used);
        if (used > 0 && px_append(&fl->frame, data + off, used) != 0) {
            px_abort(p, ci);
            return;
        }
        off += used;
        if (rc < 0) {
            /* Not SciMP (any more): pass everything on untouched. */
            fl->raw = true;
            px_out(p, ci, d, fl->frame.p, fl->frame.len);
            fl->frame.len = 0;
            continue;
        }
        if (rc == SCIMQ_PROTO_HEADER_READY) {
            (void) scimq_proto_decoder_set_payload(fl->dec, NULL, 0);
            continue;
        }
        if (rc != SCIMQ_PROTO_FRAME_DONE)
            continue;
        act = d == PX_C2G
                  ? px_from_client(p, ci, scimq_proto_decoder_frame(fl->dec))
                  : px_from_gateway(p, ci, scimq_proto_decoder_frame(fl->dec));
        switch (act) {
        case PX_FORWARD:
            px_out(p, ci, d, fl->frame.p, fl->frame.len);
            break;
        case PX_DROP:
            break;
        case PX_HALF:
            px_out(p, ci, d, fl->frame.p, fl->frame.len / 2);
            p->n.halves++;
            px_cut(p, ci);
            return;
        case PX_CUT:
            p->n.cuts++;
            px_cut(p, ci);
            return;
        }
        fl->frame.len = 0;
    }
}

/* Writes what flow d holds for the other side. */
static void
px_write(struct proxy *p, int ci, int d)
{
    struct px_conn *cn = &p->conns[ci];
    struct px_flow *fl = &cn->flow[d];
    int fd = cn->fd[1 - d];
    ssize_t n;

    while (px_pending(fl) > 0 && fd >= 0 && !fl->sink_dead) {
        n = send(fd, fl->out.p + fl->out_off, px_pending(fl),
                 MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            fl->sink_dead = true;
            break;
        }
        fl->out_off += (size_t) n;
    }
    if (fl->sink_dead || fl->out_off == fl->out.len)
        fl->out.len = fl->out_off = 0;
}

/* Reads side d: bytes are framed, EOF or an error ends the flow. */
static void
px_read(struct proxy *p, int ci, int d)
{
    struct px_conn *cn = &p->conns[ci];
    struct px_flow *fl = &cn->flow[d];
    ssize_t n = recv(cn->fd[d], p->rbuf, sizeof(p->rbuf), MSG_DONTWAIT);

    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        /* A frame cut short is passed on as it is. */
        fl->eof = true;
        px_out(p, ci, d, fl->frame.p, fl->frame.len);
        fl->frame.len = 0;
        return;
    }
    if (fl->sink_dead)
        return;
    px_process(p, ci, d, p->rbuf, (size_t) n);
}

/* Passes ends on and frees a connection both of whose flows are done. */
static void
px_progress(struct proxy *p, int ci)
{
    struct px_conn *cn = &p->conns[ci];
    bool done = true;

    for (int d = 0; d < 2; d++) {
        struct px_flow *fl = &cn->flow[d];
        bool flushed = fl->sink_dead || px_pending(fl) == 0;

        if (fl->eof && flushed && !fl->shut) {
            if (cn->fd[1 - d] >= 0)
                (void) shutdown(cn->fd[1 - d], SHUT_WR);
            fl->shut = true;
        }
        done = done && fl->eof && fl->shut;
    }
    if (done)
        px_conn_free(p, ci);
}

static void
px_accept(struct proxy *p)
{
    struct sockaddr_in sa;
    int fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    int gfd = -1, one = 1, ci;

    if (fd < 0)
        return;
    p->n.accepted++;
    for (ci = 0; ci < PX_CONNS && p->conns[ci].used; ci++)
        ;
    if (ci < PX_CONNS && p->upstream != 0) {
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sa.sin_port = htons(p->upstream);
        /* A blocking connect: on loopback it is done at once. */
        gfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (gfd >= 0 &&
            (connect(gfd, (struct sockaddr *) &sa, sizeof(sa)) != 0 ||
             fcntl(gfd, F_SETFL, O_NONBLOCK) != 0)) {
            close(gfd);
            gfd = -1;
        }
    }
    if (gfd < 0) {
        /* No gateway (or no slot): the client sees its connection end. */
        p->n.refused++;
        close(fd);
        return;
    }
    (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void) setsockopt(gfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    p->conns[ci].used = true;
    p->conns[ci].fd[PX_C2G] = fd;
    p->conns[ci].fd[PX_G2C] = gfd;
    for (int d = 0; d < 2; d++)
        if (scimq_proto_decoder_create(NULL, &p->conns[ci].flow[d].dec) != 0) {
            px_abort(p, ci);
            return;
        }
}

/* A stream that was sent its last unconfirmed PUTs is cut in time. */
static void
px_tick(struct proxy *p)
{
    if (p->cut_conn >= 0 && !p->cut_done &&
        now_ms() - p->cut_since >= PX_CUT_WAIT_MS) {
        p->cut_done = true;
        p->n.cuts++;
        px_cut(p, p->cut_conn);
    }
}

static void *
px_main(void *arg)
{
    struct proxy *p = arg;
    struct pollfd pfd[1 + 2 * PX_CONNS];
    int map_ci[1 + 2 * PX_CONNS], map_side[1 + 2 * PX_CONNS];
    unsigned int map_gen[1 + 2 * PX_CONNS];

    while (!atomic_load(&p->stop)) {
        int n = 0;

        pthread_mutex_lock(&p->lock);
        px_tick(p);
        for (int ci = 0; ci < PX_CONNS; ci++)
            if (p->conns[ci].used)
                px_progress(p, ci);
        pfd[n].fd = p->lfd;
        pfd[n].events = POLLIN;
        map_ci[n++] = -1;
        for (int ci = 0; ci < PX_CONNS; ci++) {
            struct px_conn *cn = &p->conns[ci];

            if (!cn->used)
                continue;
            for (int s = 0; s < 2; s++) {
                struct px_flow *in = &cn->flow[s], *out = &cn->flow[1 - s];
                short ev = 0;

                if (cn->fd[s] < 0)
                    continue;
                if (!in->eof && (in->sink_dead || px_pending(in) < PX_OUT_CAP))
                    ev |= POLLIN;
                if (px_pending(out) > 0 && !out->sink_dead)
                    ev |= POLLOUT;
                /* Nothing wanted: left out, so a hang-up does not spin. */
                if (ev == 0)
                    continue;
                pfd[n].fd = cn->fd[s];
                pfd[n].events = ev;
                map_ci[n] = ci;
                map_side[n] = s;
                map_gen[n++] = cn->gen;
            }
        }
        pthread_mutex_unlock(&p->lock);
        if (poll(pfd, (nfds_t) n, 20) <= 0)
            continue;
        pthread_mutex_lock(&p->lock);
        for (int i = 0; i < n; i++) {
            int ci = map_ci[i], s = map_side[i];
            struct px_conn *cn;

            if (pfd[i].revents == 0)
                continue;
            if (ci < 0) {
                px_accept(p);
                continue;
            }
            cn = &p->conns[ci];
            if (!cn->used || cn->gen != map_gen[i] || cn->fd[s] != pfd[i].fd)
                continue;
            if (pfd[i].events & POLLOUT)
                px_write(p, ci, 1 - s);
            if (cn->used && cn->gen == map_gen[i] && cn->fd[s] == pfd[i].fd &&
                (pfd[i].events & POLLIN) &&
                (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) {
                px_read(p, ci, s);
                if (cn->used && cn->gen == map_gen[i])
                    px_write(p, ci, s);
            }
        }
        pthread_mutex_unlock(&p->lock);
    }
    return NULL;
}

/* Zeroes the counters and turns every fault off. */
static void
px_reset(void)
{
    PX_LOCKED(memset(&px.n, 0, sizeof(px.n)); px.cut_after = 0;
              px.cut_conn = -1; px.cut_done = false; px.mute_stats = false;
              px.half_deliver = false; px.watch[0] = '\0');
}

static void
px_set_upstream(uint16_t port)
{
    PX_LOCKED(px.upstream = port);
}

static int
px_start(uint16_t upstream)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);

    memset(&px, 0, sizeof(px));
    pthread_mutex_init(&px.lock, NULL);
    px.upstream = upstream;
    px.cut_conn = -1;
    for (int ci = 0; ci < PX_CONNS; ci++)
        px.conns[ci].fd[0] = px.conns[ci].fd[1] = -1;
    px.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (px.lfd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(px.lfd, (struct sockaddr *) &sa, sizeof(sa)) != 0 ||
        listen(px.lfd, 64) != 0 ||
        getsockname(px.lfd, (struct sockaddr *) &sa, &len) != 0) {
        close(px.lfd);
        return -1;
    }
    px.port = ntohs(sa.sin_port);
    snprintf(px.url, sizeof(px.url), "scimq://127.0.0.1:%u", px.port);
    if (pthread_create(&px.thread, NULL, px_main, &px) != 0) {
        close(px.lfd);
        return -1;
    }
    px.running = true;
    return 0;
}

static void
px_stop(void)
{
    if (!px.running)
        return;
    atomic_store(&px.stop, true);
    pthread_join(px.thread, NULL);
    for (int ci = 0; ci < PX_CONNS; ci++)
        if (px.conns[ci].used)
            px_abort(&px, ci);
    close(px.lfd);
    pthread_mutex_destroy(&px.lock);
    px.running = false;
}

/* ======================================================================== */
/* Test messages                                                             */
/* ======================================================================== */

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

    if (want == NULL)
        return false;
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

static uint64_t
small_size(uint64_t seq)
{
    return 4096 + (seq * 4099) % (60u << 10);
}

static uint64_t
consume_size(uint64_t seq)
{
    return 100 + (seq * 6151) % (300u << 10);
}

/*
 * The number of a test message (a "meta" block for every third, then
 * "data" starting with the number), or UINT64_MAX if its blocks, sizes or
 * bytes are not those of one.
 */
static uint64_t
message_seq(const scimq_message_t *m, uint64_t (*size)(uint64_t))
{
    const scimq_block_t *d;
    uint64_t seq;

    if (m->block_count < 1 || m->block_count > 2)
        return UINT64_MAX;
    d = &m->blocks[m->block_count - 1];
    if (d->name == NULL || strcmp(d->name, "data") != 0 || d->len < 8)
        return UINT64_MAX;
    seq = be64(d->data);
    if (d->len != size(seq) || !check_pattern(d->data, d->len, seq) ||
        m->block_count != (seq % 3 == 0 ? 2u : 1u))
        return UINT64_MAX;
    if (m->block_count == 2 &&
        (m->blocks[0].name == NULL || strcmp(m->blocks[0].name, "meta") != 0 ||
         m->blocks[0].len != 16 || be64(m->blocks[0].data) != seq ||
         be64((const uint8_t *) m->blocks[0].data + 8) != d->len))
        return UINT64_MAX;
    return seq;
}

/* Checks a received test message in detail; returns its number. */
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
    CU_ASSERT_EQUAL(m->payload_len, d->len + (m->block_count == 2 ? 16 : 0));
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

    if (buf == NULL)
        return SCIMQ_ENOMEM;
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
    /* meta lives on this stack: an async PUT must own every block. */
    if (async && n == 2) {
        uint8_t *both = malloc(sizeof(meta) + len);

        if (both == NULL) {
            free(buf);
            return SCIMQ_ENOMEM;
        }
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

/* ======================================================================== */
/* Clients, statistics and draining                                          */
/* ======================================================================== */

static struct gateway gw;   /* the suite's gateway */
static scimq_client_t *obs; /* the suite's observer: STATS, directly */

static scimq_client_t *
open_client(const char *u, uint32_t k)
{
    scimq_client_options_t o;
    scimq_client_t *c = NULL;
    int rc;

    scimq_client_options_default(&o);
    o.streams = k;
    o.client_name = "test_client";
    o.connect_timeout_ms = (uint32_t) scaled(3000);
    o.reconnect_ms = (uint32_t) scaled(5000);
    o.request_timeout_ms = (uint32_t) scaled(5000);
    rc = scimq_client_open(u, &o, &c);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc != 0)
        fprintf(stderr, "open %s: %s\n", u, scimq_err_name(rc));
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

/* STATS of the gateway (queue NULL: gateway-wide), parsed; NULL on error. */
static json_t *
stats_get(scimq_client_t *c, const char *queue)
{
    json_error_t err;
    char *text = NULL;
    json_t *root;
    int rc = scimq_client_stats(c, queue, &text);

    if (rc != 0) {
        fprintf(stderr, "STATS: %s\n", scimq_err_name(rc));
        return NULL;
    }
    root = json_loads(text, 0, &err);
    if (root == NULL || !json_is_object(root)) {
        fprintf(stderr, "STATS: not a JSON object: %s\n", err.text);
        json_decref(root);
        root = NULL;
    }
    free(text);
    return root;
}

/* A queue's name in a "queues" array: an object's "name" (or a string). */
static const char *
entry_name(const json_t *e)
{
    if (json_is_string(e))
        return json_string_value(e);
    return json_string_value(json_object_get(e, "name"));
}

/* How many entries of root's "queues" array name queue. */
static size_t
queues_naming(const json_t *root, const char *queue)
{
    const json_t *arr = json_object_get(root, "queues");
    size_t n = 0;

    for (size_t i = 0; i < json_array_size(arr); i++) {
        const char *name = entry_name(json_array_get(arr, i));

        n += name != NULL && strcmp(name, queue) == 0;
    }
    return n;
}

static json_t *
queue_entry(const json_t *root, const char *queue)
{
    const json_t *arr = json_object_get(root, "queues");

    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *e = json_array_get(arr, i);
        const char *name = entry_name(e);

        if (json_is_object(e) && name != NULL && strcmp(name, queue) == 0)
            return e;
    }
    return NULL;
}

/* A number about a queue: a member of its STATS entry or of its
 * "counters" (doc/scimp.md, QUEUE_LIST); -1 when there is none. */
static int64_t
queue_stat(scimq_client_t *c, const char *queue, const char *key)
{
    json_t *root = stats_get(c, queue), *q = NULL, *v = NULL;
    int64_t r = -1;

    if (root != NULL)
        q = queue_entry(root, queue);
    if (q != NULL) {
        v = json_object_get(q, key);
        if (!json_is_integer(v))
            v = json_object_get(json_object_get(q, "counters"), key);
    }
    if (json_is_integer(v))
        r = (int64_t) json_integer_value(v);
    json_decref(root);
    return r;
}

/* A top-level number of the gateway-wide STATS; -1 when there is none. */
static int64_t
gateway_stat(scimq_client_t *c, const char *key)
{
    json_t *root = stats_get(c, NULL), *v = json_object_get(root, key);
    int64_t r = json_is_integer(v) ? (int64_t) json_integer_value(v) : -1;

    json_decref(root);
    return r;
}

/*
 * Statistics are read until they show the expected value, within a
 * bound: settlements have no reply, and a gateway may serve STATS from a
 * snapshot.  Returns the last value read (the caller asserts it).
 */
#define STAT_WAIT_MS 10000

static int64_t
queue_stat_wait(scimq_client_t *c, const char *queue, const char *key,
                int64_t want)
{
    uint64_t t0 = now_ms();
    int64_t v;

    while ((v = queue_stat(c, queue, key)) != want &&
           now_ms() - t0 < (uint64_t) scaled(STAT_WAIT_MS))
        sleep_ms(20);
    if (v != want)
        fprintf(stderr, "STATS %s %s: %lld, expected %lld\n", queue, key,
                (long long) v, (long long) want);
    return v;
}

static int64_t
gateway_stat_wait(scimq_client_t *c, const char *key, int64_t want)
{
    uint64_t t0 = now_ms();
    int64_t v;

    while ((v = gateway_stat(c, key)) != want &&
           now_ms() - t0 < (uint64_t) scaled(STAT_WAIT_MS))
        sleep_ms(20);
    if (v != want)
        fprintf(stderr, "STATS %s: %lld, expected %lld\n", key, (long long) v,
                (long long) want);
    return v;
}

/* Waits (bounded) until a proxy counter reaches want; returns it. */
static uint32_t
px_count_wait(const uint32_t *counter, uint32_t want)
{
    uint64_t t0 = now_ms();
    uint32_t v;

    for (;;) {
        PX_LOCKED(v = *counter);
        if (v >= want || now_ms() - t0 >= (uint64_t) scaled(10000))
            return v;
        sleep_ms(10);
    }
}

struct drained {
    uint64_t total, bad, dups, missing;
    bool eos;
};

/*
 * Closes a queue of the gateway at u and consumes it to its end (EOS),
 * acknowledging every message: what arrived, against messages 0..n-1.
 */
static void
drain_queue(const char *u, const char *queue, uint64_t n,
            uint64_t (*size)(uint64_t), struct drained *r)
{
    scimq_client_t *c = open_client(u, 2);
    uint32_t *seen = calloc(n + 1, sizeof(*seen));

    memset(r, 0, sizeof(*r));
    CU_ASSERT_FATAL(c != NULL && seen != NULL);
    CU_ASSERT_EQUAL(scimq_client_queue_close(c, queue), 0);
    CU_ASSERT_EQUAL_FATAL(scimq_client_subscribe(c, queue, 16, 32u << 20), 0);
    for (uint64_t i = 0; i < 4 * n + 16; i++) {
        scimq_message_t *m = NULL;
        int rc = scimq_client_get(c, &m, scaled(15000));
        uint64_t seq;

        if (rc == SCIMQ_EOS) {
            r->eos = true;
            break;
        }
        if (rc != 0) {
            fprintf(stderr, "drain %s: %s after %llu\n", queue,
                    scimq_err_name(rc), (unsigned long long) r->total);
            break;
        }
        r->total++;
        seq = message_seq(m, size);
        if (seq >= n)
            r->bad++;
        else if (seen[seq]++ > 0)
            r->dups++;
        CU_ASSERT_EQUAL(scimq_client_ack(c, m), 0);
        scimq_message_free(c, m);
    }
    for (uint64_t i = 0; i < n; i++)
        r->missing += seen[i] == 0;
    CU_ASSERT(r->eos);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    free(seen);
}

/* Every message 0..n-1 is in the queue exactly once, with its bytes. */
static void
expect_exactly_once(const char *u, const char *queue, uint64_t n,
                    uint64_t (*size)(uint64_t))
{
    struct drained r;

    drain_queue(u, queue, n, size, &r);
    CU_ASSERT_EQUAL(r.total, n);
    CU_ASSERT_EQUAL(r.bad, 0);
    CU_ASSERT_EQUAL(r.dups, 0);
    CU_ASSERT_EQUAL(r.missing, 0);
}

/* ======================================================================== */
/* Producing                                                                 */
/* ======================================================================== */

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
    scimq_client_t *c;
    const uint64_t n = 200;
    unsigned int async = 0, used = 0;
    uint32_t by_index[8], puts;

    px_reset();
    c = open_client(px.url, k);
    CU_ASSERT_FATAL(c != NULL);
    declare(c, queue, SCIMQ_QUEUE_GUARANTEED);
    atomic_store(&freed_count, 0);
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
    CU_ASSERT_EQUAL(scimq_client_flush(c, scaled(10000)), 0);
    /* Every free_fn ran once the PUTs were confirmed. */
    CU_ASSERT_EQUAL(atomic_load(&freed_count), async);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    /* The PUTs went out over the K streams (parallel dispatch), once. */
    PX_LOCKED(memcpy(by_index, px.n.puts_by_index, sizeof(by_index));
              puts = px.n.puts);
    for (unsigned int i = 0; i < 8; i++)
        used += by_index[i] > 0;
    CU_ASSERT_EQUAL(used, k);
    CU_ASSERT_EQUAL(puts, n);
    /* The gateway holds every one of them, once, with its bytes. */
    CU_ASSERT_EQUAL(queue_stat_wait(obs, queue, "put", (int64_t) n),
                    (int64_t) n);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, queue, "ready", (int64_t) n),
                    (int64_t) n);
    expect_exactly_once(gw.url, queue, n, put_size);
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
    scimq_client_t *c = open_client(gw.url, 2);
    scimq_block_t b = {"data", "x", 1};
    scimq_message_t *m = NULL;
    uint8_t *buf;
    int rc;

    CU_ASSERT_FATAL(c != NULL);
    /* Refused by the gateway, synchronously. */
    CU_ASSERT_EQUAL(scimq_client_put(c, "nosuch", &b, 1, NULL, NULL),
                    SCIMQ_ENOENT);
    /* Asynchronously: reported by flush, and free_fn still runs. */
    atomic_store(&freed_count, 0);
    buf = calloc(1, 16);
    CU_ASSERT_FATAL(buf != NULL);
    b.data = buf;
    CU_ASSERT_EQUAL(scimq_client_put(c, "nosuch", &b, 1, free_buffer, buf), 0);
    CU_ASSERT_EQUAL(scimq_client_flush(c, scaled(5000)), SCIMQ_ENOENT);
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
    /* An empty message is a message (doc/scimp.md 6.3) ... */
    declare(c, "emptyq", SCIMQ_QUEUE_GUARANTEED);
    CU_ASSERT_EQUAL(scimq_client_put(c, "emptyq", NULL, 0, NULL, NULL), 0);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "emptyq", "ready", 1), 1);
    /* ... and is delivered as one: no blocks, no bytes; then EOS. */
    CU_ASSERT_EQUAL(scimq_client_queue_close(c, "emptyq"), 0);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "emptyq", 1, 1 << 20), 0);
    rc = scimq_client_get(c, &m, scaled(5000));
    CU_ASSERT_EQUAL(rc, 0);
    if (rc == 0) {
        CU_ASSERT_EQUAL(m->block_count, 0);
        CU_ASSERT_EQUAL(m->payload_len, 0);
        CU_ASSERT_STRING_EQUAL(m->queue, "emptyq");
        CU_ASSERT_EQUAL(scimq_client_ack(c, m), 0);
        scimq_message_free(c, m);
        CU_ASSERT_EQUAL(scimq_client_get(c, &m, scaled(5000)), SCIMQ_EOS);
    }
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
}

/*
 * A stream stops confirming after some PUTs and is cut (the proxy passes
 * the last ones on or loses them, swallows their confirmations and closes
 * the stream).  The client sends its unconfirmed PUTs again: none is lost,
 * and the only duplicates are messages whose confirmation it never saw.
 * (A stream that is merely slow to confirm is left alone: that is
 * back-pressure from a full gateway, and the client waits; dead peers are
 * found by TCP.)
 */
static void
run_cut(uint32_t k, const char *queue)
{
    uint32_t creates0, joins0, creates = 0, joins = 0, cuts, maybe_dups;
    scimq_client_options_t o;
    scimq_client_t *c = NULL;
    const uint64_t n = 100;
    unsigned int async = 0;
    struct drained r;
    int fails = 0;

    px_reset();
    scimq_client_options_default(&o);
    o.streams = k;
    o.request_timeout_ms = (uint32_t) scaled(5000);
    CU_ASSERT_EQUAL_FATAL(scimq_client_open(px.url, &o, &c), 0);
    declare(c, queue, SCIMQ_QUEUE_GUARANTEED);
    PX_LOCKED(px.cut_after = 20; creates0 = px.n.creates; joins0 = px.n.joins);
    atomic_store(&freed_count, 0);
    for (uint64_t seq = 0; seq < n; seq++) {
        fails += put_one(c, queue, seq, small_size, seq % 4 != 0) != 0;
        async += seq % 4 != 0;
    }
    CU_ASSERT_EQUAL(fails, 0);
    CU_ASSERT_EQUAL(scimq_client_flush(c, scaled(15000)), 0);
    CU_ASSERT_EQUAL(atomic_load(&freed_count), async);
    /* The dropped stream comes back (a join, or a new session if K=1). */
    for (uint64_t t0 = now_ms(); now_ms() - t0 < (uint64_t) scaled(5000);
         sleep_ms(10)) {
        PX_LOCKED(creates = px.n.creates; joins = px.n.joins);
        if (k == 1 ? creates > creates0 : joins > joins0)
            break;
    }
    CU_ASSERT_EQUAL(scimq_client_ping(c, NULL), 0);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    PX_LOCKED(px.cut_after = 0; cuts = px.n.cuts; creates = px.n.creates;
              joins = px.n.joins; maybe_dups = px.n.maybe_dups);
    CU_ASSERT_EQUAL(cuts, 1);
    /* The cut really left confirmations missing. */
    CU_ASSERT(maybe_dups >= 1);
    /* The stream came back: with K=1 the session ended with it. */
    if (k == 1) {
        CU_ASSERT(creates >= creates0 + 1);
    } else {
        CU_ASSERT(joins >= joins0 + 1);
    }
    drain_queue(gw.url, queue, n, small_size, &r);
    CU_ASSERT_EQUAL(r.missing, 0);
    CU_ASSERT_EQUAL(r.bad, 0);
    CU_ASSERT_EQUAL(r.total, n + r.dups);
    CU_ASSERT(r.dups <= maybe_dups);
    fprintf(stderr, "%s: %llu duplicates (at most %u possible)\n", queue,
            (unsigned long long) r.dups, maybe_dups);
    /* And the gateway stored exactly what came out. */
    CU_ASSERT_EQUAL(queue_stat_wait(obs, queue, "put", (int64_t) r.total),
                    (int64_t) r.total);
}

static void
test_cut_k1(void)
{
    run_cut(1, "cut1");
}

static void
test_cut_k3(void)
{
    run_cut(3, "cut3");
}

/* ======================================================================== */
/* Consuming                                                                 */
/* ======================================================================== */

/*
 * Credit 4 on 50 messages, then end of stream: the window holds (4 leased
 * while none is settled, no fifth), every message arrives once, and after
 * QUEUE_CLOSE each stream that sent a GET gets one EOS; a later GET on the
 * closed and drained queue is answered with EOS too (doc/scimp.md, EOS).
 */
static void
test_consume(void)
{
    scimq_client_t *c, *c2;
    scimq_message_t *m = NULL, *held[4];
    bool seen[50] = {false};
    uint32_t with_get = 0, with_one = 0, wrong = 0, wrong_rid = 0;
    uint64_t t0;

    px_reset();
    PX_LOCKED(snprintf(px.watch, sizeof(px.watch), "cq"));
    c = open_client(px.url, 2);
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
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "cq", 4, 1 << 20), 0);
    for (int i = 0; i < 4; i++) {
        uint64_t seq;

        CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &held[i], scaled(5000)), 0);
        seq = check_message(held[i], "cq", consume_size);
        CU_ASSERT_EQUAL(held[i]->attempt, 1);
        CU_ASSERT_FATAL(seq < 50 && !seen[seq]);
        seen[seq] = true;
    }
    /* The credit window holds: 4 leased, 46 ready, no fifth. */
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "cq", "in_flight", 4), 4);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "cq", "ready", 46), 46);
    CU_ASSERT_EQUAL(scimq_client_get(c, &m, 0), SCIMQ_EAGAIN);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(scimq_client_ack(c, held[i]), 0);
        scimq_message_free(c, held[i]);
    }
    for (int i = 4; i < 50; i++) {
        uint64_t seq;

        CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m, scaled(5000)), 0);
        seq = check_message(m, "cq", consume_size);
        CU_ASSERT_EQUAL(m->attempt, 1);
        CU_ASSERT_FATAL(seq < 50 && !seen[seq]);
        seen[seq] = true;
        CU_ASSERT_EQUAL(scimq_client_ack(c, m), 0);
        scimq_message_free(c, m);
    }
    /* Drained but open: nothing yet. */
    CU_ASSERT_EQUAL(scimq_client_get(c, &m, 0), SCIMQ_EAGAIN);
    t0 = now_ms();
    CU_ASSERT_EQUAL(scimq_client_get(c, &m, 200), SCIMQ_ETIMEDOUT);
    CU_ASSERT(now_ms() - t0 >= 150);
    CU_ASSERT_EQUAL(scimq_client_queue_close(c, "cq"), 0);
    CU_ASSERT_EQUAL(scimq_client_get(c, &m, scaled(5000)), SCIMQ_EOS);
    CU_ASSERT_EQUAL(scimq_client_get(c, &m, 0), SCIMQ_EOS);
    /* One EOS on every stream that sent a GET for the queue, with the
     * request id of its last GET; none on the others. */
    for (t0 = now_ms(); now_ms() - t0 < (uint64_t) scaled(5000); sleep_ms(10)) {
        pthread_mutex_lock(&px.lock);
        with_get = with_one = wrong = 0;
        for (int ci = 0; ci < PX_CONNS; ci++) {
            const struct px_conn *cn = &px.conns[ci];

            if (!cn->used)
                continue;
            with_get += cn->watch_gets > 0;
            with_one += cn->watch_gets > 0 && cn->watch_eos == 1;
            wrong +=
                cn->watch_eos > 1 || (cn->watch_gets == 0 && cn->watch_eos > 0);
        }
        wrong_rid = px.n.eos_wrong_rid;
        pthread_mutex_unlock(&px.lock);
        if (with_one == with_get)
            break;
    }
    CU_ASSERT(with_get >= 1);
    CU_ASSERT_EQUAL(with_one, with_get);
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(wrong_rid, 0);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "cq", "acked", 50), 50);
    /* A later session's GET on the closed, drained queue: EOS at once. */
    c2 = open_client(gw.url, 1);
    CU_ASSERT_FATAL(c2 != NULL);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c2, "cq", 1, 1 << 20), 0);
    CU_ASSERT_EQUAL(scimq_client_get(c2, &m, scaled(5000)), SCIMQ_EOS);
    CU_ASSERT_EQUAL(scimq_client_close(c2), 0);
}

/*
 * NACK with requeue brings a message back with the next attempt; EXTEND
 * sets the lease (here shorter than the queue's 60 s: it expires, and the
 * message comes back once more); an ACK of the expired delivery is
 * ignored and counted (doc/scimp.md, ACK/NACK/EXTEND).
 */
static void
test_nack_extend(void)
{
    scimq_client_t *c;
    scimq_message_t *m1 = NULL, *m2 = NULL, *m3 = NULL;
    scimq_queue_options_t qo;
    uint32_t nacks, extends, acks;
    int64_t ignored0;

    px_reset();
    c = open_client(px.url, 1);
    CU_ASSERT_FATAL(c != NULL);
    memset(&qo, 0, sizeof(qo));
    qo.kind = SCIMQ_QUEUE_GUARANTEED;
    qo.ack_timeout_ms = 60000;
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "nq", &qo), 0);
    CU_ASSERT_EQUAL(put_one(c, "nq", 7, consume_size, false), 0);
    ignored0 = gateway_stat(obs, "settlements_ignored");
    CU_ASSERT(ignored0 >= 0);
    /* Credit 2: room for the redelivery while the expired one is held. */
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "nq", 2, 1 << 20), 0);
    CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m1, scaled(5000)), 0);
    CU_ASSERT_EQUAL(m1->attempt, 1);
    CU_ASSERT_EQUAL(scimq_client_nack(c, m1, 1, 0), 0);
    scimq_message_free(c, m1);
    /* Back with the next attempt: the NACK topped the credit up. */
    CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m2, scaled(5000)), 0);
    CU_ASSERT_EQUAL(check_message(m2, "nq", consume_size), 7);
    CU_ASSERT_EQUAL(m2->attempt, 2);
    /* The lease now ends 1 s after the gateway took the EXTEND. */
    CU_ASSERT_EQUAL(scimq_client_extend(c, m2, 1000), 0);
    CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m3, scaled(15000)), 0);
    CU_ASSERT_EQUAL(check_message(m3, "nq", consume_size), 7);
    CU_ASSERT_EQUAL(m3->attempt, 3);
    CU_ASSERT_EQUAL(m3->msg_id, m2->msg_id);
    CU_ASSERT_EQUAL(scimq_client_ack(c, m3), 0);
    /* m2's lease is over: its ACK is ignored. */
    CU_ASSERT_EQUAL(scimq_client_ack(c, m2), 0);
    scimq_message_free(c, m2);
    scimq_message_free(c, m3);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    PX_LOCKED(nacks = px.n.nacks; extends = px.n.extends; acks = px.n.acks);
    CU_ASSERT_EQUAL(nacks, 1);
    CU_ASSERT_EQUAL(extends, 1);
    CU_ASSERT_EQUAL(acks, 2);
    /* Session version 3: the ACKs went as ACK_RANGE frames. */
    PX_LOCKED(acks = px.n.ack_frames);
    CU_ASSERT(acks >= 1 && acks <= 2);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "nq", "nacked", 1), 1);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "nq", "expired", 1), 1);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "nq", "acked", 1), 1);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "nq", "ready", 0), 0);
    if (ignored0 >= 0)
        CU_ASSERT_EQUAL(
            gateway_stat_wait(obs, "settlements_ignored", ignored0 + 1),
            ignored0 + 1);
}

/*
 * A DELIVER cut short by a stream drop is requeued by the gateway, which
 * gives its credit back: a window of 1 must not stall, the client must not
 * top it up a second time, and the message comes again with attempt 2.
 */
static void
test_half_deliver(void)
{
    scimq_client_t *c;
    scimq_message_t *m = NULL;
    bool seen[3] = {false};
    uint64_t half_id;
    uint32_t halves;

    px_reset();
    c = open_client(px.url, 2);
    CU_ASSERT_FATAL(c != NULL);
    declare(c, "hq", SCIMQ_QUEUE_GUARANTEED);
    for (uint64_t seq = 0; seq < 3; seq++)
        CU_ASSERT_EQUAL(put_one(c, "hq", seq, consume_size, false), 0);
    PX_LOCKED(px.half_deliver = true);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "hq", 1, 1 << 20), 0);
    for (int i = 0; i < 3; i++) {
        uint64_t seq;

        CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m, scaled(5000)), 0);
        seq = check_message(m, "hq", consume_size);
        CU_ASSERT_FATAL(seq < 3 && !seen[seq]);
        seen[seq] = true;
        PX_LOCKED(halves = px.n.halves; half_id = px.n.half_msg_id);
        CU_ASSERT_EQUAL(halves, 1);
        CU_ASSERT_EQUAL(m->attempt, m->msg_id == half_id ? 2u : 1u);
        /* Window 1: the one in hand is the only one leased. */
        CU_ASSERT_EQUAL(queue_stat_wait(obs, "hq", "in_flight", 1), 1);
        CU_ASSERT_EQUAL(scimq_client_ack(c, m), 0);
        scimq_message_free(c, m);
    }
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "hq", "acked", 3), 3);
}

/* Best-effort: freeing a message without ack gives its credit back. */
static void
test_best_effort(void)
{
    scimq_client_t *c = open_client(gw.url, 2);
    scimq_message_t *m = NULL;
    bool seen[10] = {false};

    CU_ASSERT_FATAL(c != NULL);
    declare(c, "beq", SCIMQ_QUEUE_BEST_EFFORT);
    for (uint64_t seq = 0; seq < 10; seq++)
        CU_ASSERT_EQUAL(put_one(c, "beq", seq, consume_size, false), 0);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "beq", 2, 1 << 20), 0);
    for (int i = 0; i < 10; i++) {
        uint64_t seq;

        CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m, scaled(5000)), 0);
        seq = check_message(m, "beq", consume_size);
        CU_ASSERT_EQUAL(m->attempt, 1);
        CU_ASSERT_FATAL(seq < 10 && !seen[seq]);
        seen[seq] = true;
        scimq_message_free(c, m);
    }
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    /* Gone once sent. */
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "beq", "ready", 0), 0);
}

/*
 * Close with deliveries never handed out: they go back with NACK; the one
 * the caller holds stays valid after close.
 */
static void
test_close_with_fifo(void)
{
    scimq_client_t *c;
    scimq_message_t *m = NULL;
    uint32_t delivers, nacks;

    px_reset();
    c = open_client(px.url, 1);
    CU_ASSERT_FATAL(c != NULL);
    declare(c, "fq", SCIMQ_QUEUE_GUARANTEED);
    for (uint64_t seq = 0; seq < 10; seq++)
        CU_ASSERT_EQUAL(put_one(c, "fq", seq, consume_size, false), 0);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "fq", 10, 16 << 20), 0);
    CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m, scaled(5000)), 0);
    /*
     * All ten are on their way to the client, and the PONG of a PING sent
     * now comes after them on the one stream: once ping returns, the nine
     * others are in the client's FIFO.
     */
    delivers = px_count_wait(&px.n.delivers, 10);
    CU_ASSERT_EQUAL(delivers, 10);
    CU_ASSERT_EQUAL(scimq_client_ping(c, NULL), 0);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    PX_LOCKED(nacks = px.n.nacks);
    CU_ASSERT_EQUAL(nacks, 9);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "fq", "nacked", 9), 9);
    /* All ten are back: the held one was requeued when the session ended. */
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "fq", "ready", 10), 10);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "fq", "in_flight", 0), 0);
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
    *buf_p = malloc(len > 0 ? len : 1);
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

    scimq_client_options_default(&o);
    o.payload_alloc = test_alloc;
    o.payload_release = test_release;
    o.alloc_arg = &allocs;
    atomic_store(&allocs, 0);
    atomic_store(&releases, 0);
    atomic_store(&alloc_failures, 0);
    CU_ASSERT_EQUAL_FATAL(scimq_client_open(gw.url, &o, &c), 0);
    declare(c, "aq", SCIMQ_QUEUE_GUARANTEED);
    for (uint64_t seq = 0; seq < 5; seq++)
        CU_ASSERT_EQUAL(put_one(c, "aq", seq, consume_size, false), 0);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "aq", 2, 1 << 20), 0);
    for (int i = 0; i < 5; i++) {
        uint64_t seq;

        CU_ASSERT_EQUAL_FATAL(scimq_client_get(c, &m, scaled(5000)), 0);
        CU_ASSERT_EQUAL((uintptr_t) m->payload_ctx, 42);
        seq = check_message(m, "aq", consume_size);
        CU_ASSERT_FATAL(seq < 5 && !seen[seq]);
        seen[seq] = true;
        CU_ASSERT_EQUAL(scimq_client_ack(c, m), 0);
        scimq_message_free(c, m);
    }
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    CU_ASSERT(atomic_load(&allocs) >= 5);
    CU_ASSERT_EQUAL(atomic_load(&allocs), atomic_load(&releases));
    /* The one without a buffer went back with NACK, then came again. */
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "aq", "nacked", 1), 1);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "aq", "acked", 5), 5);
}

/* ======================================================================== */
/* Queue management                                                          */
/* ======================================================================== */

static void
test_admin(void)
{
    scimq_client_t *c = open_client(gw.url, 2);
    scimq_queue_options_t qo;
    uint64_t v = 99, rtt = 0;
    char *json = NULL;
    json_t *root;

    CU_ASSERT_FATAL(c != NULL);
    memset(&qo, 0, sizeof(qo));
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "adm1", &qo), 0);
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "adm1", &qo), 0);
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "adm2", NULL), 0);
    qo.kind = SCIMQ_QUEUE_BEST_EFFORT;
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "adm1", &qo), SCIMQ_EEXIST);
    qo.dead_letter = "nope";
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "adm3", &qo), SCIMQ_ENOENT);
    qo.kind = 7;
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "adm3", &qo), SCIMQ_EINVAL);
    CU_ASSERT_EQUAL(scimq_client_queue_declare(c, "", NULL), SCIMQ_EINVAL);

    /* QUEUE_LIST: one entry per queue with the prefix. */
    CU_ASSERT_EQUAL(scimq_client_queue_list(c, "adm", &json), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    root = json_loads(json, 0, NULL);
    free(json);
    CU_ASSERT_FATAL(json_is_object(root));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(root, "queues")), 2);
    CU_ASSERT_EQUAL(queues_naming(root, "adm1"), 1);
    CU_ASSERT_EQUAL(queues_naming(root, "adm2"), 1);
    json_decref(root);
    CU_ASSERT_EQUAL(scimq_client_queue_list(c, NULL, &json), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    root = json_loads(json, 0, NULL);
    free(json);
    CU_ASSERT_EQUAL(queues_naming(root, "adm1"), 1);
    json_decref(root);
    root = stats_get(c, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    CU_ASSERT_PTR_NOT_NULL(queue_entry(root, "adm1"));
    json_decref(root);

    /* Administration is refused on the data port (whoever asks) and
     * accepted on the admin socket. */
    CU_ASSERT_EQUAL(scimq_client_queue_bind(c, "adm1", "adm2"), SCIMQ_EPERM);
    CU_ASSERT_EQUAL(scimq_client_queue_unbind(c, "adm1", "adm2"), SCIMQ_EPERM);
    CU_ASSERT_EQUAL(scimq_client_queue_move(c, "adm1", "adm2", 0, &v),
                    SCIMQ_EPERM);
    CU_ASSERT_EQUAL(scimq_client_queue_delete(c, "adm2", &v), SCIMQ_EPERM);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    c = open_client(gw.admin_url, 1);
    CU_ASSERT_FATAL(c != NULL);

    /* Fan-out: a bound PUT lands in both queues. */
    CU_ASSERT_EQUAL(scimq_client_queue_bind(c, "adm1", "adm2"), 0);
    CU_ASSERT_EQUAL(put_one(c, "adm1", 1, consume_size, false), 0);
    CU_ASSERT_EQUAL(scimq_client_queue_unbind(c, "adm1", "adm2"), 0);
    CU_ASSERT_EQUAL(scimq_client_queue_unbind(c, "adm1", "adm2"), SCIMQ_ENOENT);
    CU_ASSERT_EQUAL(scimq_client_queue_bind(c, "adm1", "zz"), SCIMQ_ENOENT);
    CU_ASSERT_EQUAL(put_one(c, "adm1", 2, consume_size, false), 0);
    CU_ASSERT_EQUAL(put_one(c, "adm1", 3, consume_size, false), 0);
    /* adm1 holds 3 messages, adm2 the bound copy of the first. */
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "adm1", "ready", 3), 3);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "adm2", "ready", 1), 1);
    CU_ASSERT_EQUAL(scimq_client_queue_move(c, "adm1", "adm2", 2, &v), 0);
    CU_ASSERT_EQUAL(v, 2);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "adm1", "ready", 1), 1);
    CU_ASSERT_EQUAL(queue_stat_wait(obs, "adm2", "ready", 3), 3);
    CU_ASSERT_EQUAL(scimq_client_queue_move(c, "adm1", "zz", 0, &v),
                    SCIMQ_ENOENT);
    CU_ASSERT_EQUAL(scimq_client_queue_delete(c, "adm2", &v), 0);
    CU_ASSERT_EQUAL(v, 3);
    CU_ASSERT_EQUAL(scimq_client_queue_delete(c, "adm2", &v), SCIMQ_ENOENT);
    CU_ASSERT_EQUAL(scimq_client_queue_delete(c, "adm1", NULL), 0);
    CU_ASSERT_EQUAL(scimq_client_queue_close(c, "adm1"), SCIMQ_ENOENT);

    CU_ASSERT_EQUAL(scimq_client_ping(c, &rtt), 0);
    CU_ASSERT(rtt > 0 && rtt < UINT64_C(5000000000) * (uint64_t) mult);
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
    uint32_t muted;

    px_reset();
    scimq_client_options_default(&o);
    o.request_timeout_ms = 300;
    CU_ASSERT_EQUAL_FATAL(scimq_client_open(px.url, &o, &c), 0);
    PX_LOCKED(px.mute_stats = true);
    t0 = now_ms();
    CU_ASSERT_EQUAL(scimq_client_stats(c, "", &json), SCIMQ_ETIMEDOUT);
    dt = now_ms() - t0;
    CU_ASSERT(dt >= 250 && dt < (uint64_t) scaled(5000));
    CU_ASSERT_PTR_NULL(json);
    PX_LOCKED(px.mute_stats = false; muted = px.n.muted);
    CU_ASSERT_EQUAL(muted, 1);
    CU_ASSERT_EQUAL(scimq_client_ping(c, NULL), 0);
    CU_ASSERT_EQUAL(scimq_client_stats(c, "", &json), 0);
    CU_ASSERT_PTR_NOT_NULL(json);
    free(json);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
}

/* ======================================================================== */
/* The gateway goes away                                                     */
/* ======================================================================== */

/*
 * The gateway shuts down (SIGTERM): it says BYE on every stream and the
 * client answers (doc/scimp.md, BYE).  A new gateway comes up behind the
 * same address; the old session died with the old gateway, so the client
 * makes a new one and carries on.
 */
static void
test_gateway_bye(void)
{
    struct gateway g1, g2;
    scimq_client_options_t o;
    scimq_client_t *c = NULL;
    uint32_t creates0, creates = 0, byes, answers;

    CU_ASSERT_FATAL(gw_start(&g1, NULL) == 0);
    px_reset();
    px_set_upstream(g1.port);
    scimq_client_options_default(&o);
    o.streams = 2;
    o.connect_timeout_ms = (uint32_t) scaled(3000);
    o.reconnect_ms = (uint32_t) scaled(30000);
    o.request_timeout_ms = (uint32_t) scaled(5000);
    if (scimq_client_open(px.url, &o, &c) != 0) {
        CU_FAIL("open");
        gw_kill(&g1);
        px_set_upstream(gw.port);
        return;
    }
    declare(c, "byeq", SCIMQ_QUEUE_GUARANTEED);
    PX_LOCKED(creates0 = px.n.creates);
    CU_ASSERT_EQUAL(gw_stop(&g1), 0);
    answers = px_count_wait(&px.n.bye_answers, 2);
    PX_LOCKED(byes = px.n.gw_byes);
    CU_ASSERT_EQUAL(byes, 2);
    CU_ASSERT_EQUAL(answers, 2);

    if (gw_start(&g2, NULL) != 0) {
        CU_FAIL("second gateway");
        (void) scimq_client_close(c);
        px_set_upstream(gw.port);
        return;
    }
    px_set_upstream(g2.port);
    for (uint64_t t0 = now_ms(); now_ms() - t0 < (uint64_t) scaled(15000);
         sleep_ms(10)) {
        PX_LOCKED(creates = px.n.creates);
        if (creates > creates0)
            break;
    }
    CU_ASSERT(creates > creates0);
    declare(c, "byeq", SCIMQ_QUEUE_GUARANTEED);
    for (uint64_t seq = 0; seq < 10; seq++)
        CU_ASSERT_EQUAL(put_one(c, "byeq", seq, small_size, seq % 2 == 1), 0);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    expect_exactly_once(g2.url, "byeq", 10, small_size);
    CU_ASSERT_EQUAL(gw_stop(&g2), 0);
    px_set_upstream(gw.port);
}

/* Every stream lost for longer than reconnect_ms: calls fail. */
static void
test_session_lost(void)
{
    struct gateway g;
    scimq_client_options_t o;
    scimq_client_t *c = NULL;
    scimq_message_t *m = NULL;
    scimq_block_t b = {"data", "x", 1};
    uint64_t t0;
    int rc = 0;

    CU_ASSERT_FATAL(gw_start(&g, NULL) == 0);
    px_reset();
    px_set_upstream(g.port);
    scimq_client_options_default(&o);
    o.streams = 2;
    o.reconnect_ms = 300;
    o.request_timeout_ms = 3000;
    rc = scimq_client_open(px.url, &o, &c);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc != 0) {
        gw_kill(&g);
        px_set_upstream(gw.port);
        return;
    }
    declare(c, "lostq", SCIMQ_QUEUE_GUARANTEED);
    declare(c, "lostsub", SCIMQ_QUEUE_GUARANTEED);
    CU_ASSERT_EQUAL(scimq_client_subscribe(c, "lostsub", 1, 0), 0);
    /* The gateway dies, and nothing listens behind the address any more. */
    px_set_upstream(0);
    gw_kill(&g);
    t0 = now_ms();
    while (now_ms() - t0 < (uint64_t) scaled(10000)) {
        rc = scimq_client_put(c, "lostq", &b, 1, NULL, NULL);
        if (rc == SCIMQ_ECONNRESET)
            break;
        sleep_ms(20);
    }
    CU_ASSERT_EQUAL(rc, SCIMQ_ECONNRESET);
    CU_ASSERT(now_ms() - t0 < (uint64_t) scaled(3000));
    rc = scimq_client_get(c, &m, 1000);
    CU_ASSERT_EQUAL(rc, SCIMQ_ECONNRESET);
    if (rc != SCIMQ_ECONNRESET)
        fprintf(stderr, "get: %s\n", scimq_err_name(rc));
    CU_ASSERT_EQUAL(scimq_client_ping(c, NULL), SCIMQ_ECONNRESET);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    px_set_upstream(gw.port);
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
    CU_ASSERT_EQUAL(scimq_client_open(gw.url, NULL, NULL), SCIMQ_EINVAL);
    scimq_client_options_default(&o);
    o.streams = 0;
    CU_ASSERT_EQUAL(scimq_client_open(gw.url, &o, &c), SCIMQ_EINVAL);
    o.streams = 65;
    CU_ASSERT_EQUAL(scimq_client_open(gw.url, &o, &c), SCIMQ_EINVAL);
    o.streams = 1;
    o.confirm_window = 0;
    CU_ASSERT_EQUAL(scimq_client_open(gw.url, &o, &c), SCIMQ_EINVAL);
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
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CU_ASSERT_FATAL(fd >= 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CU_ASSERT_FATAL(bind(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0);
    CU_ASSERT_FATAL(getsockname(fd, (struct sockaddr *) &sa, &len) == 0);
    close(fd);
    snprintf(u, sizeof(u), "scimq://127.0.0.1:%u", ntohs(sa.sin_port));
    t0 = now_ms();
    CU_ASSERT_EQUAL(scimq_client_open(u, NULL, &c), SCIMQ_ECONNREFUSED);
    CU_ASSERT(now_ms() - t0 < (uint64_t) scaled(2000));
    CU_ASSERT_PTR_NULL(c);
}

/* ======================================================================== */
/* Authentication                                                            */
/* ======================================================================== */

static char good_token[64], bad_token[64];

static int
write_token(char *path, size_t cap, const char *text)
{
    const char *tmp = getenv("TMPDIR");
    int fd;

    snprintf(path, cap, "%s/scimq-test-token-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
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
open_with_token(const char *u, const char *path, uint32_t k,
                scimq_client_t **c_p)
{
    scimq_client_options_t o;

    scimq_client_options_default(&o);
    o.token_file = path;
    o.streams = k;
    o.connect_timeout_ms = (uint32_t) scaled(3000);
    return scimq_client_open(u, &o, c_p);
}

static void
test_auth_good(void)
{
    scimq_client_t *c = NULL;
    uint32_t ok;

    px_reset();
    CU_ASSERT_EQUAL_FATAL(open_with_token(px.url, good_token, 3, &c), 0);
    CU_ASSERT_EQUAL(scimq_client_ping(c, NULL), 0);
    CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    PX_LOCKED(ok = px.n.auth_ok);
    CU_ASSERT_EQUAL(ok, 3); /* every stream authenticates */
}

static void
test_auth_bad(void)
{
    scimq_client_t *c = NULL;

    CU_ASSERT_EQUAL(open_with_token(gw.url, bad_token, 1, &c), SCIMQ_EAUTH);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_EQUAL(open_with_token(gw.url, bad_token, 2, &c), SCIMQ_EAUTH);
}

static void
test_auth_missing(void)
{
    scimq_client_t *c = NULL;

    unsetenv("SCIMQ_TOKEN_FILE");
    CU_ASSERT_EQUAL(open_with_token(gw.url, NULL, 1, &c), SCIMQ_EAUTH);
    CU_ASSERT_EQUAL(open_with_token(gw.url, "/nonexistent/token", 1, &c),
                    SCIMQ_EAUTH);
}

static void
test_auth_env(void)
{
    scimq_client_t *c = NULL;

    setenv("SCIMQ_TOKEN_FILE", good_token, 1);
    CU_ASSERT_EQUAL(open_with_token(gw.url, NULL, 1, &c), 0);
    unsetenv("SCIMQ_TOKEN_FILE");
    if (c != NULL) {
        CU_ASSERT_EQUAL(scimq_client_close(c), 0);
    }
}

/* ======================================================================== */
/* Suites                                                                    */
/* ======================================================================== */

/* The suite's gateway (with a token or not), a proxy to it, an observer. */
static int
suite_start(const char *token)
{
    env_init();
    if (gw_start(&gw, token) != 0)
        return 1;
    if (px_start(gw.port) != 0) {
        gw_kill(&gw);
        return 1;
    }
    if (token == NULL) {
        scimq_client_options_t o;

        scimq_client_options_default(&o);
        o.client_name = "test_client observer";
        o.request_timeout_ms = (uint32_t) scaled(10000);
        if (scimq_client_open(gw.url, &o, &obs) != 0) {
            px_stop();
            gw_kill(&gw);
            return 1;
        }
    }
    return 0;
}

static int
suite_stop(void)
{
    int rc = 0;

    if (obs != NULL && scimq_client_close(obs) != 0)
        rc = 1;
    obs = NULL;
    px_stop();
    if (gw_stop(&gw) != 0)
        rc = 1;
    gw_kill_all();
    return rc;
}

static int
plain_init(void)
{
    return suite_start(NULL);
}

static int
plain_fini(void)
{
    return suite_stop();
}

/*
 * The gateway's token has no newline; the client's file has one: trailing
 * newlines of a token file are not part of the token (doc/scimp.md, AUTH).
 */
static int
auth_init(void)
{
    if (write_token(good_token, sizeof(good_token), GW_TOKEN "\n") != 0 ||
        write_token(bad_token, sizeof(bad_token), "wrong-token") != 0)
        return 1;
    return suite_start(GW_TOKEN);
}

static int
auth_fini(void)
{
    unlink(good_token);
    unlink(bad_token);
    return suite_stop();
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
