/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scimqctl: administer a gateway.
 *
 *   scimqctl [--url U] queue create Q [--guaranteed | --best-effort]
 *            [--durability memory|batch|sync]
 *            [--ack-timeout SECONDS] [--max-attempts N] [--max-bytes SIZE]
 *            [--dead-letter DLQ]
 *   scimqctl queue delete Q | queue bind SRC DST | queue unbind SRC DST
 *   scimqctl queue close Q | queue list [PREFIX]
 *   scimqctl queue move SRC DST [--max N]
 *   scimqctl stats [--queue Q]
 *   scimqctl ping
 *
 * The token comes from --token-file or $SCIMQ_TOKEN_FILE, never from the
 * command line.  Administration (queue delete, bind, unbind, move) goes
 * through the gateway's admin socket, whose file permissions decide who
 * may use it: --admin-socket, $SCIMQ_ADMIN_SOCKET, else the default path
 * for the URL's port (where the gateway creates it for its own user).  Every
 * command ends with one JSON line (stats and list print the gateway's JSON
 * document).
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/net.h"
#include "common/param.h"
#include "toolutil.h"

#define CTL_NAME "scimqctl"

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: scimqctl [options] COMMAND\n"
            "  queue create Q [--guaranteed|--best-effort] [--ack-timeout S]\n"
            "                 [--durability memory|batch|sync]\n"
            "                 [--max-attempts N] [--max-bytes SIZE] "
            "[--dead-letter DLQ]\n"
            "  queue delete Q\n"
            "  queue bind SRC DST        PUTs to SRC also land in DST\n"
            "  queue unbind SRC DST\n"
            "  queue close Q             end of stream\n"
            "  queue list [PREFIX]\n"
            "  queue move SRC DST [--max N]\n"
            "  stats [--queue Q]\n"
            "  ping\n"
            "delete, bind, unbind and move go through the gateway's admin "
            "socket:\n"
            "  --admin-socket PATH      ($SCIMQ_ADMIN_SOCKET, else\n"
            "                           /tmp/scimq-UID/gateway-PORT.sock "
            "of the URL's port)\n" TOOL_COMMON_USAGE);
}

/* Checks the command words before anything is sent. */
static bool
args_ok(const char *const *args, int nargs)
{
    static const struct {
        const char *word;
        int min, max;
    } queue_cmds[] = {{"create", 3, 3}, {"delete", 3, 3}, {"bind", 4, 4},
                      {"unbind", 4, 4}, {"close", 3, 3},  {"list", 2, 3},
                      {"move", 4, 4}};

    if (strcmp(args[0], "ping") == 0 || strcmp(args[0], "stats") == 0)
        return nargs == 1;
    if (strcmp(args[0], "queue") != 0 || nargs < 2)
        return false;
    for (size_t i = 0; i < sizeof(queue_cmds) / sizeof(queue_cmds[0]); i++)
        if (strcmp(args[1], queue_cmds[i].word) == 0)
            return nargs >= queue_cmds[i].min && nargs <= queue_cmds[i].max;
    return false;
}

/* Administration: only through the admin socket. */
static bool
is_admin(const char *const *args)
{
    return strcmp(args[0], "queue") == 0 &&
           (strcmp(args[1], "delete") == 0 || strcmp(args[1], "bind") == 0 ||
            strcmp(args[1], "unbind") == 0 || strcmp(args[1], "move") == 0);
}

/*
 * The URL of the admin socket ("unix:PATH") in buf: the one given, else
 * the default the gateway of url's port made for this user.  0, or 1 with
 * a message.
 */
static int
admin_url(const char *given, const char *url, char *buf, size_t len)
{
    char host[SCIMQ_HOST_MAX], path[SCIMQ_UNIX_PATH_MAX];
    struct stat st;
    uint16_t port = 0;

    if (given == NULL || given[0] == '\0')
        given = scimq__param_str(SCIMQ_PARAM_ADMIN_SOCKET);
    if (given[0] != '\0') {
        snprintf(path, sizeof(path), "%s", given);
    } else if (scimq__hostport_parse(url, host, sizeof(host), &port) != 0 ||
               scimq__admin_socket_default(port, path, sizeof(path)) != 0) {
        fprintf(stderr, CTL_NAME ": bad URL '%s'\n", url);
        return 1;
    }
    if (stat(path, &st) != 0 && given[0] == '\0') {
        fprintf(stderr,
                CTL_NAME ": no admin socket at %s: administration is only "
                         "for the gateway's user on its host (or "
                         "--admin-socket PATH)\n",
                path);
        return 1;
    }
    snprintf(buf, len, "unix:%s", path);
    return 0;
}

/* Prints a gateway JSON document as one line. */
static int
print_doc(char *json)
{
    json_error_t err;
    json_t *doc = json_loads(json, 0, &err);

    free(json);
    if (doc == NULL) {
        fprintf(stderr, CTL_NAME ": the gateway sent invalid JSON\n");
        return 1;
    }
    tool_json_print(doc);
    return 0;
}

