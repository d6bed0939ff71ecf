/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The MPI agents' reports (jobs.h).  A small array under one lock: a
 * report is a few kilobytes, sessions that report are few (one per node
 * of each running job) and capped, and the readers copy out as JSON.
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <scimq/error.h>

#include "clock.h"
#include "common/log.h"
#include "jobs.h"
#include "log2hist.h"

/* A report that is not final is dropped after this many of its periods. */
#define JOBS_MISSED_PERIODS 3u
#define JOBS_MIN_STALE_MS 10000u

int
gw_jobs_init(struct gw_jobs *j, uint32_t max, uint64_t keep_ms)
{
    memset(j, 0, sizeof(*j));
    pthread_mutex_init(&j->lock, NULL);
    j->max = max;
    j->keep_ms = keep_ms;
    if (max > 0 && (j->entries = calloc(max, sizeof(*j->entries))) == NULL)
        return SCIMQ_ENOMEM;
    return 0;
}

void
gw_jobs_destroy(struct gw_jobs *j)
{
    pthread_mutex_destroy(&j->lock);
    free(j->entries);
    j->entries = NULL;
}

static bool
stale(const struct gw_jobs *j, const struct gw_job_entry *e, uint64_t now_ms)
{
    uint64_t age = now_ms > e->received_ms ? now_ms - e->received_ms : 0;
    uint64_t limit;

    if (e->rep.flags & SCIMQ_REPORT_F_FINAL)
        return age > j->keep_ms;
    limit = (uint64_t) e->rep.period_ms * JOBS_MISSED_PERIODS;
    return age > (limit > JOBS_MIN_STALE_MS ? limit : JOBS_MIN_STALE_MS);
}

/* Drops the entries whose time is up (lock held). */
static void
expire_locked(struct gw_jobs *j, uint64_t now_ms)
{
    for (uint32_t i = 0; i < j->n;) {
        if (stale(j, &j->entries[i], now_ms)) {
            j->entries[i] = j->entries[j->n - 1];
            j->n--;
        } else {
            i++;
        }
    }
}

int
gw_jobs_put(struct gw_jobs *j, const uint8_t *session_id, const char *peer,
            const scimq_proto_str_t *body, uint64_t now_ms, const char **why_p)
{
    struct gw_job_entry *e = NULL;
    scimq_report_t *rep = malloc(sizeof(*rep));
    int rc;

    if (rep == NULL)
        return SCIMQ_ENOMEM;
    rc = scimq_report_decode(body->ptr, body->len, rep, why_p);
    pthread_mutex_lock(&j->lock);
    if (rc != 0) {
        j->refused++;
        goto out;
    }
    expire_locked(j, now_ms);
    for (uint32_t i = 0; i < j->n && e == NULL; i++)
        if (memcmp(j->entries[i].session_id, session_id,
                   SCIMQ_PROTO_SESSION_ID_LEN) == 0)
            e = &j->entries[i];
    if (e == NULL) {
        if (j->n == j->max) {
            rc = SCIMQ_ENOSPC;
            *why_p = "the gateway keeps the reports of gateway_jobs_max "
                     "sessions, and as many report already";
            j->refused++;
            goto out;
        }
        e = &j->entries[j->n++];
        memset(e, 0, sizeof(*e));
        memcpy(e->session_id, session_id, SCIMQ_PROTO_SESSION_ID_LEN);
    }
    snprintf(e->peer, sizeof(e->peer), "%s", peer);
    e->received_ms = now_ms;
    e->reports++;
    e->rep = *rep;
    j->accepted++;
out:
    pthread_mutex_unlock(&j->lock);
    free(rep);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* STATS "mpi_jobs"                                                          */
/* ------------------------------------------------------------------------ */

static json_t *
service_json(const uint64_t *bucket, uint64_t count, uint64_t sum,
             uint64_t max_us)
{
    json_t *b = json_array();

    for (unsigned int i = 0; i < SCIMQ_REPORT_BUCKETS; i++)
        json_array_append_new(b, json_integer((json_int_t) bucket[i]));
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:o}", "count",
                     (json_int_t) count, "sum", (json_int_t) sum, "max",
                     (json_int_t) max_us, "p50_below",
                     (json_int_t) gw_log2_quantile(bucket, SCIMQ_REPORT_BUCKETS,
                                                   count, max_us, 0.5),
                     "p99_below",
                     (json_int_t) gw_log2_quantile(bucket, SCIMQ_REPORT_BUCKETS,
                                                   count, max_us, 0.99),
                     "buckets", b);
}

