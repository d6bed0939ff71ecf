/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * \file client.h
 * libscimq, the SciMQ client library: producers and consumers of a
 * scimq-gateway, over K parallel TCP streams (one SciMP session).
 *
 * The API is blocking and the handle is thread-safe: any number of threads
 * may put, get, ack and manage queues through one handle at the same time.
 * A background I/O thread per handle drives the K streams, so a message
 * goes out on whichever stream is free (parallel dispatch) and one slow
 * stream does not stall the others.  A stream that drops is reconnected
 * (same session id and stream index); messages that were not yet confirmed
 * on it are sent again, so no confirmed message is ever lost and an
 * unconfirmed one is at worst duplicated.
 *
 * A gateway that shuts down says BYE on every stream: the library answers
 * it and treats it as a cut of that stream (the gateway is going away, try
 * again later).  Replies still due on the stream are not awaited there:
 * unconfirmed PUTs are sent again on another stream or after reconnecting,
 * queue-management requests in flight fail with SCIMQ_ECONNRESET, and
 * confirmed messages stay confirmed.  Reconnecting goes on, with backoff,
 * for reconnect_ms.
 *
 * The library speaks SciMP session versions 1 and 2 (SCIMQ_PROTO_SESSION_
 * VERSION_MIN..MAX in scimq/proto.h) and uses what the gateway chooses; see
 * scimq_client_session_version().
 *
 * Lifecycle: scimq_client_open() / scimq_client_close().
 */
#ifndef SCIMQ_CLIENT_H
#define SCIMQ_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <scimq/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque client handle: one session of K streams to one gateway. */
typedef struct scimq_client scimq_client_t;

/** Releases a buffer that was handed to the library (see put). */
typedef void (*scimq_free_fn)(void *free_arg);

/**
 * Optional payload allocator for received messages, so that payloads land
 * straight in memory the caller chose (e.g. a registered buffer pool).
 * alloc returns 0 and a buffer of at least len bytes plus an opaque
 * per-buffer context, or a negative SCIMQ_E* code: SCIMQ_EMSGSIZE says the
 * message can never fit (it is given back with NACK requeue=0, i.e.
 * dead-lettered, since requeueing would only bring it back; state the limit
 * with scimq_client_limit() so that it is not even sent); any other code is
 * taken as "not now" (NACK requeue after a short delay).  release gives it
 * back.
 * alloc is called from the library's I/O thread and must not block long;
 * release from the I/O thread or from the thread that calls
 * scimq_message_free() (which may come after scimq_client_close()).
 */
typedef int (*scimq_alloc_fn)(void *arg, uint64_t len, void **buf_p,
                              void **ctx_p);
typedef void (*scimq_release_fn)(void *arg, void *buf, void *ctx);

/** Connection options; fill with scimq_client_options_default(). */
typedef struct scimq_client_options {
    uint32_t streams;            /**< K parallel TCP streams (1..64); 1 */
    const char *token_file;      /**< shared secret; NULL: $SCIMQ_TOKEN_FILE */
    const char *client_name;     /**< shown in gateway stats; "libscimq" */
    uint32_t confirm_window;     /**< unconfirmed PUTs in flight; 64 */
    uint32_t connect_timeout_ms; /**< per connection attempt; 10000 */
    uint32_t reconnect_ms; /**< give up reconnecting a stream after; 30000 */
    uint32_t request_timeout_ms;      /**< queue management replies; 30000 */
    uint64_t sndbuf, rcvbuf;          /**< socket buffers; 0: param table */
    const char *congestion;           /**< TCP_CONGESTION; NULL: param table */
    scimq_alloc_fn payload_alloc;     /**< NULL: malloc */
    scimq_release_fn payload_release; /**< NULL: free */
    void *alloc_arg;
    /**
     * Keep the leases of unsettled deliveries alive: from its arrival until
     * it is acked, nacked or freed, each guaranteed delivery is extended
     * (EXTEND, lease = the queue's ack timeout) every half ack timeout, so
     * work longer than the ack timeout is not delivered again.  The ack
     * timeout is learned from the gateway's STATS when a queue is
     * subscribed.  0: off (the default).
     */
    int auto_extend;
    /**
     * auto_extend stops for a delivery held longer than this (then its
     * lease runs out and it is delivered again: a hung consumer is still
     * bounded); 0: no limit.  Default 3600000 (one hour).
     */
    uint64_t max_hold_ms;
} scimq_client_options_t;

/** Fills opts with the defaults documented above. */
SCIMQ_EXPORT void scimq_client_options_default(scimq_client_options_t *opts);

/** One block of a message: an optional name and data. */
typedef struct scimq_block {
    const char *name; /**< NUL-terminated; NULL or "" for none */
    const void *data;
    uint64_t len;
} scimq_block_t;

