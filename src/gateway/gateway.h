/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scimq-gateway: shared definitions.
 *
 * Threads and ownership
 * - N worker threads, each running one libuv loop.  A connection is
 *   accepted, served and freed by one worker (per-worker SO_REUSEPORT
 *   listeners); nothing else touches its handle.
 * - The broker (queues, messages, sessions, deliveries, payload memory) is
 *   shared by all workers and protected by one mutex, gw->lock.  Critical
 *   sections are short: message rates are low (a 16 MiB frame every few
 *   milliseconds) while payload bytes move outside the lock.
 * - The broker never calls into a connection of another worker: it posts
 *   an action (deliver, EOS, resume reading) to that worker's mailbox.
 * - Payload spill and load run on one spill thread (blocking file I/O off
 *   the event loops).
 */
#ifndef SCIMQ_GATEWAY_GATEWAY_H
#define SCIMQ_GATEWAY_GATEWAY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <uthash.h>
#include <uv.h>

#include <scimq/proto.h>

struct gw_worker;
struct gw_conn;
struct gw_queue;
struct gw_session;
struct gw_conn_info;

/* ------------------------------------------------------------------------ */
/* Payloads: the bytes of one PUT, shared by every queue it lands in         */
/* ------------------------------------------------------------------------ */

struct gw_block {
    char *name; /* points into gw_payload.names; not NUL-terminated */
    uint32_t name_len;
    uint64_t len;
};

enum gw_payload_where {
    GW_PL_MEMORY,   /* data valid */
    GW_PL_SPILLING, /* data valid, being written to its spill file */
    GW_PL_DISK,     /* data NULL, bytes in the spill file */
    GW_PL_LOADING   /* data NULL, being read back */
};

struct gw_payload {
    uint64_t id;
    uint64_t len;
    uint32_t block_count;
    struct gw_block *blocks;
    char *names;
    uint8_t *data;
    enum gw_payload_where where;
    bool has_file; /* a complete spill file exists */
    uint32_t refs; /* message records using it */
    uint32_t pins; /* deliveries being written from data */
    struct gw_payload *lru_prev, *lru_next; /* resident, by arrival */
    struct gw_delivery *waiters;            /* deliveries waiting for a load */
};

/* ------------------------------------------------------------------------ */
/* Messages and deliveries                                                   */
/* ------------------------------------------------------------------------ */

enum gw_msg_state { GW_MSG_READY, GW_MSG_DELAYED, GW_MSG_LEASED };

/* One message in one queue (fan-out makes one per target queue). */
struct gw_msg {
    uint64_t id;
    struct gw_payload *payload;
    struct gw_queue *queue;
    uint32_t attempt; /* deliveries so far */
    enum gw_msg_state state;
    uint64_t ready_at_ms;         /* GW_MSG_DELAYED: when it becomes ready */
    struct gw_delivery *delivery; /* GW_MSG_LEASED */
    struct gw_msg *prev, *next;   /* ready / delayed list of the queue */
};

/* A message handed to a session, until settled. */
struct gw_delivery {
    uint64_t id;
    struct gw_msg *msg; /* NULL once settled (best-effort: at once) */
    struct gw_session *session;
    int stream;           /* index in session->streams */
    uint64_t conn_id;     /* the stream's connection at send time */
    uint64_t request_id;  /* of the GET that granted the credit */
    uint64_t deadline_ms; /* lease end (guaranteed) */
    uint64_t bytes;
    bool sent;                       /* frame handed to the worker */
    UT_hash_handle hh;               /* broker->deliveries by id */
    struct gw_delivery *waiter_next; /* payload->waiters */
};

/* ------------------------------------------------------------------------ */
/* Queues, consumers, sessions                                               */
/* ------------------------------------------------------------------------ */

struct gw_queue_counters {
    uint64_t put, put_bytes, delivered, delivered_bytes, acked, nacked;
    uint64_t redelivered, expired, dead_lettered, dropped, moved_in;
};

struct gw_binding {
    struct gw_queue *target;
    struct gw_binding *next;
};

