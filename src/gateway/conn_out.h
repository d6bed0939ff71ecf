/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Writing to a connection: frames, replies, deliveries; failing and
 * closing it.
 */
#ifndef SCIMQ_GATEWAY_CONN_OUT_H
#define SCIMQ_GATEWAY_CONN_OUT_H

#include <stdint.h>

#include <jansson.h>

#include "action.h"
#include "connection.h"

/*
 * Encodes f and queues it; a pinned payload is released when written.
 * Frames are gathered per connection and written by
 * gw_conn_flush_dirty() once per loop turn.
 */
int gw_conn_send(struct gw_conn *c, const scimq_proto_frame_t *f,
                 struct gw_payload *pinned, uint64_t pinned_len, void *owned);
void gw_conn_send_error(struct gw_conn *c, uint64_t request_id, int code,
                        const char *text);
/* OK(value); json (owned) becomes its "json" block. */
void gw_conn_send_ok(struct gw_conn *c, uint64_t request_id, uint64_t value,
                     char *json);
void gw_conn_send_json(struct gw_conn *c, uint64_t request_id, uint64_t value,
                       json_t *doc);
void gw_conn_send_deliver(struct gw_conn *c, struct gw_action *a);
/* Sends ERROR, then closes once it is written. */
void gw_conn_fail(struct gw_conn *c, uint64_t request_id, int code,
                  const char *text);
/* Closes (idempotent); freed once libuv is done with it. */
void gw_conn_close(struct gw_conn *c, const char *why);

/* Writes what every connection of host gathered: one writev each.  Run
 * by the worker before its loop polls and after it has handled I/O. */
void gw_conn_flush_dirty(struct gw_conn_host *host);
/* Shutdown: write batches are no longer kept for reuse. */
void gw_conn_host_out_fini(struct gw_conn_host *host);

/* TLS: sends the ciphertext waiting (handshake records, alerts). */
void gw_conn_tls_flush(struct gw_conn *c);

#endif /* SCIMQ_GATEWAY_CONN_OUT_H */
