/* SPDX-License-Identifier: BSD-3-Clause */
/* What each frame of a connection asks for. */
#ifndef SCIMQ_GATEWAY_REQUEST_H
#define SCIMQ_GATEWAY_REQUEST_H

#include "connection.h"

/*
 * May c's session send a PUT with f's flags?  0, or SCIMQ_EPROTO_FLAGS for
 * BROADCAST on a session below version 4 (checked when the header is in,
 * so that the payload is discarded rather than admitted).
 */
int gw_request_put_flags(const struct gw_conn *c, const scimq_proto_frame_t *f);

/* One decoded frame. */
void gw_request_handle(struct gw_conn *c, const scimq_proto_frame_t *f);

#endif /* SCIMQ_GATEWAY_REQUEST_H */
