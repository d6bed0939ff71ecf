/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The bytes of journal records (pure code: no I/O, no allocation).
 *
 * A segment file is a sequence of records:
 *
 *   prefix (24 B)  magic "SCJR" u32 | body length u64 | fields length u32 |
 *                  CRC32C of the body u32 | type u8 | layout u8 + 2 zero
 *                  bytes (layout: 0 = a record of format 2, 3 or 4 = of
 *                  that format; a segment may hold several: an older
 *                  journal goes on with records of this gateway's format)
 *   body           fields (fields length bytes) then data (MSG only)
 *
 * big-endian like SciMP.  The CRC covers the whole body, data included,
 * so a torn or damaged record is found wherever it is cut.  Formats 2 and
 * 3 take it over the fields, then the data; formats 4 and 5 over the data,
 * then the fields (the same for records without data): the data's CRC is
 * then the one the gateway took while the payload arrived (the decoder's,
 * see scimq_proto_decoder_set_payload_crc), and the journal thread only
 * adds the fields.  Format 5 then adds the seal of the segment the record
 * is in (u64, big-endian; gw_jrec_seal: its number mixed with the
 * journal's secret salt): the writer reuses the files of deleted segments
 * (journal.h), and their old records, behind the new ones, must not check
 * as records of the segment the file now is, nor may old payload bytes
 * there that a producer chose (a payload can hold anything, a record
 * too) check as a record.  Fields:
 *
 *   MSG      payload id u64, flags u16 (formats 3 and 4: GW_JREC_F_*),
 *            targets u16 (0: a spill of memory queues'
 *            payload, skipped by recovery), then per target: queue id u64,
 *            message id u64, attempt u32; blocks u32, then per block: name
 *            length u32, data length u64, name; data = the payload (every
 *            block's data)
 *   ENQUEUE  queue id u64, message id u64, payload id u64, attempt u32
 *   ATTEMPT  queue id u64, message id u64, attempt u32
 *   SETTLE   queue id u64, message id u64
 *   PAD      no fields; data = zero bytes (GW_JREC_PREFIX_LEN ..
 *            GW_JREC_MAX_PAD in all).  The writer puts one where the next
 *            record must start on a block boundary (before a payload
 *            written straight from memory, and where a sync ends a block),
 *            so that the bytes of a synced block are never written again.
 *
 * A later MSG record of the same payload (compaction writes one to empty an
 * old segment) moves the payload there and sets its messages' attempts.
 *
 * A message is in a queue from its MSG (or ENQUEUE) record until a SETTLE
 * record for it: acknowledged, dead-lettered (SETTLE, then ENQUEUE into the
 * dead-letter queue), moved, dropped.  Queues are named by ids that are
 * never reused, so a queue deleted and declared again does not inherit
 * old records.
 */
#ifndef SCIMQ_GATEWAY_JOURNAL_CODEC_H
#define SCIMQ_GATEWAY_JOURNAL_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_JREC_MAGIC 0x53434a52u /* "SCJR" */
#define GW_JREC_PREFIX_LEN 24u
/*
 * The record layout's version, kept in the topology file.  History: 2 =
 * first journal; 3 = MSG records carry flags (control messages); 4 = the
 * CRC is taken over the data first; 5 = the CRC covers the segment number
 * too, and PAD records carry the layout byte.  This gateway reads all
 * four and writes 5.
 */
#define GW_JREC_FORMAT 5
#define GW_JREC_FORMAT_MIN 2
/* MSG flags: the payload is a control message's (bcast.h). */
#define GW_JREC_F_CONTROL 0x0001u
#define GW_JREC_F_ALL GW_JREC_F_CONTROL
/* Fields of one record are bounded (targets, blocks and names are). */
#define GW_JREC_MAX_FIELDS (1u << 20)
#define GW_JREC_MAX_TARGETS 256u
/* A PAD record is at most this long (two blocks of 4 KiB, and some). */
#define GW_JREC_MAX_PAD 16384u

enum gw_jrec_type {
    GW_JREC_MSG = 1,
    GW_JREC_ENQUEUE = 2,
    GW_JREC_ATTEMPT = 3,
    GW_JREC_SETTLE = 4,
    GW_JREC_PAD = 5,
};

struct gw_jrec_target {
    uint64_t qid, msg_id;
    uint32_t attempt; /* MSG: deliveries so far */
};

struct gw_jrec_block {
    const char *name;
    uint32_t name_len;
    uint64_t len;
};

/* One record's fields; pointers refer to the caller's (encode) or to the
 * fields buffer being decoded (decode). */
struct gw_jrec {
    enum gw_jrec_type type;
    uint8_t format;                      /* GW_JREC_FORMAT(_MIN) */
    uint64_t payload_id;                 /* MSG, ENQUEUE */
    uint16_t flags;                      /* MSG: GW_JREC_F_* */
    uint32_t attempt;                    /* ENQUEUE, ATTEMPT */
    uint16_t n_targets;                  /* MSG: >= 1; others: 1 */
    const struct gw_jrec_target *target; /* encode: the targets */
    struct gw_jrec_target one;           /* non-MSG and decode: targets[0] */
    const uint8_t *targets_wire;         /* decode, MSG: raw targets */
    uint32_t block_count;
    const struct gw_jrec_block *blocks; /* encode */
    const uint8_t *blocks_wire;         /* decode: raw block table */
    uint64_t data_len;                  /* MSG: payload bytes */
};

/* Bytes of prefix + fields of r (data not included).  Encoding writes
 * r->format's layout (2, 3 or 4; 0 means GW_JREC_FORMAT). */
size_t gw_jrec_header_len(const struct gw_jrec *r);
/*
 * Writes prefix and fields into buf (gw_jrec_header_len bytes).  The CRC
 * is left zero: compute it with gw_jrec_crc() over the fields and the data
 * and store it with gw_jrec_set_crc().
 */
void gw_jrec_encode(const struct gw_jrec *r, uint8_t *buf);
/*
 * The seal of segment seg in a journal of that salt (a random secret of
 * the journal's, journal.h): distinct for every segment of the journal,
 * and unknown to whoever does not know the salt.
 */
static inline uint64_t
gw_jrec_seal(uint64_t salt, uint64_t seg)
{
    return salt ^ seg;
}
/*
 * Writes a whole PAD record of len bytes (GW_JREC_PREFIX_LEN ..
 * GW_JREC_MAX_PAD) into buf, CRC included, for the segment of that seal.
 */
void gw_jrec_pad(uint8_t *buf, size_t len, uint64_t seal);
/* True when records of that format take the CRC over the data first. */
bool gw_jrec_crc_data_first(uint8_t format);
/* A record's CRC from its body's: format 5 adds its segment's seal. */
uint32_t gw_jrec_crc_seal(uint8_t format, uint32_t body_crc, uint64_t seal);
/* The CRC of a record in the segment of that seal, in the order of the
 * format hdr's layout byte names (gw_jrec_encode has written it). */
uint32_t gw_jrec_crc(const uint8_t *hdr, size_t hdr_len, const void *data,
                     uint64_t data_len, uint64_t seal);
/* Formats 4 and 5: the same from the CRC32C of its data (0 for none). */
uint32_t gw_jrec_crc_fields(const uint8_t *hdr, size_t hdr_len,
                            uint32_t data_crc, uint64_t seal);
void gw_jrec_set_crc(uint8_t *hdr, uint32_t crc);

/*
 * Reads a prefix: 0 and the lengths, CRC, type and format (2 to 5), or
 * SCIMQ_EPROTO when it is not one (bad magic, type, layout or lengths).
 */
int gw_jrec_prefix(const uint8_t prefix[GW_JREC_PREFIX_LEN], uint64_t *body_len,
                   uint32_t *fields_len, uint32_t *crc, uint8_t *type,
                   uint8_t *format);
/* Parses fields (fields_len bytes) of a record of that format into r.
 * 0 or SCIMQ_EPROTO (an unknown MSG flag too). */
int gw_jrec_fields(uint8_t type, uint8_t format, const uint8_t *fields,
                   uint32_t fields_len, uint64_t body_len, struct gw_jrec *r);
/* Target i and block i of a decoded MSG. */
struct gw_jrec_target gw_jrec_target_at(const struct gw_jrec *r, uint16_t i);
struct gw_jrec_block gw_jrec_block_at(const struct gw_jrec *r, uint32_t i);

#endif /* SCIMQ_GATEWAY_JOURNAL_CODEC_H */
