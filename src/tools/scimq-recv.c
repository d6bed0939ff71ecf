/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scimq-recv: consume a queue, optionally verifying synthetic payloads.
 *
 *   scimq-recv --url scimq://HOST:PORT --queue Q [--streams K] --verify
 *              --until-eos [--seq-log FILE] [--count N] [--max-message SIZE]
 *
 * Each message is verified, logged (--seq-log: one sequence number per
 * line, written before the acknowledgement so that a consumer killed at any
 * moment has logged everything it acknowledged), then acknowledged.  Ends
 * with one JSON line: messages, bytes, verified, corrupt, duplicates, lost,
 * redelivered, and the SciMP session version the gateway chose.
 *
 * Control messages (SCIMQ_MESSAGE_CONTROL: every consumer gets each one)
 * are counted apart, as "control": they are not messages for --count,
 * their bytes are not in "bytes", and --verify checks their payload but
 * keeps their sequence numbers out of the data's (duplicates, lost) and
 * out of --seq-log; "control_seqs" lists them in the order they came.
 * --timeline writes one line per message, data or control, with the
 * CLOCK_MONOTONIC times (ns) at which it was taken and at which its
 * settlement began (before the gateway can have it), so that a test can
 * order the deliveries of several consumers.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "iofd.h"
#include "seqset.h"
#include "synth.h"
#include "toolutil.h"

