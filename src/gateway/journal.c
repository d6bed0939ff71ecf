/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <ctype.h>
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
#include <time.h>
#include <unistd.h>

#include <scimq/error.h>

#include "common/error_internal.h"
#include "clock.h"
#include "common/log.h"
#include "fsdir.h"
#include "journal.h"
#include "journal_codec.h"
#include "journal_reaper.h"
#include "journal_segment.h"
#include "records.h"

struct gw_journal {
    char dir[PATH_MAX / 2];
    gw_journal_done_fn done;
    void *arg;
    uint64_t segment_size;
    uint32_t batch_ms;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct gw_actions jobs;
    bool stop;
    struct gw_jreaper *reaper; /* deletes dropped segments, in order */
    uint64_t reuse_from;       /* segments from here on may become spares */
    uint64_t salt;
    /* Spare files: the segment number each holds, 0 for none. */
    uint64_t spare[GW_JOURNAL_SPARES];
    /* Thread-only state. */
    struct gw_jseg w;  /* the active segment (w.fd -1 before the first) */
    uint64_t next_seg; /* number of the next segment opened */
    struct gw_actions unwritten; /* appended, not yet written or synced */
    bool awaited; /* one of them is waited for (a message's PUT_OK, a spill) */
    bool unsynced;
    uint64_t unsynced_since_ms;
    pthread_mutex_t stats_lock;
    struct gw_journal_syncs syncs;
};

void
gw_journal_segment_path(const char *dir, uint64_t seg, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%016" PRIx64 GW_JOURNAL_SEGMENT_SUFFIX, dir, seg);
}

static void
spare_path(const char *dir, uint64_t seg, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%016" PRIx64 GW_JOURNAL_SPARE_SUFFIX, dir, seg);
}

bool
gw_journal_file_seg(const char *name, const char *suffix, uint64_t *seg)
{
    char *end;
    unsigned long long v;

    if (strlen(name) != 16 + strlen(suffix) || strcmp(name + 16, suffix) != 0)
        return false;
    for (unsigned int i = 0; i < 16; i++)
        if (!isxdigit((unsigned char) name[i]))
            return false;
    v = strtoull(name, &end, 16);
    if (end != name + 16)
        return false;
    *seg = v;
    return true;
}

static bool
has_suffix(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);

    return n >= k && strcmp(name + n - k, suffix) == 0;
}

int
gw_journal_clear(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int rc = 0;

    if (d == NULL)
        return scimq__err_from_errno(errno);
    while ((e = readdir(d)) != NULL) {
        char path[PATH_MAX];

        if (strcmp(e->d_name, GW_JOURNAL_TOPOLOGY_FILE) != 0 &&
            !has_suffix(e->d_name, GW_JOURNAL_SEGMENT_SUFFIX) &&
            !has_suffix(e->d_name, GW_JOURNAL_SPARE_SUFFIX))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (unlink(path) != 0 && errno != ENOENT)
            rc = scimq__err_from_errno(errno);
    }
    closedir(d);
    return rc;
}

static int
do_sync(struct gw_journal *j)
{
    uint64_t t0, us;
    unsigned int b = 0;
    int rc;

    if (!j->unsynced || j->w.fd < 0)
        return 0;
    j->unsynced = false;
    t0 = gw_now_us();
    rc = gw_jseg_seal(&j->w);
    if (rc == 0 && fdatasync(j->w.fd) != 0)
        rc = scimq__err_from_errno(errno);
    us = gw_now_us() - t0;
    while (b + 1 < GW_JOURNAL_SYNC_BUCKETS && (us >> b) != 0)
        b++;
    pthread_mutex_lock(&j->stats_lock);
    j->syncs.count++;
    j->syncs.bucket[b]++;
    if (us > j->syncs.max_us)
        j->syncs.max_us = us;
    pthread_mutex_unlock(&j->stats_lock);
    return rc;
}

/* Reports every append not yet reported, with rc. */
static void
complete_unwritten(struct gw_journal *j, int rc)
{
    struct gw_action *job;

    while ((job = gw_actions_pop(&j->unwritten)) != NULL) {
        j->done(j->arg, job, rc);
        gw_action_free(job);
    }
    j->awaited = false;
}

/*
 * After a write or sync error: the appends not yet reported fail, the
 * segment is cut after what was written before them (a partial record
 * would hide every later one from recovery), and what follows goes to a
 * new segment.
 */
