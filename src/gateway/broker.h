/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The broker: queue, lease, session and credit state, and nothing else.
 *
 * It takes events (a stream joins or leaves, PUT, GET, LIMIT, ACK / NACK /
 * EXTEND, a frame was written, a journal job finished, the timer, and the
 * administration requests) and answers with actions appended to `out`
 * (action.h).  It makes no system call, takes no lock and never calls a
 * worker or a connection: one thread at a time drives it (the hub holds a
 * lock around every call), and a unit test can drive it step by step with
 * its own clock.  `now` is CLOCK_MONOTONIC in milliseconds.
 *
 * Connections are named by their id; a connection belongs to a session
 * from its HELLO (gw_broker_hello) until gw_broker_stream_down().
 */
#ifndef SCIMQ_GATEWAY_BROKER_H
#define SCIMQ_GATEWAY_BROKER_H

#include <stdbool.h>
#include <stdint.h>

#include <scimq/proto.h>

#include "action.h"

struct gw_broker;
struct gw_payload;

struct gw_broker_settings {
    uint32_t ack_timeout_ms;  /* lease of queues declared without one */
    uint64_t memory_limit;    /* payload memory (the pool) */
    uint64_t chunk_size;      /* pool chunk, a power of two */
    bool spill;               /* a spill directory exists (no journal) */
    uint64_t disk_limit;      /* bytes of journal or spill segments */
    bool journal;             /* a journal directory exists */
    uint8_t durability;       /* of guaranteed queues (enum gw_durability) */
    uint32_t compact_percent; /* compact.h; 0: never */
    uint64_t max_receiving;   /* pool bytes of PUTs being received; 0: half */
};

/* Returns 0 or SCIMQ_ENOMEM / SCIMQ_EINVAL (bad pool geometry). */
int gw_broker_new(const struct gw_broker_settings *set, struct gw_broker **b_p);
/* Frees every record; segments are not removed (the caller's job). */
void gw_broker_free(struct gw_broker *b);
/* Starts pre-faulting the payload memory (a thread of the pool's). */
int gw_broker_prefault(struct gw_broker *b);

/*
 * HELLO: creates a session (all-zero session id in the frame; it gets
 * new_id, which the caller drew at random) or joins stream stream_index of
 * an existing one.  version is the session protocol version chosen for a
 * new session; *version_p returns the session's.  On success sid_out holds
 * the session id.  Errors: SCIMQ_ENOENT (unknown session), SCIMQ_EBUSY
 * (stream in use), SCIMQ_EINVAL (stream count differs or too large),
 * SCIMQ_EPROTO_VERSION (the session speaks another version).
 */
int gw_broker_hello(struct gw_broker *b, uint64_t now, uint64_t conn_id,
                    int worker, const scimq_proto_frame_t *hello,
                    const uint8_t new_id[SCIMQ_PROTO_SESSION_ID_LEN],
                    uint8_t version, uint8_t *version_p,
                    uint8_t sid_out[SCIMQ_PROTO_SESSION_ID_LEN],
                    struct gw_actions *out);

/*
 * A stream's connection closed: what was in flight on it goes back (with
 * its credit), unless the client said BYE on it (bye): a client that
 * closes its session says BYE on each stream, and may still acknowledge on
 * another stream what it received on this one; its unsettled deliveries
 * go back when the session ends.  The session ends with its last stream.
 */
void gw_broker_stream_down(struct gw_broker *b, uint64_t now, uint64_t conn_id,
                           bool bye, struct gw_actions *out);

/*
 * PUT, header in: checks the queue and admits the payload.  Returns 0 and a
 * payload (pinned by the connection) whose data receives the frame's
 * payload; SCIMQ_EAGAIN when it does not fit now (the connection is parked
 * and gets GW_ACT_RESUME later); SCIMQ_ENOENT, SCIMQ_ECLOSED,
 * SCIMQ_EMSGSIZE (larger than a queue's max_bytes or the memory limit),
 * SCIMQ_ENOSPC, SCIMQ_ESHUTDOWN (draining), SCIMQ_EINVAL, SCIMQ_ESTATE.
 */
int gw_broker_put_begin(struct gw_broker *b, uint64_t now, uint64_t conn_id,
                        int worker, const scimq_proto_frame_t *f,
                        struct gw_payload **pl_p, struct gw_actions *out);
/*
 * Payload received: queues the message (and its bound copies); the
 * connection's pin ends, whatever the result.  data_crc: the CRC32C of its
 * bytes when the decoder took it (NULL: it did not), for the journal.
 * *deferred_p is set when the PUT_OK waits for the journal: the broker
 * emits it (GW_ACT_PUT_OK), or an ERROR, for conn_id on worker later;
 * otherwise the caller confirms.
 */
int gw_broker_put_commit(struct gw_broker *b, uint64_t now, uint64_t conn_id,
                         int worker, const scimq_proto_frame_t *f,
                         struct gw_payload *pl, const uint32_t *data_crc,
                         uint64_t *msg_id_p, bool *deferred_p,
                         struct gw_actions *out);
