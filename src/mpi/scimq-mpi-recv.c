/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scimq-mpi-recv: drain a queue into the ranks of an MPI job through the
 * SciMQ runtime, verifying self-verifying payloads.
 *
 *   mpirun -np N scimq-mpi-recv --url scimq://HOST:PORT --queue Q --verify
 *          [--until-eos] [--seq-log FILE] [--expect N] [--process-ms MS]
 *          [--slow-ranks LIST --slow-factor F] [--provider P] [--streams S]
 *          [--poll]
 *
 * Every rank loops on scimq_mpi_next() (with --poll, on
 * scimq_mpi_try_next(), yielding the core between calls).  With --seq-log, each
 * rank appends the sequence number of every verified message to FILE.<rank>
 * before it acknowledges it (so a job killed at any moment has a record of what
 * it processed), and rank 0 writes the union to FILE at the end.  Rank 0 prints
 * one JSON line: messages and bytes per rank, lost, duplicates, corrupt.
 *
 * Control messages (SCIMQ_MPI_MSG_CONTROL: every rank gets each one) are
 * counted apart, per rank: "control" in per_rank, and (with --verify,
 * for synthetic ones) "control_seqs", their sequence numbers in the order
 * they came, with "control_after", how many data messages the rank had
 * processed before each; they are not messages for --expect, lost or
 * duplicates, and stay out of --seq-log.  --control-ms sets the work per
 * control message (default: --process-ms).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <mpi.h>

#include <scimq/mpi.h>

#include "tools/iofd.h"
#include "tools/seqset.h"
#include "tools/synth.h"

#define NAME "scimq-mpi-recv"

/* SIGUSR1 (what job scripts forward before the walltime; mpirun and srun
 * pass it to the ranks) or SIGTERM: stop asking, ack, finalize, report. */
static volatile sig_atomic_t stop_requested;

static void
on_stop(int sig)
{
    (void) sig;
    stop_requested = 1;
    scimq_mpi_stop(); /* async-signal-safe: next() returns SCIMQ_ESTOPPED */
}

/* Control messages whose sequence numbers a rank reports. */
#define CONTROL_MAX 16

struct rank_stats {
    uint64_t messages, bytes, verified, corrupt, not_synthetic, redelivered;
    double busy_s;
    int node, nodes; /* this rank's agent, how many agents */
    uint64_t control, control_seq[CONTROL_MAX], control_after[CONTROL_MAX];
};

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: mpirun -np N scimq-mpi-recv --queue Q [options]\n"
            "  --url scimq://HOST:PORT  gateway ($SCIMQ_URL)\n"
            "  --queue Q                queue ($SCIMQ_QUEUE)\n"
            "  --verify                 check synthetic payloads\n"
            "  --until-eos              run until end of stream (always)\n"
            "  --expect N               count losses against 0..N-1\n"
            "  --seq-log FILE           per-rank FILE.<rank>, union in FILE\n"
            "  --process-ms MS          simulated work per message\n"
            "  --control-ms MS          per control message (--process-ms)\n"
            "  --slow-ranks LIST        ranks that work --slow-factor times "
            "longer\n"
            "  --slow-factor F          (5)\n"
            "  --provider P             libfabric provider (shm, "
            "tcp;ofi_rxm)\n"
            "  --streams S              agent streams to the gateway\n"
            "  --max-message SIZE       largest message (16MiB)\n"
            "  --poll                   scimq_mpi_try_next() in a loop\n");
}

static bool
in_list(const char *list, int rank)
{
    char *copy, *save = NULL, *tok;
    bool found = false;

    if (list == NULL)
        return false;
    copy = strdup(list);
    for (tok = strtok_r(copy, ",", &save); tok && !found;
         tok = strtok_r(NULL, ",", &save))
        found = atoi(tok) == rank;
    free(copy);
    return found;
}

