/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <scimq/error.h>

#include "tls.h"

struct scimq_tls {
    SSL *ssl;
    BIO *rbio, *wbio; /* ciphertext in, out (memory BIOs owned by ssl) */
    char err[256];
};

/* OpenSSL's error queue, drained into err. */
static void
ssl_error(const char *what, char *err, size_t errlen)
{
    unsigned long e = ERR_get_error();
    char buf[200] = "";

    if (e != 0)
        ERR_error_string_n(e, buf, sizeof(buf));
    ERR_clear_error();
    snprintf(err, errlen, "%s%s%s", what, buf[0] ? ": " : "", buf);
}

static SSL_CTX *
ctx_base(const SSL_METHOD *m)
{
    SSL_CTX *ctx = SSL_CTX_new(m);

    if (ctx == NULL)
        return NULL;
    (void) SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* Large frames: let SSL_write take any length (memory BIO). */
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return ctx;
}

static int
ctx_own_cert(SSL_CTX *ctx, const char *cert, const char *key, char *err,
             size_t errlen)
{
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        ssl_error(cert, err, errlen);
        return SCIMQ_EINVAL;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        ssl_error(key, err, errlen);
        return SCIMQ_EINVAL;
    }
    return 0;
}

int
scimq__tls_ctx_server(const char *cert, const char *key, const char *ca,
                      scimq_tls_ctx_t **ctx_p, char *err, size_t errlen)
{
    SSL_CTX *ctx = ctx_base(TLS_server_method());
    int rc;

    if (ctx == NULL)
        return SCIMQ_ENOMEM;
    rc = ctx_own_cert(ctx, cert, key, err, errlen);
    if (rc == 0 && ca != NULL && ca[0] != '\0') {
        if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
            ssl_error(ca, err, errlen);
            rc = SCIMQ_EINVAL;
        } else {
            SSL_CTX_set_verify(
                ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        }
    }
    if (rc != 0) {
        SSL_CTX_free(ctx);
        return rc;
    }
    *ctx_p = ctx;
    return 0;
}

int
scimq__tls_ctx_client(const char *ca, const char *cert, const char *key,
                      scimq_tls_ctx_t **ctx_p, char *err, size_t errlen)
{
    SSL_CTX *ctx = ctx_base(TLS_client_method());
    int rc = 0;

    if (ctx == NULL)
        return SCIMQ_ENOMEM;
    if (ca != NULL && ca[0] != '\0'
            ? SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1
            : SSL_CTX_set_default_verify_paths(ctx) != 1) {
        ssl_error(ca != NULL && ca[0] ? ca : "system CA store", err, errlen);
        rc = SCIMQ_EINVAL;
    }
    if (rc == 0 && cert != NULL && cert[0] != '\0')
        rc = ctx_own_cert(ctx, cert, key != NULL && key[0] ? key : cert, err,
                          errlen);
    if (rc != 0) {
        SSL_CTX_free(ctx);
        return rc;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    *ctx_p = ctx;
    return 0;
}

void
scimq__tls_ctx_free(scimq_tls_ctx_t *ctx)
{
    SSL_CTX_free(ctx);
}

int
scimq__tls_new(scimq_tls_ctx_t *ctx, bool server, const char *host,
               struct scimq_tls **t_p)
{
    struct scimq_tls *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return SCIMQ_ENOMEM;
    t->ssl = SSL_new(ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (t->ssl == NULL || t->rbio == NULL || t->wbio == NULL) {
        SSL_free(t->ssl);
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        free(t);
        return SCIMQ_ENOMEM;
    }
    /* An empty read BIO means "more to come", not end of file. */
    BIO_set_mem_eof_return(t->rbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    if (server) {
        SSL_set_accept_state(t->ssl);
    } else {
        SSL_set_connect_state(t->ssl);
        if (host != NULL && host[0] != '\0') {
            (void) SSL_set_tlsext_host_name(t->ssl, host);
            /* The certificate must name the host (or its address). */
            if (SSL_set1_host(t->ssl, host) != 1) {
                scimq__tls_free(t);
                return SCIMQ_ENOMEM;
            }
        }
    }
    *t_p = t;
    return 0;
}

void
scimq__tls_free(struct scimq_tls *t)
{
    if (t == NULL)
        return;
    SSL_free(t->ssl); /* and its BIOs */
    free(t);
}

int
scimq__tls_feed(struct scimq_tls *t, const void *data, size_t len)
{
    while (len > 0) {
        int chunk = len > (1u << 30) ? (1 << 30) : (int) len;
        int n = BIO_write(t->rbio, data, chunk);

        if (n <= 0)
            return SCIMQ_ENOMEM;
        data = (const uint8_t *) data + n;
        len -= (size_t) n;
    }
    return 0;
}

/* The outcome of an SSL call that returned r <= 0. */
static int
outcome(struct scimq_tls *t, int r, const char *what)
{
    int e = SSL_get_error(t->ssl, r);
    long v;

    switch (e) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        ERR_clear_error();
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        snprintf(t->err, sizeof(t->err), "the peer closed TLS");
        return SCIMQ_ECONNRESET;
    default:
        v = SSL_get_verify_result(t->ssl);
        if (v != X509_V_OK) {
            ERR_clear_error();
            snprintf(t->err, sizeof(t->err), "certificate: %s",
                     X509_verify_cert_error_string(v));
            return SCIMQ_EACCES;
        }
        ssl_error(what, t->err, sizeof(t->err));
        return SCIMQ_EIO;
    }
}

int
scimq__tls_handshake(struct scimq_tls *t)
{
    int r;

    if (SSL_is_init_finished(t->ssl))
        return 1;
    r = SSL_do_handshake(t->ssl);
    if (r == 1)
        return 1;
    return outcome(t, r, "TLS handshake");
}

ssize_t
scimq__tls_read(struct scimq_tls *t, void *buf, size_t cap)
{
    int want = cap > (1u << 30) ? (1 << 30) : (int) cap;
    int r = SSL_read(t->ssl, buf, want);

    if (r > 0)
        return r;
    return outcome(t, r, "TLS read");
}

int
scimq__tls_write(struct scimq_tls *t, const void *data, size_t len)
{
    while (len > 0) {
        int chunk = len > (1u << 30) ? (1 << 30) : (int) len;
        int r = SSL_write(t->ssl, data, chunk);

        if (r <= 0) {
            int rc = outcome(t, r, "TLS write");

            return rc != 0 ? rc : SCIMQ_EAGAIN;
        }
        data = (const uint8_t *) data + r;
        len -= (size_t) r;
    }
    return 0;
}

size_t
scimq__tls_pending(struct scimq_tls *t)
{
    return (size_t) BIO_ctrl_pending(t->wbio);
}

size_t
scimq__tls_take(struct scimq_tls *t, void *buf, size_t cap)
{
    int want = cap > (1u << 30) ? (1 << 30) : (int) cap;
    int n = BIO_read(t->wbio, buf, want);

    return n > 0 ? (size_t) n : 0;
}

const char *
scimq__tls_error(struct scimq_tls *t)
{
    return t->err[0] ? t->err : "TLS error";
}
