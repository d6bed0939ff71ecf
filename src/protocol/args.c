/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The args section of each opcode, described once as a table of fields so
 * that the encoder, the decoder and doc/scimp.md cannot drift apart: the
 * fields are written in table order, integers big-endian, byte arrays as
 * they are, strings as a u16 length followed by the bytes.
 */
#include "config.h"

#include <stdbool.h>
#include <string.h>

#include <scimq/error.h>

#include "args.h"
#include "wire.h"

enum field_type {
    FT_NONE, /* placeholder of opcodes without args */
    FT_U8,
    FT_U16,
    FT_U32,
    FT_U64,
    FT_I32,
    FT_BYTES, /* fixed-size byte array */
    FT_STR,   /* u16 length + bytes */
    FT_RANGES /* u16 count + count x (first u64, count u32) */
};

struct field {
    enum field_type type;
    uint16_t size;  /* FT_BYTES only */
    uint16_t limit; /* FT_U8 only: largest valid value, 0 = any */
    size_t offset;  /* into scimq_proto_args_t */
};

#define FIELD(kind, member, type)                                              \
    {                                                                          \
        type, 0, 0, offsetof(scimq_proto_args_t, kind.member)                  \
    }
#define FIELD_ENUM(kind, member, max)                                          \
    {                                                                          \
        FT_U8, 0, max, offsetof(scimq_proto_args_t, kind.member)               \
    }
#define FIELD_BYTES(kind, member)                                              \
    {                                                                          \
        FT_BYTES, sizeof(((scimq_proto_args_t *) 0)->kind.member), 0,          \
            offsetof(scimq_proto_args_t, kind.member)                          \
    }

static const struct field fields_none[] = {{FT_NONE, 0, 0, 0}};

static const struct field fields_hello[] = {
    FIELD(hello, version_min, FT_U8),   FIELD(hello, version_max, FT_U8),
    FIELD(hello, stream_index, FT_U16), FIELD(hello, stream_count, FT_U16),
    FIELD(hello, features, FT_U64),     FIELD_BYTES(hello, session_id),
    FIELD(hello, client_name, FT_STR),
};

static const struct field fields_welcome[] = {
    FIELD(welcome, version, FT_U8),       FIELD_ENUM(welcome, auth_required, 1),
    FIELD(welcome, stream_index, FT_U16), FIELD(welcome, max_payload, FT_U64),
    FIELD_BYTES(welcome, session_id),     FIELD_BYTES(welcome, nonce),
    FIELD(welcome, server_name, FT_STR),
};

static const struct field fields_auth[] = {FIELD_BYTES(auth, mac)};
static const struct field fields_ok[] = {FIELD(ok, value, FT_U64)};
static const struct field fields_error[] = {
    FIELD(error, code, FT_I32),
    FIELD(error, text, FT_STR),
};
static const struct field fields_ping[] = {FIELD(ping, timestamp_ns, FT_U64)};
static const struct field fields_queue[] = {FIELD(queue, queue, FT_STR)};
static const struct field fields_put_ok[] = {FIELD(put_ok, msg_id, FT_U64)};

static const struct field fields_get[] = {
    FIELD(get, credit_msgs, FT_U32),
    FIELD(get, credit_bytes, FT_U64),
    FIELD(get, queue, FT_STR),
};

static const struct field fields_deliver[] = {
    FIELD(deliver, delivery_id, FT_U64),
    FIELD(deliver, msg_id, FT_U64),
    FIELD(deliver, attempt, FT_U32),
    FIELD(deliver, queue, FT_STR),
};

static const struct field fields_ack[] = {FIELD(ack, delivery_id, FT_U64)};

static const struct field fields_limit[] = {
    FIELD(limit, max_message, FT_U64),
    FIELD(limit, queue, FT_STR),
};

static const struct field fields_nack[] = {
    FIELD(nack, delivery_id, FT_U64),
    FIELD(nack, delay_ms, FT_U32),
    FIELD_ENUM(nack, requeue, 1),
};

static const struct field fields_ack_range[] = {
    FIELD(ack_range, ranges, FT_RANGES),
};

