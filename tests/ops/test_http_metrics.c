/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the Prometheus rendering of a gateway snapshot
 * (src/gateway/http_metrics.c): the label sets stay bounded (the first
 * queues by name, the oldest connections, the rest counted as omitted),
 * label values are escaped, values are the document's, and a connection
 * the kernel did not report has its byte counters but no TCP samples.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cunit_main.h"
#include "gateway/http_metrics.h"

static json_t *
queue(const char *name, json_int_t ready, json_int_t put)
{
    return json_pack(
        "{s:s, s:s, s:b, s:s, s:I, s:I, s:I, s:I, s:I, "
        "s:{s:I, s:I, s:I}}",
        "name", name, "kind", "guaranteed", "closed", 0, "durability", "memory",
        "ready", ready, "delayed", (json_int_t) 0, "in_flight", (json_int_t) 0,
        "bytes", (json_int_t) 0, "consumers", (json_int_t) 0, "counters", "put",
        put, "acked", (json_int_t) 0, "dead_lettered", (json_int_t) 0);
}

static json_t *
conn(json_int_t id, bool tcp)
{
    char peer[32];
    json_t *c;

    snprintf(peer, sizeof(peer), "10.0.0.1:%d", (int) id);
    c = json_pack("{s:I, s:i, s:s, s:s, s:i, s:I, s:I}", "id", id, "worker", 0,
                  "peer", peer, "session", "00ff", "stream", 0, "bytes_in",
                  id * 10, "bytes_out", id * 20);
    if (tcp)
        json_object_set_new(c, "tcp",
                            json_pack("{s:s, s:I, s:I, s:I, s:s}", "state",
                                      "established", "rtt_us",
                                      (json_int_t) 1500, "retransmits",
                                      (json_int_t) 3, "cwnd", (json_int_t) 10,
                                      "congestion", "bbr"));
    return c;
}

static json_t *
doc_new(void)
{
    return json_pack("{s:s, s:f, s:I, s:{s:I, s:I}, s:{s:I, s:I}, s:[], "
                     "s:[]}",
                     "version", "9.9.9", "uptime_s", 1.5, "bytes_in",
                     (json_int_t) 12345, "memory", "limit",
                     (json_int_t) 1073741824, "used", (json_int_t) 262144,
                     "rejections", "per_peer", (json_int_t) 2, "slow",
                     (json_int_t) 1, "queues", "connections_detail");
}

/* The text and whether it has `line` as one whole line. */
static bool
has_line(const char *text, const char *line)
{
    size_t n = strlen(line);

    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return true;
    return false;
}

static size_t
count_prefix(const char *text, const char *prefix)
{
    size_t n = 0, len = strlen(prefix);

    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
        if (strncmp(p, prefix, len) == 0)
            n++;
    return n;
}

