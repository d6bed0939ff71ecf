/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-opcode arguments of SciMP frames (the "args" section), shared by the
 * encoder and the decoder in frame.c.
 */
#ifndef SCIMQ_PROTOCOL_ARGS_H
#define SCIMQ_PROTOCOL_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include <scimq/proto.h>

/* Non-zero if opcode is defined by this protocol version. */
int scimq__proto_opcode_known(unsigned int opcode);

/*
 * Bytes that the args of opcode take on the wire, after checking that they
 * can be encoded (string lengths, value ranges).
 * Returns 0 or SCIMQ_EPROTO_ARGS / SCIMQ_EINVAL.
 */
int scimq__proto_args_size(unsigned int opcode, const scimq_proto_args_t *a,
                           size_t *len_p);

/* Writes the args of opcode at p (scimq__proto_args_size() bytes). */
void scimq__proto_args_write(unsigned int opcode, const scimq_proto_args_t *a,
                             uint8_t *p);

/*
 * Reads exactly len bytes of args of opcode from p into a.  Strings in a
 * point into p.  Returns 0 or SCIMQ_EPROTO_ARGS (truncated, trailing bytes
 * or a value out of range).
 */
int scimq__proto_args_read(unsigned int opcode, const uint8_t *p, size_t len,
                           scimq_proto_args_t *a);

#endif /* SCIMQ_PROTOCOL_ARGS_H */
