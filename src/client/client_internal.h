/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libscimq internals, shared by the client modules:
 *
 *   client.c   the public API: runs in the caller's threads, encodes frames,
 *              posts operations to the I/O thread and waits for results;
 *   session.c  the I/O thread: command queue, routing of operations onto
 *              streams, replies, deadlines, reconnection and shutdown;
 *   conn.c     one stream: connect, handshake, zero-copy read, write;
 *   message.c  received messages: DELIVER -> scimq_message_t, the local
 *              FIFO, settlement and credit top-up.
 *
 * Threading: one mutex (c->lock) and one condition variable (c->cond)
 * protect everything the API threads and the I/O thread share (marked
 * "lock" below).  Everything marked "loop" belongs to the I/O thread alone.
 * Immutable fields are set by scimq_client_open() before the I/O thread
 * starts.
 */
#ifndef SCIMQ_CLIENT_INTERNAL_H
#define SCIMQ_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <uv.h>

#include <scimq/client.h>
#include <scimq/proto.h>

#include "common/tls.h"
#include "list.h"

/* Bytes of the staging buffer that receives frame headers. */
#define CLIENT_STAGE_LEN (16u << 10)
/* Period of the I/O thread's housekeeping timer (deadlines, stalls). */
#define CLIENT_TICK_MS 50u
/* First and largest pause between reconnection attempts of a stream. */
#define CLIENT_BACKOFF_MIN_MS 20u
#define CLIENT_BACKOFF_MAX_MS 1000u
/* How often an unconfirmed PUT is sent before it fails. */
#define CLIENT_PUT_MAX_SENDS 8u
/* Longest wait for the gateway's BYE answers when closing. */
#define CLIENT_BYE_WAIT_MS 2000u
/*
 * Request ids of GET frames carry this bit and the subscription id, so an
 * ERROR naming a GET (e.g. its queue was deleted) finds its subscription.
 * Every other request id comes from a counter that never reaches it.
 */
#define CLIENT_RID_SUB_BIT (UINT64_C(1) << 63)

enum op_kind {
    OP_OPEN,    /* connect the K streams */
    OP_CLOSE,   /* say BYE on every stream and stop the I/O thread */
    OP_REQUEST, /* one request waiting for OK, ERROR or PONG */
    OP_PUT,     /* a PUT with CONFIRM, sent again after a stream drop */
    OP_SEND     /* frames that have no reply (ACK, NACK, EXTEND, GET, BYE) */
};

/*
 * One operation: posted by an API thread (or made by the I/O thread),
 * routed onto a stream, completed by a reply, an error or a deadline.
 * A waited operation (open, close, request, PUT without free_fn) is freed
 * by the thread that waits for it; the others by the I/O thread.
 */
struct op {
    struct scimq_list link; /* loop: c->cmds, c->queued or s->inflight */
    struct op *hnext;       /* loop: chain of the pending-reply table */
    enum op_kind kind;
    uint64_t rid;       /* request id of the awaited reply (0: none) */
    uint64_t get_rid;   /* subscribe / limit: request id of the first frame */
    uint32_t get_rid_n; /* ... and how many consecutive ids (LIMIT, GET) */
    int prefer_stream;  /* stream to use when it is up (ping: 0), or -1 */

    /* The frame(s) on the wire: iovecs over mem and the caller's blocks. */
    struct iovec *iov;
    unsigned int iovcnt;
    uint8_t *mem;    /* encoded header bytes (and trailer) */
    uint8_t *cipher; /* TLS: the frames encrypted, while written */
    uint64_t frame_len;
    uv_write_t wreq;

    /* Loop state. */
    struct stream *stream; /* stream written on, while waiting for a reply */
    bool pending;          /* in the pending-reply table */
    bool writing;          /* uv_write() has not called back yet */
    bool orphaned;         /* its stream dropped while writing */
    bool replied;          /* the reply came before the write callback */
    int reply_rc;          /* ... and what it said */
    uint64_t reply_value;
    char *reply_json;
    uint32_t sends;       /* PUT: times written */
    uint32_t bye_refunds; /* PUT: sends not counted (gateway BYE) */
    uint64_t deadline_ns; /* uv_hrtime() clock; 0: none */

