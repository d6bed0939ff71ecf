/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connections, as the worker sees them: accept, the broker's actions, the
 * timeouts and shutdown.  The rest of a connection lives in
 *   connection.h  its state, shared by the three files below
 *   conn.c        accept, read and decode, timeouts, actions (this API)
 *   request.c     what each frame asks for (request.h)
 *   conn_out.c    writing frames, failing and closing (conn_out.h)
 */
#ifndef SCIMQ_GATEWAY_CONN_H
#define SCIMQ_GATEWAY_CONN_H

#include <stdint.h>

#include "action.h"
#include "connection.h"

/* Accepts one connection from server: TCP, or the admin socket (admin). */
void gw_conn_accept(struct gw_conn_host *host, uv_stream_t *server, bool admin);
/* Carries out a broker action addressed to a connection of this host. */
void gw_conn_action(struct gw_conn_host *host, struct gw_action *a);
/* Queued output went back under the cap: reading resumes. */
void gw_conn_output_drained(struct gw_conn *c);
/* Enforces the HELLO and idle timeouts and samples every connection's
 * TCP_INFO for STATS (called every second). */
void gw_conn_check_timeouts(struct gw_conn_host *host, uint64_t now_ms);
/* Shutdown: BYE where it can be written at once, then close all. */
void gw_conn_close_all(struct gw_conn_host *host);

#endif /* SCIMQ_GATEWAY_CONN_H */
