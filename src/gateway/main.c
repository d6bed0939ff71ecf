/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scimq-gateway: the SciMQ queue manager daemon.
 *
 *   scimq-gateway [--listen HOST:PORT] [--port-file FILE]
 *                 [--memory-limit SIZE] [--spill-dir DIR] [--disk-limit SIZE]
 *                 [--token-file FILE] [--config FILE] [--workers N] ...
 *
 * Signals: SIGTERM drains (no new connections or PUTs, waits for leased
 * messages to be settled, up to the drain timeout), SIGINT stops at once,
 * SIGHUP reopens the log file.  On exit it prints one JSON summary line.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <jansson.h>

#include <scimq/scimq.h>

#include "broker.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/net.h"
#include "common/param.h"
#include "common/port_file.h"
#include "common/topo.h"
#include "fsdir.h"
#include "http.h" /* the read-only HTTP side (--http) */
#include "recovery.h"
#include "report.h"
#include "worker.h"

static const struct option options[] = {
    {"listen", required_argument, NULL, 'l'},
    {"port-file", required_argument, NULL, 'p'},
    {"memory-limit", required_argument, NULL, 'm'},
    {"spill-dir", required_argument, NULL, 's'},
    {"journal-dir", required_argument, NULL, 'j'},
    {"durability", required_argument, NULL, 'D'},
    {"disk-limit", required_argument, NULL, 'd'},
    {"token-file", required_argument, NULL, 't'},
    {"config", required_argument, NULL, 'c'},
    {"workers", required_argument, NULL, 'w'},
    {"ack-timeout-ms", required_argument, NULL, 'a'},
    {"log-file", required_argument, NULL, 'L'},
    {"log-level", required_argument, NULL, 'v'},
    {"admin-socket", required_argument, NULL, 'A'},
    {"admin-group", required_argument, NULL, 'G'},
    {"insecure", no_argument, NULL, 'I'},
    {"tls-cert", required_argument, NULL, 'E'},
    {"tls-key", required_argument, NULL, 'K'},
    {"tls-ca", required_argument, NULL, 'Y'},
    {"init-token", required_argument, NULL, 'T'},
    {"http", required_argument, NULL, 'H'},
    {"set", required_argument, NULL, 'S'},
    {"list-params", no_argument, NULL, 'P'},
    {"version", no_argument, NULL, 'V'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: scimq-gateway [options]\n"
            "  --listen HOST:PORT     listen address (port 0: any free port)\n"
            "  --port-file FILE       write HOST:PORT there once listening\n"
            "  --memory-limit SIZE    payload memory before spilling (1GiB)\n"
            "  --spill-dir DIR        where payloads spill (default: none)\n"
            "  --journal-dir DIR      journal: guaranteed queues survive a\n"
            "                         restart or crash (default: none)\n"
            "  --durability MODE      with a journal: PUT_OK after sync\n"
            "                         (default), batch (synced within\n"
            "                         gateway_journal_batch_ms) or memory\n"
            "  --disk-limit SIZE      spill space before back-pressure "
            "(16GiB)\n"
            "  --token-file FILE      shared secret; clients must "
            "authenticate\n"
            "  --init-token FILE      create a random token file (mode 600) "
            "and exit\n"
            "  --insecure             listen beyond loopback without a "
            "token\n"
            "  --tls-cert FILE        TLS on the data port: certificate chain\n"
            "  --tls-key FILE         ... and its key (PEM; the token still\n"
            "                         authenticates inside)\n"
            "  --tls-ca FILE          clients need a certificate signed by it\n"
            "  --config FILE          INI file of settings (see "
            "--list-params)\n"
            "  --workers N            event-loop threads (0: one per core)\n"
            "  --ack-timeout-ms MS    default lease before redelivery\n"
            "  --log-file FILE        log there (SIGHUP reopens it)\n"
            "  --log-level SPEC       e.g. info or warn,gateway=debug\n"
            "  --admin-socket PATH    Unix socket for delete, bind, unbind,\n"
            "                         move (/tmp/scimq-UID/gateway-PORT.sock\n"
            "                         mode 600; off: none)\n"
            "  --admin-group GROUP    that group may administer too (660)\n"
            "  --http HOST:PORT       read-only /metrics and live page (a "
            "port\n"
            "                         alone: loopback; default: off)\n"
            "  --set NAME=VALUE       any setting of --list-params\n"
            "  --list-params          print every setting and exit\n"
            "  --version              print the version and exit\n"
            "SIZE takes B, KiB, MiB, GiB suffixes.  Settings also come from "
            "SCIMQ_<NAME>\nenvironment variables.  SIGTERM drains, SIGINT "
            "stops, SIGHUP reopens logs.\n");
}

