/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The gateway's read-only HTTP side (--http, setting gateway_http), served
 * by libmicrohttpd on its own thread:
 *   GET /metrics      Prometheus text format (http_metrics.h)
 *   GET /             the live page (one self-contained HTML file)
 *   GET /api/stats    the JSON document the page polls: STATS with the
 *                     kernel's TCP state of each connection (http_tcp.h)
 * Nothing else: no method but GET and HEAD, no administration.
 *
 * It never takes the broker's state itself: every answer comes from one
 * snapshot, built the way a STATS request builds it (gw_report_stats: the
 * hub copies the broker's numbers under its lock, JSON is made outside)
 * and reused for gateway_http_cache_ms, so however often it is scraped the
 * broker sees at most one snapshot per period.  libmicrohttpd runs one
 * thread here (MHD_USE_INTERNAL_POLLING_THREAD); the cache's lock keeps
 * the cache whole should it ever run more.
 */
#ifndef SCIMQ_GATEWAY_HTTP_H
#define SCIMQ_GATEWAY_HTTP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/net.h"

struct gateway;
struct MHD_Daemon;

struct gw_http {
    struct MHD_Daemon *daemon;
    struct gateway *gw;
    uint16_t gw_port;  /* the gateway's own port: its sockets in the kernel */
    uint32_t cache_ms; /* a snapshot's lifetime */
    char host[SCIMQ_HOST_MAX];
    uint16_t port; /* where it listens (once started) */
    pthread_mutex_t lock;
    uint64_t taken_ms; /* of the cached snapshot; 0: none yet */
    char *json, *metrics;
    size_t json_len, metrics_len;
    const char *port_file; /* written by gw_http_start_configured */
};

/*
 * Starts serving on `spec`: "HOST:PORT", "[IPV6]:PORT", or a port alone
 * (":PORT" or "PORT"), which means loopback (127.0.0.1).  PORT 0 picks a
 * free port (h->port says which).  gw_port: the gateway's listening port.
 * Returns 0 or a SciMQ error (bad spec, cannot listen); `err` says why.
 */
int gw_http_start(struct gw_http *h, struct gateway *gw, const char *spec,
                  uint16_t gw_port, uint32_t cache_ms, char *err,
                  size_t errlen);
/*
 * The gateway's start: gw_http_start from the settings gateway_http (empty:
 * nothing is started, h stays stopped), gateway_http_cache_ms and
 * gateway_http_port_file (HOST:PORT written there atomically).  Says what
 * failed on stderr; returns 0 or a SciMQ error.
 */
int gw_http_start_configured(struct gw_http *h, struct gateway *gw,
                             uint16_t gw_port);
/* Stops the thread (waits for requests under way) and frees the cache;
 * removes the port file it wrote.  A stopped h is left as it is. */
void gw_http_stop(struct gw_http *h);

#endif /* SCIMQ_GATEWAY_HTTP_H */
