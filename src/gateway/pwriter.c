/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <scimq/error.h>

#include "common/error_internal.h"
#include "common/iov.h"
#include "pwriter.h"

struct gw_pwriter {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    /* The write in hand: set by submit, taken by the thread. */
    struct iovec iov[GW_PWRITER_IOV];
    int n, fd, rc;
    uint64_t off;
    bool pending, done, stop;
};

int
gw_pwritev_all(int fd, struct iovec *iov, int n, uint64_t off)
{
    while (n > 0) {
        ssize_t w = pwritev(fd, iov, n > IOV_MAX ? IOV_MAX : n, (off_t) off);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return scimq__err_from_errno(errno);
        if (w == 0)
            return SCIMQ_EIO;
        off += (uint64_t) w;
        iov = scimq__iov_advance(iov, &n, (size_t) w);
    }
    return 0;
}

static void *
pwriter_main(void *arg)
{
    struct gw_pwriter *p = arg;

    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->pending && !p->stop)
            pthread_cond_wait(&p->cond, &p->lock);
        if (!p->pending)
            break;
        p->pending = false;
        pthread_mutex_unlock(&p->lock);
        p->rc = gw_pwritev_all(p->fd, p->iov, p->n, p->off);
        pthread_mutex_lock(&p->lock);
        p->done = true;
        pthread_cond_broadcast(&p->cond);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int
gw_pwriter_start(struct gw_pwriter **p_p)
{
    struct gw_pwriter *p = calloc(1, sizeof(*p));

    *p_p = NULL;
    if (p == NULL)
        return SCIMQ_ENOMEM;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    if (pthread_create(&p->thread, NULL, pwriter_main, p) != 0) {
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return SCIMQ_ENOMEM;
    }
    *p_p = p;
    return 0;
}

void
gw_pwriter_stop(struct gw_pwriter *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void
gw_pwriter_submit(struct gw_pwriter *p, int fd, const struct iovec *iov, int n,
                  uint64_t off)
{
    pthread_mutex_lock(&p->lock);
    memcpy(p->iov, iov, (size_t) n * sizeof(*iov));
    p->n = n;
    p->fd = fd;
    p->off = off;
    p->done = false;
    p->pending = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

int
gw_pwriter_wait(struct gw_pwriter *p)
{
    int rc;

    pthread_mutex_lock(&p->lock);
    while (!p->done)
        pthread_cond_wait(&p->cond, &p->lock);
    rc = p->rc;
    pthread_mutex_unlock(&p->lock);
    return rc;
}