/** Queue kinds, as in SciMP QUEUE_DECLARE. */
enum scimq_queue_kind {
    SCIMQ_QUEUE_GUARANTEED = 0, /**< kept until acknowledged */
    SCIMQ_QUEUE_BEST_EFFORT = 1 /**< removed once sent */
};

/**
 * When a guaranteed queue's PUT_OK is sent, as in SciMP QUEUE_DECLARE:
 * in the gateway's memory, written to its journal, or journaled and synced.
 */
enum scimq_durability {
    SCIMQ_DURABILITY_DEFAULT = 0, /**< the gateway's --durability */
    SCIMQ_DURABILITY_MEMORY = 1,
    SCIMQ_DURABILITY_BATCH = 2, /**< needs a gateway journal */
    SCIMQ_DURABILITY_SYNC = 3   /**< needs a gateway journal */
};

/** Queue settings; zero means the gateway default. */
typedef struct scimq_queue_options {
    enum scimq_queue_kind kind;
    uint32_t ack_timeout_ms;
    uint32_t max_attempts;            /**< then dead-lettered; 0: unlimited */
    uint64_t max_bytes;               /**< 0: unlimited */
    const char *dead_letter;          /**< NULL: none */
    enum scimq_durability durability; /**< guaranteed queues only */
} scimq_queue_options_t;

/** A received message.  Free with scimq_message_free(). */
typedef struct scimq_message {
    uint64_t delivery_id; /**< names the delivery in ack/nack/extend */
    uint64_t msg_id;
    uint32_t attempt; /**< 1 on first delivery */
    const char *queue;
    uint32_t block_count;
    const scimq_block_t *blocks; /**< data point into one payload buffer */
    void *payload; /**< the payload buffer (blocks back to back) */
    uint64_t payload_len;
    void *payload_ctx; /**< the payload_alloc context, if one was used */
    uint64_t flags;    /**< SCIMQ_MESSAGE_* */
} scimq_message_t;

/**
 * scimq_message_t.flags: a control message (sent with SCIMQ_PUT_CONTROL),
 * which the gateway hands to every consumer of its queue, in order with
 * the data messages, instead of to one of them.
 */
#define SCIMQ_MESSAGE_CONTROL (1ULL << 0)

/**
 * Connects K streams to a gateway and authenticates them.
 *
 * \param url    "scimq://HOST:PORT" (HOST may be a name, IPv4 or [IPv6]).
 * \param opts   options, or NULL for the defaults.
 * \param c_p    the new handle.
 * \return 0; SCIMQ_EINVAL (bad URL or options); SCIMQ_ECONNREFUSED,
 *         SCIMQ_ETIMEDOUT, SCIMQ_EHOSTUNREACH (cannot connect);
 *         SCIMQ_EAUTH (token rejected or missing); SCIMQ_EPROTO_VERSION
 *         (no common protocol version); SCIMQ_ENOMEM.
 */
SCIMQ_EXPORT SCIMQ_WARN_UNUSED_RESULT int
scimq_client_open(const char *url, const scimq_client_options_t *opts,
                  scimq_client_t **c_p);

/**
 * Waits for outstanding confirmations (as scimq_client_flush() with the
 * request timeout), returns unsettled deliveries to the gateway, says BYE
 * and frees the handle.  No other call on the handle may be in progress or
 * start once close begins.  Messages still held by the caller stay valid until
 * scimq_message_free().
 *
 * \return 0, or the first error of a PUT that was never confirmed.
 */
SCIMQ_EXPORT int scimq_client_close(scimq_client_t *c);

/* ------------------------------------------------------------------------ */
/* Producing                                                                 */
/* ------------------------------------------------------------------------ */

/**
 * Publishes one message (its blocks) to a queue and to the queues bound to
 * it.  The message goes out on the least busy stream.
 *
 * With free_fn == NULL the call returns once the gateway confirmed the
 * message (PUT_OK): the blocks are only borrowed for the call.
 * With free_fn != NULL the call returns as soon as the message is handed to
 * a stream (blocking only while confirm_window messages are unconfirmed);
 * on success the library owns the block buffers and calls
 * free_fn(free_arg) once the gateway confirmed the message (from the I/O
 * thread).  On failure the caller still owns them.  A confirmed failure
 * after return is reported by scimq_client_flush().
 *
 * There is no time limit: a full gateway back-pressures its producers
 * (stops reading their sockets) for as long as it must, and put waits.
 * Dead peers are detected by TCP (errors, keepalive after about a minute).
 * A message whose stream drops before its PUT_OK is sent again on the
 * next stream up (so it may arrive twice), up to 8 times in all: a message
 * whose every send is cut off (one that kills the gateway, say) then fails
 * with SCIMQ_ECONNRESET instead of going round for ever.
 *
 * \return 0; SCIMQ_ENOENT (no such queue), SCIMQ_ECLOSED (queue closed),
 *         SCIMQ_ENOSPC, SCIMQ_EMSGSIZE, SCIMQ_ECONNRESET (every stream lost
 *         and not reconnected, or 8 sends cut off), SCIMQ_ECANCELED (the
 *         handle is closing),
 *         SCIMQ_EINVAL, SCIMQ_ENOMEM.
 * \note free_fn runs on the library's I/O thread: it must not block nor
 *       call this client.
 */