static void
fail_segment(struct gw_journal *j, int rc)
{
    SCIMQ_LOG_SPARSE(SCIMQ_LOG_ERROR, GATEWAY, 10000,
                     "journal: writing segment %016" PRIx64 " in %s failed: "
                     "%s; the appends it covers are refused",
                     j->w.seg, j->dir, scimq_strerror(rc));
    complete_unwritten(j, rc);
    gw_jseg_abandon(&j->w);
    j->unsynced = false;
}

/*
 * Renames a spare file to path, the next segment's: true when one was
 * there.  Writing over a file whose blocks are allocated and written
 * already is cheaper than a new one, and a deleted segment's file freed
 * its blocks (the file system's discard of them, with the "discard"
 * mount option) on the way.
 */
static bool
spare_take(struct gw_journal *j, const char *path)
{
    char from[PATH_MAX];

    for (unsigned int i = 0; i < GW_JOURNAL_SPARES; i++) {
        if (j->spare[i] == 0)
            continue;
        spare_path(j->dir, j->spare[i], from, sizeof(from));
        j->spare[i] = 0;
        if (rename(from, path) == 0)
            return true;
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 10000,
                         "journal: cannot reuse %s: %s", from, strerror(errno));
    }
    return false;
}

/* Keeps a dropped segment's file as a spare when there is room: only
 * those whose records all carry their segment's number (journal_codec.h,
 * format 5: reuse_from on). */
static bool
spare_keep(struct gw_journal *j, uint64_t seg, const char *path)
{
    char to[PATH_MAX];

    if (seg < j->reuse_from)
        return false;
    for (unsigned int i = 0; i < GW_JOURNAL_SPARES; i++) {
        if (j->spare[i] != 0)
            continue;
        spare_path(j->dir, seg, to, sizeof(to));
        if (rename(path, to) != 0)
            return false;
        j->spare[i] = seg;
        return true;
    }
    return false;
}

/* Closes the active segment, synced, and opens the next one (in a spare
 * file when there is one), made durable in the directory. */
static int
segment_roll(struct gw_journal *j)
{
    char path[PATH_MAX];
    bool reuse;
    int rc;

    if (j->w.fd >= 0) {
        rc = do_sync(j);
        if (rc != 0)
            return rc;
        gw_jseg_close(&j->w);
    }
    gw_journal_segment_path(j->dir, j->next_seg, path, sizeof(path));
    reuse = spare_take(j, path);
    rc = gw_jseg_open(&j->w, path, j->next_seg,
                      gw_jrec_seal(j->salt, j->next_seg), reuse);
    if (rc != 0) {
        /* The spare, renamed, holds only old bytes: gone, so that the
         * next try creates the file anew. */
        if (reuse && unlink(path) != 0 && errno != ENOENT)
            SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 10000,
                             "cannot delete journal segment %s: %s", path,
                             strerror(errno));
        return rc;
    }
    j->next_seg++;
    return gw_fsync_dir(j->dir);
}

/* Appends a record; it is reported once written (complete_unwritten). */
static int
do_append(struct gw_journal *j, struct gw_action *job)
{
    const uint8_t *data = job->len > 0 ? job->payload->data : NULL;
    uint32_t crc;
    int rc;

    if (j->w.fd < 0 || j->w.size >= j->segment_size) {
        rc = segment_roll(j);
        if (rc != 0)
            return rc;
    }
    /* The CRC is finished here, off the broker's lock: from the data's,
     * taken as the payload arrived, or over the data too. */
    if (job->data_crc_ok)
        crc = gw_jrec_crc_fields(job->buf, job->hdr_len, job->data_crc,
                                 j->w.seal);
    else
        crc = gw_jrec_crc(job->buf, job->hdr_len, data, job->len, j->w.seal);
    gw_jrec_set_crc(job->buf, crc);
    job->seg = j->w.seg;
    rc = gw_jseg_append(&j->w, job->buf, job->hdr_len, data, job->len,
                        &job->off);
    if (rc != 0)
        return rc;
    if (!j->unsynced)
        j->unsynced_since_ms = gw_now_ms();
    j->unsynced = true;
    return 0;
}

void
gw_journal_syncs(struct gw_journal *j, struct gw_journal_syncs *out)
{
    pthread_mutex_lock(&j->stats_lock);
    *out = j->syncs;
    pthread_mutex_unlock(&j->stats_lock);
}

