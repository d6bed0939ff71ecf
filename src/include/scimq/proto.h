/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * \file proto.h
 * SciMP, the SciMQ wire protocol: constants, frame encoder and the
 * incremental, zero-copy frame decoder.
 *
 * The byte-level specification is doc/scimp.md; this header is its C
 * binding.  The library behind it is pure: no sockets, threads, logging or
 * global state, so it can be fuzzed and tested byte by byte.
 *
 * A frame on the wire (all integers big-endian):
 *
 *     fixed header (40 bytes) | args | block table | names | data | [crc]
 *
 * - fixed header: magic, version, opcode, flags, request id, header length,
 *   args length, reserved (zero), block count, header checksum, payload
 *   length;
 * - args: the opcode's own fields (see the SCIMQ_PROTO_OPCODE_MAP table);
 * - block table: (name length u32, data length u64) per block;
 * - names: the block names, back to back, not NUL-terminated;
 * - data: the block data, back to back (payload length bytes in all);
 * - crc: CRC32C of the data, present when SCIMQ_PROTO_F_DATASUM is set.
 */
#ifndef SCIMQ_PROTO_H
#define SCIMQ_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <scimq/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Wire constants                                                            */
/* ------------------------------------------------------------------------ */

/** "SCMP" read as a big-endian 32-bit integer. */
#define SCIMQ_PROTO_MAGIC 0x53434D50u
/**
 * Frame format version carried in byte 4 of every fixed header: the layout
 * of frames.  History: 1 = first release (doc/scimp.md, "Version history").
 */
#define SCIMQ_PROTO_FRAME_VERSION 1
/**
 * Session protocol versions (the opcode set and its semantics) this library
 * speaks: a client offers SCIMQ_PROTO_SESSION_VERSION_MIN..MAX in HELLO and
 * the gateway picks one in WELCOME.  History: 1 = first release; 2 = adds
 * LIMIT; 3 (SciMP 1.1) = adds ACK_RANGE, NACK_RANGE, PUT_OK_RANGE and
 * REPORT; 4 (SciMP 1.2) = adds the BROADCAST flag (control messages).
 * The frame layout is the same in all four.
 */
#define SCIMQ_PROTO_SESSION_VERSION_MIN 1
#define SCIMQ_PROTO_SESSION_VERSION_MAX 4
/** The first session version with the range frames (25-27). */
#define SCIMQ_PROTO_SESSION_VERSION_RANGES 3
/** The first session version with control messages (F_BROADCAST). */
#define SCIMQ_PROTO_SESSION_VERSION_CONTROL 4
/** Size of the fixed header. */
#define SCIMQ_PROTO_FIXED_LEN 40
/** Size of one block table entry (name length u32 + data length u64). */
#define SCIMQ_PROTO_BLOCK_ENTRY_LEN 12
/** Size of the payload checksum trailer. */
#define SCIMQ_PROTO_TRAILER_LEN 4
/** Length of a session id (HELLO, WELCOME). */
#define SCIMQ_PROTO_SESSION_ID_LEN 16
/** Length of the authentication nonce (WELCOME) and MAC (AUTH). */
#define SCIMQ_PROTO_NONCE_LEN 32
#define SCIMQ_PROTO_MAC_LEN 32

/** Hard ceilings that no configured limit may exceed. */
#define SCIMQ_PROTO_MAX_HEADER_CAP (16u << 20)
#define SCIMQ_PROTO_MAX_ARGS_LEN 65535u
#define SCIMQ_PROTO_MAX_STRING_LEN 65535u
/**
 * Most ranges in one ACK_RANGE / NACK_RANGE: 4096 ranges are 49,159 bytes
 * of args at most, so the frame fits the default 64 KiB header limit.
 */
#define SCIMQ_PROTO_MAX_RANGES 4096u
/**
 * Most ids one ACK_RANGE / NACK_RANGE may name (the sum of its counts):
 * bounds what one frame makes the receiver do.
 */
