/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The spill thread: blocking file work off the event loops.  It carries
 * out GW_ACT_SPILL_WRITE / _READ / _UNLINK actions in order and reports
 * each write and read through a callback on its own thread.  It knows
 * nothing of the broker: a job names its file by payload id and brings
 * its buffer.
 */
#ifndef SCIMQ_GATEWAY_SPILL_H
#define SCIMQ_GATEWAY_SPILL_H

#include "action.h"

struct gw_spill;

typedef void (*gw_spill_done_fn)(void *arg, struct gw_action *job, int rc);

/*
 * Creates dir if needed (it must then be writable), removes spill files a
 * gateway with the same PID left behind, and starts the thread.  Returns 0
 * or a SCIMQ_E* code.
 */
int gw_spill_start(const char *dir, gw_spill_done_fn done, void *arg,
                   struct gw_spill **sp_p);
/* Does the jobs queued so far, then stops the thread; the files of
 * payloads still held are removed. */
void gw_spill_stop(struct gw_spill *sp);

/* Queues a job (any thread); the spill thread owns it afterwards. */
void gw_spill_submit(struct gw_spill *sp, struct gw_action *job);

#endif /* SCIMQ_GATEWAY_SPILL_H */
