/* SPDX-License-Identifier: BSD-3-Clause */
/* What the client tools share: connection flags, JSON summaries, clocks. */
#ifndef SCIMQ_TOOLS_TOOLUTIL_H
#define SCIMQ_TOOLS_TOOLUTIL_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include <scimq/scimq.h>

/* Option codes of the flags every client tool takes. */
enum {
    TOOL_OPT_URL = 1000,
    TOOL_OPT_STREAMS,
    TOOL_OPT_TOKEN_FILE,
    TOOL_OPT_LOG_LEVEL,
    TOOL_OPT_LIST_PARAMS,
    TOOL_OPT_VERSION
};

#define TOOL_COMMON_OPTIONS                                                    \
    {"url", required_argument, NULL, TOOL_OPT_URL},                            \
        {"streams", required_argument, NULL, TOOL_OPT_STREAMS},                \
        {"token-file", required_argument, NULL, TOOL_OPT_TOKEN_FILE},          \
        {"log-level", required_argument, NULL, TOOL_OPT_LOG_LEVEL},            \
        {"list-params", no_argument, NULL, TOOL_OPT_LIST_PARAMS},              \
    {                                                                          \
        "version", no_argument, NULL, TOOL_OPT_VERSION                         \
    }

#define TOOL_COMMON_USAGE                                                      \
    "  --url scimq://HOST:PORT  gateway ($SCIMQ_URL, else "                    \
    "scimq://127.0.0.1:7470)\n"                                                \
    "  --streams K              parallel TCP streams (1)\n"                    \
    "  --token-file FILE        shared secret ($SCIMQ_TOKEN_FILE)\n"           \
    "  --log-level SPEC         e.g. info or warn,client=debug\n"              \
    "  --list-params, --version\n"

/*
 * Consumer credit the tools ask for unless told otherwise (scimq-recv,
 * scimq-bench).  Bytes bound it: a window of TOOL_CREDIT_BYTES_PER_STREAM
 * per parallel stream, sized for bandwidth x delay (10 Gbit/s over a 50 ms
 * round trip is 62.5 MB; every stream is a TCP path of its own, so K
 * streams keep K windows busy).  The message count is generous so that
 * small messages are bounded by bytes too, not by a handful of messages:
 * 1 KiB messages at 200,000/s over a 5 ms round trip are 1000 in flight.
 */
#define TOOL_CREDIT_MSGS 1024u
#define TOOL_CREDIT_BYTES_PER_STREAM ((uint64_t) 64 << 20)

/* The default credit in bytes of a consumer with `streams` streams. */
static inline uint64_t
tool_credit_bytes(uint32_t streams)
{
    return TOOL_CREDIT_BYTES_PER_STREAM * (streams > 0 ? streams : 1);
}

struct tool_conn {
    const char *name; /* tool name for messages */
    const char *url;
    uint32_t streams;
    const char *token_file;
};

/* Defaults (URL from $SCIMQ_URL). */
void tool_conn_init(struct tool_conn *tc, const char *name);

/*
 * Handles one of the common options.  Returns 1 if handled, 0 if not a
 * common option, or exits (--version, --list-params, bad values: exit 2).
 */
int tool_conn_option(struct tool_conn *tc, int c, const char *arg);

/* Connects; prints a clear message and returns the code on failure. */
int tool_conn_open(const struct tool_conn *tc, scimq_client_t **c_p,
                   const scimq_client_options_t *base);

/* Prints obj as one compact JSON line on stdout and releases it. */
void tool_json_print(json_t *obj);

/* Seconds on CLOCK_MONOTONIC. */
double tool_now(void);
/* Nanoseconds on CLOCK_MONOTONIC: one clock for every process of the
 * machine, so times of several tools compare. */
uint64_t tool_now_ns(void);

/* Parses a count or size argument ("16MiB", "10000"); exits 2 if bad. */
uint64_t tool_parse_size(const char *tool, const char *flag, const char *arg);

#endif /* SCIMQ_TOOLS_TOOLUTIL_H */
