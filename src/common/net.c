/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/tcp.h> /* its tcp_info is the kernel's whole one */

#include <scimq/error.h>

#include "log.h"
#include "net.h"
#include "param.h"

int
scimq__hostport_parse(const char *text, char *host, size_t hostlen,
                      uint16_t *port_p)
{
    const char *p = text, *colon, *end;
    unsigned long port;
    size_t n;

    if (text == NULL)
        return SCIMQ_EINVAL;
    if (strncmp(p, "scimq://", 8) == 0)
        p += 8;
    else if (strncmp(p, "scimqs://", 9) == 0)
        p += 9;
    if (*p == '[') {
        end = strchr(p, ']');
        if (end == NULL || end[1] != ':')
            return SCIMQ_EINVAL;
        n = (size_t) (end - p - 1);
        p++;
        colon = end + 1;
    } else {
        colon = strrchr(p, ':');
        if (colon == NULL || memchr(p, ':', (size_t) (colon - p)) != NULL)
            return SCIMQ_EINVAL; /* bare IPv6 needs brackets */
        n = (size_t) (colon - p);
    }
    if (n >= hostlen)
        return SCIMQ_EINVAL;
    memcpy(host, p, n);
    host[n] = '\0';

    errno = 0;
    port = strtoul(colon + 1, (char **) &end, 10);
    if (end == colon + 1 || errno != 0 || port > 65535 ||
        (*end != '\0' && strcmp(end, "/") != 0))
        return SCIMQ_EINVAL;
    *port_p = (uint16_t) port;
    return 0;
}

/* Sockets whose buffer the kernel granted below what was asked. */
static _Atomic uint64_t buffers_short;

uint64_t
scimq__net_buffers_short(void)
{
    return atomic_load(&buffers_short);
}

long
scimq__net_sysctl_long(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;

    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

/*
 * Sets one buffer and reads back what the kernel granted.  Linux caps the
 * request at net.core.wmem_max / rmem_max (global, not per namespace) and
 * then doubles it for its own bookkeeping, reporting the doubled value; a
 * grant below the request is otherwise silent, and a buffer set at all
 * turns the kernel's autotuning off for the socket (it would have grown up
 * to tcp_wmem / tcp_rmem's maximum), so a capped buffer is usually worse
 * than none.  Said once per process and direction; counted per socket.
 */
static void
buf_set(int fd, int opt, uint64_t asked, atomic_bool *warned)
{
    bool snd = opt == SO_SNDBUF;
    const char *max_name = snd ? "net.core.wmem_max" : "net.core.rmem_max";
    int v = asked > INT32_MAX / 2 ? INT32_MAX / 2 : (int) asked, got = 0;
    socklen_t len = sizeof(got);

    if (setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v)) != 0) {
        if (!atomic_exchange(warned, true))
            SCIMQ_LOG_WARN(NET, "cannot set %s to %d: %s",
                           snd ? "SO_SNDBUF" : "SO_RCVBUF", v, strerror(errno));
        return;
    }
    if (getsockopt(fd, SOL_SOCKET, opt, &got, &len) != 0 ||
        (uint64_t) got / 2 >= (uint64_t) v)
        return;
    atomic_fetch_add(&buffers_short, 1);
    if (!atomic_exchange(warned, true))
        SCIMQ_LOG_WARN(
            NET,
            "%s: asked for %d bytes (%s), the kernel granted %d: it caps "
            "buffers at %s = %ld.  Raise it (sysctl -w %s=%d) or leave %s "
            "at 0: a buffer set explicitly also turns the kernel's "
            "autotuning off (it grows up to the last value of %s)",
            snd ? "SO_SNDBUF" : "SO_RCVBUF", v,
            snd ? "net_sndbuf" : "net_rcvbuf", got / 2, max_name,
            scimq__net_sysctl_long(snd ? "/proc/sys/net/core/wmem_max"
                                       : "/proc/sys/net/core/rmem_max"),
            max_name, v, snd ? "net_sndbuf" : "net_rcvbuf",
            snd ? "net.ipv4.tcp_wmem" : "net.ipv4.tcp_rmem");
}

