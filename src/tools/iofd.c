/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <unistd.h>

#include <scimq/error.h>

#include "common/error_internal.h"
#include "common/iov.h"
#include "iofd.h"

int
scimq__write_all(int fd, const void *buf, size_t len)
{
    struct iovec iov = {(void *) (uintptr_t) buf, len};

    return scimq__writev_all(fd, &iov, 1);
}

int
scimq__writev_all(int fd, struct iovec *iov, int iovcnt)
{
    while (iovcnt > 0) {
        ssize_t n = writev(fd, iov, iovcnt > IOV_MAX ? IOV_MAX : iovcnt);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return scimq__err_from_errno(errno);
        }
        iov = scimq__iov_advance(iov, &iovcnt, (size_t) n);
    }
    return 0;
}

ssize_t
scimq__read_some(int fd, void *buf, size_t len)
{
    for (;;) {
        ssize_t n = read(fd, buf, len);

        if (n >= 0)
            return n;
        if (errno != EINTR)
            return scimq__err_from_errno(errno);
    }
}

ssize_t
scimq__readv_some(int fd, const struct iovec *iov, int iovcnt)
{
    for (;;) {
        ssize_t n = readv(fd, iov, iovcnt);

        if (n >= 0)
            return n;
        if (errno != EINTR)
            return scimq__err_from_errno(errno);
    }
}
