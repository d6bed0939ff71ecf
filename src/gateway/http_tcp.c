/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h> /* its tcp_info is the kernel's whole one */

#include <uthash.h>

#include <scimq/error.h>

#include "common/net.h" /* scimq__sock_limit */
#include "http_tcp.h"

/* A dump is read in pieces of this size; one piece holds dozens of
 * sockets.  Bounds: the sockets of one dump, and the wait for each piece. */
#define DIAG_BUF (64 * 1024)
#define DIAG_MAX_SOCKETS 65536
#define DIAG_RECV_TIMEOUT_MS 1000

/* The entries of `conns` by peer, so each socket is matched in O(1). */
struct peer_entry {
    const char *peer; /* owned by the JSON entry */
    json_t *conn;
    bool done; /* given the kernel's object in this dump */
    UT_hash_handle hh;
};

/* The kernel's TCP states (idiag_state; include/net/tcp_states.h, ABI). */
static const char *const tcp_states[] = {
    "unknown",    "established", "syn_sent",  "syn_recv",
    "fin_wait1",  "fin_wait2",   "time_wait", "close",
    "close_wait", "last_ack",    "listen",    "closing",
};
enum { ST_SYN_RECV = 3, ST_TIME_WAIT = 6, ST_CLOSE = 7, ST_LISTEN = 10 };

static const char *
state_name(unsigned int s)
{
    return s < sizeof(tcp_states) / sizeof(tcp_states[0]) ? tcp_states[s]
                                                          : "unknown";
}

/* "ADDR:PORT" as the connection registry writes a peer (inet_ntop). */
static void
remote_describe(const struct inet_diag_msg *m, char *out, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";

    inet_ntop(m->idiag_family, m->id.idiag_dst, host, sizeof(host));
    snprintf(out, len, "%s:%u", host, ntohs(m->id.idiag_dport));
}

/*
 * Attaches the "tcp" object of one socket to its connection, if any.  A
 * socket is the gateway's when its local port is the gateway's and its
 * remote end is a registered peer; another process sharing the port
 * (SO_REUSEPORT, same user) with a connection from the very same remote
 * address and port is the one case this cannot tell apart.
 */
static int
annotate_one(struct peer_entry *peers, const struct nlmsghdr *nh, uint16_t port)
{
    const struct inet_diag_msg *m = NLMSG_DATA(nh);
    const struct tcp_info *ti = NULL;
    const char *cong = "";
    char peer[INET6_ADDRSTRLEN + 8];
    struct peer_entry *e;
    struct rtattr *a;
    int rest;

    if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*m)) ||
        ntohs(m->id.idiag_sport) != port)
        return 0;
    remote_describe(m, peer, sizeof(peer));
    HASH_FIND_STR(peers, peer, e);
    if (e == NULL || e->done)
        return 0;
    rest = (int) (nh->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
    for (a = (struct rtattr *) (m + 1); RTA_OK(a, rest);
         a = RTA_NEXT(a, rest)) {
        /* An older kernel sends a shorter tcp_info: only a full one is
         * read, so every field below is one the kernel filled. */
        if (a->rta_type == INET_DIAG_INFO && RTA_PAYLOAD(a) >= sizeof(*ti))
            ti = RTA_DATA(a);
        else if (a->rta_type == INET_DIAG_CONG && RTA_PAYLOAD(a) > 0 &&
                 ((const char *) RTA_DATA(a))[RTA_PAYLOAD(a) - 1] == '\0')
            cong = RTA_DATA(a);
    }
    if (ti == NULL)
        return 0;
    e->done = true; /* replaces the worker's once-a-second sample */
    json_object_set_new(
        e->conn, "tcp",
        json_pack(
            "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s}", "state",
            state_name(m->idiag_state), "rtt_us", (json_int_t) ti->tcpi_rtt,
            "rttvar_us", (json_int_t) ti->tcpi_rttvar, "retransmits",
            (json_int_t) ti->tcpi_total_retrans, "lost",
            (json_int_t) ti->tcpi_lost, "cwnd", (json_int_t) ti->tcpi_snd_cwnd,
            "ssthresh", (json_int_t) ti->tcpi_snd_ssthresh, "mss",
            (json_int_t) ti->tcpi_snd_mss, "pacing_rate_Bps",
            (json_int_t) (ti->tcpi_pacing_rate > INT64_MAX
                              ? INT64_MAX
                              : ti->tcpi_pacing_rate),
            "delivery_rate_Bps",
            (json_int_t) (ti->tcpi_delivery_rate > INT64_MAX
                              ? INT64_MAX
                              : ti->tcpi_delivery_rate),
            "congestion", cong));
    /* What held the sender back, from TCP_INFO's busy,
     * receive-window-limited and send-buffer-limited times (usec). */
    {
        json_t *t = json_object_get(e->conn, "tcp");

        json_object_set_new(t, "busy_us",
                            json_integer((json_int_t) ti->tcpi_busy_time));
        json_object_set_new(t, "rwnd_limited_us",
                            json_integer((json_int_t) ti->tcpi_rwnd_limited));
        json_object_set_new(t, "sndbuf_limited_us",
                            json_integer((json_int_t) ti->tcpi_sndbuf_limited));
        json_object_set_new(t, "limited",
                            json_string(scimq__sock_limit(
                                ti->tcpi_busy_time, ti->tcpi_rwnd_limited,
                                ti->tcpi_sndbuf_limited)));
    }
    return 1;
}