#define RECV_NAME "scimq-recv"

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: scimq-recv --queue Q [options]\n"
            "  --queue Q            queue to consume\n"
            "  --verify             check synthetic payloads (losses, "
            "duplicates, corruption)\n"
            "  --until-eos          stop at end of stream (queue closed and "
            "drained)\n"
            "  --count N            stop after N messages\n"
            "  --expect N           count losses against sequence numbers "
            "0..N-1\n"
            "  --seq-log FILE       write each verified sequence number\n"
            "  --credit N           unacknowledged messages at a time "
            "(1024, at most\n"
            "                       --count)\n"
            "  --credit-bytes SIZE  payload bytes at a time (64MiB per "
            "stream)\n"
            "  --max-message SIZE   largest message taken; larger ones are "
            "dead-lettered\n"
            "  --process-ms MS      simulate MS of work per message\n"
            "  --idle-timeout S     give up after S seconds without a "
            "message\n"
            "  --reject             give every message back (NACK, requeue)\n"
            "  --no-ack             never settle (leases expire)\n"
            "  --no-extend          do not keep leases alive while a message "
            "is held\n"
            "  --max-hold MS        keep a lease alive this long at most "
            "(3600000)\n"
            "  --linger S           stay connected S seconds before "
            "leaving\n"
            "  --timeline FILE      per message: taken_ns settling_ns seq "
            "data|control\n" TOOL_COMMON_USAGE);
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"queue", required_argument, NULL, 'q'},
        {"verify", no_argument, NULL, 'v'},
        {"until-eos", no_argument, NULL, 'e'},
        {"count", required_argument, NULL, 'n'},
        {"expect", required_argument, NULL, 'x'},
        {"seq-log", required_argument, NULL, 'l'},
        {"credit", required_argument, NULL, 'c'},
        {"credit-bytes", required_argument, NULL, 'b'},
        {"max-message", required_argument, NULL, 'M'},
        {"process-ms", required_argument, NULL, 'p'},
        {"idle-timeout", required_argument, NULL, 'i'},
        {"reject", no_argument, NULL, 'R'},
        {"no-ack", no_argument, NULL, 'N'},
        {"linger", required_argument, NULL, 'L'},
        {"no-extend", no_argument, NULL, 'E'},
        {"max-hold", required_argument, NULL, 'H'},
        {"timeline", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        TOOL_COMMON_OPTIONS,
        {NULL, 0, NULL, 0}};
    struct tool_conn tc;
    scimq_client_options_t co;
    struct scimq_seqset seqs = {0};
    scimq_client_t *c = NULL;
    const char *queue = NULL, *seq_log = NULL, *timeline = NULL;
    FILE *tl = NULL;
    json_t *control_seqs = json_array();
    bool verify = false, until_eos = false, eos = false, reject = false;
    bool no_ack = false;
    uint64_t linger = 0;
    /* 0 until given: the defaults depend on --count and --streams. */
    uint64_t count = 0, expect = 0, credit = 0, credit_bytes = 0;
    uint64_t process_ms = 0, idle_s = 0, max_message = 0;
    uint64_t messages = 0, bytes = 0, verified = 0, corrupt = 0;
    uint64_t not_synthetic = 0, redelivered = 0, control = 0;
    double t0 = tool_now(), last = t0, dt;
    int ch, rc = 0, log_fd = -1;

    tool_conn_init(&tc, RECV_NAME);
    /* Work longer than the ack timeout (--process-ms) is not redelivered. */
    scimq_client_options_default(&co);
    co.auto_extend = 1;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (tool_conn_option(&tc, ch, optarg))
            continue;
        switch (ch) {
        case 'q':
            queue = optarg;
            break;
        case 'v':
            verify = true;
            break;
        case 'e':
            until_eos = true;
            break;
        case 'n':
            count = tool_parse_size(RECV_NAME, "--count", optarg);
            break;
        case 'x':
            expect = tool_parse_size(RECV_NAME, "--expect", optarg);
            break;
        case 'l':
            seq_log = optarg;
            break;
        case 'c':
            credit = tool_parse_size(RECV_NAME, "--credit", optarg);
            if (credit == 0) {
                fprintf(stderr, RECV_NAME ": --credit must be at least 1\n");
                return 2;
            }
            break;
        case 'b':
            credit_bytes = tool_parse_size(RECV_NAME, "--credit-bytes", optarg);
            if (credit_bytes == 0) {
                fprintf(stderr, RECV_NAME ": --credit-bytes must be at least "
                                          "1\n");
                return 2;
            }
            break;
        case 'M':
            max_message = tool_parse_size(RECV_NAME, "--max-message", optarg);
            break;
        case 'p':
            process_ms = tool_parse_size(RECV_NAME, "--process-ms", optarg);
            break;
        case 'i':
            idle_s = tool_parse_size(RECV_NAME, "--idle-timeout", optarg);
            break;
        case 'R':
            reject = true;
            break;
        case 'N':
            no_ack = true;
            break;
        case 'L':
            linger = tool_parse_size(RECV_NAME, "--linger", optarg);
            break;
        case 'E':
            co.auto_extend = 0;
            break;
        case 'T':
            timeline = optarg;
            break;
        case 'H':
            co.max_hold_ms = tool_parse_size(RECV_NAME, "--max-hold", optarg);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (queue == NULL || optind < argc || credit > UINT32_MAX) {
        usage(stderr);
        return 2;
    }
    /* A consumer that stops after --count messages leases no more than
     * that: what it leased beyond would go back to the queue redelivered. */
    if (credit == 0)
        credit =
            count > 0 && count < TOOL_CREDIT_MSGS ? count : TOOL_CREDIT_MSGS;
    if (credit_bytes == 0)
        credit_bytes = tool_credit_bytes(tc.streams);
    if (seq_log != NULL) {
        log_fd = open(seq_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (log_fd < 0) {
            fprintf(stderr, RECV_NAME ": %s: %s\n", seq_log, strerror(errno));
            return 1;
        }
    }
    if (timeline != NULL && (tl = fopen(timeline, "we")) == NULL) {
        fprintf(stderr, RECV_NAME ": %s: %s\n", timeline, strerror(errno));
        if (log_fd >= 0)
            close(log_fd);
        return 1;
    }
    rc = tool_conn_open(&tc, &c, &co);
    if (rc != 0)
        goto out;
    /* Before the subscription, so that it precedes the first GET. */
    if (max_message > 0 &&
        (rc = scimq_client_limit(c, queue, max_message)) != 0) {
        fprintf(stderr, RECV_NAME ": cannot limit %s: %s\n", queue,
                scimq_strerror(rc));
        goto out;
    }
    rc = scimq_client_subscribe(c, queue, (uint32_t) credit, credit_bytes);
    if (rc != 0) {
        fprintf(stderr, RECV_NAME ": cannot consume %s: %s\n", queue,
                scimq_strerror(rc));
        goto out;
    }

    while (count == 0 || messages < count) {
        scimq_message_t *m = NULL;
        const scimq_block_t *b;
        bool is_control;
        uint64_t taken_ns, settling_ns;
        int64_t tl_seq = -1;

        rc = scimq_client_get(c, &m, 1000);
        if (rc == SCIMQ_ETIMEDOUT) {
            rc = 0;
            if (idle_s > 0 && tool_now() - last > (double) idle_s) {
                fprintf(stderr, RECV_NAME ": nothing for %" PRIu64 " s\n",
                        idle_s);
                rc = SCIMQ_ETIMEDOUT;
                break;
            }
            continue;
        }
        if (rc == SCIMQ_EOS) {
            eos = true;
            rc = 0;
            break;
        }
        if (rc != 0) {
            fprintf(stderr, RECV_NAME ": %s (%s)\n", scimq_strerror(rc),
                    scimq_err_name(rc));
            break;
        }
        last = tool_now();
        taken_ns = tool_now_ns();
        is_control = (m->flags & SCIMQ_MESSAGE_CONTROL) != 0;
        if (is_control) {
            control++;
        } else {
            messages++;
            bytes += m->payload_len;
        }
        if (m->attempt > 1)
            redelivered++;
        b = scimq__synth_block(m->blocks, m->block_count);
        if (b != NULL && (verify || tl != NULL)) {
            uint64_t seq = 0;
            /* Data is logged before the ack below (the log covers every
             * ack); a control message is verified, but its number is not
             * one of the data's sequence numbers. */
            int vr = verify && !is_control
                         ? scimq__synth_record(b, &seqs, log_fd, &seq)
                         : scimq__synth_verify(b->data, (size_t) b->len, &seq);

            if (vr == 0)
                tl_seq = (int64_t) seq;
            if (!verify) {
                /* only the timeline's sequence number was wanted */
            } else if (vr == 0 && is_control) {
                json_array_append_new(control_seqs,
                                      json_integer((json_int_t) seq));
            } else if (vr == 0) {
                verified++;
            } else if (vr == SCIMQ_EINVAL) {
                not_synthetic++;
            } else {
                corrupt++;
                fprintf(stderr, RECV_NAME ": message %" PRIu64 " is corrupt\n",
                        m->msg_id);
            }
        }
        if (process_ms > 0) {
            struct timespec ts = {(time_t) (process_ms / 1000),
                                  (long) (process_ms % 1000) * 1000000L};

            nanosleep(&ts, NULL);
        }
        settling_ns = tool_now_ns(); /* before the gateway can know */
        if (reject)
            rc = scimq_client_nack(c, m, 1, 0);
        else if (!no_ack)
            rc = scimq_client_ack(c, m);
        scimq_message_free(c, m);
        if (tl != NULL)
            fprintf(tl, "%" PRIu64 " %" PRIu64 " %" PRId64 " %s\n", taken_ns,
                    settling_ns, tl_seq, is_control ? "control" : "data");
        if (rc != 0) {
            fprintf(stderr, RECV_NAME ": settle: %s\n", scimq_strerror(rc));
            break;
        }
    }
    if (linger > 0 && rc == 0)
        sleep((unsigned int) linger);
out:
    dt = tool_now() - t0;
    {
        json_t *o = json_pack(
            "{s:s, s:s, s:I, s:I, s:i, s:f, s:f, s:b}", "tool", RECV_NAME,
            "queue", queue, "messages", (json_int_t) messages, "bytes",
            (json_int_t) bytes, "streams", (int) tc.streams, "seconds", dt,
            "MiB_per_s", dt > 0 ? (double) bytes / dt / 1048576.0 : 0.0, "eos",
            eos);

        json_object_set_new(o, "control", json_integer((json_int_t) control));
        if (verify)
            json_object_set(o, "control_seqs", control_seqs);
        if (verify) {
            json_object_set_new(o, "verified",
                                json_integer((json_int_t) verified));
            json_object_set_new(o, "corrupt",
                                json_integer((json_int_t) corrupt));
            json_object_set_new(o, "not_synthetic",
                                json_integer((json_int_t) not_synthetic));
            json_object_set_new(o, "duplicates",
                                json_integer((json_int_t) seqs.duplicates));
            json_object_set_new(o, "lost",
                                json_integer((json_int_t) scimq__seqset_missing(
                                    &seqs, expect)));
        }
        json_object_set_new(o, "redelivered",
                            json_integer((json_int_t) redelivered));
        {
            uint64_t ext = 0, late = 0;

            if (c != NULL)
                (void) scimq_client_lease_counters(c, &ext, &late);
            json_object_set_new(o, "extends", json_integer((json_int_t) ext));
            json_object_set_new(o, "late_acks",
                                json_integer((json_int_t) late));
        }
        json_object_set_new(
            o, "session_version",
            json_integer((json_int_t) scimq_client_session_version(c)));
        json_object_set_new(o, "error",
                            rc != 0 ? json_string(scimq_err_name(rc))
                                    : json_null());
        tool_json_print(o);
    }
    if (c != NULL)
        (void) scimq_client_close(c);
    if (log_fd >= 0)
        close(log_fd);
    if (tl != NULL && fclose(tl) != 0 && rc == 0)
        rc = SCIMQ_EIO;
    json_decref(control_seqs);
    if (rc == 0 && until_eos && !eos)
        rc = SCIMQ_EIO;
    if (rc == 0 && verify && corrupt > 0)
        rc = SCIMQ_EPROTO_DATASUM;
    scimq__seqset_fini(&seqs);
    return rc != 0 ? 1 : 0;
}