    /* PUT. */
    scimq_free_fn free_fn; /* NULL: a caller waits (synchronous PUT) */
    void *free_arg;

    /* Result (lock). */
    int rc;
    uint64_t value;
    char *json;
    bool done;      /* the waiter may take the result */
    bool waited;    /* a caller waits for it and frees it */
    bool abandoned; /* the waiter gave up: the I/O thread frees it */
};

enum stream_state {
    SS_IDLE,       /* no socket; not started yet */
    SS_CONNECTING, /* TCP connect in progress */
    SS_HELLO,      /* HELLO sent, waiting for WELCOME */
    SS_AUTH,       /* AUTH sent, waiting for OK */
    SS_UP,         /* usable */
    SS_BYE,        /* BYE sent, waiting for the answer or EOF */
    SS_CLOSING,    /* uv_close() called, waiting for its callback */
    SS_WAIT,       /* socket closed, waiting to reconnect */
    SS_DEAD        /* given up (reconnect_ms exceeded, or shutting down) */
};

/* One TCP stream of the session (loop). */
struct stream {
    struct scimq_client *c;
    uint16_t index;
    enum stream_state state;
    /* TCP, or a Unix-domain socket (a "unix:PATH" URL: the gateway's admin
     * socket); addressed as tcp wherever the kind does not matter. */
    union {
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    };
    uv_connect_t creq;
    uv_timer_t timer; /* connect+handshake timeout, then reconnect backoff */
    int last_err;

    /* Reading. */
    scimq_proto_decoder_t *dec;
    bool direct;     /* the last buffer handed to libuv was the decoder's */
    bool rx_payload; /* the decoder waits for payload (or trailer) bytes */
    void *rx_buf;    /* payload destination of the frame being read */
    void *rx_ctx;    /* its payload_alloc context */
    bool rx_user;    /* rx_buf came from opts.payload_alloc */
    int rx_drop_rc;  /* DELIVER payload could not be allocated: NACK it */
    uint8_t stage[CLIENT_STAGE_LEN];
    /* TLS (scimqs://; NULL: plain): ciphertext is read into cipher and
     * decrypted into the stage, or straight into a payload's buffer. */
    struct scimq_tls *tls;
    uint8_t *cipher;

    /* Handshake. */
    uint64_t hello_rid, auth_rid, bye_rid;
    uint8_t hello_sid[SCIMQ_PROTO_SESSION_ID_LEN]; /* session the HELLO named */
    uint64_t bye_deadline_ns;                      /* SS_BYE: close by then */
    size_t addr_idx; /* address tried by the current connect */

    /* Reconnection. */
    atomic_uint gen;        /* +1 each time the connection is lost */
    uint64_t down_since_ns; /* 0 while up */
    uint32_t backoff_ms;

    /* Writing. */
    struct scimq_list inflight; /* ops written here, waiting for a reply */
    /* Ops gathered for this stream's next write (plain TCP): written in
     * one writev per loop turn, or once client_coalesce_us have passed
     * since the first of them (conn.c). */
    struct op **outq;
    size_t outq_n, outq_cap;
    uint64_t outq_bytes;
    uint64_t outq_since_ns;
    uint64_t unconfirmed; /* PUT bytes waiting for PUT_OK here */
};

/*
 * A subscription (lock): the credit window the library keeps topped up.
 * When the window shrinks the difference is a debt that swallows the next
 * top-ups, since credit already granted cannot be taken back.
 */
struct sub {
    struct scimq_list link;
    char *queue;
    uint32_t id;
    uint32_t get_seq;
    uint32_t window_msgs;
    uint64_t window_bytes;
    uint32_t debt_msgs;
    uint64_t debt_bytes;
    bool eos; /* EOS received: closed and drained */
    int err;  /* the gateway failed a GET for it (queue deleted) */
    /* Session version 3: credit given back by settlements gathered since
     * the I/O thread last sent them, as one GET (see c->acks). */
    uint32_t topup_msgs;
    uint64_t topup_bytes;
    /*
     * Lease keeping: the queue's ack timeout (0: unknown, or best-effort:
     * nothing to keep) and its unsettled deliveries (struct msg.hold_link)
     * in the order of their next extension, which is arrival order since
     * every one is extended by the same lease: the tick looks at the head.
     */
    uint32_t lease_ms;
    struct scimq_list held;
};

