/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The state of one client connection (a stream of a session), owned by one
 * worker: shared by conn.c (reading), request.c (frames) and conn_out.c
 * (writing).  Reads go through the SciMP decoder: headers via a staging
 * buffer, payloads straight into the message's final buffer (zero-copy).
 */
#ifndef SCIMQ_GATEWAY_CONNECTION_H
#define SCIMQ_GATEWAY_CONNECTION_H

#include <stdbool.h>
#include <stdint.h>

#include <uthash.h>
#include <uv.h>

#include "connreg.h"
#include "gateway.h"

struct gw_payload;
struct conn_batch;

/* What a connection needs of the worker that owns it. */
struct gw_conn_host {
    int index; /* the worker's */
    uv_loop_t *loop;
    struct gateway *gw;
    struct gw_conn *conns; /* by id (uthash) */
    /* Queued output went back under the cap (conn.c resumes reading):
     * called by the writing side, which does not call the reading one. */
    void (*output_drained)(struct gw_conn *c);
    /* Connections with output gathered this loop turn (conn_out.c), and
     * write batches kept for reuse. */
    struct gw_conn *dirty;
    struct conn_batch *spare;
    unsigned int n_spare;
    bool stopping; /* batches done from now on are freed, not kept */
};

enum gw_conn_phase {
    GW_CONN_HELLO, /* waiting for HELLO */
    GW_CONN_AUTH,  /* WELCOME sent, waiting for AUTH */
    GW_CONN_READY  /* authenticated member of a session */
};

struct gw_conn {
    uint64_t id;
    struct gw_conn_host *host;
    struct gateway *gw;
    /* TCP, or the admin socket (info.admin); both are streams, and the
     * handle is addressed as tcp everywhere the kind does not matter. */
    union {
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    };
    struct gw_conn_info info;
    scimq_proto_decoder_t *dec;
    enum gw_conn_phase phase;
    bool in_session; /* HELLO accepted: the broker knows this connection */
    uint8_t version; /* session protocol version */
    uint8_t nonce[SCIMQ_PROTO_NONCE_LEN];
    uint8_t session_id[SCIMQ_PROTO_SESSION_ID_LEN];
    void *pending_hello; /* with a token: the HELLO until AUTH (malloc) */
    /* TLS (NULL: plain): ciphertext is read into cipher and decrypted into
     * the stage, or straight into a payload's buffer. */
    struct scimq_tls *tls;
    uint8_t *cipher;

    uint8_t *stage; /* header bytes; payload bytes go elsewhere */
    size_t stage_len, stage_off;
    bool in_payload;
    struct gw_payload *pl; /* PUT payload being received */
    int put_err;           /* PUT refused at header time: reply at the end */

    bool reading, parked, closing, close_after_write;
    bool said_bye; /* the peer closed with BYE (not a loss) */
    unsigned int writes_pending;
    /* Frames gathered this loop turn, written in one go (conn_out.c). */
    struct conn_batch *out;
    struct gw_conn *dirty_next;
    bool dirty;
    /* Bytes of queued frames other than DELIVERs (whose bytes the broker
     * bounds by credit): past gw_options.max_output the peer is not read
     * (out_blocked) until they drain, and closed if they do not in time. */
    uint64_t out_queued;
    bool out_blocked;
    uint64_t out_blocked_ms;
    uint64_t accepted_ms, last_read_ms, frame_start_ms;
    /* Bytes read since frame_start_ms (the minimum rate); restarted when
     * the gateway itself held the frame up (parked, output blocked). */
    uint64_t frame_bytes;
    UT_hash_handle hh; /* host->conns by id */
};

/* Stops reading (back-pressure, a frame that ends the connection). */
static inline void
gw_conn_read_stop(struct gw_conn *c)
{
    if (c->reading) {
        uv_read_stop((uv_stream_t *) &c->tcp);
        c->reading = false;
    }
}

#endif /* SCIMQ_GATEWAY_CONNECTION_H */