SCIMQ_EXPORT int scimq_client_put(scimq_client_t *c, const char *queue,
                                  const scimq_block_t *blocks,
                                  uint32_t block_count, scimq_free_fn free_fn,
                                  void *free_arg);

/**
 * scimq_client_put_flags(): a control message, for every consumer (SciMP
 * BROADCAST, session version 4).  The gateway delivers it to each consumer
 * of the queue (and of each queue bound to it) whose session speaks
 * version 4, once every message put before it is settled, and holds the
 * messages put after it until every consumer has settled its copy.
 * Consumers of older sessions never see it; one that subscribes while
 * copies are still unsettled gets one too, one that subscribes after every
 * copy was settled does not.  Received, it has SCIMQ_MESSAGE_CONTROL in
 * scimq_message_t.flags.
 */
#define SCIMQ_PUT_CONTROL (1ULL << 0)

/**
 * scimq_client_put() with flags (SCIMQ_PUT_*; 0 is scimq_client_put()).
 *
 * \return as scimq_client_put(); SCIMQ_EINVAL (an unknown flag);
 *         SCIMQ_ENOTSUP (SCIMQ_PUT_CONTROL on a session below version 4:
 *         an older gateway, or proto_max_version set lower).
 */
SCIMQ_EXPORT int scimq_client_put_flags(scimq_client_t *c, const char *queue,
                                        const scimq_block_t *blocks,
                                        uint32_t block_count, uint64_t flags,
                                        scimq_free_fn free_fn, void *free_arg);

/**
 * Waits until every PUT is confirmed.
 *
 * \param timeout_ms  -1: no limit.
 * \return 0; SCIMQ_ETIMEDOUT; or the first error the gateway reported for
 *         an asynchronous PUT since the last flush.
 */
SCIMQ_EXPORT int scimq_client_flush(scimq_client_t *c, int timeout_ms);

/* ------------------------------------------------------------------------ */
/* Consuming                                                                 */
/* ------------------------------------------------------------------------ */

/**
 * Starts (or resizes) consuming from a queue with a credit window: at most
 * credit_msgs unsettled messages and about credit_bytes of payload are
 * outstanding at any time; the library tops the credit up as messages are
 * settled (ack/nack) or, if never settled (best-effort queues), freed with
 * scimq_message_free(): a DELIVER does not say which kind its queue is.
 *
 * \return 0; SCIMQ_ENOENT; SCIMQ_EINVAL (credit_msgs == 0).
 */
SCIMQ_EXPORT int scimq_client_subscribe(scimq_client_t *c, const char *queue,
                                        uint32_t credit_msgs,
                                        uint64_t credit_bytes);

/**
 * States the largest message (payload bytes) this consumer takes from a
 * queue; 0 lifts the limit.  Call it before scimq_client_subscribe() (or
 * later, to change it); it lasts for the life of the handle, across
 * reconnections.  scimq_client_get() never returns a larger message.
 *
 * Session version 2 (a gateway that knows SciMP LIMIT): the library sends
 * the limit before its first GET for the queue in each session (again when
 * a lost session is replaced by a new one), and at once when the queue is
 * already subscribed.  The gateway then never delivers a larger message to
 * this consumer; one that no consumer with credit can take goes to the
 * queue's dead-letter queue (dropped and counted without one).
 *
 * Session version 1 (an older gateway): nothing is sent, since that
 * gateway cannot be told.  The library itself gives each larger delivery
 * back with NACK requeue=0, never requeue=1, so the gateway dead-letters it
 * (or drops it) instead of sending it again and again; its payload is
 * discarded as it is read, never stored.  Unlike with version 2, such a
 * message is not left for another consumer that could take it.  The
 * first one per queue is logged as an error.
 *
 * \return 0; SCIMQ_ENOENT (version 2, subscribed, no such queue);
 *         SCIMQ_EINVAL; SCIMQ_ENOMEM; SCIMQ_ECONNRESET; SCIMQ_ECANCELED.
 */
SCIMQ_EXPORT int scimq_client_limit(scimq_client_t *c, const char *queue,
                                    uint64_t max_message);

/**
 * The SciMP session version of the handle's session (1 to 4), as the
 * gateway chose it in WELCOME; 0 if no session was ever established.
 */