/* Maps a flag to the setting it stands for. */
static const char *
flag_param(int c)
{
    switch (c) {
    case 'l':
        return "gateway_listen";
    case 'p':
        return "gateway_port_file";
    case 'm':
        return "gateway_memory_limit";
    case 's':
        return "gateway_spill_dir";
    case 'j':
        return "gateway_journal_dir";
    case 'D':
        return "gateway_durability";
    case 'd':
        return "gateway_disk_limit";
    case 't':
        return "gateway_token_file";
    case 'w':
        return "gateway_workers";
    case 'a':
        return "gateway_ack_timeout_ms";
    case 'A':
        return "gateway_admin_socket";
    case 'E':
        return "gateway_tls_cert";
    case 'K':
        return "gateway_tls_key";
    case 'Y':
        return "gateway_tls_ca";
    case 'G':
        return "gateway_admin_group";
    case 'H':
        return "gateway_http";
    case 'L':
        return "log_file";
    case 'v':
        return "log_level";
    default:
        return NULL;
    }
}

/* --init-token FILE: a new secret for the gateway and its clients. */
static int
init_token(const char *path)
{
    int rc = scimq__token_create(path);

    if (rc == SCIMQ_EEXIST) {
        fprintf(stderr,
                "scimq-gateway: %s exists: not overwritten (it may be a token "
                "in use; remove it first to replace it)\n",
                path);
    } else if (rc != 0) {
        fprintf(stderr, "scimq-gateway: cannot create token file %s: %s\n",
                path, scimq_strerror(rc));
    } else {
        json_t *o;
        char *text, *full = realpath(path, NULL);

        fprintf(stderr,
                "scimq-gateway: token written to %s (mode 600); start the "
                "gateway with --token-file %s and give clients the same file "
                "(SCIMQ_TOKEN_FILE)\n",
                full != NULL ? full : path, full != NULL ? full : path);
        o = json_pack("{s:s, s:s, s:i}", "tool", "scimq-gateway", "token_file",
                      full != NULL ? full : path, "exit_code", 0);
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (text != NULL)
            printf("%s\n", text);
        free(text);
        json_decref(o);
        free(full);
    }
    return rc == 0 ? 0 : rc == SCIMQ_EEXIST ? 1 : 2;
}

/* Config file first, then flags, so flags win (and env sits between). */
static int
parse_args(int argc, char **argv)
{
    char err[512];
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (c != 'c')
            continue;
        rc = scimq__param_load_file(optarg, err, sizeof(err));
        if (rc != 0) {
            fprintf(stderr, "scimq-gateway: %s\n", err);
            return 2;
        }
    }
    optind = 1;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        const char *name = flag_param(c);
        char *eq;

        if (name != NULL) {
            rc = scimq__param_set(name, optarg);
            if (rc != 0) {
                fprintf(stderr, "scimq-gateway: bad value '%s' for %s\n",
                        optarg, name);
                return 2;
            }
            continue;
        }
        switch (c) {
        case 'c':
            break;
        case 'I':
            (void) scimq__param_set("gateway_insecure", "true");
            break;
        case 'T':
            fflush(stdout);
            exit(init_token(optarg));
        case 'S':
            eq = strchr(optarg, '=');
            if (eq == NULL) {
                fprintf(stderr, "scimq-gateway: --set wants NAME=VALUE\n");
                return 2;
            }
            *eq = '\0';
            rc = scimq__param_set(optarg, eq + 1);
            if (rc != 0) {
                fprintf(stderr, "scimq-gateway: --set %s: %s\n", optarg,
                        rc == SCIMQ_ENOENT ? "no such setting" : "bad value");
                return 2;
            }
            break;
        case 'P':
            scimq__param_print(stdout);
            exit(0);
        case 'V':
            printf("scimq-gateway %s (SciMP session versions 1..%d)\n",
                   scimq_version_string(), SCIMQ_PROTO_SESSION_VERSION_MAX);
            exit(0);
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "scimq-gateway: unexpected argument '%s'\n",
                argv[optind]);
        return 2;
    }
    return 0;
}

/* Bytes of RAM in the machine (UINT64_MAX if unknown). */
static uint64_t
physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

    if (pages <= 0 || size <= 0)
        return UINT64_MAX;
    return (uint64_t) pages * (uint64_t) size;
}

