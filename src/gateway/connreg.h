/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registry of connections, for statistics only: what STATS shows about
 * each connection (peer, session, bytes, socket state), and the gateway's
 * totals and rates.  Its own lock; the broker never sees it.
 */
#ifndef SCIMQ_GATEWAY_CONNREG_H
#define SCIMQ_GATEWAY_CONNREG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <netinet/in.h>

#include <jansson.h>
#include <uthash.h>

#include <scimq/proto.h>

struct gw_conn_info {
    uint64_t id;
    int worker;
    char peer[64];
    char addr[INET6_ADDRSTRLEN]; /* the peer's address, without port */
    bool admin;      /* came through the admin socket: may administer */
    bool counted;    /* admitted: counted against its address */
    bool unauth;     /* counted as not yet authenticated */
    bool in_session; /* after HELLO: session_id and stream are valid */
    uint8_t session_id[SCIMQ_PROTO_SESSION_ID_LEN];
    int stream;
    _Atomic uint64_t bytes_in, bytes_out, frames_in, frames_out;
    int sndbuf, rcvbuf;
    char congestion[16];
    /* TCP_INFO, sampled by the connection's worker once a second (STATS
     * reads them from any thread). */
    _Atomic uint32_t rtt_us, retransmits, cwnd;
    _Atomic uint64_t delivery_rate, busy_us, rwnd_limited_us, sndbuf_limited_us;
    UT_hash_handle hh;
};

/* Why a connection was refused or cut (STATS "rejections"). */
enum gw_reject {
    GW_REJECT_PER_PEER, /* too many connections from its address */
    GW_REJECT_UNAUTH,   /* too many not yet authenticated */
    GW_REJECT_OUTPUT,   /* did not read its replies */
    GW_REJECT_FDS,      /* out of file descriptors at accept */
    GW_REJECT_SLOW,     /* under the minimum data rate inside a frame */
    GW_REJECT_COUNT     /* also: admitted */
};

/* Connections per peer address, so one peer cannot take the gateway. */
struct gw_peer_limits {
    int per_peer;        /* connections from one address */
    int unauth;          /* before AUTH (HELLO with no token), in total */
    int unauth_per_peer; /* the same, from one address */
};

struct gw_peer_count {
    char addr[INET6_ADDRSTRLEN];
    int conns, unauth;
    UT_hash_handle hh;
};

struct gw_connreg {
    pthread_mutex_t lock;
    struct gw_conn_info *all;
    struct gw_peer_count *peers; /* admitted connections by address */
    int unauth;                  /* admitted, not yet authenticated */
    /* Totals of closed connections, and counters without a connection. */
    uint64_t bytes_in, bytes_out, frames_in, frames_out;
    uint64_t accepted;
    _Atomic uint64_t protocol_errors, auth_failures, refused;
    _Atomic uint64_t rejections[GW_REJECT_COUNT];
    /* Rates over the last second or so (gw_connreg_rates). */
    uint64_t rate_t_ms, rate_in_last, rate_out_last;
    double rate_in_bps, rate_out_bps;
};

void gw_connreg_init(struct gw_connreg *r, uint64_t now);
void gw_connreg_destroy(struct gw_connreg *r);
/*
 * Registers ci and admits it against the limits of its address (ci->addr):
 * GW_REJECT_COUNT when admitted (counted until removed), else the reason
 * it must be refused.
 */
enum gw_reject gw_connreg_add(struct gw_connreg *r, struct gw_conn_info *ci,
                              const struct gw_peer_limits *lim);
/* ci authenticated: it no longer counts as unauthenticated. */
void gw_connreg_authed(struct gw_connreg *r, struct gw_conn_info *ci);
void gw_connreg_remove(struct gw_connreg *r, struct gw_conn_info *ci);
/* Records that ci joined a session (stats show it). */
void gw_connreg_joined(struct gw_connreg *r, struct gw_conn_info *ci,
                       const uint8_t sid[SCIMQ_PROTO_SESSION_ID_LEN],
                       int stream);
/* Counts a rejection. */
static inline void
gw_connreg_reject(struct gw_connreg *r, enum gw_reject why)
{
    atomic_fetch_add(&r->rejections[why], 1);
}
/* Updates the byte rates (about once a second). */
void gw_connreg_rates(struct gw_connreg *r, uint64_t now);
/* Adds connections, connections_detail, bytes/frames totals and rates. */
void gw_connreg_json(struct gw_connreg *r, json_t *root);
/* Adds its counters to the "totals" object of STATS. */
void gw_connreg_totals_json(struct gw_connreg *r, json_t *totals);

#endif /* SCIMQ_GATEWAY_CONNREG_H */
