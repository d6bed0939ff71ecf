/* SPDX-License-Identifier: BSD-3-Clause */
/* The gateway's clock: CLOCK_MONOTONIC (never steps with the wall clock). */
#ifndef SCIMQ_GATEWAY_CLOCK_H
#define SCIMQ_GATEWAY_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t
gw_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static inline uint64_t
gw_now_ms(void)
{
    return gw_now_us() / 1000u;
}

#endif /* SCIMQ_GATEWAY_CLOCK_H */
