/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <scimq/error.h>

#include "common/log.h"
#include "journal_reaper.h"

struct reap {
    struct reap *next;
    char path[];
};

struct gw_jreaper {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_cond_t idle_cond; /* signalled when the queue has emptied */
    struct reap *head, *tail;
    bool busy; /* a deletion in progress */
    bool stop;
};

static void
reap(const char *path)
{
    if (unlink(path) != 0 && errno != ENOENT)
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 10000,
                         "cannot delete journal segment %s: %s", path,
                         strerror(errno));
}

static void *
reaper_main(void *arg)
{
    struct gw_jreaper *r = arg;

    pthread_mutex_lock(&r->lock);
    for (;;) {
        struct reap *e;

        while (r->head == NULL && !r->stop)
            pthread_cond_wait(&r->cond, &r->lock);
        if (r->head == NULL)
            break; /* stopping, and nothing is left */
        e = r->head;
        r->head = e->next;
        if (r->head == NULL)
            r->tail = NULL;
        r->busy = true;
        pthread_mutex_unlock(&r->lock);
        reap(e->path);
        free(e);
        pthread_mutex_lock(&r->lock);
        r->busy = false;
        if (r->head == NULL)
            pthread_cond_broadcast(&r->idle_cond);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

int
gw_jreaper_start(struct gw_jreaper **r_p)
{
    struct gw_jreaper *r = calloc(1, sizeof(*r));

    *r_p = NULL;
    if (r == NULL)
        return SCIMQ_ENOMEM;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    pthread_cond_init(&r->idle_cond, NULL);
    if (pthread_create(&r->thread, NULL, reaper_main, r) != 0) {
        pthread_mutex_destroy(&r->lock);
        pthread_cond_destroy(&r->cond);
        pthread_cond_destroy(&r->idle_cond);
        free(r);
        return SCIMQ_ENOMEM;
    }
    *r_p = r;
    return 0;
}

void
gw_jreaper_delete(struct gw_jreaper *r, const char *path)
{
    size_t n = strlen(path) + 1;
    struct reap *e = malloc(sizeof(*e) + n);

    if (e == NULL) {
        pthread_mutex_lock(&r->lock);
        while (r->head != NULL || r->busy)
            pthread_cond_wait(&r->idle_cond, &r->lock);
        pthread_mutex_unlock(&r->lock);
        reap(path);
        return;
    }
    memcpy(e->path, path, n);
    e->next = NULL;
    pthread_mutex_lock(&r->lock);
    if (r->tail != NULL)
        r->tail->next = e;
    else
        r->head = e;
    r->tail = e;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

bool
gw_jreaper_idle(struct gw_jreaper *r)
{
    bool idle;

    pthread_mutex_lock(&r->lock);
    idle = r->head == NULL && !r->busy;
    pthread_mutex_unlock(&r->lock);
    return idle;
}

void
gw_jreaper_stop(struct gw_jreaper *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->lock);
    r->stop = true;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    pthread_cond_destroy(&r->idle_cond);
    free(r);
}
