/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The journal thread: append-only segment files in the journal directory,
 * and the file of the queue topology.  It carries out GW_ACT_JOURNAL_*
 * actions in order, off the event loops and without the broker's lock:
 *
 * - APPEND adds a record (header, with its CRC finished here, then the
 *   payload if any) to the active segment (journal_segment.h: block
 *   writes, O_DIRECT), rolling to a new segment past the segment size.
 *   The appends of one turn of the thread are written together; those
 *   that ask for it are synced (fdatasync) before they complete: one sync
 *   covers every append before it (group commit), and at most batch_ms
 *   after any append the journal is synced anyway.  Until a turn asks for
 *   a sync, a payload written straight from memory completes at once with
 *   every append before it (their bytes went out in its write): the
 *   PUT_OKs of batch queues do not wait for the rest of the turn.
 * - READ reads bytes back (a payload to deliver).
 * - DROP deletes a segment: its file is kept as one of GW_JOURNAL_SPARES
 *   spare files, which new segments are written into (journal_segment.h),
 *   or deleted on the reaper's thread (journal_reaper.h, in order); TOPOLOGY
 * replaces the topology file (write, fsync, rename, fsync of the directory).
 *
 * done() reports every APPEND (after its write, and after its sync when it
 * asked for one; seg and off say where its payload landed) and READ, on
 * the journal thread.
 */
#ifndef SCIMQ_GATEWAY_JOURNAL_H
#define SCIMQ_GATEWAY_JOURNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "action.h"

struct gw_journal;

typedef void (*gw_journal_done_fn)(void *arg, struct gw_action *job, int rc);

#define GW_JOURNAL_TOPOLOGY_FILE "topology.json"
/*
 * The journal's salt: 16 hex digits, drawn at random when the journal is
 * made (or first written in format 5) and never changed.  Format 5 mixes
 * it into every record's CRC (journal_codec.h, gw_jrec_seal), so that the
 * bytes a producer sent, left in a reused file, can never be taken for a
 * record.  It stays in the directory, unreadable to others (0600).
 */
#define GW_JOURNAL_SALT_FILE "salt"
/*
 * Files of dropped segments kept for reuse, named by the segment whose
 * bytes they still hold ("<16 hex digits>.spare"): recovery numbers new
 * segments above every spare's number as well as every segment's, so
 * that a spare's old records (whose CRCs cover their segment's number,
 * journal_codec.h) never check in the segment written into it.  Beside
 * --disk-limit, which counts segments only, they take up to this many
 * segments' space.  Two cover the steady state of one segment written
 * while older ones are dropped.  Direct writes of 16 MiB into 64 MiB
 * segments, ext4 with discard on virtio here: 1,911-2,094 MiB/s into
 * reused files against 1,050-1,093 into new ones deleted behind.
 */
#define GW_JOURNAL_SPARES 2
#define GW_JOURNAL_SEGMENT_SUFFIX ".seg"
#define GW_JOURNAL_SPARE_SUFFIX ".spare"

/* Where a journal goes on (recovery.h finds it out). */
struct gw_journal_resume {
    uint64_t first_seg;  /* the number of the first new segment */
    uint64_t reuse_from; /* segments from here on hold records of this
                            format only: when dropped, their files may be
                            kept as spares; older ones are deleted */
    uint64_t salt;       /* the journal's secret (GW_JOURNAL_SALT_FILE) */
};

/*
 * Starts the thread on dir (which recovery has read), going on at *at.
 * Returns 0 or a SCIMQ_E* code.
 */
int gw_journal_start(const char *dir, const struct gw_journal_resume *at,
                     uint64_t segment_size, uint32_t batch_ms,
                     gw_journal_done_fn done, void *arg,
                     struct gw_journal **j_p);
/* Carries out what is queued, syncs, stops the thread.  Segments stay. */
void gw_journal_stop(struct gw_journal *j);
/* Queues a job (any thread); the journal owns it afterwards. */
void gw_journal_submit(struct gw_journal *j, struct gw_action *job);

/* Syncs so far and their latency (log2 buckets of microseconds). */
#define GW_JOURNAL_SYNC_BUCKETS 32
struct gw_journal_syncs {
    uint64_t count;
    uint64_t max_us;
    uint64_t bucket[GW_JOURNAL_SYNC_BUCKETS]; /* [i]: < 2^i us */
};
/* A copy of the counters (any thread). */
void gw_journal_syncs(struct gw_journal *j, struct gw_journal_syncs *out);

/*
 * Deletes every segment and the topology file in dir (a spill directory:
 * its segments are not kept across runs).  0 or a SCIMQ_E* code.
 */
int gw_journal_clear(const char *dir);

/*
 * The segment number in a journal file's name: "<16 hex digits><suffix>",
 * suffix GW_JOURNAL_SEGMENT_SUFFIX or GW_JOURNAL_SPARE_SUFFIX.  false for
 * any other name.
 */
bool gw_journal_file_seg(const char *name, const char *suffix, uint64_t *seg);

/* Path of segment seg in dir. */
void gw_journal_segment_path(const char *dir, uint64_t seg, char *buf,
                             size_t len);

#endif /* SCIMQ_GATEWAY_JOURNAL_H */
