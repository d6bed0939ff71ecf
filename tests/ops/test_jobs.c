/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the MPI job reports: the REPORT body codec
 * (src/protocol/report.c) against the test vector of doc/scimp.md and
 * every rule its decoder enforces; the gateway's store of reports
 * (src/gateway/jobs.c): one entry per session, grouped by job in STATS,
 * bounded in number, a final report kept for gateway_jobs_keep_ms, a
 * silent one dropped after three periods; and their Prometheus rendering
 * (src/gateway/http_metrics.c), bounded in agents and ranks.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <scimq/error.h>
#include <scimq/report.h>

#include "cunit_main.h"
#include "gateway/http_metrics.h"
#include "gateway/jobs.h"

/* doc/scimp.md, "REPORT": the vector, field by field, in hex. */
/* clang-format off */
static const char *const vector_hex[] = {
    "01", "00", "0000", "0001", "0002", "000007d0", /* format .. period */
    "0000000000400000", "0000000000800000",         /* pool used, total */
    "0000000000000003", "0000000000000fa0", "00000000000009c4", /* service */
    /* buckets 0-9 */
    "0000000000000000", "0000000000000000", "0000000000000000",
    "0000000000000000", "0000000000000000", "0000000000000000",
    "0000000000000000", "0000000000000000", "0000000000000000",
    "0000000000000000",
    "0000000000000002", "0000000000000000", "0000000000000001", /* 10-12 */
    /* buckets 13-31 */
    "0000000000000000", "0000000000000000", "0000000000000000",
    "0000000000000000", "0000000000000000", "0000000000000000",
    "0000000000000000", "0000000000000000", "0000000000000000",
    "0000000000000000", "0000000000000000", "0000000000000000",
    "0000000000000000", "0000000000000000", "0000000000000000",
    "0000000000000000", "0000000000000000", "0000000000000000",
    "0000000000000000",
    "04", "34323432", "03", "73686d", "0002", /* "4242", "shm", 2 ranks */
    "00000000", "0000000000000005", "0000000000000005",
    "00000001", "0000000000000003", "0000000000000002", NULL};
/* clang-format on */

static size_t
vector(uint8_t *buf)
{
    size_t n = 0;

    for (size_t i = 0; vector_hex[i] != NULL; i++)
        for (const char *p = vector_hex[i]; p[0] && p[1]; p += 2) {
            unsigned int v;

            sscanf(p, "%2x", &v);
            buf[n++] = (uint8_t) v;
        }
    return n;
}

static void
vector_report(scimq_report_t *r)
{
    memset(r, 0, sizeof(*r));
    r->agents = 1;
    r->ranks = 2;
    r->period_ms = 2000;
    r->pool_used = 4u << 20;
    r->pool_total = 8u << 20;
    r->service_count = 3; /* 700, 800 and 2500 us */
    r->service_sum_us = 4000;
    r->service_max_us = 2500;
    r->service_bucket[scimq_report_bucket(700)]++;
    r->service_bucket[scimq_report_bucket(800)]++;
    r->service_bucket[scimq_report_bucket(2500)]++;
    strcpy(r->job, "4242");
    strcpy(r->provider, "shm");
    r->nrank = 2;
    r->rank[0] = (scimq_report_rank_t){0, 5, 5};
    r->rank[1] = (scimq_report_rank_t){1, 3, 2};
}

static void
test_vector(void)
{
    uint8_t want[SCIMQ_REPORT_MAX_LEN], got[SCIMQ_REPORT_MAX_LEN];
    size_t want_len = vector(want), len = 0;
    scimq_report_t r, d;
    const char *why = "unset";

    CU_ASSERT_EQUAL(want_len, 359);
    CU_ASSERT_EQUAL(scimq_report_bucket(0), 0);
    CU_ASSERT_EQUAL(scimq_report_bucket(1), 1);
    CU_ASSERT_EQUAL(scimq_report_bucket(700), 10);
    CU_ASSERT_EQUAL(scimq_report_bucket(2500), 12);
    CU_ASSERT_EQUAL(scimq_report_bucket(UINT64_MAX), 31);
    vector_report(&r);
    CU_ASSERT_EQUAL_FATAL(scimq_report_encode(&r, got, sizeof(got), &len), 0);
    CU_ASSERT_EQUAL_FATAL(len, want_len);
    CU_ASSERT_EQUAL(memcmp(got, want, len), 0);
    CU_ASSERT_EQUAL(scimq_report_encode(&r, got, len - 1, &len), SCIMQ_ENOBUFS);
    CU_ASSERT_EQUAL_FATAL(scimq_report_decode(want, want_len, &d, &why), 0);
    CU_ASSERT_STRING_EQUAL(d.job, "4242");
    CU_ASSERT_STRING_EQUAL(d.provider, "shm");
    CU_ASSERT_EQUAL(d.ranks, 2);
    CU_ASSERT_EQUAL(d.nrank, 2);
    CU_ASSERT_EQUAL(d.rank[1].delivered, 3);
    CU_ASSERT_EQUAL(d.rank[1].acked, 2);
    CU_ASSERT_EQUAL(d.service_bucket[10], 2);
    CU_ASSERT_EQUAL(d.pool_used, 4u << 20);
    CU_ASSERT_EQUAL(d.agents, 1);
    CU_ASSERT_EQUAL(d.period_ms, 2000);
    CU_ASSERT_EQUAL(d.service_sum_us, 4000);
    CU_ASSERT_EQUAL(d.service_max_us, 2500);
}

