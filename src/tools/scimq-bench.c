/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scimq-bench: gateway throughput, measured against iperf3 in the same run.
 *
 *   scimq-bench --url scimq://HOST:PORT [--sizes 1MiB,16MiB]
 *               [--streams 1,4,8] [--trials 5] [--bytes 1GiB]
 *
 * For every (message size, stream count) it runs repeated trials of one
 * producer (K streams) -> gateway -> one consumer (K streams) through a
 * guaranteed queue, every message acknowledged, and times from the first
 * PUT to the last delivery.  The reference is iperf3 with the same number
 * of parallel streams over loopback, run between the trials of the same
 * configuration.  It prints min / Q1 / median / Q3 / max of each and the
 * ratio of the medians, then one JSON line with everything.
 *
 * --latency: every message carries the producer's CLOCK_MONOTONIC time of
 * its PUT in its first 8 bytes (each message from a buffer of its own, a
 * pool recycled on PUT_OK), and the consumer, a thread of the same
 * process, takes the time from PUT to delivery of every message; each
 * trial reports its p50 and p99, and msg/s beside MiB/s.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bufpool.h"
#include "dist.h"
#include "toolutil.h"

#define BENCH_NAME "scimq-bench"
#define BENCH_MAX_LIST 16
#define BENCH_IPERF_PORT 5399

extern char **environ;

struct bench_cfg {
    struct tool_conn tc;
    uint64_t sizes[BENCH_MAX_LIST];
    int n_sizes;
    uint32_t streams[BENCH_MAX_LIST];
    int n_streams;
    int trials;
    uint64_t bytes;
    const char *iperf3;
    int iperf_port;
    uint64_t count;        /* messages per trial; 0: bytes / size */
    uint32_t credit_msgs;  /* consumer credit; 0: the tools' default */
    uint64_t credit_bytes; /* 0: the tools' default for K streams */
    uint32_t window;       /* producer confirm window; 0: see below */
    double rate;           /* messages per second offered; 0: as fast as
                            * the windows let */
    bool latency;
};

/* What one trial measured. */
struct trial_result {
    double mib_s, msg_s;
    double lat_p50_us, lat_p99_us; /* with --latency */
};

/* ------------------------------------------------------------------------ */
/* One gateway trial                                                         */
/* ------------------------------------------------------------------------ */

struct consumer_arg {
    scimq_client_t *c;
    uint64_t n;
    int rc;
    double t_last;
    double *lat_us; /* n latencies, with --latency; else NULL */
};

/* With --latency the producer's PUT time (tool_now_ns()) is in a
 * message's first 8 bytes (host order: producer and consumer are one
 * process). */
static void *
consumer_main(void *p)
{
    struct consumer_arg *a = p;

    for (uint64_t i = 0; i < a->n; i++) {
        scimq_message_t *m;
        int rc = scimq_client_get(a->c, &m, 60000);

        if (rc != 0) {
            a->rc = rc;
            return NULL;
        }
        if (a->lat_us != NULL) {
            uint64_t t = tool_now_ns(), sent = 0;

            if (m->block_count > 0 && m->blocks[0].len >= sizeof(sent))
                memcpy(&sent, m->blocks[0].data, sizeof(sent));
            a->lat_us[i] =
                sent > 0 && t >= sent ? (double) (t - sent) / 1e3 : -1;
        }
        (void) scimq_client_ack(a->c, m);
        scimq_message_free(a->c, m);
    }
    a->t_last = tool_now();
    return NULL;
}

/* The shared payload buffer is never released per message. */
static void
no_release(void *arg)
{
    (void) arg;
}

/* p50 and p99 of the n latencies (sorted in place); a latency the consumer
 * could not take (-1) makes the trial fail. */
static int
latency_figures(double *lat, uint64_t n, struct trial_result *r)
{
    struct scimq_dist d;

    for (uint64_t i = 0; i < n; i++)
        if (lat[i] < 0)
            return SCIMQ_EPROTO;
    d = scimq__dist_of(lat, (int) n);
    r->lat_p50_us = d.median;
    r->lat_p99_us = scimq__dist_quantile(lat, (int) n, 0.99);
    return 0;
}

/*
 * Sends n messages of size bytes asynchronously and fills r.  Without
 * latency, from one pre-filled buffer; with it, from a pool of `window`
 * buffers, each stamped just before its PUT.  Returns 0 or an error.
 */
