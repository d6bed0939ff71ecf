/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdint.h>

#include "iov.h"

struct iovec *
scimq__iov_advance(struct iovec *iov, int *n, size_t done)
{
    while (*n > 0 && done >= iov->iov_len) {
        done -= iov->iov_len;
        iov++;
        (*n)--;
    }
    if (*n > 0) {
        iov->iov_base = (uint8_t *) iov->iov_base + done;
        iov->iov_len -= done;
    }
    return iov;
}
