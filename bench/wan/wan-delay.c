/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wan-delay: the delay line of the long-haul link emulator (bench/wan).
 *
 * The kernel here has no netem, so the delay and the random loss of the
 * emulated link are made in user space: an iptables NFQUEUE rule hands
 * every packet arriving on the namespace's veth to this program, which
 * drops a configured fraction at once and gives every other packet back
 * (NF_ACCEPT) once it has been held for the one-way delay.  The delay is
 * the same for every packet, so packets leave in the order they came and
 * the holding list is a FIFO; only the packet ids are held, the payloads
 * stay in the kernel's queue (NFQNL_COPY_META).  Due packets are released
 * with one batch verdict (every queued id up to the last due one), which
 * keeps a gigabit of MTU-sized packets within one core.
 *
 *   wan-delay --queue N --delay-us US [--loss PERCENT] [--seed S]
 *             [--max-held N]
 *
 * Runs until SIGTERM or SIGINT, then releases what it holds and prints one
 * JSON line: packets seen, dropped at random, dropped because more than
 * --max-held were held, released, and the most held at once.
 */
#include "config.h"
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <libnetfilter_queue/libnetfilter_queue.h>

struct held {
    uint32_t id;
    int64_t due_ns; /* CLOCK_MONOTONIC */
};

struct line {
    struct nfq_q_handle *qh;
    int64_t delay_ns;
    double loss; /* probability, 0..1 */
    struct drand48_data rng;
    struct held *fifo; /* ring of cap entries */
    size_t cap, head, count;
    uint64_t seen, dropped_random, dropped_full, released, max_held;
    int64_t now_ns; /* arrival time of the packets of this receive */
};

static volatile sig_atomic_t stop_requested;

static void
on_signal(int sig)
{
    (void) sig;
    stop_requested = 1;
}

static int64_t
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int
on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa,
          void *arg)
{
    struct line *l = arg;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    uint32_t id;
    double r;

    (void) msg;
    if (ph == NULL)
        return 0;
    id = ntohl(ph->packet_id);
    l->seen++;
    drand48_r(&l->rng, &r);
    if (r < l->loss) {
        l->dropped_random++;
        return nfq_set_verdict(qh, id, NF_DROP, 0, NULL);
    }
    if (l->count == l->cap) {
        /* A full delay line is a full router buffer: tail drop. */
        l->dropped_full++;
        return nfq_set_verdict(qh, id, NF_DROP, 0, NULL);
    }
    l->fifo[(l->head + l->count) % l->cap] =
        (struct held){.id = id, .due_ns = l->now_ns + l->delay_ns};
    l->count++;
    if (l->count > l->max_held)
        l->max_held = l->count;
    return 0;
}

/* Releases every packet due by t (all of them if t is INT64_MAX). */
static void
release_due(struct line *l, int64_t t)
{
    size_t n = 0;
    uint32_t last = 0;

    while (n < l->count && l->fifo[(l->head + n) % l->cap].due_ns <= t) {
        last = l->fifo[(l->head + n) % l->cap].id;
        n++;
    }
    if (n == 0)
        return;
    /* Accepts every packet still queued with an id up to last: exactly
     * the n due ones, as dropped packets already have their verdict and
     * later arrivals have larger ids. */
    if (nfq_set_verdict_batch(l->qh, last, NF_ACCEPT) < 0)
        fprintf(stderr, "wan-delay: batch verdict: %s\n", strerror(errno));
    l->head = (l->head + n) % l->cap;
    l->count -= n;
    l->released += n;
}