static int
gateway_trial(scimq_client_t *prod, scimq_client_t *cons, const char *queue,
              const uint8_t *payload, uint64_t size, uint64_t n,
              uint32_t window, bool latency, double rate,
              struct trial_result *r)
{
    struct consumer_arg ca = {cons, n, 0, 0, NULL};
    scimq_block_t blk = {"data", payload, size};
    struct tool_bufpool pool;
    bool pooled = false;
    pthread_t th;
    double t0, dt;
    int rc = 0;

    if (latency) {
        pooled = true;
        ca.lat_us = calloc((size_t) n, sizeof(*ca.lat_us));
        if (ca.lat_us == NULL ||
            tool_bufpool_init(&pool, (int) window, (size_t) size) != 0) {
            rc = SCIMQ_ENOMEM;
            goto out;
        }
        for (int i = 0; i < pool.n; i++)
            memcpy(pool.bufs[i], payload, (size_t) size);
    }
    if (pthread_create(&th, NULL, consumer_main, &ca) != 0) {
        rc = SCIMQ_ENOMEM;
        goto out;
    }
    t0 = tool_now();
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        if (rate > 0) {
            /* Paced: message i is due at t0 + i / rate.  Sleeps only when
             * ahead by 100 us or more, since a sleep rarely lasts less. */
            double ahead = t0 + (double) i / rate - tool_now();

            if (ahead >= 100e-6) {
                struct timespec ts = {
                    (time_t) ahead,
                    (long) ((ahead - (double) (time_t) ahead) * 1e9)};

                nanosleep(&ts, NULL);
            }
        }
        if (latency) {
            int idx = tool_bufpool_take(&pool);
            uint64_t t = tool_now_ns();

            memcpy(pool.bufs[idx], &t, sizeof(t));
            blk.data = pool.bufs[idx];
            rc = scimq_client_put(prod, queue, &blk, 1, tool_bufpool_release,
                                  &pool.refs[idx]);
            if (rc != 0)
                tool_bufpool_release(&pool.refs[idx]);
        } else {
            /* The buffer is never modified, so one buffer serves every
             * message: the library only needs it valid until confirmed. */
            rc = scimq_client_put(prod, queue, &blk, 1, no_release, NULL);
        }
    }
    if (rc == 0)
        rc = scimq_client_flush(prod, 120000);
    pthread_join(th, NULL);
    if (rc == 0)
        rc = ca.rc;
    if (rc == 0) {
        dt = ca.t_last - t0;
        r->mib_s = (double) (size * n) / dt / 1048576.0;
        r->msg_s = (double) n / dt;
        if (latency)
            rc = latency_figures(ca.lat_us, n, r);
    }
out:
    /* Every buffer is confirmed once flushed (or the trial failed and the
     * client is closed before the pool goes, below in main). */
    if (pooled && rc == 0)
        tool_bufpool_fini(&pool);
    free(ca.lat_us);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* iperf3                                                                    */
/* ------------------------------------------------------------------------ */

static pid_t
spawn(char *const argv[], const char *out_path)
{
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int rc;

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO,
                                     out_path ? out_path : "/dev/null",
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY,
                                     0);
    rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : -1;
}

/* One iperf3 run with K parallel streams; MiB/s received, or < 0. */
static double
iperf_trial(const struct bench_cfg *cfg, uint32_t k, double seconds)
{
    char port[16], par[16], secs[16], out[] = "/tmp/scimq-bench-XXXXXX";
    char *argv[] = {(char *) cfg->iperf3,
                    "-c",
                    "127.0.0.1",
                    "-p",
                    port,
                    "-P",
                    par,
                    "-t",
                    secs,
                    "-J",
                    NULL};
    json_error_t err;
    json_t *doc;
    double bps = -1;
    int fd = mkstemp(out), status;
    pid_t pid;

    if (fd < 0)
        return -1;
    close(fd);
    snprintf(port, sizeof(port), "%d", cfg->iperf_port);
    snprintf(par, sizeof(par), "%u", k);
    snprintf(secs, sizeof(secs), "%.0f", seconds < 1 ? 1 : seconds);
    pid = spawn(argv, out);
    if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
        WEXITSTATUS(status) == 0) {
        doc = json_load_file(out, 0, &err);
        if (doc != NULL) {
            json_t *v = json_object_get(
                json_object_get(json_object_get(doc, "end"), "sum_received"),
                "bits_per_second");

            if (json_is_number(v))
                bps = json_number_value(v);
            json_decref(doc);
        }
    }
    unlink(out);
    return bps < 0 ? -1 : bps / 8 / 1048576.0;
}

