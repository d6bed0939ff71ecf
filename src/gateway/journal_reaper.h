/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The thread that deletes settled journal segments, in the order they are
 * handed to it.
 *
 * Deleting a segment is slow on a journalling file system: unlink() of a
 * 64 MiB segment that was written with space reserved ahead took 50-57 ms
 * on ext4 here (the extents are freed inside the call), and on the journal
 * thread it held up every append behind it (a quarter of the thread's time
 * at 16 MiB, K = 1).  Here it runs beside the writes.
 *
 * The order is kept (one thread, first in, first out): a segment is only
 * dropped once every older one is (store.c, segments_drop), because a
 * later segment may hold the SETTLE of a message whose record is in an
 * older one.  A segment whose deletion is still queued when the gateway
 * dies is simply met again by recovery, as one whose unlink() never ran.
 */
#ifndef SCIMQ_GATEWAY_JOURNAL_REAPER_H
#define SCIMQ_GATEWAY_JOURNAL_REAPER_H

#include <stdbool.h>

struct gw_jreaper;

/* Starts the thread.  Returns 0 or a SCIMQ_E* code. */
int gw_jreaper_start(struct gw_jreaper **r_p);
/* Queues the deletion of the file at path (copied).  Without memory for
 * the queue it waits for what is queued, then deletes the file itself:
 * the order holds either way. */
void gw_jreaper_delete(struct gw_jreaper *r, const char *path);
/* True when nothing is queued or being deleted: a segment may then leave
 * by other means (a rename, journal.c) without passing an older one. */
bool gw_jreaper_idle(struct gw_jreaper *r);
/* Deletes what is queued, then stops the thread. */
void gw_jreaper_stop(struct gw_jreaper *r);

#endif
