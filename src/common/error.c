/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Error strings, error translation at the library boundary, and the run-time
 * version.  Everything here is generated from SCIMQ_ERROR_MAP, so adding a
 * code means adding one line to error.h.
 */
#include "config.h"

#include <errno.h>

#include <scimq/scimq.h>

#include "error_internal.h"

/*
 * The errno-mirroring codes carry Linux numbers on the wire; on Linux they
 * must also equal -errno so that translation is the identity.
 */
#ifdef __linux__
/* Only the codes below the offset have an errno symbol to compare with. */
/* clang-format off */
#define SCIMQ_ERRNO_ONLY(X) \
    X(EPERM) \
    X(ENOENT) \
    X(EINTR) \
    X(EIO) \
    X(E2BIG) \
    X(EBADF) \
    X(EAGAIN) \
    X(ENOMEM) \
    X(EACCES) \
    X(EBUSY) \
    X(EEXIST) \
    X(EINVAL) \
    X(EMFILE) \
    X(ENOSPC) \
    X(EPIPE) \
    X(ERANGE) \
    X(ENAMETOOLONG) \
    X(ENOSYS) \
    X(EPROTO) \
    X(EOVERFLOW) \
    X(EMSGSIZE) \
    X(ENOTSUP) \
    X(EADDRINUSE) \
    X(EADDRNOTAVAIL) \
    X(ENETUNREACH) \
    X(ECONNABORTED) \
    X(ECONNRESET) \
    X(ENOBUFS) \
    X(ENOTCONN) \
    X(ESHUTDOWN) \
    X(ETIMEDOUT) \
    X(ECONNREFUSED) \
    X(EHOSTUNREACH) \
    X(EALREADY) \
    X(ECANCELED)
/* clang-format on */
#define CHECK_ONE(name)                                                        \
    _Static_assert(SCIMQ_##name == -name, "SCIMQ_" #name " != -" #name);
SCIMQ_ERRNO_ONLY(CHECK_ONE)
#endif

const char *
scimq_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
#define ERR_STR(name, num, msg)                                                \
    case -(num):                                                               \
        return msg;
        SCIMQ_ERROR_MAP(ERR_STR)
#undef ERR_STR
    default:
        return "unknown error";
    }
}

const char *
scimq_err_name(int err)
{
    switch (err) {
    case 0:
        return "SCIMQ_OK";
#define ERR_NAME(name, num, msg)                                               \
    case -(num):                                                               \
        return "SCIMQ_" #name;
        SCIMQ_ERROR_MAP(ERR_NAME)
#undef ERR_NAME
    default:
        return "SCIMQ_EUNKNOWN";
    }
}

int
scimq_err_is_known(int err)
{
    switch (err) {
    case 0:
#define ERR_KNOWN(name, num, msg) case -(num):
        SCIMQ_ERROR_MAP(ERR_KNOWN)
#undef ERR_KNOWN
        return 1;
    default:
        return 0;
    }
}

int
scimq__err_from_errno(int e)
{
    if (e < 0)
        e = -e;
    if (e == EWOULDBLOCK)
        return SCIMQ_EAGAIN;
    if (e == 0 || e >= SCIMQ_ERRNO_OFFSET || !scimq_err_is_known(-e))
        return SCIMQ_EIO;
    return -e;
}

unsigned int
scimq_version(void)
{
    return SCIMQ_VERSION_CURRENT;
}

const char *
scimq_version_string(void)
{
    return SCIMQ_VERSION_STRING;
}