/* ------------------------------------------------------------------------ */

static int
parse_list(const char *arg, uint64_t *out, int max, bool sizes)
{
    char *copy = strdup(arg), *save = NULL, *tok;
    int n = 0;

    for (tok = strtok_r(copy, ",", &save); tok != NULL && n < max;
         tok = strtok_r(NULL, ",", &save))
        out[n++] =
            tool_parse_size(BENCH_NAME, sizes ? "--sizes" : "--streams", tok);
    free(copy);
    return n;
}

static void
usage(FILE *out)
{
    fprintf(
        out,
        "usage: scimq-bench --url scimq://HOST:PORT [options]\n"
        "  --sizes LIST     message sizes (1MiB,16MiB)\n"
        "  --streams LIST   parallel streams (1,4,8)\n"
        "  --trials N       trials per configuration (5)\n"
        "  --bytes SIZE     payload bytes per trial (1GiB)\n"
        "  --count N        messages per trial instead (at least 1)\n"
        "  --credit N       consumer credit in messages (1024)\n"
        "  --credit-bytes SIZE  consumer credit in bytes (64MiB per "
        "stream, at\n"
        "                   least 2K+2 messages)\n"
        "  --window N       producer's unconfirmed PUTs (credit bytes / "
        "size,\n"
        "                   2K+2..1024)\n"
        "  --latency        p50/p99 time from PUT to delivery, msg/s\n"
        "  --rate R         offer R messages per second (default: as fast "
        "as\n"
        "                   the windows let)\n"
        "  --iperf3 PATH    reference program (iperf3); 'none' to skip\n"
        "  --iperf-port P   its port on loopback (5399)\n" TOOL_COMMON_USAGE);
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"sizes", required_argument, NULL, 's'},
        {"trials", required_argument, NULL, 't'},
        {"bytes", required_argument, NULL, 'b'},
        {"iperf3", required_argument, NULL, 'i'},
        {"iperf-port", required_argument, NULL, 'p'},
        {"streams-list", required_argument, NULL, 'k'},
        {"count", required_argument, NULL, 'n'},
        {"credit", required_argument, NULL, 'c'},
        {"credit-bytes", required_argument, NULL, 'B'},
        {"window", required_argument, NULL, 'w'},
        {"latency", no_argument, NULL, 'L'},
        {"rate", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        TOOL_COMMON_OPTIONS,
        {NULL, 0, NULL, 0}};
    struct bench_cfg cfg = {.trials = 5,
                            .bytes = 1ull << 30,
                            .iperf3 = "iperf3",
                            .iperf_port = BENCH_IPERF_PORT};
    uint64_t list[BENCH_MAX_LIST];
    json_t *results = json_array();
    pid_t iperf_srv = -1;
    int ch, rc = 0;

    cfg.sizes[0] = 1u << 20;
    cfg.sizes[1] = 16u << 20;
    cfg.n_sizes = 2;
    cfg.streams[0] = 1;
    cfg.streams[1] = 4;
    cfg.streams[2] = 8;
    cfg.n_streams = 3;
    tool_conn_init(&cfg.tc, BENCH_NAME);
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        /* --streams takes a list here, not one count. */
        if (ch == TOOL_OPT_STREAMS)
            ch = 'k';
        if (tool_conn_option(&cfg.tc, ch, optarg))
            continue;
        switch (ch) {
        case 's':
            cfg.n_sizes = parse_list(optarg, cfg.sizes, BENCH_MAX_LIST, true);
            break;
        case 'k':
            cfg.n_streams = parse_list(optarg, list, BENCH_MAX_LIST, false);
            for (int i = 0; i < cfg.n_streams; i++) {
                if (list[i] < 1 || list[i] > 64) {
                    fprintf(stderr, BENCH_NAME ": streams must be 1..64\n");
                    return 2;
                }
                cfg.streams[i] = (uint32_t) list[i];
            }
            break;
        case 't':
            cfg.trials = (int) tool_parse_size(BENCH_NAME, "--trials", optarg);
            break;
        case 'b':
            cfg.bytes = tool_parse_size(BENCH_NAME, "--bytes", optarg);
            break;
        case 'i':
            cfg.iperf3 = optarg;
            break;
        case 'n':
            cfg.count = tool_parse_size(BENCH_NAME, "--count", optarg);
            break;
        case 'c':
            list[0] = tool_parse_size(BENCH_NAME, "--credit", optarg);
            if (list[0] < 1 || list[0] > UINT32_MAX) {
                fprintf(stderr, BENCH_NAME ": --credit must be 1..2^32-1\n");
                return 2;
            }
            cfg.credit_msgs = (uint32_t) list[0];
            break;
        case 'B':
            cfg.credit_bytes =
                tool_parse_size(BENCH_NAME, "--credit-bytes", optarg);
            break;
        case 'w':
            list[0] = tool_parse_size(BENCH_NAME, "--window", optarg);
            if (list[0] < 1 || list[0] > (1u << 20)) {
                fprintf(stderr, BENCH_NAME ": --window must be 1..1048576\n");
                return 2;
            }
            cfg.window = (uint32_t) list[0];
            break;
        case 'L':
            cfg.latency = true;
            break;
        case 'r':
            cfg.rate = strtod(optarg, NULL);
            if (!(cfg.rate > 0)) {
                fprintf(stderr, BENCH_NAME ": bad --rate '%s'\n", optarg);
                return 2;
            }
            break;
        case 'p':
            cfg.iperf_port =
                (int) tool_parse_size(BENCH_NAME, "--iperf-port", optarg);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (cfg.trials < 1 || cfg.trials > 1000 || cfg.n_sizes == 0 ||
        cfg.n_streams == 0) {
        usage(stderr);
        return 2;
    }
    for (int i = 0; i < cfg.n_sizes; i++) {
        if (cfg.sizes[i] == 0 || (cfg.latency && cfg.sizes[i] < 8)) {
            fprintf(stderr, BENCH_NAME ": sizes must be at least 1 byte (8 "
                                       "with --latency)\n");
            return 2;
        }
    }
    if (strcmp(cfg.iperf3, "none") != 0) {
        char port[16];
        char *srv_argv[] = {(char *) cfg.iperf3, "-s", "-p", port, NULL};

        snprintf(port, sizeof(port), "%d", cfg.iperf_port);
        iperf_srv = spawn(srv_argv, NULL);
        if (iperf_srv < 0) {
            fprintf(stderr,
                    BENCH_NAME ": cannot run %s (install iperf3 or "
                               "pass --iperf3 none)\n",
                    cfg.iperf3);
            return 1;
        }
        sleep(1); /* let the server listen */
    }

    printf("%-8s %3s  %-44s  %-44s  %s\n", "size", "K",
           "gateway MiB/s  min / Q1 / median / Q3 / max",
           "iperf3 MiB/s  min / Q1 / median / Q3 / max", "ratio");
    for (int si = 0; si < cfg.n_sizes && rc == 0; si++) {
        uint64_t size = cfg.sizes[si];
        uint64_t n = cfg.count > 0          ? cfg.count
                     : cfg.bytes / size > 0 ? cfg.bytes / size
                                            : 1;
        uint8_t *payload = malloc((size_t) size);

        if (payload == NULL) {
            rc = SCIMQ_ENOMEM;
            break;
        }
        memset(payload, 0x5a, (size_t) size);
        for (int ki = 0; ki < cfg.n_streams && rc == 0; ki++) {
            uint32_t k = cfg.streams[ki];
            double gw[1000], ip[1000], rate[1000], p50[1000], p99[1000];
            uint32_t credit_msgs, window;
            uint64_t credit_bytes;
            int ngw = 0, nip = 0;
            scimq_client_t *prod = NULL, *cons = NULL;
            scimq_client_options_t o;
            scimq_queue_options_t qo = {0};
            struct tool_conn tc = cfg.tc;
            char queue[64];
            struct scimq_dist dg, di, dr, d50, d99;

            snprintf(queue, sizeof(queue), "bench.%" PRIu64 ".%u", size, k);
            tc.streams = k;
            scimq_client_options_default(&o);
            /* Consumer credit: the tools' default (1024 messages, 64 MiB
             * per stream), never under 2K+2 messages' worth of bytes so
             * that large messages keep every stream busy.  The producer
             * keeps about as many bytes unconfirmed, 2K+2..1024 PUTs. */
            credit_msgs =
                cfg.credit_msgs > 0 ? cfg.credit_msgs : TOOL_CREDIT_MSGS;
            credit_bytes = cfg.credit_bytes;
            if (credit_bytes == 0) {
                credit_bytes = tool_credit_bytes(k);
                if (credit_bytes < (2 * k + 2) * size)
                    credit_bytes = (2 * k + 2) * size;
            }
            window = cfg.window;
            if (window == 0) {
                uint64_t w = credit_bytes / size;

                w = w < 2 * k + 2 ? 2 * k + 2 : w;
                window =
                    (uint32_t) (w > TOOL_CREDIT_MSGS ? TOOL_CREDIT_MSGS : w);
            }
            o.confirm_window = window;
            rc = tool_conn_open(&tc, &prod, &o);
            if (rc == 0)
                rc = tool_conn_open(&tc, &cons, NULL);
            if (rc == 0) {
                rc = scimq_client_queue_declare(prod, queue, &qo);
                rc = rc == SCIMQ_EEXIST ? 0 : rc;
            }
            if (rc == 0)
                rc = scimq_client_subscribe(cons, queue, credit_msgs,
                                            credit_bytes);
            for (int t = 0; t < cfg.trials && rc == 0; t++) {
                struct trial_result r = {0, 0, 0, 0};
                double v;

                rc = gateway_trial(prod, cons, queue, payload, size, n, window,
                                   cfg.latency, cfg.rate, &r);
                if (rc != 0) {
                    fprintf(stderr, BENCH_NAME ": trial failed: %s\n",
                            scimq_strerror(rc));
                    break;
                }
                rate[ngw] = r.msg_s;
                p50[ngw] = r.lat_p50_us;
                p99[ngw] = r.lat_p99_us;
                v = r.mib_s;
                gw[ngw++] = v;
                if (iperf_srv > 0) {
                    /* Same volume as the gateway trial, same streams. */
                    double secs = (double) (size * n) / (v * 1048576.0);

                    v = iperf_trial(&cfg, k, secs);
                    if (v > 0)
                        ip[nip++] = v;
                }
            }
            if (cons != NULL)
                (void) scimq_client_close(cons);
            if (prod != NULL)
                (void) scimq_client_close(prod);
            if (rc != 0)
                break;
            dg = scimq__dist_of(gw, ngw);
            di = scimq__dist_of(ip, nip);
            dr = scimq__dist_of(rate, ngw);
            d50 = scimq__dist_of(p50, ngw);
            d99 = scimq__dist_of(p99, ngw);
            printf("%-8" PRIu64 " %3u  %8.0f %8.0f %8.0f %8.0f %8.0f  "
                   "%8.0f %8.0f %8.0f %8.0f %8.0f  %5.2f\n",
                   size, k, dg.min, dg.q1, dg.median, dg.q3, dg.max, di.min,
                   di.q1, di.median, di.q3, di.max,
                   di.median > 0 ? dg.median / di.median : 0.0);
            if (cfg.latency)
                printf("%-8s %3s  msg/s %.0f / %.0f / %.0f / %.0f / %.0f, "
                       "median p50 %.1f us, p99 %.1f us\n",
                       "", "", dr.min, dr.q1, dr.median, dr.q3, dr.max,
                       d50.median, d99.median);
            fflush(stdout);
            {
                json_t *o = json_pack(
                    "{s:I, s:i, s:i, s:I, s:i, s:I, s:i, s:o, s:o, s:o, s:f}",
                    "size", (json_int_t) size, "streams", (int) k, "trials",
                    ngw, "messages", (json_int_t) n, "credit_msgs",
                    (int) credit_msgs, "credit_bytes",
                    (json_int_t) credit_bytes, "window", (int) window,
                    "gateway_MiB_per_s", scimq__dist_json(&dg),
                    "gateway_msg_per_s", scimq__dist_json(&dr),
                    "iperf3_MiB_per_s", scimq__dist_json(&di), "ratio",
                    di.median > 0 ? dg.median / di.median : 0.0);

                if (cfg.latency) {
                    json_object_set_new(o, "latency_p50_us",
                                        scimq__dist_json(&d50));
                    json_object_set_new(o, "latency_p99_us",
                                        scimq__dist_json(&d99));
                }
                json_array_append_new(results, o);
            }
        }
        free(payload);
    }
    if (iperf_srv > 0) {
        kill(iperf_srv, SIGTERM);
        waitpid(iperf_srv, NULL, 0);
    }
    tool_json_print(json_pack("{s:s, s:o, s:s?}", "tool", BENCH_NAME, "results",
                              results, "error",
                              rc != 0 ? scimq_err_name(rc) : NULL));
    return rc != 0 ? 1 : 0;
}
