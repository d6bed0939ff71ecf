/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <string.h>

#include <scimq/error.h>

#include "common/auth.h"
#include "hub.h"
#include "stats.h"

void
gw_hub_init(struct gw_hub *h, struct gw_broker *b)
{
    memset(h, 0, sizeof(*h));
    pthread_mutex_init(&h->lock, NULL);
    h->broker = b;
}

void
gw_hub_destroy(struct gw_hub *h)
{
    pthread_mutex_destroy(&h->lock);
}

void
gw_hub_attach(struct gw_hub *h, struct gw_mailbox **mailboxes, int n)
{
    h->mailboxes = mailboxes;
    h->n_mailboxes = n;
}

static uint64_t
enter(struct gw_hub *h)
{
    uint64_t now = gw_now_ms();

    pthread_mutex_lock(&h->lock);
    return now;
}

static void
leave(struct gw_hub *h, int self, struct gw_actions *out)
{
    pthread_mutex_unlock(&h->lock);
    gw_hub_route(h, self, out);
}

/* An action nobody will carry out: what it holds goes back. */
static void
drop(struct gw_hub *h, struct gw_action *a, struct gw_actions *out)
{
    if (a->kind == GW_ACT_DELIVER) {
        uint64_t now = enter(h);

        gw_broker_written(h->broker, now, a->conn_id, a->payload, a->len, out);
        pthread_mutex_unlock(&h->lock);
    }
    gw_action_free(a);
}

void
gw_hub_route(struct gw_hub *h, int self, struct gw_actions *out)
{
    struct gw_action *a;

    while ((a = gw_actions_pop(out)) != NULL) {
        if (a->kind == GW_ACT_LOG) {
            gw_note_write(a);
            gw_action_free(a);
        } else if (GW_ACT_FOR_JOURNAL(a->kind) && h->journal != NULL) {
            gw_journal_submit(h->journal, a);
        } else if (GW_ACT_FOR_JOURNAL(a->kind)) {
            /* Only after the thread stopped, at exit: what the job holds
             * goes back. */
            if (a->kind == GW_ACT_JOURNAL_APPEND ||
                a->kind == GW_ACT_JOURNAL_READ)
                gw_hub_io_done(h, a, SCIMQ_ESHUTDOWN);
            gw_action_free(a);
        } else if (a->worker >= 0 && a->worker < h->n_mailboxes &&
                   (a->worker == self
                        ? gw_mailbox_defer(h->mailboxes[a->worker], a)
                        : gw_mailbox_post(h->mailboxes[a->worker], a))) {
            continue; /* the worker owns it now */
        } else {
            drop(h, a, out);
        }
    }
}

void
gw_hub_io_done(void *arg, struct gw_action *job, int rc)
{
    struct gw_hub *h = arg;
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);

    gw_broker_io_done(h->broker, now, job, rc, &out);
    leave(h, -1, &out);
}

int
gw_hub_hello(struct gw_hub *h, int self, uint64_t conn_id,
             const scimq_proto_frame_t *f, const uint8_t *new_id,
             uint8_t version, uint8_t *version_p,
             uint8_t sid_out[SCIMQ_PROTO_SESSION_ID_LEN])
{
    struct gw_actions out = {NULL, NULL};
    uint8_t drawn[SCIMQ_PROTO_SESSION_ID_LEN];
    uint64_t now;
    int rc;

    /* The broker makes no system call: the dice are thrown here. */
    if (new_id == NULL) {
        if (scimq__random_bytes(drawn, sizeof(drawn)) != 0)
            return SCIMQ_EIO;
        new_id = drawn;
    }
    now = enter(h);
    rc = gw_broker_hello(h->broker, now, conn_id, self, f, new_id, version,
                         version_p, sid_out, &out);
    leave(h, self, &out);
    return rc;
}

void
gw_hub_stream_down(struct gw_hub *h, int self, uint64_t conn_id, bool bye)
{
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);

    gw_broker_stream_down(h->broker, now, conn_id, bye, &out);
    leave(h, self, &out);
}

int
gw_hub_put_begin(struct gw_hub *h, int self, uint64_t conn_id,
                 const scimq_proto_frame_t *f, struct gw_payload **pl_p)
{
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);
    int rc = gw_broker_put_begin(h->broker, now, conn_id, self, f, pl_p, &out);

    leave(h, self, &out);
    return rc;
}

int
gw_hub_put_commit(struct gw_hub *h, int self, uint64_t conn_id,
                  const scimq_proto_frame_t *f, struct gw_payload *pl,
                  const uint32_t *data_crc, uint64_t *msg_id_p,
                  bool *deferred_p)
{
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);
    int rc = gw_broker_put_commit(h->broker, now, conn_id, self, f, pl,
                                  data_crc, msg_id_p, deferred_p, &out);

    leave(h, self, &out);
    return rc;
}

