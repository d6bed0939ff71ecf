/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SciMP frames: the encoder (header bytes + iovecs over caller buffers) and
 * the incremental decoder (fixed header -> header -> payload -> trailer).
 *
 * The decoder validates in the order the bytes arrive and never trusts a
 * length before it has been checked against the limits: the fixed header
 * bounds the header buffer, the header checksum is verified before the
 * block table is believed, and the payload is never allocated by the
 * decoder unless the caller asks it to.
 */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <scimq/error.h>
#include <scimq/proto.h>

#include "args.h"
#include "wire.h"

/* Smallest header buffer a decoder starts with; it grows up to the limit. */
#define DECODER_INITIAL_HEADER 512u
/* Scratch space for discarded payloads read through iovecs. */
#define DECODER_SCRATCH 4096u
/*
 * A staged read after a large payload asks for this much: a typical
 * header (71 bytes for a one-block PUT) and a little more, so the next
 * payload is read straight into its buffer instead of through the stage.
 */
#define DECODER_STAGE_AFTER_LARGE 512u

void
scimq_proto_limits_default(scimq_proto_limits_t *lim)
{
    lim->max_header_len = SCIMQ_PROTO_DEFAULT_MAX_HEADER_LEN;
    lim->max_blocks = SCIMQ_PROTO_DEFAULT_MAX_BLOCKS;
    lim->max_name_len = SCIMQ_PROTO_DEFAULT_MAX_NAME_LEN;
    lim->max_payload_len = SCIMQ_PROTO_DEFAULT_MAX_PAYLOAD_LEN;
}

/*
 * The header checksum is the CRC32C of the whole header with the checksum
 * field itself read as zero.
 */
static uint32_t
header_sum(const uint8_t *hdr, size_t hdr_len)
{
    static const uint8_t zero[4];
    uint32_t crc;

    crc = scimq_proto_crc32c(0, hdr, WIRE_OFF_HEADER_SUM);
    crc = scimq_proto_crc32c(crc, zero, sizeof(zero));
    return scimq_proto_crc32c(crc, hdr + WIRE_OFF_HEADER_SUM + 4,
                              hdr_len - WIRE_OFF_HEADER_SUM - 4);
}

/* Flag rules shared by both directions. */
static int
flags_check(unsigned int opcode, unsigned int flags)
{
    if (flags & ~SCIMQ_PROTO_F_ALL)
        return SCIMQ_EPROTO_FLAGS;
    if ((flags & SCIMQ_PROTO_F_CONFIRM) && opcode != SCIMQ_PROTO_OP_PUT)
        return SCIMQ_EPROTO_FLAGS;
    if ((flags & SCIMQ_PROTO_F_BROADCAST) && opcode != SCIMQ_PROTO_OP_PUT &&
        opcode != SCIMQ_PROTO_OP_DELIVER)
        return SCIMQ_EPROTO_FLAGS;
    return 0;
}

/* ======================================================================== */
/* Encoder                                                                   */
/* ======================================================================== */

struct encode_plan {
    size_t args_len;
    size_t header_len;
    uint64_t payload_len;
    size_t data_iovs;
};

static int
encode_plan(const scimq_proto_frame_t *f, struct encode_plan *plan)
{
    uint64_t names = 0, payload = 0;
    int rc;

    if (f == NULL || (f->block_count > 0 && f->blocks == NULL))
        return SCIMQ_EINVAL;
    if (!scimq__proto_opcode_known(f->opcode))
        return SCIMQ_EPROTO_OPCODE;
    rc = flags_check(f->opcode, f->flags);
    if (rc != 0)
        return rc;
    if (f->block_count > 0 && !scimq_proto_opcode_has_blocks(f->opcode))
        return SCIMQ_EPROTO_BLOCKS;
    rc = scimq__proto_args_size(f->opcode, &f->args, &plan->args_len);
    if (rc != 0)
        return rc;

    plan->data_iovs = 0;
    for (uint32_t i = 0; i < f->block_count; i++) {
        const scimq_proto_block_t *b = &f->blocks[i];

        if ((b->name_len > 0 && b->name == NULL) ||
            (b->len > 0 && b->data == NULL))
            return SCIMQ_EINVAL;
        names += b->name_len;
        if (payload + b->len < payload)
            return SCIMQ_EOVERFLOW;
        payload += b->len;
        if (b->len > 0)
            plan->data_iovs++;
    }
    /* Each term is bounded (32-bit counts and lengths), so no overflow. */
    uint64_t header = SCIMQ_PROTO_FIXED_LEN + (uint64_t) plan->args_len +
                      (uint64_t) f->block_count * SCIMQ_PROTO_BLOCK_ENTRY_LEN +
                      names;
    if (header > SCIMQ_PROTO_MAX_HEADER_CAP)
        return SCIMQ_EPROTO_HDRLEN;
    plan->header_len = (size_t) header;
    plan->payload_len = payload;
    return 0;
}

