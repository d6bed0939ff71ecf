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

/*
 * Output is gathered per connection and written once per loop turn: every
 * frame queued for a connection while the loop works (the replies to the
 * frames of one read, the DELIVERs of the broker's actions) goes out in one
 * uv_write, that is one writev.  A batch holds the headers back to back in
 * its arena (a run of control frames is then one iovec), iovecs over the
 * payloads of DELIVERs (pool memory: no copy), and what to release when the
 * write is done.  Batches are recycled by the host, so a steady stream of
 * small frames allocates nothing per frame.
 */
#define OUT_ARENA (16u << 10)
#define OUT_BUFS 256u
#define OUT_FRAMES 128u
/* Batches a host keeps for reuse. */
#define OUT_SPARE 8u

struct out_frame {
    struct gw_payload *payload; /* pinned for a DELIVER, else NULL */
    uint64_t payload_len;
    void *owned; /* freed with the write (JSON text) */
};

struct conn_batch {
    uv_write_t req;
    struct gw_conn *c;
    struct conn_batch *next; /* host's spare list */
    uint8_t *cipher;         /* TLS: what is written instead of bufs */
    bool raw;                /* TLS records of their own, no frames */
    unsigned int nframes, nbufs, frames_cap, bufs_cap;
    size_t arena_len, arena_cap;
    uint64_t bytes;   /* wire bytes of the frames */
    uint64_t counted; /* bytes in gw_conn.out_queued */
    /* PUT_OK merging (session version 3): the last frame of the batch is
     * a PUT_OK or PUT_OK_RANGE for requests merge_rid.. (merge_count of
     * them, msg ids from merge_msg), at merge_off in the arena. */
    bool merge;
    size_t merge_off, merge_len;
    uint64_t merge_rid, merge_msg;
    uint32_t merge_count;
    struct out_frame *frames;
    uv_buf_t *bufs;
    uint8_t *arena;
};

static struct conn_batch *
batch_new(struct gw_conn_host *host, unsigned int bufs, size_t arena)
{
    struct conn_batch *b;
    size_t frames = bufs < OUT_FRAMES ? OUT_FRAMES : bufs;

    if (bufs <= OUT_BUFS && arena <= OUT_ARENA && host->spare != NULL) {
        b = host->spare;
        host->spare = b->next;
        host->n_spare--;
    } else {
        if (bufs < OUT_BUFS)
            bufs = OUT_BUFS;
        if (arena < OUT_ARENA)
            arena = OUT_ARENA;
        b = malloc(sizeof(*b) + frames * sizeof(struct out_frame) +
                   bufs * sizeof(uv_buf_t) + arena);
        if (b == NULL)
            return NULL;
        b->frames = (struct out_frame *) (void *) (b + 1);
        b->bufs = (uv_buf_t *) (void *) (b->frames + frames);
        b->arena = (uint8_t *) (b->bufs + bufs);
        b->frames_cap = (unsigned int) frames;
        b->bufs_cap = bufs;
        b->arena_cap = arena;
    }
    b->c = NULL;
    b->next = NULL;
    b->cipher = NULL;
    b->raw = false;
    b->nframes = b->nbufs = 0;
    b->arena_len = 0;
    b->bytes = b->counted = 0;
    b->merge = false;
    return b;
}

/* Releases what the frames hold and gives the batch back to the host. */
static void
batch_release(struct gw_conn_host *host, uint64_t conn_id, struct conn_batch *b)
{
    for (unsigned int i = 0; i < b->nframes; i++) {
        struct out_frame *fr = &b->frames[i];

        if (fr->payload != NULL)
            gw_hub_written(&host->gw->hub, host->index, conn_id, fr->payload,
                           fr->payload_len);
        free(fr->owned);
    }
    free(b->cipher);
    if (!host->stopping && b->bufs_cap == OUT_BUFS &&
        b->arena_cap == OUT_ARENA && host->n_spare < OUT_SPARE) {
        b->next = host->spare;
        host->spare = b;
        host->n_spare++;
    } else {
        free(b);
    }
}

void
gw_conn_host_out_fini(struct gw_conn_host *host)
{
    host->stopping = true;
    while (host->spare != NULL) {
        struct conn_batch *b = host->spare;

        host->spare = b->next;
        free(b);
    }
    host->n_spare = 0;
}

static void
finish_if_done(struct gw_conn *c)
{
    if (c->close_after_write && c->writes_pending == 0 && c->out == NULL)
        gw_conn_close(c, NULL);
}

