/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kernel's view of the gateway's TCP connections, for the HTTP side:
 * smoothed RTT, retransmits, congestion window, pacing rate and congestion
 * control of every socket whose local port is the gateway's, read with one
 * sock_diag dump (NETLINK_SOCK_DIAG, what `ss -ti` uses).  It never touches
 * a connection's socket or its worker: the sockets are looked up by
 * address in the kernel, so a connection closing meanwhile is only absent
 * from the answer.
 */
#ifndef SCIMQ_GATEWAY_HTTP_TCP_H
#define SCIMQ_GATEWAY_HTTP_TCP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/*
 * Sets the "tcp" object {state, rtt_us, rttvar_us, retransmits, lost, cwnd,
 * ssthresh, mss, pacing_rate_Bps, delivery_rate_Bps, congestion, busy and
 * limited times} of every
 * entry of the array `conns` (STATS "connections_detail") whose "peer"
 * ("ADDR:PORT") is the remote end of a TCP socket with local port `port`
 * (replacing the once-a-second sample STATS carries).
 * Returns the number of entries it matched, or a negative SciMQ error if
 * the kernel could not be asked (entries then stay as they were).
 */
int gw_http_tcp_annotate(json_t *conns, uint16_t port);

#endif /* SCIMQ_GATEWAY_HTTP_TCP_H */
