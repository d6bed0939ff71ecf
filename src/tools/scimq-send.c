/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scimq-send: publish files or a synthetic stream to a gateway queue.
 *
 *   scimq-send --url scimq://HOST:PORT --queue Q [--streams K]
 *              --synthetic --size SIZE --count N [--rate R] [--close]
 *   scimq-send --url ... --queue Q [--close] FILE...
 *
 * --control sends every message as a control message (SciMP BROADCAST,
 * session version 4): each consumer of the queue gets it, in order with
 * the data (scimq_client_put_flags()).
 * Synthetic payloads are self-verifying (sequence number + CRC32C, see
 * doc/scimp.md appendix A), so scimq-recv --verify can prove that nothing
 * was lost, duplicated beyond redelivery, or corrupted.  Messages are
 * published asynchronously from a pool of buffers (the confirm window), so
 * K streams carry K messages at once.  Ends with one JSON line.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bufpool.h"
#include "synth.h"
#include "toolutil.h"

#define SEND_NAME "scimq-send"
/* Buffer memory the pool may use by default, and at most this many
 * buffers (small messages: a window as generous as the consumers'). */
#define SEND_POOL_BYTES (256ull << 20)
#define SEND_POOL_MAX TOOL_CREDIT_MSGS

static void
usage(FILE *out)
{
    fprintf(
        out,
        "usage: scimq-send --queue Q [options] --synthetic --size SIZE "
        "--count N\n"
        "       scimq-send --queue Q [options] FILE...\n"
        "  --queue Q        destination queue\n"
        "  --synthetic      self-verifying synthetic payloads\n"
        "  --size SIZE      synthetic payload size (e.g. 16MiB), or MIN:MAX\n"
        "                   for a deterministic mix skewed to small "
        "sizes\n"
        "  --count N        synthetic messages to send\n"
        "  --first-seq N    sequence number of the first message (0)\n"
        "  --rate R         at most R messages per second\n"
        "  --window N       unconfirmed messages in flight (256MiB / "
        "size,\n"
        "                   2..1024)\n"
        "  --declare KIND   create the queue first (guaranteed or "
        "best-effort)\n"
        "  --control        send control messages: every consumer gets "
        "each\n"
        "                   (needs a gateway of session version 4)\n"
        "  --close          close the queue afterwards (end of "
        "stream)\n" TOOL_COMMON_USAGE);
}

