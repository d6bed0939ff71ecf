/* SPDX-License-Identifier: BSD-3-Clause */
/* What each frame of a connection asks for. */
#ifndef SCIMQ_GATEWAY_REQUEST_H
#define SCIMQ_GATEWAY_REQUEST_H

#include "connection.h"

/* One decoded frame. */
void gw_request_handle(struct gw_conn *c, const scimq_proto_frame_t *f);

#endif /* SCIMQ_GATEWAY_REQUEST_H */
