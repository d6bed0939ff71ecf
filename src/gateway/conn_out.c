/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Writing: every frame is encoded into a header buffer plus iovecs that
 * point at its blocks (a DELIVER's point into pool memory: no copy), and
 * queued with one uv_write.  A DELIVER's payload stays pinned until its
 * write completes or fails.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <scimq/error.h>

#include "common/log.h"
#include "common/param.h"
#include "conn.h"
#include "conn_out.h"
#include "records.h"

struct conn_write {
    uv_write_t req;
    struct gw_conn *c;
    struct gw_payload *payload; /* pinned for a DELIVER, else NULL */
    uint64_t payload_len;
    uint64_t conn_id;
    void *owned; /* freed with the write (JSON text) */
    uint8_t *hdr;
    uint64_t bytes;
    uint64_t counted; /* bytes in gw_conn.out_queued */
    uint8_t *cipher;  /* TLS: what is written instead of bufs */
    bool raw;         /* TLS records of their own, not a frame */
    unsigned int nbufs;
    uv_buf_t bufs[];
};

static void
finish_if_done(struct gw_conn *c)
{
    if (c->close_after_write && c->writes_pending == 0)
        gw_conn_close(c, NULL);
}

static void
on_write(uv_write_t *req, int status)
{
    struct conn_write *wr = (struct conn_write *) req;
    struct gw_conn *c = wr->c;

    c->writes_pending--;
    c->out_queued -= wr->counted;
    if (status == 0 && !wr->raw) {
        c->info.bytes_out += wr->bytes;
        c->info.frames_out++;
    }
    free(wr->cipher);
    if (wr->payload != NULL)
        gw_hub_written(&c->gw->hub, c->host->index, wr->conn_id, wr->payload,
                       wr->payload_len);
    free(wr->owned);
    free(wr->hdr);
    free(wr);
    if (status < 0 && status != UV_ECANCELED) {
        gw_conn_close(c, uv_strerror(status));
        return;
    }
    finish_if_done(c);
    /* Hysteresis: reading resumes at half the cap, not at every write. */
    if (c->out_blocked && c->out_queued <= c->gw->opt.max_output / 2)
        c->host->output_drained(c);
}

int
gw_conn_send(struct gw_conn *c, const scimq_proto_frame_t *f,
             struct gw_payload *pinned, uint64_t pinned_len, void *owned)
{
    struct conn_write *wr = NULL;
    struct iovec *iov = NULL;
    size_t hdr_len, iovcnt;
    uint64_t total;
    int rc;

    rc = scimq_proto_encode_size(f, &hdr_len, &iovcnt);
    if (rc != 0)
        goto fail;
    wr = calloc(1, sizeof(*wr) + iovcnt * sizeof(uv_buf_t));
    iov = calloc(iovcnt, sizeof(*iov));
    rc = SCIMQ_ENOMEM;
    if (wr == NULL || iov == NULL || (wr->hdr = malloc(hdr_len)) == NULL)
        goto fail;
    rc = scimq_proto_encode(f, wr->hdr, hdr_len, iov, iovcnt, &iovcnt, &total);
    if (rc != 0)
        goto fail;
    for (size_t i = 0; i < iovcnt; i++)
        wr->bufs[i] =
            uv_buf_init(iov[i].iov_base, (unsigned int) iov[i].iov_len);
    free(iov);
    iov = NULL;
    wr->c = c;
    wr->payload = pinned;
    wr->payload_len = pinned_len;
    wr->conn_id = c->id;
    wr->owned = owned;
    wr->bytes = total;
    wr->nbufs = (unsigned int) iovcnt;
    if (c->tls != NULL) {
        /* Encrypted here, once: the pool's bytes are read by the cipher,
         * and the ciphertext goes out as one buffer. */
        size_t len;

        for (unsigned int i = 0; i < wr->nbufs; i++) {
            rc = scimq__tls_write(c->tls, wr->bufs[i].base, wr->bufs[i].len);
            if (rc != 0) {
                /* Half a record stream: nothing later can be trusted. */
                gw_conn_close(c, scimq__tls_error(c->tls));
                goto fail;
            }
        }
        len = scimq__tls_pending(c->tls);
        rc = SCIMQ_ENOMEM;
        wr->cipher = malloc(len > 0 ? len : 1);
        if (wr->cipher == NULL)
            goto fail;
        wr->bufs[0] = uv_buf_init(
            (char *) wr->cipher,
            (unsigned int) scimq__tls_take(c->tls, wr->cipher, len));
        wr->nbufs = 1;
    }
    if (uv_write(&wr->req, (uv_stream_t *) &c->tcp, wr->bufs, wr->nbufs,
                 on_write) != 0) {
        rc = SCIMQ_ECONNRESET;
        goto fail;
    }
    c->writes_pending++;
    if (pinned == NULL) {
        wr->counted = total;
        c->out_queued += total;
        if (c->out_queued > c->gw->opt.max_output && !c->out_blocked) {
            /* A peer that asks and never reads would make us queue
             * replies without end: stop taking its requests. */
            c->out_blocked = true;
            c->out_blocked_ms = gw_now_ms();
            gw_conn_read_stop(c);
            SCIMQ_LOG_INFO(GATEWAY,
                           "connection %" PRIu64 " (%s): %" PRIu64
                           " B of replies queued; not reading it until they "
                           "drain",
                           c->id, c->info.peer, c->out_queued);
        }
    }
    return 0;
fail:
    if (pinned != NULL)
        gw_hub_written(&c->gw->hub, c->host->index, c->id, pinned, pinned_len);
    if (wr != NULL) {
        free(wr->hdr);
        free(wr->cipher);
    }
    free(wr);
    free(iov);
    free(owned);
    SCIMQ_LOG_WARN(GATEWAY, "connection %" PRIu64 ": cannot send %s: %s", c->id,
                   scimq_proto_opcode_name(f->opcode), scimq_strerror(rc));
    return rc;
}

void
gw_conn_send_error(struct gw_conn *c, uint64_t request_id, int code,
                   const char *text)
{
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_ERROR,
                             .request_id = request_id};

    f.args.error.code = code;
    f.args.error.text.ptr = text;
    f.args.error.text.len = (uint16_t) strnlen(text, 1024);
    (void) gw_conn_send(c, &f, NULL, 0, NULL);
}

