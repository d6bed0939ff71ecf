/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scimq-store: keep the raw stream while it is processed.
 *
 *   scimq-store --url scimq://HOST:PORT --queue piv.store --dir DIR
 *               [--streams K] [--until-eos]
 *
 * Fed by fan-out (the input queue is bound to this one, so every frame is
 * both processed and stored, sharing one payload in the gateway), it
 * writes each message to its own file, DIR/<msg_id>.<block>, never one
 * shared file, and appends a line per file to DIR/MANIFEST:
 *
 *   msg_id  block  bytes  crc32c  file
 *
 * A message is acknowledged only after its files are written and synced
 * and its manifest lines are on disk, so a crash loses nothing: the
 * gateway redelivers what was not acknowledged.  A redelivered message
 * whose lines are already in the manifest (its acknowledgement was lost:
 * a lease ran out, a stream dropped, the store restarted) is acknowledged
 * again and counted apart, "redelivered", not stored twice.  A control
 * message (SCIMQ_MESSAGE_CONTROL: a run header, an end of series) is
 * stored the same way, in its place in the stream, and counted apart,
 * "control".  Ends with one JSON line: "messages" counts the data
 * messages stored.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <scimq/scimq.h>

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static int
write_file(const char *path, const void *data, uint64_t len)
{
    const char *p = data;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    if (fd < 0)
        return -errno;
    while (len > 0) {
        ssize_t n = write(fd, p, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;

            close(fd);
            return -e;
        }
        p += n;
        len -= (uint64_t) n;
    }
    /* On disk before the acknowledgement lets the gateway forget it. */
    if (fsync(fd) != 0) {
        int e = errno;

        close(fd);
        return -e;
    }
    return close(fd) == 0 ? 0 : -errno;
}

/* The message ids in the manifest, sorted: what is stored already. */
struct stored {
    uint64_t *ids;
    size_t n, cap;
};

