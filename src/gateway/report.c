/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdio.h>
#include <unistd.h>

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

json_t *
gw_report_stats(struct gateway *gw, const scimq_proto_str_t *queue)
{
    json_t *root =
        json_pack("{s:s, s:f, s:i}", "version", PACKAGE_VERSION, "uptime_s",
                  (double) (gw_now_ms() - gw->start_ms) / 1000.0, "workers",
                  gw->n_workers);

    gw_connreg_json(&gw->conns, root);
    gw_hub_stats(&gw->hub, queue, root);
    json_object_set_new(json_object_get(root, "memory"), "rss",
                        json_integer((json_int_t) rss_bytes()));
    gw_connreg_totals_json(&gw->conns, json_object_get(root, "totals"));
    json_object_set_new(
        json_object_get(root, "spill"), "dir",
        json_string(gw->opt.spill_dir ? gw->opt.spill_dir : ""));
    return root;
}
