/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

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

void
scimq__sock_tune(int fd, uint64_t sndbuf, uint64_t rcvbuf,
                 const char *congestion)
{
    static atomic_bool warned_buf, warned_cc;
    int one = 1, v;

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
    if (sndbuf > 0) {
        v = sndbuf > INT32_MAX / 2 ? INT32_MAX / 2 : (int) sndbuf;
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) != 0 &&
            !atomic_exchange(&warned_buf, true))
            SCIMQ_LOG_WARN(NET, "cannot set SO_SNDBUF to %d: %s", v,
                           strerror(errno));
    }
    if (rcvbuf > 0) {
        v = rcvbuf > INT32_MAX / 2 ? INT32_MAX / 2 : (int) rcvbuf;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) != 0 &&
            !atomic_exchange(&warned_buf, true))
            SCIMQ_LOG_WARN(NET, "cannot set SO_RCVBUF to %d: %s", v,
                           strerror(errno));
    }
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