/* Sends one file as a message with one block named after the file. */
static int
send_file(scimq_client_t *c, const char *queue, const char *path,
          uint64_t put_flags, uint64_t *bytes_p)
{
    const char *base = strrchr(path, '/');
    scimq_block_t blk;
    struct stat st;
    uint8_t *buf;
    size_t done = 0;
    int fd, rc;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, SEND_NAME ": %s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return SCIMQ_ENOENT;
    }
    buf = malloc(st.st_size > 0 ? (size_t) st.st_size : 1);
    if (buf == NULL) {
        close(fd);
        return SCIMQ_ENOMEM;
    }
    while (done < (size_t) st.st_size) {
        ssize_t n = read(fd, buf + done, (size_t) st.st_size - done);

        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            break;
        }
        done += (size_t) n;
    }
    close(fd);
    blk.name = base ? base + 1 : path;
    blk.data = buf;
    blk.len = done;
    /* Ownership passes to the library, which frees it once confirmed. */
    rc = scimq_client_put_flags(c, queue, &blk, 1, put_flags, free, buf);
    if (rc != 0) {
        free(buf);
        fprintf(stderr, SEND_NAME ": %s: %s\n", path, scimq_strerror(rc));
        return rc;
    }
    *bytes_p += done;
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"queue", required_argument, NULL, 'q'},
        {"synthetic", no_argument, NULL, 'S'},
        {"size", required_argument, NULL, 's'},
        {"count", required_argument, NULL, 'n'},
        {"first-seq", required_argument, NULL, 'f'},
        {"rate", required_argument, NULL, 'r'},
        {"window", required_argument, NULL, 'w'},
        {"declare", required_argument, NULL, 'D'},
        {"close", no_argument, NULL, 'C'},
        {"control", no_argument, NULL, 'X'},
        {"help", no_argument, NULL, 'h'},
        TOOL_COMMON_OPTIONS,
        {NULL, 0, NULL, 0}};
    struct tool_conn tc;
    scimq_client_t *c = NULL;
    scimq_client_options_t copts;
    struct tool_bufpool pool;
    bool pool_used = false;
    const char *queue = NULL, *declare = NULL;
    bool synthetic = false, close_queue = false, closed = false;
    uint64_t put_flags = 0;
    uint64_t size = 1u << 20, size_min = 0, count = 0, first = 0, window = 0,
             sent = 0, bytes = 0;
    double rate = 0, t0 = tool_now(), dt = 0;
    int ch, rc = 0, errors = 0;

    tool_conn_init(&tc, SEND_NAME);
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (tool_conn_option(&tc, ch, optarg))
            continue;
        switch (ch) {
        case 'q':
            queue = optarg;
            break;
        case 'S':
            synthetic = true;
            break;
        case 's': {
            /* SIZE, or MIN:MAX for a deterministic mix of sizes. */
            char *colon = strchr(optarg, ':');

            if (colon != NULL) {
                *colon = '\0';
                size_min = tool_parse_size(SEND_NAME, "--size", optarg);
                size = tool_parse_size(SEND_NAME, "--size", colon + 1);
                if (size_min > size) {
                    fprintf(stderr, SEND_NAME ": --size MIN:MAX with MIN > "
                                              "MAX\n");
                    return 2;
                }
            } else {
                size = tool_parse_size(SEND_NAME, "--size", optarg);
                size_min = size;
            }
            break;
        }
        case 'n':
            count = tool_parse_size(SEND_NAME, "--count", optarg);
            break;
        case 'f':
            first = tool_parse_size(SEND_NAME, "--first-seq", optarg);
            break;
        case 'r':
            rate = strtod(optarg, NULL);
            if (rate <= 0) {
                fprintf(stderr, SEND_NAME ": bad --rate '%s'\n", optarg);
                return 2;
            }
            break;
        case 'w':
            window = tool_parse_size(SEND_NAME, "--window", optarg);
            break;
        case 'D':
            declare = optarg;
            break;
        case 'X':
            put_flags |= SCIMQ_PUT_CONTROL;
            break;
        case 'C':
            close_queue = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (queue == NULL || (synthetic && optind < argc) ||
        (!synthetic && optind == argc && !close_queue)) {
        usage(stderr);
        return 2;
    }
    if (size_min == 0)
        size_min = size;
    if (synthetic &&
        (size_min < SCIMQ_SYNTH_HEADER_LEN || size > (1ull << 40))) {
        fprintf(stderr, SEND_NAME ": --size must be at least 32 bytes\n");
        return 2;
    }
    if (declare != NULL && strcmp(declare, "guaranteed") != 0 &&
        strcmp(declare, "best-effort") != 0) {
        fprintf(stderr, SEND_NAME ": --declare guaranteed|best-effort\n");
        return 2;
    }

    if (window == 0) {
        window = SEND_POOL_BYTES / (size ? size : 1);
        window = window < 2               ? 2
                 : window > SEND_POOL_MAX ? SEND_POOL_MAX
                                          : window;
    }
    scimq_client_options_default(&copts);
    copts.confirm_window = (uint32_t) window;
    rc = tool_conn_open(&tc, &c, &copts);
    if (rc != 0)
        goto out;
    if (declare != NULL) {
        scimq_queue_options_t q = {0};

        q.kind = strcmp(declare, "guaranteed") == 0 ? SCIMQ_QUEUE_GUARANTEED
                                                    : SCIMQ_QUEUE_BEST_EFFORT;
        rc = scimq_client_queue_declare(c, queue, &q);
        if (rc != 0 && rc != SCIMQ_EEXIST) {
            fprintf(stderr, SEND_NAME ": cannot declare %s: %s\n", queue,
                    scimq_strerror(rc));
            goto out;
        }
        rc = 0;
    }

    t0 = tool_now();
    if (synthetic && count > 0) {
        pool_used = true;
        if (tool_bufpool_init(&pool, (int) window, (size_t) size) != 0) {
            fprintf(stderr,
                    SEND_NAME ": cannot allocate %" PRIu64
                              " buffers of %" PRIu64 " bytes\n",
                    window, size);
            rc = SCIMQ_ENOMEM;
            goto out;
        }
    }
    for (uint64_t i = 0; synthetic && i < count; i++) {
        int idx = tool_bufpool_take(&pool);
        uint64_t len = scimq__synth_size(first + i, size_min, size);
        scimq_block_t blk = {"data", pool.bufs[idx], len};

        if (rate > 0) {
            double due = t0 + (double) i / rate, now = tool_now();

            if (due > now) {
                struct timespec ts = {
                    (time_t) (due - now),
                    (long) ((due - now - (double) (time_t) (due - now)) * 1e9)};
                nanosleep(&ts, NULL);
            }
        }
        (void) scimq__synth_fill(pool.bufs[idx], (size_t) len, first + i);
        rc = scimq_client_put_flags(c, queue, &blk, 1, put_flags,
                                    tool_bufpool_release, &pool.refs[idx]);
        if (rc != 0) {
            tool_bufpool_release(&pool.refs[idx]);
            fprintf(stderr, SEND_NAME ": message %" PRIu64 ": %s (%s)\n",
                    first + i, scimq_strerror(rc), scimq_err_name(rc));
            errors++;
            goto out;
        }
        sent++;
        bytes += len;
    }
    for (int i = optind; !synthetic && i < argc; i++) {
        if (send_file(c, queue, argv[i], put_flags, &bytes) != 0) {
            errors++;
            continue;
        }
        sent++;
    }
    rc = scimq_client_flush(c, -1);
    if (rc != 0) {
        fprintf(stderr, SEND_NAME ": not every message was confirmed: %s\n",
                scimq_strerror(rc));
        errors++;
        goto out;
    }
    dt = tool_now() - t0;
    if (close_queue) {
        rc = scimq_client_queue_close(c, queue);
        if (rc != 0) {
            fprintf(stderr, SEND_NAME ": cannot close %s: %s\n", queue,
                    scimq_strerror(rc));
            errors++;
        }
        closed = rc == 0;
    }
out:
    tool_json_print(json_pack(
        "{s:s, s:s, s:I, s:b, s:I, s:i, s:f, s:f, s:f, s:b, s:i, s:s?}", "tool",
        SEND_NAME, "queue", queue, "messages", (json_int_t) sent, "control",
        (put_flags & SCIMQ_PUT_CONTROL) != 0, "bytes", (json_int_t) bytes,
        "streams", (int) tc.streams, "seconds", dt, "MiB_per_s",
        dt > 0 ? (double) bytes / dt / 1048576.0 : 0.0, "Gbit_per_s",
        dt > 0 ? (double) bytes * 8 / dt / 1e9 : 0.0, "closed", closed,
        "errors", errors, "error", rc != 0 ? scimq_err_name(rc) : NULL));
    if (c != NULL) {
        int crc = scimq_client_close(c);

        if (crc != 0 && rc == 0)
            rc = crc;
    }
    /* The pool outlives the client: confirmations release into it. */
    if (pool_used)
        tool_bufpool_fini(&pool);
    return rc != 0 || errors > 0 ? 1 : 0;
}
