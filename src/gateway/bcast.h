/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Control messages (PUT with SCIMQ_PROTO_F_BROADCAST, session version 4):
 * the copies of one control message, one per consumer, and their
 * bookkeeping.  The rules (doc/scimp.md, "Control messages"):
 *
 * - a control message waits at the head of its queue until every message
 *   put before it is settled (nothing leased or delayed is left);
 * - then it goes to every consumer of the queue whose session speaks
 *   version 4 or later, one copy each, and to each one that subscribes
 *   while copies are still unsettled (so that the consumers of a job that
 *   start one after the other all get a header already queued);
 *   consumers of older sessions never get it, and one that subscribes
 *   once every copy is settled does not either;
 * - messages put after it stay queued until every copy is settled; then
 *   it leaves the queue, acknowledged once.
 *
 * A copy NACKed with requeue, expired, or cut off with its stream goes
 * back to the same consumer (its NACK delay is not kept), until the
 * queue's max_attempts are used up; a copy rejected (NACK requeue=0), one
 * larger than its consumer's LIMIT and one whose consumer leaves counts
 * as settled: there is nobody else to give it to.
 *
 * This module keeps records only: dispatch.c decides when a broadcast
 * starts and hands the copies out, queue.c routes a copy's settlement
 * here, and nothing here calls back into either.
 */
#ifndef SCIMQ_GATEWAY_BCAST_H
#define SCIMQ_GATEWAY_BCAST_H

#include "records.h"

static inline bool
gw_bcast_is_copy(const struct gw_msg *m)
{
    return m->copy_of != NULL;
}

/* m, a control message at the head of its queue, goes out now. */
static inline bool
gw_bcast_is_control(const struct gw_msg *m)
{
    return m->payload->control && m->copy_of == NULL;
}

/* Starts the broadcast of control message m (off every list now): one
 * copy for each consumer of q whose session speaks version 4. */
void gw_bcast_begin(struct gw_queue *q, struct gw_msg *m);

/* Consumer c is new on q: a copy for it if q is broadcasting. */
void gw_bcast_consumer_joined(struct gw_queue *q, struct gw_consumer *c);

/* A waiting copy whose consumer can take it now (credit, a connected
 * stream), taken off the waiting list, or NULL.  Copies larger than their
 * consumer's LIMIT are settled on the way. */
struct gw_msg *gw_bcast_next_copy(struct gw_queue *q);

/* Every copy settled: the control message, which leaves the broadcast
 * (the caller frees it as acknowledged); otherwise NULL. */
struct gw_msg *gw_bcast_finished(struct gw_queue *q);

/* A copy, off every list, is settled: it is freed. */
void gw_bcast_copy_settled(struct gw_msg *copy);

/* A copy, off every list, goes back to wait for its consumer. */
void gw_bcast_copy_back(struct gw_msg *copy);

/* Consumer c (of a live queue) goes: its waiting copies are settled. */
void gw_bcast_consumer_gone(struct gw_consumer *c);

/* The queue goes (its leased copies are settled already): its waiting
 * copies are freed; returns the control message (for the caller to free)
 * or NULL. */
struct gw_msg *gw_bcast_drop(struct gw_queue *q);

#endif /* SCIMQ_GATEWAY_BCAST_H */