static const struct field fields_nack_range[] = {
    FIELD(nack_range, delay_ms, FT_U32),
    FIELD_ENUM(nack_range, requeue, 1),
    FIELD(nack_range, ranges, FT_RANGES),
};

static const struct field fields_put_ok_range[] = {
    FIELD(put_ok_range, count, FT_U32),
    FIELD(put_ok_range, msg_id, FT_U64),
};

static const struct field fields_extend[] = {
    FIELD(extend, delivery_id, FT_U64),
    FIELD(extend, lease_ms, FT_U32),
};

static const struct field fields_declare[] = {
    /* kind | durability << 4; the gateway checks the combination. */
    FIELD_ENUM(declare, kind,
               SCIMQ_PROTO_QUEUE_BEST_EFFORT |
                   SCIMQ_PROTO_DURABILITY_SYNC
                       << SCIMQ_PROTO_QUEUE_DURABILITY_SHIFT),
    FIELD(declare, ack_timeout_ms, FT_U32),
    FIELD(declare, max_attempts, FT_U32),
    FIELD(declare, max_bytes, FT_U64),
    FIELD(declare, queue, FT_STR),
    FIELD(declare, dead_letter, FT_STR),
};

static const struct field fields_pair[] = {
    FIELD(pair, queue, FT_STR),
    FIELD(pair, target, FT_STR),
};

static const struct field fields_move[] = {
    FIELD(move, max_msgs, FT_U64),
    FIELD(move, queue, FT_STR),
    FIELD(move, target, FT_STR),
};

/* REPORT: the body is checked by scimq_report_decode() (report.c). */
static const struct field fields_report[] = {FIELD(report, body, FT_STR)};

struct opcode_info {
    const char *name;
    const struct field *fields;
    size_t nfields;
    bool has_blocks;
};

#define FIELDS_OF(kind)                                                        \
    fields_##kind, sizeof(fields_##kind) / sizeof(fields_##kind[0])