/* The largest report: 256 ranks, 64-byte names, within the bound. */
static void
test_largest(void)
{
    static uint8_t buf[SCIMQ_REPORT_MAX_LEN + 16];
    static scimq_report_t r, d;
    size_t len;

    vector_report(&r);
    memset(r.job, 'j', SCIMQ_REPORT_MAX_NAME);
    memset(r.provider, 'p', SCIMQ_REPORT_MAX_NAME);
    r.ranks = r.nrank = SCIMQ_REPORT_MAX_RANKS;
    for (unsigned int i = 0; i < r.nrank; i++)
        r.rank[i] = (scimq_report_rank_t){i, i + 1, i};
    CU_ASSERT_EQUAL_FATAL(scimq_report_encode(&r, buf, sizeof(buf), &len), 0);
    CU_ASSERT_EQUAL(len, SCIMQ_REPORT_MAX_LEN);
    CU_ASSERT_EQUAL(scimq_report_decode(buf, len, &d, NULL), 0);
    CU_ASSERT_EQUAL(d.rank[255].delivered, 256);
    /* One more byte is over the bound, whatever it is. */
    buf[len] = 0;
    CU_ASSERT_EQUAL(scimq_report_decode(buf, len + 1, &d, NULL),
                    SCIMQ_EPROTO_ARGS);
    /* Empty names cannot be encoded, nor 257 ranks. */
    r.job[0] = '\0';
    CU_ASSERT_EQUAL(scimq_report_encode(&r, buf, sizeof(buf), &len),
                    SCIMQ_EPROTO_ARGS);
    memset(r.job, 'j', SCIMQ_REPORT_MAX_NAME);
    r.provider[0] = '\0';
    CU_ASSERT_EQUAL(scimq_report_encode(&r, buf, sizeof(buf), &len),
                    SCIMQ_EPROTO_ARGS);
    r.provider[0] = 'p';
    r.ranks = r.nrank = SCIMQ_REPORT_MAX_RANKS + 1;
    CU_ASSERT_EQUAL(scimq_report_encode(&r, buf, sizeof(buf), &len),
                    SCIMQ_EPROTO_ARGS);
}

/* Decodes the vector with byte `at` set to v (or cut to len) and
 * expects a refusal whose reason contains `says`. */
static void
refused(size_t at, int v, size_t len, const char *says)
{
    uint8_t buf[SCIMQ_REPORT_MAX_LEN];
    size_t n = vector(buf);
    scimq_report_t d;
    const char *why = NULL;

    if (at < n)
        buf[at] = (uint8_t) v;
    CU_ASSERT_EQUAL(scimq_report_decode(buf, len ? len : n, &d, &why),
                    SCIMQ_EPROTO_ARGS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(why);
    if (strstr(why, says) == NULL)
        fprintf(stderr, "refusal says '%s', not '%s'\n", why, says);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, says));
}

static void
test_malformed(void)
{
    /* Offsets in the vector: 0 format, 1 flags, 5 agents (low byte),
     * 7 ranks (low), 52 + 8 * 10 + 7 bucket 10 (low), 308 job length,
     * 309 the job's first byte, 318 rank count (low), 331 rank 0's acked
     * (high), 342 rank 1's number (low). */
    refused(0, 2, 0, "format");
    refused(1, 2, 0, "flags");
    refused(5, 0, 0, "agent");
    refused(7, 1, 0, "ranks served");
    refused(52 + 80 + 7, 3, 0, "sum to the count");
    refused(308, 65, 0, "cut short");
    refused(309, '"', 0, "job id");
    refused(318, 3, 0, "cut short in its rank entries");
    refused(318, 1, 0, "bytes after");
    refused(331, 4, 0, "acknowledged more");
    refused(342, 0, 0, "ascending");
    refused(400, 0, 30, "shorter than its fixed part");
    refused(400, 0, 310, "cut short in its names");
    refused(400, 0, 358, "cut short in its rank entries");
}

