/* SPDX-License-Identifier: BSD-3-Clause */
/* Addresses and TCP socket tuning shared by the gateway and the client. */
#ifndef SCIMQ_COMMON_NET_H
#define SCIMQ_COMMON_NET_H

#include <stddef.h>
#include <stdint.h>

#define SCIMQ_HOST_MAX 256

/*
 * Parses "HOST:PORT", "[IPV6]:PORT" or a URL "scimq://HOST:PORT[/]" (or
 * "scimqs://": TLS, which the caller sees from the URL).  HOST
 * may be empty in "HOST:PORT" (meaning any address); PORT 0 means any free
 * port.  Returns 0 or SCIMQ_EINVAL.
 */
int scimq__hostport_parse(const char *text, char *host, size_t hostlen,
                          uint16_t *port_p);

/* Longest Unix-domain socket path (sun_path, with its terminating NUL). */
#define SCIMQ_UNIX_PATH_MAX 108

/*
 * The default administration socket of a gateway listening on port, for
 * the calling user: /tmp/scimq-UID/gateway-PORT.sock (the directory is
 * the user's, mode 700).  The gateway creates it there and scimqctl looks
 * there, so both agree without configuration.  Returns 0 or SCIMQ_EINVAL.
 */
int scimq__admin_socket_default(uint16_t port, char *buf, size_t len);

/* The directory of that default (/tmp/scimq-UID).  0 or SCIMQ_EINVAL. */
int scimq__admin_socket_dir(char *buf, size_t len);

/*
 * Applies the socket tunables to a connected or listening TCP socket:
 * SO_SNDBUF / SO_RCVBUF (0 leaves kernel autotuning on), TCP_CONGESTION
 * (NULL or "" keeps the system default) and TCP_NODELAY.  Failures are
 * reported as a warning once per process and are not fatal: a missing
 * congestion module must not stop data taking.  A buffer the kernel
 * granted below what was asked (capped at net.core.wmem_max / rmem_max)
 * is warned about once per process and direction, naming the sysctl, and
 * counted (scimq__net_buffers_short).
 */
void scimq__sock_tune(int fd, uint64_t sndbuf, uint64_t rcvbuf,
                      const char *congestion);

/* Same, with the values from the param table. */
void scimq__sock_tune_default(int fd);

/* Sockets of this process whose explicit buffer the kernel cut. */
uint64_t scimq__net_buffers_short(void);

/* The number in a /proc/sys file, or -1. */
long scimq__net_sysctl_long(const char *path);

/* What a socket really got, for statistics. */
struct scimq_sock_info {
    int sndbuf; /* bytes, as reported by the kernel */
    int rcvbuf;
    char congestion[16]; /* "" if unknown */
    uint32_t rtt_us;     /* smoothed RTT */
    uint32_t retransmits;
    uint32_t cwnd;          /* segments */
    uint64_t delivery_rate; /* bytes per second, the kernel's estimate */
    /* Time data was waiting to be sent, and the parts of it the peer's
     * receive window and the local send buffer held the sender back. */
    uint64_t busy_us, rwnd_limited_us, sndbuf_limited_us;
};

int scimq__sock_info(int fd, struct scimq_sock_info *info);

/*
 * What held a sender back, from TCP_INFO's busy / rwnd-limited /
 * sndbuf-limited times: "sndbuf" (the local send buffer), "rwnd" (the
 * peer's receive window), "cwnd" (neither for more than a tenth of the
 * busy time: congestion control, the normal case) or "idle".
 */
const char *scimq__sock_limit(uint64_t busy_us, uint64_t rwnd_limited_us,
                              uint64_t sndbuf_limited_us);

#endif /* SCIMQ_COMMON_NET_H */