SCIMQ_EXPORT unsigned int scimq_client_session_version(scimq_client_t *c);

/**
 * The largest message payload (bytes) the gateway accepts, as its WELCOME
 * said (the smallest over the handle's streams); 0 if no session was ever
 * established.
 */
SCIMQ_EXPORT uint64_t scimq_client_max_payload(scimq_client_t *c);

/**
 * Takes the next received message (from any subscribed queue).
 *
 * \param msg_p       the message; the caller owns it.
 * \param timeout_ms  0: do not wait; -1: no limit.
 * \return 0; SCIMQ_EAGAIN (timeout_ms == 0 and nothing there);
 *         SCIMQ_ETIMEDOUT; SCIMQ_EOS (every subscribed queue closed and
 *         drained; never without a subscription); SCIMQ_ECONNRESET; the
 *         error of a subscription (SCIMQ_ENOENT when its queue was
 *         deleted); SCIMQ_ECANCELED (the handle is closing).
 */
SCIMQ_EXPORT SCIMQ_WARN_UNUSED_RESULT int
scimq_client_get(scimq_client_t *c, scimq_message_t **msg_p, int timeout_ms);

/** Acknowledges a delivery: the gateway forgets the message. */
SCIMQ_EXPORT int scimq_client_ack(scimq_client_t *c,
                                  const scimq_message_t *msg);

/** Gives a delivery back: requeue (after delay_ms) or dead-letter it. */
SCIMQ_EXPORT int scimq_client_nack(scimq_client_t *c,
                                   const scimq_message_t *msg, int requeue,
                                   uint32_t delay_ms);

/** Extends the lease of a delivery by lease_ms (long tasks). */
SCIMQ_EXPORT int scimq_client_extend(scimq_client_t *c,
                                     const scimq_message_t *msg,
                                     uint32_t lease_ms);

/**
 * Lease counters of a handle: EXTENDs sent by auto_extend, and late
 * settlements: ACKs (or NACKs) of deliveries whose lease had already
 * expired as far as the library knows (its ack timeout passed without an
 * extension, or the connection it came on was lost), so that the gateway
 * has delivered or will deliver the message again.  Each late settlement
 * is also logged (WARN).  Either pointer may be NULL.
 */
SCIMQ_EXPORT int scimq_client_lease_counters(scimq_client_t *c,
                                             uint64_t *extends_p,
                                             uint64_t *late_p);

/**
 * Frees a message (its payload goes back to payload_release or free).
 * c may be NULL and the handle may already be closed: a message knows its
 * client.  While the client is open, freeing a message that was never
 * acked or nacked gives its credit back.
 */
SCIMQ_EXPORT void scimq_message_free(scimq_client_t *c, scimq_message_t *msg);

/* ------------------------------------------------------------------------ */
/* Queue management                                                          */
/* ------------------------------------------------------------------------ */

/** Creates a queue (0 if it exists with the same settings; SCIMQ_EEXIST if
 *  it exists with different ones). */
SCIMQ_EXPORT int scimq_client_queue_declare(scimq_client_t *c,
                                            const char *queue,
                                            const scimq_queue_options_t *opts);
SCIMQ_EXPORT int scimq_client_queue_delete(scimq_client_t *c, const char *queue,
                                           uint64_t *discarded_p);
/** PUTs to queue also land in target (fan-out, payload shared). */
SCIMQ_EXPORT int scimq_client_queue_bind(scimq_client_t *c, const char *queue,
                                         const char *target);
SCIMQ_EXPORT int scimq_client_queue_unbind(scimq_client_t *c, const char *queue,
                                           const char *target);
/** End of stream: no more PUTs; consumers get SCIMQ_EOS once drained. */
SCIMQ_EXPORT int scimq_client_queue_close(scimq_client_t *c, const char *queue);
/** Moves up to max_msgs (0: all) ready messages from queue to target. */
SCIMQ_EXPORT int scimq_client_queue_move(scimq_client_t *c, const char *queue,
                                         const char *target, uint64_t max_msgs,
                                         uint64_t *moved_p);
/** Lists queues whose name starts with prefix; *json_p is freed with free(). */
SCIMQ_EXPORT int scimq_client_queue_list(scimq_client_t *c, const char *prefix,
                                         char **json_p);
/** Gateway statistics (queue NULL: all) as JSON; free(*json_p). */
SCIMQ_EXPORT int scimq_client_stats(scimq_client_t *c, const char *queue,
                                    char **json_p);
/** Round trip time of a PING on stream 0. */
SCIMQ_EXPORT int scimq_client_ping(scimq_client_t *c, uint64_t *rtt_ns_p);

#ifdef __cplusplus
}
#endif

#endif /* SCIMQ_CLIENT_H */