static void
usage(FILE *f)
{
    fprintf(f, "usage: wan-delay --queue N --delay-us US [--loss PERCENT] "
               "[--seed S] [--max-held N]\n");
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"queue", required_argument, NULL, 'q'},
        {"delay-us", required_argument, NULL, 'd'},
        {"loss", required_argument, NULL, 'l'},
        {"seed", required_argument, NULL, 's'},
        {"max-held", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct line l = {.cap = 65536};
    struct nfq_handle *h;
    struct sigaction sa;
    long queue = -1, seed = 1;
    double delay_us = -1, loss_pct = 0;
    static char buf[65536];
    int c, fd, one = 1, rc = 1;

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'q':
            queue = strtol(optarg, NULL, 10);
            break;
        case 'd':
            delay_us = strtod(optarg, NULL);
            break;
        case 'l':
            loss_pct = strtod(optarg, NULL);
            break;
        case 's':
            seed = strtol(optarg, NULL, 10);
            break;
        case 'm':
            l.cap = (size_t) strtoul(optarg, NULL, 10);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (queue < 0 || queue > 65535 || delay_us < 0 || loss_pct < 0 ||
        loss_pct > 100 || l.cap == 0 || optind != argc) {
        usage(stderr);
        return 2;
    }
    l.delay_ns = (int64_t) (delay_us * 1000.0);
    l.loss = loss_pct / 100.0;
    srand48_r(seed, &l.rng);
    if ((l.fifo = calloc(l.cap, sizeof(*l.fifo))) == NULL) {
        fprintf(stderr, "wan-delay: out of memory\n");
        return 1;
    }

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    if ((h = nfq_open()) == NULL) {
        fprintf(stderr, "wan-delay: nfq_open: %s\n", strerror(errno));
        goto out_free;
    }
    if ((l.qh = nfq_create_queue(h, (uint16_t) queue, on_packet, &l)) == NULL) {
        fprintf(stderr, "wan-delay: queue %ld: %s\n", queue, strerror(errno));
        goto out_close;
    }
    if (nfq_set_mode(l.qh, NFQNL_COPY_META, 0) < 0 ||
        nfq_set_queue_maxlen(l.qh, (uint32_t) l.cap + 1024) < 0) {
        fprintf(stderr, "wan-delay: queue setup: %s\n", strerror(errno));
        goto out_queue;
    }
    fd = nfq_fd(h);
    /* A burst of a few thousand packets arrives between two wake-ups; a
     * netlink overrun would lose their ids (and the packets with them). */
    nfnl_rcvbufsiz(nfq_nfnlh(h), 64u << 20);
    (void) setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof(one));
    printf("{\"ready\":true,\"queue\":%ld}\n", queue);
    fflush(stdout);

    while (!stop_requested) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        struct timespec ts, *tsp = NULL;
        int64_t t = now_ns();

        release_due(&l, t);
        if (l.count > 0) {
            int64_t wait = l.fifo[l.head].due_ns - t;

            if (wait < 0)
                wait = 0;
            ts.tv_sec = (time_t) (wait / 1000000000);
            ts.tv_nsec = (long) (wait % 1000000000);
            tsp = &ts;
        }
        if (ppoll(&pfd, 1, tsp, NULL) < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "wan-delay: ppoll: %s\n", strerror(errno));
            break;
        }
        if (!(pfd.revents & POLLIN))
            continue;
        /* Drain what is there without blocking, all stamped with the
         * time of this wake-up. */
        l.now_ns = now_ns();
        for (int i = 0; i < 4096; i++) {
            ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

            if (n < 0) {
                if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                    errno != ENOBUFS)
                    fprintf(stderr, "wan-delay: recv: %s\n", strerror(errno));
                break;
            }
            nfq_handle_packet(h, buf, (int) n);
        }
    }
    release_due(&l, INT64_MAX);
    printf("{\"queue\":%ld,\"delay_us\":%.0f,\"loss_percent\":%g,"
           "\"packets\":%" PRIu64 ",\"dropped_random\":%" PRIu64
           ",\"dropped_full\":%" PRIu64 ",\"released\":%" PRIu64
           ",\"max_held\":%" PRIu64 "}\n",
           queue, delay_us, loss_pct, l.seen, l.dropped_random, l.dropped_full,
           l.released, l.max_held);
    rc = 0;
out_queue:
    nfq_destroy_queue(l.qh);
out_close:
    nfq_close(h);
out_free:
    free(l.fifo);
    return rc;
}
