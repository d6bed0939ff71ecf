/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_metrics.h"

/* One figure of the document: obj (NULL: the top level) . key. */
struct figure {
    const char *obj, *key;
    const char *name, *type, *help;
};

static const struct figure gateway_figures[] = {
    {NULL, "uptime_s", "scimq_uptime_seconds", "gauge",
     "time since the gateway started"},
    {NULL, "workers", "scimq_workers", "gauge", "event-loop worker threads"},
    {NULL, "sessions", "scimq_sessions", "gauge", "open client sessions"},
    {NULL, "connections", "scimq_connections", "gauge", "open connections"},
    {NULL, "connections_accepted", "scimq_connections_accepted_total",
     "counter", "connections accepted"},
    {NULL, "connections_refused", "scimq_connections_refused_total", "counter",
     "connections refused over gateway_max_connections"},
    {NULL, "bytes_in", "scimq_bytes_in_total", "counter",
     "bytes read from every connection"},
    {NULL, "bytes_out", "scimq_bytes_out_total", "counter",
     "bytes written to every connection"},
    {NULL, "frames_in", "scimq_frames_in_total", "counter", "frames read"},
    {NULL, "frames_out", "scimq_frames_out_total", "counter", "frames written"},
    {NULL, "auth_failures", "scimq_auth_failures_total", "counter",
     "failed authentications"},
    {"totals", "protocol_errors", "scimq_protocol_errors_total", "counter",
     "connections closed for a protocol error"},
    {"totals", "ready", "scimq_ready_messages", "gauge",
     "messages ready or delayed, every queue"},
    {"totals", "in_flight", "scimq_in_flight_messages", "gauge",
     "messages leased to consumers, every queue"},
    {"totals", "parked_producers", "scimq_parked_producers", "gauge",
     "producers waiting for room (back-pressured)"},
    {"totals", "parked_total", "scimq_parked_total", "counter",
     "times a producer was made to wait for room"},
    {"memory", "limit", "scimq_memory_limit_bytes", "gauge",
     "payload memory (the pool)"},
    {"memory", "used", "scimq_memory_used_bytes", "gauge",
     "payload memory in use (whole chunks)"},
    {"memory", "resident", "scimq_memory_payload_bytes", "gauge",
     "payload bytes held in memory"},
    {"memory", "spilling", "scimq_memory_spilling_bytes", "gauge",
     "payload bytes being spilled (written to segments)"},
    {"memory", "rss", "scimq_memory_rss_bytes", "gauge",
     "resident set size of the gateway process"},
    {"spill", "limit", "scimq_spill_limit_bytes", "gauge",
     "journal or spill segment space (0: neither directory)"},
    {"spill", "bytes", "scimq_spill_bytes", "gauge",
     "payload bytes of memory queues spilled to segments"},
    {"spill", "spilled_total", "scimq_spill_written_bytes_total", "counter",
     "payload bytes spilled to segments"},
    {"spill", "loaded_total", "scimq_spill_read_bytes_total", "counter",
     "payload bytes read back from segments"},
    {"spill", "write_errors", "scimq_spill_write_errors_total", "counter",
     "failed spill writes (retried)"},
    {"spill", "read_errors", "scimq_spill_read_errors_total", "counter",
     "failed spill reads"},
    {"journal", "bytes", "scimq_journal_bytes", "gauge",
     "bytes in live journal segments"},
    {"journal", "segments", "scimq_journal_segments", "gauge",
     "live journal segments"},
    {"journal", "appends", "scimq_journal_appends_total", "counter",
     "journal records appended"},
    {"journal", "append_bytes", "scimq_journal_append_bytes_total", "counter",
     "journal bytes appended"},
    {"journal", "append_errors", "scimq_journal_append_errors_total", "counter",
     "failed journal appends"},
    {"journal", "syncs", "scimq_journal_syncs_total", "counter",
     "journal syncs (fdatasync)"},
};