struct gw_queue {
    char *name;
    enum scimq_proto_queue_kind kind;
    uint32_t ack_timeout_ms;
    uint32_t max_attempts;
    uint64_t max_bytes;
    char *dead_letter;
    bool closed;            /* QUEUE_CLOSE: no more PUTs; EOS once drained */
    struct gw_msg *ready;   /* FIFO (utlist DL) */
    struct gw_msg *delayed; /* NACK with delay */
    uint64_t n_ready, n_delayed, n_leased;
    uint64_t bytes; /* payload bytes of all its messages */
    struct gw_binding *bindings;
    struct gw_queue_counters c;
    UT_hash_handle hh; /* broker->queues by name */
};

/* A session's credit on one queue. */
struct gw_consumer {
    struct gw_queue *queue;
    char *queue_name; /* kept: the queue may be deleted and re-declared */
    uint64_t credit_msgs, credit_bytes;
    uint64_t inflight; /* unsettled deliveries from this queue */
    uint64_t request_id;
    bool eos_sent;
    struct gw_consumer *next;
};

#define GW_MAX_STREAMS 64

struct gw_stream {
    uint64_t conn_id; /* 0: not connected */
    int worker;
    uint64_t bytes_inflight;
};

struct gw_session {
    uint8_t id[SCIMQ_PROTO_SESSION_ID_LEN];
    uint16_t stream_count;
    uint16_t connected;
    struct gw_stream streams[GW_MAX_STREAMS];
    struct gw_consumer *consumers;
    uint64_t inflight; /* unsettled deliveries */
    char client_name[64];
    UT_hash_handle hh;          /* broker->sessions by id */
    struct gw_session *rr_next; /* round robin of consumers in dispatch */
};

/* ------------------------------------------------------------------------ */
/* The gateway                                                               */
/* ------------------------------------------------------------------------ */

struct gw_options {
    char listen_host[256];
    uint16_t listen_port;
    const char *port_file;
    int workers;
    uint64_t memory_limit;
    const char *spill_dir;
    uint64_t disk_limit;
    uint8_t *token; /* NULL: no authentication */
    size_t token_len;
    uint32_t ack_timeout_ms;
    uint32_t hello_timeout_ms;
    uint32_t idle_timeout_ms;
    uint32_t drain_timeout_ms;
    bool remote_admin;
    int max_connections;
    scimq_proto_limits_t limits;
};

struct gw_stats {
    uint64_t bytes_in, bytes_out; /* wire bytes */
    uint64_t frames_in, frames_out;
    uint64_t payload_allocated; /* payload bytes ever allocated for PUTs */
    uint64_t spilled_bytes, loaded_bytes, spill_files_total;
    uint64_t protocol_errors, auth_failures, connections_total;
    uint64_t acks_unknown;
};

struct gw_spill; /* spill.c */

struct gateway {
    struct gw_options opt;
    pthread_mutex_t lock; /* the broker lock: everything below */

    struct gw_queue *queues;
    struct gw_session *sessions;
    struct gw_delivery *deliveries;
    struct gw_conn_info *conns; /* registry for statistics */
    uint64_t next_msg_id, next_delivery_id, next_payload_id;

    /* Payload memory and spill accounting. */
    uint64_t mem_used;     /* resident payload bytes */
    uint64_t mem_spilling; /* of which being written out */
    uint64_t disk_used;    /* bytes in spill files */
    uint64_t spill_files;
    struct gw_payload *lru_head, *lru_tail;
    struct gw_spill *spill;

    /* Producers parked by back-pressure: (worker, conn id). */
    struct gw_parked {
        int worker;
        uint64_t conn_id;
        uint64_t need;
    } * parked;
    size_t n_parked, cap_parked;

    struct gw_stats st;
    uint64_t start_ms;
    uint64_t rate_t_ms, rate_in_last, rate_out_last;
    double rate_in_bps, rate_out_bps;

    /* Workers. */
    struct gw_worker *workers;
    int n_workers;
    atomic_int n_connections;
    atomic_bool draining, stopping;
    atomic_uint_fast64_t next_conn_id;
};

/* Milliseconds on CLOCK_MONOTONIC. */
uint64_t gw_now_ms(void);

#endif /* SCIMQ_GATEWAY_GATEWAY_H */
