/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <uthash.h>

#include <scimq/error.h>
#include <scimq/proto.h>

#include "alloc.h"
#include "common/auth.h"
#include "common/error_internal.h"
#include "common/log.h"
#include "fsdir.h"
#include "journal.h"
#include "journal_codec.h"
#include "recovery.h"

/* Payload bytes are checked through this much memory at a time. */
#define SCAN_CHUNK (1u << 20)

/* What the records say about a payload and a message. */
struct rpayload {
    uint64_t id, seg, off, len;
    uint16_t flags; /* GW_JREC_F_* */
    uint32_t block_count;
    struct gw_restored_block *blocks; /* names in names */
    char *names;
    struct gw_payload *restored;
    UT_hash_handle hh;
};

struct rmsg_key {
    uint64_t qid, msg_id;
};

struct rmsg {
    struct rmsg_key key;
    uint64_t payload_id;
    uint32_t attempt;
    UT_hash_handle hh;
};

struct model {
    struct gw_broker *b;
    struct rpayload *payloads;
    struct rmsg *msgs;
    uint64_t max_msg_id, max_payload_id;
};

static int
topology_load(const char *dir, struct gw_broker *b, uint64_t *next_qid,
              bool *older_p)
{
    char path[4096];
    json_error_t err;
    json_t *doc, *queues, *binds, *v;
    json_int_t format;
    size_t i;
    int rc = 0;

    snprintf(path, sizeof(path), "%s/" GW_JOURNAL_TOPOLOGY_FILE, dir);
    if (access(path, F_OK) != 0)
        return 0; /* a new journal */
    doc = json_load_file(path, 0, &err);
    if (doc == NULL) {
        SCIMQ_LOG_ERROR(GATEWAY, "cannot read %s: %s (line %d)", path, err.text,
                        err.line);
        return SCIMQ_EIO;
    }
    format = json_integer_value(json_object_get(doc, "version"));
    if (format < GW_JREC_FORMAT_MIN || format > GW_JREC_FORMAT) {
        SCIMQ_LOG_ERROR(GATEWAY,
                        "%s: journal format %lld, this gateway reads formats "
                        "%d..%d; start it with another --journal-dir (or "
                        "drain this one with the gateway that wrote it)",
                        path, (long long) format, GW_JREC_FORMAT_MIN,
                        GW_JREC_FORMAT);
        json_decref(doc);
        return SCIMQ_EIO;
    }
    /* Records of this gateway's format follow now: the file must say so,
     * or a gateway that reads only older ones would take them for damage
     * and cut them. */
    *older_p = format < GW_JREC_FORMAT;
    *next_qid = (uint64_t) json_integer_value(json_object_get(doc, "next_qid"));
    queues = json_object_get(doc, "queues");
    json_array_foreach(queues, i, v)
    {
        const char *dur = json_string_value(json_object_get(v, "durability"));
        struct gw_restored_queue q = {
            .qid = (uint64_t) json_integer_value(json_object_get(v, "qid")),
            .name = json_string_value(json_object_get(v, "name")),
            .dead_letter = json_string_value(json_object_get(v, "dead_letter")),
            .kind = (int) json_integer_value(json_object_get(v, "kind")),
            .ack_timeout_ms = (uint32_t) json_integer_value(
                json_object_get(v, "ack_timeout_ms")),
            .max_attempts = (uint32_t) json_integer_value(
                json_object_get(v, "max_attempts")),
            .max_bytes =
                (uint64_t) json_integer_value(json_object_get(v, "max_bytes")),
            .closed = json_is_true(json_object_get(v, "closed")),
            .durability = dur == NULL                 ? 0
                          : strcmp(dur, "sync") == 0  ? 2
                          : strcmp(dur, "batch") == 0 ? 1
                                                      : 0,
        };

        if (q.name == NULL || gw_broker_restore_queue(b, &q) != 0) {
            SCIMQ_LOG_ERROR(GATEWAY, "%s: bad queue entry %zu", path, i);
            rc = SCIMQ_EIO;
            break;
        }
    }
    binds = json_object_get(doc, "bindings");
    json_array_foreach(binds, i, v)
    {
        if (rc == 0 &&
            gw_broker_restore_binding(
                b, (uint64_t) json_integer_value(json_array_get(v, 0)),
                (uint64_t) json_integer_value(json_array_get(v, 1))) != 0)
            SCIMQ_LOG_WARN(GATEWAY, "%s: binding %zu names no queue", path, i);
    }
    json_decref(doc);
    return rc;
}