static int
do_read(struct gw_journal *j, const struct gw_action *job)
{
    char path[PATH_MAX];
    uint64_t done = 0;
    int fd, rc = 0;

    gw_journal_segment_path(j->dir, job->seg, path, sizeof(path));
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return scimq__err_from_errno(errno);
    while (done < job->len) {
        ssize_t n = pread(fd, job->buf + done, job->len - done,
                          (off_t) (job->off + done));

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? scimq__err_from_errno(errno) : SCIMQ_EIO;
            break;
        }
        done += (uint64_t) n;
    }
    close(fd);
    return rc;
}

static void
do_drop(struct gw_journal *j, uint64_t seg)
{
    char path[PATH_MAX];

    if (seg == j->w.seg && j->w.fd >= 0)
        return; /* the active one is never dropped */
    gw_journal_segment_path(j->dir, seg, path, sizeof(path));
    /* Segments leave in order (journal_reaper.h): a rename to a spare
     * must not pass an older segment still queued for deletion. */
    if (gw_jreaper_idle(j->reaper) && spare_keep(j, seg, path))
        return;
    gw_jreaper_delete(j->reaper, path);
}

static int
write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, p, len);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? scimq__err_from_errno(errno) : SCIMQ_EIO;
        p += w;
        len -= (size_t) w;
    }
    return 0;
}

static int
do_topology(struct gw_journal *j, const char *text)
{
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    int fd, rc;

    snprintf(path, sizeof(path), "%s/" GW_JOURNAL_TOPOLOGY_FILE, j->dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return scimq__err_from_errno(errno);
    rc = write_all(fd, text, strlen(text));
    if (rc == 0 && fsync(fd) != 0)
        rc = scimq__err_from_errno(errno);
    close(fd);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = scimq__err_from_errno(errno);
    if (rc == 0)
        rc = gw_fsync_dir(j->dir);
    if (rc != 0)
        unlink(tmp);
    return rc;
}

/*
 * Takes every queued job at once: the appends among them are written
 * together and share one sync (group commit); each is reported once it is
 * written, and synced when any of them asked for it.
 */
static void *
journal_main(void *arg)
{
    struct gw_journal *j = arg;

    for (;;) {
        struct gw_actions batch;
        struct gw_action *job;
        bool want_sync = false, stop, written;
        int rc;

        pthread_mutex_lock(&j->lock);
        while (j->jobs.head == NULL && !j->stop) {
            if (j->unsynced) {
                struct timespec ts;
                uint64_t due = j->unsynced_since_ms + j->batch_ms;
                uint64_t now = gw_now_ms(), wait;

                if (now >= due)
                    break;
                wait = due - now;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += (time_t) (wait / 1000);
                ts.tv_nsec += (long) (wait % 1000) * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000L;
                }
                pthread_cond_timedwait(&j->cond, &j->lock, &ts);
            } else {
                pthread_cond_wait(&j->cond, &j->lock);
            }
        }
        batch = j->jobs;
        j->jobs.head = j->jobs.tail = NULL;
        stop = j->stop;
        pthread_mutex_unlock(&j->lock);

        while ((job = gw_actions_pop(&batch)) != NULL) {
            switch (job->kind) {
            case GW_ACT_JOURNAL_APPEND:
                rc = do_append(j, job);
                if (rc != 0) {
                    j->done(j->arg, job, rc);
                    gw_action_free(job);
                    fail_segment(j, rc);
                    continue;
                }
                want_sync = want_sync || job->sync;
                /* Records without a payload (settlements, attempts) wait
                 * in the buffer for the next write or the batch's sync:
                 * nothing waits for them, and writing them alone rewrote
                 * a block per acknowledgement. */
                j->awaited = j->awaited || job->payload != NULL;
                gw_actions_push(&j->unwritten, job);
                /* A payload written straight from memory took every
                 * record before it along: what needs no sync is reported
                 * now, not after the rest of the turn's writes (the
                 * producer's next PUTs come only after its PUT_OKs). */
                if (!want_sync && j->w.written == j->w.size)
                    complete_unwritten(j, 0);
                continue;
            case GW_ACT_JOURNAL_READ:
                j->done(j->arg, job, do_read(j, job));
                break;
            case GW_ACT_JOURNAL_DROP:
                do_drop(j, job->seg);
                break;
            default: /* TOPOLOGY */
                rc = do_topology(j, job->text);
                if (rc != 0)
                    SCIMQ_LOG_SPARSE(SCIMQ_LOG_ERROR, GATEWAY, 10000,
                                     "cannot write the queue topology in "
                                     "%s: %s",
                                     j->dir, scimq_strerror(rc));
                break;
            }
            gw_action_free(job);
        }
        rc = 0;
        written = true;
        if (want_sync || stop ||
            (j->unsynced && gw_now_ms() >= j->unsynced_since_ms + j->batch_ms))
            rc = do_sync(j);
        else if (j->awaited && j->w.fd >= 0)
            rc = gw_jseg_flush(&j->w);
        else
            written = false; /* what is unwritten stays so, unreported */
        if (rc != 0)
            fail_segment(j, rc);
        else if (written)
            complete_unwritten(j, 0);
        if (stop) {
            pthread_mutex_lock(&j->lock);
            stop = j->jobs.head == NULL;
            pthread_mutex_unlock(&j->lock);
            if (stop)
                break;
        }
    }
    return NULL;
}