static const struct figure queue_figures[] = {
    {NULL, "ready", "scimq_queue_ready_messages", "gauge",
     "messages ready for delivery"},
    {NULL, "delayed", "scimq_queue_delayed_messages", "gauge",
     "messages waiting for their redelivery time"},
    {NULL, "in_flight", "scimq_queue_in_flight_messages", "gauge",
     "messages leased to consumers, not yet settled"},
    {NULL, "bytes", "scimq_queue_bytes", "gauge",
     "payload bytes of the queue's messages"},
    {NULL, "consumers", "scimq_queue_consumers", "gauge", "consumers"},
    {"counters", "put", "scimq_queue_put_total", "counter", "messages put"},
    {"counters", "put_bytes", "scimq_queue_put_bytes_total", "counter",
     "payload bytes put"},
    {"counters", "delivered", "scimq_queue_delivered_total", "counter",
     "deliveries (redeliveries included)"},
    {"counters", "delivered_bytes", "scimq_queue_delivered_bytes_total",
     "counter", "payload bytes delivered"},
    {"counters", "acked", "scimq_queue_acked_total", "counter",
     "deliveries acknowledged"},
    {"counters", "nacked", "scimq_queue_nacked_total", "counter",
     "deliveries refused by a consumer"},
    {"counters", "redelivered", "scimq_queue_redelivered_total", "counter",
     "redeliveries"},
    {"counters", "expired", "scimq_queue_expired_total", "counter",
     "leases that ran out"},
    {"counters", "dead_lettered", "scimq_queue_dead_lettered_total", "counter",
     "messages sent to the dead-letter queue"},
    {"counters", "too_large", "scimq_queue_too_large_total", "counter",
     "messages larger than every consumer takes"},
    {"counters", "dropped", "scimq_queue_dropped_total", "counter",
     "best-effort messages dropped at the size cap"},
    {"counters", "moved_in", "scimq_queue_moved_in_total", "counter",
     "messages moved in by administration"},
};

static const struct figure conn_figures[] = {
    {NULL, "bytes_in", "scimq_connection_bytes_in_total", "counter",
     "bytes read from the connection"},
    {NULL, "bytes_out", "scimq_connection_bytes_out_total", "counter",
     "bytes written to the connection"},
    {NULL, "frames_in", "scimq_connection_frames_in_total", "counter",
     "frames read from the connection"},
    {NULL, "frames_out", "scimq_connection_frames_out_total", "counter",
     "frames written to the connection"},
    {"tcp", "retransmits", "scimq_connection_retransmits_total", "counter",
     "TCP segments retransmitted"},
    {"tcp", "lost", "scimq_connection_lost_segments", "gauge",
     "TCP segments presumed lost now"},
    {"tcp", "cwnd", "scimq_connection_cwnd_segments", "gauge",
     "TCP congestion window"},
    {"tcp", "pacing_rate_Bps", "scimq_connection_pacing_rate_bytes", "gauge",
     "TCP pacing rate (bytes per second)"},
    {"tcp", "delivery_rate_Bps", "scimq_connection_delivery_rate_bytes",
     "gauge", "TCP delivery rate of the last sample (bytes per second)"},
};

static const json_t *
lookup(const json_t *o, const struct figure *fig)
{
    if (fig->obj != NULL)
        o = json_object_get(o, fig->obj);
    return json_object_get(o, fig->key);
}

static void
head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
value(FILE *f, const json_t *v)
{
    if (json_is_integer(v))
        fprintf(f, " %" JSON_INTEGER_FORMAT "\n", json_integer_value(v));
    else if (json_is_real(v))
        fprintf(f, " %.17g\n", json_real_value(v));
    else if (json_is_boolean(v))
        fprintf(f, " %d\n", json_is_true(v));
    else
        fputs(" 0\n", f);
}

/* A label value, escaped as the format wants (\\, \", \n). */
static void
label(FILE *f, const char *name, const char *v, bool first)
{
    fprintf(f, "%s%s=\"", first ? "" : ",", name);
    for (; v != NULL && *v != '\0'; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', f);
        if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
    fputc('"', f);
}

static const char *
str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));

    return s != NULL ? s : "";
}

static int
by_name(const void *a, const void *b)
{
    return strcmp(str(*(const json_t *const *) a, "name"),
                  str(*(const json_t *const *) b, "name"));
}

static int
by_id(const void *a, const void *b)
{
    json_int_t x = json_integer_value(
                   json_object_get(*(json_t *const *) a, "id")),
               y = json_integer_value(
                   json_object_get(*(json_t *const *) b, "id"));

    return (x > y) - (x < y);
}

/* The first `max` entries of arr in `order` (a malloc'ed array), and how
 * many were left out. */