void
gw_conn_send_ok(struct gw_conn *c, uint64_t request_id, uint64_t value,
                char *json)
{
    scimq_proto_block_t blk = {"json", 4, json, json ? strlen(json) : 0};
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_OK,
                             .request_id = request_id};

    f.args.ok.value = value;
    if (json != NULL) {
        f.block_count = 1;
        f.blocks = &blk;
    }
    (void) gw_conn_send(c, &f, NULL, 0, json);
}

void
gw_conn_send_json(struct gw_conn *c, uint64_t request_id, uint64_t value,
                  json_t *doc)
{
    char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);

    json_decref(doc);
    if (text == NULL) {
        gw_conn_send_error(c, request_id, SCIMQ_ENOMEM, "out of memory");
        return;
    }
    gw_conn_send_ok(c, request_id, value, text);
}

void
gw_conn_send_deliver(struct gw_conn *c, struct gw_action *a)
{
    struct gw_payload *pl = a->payload;
    scimq_proto_block_t blocks_small[8], *blocks = blocks_small;
    scimq_proto_frame_t f = {.opcode = SCIMQ_PROTO_OP_DELIVER,
                             .request_id = a->request_id};
    uint64_t off = 0;

    if (pl->block_count > 8) {
        blocks = calloc(pl->block_count, sizeof(*blocks));
        if (blocks == NULL) {
            gw_hub_written(&c->gw->hub, c->host->index, c->id, pl, a->len);
            gw_conn_close(c, "out of memory");
            return;
        }
    }
    for (uint32_t i = 0; i < pl->block_count; i++) {
        blocks[i].name = pl->blocks[i].name;
        blocks[i].name_len = pl->blocks[i].name_len;
        blocks[i].data = pl->data + off;
        blocks[i].len = pl->blocks[i].len;
        off += pl->blocks[i].len;
    }
    if (scimq__param_bool(SCIMQ_PARAM_PROTO_DATASUM))
        f.flags |= SCIMQ_PROTO_F_DATASUM;
    f.args.deliver.delivery_id = a->delivery_id;
    f.args.deliver.msg_id = a->msg_id;
    f.args.deliver.attempt = a->attempt;
    f.args.deliver.queue.ptr = a->text;
    f.args.deliver.queue.len = (uint16_t) strlen(a->text);
    f.block_count = pl->block_count;
    f.blocks = blocks;
    /* The pin passes to the write, which releases it when done. */
    if (gw_conn_send(c, &f, pl, a->len, NULL) != 0)
        gw_conn_close(c, "cannot send a delivery");
    if (blocks != blocks_small)
        free(blocks);
}