/*
 * Descriptors kept free of connections: the journal's and spill files, the
 * listeners, loops, mailboxes and the log, and a margin for connections
 * being refused (each holds a descriptor until its ERROR is written).
 */
#define GW_FD_HEADROOM 64
#define GW_FD_PER_WORKER 4

/*
 * Raises the soft descriptor limit to the hard one (a daemon's default of
 * 1024 is easily met on a login node), and bounds the connections by what
 * it allows.  Running out anyway is survived: libuv keeps a reserve
 * descriptor per loop and, on EMFILE, uses it to accept and close what is
 * pending; when that reserve is spent, a worker pauses accepting until
 * descriptors are free again (worker.c), instead of spinning.
 */
static int
nofile_setup(struct gw_options *o)
{
    struct rlimit rl;
    uint64_t headroom =
        GW_FD_HEADROOM + GW_FD_PER_WORKER * (uint64_t) o->workers;
    int configured = o->max_connections;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        o->nofile = 0;
        return 0;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            (void) getrlimit(RLIMIT_NOFILE, &rl);
    }
    o->nofile = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 30)
                    ? (1u << 30)
                    : (uint64_t) rl.rlim_cur;
    if (o->nofile <= headroom + 16) {
        fprintf(stderr,
                "scimq-gateway: only %" PRIu64 " file descriptors (ulimit "
                "-n); at least %" PRIu64 " needed\n",
                o->nofile, headroom + 17);
        return 2;
    }
    if ((uint64_t) o->max_connections > o->nofile - headroom)
        o->max_connections = (int) (o->nofile - headroom);
    if (o->max_connections < configured)
        SCIMQ_LOG_WARN(GATEWAY,
                       "file descriptors: limit %" PRIu64
                       "; at most %d connections (gateway_max_connections "
                       "%d); raise the hard limit (ulimit -Hn, LimitNOFILE) "
                       "for more",
                       o->nofile, o->max_connections, configured);
    return 0;
}

/*
 * Whether every address HOST stands for is a loopback one.  An empty host
 * (any address) is not.  A name that does not resolve is left to the
 * listen, which reports it.
 */
static bool
listen_is_loopback(const char *host)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *ai = NULL, *p;
    bool loopback = true;

    if (host[0] == '\0')
        return false;
    if (getaddrinfo(host, "0", &hints, &ai) != 0)
        return true;
    for (p = ai; p != NULL; p = p->ai_next) {
        if (p->ai_family == AF_INET) {
            const struct sockaddr_in *in = (const void *) p->ai_addr;

            loopback &= (ntohl(in->sin_addr.s_addr) >> 24) == 127;
        } else if (p->ai_family == AF_INET6) {
            const struct sockaddr_in6 *in6 = (const void *) p->ai_addr;

            loopback &= IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
                        (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) &&
                         in6->sin6_addr.s6_addr[12] == 127);
        } else {
            loopback = false;
        }
    }
    freeaddrinfo(ai);
    return loopback;
}