static void
msg_put(struct model *m, uint64_t qid, uint64_t msg_id, uint64_t payload_id,
        uint32_t attempt)
{
    struct rmsg_key k = {qid, msg_id};
    struct rmsg *r = NULL;

    if (msg_id > m->max_msg_id)
        m->max_msg_id = msg_id;
    if (!gw_broker_restore_has_queue(m->b, qid))
        return; /* its queue was deleted */
    HASH_FIND(hh, m->msgs, &k, sizeof(k), r);
    if (r == NULL) {
        r = gw_xcalloc(1, sizeof(*r));
        r->key = k;
        HASH_ADD(hh, m->msgs, key, sizeof(r->key), r);
    }
    r->payload_id = payload_id;
    r->attempt = attempt;
}

static struct rmsg *
msg_get(struct model *m, uint64_t qid, uint64_t msg_id)
{
    struct rmsg_key k = {qid, msg_id};
    struct rmsg *r = NULL;

    HASH_FIND(hh, m->msgs, &k, sizeof(k), r);
    return r;
}

static void
apply(struct model *m, const struct gw_jrec *r, uint64_t seg, uint64_t off)
{
    struct rmsg *msg;

    switch (r->type) {
    case GW_JREC_MSG: {
        struct rpayload *p = NULL;
        size_t names = 0;

        HASH_FIND(hh, m->payloads, &r->payload_id, sizeof(r->payload_id), p);
        if (p != NULL) {
            /* Written again by compaction: the same bytes, here now. */
            p->seg = seg;
            p->off = off;
        } else {
            p = gw_xcalloc(1, sizeof(*p));
            p->id = r->payload_id;
            p->flags = r->flags;
            p->seg = seg;
            p->off = off;
            p->len = r->data_len;
            p->block_count = r->block_count;
            p->blocks = gw_xcalloc(r->block_count + 1, sizeof(*p->blocks));
            for (uint32_t i = 0; i < r->block_count; i++)
                names += gw_jrec_block_at(r, i).name_len;
            p->names = gw_xcalloc(1, names + 1);
            names = 0;
            for (uint32_t i = 0; i < r->block_count; i++) {
                struct gw_jrec_block bl = gw_jrec_block_at(r, i);

                memcpy(p->names + names, bl.name, bl.name_len);
                p->blocks[i] = (struct gw_restored_block){p->names + names,
                                                          bl.name_len, bl.len};
                names += bl.name_len;
            }
            if (p->id > m->max_payload_id)
                m->max_payload_id = p->id;
            HASH_ADD(hh, m->payloads, id, sizeof(p->id), p);
        }
        for (uint16_t i = 0; i < r->n_targets; i++) {
            struct gw_jrec_target t = gw_jrec_target_at(r, i);

            msg_put(m, t.qid, t.msg_id, p->id, t.attempt);
        }
        break;
    }
    case GW_JREC_ENQUEUE:
        msg_put(m, r->one.qid, r->one.msg_id, r->payload_id, r->attempt);
        break;
    case GW_JREC_ATTEMPT:
        if (r->one.msg_id > m->max_msg_id)
            m->max_msg_id = r->one.msg_id;
        if ((msg = msg_get(m, r->one.qid, r->one.msg_id)) != NULL)
            msg->attempt = r->attempt;
        break;
    case GW_JREC_PAD:
        break;
    case GW_JREC_SETTLE:
    default:
        /* Ids are not reused while any record of them is left. */
        if (r->one.msg_id > m->max_msg_id)
            m->max_msg_id = r->one.msg_id;
        if ((msg = msg_get(m, r->one.qid, r->one.msg_id)) != NULL) {
            HASH_DEL(m->msgs, msg);
            free(msg);
        }
        break;
    }
}

