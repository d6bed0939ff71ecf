/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdio.h>
#include <unistd.h>

#include "common/net.h" /* buffers the kernel cut */
#include "log2hist.h"
#include "report.h"

/* Resident set size from /proc/self/statm (bytes; 0 if unknown). */
static uint64_t
rss_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *fp = fopen("/proc/self/statm", "r");

    if (fp == NULL)
        return 0;
    if (fscanf(fp, "%lu %lu", &size, &resident) != 2)
        resident = 0;
    fclose(fp);
    return (uint64_t) resident * (uint64_t) sysconf(_SC_PAGESIZE);
}

static void
syncs_json(struct gw_journal *j, json_t *journal)
{
    struct gw_journal_syncs s;

    gw_journal_syncs(j, &s);
    json_object_set_new(journal, "syncs", json_integer((json_int_t) s.count));
    json_object_set_new(
        journal, "sync_us",
        json_pack(
            "{s:I, s:I, s:I}", "median_below",
            (json_int_t) gw_log2_quantile(s.bucket, GW_JOURNAL_SYNC_BUCKETS,
                                          s.count, s.max_us, 0.5),
            "p99_below",
            (json_int_t) gw_log2_quantile(s.bucket, GW_JOURNAL_SYNC_BUCKETS,
                                          s.count, s.max_us, 0.99),
            "max", (json_int_t) s.max_us));
}

json_t *
gw_report_stats(struct gateway *gw, const scimq_proto_str_t *queue)
{
    json_t *root =
        json_pack("{s:s, s:f, s:i}", "version", PACKAGE_VERSION, "uptime_s",
                  (double) (gw_now_ms() - gw->start_ms) / 1000.0, "workers",
                  gw->n_workers);

    gw_connreg_json(&gw->conns, root);
    /* Sockets whose explicit net_sndbuf / net_rcvbuf the
     * kernel cut (capped at net.core.wmem_max / rmem_max, src/common/net.c),
     * and the caps now. */
    json_object_set_new(
        root, "net",
        json_pack(
            "{s:I, s:I, s:I}", "buffers_short",
            (json_int_t) scimq__net_buffers_short(), "wmem_max",
            (json_int_t) scimq__net_sysctl_long("/proc/sys/net/core/wmem_max"),
            "rmem_max",
            (json_int_t) scimq__net_sysctl_long(
                "/proc/sys/net/core/rmem_max")));
    json_object_set_new(
        root, "limits",
        json_pack("{s:I, s:i, s:i, s:i, s:i, s:I}", "nofile",
                  (json_int_t) gw->opt.nofile, "max_connections",
                  gw->opt.max_connections, "max_conn_per_peer",
                  gw->opt.peer_limits.per_peer, "max_unauth",
                  gw->opt.peer_limits.unauth, "max_unauth_per_peer",
                  gw->opt.peer_limits.unauth_per_peer, "max_output",
                  (json_int_t) gw->opt.max_output));
    gw_hub_stats(&gw->hub, queue, root);
    json_object_set_new(json_object_get(root, "memory"), "rss",
                        json_integer((json_int_t) rss_bytes()));
    gw_connreg_totals_json(&gw->conns, json_object_get(root, "totals"));
    if (gw->hub.journal != NULL)
        syncs_json(gw->hub.journal, json_object_get(root, "journal"));
    json_object_set_new(root, "mpi_jobs", gw_jobs_json(&gw->jobs, gw_now_ms()));
    json_object_set_new(
        json_object_get(root, "spill"), "dir",
        json_string(gw->opt.spill_dir ? gw->opt.spill_dir : ""));
    return root;
}