static int
options_load(struct gw_options *o)
{
    const char *token_file = scimq__param_str(SCIMQ_PARAM_GATEWAY_TOKEN_FILE);
    int64_t workers = scimq__param_int(SCIMQ_PARAM_GATEWAY_WORKERS);
    int rc;

    rc = scimq__hostport_parse(scimq__param_str(SCIMQ_PARAM_GATEWAY_LISTEN),
                               o->listen_host, sizeof(o->listen_host),
                               &o->listen_port);
    if (rc != 0) {
        fprintf(stderr,
                "scimq-gateway: bad listen address '%s' "
                "(HOST:PORT)\n",
                scimq__param_str(SCIMQ_PARAM_GATEWAY_LISTEN));
        return 2;
    }
    o->port_file = scimq__param_str(SCIMQ_PARAM_GATEWAY_PORT_FILE);
    o->workers =
        workers > 0 && workers <= 256 ? (int) workers : scimq__topo_ncores();
    o->memory_limit = scimq__param_size(SCIMQ_PARAM_GATEWAY_MEMORY_LIMIT);
    o->chunk_size = scimq__param_size(SCIMQ_PARAM_GATEWAY_CHUNK_SIZE);
    o->prefault = scimq__param_bool(SCIMQ_PARAM_GATEWAY_PREFAULT);
    o->spill_dir = scimq__param_str(SCIMQ_PARAM_GATEWAY_SPILL_DIR);
    o->journal_dir = scimq__param_str(SCIMQ_PARAM_GATEWAY_JOURNAL_DIR);
    o->journal_batch_ms =
        (uint32_t) scimq__param_int(SCIMQ_PARAM_GATEWAY_JOURNAL_BATCH_MS);
    o->journal_segment = scimq__param_size(SCIMQ_PARAM_GATEWAY_JOURNAL_SEGMENT);
    {
        const char *d = scimq__param_str(SCIMQ_PARAM_GATEWAY_DURABILITY);

        if (strcmp(d, "sync") == 0) {
            o->durability = 2;
        } else if (strcmp(d, "batch") == 0) {
            o->durability = 1;
        } else if (strcmp(d, "memory") == 0) {
            o->durability = 0;
        } else {
            fprintf(stderr,
                    "scimq-gateway: durability '%s': sync, batch or "
                    "memory\n",
                    d);
            return 2;
        }
    }
    if (o->journal_segment < (1u << 20)) {
        fprintf(stderr, "scimq-gateway: journal segments of at least 1 MiB\n");
        return 2;
    }
    o->disk_limit = scimq__param_size(SCIMQ_PARAM_GATEWAY_DISK_LIMIT);
    o->ack_timeout_ms =
        (uint32_t) scimq__param_int(SCIMQ_PARAM_GATEWAY_ACK_TIMEOUT_MS);
    o->hello_timeout_ms =
        (uint32_t) scimq__param_int(SCIMQ_PARAM_GATEWAY_HELLO_TIMEOUT_MS);
    o->idle_timeout_ms =
        (uint32_t) scimq__param_int(SCIMQ_PARAM_GATEWAY_IDLE_TIMEOUT_MS);
    o->drain_timeout_ms =
        (uint32_t) scimq__param_int(SCIMQ_PARAM_GATEWAY_DRAIN_TIMEOUT_MS);
    o->admin_socket = scimq__param_str(SCIMQ_PARAM_GATEWAY_ADMIN_SOCKET);
    o->admin_group = scimq__param_str(SCIMQ_PARAM_GATEWAY_ADMIN_GROUP);
    o->max_connections =
        (int) scimq__param_int(SCIMQ_PARAM_GATEWAY_MAX_CONNECTIONS);
    o->peer_limits.per_peer =
        (int) scimq__param_int(SCIMQ_PARAM_GATEWAY_MAX_CONN_PER_PEER);
    o->peer_limits.unauth =
        (int) scimq__param_int(SCIMQ_PARAM_GATEWAY_MAX_UNAUTH);
    o->peer_limits.unauth_per_peer =
        (int) scimq__param_int(SCIMQ_PARAM_GATEWAY_MAX_UNAUTH_PER_PEER);
    if (o->peer_limits.per_peer < 1 || o->peer_limits.unauth < 1 ||
        o->peer_limits.unauth_per_peer < 1) {
        fprintf(stderr, "scimq-gateway: connection limits must be "
                        "positive\n");
        return 2;
    }
    o->min_rate = scimq__param_size(SCIMQ_PARAM_GATEWAY_MIN_RATE);
    o->min_rate_grace_ms =
        (uint32_t) scimq__param_int(SCIMQ_PARAM_GATEWAY_MIN_RATE_GRACE_MS);
    o->max_output = scimq__param_size(SCIMQ_PARAM_GATEWAY_MAX_OUTPUT);
    o->output_timeout_ms =
        (uint32_t) scimq__param_int(SCIMQ_PARAM_GATEWAY_OUTPUT_TIMEOUT_MS);
    scimq__param_proto_limits(&o->limits);
    if (o->max_output < (64u << 10)) {
        fprintf(stderr, "scimq-gateway: gateway_max_output must be at "
                        "least 64 KiB\n");
        return 2;
    }
    if (o->ack_timeout_ms == 0 || o->memory_limit == 0) {
        fprintf(stderr, "scimq-gateway: ack timeout and memory limit must "
                        "be positive\n");
        return 2;
    }
    if (o->prefault && o->memory_limit > physical_memory() / 10 * 9) {
        /* Pre-faulting more than the machine has would wake the OOM
         * killer: say so now, while nothing is lost. */
        fprintf(stderr,
                "scimq-gateway: memory limit %" PRIu64
                " B is more than 90%% of this machine's memory (%" PRIu64
                " B); lower it, or set gateway_prefault=false\n",
                o->memory_limit, physical_memory());
        return 2;
    }
    if (o->chunk_size < 4096 || (o->chunk_size & (o->chunk_size - 1)) != 0 ||
        o->chunk_size > o->memory_limit) {
        fprintf(stderr, "scimq-gateway: chunk size must be a power of two "
                        "of at least 4 KiB, within the memory limit\n");
        return 2;
    }
    if (token_file[0] != '\0') {
        rc = scimq__token_load(token_file, &o->token, &o->token_len);
        if (rc == SCIMQ_EACCES) {
            fprintf(stderr,
                    "scimq-gateway: token file %s is accessible by group or "
                    "others: refused (chmod 600 %s)\n",
                    token_file, token_file);
            return 2;
        }
        if (rc != 0) {
            fprintf(stderr, "scimq-gateway: cannot use token file %s: %s\n",
                    token_file, scimq_strerror(rc));
            return 2;
        }
    }
    {
        const char *cert = scimq__param_str(SCIMQ_PARAM_GATEWAY_TLS_CERT),
                   *key = scimq__param_str(SCIMQ_PARAM_GATEWAY_TLS_KEY),
                   *ca = scimq__param_str(SCIMQ_PARAM_GATEWAY_TLS_CA);
        char err[512] = "";

        if ((cert[0] == '\0') != (key[0] == '\0') ||
            (ca[0] != '\0' && cert[0] == '\0')) {
            fprintf(stderr, "scimq-gateway: TLS needs --tls-cert and "
                            "--tls-key (and --tls-ca only with them)\n");
            return 2;
        }
        if (cert[0] != '\0' && scimq__tls_ctx_server(cert, key, ca, &o->tls,
                                                     err, sizeof(err)) != 0) {
            fprintf(stderr, "scimq-gateway: TLS: %s\n", err);
            return 2;
        }
    }
    if (o->token == NULL && !listen_is_loopback(o->listen_host) &&
        !scimq__param_bool(SCIMQ_PARAM_GATEWAY_INSECURE)) {
        /* Reachable from other hosts and nothing to prove: anyone who can
         * reach the port could read and write every queue. */
        fprintf(stderr,
                "scimq-gateway: refusing to listen on %s without a token: "
                "anyone who reaches it could read and write every queue.  "
                "Create one (scimq-gateway --init-token FILE) and pass "
                "--token-file FILE, listen on loopback (127.0.0.1), or "
                "accept the risk with --insecure\n",
                o->listen_host[0] ? o->listen_host : "every address");
        return 2;
    }
    return 0;
}