int
scimq_proto_encode_size(const scimq_proto_frame_t *f, size_t *hdr_len_p,
                        size_t *iovcnt_p)
{
    struct encode_plan plan;
    bool sum;
    int rc;

    rc = encode_plan(f, &plan);
    if (rc != 0)
        return rc;
    sum = (f->flags & SCIMQ_PROTO_F_DATASUM) != 0;
    if (hdr_len_p != NULL)
        *hdr_len_p = plan.header_len + (sum ? SCIMQ_PROTO_TRAILER_LEN : 0);
    if (iovcnt_p != NULL)
        *iovcnt_p = 1 + plan.data_iovs + (sum ? 1 : 0);
    return 0;
}

int
scimq_proto_encode(const scimq_proto_frame_t *f, void *hdr_buf, size_t hdr_cap,
                   struct iovec *iov, size_t iov_cap, size_t *iovcnt_p,
                   uint64_t *frame_len_p)
{
    uint8_t *hdr = hdr_buf;
    struct encode_plan plan;
    size_t need_hdr, need_iov, n = 0;
    uint8_t *p;
    int rc;

    rc = scimq_proto_encode_size(f, &need_hdr, &need_iov);
    if (rc != 0)
        return rc;
    if (hdr == NULL || hdr_cap < need_hdr || iov == NULL || iov_cap < need_iov)
        return SCIMQ_ENOBUFS;
    (void) encode_plan(f, &plan); /* cannot fail: checked just above */

    wire_put32(hdr + WIRE_OFF_MAGIC, SCIMQ_PROTO_MAGIC);
    wire_put8(hdr + WIRE_OFF_VERSION, SCIMQ_PROTO_FRAME_VERSION);
    wire_put8(hdr + WIRE_OFF_OPCODE, f->opcode);
    wire_put16(hdr + WIRE_OFF_FLAGS, f->flags);
    wire_put64(hdr + WIRE_OFF_REQUEST_ID, f->request_id);
    wire_put32(hdr + WIRE_OFF_HEADER_LEN, (uint32_t) plan.header_len);
    wire_put16(hdr + WIRE_OFF_ARGS_LEN, (uint16_t) plan.args_len);
    wire_put16(hdr + WIRE_OFF_RESERVED, 0);
    wire_put32(hdr + WIRE_OFF_BLOCK_COUNT, f->block_count);
    wire_put32(hdr + WIRE_OFF_HEADER_SUM, 0);
    wire_put64(hdr + WIRE_OFF_PAYLOAD_LEN, plan.payload_len);

    p = hdr + SCIMQ_PROTO_FIXED_LEN;
    scimq__proto_args_write(f->opcode, &f->args, p);
    p += plan.args_len;
    for (uint32_t i = 0; i < f->block_count; i++) {
        wire_put32(p, f->blocks[i].name_len);
        wire_put64(p + 4, f->blocks[i].len);
        p += SCIMQ_PROTO_BLOCK_ENTRY_LEN;
    }
    for (uint32_t i = 0; i < f->block_count; i++) {
        if (f->blocks[i].name_len > 0)
            memcpy(p, f->blocks[i].name, f->blocks[i].name_len);
        p += f->blocks[i].name_len;
    }
    wire_put32(hdr + WIRE_OFF_HEADER_SUM, header_sum(hdr, plan.header_len));

    iov[n].iov_base = hdr;
    iov[n++].iov_len = plan.header_len;
    for (uint32_t i = 0; i < f->block_count; i++) {
        if (f->blocks[i].len == 0)
            continue;
        iov[n].iov_base = f->blocks[i].data;
        iov[n++].iov_len = (size_t) f->blocks[i].len;
    }
    if (f->flags & SCIMQ_PROTO_F_DATASUM) {
        uint32_t crc = 0;

        for (uint32_t i = 0; i < f->block_count; i++)
            crc = scimq_proto_crc32c(crc, f->blocks[i].data,
                                     (size_t) f->blocks[i].len);
        wire_put32(hdr + plan.header_len, crc);
        iov[n].iov_base = hdr + plan.header_len;
        iov[n++].iov_len = SCIMQ_PROTO_TRAILER_LEN;
    }
    *iovcnt_p = n;
    if (frame_len_p != NULL)
        *frame_len_p =
            plan.header_len + plan.payload_len +
            ((f->flags & SCIMQ_PROTO_F_DATASUM) ? SCIMQ_PROTO_TRAILER_LEN : 0);
    return 0;
}

