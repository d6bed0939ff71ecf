/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include "log2hist.h"

uint64_t
gw_log2_quantile(const uint64_t *bucket, unsigned int nbuckets, uint64_t count,
                 uint64_t max, double q)
{
    uint64_t seen = 0, want = (uint64_t) ((double) count * q + 0.5);

    if (count == 0)
        return 0;
    if (want == 0)
        want = 1;
    for (unsigned int b = 0; b + 1 < nbuckets; b++) {
        seen += bucket[b];
        if (seen >= want)
            return b == 0 ? 1 : UINT64_C(1) << b;
    }
    return max;
}
