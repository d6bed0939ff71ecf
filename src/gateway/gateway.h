/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scimq-gateway: the process.
 *
 * Threads and ownership
 * - N workers, each running one libuv loop.  A connection is accepted,
 *   served and freed by one worker (per-worker SO_REUSEPORT listeners);
 *   nothing else touches it.  Connections own sockets and bytes: framing,
 *   payloads read straight into their final buffers, writes of iovecs.
 *   They never decide where a message goes.
 * - The broker (broker.h) owns queue, lease, session and credit state and
 *   the store (payload memory); the hub (hub.h) drives it under one lock
 *   and carries its actions to the workers' mailboxes and to the journal
 *   thread (journal.h), which does all file I/O: the journal's segments,
 *   or the spill directory's (the same files, not recovered).
 * - The connection registry (connreg.h) keeps what STATS shows about
 *   connections, under its own lock.
 */
#ifndef SCIMQ_GATEWAY_GATEWAY_H
#define SCIMQ_GATEWAY_GATEWAY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <scimq/proto.h>

#include "common/tls.h"
#include "connreg.h"
#include "hub.h"
#include "jobs.h" /* MPI agents' REPORTs */

struct gw_worker;

struct gw_options {
    char listen_host[256];
    uint16_t listen_port;
    const char *port_file;
    int workers;
    uint64_t memory_limit;
    uint64_t chunk_size;
    bool prefault;
    const char *spill_dir;
    const char *journal_dir;
    uint8_t durability; /* enum gw_durability (records.h) */
    uint32_t journal_batch_ms;
    uint64_t journal_segment;
    uint64_t disk_limit;
    uint8_t *token;       /* NULL: no authentication */
    scimq_tls_ctx_t *tls; /* NULL: plain TCP (the admin socket always) */
    size_t token_len;
    uint32_t ack_timeout_ms;
    uint32_t hello_timeout_ms;
    uint32_t idle_timeout_ms;
    uint32_t drain_timeout_ms;
    const char *admin_socket; /* setting: "" default path, "off" none */
    const char *admin_group;  /* may use it too; "" owner only */
    int max_connections;      /* effective: within the descriptor limit */
    uint64_t nofile;          /* RLIMIT_NOFILE (soft) once raised */
    struct gw_peer_limits peer_limits;
    uint64_t max_output;        /* queued reply bytes per connection */
    uint32_t output_timeout_ms; /* longest time over max_output */
    uint64_t min_rate;          /* bytes/s inside a frame; 0: none */
    uint32_t min_rate_grace_ms;
    scimq_proto_limits_t limits;
};

struct gateway {
    struct gw_options opt;
    struct gw_hub hub;
    struct gw_connreg conns;
    struct gw_jobs jobs; /* MPI agents' REPORTs (jobs.h) */
    struct gw_worker *workers;
    int n_workers;
    uint64_t start_ms;
    char admin_path[108]; /* the bound admin socket; "" when none */
    atomic_int n_connections;
    atomic_bool draining, stopping;
    atomic_uint_fast64_t next_conn_id;
};

#endif /* SCIMQ_GATEWAY_GATEWAY_H */
