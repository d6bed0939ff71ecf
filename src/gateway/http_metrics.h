/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Prometheus text exposition format (version 0.0.4) of one gateway
 * snapshot: the STATS document (report.h) with the kernel's TCP state of
 * each connection (http_tcp.h).  A pure function of the document, so what
 * /metrics says is what STATS says, taken at the same instant.
 *
 * Label cardinality is bounded: one series per queue and per live
 * connection, at most GW_METRICS_MAX_QUEUES queues (by name) and
 * GW_METRICS_MAX_CONNS connections (oldest first); the rest are counted in
 * scimq_metrics_omitted; MPI jobs as their agents report them, at most
 * GW_METRICS_MAX_AGENTS agents and GW_METRICS_MAX_RANKS ranks.  No label
 * carries a message id or anything else that grows without bound while the set
 * of queues and connections stays.
 */
#ifndef SCIMQ_GATEWAY_HTTP_METRICS_H
#define SCIMQ_GATEWAY_HTTP_METRICS_H

#include <stddef.h>

#include <jansson.h>

#define GW_METRICS_MAX_QUEUES 1000
#define GW_METRICS_MAX_CONNS 256
/* MPI jobs (REPORT): agents' series (jobs by id, agents by index) and
 * per-rank series, over all jobs; the gateway keeps gateway_jobs_max
 * agents at most in any case. */
#define GW_METRICS_MAX_AGENTS 64
#define GW_METRICS_MAX_RANKS 1024

/* A malloc'ed text (its length in *len_p), or NULL when out of memory. */
char *gw_metrics_render(const json_t *doc, size_t *len_p);

#endif /* SCIMQ_GATEWAY_HTTP_METRICS_H */