/* For the start line. */
static const char *
tls_mode(const struct gw_options *o)
{
    if (o->tls == NULL)
        return "off";
    return scimq__param_str(SCIMQ_PARAM_GATEWAY_TLS_CA)[0] != '\0'
               ? "on, client certificates"
               : "on";
}

/* ------------------------------------------------------------------------ */
/* Signals and draining (main thread loop)                                   */
/* ------------------------------------------------------------------------ */

struct main_ctx {
    struct gateway *gw;
    uv_loop_t loop;
    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t drain;
    uint64_t drain_deadline;
    int exit_code;
};

static void
main_stop(struct main_ctx *m)
{
    uv_signal_stop(&m->sigterm);
    uv_signal_stop(&m->sigint);
    uv_signal_stop(&m->sighup);
    uv_timer_stop(&m->drain);
    uv_stop(&m->loop);
}

static void
on_drain_timer(uv_timer_t *t)
{
    struct main_ctx *m = t->data;
    uint64_t leased = gw_hub_leased(&m->gw->hub);

    if (leased == 0) {
        SCIMQ_LOG_WARN(GATEWAY, "drained: every leased message settled");
        main_stop(m);
    } else if (gw_now_ms() >= m->drain_deadline) {
        SCIMQ_LOG_WARN(GATEWAY,
                       "drain timeout: %" PRIu64 " leased messages unsettled",
                       leased);
        m->exit_code = 1;
        main_stop(m);
    }
}

