/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The broker: queues, messages, sessions, deliveries and payload memory.
 * Every function takes gw->lock itself (callers never hold it), except the
 * *_locked helpers used inside broker.c and spill.c.
 */
#ifndef SCIMQ_GATEWAY_BROKER_H
#define SCIMQ_GATEWAY_BROKER_H

#include <jansson.h>

#include "gateway.h"

/* Connection registry entry: what stats show about a connection. */
struct gw_conn_info {
    uint64_t id;
    int worker;
    char peer[64];
    bool loopback;
    struct gw_session *session; /* after HELLO */
    int stream;
    _Atomic uint64_t bytes_in, bytes_out, frames_in, frames_out;
    int sndbuf, rcvbuf;
    char congestion[16];
    int fd;
    UT_hash_handle hh;
};

int gw_broker_init(struct gateway *gw);
void gw_broker_fini(struct gateway *gw);

/* Connections (for stats). */
void gw_broker_conn_register(struct gateway *gw, struct gw_conn_info *ci);
void gw_broker_conn_unregister(struct gateway *gw, struct gw_conn_info *ci);

/*
 * HELLO: creates a session (all-zero id) or joins stream index of an
 * existing one.  On success *sid_out holds the session id.
 * Errors: SCIMQ_ENOENT (unknown session), SCIMQ_EBUSY (stream index in
 * use), SCIMQ_EINVAL (stream count differs), SCIMQ_ENOMEM.
 */
int gw_broker_hello(struct gateway *gw, struct gw_conn_info *ci,
                    const scimq_proto_frame_t *hello,
                    uint8_t sid_out[SCIMQ_PROTO_SESSION_ID_LEN]);

/* A stream closed: requeue what was in flight on it; end the session with
 * its last stream. */
void gw_broker_stream_closed(struct gateway *gw, struct gw_conn_info *ci);

/* Queue management; replies' values through the _p arguments. */
int gw_broker_declare(struct gateway *gw, const scimq_proto_frame_t *f,
                      uint64_t *created_p);
int gw_broker_delete(struct gateway *gw, const scimq_proto_str_t *name,
                     uint64_t *discarded_p);
int gw_broker_bind(struct gateway *gw, const scimq_proto_str_t *queue,
                   const scimq_proto_str_t *target, bool bind);
int gw_broker_close_queue(struct gateway *gw, const scimq_proto_str_t *name);
int gw_broker_move(struct gateway *gw, const scimq_proto_str_t *queue,
                   const scimq_proto_str_t *target, uint64_t max,
                   uint64_t *moved_p);
/* JSON documents (new references). */
json_t *gw_broker_list(struct gateway *gw, const scimq_proto_str_t *prefix,
                       uint64_t *count_p);
json_t *gw_broker_stats(struct gateway *gw, const scimq_proto_str_t *queue);

/*
 * PUT, header ready: checks the queue and reserves memory for the payload.
 * Returns 0 and a payload whose data buffer receives the frame's payload;
 * SCIMQ_EAGAIN when memory and disk are full (the connection is parked and
 * gets a resume action later); SCIMQ_ENOENT, SCIMQ_ECLOSED, SCIMQ_EMSGSIZE,
 * SCIMQ_ENOSPC, SCIMQ_ESHUTDOWN, SCIMQ_EINVAL, SCIMQ_ENOMEM.
 */
int gw_broker_put_begin(struct gateway *gw, struct gw_conn_info *ci,
                        const scimq_proto_frame_t *f, struct gw_payload **pl_p);
/* PUT complete: queues the message (and its bound copies). */
int gw_broker_put_commit(struct gateway *gw, const scimq_proto_frame_t *f,
                         struct gw_payload *pl, uint64_t *msg_id_p);
/* The frame failed or the connection closed before the payload arrived. */
void gw_broker_put_abort(struct gateway *gw, struct gw_payload *pl);
/* A parked connection went away. */
void gw_broker_unpark(struct gateway *gw, uint64_t conn_id);

/* Consumers. */
int gw_broker_get(struct gateway *gw, struct gw_conn_info *ci,
                  const scimq_proto_frame_t *f);
void gw_broker_settle(struct gateway *gw, struct gw_conn_info *ci,
                      const scimq_proto_frame_t *f);

/* A DELIVER frame was written (or dropped): release its payload pin. */
void gw_broker_unpin(struct gateway *gw, struct gw_payload *pl);

/* Periodic work: lease expiry, delayed messages, rates (worker 0). */
void gw_broker_tick(struct gateway *gw);

/* Number of leased (unsettled guaranteed) deliveries, for draining. */
uint64_t gw_broker_leased(struct gateway *gw);

/* Spill thread completions (spill.c), called with gw->lock held. */
void gw_broker_spilled_locked(struct gateway *gw, struct gw_payload *pl,
                              int rc);
void gw_broker_loaded_locked(struct gateway *gw, struct gw_payload *pl,
                             uint8_t *data, int rc);

#endif /* SCIMQ_GATEWAY_BROKER_H */