void
gw_conn_fail(struct gw_conn *c, uint64_t request_id, int code, const char *text)
{
    if (c->closing || c->close_after_write)
        return;
    SCIMQ_LOG_INFO(GATEWAY, "connection %" PRIu64 " (%s): %s (%s); closing",
                   c->id, c->info.peer, text, scimq_err_name(code));
    gw_conn_send_error(c, request_id, code, text);
    c->close_after_write = true;
    gw_conn_read_stop(c);
    finish_if_done(c);
}

void
gw_conn_tls_flush(struct gw_conn *c)
{
    struct conn_write *wr;
    size_t len;

    if (c->tls == NULL || c->closing || (len = scimq__tls_pending(c->tls)) == 0)
        return;
    wr = calloc(1, sizeof(*wr) + sizeof(uv_buf_t));
    if (wr == NULL || (wr->cipher = malloc(len)) == NULL) {
        free(wr);
        gw_conn_close(c, "out of memory");
        return;
    }
    wr->c = c;
    wr->conn_id = c->id;
    wr->raw = true;
    wr->nbufs = 1;
    wr->bufs[0] =
        uv_buf_init((char *) wr->cipher,
                    (unsigned int) scimq__tls_take(c->tls, wr->cipher, len));
    if (uv_write(&wr->req, (uv_stream_t *) &c->tcp, wr->bufs, 1, on_write) !=
        0) {
        free(wr->cipher);
        free(wr);
        gw_conn_close(c, "cannot write");
        return;
    }
    c->writes_pending++;
}

static void
on_close(uv_handle_t *h)
{
    struct gw_conn *c = h->data;

    atomic_fetch_sub(&c->gw->n_connections, 1);
    scimq_proto_decoder_destroy(c->dec);
    free(c->pending_hello);
    scimq__tls_free(c->tls);
    free(c->cipher);
    free(c->stage);
    free(c);
}

void
gw_conn_close(struct gw_conn *c, const char *why)
{
    struct gateway *gw = c->gw;

    if (c->closing)
        return;
    c->closing = true;
    if (why != NULL)
        SCIMQ_LOG_INFO(GATEWAY, "connection %" PRIu64 " (%s) closed: %s", c->id,
                       c->info.peer, why);
    gw_conn_read_stop(c);
    if (c->pl != NULL) {
        gw_hub_put_abort(&gw->hub, c->host->index, c->pl);
        c->pl = NULL;
    }
    if (c->parked)
        gw_hub_unpark(&gw->hub, c->id);
    if (c->in_session)
        gw_hub_stream_down(&gw->hub, c->host->index, c->id, c->said_bye);
    gw_connreg_remove(&gw->conns, &c->info);
    HASH_DEL(c->host->conns, c);
    /* Pending writes complete (cancelled) before on_close runs. */
    uv_close((uv_handle_t *) &c->tcp, on_close);
}
