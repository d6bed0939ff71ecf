/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The STATS document: the gateway's own figures, the connection registry
 * and the broker's snapshot, put together outside every lock.
 */
#ifndef SCIMQ_GATEWAY_REPORT_H
#define SCIMQ_GATEWAY_REPORT_H

#include <jansson.h>

#include "gateway.h"

/* A new reference; queue: NULL or empty for all queues, else just it. */
json_t *gw_report_stats(struct gateway *gw, const scimq_proto_str_t *queue);

#endif /* SCIMQ_GATEWAY_REPORT_H */