int
scimq_proto_encode_alloc(const scimq_proto_frame_t *f, uint8_t **buf_p,
                         size_t *len_p)
{
    size_t hdr_len, iovcnt, used = 0;
    struct iovec *iov = NULL;
    uint8_t *hdr = NULL, *buf = NULL;
    uint64_t total;
    int rc;

    rc = scimq_proto_encode_size(f, &hdr_len, &iovcnt);
    if (rc != 0)
        return rc;
    hdr = malloc(hdr_len);
    iov = calloc(iovcnt, sizeof(*iov));
    rc = SCIMQ_ENOMEM;
    if (hdr == NULL || iov == NULL)
        goto out;
    rc = scimq_proto_encode(f, hdr, hdr_len, iov, iovcnt, &iovcnt, &total);
    if (rc != 0)
        goto out;
    rc = SCIMQ_ENOMEM;
    if (total > SIZE_MAX || (buf = malloc((size_t) total)) == NULL)
        goto out;
    for (size_t i = 0; i < iovcnt; i++) {
        memcpy(buf + used, iov[i].iov_base, iov[i].iov_len);
        used += iov[i].iov_len;
    }
    *buf_p = buf;
    *len_p = used;
    rc = 0;
out:
    free(iov);
    free(hdr);
    return rc;
}

/* ======================================================================== */
/* Decoder                                                                   */
/* ======================================================================== */

enum decoder_state {
    ST_FIXED,   /* reading the 40-byte fixed header */
    ST_HEADER,  /* reading args, block table and names */
    ST_WAIT,    /* header ready, waiting for a payload destination */
    ST_PAYLOAD, /* reading block data */
    ST_TRAILER, /* reading the payload CRC32C */
    ST_DONE,    /* frame complete; the next byte starts a new frame */
    ST_FAILED   /* framing lost; only reset helps */
};

struct scimq_proto_decoder {
    scimq_proto_limits_t lim;
    enum decoder_state state;
    int error;

    uint8_t *hdr; /* header bytes; grows up to lim.max_header_len */
    uint32_t hdr_cap;
    uint32_t hdr_have;
    uint32_t hdr_len; /* from the fixed header */
    uint16_t args_len;
    bool have_request_id;

    scimq_proto_frame_t frame;
    bool frame_valid; /* header parsed */
    scimq_proto_block_t *blocks;
    uint32_t blocks_cap;

    uint8_t *payload; /* caller's buffer, ours when payload_owned */
    bool payload_owned;
    bool discard;
    uint64_t payload_have;
    uint32_t crc;    /* running CRC32C of the payload */
    bool crc_always; /* take it without DATASUM too (set_payload_crc) */
    uint8_t trailer[SCIMQ_PROTO_TRAILER_LEN];
    uint32_t trailer_have;

