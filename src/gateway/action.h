/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Actions: what the broker decided, as records.  The broker appends them
 * to a list while it handles an event; whoever called it (the hub) carries
 * them out after the broker's state is released: frames to write on a
 * worker's connection, producers to resume, file work for the journal
 * thread.  The broker itself never calls a worker, a connection or the
 * disk.
 */
#ifndef SCIMQ_GATEWAY_ACTION_H
#define SCIMQ_GATEWAY_ACTION_H

#include <stdbool.h>
#include <stdint.h>

#include "common/log.h"

struct gw_payload;

enum gw_action_kind {
    /* For a connection of a worker. */
    GW_ACT_DELIVER, /* write a DELIVER frame (payload pinned until written) */
    GW_ACT_EOS,     /* write an EOS frame */
    GW_ACT_ERROR,   /* write an ERROR frame (connection stays) */
    GW_ACT_RESUME,  /* a parked producer may retry its PUT */
    GW_ACT_PUT_OK,  /* write a PUT_OK frame (a journaled message) */
    /* For a worker itself. */
    GW_ACT_STOP_LISTEN, /* draining: accept no more connections */
    GW_ACT_STOP,        /* say BYE, close everything, leave the loop */
    /* For the journal thread. */
    GW_ACT_JOURNAL_APPEND,   /* append buf (a record header), then payload */
    GW_ACT_JOURNAL_READ,     /* read len bytes at (seg, off) into buf */
    GW_ACT_JOURNAL_DROP,     /* delete segment seg: nothing in it is live */
    GW_ACT_JOURNAL_TOPOLOGY, /* replace the queue topology file with text */
    /* For whoever carries the list out. */
    GW_ACT_LOG, /* a log line (code: level, attempt: subsystem) */
};

#define GW_ACT_FOR_JOURNAL(k)                                                  \
    ((k) >= GW_ACT_JOURNAL_APPEND && (k) <= GW_ACT_JOURNAL_TOPOLOGY)

struct gw_action {
    enum gw_action_kind kind;
    int worker; /* connection actions: the connection's worker */
    uint64_t conn_id;
    uint64_t request_id;
    uint64_t delivery_id, msg_id;
    uint32_t attempt;
    int code;                   /* ERROR */
    struct gw_payload *payload; /* DELIVER (pinned), JOURNAL_APPEND/READ */
    uint64_t payload_id;        /* JOURNAL_APPEND/READ: the payload's id */
    uint64_t len;               /* JOURNAL_APPEND/READ: payload bytes */
    uint8_t *buf;               /* JOURNAL_READ: pool memory to read into;
                                   JOURNAL_APPEND: the record header */
    uint32_t hdr_len;           /* JOURNAL_APPEND: bytes of buf */
    uint64_t seq;      /* JOURNAL_APPEND: order of appends (0: a spill) */
    bool sync;         /* JOURNAL_APPEND: synced before it completes */
    bool data_crc_ok;  /* JOURNAL_APPEND: data_crc is the data's CRC32C */
    uint32_t data_crc; /* (taken as the payload arrived) */
    bool spill;        /* JOURNAL_APPEND: a payload of memory queues written
                          out to free memory (no PUT_OK waits for it) */
    uint64_t seg, off; /* JOURNAL_*: segment and offset (APPEND: of the
                          data, filled in by the journal) */
    char *text;        /* DELIVER/EOS: queue name; ERROR: message (owned) */
    struct gw_action *next;
};

struct gw_actions {
    struct gw_action *head, *tail;
};

/* A zeroed action (never NULL: the daemon exits on OOM here). */
struct gw_action *gw_action_new(enum gw_action_kind kind);
void gw_action_free(struct gw_action *a);

/* Appends a to list. */
void gw_actions_push(struct gw_actions *list, struct gw_action *a);
/* Takes the first action off list, or NULL. */
struct gw_action *gw_actions_pop(struct gw_actions *list);
/* Appends all of from to list (from becomes empty). */
void gw_actions_splice(struct gw_actions *list, struct gw_actions *from);

/*
 * Log lines decided under the broker's state are written after it is
 * released (a write(2) is a system call): GW_NOTE() formats the line into a
 * GW_ACT_LOG action when the level is enabled; GW_NOTE_SPARSE() at most
 * once per interval_ms from that call site.
 */
void gw_note(struct gw_actions *out, int level, int subsys, const char *fmt,
             ...) __attribute__((format(printf, 4, 5)));

#define GW_NOTE(out, level, subsys, ...)                                       \
    do {                                                                       \
        if (scimq__log_enabled((level), SCIMQ_SUBSYS_##subsys))                \
            gw_note((out), (level), SCIMQ_SUBSYS_##subsys, __VA_ARGS__);       \
    } while (0)

#define GW_NOTE_SPARSE(out, level, subsys, interval_ms, ...)                   \
    do {                                                                       \
        static _Atomic uint64_t gw_note_last_;                                 \
        if (scimq__log_enabled((level), SCIMQ_SUBSYS_##subsys) &&              \
            scimq__log_sparse_ok(&gw_note_last_,                               \
                                 (uint64_t) (interval_ms) *1000000u))          \
            gw_note((out), (level), SCIMQ_SUBSYS_##subsys, __VA_ARGS__);       \
    } while (0)

/* Writes a GW_ACT_LOG action's line. */
void gw_note_write(const struct gw_action *a);

#endif /* SCIMQ_GATEWAY_ACTION_H */
