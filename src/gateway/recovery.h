/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Recovery: on start with a journal directory, reads the queue topology
 * file and every segment, in order, and rebuilds the broker (restore.c):
 * queues, bindings and every message that was queued and not settled.
 * A record that is torn or damaged ends its segment: the file is cut
 * there (the bytes are counted and logged).  Payload bytes are streamed to
 * check their CRCs and never kept: memory holds only what describes them.
 */
#ifndef SCIMQ_GATEWAY_RECOVERY_H
#define SCIMQ_GATEWAY_RECOVERY_H

#include <stdint.h>

#include "action.h"
#include "broker.h"
#include "journal.h"

struct gw_recovery_report {
    uint64_t messages, bytes, segments, truncated_bytes;
    struct gw_journal_resume resume; /* where the journal goes on */
};

/*
 * Creates dir if needed and recovers what it holds into b.  Deletions of
 * empty segments are appended to out (to be carried out by the journal).
 * Returns 0 or a SCIMQ_E* code (an unreadable directory or topology file).
 */
int gw_recover(const char *dir, struct gw_broker *b, struct gw_actions *out,
               struct gw_recovery_report *rep);

#endif /* SCIMQ_GATEWAY_RECOVERY_H */
