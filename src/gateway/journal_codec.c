/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdbool.h>
#include <string.h>

#include <scimq/error.h>
#include <scimq/proto.h>

#include "journal_codec.h"
#include "protocol/wire.h"

#define TARGET_LEN 20u /* queue id u64, message id u64, attempt u32 */
#define BLOCK_LEN 12u  /* name length u32 + data length u64 */

/* The layout r is written in: the one it names (2 to 5), or this
 * gateway's (0). */
static uint8_t
format_of(const struct gw_jrec *r)
{
    return r->format >= GW_JREC_FORMAT_MIN && r->format <= GW_JREC_FORMAT
               ? r->format
               : GW_JREC_FORMAT;
}

/* The prefix's layout byte for a format: 0 for format 2 (which had none). */
static uint8_t
layout_byte(uint8_t format)
{
    return format == GW_JREC_FORMAT_MIN ? 0 : format;
}

/* The format a prefix's layout byte names (layout_byte() undone). */
static uint8_t
layout_format(uint8_t layout)
{
    return layout == 0 ? GW_JREC_FORMAT_MIN : layout;
}

/* Bytes of a MSG record's flags field in that format. */
static size_t
flags_len(uint8_t format)
{
    return format >= 3 ? 2 : 0;
}

static size_t
fields_len(const struct gw_jrec *r)
{
    size_t n = 0;

    switch (r->type) {
    case GW_JREC_MSG:
        n = 8 + flags_len(format_of(r)) + 2 +
            (size_t) r->n_targets * TARGET_LEN + 4;
        for (uint32_t i = 0; i < r->block_count; i++)
            n += BLOCK_LEN + r->blocks[i].name_len;
        return n;
    case GW_JREC_ENQUEUE:
        return 8 + 8 + 8 + 4;
    case GW_JREC_ATTEMPT:
        return 8 + 8 + 4;
    case GW_JREC_PAD:
        return 0;
    case GW_JREC_SETTLE:
    default:
        return 8 + 8;
    }
}

size_t
gw_jrec_header_len(const struct gw_jrec *r)
{
    return GW_JREC_PREFIX_LEN + fields_len(r);
}

void
gw_jrec_encode(const struct gw_jrec *r, uint8_t *buf)
{
    size_t flen = fields_len(r);
    uint8_t *p = buf + GW_JREC_PREFIX_LEN;
    const struct gw_jrec_target *t =
        r->type == GW_JREC_MSG ? r->target : &r->one;

    wire_put32(buf, GW_JREC_MAGIC);
    wire_put64(buf + 4, flen + (r->type == GW_JREC_MSG ? r->data_len : 0));
    wire_put32(buf + 12, (uint32_t) flen);
    wire_put32(buf + 16, 0);
    buf[20] = (uint8_t) r->type;
    buf[21] = layout_byte(format_of(r));
    buf[22] = buf[23] = 0;
    switch (r->type) {
    case GW_JREC_MSG:
        wire_put64(p, r->payload_id);
        p += 8;
        if (flags_len(format_of(r)) > 0) {
            wire_put16(p, r->flags);
            p += 2;
        }
        wire_put16(p, r->n_targets);
        p += 2;
        for (uint16_t i = 0; i < r->n_targets; i++, p += TARGET_LEN) {
            wire_put64(p, t[i].qid);
            wire_put64(p + 8, t[i].msg_id);
            wire_put32(p + 16, t[i].attempt);
        }
        wire_put32(p, r->block_count);
        p += 4;
        for (uint32_t i = 0; i < r->block_count; i++) {
            wire_put32(p, r->blocks[i].name_len);
            wire_put64(p + 4, r->blocks[i].len);
            if (r->blocks[i].name_len > 0)
                memcpy(p + BLOCK_LEN, r->blocks[i].name, r->blocks[i].name_len);
            p += BLOCK_LEN + r->blocks[i].name_len;
        }
        break;
    case GW_JREC_ENQUEUE:
        wire_put64(p, t->qid);
        wire_put64(p + 8, t->msg_id);
        wire_put64(p + 16, r->payload_id);
        wire_put32(p + 24, r->attempt);
        break;
    case GW_JREC_ATTEMPT:
        wire_put64(p, t->qid);
        wire_put64(p + 8, t->msg_id);
        wire_put32(p + 16, r->attempt);
        break;
    case GW_JREC_SETTLE:
    default:
        wire_put64(p, t->qid);
        wire_put64(p + 8, t->msg_id);
        break;
    }
}