static const json_t **
select_sorted(const json_t *arr, size_t max,
              int (*order)(const void *, const void *), size_t *n_p,
              size_t *omitted_p)
{
    size_t n = json_array_size(arr);
    const json_t **v = calloc(n + 1, sizeof(*v));

    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(arr, i);
    qsort(v, n, sizeof(*v), order);
    *omitted_p = n > max ? n - max : 0;
    *n_p = n > max ? max : n;
    return v;
}

static void
queue_labels(FILE *f, const json_t *q)
{
    label(f, "queue", str(q, "name"), true);
}

static void
conn_labels(FILE *f, const json_t *c)
{
    char stream[24];

    snprintf(stream, sizeof(stream), "%" JSON_INTEGER_FORMAT,
             json_integer_value(json_object_get(c, "stream")));
    label(f, "peer", str(c, "peer"), true);
    label(f, "session", str(c, "session"), false);
    label(f, "stream", stream, false);
}

/* Every family of `figs` over the objects v[0..n-1], labelled by `labels`;
 * an object lacking the figure (a connection the kernel did not report)
 * has no sample. */
static void
families(FILE *f, const struct figure *figs, size_t n_figs, const json_t **v,
         size_t n, void (*labels)(FILE *, const json_t *))
{
    for (size_t k = 0; k < n_figs; k++) {
        head(f, figs[k].name, figs[k].type, figs[k].help);
        for (size_t i = 0; i < n; i++) {
            const json_t *x = lookup(v[i], &figs[k]);

            if (x == NULL)
                continue;
            fprintf(f, "%s{", figs[k].name);
            labels(f, v[i]);
            fputc('}', f);
            value(f, x);
        }
    }
}

static void
gateway_part(FILE *f, const json_t *doc)
{
    const json_t *rej = json_object_get(doc, "rejections"), *v;
    const char *reason;

    head(f, "scimq_build_info", "gauge", "the gateway's version");
    fputs("scimq_build_info{", f);
    label(f, "version", str(doc, "version"), true);
    fputs("} 1\n", f);
    for (size_t k = 0; k < sizeof(gateway_figures) / sizeof(*gateway_figures);
         k++) {
        const json_t *x = lookup(doc, &gateway_figures[k]);

        if (x == NULL)
            continue; /* e.g. journal syncs without a journal */
        head(f, gateway_figures[k].name, gateway_figures[k].type,
             gateway_figures[k].help);
        fputs(gateway_figures[k].name, f);
        value(f, x);
    }
    head(f, "scimq_rejections_total", "counter",
         "connections refused or cut to protect the gateway, by reason");
    json_object_foreach((json_t *) rej, reason, v)
    {
        fputs("scimq_rejections_total{", f);
        label(f, "reason", reason, true);
        fputc('}', f);
        value(f, v);
    }
}

static void
queues_part(FILE *f, const json_t *doc, size_t *omitted_p)
{
    size_t n;
    const json_t **v =
        select_sorted(json_object_get(doc, "queues"), GW_METRICS_MAX_QUEUES,
                      by_name, &n, omitted_p);

    if (v == NULL)
        return;
    families(f, queue_figures, sizeof(queue_figures) / sizeof(*queue_figures),
             v, n, queue_labels);
    head(f, "scimq_queue_info", "gauge", "a queue's kind and durability");
    for (size_t i = 0; i < n; i++) {
        fputs("scimq_queue_info{", f);
        queue_labels(f, v[i]);
        label(f, "kind", str(v[i], "kind"), false);
        label(f, "durability", str(v[i], "durability"), false);
        label(f, "closed",
              json_is_true(json_object_get(v[i], "closed")) ? "true" : "false",
              false);
        fputs("} 1\n", f);
    }
    free(v);
}

