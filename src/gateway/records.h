/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The broker's records: payloads, messages, deliveries, queues, consumers
 * and sessions, and the broker that owns them.  Only the broker's modules
 * (broker, queue, lease, dispatch, admin, store, stats) include this; the
 * rest of the gateway sees the broker through broker.h and hub.h.
 *
 * Ownership: the broker owns every record; one thread at a time drives it
 * (the hub's lock).  A payload is shared by the messages of a fan-out
 * (refs) and by the DELIVER frames being written from it (pins).
 */
#ifndef SCIMQ_GATEWAY_RECORDS_H
#define SCIMQ_GATEWAY_RECORDS_H

#include <stdbool.h>
#include <stdint.h>

#include <uthash.h>

#include <scimq/proto.h>

#include "action.h"
#include "alloc.h"
#include "broker.h"
#include "heap.h"
#include "pool.h"

struct gw_delivery;
struct gw_queue;
struct gw_session;

/* ------------------------------------------------------------------------ */
/* Payloads (the store)                                                      */
/* ------------------------------------------------------------------------ */

struct gw_block {
    char *name; /* points into gw_payload.names; not NUL-terminated */
    uint32_t name_len;
    uint64_t len;
};

enum gw_payload_where {
    GW_PL_MEMORY, /* data valid */
    GW_PL_DISK,   /* data NULL, bytes only in its segment */
    GW_PL_LOADING /* data = the buffer being read into */
};

/*
 * Is the payload's MSG record in the journal (or, for memory queues, in
 * the segments of the spill directory or journal: a spill writes the same
 * record with no target, which recovery skips)?
 */
enum gw_payload_journal {
    GW_PLJ_NONE,    /* no (memory queues only, or not yet) */
    GW_PLJ_PENDING, /* appended, not written yet (the append pins it) */
    GW_PLJ_DONE     /* written: data readable at (seg, off) */
};

struct gw_payload {
    uint64_t id;
    uint64_t len;
    uint32_t block_count;
    struct gw_block *blocks;
    char *names;
    uint8_t *data; /* pool memory while resident */
    enum gw_payload_where where;
    bool spilled;   /* its record was written by a spill (spill_bytes) */
    bool receiving; /* its PUT's bytes are still coming (st->receiving) */
    bool control;   /* a control message's (PUT with BROADCAST; bcast.h) */
    /* CRC32C of data, taken by the decoder as it arrived (a gateway with a
     * journal asks for it): it serves the payload's first record only;
     * records written later (compaction, from data read back) take their
     * own, so bytes damaged on disk are not sealed with the sum of
     * others. */
    bool data_crc_ok;
    uint32_t data_crc;
    enum gw_payload_journal journal; /* its MSG record */
    uint64_t seg, off;               /* GW_PLJ_DONE: where its data is */
    bool load_queued;                /* waits for memory to load */
    uint32_t refs;                   /* messages using it */
    uint32_t pins;                   /* frames being written from it */
    bool moving; /* compaction: its MSG record is being written again */
    uint32_t read_failures;                 /* consecutive, for the backoff */
    struct gw_heap_node retry;              /* load retry after a failure */
    struct gw_payload *lru_prev, *lru_next; /* resident, by arrival */
    struct gw_payload *load_next;           /* store->load_queue */
    struct gw_delivery *waiters;            /* deliveries waiting for data */
    struct gw_msg *msgs; /* its messages (pl_prev/pl_next), any queue */
};

/* ------------------------------------------------------------------------ */
/* Messages and deliveries                                                   */
/* ------------------------------------------------------------------------ */

enum gw_msg_state {
    GW_MSG_READY,
    GW_MSG_DELAYED,
    GW_MSG_LEASED,
    /* A control message being broadcast, or one of its copies between
     * deliveries: on none of the queue's lists (bcast.h keeps it). */
    GW_MSG_BCAST
};

/* One message in one queue (fan-out makes one per target queue).  A
 * control message's copy (bcast.h) is one too, with copy_of set. */
struct gw_msg {
    uint64_t id;
    struct gw_payload *payload;
    struct gw_queue *queue;
    uint32_t attempt; /* deliveries so far */
    enum gw_msg_state state;
    struct gw_heap_node delay;    /* GW_MSG_DELAYED: ready again at key */
    struct gw_delivery *delivery; /* GW_MSG_LEASED */
    struct gw_msg *prev, *next;   /* the queue's ready/delayed/leased list */
    struct gw_msg *pl_prev, *pl_next; /* payload->msgs */
    struct gw_msg *copy_of;           /* a copy: the control message */
    struct gw_consumer *copy_for;     /* a copy: its one consumer */
};

/* A message handed to a session, until settled. */
struct gw_delivery {
    uint64_t id;
    struct gw_msg *msg;
    struct gw_session *session;
    struct gw_consumer *consumer;
    uint16_t stream;     /* index in session->streams */
    uint64_t conn_id;    /* the stream's connection at send time */
    uint64_t request_id; /* of the GET that granted the credit */
    uint64_t bytes;
    bool sent;                       /* its DELIVER action was emitted */
    struct gw_heap_node lease;       /* sent, guaranteed: lease deadline */
    UT_hash_handle hh;               /* broker->deliveries by id */
    struct gw_delivery *prev, *next; /* session->deliveries */
    struct gw_delivery *waiter_next; /* payload->waiters */
};

/* ------------------------------------------------------------------------ */
/* Queues, consumers, sessions                                               */
/* ------------------------------------------------------------------------ */

struct gw_queue_counters {
    uint64_t put, put_bytes, delivered, delivered_bytes, acked, nacked;
    uint64_t redelivered, expired, dead_lettered, dropped, moved_in;
    uint64_t too_large; /* larger than every consumer's LIMIT */
};

struct gw_binding {
    struct gw_queue *target;
    struct gw_binding *next;
};

/* When a PUT_OK is sent, for a queue (doc/scimp.md, PUT). */
enum gw_durability {
    GW_DURABLE_MEMORY, /* at once: in the gateway's memory */
    GW_DURABLE_BATCH,  /* once journaled; synced within the batch interval */
    GW_DURABLE_SYNC    /* once journaled and synced (fdatasync) */
};

static inline const char *
gw_durability_name(enum gw_durability d)
{
    return d == GW_DURABLE_SYNC    ? "sync"
           : d == GW_DURABLE_BATCH ? "batch"
                                   : "memory";
}

struct gw_queue {
    uint64_t qid; /* never reused: names it in the journal */
    enum gw_durability durability;
    char *name;
    enum scimq_proto_queue_kind kind;
    uint32_t ack_timeout_ms;
    uint32_t max_attempts;
    uint64_t max_bytes;
    char *dead_letter;
    bool closed;               /* QUEUE_CLOSE: no more PUTs; EOS once drained */
    struct gw_msg *bc_msg;     /* the control message being broadcast */
    struct gw_msg *bc_pending; /* its copies waiting for their consumer */
    uint64_t bc_left;          /* its copies not settled yet */
    uint64_t bc_seq;           /* broadcasts begun (names bc_msg's) */
    struct gw_msg *ready;      /* FIFO (utlist DL) */
    struct gw_msg *delayed;    /* NACK with delay (times in b->delays) */
    struct gw_msg *leased;     /* handed out, unsettled */
    uint64_t n_ready, n_delayed, n_leased;
    uint64_t bytes; /* payload bytes of all its messages */
    struct gw_binding *bindings;
    struct gw_consumer *consumers; /* every consumer (qprev/qnext) */
    struct gw_consumer *active;    /* with message credit, round robin */
    bool dirty;                    /* in b->dirty: dispatch before return */
    struct gw_queue *dirty_next;
    struct gw_queue_counters c;
    UT_hash_handle hh; /* broker->queues by name */
};

#define GW_MAX_STREAMS 64
/* Queues bound to one queue (a PUT's fan-out, journaled in one record). */
#define GW_MAX_BINDINGS 255

/* A session's credit and state on one queue. */
struct gw_consumer {
    struct gw_queue *queue; /* NULL once the queue is deleted */
    char *queue_name;       /* kept: the queue may be re-declared */
    struct gw_session *session;
    uint64_t credit_msgs, credit_bytes;
    uint64_t inflight;    /* unsettled deliveries from this queue */
    uint64_t max_message; /* LIMIT; 0: any size */
    uint64_t request_id;  /* most recent GET of the session */
    uint64_t eos_owed;    /* bit per stream: GET seen, EOS not sent yet */
    uint64_t stream_rid[GW_MAX_STREAMS]; /* most recent GET per stream */
    bool active;                         /* in queue->active */
    uint64_t bc_seq; /* the queue's broadcast it has a copy of, or 0 */
    struct gw_consumer *snext;         /* session->consumers */
    struct gw_consumer *qprev, *qnext; /* queue->consumers */
    struct gw_consumer *aprev, *anext; /* queue->active */
};

struct gw_stream {
    uint64_t conn_id; /* 0: not connected */
    int worker;
    uint64_t bytes_queued; /* DELIVER bytes posted, not yet written */
};

struct gw_session {
    uint8_t id[SCIMQ_PROTO_SESSION_ID_LEN];
    uint8_t version; /* session protocol version chosen in WELCOME */
    uint16_t stream_count;
    uint16_t connected;
    uint16_t next_stream; /* where the next tie of stream_pick() starts */
    struct gw_stream streams[GW_MAX_STREAMS];
    struct gw_consumer *consumers;
    struct gw_delivery *deliveries; /* unsettled (utlist DL) */
    uint64_t inflight;
    char client_name[64];
    UT_hash_handle hh; /* broker->sessions by id */
};

/* A connection that joined a session: conn id -> (session, stream). */
struct gw_link {
    uint64_t conn_id;
    struct gw_session *session;
    uint16_t stream;
    UT_hash_handle hh;
};

/* ------------------------------------------------------------------------ */
/* The store and the broker                                                  */
/* ------------------------------------------------------------------------ */

struct gw_parked {
    int worker;
    uint64_t conn_id;
    uint64_t need; /* bytes of the PUT it waits to receive */
};

struct gw_store_counters {
    uint64_t payload_allocated; /* payload bytes ever admitted */
    uint64_t spilled_bytes, loaded_bytes;
    uint64_t spill_write_errors, spill_read_errors;
    uint64_t parked_total;    /* PUTs that had to wait for memory */
    uint64_t receiving_waits; /* of which for max_receiving */
};

/* A journal segment, as the store counts it. */
struct gw_segment {
    uint64_t seg;
    uint64_t bytes;          /* records in it */
    uint64_t live;           /* payloads whose data is in it */
    uint64_t live_bytes;     /* their bytes */
    struct gw_segment *next; /* oldest first */
};

struct gw_store {
    struct gw_pool pool;
    bool journal;                /* payloads may live in segments (a
                                    journal or a spill directory) */
    uint64_t j_active;           /* the segment being written */
    uint64_t j_bytes;            /* in all segments */
    struct gw_segment *segments; /* oldest first */
    struct gw_segment *segments_tail;
    uint64_t dropped_segments;
    bool restoring;         /* recovery: no segment is dropped yet */
    uint64_t moving;        /* payloads being moved by compaction */
    uint64_t disk_limit;    /* bytes of segments */
    uint64_t spill_bytes;   /* payload bytes in segments by spills */
    uint64_t mem_spilling;  /* pool bytes being written out */
    uint64_t receiving;     /* pool bytes of PUTs still being received */
    uint64_t max_receiving; /* ... at most, unless only one is */
    uint64_t resident;      /* payload bytes in memory */
    uint64_t next_payload_id;
    struct gw_payload *lru_head, *lru_tail;
    struct gw_payload *load_head, *load_tail; /* loads waiting for memory */
    struct gw_heap retries;                   /* loads after a read error */
    uint64_t write_retry_at;                  /* no spill before (backoff) */
    uint32_t write_backoff_ms;
    struct gw_parked *parked;
    size_t n_parked, cap_parked;
    struct gw_store_counters c;
};

/* A PUT_OK that waits for its MSG record (durable queues). */
struct gw_confirm {
    uint64_t seq; /* of the append */
    int worker;
    uint64_t conn_id, request_id, msg_id;
    bool reply; /* the producer asked for PUT_OK (CONFIRM) */
    struct gw_confirm *next;
};

struct gw_journal_counters {
    uint64_t appends, append_bytes, append_errors, syncs_waited;
    uint64_t recovered_messages, recovered_bytes, recovered_queues;
    uint64_t recovered_segments, truncated_bytes, dropped_segments;
    uint64_t compactions, moved_payloads, moved_bytes, move_errors;
};

struct gw_journal_state {
    bool on;                       /* a journal directory exists */
    enum gw_durability durability; /* of guaranteed queues */
    uint64_t seq;                  /* appends so far */
    uint64_t pending_bytes;        /* appended, not written yet */
    uint64_t next_qid;
    uint32_t compact_percent;  /* compact a segment below this live share */
    uint64_t compact_retry_at; /* no compaction before (after an error) */
    struct gw_confirm *confirms, *confirms_tail;
    struct gw_journal_counters c;
};

struct gw_broker {
    struct gw_broker_settings set;
    struct gw_queue *queues;
    struct gw_session *sessions;
    struct gw_link *links;
    struct gw_delivery *deliveries;
    struct gw_heap leases;  /* sent guaranteed deliveries by deadline */
    struct gw_heap delays;  /* delayed messages by ready time */
    struct gw_queue *dirty; /* queues to dispatch before the event returns */
    struct gw_store store;
    struct gw_actions *out; /* the current event's actions */
    uint64_t now;           /* the current event's time, ms */
    uint64_t next_msg_id, next_delivery_id;
    uint64_t settlements_ignored;
    bool draining; /* PUTs refused */
    struct gw_journal_state j;
};

/* Every event of the broker runs between these two: the clock and the
 * action list are set, and at the end the touched queues are dispatched
 * and the store spills ahead of need (broker.c). */
void gw_event_begin(struct gw_broker *b, uint64_t now, struct gw_actions *out);
void gw_event_end(struct gw_broker *b);

#endif /* SCIMQ_GATEWAY_RECORDS_H */
