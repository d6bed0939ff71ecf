/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <scimq/error.h>

#include "broker.h"
#include "common/error_internal.h"
#include "common/log.h"
#include "spill.h"

struct gw_spill_job {
    struct gw_payload *pl;
    enum gw_spill_op op;
    struct gw_spill_job *next;
};

struct gw_spill {
    char dir[PATH_MAX / 2];
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct gw_spill_job *head, *tail;
    bool stop;
};

static void
spill_path(const struct gw_spill *sp, const struct gw_payload *pl, char *buf,
           size_t len)
{
    snprintf(buf, len, "%s/scimq-%ld-%" PRIu64 ".spill", sp->dir,
             (long) getpid(), pl->id);
}

static int
spill_write(const struct gw_spill *sp, const struct gw_payload *pl)
{
    char path[PATH_MAX];
    size_t done = 0;
    int fd, rc = 0;

    spill_path(sp, pl, path, sizeof(path));
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return scimq__err_from_errno(errno);
    while (done < pl->len) {
        ssize_t n = write(fd, pl->data + done, pl->len - done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? scimq__err_from_errno(errno) : SCIMQ_EIO;
            break;
        }
        done += (size_t) n;
    }
    if (close(fd) != 0 && rc == 0)
        rc = scimq__err_from_errno(errno);
    if (rc != 0) {
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_ERROR, GATEWAY, 10000,
                         "cannot spill to %s: %s; keeping it in memory", path,
                         scimq_strerror(rc));
        unlink(path);
    }
    return rc;
}

static int
spill_read(const struct gw_spill *sp, const struct gw_payload *pl,
           uint8_t **data_p)
{
    char path[PATH_MAX];
    uint8_t *buf = malloc(pl->len > 0 ? pl->len : 1);
    size_t done = 0;
    int fd, rc = 0;

    if (buf == NULL)
        return SCIMQ_ENOMEM;
    spill_path(sp, pl, path, sizeof(path));
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        free(buf);
        return scimq__err_from_errno(errno);
    }
    while (done < pl->len) {
        ssize_t n = read(fd, buf + done, pl->len - done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? scimq__err_from_errno(errno) : SCIMQ_EIO;
            break;
        }
        done += (size_t) n;
    }
    close(fd);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *data_p = buf;
    return 0;
}

static void *
spill_main(void *arg)
{
    struct gateway *gw = arg;
    struct gw_spill *sp = gw->spill;

    for (;;) {
        struct gw_spill_job *job;
        uint8_t *data = NULL;
        int rc;

        pthread_mutex_lock(&sp->lock);
        while (sp->head == NULL && !sp->stop)
            pthread_cond_wait(&sp->cond, &sp->lock);
        job = sp->head;
        if (job != NULL) {
            sp->head = job->next;
            if (sp->head == NULL)
                sp->tail = NULL;
        }
        pthread_mutex_unlock(&sp->lock);
        if (job == NULL)
            break; /* stopping and nothing left */

        /* The payload's state (SPILLING/LOADING) keeps it alive and its
         * data untouched while the file I/O runs without gw->lock. */
        if (job->op == GW_SPILL_WRITE)
            rc = spill_write(sp, job->pl);
        else
            rc = spill_read(sp, job->pl, &data);
        pthread_mutex_lock(&gw->lock);
        if (job->op == GW_SPILL_WRITE)
            gw_broker_spilled_locked(gw, job->pl, rc);
        else
            gw_broker_loaded_locked(gw, job->pl, data, rc);
        pthread_mutex_unlock(&gw->lock);
        free(job);
    }
    return NULL;
}

int
gw_spill_start(struct gateway *gw)
{
    struct gw_spill *sp;
    const char *dir = gw->opt.spill_dir;

    if (dir == NULL || dir[0] == '\0')
        return 0;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        SCIMQ_LOG_ERROR(GATEWAY, "cannot create spill directory %s: %s", dir,
                        strerror(errno));
        return scimq__err_from_errno(errno);
    }
    if (access(dir, W_OK | X_OK) != 0) {
        SCIMQ_LOG_ERROR(GATEWAY, "spill directory %s is not writable: %s", dir,
                        strerror(errno));
        return SCIMQ_EACCES;
    }
    sp = calloc(1, sizeof(*sp));
    if (sp == NULL)
        return SCIMQ_ENOMEM;
    if (strlen(dir) >= sizeof(sp->dir)) {
        free(sp);
        return SCIMQ_ENAMETOOLONG;
    }
    strcpy(sp->dir, dir);
    pthread_mutex_init(&sp->lock, NULL);
    pthread_cond_init(&sp->cond, NULL);
    gw->spill = sp;
    if (pthread_create(&sp->thread, NULL, spill_main, gw) != 0) {
        gw->spill = NULL;
        free(sp);
        return SCIMQ_ENOMEM;
    }
    return 0;
}

void
gw_spill_stop(struct gateway *gw)
{
    struct gw_spill *sp = gw->spill;

    if (sp == NULL)
        return;
    pthread_mutex_lock(&sp->lock);
    sp->stop = true;
    pthread_cond_signal(&sp->cond);
    pthread_mutex_unlock(&sp->lock);
    pthread_join(sp->thread, NULL);
    /* Files of payloads still referenced are removed by gw_broker_fini(),
     * which needs the directory name: gw_spill_free() comes after it. */
}

void
gw_spill_free(struct gateway *gw)
{
    struct gw_spill *sp = gw->spill;

    if (sp == NULL)
        return;
    pthread_mutex_destroy(&sp->lock);
    pthread_cond_destroy(&sp->cond);
    free(sp);
    gw->spill = NULL;
}

void
gw_spill_submit(struct gateway *gw, struct gw_payload *pl, enum gw_spill_op op)
{
    struct gw_spill *sp = gw->spill;
    struct gw_spill_job *job = calloc(1, sizeof(*job));

    if (job == NULL) {
        SCIMQ_LOG_ERROR(GATEWAY, "out of memory for a spill job");
        abort();
    }
    job->pl = pl;
    job->op = op;
    pthread_mutex_lock(&sp->lock);
    if (sp->tail)
        sp->tail->next = job;
    else
        sp->head = job;
    sp->tail = job;
    pthread_cond_signal(&sp->cond);
    pthread_mutex_unlock(&sp->lock);
}

void
gw_spill_unlink(struct gateway *gw, struct gw_payload *pl)
{
    char path[PATH_MAX];

    if (gw->spill == NULL)
        return;
    spill_path(gw->spill, pl, path, sizeof(path));
    if (unlink(path) != 0 && errno != ENOENT)
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 10000,
                         "cannot remove spill file %s: %s", path,
                         strerror(errno));
}