static void
conns_part(FILE *f, const json_t *doc, size_t *omitted_p)
{
    size_t n;
    const json_t **v =
        select_sorted(json_object_get(doc, "connections_detail"),
                      GW_METRICS_MAX_CONNS, by_id, &n, omitted_p);

    if (v == NULL)
        return;
    families(f, conn_figures, sizeof(conn_figures) / sizeof(*conn_figures), v,
             n, conn_labels);
    head(f, "scimq_connection_rtt_seconds", "gauge", "TCP smoothed RTT");
    for (size_t i = 0; i < n; i++) {
        const json_t *tcp = json_object_get(v[i], "tcp");

        if (tcp == NULL)
            continue;
        fputs("scimq_connection_rtt_seconds{", f);
        conn_labels(f, v[i]);
        fprintf(f, "} %.6f\n",
                (double) json_integer_value(json_object_get(tcp, "rtt_us")) /
                    1e6);
    }
    head(f, "scimq_connection_info", "gauge",
         "a connection's worker, TCP state and congestion control");
    for (size_t i = 0; i < n; i++) {
        const json_t *tcp = json_object_get(v[i], "tcp");
        char worker[24];

        snprintf(worker, sizeof(worker), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(v[i], "worker")));
        fputs("scimq_connection_info{", f);
        conn_labels(f, v[i]);
        label(f, "worker", worker, false);
        label(f, "state", tcp ? str(tcp, "state") : "", false);
        label(f, "congestion",
              tcp ? str(tcp, "congestion") : str(v[i], "congestion"), false);
        fputs("} 1\n", f);
    }
    free(v);
}

/* ------------------------------------------------------------------------ */
/* MPI jobs (STATS "mpi_jobs", from the agents' REPORTs)                    */
/* ------------------------------------------------------------------------ */

struct agent_ref {
    const char *job;
    const json_t *a; /* one of the job's agents_detail */
};

static void
agent_labels(FILE *f, const struct agent_ref *r)
{
    char agent[24];

    snprintf(agent, sizeof(agent), "%" JSON_INTEGER_FORMAT,
             json_integer_value(json_object_get(r->a, "agent")));
    label(f, "job", r->job, true);
    label(f, "agent", agent, false);
}

/* One gauge or counter family of every agent's figure key. */
static void
agent_family(FILE *f, const struct agent_ref *v, size_t n, const char *key,
             const char *name, const char *type, const char *help)
{
    head(f, name, type, help);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s{", name);
        agent_labels(f, &v[i]);
        fputc('}', f);
        value(f, json_object_get(v[i].a, key));
    }
}

/* The service-time histogram of each agent, in seconds (cumulative). */
static void
service_family(FILE *f, const struct agent_ref *v, size_t n)
{
    static const char name[] = "scimq_mpi_service_seconds";

    head(f, name, "histogram",
         "time from a message's hand-out to its rank's DONE, per agent");
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_object_get(v[i].a, "service_us");
        const json_t *b = json_object_get(s, "buckets");
        json_int_t cum = 0;

        /* Bucket k holds times under 2^k us; the last one is open. */
        for (size_t k = 0; k + 1 < json_array_size(b); k++) {
            cum += json_integer_value(json_array_get(b, k));
            fprintf(f, "%s_bucket{", name);
            agent_labels(f, &v[i]);
            fprintf(f, ",le=\"%.6g\"} %" JSON_INTEGER_FORMAT "\n",
                    (double) (UINT64_C(1) << k) / 1e6, cum);
        }
        fprintf(f, "%s_bucket{", name);
        agent_labels(f, &v[i]);
        fprintf(f, ",le=\"+Inf\"} %" JSON_INTEGER_FORMAT "\n",
                json_integer_value(json_object_get(s, "count")));
        fprintf(f, "%s_sum{", name);
        agent_labels(f, &v[i]);
        fprintf(f, "} %.6f\n",
                (double) json_integer_value(json_object_get(s, "sum")) / 1e6);
        fprintf(f, "%s_count{", name);
        agent_labels(f, &v[i]);
        fputc('}', f);
        value(f, json_object_get(s, "count"));
    }
}

/* Per rank: delivered and acked, at most GW_METRICS_MAX_RANKS series. */
static void
rank_families(FILE *f, const struct agent_ref *v, size_t n, size_t *omitted_p)
{
    static const char *const keys[] = {"delivered", "acked"};
    static const char *const names[] = {"scimq_mpi_rank_delivered_total",
                                        "scimq_mpi_rank_acked_total"};
    static const char *const helps[] = {
        "messages the agent handed to the rank",
        "messages the rank processed (DONE), acknowledged to the gateway"};

    for (size_t k = 0; k < 2; k++) {
        size_t shown = 0, omitted = 0;

        head(f, names[k], "counter", helps[k]);
        for (size_t i = 0; i < n; i++) {
            const json_t *ranks = json_object_get(v[i].a, "ranks_detail");

            for (size_t r = 0; r < json_array_size(ranks); r++) {
                const json_t *x = json_array_get(ranks, r);
                char rank[24];

                if (shown == GW_METRICS_MAX_RANKS) {
                    omitted++;
                    continue;
                }
                shown++;
                snprintf(rank, sizeof(rank), "%" JSON_INTEGER_FORMAT,
                         json_integer_value(json_object_get(x, "rank")));
                fprintf(f, "%s{", names[k]);
                agent_labels(f, &v[i]);
                label(f, "rank", rank, false);
                fputc('}', f);
                value(f, json_object_get(x, keys[k]));
            }
        }
        *omitted_p = omitted;
    }
}

