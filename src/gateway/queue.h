/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Queues and the messages in them: lookup, the ready / delayed / leased
 * lists, requeue and dead-lettering.  Nothing here dispatches: a queue
 * whose state changed is marked (gw_queue_touch) and the broker dispatches
 * every marked queue once, before the event returns.
 */
#ifndef SCIMQ_GATEWAY_QUEUE_H
#define SCIMQ_GATEWAY_QUEUE_H

#include "records.h"

/* Longest queue name. */
#define GW_QUEUE_NAME_MAX 255

/* Why a message left its queue through the dead-letter queue. */
enum gw_dead_reason {
    GW_DEAD_NACK,      /* NACK with requeue = 0 */
    GW_DEAD_ATTEMPTS,  /* max_attempts used up */
    GW_DEAD_TOO_LARGE, /* larger than the LIMIT of every consumer */
};

/* Queue names: 1..255 bytes, no control characters.  0 or SCIMQ_E*. */
int gw_queue_name_check(const scimq_proto_str_t *name);

struct gw_queue *gw_queue_find(struct gw_broker *b, const char *name,
                               size_t len);
struct gw_queue *gw_queue_find_str(struct gw_broker *b,
                                   const scimq_proto_str_t *s);

/* Marks q for dispatch (and the end-of-stream check) before the current
 * event returns. */
void gw_queue_touch(struct gw_broker *b, struct gw_queue *q);

/* Appends a new ready message for payload pl (takes a payload reference). */
struct gw_msg *gw_queue_append(struct gw_broker *b, struct gw_queue *q,
                               struct gw_payload *pl);
/* The same with a given id and attempt count (recovery). */
struct gw_msg *gw_queue_insert(struct gw_broker *b, struct gw_queue *q,
                               struct gw_payload *pl, uint64_t msg_id,
                               uint32_t attempt);
/* Takes m off the list of its state. */
void gw_queue_unlink(struct gw_queue *q, struct gw_msg *m);
/* Puts m (off every list) on q's leased list. */
void gw_queue_lease(struct gw_queue *q, struct gw_msg *m);
/* A message off every list leaves the gateway: its payload reference goes. */
void gw_queue_msg_free(struct gw_broker *b, struct gw_msg *m);

/*
 * A message off every list becomes ready again (at the front, it was
 * first), or delayed by delay_ms, or dead-lettered when its attempts are
 * used up.
 */
void gw_queue_requeue(struct gw_broker *b, struct gw_msg *m, uint32_t delay_ms);
/* A message off every list goes to its queue's dead-letter queue as a new
 * message there, or, without one, is dropped and counted. */
void gw_queue_dead_letter(struct gw_broker *b, struct gw_msg *m,
                          enum gw_dead_reason why);

/* Delayed messages whose time has come become ready. */
void gw_queue_delays_due(struct gw_broker *b);

/* May a PUT of len bytes go to q (and every queue bound to it)? */
int gw_queue_put_check(const struct gw_queue *q, uint64_t len);
/* A capped best-effort queue drops its oldest ready messages for len. */
void gw_queue_make_room(struct gw_broker *b, struct gw_queue *q, uint64_t len);

/* Closed and nothing left in it: end of stream for its consumers. */
static inline bool
gw_queue_drained(const struct gw_queue *q)
{
    return q->closed && q->n_ready == 0 && q->n_delayed == 0 &&
           q->n_leased == 0 && q->bc_msg == NULL;
}

#endif /* SCIMQ_GATEWAY_QUEUE_H */