#define SCIMQ_PROTO_MAX_RANGE_IDS 65536u
/** Bytes of one range on the wire (first u64, count u32). */
#define SCIMQ_PROTO_RANGE_LEN 12

/* Frame flags (16 bits on the wire). */
/** A CRC32C trailer of the payload follows the data. */
#define SCIMQ_PROTO_F_DATASUM (1u << 0)
/** PUT only: the producer asks for a PUT_OK once the message is queued. */
#define SCIMQ_PROTO_F_CONFIRM (1u << 1)
/**
 * PUT and DELIVER only, session version 4: a control message, delivered
 * to every consumer of the queue in order with its data messages
 * (doc/scimp.md, "Control messages").  The codec accepts it on those two
 * opcodes whatever the version; that it needs version 4 is a session rule.
 */
#define SCIMQ_PROTO_F_BROADCAST (1u << 2)
/** Every flag this version knows; any other bit is an error. */
#define SCIMQ_PROTO_F_ALL                                                      \
    (SCIMQ_PROTO_F_DATASUM | SCIMQ_PROTO_F_CONFIRM | SCIMQ_PROTO_F_BROADCAST)

/** Queue kinds (QUEUE_DECLARE.kind, low four bits). */
enum scimq_proto_queue_kind {
    SCIMQ_PROTO_QUEUE_GUARANTEED = 0, /**< kept until acknowledged */
    SCIMQ_PROTO_QUEUE_BEST_EFFORT = 1 /**< removed once sent */
};
#define SCIMQ_PROTO_QUEUE_KIND_MASK 0x0fu
/**
 * When the gateway sends PUT_OK for a guaranteed queue
 * (QUEUE_DECLARE.kind, high four bits; doc/scimp.md, QUEUE_DECLARE).
 */
enum scimq_proto_durability {
    SCIMQ_PROTO_DURABILITY_DEFAULT = 0, /**< the gateway's --durability */
    SCIMQ_PROTO_DURABILITY_MEMORY = 1,  /**< in its memory */
    SCIMQ_PROTO_DURABILITY_BATCH = 2,   /**< written to its journal */
    SCIMQ_PROTO_DURABILITY_SYNC = 3     /**< journaled and synced */
};
#define SCIMQ_PROTO_QUEUE_DURABILITY_SHIFT 4

/**
 * The opcodes: X(NAME, number, args struct member, blocks allowed).
 * The args member names the union field of scimq_proto_args_t that holds
 * the opcode's fields ("none" for opcodes without arguments).
 * The library knows every opcode of every session version (the frame
 * layout does not change with it); that LIMIT (24) is only sent on a
 * session whose WELCOME chose version 2 or later, and the range frames
 * (25-27) only on one of version 3 or later, are session rules, kept by
 * the client library and the gateway.
 */
#define SCIMQ_PROTO_OPCODE_MAP(X)                                              \
    X(HELLO, 1, hello, 0)                                                      \
    X(WELCOME, 2, welcome, 0)                                                  \
    X(AUTH, 3, auth, 0)                                                        \
    X(OK, 4, ok, 1)                                                            \
    X(ERROR, 5, error, 0)                                                      \
    X(PING, 6, ping, 0)                                                        \
    X(PONG, 7, ping, 0)                                                        \
    X(BYE, 8, none, 0)                                                         \
    X(PUT, 16, queue, 1)                                                       \
    X(PUT_OK, 17, put_ok, 0)                                                   \
    X(GET, 18, get, 0)                                                         \
    X(DELIVER, 19, deliver, 1)                                                 \
    X(ACK, 20, ack, 0)                                                         \
    X(NACK, 21, nack, 0)                                                       \
    X(EXTEND, 22, extend, 0)                                                   \
    X(EOS, 23, queue, 0)                                                       \
    X(LIMIT, 24, limit, 0)                                                     \
    X(ACK_RANGE, 25, ack_range, 0)                                             \
    X(NACK_RANGE, 26, nack_range, 0)                                           \
    X(PUT_OK_RANGE, 27, put_ok_range, 0)                                       \
    X(QUEUE_DECLARE, 32, declare, 0)                                           \
    X(QUEUE_DELETE, 33, queue, 0)                                              \
    X(QUEUE_BIND, 34, pair, 0)                                                 \
    X(QUEUE_UNBIND, 35, pair, 0)                                               \
    X(QUEUE_LIST, 36, queue, 0)                                                \
    X(QUEUE_CLOSE, 37, queue, 0)                                               \
    X(QUEUE_MOVE, 38, move, 0)                                                 \
    X(STATS, 39, queue, 0)                                                     \
    /* REPORT (40): an MPI agent's figures, scimq/report.h */                  \
    X(REPORT, 40, report, 0)