    size_t iov_bytes;          /* bytes described by the last _iov() call */
    uint64_t prev_payload_len; /* of the frame before this one */
    uint8_t scratch[DECODER_SCRATCH];
};

static void
payload_release(scimq_proto_decoder_t *dec)
{
    if (dec->payload_owned)
        free(dec->payload);
    dec->payload = NULL;
    dec->payload_owned = false;
}

static void
frame_start(scimq_proto_decoder_t *dec)
{
    payload_release(dec);
    dec->prev_payload_len = dec->frame.payload_len;
    dec->state = ST_FIXED;
    dec->hdr_have = 0;
    dec->hdr_len = 0;
    dec->args_len = 0;
    dec->have_request_id = false;
    dec->frame_valid = false;
    dec->discard = false;
    dec->payload_have = 0;
    dec->crc = 0;
    dec->trailer_have = 0;
    dec->iov_bytes = 0;
    memset(&dec->frame, 0, sizeof(dec->frame));
}

static int
fail(scimq_proto_decoder_t *dec, int rc)
{
    dec->state = ST_FAILED;
    dec->error = rc;
    return rc;
}

int
scimq_proto_decoder_create(const scimq_proto_limits_t *lim,
                           scimq_proto_decoder_t **dec_p)
{
    scimq_proto_decoder_t *dec;
    scimq_proto_limits_t l;

    if (dec_p == NULL)
        return SCIMQ_EINVAL;
    if (lim == NULL)
        scimq_proto_limits_default(&l);
    else
        l = *lim;
    if (l.max_header_len < SCIMQ_PROTO_FIXED_LEN ||
        l.max_header_len > SCIMQ_PROTO_MAX_HEADER_CAP)
        return SCIMQ_EINVAL;

    dec = calloc(1, sizeof(*dec));
    if (dec == NULL)
        return SCIMQ_ENOMEM;
    dec->lim = l;
    dec->hdr_cap = l.max_header_len < DECODER_INITIAL_HEADER
                       ? l.max_header_len
                       : DECODER_INITIAL_HEADER;
    dec->hdr = malloc(dec->hdr_cap);
    if (dec->hdr == NULL) {
        free(dec);
        return SCIMQ_ENOMEM;
    }
    frame_start(dec);
    *dec_p = dec;
    return 0;
}

void
scimq_proto_decoder_destroy(scimq_proto_decoder_t *dec)
{
    if (dec == NULL)
        return;
    payload_release(dec);
    free(dec->blocks);
    free(dec->hdr);
    free(dec);
}

void
scimq_proto_decoder_reset(scimq_proto_decoder_t *dec)
{
    dec->error = 0;
    frame_start(dec);
}

/*
 * Checks the bytes of the fixed header received so far that can be judged
 * on their own (magic, version), so garbage is refused at its first wrong
 * byte instead of after 40 bytes.
 */
static int
fixed_prefix_check(const scimq_proto_decoder_t *dec)
{
    static const uint8_t magic[4] = {(uint8_t) (SCIMQ_PROTO_MAGIC >> 24),
                                     (uint8_t) (SCIMQ_PROTO_MAGIC >> 16),
                                     (uint8_t) (SCIMQ_PROTO_MAGIC >> 8),
                                     (uint8_t) SCIMQ_PROTO_MAGIC};
    uint32_t n = dec->hdr_have < 4 ? dec->hdr_have : 4;

    if (memcmp(dec->hdr, magic, n) != 0)
        return SCIMQ_EPROTO_MAGIC;
    if (dec->hdr_have > WIRE_OFF_VERSION &&
        dec->hdr[WIRE_OFF_VERSION] != SCIMQ_PROTO_FRAME_VERSION)
        return SCIMQ_EPROTO_VERSION;
    return 0;
}