static void
on_write(uv_write_t *req, int status)
{
    struct conn_batch *b = (struct conn_batch *) req;
    struct gw_conn *c = b->c;

    c->writes_pending--;
    c->out_queued -= b->counted;
    if (status == 0 && !b->raw) {
        c->info.bytes_out += b->bytes;
        c->info.frames_out += b->nframes;
    }
    batch_release(c->host, c->id, b);
    if (status < 0 && status != UV_ECANCELED) {
        gw_conn_close(c, uv_strerror(status));
        return;
    }
    finish_if_done(c);
    /* Hysteresis: reading resumes at half the cap, not at every write. */
    if (c->out_blocked && c->out_queued <= c->gw->opt.max_output / 2)
        c->host->output_drained(c);
}

/* Submits the connection's open batch: one uv_write of all its frames. */
static void
conn_flush(struct gw_conn *c)
{
    struct conn_batch *b = c->out;
    uv_buf_t *bufs;
    unsigned int nbufs;

    if (b == NULL)
        return;
    c->out = NULL;
    b->c = c;
    bufs = b->bufs;
    nbufs = b->nbufs;
    if (c->tls != NULL) {
        /* Encrypted here, once for the batch: the pool's bytes are read by
         * the cipher, and the ciphertext goes out as one buffer. */
        size_t len;

        for (unsigned int i = 0; i < b->nbufs; i++) {
            if (scimq__tls_write(c->tls, b->bufs[i].base, b->bufs[i].len) !=
                0) {
                /* Half a record stream: nothing later can be trusted. */
                c->out_queued -= b->counted;
                batch_release(c->host, c->id, b);
                gw_conn_close(c, scimq__tls_error(c->tls));
                return;
            }
        }
        len = scimq__tls_pending(c->tls);
        b->cipher = malloc(len > 0 ? len : 1);
        if (b->cipher == NULL) {
            c->out_queued -= b->counted;
            batch_release(c->host, c->id, b);
            gw_conn_close(c, "out of memory");
            return;
        }
        b->bufs[0] =
            uv_buf_init((char *) b->cipher,
                        (unsigned int) scimq__tls_take(c->tls, b->cipher, len));
        nbufs = 1;
    }
    if (uv_write(&b->req, (uv_stream_t *) &c->tcp, bufs, nbufs, on_write) !=
        0) {
        c->out_queued -= b->counted;
        batch_release(c->host, c->id, b);
        gw_conn_close(c, "cannot write");
        return;
    }
    c->writes_pending++;
}

void
gw_conn_flush_dirty(struct gw_conn_host *host)
{
    struct gw_conn *c;

    /* Bounded: each connection is on the list once; flushing adds none. */
    while ((c = host->dirty) != NULL) {
        host->dirty = c->dirty_next;
        c->dirty_next = NULL;
        c->dirty = false;
        if (!c->closing)
            conn_flush(c);
        finish_if_done(c);
    }
}

/* Adds an iovec to the batch, joined to the previous one when adjacent. */
static void
batch_add_buf(struct conn_batch *b, void *base, size_t len)
{
    uv_buf_t *last = b->nbufs > 0 ? &b->bufs[b->nbufs - 1] : NULL;

    if (len == 0)
        return;
    if (last != NULL && last->base + last->len == (char *) base) {
        last->len += len;
        return;
    }
    b->bufs[b->nbufs++] = uv_buf_init(base, (unsigned int) len);
}

/*
 * A PUT_OK that continues the batch's last PUT_OK (next request id, next
 * msg id) on a session of version 3: the two become one PUT_OK_RANGE,
 * re-encoded in place.  True when merged.
 */
static bool
putok_merge(struct gw_conn *c, struct conn_batch *b,
            const scimq_proto_frame_t *f)
{
    scimq_proto_frame_t r = {.opcode = SCIMQ_PROTO_OP_PUT_OK_RANGE};
    struct iovec iov[2];
    size_t n = 0, old_end;
    uint64_t len = 0, delta;

    if (!b->merge || f->flags != 0 ||
        f->request_id != b->merge_rid + b->merge_count ||
        f->args.put_ok.msg_id != b->merge_msg + b->merge_count ||
        b->merge_count == UINT32_MAX ||
        b->merge_off + b->merge_len != b->arena_len ||
        b->merge_off + 64 > b->arena_cap)
        return false;
    r.request_id = b->merge_rid;
    r.args.put_ok_range.count = b->merge_count + 1;
    r.args.put_ok_range.msg_id = b->merge_msg;
    old_end = b->arena_len;
    if (scimq_proto_encode(&r, b->arena + b->merge_off,
                           b->arena_cap - b->merge_off, iov, 2, &n,
                           &len) != 0 ||
        n != 1)
        return false;
    /* Only PUT_OK becomes PUT_OK_RANGE: the frame grows by 4 bytes, and
     * it is the end of the batch's last iovec. */
    delta = len - b->merge_len;
    b->merge_len = (size_t) len;
    b->merge_count++;
    b->arena_len = old_end + (size_t) delta;
    b->bufs[b->nbufs - 1].len += (size_t) delta;
    b->bytes += delta;
    b->counted += delta;
    c->out_queued += delta;
    return true;
}

