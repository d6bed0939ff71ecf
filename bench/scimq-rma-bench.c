/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scimq-rma-bench: the agent-to-rank hop of libscimq-mpi, measured against
 * a raw fi_read of the same bytes on the same provider, in the same run.
 *
 *   mpirun -np 2 --oversubscribe bench/scimq-rma-bench
 *          [--sizes 64KiB,16MiB] [--provider 'shm,tcp;ofi_rxm']
 *          [--trials 7] [--bytes 1GiB] [--json FILE]
 *
 * The hop is the runtime itself: this program is built from the runtime's
 * own sources (agent, prefetch, control messages, fabric) and calls
 * scimq_mpi_init() / scimq_mpi_next() / scimq_mpi_finalize(); only the
 * agent's message source is replaced (source.h): instead of a gateway, a
 * synthetic source hands out pool slots that hold a message already, so
 * what is measured is the agent, the control messages, the inline copy
 * or the RMA read, the rank's progress thread and the hand-over to the
 * application, and nothing of the gateway.  Rank 0 hosts the agent and
 * stops its own consumption at once (scimq_mpi_stop()); rank 1 drains.
 * Settings come from the environment as for any program
 * (SCIMQ_MPI_PREFETCH, SCIMQ_MPI_INLINE_MAX, ...).
 *
 * The reference: rank 1 reads the same number of bytes (block table and
 * payload) back to back with fi_read from registered memory in rank 0,
 * whose thread polls its completion queue all the time (the passive side
 * must), both sides yielding, never sleeping: what the provider can do.
 * It reads from the same memory footprint as the hop: a region as large
 * as the agent's pool, message after message at the place the pool's
 * next message would take (whole pool chunks), into as many buffers as
 * the rank has (P + 1, round robin).  With fewer places (two slots, as
 * before) the reference copied from memory the cache still held, and the
 * hop, whose messages travel through the whole pool, did not: 16 MiB
 * measured 0.62x against two slots, 0.91x with the pool cut to two
 * messages' room.
 *
 * Trials alternate hop and reference; each reports MiB/s of payload.  It
 * prints min / Q1 / median / Q3 / max of each and the ratio of the
 * medians; with --json FILE also one JSON line per trial (bench/README.md),
 * and at the end one JSON line with everything on stdout.
 */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <mpi.h>

#include <scimq/error.h>
#include <scimq/mpi.h>

#include "common/param.h"
#include "mpi/fabric.h"
#include "mpi/ctrl.h"
#include "mpi/runtime.h"
#include "mpi/source.h"
#include "tools/dist.h"

#define NAME "scimq-rma-bench"
#define MAX_LIST 16
#define MAX_TRIALS 1000
/* One block named "data": count, then name length, data length, name: the
 * block table the agent writes for a synthetic message. */
#define META_LEN (4u + 12u + 4u)

struct cfg {
    uint64_t sizes[MAX_LIST];
    int n_sizes;
    char *providers[MAX_LIST];
    int n_providers;
    int trials;
    uint64_t bytes; /* per trial */
    const char *json_path;
};

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* Waits for a non-blocking collective without spinning: rank 0's main
 * thread waits here while rank 1 measures, and a blocking MPI call would
 * busy-poll a core the agent and rank 1 need. */
static int
sleepy_wait(MPI_Request *req)
{
    struct timespec ts = {0, 200000};
    int done = 0;

    for (;;) {
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return SCIMQ_EMPI;
        if (done)
            return 0;
        nanosleep(&ts, NULL);
    }
}

/* Every rank leaves with the lowest (worst) of their results. */
static int
agree(int rc)
{
    MPI_Request req;
    int all = rc;

    if (MPI_Iallreduce(&rc, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req) !=
            MPI_SUCCESS ||
        sleepy_wait(&req) != 0)
        return SCIMQ_EMPI;
    return all;
}

/* ------------------------------------------------------------------------ */
/* The synthetic source (rank 0's agent)                                     */
/* ------------------------------------------------------------------------ */

static uint64_t synth_size; /* payload of every message, set per size */

struct synth {
    struct scimq_mpi_source_cfg cfg;
    uint64_t next_id;
};

struct synth_msg {
    scimq_message_t m;
    scimq_block_t block;
};