/*
 * The largest message a consumer takes from a queue (lock), set by
 * scimq_client_limit() and kept for the life of the handle.  On a session
 * of version 2 or later it is sent to the gateway (LIMIT) before the first
 * GET for the queue; the library also enforces it itself on every DELIVER,
 * which is all there is on a version-1 session.
 */
struct qlimit {
    struct scimq_list link;
    char *queue;
    uint64_t max_message; /* 0: no limit */
    uint64_t refused;     /* deliveries dead-lettered here for their size */
};

/* Received payloads kept for reuse (see message.c, "Payload buffers"). */
#define CLIENT_PAYLOAD_CACHE_N 32u

/*
 * What received messages need after their client is gone: the payload
 * release function.  Shared by the client and every message it handed
 * out, freed with the last of them.
 */
struct msg_ctx {
    atomic_uint refs;
    pthread_mutex_t lock;
    struct scimq_client *client; /* NULL once the client is closed */
    scimq_release_fn release;
    void *arg;
    /* Freed malloc payloads for the next DELIVERs (lock). */
    void *cache[CLIENT_PAYLOAD_CACHE_N];
    size_t cache_cap[CLIENT_PAYLOAD_CACHE_N];
    unsigned int cache_n;
    size_t cache_bytes;
};

/* A received message: the public part plus what settlement needs. */
struct msg {
    scimq_message_t pub;
    struct scimq_list link; /* c->fifo while not handed out */
    struct msg_ctx *ctx;
    atomic_bool credited;    /* settled or freed: credit already topped up */
    bool user_payload;       /* payload from opts.payload_alloc */
    uint32_t epoch;          /* c->epoch when it arrived */
    struct stream *stream;   /* the connection it came on ... */
    unsigned int stream_gen; /* ... and that connection's generation */
    /* Lease keeping (lock), see struct sub.held; times on uv_hrtime(). */
    struct scimq_list hold_link;
    bool held;             /* in its subscription's held list */
    bool lease_lost;       /* its connection was lost: requeued there */
    uint64_t arrived_ns;   /* DELIVER read */
    uint64_t extend_ns;    /* next EXTEND due */
    uint64_t lease_end_ns; /* lease end as far as known; 0: unknown */
};

struct scimq_client {
    /* Immutable after open. */
    scimq_client_options_t opts;
    char *client_name;
    char *congestion;
    uint8_t *token;
    size_t token_len;
    scimq_tls_ctx_t *tls_ctx; /* scimqs://: the streams speak TLS */
    char tls_host[256];       /* the name the certificate must carry */
    struct sockaddr_storage *addrs;
    socklen_t *addr_lens;
    size_t naddrs;
    scimq_proto_limits_t limits;
    bool datasum;
    struct msg_ctx *mctx;

    /* Shared (lock). */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct scimq_list cmds; /* ops posted to the I/O thread */
    struct scimq_list fifo; /* received messages not yet taken */
    struct scimq_list subs;
    struct scimq_list qlimits; /* struct qlimit */
    uint32_t next_sub_id;
    uint32_t puts_inflight; /* PUTs posted and not completed */
    int async_err;          /* first failure of a PUT with free_fn */
    int dead;               /* 0, or why the session is lost for good */
    bool loop_stopped;      /* the wakeup handle is closed: post no more */
    uint64_t max_payload;   /* smallest WELCOME max_payload */
    uint8_t version;        /* session version of the session; 0: none yet */
    uint32_t epoch;         /* bumped when a new session replaces a lost one */
    atomic_uint_fast64_t next_rid;
    /* Session version 3: deliveries ACKed since the I/O thread last sent
     * them; it sends them as ACK_RANGE frames once per loop turn. */
    uint64_t *acks;
    size_t n_acks, acks_cap;
    uint64_t extends_sent; /* EXTENDs of auto_extend */
    uint64_t late_settles; /* ACK/NACK after the lease expired */