static void
on_signal(uv_signal_t *h, int signum)
{
    struct main_ctx *m = h->data;
    struct gateway *gw = m->gw;

    if (signum == SIGHUP) {
        const char *file = scimq__param_str(SCIMQ_PARAM_LOG_FILE);

        if (file[0] != '\0' && scimq__log_open(file) != 0)
            fprintf(stderr, "scimq-gateway: cannot reopen %s\n", file);
        SCIMQ_LOG_WARN(GATEWAY, "SIGHUP: log reopened");
        return;
    }
    if (signum == SIGINT || atomic_load(&gw->draining)) {
        SCIMQ_LOG_WARN(GATEWAY, "%s: stopping now",
                       signum == SIGINT ? "SIGINT" : "second SIGTERM");
        main_stop(m);
        return;
    }
    SCIMQ_LOG_WARN(GATEWAY, "SIGTERM: draining (up to %u ms)",
                   gw->opt.drain_timeout_ms);
    atomic_store(&gw->draining, true);
    gw_hub_drain(&gw->hub);
    gw_workers_stop_listening(gw);
    m->drain_deadline = gw_now_ms() + gw->opt.drain_timeout_ms;
    uv_timer_start(&m->drain, on_drain_timer, 0, 100);
}

static void
print_summary(struct gateway *gw, int exit_code)
{
    json_t *st = gw_report_stats(gw, NULL), *out;
    char *text;

    out =
        json_pack("{s:s, s:O, s:O, s:O, s:O, s:O, s:i}", "tool",
                  "scimq-gateway", "uptime_s", json_object_get(st, "uptime_s"),
                  "bytes_in", json_object_get(st, "bytes_in"), "bytes_out",
                  json_object_get(st, "bytes_out"), "totals",
                  json_object_get(st, "totals"), "memory",
                  json_object_get(st, "memory"), "exit_code", exit_code);
    text = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text != NULL)
        printf("%s\n", text);
    fflush(stdout);
    free(text);
    json_decref(out);
    json_decref(st);
}

/* Spilling to a spill directory: one is set, and no journal (payloads
 * then spill into the journal). */
static bool
spill_mode(const struct gw_options *o)
{
    return (o->journal_dir == NULL || o->journal_dir[0] == '\0') &&
           o->spill_dir != NULL && o->spill_dir[0] != '\0';
}

/*
 * The spill directory: the journal's segments, never recovered (emptied at
 * start and at exit).  A directory that holds a journal is refused.
 */
static int
spill_start(struct gateway *gw)
{
    const char *dir = gw->opt.spill_dir;
    /* Spilled payloads are read back by place, never recovered: no salt
     * is needed. */
    const struct gw_journal_resume at = {.first_seg = 1, .reuse_from = 1};
    char path[PATH_MAX];
    int rc = gw_dir_ready(dir, "spill");

    if (rc != 0)
        return rc;
    snprintf(path, sizeof(path), "%s/" GW_JOURNAL_TOPOLOGY_FILE, dir);
    if (access(path, F_OK) == 0) {
        fprintf(stderr,
                "scimq-gateway: spill directory %s holds a journal (%s); "
                "use it with --journal-dir, or spill elsewhere\n",
                dir, GW_JOURNAL_TOPOLOGY_FILE);
        return SCIMQ_EEXIST;
    }
    rc = gw_journal_clear(dir);
    if (rc == 0)
        rc = gw_journal_start(dir, &at, gw->opt.journal_segment,
                              gw->opt.journal_batch_ms, gw_hub_io_done,
                              &gw->hub, &gw->hub.journal);
    if (rc != 0)
        fprintf(stderr, "scimq-gateway: spill directory %s: %s\n", dir,
                scimq_strerror(rc));
    return rc;
}

/* The broker, the hub around it and the journal thread (on the journal or
 * the spill directory). */