/* Validates the complete fixed header against the protocol and limits. */
static int
fixed_check(scimq_proto_decoder_t *dec)
{
    const uint8_t *h = dec->hdr;
    scimq_proto_frame_t *f = &dec->frame;
    uint64_t min_len, names_max;
    uint32_t hdr_len;
    int rc;

    f->version = wire_get8(h + WIRE_OFF_VERSION);
    f->opcode = wire_get8(h + WIRE_OFF_OPCODE);
    f->flags = wire_get16(h + WIRE_OFF_FLAGS);
    f->request_id = wire_get64(h + WIRE_OFF_REQUEST_ID);
    f->block_count = wire_get32(h + WIRE_OFF_BLOCK_COUNT);
    f->payload_len = wire_get64(h + WIRE_OFF_PAYLOAD_LEN);
    hdr_len = wire_get32(h + WIRE_OFF_HEADER_LEN);
    dec->args_len = wire_get16(h + WIRE_OFF_ARGS_LEN);
    dec->have_request_id = true;

    if (!scimq__proto_opcode_known(f->opcode))
        return SCIMQ_EPROTO_OPCODE;
    rc = flags_check(f->opcode, f->flags);
    if (rc != 0)
        return rc;
    if (wire_get16(h + WIRE_OFF_RESERVED) != 0)
        return SCIMQ_EPROTO_RESERVED;
    if (f->block_count > dec->lim.max_blocks ||
        (f->block_count > 0 && !scimq_proto_opcode_has_blocks(f->opcode)))
        return SCIMQ_EPROTO_BLOCKS;
    if (f->payload_len > dec->lim.max_payload_len)
        return SCIMQ_EPROTO_TOOBIG;
#if SIZE_MAX < UINT64_MAX
    if (f->payload_len > SIZE_MAX)
        return SCIMQ_EPROTO_TOOBIG;
#endif
    if (f->block_count == 0 && f->payload_len != 0)
        return SCIMQ_EPROTO_LENGTHS;

    min_len = SCIMQ_PROTO_FIXED_LEN + (uint64_t) dec->args_len +
              (uint64_t) f->block_count * SCIMQ_PROTO_BLOCK_ENTRY_LEN;
    if (hdr_len < min_len || hdr_len > dec->lim.max_header_len)
        return SCIMQ_EPROTO_HDRLEN;
    names_max = (uint64_t) f->block_count * dec->lim.max_name_len;
    if (hdr_len - min_len > names_max)
        return SCIMQ_EPROTO_NAMELEN;

    /* The length is now bounded by the limit: grow the buffer to fit. */
    if (hdr_len > dec->hdr_cap) {
        uint8_t *p = realloc(dec->hdr, hdr_len);

        if (p == NULL)
            return SCIMQ_ENOMEM;
        dec->hdr = p;
        dec->hdr_cap = hdr_len;
    }
    dec->hdr_len = hdr_len;
    return 0;
}

/* Verifies the header checksum, then reads args, block table and names. */
static int
header_parse(scimq_proto_decoder_t *dec)
{
    scimq_proto_frame_t *f = &dec->frame;
    const uint8_t *table, *names, *end = dec->hdr + dec->hdr_len;
    uint64_t data_sum = 0;
    int rc;

    if (wire_get32(dec->hdr + WIRE_OFF_HEADER_SUM) !=
        header_sum(dec->hdr, dec->hdr_len))
        return SCIMQ_EPROTO_HDRSUM;

    rc = scimq__proto_args_read(f->opcode, dec->hdr + SCIMQ_PROTO_FIXED_LEN,
                                dec->args_len, &f->args);
    if (rc != 0)
        return rc;

    if (f->block_count > dec->blocks_cap) {
        /* block_count <= max_blocks was checked in fixed_check(). */
        scimq_proto_block_t *b =
            realloc(dec->blocks, (size_t) f->block_count * sizeof(*b));

        if (b == NULL)
            return SCIMQ_ENOMEM;
        dec->blocks = b;
        dec->blocks_cap = f->block_count;
    }
    f->blocks = f->block_count > 0 ? dec->blocks : NULL;

    table = dec->hdr + SCIMQ_PROTO_FIXED_LEN + dec->args_len;
    names = table + (size_t) f->block_count * SCIMQ_PROTO_BLOCK_ENTRY_LEN;
    for (uint32_t i = 0; i < f->block_count; i++) {
        scimq_proto_block_t *b = &f->blocks[i];

        b->name_len = wire_get32(table);
        b->len = wire_get64(table + 4);
        table += SCIMQ_PROTO_BLOCK_ENTRY_LEN;
        if (b->name_len > dec->lim.max_name_len)
            return SCIMQ_EPROTO_NAMELEN;
        if (b->name_len > (size_t) (end - names))
            return SCIMQ_EPROTO_HDRLEN;
        b->name = b->name_len > 0 ? (const char *) names : NULL;
        b->data = NULL;
        names += b->name_len;
        if (data_sum + b->len < data_sum)
            return SCIMQ_EPROTO_LENGTHS;
        data_sum += b->len;
    }
    if (names != end)
        return SCIMQ_EPROTO_HDRLEN; /* bytes left over after the names */
    if (data_sum != f->payload_len)
        return SCIMQ_EPROTO_LENGTHS;
    dec->frame_valid = true;
    return 0;
}

