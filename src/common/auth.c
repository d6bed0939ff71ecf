/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <scimq/error.h>

#include "auth.h"
#include "error_internal.h"
#include "log.h"

int
scimq__token_load(const char *path, uint8_t **tok_p, size_t *len_p)
{
    uint8_t *buf = NULL;
    struct stat st;
    ssize_t n;
    size_t len = 0;
    int fd, rc;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return scimq__err_from_errno(errno);
    if (fstat(fd, &st) != 0) {
        rc = scimq__err_from_errno(errno);
        goto out;
    }
    if ((st.st_mode & 077) != 0) {
        /* As ssh does for keys: a secret others can read (or replace) is
         * not one; refusing says so before anyone relies on it. */
        SCIMQ_LOG_ERROR(CORE,
                        "token file %s is accessible by group or others "
                        "(mode %04o): refused; chmod 600 %s",
                        path, (unsigned int) (st.st_mode & 07777), path);
        rc = SCIMQ_EACCES;
        goto out;
    }
    buf = malloc(SCIMQ_TOKEN_MAX + 1);
    rc = SCIMQ_ENOMEM;
    if (buf == NULL)
        goto out;
    while ((n = read(fd, buf + len, SCIMQ_TOKEN_MAX + 1 - len)) > 0)
        len += (size_t) n;
    if (n < 0) {
        rc = scimq__err_from_errno(errno);
        goto out;
    }
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    rc = SCIMQ_EINVAL;
    if (len == 0 || len > SCIMQ_TOKEN_MAX) {
        SCIMQ_LOG_ERROR(CORE, "token file %s: %s", path,
                        len == 0 ? "empty" : "longer than 4096 bytes");
        goto out;
    }
    *tok_p = buf;
    *len_p = len;
    buf = NULL;
    rc = 0;
out:
    if (buf != NULL)
        scimq__token_free(buf, SCIMQ_TOKEN_MAX + 1);
    close(fd);
    return rc;
}

int
scimq__token_create(const char *path)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t raw[32];
    char text[2 * sizeof(raw) + 1];
    ssize_t n;
    int fd, rc = 0;

    if (scimq__random_bytes(raw, sizeof(raw)) != 0)
        return SCIMQ_EIO;
    for (size_t i = 0; i < sizeof(raw); i++) {
        text[2 * i] = hex[raw[i] >> 4];
        text[2 * i + 1] = hex[raw[i] & 15];
    }
    text[sizeof(text) - 1] = '\n';
    /* O_EXCL: an existing token is somebody's secret in use; O_NOFOLLOW
     * and the explicit mode: the file is born private, whatever umask. */
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = scimq__err_from_errno(errno);
        goto out;
    }
    n = write(fd, text, sizeof(text));
    if (n != (ssize_t) sizeof(text) || fsync(fd) != 0) {
        rc = n < 0 ? scimq__err_from_errno(errno) : SCIMQ_EIO;
        close(fd);
        unlink(path);
        goto out;
    }
    if (close(fd) != 0) {
        rc = scimq__err_from_errno(errno);
        unlink(path);
    }
out:
    OPENSSL_cleanse(raw, sizeof(raw));
    OPENSSL_cleanse(text, sizeof(text));
    return rc;
}

void
scimq__token_free(uint8_t *tok, size_t len)
{
    if (tok == NULL)
        return;
    OPENSSL_cleanse(tok, len);
    free(tok);
}

int
scimq__auth_mac(const uint8_t *tok, size_t tok_len,
                const uint8_t nonce[SCIMQ_PROTO_NONCE_LEN],
                const uint8_t session_id[SCIMQ_PROTO_SESSION_ID_LEN],
                uint8_t mac[SCIMQ_PROTO_MAC_LEN])
{
    uint8_t msg[SCIMQ_PROTO_NONCE_LEN + SCIMQ_PROTO_SESSION_ID_LEN];
    unsigned int mac_len = 0;

    memcpy(msg, nonce, SCIMQ_PROTO_NONCE_LEN);
    memcpy(msg + SCIMQ_PROTO_NONCE_LEN, session_id, SCIMQ_PROTO_SESSION_ID_LEN);
    if (HMAC(EVP_sha256(), tok, (int) tok_len, msg, sizeof(msg), mac,
             &mac_len) == NULL ||
        mac_len != SCIMQ_PROTO_MAC_LEN)
        return SCIMQ_EIO;
    return 0;
}

int
scimq__auth_check(const uint8_t *tok, size_t tok_len,
                  const uint8_t nonce[SCIMQ_PROTO_NONCE_LEN],
                  const uint8_t session_id[SCIMQ_PROTO_SESSION_ID_LEN],
                  const uint8_t mac[SCIMQ_PROTO_MAC_LEN])
{
    uint8_t want[SCIMQ_PROTO_MAC_LEN];

    if (scimq__auth_mac(tok, tok_len, nonce, session_id, want) != 0)
        return 0;
    return CRYPTO_memcmp(want, mac, SCIMQ_PROTO_MAC_LEN) == 0;
}

int
scimq__random_bytes(void *buf, size_t len)
{
    uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return SCIMQ_EIO;
        }
        p += n;
        len -= (size_t) n;
    }
    return 0;
}