/* The spare files left in the directory by an earlier run; spares beyond
 * GW_JOURNAL_SPARES (only a hand could put them there) are deleted. */
static void
spares_find(struct gw_journal *j)
{
    DIR *d = opendir(j->dir);
    struct dirent *e;
    unsigned int n = 0;

    if (d == NULL)
        return; /* no spares: segments are written into new files */
    while ((e = readdir(d)) != NULL) {
        char path[PATH_MAX];
        uint64_t seg;

        if (!gw_journal_file_seg(e->d_name, GW_JOURNAL_SPARE_SUFFIX, &seg) ||
            seg == 0)
            continue;
        if (n < GW_JOURNAL_SPARES) {
            j->spare[n++] = seg;
            continue;
        }
        spare_path(j->dir, seg, path, sizeof(path));
        if (unlink(path) != 0 && errno != ENOENT)
            SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 10000,
                             "cannot delete journal spare %s: %s", path,
                             strerror(errno));
    }
    closedir(d);
}

int
gw_journal_start(const char *dir, const struct gw_journal_resume *at,
                 uint64_t segment_size, uint32_t batch_ms,
                 gw_journal_done_fn done, void *arg, struct gw_journal **j_p)
{
    struct gw_journal *j = calloc(1, sizeof(*j));

    *j_p = NULL;
    if (j == NULL)
        return SCIMQ_ENOMEM;
    if (strlen(dir) >= sizeof(j->dir)) {
        free(j);
        return SCIMQ_ENAMETOOLONG;
    }
    strcpy(j->dir, dir);
    j->done = done;
    j->arg = arg;
    j->segment_size = segment_size;
    j->batch_ms = batch_ms;
    j->next_seg = at->first_seg;
    j->reuse_from =
        at->reuse_from < at->first_seg ? at->reuse_from : at->first_seg;
    j->salt = at->salt;
    spares_find(j);
    if (gw_jseg_init(&j->w) != 0) {
        free(j);
        return SCIMQ_ENOMEM;
    }
    if (gw_jreaper_start(&j->reaper) != 0) {
        gw_jseg_fini(&j->w);
        free(j);
        return SCIMQ_ENOMEM;
    }
    pthread_mutex_init(&j->lock, NULL);
    pthread_mutex_init(&j->stats_lock, NULL);
    pthread_cond_init(&j->cond, NULL);
    if (pthread_create(&j->thread, NULL, journal_main, j) != 0) {
        gw_jreaper_stop(j->reaper);
        pthread_mutex_destroy(&j->stats_lock);
        pthread_mutex_destroy(&j->lock);
        pthread_cond_destroy(&j->cond);
        gw_jseg_fini(&j->w);
        free(j);
        return SCIMQ_ENOMEM;
    }
    *j_p = j;
    return 0;
}

void
gw_journal_stop(struct gw_journal *j)
{
    if (j == NULL)
        return;
    pthread_mutex_lock(&j->lock);
    j->stop = true;
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->lock);
    pthread_join(j->thread, NULL);
    gw_jreaper_stop(j->reaper);
    gw_jseg_fini(&j->w);
    pthread_mutex_destroy(&j->stats_lock);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->cond);
    free(j);
}

void
gw_journal_submit(struct gw_journal *j, struct gw_action *job)
{
    pthread_mutex_lock(&j->lock);
    gw_actions_push(&j->jobs, job);
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->lock);
}