static int
result(const char *cmd, const char *queue, int rc, json_t *extra)
{
    json_t *o = json_pack("{s:s, s:s, s:s?, s:b}", "tool", CTL_NAME, "command",
                          cmd, "queue", queue, "ok", rc == 0);

    if (extra != NULL)
        json_object_update(o, extra);
    json_decref(extra);
    if (rc != 0) {
        json_object_set_new(o, "error", json_string(scimq_err_name(rc)));
        fprintf(stderr, CTL_NAME ": %s %s: %s\n", cmd, queue ? queue : "",
                scimq_strerror(rc));
    }
    tool_json_print(o);
    return rc == 0 ? 0 : 1;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"guaranteed", no_argument, NULL, 'g'},
        {"best-effort", no_argument, NULL, 'b'},
        {"durability", required_argument, NULL, 'D'},
        {"ack-timeout", required_argument, NULL, 'a'},
        {"max-attempts", required_argument, NULL, 'A'},
        {"max-bytes", required_argument, NULL, 'B'},
        {"dead-letter", required_argument, NULL, 'd'},
        {"max", required_argument, NULL, 'm'},
        {"queue", required_argument, NULL, 'q'},
        {"admin-socket", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        TOOL_COMMON_OPTIONS,
        {NULL, 0, NULL, 0}};
    scimq_queue_options_t qo = {0};
    struct tool_conn tc;
    scimq_client_t *c = NULL;
    const char *args[4] = {NULL, NULL, NULL, NULL}, *stats_queue = NULL;
    const char *admin_socket = NULL;
    char admin[SCIMQ_UNIX_PATH_MAX + 8];
    uint64_t max = 0, v = 0;
    int ch, nargs = 0, rc;

    tool_conn_init(&tc, CTL_NAME);
    /* Options may come anywhere: '-' in optstring keeps the order. */
    while ((ch = getopt_long(argc, argv, "-h", opts, NULL)) != -1) {
        if (tool_conn_option(&tc, ch, optarg))
            continue;
        switch (ch) {
        case 1:
            if (nargs == 4) {
                usage(stderr);
                return 2;
            }
            args[nargs++] = optarg;
            break;
        case 'g':
            qo.kind = SCIMQ_QUEUE_GUARANTEED;
            break;
        case 'b':
            qo.kind = SCIMQ_QUEUE_BEST_EFFORT;
            break;
        case 'D':
            if (strcmp(optarg, "memory") == 0)
                qo.durability = SCIMQ_DURABILITY_MEMORY;
            else if (strcmp(optarg, "batch") == 0)
                qo.durability = SCIMQ_DURABILITY_BATCH;
            else if (strcmp(optarg, "sync") == 0)
                qo.durability = SCIMQ_DURABILITY_SYNC;
            else {
                fprintf(stderr,
                        CTL_NAME ": --durability memory, batch or sync\n");
                return 2;
            }
            break;
        case 'a':
            v = tool_parse_size(CTL_NAME, "--ack-timeout", optarg);
            if (v == 0 || v > UINT32_MAX / 1000) {
                fprintf(stderr, CTL_NAME ": --ack-timeout in seconds, > 0\n");
                return 2;
            }
            qo.ack_timeout_ms = (uint32_t) (v * 1000);
            break;
        case 'A':
            v = tool_parse_size(CTL_NAME, "--max-attempts", optarg);
            qo.max_attempts = v > UINT32_MAX ? UINT32_MAX : (uint32_t) v;
            break;
        case 'B':
            qo.max_bytes = tool_parse_size(CTL_NAME, "--max-bytes", optarg);
            break;
        case 'd':
            qo.dead_letter = optarg;
            break;
        case 'm':
            max = tool_parse_size(CTL_NAME, "--max", optarg);
            break;
        case 'q':
            stats_queue = optarg;
            break;
        case 'S':
            admin_socket = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (nargs == 0) {
        usage(stderr);
        return 2;
    }
    if (!args_ok(args, nargs)) {
        usage(stderr);
        return 2;
    }
    if (is_admin(args)) {
        if (admin_url(admin_socket, tc.url, admin, sizeof(admin)) != 0)
            return result("admin socket", NULL, SCIMQ_ENOENT, NULL);
        tc.url = admin;
        tc.streams = 1;
    }
    rc = tool_conn_open(&tc, &c, NULL);
    if (rc != 0)
        return result("connect", NULL, rc, NULL);

    if (strcmp(args[0], "ping") == 0) {
        rc = scimq_client_ping(c, &v);
        rc = result("ping", NULL, rc,
                    json_pack("{s:f}", "rtt_ms", (double) v / 1e6));
    } else if (strcmp(args[0], "stats") == 0) {
        char *json = NULL;

        rc = scimq_client_stats(c, stats_queue, &json);
        rc = rc == 0 ? print_doc(json) : result("stats", stats_queue, rc, NULL);
    } else if (strcmp(args[1], "create") == 0) {
        rc = scimq_client_queue_declare(c, args[2], &qo);
        rc = result("queue create", args[2], rc, NULL);
    } else if (strcmp(args[1], "delete") == 0) {
        rc = scimq_client_queue_delete(c, args[2], &v);
        rc = result("queue delete", args[2], rc,
                    json_pack("{s:I}", "discarded", (json_int_t) v));
    } else if (strcmp(args[1], "bind") == 0 || strcmp(args[1], "unbind") == 0) {
        bool bind = strcmp(args[1], "bind") == 0;

        rc = bind ? scimq_client_queue_bind(c, args[2], args[3])
                  : scimq_client_queue_unbind(c, args[2], args[3]);
        rc = result(bind ? "queue bind" : "queue unbind", args[2], rc,
                    json_pack("{s:s}", "target", args[3]));
    } else if (strcmp(args[1], "close") == 0) {
        rc = result("queue close", args[2],
                    scimq_client_queue_close(c, args[2]), NULL);
    } else if (strcmp(args[1], "move") == 0) {
        rc = scimq_client_queue_move(c, args[2], args[3], max, &v);
        rc = result("queue move", args[2], rc,
                    json_pack("{s:s, s:I}", "target", args[3], "moved",
                              (json_int_t) v));
    } else { /* list: the last command args_ok() accepts */
        char *json = NULL;

        rc = scimq_client_queue_list(c, nargs == 3 ? args[2] : "", &json);
        rc = rc == 0 ? print_doc(json) : result("queue list", NULL, rc, NULL);
    }
    (void) scimq_client_close(c);
    return rc;
}
