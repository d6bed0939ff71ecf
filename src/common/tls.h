/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TLS for SciMP streams (OpenSSL), over memory BIOs: the event loops
 * (libuv, gateway and client) keep owning the sockets; this module only
 * turns ciphertext read from a socket into plaintext and plaintext to be
 * sent into ciphertext.  TLS 1.2 at least.  The SciMP handshake (HELLO,
 * AUTH with the token) runs inside, unchanged.
 */
#ifndef SCIMQ_COMMON_TLS_H
#define SCIMQ_COMMON_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct ssl_ctx_st scimq_tls_ctx_t; /* SSL_CTX */
struct scimq_tls;

/*
 * A server context: certificate chain and key (PEM files); with ca, a
 * client certificate signed by it is required.  0, or a SCIMQ_E* code with
 * err set.
 */
int scimq__tls_ctx_server(const char *cert, const char *key, const char *ca,
                          scimq_tls_ctx_t **ctx_p, char *err, size_t errlen);

/*
 * A client context: the server's certificate is verified against ca (PEM;
 * NULL or "": the system's store) and the name connected to; cert and key
 * (optional) are the client's own.
 */
int scimq__tls_ctx_client(const char *ca, const char *cert, const char *key,
                          scimq_tls_ctx_t **ctx_p, char *err, size_t errlen);

void scimq__tls_ctx_free(scimq_tls_ctx_t *ctx);

/* One connection's TLS; host (client only) is the name to verify and the
 * SNI.  0 or SCIMQ_ENOMEM. */
int scimq__tls_new(scimq_tls_ctx_t *ctx, bool server, const char *host,
                   struct scimq_tls **t_p);
void scimq__tls_free(struct scimq_tls *t);

/* Ciphertext read from the socket.  0 or SCIMQ_ENOMEM. */
int scimq__tls_feed(struct scimq_tls *t, const void *data, size_t len);

/*
 * Plaintext, up to cap bytes: > 0 bytes, 0 when more ciphertext is needed,
 * or a negative SCIMQ_E* code (the peer closed, a failed handshake or
 * certificate check: see scimq__tls_error).  Drives the handshake.
 */
ssize_t scimq__tls_read(struct scimq_tls *t, void *buf, size_t cap);

/* Drives the handshake: 1 done, 0 in progress, negative on failure. */
int scimq__tls_handshake(struct scimq_tls *t);

/* Plaintext to send: all of it becomes ciphertext.  0 or a SCIMQ_E* code. */
int scimq__tls_write(struct scimq_tls *t, const void *data, size_t len);

/* Bytes of ciphertext waiting to be sent. */
size_t scimq__tls_pending(struct scimq_tls *t);

/* Takes up to cap bytes of ciphertext to send into buf; returns them. */
size_t scimq__tls_take(struct scimq_tls *t, void *buf, size_t cap);

/* Why the last call failed (OpenSSL's words, or the certificate check). */
const char *scimq__tls_error(struct scimq_tls *t);

#endif /* SCIMQ_COMMON_TLS_H */
