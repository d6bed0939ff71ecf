/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The store: payload bytes.  Payload memory comes from the pool (bounded,
 * reused, pre-faulted); admission is decided before a payload is
 * allocated, so a PUT that does not fit waits (its producer is parked: TCP
 * back-pressure) instead of growing the gateway.
 *
 * With segments (a journal, or a spill directory: the same files), the
 * memory of payloads that wait is reused: a payload whose MSG record is in
 * the journal is dropped from memory at once; one of memory queues only
 * is spilled first, as the same record without targets (recovery skips
 * it), in the same segments.  Either is read back from its segment (into
 * pool memory) when it is delivered.
 *
 * The store makes no system call: file work leaves as GW_ACT_JOURNAL_*
 * actions, and its results come back through gw_store_spilled(),
 * gw_store_loaded() and gw_store_journal_written().  Failed spills back
 * off (the payload stays in memory, safe); failed reads are retried with a
 * backoff (the segment stays).
 */
#ifndef SCIMQ_GATEWAY_STORE_H
#define SCIMQ_GATEWAY_STORE_H

#include "journal_codec.h"
#include "records.h"

/* Backoff of spill retries after an I/O error: doubling, capped. */
#define GW_STORE_RETRY_MIN_MS 100u
#define GW_STORE_RETRY_MAX_MS 10000u

/* bytes and chunk: the pool; segments: a journal or spill directory
 * exists; disk_limit: its bytes.  Returns 0 or SCIMQ_ENOMEM /
 * SCIMQ_EINVAL. */
int gw_store_init(struct gw_store *st, uint64_t bytes, uint64_t chunk,
                  bool segments, uint64_t disk_limit);
/*
 * Pool bytes that PUTs still being received may hold together (0: half
 * the pool).  Beyond it a new PUT waits like one that does not fit, unless
 * no other PUT is being received.
 */
void gw_store_set_max_receiving(struct gw_store *st, uint64_t bytes);
/* Frees every payload (segments are left to the caller). */
void gw_store_fini(struct gw_store *st);

/*
 * A payload for the PUT frame f (blocks and names copied; data is pool
 * memory of f->payload_len bytes, to be received into).  Returned pinned
 * once (the receiving connection).  Returns 0; SCIMQ_EAGAIN when it does
 * not fit now (spilling was started if possible; the caller parks the
 * producer); SCIMQ_EMSGSIZE when it can never fit in the memory limit.
 */
int gw_store_payload_new(struct gw_store *st, const scimq_proto_frame_t *f,
                         uint64_t now, struct gw_actions *out,
                         struct gw_payload **pl_p);

/* Producers waiting for memory, resumed (GW_ACT_RESUME) as room appears. */
void gw_store_park(struct gw_store *st, int worker, uint64_t conn_id,
                   uint64_t need);
void gw_store_unpark(struct gw_store *st, uint64_t conn_id);

/* References (messages) and pins (frames being written). */
static inline void
gw_store_ref(struct gw_payload *pl)
{
    pl->refs++;
}
static inline void
gw_store_pin(struct gw_payload *pl)
{
    pl->pins++;
}
void gw_store_unref(struct gw_store *st, struct gw_payload *pl,
                    struct gw_actions *out);
void gw_store_unpin(struct gw_store *st, struct gw_payload *pl,
                    struct gw_actions *out);

/* A committed payload becomes a candidate for spilling (and its bytes no
 * longer count as being received). */
void gw_store_committed(struct gw_store *st, struct gw_payload *pl,
                        struct gw_actions *out);
/* Spills ahead of need when the arena is above its high-water mark
 * (called once per event, after dispatch has pinned what goes out). */
void gw_store_balance(struct gw_store *st, uint64_t now,
                      struct gw_actions *out);

/*
 * The payload's bytes are wanted in memory (a delivery).  Returns true when
 * they are there; otherwise a load is under way or queued, and the caller
 * waits for gw_store_loaded().
 */
bool gw_store_want(struct gw_store *st, struct gw_payload *pl, uint64_t now,
                   struct gw_actions *out);

/* A spill's append (GW_ACT_JOURNAL_APPEND with spill set) finished with
 * rc; seg, off and bytes as for gw_store_journal_written(). */
void gw_store_spilled(struct gw_store *st, struct gw_payload *pl, uint64_t seg,
                      uint64_t off, uint64_t bytes, int rc, uint64_t now,
                      struct gw_actions *out);
/*
 * The MSG record header of pl for targets[0..n) (none: a spill), its CRC
 * left to the journal thread: a new buffer of *len bytes.
 */
uint8_t *gw_store_msg_header(const struct gw_payload *pl,
                             const struct gw_jrec_target *targets, uint16_t n,
                             uint32_t *len);
/* Hands the CRC taken as pl arrived to a, its first record's append (the
 * payload keeps it no longer: see records.h). */
void gw_store_give_crc(struct gw_payload *pl, struct gw_action *a);
/* Compaction: writes a spilled payload's record again (pl->moving set). */
void gw_store_respill(struct gw_store *st, struct gw_payload *pl,
                      struct gw_actions *out);
/* Returns true when the payload is now in memory. */
bool gw_store_loaded(struct gw_store *st, struct gw_payload *pl, int rc,
                     uint64_t now, struct gw_actions *out);

/*
 * A journal append of `bytes` landed in segment seg; pl (or NULL for a
 * record without payload) has its data at off.  Segments whose payloads
 * are all gone are deleted, oldest first.
 */
void gw_store_journal_written(struct gw_store *st, struct gw_payload *pl,
                              uint64_t seg, uint64_t off, uint64_t bytes,
                              struct gw_actions *out);

/* A compaction's append of pl failed: pl stays where it was. */
void gw_store_move_failed(struct gw_store *st, struct gw_payload *pl);

/* Load retries and spill backoffs that are due. */
void gw_store_tick(struct gw_store *st, uint64_t now, struct gw_actions *out);

#endif /* SCIMQ_GATEWAY_STORE_H */
