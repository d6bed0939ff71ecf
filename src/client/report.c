/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scimq_session_report(): an MPI agent's REPORT (scimq/report.h) on its
 * gateway session.  Fire and forget, like ACK: no reply on success, so the
 * agent's loop never waits for the gateway; a refused report comes back
 * as an ERROR that the session logs.
 */
#include "config.h"

#include <pthread.h>

#include <scimq/error.h>
#include <scimq/report.h>

#include "client_internal.h"

int
scimq_session_report(scimq_client_t *c, const scimq_report_t *r)
{
    uint8_t body[SCIMQ_REPORT_MAX_LEN];
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_REPORT};
    struct op *op;
    unsigned int version;
    size_t len;
    int rc;

    if (c == NULL || r == NULL)
        return SCIMQ_EINVAL;
    pthread_mutex_lock(&c->lock);
    version = c->version;
    rc = c->dead;
    pthread_mutex_unlock(&c->lock);
    if (rc < 0)
        return rc;
    /* An older gateway's decoder does not know opcode 40: it would drop
     * the whole session, so it is never sent one. */
    if (version < SCIMQ_PROTO_SESSION_VERSION_REPORT)
        return SCIMQ_ENOTSUP;
    rc = scimq_report_encode(r, body, sizeof(body), &len);
    if (rc < 0)
        return rc;
    f.request_id = scimq__client_rid(c);
    f.args.report.body.ptr = (const char *) body;
    f.args.report.body.len = (uint16_t) len;
    rc = scimq__op_frames(OP_SEND, &f, 1, &op);
    if (rc < 0)
        return rc;
    rc = scimq__client_post(c, op);
    if (rc < 0)
        scimq__op_free(op);
    return rc;
}