/* ------------------------------------------------------------------------ */
/* The gateway's store                                                       */
/* ------------------------------------------------------------------------ */

static void
put(struct gw_jobs *j, int session, const scimq_report_t *r, uint64_t now,
    int want)
{
    uint8_t sid[SCIMQ_PROTO_SESSION_ID_LEN] = {0};
    uint8_t buf[SCIMQ_REPORT_MAX_LEN];
    scimq_proto_str_t body;
    const char *why = NULL;
    size_t len;

    sid[0] = (uint8_t) session;
    CU_ASSERT_EQUAL_FATAL(scimq_report_encode(r, buf, sizeof(buf), &len), 0);
    body.ptr = (const char *) buf;
    body.len = (uint16_t) len;
    CU_ASSERT_EQUAL(gw_jobs_put(j, sid, "127.0.0.1:1", &body, now, &why), want);
}

static void
test_store(void)
{
    struct gw_jobs j;
    scimq_report_t r;
    json_t *doc, *job, *agents;

    CU_ASSERT_EQUAL_FATAL(gw_jobs_init(&j, 3, 60000), 0);
    vector_report(&r);
    r.agents = 2;
    put(&j, 1, &r, 1000, 0);
    r.agent = 1;
    r.rank[0].delivered = r.rank[0].acked = 7;
    put(&j, 2, &r, 1000, 0);
    put(&j, 2, &r, 2000, 0); /* the same session: replaced */
    strcpy(r.job, "other");
    r.agent = 0;
    r.agents = 1;
    r.flags = SCIMQ_REPORT_F_FINAL;
    put(&j, 3, &r, 2000, 0);
    put(&j, 4, &r, 2000, SCIMQ_ENOSPC); /* three sessions at most */
    doc = gw_jobs_json(&j, 3000);
    CU_ASSERT_EQUAL_FATAL(json_array_size(doc), 2);
    job = json_array_get(doc, 0); /* "4242" sorts first */
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(job, "job")),
                           "4242");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(job, "ranks")), 4);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(job, "agents")), 2);
    /* 5 + 3 from agent 0, 7 + 3 from agent 1 */
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(job, "delivered")), 18);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(job, "acked")), 16);
    CU_ASSERT(json_is_false(json_object_get(job, "final")));
    agents = json_object_get(job, "agents_detail");
    CU_ASSERT_EQUAL(
        json_integer_value(json_object_get(json_array_get(agents, 1), "agent")),
        1);
    CU_ASSERT_EQUAL(json_integer_value(
                        json_object_get(json_array_get(agents, 1), "reports")),
                    2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(
                        json_object_get(job, "service_us"), "p50_below")),
                    1024);
    json_decref(doc);
    /* Silent for three periods of 2 s but under 10 s: kept; at 12 s
     * after the last report the running job is gone, the final one
     * (kept 60 s) stays. */
    doc = gw_jobs_json(&j, 11000);
    CU_ASSERT_EQUAL(json_array_size(doc), 2);
    json_decref(doc);
    doc = gw_jobs_json(&j, 14000);
    CU_ASSERT_EQUAL_FATAL(json_array_size(doc), 1);
    CU_ASSERT_STRING_EQUAL(
        json_string_value(json_object_get(json_array_get(doc, 0), "job")),
        "other");
    json_decref(doc);
    put(&j, 4, &r, 14000, 0); /* room again */
    doc = gw_jobs_json(&j, 62001);
    CU_ASSERT_EQUAL(json_array_size(doc), 1); /* session 3's went */
    json_decref(doc);
    gw_jobs_destroy(&j);
}

static void
test_store_refuses_malformed(void)
{
    struct gw_jobs j;
    uint8_t sid[SCIMQ_PROTO_SESSION_ID_LEN] = {1};
    scimq_proto_str_t body = {"\x01garbage", 8};
    const char *why = NULL;
    json_t *doc;

    CU_ASSERT_EQUAL_FATAL(gw_jobs_init(&j, 4, 1000), 0);
    CU_ASSERT_EQUAL(gw_jobs_put(&j, sid, "p", &body, 0, &why),
                    SCIMQ_EPROTO_ARGS);
    CU_ASSERT_PTR_NOT_NULL(why);
    doc = gw_jobs_json(&j, 0);
    CU_ASSERT_EQUAL(json_array_size(doc), 0);
    CU_ASSERT_EQUAL(j.refused, 1);
    json_decref(doc);
    gw_jobs_destroy(&j);
}

