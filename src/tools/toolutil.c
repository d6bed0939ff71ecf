/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/param.h"
#include "toolutil.h"

void
tool_conn_init(struct tool_conn *tc, const char *name)
{
    const char *url = getenv("SCIMQ_URL");

    tc->name = name;
    tc->url = url != NULL && url[0] != '\0' ? url : "scimq://127.0.0.1:7470";
    tc->streams = 1;
    tc->token_file = NULL;
}

uint64_t
tool_parse_size(const char *tool, const char *flag, const char *arg)
{
    uint64_t v;

    if (scimq__parse_size(arg, &v) != 0) {
        fprintf(stderr, "%s: bad %s '%s' (a number, sizes take KiB/MiB/GiB)\n",
                tool, flag, arg);
        exit(2);
    }
    return v;
}

int
tool_conn_option(struct tool_conn *tc, int c, const char *arg)
{
    uint64_t v;

    switch (c) {
    case TOOL_OPT_URL:
        tc->url = arg;
        return 1;
    case TOOL_OPT_STREAMS:
        v = tool_parse_size(tc->name, "--streams", arg);
        if (v < 1 || v > 64) {
            fprintf(stderr, "%s: --streams must be 1..64\n", tc->name);
            exit(2);
        }
        tc->streams = (uint32_t) v;
        return 1;
    case TOOL_OPT_TOKEN_FILE:
        tc->token_file = arg;
        return 1;
    case TOOL_OPT_LOG_LEVEL:
        if (scimq__param_set("log_level", arg) != 0) {
            fprintf(stderr, "%s: bad --log-level '%s'\n", tc->name, arg);
            exit(2);
        }
        return 1;
    case TOOL_OPT_LIST_PARAMS:
        scimq__param_print(stdout);
        exit(0);
    case TOOL_OPT_VERSION:
        printf("%s %s (SciMP session versions %d..%d)\n", tc->name,
               scimq_version_string(), SCIMQ_PROTO_SESSION_VERSION_MIN,
               SCIMQ_PROTO_SESSION_VERSION_MAX);
        exit(0);
    default:
        return 0;
    }
}

int
tool_conn_open(const struct tool_conn *tc, scimq_client_t **c_p,
               const scimq_client_options_t *base)
{
    scimq_client_options_t opts;
    int rc;

    if (base != NULL)
        opts = *base;
    else
        scimq_client_options_default(&opts);
    opts.streams = tc->streams;
    opts.client_name = tc->name;
    if (tc->token_file != NULL)
        opts.token_file = tc->token_file;
    rc = scimq_client_open(tc->url, &opts, c_p);
    if (rc != 0)
        fprintf(stderr, "%s: cannot connect to %s: %s (%s)\n", tc->name,
                tc->url, scimq_strerror(rc), scimq_err_name(rc));
    return rc;
}

void
tool_json_print(json_t *obj)
{
    char *text = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);

    if (text != NULL)
        printf("%s\n", text);
    fflush(stdout);
    free(text);
    json_decref(obj);
}

double
tool_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

uint64_t
tool_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}
