/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared-secret authentication (SciMP AUTH): both sides hold a token read
 * from a file; the client proves it with
 *   MAC = HMAC-SHA256(token, nonce || session_id)
 * over the 32-byte WELCOME nonce and the 16-byte session id.
 */
#ifndef SCIMQ_COMMON_AUTH_H
#define SCIMQ_COMMON_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <scimq/proto.h>

/* Longest token accepted (bytes). */
#define SCIMQ_TOKEN_MAX 4096

/*
 * Reads a token file: its bytes, without trailing newlines.  Refuses an
 * empty or oversized token; warns once when the file is readable by group
 * or others.  *tok_p is freed with scimq__token_free().
 * Returns 0, SCIMQ_ENOENT, SCIMQ_EACCES, SCIMQ_EINVAL or SCIMQ_ENOMEM.
 */
int scimq__token_load(const char *path, uint8_t **tok_p, size_t *len_p);

/*
 * Creates a token file: 32 random bytes as 64 hex digits and a newline,
 * mode 0600, never over an existing file (nor through a symlink).
 * Returns 0, SCIMQ_EEXIST, SCIMQ_EIO or an errno-derived code.
 */
int scimq__token_create(const char *path);

/* Wipes and frees a token. */
void scimq__token_free(uint8_t *tok, size_t len);

/* Computes the AUTH MAC.  Returns 0 or SCIMQ_EIO. */
int scimq__auth_mac(const uint8_t *tok, size_t tok_len,
                    const uint8_t nonce[SCIMQ_PROTO_NONCE_LEN],
                    const uint8_t session_id[SCIMQ_PROTO_SESSION_ID_LEN],
                    uint8_t mac[SCIMQ_PROTO_MAC_LEN]);

/* Non-zero when mac is right; compares in constant time. */
int scimq__auth_check(const uint8_t *tok, size_t tok_len,
                      const uint8_t nonce[SCIMQ_PROTO_NONCE_LEN],
                      const uint8_t session_id[SCIMQ_PROTO_SESSION_ID_LEN],
                      const uint8_t mac[SCIMQ_PROTO_MAC_LEN]);

/* Cryptographically random bytes (getrandom).  Returns 0 or SCIMQ_EIO. */
int scimq__random_bytes(void *buf, size_t len);

#endif /* SCIMQ_COMMON_AUTH_H */