static int
read_full(int fd, void *buf, size_t len)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = read(fd, (uint8_t *) buf + done, len - done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return scimq__err_from_errno(errno);
        if (n == 0)
            return SCIMQ_EPROTO; /* the file ends inside a record */
        done += (size_t) n;
    }
    return 0;
}

/*
 * Reads one segment; a record that does not check ends it (the file is
 * cut there).  In a reused file (journal.h, spares) that is also where
 * the records of its earlier segment begin: format 5 takes the segment's
 * number into each CRC.  Returns its length afterwards in *bytes; *older
 * is set when it holds a record of an older format (or could not be cut:
 * what lies behind is unknown).
 */
static void
scan_segment(struct model *m, const char *dir, uint64_t seg, uint64_t salt,
             uint8_t *chunk, uint64_t *bytes, uint64_t *truncated, bool *older)
{
    char path[4096];
    uint8_t *fields = NULL;
    uint64_t off = 0, size;
    struct stat stbuf;
    bool sealed = false; /* a record of this format was read */
    int fd;

    gw_journal_segment_path(dir, seg, path, sizeof(path));
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &stbuf) != 0) {
        SCIMQ_LOG_ERROR(GATEWAY, "journal: cannot open %s: %s", path,
                        strerror(errno));
        if (fd >= 0)
            close(fd);
        *bytes = 0;
        *older = true;
        return;
    }
    size = (uint64_t) stbuf.st_size;
    fields = gw_xcalloc(1, GW_JREC_MAX_FIELDS);
    while (off < size) {
        uint8_t prefix[GW_JREC_PREFIX_LEN];
        uint64_t body, data, left;
        uint32_t flen, crc, got;
        uint8_t type, format;
        bool data_first;
        struct gw_jrec r;

        if (size - off < GW_JREC_PREFIX_LEN ||
            read_full(fd, prefix, sizeof(prefix)) != 0 ||
            gw_jrec_prefix(prefix, &body, &flen, &crc, &type, &format) != 0 ||
            body > size - off - GW_JREC_PREFIX_LEN ||
            read_full(fd, fields, flen) != 0)
            break;
        /* The body's CRC, data streamed through chunk, in the order of
         * the record's format (journal_codec.h). */
        data_first = gw_jrec_crc_data_first(format);
        got = data_first ? 0 : scimq_proto_crc32c(0, fields, flen);
        data = body - flen;
        for (left = data; left > 0;) {
            size_t n = left < SCAN_CHUNK ? (size_t) left : SCAN_CHUNK;

            if (read_full(fd, chunk, n) != 0)
                break;
            got = scimq_proto_crc32c(got, chunk, n);
            left -= n;
        }
        if (data_first)
            got = scimq_proto_crc32c(got, fields, flen);
        got = gw_jrec_crc_seal(format, got, gw_jrec_seal(salt, seg));
        /* Older formats are never written after this one into a segment:
         * one there is old bytes of a reused file, whatever its CRC. */
        if (left != 0 || got != crc || (sealed && format < GW_JREC_FORMAT) ||
            gw_jrec_fields(type, format, fields, flen, body, &r) != 0)
            break;
        if (format < GW_JREC_FORMAT)
            *older = true;
        else
            sealed = true;
        apply(m, &r, seg, off + GW_JREC_PREFIX_LEN + flen);
        off += GW_JREC_PREFIX_LEN + body;
    }
    if (off < size) {
        SCIMQ_LOG_WARN(GATEWAY,
                       "journal: %s: damaged or torn record (or the bytes "
                       "of the file's earlier use) at byte %" PRIu64
                       "; cut there (%" PRIu64 " bytes dropped)",
                       path, off, size - off);
        *truncated += size - off;
        if (ftruncate(fd, (off_t) off) != 0 || fsync(fd) != 0) {
            SCIMQ_LOG_ERROR(GATEWAY, "journal: cannot cut %s: %s", path,
                            strerror(errno));
            *older = true;
        }
    }
    free(fields);
    close(fd);
    *bytes = off;
}