static int
core_start(struct gateway *gw)
{
    bool journal =
        gw->opt.journal_dir != NULL && gw->opt.journal_dir[0] != '\0';
    struct gw_broker_settings set = {
        .ack_timeout_ms = gw->opt.ack_timeout_ms,
        .memory_limit = gw->opt.memory_limit,
        .chunk_size = gw->opt.chunk_size,
        /* With a journal, payloads spill into it. */
        .spill = spill_mode(&gw->opt),
        .disk_limit = gw->opt.disk_limit,
        .journal = journal,
        .durability = gw->opt.durability,
        .compact_percent =
            (uint32_t) scimq__param_int(SCIMQ_PARAM_GATEWAY_JOURNAL_COMPACT),
        .max_receiving = scimq__param_size(SCIMQ_PARAM_GATEWAY_MAX_RECEIVING),
    };
    struct gw_actions drops = {NULL, NULL};
    struct gw_recovery_report rep;
    struct gw_broker *b;
    int rc = gw_broker_new(&set, &b);

    if (rc != 0) {
        fprintf(stderr,
                "scimq-gateway: cannot map %" PRIu64
                " B of payload memory: %s\n",
                gw->opt.memory_limit, scimq_strerror(rc));
        return rc;
    }
    gw_hub_init(&gw->hub, b);
    if (journal && gw->opt.spill_dir != NULL && gw->opt.spill_dir[0] != '\0')
        SCIMQ_LOG_INFO(GATEWAY,
                       "spill directory %s not used: payloads spill into the "
                       "journal %s",
                       gw->opt.spill_dir, gw->opt.journal_dir);
    if (set.spill) {
        rc = spill_start(gw);
        if (rc != 0) {
            gw_broker_free(b);
            gw_hub_destroy(&gw->hub);
            return rc;
        }
    }
    if (set.journal) {
        rc = gw_recover(gw->opt.journal_dir, b, &drops, &rep);
        if (rc == 0)
            rc = gw_journal_start(gw->opt.journal_dir, &rep.resume,
                                  gw->opt.journal_segment,
                                  gw->opt.journal_batch_ms, gw_hub_io_done,
                                  &gw->hub, &gw->hub.journal);
        if (rc != 0) {
            /* A file-system error in the errno's own words (the library's
             * text for SCIMQ_ENOENT speaks of queues). */
            fprintf(stderr, "scimq-gateway: journal %s: %s\n",
                    gw->opt.journal_dir,
                    rc < 0 && rc > -SCIMQ_ERRNO_OFFSET ? strerror(-rc)
                                                       : scimq_strerror(rc));
            gw_broker_free(b);
            gw_hub_destroy(&gw->hub);
            return rc;
        }
        SCIMQ_LOG_WARN(GATEWAY,
                       "journal %s: recovered %" PRIu64 " messages (%" PRIu64
                       " B) from %" PRIu64 " segments; %" PRIu64
                       " damaged bytes cut",
                       gw->opt.journal_dir, rep.messages, rep.bytes,
                       rep.segments, rep.truncated_bytes);
        /* Segments with nothing left in them go now. */
        gw_hub_route(&gw->hub, -1, &drops);
    }
    if (gw->opt.prefault && gw_broker_prefault(b) != 0)
        SCIMQ_LOG_WARN(GATEWAY, "payload memory is not pre-faulted");
    return 0;
}

static void
core_stop(struct gateway *gw)
{
    /* What is queued for the journal is written and synced first. */
    gw_journal_stop(gw->hub.journal);
    gw->hub.journal = NULL;
    /* Spilled payloads are not kept across runs. */
    if (spill_mode(&gw->opt) && gw_journal_clear(gw->opt.spill_dir) != 0)
        SCIMQ_LOG_WARN(GATEWAY, "cannot empty the spill directory %s",
                       gw->opt.spill_dir);
}

static void
core_free(struct gateway *gw)
{
    gw_broker_free(gw->hub.broker);
    gw->hub.broker = NULL;
    gw_hub_destroy(&gw->hub);
}

