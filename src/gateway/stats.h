/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Statistics: a snapshot of the broker's numbers is copied while the hub
 * holds its lock (no JSON, no /proc, no system call there); the JSON
 * documents are built from the snapshot afterwards.
 */
#ifndef SCIMQ_GATEWAY_STATS_H
#define SCIMQ_GATEWAY_STATS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "records.h"

struct gw_queue_snap {
    char *name, *dead_letter;
    char **bindings;
    size_t n_bindings;
    enum scimq_proto_queue_kind kind;
    bool closed;
    const char *durability; /* a literal */
    uint64_t ready, delayed, in_flight, bytes, consumers;
    uint32_t ack_timeout_ms, max_attempts;
    uint64_t max_bytes;
    struct gw_queue_counters c;
};

struct gw_snapshot {
    struct gw_queue_snap *queues;
    size_t n_queues;
    uint64_t sessions, ready, in_flight, settlements_ignored;
    /* Store. */
    uint64_t pool_size, pool_used, chunk, resident, spilling, prefaulted;
    const char *prefault; /* "off", "running" or "done" (a literal) */
    uint64_t disk_limit, spill_bytes, parked;
    uint64_t receiving, max_receiving; /* PUTs being received */
    struct gw_store_counters sc;
    /* Journal. */
    bool journal;
    const char *durability;
    uint64_t j_bytes, j_segments, j_dropped, j_pending_confirms;
    struct gw_journal_counters jc;
};

/* Which queues: all, the one named `name`, or those starting with it. */
enum gw_snap_filter { GW_SNAP_ALL, GW_SNAP_NAME, GW_SNAP_PREFIX };

/* Copies the broker's numbers (under the hub lock). */
void gw_stats_snapshot(const struct gw_broker *b, enum gw_snap_filter filter,
                       const scimq_proto_str_t *name, struct gw_snapshot *s);
void gw_snapshot_free(struct gw_snapshot *s);

/* {"queues": [queue objects]} for QUEUE_LIST. */
json_t *gw_stats_queues_json(const struct gw_snapshot *s);
/* The broker part of STATS: sessions, totals, memory, spill, queues. */
void gw_stats_broker_json(const struct gw_snapshot *s, json_t *root);

#endif /* SCIMQ_GATEWAY_STATS_H */
