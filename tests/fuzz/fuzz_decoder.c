/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer driver for the SciMP decoder.
 *
 * Input: one control byte, then a byte stream.  The control byte picks how
 * the stream is fed (all at once, in small chunks, or through the zero-copy
 * iov/advance path) and what happens at HEADER_READY (decoder-allocated
 * payload, caller buffer, or discard), so every path of the state machine
 * sees every input.
 *
 * Oracle, beyond "no crash, no leak, no hang": every frame the decoder
 * accepts must re-encode to exactly the bytes it was decoded from (SciMP
 * encodings are canonical), and the decoder must consume the whole input or
 * stop at the first error.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <scimq/error.h>
#include <scimq/proto.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Keeps payload allocations small while still crossing every limit check. */
#define FUZZ_MAX_PAYLOAD (1u << 20)

enum feed_style { FEED_ALL, FEED_CHUNKS, FEED_IOV, FEED_STYLES };
enum payload_style {
    PAYLOAD_ALLOC,
    PAYLOAD_CALLER,
    PAYLOAD_DISCARD,
    PAYLOAD_STYLES
};

static void
check_canonical(const scimq_proto_frame_t *f, const uint8_t *wire, size_t len)
{
    uint8_t *buf;
    size_t n;
    int rc = scimq_proto_encode_alloc(f, &buf, &n);

    if (rc != 0 || n != len || memcmp(buf, wire, len) != 0) {
        fprintf(stderr,
                "BUG: accepted frame (opcode %u, %zu bytes) does "
                "not re-encode to itself (rc %d, %zu bytes)\n",
                f->opcode, len, rc, rc == 0 ? n : 0);
        abort();
    }
    free(buf);
}

/* Feeds up to len bytes the chosen way; returns the event or error. */
static int
feed(scimq_proto_decoder_t *dec, enum feed_style style, const uint8_t *in,
     size_t len, size_t *used_p)
{
    struct iovec iov[2];
    size_t niov, copied = 0;

    switch (style) {
    case FEED_CHUNKS:
        /* Odd chunk sizes cut fields in awkward places. */
        return scimq_proto_decoder_feed(dec, in, len < 7 ? len : 7, used_p);
    case FEED_IOV:
        niov = scimq_proto_decoder_iov(dec, iov, 2);
        for (size_t i = 0; i < niov && copied < len; i++) {
            size_t k =
                len - copied < iov[i].iov_len ? len - copied : iov[i].iov_len;

            memcpy(iov[i].iov_base, in + copied, k);
            copied += k;
        }
        *used_p = copied;
        return scimq_proto_decoder_advance(dec, copied);
    case FEED_ALL:
    default:
        return scimq_proto_decoder_feed(dec, in, len, used_p);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    scimq_proto_limits_t lim;
    scimq_proto_decoder_t *dec;
    enum feed_style fstyle;
    enum payload_style pstyle;
    uint8_t *caller_buf = NULL;
    size_t off = 1, frame_start = 1;
    bool stored = false;

    if (size < 1)
        return 0;
    fstyle = (enum feed_style)(data[0] % FEED_STYLES);
    pstyle = (enum payload_style)((data[0] / FEED_STYLES) % PAYLOAD_STYLES);

    scimq_proto_limits_default(&lim);
    lim.max_payload_len = FUZZ_MAX_PAYLOAD;
    lim.max_header_len = 4096;
    lim.max_blocks = 64;
    lim.max_name_len = 64;
    if (scimq_proto_decoder_create(&lim, &dec) != 0)
        abort();

    while (off < size) {
        size_t used = 0;
        int rc = feed(dec, fstyle, data + off, size - off, &used);

        if (used > size - off)
            abort(); /* BUG: consumed more than it was given */
        off += used;
        if (rc < 0) {
            /* Failed decoders stay failed. */
            if (scimq_proto_decoder_feed(dec, data, 1, &used) != rc ||
                used != 0)
                abort();
            break;
        }
        if (rc == SCIMQ_PROTO_HEADER_READY) {
            const scimq_proto_frame_t *f = scimq_proto_decoder_frame(dec);

            if (f == NULL || f->payload_len == 0 ||
                f->payload_len > FUZZ_MAX_PAYLOAD)
                abort();
            stored = pstyle != PAYLOAD_DISCARD;
            if (pstyle == PAYLOAD_ALLOC) {
                if (scimq_proto_decoder_alloc_payload(dec) != 0)
                    abort();
            } else if (pstyle == PAYLOAD_CALLER) {
                free(caller_buf);
                caller_buf = malloc((size_t) f->payload_len);
                if (caller_buf == NULL ||
                    scimq_proto_decoder_set_payload(dec, caller_buf,
                                                    f->payload_len) != 0)
                    abort();
            } else if (scimq_proto_decoder_set_payload(dec, NULL, 0) != 0) {
                abort();
            }
        } else if (rc == SCIMQ_PROTO_FRAME_DONE) {
            const scimq_proto_frame_t *f = scimq_proto_decoder_frame(dec);

            if (f == NULL || !scimq_proto_decoder_idle(dec))
                abort();
            if (stored || f->payload_len == 0)
                check_canonical(f, data + frame_start, off - frame_start);
            frame_start = off;
            stored = false;
        } else if (used == 0) {
            abort(); /* BUG: no progress and no event */
        }
    }
    scimq_proto_decoder_destroy(dec);
    free(caller_buf);
    return 0;
}
