/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CRC32C for SciMP, computed by ISA-L (crc32_iscsi is the Castagnoli CRC,
 * hardware accelerated where the CPU has it).  ISA-L takes an int length
 * and neither pre- nor post-inverts, so this wrapper walks large buffers in
 * chunks and applies the standard inversions, which makes results chain.
 */
#include "config.h"

#include <isa-l/crc.h>

#include <scimq/proto.h>

/* Largest chunk handed to ISA-L at once (fits its int length). */
#define CRC_CHUNK ((size_t) 1 << 30)

uint32_t
scimq_proto_crc32c(uint32_t crc, const void *data, size_t len)
{
    unsigned char *p = (unsigned char *) (uintptr_t) data;
    unsigned int raw = ~crc;

    while (len > 0) {
        size_t n = len < CRC_CHUNK ? len : CRC_CHUNK;

        raw = crc32_iscsi(p, (int) n, raw);
        p += n;
        len -= n;
    }
    return ~raw;
}
