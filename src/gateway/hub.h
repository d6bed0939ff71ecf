/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hub: the one lock around the broker, and the carrying out of the
 * broker's actions once the lock is released.  Frames for a connection go
 * to its worker's mailbox (deferred to the next loop turn when the caller
 * is that worker), file work to the journal thread, log lines to the log.
 * An action nobody can take any more (its worker stopped) is dropped
 * here, and a dropped DELIVER gives its payload pin back.
 *
 * Every call takes `self`: the index of the calling worker, or -1 for
 * other threads (main, journal).
 */
#ifndef SCIMQ_GATEWAY_HUB_H
#define SCIMQ_GATEWAY_HUB_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "action.h"
#include "clock.h"
#include "broker.h"
#include "mailbox.h"
#include "journal.h"

struct gw_hub {
    pthread_mutex_t lock; /* the broker's state */
    struct gw_broker *broker;
    struct gw_mailbox **mailboxes; /* one per worker */
    int n_mailboxes;
    struct gw_journal *journal; /* NULL: no journal or spill directory */
};

void gw_hub_init(struct gw_hub *h, struct gw_broker *b);
void gw_hub_destroy(struct gw_hub *h);
/* Where worker actions go; set before the workers run. */
void gw_hub_attach(struct gw_hub *h, struct gw_mailbox **mailboxes, int n);

/* The journal thread's completion callback (gw_journal_done_fn); arg: the
 * hub. */
void gw_hub_io_done(void *arg, struct gw_action *job, int rc);

/* Runs a list of actions produced outside the hub (e.g. dropped ones). */
void gw_hub_route(struct gw_hub *h, int self, struct gw_actions *out);

/* Events: see broker.h for each. */
/* new_id: the id of a new session (NULL: one is drawn here). */
int gw_hub_hello(struct gw_hub *h, int self, uint64_t conn_id,
                 const scimq_proto_frame_t *f, const uint8_t *new_id,
                 uint8_t version, uint8_t *version_p,
                 uint8_t sid_out[SCIMQ_PROTO_SESSION_ID_LEN]);
void gw_hub_stream_down(struct gw_hub *h, int self, uint64_t conn_id, bool bye);
int gw_hub_put_begin(struct gw_hub *h, int self, uint64_t conn_id,
                     const scimq_proto_frame_t *f, struct gw_payload **pl_p);
int gw_hub_put_commit(struct gw_hub *h, int self, uint64_t conn_id,
                      const scimq_proto_frame_t *f, struct gw_payload *pl,
                      const uint32_t *data_crc, uint64_t *msg_id_p,
                      bool *deferred_p);
void gw_hub_put_abort(struct gw_hub *h, int self, struct gw_payload *pl);
void gw_hub_unpark(struct gw_hub *h, uint64_t conn_id);
int gw_hub_get(struct gw_hub *h, int self, uint64_t conn_id,
               const scimq_proto_frame_t *f);
int gw_hub_limit(struct gw_hub *h, int self, uint64_t conn_id,
                 const scimq_proto_frame_t *f);
bool gw_hub_settle(struct gw_hub *h, int self, uint64_t conn_id,
                   const scimq_proto_frame_t *f);
void gw_hub_written(struct gw_hub *h, int self, uint64_t conn_id,
                    struct gw_payload *pl, uint64_t bytes);
void gw_hub_tick(struct gw_hub *h, int self);
void gw_hub_drain(struct gw_hub *h);
uint64_t gw_hub_leased(struct gw_hub *h);

/* Administration. */
int gw_hub_declare(struct gw_hub *h, int self, const scimq_proto_frame_t *f,
                   uint64_t *created_p);
int gw_hub_delete(struct gw_hub *h, int self, const scimq_proto_str_t *name,
                  uint64_t *discarded_p);
int gw_hub_bind(struct gw_hub *h, int self, const scimq_proto_str_t *queue,
                const scimq_proto_str_t *target, bool bind);
int gw_hub_close_queue(struct gw_hub *h, int self,
                       const scimq_proto_str_t *name);
int gw_hub_move(struct gw_hub *h, int self, const scimq_proto_str_t *queue,
                const scimq_proto_str_t *target, uint64_t max,
                uint64_t *moved_p);

/* QUEUE_LIST document {"queues": [...]} of queues starting with prefix. */
json_t *gw_hub_queue_list(struct gw_hub *h, const scimq_proto_str_t *prefix,
                          uint64_t *count_p);
/* Adds the broker's part of STATS (queue: one queue, or all) to root. */
void gw_hub_stats(struct gw_hub *h, const scimq_proto_str_t *queue,
                  json_t *root);

#endif /* SCIMQ_GATEWAY_HUB_H */