/** Opcode numbers: SCIMQ_PROTO_OP_HELLO, ... */
enum scimq_proto_opcode {
#define SCIMQ_PROTO_OP_ENUM(name, num, args, blocks)                           \
    SCIMQ_PROTO_OP_##name = num,
    SCIMQ_PROTO_OPCODE_MAP(SCIMQ_PROTO_OP_ENUM)
#undef SCIMQ_PROTO_OP_ENUM
};

/* ------------------------------------------------------------------------ */
/* Frames in memory                                                          */
/* ------------------------------------------------------------------------ */

/**
 * A string inside the args: a length and bytes, not NUL-terminated.
 * In a decoded frame it points into the decoder's header buffer.
 */
typedef struct scimq_proto_str {
    const char *ptr;
    uint16_t len;
} scimq_proto_str_t;

/** A range of ids: first, first + 1, ..., first + count - 1. */
typedef struct scimq_proto_range {
    uint64_t first;
    uint32_t count; /* >= 1 */
} scimq_proto_range_t;

/**
 * The ranges of an ACK_RANGE or NACK_RANGE: ascending, each count >= 1,
 * none overlapping or touching the next (doc/scimp.md, "ranges").  To
 * encode, point list at n ranges; a decoded frame has list NULL and wire
 * pointing at the n ranges as they are on the wire, in the decoder's
 * header buffer.  Read either with scimq_proto_range_at().
 */
typedef struct scimq_proto_ranges {
    const scimq_proto_range_t *list;
    const uint8_t *wire;
    uint16_t n;
} scimq_proto_ranges_t;

/** Range i (< r->n) of r, from whichever form r holds. */
SCIMQ_EXPORT scimq_proto_range_t
scimq_proto_range_at(const scimq_proto_ranges_t *r, unsigned int i);

