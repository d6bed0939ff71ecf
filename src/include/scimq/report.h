/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * \file report.h
 * REPORT (SciMP opcode 40): what an MPI agent tells the gateway about its
 * job, every few seconds and once more at the end: the job, the ranks it
 * serves and their counts, how long ranks took per message, the libfabric
 * provider in use and its pool.  The gateway keeps the last report of each
 * session and shows it in STATS, /metrics and the live page.
 *
 * The report travels as the one string argument of a REPORT frame; its
 * layout (doc/scimp.md, "REPORT") is bounded: at most
 * SCIMQ_REPORT_MAX_RANKS ranks, names of at most SCIMQ_REPORT_MAX_NAME
 * bytes, SCIMQ_REPORT_MAX_LEN bytes in all.  This codec is pure (no I/O,
 * no allocation) like the rest of the protocol library.
 */
#ifndef SCIMQ_REPORT_H
#define SCIMQ_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include <scimq/client.h>
#include <scimq/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Layout version of the body (its first byte). */
#define SCIMQ_REPORT_FORMAT 1
/** REPORT is sent only on sessions of this version or later (SciMP 1.1). */
#define SCIMQ_PROTO_SESSION_VERSION_REPORT 3
/** Most per-rank entries in one report (an agent serves one node). */
#define SCIMQ_REPORT_MAX_RANKS 256u
/** Longest job id and provider name, in bytes. */
#define SCIMQ_REPORT_MAX_NAME 64u
/**
 * Service-time histogram buckets: bucket 0 counts times under 1 us,
 * bucket b (1..30) times in [2^(b-1), 2^b) us, bucket 31 everything from
 * 2^30 us (about 18 minutes) up.
 */
#define SCIMQ_REPORT_BUCKETS 32u
/** Bytes of the fixed part, of one rank entry, and the largest body. */
#define SCIMQ_REPORT_FIXED_LEN (52u + 8u * SCIMQ_REPORT_BUCKETS)
#define SCIMQ_REPORT_RANK_LEN 20u
#define SCIMQ_REPORT_MAX_LEN                                                   \
    (SCIMQ_REPORT_FIXED_LEN + 2u * (1u + SCIMQ_REPORT_MAX_NAME) + 2u +         \
     SCIMQ_REPORT_RANK_LEN * SCIMQ_REPORT_MAX_RANKS)

/** flags: the agent's last report (its job ends). */
#define SCIMQ_REPORT_F_FINAL (1u << 0)
#define SCIMQ_REPORT_F_ALL SCIMQ_REPORT_F_FINAL

/** One rank served by the agent (its rank in the node's communicator). */
typedef struct scimq_report_rank {
    uint32_t rank;
    uint64_t delivered; /**< messages handed to it */
    uint64_t acked;     /**< of them, processed (DONE) and acknowledged */
} scimq_report_rank_t;

/** One agent's report; strings are NUL-terminated here, not on the wire. */
typedef struct scimq_report {
    uint8_t flags;      /**< SCIMQ_REPORT_F_* */
    uint16_t agent;     /**< this agent's index in the job (its node) */
    uint16_t agents;    /**< agents in the job */
    uint16_t ranks;     /**< ranks this agent serves */
    uint32_t period_ms; /**< time to the next report (0: none follows) */
    uint64_t pool_used, pool_total; /**< registered pool bytes */
    /** Service time: from a message's hand-out to the rank's DONE. */
    uint64_t service_count, service_sum_us, service_max_us;
    uint64_t service_bucket[SCIMQ_REPORT_BUCKETS];
    char job[SCIMQ_REPORT_MAX_NAME + 1];      /**< 1.. bytes, see below */
    char provider[SCIMQ_REPORT_MAX_NAME + 1]; /**< e.g. "shm", "tcp;ofi_rxm" */
    uint16_t nrank; /**< entries in rank[]: at most ranks */
    scimq_report_rank_t rank[SCIMQ_REPORT_MAX_RANKS];
} scimq_report_t;

/** The histogram bucket of a service time of us microseconds. */
SCIMQ_EXPORT unsigned int scimq_report_bucket(uint64_t us);

/**
 * Encodes r into buf (cap bytes; SCIMQ_REPORT_MAX_LEN always suffices).
 *
 * \return 0 and *len_p; SCIMQ_EPROTO_ARGS when r breaks a rule that
 *         scimq_report_decode() checks (the same rules: an encoded report
 *         always decodes); SCIMQ_ENOBUFS.
 */
SCIMQ_EXPORT int scimq_report_encode(const scimq_report_t *r, uint8_t *buf,
                                     size_t cap, size_t *len_p);

/**
 * Decodes and checks a report body of len bytes.
 *
 * \param why_p on failure, a static sentence naming the first rule broken
 *              (for the ERROR reply); may be NULL.
 * \return 0; SCIMQ_EPROTO_ARGS (malformed, or over a bound: more than
 *         SCIMQ_REPORT_MAX_LEN bytes, more ranks than SCIMQ_REPORT_MAX_RANKS,
 *         a name too long or with a byte outside [A-Za-z0-9._:;+@-],
 *         unknown format or flags, ranks not ascending or not below ranks,
 *         acked above delivered, buckets not summing to service_count,
 *         trailing bytes).
 */
SCIMQ_EXPORT int scimq_report_decode(const void *buf, size_t len,
                                     scimq_report_t *r, const char **why_p);

/**
 * Sends r as a REPORT on the session of c (any of its streams), without
 * waiting: nothing answers a good report, an ERROR (logged by the session)
 * a refused one.
 *
 * \return 0 once queued; SCIMQ_ENOTSUP when the session's version is below
 *         SCIMQ_PROTO_SESSION_VERSION_REPORT (an older gateway); as
 *         scimq_report_encode(); the session's error once it is lost.
 * \note Thread-safe, like the rest of the client.
 */
SCIMQ_EXPORT int scimq_session_report(scimq_client_t *c,
                                      const scimq_report_t *r);

#ifdef __cplusplus
}
#endif

#endif /* SCIMQ_REPORT_H */
