/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Journal compaction.  Segments are deleted oldest first, once nothing in
 * them is live (store.c: a later segment may hold the SETTLE of an older
 * MSG).  So one message that nobody consumes would keep every segment
 * written after it, until the disk limit stops the producers.  When the
 * oldest segment (not the one being written) holds live payloads of less
 * than compact_percent of its bytes, their MSG records are written again,
 * synced, at the end of the journal (durable.c, gw_durable_move; a spilled
 * payload of memory queues is spilled again, store.c); once all are in,
 * nothing in the old segment is live and it goes.  A payload that is not
 * in memory is read back first.  One segment is compacted at a time, with
 * a journal or a spill directory alike.
 */
#ifndef SCIMQ_GATEWAY_COMPACT_H
#define SCIMQ_GATEWAY_COMPACT_H

#include "records.h"

/* Starts compacting the oldest segment if it is due (once per event). */
void gw_compact_check(struct gw_broker *b);

/* pl was read back into memory: if compaction waits for it, move it. */
void gw_compact_loaded(struct gw_broker *b, struct gw_payload *pl);

#endif /* SCIMQ_GATEWAY_COMPACT_H */