    /* Loop. */
    uv_loop_t loop;
    uv_async_t wakeup;
    uv_timer_t tick;
    /* Gathered writes go out before the loop polls and after it handled
     * I/O; the idle handle keeps it from blocking while a write waits for
     * company (client_coalesce_us). */
    uv_prepare_t flush_prepare;
    uv_check_t flush_check;
    uv_idle_t flush_idle;
    uint64_t coalesce_ns;
    pthread_t thread;
    struct stream *streams;
    uint16_t nstreams;
    uint8_t session_id[SCIMQ_PROTO_SESSION_ID_LEN];
    bool have_session;
    bool had_session;         /* a session existed before (renewal) */
    struct stream *creator;   /* the stream creating a session, if any */
    uint16_t rr;              /* round-robin start of stream selection */
    struct scimq_list queued; /* ops waiting for a usable stream */
    struct op **pending;      /* ops waiting for a reply, by request id */
    size_t pending_mask;
    struct op *open_op;  /* the OP_OPEN in progress */
    struct op *close_op; /* the OP_CLOSE in progress */
    bool opening;        /* connecting the K streams for the first time */
    bool stopping;       /* open failed or close called: no reconnection */
    int open_rc;
    bool finalized;
};

/* ---- client.c ----------------------------------------------------------- */

/* A fresh request id from the counter (never 0, never CLIENT_RID_SUB_BIT). */
uint64_t scimq__client_rid(struct scimq_client *c);

/*
 * Encodes control frames (no blocks) back to back into one op of the given
 * kind.  Returns 0 or a SCIMQ_E* code.
 */
int scimq__op_frames(enum op_kind kind, const scimq_proto_frame_t *frames,
                     size_t n, struct op **op_p);

/* Frees an op and whatever result it still holds. */
void scimq__op_free(struct op *op);

/*
 * Hands an op to the I/O thread.  Returns 0, or the session's error /
 * SCIMQ_ECANCELED when it can take no more (the op is then not posted and
 * still the caller's).
 */
int scimq__client_post(struct scimq_client *c, struct op *op);

/* ---- session.c ---------------------------------------------------------- */

/* The I/O thread. */
void *scimq__session_main(void *arg);

/* uv_async callback: takes the posted ops. */
void scimq__session_wakeup(uv_async_t *async);

/* uv_timer callback of c->tick. */
void scimq__session_tick(uv_timer_t *timer);

/* Routes an op onto a usable stream, or queues it until one is up. */
void scimq__session_submit(struct scimq_client *c, struct op *op);

/* Completes a waited or asynchronous op with a result. */
void scimq__session_complete(struct scimq_client *c, struct op *op, int rc,
                             uint64_t value, char *json);

/* Events from conn.c. */
void scimq__session_stream_up(struct scimq_client *c, struct stream *s);
void scimq__session_stream_down(struct scimq_client *c, struct stream *s,
                                int rc);
void scimq__session_stream_closed(struct scimq_client *c, struct stream *s);
void scimq__session_write_done(struct scimq_client *c, struct stream *s,
                               struct op *op, int status);
/*
 * No reply will come on s any more: its ops go elsewhere.  going_away: the
 * gateway said BYE on s.
 */
void scimq__session_stream_gone(struct scimq_client *c, struct stream *s,
                                bool going_away);
/* A new session replaced a lost one: renews the subscriptions' credit. */
void scimq__session_renewed(struct scimq_client *c);
/* A frame after the handshake.  Returns 0 or an error that drops s. */
int scimq__session_frame(struct scimq_client *c, struct stream *s,
                         const scimq_proto_frame_t *f);

/* ---- conn.c ------------------------------------------------------------- */

int scimq__conn_init(struct scimq_client *c, struct stream *s, uint16_t index);
void scimq__conn_fini(struct stream *s);
/* Starts a connection attempt (connect, then HELLO and AUTH). */
void scimq__conn_start(struct stream *s);
/* Drops the stream: closes the socket, hands its ops back to the session. */
void scimq__conn_fail(struct stream *s, int rc);
/*
 * Queues op's iovecs for s's next write (see struct stream.outq).  Returns
 * 0 or an error (s is then failed).
 */