static void
jobs_part(FILE *f, const json_t *doc, size_t *agents_omitted_p,
          size_t *ranks_omitted_p)
{
    const json_t *jobs = json_object_get(doc, "mpi_jobs");
    struct agent_ref v[GW_METRICS_MAX_AGENTS];
    size_t n = 0, omitted = 0;

    /* Jobs come sorted by id and agents by index (jobs.c). */
    for (size_t j = 0; j < json_array_size(jobs); j++) {
        const json_t *job = json_array_get(jobs, j);
        const json_t *agents = json_object_get(job, "agents_detail");

        for (size_t a = 0; a < json_array_size(agents); a++) {
            if (n == GW_METRICS_MAX_AGENTS) {
                omitted++;
                continue;
            }
            v[n].job = str(job, "job");
            v[n].a = json_array_get(agents, a);
            n++;
        }
    }
    *agents_omitted_p = omitted;
    head(f, "scimq_mpi_agent_info", "gauge",
         "an MPI agent that reports: its libfabric provider, whether its "
         "job ended (final report)");
    for (size_t i = 0; i < n; i++) {
        fputs("scimq_mpi_agent_info{", f);
        agent_labels(f, &v[i]);
        label(f, "provider", str(v[i].a, "provider"), false);
        label(f, "final",
              json_is_true(json_object_get(v[i].a, "final")) ? "true" : "false",
              false);
        fputs("} 1\n", f);
    }
    agent_family(f, v, n, "ranks", "scimq_mpi_agent_ranks", "gauge",
                 "ranks the agent serves");
    agent_family(f, v, n, "delivered", "scimq_mpi_agent_delivered_total",
                 "counter", "messages the agent handed to its ranks");
    agent_family(f, v, n, "acked", "scimq_mpi_agent_acked_total", "counter",
                 "messages its ranks processed and the agent acknowledged");
    agent_family(f, v, n, "pool_used", "scimq_mpi_pool_used_bytes", "gauge",
                 "registered pool bytes holding messages");
    agent_family(f, v, n, "pool_total", "scimq_mpi_pool_bytes", "gauge",
                 "registered pool bytes of the agent");
    agent_family(f, v, n, "age_s", "scimq_mpi_report_age_seconds", "gauge",
                 "time since the agent's last report");
    service_family(f, v, n);
    rank_families(f, v, n, ranks_omitted_p);
}

char *
gw_metrics_render(const json_t *doc, size_t *len_p)
{
    size_t queues_omitted = 0, conns_omitted = 0;
    size_t agents_omitted = 0, ranks_omitted = 0;
    char *text = NULL;
    FILE *f = open_memstream(&text, len_p);

    if (f == NULL)
        return NULL;
    gateway_part(f, doc);
    queues_part(f, doc, &queues_omitted);
    conns_part(f, doc, &conns_omitted);
    jobs_part(f, doc, &agents_omitted, &ranks_omitted);
    head(f, "scimq_metrics_omitted", "gauge",
         "queues, connections, MPI agents or ranks left out of these metrics "
         "(cardinality bound)");
    fprintf(f, "scimq_metrics_omitted{kind=\"queues\"} %zu\n", queues_omitted);
    fprintf(f, "scimq_metrics_omitted{kind=\"connections\"} %zu\n",
            conns_omitted);
    fprintf(f, "scimq_metrics_omitted{kind=\"mpi_agents\"} %zu\n",
            agents_omitted);
    fprintf(f, "scimq_metrics_omitted{kind=\"mpi_ranks\"} %zu\n",
            ranks_omitted);
    if (ferror(f) != 0) {
        fclose(f);
        free(text);
        return NULL;
    }
    fclose(f);
    return text;
}