bool
gw_jrec_crc_data_first(uint8_t format)
{
    return format >= 4;
}

uint32_t
gw_jrec_crc_seal(uint8_t format, uint32_t body_crc, uint64_t seal)
{
    uint8_t b[8];

    if (format < 5)
        return body_crc;
    wire_put64(b, seal);
    return scimq_proto_crc32c(body_crc, b, sizeof(b));
}

uint32_t
gw_jrec_crc(const uint8_t *hdr, size_t hdr_len, const void *data,
            uint64_t data_len, uint64_t seal)
{
    uint8_t format = layout_format(hdr[21]);
    uint32_t crc;

    if (gw_jrec_crc_data_first(format))
        return gw_jrec_crc_fields(
            hdr, hdr_len, scimq_proto_crc32c(0, data, (size_t) data_len), seal);
    crc = scimq_proto_crc32c(0, hdr + GW_JREC_PREFIX_LEN,
                             hdr_len - GW_JREC_PREFIX_LEN);
    if (data_len > 0)
        crc = scimq_proto_crc32c(crc, data, (size_t) data_len);
    return gw_jrec_crc_seal(format, crc, seal);
}

uint32_t
gw_jrec_crc_fields(const uint8_t *hdr, size_t hdr_len, uint32_t data_crc,
                   uint64_t seal)
{
    return gw_jrec_crc_seal(layout_format(hdr[21]),
                            scimq_proto_crc32c(data_crc,
                                               hdr + GW_JREC_PREFIX_LEN,
                                               hdr_len - GW_JREC_PREFIX_LEN),
                            seal);
}

void
gw_jrec_pad(uint8_t *buf, size_t len, uint64_t seal)
{
    size_t body = len - GW_JREC_PREFIX_LEN;

    memset(buf, 0, len);
    wire_put32(buf, GW_JREC_MAGIC);
    wire_put64(buf + 4, body);
    buf[20] = (uint8_t) GW_JREC_PAD;
    buf[21] = layout_byte(GW_JREC_FORMAT);
    wire_put32(
        buf + 16,
        gw_jrec_crc_seal(GW_JREC_FORMAT,
                         scimq_proto_crc32c(0, buf + GW_JREC_PREFIX_LEN, body),
                         seal));
}

void
gw_jrec_set_crc(uint8_t *hdr, uint32_t crc)
{
    wire_put32(hdr + 16, crc);
}

int
gw_jrec_prefix(const uint8_t prefix[GW_JREC_PREFIX_LEN], uint64_t *body_len,
               uint32_t *flen, uint32_t *crc, uint8_t *type, uint8_t *format)
{
    if (wire_get32(prefix) != GW_JREC_MAGIC ||
        (prefix[21] != 0 && (prefix[21] < 3 || prefix[21] > GW_JREC_FORMAT)) ||
        prefix[22] || prefix[23])
        return SCIMQ_EPROTO;
    *format = layout_format(prefix[21]);
    *body_len = wire_get64(prefix + 4);
    *flen = wire_get32(prefix + 12);
    *crc = wire_get32(prefix + 16);
    *type = prefix[20];
    if (*type < GW_JREC_MSG || *type > GW_JREC_PAD ||
        *flen > GW_JREC_MAX_FIELDS || *flen > *body_len)
        return SCIMQ_EPROTO;
    if (*type == GW_JREC_PAD
            ? *flen != 0 || *body_len > GW_JREC_MAX_PAD - GW_JREC_PREFIX_LEN
            : *type != GW_JREC_MSG && *body_len != *flen)
        return SCIMQ_EPROTO;
    return 0;
}