/*
 * The journal's salt (journal.h, GW_JOURNAL_SALT_FILE), drawn and stored
 * (written, synced, renamed into place, the directory synced) before any
 * record that depends on it is written.  A journal whose topology says
 * format 5 (current) must have one: its records cannot be checked without
 * it, and a new salt would have recovery cut every one of them.
 */
static int
salt_load(const char *dir, bool current, uint64_t *salt)
{
    char path[4096], tmp[4096], text[32];
    FILE *f;
    int fd, rc;

    snprintf(path, sizeof(path), "%s/" GW_JOURNAL_SALT_FILE, dir);
    f = fopen(path, "r");
    if (f != NULL) {
        unsigned long long v;
        int got = fscanf(f, "%16llx", &v);

        fclose(f);
        if (got != 1) {
            SCIMQ_LOG_ERROR(GATEWAY, "journal: %s: not a salt", path);
            return SCIMQ_EIO;
        }
        *salt = v;
        return 0;
    }
    snprintf(tmp, sizeof(tmp), "%s/" GW_JOURNAL_TOPOLOGY_FILE, dir);
    if (current && access(tmp, F_OK) == 0) {
        SCIMQ_LOG_ERROR(GATEWAY,
                        "journal %s: %s is missing; the records of this "
                        "journal cannot be checked without it",
                        dir, GW_JOURNAL_SALT_FILE);
        return SCIMQ_EIO;
    }
    rc = scimq__random_bytes(salt, sizeof(*salt));
    if (rc != 0)
        return rc;
    snprintf(text, sizeof(text), "%016" PRIx64 "\n", *salt);
    snprintf(tmp, sizeof(tmp), "%s/" GW_JOURNAL_SALT_FILE ".new", dir);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return scimq__err_from_errno(errno);
    rc = write(fd, text, strlen(text)) == (ssize_t) strlen(text) &&
                 fsync(fd) == 0
             ? 0
             : scimq__err_from_errno(errno ? errno : EIO);
    close(fd);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = scimq__err_from_errno(errno);
    if (rc == 0)
        rc = gw_fsync_dir(dir);
    if (rc != 0)
        SCIMQ_LOG_ERROR(GATEWAY, "journal: cannot write %s: %s", path,
                        scimq_strerror(rc));
    return rc;
}

static int
seg_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct gw_restored_segment *) a)->seg;
    uint64_t y = ((const struct gw_restored_segment *) b)->seg;

    return x < y ? -1 : x > y;
}

/*
 * Segment files of dir, in order, and the highest segment number a spare
 * file holds (0 for none; journal.h: new segments are numbered above).
 */
static int
segments_list(const char *dir, struct gw_restored_segment **segs_p,
              uint64_t *n_p, uint64_t *spare_max_p)
{
    struct gw_restored_segment *segs = NULL;
    uint64_t n = 0, cap = 0, spare_max = 0;
    struct dirent *e;
    DIR *d = opendir(dir);

    if (d == NULL)
        return scimq__err_from_errno(errno);
    while ((e = readdir(d)) != NULL) {
        uint64_t v;

        if (gw_journal_file_seg(e->d_name, GW_JOURNAL_SPARE_SUFFIX, &v)) {
            if (v > spare_max)
                spare_max = v;
            continue;
        }
        if (!gw_journal_file_seg(e->d_name, GW_JOURNAL_SEGMENT_SUFFIX, &v))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            segs = realloc(segs, cap * sizeof(*segs));
            if (segs == NULL)
                abort();
        }
        segs[n++] = (struct gw_restored_segment){v, 0};
    }
    closedir(d);
    if (n > 0)
        qsort(segs, n, sizeof(*segs), seg_cmp);
    *segs_p = segs;
    *n_p = n;
    *spare_max_p = spare_max;
    return 0;
}