/* The header is in: decide what comes next. */
static int
header_complete(scimq_proto_decoder_t *dec)
{
    int rc = header_parse(dec);

    if (rc != 0)
        return fail(dec, rc);
    if (dec->frame.payload_len > 0) {
        dec->state = ST_WAIT;
        return SCIMQ_PROTO_HEADER_READY;
    }
    if (dec->frame.flags & SCIMQ_PROTO_F_DATASUM) {
        dec->state = ST_TRAILER;
        return SCIMQ_PROTO_NEED_MORE;
    }
    dec->state = ST_DONE;
    return SCIMQ_PROTO_FRAME_DONE;
}

static int
trailer_complete(scimq_proto_decoder_t *dec)
{
    if (wire_get32(dec->trailer) != dec->crc)
        return fail(dec, SCIMQ_EPROTO_DATASUM);
    dec->state = ST_DONE;
    return SCIMQ_PROTO_FRAME_DONE;
}

uint64_t
scimq_proto_decoder_need(const scimq_proto_decoder_t *dec)
{
    uint64_t trailer = (dec->frame.flags & SCIMQ_PROTO_F_DATASUM)
                           ? SCIMQ_PROTO_TRAILER_LEN
                           : 0;

    switch (dec->state) {
    case ST_FIXED:
        return SCIMQ_PROTO_FIXED_LEN - dec->hdr_have;
    case ST_HEADER:
        return dec->hdr_len - dec->hdr_have;
    case ST_WAIT:
    case ST_PAYLOAD:
        return dec->frame.payload_len - dec->payload_have + trailer;
    case ST_TRAILER:
        return SCIMQ_PROTO_TRAILER_LEN - dec->trailer_have;
    case ST_DONE:
        return SCIMQ_PROTO_FIXED_LEN;
    case ST_FAILED:
    default:
        return 0;
    }
}

int
scimq_proto_decoder_idle(const scimq_proto_decoder_t *dec)
{
    return dec->state == ST_DONE ||
           (dec->state == ST_FIXED && dec->hdr_have == 0);
}

size_t
scimq_proto_decoder_stage_len(const scimq_proto_decoder_t *dec, size_t cap)
{
    uint64_t prev =
        dec->state == ST_DONE ? dec->frame.payload_len : dec->prev_payload_len;
    uint64_t want;

    if ((dec->state != ST_DONE && dec->state != ST_FIXED &&
         dec->state != ST_HEADER) ||
        prev < cap / 2)
        return cap;
    want = scimq_proto_decoder_need(dec);
    if (want < DECODER_STAGE_AFTER_LARGE)
        want = DECODER_STAGE_AFTER_LARGE;
    return want < cap ? (size_t) want : cap;
}