static void
test_values_and_escaping(void)
{
    json_t *doc = doc_new();
    size_t len = 0;
    char *text;

    json_array_append_new(json_object_get(doc, "queues"),
                          queue("piv.frames", 7, 42));
    json_array_append_new(json_object_get(doc, "queues"),
                          queue("odd\"name\\x", 1, 1));
    text = gw_metrics_render(doc, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(len, strlen(text));
    CU_ASSERT(has_line(text, "scimq_build_info{version=\"9.9.9\"} 1"));
    CU_ASSERT(has_line(text, "scimq_bytes_in_total 12345"));
    CU_ASSERT(has_line(text, "scimq_memory_limit_bytes 1073741824"));
    CU_ASSERT(has_line(text, "scimq_memory_used_bytes 262144"));
    CU_ASSERT(has_line(text, "scimq_rejections_total{reason=\"per_peer\"} 2"));
    CU_ASSERT(has_line(text, "scimq_rejections_total{reason=\"slow\"} 1"));
    CU_ASSERT(
        has_line(text, "scimq_queue_ready_messages{queue=\"piv.frames\"} 7"));
    CU_ASSERT(has_line(text, "scimq_queue_put_total{queue=\"piv.frames\"} 42"));
    CU_ASSERT(has_line(
        text, "scimq_queue_ready_messages{queue=\"odd\\\"name\\\\x\"} 1"));
    CU_ASSERT(has_line(text, "# TYPE scimq_queue_put_total counter"));
    CU_ASSERT(has_line(text, "# TYPE scimq_queue_ready_messages gauge"));
    /* A figure the document lacks is left out, not made up. */
    CU_ASSERT_PTR_NULL(strstr(text, "scimq_journal_syncs_total"));
    CU_ASSERT(has_line(text, "scimq_metrics_omitted{kind=\"queues\"} 0"));
    free(text);
    json_decref(doc);
}

static void
test_queue_bound(void)
{
    json_t *doc = doc_new(), *qs = json_object_get(doc, "queues");
    const int n = GW_METRICS_MAX_QUEUES + 5;
    char name[32], line[96];
    size_t len;
    char *text;

    /* In reverse order: the bound keeps the first by name, not by luck. */
    for (int i = n - 1; i >= 0; i--) {
        snprintf(name, sizeof(name), "q%05d", i);
        json_array_append_new(qs, queue(name, i, i));
    }
    text = gw_metrics_render(doc, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(count_prefix(text, "scimq_queue_ready_messages{"),
                    GW_METRICS_MAX_QUEUES);
    snprintf(line, sizeof(line),
             "scimq_queue_ready_messages{queue=\"q%05d\"} %d",
             GW_METRICS_MAX_QUEUES - 1, GW_METRICS_MAX_QUEUES - 1);
    CU_ASSERT(has_line(text, line));
    snprintf(name, sizeof(name), "\"q%05d\"", GW_METRICS_MAX_QUEUES);
    CU_ASSERT_PTR_NULL(strstr(text, name));
    CU_ASSERT(has_line(text, "scimq_metrics_omitted{kind=\"queues\"} 5"));
    free(text);
    json_decref(doc);
}

static void
test_connection_bound(void)
{
    json_t *doc = doc_new(), *cs = json_object_get(doc, "connections_detail");
    const int n = GW_METRICS_MAX_CONNS + 44;
    char line[160];
    size_t len;
    char *text;

    /* Newest first; even ids have the kernel's TCP state, odd ones not. */
    for (int id = n; id >= 1; id--)
        json_array_append_new(cs, conn(id, id % 2 == 0));
    text = gw_metrics_render(doc, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(count_prefix(text, "scimq_connection_bytes_in_total{"),
                    GW_METRICS_MAX_CONNS);
    CU_ASSERT_EQUAL(count_prefix(text, "scimq_connection_info{"),
                    GW_METRICS_MAX_CONNS);
    CU_ASSERT_EQUAL(count_prefix(text, "scimq_connection_rtt_seconds{"),
                    GW_METRICS_MAX_CONNS / 2);
    CU_ASSERT(has_line(text, "scimq_connection_rtt_seconds{peer=\"10.0.0.1:2\","
                             "session=\"00ff\",stream=\"0\"} 0.001500"));
    CU_ASSERT(has_line(text,
                       "scimq_connection_retransmits_total{peer="
                       "\"10.0.0.1:2\",session=\"00ff\",stream=\"0\"} 3"));
    CU_ASSERT(has_line(text,
                       "scimq_connection_bytes_out_total{peer="
                       "\"10.0.0.1:1\",session=\"00ff\",stream=\"0\"} 20"));
    snprintf(line, sizeof(line), "peer=\"10.0.0.1:%d\"",
             GW_METRICS_MAX_CONNS + 1);
    CU_ASSERT_PTR_NULL(strstr(text, line)); /* the newest are left out */
    CU_ASSERT(has_line(text, "scimq_metrics_omitted{kind=\"connections\"} 44"));
    free(text);
    json_decref(doc);
}

static const struct scimq_cunit_test metrics_tests[] = {
    {"values, types and label escaping", test_values_and_escaping, 1},
    {"queues bounded, first by name", test_queue_bound, 1},
    {"connections bounded, oldest first", test_connection_bound, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_suite suites[] = {
    {"http_metrics", NULL, NULL, metrics_tests}, {NULL, NULL, NULL, NULL}};

SCIMQ_CUNIT_MAIN(suites)