int
gw_conn_send(struct gw_conn *c, const scimq_proto_frame_t *f,
             struct gw_payload *pinned, uint64_t pinned_len, void *owned)
{
    struct conn_batch *b;
    struct out_frame *fr;
    size_t hdr_len, iovcnt, off;
    uint64_t total;
    bool mergeable;
    int rc;

    rc = scimq_proto_encode_size(f, &hdr_len, &iovcnt);
    if (rc != 0)
        goto fail;
    rc = SCIMQ_ECONNRESET;
    if (c->closing)
        goto fail;
    mergeable = f->opcode == SCIMQ_PROTO_OP_PUT_OK && f->flags == 0 &&
                pinned == NULL && owned == NULL &&
                c->version >= SCIMQ_PROTO_SESSION_VERSION_RANGES;
    b = c->out;
    if (mergeable && b != NULL && putok_merge(c, b, f))
        return 0;
    if (b != NULL &&
        (b->nframes == b->frames_cap || b->nbufs + iovcnt > b->bufs_cap ||
         b->arena_len + hdr_len + 4 > b->arena_cap)) {
        /* Full: it goes now, a new one takes the rest of this turn. */
        conn_flush(c);
        if (c->closing)
            goto fail;
        b = NULL;
    }
    if (b == NULL) {
        rc = SCIMQ_ENOMEM;
        b = batch_new(c->host, (unsigned int) iovcnt, hdr_len + 4);
        if (b == NULL)
            goto fail;
        c->out = b;
        if (!c->dirty) {
            c->dirty = true;
            c->dirty_next = c->host->dirty;
            c->host->dirty = c;
        }
    }
    off = b->arena_len;
    {
        /* Encoded straight into the free end of bufs (libuv's uv_buf_t is
         * a struct iovec on Unix), then joined where adjacent: each is read
         * before anything is written at or after its place. */
        struct iovec *iov = (struct iovec *) (void *) (b->bufs + b->nbufs);
        unsigned int first = b->nbufs;

        rc = scimq_proto_encode(f, b->arena + off, b->arena_cap - off, iov,
                                b->bufs_cap - b->nbufs, &iovcnt, &total);
        if (rc != 0)
            goto fail;
        for (size_t i = 0; i < iovcnt; i++) {
            uv_buf_t one = b->bufs[first + i];

            batch_add_buf(b, one.base, one.len);
        }
    }
    b->arena_len = off + hdr_len;
    fr = &b->frames[b->nframes++];
    fr->payload = pinned;
    fr->payload_len = pinned_len;
    fr->owned = owned;
    b->bytes += total;
    b->merge = mergeable;
    if (mergeable) {
        b->merge_off = off;
        b->merge_len = hdr_len;
        b->merge_rid = f->request_id;
        b->merge_msg = f->args.put_ok.msg_id;
        b->merge_count = 1;
    }
    if (pinned == NULL) {
        b->counted += total;
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
    free(owned);
    if (rc != SCIMQ_ECONNRESET)
        SCIMQ_LOG_WARN(GATEWAY, "connection %" PRIu64 ": cannot send %s: %s",
                       c->id, scimq_proto_opcode_name(f->opcode),
                       scimq_strerror(rc));
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
    /* Control messages only ever go to sessions of version 4 (bcast.h). */
    if (pl->control && c->version >= SCIMQ_PROTO_SESSION_VERSION_CONTROL)
        f.flags |= SCIMQ_PROTO_F_BROADCAST;
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
    conn_flush(c);
    finish_if_done(c);
}

void
gw_conn_tls_flush(struct gw_conn *c)
{
    struct conn_batch *b;
    size_t len;

    if (c->tls == NULL || c->closing || (len = scimq__tls_pending(c->tls)) == 0)
        return;
    /* Frames gathered before these records go first: the TLS stream is
     * one sequence of records. */
    conn_flush(c);
    if (c->closing)
        return;
    b = batch_new(c->host, 1, 0);
    if (b == NULL || (b->cipher = malloc(len)) == NULL) {
        free(b);
        gw_conn_close(c, "out of memory");
        return;
    }
    b->c = c;
    b->raw = true;
    b->bufs[0] =
        uv_buf_init((char *) b->cipher,
                    (unsigned int) scimq__tls_take(c->tls, b->cipher, len));
    if (uv_write(&b->req, (uv_stream_t *) &c->tcp, b->bufs, 1, on_write) != 0) {
        batch_release(c->host, c->id, b);
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
    if (c->out != NULL) {
        /* Never written: what its frames hold goes back now.  The
         * connection stays on the dirty list until the next flush, which
         * skips it (it is freed only after that, by uv_close). */
        struct conn_batch *b = c->out;

        c->out = NULL;
        c->out_queued -= b->counted;
        batch_release(c->host, c->id, b);
    }
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