size_t
scimq_proto_decoder_iov(scimq_proto_decoder_t *dec, struct iovec *iov,
                        size_t iov_cap)
{
    size_t n = 0;

    dec->iov_bytes = 0;
    if (iov_cap == 0)
        return 0;
    if (dec->state == ST_DONE)
        frame_start(dec);

    switch (dec->state) {
    case ST_FIXED:
        iov[n].iov_base = dec->hdr + dec->hdr_have;
        iov[n++].iov_len = SCIMQ_PROTO_FIXED_LEN - dec->hdr_have;
        break;
    case ST_HEADER:
        iov[n].iov_base = dec->hdr + dec->hdr_have;
        iov[n++].iov_len = dec->hdr_len - dec->hdr_have;
        break;
    case ST_PAYLOAD: {
        uint64_t left = dec->frame.payload_len - dec->payload_have;

        if (dec->discard) {
            iov[n].iov_base = dec->scratch;
            iov[n++].iov_len =
                left < DECODER_SCRATCH ? (size_t) left : DECODER_SCRATCH;
            break;
        }
        iov[n].iov_base = dec->payload + dec->payload_have;
        iov[n++].iov_len = (size_t) left;
        if ((dec->frame.flags & SCIMQ_PROTO_F_DATASUM) && n < iov_cap) {
            iov[n].iov_base = dec->trailer;
            iov[n++].iov_len = SCIMQ_PROTO_TRAILER_LEN;
        }
        break;
    }
    case ST_TRAILER:
        iov[n].iov_base = dec->trailer + dec->trailer_have;
        iov[n++].iov_len = SCIMQ_PROTO_TRAILER_LEN - dec->trailer_have;
        break;
    case ST_WAIT:
    case ST_DONE:
    case ST_FAILED:
        break;
    }
    for (size_t i = 0; i < n; i++)
        dec->iov_bytes += iov[i].iov_len;
    return n;
}

int
scimq_proto_decoder_advance(scimq_proto_decoder_t *dec, size_t n)
{
    int rc;

    if (dec->state == ST_FAILED)
        return dec->error;
    if (dec->state == ST_WAIT)
        return SCIMQ_ESTATE;
    if (n > dec->iov_bytes)
        return SCIMQ_EINVAL;
    dec->iov_bytes = 0;
    if (n == 0)
        return SCIMQ_PROTO_NEED_MORE;

    switch (dec->state) {
    case ST_FIXED:
        dec->hdr_have += (uint32_t) n;
        rc = fixed_prefix_check(dec);
        if (rc != 0)
            return fail(dec, rc);
        if (dec->hdr_have < SCIMQ_PROTO_FIXED_LEN)
            return SCIMQ_PROTO_NEED_MORE;
        rc = fixed_check(dec);
        if (rc != 0)
            return fail(dec, rc);
        dec->state = ST_HEADER;
        if (dec->hdr_len == SCIMQ_PROTO_FIXED_LEN)
            return header_complete(dec);
        return SCIMQ_PROTO_NEED_MORE;

    case ST_HEADER:
        dec->hdr_have += (uint32_t) n;
        if (dec->hdr_have < dec->hdr_len)
            return SCIMQ_PROTO_NEED_MORE;
        return header_complete(dec);

    case ST_PAYLOAD: {
        uint64_t left = dec->frame.payload_len - dec->payload_have;
        size_t in_payload = n < left ? n : (size_t) left;
        const uint8_t *at =
            dec->discard ? dec->scratch : dec->payload + dec->payload_have;

        if ((dec->frame.flags & SCIMQ_PROTO_F_DATASUM) || dec->crc_always)
            dec->crc = scimq_proto_crc32c(dec->crc, at, in_payload);
        dec->payload_have += in_payload;
        n -= in_payload;
        if (dec->payload_have < dec->frame.payload_len)
            return SCIMQ_PROTO_NEED_MORE;
        if (!(dec->frame.flags & SCIMQ_PROTO_F_DATASUM)) {
            dec->state = ST_DONE;
            return SCIMQ_PROTO_FRAME_DONE;
        }
        dec->state = ST_TRAILER;
        if (n == 0)
            return SCIMQ_PROTO_NEED_MORE;
        /* The rest of the read went straight into the trailer. */
        dec->trailer_have = (uint32_t) n;
        if (dec->trailer_have < SCIMQ_PROTO_TRAILER_LEN)
            return SCIMQ_PROTO_NEED_MORE;
        return trailer_complete(dec);
    }

    case ST_TRAILER:
        dec->trailer_have += (uint32_t) n;
        if (dec->trailer_have < SCIMQ_PROTO_TRAILER_LEN)
            return SCIMQ_PROTO_NEED_MORE;
        return trailer_complete(dec);

    case ST_WAIT:
    case ST_DONE:
    case ST_FAILED:
    default:
        break;
    }
    return fail(dec, SCIMQ_EBUG);
}

