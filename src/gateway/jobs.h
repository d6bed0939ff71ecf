/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MPI jobs as their agents report them (REPORT, scimq/report.h): the last
 * report of each session, under a lock of its own, so that STATS, /metrics
 * and the live page read a copy and nothing of the broker.
 *
 * Bounds and lifetime: at most `max` sessions are kept (gateway_jobs_max);
 * a report from one more is refused with an ERROR while none can go.  A
 * session's entry goes when its agent's reports stop: a final report is
 * kept for keep_ms (gateway_jobs_keep_ms) after it came, so that a
 * finished job can still be read; one that is not final for three of its
 * periods (at least 10 s) after it came, as its agent or session is gone.
 */
#ifndef SCIMQ_GATEWAY_JOBS_H
#define SCIMQ_GATEWAY_JOBS_H

#include <pthread.h>
#include <stdint.h>

#include <jansson.h>

#include <scimq/proto.h>
#include <scimq/report.h>

struct gw_conn;

struct gw_job_entry {
    uint8_t session_id[SCIMQ_PROTO_SESSION_ID_LEN];
    char peer[64];
    uint64_t received_ms, reports;
    scimq_report_t rep;
};

struct gw_jobs {
    pthread_mutex_t lock;
    struct gw_job_entry *entries; /* n used of max */
    uint32_t n, max;
    uint64_t keep_ms;
    uint64_t accepted, refused; /* reports, since start */
};

int gw_jobs_init(struct gw_jobs *j, uint32_t max, uint64_t keep_ms);
void gw_jobs_destroy(struct gw_jobs *j);

/*
 * Decodes body and keeps it as the last report of session_id (received
 * now_ms from peer).  Returns 0, SCIMQ_EPROTO_ARGS (*why_p says what is
 * wrong) or SCIMQ_ENOSPC (max sessions report already).
 */
int gw_jobs_put(struct gw_jobs *j, const uint8_t *session_id, const char *peer,
                const scimq_proto_str_t *body, uint64_t now_ms,
                const char **why_p);

/*
 * The jobs as of now_ms, one object per job id with its agents and their
 * ranks (a new reference): STATS "mpi_jobs".
 */
json_t *gw_jobs_json(struct gw_jobs *j, uint64_t now_ms);

#endif /* SCIMQ_GATEWAY_JOBS_H */
