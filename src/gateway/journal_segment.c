/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <scimq/error.h>

#include "common/error_internal.h"
#include "common/iov.h"
#include "common/log.h"
#include "journal_codec.h"
#include "journal_segment.h"

#define ROUND_DOWN(x) ((x) & ~(uint64_t) (GW_JSEG_ALIGN - 1))
#define ROUND_UP(x) ROUND_DOWN((x) + GW_JSEG_ALIGN - 1)

int
gw_jseg_init(struct gw_jseg *s)
{
    void *buf;

    memset(s, 0, sizeof(*s));
    s->fd = -1;
    if (posix_memalign(&buf, GW_JSEG_ALIGN, GW_JSEG_BUF + GW_JSEG_ALIGN) != 0)
        return SCIMQ_ENOMEM;
    s->buf = buf;
    s->tail = s->buf + GW_JSEG_BUF;
    return 0;
}

void
gw_jseg_fini(struct gw_jseg *s)
{
    gw_jseg_close(s);
    free(s->buf);
    s->fd = -1;
    s->buf = s->tail = NULL;
}

int
gw_jseg_open(struct gw_jseg *s, const char *path, uint64_t seg, uint64_t seal,
             bool reuse)
{
    struct stat st;
    int fl;

    s->fd = open(path,
                 reuse ? O_WRONLY | O_CLOEXEC
                       : O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                 0600);
    if (s->fd < 0)
        return scimq__err_from_errno(errno);
    if (reuse && fstat(s->fd, &st) != 0) {
        int rc = scimq__err_from_errno(errno);

        close(s->fd);
        s->fd = -1;
        return rc;
    }
    /* Set afterwards: a file system without direct I/O refuses the flag
     * (EINVAL), and the file is written through the page cache. */
    fl = fcntl(s->fd, F_GETFL);
    s->direct = fl >= 0 && fcntl(s->fd, F_SETFL, fl | O_DIRECT) == 0;
    if (!s->direct)
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_INFO, GATEWAY, 3600000,
                         "journal: %s: no direct I/O here (%s); writing "
                         "through the page cache",
                         path, strerror(errno));
    s->seg = seg;
    s->seal = seal;
    s->size = s->written = s->base = s->end = 0;
    s->fill = 0;
    s->reused = reuse;
    /* A reused file's blocks are allocated already; through the page
     * cache, delayed allocation does it. */
    if (!s->direct)
        s->reserved = UINT64_MAX;
    else
        s->reserved = reuse ? ROUND_DOWN((uint64_t) st.st_size) : 0;
    return 0;
}

/* Reserves file space up to at least end (see GW_JSEG_RESERVE).  Advice:
 * where the file system cannot, writes allocate as they go. */
static void
reserve(struct gw_jseg *s, uint64_t end)
{
    uint64_t len;

    if (end <= s->reserved || s->reserved == UINT64_MAX)
        return;
    len = end - s->reserved < GW_JSEG_RESERVE ? GW_JSEG_RESERVE
                                              : ROUND_UP(end - s->reserved);
    if (fallocate(s->fd, FALLOC_FL_KEEP_SIZE, (off_t) s->reserved,
                  (off_t) len) != 0) {
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_INFO, GATEWAY, 3600000,
                         "journal: segment %016llx: no space reserved ahead "
                         "(%s); writes allocate it",
                         (unsigned long long) s->seg, strerror(errno));
        s->reserved = UINT64_MAX;
        return;
    }
    s->reserved += len;
}

/* Writes iov[0..n) at off, whole (the iovecs are consumed). */
static int
pwrite_all(struct gw_jseg *s, struct iovec *iov, int n, uint64_t off)
{
    uint64_t total = 0;

    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    reserve(s, off + total);
    while (n > 0) {
        ssize_t w = pwritev(s->fd, iov, n > IOV_MAX ? IOV_MAX : n, (off_t) off);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return scimq__err_from_errno(errno);
        if (w == 0)
            return SCIMQ_EIO;
        off += (uint64_t) w;
        if (off > s->end)
            s->end = off;
        iov = scimq__iov_advance(iov, &n, (size_t) w);
    }
    return 0;
}

/* Copies bytes into the buffer, writing it out whenever it is full. */
static int
put(struct gw_jseg *s, const uint8_t *p, uint64_t len)
{
    while (len > 0) {
        size_t n = GW_JSEG_BUF - s->fill;

        if (n > len)
            n = (size_t) len;
        memcpy(s->buf + s->fill, p, n);
        s->fill += n;
        s->size += n;
        p += n;
        len -= n;
        if (s->fill == GW_JSEG_BUF) {
            struct iovec iov = {s->buf, GW_JSEG_BUF};
            int rc = pwrite_all(s, &iov, 1, s->base);

            if (rc != 0)
                return rc;
            s->base += GW_JSEG_BUF;
            s->fill = 0;
        }
    }
    return 0;
}

