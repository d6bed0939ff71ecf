/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Writing a whole iovec list: the step that every write loop over an iovec
 * list repeats after a short write.
 */
#ifndef SCIMQ_COMMON_IOV_H
#define SCIMQ_COMMON_IOV_H

#include <stddef.h>
#include <sys/uio.h>

/*
 * Drops the first done bytes of the list iov[0..*n): entries written whole
 * are skipped, a partly written one is advanced in place.  Returns the new
 * first entry and sets *n to the entries left (0 once done covers them
 * all).
 */
struct iovec *scimq__iov_advance(struct iovec *iov, int *n, size_t done);

#endif
