/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Spilling payloads to disk past the memory limit, and loading them back.
 * One thread does the (blocking) file I/O so that no event loop ever waits
 * on the disk; completions go back into the broker under gw->lock.
 * Lock order: gw->lock, then the spill queue lock.
 */
#ifndef SCIMQ_GATEWAY_SPILL_H
#define SCIMQ_GATEWAY_SPILL_H

#include "gateway.h"

enum gw_spill_op { GW_SPILL_WRITE, GW_SPILL_READ };

/* Creates the spill directory if needed and starts the thread.  With no
 * spill directory configured, gw->spill stays NULL (no spilling). */
int gw_spill_start(struct gateway *gw);

/* Finishes queued jobs and stops the thread. */
void gw_spill_stop(struct gateway *gw);

/* Frees the spill state (after gw_broker_fini() removed the files). */
void gw_spill_free(struct gateway *gw);

/* Queues a job (gw->lock held). */
void gw_spill_submit(struct gateway *gw, struct gw_payload *pl,
                     enum gw_spill_op op);

/* Removes a payload's spill file (gw->lock held). */
void gw_spill_unlink(struct gateway *gw, struct gw_payload *pl);

#endif /* SCIMQ_GATEWAY_SPILL_H */