/** Per-opcode arguments; which member is valid follows from the opcode. */
typedef union scimq_proto_args {
    struct { /* HELLO: client opens (or joins) a session on one stream */
        uint8_t version_min, version_max; /* session protocol range */
        uint16_t stream_index;            /* this stream: 0..count-1 */
        uint16_t stream_count;            /* K streams in the session */
        uint64_t features;                /* reserved, 0 */
        uint8_t session_id[SCIMQ_PROTO_SESSION_ID_LEN]; /* 0 = new */
        scimq_proto_str_t client_name;
    } hello;
    struct {                   /* WELCOME: server's answer to HELLO */
        uint8_t version;       /* chosen session protocol version */
        uint8_t auth_required; /* 1: AUTH must follow before anything else */
        uint16_t stream_index;
        uint64_t max_payload; /* largest payload the server accepts */
        uint8_t session_id[SCIMQ_PROTO_SESSION_ID_LEN];
        uint8_t nonce[SCIMQ_PROTO_NONCE_LEN]; /* challenge for AUTH */
        scimq_proto_str_t server_name;
    } welcome;
    struct { /* AUTH: HMAC-SHA256(token, nonce || session id) */
        uint8_t mac[SCIMQ_PROTO_MAC_LEN];
    } auth;
    struct { /* OK: generic success reply; value depends on the request */
        uint64_t value;
    } ok;
    struct { /* ERROR: a SCIMQ_E* code and a message */
        int32_t code;
        scimq_proto_str_t text;
    } error;
    struct { /* PING / PONG: echoed timestamp */
        uint64_t timestamp_ns;
    } ping;
    struct { /* PUT, EOS, QUEUE_DELETE/LIST/CLOSE, STATS */
        scimq_proto_str_t queue;
    } queue;
    struct { /* PUT_OK: queued; durable as doc/scimp.md (PUT) says */
        uint64_t msg_id;
    } put_ok;
    struct { /* GET: add credits for deliveries from a queue */
        uint32_t credit_msgs;
        uint64_t credit_bytes;
        scimq_proto_str_t queue;
    } get;
    struct {                  /* DELIVER: one message to a consumer */
        uint64_t delivery_id; /* names this delivery in ACK/NACK/EXTEND */
        uint64_t msg_id;
        uint32_t attempt; /* 1 on first delivery */
        scimq_proto_str_t queue;
    } deliver;
    struct { /* ACK */
        uint64_t delivery_id;
    } ack;
    struct {                  /* LIMIT (session version 2) */
        uint64_t max_message; /* largest payload accepted; 0 = no limit */
        scimq_proto_str_t queue;
    } limit;
    struct { /* NACK: give a delivery back */
        uint64_t delivery_id;
        uint32_t delay_ms;
        uint8_t requeue; /* 0: dead-letter it; 1: requeue it */
    } nack;
    struct { /* ACK_RANGE (session version 3): ACK of every id in ranges */
        scimq_proto_ranges_t ranges;
    } ack_range;
    struct { /* NACK_RANGE (session version 3): NACK of every id */
        uint32_t delay_ms;
        uint8_t requeue; /* as NACK */
        scimq_proto_ranges_t ranges;
    } nack_range;
    struct { /* PUT_OK_RANGE (session version 3): count PUT_OKs in one */
        uint32_t count;  /* requests request_id .. request_id + count - 1 */
        uint64_t msg_id; /* request_id + i got msg_id + i */
    } put_ok_range;
    struct { /* EXTEND: keep a delivery leased for lease_ms more */
        uint64_t delivery_id;
        uint32_t lease_ms;
    } extend;
    struct {          /* QUEUE_DECLARE */
        uint8_t kind; /* enum scimq_proto_queue_kind */
        uint32_t ack_timeout_ms;
        uint32_t max_attempts; /* 0: unlimited */
        uint64_t max_bytes;    /* 0: unlimited */
        scimq_proto_str_t queue;
        scimq_proto_str_t dead_letter; /* empty: none */
    } declare;
    struct { /* QUEUE_BIND / QUEUE_UNBIND: PUTs to queue also go to target */
        scimq_proto_str_t queue;
        scimq_proto_str_t target;
    } pair;
    struct { /* QUEUE_MOVE: move up to max_msgs ready messages */
        uint64_t max_msgs;
        scimq_proto_str_t queue;
        scimq_proto_str_t target;
    } move;
    /* REPORT: one string, an MPI agent's report (scimq/report.h decodes
     * it; doc/scimp.md, "REPORT") */
    struct {
        scimq_proto_str_t body;
    } report;
} scimq_proto_args_t;

/**
 * One block: an optional name and data.  In a decoded frame name points
 * into the decoder's header buffer and data into the payload buffer.
 */
typedef struct scimq_proto_block {
    const char *name;
    uint32_t name_len;
    void *data;
    uint64_t len;
} scimq_proto_block_t;

/** A frame: header fields, arguments and blocks. */
typedef struct scimq_proto_frame {
    uint8_t version;
    uint8_t opcode;
    uint16_t flags;
    uint64_t request_id;
    scimq_proto_args_t args;
    uint32_t block_count;
    scimq_proto_block_t *blocks;
    uint64_t payload_len; /**< decoded frames: sum of the block lengths */
} scimq_proto_frame_t;

/** Receiver limits, checked before anything is allocated. */
typedef struct scimq_proto_limits {
    uint32_t max_header_len;  /**< fixed + args + table + names */
    uint32_t max_blocks;      /**< blocks per frame */
    uint32_t max_name_len;    /**< bytes per block name */
    uint64_t max_payload_len; /**< data bytes per frame */
} scimq_proto_limits_t;