void
gw_hub_put_abort(struct gw_hub *h, int self, struct gw_payload *pl)
{
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);

    gw_broker_put_abort(h->broker, now, pl, &out);
    leave(h, self, &out);
}

void
gw_hub_unpark(struct gw_hub *h, uint64_t conn_id)
{
    pthread_mutex_lock(&h->lock);
    gw_broker_unpark(h->broker, conn_id);
    pthread_mutex_unlock(&h->lock);
}

int
gw_hub_get(struct gw_hub *h, int self, uint64_t conn_id,
           const scimq_proto_frame_t *f)
{
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);
    int rc = gw_broker_get(h->broker, now, conn_id, f, &out);

    leave(h, self, &out);
    return rc;
}

int
gw_hub_limit(struct gw_hub *h, int self, uint64_t conn_id,
             const scimq_proto_frame_t *f)
{
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);
    int rc = gw_broker_limit(h->broker, now, conn_id, f, &out);

    leave(h, self, &out);
    return rc;
}

bool
gw_hub_settle(struct gw_hub *h, int self, uint64_t conn_id,
              const scimq_proto_frame_t *f)
{
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);
    bool done = gw_broker_settle(h->broker, now, conn_id, f, &out);

    leave(h, self, &out);
    return done;
}

void
gw_hub_written(struct gw_hub *h, int self, uint64_t conn_id,
               struct gw_payload *pl, uint64_t bytes)
{
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);

    gw_broker_written(h->broker, now, conn_id, pl, bytes, &out);
    leave(h, self, &out);
}

void
gw_hub_tick(struct gw_hub *h, int self)
{
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);

    gw_broker_tick(h->broker, now, &out);
    leave(h, self, &out);
}

void
gw_hub_drain(struct gw_hub *h)
{
    pthread_mutex_lock(&h->lock);
    gw_broker_drain(h->broker);
    pthread_mutex_unlock(&h->lock);
}

uint64_t
gw_hub_leased(struct gw_hub *h)
{
    uint64_t n;

    pthread_mutex_lock(&h->lock);
    n = gw_broker_leased(h->broker);
    pthread_mutex_unlock(&h->lock);
    return n;
}

int
gw_hub_declare(struct gw_hub *h, int self, const scimq_proto_frame_t *f,
               uint64_t *created_p)
{
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);
    int rc = gw_broker_declare(h->broker, now, f, created_p, &out);

    leave(h, self, &out);
    return rc;
}

int
gw_hub_delete(struct gw_hub *h, int self, const scimq_proto_str_t *name,
              uint64_t *discarded_p)
{
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);
    int rc = gw_broker_delete(h->broker, now, name, discarded_p, &out);

    leave(h, self, &out);
    return rc;
}

int
gw_hub_bind(struct gw_hub *h, int self, const scimq_proto_str_t *queue,
            const scimq_proto_str_t *target, bool bind)
{
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);
    int rc = gw_broker_bind(h->broker, now, queue, target, bind, &out);

    leave(h, self, &out);
    return rc;
}

int
gw_hub_close_queue(struct gw_hub *h, int self, const scimq_proto_str_t *name)
{
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);
    int rc = gw_broker_close_queue(h->broker, now, name, &out);

    leave(h, self, &out);
    return rc;
}

int
gw_hub_move(struct gw_hub *h, int self, const scimq_proto_str_t *queue,
            const scimq_proto_str_t *target, uint64_t max, uint64_t *moved_p)
{
    struct gw_actions out = {NULL, NULL};
    uint64_t now = enter(h);
    int rc = gw_broker_move(h->broker, now, queue, target, max, moved_p, &out);

    leave(h, self, &out);
    return rc;
}

json_t *
gw_hub_queue_list(struct gw_hub *h, const scimq_proto_str_t *prefix,
                  uint64_t *count_p)
{
    struct gw_snapshot snap;
    json_t *doc;

    pthread_mutex_lock(&h->lock);
    gw_stats_snapshot(h->broker, GW_SNAP_PREFIX, prefix, &snap);
    pthread_mutex_unlock(&h->lock);
    doc = gw_stats_queues_json(&snap);
    *count_p = snap.n_queues;
    gw_snapshot_free(&snap);
    return doc;
}

void
gw_hub_stats(struct gw_hub *h, const scimq_proto_str_t *queue, json_t *root)
{
    struct gw_snapshot snap;

    pthread_mutex_lock(&h->lock);
    gw_stats_snapshot(h->broker, GW_SNAP_NAME, queue, &snap);
    pthread_mutex_unlock(&h->lock);
    gw_stats_broker_json(&snap, root);
    gw_snapshot_free(&snap);
}
