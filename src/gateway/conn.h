/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One client connection (a stream of a session), owned by one worker.
 * Reads go through the SciMP decoder: headers via a small staging buffer,
 * payloads straight into the message's final buffer (zero-copy).
 */
#ifndef SCIMQ_GATEWAY_CONN_H
#define SCIMQ_GATEWAY_CONN_H

#include "broker.h"
#include "worker.h"

enum gw_conn_phase {
    GW_CONN_HELLO, /* waiting for HELLO */
    GW_CONN_AUTH,  /* WELCOME sent, waiting for AUTH */
    GW_CONN_READY  /* authenticated member of a session */
};

struct gw_conn {
    uint64_t id;
    struct gw_worker *w;
    struct gateway *gw;
    uv_tcp_t tcp;
    struct gw_conn_info info;
    scimq_proto_decoder_t *dec;
    enum gw_conn_phase phase;
    uint8_t nonce[SCIMQ_PROTO_NONCE_LEN];
    uint8_t session_id[SCIMQ_PROTO_SESSION_ID_LEN];

    uint8_t *stage; /* header bytes; payload bytes go elsewhere */
    size_t stage_len, stage_off;
    bool in_payload;
    struct gw_payload *pl; /* PUT payload being received */
    int put_err;           /* PUT refused at header time: reply at the end */

    bool reading, parked, closing, close_after_write;
    unsigned int writes_pending;
    uint64_t accepted_ms, last_read_ms, frame_start_ms;
    UT_hash_handle hh; /* worker->conns by id */
};

/* Accepts a connection from the worker's listener. */
void gw_conn_accept(struct gw_worker *w);

/* Runs an action addressed to a connection of this worker. */
void gw_conn_action(struct gw_worker *w, struct gw_action *a);

/* Closes a connection (idempotent); it is freed once libuv is done. */
void gw_conn_close(struct gw_conn *c, const char *why);

/* Enforces the HELLO and idle timeouts (called every second). */
void gw_conn_check_timeouts(struct gw_worker *w, uint64_t now_ms);

#endif /* SCIMQ_GATEWAY_CONN_H */
