/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The journal segment being written (journal thread only).
 *
 * Records lie back to back in the file, as journal_codec.h describes, but
 * the file is written in whole blocks of GW_JSEG_ALIGN bytes at block
 * offsets, with O_DIRECT where the file system takes it: the page cache's
 * copy of every payload (and the zeroing of its fresh pages) cost more CPU
 * than the rest of the gateway's relay, and writes through it reached the
 * disk at a fraction of its direct rate.
 *
 * Small records gather in an aligned buffer; the last, partly filled block
 * is written zero-padded and written again as it fills.  A large payload
 * that sits on a block boundary in memory (the pool's runs do) is written
 * straight from there: a PAD record first places its data on a block
 * boundary in the file, and only its last partial block is copied (and
 * written in the same call, so the record is whole after one write).  A seal
 * pads the segment to a block boundary, so the blocks that a sync makes
 * durable are never written again (a torn rewrite cannot damage records
 * that were already confirmed).
 *
 * Without O_DIRECT (tmpfs, some network file systems) the same writes go
 * through the page cache.
 *
 * A segment may be written into the file of a deleted one (reuse): its
 * blocks are allocated and written already, so nothing is reserved below
 * its old size, and closing cuts the file where the new writes end.  The
 * old records left behind the new ones do not check as this segment's
 * (journal_codec.h, format 5: the segment's seal).
 */
#ifndef SCIMQ_GATEWAY_JOURNAL_SEGMENT_H
#define SCIMQ_GATEWAY_JOURNAL_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_JSEG_ALIGN 4096u
/* Payloads at least this large are written straight from memory. */
#define GW_JSEG_DIRECT_MIN (64u * 1024)
/* Bytes gathered before they are written (a multiple of GW_JSEG_ALIGN). */
#define GW_JSEG_BUF (1024u * 1024)
/*
 * With O_DIRECT, file space is reserved this far ahead of the writes
 * (fallocate, KEEP_SIZE: the file's size stays what was written): a direct
 * write into unallocated space allocates its blocks in the write itself.
 * Plain direct writes of 1 MiB measured 1.3-1.8x slower so on ext4 (a
 * virtio disk); in the gateway's relay (16 MiB, K=1) throughput stayed
 * within 5 % and the longest syncs got shorter.  Closing the segment gives
 * back what was reserved beyond its end.
 */
#define GW_JSEG_RESERVE (64u * 1024 * 1024)

struct gw_jseg {
    int fd;            /* -1: none open */
    uint64_t seg;      /* its number */
    uint64_t seal;     /* its seal (journal_codec.h, gw_jrec_seal) */
    bool direct;       /* opened with O_DIRECT */
    uint64_t size;     /* bytes of records appended */
    uint64_t written;  /* of which written to the file (flush, seal) */
    uint64_t base;     /* file offset of buf[0], a multiple of ALIGN */
    uint64_t end;      /* file offset where the writes so far end */
    bool reused;       /* the file of a deleted segment */
    size_t fill;       /* bytes in buf: size - base */
    uint64_t reserved; /* file bytes reserved (fallocate); UINT64_MAX: no */
    uint8_t *buf;      /* GW_JSEG_BUF bytes, ALIGN-aligned */
    uint8_t *tail;     /* one block: a direct payload's last, partial one */
};

/* An empty writer (no file), with its buffer.  0 or SCIMQ_ENOMEM. */
int gw_jseg_init(struct gw_jseg *s);
void gw_jseg_fini(struct gw_jseg *s);

/* Creates segment file path (it must not exist) as the one written, or
 * with reuse opens the existing file there (a deleted segment's, renamed)
 * and writes over it. */
int gw_jseg_open(struct gw_jseg *s, const char *path, uint64_t seg,
                 uint64_t seal, bool reuse);

/*
 * Appends a record: hdr (its prefix and fields) and data_len bytes of
 * data.  *data_off is where the data starts in the file.  The bytes may
 * stay in the buffer until gw_jseg_flush() or gw_jseg_seal().  On an error
 * the segment must not be appended to again.
 */
int gw_jseg_append(struct gw_jseg *s, const uint8_t *hdr, size_t hdr_len,
                   const uint8_t *data, uint64_t data_len, uint64_t *data_off);

/* Writes every appended byte not yet written (written == size
 * afterwards). */
int gw_jseg_flush(struct gw_jseg *s);

/* Pads to a block boundary with a PAD record, then flushes. */
int gw_jseg_seal(struct gw_jseg *s);

/*
 * Cuts the file after the bytes written by the last successful flush
 * (after an error: what follows may be a partial record) and closes it.
 */
void gw_jseg_abandon(struct gw_jseg *s);

/* Closes the file (seal and sync it first). */
void gw_jseg_close(struct gw_jseg *s);

#endif /* SCIMQ_GATEWAY_JOURNAL_SEGMENT_H */