static size_t
stored_find(const struct stored *st, uint64_t id)
{
    size_t lo = 0, hi = st->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (st->ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool
stored_has(const struct stored *st, uint64_t id)
{
    size_t i = stored_find(st, id);

    return i < st->n && st->ids[i] == id;
}

/* 0 or -ENOMEM.  Ids mostly come in order: the insertion is an append. */
static int
stored_add(struct stored *st, uint64_t id)
{
    size_t i = stored_find(st, id);

    if (i < st->n && st->ids[i] == id)
        return 0;
    if (st->n == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 1024;
        uint64_t *ids = realloc(st->ids, cap * sizeof(*ids));

        if (ids == NULL)
            return -ENOMEM;
        st->ids = ids;
        st->cap = cap;
    }
    memmove(st->ids + i + 1, st->ids + i, (st->n - i) * sizeof(*st->ids));
    st->ids[i] = id;
    st->n++;
    return 0;
}

/* The ids of an existing manifest (its first column).  0 or -ENOMEM. */
static int
stored_load(struct stored *st, FILE *manifest)
{
    char line[512];

    rewind(manifest);
    while (fgets(line, sizeof(line), manifest) != NULL) {
        char *end;
        uint64_t id = strtoull(line, &end, 10);

        if (end != line && *end == '\t' && stored_add(st, id) != 0)
            return -ENOMEM;
    }
    return 0;
}

/* Block names become file name suffixes: keep them to a safe alphabet. */
static void
safe_name(const char *name, char *out, size_t len)
{
    size_t i = 0;

    for (; name != NULL && name[i] != '\0' && i + 1 < len; i++) {
        char c = name[i];

        out[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '-' || c == '_'
                     ? c
                     : '_';
    }
    out[i] = '\0';
    if (i == 0)
        snprintf(out, len, "data");
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"url", required_argument, NULL, 'u'},
        {"queue", required_argument, NULL, 'q'},
        {"dir", required_argument, NULL, 'd'},
        {"streams", required_argument, NULL, 's'},
        {"until-eos", no_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *url = getenv("SCIMQ_URL"), *queue = NULL, *dir = NULL;
    scimq_client_options_t o;
    scimq_client_t *c = NULL;
    uint64_t messages = 0, control = 0, files = 0, bytes = 0, redelivered = 0;
    struct stored st = {NULL, 0, 0};
    char path[4096];
    FILE *manifest = NULL;
    double t0 = now_s();
    int ch, rc = 0;
    bool eos = false;

    scimq_client_options_default(&o);
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            url = optarg;
            break;
        case 'q':
            queue = optarg;
            break;
        case 'd':
            dir = optarg;
            break;
        case 's':
            o.streams = (uint32_t) strtoul(optarg, NULL, 10);
            break;
        case 'e':
            break; /* the store always runs until end of stream */
        case 'h':
        default:
            fprintf(ch == 'h' ? stdout : stderr,
                    "usage: scimq-store --queue Q --dir DIR [--url U] "
                    "[--streams K]\n");
            return ch == 'h' ? 0 : 2;
        }
    }
    if (url == NULL || queue == NULL || dir == NULL) {
        fprintf(stderr, "scimq-store: --queue, --dir and --url (or "
                        "SCIMQ_URL) are needed\n");
        return 2;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "scimq-store: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    snprintf(path, sizeof(path), "%s/MANIFEST", dir);
    manifest = fopen(path, "a+");
    if (manifest == NULL) {
        fprintf(stderr, "scimq-store: %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (stored_load(&st, manifest) != 0) {
        fprintf(stderr, "scimq-store: out of memory\n");
        fclose(manifest);
        return 1;
    }
    o.client_name = "scimq-store";
    rc = scimq_client_open(url, &o, &c);
    if (rc == 0)
        rc = scimq_client_subscribe(c, queue, 4, 256u << 20);
    while (rc == 0) {
        scimq_message_t *m;

        rc = scimq_client_get(c, &m, -1);
        if (rc == SCIMQ_EOS) {
            eos = true;
            rc = 0;
            break;
        }
        if (rc != 0)
            break;
        if (m->attempt > 1 && stored_has(&st, m->msg_id)) {
            /* Stored and synced before; only the acknowledgement is new. */
            rc = scimq_client_ack(c, m);
            redelivered++;
            scimq_message_free(c, m);
            continue;
        }
        for (uint32_t i = 0; i < m->block_count && rc == 0; i++) {
            const scimq_block_t *b = &m->blocks[i];
            char name[64], file[128];

            safe_name(b->name, name, sizeof(name));
            snprintf(file, sizeof(file), "%020" PRIu64 ".%s", m->msg_id, name);
            snprintf(path, sizeof(path), "%s/%s", dir, file);
            rc = write_file(path, b->data, b->len);
            if (rc != 0) {
                fprintf(stderr, "scimq-store: %s: %s\n", path, strerror(-rc));
                rc = SCIMQ_EIO;
                break;
            }
            fprintf(manifest, "%" PRIu64 "\t%s\t%" PRIu64 "\t%08x\t%s\n",
                    m->msg_id, name, b->len,
                    scimq_proto_crc32c(0, b->data, (size_t) b->len), file);
            files++;
            bytes += b->len;
        }
        if (rc == 0 && (fflush(manifest) != 0 || fsync(fileno(manifest)) != 0))
            rc = SCIMQ_EIO;
        if (rc == 0 && stored_add(&st, m->msg_id) != 0)
            rc = SCIMQ_ENOMEM;
        if (rc == 0) {
            rc = scimq_client_ack(c, m);
            if (m->flags & SCIMQ_MESSAGE_CONTROL)
                control++;
            else
                messages++;
        } else {
            /* Not stored: give it back rather than lose it. */
            (void) scimq_client_nack(c, m, 1, 1000);
        }
        scimq_message_free(c, m);
    }
    if (c != NULL)
        (void) scimq_client_close(c);
    fclose(manifest);
    free(st.ids);
    printf("{\"tool\":\"scimq-store\",\"queue\":\"%s\",\"messages\":%" PRIu64
           ",\"control\":%" PRIu64 ",\"redelivered\":%" PRIu64
           ",\"files\":%" PRIu64 ",\"bytes\":%" PRIu64
           ",\"seconds\":%.3f,\"eos\":%s,\"error\":%s%s%s}\n",
           queue, messages, control, redelivered, files, bytes, now_s() - t0,
           eos ? "true" : "false", rc ? "\"" : "",
           rc ? scimq_err_name(rc) : "null", rc ? "\"" : "");
    return rc == 0 ? 0 : 1;
}
