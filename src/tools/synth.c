/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <scimq/error.h>
#include <scimq/proto.h>

#include "iofd.h"
#include "protocol/wire.h"
#include "seqset.h"
#include "synth.h"

static const char synth_magic[8] = {'S', 'C', 'I', 'M', 'Q', 'S', 'Y', 'N'};

/* splitmix64: fast, and distinct streams for distinct seeds. */
static inline uint64_t
splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int
scimq__synth_fill(void *buf, size_t len, uint64_t seq)
{
    uint8_t *p = buf;
    uint64_t state = seq ^ 0x5343494D51ull;
    size_t i = SCIMQ_SYNTH_HEADER_LEN;

    if (buf == NULL || len < SCIMQ_SYNTH_HEADER_LEN)
        return SCIMQ_EINVAL;
    /* Big-endian like every other SciMQ byte, so the filler is portable. */
    for (; i + 8 <= len; i += 8)
        wire_put64(p + i, splitmix64(&state));
    if (i < len) {
        uint8_t last[8];

        wire_put64(last, splitmix64(&state));
        memcpy(p + i, last, len - i);
    }
    memcpy(p, synth_magic, sizeof(synth_magic));
    wire_put64(p + 8, seq);
    wire_put64(p + 16, len);
    wire_put32(p + 24, scimq_proto_crc32c(0, p + SCIMQ_SYNTH_HEADER_LEN,
                                          len - SCIMQ_SYNTH_HEADER_LEN));
    wire_put32(p + 28, scimq_proto_crc32c(0, p, 28));
    return 0;
}

int
scimq__synth_verify(const void *buf, size_t len, uint64_t *seq_p)
{
    const uint8_t *p = buf;

    if (buf == NULL || len < SCIMQ_SYNTH_HEADER_LEN ||
        memcmp(p, synth_magic, sizeof(synth_magic)) != 0)
        return SCIMQ_EINVAL;
    if (wire_get32(p + 28) != scimq_proto_crc32c(0, p, 28))
        return SCIMQ_EPROTO_DATASUM;
    if (wire_get64(p + 16) != len)
        return SCIMQ_EPROTO_DATASUM; /* cut short or padded on the way */
    if (wire_get32(p + 24) != scimq_proto_crc32c(0, p + SCIMQ_SYNTH_HEADER_LEN,
                                                 len - SCIMQ_SYNTH_HEADER_LEN))
        return SCIMQ_EPROTO_DATASUM;
    *seq_p = wire_get64(p + 8);
    return 0;
}

uint64_t
scimq__synth_size(uint64_t seq, uint64_t min, uint64_t max)
{
    uint64_t state = seq ^ 0x53495a45ull; /* "SIZE" */
    double u, size;

    if (min >= max)
        return min;
    u = (double) (splitmix64(&state) >> 11) * 0x1.0p-53;
    size = (double) min * pow((double) max / (double) min, u * u * u * u);
    if (size < (double) min)
        return min;
    if (size > (double) max)
        return max;
    return (uint64_t) size;
}

const scimq_block_t *
scimq__synth_block(const scimq_block_t *blocks, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        if (blocks[i].name != NULL && strcmp(blocks[i].name, "data") == 0)
            return &blocks[i];
    return count > 0 ? &blocks[0] : NULL;
}

int
scimq__synth_record(const scimq_block_t *b, struct scimq_seqset *seqs,
                    int log_fd, uint64_t *seq_p)
{
    char line[32];
    int n, rc = scimq__synth_verify(b->data, (size_t) b->len, seq_p);

    if (rc != 0)
        return rc;
    (void) scimq__seqset_add(seqs, *seq_p);
    if (log_fd >= 0) {
        n = snprintf(line, sizeof(line), "%" PRIu64 "\n", *seq_p);
        (void) scimq__write_all(log_fd, line, (size_t) n);
    }
    return 0;
}
