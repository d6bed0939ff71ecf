/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The set of sequence numbers a receiver has verified: counts duplicates
 * and, at the end, losses (numbers below the highest seen, or below an
 * expected count, that never arrived).
 */
#ifndef SCIMQ_TOOLS_SEQSET_H
#define SCIMQ_TOOLS_SEQSET_H

#include <stdint.h>

/* Largest sequence number tracked (a 32 MiB bitmap). */
#define SCIMQ_SEQSET_MAX (1ull << 28)

struct scimq_seqset {
    uint8_t *bits;
    uint64_t nbits;
    uint64_t max_plus1; /* highest number seen + 1 */
    uint64_t distinct;
    uint64_t duplicates;
};

/* Adds seq.  Returns 1 if it was new, 0 if a duplicate, or SCIMQ_ERANGE /
 * SCIMQ_ENOMEM. */
int scimq__seqset_add(struct scimq_seqset *s, uint64_t seq);

/* Numbers in [0, max(expect, highest seen + 1)) never added. */
uint64_t scimq__seqset_missing(const struct scimq_seqset *s, uint64_t expect);

void scimq__seqset_fini(struct scimq_seqset *s);

#endif /* SCIMQ_TOOLS_SEQSET_H */
