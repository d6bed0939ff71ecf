/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <scimq/error.h>

#include "common/error_internal.h"
#include "common/log.h"
#include "fsdir.h"
#include "spill.h"

struct gw_spill {
    char dir[PATH_MAX / 2];
    gw_spill_done_fn done;
    void *arg;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct gw_actions jobs;
    bool stop;
};

static void
spill_path(const struct gw_spill *sp, uint64_t id, char *buf, size_t len)
{
    snprintf(buf, len, "%s/scimq-%ld-%" PRIu64 ".spill", sp->dir,
             (long) getpid(), id);
}

/* Moves len bytes between fd and buf, whole or an error. */
static int
io_full(int fd, uint8_t *buf, uint64_t len, bool writing)
{
    uint64_t done = 0;

    while (done < len) {
        ssize_t n = writing ? write(fd, buf + done, len - done)
                            : read(fd, buf + done, len - done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return scimq__err_from_errno(errno);
        if (n == 0)
            return SCIMQ_EIO; /* short file or full device */
        done += (uint64_t) n;
    }
    return 0;
}

static int
spill_write(const struct gw_spill *sp, const struct gw_action *job)
{
    char path[PATH_MAX];
    int fd, rc;

    spill_path(sp, job->payload_id, path, sizeof(path));
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return scimq__err_from_errno(errno);
    rc = io_full(fd, job->buf, job->len, true);
    if (close(fd) != 0 && rc == 0)
        rc = scimq__err_from_errno(errno);
    if (rc != 0)
        unlink(path);
    return rc;
}

static int
spill_read(const struct gw_spill *sp, const struct gw_action *job)
{
    char path[PATH_MAX];
    struct stat stbuf;
    int fd, rc;

    spill_path(sp, job->payload_id, path, sizeof(path));
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return scimq__err_from_errno(errno);
    /* A file of the wrong size is damaged: never deliver part of one. */
    if (fstat(fd, &stbuf) != 0 || (uint64_t) stbuf.st_size != job->len)
        rc = SCIMQ_EIO;
    else
        rc = io_full(fd, job->buf, job->len, false);
    close(fd);
    return rc;
}

static void
spill_unlink(const struct gw_spill *sp, uint64_t id)
{
    char path[PATH_MAX];

    spill_path(sp, id, path, sizeof(path));
    if (unlink(path) != 0 && errno != ENOENT)
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 10000,
                         "cannot remove spill file %s: %s", path,
                         strerror(errno));
}

static void *
spill_main(void *arg)
{
    struct gw_spill *sp = arg;

    for (;;) {
        struct gw_action *job;
        int rc;

        pthread_mutex_lock(&sp->lock);
        while (sp->jobs.head == NULL && !sp->stop)
            pthread_cond_wait(&sp->cond, &sp->lock);
        job = gw_actions_pop(&sp->jobs);
        pthread_mutex_unlock(&sp->lock);
        if (job == NULL)
            break; /* stopping and nothing left */
        switch (job->kind) {
        case GW_ACT_SPILL_WRITE:
            rc = spill_write(sp, job);
            sp->done(sp->arg, job, rc);
            break;
        case GW_ACT_SPILL_READ:
            rc = spill_read(sp, job);
            sp->done(sp->arg, job, rc);
            break;
        default:
            spill_unlink(sp, job->payload_id);
            break;
        }
        gw_action_free(job);
    }
    return NULL;
}

/* Our PID's files are leftovers of a gateway that had our PID and died. */
static void
remove_stale(const struct gw_spill *sp)
{
    char prefix[64];
    DIR *d = opendir(sp->dir);
    struct dirent *e;

    if (d == NULL)
        return;
    snprintf(prefix, sizeof(prefix), "scimq-%ld-", (long) getpid());
    while ((e = readdir(d)) != NULL) {
        char path[PATH_MAX];

        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", sp->dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

int
gw_spill_start(const char *dir, gw_spill_done_fn done, void *arg,
               struct gw_spill **sp_p)
{
    struct gw_spill *sp;

    int rc;

    *sp_p = NULL;
    rc = gw_dir_ready(dir, "spill");
    if (rc != 0)
        return rc;
    sp = calloc(1, sizeof(*sp));
    if (sp == NULL)
        return SCIMQ_ENOMEM;
    if (strlen(dir) >= sizeof(sp->dir)) {
        free(sp);
        return SCIMQ_ENAMETOOLONG;
    }
    strcpy(sp->dir, dir);
    sp->done = done;
    sp->arg = arg;
    remove_stale(sp);
    pthread_mutex_init(&sp->lock, NULL);
    pthread_cond_init(&sp->cond, NULL);
    if (pthread_create(&sp->thread, NULL, spill_main, sp) != 0) {
        pthread_mutex_destroy(&sp->lock);
        pthread_cond_destroy(&sp->cond);
        free(sp);
        return SCIMQ_ENOMEM;
    }
    *sp_p = sp;
    return 0;
}

void
gw_spill_stop(struct gw_spill *sp)
{
    if (sp == NULL)
        return;
    pthread_mutex_lock(&sp->lock);
    sp->stop = true;
    pthread_cond_signal(&sp->cond);
    pthread_mutex_unlock(&sp->lock);
    pthread_join(sp->thread, NULL);
    /* Payloads still held die with the process: so do their files. */
    remove_stale(sp);
    pthread_mutex_destroy(&sp->lock);
    pthread_cond_destroy(&sp->cond);
    free(sp);
}

void
gw_spill_submit(struct gw_spill *sp, struct gw_action *job)
{
    pthread_mutex_lock(&sp->lock);
    gw_actions_push(&sp->jobs, job);
    pthread_cond_signal(&sp->cond);
    pthread_mutex_unlock(&sp->lock);
}