static int
synth_open(const struct scimq_mpi_source_cfg *cfg, void **src_p)
{
    struct synth *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return SCIMQ_ENOMEM;
    s->cfg = *cfg;
    s->next_id = 1;
    *src_p = s;
    return 0;
}

/* A message in a free pool slot; its first 8 bytes are its id, which the
 * rank checks (the payload otherwise is what the slot held). */
static int
synth_get(void *src, scimq_message_t **m_p)
{
    struct synth *s = src;
    struct synth_msg *sm;
    void *buf, *ctx;
    int rc;

    /* The pool first: it is full on most of the agent's turns. */
    rc = s->cfg.alloc(s->cfg.alloc_arg, synth_size, &buf, &ctx);
    if (rc != 0)
        return rc == SCIMQ_ENOBUFS ? SCIMQ_EAGAIN : rc;
    sm = calloc(1, sizeof(*sm));
    if (sm == NULL) {
        s->cfg.release(s->cfg.alloc_arg, buf, ctx);
        return SCIMQ_ENOMEM;
    }
    sm->m.msg_id = s->next_id++;
    sm->m.delivery_id = sm->m.msg_id;
    sm->m.attempt = 1;
    sm->m.queue = "bench";
    sm->m.payload = buf;
    sm->m.payload_len = synth_size;
    sm->m.payload_ctx = ctx;
    sm->m.block_count = 1;
    sm->block.name = "data";
    sm->block.data = buf;
    sm->block.len = synth_size;
    sm->m.blocks = &sm->block;
    if (synth_size >= sizeof(uint64_t))
        memcpy(buf, &sm->m.msg_id, sizeof(uint64_t));
    *m_p = &sm->m;
    return 0;
}

static int
synth_settle(void *src, scimq_message_t *m, int how)
{
    (void) src, (void) m, (void) how;
    return 0;
}

static int
synth_extend(void *src, scimq_message_t *m, uint32_t lease_ms)
{
    (void) src, (void) m, (void) lease_ms;
    return 0;
}

static void
synth_free(void *src, scimq_message_t *m)
{
    struct synth *s = src;

    s->cfg.release(s->cfg.alloc_arg, m->payload, m->payload_ctx);
    free(m); /* m is the first member of its struct synth_msg */
}

static void
synth_close(void *src)
{
    free(src);
}

static const struct scimq_mpi_source_ops synth_source = {
    .open = synth_open,
    .get = synth_get,
    .settle = synth_settle,
    .extend = synth_extend,
    .free = synth_free,
    .close = synth_close,
};

/* ------------------------------------------------------------------------ */
/* The reference: raw fi_read                                                */
/* ------------------------------------------------------------------------ */

struct raw {
    struct scimq_fabric fab;
    struct scimq_fabric_mr mr;
    uint8_t *mem;
    size_t len;
    /* rank 1: its buffers (nbuf of buf_size); rank 0: nsrc places of
     * stride bytes, as the pool holds messages of this size */
    size_t buf_size, stride;
    uint64_t nbuf, nsrc;
    fi_addr_t peer;
    /* rank 0: the passive side's poller */
    pthread_t thread;
    bool started;
    atomic_bool stop, active;
    /* rank 1: where rank 0's slots are */
    uint64_t raddr, key;
    struct fi_context2 ctx;
};

static uint8_t *
alloc_prefaulted(size_t len)
{
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED)
        return NULL;
    (void) madvise(p, len, MADV_HUGEPAGE);
    memset(p, 0x5a, len);
    return p;
}

/* Polls all the time during a reference trial (yielding), and sleeps
 * between them, so that it does not take a core from the hop. */
static void *
raw_poller(void *arg)
{
    struct raw *r = arg;

    while (!atomic_load(&r->stop)) {
        struct scimq_fabric_cqe cqe[8];
        struct timespec ms = {0, 1000000};

        if (!atomic_load(&r->active)) {
            nanosleep(&ms, NULL);
            continue;
        }
        (void) scimq__fabric_poll(&r->fab, cqe, 8);
        sched_yield();
    }
    return NULL;
}