/** Defaults: 64 KiB header, 256 blocks, 255-byte names, 1 GiB payload. */
#define SCIMQ_PROTO_DEFAULT_MAX_HEADER_LEN (64u << 10)
#define SCIMQ_PROTO_DEFAULT_MAX_BLOCKS 256u
#define SCIMQ_PROTO_DEFAULT_MAX_NAME_LEN 255u
#define SCIMQ_PROTO_DEFAULT_MAX_PAYLOAD_LEN (1ull << 30)

/** Fill lim with the defaults above. */
SCIMQ_EXPORT void scimq_proto_limits_default(scimq_proto_limits_t *lim);

/** The opcode's name ("PUT"), or NULL for an unknown opcode. */
SCIMQ_EXPORT const char *scimq_proto_opcode_name(unsigned int opcode);

/** Non-zero if frames with this opcode may carry blocks. */
SCIMQ_EXPORT int scimq_proto_opcode_has_blocks(unsigned int opcode);

/**
 * CRC32C (Castagnoli), as used by the header checksum and the payload
 * trailer.  Chain calls with the previous result; start with crc = 0.
 * scimq_proto_crc32c(0, "123456789", 9) == 0xE3069283.
 */
SCIMQ_EXPORT uint32_t scimq_proto_crc32c(uint32_t crc, const void *data,
                                         size_t len);

/* ------------------------------------------------------------------------ */
/* Encoder                                                                   */
/* ------------------------------------------------------------------------ */

/**
 * Sizes an encoding of f needs.
 *
 * \param f         the frame to encode.
 * \param hdr_len_p bytes of header buffer scimq_proto_encode() needs
 *                  (the header, plus the trailer when F_DATASUM is set).
 * \param iovcnt_p  iovecs it needs (header + non-empty blocks + trailer).
 * \return 0, or the error scimq_proto_encode() would return for f.
 */
SCIMQ_EXPORT int scimq_proto_encode_size(const scimq_proto_frame_t *f,
                                         size_t *hdr_len_p, size_t *iovcnt_p);

/**
 * Encodes f as header bytes in hdr plus iovecs over the caller's block
 * buffers: the payload is never copied.  When SCIMQ_PROTO_F_DATASUM is set
 * the payload is read once to compute the CRC32C trailer, which is stored
 * in hdr after the header and referenced by the last iovec.
 *
 * \param f        frame; f->payload_len is ignored (computed from blocks).
 * \param hdr      buffer for the header (and trailer).
 * \param hdr_cap  its size.
 * \param iov      array receiving the frame as iovecs, in wire order.
 * \param iov_cap  its length.
 * \param iovcnt_p number of iovecs used.
 * \param frame_len_p total bytes of the frame on the wire (may be NULL).
 * \return 0; SCIMQ_EPROTO_OPCODE (unknown opcode), SCIMQ_EPROTO_FLAGS,
 *         SCIMQ_EPROTO_BLOCKS (blocks on an opcode without blocks),
 *         SCIMQ_EPROTO_ARGS (a string over 65535 bytes or args over
 *         65535 bytes), SCIMQ_EPROTO_HDRLEN (header over the 16 MiB cap),
 *         SCIMQ_EOVERFLOW (payload length overflows 64 bits),
 *         SCIMQ_ENOBUFS (hdr_cap or iov_cap too small), SCIMQ_EINVAL.
 * \note The iovecs point into hdr and into the blocks: both must stay
 *       valid and unchanged until the frame is sent.  Thread-safe.
 */
SCIMQ_EXPORT int scimq_proto_encode(const scimq_proto_frame_t *f, void *hdr,
                                    size_t hdr_cap, struct iovec *iov,
                                    size_t iov_cap, size_t *iovcnt_p,
                                    uint64_t *frame_len_p);

