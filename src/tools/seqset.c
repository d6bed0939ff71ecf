/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <scimq/error.h>

#include "seqset.h"

int
scimq__seqset_add(struct scimq_seqset *s, uint64_t seq)
{
    if (seq >= SCIMQ_SEQSET_MAX)
        return SCIMQ_ERANGE;
    if (seq >= s->nbits) {
        uint64_t bits = s->nbits ? s->nbits : 4096;
        uint8_t *p;

        while (bits <= seq)
            bits *= 2;
        p = realloc(s->bits, (size_t) (bits / 8));
        if (p == NULL)
            return SCIMQ_ENOMEM;
        memset(p + s->nbits / 8, 0, (size_t) ((bits - s->nbits) / 8));
        s->bits = p;
        s->nbits = bits;
    }
    if (seq + 1 > s->max_plus1)
        s->max_plus1 = seq + 1;
    if (s->bits[seq / 8] & (1u << (seq % 8))) {
        s->duplicates++;
        return 0;
    }
    s->bits[seq / 8] |= (uint8_t) (1u << (seq % 8));
    s->distinct++;
    return 1;
}

uint64_t
scimq__seqset_missing(const struct scimq_seqset *s, uint64_t expect)
{
    uint64_t end = expect > s->max_plus1 ? expect : s->max_plus1;

    return end - s->distinct;
}

void
scimq__seqset_fini(struct scimq_seqset *s)
{
    free(s->bits);
    memset(s, 0, sizeof(*s));
}