/* One rank's entry of per_rank. */
static json_t *
rank_json(const struct rank_stats *st, int rank, bool verify)
{
    json_t *o = json_pack(
        "{s:i, s:i, s:I, s:I, s:f, s:I}", "rank", rank, "node", st->node,
        "messages", (json_int_t) st->messages, "bytes", (json_int_t) st->bytes,
        "busy_s", st->busy_s, "control", (json_int_t) st->control);

    if (verify) {
        json_t *seqs = json_array(), *after = json_array();
        uint64_t n = st->control < CONTROL_MAX ? st->control : CONTROL_MAX;

        for (uint64_t i = 0; i < n; i++) {
            json_array_append_new(
                seqs, json_integer((json_int_t) st->control_seq[i]));
            json_array_append_new(
                after, json_integer((json_int_t) st->control_after[i]));
        }
        json_object_set_new(o, "control_seqs", seqs);
        json_object_set_new(o, "control_after", after);
    }
    return o;
}

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* Simulated work: sleeps ms milliseconds, adding the time to *busy_s. */
static void
do_work(double ms, double *busy_s)
{
    double t = now_s();
    struct timespec ts = {
        (time_t) (ms / 1000),
        (long) ((ms - 1000 * (double) (time_t) (ms / 1000)) * 1e6)};

    if (ms <= 0)
        return;
    nanosleep(&ts, NULL);
    *busy_s += now_s() - t;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"url", required_argument, NULL, 'u'},
        {"queue", required_argument, NULL, 'q'},
        {"verify", no_argument, NULL, 'v'},
        {"until-eos", no_argument, NULL, 'e'},
        {"expect", required_argument, NULL, 'x'},
        {"seq-log", required_argument, NULL, 'l'},
        {"process-ms", required_argument, NULL, 'p'},
        {"control-ms", required_argument, NULL, 'c'},
        {"slow-ranks", required_argument, NULL, 'S'},
        {"slow-factor", required_argument, NULL, 'F'},
        {"provider", required_argument, NULL, 'P'},
        {"streams", required_argument, NULL, 's'},
        {"max-message", required_argument, NULL, 'm'},
        {"poll", no_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    scimq_mpi_options_t mo;
    scimq_mpi_t *ctx = NULL;
    struct scimq_seqset seqs = {0};
    struct rank_stats st = {0};
    const char *url = NULL, *queue = NULL, *seq_log = NULL, *slow = NULL;
    bool verify = false, poll_mode = false;
    uint64_t expect = 0, process_ms = 0, *mine = NULL, nmine = 0, cap = 0;
    int64_t control_ms = -1;
    double factor = 5, t0, t1, scale, work_ms, control_work_ms;
    int rank, size, ch, rc, log_fd = -1, final_rc = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    scimq_mpi_options_default(&mo);
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            url = optarg;
            break;
        case 'q':
            queue = optarg;
            break;
        case 'v':
            verify = true;
            break;
        case 'e':
            break;
        case 'o':
            poll_mode = true;
            break;
        case 'x':
            expect = strtoull(optarg, NULL, 10);
            break;
        case 'l':
            seq_log = optarg;
            break;
        case 'p':
            process_ms = strtoull(optarg, NULL, 10);
            break;
        case 'c':
            control_ms = (int64_t) strtoull(optarg, NULL, 10);
            break;
        case 'S':
            slow = optarg;
            break;
        case 'F':
            factor = strtod(optarg, NULL);
            break;
        case 'P':
            mo.provider = optarg;
            break;
        case 's':
            mo.streams = (uint32_t) strtoul(optarg, NULL, 10);
            break;
        case 'm':
            mo.max_message = strtoull(optarg, NULL, 10);
            if (strpbrk(optarg, "KkMmGg") != NULL) {
                /* Sizes with units go through the runtime's parser. */
                setenv("SCIMQ_MPI_MAX_MESSAGE", optarg, 1);
                mo.max_message = 0;
            }
            break;
        case 'h':
            if (rank == 0)
                usage(stdout);
            MPI_Finalize();
            return 0;
        default:
            if (rank == 0)
                usage(stderr);
            MPI_Finalize();
            return 2;
        }
    }
    if (seq_log != NULL) {
        char path[4096];

        snprintf(path, sizeof(path), "%s.%d", seq_log, rank);
        log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (log_fd < 0)
            fprintf(stderr, NAME ": %s: %s\n", path, strerror(errno));
    }
    scale = in_list(slow, rank) ? factor : 1.0;
    work_ms = (double) process_ms * scale;
    control_work_ms = control_ms < 0 ? work_ms : (double) control_ms * scale;

    /* Before scimq_mpi_init: a stop that comes while it starts is kept
     * (scimq_mpi_stop() holds until the first next()), and the runtime
     * leaves signals with a handler to the program. */
    {
        struct sigaction sa;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_stop;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR1, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
    }
    rc = scimq_mpi_init(MPI_COMM_WORLD, url, queue, &mo, &ctx);
    if (rc != 0) {
        if (rank == 0) {
            fprintf(stderr, NAME ": cannot start: %s (%s)\n",
                    scimq_strerror(rc), scimq_err_name(rc));
            printf("{\"tool\":\"" NAME "\",\"error\":\"%s\"}\n",
                   scimq_err_name(rc));
        }
        MPI_Finalize();
        return 1;
    }
    (void) scimq_mpi_node(ctx, &st.node, NULL, &st.nodes);

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    for (;;) {
        scimq_mpi_msg_t m;
        const scimq_block_t *b;

        /* Short waits, so that a stop request is seen promptly. */
        if (poll_mode) {
            rc = scimq_mpi_try_next(ctx, &m);
            if (rc == SCIMQ_EAGAIN && !stop_requested) {
                sched_yield();
                continue;
            }
        } else {
            rc = scimq_mpi_next_timed(ctx, &m, 250);
            if (rc == SCIMQ_ETIMEDOUT && !stop_requested)
                continue;
        }
        /* Stopped: by our own signal, or by the job's (the runtime tells
         * every rank, which may hear it before its own signal comes). */
        if (rc == SCIMQ_ESTOPPED ||
            (stop_requested && rc != 0 && rc != SCIMQ_EOS)) {
            stop_requested = 1;
            rc = 0;
            break;
        }
        if (rc == SCIMQ_EOS) {
            rc = 0;
            break;
        }
        if (rc != 0) {
            fprintf(stderr, NAME ": rank %d: %s (%s)\n", rank,
                    scimq_strerror(rc), scimq_err_name(rc));
            final_rc = 1;
            break;
        }
        b = scimq__synth_block(m.blocks, m.block_count);
        if (m.flags & SCIMQ_MPI_MSG_CONTROL) {
            uint64_t seq;

            if (verify && b != NULL) {
                if (scimq__synth_verify(b->data, b->len, &seq) != 0) {
                    st.corrupt++;
                } else if (st.control < CONTROL_MAX) {
                    st.control_seq[st.control] = seq;
                    st.control_after[st.control] = st.messages;
                }
            }
            st.control++;
            if (stop_requested)
                break;
            do_work(control_work_ms, &st.busy_s);
            continue;
        }
        st.messages++;
        st.bytes += m.len;
        if (m.attempt > 1)
            st.redelivered++;
        if (verify && b != NULL) {
            uint64_t seq;
            /* Logged before the ack (the next call): nothing processed
             * goes unrecorded, even if the job is killed. */
            int vr = scimq__synth_record(b, &seqs, log_fd, &seq);

            if (vr == 0) {
                st.verified++;
                if (nmine == cap) {
                    cap = cap ? cap * 2 : 1024;
                    mine = realloc(mine, cap * sizeof(*mine));
                }
                mine[nmine++] = seq;
            } else if (vr == SCIMQ_EINVAL) {
                st.not_synthetic++;
            } else {
                st.corrupt++;
            }
        }
        if (stop_requested)
            break; /* this one is processed: finalize acknowledges it */
        do_work(work_ms, &st.busy_s);
    }
    t1 = now_s();
    if (log_fd >= 0)
        close(log_fd);

    /* Gather per-rank results and every verified sequence number. */
    {
        struct rank_stats *all =
            rank == 0 ? calloc((size_t) size, sizeof(*all)) : NULL;
        int n = (int) nmine, *counts = NULL, *displs = NULL, total = 0;
        int stopped_any = 0;
        uint64_t *seq_all = NULL;
        double t_max = 0, dt = t1 - t0;

        MPI_Gather(&st, sizeof(st), MPI_BYTE, all, sizeof(st), MPI_BYTE, 0,
                   MPI_COMM_WORLD);
        MPI_Reduce(&dt, &t_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        {
            int mine_stop = stop_requested != 0;

            MPI_Reduce(&mine_stop, &stopped_any, 1, MPI_INT, MPI_MAX, 0,
                       MPI_COMM_WORLD);
        }
        if (rank == 0) {
            counts = calloc((size_t) size, sizeof(int));
            displs = calloc((size_t) size, sizeof(int));
        }
        MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            for (int r = 0; r < size; r++) {
                displs[r] = total;
                total += counts[r];
            }
            seq_all = malloc(((size_t) total + 1) * sizeof(uint64_t));
        }
        MPI_Gatherv(mine, n, MPI_UINT64_T, seq_all, counts, displs,
                    MPI_UINT64_T, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            struct scimq_seqset u = {0};
            json_t *per = json_array(), *o;
            uint64_t msgs = 0, bytes = 0, verified = 0, corrupt = 0, redel = 0;
            FILE *fp = NULL;
            char *text;

            for (int i = 0; i < total; i++)
                (void) scimq__seqset_add(&u, seq_all[i]);
            for (int r = 0; r < size; r++) {
                msgs += all[r].messages;
                bytes += all[r].bytes;
                verified += all[r].verified;
                corrupt += all[r].corrupt;
                redel += all[r].redelivered;
                json_array_append_new(per, rank_json(&all[r], r, verify));
            }
            if (seq_log != NULL && (fp = fopen(seq_log, "w")) != NULL) {
                for (uint64_t s = 0; s < u.max_plus1; s++)
                    if (u.bits[s / 8] & (1u << (s % 8)))
                        fprintf(fp, "%" PRIu64 "\n", s);
                fclose(fp);
            }
            o = json_pack("{s:s, s:i, s:I, s:I, s:f, s:f, s:o}", "tool", NAME,
                          "ranks", size, "messages", (json_int_t) msgs, "bytes",
                          (json_int_t) bytes, "seconds", t_max, "MiB_per_s",
                          t_max > 0 ? (double) bytes / t_max / 1048576.0 : 0.0,
                          "per_rank", per);
            json_object_set_new(o, "agents", json_integer(all[0].nodes));
            if (verify) {
                json_object_set_new(o, "verified",
                                    json_integer((json_int_t) verified));
                json_object_set_new(o, "corrupt",
                                    json_integer((json_int_t) corrupt));
                json_object_set_new(o, "duplicates",
                                    json_integer((json_int_t) u.duplicates));
                json_object_set_new(
                    o, "lost",
                    json_integer(
                        (json_int_t) scimq__seqset_missing(&u, expect)));
            }
            json_object_set_new(o, "redelivered",
                                json_integer((json_int_t) redel));
            json_object_set_new(o, "eos",
                                json_boolean(final_rc == 0 && !stopped_any));
            json_object_set_new(o, "stopped", json_boolean(stopped_any));
            text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
            if (text != NULL)
                printf("%s\n", text);
            fflush(stdout);
            free(text);
            json_decref(o);
            scimq__seqset_fini(&u);
            if (corrupt > 0)
                final_rc = 1;
        }
        free(all);
        free(counts);
        free(displs);
        free(seq_all);
    }
    free(mine);
    scimq__seqset_fini(&seqs);
    (void) scimq_mpi_finalize(ctx);
    MPI_Finalize();
    return final_rc;
}