/**
 * Encodes f into one newly allocated contiguous buffer (copies the
 * payload).  Meant for small control frames, tools and tests.
 *
 * \param buf_p on success, the frame; the caller frees it with free().
 * \param len_p its length.
 * \return as scimq_proto_encode(), or SCIMQ_ENOMEM.
 */
SCIMQ_EXPORT int scimq_proto_encode_alloc(const scimq_proto_frame_t *f,
                                          uint8_t **buf_p, size_t *len_p);

/* ------------------------------------------------------------------------ */
/* Decoder                                                                   */
/* ------------------------------------------------------------------------ */

/** Opaque incremental decoder; one per connection. */
typedef struct scimq_proto_decoder scimq_proto_decoder_t;

/** Non-negative results of the decoder's feed/advance calls. */
enum scimq_proto_event {
    /** More bytes are needed; scimq_proto_decoder_need() says how many. */
    SCIMQ_PROTO_NEED_MORE = 0,
    /**
     * The header is in and valid (only reported when the payload is not
     * empty).  The frame's block table is known: choose where the payload
     * goes with scimq_proto_decoder_set_payload() (or _alloc_payload())
     * before feeding more.
     */
    SCIMQ_PROTO_HEADER_READY = 1,
    /** A whole frame is in: scimq_proto_decoder_frame() returns it. */
    SCIMQ_PROTO_FRAME_DONE = 2
};

/**
 * Creates a decoder.
 *
 * \param lim     limits to enforce (copied); NULL for the defaults.
 * \param dec_p   the new decoder.
 * \return 0; SCIMQ_EINVAL when max_header_len is below the fixed header
 *         (40) or above SCIMQ_PROTO_MAX_HEADER_CAP; SCIMQ_ENOMEM.
 */
SCIMQ_EXPORT SCIMQ_WARN_UNUSED_RESULT int
scimq_proto_decoder_create(const scimq_proto_limits_t *lim,
                           scimq_proto_decoder_t **dec_p);

/** Frees a decoder and any payload it allocated and still owns. */
SCIMQ_EXPORT void scimq_proto_decoder_destroy(scimq_proto_decoder_t *dec);

/** Forgets any partial frame and error; the next byte starts a frame. */
SCIMQ_EXPORT void scimq_proto_decoder_reset(scimq_proto_decoder_t *dec);

/**
 * Feeds bytes, consuming at most up to the next event.
 *
 * \param data   bytes received.
 * \param len    how many.
 * \param used_p how many of them were consumed; feed the rest again after
 *               handling the event.
 * \return a scimq_proto_event, or a negative SCIMQ_EPROTO_* code naming
 *         the first thing wrong with the frame.  After an error the
 *         decoder stays failed (framing is lost) and returns the same
 *         code until reset.  SCIMQ_ESTATE: called after HEADER_READY
 *         without a payload destination.
 */
SCIMQ_EXPORT int scimq_proto_decoder_feed(scimq_proto_decoder_t *dec,
                                          const void *data, size_t len,
                                          size_t *used_p);

/**
 * Bytes still needed before the next event: exactly the rest of the
 * fixed header, of the header, or of payload plus trailer.  Reading no
 * more than this never reads into the next frame.
 */
SCIMQ_EXPORT uint64_t
scimq_proto_decoder_need(const scimq_proto_decoder_t *dec);

/**
 * Non-zero when the decoder is between frames (no byte of a frame read
 * yet, or the last frame done): the only place a stream may end cleanly.
 */
SCIMQ_EXPORT int scimq_proto_decoder_idle(const scimq_proto_decoder_t *dec);

/**
 * How many bytes a read into a staging buffer of cap bytes should ask
 * for: all cap, unless the frame before this one had a payload of at
 * least cap / 2.  Then the next is likely as large, and a full stage
 * would take most of its payload, to be copied out again: the answer is
 * then what the header still needs (at least a typical header's worth),
 * so that the payload is read straight into its own buffer.
 */
SCIMQ_EXPORT size_t
scimq_proto_decoder_stage_len(const scimq_proto_decoder_t *dec, size_t cap);