void
scimq__sock_tune(int fd, uint64_t sndbuf, uint64_t rcvbuf,
                 const char *congestion)
{
    static atomic_bool warned_snd, warned_rcv, warned_cc;
    int one = 1;

    (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /*
     * Keepalive finds a dead peer (a crashed node, a cut link) without
     * mistaking a peer that is slow on purpose (back-pressure) for one:
     * its kernel still answers the probes.  About 60 s to notice.
     */
    {
        int idle = 30, intvl = 10, cnt = 3;

        (void) setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        (void) setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
        (void) setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl,
                          sizeof(intvl));
        (void) setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    }
    /* 0 (the default) never touches the buffers: autotuning stays on. */
    if (sndbuf > 0)
        buf_set(fd, SO_SNDBUF, sndbuf, &warned_snd);
    if (rcvbuf > 0)
        buf_set(fd, SO_RCVBUF, rcvbuf, &warned_rcv);
    if (congestion != NULL && congestion[0] != '\0' &&
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, congestion,
                   (socklen_t) strlen(congestion)) != 0 &&
        !atomic_exchange(&warned_cc, true))
        SCIMQ_LOG_WARN(NET,
                       "cannot use congestion control '%s': %s (see "
                       "/proc/sys/net/ipv4/tcp_allowed_congestion_control)",
                       congestion, strerror(errno));
}

void
scimq__sock_tune_default(int fd)
{
    scimq__sock_tune(fd, scimq__param_size(SCIMQ_PARAM_NET_SNDBUF),
                     scimq__param_size(SCIMQ_PARAM_NET_RCVBUF),
                     scimq__param_str(SCIMQ_PARAM_NET_CONGESTION));
}

int
scimq__sock_info(int fd, struct scimq_sock_info *info)
{
    struct tcp_info ti;
    socklen_t len;

    memset(info, 0, sizeof(*info));
    len = sizeof(info->sndbuf);
    (void) getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &info->sndbuf, &len);
    len = sizeof(info->rcvbuf);
    (void) getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &info->rcvbuf, &len);
    len = sizeof(info->congestion) - 1;
    (void) getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, info->congestion, &len);
    len = sizeof(ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0) {
        info->rtt_us = ti.tcpi_rtt;
        info->retransmits = ti.tcpi_total_retrans;
        info->cwnd = ti.tcpi_snd_cwnd;
        info->delivery_rate = ti.tcpi_delivery_rate;
        info->busy_us = ti.tcpi_busy_time;
        info->rwnd_limited_us = ti.tcpi_rwnd_limited;
        info->sndbuf_limited_us = ti.tcpi_sndbuf_limited;
    }
    return 0;
}

int
scimq__admin_socket_dir(char *buf, size_t len)
{
    int n = snprintf(buf, len, "/tmp/scimq-%u", (unsigned int) geteuid());

    return n < 0 || (size_t) n >= len ? SCIMQ_EINVAL : 0;
}

int
scimq__admin_socket_default(uint16_t port, char *buf, size_t len)
{
    char dir[64];
    int n;

    if (scimq__admin_socket_dir(dir, sizeof(dir)) != 0)
        return SCIMQ_EINVAL;
    n = snprintf(buf, len, "%s/gateway-%u.sock", dir, port);
    return n < 0 || (size_t) n >= len ? SCIMQ_EINVAL : 0;
}

const char *
scimq__sock_limit(uint64_t busy_us, uint64_t rwnd_limited_us,
                  uint64_t sndbuf_limited_us)
{
    /* The kernel counts, while data was waiting to be sent, the time the
     * peer's receive window and the local send buffer held the sender
     * back; the rest of the busy time the congestion window did.  A
     * limit that held it back for more than a tenth of that is named. */
    uint64_t most = rwnd_limited_us > sndbuf_limited_us ? rwnd_limited_us
                                                        : sndbuf_limited_us;

    if (busy_us == 0)
        return "idle";
    if (most * 10 <= busy_us)
        return "cwnd";
    return rwnd_limited_us >= sndbuf_limited_us ? "rwnd" : "sndbuf";
}
