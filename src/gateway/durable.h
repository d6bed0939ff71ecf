/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the broker writes to the journal, and what it does when the journal
 * answers.  Messages of durable queues (durability batch or sync) get a MSG
 * record when they are put (one for every durable queue of a fan-out: the
 * payload is written once), an ATTEMPT record at each delivery, an ENQUEUE
 * record when they come in from another queue (dead-lettering, move) and a
 * SETTLE record when they leave.  The queue topology (queues, settings,
 * bindings, closed flags) goes to its own file whenever it changes.
 *
 * A PUT into a durable queue is confirmed (GW_ACT_PUT_OK) once its MSG
 * record is written (batch) or written and synced (sync); if the journal
 * fails, the producer gets an ERROR instead and the message stays queued
 * in memory only.
 */
#ifndef SCIMQ_GATEWAY_DURABLE_H
#define SCIMQ_GATEWAY_DURABLE_H

#include <jansson.h>

#include "records.h"

static inline bool
gw_durable_queue(const struct gw_queue *q)
{
    return q->durability != GW_DURABLE_MEMORY;
}

/*
 * A committed PUT: msgs[0..n) are its messages (the queue and its bound
 * targets).  Writes the MSG record of its durable ones.  Returns true when
 * the PUT_OK waits for the journal (then it, or an ERROR, is emitted later
 * for conn_id on worker when reply is set).
 */
bool gw_durable_put(struct gw_broker *b, struct gw_payload *pl,
                    struct gw_msg *const *msgs, size_t n, int worker,
                    uint64_t conn_id, uint64_t request_id, bool reply);
/*
 * Writes pl's MSG record again, for its messages now in durable queues
 * (with their attempts), synced; once it is in, the store counts pl in the
 * new segment (compaction, compact.h).  pl must be in memory and
 * pl->moving set.  False when none of its messages is durable any more.
 */
bool gw_durable_move(struct gw_broker *b, struct gw_payload *pl);
/* Would a PUT of len bytes to q (and its bound queues) take the journal
 * over the disk limit? */
bool gw_durable_journal_full(const struct gw_broker *b,
                             const struct gw_queue *q, uint64_t len);
/* m entered a durable queue from another one. */
void gw_durable_enqueue(struct gw_broker *b, const struct gw_msg *m);
/* m of a durable queue is delivered (its attempt count went up). */
void gw_durable_attempt(struct gw_broker *b, const struct gw_msg *m);
/* m leaves its durable queue. */
void gw_durable_settle(struct gw_broker *b, const struct gw_msg *m);
/* Queues, their settings or bindings changed: rewrite the topology file. */
void gw_durable_topology(struct gw_broker *b);
/* The topology as the file holds it (a new reference). */
json_t *gw_durable_topology_json(const struct gw_broker *b);

/* A GW_ACT_JOURNAL_APPEND finished with rc (seg and off filled in). */
void gw_durable_appended(struct gw_broker *b, const struct gw_action *job,
                         int rc);

#endif /* SCIMQ_GATEWAY_DURABLE_H */
