/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent's REPORT (scimq/report.h, doc/scimp.md "REPORT"): counts kept
 * on the agent's thread, encoded and sent on its gateway session without
 * waiting (scimq_session_report()), so reporting never holds up a
 * hand-out.  The job is named by SCIMQ_MPI_JOB_ID, else the batch
 * system's id (SLURM_JOB_ID, PBS_JOBID), else Open MPI's job id for this
 * mpirun (OMPI_MCA_ess_base_jobid), else "pid-<agent's pid>"; bytes a
 * report may not carry become '_'.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <scimq/error.h>
#include <scimq/report.h>

#include "backoff.h"
#include "common/log.h"
#include "report.h"

struct scimq_mpi_report {
    scimq_client_t *client;
    uint64_t period_ns, next_ns;
    uint64_t slot_size;
    uint32_t nslots;
    uint64_t *slot_start_ns; /* per slot: when handed out, 0 when not */
    bool refused_logged;
    scimq_report_t rep; /* the counts, and the next report's body */
};

static void
name_set(char *dst, const char *src)
{
    size_t n = 0;

    for (; src[n] != '\0' && n < SCIMQ_REPORT_MAX_NAME; n++) {
        char ch = src[n];

        dst[n] = ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || strchr("._:;+@-", ch) != NULL)
                     ? ch
                     : '_';
    }
    dst[n] = '\0';
}

static void
job_id(char *dst)
{
    static const char *const vars[] = {"SCIMQ_MPI_JOB_ID", "SLURM_JOB_ID",
                                       "PBS_JOBID", "OMPI_MCA_ess_base_jobid"};
    char pid[32];

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *e = getenv(vars[i]);

        if (e != NULL && e[0] != '\0') {
            name_set(dst, e);
            return;
        }
    }
    snprintf(pid, sizeof(pid), "pid-%ld", (long) getpid());
    name_set(dst, pid);
}

struct scimq_mpi_report *
scimq__report_create(int node_index, int nodes, int node_size,
                     scimq_client_t *client, const char *provider,
                     uint32_t nslots, uint64_t slot_size)
{
    const char *e = getenv("SCIMQ_MPI_REPORT_MS");
    uint64_t ms = SCIMQ_MPI_REPORT_MS_DEFAULT;
    struct scimq_mpi_report *r;
    char *end;

    if (e != NULL && e[0] != '\0') {
        unsigned long long v = strtoull(e, &end, 10);

        if (*end != '\0' || v > 3600000u)
            SCIMQ_LOG_WARN(MPI,
                           "SCIMQ_MPI_REPORT_MS: '%s' is not 0..3600000: "
                           "%" PRIu64 " ms",
                           e, ms);
        else
            ms = v;
    }
    if (ms == 0 || client == NULL)
        return NULL;
    if (scimq_client_session_version(client) <
        SCIMQ_PROTO_SESSION_VERSION_REPORT) {
        SCIMQ_LOG_INFO(MPI,
                       "agent: the gateway speaks SciMP session version "
                       "%u, too old for REPORT: no reports",
                       scimq_client_session_version(client));
        return NULL;
    }
    r = calloc(1, sizeof(*r));
    if (r != NULL)
        r->slot_start_ns = calloc(nslots, sizeof(*r->slot_start_ns));
    if (r == NULL || r->slot_start_ns == NULL ||
        node_size > (int) SCIMQ_REPORT_MAX_RANKS) {
        if (r != NULL && r->slot_start_ns != NULL)
            SCIMQ_LOG_WARN(MPI,
                           "agent: %d ranks on this node, more than a report "
                           "carries (%u): no reports",
                           node_size, SCIMQ_REPORT_MAX_RANKS);
        if (r != NULL)
            free(r->slot_start_ns);
        free(r);
        return NULL;
    }
    r->client = client;
    r->period_ns = ms * 1000000u;
    r->next_ns = scimq__mpi_now_ns() + r->period_ns;
    r->nslots = nslots;
    r->slot_size = slot_size;
    r->rep.agent = (uint16_t) node_index;
    r->rep.agents = (uint16_t) nodes;
    r->rep.ranks = (uint16_t) node_size;
    r->rep.period_ms = (uint32_t) ms;
    r->rep.pool_total = (uint64_t) nslots * slot_size;
    r->rep.nrank = (uint16_t) node_size;
    for (int k = 0; k < node_size; k++)
        r->rep.rank[k].rank = (uint32_t) k;
    job_id(r->rep.job);
    name_set(r->rep.provider, provider != NULL ? provider : "unknown");
    if (r->rep.provider[0] == '\0')
        name_set(r->rep.provider, "unknown");
    return r;
}

void
scimq__report_assigned(struct scimq_mpi_report *r, int rank, uint32_t slot)
{
    if (r == NULL || rank < 0 || rank >= r->rep.nrank || slot >= r->nslots)
        return;
    r->rep.rank[rank].delivered++;
    r->slot_start_ns[slot] = scimq__mpi_now_ns();
}

void
scimq__report_settled(struct scimq_mpi_report *r, int rank, uint32_t slot,
                      bool done)
{
    uint64_t start, us;

    if (r == NULL || rank < 0 || rank >= r->rep.nrank || slot >= r->nslots)
        return;
    start = r->slot_start_ns[slot];
    r->slot_start_ns[slot] = 0;
    if (!done)
        return;
    r->rep.rank[rank].acked++;
    if (start == 0)
        return;
    us = (scimq__mpi_now_ns() - start) / 1000u;
    r->rep.service_count++;
    r->rep.service_sum_us += us;
    if (us > r->rep.service_max_us)
        r->rep.service_max_us = us;
    r->rep.service_bucket[scimq_report_bucket(us)]++;
}

static void
report_send(struct scimq_mpi_report *r, uint32_t ready, const int *assigned)
{
    uint64_t held = ready;
    int rc;

    for (unsigned int k = 0; k < r->rep.nrank; k++)
        held += assigned[k] > 0 ? (uint64_t) assigned[k] : 0;
    if (held > r->nslots)
        held = r->nslots;
    r->rep.pool_used = held * r->slot_size;
    rc = scimq_session_report(r->client, &r->rep);
    if (rc != 0 && !r->refused_logged) {
        r->refused_logged = true;
        SCIMQ_LOG_WARN(MPI, "agent: report not sent: %s", scimq_strerror(rc));
    }
}

void
scimq__report_tick(struct scimq_mpi_report *r, uint32_t ready,
                   const int *assigned)
{
    uint64_t now;

    if (r == NULL)
        return;
    now = scimq__mpi_now_ns();
    if (now < r->next_ns)
        return;
    r->next_ns = now + r->period_ns;
    report_send(r, ready, assigned);
}

void
scimq__report_destroy(struct scimq_mpi_report *r, uint32_t ready,
                      const int *assigned)
{
    if (r == NULL)
        return;
    r->rep.flags |= SCIMQ_REPORT_F_FINAL;
    r->rep.period_ms = 0;
    report_send(r, ready, assigned);
    free(r->slot_start_ns);
    free(r);
}