int scimq__conn_write(struct stream *s, struct op *op);
/* Writes what every stream gathered (prepare/check/idle handles). */
void scimq__conn_flush_all(struct scimq_client *c, bool force);
/* Starts the flush handles of c's loop (unreferenced). */
void scimq__conn_flush_init(struct scimq_client *c);
/* Sends BYE and waits for the answer (close). */
void scimq__conn_bye(struct stream *s);
/* True when s has a socket (connecting, handshaking, up or closing). */
bool scimq__conn_has_socket(const struct stream *s);

/* ---- message.c ---------------------------------------------------------- */

int scimq__msg_ctx_create(scimq_release_fn release, void *arg,
                          struct scimq_client *c, struct msg_ctx **ctx_p);
/* Detaches the client (at close) and drops its reference. */
void scimq__msg_ctx_detach(struct msg_ctx *ctx);

/*
 * Chooses where a frame's payload goes (HEADER_READY): DELIVER payloads
 * into opts.payload_alloc or malloc memory, OK payloads (JSON) into malloc
 * memory with room for a NUL, anything else is discarded.
 */
int scimq__msg_payload_dest(struct scimq_client *c, struct stream *s,
                            const scimq_proto_frame_t *f);
/* Releases a payload destination that will not become a message. */
void scimq__msg_payload_drop(struct scimq_client *c, struct stream *s);

/* DELIVER: builds the message and appends it to the FIFO. */
int scimq__msg_deliver(struct scimq_client *c, struct stream *s,
                       const scimq_proto_frame_t *f);
/* A DELIVER cut short by a stream drop: its credit is given back. */
/* EOS for a queue. */
void scimq__msg_eos(struct scimq_client *c, const scimq_proto_frame_t *f);
/* ERROR naming a GET of subscription sub_id. */
void scimq__msg_get_error(struct scimq_client *c, uint32_t sub_id, int code);

/*
 * Lease keeping (lock not held): sends the EXTENDs that are due, drops
 * deliveries whose connection was lost or that were held longer than
 * max_hold_ms.  Called by the I/O thread's tick.
 */
void scimq__msg_extend_due(struct scimq_client *c, uint64_t now_ns);
/* Takes every delivery out of the held lists (close; lock not held). */
void scimq__msg_unhold_all(struct scimq_client *c);
/* Takes the deliveries of sub out of its held list (lock held). */
void scimq__sub_unhold(struct sub *sub);

/*
 * I/O thread: sends the ACKs and credit top-ups gathered since the last
 * call (session version 3) as ACK_RANGE frames and one GET per queue.
 */
void scimq__msg_flush_acks(struct scimq_client *c);
/* Frees the gathered ACKs (close; lock not held). */
void scimq__msg_acks_free(struct scimq_client *c);

/* Frees a message the caller never saw (no credit top-up). */
void scimq__msg_destroy(struct msg *m);
/* Close: NACK (requeue) and free every message still in the FIFO. */
void scimq__msg_nack_fifo(struct scimq_client *c);

/*
 * Settles a delivery: opcode ACK, NACK or EXTEND (0: none, only the credit
 * top-up of a message freed unsettled), plus a GET topping the credit up
 * when the message was not settled before.  Returns 0 or an error.
 */
int scimq__msg_settle(struct scimq_client *c, struct msg *m, int opcode,
                      int requeue, uint32_t ms);

/* Next GET (or LIMIT) request id of a subscription (lock held). */
uint64_t scimq__sub_rid(struct sub *sub);
/* The limit of a queue (lock held), or NULL. */
struct qlimit *scimq__qlimit_find(struct scimq_client *c, const char *queue,
                                  size_t len);
/*
 * Fills f with the LIMIT that must precede the first GET of sub in a
 * session (lock held): only when the session speaks version 2 or later and
 * the queue has a limit.  Returns false when none is to be sent.
 */
bool scimq__limit_frame(struct scimq_client *c, struct sub *sub,
                        scimq_proto_frame_t *f);
/* Subscription of a queue (lock held), or NULL. */
struct sub *scimq__sub_find(struct scimq_client *c, const char *queue,
                            size_t len);

#endif /* SCIMQ_CLIENT_INTERNAL_H */
