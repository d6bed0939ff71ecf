/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Dispatch: which consumer gets the next message of a queue, on which
 * stream, and the DELIVER and EOS actions that follow.
 *
 * A queue keeps its consumers that have message credit and a connected
 * stream on an active list served round robin, so the common case costs
 * O(1) per message: a consumer that is busy asks for less and so gets less.
 * A message goes to the session's stream with the fewest DELIVER bytes
 * still queued for writing, for best-effort and guaranteed queues alike.
 */
#ifndef SCIMQ_GATEWAY_DISPATCH_H
#define SCIMQ_GATEWAY_DISPATCH_H

#include "records.h"

/* Puts c on or off its queue's active list after its credit, its session's
 * streams or its queue changed. */
void gw_dispatch_consumer_update(struct gw_broker *b, struct gw_consumer *c);

/* Dispatches every queue marked with gw_queue_touch(), then sends EOS where
 * a marked queue is closed and drained. */
void gw_dispatch_pending(struct gw_broker *b);

/* Sends the deliveries that waited for their payload to be read back. */
void gw_dispatch_loaded(struct gw_broker *b, struct gw_payload *pl);

#endif /* SCIMQ_GATEWAY_DISPATCH_H */
