/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Leveled, subsystem-tagged logging.
 *
 *   SCIMQ_LOG_LEVEL=warn                    every subsystem at WARN
 *   SCIMQ_LOG_LEVEL=info,gateway=debug      per-subsystem overrides
 *   SCIMQ_LOG_SUBSYS=gateway,proto          only these log below ERROR
 *
 * The macros test whether a message is enabled before evaluating their
 * arguments, preserve errno, and compile DEBUG/TRACE out of non-debug
 * builds.  Each message is one write(2), so lines from threads and from
 * the ranks of a job never interleave.
 */
#ifndef SCIMQ_COMMON_LOG_H
#define SCIMQ_COMMON_LOG_H

#include <stdatomic.h>
#include <stdint.h>

#include <scimq/export.h>

enum scimq_log_level {
    SCIMQ_LOG_NONE = 0,
    SCIMQ_LOG_ERROR,
    SCIMQ_LOG_WARN,
    SCIMQ_LOG_INFO,
    SCIMQ_LOG_DEBUG,
    SCIMQ_LOG_TRACE
};

/* The subsystems: X(ENUM, "name"). */
#define SCIMQ_LOG_SUBSYS_MAP(X)                                                \
    X(CORE, "core")                                                            \
    X(PARAM, "param")                                                          \
    X(PROTO, "proto")                                                          \
    X(NET, "net")                                                              \
    X(GATEWAY, "gateway")                                                      \
    X(QUEUE, "queue")                                                          \
    X(CLIENT, "client")                                                        \
    X(TOOL, "tool")                                                            \
    X(MPI, "mpi")                                                              \
    X(FABRIC, "fabric")                                                        \
    X(TOPO, "topo")                                                            \
    X(SHIM, "shim")

enum scimq_log_subsys {
#define SCIMQ_LOG_SUBSYS_ENUM(e, name) SCIMQ_SUBSYS_##e,
    SCIMQ_LOG_SUBSYS_MAP(SCIMQ_LOG_SUBSYS_ENUM)
#undef SCIMQ_LOG_SUBSYS_ENUM
        SCIMQ_SUBSYS_COUNT
};

/* Effective level per subsystem; -1 until the first use configures it. */
extern _Atomic int scimq__log_levels[SCIMQ_SUBSYS_COUNT];

/* Reads SCIMQ_LOG_LEVEL / SCIMQ_LOG_SUBSYS (through the param table). */
void scimq__log_configure(void);

static inline int
scimq__log_enabled(int level, int subsys)
{
    int cur =
        atomic_load_explicit(&scimq__log_levels[subsys], memory_order_relaxed);

    if (cur < 0) {
        scimq__log_configure();
        cur = atomic_load_explicit(&scimq__log_levels[subsys],
                                   memory_order_relaxed);
    }
    return level <= cur;
}

void scimq__log_write(int level, int subsys, const char *file, int line,
                      const char *fmt, ...) SCIMQ_PRINTF(5, 6);

/*
 * Rate limiting for hot paths: returns non-zero at most once per interval
 * for the call site owning *last_ns.
 */
int scimq__log_sparse_ok(_Atomic uint64_t *last_ns, uint64_t interval_ns);

#define SCIMQ_LOG(level, subsys, ...)                                          \
    do {                                                                       \
        if (scimq__log_enabled((level), SCIMQ_SUBSYS_##subsys))                \
            scimq__log_write((level), SCIMQ_SUBSYS_##subsys, __FILE__,         \
                             __LINE__, __VA_ARGS__);                           \
    } while (0)

#define SCIMQ_LOG_ERROR(subsys, ...)                                           \
    SCIMQ_LOG(SCIMQ_LOG_ERROR, subsys, __VA_ARGS__)
#define SCIMQ_LOG_WARN(subsys, ...)                                            \
    SCIMQ_LOG(SCIMQ_LOG_WARN, subsys, __VA_ARGS__)
#define SCIMQ_LOG_INFO(subsys, ...)                                            \
    SCIMQ_LOG(SCIMQ_LOG_INFO, subsys, __VA_ARGS__)
#ifdef SCIMQ_DEBUG
#define SCIMQ_LOG_DEBUG(subsys, ...)                                           \
    SCIMQ_LOG(SCIMQ_LOG_DEBUG, subsys, __VA_ARGS__)
#define SCIMQ_LOG_TRACE(subsys, ...)                                           \
    SCIMQ_LOG(SCIMQ_LOG_TRACE, subsys, __VA_ARGS__)
#else
/* Compiled out, but the format is still checked against its arguments. */
#define SCIMQ_LOG_DEBUG(subsys, ...)                                           \
    do {                                                                       \
        if (0)                                                                 \
            scimq__log_write(SCIMQ_LOG_DEBUG, SCIMQ_SUBSYS_##subsys, "", 0,    \
                             __VA_ARGS__);                                     \
    } while (0)
#define SCIMQ_LOG_TRACE(subsys, ...) SCIMQ_LOG_DEBUG(subsys, __VA_ARGS__)
#endif

/* At most one message per interval_ms from this call site. */
#define SCIMQ_LOG_SPARSE(level, subsys, interval_ms, ...)                      \
    do {                                                                       \
        static _Atomic uint64_t scimq__sparse_last;                            \
        if (scimq__log_enabled((level), SCIMQ_SUBSYS_##subsys) &&              \
            scimq__log_sparse_ok(&scimq__sparse_last,                          \
                                 (uint64_t) (interval_ms) *1000000u))          \
            scimq__log_write((level), SCIMQ_SUBSYS_##subsys, __FILE__,         \
                             __LINE__, __VA_ARGS__);                           \
    } while (0)

/*
 * Logs and jumps: the one check macro family (no macro returns).
 *   SCIMQ_CHECK_GOTO(GATEWAY, fd < 0, fail_socket, rc, SCIMQ_EMFILE,
 *                    "cannot create socket: %s", strerror(errno));
 */
#define SCIMQ_CHECK_GOTO(subsys, cond, label, rc, code, ...)                   \
    do {                                                                       \
        if (cond) {                                                            \
            (rc) = (code);                                                     \
            SCIMQ_LOG_ERROR(subsys, __VA_ARGS__);                              \
            goto label;                                                        \
        }                                                                      \
    } while (0)

/* Same, for a call that already returned a SCIMQ_E* code in rc. */
#define SCIMQ_CHECK_RC_GOTO(subsys, rc, label, ...)                            \
    do {                                                                       \
        if ((rc) < 0) {                                                        \
            SCIMQ_LOG_ERROR(subsys, __VA_ARGS__);                              \
            goto label;                                                        \
        }                                                                      \
    } while (0)

/*
 * Sends log output to path (appending) instead of stderr; path NULL goes
 * back to stderr.  Calling it again with the same path reopens the file
 * (SIGHUP after log rotation).  Returns 0 or a SCIMQ_E* code.
 */
int scimq__log_open(const char *path);

/* Parses "error|warn|info|debug|trace|none"; returns the level or -1. */
int scimq__log_level_parse(const char *s);

#endif /* SCIMQ_COMMON_LOG_H */