static int
msg_order(const void *a, const void *b)
{
    const struct rmsg *x = *(const struct rmsg *const *) a;
    const struct rmsg *y = *(const struct rmsg *const *) b;

    if (x->key.qid != y->key.qid)
        return x->key.qid < y->key.qid ? -1 : 1;
    return x->key.msg_id < y->key.msg_id ? -1 : x->key.msg_id > y->key.msg_id;
}

int
gw_recover(const char *dir, struct gw_broker *b, struct gw_actions *out,
           struct gw_recovery_report *rep)
{
    struct model m = {.b = b};
    struct gw_restored_segment *segs = NULL;
    struct gw_restore_totals t = {0};
    struct rmsg **order, *r, *rt;
    struct rpayload *p, *pt;
    uint8_t *chunk;
    uint64_t n = 0, i, nmsg, spare_max = 0;
    int rc;

    memset(rep, 0, sizeof(*rep));
    rc = gw_dir_ready(dir, "journal");
    if (rc != 0)
        return rc;
    gw_broker_restore_begin(b, out);
    rc = topology_load(dir, b, &t.next_qid, &t.rewrite_topology);
    if (rc == 0)
        rc = salt_load(dir, !t.rewrite_topology, &rep->resume.salt);
    if (rc == 0)
        rc = segments_list(dir, &segs, &n, &spare_max);
    if (rc != 0) {
        free(segs);
        gw_broker_restore_end(b, &t);
        return rc;
    }
    chunk = gw_xcalloc(1, SCAN_CHUNK);
    rep->resume.reuse_from = 1;
    for (i = 0; i < n; i++) {
        bool older = false;

        scan_segment(&m, dir, segs[i].seg, rep->resume.salt, chunk,
                     &segs[i].bytes, &t.truncated_bytes, &older);
        if (older)
            rep->resume.reuse_from = segs[i].seg + 1;
    }
    free(chunk);

    /* Every live message, in order per queue, on its restored payload. */
    nmsg = HASH_COUNT(m.msgs);
    order = gw_xcalloc(nmsg + 1, sizeof(*order));
    i = 0;
    HASH_ITER(hh, m.msgs, r, rt) order[i++] = r;
    qsort(order, nmsg, sizeof(*order), msg_order);
    for (i = 0; i < nmsg; i++) {
        r = order[i];
        HASH_FIND(hh, m.payloads, &r->payload_id, sizeof(r->payload_id), p);
        if (p == NULL)
            continue; /* its MSG record was lost with a damaged segment */
        if (p->restored == NULL)
            p->restored = gw_broker_restore_payload(
                b, p->id, p->blocks, p->block_count, p->len, p->seg, p->off,
                (p->flags & GW_JREC_F_CONTROL) != 0);
        gw_broker_restore_msg(b, r->key.qid, r->key.msg_id, p->restored,
                              r->attempt);
        rep->messages++;
    }
    free(order);
    t.next_msg_id = m.max_msg_id;
    t.next_payload_id = m.max_payload_id;
    t.segments = segs;
    t.n_segments = n;
    /* Above every segment's and every spare's number (journal.h). */
    t.first_new_segment = n > 0 && segs[n - 1].seg > spare_max
                              ? segs[n - 1].seg + 1
                              : spare_max + 1;
    gw_broker_restore_end(b, &t);
    rep->segments = n;
    rep->truncated_bytes = t.truncated_bytes;
    rep->resume.first_seg = t.first_new_segment;
    HASH_ITER(hh, m.payloads, p, pt)
    {
        if (p->restored != NULL)
            rep->bytes += p->len;
        HASH_DEL(m.payloads, p);
        free(p->blocks);
        free(p->names);
        free(p);
    }
    HASH_ITER(hh, m.msgs, r, rt)
    {
        HASH_DEL(m.msgs, r);
        free(r);
    }
    free(segs);
    return 0;
}