/* ------------------------------------------------------------------------ */
/* Prometheus                                                                */
/* ------------------------------------------------------------------------ */

static bool
has_line(const char *text, const char *line)
{
    size_t n = strlen(line);

    for (const char *p = text; (p = strstr(p, line)) != NULL; p += n)
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return true;
    return false;
}

static size_t
count_prefix(const char *text, const char *prefix)
{
    size_t n = 0, len = strlen(prefix);

    for (const char *p = text; p != NULL && *p != '\0';) {
        if (strncmp(p, prefix, len) == 0)
            n++;
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return n;
}

static void
test_metrics(void)
{
    struct gw_jobs j;
    scimq_report_t r;
    json_t *doc = json_pack("{s:s, s:[], s:[]}", "version", "9", "queues",
                            "connections_detail");
    char *text;
    size_t len;

    /* 70 agents of 20 ranks: 64 agents shown, 1024 of their 1280 ranks. */
    CU_ASSERT_EQUAL_FATAL(gw_jobs_init(&j, 100, 60000), 0);
    vector_report(&r);
    r.agents = 70;
    r.ranks = r.nrank = 20;
    for (unsigned int k = 0; k < r.nrank; k++)
        r.rank[k] = (scimq_report_rank_t){k, 2, 1};
    for (int a = 0; a < 70; a++) {
        r.agent = (uint16_t) a;
        put(&j, a, &r, 0, 0);
    }
    json_object_set_new(doc, "mpi_jobs", gw_jobs_json(&j, 500));
    text = gw_metrics_render(doc, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT(has_line(text, "scimq_mpi_agent_info{job=\"4242\",agent=\"0\","
                             "provider=\"shm\",final=\"false\"} 1"));
    CU_ASSERT(has_line(text, "scimq_mpi_agent_ranks{job=\"4242\",agent=\"3\"} "
                             "20"));
    CU_ASSERT(has_line(text, "scimq_mpi_rank_acked_total{job=\"4242\","
                             "agent=\"0\",rank=\"19\"} 1"));
    CU_ASSERT(has_line(text, "scimq_mpi_service_seconds_bucket{job=\"4242\","
                             "agent=\"0\",le=\"0.001024\"} 2"));
    CU_ASSERT(has_line(text, "scimq_mpi_service_seconds_bucket{job=\"4242\","
                             "agent=\"0\",le=\"+Inf\"} 3"));
    CU_ASSERT(has_line(text, "scimq_mpi_service_seconds_sum{job=\"4242\","
                             "agent=\"0\"} 0.004000"));
    CU_ASSERT(has_line(text, "scimq_mpi_pool_used_bytes{job=\"4242\","
                             "agent=\"0\"} 4194304"));
    CU_ASSERT_EQUAL(count_prefix(text, "scimq_mpi_agent_info{"),
                    GW_METRICS_MAX_AGENTS);
    CU_ASSERT_EQUAL(count_prefix(text, "scimq_mpi_rank_delivered_total{"),
                    GW_METRICS_MAX_RANKS);
    CU_ASSERT(has_line(text, "scimq_metrics_omitted{kind=\"mpi_agents\"} 6"));
    CU_ASSERT(has_line(text, "scimq_metrics_omitted{kind=\"mpi_ranks\"} "
                             "256"));
    free(text);
    json_decref(doc);
    gw_jobs_destroy(&j);
}

static const struct scimq_cunit_test codec_tests[] = {
    {"the test vector of doc/scimp.md, both ways", test_vector, 1},
    {"the largest report, and one byte or rank more", test_largest, 1},
    {"every rule of the decoder, with its reason", test_malformed, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_test store_tests[] = {
    {"per session, by job, bounded, expiring", test_store, 1},
    {"a malformed report is refused and kept out", test_store_refuses_malformed,
     1},
    {"Prometheus: agents and ranks bounded", test_metrics, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_suite suites[] = {
    {"report_codec", NULL, NULL, codec_tests},
    {"jobs", NULL, NULL, store_tests},
    {NULL, NULL, NULL, NULL}};

SCIMQ_CUNIT_MAIN(suites)