/* One dump of family's TCP sockets; matched entries get their "tcp". */
static int
dump_family(int fd, uint8_t family, struct peer_entry *peers, uint16_t port,
            int *matched, char *buf)
{
    struct {
        struct nlmsghdr nh;
        struct inet_diag_req_v2 req;
    } msg;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    unsigned int sockets = 0;

    memset(&msg, 0, sizeof(msg));
    msg.nh.nlmsg_len = sizeof(msg);
    msg.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    msg.req.sdiag_family = family;
    msg.req.sdiag_protocol = IPPROTO_TCP;
    /* Connected states only: not the listeners, not TIME_WAIT. */
    msg.req.idiag_states = ~((1u << ST_LISTEN) | (1u << ST_TIME_WAIT) |
                             (1u << ST_SYN_RECV) | (1u << ST_CLOSE));
    msg.req.idiag_ext =
        (1u << (INET_DIAG_INFO - 1)) | (1u << (INET_DIAG_CONG - 1));
    if (sendto(fd, &msg, sizeof(msg), 0, (struct sockaddr *) &kernel,
               sizeof(kernel)) < 0)
        return -errno;
    for (;;) {
        ssize_t n = recv(fd, buf, DIAG_BUF, 0);
        struct nlmsghdr *nh;

        if (n < 0)
            return errno == EAGAIN ? SCIMQ_ETIMEDOUT : -errno;
        if (n == 0)
            return SCIMQ_EPROTO;
        for (nh = (struct nlmsghdr *) buf; NLMSG_OK(nh, (size_t) n);
             nh = NLMSG_NEXT(nh, n)) {
            if (nh->nlmsg_type == NLMSG_DONE)
                return 0;
            if (nh->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *err = NLMSG_DATA(nh);

                return err->error != 0 ? err->error : SCIMQ_EPROTO;
            }
            if (nh->nlmsg_type != SOCK_DIAG_BY_FAMILY)
                continue;
            if (++sockets > DIAG_MAX_SOCKETS)
                return SCIMQ_EOVERFLOW;
            *matched += annotate_one(peers, nh, port);
        }
    }
}

int
gw_http_tcp_annotate(json_t *conns, uint16_t port)
{
    static char buf[DIAG_BUF]; /* the HTTP thread's only: one at a time */
    struct timeval tv = {.tv_sec = DIAG_RECV_TIMEOUT_MS / 1000,
                         .tv_usec = (DIAG_RECV_TIMEOUT_MS % 1000) * 1000};
    struct peer_entry *peers = NULL, *entries, *e, *tmp;
    size_t i, n = json_array_size(conns);
    int fd, rc, matched = 0;

    if (n == 0)
        return 0;
    entries = calloc(n, sizeof(*entries));
    if (entries == NULL)
        return SCIMQ_ENOMEM;
    for (i = 0; i < n; i++) {
        json_t *c = json_array_get(conns, i);
        const char *peer = json_string_value(json_object_get(c, "peer"));

        if (peer == NULL)
            continue;
        HASH_FIND_STR(peers, peer, e);
        if (e != NULL)
            continue; /* cannot happen for TCP peers; keep the first */
        entries[i].peer = peer;
        entries[i].conn = c;
        HASH_ADD_KEYPTR(hh, peers, peer, strlen(peer), &entries[i]);
    }
    fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) {
        rc = -errno;
    } else {
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        rc = dump_family(fd, AF_INET, peers, port, &matched, buf);
        if (rc == 0)
            rc = dump_family(fd, AF_INET6, peers, port, &matched, buf);
        close(fd);
    }
    HASH_ITER(hh, peers, e, tmp)
    {
        HASH_DEL(peers, e);
    }
    free(entries);
    return rc < 0 ? rc : matched;
}