/* The frame failed or its connection closed before the payload was in. */
void gw_broker_put_abort(struct gw_broker *b, uint64_t now,
                         struct gw_payload *pl, struct gw_actions *out);
/* A parked connection went away. */
void gw_broker_unpark(struct gw_broker *b, uint64_t conn_id);

/* GET: adds credit.  0, SCIMQ_ENOENT, SCIMQ_EINVAL, SCIMQ_ESTATE. */
int gw_broker_get(struct gw_broker *b, uint64_t now, uint64_t conn_id,
                  const scimq_proto_frame_t *f, struct gw_actions *out);
/* LIMIT (session version 2).  0, SCIMQ_ENOENT, SCIMQ_EINVAL, SCIMQ_ESTATE. */
int gw_broker_limit(struct gw_broker *b, uint64_t now, uint64_t conn_id,
                    const scimq_proto_frame_t *f, struct gw_actions *out);
/* ACK, NACK, EXTEND.  Returns false when the settlement was ignored
 * (unknown, settled or expired delivery, another session's, best-effort). */
bool gw_broker_settle(struct gw_broker *b, uint64_t now, uint64_t conn_id,
                      const scimq_proto_frame_t *f, struct gw_actions *out);

/* A DELIVER action's frame was written, failed or dropped: its pin ends. */
void gw_broker_written(struct gw_broker *b, uint64_t now, uint64_t conn_id,
                       struct gw_payload *pl, uint64_t bytes,
                       struct gw_actions *out);

/* A GW_ACT_JOURNAL_APPEND / _READ action finished with rc. */
void gw_broker_io_done(struct gw_broker *b, uint64_t now,
                       const struct gw_action *job, int rc,
                       struct gw_actions *out);

/* Deadlines: leases, delayed messages, spill retries. */
void gw_broker_tick(struct gw_broker *b, uint64_t now, struct gw_actions *out);

/* Draining: PUTs are refused from now on. */
void gw_broker_drain(struct gw_broker *b);
/* Guaranteed messages handed out and not settled, all queues. */
uint64_t gw_broker_leased(const struct gw_broker *b);

/* Administration (admin.c). */
int gw_broker_declare(struct gw_broker *b, uint64_t now,
                      const scimq_proto_frame_t *f, uint64_t *created_p,
                      struct gw_actions *out);
int gw_broker_delete(struct gw_broker *b, uint64_t now,
                     const scimq_proto_str_t *name, uint64_t *discarded_p,
                     struct gw_actions *out);
int gw_broker_bind(struct gw_broker *b, uint64_t now,
                   const scimq_proto_str_t *queue,
                   const scimq_proto_str_t *target, bool bind,
                   struct gw_actions *out);
int gw_broker_close_queue(struct gw_broker *b, uint64_t now,
                          const scimq_proto_str_t *name,
                          struct gw_actions *out);
int gw_broker_move(struct gw_broker *b, uint64_t now,
                   const scimq_proto_str_t *queue,
                   const scimq_proto_str_t *target, uint64_t max,
                   uint64_t *moved_p, struct gw_actions *out);

/* ------------------------------------------------------------------------ */
/* Recovery (restore.c): the journal's contents, before the gateway serves.  */
/* ------------------------------------------------------------------------ */

struct gw_restored_queue {
    uint64_t qid;
    const char *name, *dead_letter;
    int kind;
    uint32_t ack_timeout_ms, max_attempts;
    uint64_t max_bytes;
    bool closed;
    uint8_t durability;
};

struct gw_restored_block {
    const char *name;
    uint32_t name_len;
    uint64_t len;
};

struct gw_restored_segment {
    uint64_t seg, bytes;
};

struct gw_restore_totals {
    uint64_t next_qid, next_msg_id, next_payload_id;
    const struct gw_restored_segment *segments; /* every segment, in order */
    uint64_t n_segments;
    uint64_t first_new_segment; /* where new records go */
    uint64_t truncated_bytes;
    bool rewrite_topology; /* the file is of an older format */
};

/* Between these two, the restore calls; out gets the deletions of the
 * segments that hold nothing live. */
void gw_broker_restore_begin(struct gw_broker *b, struct gw_actions *out);
void gw_broker_restore_end(struct gw_broker *b,
                           const struct gw_restore_totals *t);
int gw_broker_restore_queue(struct gw_broker *b,
                            const struct gw_restored_queue *q);
int gw_broker_restore_binding(struct gw_broker *b, uint64_t qid,
                              uint64_t target);
bool gw_broker_restore_has_queue(struct gw_broker *b, uint64_t qid);
/* A payload of live messages; its bytes stay in segment seg at off.
 * control: a control message's (bcast.h). */
struct gw_payload *
gw_broker_restore_payload(struct gw_broker *b, uint64_t payload_id,
                          const struct gw_restored_block *blocks,
                          uint32_t block_count, uint64_t len, uint64_t seg,
                          uint64_t off, bool control);
/* A ready message of queue qid (call in message-id order per queue). */
int gw_broker_restore_msg(struct gw_broker *b, uint64_t qid, uint64_t msg_id,
                          struct gw_payload *pl, uint32_t attempt);

#endif /* SCIMQ_GATEWAY_BROKER_H */