/* A PAD record so that the next byte falls on a block boundary. */
static int
pad_to_block(struct gw_jseg *s, uint64_t extra)
{
    uint8_t pad[GW_JREC_MAX_PAD];
    uint64_t len = ROUND_UP(s->size + extra) - (s->size + extra);

    if (len == 0)
        return 0;
    if (len < GW_JREC_PREFIX_LEN)
        len += GW_JSEG_ALIGN;
    gw_jrec_pad(pad, (size_t) len, s->seal);
    return put(s, pad, len);
}

int
gw_jseg_append(struct gw_jseg *s, const uint8_t *hdr, size_t hdr_len,
               const uint8_t *data, uint64_t data_len, uint64_t *data_off)
{
    struct iovec iov[3];
    uint64_t whole, tail;
    int n = 0, rc;

    if (!s->direct || data_len < GW_JSEG_DIRECT_MIN ||
        (uintptr_t) data % GW_JSEG_ALIGN != 0) {
        rc = put(s, hdr, hdr_len);
        *data_off = s->size;
        return rc == 0 ? put(s, data, data_len) : rc;
    }
    /* The header ends on a block boundary, so the data's whole blocks go
     * to the file from where they are, behind what the buffer holds. */
    rc = pad_to_block(s, hdr_len);
    if (rc == 0)
        rc = put(s, hdr, hdr_len);
    if (rc != 0)
        return rc;
    *data_off = s->size;
    whole = ROUND_DOWN(data_len);
    tail = data_len - whole;
    if (s->fill > 0)
        iov[n++] = (struct iovec){s->buf, s->fill};
    iov[n++] = (struct iovec){(void *) data, (size_t) whole};
    /* The last partial block goes in the same write, zero-padded: the
     * record is whole in the file after one system call, not two (a
     * second, small direct write cost 0.1-4 ms on this kind of disk). */
    if (tail > 0) {
        memcpy(s->tail, data + whole, (size_t) tail);
        memset(s->tail + tail, 0, GW_JSEG_ALIGN - (size_t) tail);
        iov[n++] = (struct iovec){s->tail, GW_JSEG_ALIGN};
    }
    rc = pwrite_all(s, iov, n, s->base);
    if (rc != 0)
        return rc;
    s->base += s->fill + whole;
    s->size += data_len;
    /* That block stays in the buffer: later records complete it. */
    memcpy(s->buf, s->tail, (size_t) tail);
    s->fill = (size_t) tail;
    s->written = s->size;
    return 0;
}

int
gw_jseg_flush(struct gw_jseg *s)
{
    size_t len = (size_t) ROUND_UP(s->fill), keep;
    struct iovec iov = {s->buf, len};
    int rc;

    if (s->fill == 0 || s->written == s->size) {
        s->written = s->size;
        return 0; /* nothing appended since the last write */
    }
    memset(s->buf + s->fill, 0, len - s->fill);
    rc = pwrite_all(s, &iov, 1, s->base);
    if (rc != 0)
        return rc;
    /* The partial last block stays: later records complete it. */
    keep = s->fill - (size_t) ROUND_DOWN(s->fill);
    if (keep > 0)
        memmove(s->buf, s->buf + s->fill - keep, keep);
    s->base += s->fill - keep;
    s->fill = keep;
    s->written = s->size;
    return 0;
}

int
gw_jseg_seal(struct gw_jseg *s)
{
    int rc = pad_to_block(s, 0);

    return rc == 0 ? gw_jseg_flush(s) : rc;
}

void
gw_jseg_abandon(struct gw_jseg *s)
{
    if (s->fd < 0)
        return;
    if (ftruncate(s->fd, (off_t) s->written) != 0 || fdatasync(s->fd) != 0)
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_ERROR, GATEWAY, 10000,
                         "journal: cannot cut segment %016llx after an "
                         "error: %s",
                         (unsigned long long) s->seg, strerror(errno));
    /* What was written whole is where the close cuts too (not beyond,
     * which would grow the file again with a hole). */
    if (s->end > s->written)
        s->end = s->written;
    gw_jseg_close(s);
}

void
gw_jseg_close(struct gw_jseg *s)
{
    if (s->fd < 0)
        return;
    /* Cutting the file where this segment's writes end frees the space
     * reserved beyond it, and a reused file's older bytes there. */
    if ((s->reused || (s->reserved != 0 && s->reserved != UINT64_MAX)) &&
        ftruncate(s->fd, (off_t) s->end) != 0)
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 10000,
                         "journal: segment %016llx keeps the space beyond "
                         "its end: %s",
                         (unsigned long long) s->seg, strerror(errno));
    close(s->fd);
    s->fd = -1;
}
