/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Deliveries and their leases.  A delivery exists from the moment a
 * message is handed to a consumer until it is settled; a guaranteed one
 * whose DELIVER went out holds a lease in the broker's lease heap, so expiry
 * costs nothing until a deadline is due.
 */
#ifndef SCIMQ_GATEWAY_LEASE_H
#define SCIMQ_GATEWAY_LEASE_H

#include "records.h"

/* Hands ready message m to consumer c on stream: credit is consumed and
 * the message is leased.  The DELIVER is not sent yet (see dispatch). */
struct gw_delivery *gw_lease_begin(struct gw_broker *b, struct gw_consumer *c,
                                   struct gw_msg *m, uint16_t stream);

/* Its DELIVER went out: a guaranteed lease starts counting down; a
 * best-effort message is gone. */
void gw_lease_sent(struct gw_broker *b, struct gw_delivery *d);

/* Ends the lease accounting of d and frees it; the message, off every
 * list, belongs to the caller again (requeue, free, dead-letter). */
struct gw_msg *gw_lease_end(struct gw_broker *b, struct gw_delivery *d);

/* Ends d without acknowledgement: the message goes back to its queue. */
void gw_lease_unlease(struct gw_broker *b, struct gw_delivery *d,
                      uint32_t delay_ms);

struct gw_delivery *gw_lease_find(struct gw_broker *b, uint64_t id);

/* The lease of d ends lease_ms from now (0: the queue's ack timeout). */
void gw_lease_extend(struct gw_broker *b, struct gw_delivery *d,
                     uint32_t lease_ms);

/* Leases whose deadline passed: their messages are requeued. */
void gw_lease_expire_due(struct gw_broker *b);

#endif /* SCIMQ_GATEWAY_LEASE_H */