/**
 * Where the next bytes must land, for readv() straight into the final
 * buffers (zero-copy): at most iov_cap iovecs covering at most need()
 * bytes.  In the header phase they point into the decoder's header
 * buffer; in the payload phase into the caller's payload buffer and the
 * trailer.  After reading, report the count with _advance().
 *
 * \return the number of iovecs filled (0 only after an error).
 */
SCIMQ_EXPORT size_t scimq_proto_decoder_iov(scimq_proto_decoder_t *dec,
                                            struct iovec *iov, size_t iov_cap);

/**
 * Reports that n bytes were written into the iovecs from the last
 * scimq_proto_decoder_iov() call.
 *
 * \return as scimq_proto_decoder_feed(); SCIMQ_EINVAL if n is larger than
 *         the iovecs.
 */
SCIMQ_EXPORT int scimq_proto_decoder_advance(scimq_proto_decoder_t *dec,
                                             size_t n);

/**
 * After HEADER_READY: the payload goes to buf (payload_len bytes, blocks
 * back to back).  buf stays the caller's; the decoder only writes into it.
 * buf == NULL discards the payload (it is still checksummed).
 *
 * \return 0; SCIMQ_ENOBUFS if cap < payload length; SCIMQ_ESTATE when no
 *         header is ready.
 */
SCIMQ_EXPORT int scimq_proto_decoder_set_payload(scimq_proto_decoder_t *dec,
                                                 void *buf, uint64_t cap);

/**
 * After HEADER_READY: the decoder allocates the payload buffer itself.  It
 * owns the buffer until the next frame starts or until
 * scimq_proto_decoder_take_payload() hands it to the caller.
 *
 * \return 0; SCIMQ_ENOMEM; SCIMQ_ESTATE when no header is ready.
 */
SCIMQ_EXPORT int scimq_proto_decoder_alloc_payload(scimq_proto_decoder_t *dec);

/**
 * After FRAME_DONE: take ownership of a payload made by _alloc_payload();
 * free it with free().  *buf_p is NULL when the decoder owns none.
 */
SCIMQ_EXPORT void scimq_proto_decoder_take_payload(scimq_proto_decoder_t *dec,
                                                   void **buf_p);

/**
 * Checksums every payload as it arrives (CRC32C, as the DATASUM trailer
 * defines it), in frames without DATASUM too: a receiver that needs the
 * sum anyway (the gateway's journal records carry one) takes it while the
 * bytes are still in the cache instead of reading the payload again.
 * Off by default; stays set until changed.
 */
SCIMQ_EXPORT void
scimq_proto_decoder_set_payload_crc(scimq_proto_decoder_t *dec, int on);

/**
 * After FRAME_DONE: the CRC32C of the frame's payload bytes, when the frame
 * had DATASUM (then it matched the trailer) or set_payload_crc() is on;
 * otherwise 0.  Valid until the next frame starts.
 */
SCIMQ_EXPORT uint32_t
scimq_proto_decoder_payload_crc(const scimq_proto_decoder_t *dec);

/**
 * The frame being decoded: header fields and args after HEADER_READY (or
 * FRAME_DONE), block data pointers once the payload has a destination.
 * Names and strings point into the decoder and stay valid until the next
 * frame starts (the first feed/advance after FRAME_DONE).
 *
 * \return NULL while no header is ready.
 */
SCIMQ_EXPORT const scimq_proto_frame_t *
scimq_proto_decoder_frame(const scimq_proto_decoder_t *dec);

/**
 * The request id of the frame in progress, once its fixed header is in
 * (even if the frame failed later), so that an ERROR reply can name it.
 *
 * \return 0 and *request_id_p set, or SCIMQ_EAGAIN before that.
 */
SCIMQ_EXPORT int
scimq_proto_decoder_request_id(const scimq_proto_decoder_t *dec,
                               uint64_t *request_id_p);

#ifdef __cplusplus
}
#endif

#endif /* SCIMQ_PROTO_H */
