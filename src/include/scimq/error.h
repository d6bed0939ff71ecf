/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * \file error.h
 * Error codes of every SciMQ API and of the SciMP wire protocol.
 *
 * Every code is negative.  Codes that have an errno counterpart carry the
 * Linux errno value (SCIMQ_EINVAL == -EINVAL on Linux); codes specific to
 * SciMQ start at SCIMQ_ERRNO_OFFSET.  The numbers are part of the wire
 * protocol (ERROR frames carry them), so they never change once released;
 * doc/scimp.md lists them.
 */
#ifndef SCIMQ_ERROR_H
#define SCIMQ_ERROR_H

#include <scimq/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/** First SciMQ-specific error number (codes below it mirror errno). */
#define SCIMQ_ERRNO_OFFSET 4000

/**
 * The one list of error codes: X(NAME, positive number, message).
 * It generates the enum below, scimq_strerror() and scimq_err_name().
 */
#define SCIMQ_ERROR_MAP(X)                                                     \
    X(EPERM, 1, "operation not permitted")                                     \
    X(ENOENT, 2, "no such queue or object")                                    \
    X(EINTR, 4, "interrupted")                                                 \
    X(EIO, 5, "input/output error")                                            \
    X(E2BIG, 7, "argument list too long")                                      \
    X(EBADF, 9, "bad file descriptor")                                         \
    X(EAGAIN, 11, "nothing available yet, try again")                          \
    X(ENOMEM, 12, "out of memory")                                             \
    X(EACCES, 13, "permission denied")                                         \
    X(EBUSY, 16, "resource busy")                                              \
    X(EEXIST, 17, "already exists")                                            \
    X(EINVAL, 22, "invalid argument")                                          \
    X(EMFILE, 24, "too many open files")                                       \
    X(ENOSPC, 28, "no space left")                                             \
    X(EPIPE, 32, "broken pipe")                                                \
    X(ERANGE, 34, "value out of range")                                        \
    X(ENAMETOOLONG, 36, "name too long")                                       \
    X(ENOSYS, 38, "function not implemented")                                  \
    X(EPROTO, 71, "protocol error")                                            \
    X(EOVERFLOW, 75, "value too large")                                        \
    X(EMSGSIZE, 90, "message too long")                                        \
    X(ENOTSUP, 95, "operation not supported")                                  \
    X(EADDRINUSE, 98, "address already in use")                                \
    X(EADDRNOTAVAIL, 99, "address not available on this host")                 \
    X(ENETUNREACH, 101, "network unreachable")                                 \
    X(ECONNABORTED, 103, "connection aborted")                                 \
    X(ECONNRESET, 104, "connection reset by peer")                             \
    X(ENOBUFS, 105, "no buffer space available")                               \
    X(ENOTCONN, 107, "not connected")                                          \
    X(ESHUTDOWN, 108, "shutting down")                                         \
    X(ETIMEDOUT, 110, "timed out")                                             \
    X(ECONNREFUSED, 111, "connection refused")                                 \
    X(EHOSTUNREACH, 113, "host unreachable")                                   \
    X(EALREADY, 114, "operation already in progress")                          \
    X(ECANCELED, 125, "operation canceled")                                    \
    X(EOS, 4001, "end of stream")                                              \
    X(EPROTO_MAGIC, 4002, "bad frame magic")                                   \
    X(EPROTO_VERSION, 4003, "unsupported protocol version")                    \
    X(EPROTO_OPCODE, 4004, "unknown opcode")                                   \
    X(EPROTO_FLAGS, 4005, "unknown or misplaced frame flags")                  \
    X(EPROTO_HDRLEN, 4006, "header length inconsistent or over limit")         \
    X(EPROTO_HDRSUM, 4007, "header checksum mismatch")                         \
    X(EPROTO_DATASUM, 4008, "payload checksum mismatch")                       \
    X(EPROTO_BLOCKS, 4009, "block count over limit or not allowed here")       \
    X(EPROTO_NAMELEN, 4010, "block name over limit")                           \
    X(EPROTO_TOOBIG, 4011, "payload over limit")                               \
    X(EPROTO_LENGTHS, 4012, "block lengths do not add up to the payload")      \
    X(EPROTO_ARGS, 4013, "malformed operation arguments")                      \
    X(EPROTO_RESERVED, 4014, "reserved field not zero")                        \
    X(EAUTH, 4015, "authentication failed")                                    \
    X(ECLOSED, 4016, "queue closed to producers")                              \
    X(ECONFIG, 4017, "invalid configuration")                                  \
    X(EFABRIC, 4018, "fabric (libfabric) error")                               \
    X(EMPI, 4019, "MPI error")                                                 \
    X(ESTATE, 4020, "call not valid in the current state")                     \
    X(EBUG, 4021, "internal error (a bug)")                                    \
    X(ESTOPPED, 4022, "stopped on request")

/** The error codes as negative values: SCIMQ_EINVAL, SCIMQ_EOS, ... */
enum scimq_error {
    SCIMQ_OK = 0,
#define SCIMQ_ERROR_ENUM(name, num, msg) SCIMQ_##name = -(num),
    SCIMQ_ERROR_MAP(SCIMQ_ERROR_ENUM)
#undef SCIMQ_ERROR_ENUM
};

/**
 * A human-readable message for an error code.
 *
 * \param err  0, a negative SCIMQ_E* code, or any other integer.
 * \return a static string; "unknown error" for values not in the list.
 * \note Thread-safe.
 */
SCIMQ_EXPORT const char *scimq_strerror(int err);

/**
 * The symbolic name of an error code ("SCIMQ_EINVAL").
 *
 * \return a static string; "SCIMQ_EUNKNOWN" for values not in the list.
 */
SCIMQ_EXPORT const char *scimq_err_name(int err);

/** Non-zero when err is one of the codes in SCIMQ_ERROR_MAP (or 0). */
SCIMQ_EXPORT int scimq_err_is_known(int err);

#ifdef __cplusplus
}
#endif

#endif /* SCIMQ_ERROR_H */
