/* SPDX-License-Identifier: BSD-3-Clause */
/* Blocking file-descriptor I/O for the command-line tools: EINTR retried,
 * short writes completed, errors as SCIMQ_E* codes. */
#ifndef SCIMQ_TOOLS_IOFD_H
#define SCIMQ_TOOLS_IOFD_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Writes all len bytes.  Returns 0 or a negative SCIMQ_E* code. */
int scimq__write_all(int fd, const void *buf, size_t len);

/* Writes every byte described by iov (which it may modify). */
int scimq__writev_all(int fd, struct iovec *iov, int iovcnt);

/* One read()/readv(): bytes read (0 at end of file) or a SCIMQ_E* code. */
ssize_t scimq__read_some(int fd, void *buf, size_t len);
ssize_t scimq__readv_some(int fd, const struct iovec *iov, int iovcnt);

#endif /* SCIMQ_TOOLS_IOFD_H */
