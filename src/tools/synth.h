/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Self-verifying synthetic payloads (doc/scimp.md, "Synthetic payloads").
 *
 *   0  "SCIMQSYN"          8 bytes
 *   8  sequence number     u64 big-endian
 *   16 payload length      u64 big-endian
 *   24 CRC32C of bytes 32.. u32 big-endian
 *   28 CRC32C of bytes 0..27 u32 big-endian
 *   32 pseudo-random bytes (splitmix64 seeded by the sequence number)
 *
 * A receiver checks a message without knowing anything about the sender:
 * it detects corruption, and the sequence numbers reveal losses and
 * duplicates.
 */
#ifndef SCIMQ_TOOLS_SYNTH_H
#define SCIMQ_TOOLS_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include <scimq/client.h>

#define SCIMQ_SYNTH_HEADER_LEN 32

/* Fills buf (len >= 32) as message number seq.  Returns 0 or SCIMQ_EINVAL. */
int scimq__synth_fill(void *buf, size_t len, uint64_t seq);

/*
 * Size of message seq in a mixed-size stream between min and max: skewed
 * toward small sizes (log-uniform in u^4), deterministic in seq, so that a
 * mix of 1 KiB .. 16 MiB averages about 0.4 MiB while still sending the
 * largest sizes regularly.  Returns min when min >= max.
 */
uint64_t scimq__synth_size(uint64_t seq, uint64_t min, uint64_t max);

/*
 * Checks buf.  Returns 0 and the sequence number; SCIMQ_EINVAL when buf is
 * not a synthetic payload (too short, no magic, length mismatch) and
 * SCIMQ_EPROTO_DATASUM when it is one but corrupted.
 */
int scimq__synth_verify(const void *buf, size_t len, uint64_t *seq_p);

/* The block of a message that carries the synthetic payload: the one named
 * "data", else the first; NULL for a message without blocks. */
const scimq_block_t *scimq__synth_block(const scimq_block_t *blocks,
                                        uint32_t count);

struct scimq_seqset;

/*
 * What a receiver does with each message: checks the synthetic payload of
 * block b; when it verifies, adds its sequence number to seqs and, with
 * log_fd >= 0, appends it to that log as one line.  Call it before
 * acknowledging the message, so the log covers every acknowledgement even
 * if the receiver is killed.  Returns 0 (verified, *seq_p set),
 * SCIMQ_EINVAL (not a synthetic payload) or SCIMQ_EPROTO_DATASUM (corrupt).
 */
int scimq__synth_record(const scimq_block_t *b, struct scimq_seqset *seqs,
                        int log_fd, uint64_t *seq_p);

#endif /* SCIMQ_TOOLS_SYNTH_H */