static json_t *
agent_json(const struct gw_job_entry *e, uint64_t now_ms)
{
    const scimq_report_t *r = &e->rep;
    char sid[2 * SCIMQ_PROTO_SESSION_ID_LEN + 1];
    json_t *ranks = json_array();
    uint64_t delivered = 0, acked = 0;

    for (unsigned int i = 0; i < SCIMQ_PROTO_SESSION_ID_LEN; i++)
        snprintf(sid + 2 * i, 3, "%02x", e->session_id[i]);
    for (unsigned int i = 0; i < r->nrank; i++) {
        delivered += r->rank[i].delivered;
        acked += r->rank[i].acked;
        json_array_append_new(
            ranks, json_pack("{s:i, s:I, s:I}", "rank", (int) r->rank[i].rank,
                             "delivered", (json_int_t) r->rank[i].delivered,
                             "acked", (json_int_t) r->rank[i].acked));
    }
    return json_pack(
        "{s:i, s:i, s:s, s:s, s:s, s:b, s:i, s:I, s:I, s:I, s:I, s:f, s:I, "
        "s:o, s:o}",
        "agent", r->agent, "ranks", r->ranks, "provider", r->provider,
        "session", sid, "peer", e->peer, "final",
        (r->flags & SCIMQ_REPORT_F_FINAL) != 0, "period_ms", (int) r->period_ms,
        "delivered", (json_int_t) delivered, "acked", (json_int_t) acked,
        "pool_used", (json_int_t) r->pool_used, "pool_total",
        (json_int_t) r->pool_total, "age_s",
        (double) (now_ms > e->received_ms ? now_ms - e->received_ms : 0) /
            1000.0,
        "reports", (json_int_t) e->reports, "service_us",
        service_json(r->service_bucket, r->service_count, r->service_sum_us,
                     r->service_max_us),
        "ranks_detail", ranks);
}

static int
by_job_agent(const void *a, const void *b)
{
    const struct gw_job_entry *x = *(const struct gw_job_entry *const *) a,
                              *y = *(const struct gw_job_entry *const *) b;
    int c = strcmp(x->rep.job, y->rep.job);

    return c != 0
               ? c
               : (x->rep.agent > y->rep.agent) - (x->rep.agent < y->rep.agent);
}

/* One job: the agents v[0..n-1] (same job id), summed up. */
static json_t *
job_json(struct gw_job_entry *const *v, size_t n, uint64_t now_ms)
{
    uint64_t bucket[SCIMQ_REPORT_BUCKETS] = {0};
    uint64_t count = 0, sum = 0, max_us = 0, delivered = 0, acked = 0;
    uint64_t pool_used = 0, pool_total = 0;
    json_t *agents = json_array(), *providers = json_array();
    int ranks = 0;
    bool final = true;

    for (size_t i = 0; i < n; i++) {
        const scimq_report_t *r = &v[i]->rep;
        json_t *a = agent_json(v[i], now_ms);
        bool seen = false;

        ranks += r->ranks;
        final = final && (r->flags & SCIMQ_REPORT_F_FINAL);
        delivered +=
            (uint64_t) json_integer_value(json_object_get(a, "delivered"));
        acked += (uint64_t) json_integer_value(json_object_get(a, "acked"));
        pool_used += r->pool_used;
        pool_total += r->pool_total;
        count += r->service_count;
        sum += r->service_sum_us;
        if (r->service_max_us > max_us)
            max_us = r->service_max_us;
        for (unsigned int b = 0; b < SCIMQ_REPORT_BUCKETS; b++)
            bucket[b] += r->service_bucket[b];
        for (size_t k = 0; k < json_array_size(providers); k++)
            seen =
                seen || strcmp(json_string_value(json_array_get(providers, k)),
                               r->provider) == 0;
        if (!seen)
            json_array_append_new(providers, json_string(r->provider));
        json_array_append_new(agents, a);
    }
    return json_pack(
        "{s:s, s:I, s:i, s:i, s:b, s:o, s:I, s:I, s:I, s:I, s:o, s:o}", "job",
        v[0]->rep.job, "agents", (json_int_t) n, "agents_expected",
        v[0]->rep.agents, "ranks", ranks, "final", final, "providers",
        providers, "delivered", (json_int_t) delivered, "acked",
        (json_int_t) acked, "pool_used", (json_int_t) pool_used, "pool_total",
        (json_int_t) pool_total, "service_us",
        service_json(bucket, count, sum, max_us), "agents_detail", agents);
}

json_t *
gw_jobs_json(struct gw_jobs *j, uint64_t now_ms)
{
    json_t *jobs = json_array();
    struct gw_job_entry *copy, **v;
    uint32_t n;

    /* Copied out under the lock, rendered outside it. */
    pthread_mutex_lock(&j->lock);
    expire_locked(j, now_ms);
    n = j->n;
    copy = n > 0 ? malloc((size_t) n * sizeof(*copy)) : NULL;
    if (copy != NULL)
        memcpy(copy, j->entries, (size_t) n * sizeof(*copy));
    pthread_mutex_unlock(&j->lock);
    if (copy == NULL)
        return jobs;
    v = malloc((size_t) n * sizeof(*v));
    if (v == NULL) {
        free(copy);
        return jobs;
    }
    for (uint32_t i = 0; i < n; i++)
        v[i] = &copy[i];
    qsort(v, n, sizeof(*v), by_job_agent);
    for (uint32_t i = 0; i < n;) {
        uint32_t k = i + 1;

        while (k < n && strcmp(v[k]->rep.job, v[i]->rep.job) == 0)
            k++;
        json_array_append_new(jobs, job_json(v + i, k - i, now_ms));
        i = k;
    }
    free(v);
    free(copy);
    return jobs;
}
