/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The gateway as an agent's message source: one libscimq session of S
 * streams, payloads received straight into pool slots (payload_alloc),
 * one credit per slot, the largest message stated before the first GET,
 * leases extended while messages are held (auto_extend, up to
 * max_hold_ms).
 */
#include "config.h"

#include <inttypes.h>
#include <stddef.h>

#include <scimq/error.h>

#include "common/log.h"
#include "source.h"

const struct scimq_mpi_source_ops *scimq__mpi_source_hook;

static int
gw_open(const struct scimq_mpi_source_cfg *cfg, void **src_p)
{
    scimq_client_options_t co;
    scimq_client_t *c = NULL;
    int rc;

    scimq_client_options_default(&co);
    co.streams = cfg->streams;
    co.client_name = "scimq-mpi-agent";
    co.token_file = cfg->token_file;
    co.payload_alloc = cfg->alloc;
    co.payload_release = cfg->release;
    co.alloc_arg = cfg->alloc_arg;
    /* Long work is not redelivered; dead ranks are noticed (liveness). */
    co.auto_extend = 1;
    co.max_hold_ms = cfg->max_hold_ms;
    rc = scimq_client_open(cfg->url, &co, &c);
    if (rc != 0) {
        SCIMQ_LOG_ERROR(MPI, "agent: cannot connect to %s: %s", cfg->url,
                        scimq_strerror(rc));
        return rc;
    }
    /* The largest message a slot (and a rank) takes, before the first GET. */
    rc = scimq_client_limit(c, cfg->queue, cfg->max_payload);
    if (rc != 0) {
        SCIMQ_LOG_ERROR(MPI, "agent: cannot state the message limit on %s: %s",
                        cfg->queue, scimq_strerror(rc));
        goto fail;
    }
    if (scimq_client_session_version(c) < 2)
        SCIMQ_LOG_INFO(MPI,
                       "agent: the gateway speaks SciMP session version %u "
                       "and cannot be told the largest message (%" PRIu64
                       " bytes): larger ones are dead-lettered here (NACK "
                       "requeue=0)",
                       scimq_client_session_version(c), cfg->max_payload);
    /* One credit per slot: a message arrives only when a slot is free. */
    rc = scimq_client_subscribe(c, cfg->queue, cfg->credits,
                                (uint64_t) cfg->credits * cfg->max_payload);
    if (rc != 0) {
        SCIMQ_LOG_ERROR(MPI, "agent: cannot consume %s: %s", cfg->queue,
                        scimq_strerror(rc));
        goto fail;
    }
    *src_p = c;
    return 0;
fail:
    (void) scimq_client_close(c);
    return rc;
}

static int
gw_get(void *src, scimq_message_t **m_p)
{
    return scimq_client_get(src, m_p, 0);
}

static int
gw_settle(void *src, scimq_message_t *m, int how)
{
    if (how == SCIMQ_SRC_ACK)
        return scimq_client_ack(src, m);
    return scimq_client_nack(src, m, how == SCIMQ_SRC_REQUEUE, 0);
}

static int
gw_extend(void *src, scimq_message_t *m, uint32_t lease_ms)
{
    return scimq_client_extend(src, m, lease_ms);
}

static void
gw_free(void *src, scimq_message_t *m)
{
    scimq_message_free(src, m);
}

static void
gw_close(void *src)
{
    (void) scimq_client_close(src);
}

const struct scimq_mpi_source_ops scimq__mpi_gateway_source = {
    .open = gw_open,
    .get = gw_get,
    .settle = gw_settle,
    .extend = gw_extend,
    .free = gw_free,
    .close = gw_close,
};