int
gw_jrec_fields(uint8_t type, uint8_t format, const uint8_t *f, uint32_t flen,
               uint64_t body_len, struct gw_jrec *r)
{
    const uint8_t *end = f + flen, *p = f;

    memset(r, 0, sizeof(*r));
    r->type = type;
    r->format = format;
    r->n_targets = 1;
    switch (type) {
    case GW_JREC_MSG: {
        uint64_t data = 0;

        if (flen < 14 + flags_len(format))
            return SCIMQ_EPROTO;
        r->payload_id = wire_get64(p);
        p += 8;
        if (flags_len(format) > 0) {
            r->flags = wire_get16(p);
            p += 2;
            if (r->flags & ~GW_JREC_F_ALL)
                return SCIMQ_EPROTO;
        }
        r->n_targets = wire_get16(p);
        p += 2;
        if (r->n_targets > GW_JREC_MAX_TARGETS ||
            (size_t) (end - p) < (size_t) r->n_targets * TARGET_LEN + 4)
            return SCIMQ_EPROTO;
        r->targets_wire = p;
        p += (size_t) r->n_targets * TARGET_LEN;
        r->block_count = wire_get32(p);
        p += 4;
        r->blocks_wire = p;
        for (uint32_t i = 0; i < r->block_count; i++) {
            uint32_t nl;

            if ((size_t) (end - p) < BLOCK_LEN)
                return SCIMQ_EPROTO;
            nl = wire_get32(p);
            data += wire_get64(p + 4);
            if ((size_t) (end - p) - BLOCK_LEN < nl)
                return SCIMQ_EPROTO;
            p += BLOCK_LEN + nl;
        }
        if (p != end || data != body_len - flen)
            return SCIMQ_EPROTO;
        r->data_len = data;
        if (r->n_targets > 0)
            r->one = gw_jrec_target_at(r, 0);
        return 0;
    }
    case GW_JREC_ENQUEUE:
        if (flen != 28)
            return SCIMQ_EPROTO;
        r->payload_id = wire_get64(p + 16);
        r->attempt = wire_get32(p + 24);
        break;
    case GW_JREC_ATTEMPT:
        if (flen != 20)
            return SCIMQ_EPROTO;
        r->attempt = wire_get32(p + 16);
        break;
    case GW_JREC_SETTLE:
        if (flen != 16)
            return SCIMQ_EPROTO;
        break;
    case GW_JREC_PAD:
        /* Its bytes are checked by the CRC; nothing to apply. */
        if (flen != 0)
            return SCIMQ_EPROTO;
        r->n_targets = 0;
        return 0;
    default:
        return SCIMQ_EPROTO;
    }
    r->one.qid = wire_get64(p);
    r->one.msg_id = wire_get64(p + 8);
    return 0;
}

struct gw_jrec_target
gw_jrec_target_at(const struct gw_jrec *r, uint16_t i)
{
    const uint8_t *p = r->targets_wire + (size_t) i * TARGET_LEN;

    return (struct gw_jrec_target){wire_get64(p), wire_get64(p + 8),
                                   wire_get32(p + 16)};
}

struct gw_jrec_block
gw_jrec_block_at(const struct gw_jrec *r, uint32_t i)
{
    const uint8_t *p = r->blocks_wire;
    struct gw_jrec_block b;

    for (uint32_t k = 0; k < i; k++)
        p += BLOCK_LEN + wire_get32(p);
    b.name_len = wire_get32(p);
    b.len = wire_get64(p + 4);
    b.name = (const char *) p + BLOCK_LEN;
    return b;
}
