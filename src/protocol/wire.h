/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Big-endian field helpers for SciMP.  Fields are written and read byte
 * by byte: no struct is ever cast onto the wire, so the code is free of
 * alignment and host byte order concerns.
 */
#ifndef SCIMQ_PROTOCOL_WIRE_H
#define SCIMQ_PROTOCOL_WIRE_H

#include <stdint.h>

static inline void
wire_put8(uint8_t *p, uint8_t v)
{
    p[0] = v;
}

static inline void
wire_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t) (v >> 8);
    p[1] = (uint8_t) v;
}

static inline void
wire_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t) (v >> 24);
    p[1] = (uint8_t) (v >> 16);
    p[2] = (uint8_t) (v >> 8);
    p[3] = (uint8_t) v;
}

static inline void
wire_put64(uint8_t *p, uint64_t v)
{
    wire_put32(p, (uint32_t) (v >> 32));
    wire_put32(p + 4, (uint32_t) v);
}

static inline uint8_t
wire_get8(const uint8_t *p)
{
    return p[0];
}

static inline uint16_t
wire_get16(const uint8_t *p)
{
    return (uint16_t) ((uint16_t) p[0] << 8 | p[1]);
}

static inline uint32_t
wire_get32(const uint8_t *p)
{
    return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 |
           (uint32_t) p[2] << 8 | (uint32_t) p[3];
}

static inline uint64_t
wire_get64(const uint8_t *p)
{
    return (uint64_t) wire_get32(p) << 32 | wire_get32(p + 4);
}

/* Offsets of the fixed header fields (doc/scimp.md, "Fixed header"). */
enum wire_fixed_offset {
    WIRE_OFF_MAGIC = 0,        /* u32 */
    WIRE_OFF_VERSION = 4,      /* u8 */
    WIRE_OFF_OPCODE = 5,       /* u8 */
    WIRE_OFF_FLAGS = 6,        /* u16 */
    WIRE_OFF_REQUEST_ID = 8,   /* u64 */
    WIRE_OFF_HEADER_LEN = 16,  /* u32 */
    WIRE_OFF_ARGS_LEN = 20,    /* u16 */
    WIRE_OFF_RESERVED = 22,    /* u16, zero */
    WIRE_OFF_BLOCK_COUNT = 24, /* u32 */
    WIRE_OFF_HEADER_SUM = 28,  /* u32, CRC32C of the header */
    WIRE_OFF_PAYLOAD_LEN = 32, /* u64 */
    WIRE_FIXED_END = 40
};

#endif /* SCIMQ_PROTOCOL_WIRE_H */