/* The MPI agents' REPORTs (jobs.h): how many sessions, for how long. */
static int
jobs_setup(struct gw_jobs *j)
{
    int64_t max = scimq__param_int(SCIMQ_PARAM_GATEWAY_JOBS_MAX);
    int64_t keep = scimq__param_int(SCIMQ_PARAM_GATEWAY_JOBS_KEEP_MS);

    if (max < 0 || max > 4096 || keep < 0 || keep > 86400000) {
        fprintf(stderr, "scimq-gateway: gateway_jobs_max must be 0..4096 and "
                        "gateway_jobs_keep_ms 0..86400000\n");
        return 2;
    }
    if (gw_jobs_init(j, (uint32_t) max, (uint64_t) keep) != 0) {
        fprintf(stderr, "scimq-gateway: out of memory\n");
        return 1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    struct gateway gw;
    struct main_ctx m = {.gw = &gw};
    char err[512] = "";
    struct gw_http http = {.daemon = NULL}; /* --http */
    uint16_t port = 0;
    int rc;

    memset(&gw, 0, sizeof(gw));
    signal(SIGPIPE, SIG_IGN);
    rc = parse_args(argc, argv);
    if (rc == 0)
        rc = options_load(&gw.opt);
    if (rc != 0)
        return rc;
    scimq__log_configure();
    rc = nofile_setup(&gw.opt);
    if (rc != 0)
        return rc;
    gw.n_workers = gw.opt.workers;
    gw.start_ms = gw_now_ms();
    gw_connreg_init(&gw.conns, gw.start_ms);
    rc = jobs_setup(&gw.jobs);
    if (rc != 0)
        goto out_conns;
    if (core_start(&gw) != 0) {
        rc = 1;
        goto out_jobs;
    }

    /* Signals are handled on the main thread's own loop. */
    uv_loop_init(&m.loop);
    uv_signal_init(&m.loop, &m.sigterm);
    uv_signal_init(&m.loop, &m.sigint);
    uv_signal_init(&m.loop, &m.sighup);
    uv_timer_init(&m.loop, &m.drain);
    m.sigterm.data = m.sigint.data = m.sighup.data = m.drain.data = &m;
    uv_signal_start(&m.sigterm, on_signal, SIGTERM);
    uv_signal_start(&m.sigint, on_signal, SIGINT);
    uv_signal_start(&m.sighup, on_signal, SIGHUP);

    rc = gw_workers_start(&gw, &port, err, sizeof(err));
    if (rc != 0) {
        if (err[0] != '\0')
            fprintf(stderr, "scimq-gateway: admin socket: %s\n", err);
        else
            fprintf(stderr, "scimq-gateway: cannot listen on %s:%u: %s\n",
                    gw.opt.listen_host, gw.opt.listen_port, scimq_strerror(rc));
        core_stop(&gw);
        core_free(&gw);
        m.exit_code = 1;
        goto out_loop;
    }
    if (gw.opt.port_file[0] != '\0' &&
        (rc = scimq__port_file_write(gw.opt.port_file, gw.opt.listen_host,
                                     port)) != 0) {
        fprintf(stderr, "scimq-gateway: cannot write port file %s: %s\n",
                gw.opt.port_file, scimq_strerror(rc));
        m.exit_code = 1;
        main_stop(&m);
    }
    fprintf(stderr,
            "scimq-gateway %s listening on %s:%u (%d workers, memory limit "
            "%" PRIu64 " B, spill %s, journal %s, auth %s, tls %s, %" PRIu64
            " file descriptors, at most %d connections, admin socket %s)\n",
            scimq_version_string(),
            gw.opt.listen_host[0] ? gw.opt.listen_host : "*", port,
            gw.n_workers, gw.opt.memory_limit,
            spill_mode(&gw.opt) ? gw.opt.spill_dir : "off",
            gw.hub.journal && !spill_mode(&gw.opt) ? gw.opt.journal_dir : "off",
            gw.opt.token ? "token" : "none", tls_mode(&gw.opt), gw.opt.nofile,
            gw.opt.max_connections, gw.admin_path[0] ? gw.admin_path : "off");
    if (gw.opt.token == NULL && !listen_is_loopback(gw.opt.listen_host))
        SCIMQ_LOG_WARN(GATEWAY,
                       "listening on %s without a token (--insecure): anyone "
                       "who reaches port %u may read and write every queue",
                       gw.opt.listen_host[0] ? gw.opt.listen_host : "*", port);

    /* The read-only HTTP side (http.h): once the workers listen (it looks
     * their sockets up by port); stopped before what it reads goes. */
    if (m.exit_code == 0 && gw_http_start_configured(&http, &gw, port) != 0) {
        m.exit_code = 1;
        main_stop(&m);
    }
    if (m.exit_code == 0)
        uv_run(&m.loop, UV_RUN_DEFAULT);
    gw_http_stop(&http);

    /* Workers first (BYE, close), then the spill thread, whose last
     * completions find closed mailboxes; then nothing can post. */
    atomic_store(&gw.stopping, true);
    gw_workers_stop(&gw);
    core_stop(&gw);
    gw_workers_free(&gw);
    print_summary(&gw, m.exit_code);
    core_free(&gw);
    if (gw.opt.port_file[0] != '\0')
        unlink(gw.opt.port_file);
    if (gw.admin_path[0] != '\0')
        unlink(gw.admin_path);
out_loop:
    uv_close((uv_handle_t *) &m.sigterm, NULL);
    uv_close((uv_handle_t *) &m.sigint, NULL);
    uv_close((uv_handle_t *) &m.sighup, NULL);
    uv_close((uv_handle_t *) &m.drain, NULL);
    uv_run(&m.loop, UV_RUN_DEFAULT);
    uv_loop_close(&m.loop);
    rc = m.exit_code;
    /* An early failure ends here too, with what it had set up freed. */
out_jobs:
    gw_jobs_destroy(&gw.jobs);
out_conns:
    gw_connreg_destroy(&gw.conns);
    scimq__token_free(gw.opt.token, gw.opt.token_len);
    scimq__tls_ctx_free(gw.opt.tls);
    return rc;
}