static const struct opcode_info opcodes[256] = {
#define OPCODE_INFO(name, num, kind, blocks)                                   \
    [num] = {#name, FIELDS_OF(kind), blocks},
    SCIMQ_PROTO_OPCODE_MAP(OPCODE_INFO)
#undef OPCODE_INFO
};

/* ------------------------------------------------------------------------ */

static const struct opcode_info *
opcode_lookup(unsigned int opcode)
{
    if (opcode > 255 || opcodes[opcode].name == NULL)
        return NULL;
    return &opcodes[opcode];
}

int
scimq__proto_opcode_known(unsigned int opcode)
{
    return opcode_lookup(opcode) != NULL;
}

const char *
scimq_proto_opcode_name(unsigned int opcode)
{
    const struct opcode_info *info = opcode_lookup(opcode);

    return info ? info->name : NULL;
}

int
scimq_proto_opcode_has_blocks(unsigned int opcode)
{
    const struct opcode_info *info = opcode_lookup(opcode);

    return info ? info->has_blocks : 0;
}

scimq_proto_range_t
scimq_proto_range_at(const scimq_proto_ranges_t *r, unsigned int i)
{
    scimq_proto_range_t v;
    const uint8_t *p;

    if (r->list != NULL)
        return r->list[i];
    p = r->wire + (size_t) i * SCIMQ_PROTO_RANGE_LEN;
    v.first = wire_get64(p);
    v.count = wire_get32(p + 8);
    return v;
}

/*
 * The one encoding of a set of ids: at least one range, none empty or
 * running past 2^64 - 1, ascending with a gap between neighbours (touching
 * ranges are one range); at most SCIMQ_PROTO_MAX_RANGE_IDS ids in all.
 */
static int
ranges_check(const scimq_proto_ranges_t *r)
{
    uint64_t next = 0; /* lowest first the next range may have */
    uint64_t ids = 0;

    if (r->n == 0 || r->n > SCIMQ_PROTO_MAX_RANGES)
        return SCIMQ_EPROTO_ARGS;
    for (unsigned int i = 0; i < r->n; i++) {
        scimq_proto_range_t v = scimq_proto_range_at(r, i);

        ids += v.count;
        if (v.count == 0 || ids > SCIMQ_PROTO_MAX_RANGE_IDS ||
            (i > 0 && v.first < next) || v.first > UINT64_MAX - (v.count - 1))
            return SCIMQ_EPROTO_ARGS;
        if (i + 1 < r->n && v.first + (v.count - 1) >= UINT64_MAX - 1)
            return SCIMQ_EPROTO_ARGS; /* no room for a gap and a next */
        next = v.first + (v.count - 1) + 2;
    }
    return 0;
}

/*
 * Semantic checks that the field table cannot express.  They apply to
 * both directions, so a frame this library encodes always decodes.
 */
static int
args_check(unsigned int opcode, const scimq_proto_args_t *a)
{
    switch (opcode) {
    case SCIMQ_PROTO_OP_HELLO:
        if (a->hello.version_min > a->hello.version_max ||
            a->hello.stream_count == 0 ||
            a->hello.stream_index >= a->hello.stream_count)
            return SCIMQ_EPROTO_ARGS;
        break;
    case SCIMQ_PROTO_OP_ACK_RANGE:
        return ranges_check(&a->ack_range.ranges);
    case SCIMQ_PROTO_OP_NACK_RANGE:
        return ranges_check(&a->nack_range.ranges);
    case SCIMQ_PROTO_OP_PUT_OK_RANGE:
        if (a->put_ok_range.count == 0 ||
            a->put_ok_range.msg_id > UINT64_MAX - (a->put_ok_range.count - 1))
            return SCIMQ_EPROTO_ARGS;
        break;
    default:
        break;
    }
    return 0;
}

int
scimq__proto_args_size(unsigned int opcode, const scimq_proto_args_t *a,
                       size_t *len_p)
{
    const struct opcode_info *info = opcode_lookup(opcode);
    size_t len = 0;

    if (info == NULL)
        return SCIMQ_EPROTO_OPCODE;
    for (size_t i = 0; i < info->nfields; i++) {
        const struct field *f = &info->fields[i];
        const uint8_t *v = (const uint8_t *) a + f->offset;

        switch (f->type) {
        case FT_NONE:
            break;
        case FT_U8:
            if (f->limit != 0 && *v > f->limit)
                return SCIMQ_EPROTO_ARGS;
            len += 1;
            break;
        case FT_U16:
            len += 2;
            break;
        case FT_U32:
        case FT_I32:
            len += 4;
            break;
        case FT_U64:
            len += 8;
            break;
        case FT_BYTES:
            len += f->size;
            break;
        case FT_STR: {
            const scimq_proto_str_t *s = (const scimq_proto_str_t *) v;

            if (s->len > 0 && s->ptr == NULL)
                return SCIMQ_EINVAL;
            len += 2 + (size_t) s->len;
            break;
        }
        case FT_RANGES: {
            const scimq_proto_ranges_t *r = (const scimq_proto_ranges_t *) v;

            if (r->n > 0 && r->list == NULL && r->wire == NULL)
                return SCIMQ_EINVAL;
            len += 2 + (size_t) r->n * SCIMQ_PROTO_RANGE_LEN;
            break;
        }
        }
    }
    if (len > SCIMQ_PROTO_MAX_ARGS_LEN)
        return SCIMQ_EPROTO_ARGS;
    *len_p = len;
    return args_check(opcode, a);
}

void
scimq__proto_args_write(unsigned int opcode, const scimq_proto_args_t *a,
                        uint8_t *p)
{
    const struct opcode_info *info = opcode_lookup(opcode);

    for (size_t i = 0; info != NULL && i < info->nfields; i++) {
        const struct field *f = &info->fields[i];
        const uint8_t *v = (const uint8_t *) a + f->offset;
        const scimq_proto_str_t *s;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
        int32_t i32;

        switch (f->type) {
        case FT_NONE:
            break;
        case FT_U8:
            wire_put8(p, *v);
            p += 1;
            break;
        case FT_U16:
            memcpy(&u16, v, sizeof(u16));
            wire_put16(p, u16);
            p += 2;
            break;
        case FT_U32:
            memcpy(&u32, v, sizeof(u32));
            wire_put32(p, u32);
            p += 4;
            break;
        case FT_I32:
            memcpy(&i32, v, sizeof(i32));
            wire_put32(p, (uint32_t) i32);
            p += 4;
            break;
        case FT_U64:
            memcpy(&u64, v, sizeof(u64));
            wire_put64(p, u64);
            p += 8;
            break;
        case FT_BYTES:
            memcpy(p, v, f->size);
            p += f->size;
            break;
        case FT_STR:
            s = (const scimq_proto_str_t *) v;
            wire_put16(p, s->len);
            if (s->len > 0)
                memcpy(p + 2, s->ptr, s->len);
            p += 2 + (size_t) s->len;
            break;
        case FT_RANGES: {
            const scimq_proto_ranges_t *r = (const scimq_proto_ranges_t *) v;

            wire_put16(p, r->n);
            p += 2;
            for (unsigned int k = 0; k < r->n; k++) {
                scimq_proto_range_t g = scimq_proto_range_at(r, k);

                wire_put64(p, g.first);
                wire_put32(p + 8, g.count);
                p += SCIMQ_PROTO_RANGE_LEN;
            }
            break;
        }
        }
    }
}

int
scimq__proto_args_read(unsigned int opcode, const uint8_t *p, size_t len,
                       scimq_proto_args_t *a)
{
    const struct opcode_info *info = opcode_lookup(opcode);
    const uint8_t *end = p + len;

    if (info == NULL)
        return SCIMQ_EPROTO_OPCODE;
    memset(a, 0, sizeof(*a));
    for (size_t i = 0; i < info->nfields; i++) {
        const struct field *f = &info->fields[i];
        uint8_t *v = (uint8_t *) a + f->offset;
        size_t need;

        switch (f->type) {
        case FT_NONE:
            need = 0;
            break;
        case FT_U8:
            need = 1;
            break;
        case FT_U16:
        case FT_STR:
        case FT_RANGES:
            need = 2;
            break;
        case FT_U32:
        case FT_I32:
            need = 4;
            break;
        case FT_U64:
            need = 8;
            break;
        case FT_BYTES:
        default:
            need = f->size;
            break;
        }
        if ((size_t) (end - p) < need)
            return SCIMQ_EPROTO_ARGS;

        switch (f->type) {
        case FT_NONE:
            break;
        case FT_U8:
            *v = wire_get8(p);
            if (f->limit != 0 && *v > f->limit)
                return SCIMQ_EPROTO_ARGS;
            break;
        case FT_U16: {
            uint16_t u16 = wire_get16(p);
            memcpy(v, &u16, sizeof(u16));
            break;
        }
        case FT_U32: {
            uint32_t u32 = wire_get32(p);
            memcpy(v, &u32, sizeof(u32));
            break;
        }
        case FT_I32: {
            int32_t i32 = (int32_t) wire_get32(p);
            memcpy(v, &i32, sizeof(i32));
            break;
        }
        case FT_U64: {
            uint64_t u64 = wire_get64(p);
            memcpy(v, &u64, sizeof(u64));
            break;
        }
        case FT_BYTES:
            memcpy(v, p, f->size);
            break;
        case FT_STR: {
            scimq_proto_str_t s;

            s.len = wire_get16(p);
            if ((size_t) (end - p) - 2 < s.len)
                return SCIMQ_EPROTO_ARGS;
            s.ptr = (const char *) p + 2;
            memcpy(v, &s, sizeof(s));
            need += s.len;
            break;
        }
        case FT_RANGES: {
            scimq_proto_ranges_t r = {NULL, NULL, 0};

            r.n = wire_get16(p);
            if (((size_t) (end - p) - 2) / SCIMQ_PROTO_RANGE_LEN < r.n)
                return SCIMQ_EPROTO_ARGS;
            r.wire = p + 2;
            memcpy(v, &r, sizeof(r));
            need += (size_t) r.n * SCIMQ_PROTO_RANGE_LEN;
            break;
        }
        }
        p += need;
    }
    if (p != end)
        return SCIMQ_EPROTO_ARGS; /* trailing bytes: not this version */
    return args_check(opcode, a);
}
