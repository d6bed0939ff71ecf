/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Power-of-two histograms of microseconds (journal syncs, an MPI job's
 * service times): bucket 0 holds 0, bucket b > 0 holds values below 2^b
 * and at least 2^(b-1); the last bucket holds everything larger.
 */
#ifndef SCIMQ_GATEWAY_LOG2HIST_H
#define SCIMQ_GATEWAY_LOG2HIST_H

#include <stdint.h>

/*
 * The upper bound of the bucket that holds quantile q (0..1) of count
 * values: 1 for bucket 0, 2^b for bucket b, and max (the largest value
 * seen) when it falls in the last, open-ended bucket; 0 without values.
 */
uint64_t gw_log2_quantile(const uint64_t *bucket, unsigned int nbuckets,
                          uint64_t count, uint64_t max, double q);

#endif