void
scimq_proto_decoder_set_payload_crc(scimq_proto_decoder_t *dec, int on)
{
    dec->crc_always = on != 0;
}

uint32_t
scimq_proto_decoder_payload_crc(const scimq_proto_decoder_t *dec)
{
    return dec->crc;
}

int
scimq_proto_decoder_feed(scimq_proto_decoder_t *dec, const void *data,
                         size_t len, size_t *used_p)
{
    const uint8_t *in = data;
    size_t used = 0;
    int rc = SCIMQ_PROTO_NEED_MORE;

    *used_p = 0;
    if (dec->state == ST_FAILED)
        return dec->error;
    if (dec->state == ST_WAIT)
        return SCIMQ_ESTATE;

    /*
     * Feeding is "copy into where a readv() would have put the bytes, then
     * advance": one state machine serves both ways of reading.
     */
    while (used < len) {
        struct iovec iov[2];
        size_t niov = scimq_proto_decoder_iov(dec, iov, 2), copied = 0;

        for (size_t i = 0; i < niov && used + copied < len; i++) {
            size_t k = len - used - copied;

            if (k > iov[i].iov_len)
                k = iov[i].iov_len;
            memcpy(iov[i].iov_base, in + used + copied, k);
            copied += k;
        }
        rc = scimq_proto_decoder_advance(dec, copied);
        /*
         * A failed frame consumed the bytes up to the one that failed; the
         * caller closes the connection, so the count is informational.
         */
        used += copied;
        if (rc != SCIMQ_PROTO_NEED_MORE)
            break;
    }
    *used_p = used;
    return rc;
}

int
scimq_proto_decoder_set_payload(scimq_proto_decoder_t *dec, void *buf,
                                uint64_t cap)
{
    scimq_proto_frame_t *f = &dec->frame;
    uint64_t off = 0;

    if (dec->state != ST_WAIT)
        return SCIMQ_ESTATE;
    if (buf != NULL && cap < f->payload_len)
        return SCIMQ_ENOBUFS;
    dec->payload = buf;
    dec->discard = (buf == NULL);
    for (uint32_t i = 0; i < f->block_count; i++) {
        f->blocks[i].data = buf != NULL ? (uint8_t *) buf + off : NULL;
        off += f->blocks[i].len;
    }
    dec->state = ST_PAYLOAD;
    return 0;
}

int
scimq_proto_decoder_alloc_payload(scimq_proto_decoder_t *dec)
{
    void *buf;
    int rc;

    if (dec->state != ST_WAIT)
        return SCIMQ_ESTATE;
    /* payload_len <= max_payload_len and <= SIZE_MAX (fixed_check). */
    buf = malloc((size_t) dec->frame.payload_len);
    if (buf == NULL)
        return SCIMQ_ENOMEM;
    rc = scimq_proto_decoder_set_payload(dec, buf, dec->frame.payload_len);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    dec->payload_owned = true;
    return 0;
}

void
scimq_proto_decoder_take_payload(scimq_proto_decoder_t *dec, void **buf_p)
{
    if (dec->payload_owned && dec->state == ST_DONE) {
        *buf_p = dec->payload;
        dec->payload_owned = false;
        return;
    }
    *buf_p = NULL;
}

const scimq_proto_frame_t *
scimq_proto_decoder_frame(const scimq_proto_decoder_t *dec)
{
    return dec->frame_valid ? &dec->frame : NULL;
}

int
scimq_proto_decoder_request_id(const scimq_proto_decoder_t *dec,
                               uint64_t *request_id_p)
{
    if (!dec->have_request_id)
        return SCIMQ_EAGAIN;
    *request_id_p = dec->frame.request_id;
    return 0;
}