static int
raw_open(struct raw *r, const char *provider, uint64_t size,
         const struct scimq_mpi_agent_info *ai, int rank)
{
    uint8_t peer[SCIMQ_FABRIC_ADDR_MAX];
    uint64_t mine[2] = {0, 0}, theirs[2];
    int rc = scimq__fabric_open(&r->fab, provider);

    /* The hop's footprint: its agent's pool and the rank's buffers. */
    r->stride = (SCIMQ_MPI_SLOT_META + size + SCIMQ_MPI_POOL_CHUNK - 1) /
                SCIMQ_MPI_POOL_CHUNK * SCIMQ_MPI_POOL_CHUNK;
    r->nsrc = ai->pool_len / r->stride;
    r->buf_size = ai->slot_size;
    r->nbuf = (uint64_t) ai->credits_max;
    if (r->nsrc == 0 || r->nbuf == 0)
        rc = rc != 0 ? rc : SCIMQ_EINVAL;
    r->len = rank == 0 ? ai->pool_len : r->buf_size * r->nbuf;
    if (rc == 0) {
        r->mem = alloc_prefaulted(r->len);
        rc = r->mem != NULL ? 0 : SCIMQ_ENOMEM;
    }
    if (rc == 0)
        rc = scimq__fabric_mr_reg(&r->fab, r->mem, r->len, 11, &r->mr);
    if (rc == 0) {
        mine[0] = scimq__fabric_remote_addr(&r->fab, &r->mr, r->mem);
        mine[1] = r->mr.key;
    }
    rc = agree(rc);
    if (rc != 0)
        return rc;
    if (MPI_Sendrecv(r->fab.addr, SCIMQ_FABRIC_ADDR_MAX, MPI_BYTE, 1 - rank, 7,
                     peer, SCIMQ_FABRIC_ADDR_MAX, MPI_BYTE, 1 - rank, 7,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
        MPI_Sendrecv(mine, 2, MPI_UINT64_T, 1 - rank, 8, theirs, 2,
                     MPI_UINT64_T, 1 - rank, 8, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return SCIMQ_EMPI;
    r->raddr = theirs[0];
    r->key = theirs[1];
    rc = scimq__fabric_av_insert(&r->fab, peer, &r->peer);
    if (rc == 0 && rank == 0) {
        if (pthread_create(&r->thread, NULL, raw_poller, r) != 0)
            rc = SCIMQ_ENOMEM;
        r->started = rc == 0;
    }
    return agree(rc);
}

static void
raw_close(struct raw *r)
{
    if (r->started) {
        atomic_store(&r->stop, true);
        pthread_join(r->thread, NULL);
        r->started = false;
    }
    scimq__fabric_mr_dereg(&r->mr);
    scimq__fabric_close(&r->fab);
    if (r->mem != NULL)
        munmap(r->mem, r->len);
    memset(r, 0, sizeof(*r));
}

/* Rank 1: n reads of META_LEN + size bytes, through the places of the
 * source and the buffers of the rank in turn. */
static int
raw_trial(struct raw *r, uint64_t size, uint64_t n, double *secs)
{
    uint64_t len = META_LEN + size;
    double t0 = now_s();

    for (uint64_t i = 0; i < n; i++) {
        uint64_t off =
            (i % r->nsrc) * r->stride + SCIMQ_MPI_SLOT_META - META_LEN;
        uint8_t *dst = r->mem + (i % r->nbuf) * r->buf_size;
        int rc, polls = 0;

        do {
            rc = scimq__fabric_read(&r->fab, dst, len, r->mr.desc, r->peer,
                                    r->raddr + off, r->key, &r->ctx);
            if (rc == SCIMQ_EAGAIN) {
                struct scimq_fabric_cqe cqe[1];

                (void) scimq__fabric_poll(&r->fab, cqe, 1);
                sched_yield();
            }
        } while (rc == SCIMQ_EAGAIN && ++polls < 10000000);
        if (rc != 0)
            return rc;
        for (;;) {
            struct scimq_fabric_cqe cqe[1];
            int k = scimq__fabric_poll(&r->fab, cqe, 1);

            if (k < 0)
                return k;
            if (k == 1)
                break;
            sched_yield();
        }
    }
    *secs = now_s() - t0;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The hop: the runtime                                                      */
/* ------------------------------------------------------------------------ */

/* Rank 1: n messages through scimq_mpi_next(), each checked. */
static int
hop_trial(uint64_t size, uint64_t n, double *secs)
{
    double t0 = now_s();

    for (uint64_t i = 0; i < n; i++) {
        scimq_mpi_msg_t msg;
        uint64_t id = 0;
        int rc = scimq_mpi_next(&msg);

        if (rc != 0)
            return rc;
        if (size >= sizeof(id))
            memcpy(&id, msg.data, sizeof(id));
        if (msg.len != size || msg.block_count != 1 ||
            (size >= sizeof(id) && id != msg.msg_id))
            return SCIMQ_EPROTO_DATASUM;
    }
    *secs = now_s() - t0;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Driver                                                                    */
/* ------------------------------------------------------------------------ */

static const char *
fmt_size(uint64_t v, char *buf, size_t len)
{
    if (v >= (1u << 20) && v % (1u << 20) == 0)
        snprintf(buf, len, "%" PRIu64 "MiB", v >> 20);
    else if (v >= 1024 && v % 1024 == 0)
        snprintf(buf, len, "%" PRIu64 "KiB", v >> 10);
    else
        snprintf(buf, len, "%" PRIu64 "B", v);
    return buf;
}

static void
usage(FILE *out)
{
    fprintf(out, "usage: mpirun -np 2 --oversubscribe " NAME " [options]\n"
                 "  --sizes LIST       payload sizes (64KiB,16MiB)\n"
                 "  --provider LIST    libfabric providers, comma separated "
                 "(shm); e.g. 'shm,tcp;ofi_rxm'\n"
                 "  --trials N         trials per configuration (7)\n"
                 "  --bytes SIZE       payload per trial (1GiB; 64 to 20000 "
                 "messages)\n"
                 "  --json FILE        each trial as one JSON line\n"
                 "Rank 0 hosts the agent, rank 1 drains; exactly 2 ranks.\n");
}

static int
parse_args(int argc, char **argv, struct cfg *cfg, int rank)
{
    static const struct option opts[] = {
        {"sizes", required_argument, NULL, 's'},
        {"provider", required_argument, NULL, 'p'},
        {"providers", required_argument, NULL, 'p'},
        {"trials", required_argument, NULL, 't'},
        {"bytes", required_argument, NULL, 'b'},
        {"json", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    uint64_t v;
    char *save, *tok;
    int ch;

    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 's':
            cfg->n_sizes = 0;
            save = NULL;
            for (tok = strtok_r(optarg, ",", &save);
                 tok != NULL && cfg->n_sizes < MAX_LIST;
                 tok = strtok_r(NULL, ",", &save)) {
                if (scimq__parse_size(tok, &v) != 0 || v == 0 ||
                    v > (1ull << 30))
                    goto bad;
                cfg->sizes[cfg->n_sizes++] = v;
            }
            break;
        case 'p':
            /* Names hold ';' ("tcp;ofi_rxm"), never ','. */
            cfg->n_providers = 0;
            save = NULL;
            for (tok = strtok_r(optarg, ",", &save);
                 tok != NULL && cfg->n_providers < MAX_LIST;
                 tok = strtok_r(NULL, ",", &save))
                cfg->providers[cfg->n_providers++] = tok;
            break;
        case 't':
            if (scimq__parse_size(optarg, &v) != 0 || v < 1 || v > MAX_TRIALS)
                goto bad;
            cfg->trials = (int) v;
            break;
        case 'b':
            if (scimq__parse_size(optarg, &v) != 0 || v < 1)
                goto bad;
            cfg->bytes = v;
            break;
        case 'j':
            cfg->json_path = optarg;
            break;
        case 'h':
            if (rank == 0)
                usage(stdout);
            return 1;
        default:
            goto bad;
        }
    }
    if (optind == argc && cfg->n_sizes > 0 && cfg->n_providers > 0)
        return 0;
bad:
    if (rank == 0)
        usage(stderr);
    return 2;
}

/* At least 64 messages: with 16 (256 MiB of 16 MiB) one preempted copy
 * moved a trial by a quarter, and the reference itself spread 2x. */
static uint64_t
messages_per_trial(const struct cfg *cfg, uint64_t size)
{
    uint64_t n = cfg->bytes / size;

    return n < 64 ? 64 : n > 20000 ? 20000 : n;
}

/*
 * One (provider, size): the runtime started on both ranks (rank 0's
 * agent with the synthetic source), a warm-up, then trials alternating
 * hop and reference.  Rank 1 measures, rank 0 receives the times.
 */
static int
run_size(const struct cfg *cfg, const char *provider, int rank, struct raw *rw,
         uint64_t size, double *hop, double *raw)
{
    scimq_mpi_options_t o;
    uint64_t n = messages_per_trial(cfg, size);
    double dummy;
    int rc;

    scimq_mpi_options_default(&o);
    o.provider = provider;
    o.max_message = size;
    synth_size = size;
    rc = scimq_mpi_init(MPI_COMM_WORLD, "scimq://127.0.0.1:1", "bench", &o,
                        NULL);
    if (rc != 0)
        return rc;
    /* The reference, laid out as this size's pool and buffers. */
    rc = raw_open(rw, provider, size, &scimq_mpi_default()->ai, rank);
    if (rc == 0 && rank == 0) {
        scimq_mpi_msg_t m;

        /* Rank 0 only hosts the agent: it stops consuming at once (its
         * BYE gives back whatever the agent had chosen for it). */
        scimq_mpi_stop();
        rc = scimq_mpi_next(&m) == SCIMQ_ESTOPPED ? 0 : SCIMQ_ESTATE;
    }
    rc = agree(rc);
    for (int t = -1; t < cfg->trials && rc == 0; t++) {
        uint64_t k = t < 0 ? n / 4 + 1 : n;

        rc =
            agree(rank == 1 ? hop_trial(size, k, t < 0 ? &dummy : &hop[t]) : 0);
        if (rank == 0)
            atomic_store(&rw->active, true);
        if (rc == 0)
            rc = agree(0);
        if (rc == 0)
            rc = agree(rank == 1
                           ? raw_trial(rw, size, k, t < 0 ? &dummy : &raw[t])
                           : 0);
        if (rank == 0)
            atomic_store(&rw->active, false);
    }
    (void) agree(0);
    raw_close(rw);
    (void) scimq_mpi_finalize(NULL);
    if (rc == 0 && rank == 1) {
        MPI_Send(hop, cfg->trials, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD);
        MPI_Send(raw, cfg->trials, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD);
    } else if (rc == 0 && rank == 0) {
        MPI_Recv(hop, cfg->trials, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        MPI_Recv(raw, cfg->trials, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    }
    return rc;
}

static void
json_trial(FILE *fp, const char *what, int trial, double v, bool ref)
{
    json_t *o;
    char *text;

    if (fp == NULL)
        return;
    o = json_pack("{s:s, s:s, s:i, s:f, s:s, s:b}", "bench", NAME, "case", what,
                  "trial", trial, "value", v, "unit", "MiB/s", "reference",
                  ref);
    text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text != NULL)
        fprintf(fp, "%s\n", text);
    free(text);
    json_decref(o);
}

/* Rank 0: one table row, its JSON lines and its JSON object. */
static json_t *
report(const struct cfg *cfg, FILE *jfp, const char *provider, uint64_t size,
       const double *hop_s, const double *raw_s)
{
    uint64_t n = messages_per_trial(cfg, size);
    double hop_m[MAX_TRIALS], raw_m[MAX_TRIALS],
        mib = (double) size * (double) n / (double) (1u << 20);
    struct scimq_dist h, r;
    char sz[32], what[128];
    double ratio;

    fmt_size(size, sz, sizeof(sz));
    for (int t = 0; t < cfg->trials; t++) {
        hop_m[t] = mib / hop_s[t];
        raw_m[t] = mib / raw_s[t];
        snprintf(what, sizeof(what), "%s %s hop", provider, sz);
        json_trial(jfp, what, t, hop_m[t], false);
        snprintf(what, sizeof(what), "%s %s raw fi_read", provider, sz);
        json_trial(jfp, what, t, raw_m[t], true);
    }
    h = scimq__dist_of(hop_m, cfg->trials);
    r = scimq__dist_of(raw_m, cfg->trials);
    ratio = r.median > 0 ? h.median / r.median : 0.0;
    printf("%-12s %6s %6" PRIu64 "  %7.0f %7.0f %7.0f %7.0f %7.0f  "
           "%7.0f %7.0f %7.0f %7.0f %7.0f  %5.2f\n",
           provider, sz, n, h.min, h.q1, h.median, h.q3, h.max, r.min, r.q1,
           r.median, r.q3, r.max, ratio);
    fflush(stdout);
    return json_pack("{s:s, s:I, s:I, s:i, s:o, s:o, s:f}", "provider",
                     provider, "size", (json_int_t) size, "messages",
                     (json_int_t) n, "trials", cfg->trials, "hop_MiB_per_s",
                     scimq__dist_json(&h), "raw_MiB_per_s",
                     scimq__dist_json(&r), "ratio", ratio);
}

int
main(int argc, char **argv)
{
    struct cfg cfg = {.trials = 7, .bytes = 1ull << 30};
    json_t *results = json_array();
    FILE *jfp = NULL;
    int rank, size, provided, rc, failed = 0;
    const char *e;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    cfg.sizes[0] = 64u << 10;
    cfg.sizes[1] = 16u << 20;
    cfg.n_sizes = 2;
    cfg.providers[0] = "shm";
    cfg.n_providers = 1;
    rc = parse_args(argc, argv, &cfg, rank);
    if (rc == 0 && size != 2) {
        if (rank == 0)
            fprintf(stderr, NAME ": needs exactly 2 ranks\n");
        rc = 2;
    }
    if (rc == 0 && rank == 0 && cfg.json_path != NULL &&
        (jfp = fopen(cfg.json_path, "w")) == NULL) {
        perror(cfg.json_path);
        rc = 2;
    }
    rc = agree(rc);
    if (rc != 0) {
        json_decref(results);
        MPI_Finalize();
        return rc == 1 ? 0 : 2;
    }
    /* Every agent of this program takes its messages from here. */
    scimq__mpi_source_hook = &synth_source;
    if (rank == 0) {
        e = getenv("SCIMQ_MPI_PREFETCH");
        printf("# %d cores (shared with other work: figures vary with its "
               "load); prefetch %s, inline max %s; MiB/s of payload\n",
               (int) sysconf(_SC_NPROCESSORS_ONLN), e ? e : "1 (default)",
               getenv("SCIMQ_MPI_INLINE_MAX") ? getenv("SCIMQ_MPI_INLINE_MAX")
                                              : "4KiB (default)");
        printf("%-12s %6s %6s  %-39s  %-39s  %5s\n", "provider", "size", "msgs",
               "hop min/Q1/median/Q3/max", "raw fi_read min/Q1/median/Q3/max",
               "ratio");
        fflush(stdout);
    }
    for (int p = 0; p < cfg.n_providers; p++) {
        const char *prov = cfg.providers[p];
        struct raw rw = {0};
        double hop[MAX_TRIALS], raw[MAX_TRIALS];

        rc = 0;
        for (int si = 0; si < cfg.n_sizes && rc == 0; si++) {
            rc = run_size(&cfg, prov, rank, &rw, cfg.sizes[si], hop, raw);
            if (rc == 0 && rank == 0)
                json_array_append_new(
                    results, report(&cfg, jfp, prov, cfg.sizes[si], hop, raw));
        }
        if (rc != 0) {
            failed++;
            if (rank == 0) {
                printf("%-12s  failed or not available: %s\n", prov,
                       scimq_strerror(rc));
                json_array_append_new(results,
                                      json_pack("{s:s, s:s}", "provider", prov,
                                                "error", scimq_err_name(rc)));
            }
        }
        (void) agree(0);
    }
    if (rank == 0) {
        json_t *o = json_pack("{s:s, s:i, s:o}", "tool", NAME, "trials",
                              cfg.trials, "results", results);
        char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);

        if (text != NULL)
            printf("%s\n", text);
        free(text);
        json_decref(o);
    } else {
        json_decref(results);
    }
    if (jfp != NULL)
        fclose(jfp);
    MPI_Finalize();
    return failed > 0 ? 1 : 0;
}
