/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one table of SciMQ tunables.
 *
 * Every tunable is declared once below: name, type, default, help.  Its
 * value comes from, in increasing precedence: the default, a config file
 * (INI: key "name" in the global section or section "[a]" + key "b" for
 * "a_b"), the environment variable SCIMQ_<NAME>, and an explicit
 * scimq__param_set() (command-line flags).  Tools print the table with
 * --list-params.
 *
 * Thread safety: values are set during start-up, before threads exist;
 * afterwards they are only read.
 */
#ifndef SCIMQ_COMMON_PARAM_H
#define SCIMQ_COMMON_PARAM_H

#include <stdint.h>
#include <stdio.h>

enum scimq_param_type {
    SCIMQ_PARAM_T_INT,  /* signed 64-bit */
    SCIMQ_PARAM_T_SIZE, /* bytes; accepts 4096, 64KiB, 16MiB, 1GiB, 2TB ... */
    SCIMQ_PARAM_T_BOOL, /* 1/0, true/false, yes/no, on/off */
    SCIMQ_PARAM_T_STR
};

/* X(ID, "name", type, "default", "help") */
#define SCIMQ_PARAM_MAP(X)                                                     \
    X(LOG_LEVEL, "log_level", STR, "warn",                                     \
      "log level, optionally per subsystem: warn,gateway=debug")               \
    X(LOG_SUBSYS, "log_subsys", STR, "",                                       \
      "comma-separated subsystems allowed to log below ERROR (empty: all)")    \
    X(LOG_FILE, "log_file", STR, "",                                           \
      "append log lines to this file instead of stderr")                       \
    X(PROTO_MAX_HEADER, "proto_max_header", SIZE, "64KiB",                     \
      "largest SciMP frame header accepted (fixed + args + table + names)")    \
    X(PROTO_MAX_BLOCKS, "proto_max_blocks", INT, "256",                        \
      "largest number of blocks per SciMP frame accepted")                     \
    X(PROTO_MAX_NAME, "proto_max_name", INT, "255",                            \
      "longest block name accepted, in bytes")                                 \
    X(PROTO_MAX_PAYLOAD, "proto_max_payload", SIZE, "1GiB",                    \
      "largest message payload accepted")                                      \
    X(NET_SNDBUF, "net_sndbuf", SIZE, "0",                                     \
      "socket send buffer; 0 (best): kernel autotuning, which setting it "     \
      "turns off; capped at net.core.wmem_max")                                \
    X(NET_RCVBUF, "net_rcvbuf", SIZE, "0",                                     \
      "socket receive buffer; 0 (best): kernel autotuning, which setting it "  \
      "turns off; capped at net.core.rmem_max")                                \
    X(NET_CONGESTION, "net_congestion", STR, "",                               \
      "TCP congestion control per socket (cubic, bbr, reno); empty: system")   \
    X(GATEWAY_LISTEN, "gateway_listen", STR, "127.0.0.1:7470",                 \
      "address the gateway listens on (HOST:PORT; port 0: any free port)")     \
    X(GATEWAY_INSECURE, "gateway_insecure", BOOL, "false",                     \
      "listen beyond loopback without a token (anyone may connect)")           \
    X(GATEWAY_PORT_FILE, "gateway_port_file", STR, "",                         \
      "file the gateway writes HOST:PORT to once it listens (atomically)")     \
    X(GATEWAY_WORKERS, "gateway_workers", INT, "0",                            \
      "event-loop worker threads; 0: one per core of the allowed cpuset")      \
    X(GATEWAY_MEMORY_LIMIT, "gateway_memory_limit", SIZE, "1GiB",              \
      "payload memory (one pool); past it payloads spill or producers wait")   \
    X(GATEWAY_CHUNK_SIZE, "gateway_chunk_size", SIZE, "256KiB",                \
      "payload pool chunk (power of two); smaller payloads share chunks")      \
    X(GATEWAY_PREFAULT, "gateway_prefault", BOOL, "true",                      \
      "touch all payload memory at start (in the background)")                 \
    X(GATEWAY_SPILL_DIR, "gateway_spill_dir", STR, "",                         \
      "directory for spilled payloads; empty: no spilling")                    \
    X(GATEWAY_DISK_LIMIT, "gateway_disk_limit", SIZE, "16GiB",                 \
      "spill bytes; past it producers are back-pressured (TCP)")               \
    X(GATEWAY_JOURNAL_DIR, "gateway_journal_dir", STR, "",                     \
      "journal of guaranteed queues (survives restarts); empty: none")         \
    X(GATEWAY_DURABILITY, "gateway_durability", STR, "sync",                   \
      "with a journal, when PUT_OK goes: sync, batch or memory")               \
    X(GATEWAY_JOURNAL_BATCH_MS, "gateway_journal_batch_ms", INT, "100",        \
      "longest time a journal write waits for its sync (batch)")               \
    X(GATEWAY_JOURNAL_SEGMENT, "gateway_journal_segment", SIZE, "256MiB",      \
      "journal segment file size before the next one starts")                  \
    X(GATEWAY_JOURNAL_COMPACT, "gateway_journal_compact", INT, "25",           \
      "compact the oldest journal segment below this live percentage; 0: no")  \
    X(GATEWAY_TOKEN_FILE, "gateway_token_file", STR, "",                       \
      "shared-secret token file; empty: no authentication")                    \
    X(GATEWAY_ACK_TIMEOUT_MS, "gateway_ack_timeout_ms", INT, "60000",          \
      "default lease of a guaranteed delivery before redelivery")              \
    X(GATEWAY_HELLO_TIMEOUT_MS, "gateway_hello_timeout_ms", INT, "10000",      \
      "time a new connection has to say HELLO (and AUTH)")                     \
    X(GATEWAY_IDLE_TIMEOUT_MS, "gateway_idle_timeout_ms", INT, "60000",        \
      "longest silence inside a frame before the connection is closed")        \
    X(GATEWAY_DRAIN_TIMEOUT_MS, "gateway_drain_timeout_ms", INT, "30000",      \
      "SIGTERM: longest wait for leased messages to be settled")               \
    X(GATEWAY_TLS_CERT, "gateway_tls_cert", STR, "",                           \
      "TLS certificate chain (PEM); with the key: streams must speak TLS")     \
    X(GATEWAY_TLS_KEY, "gateway_tls_key", STR, "", "TLS private key (PEM)")    \
    X(GATEWAY_TLS_CA, "gateway_tls_ca", STR, "",                               \
      "CA (PEM) client certificates must be signed by; empty: none asked")     \
    X(TLS_CA, "tls_ca", STR, "",                                               \
      "clients (scimqs://): CA the gateway's certificate must be signed by; "  \
      "empty: the system's")                                                   \
    X(TLS_CERT, "tls_cert", STR, "",                                           \
      "clients: own TLS certificate (PEM), for a gateway that asks for one")   \
    X(TLS_KEY, "tls_key", STR, "", "clients: the key of tls_cert (PEM)")       \
    X(GATEWAY_ADMIN_SOCKET, "gateway_admin_socket", STR, "",                   \
      "Unix socket for administration; empty: /tmp/scimq-UID/gateway-PORT."    \
      "sock; off: none")                                                       \
    X(GATEWAY_ADMIN_GROUP, "gateway_admin_group", STR, "",                     \
      "group that may use the admin socket too (mode 660); empty: owner only") \
    X(ADMIN_SOCKET, "admin_socket", STR, "",                                   \
      "the gateway's admin socket (scimqctl); empty: the default for the "     \
      "URL's port")                                                            \
    X(GATEWAY_MAX_CONNECTIONS, "gateway_max_connections", INT, "4096",         \
      "connections accepted at once; more are refused")                        \
    X(GATEWAY_MAX_CONN_PER_PEER, "gateway_max_conn_per_peer", INT, "256",      \
      "connections from one peer address at once (loopback included)")         \
    X(GATEWAY_MAX_UNAUTH, "gateway_max_unauth", INT, "1024",                   \
      "connections not yet authenticated (HELLO/AUTH), in total")              \
    X(GATEWAY_MAX_UNAUTH_PER_PEER, "gateway_max_unauth_per_peer", INT, "64",   \
      "connections not yet authenticated, from one peer address")              \
    X(GATEWAY_MAX_OUTPUT, "gateway_max_output", SIZE, "8MiB",                  \
      "queued reply bytes per connection (DELIVERs aside) before it is "       \
      "no longer read")                                                        \
    X(GATEWAY_OUTPUT_TIMEOUT_MS, "gateway_output_timeout_ms", INT, "30000",    \
      "longest time a connection stays over gateway_max_output; then closed")  \
    X(GATEWAY_MAX_RECEIVING, "gateway_max_receiving", SIZE, "0",               \
      "memory that PUTs still being received may hold; 0: half the limit")     \
    X(GATEWAY_MIN_RATE, "gateway_min_rate", SIZE, "64KiB",                     \
      "bytes/s a frame must average once its grace is over; 0: no minimum")    \
    X(GATEWAY_MIN_RATE_GRACE_MS, "gateway_min_rate_grace_ms", INT, "5000",     \
      "time into a frame before gateway_min_rate applies")                     \
    X(GATEWAY_HTTP, "gateway_http", STR, "",                                   \
      "read-only HTTP (/metrics, live page): HOST:PORT or PORT (loopback); "   \
      "empty: off")                                                            \
    X(GATEWAY_HTTP_PORT_FILE, "gateway_http_port_file", STR, "",               \
      "file the gateway writes the HTTP HOST:PORT to once it listens")         \
    X(GATEWAY_HTTP_CACHE_MS, "gateway_http_cache_ms", INT, "1000",             \
      "HTTP: a statistics snapshot is reused for this long")                   \
    X(GATEWAY_JOBS_MAX, "gateway_jobs_max", INT, "64",                         \
      "MPI agents (sessions) whose REPORTs are kept; 0: REPORTs refused")      \
    X(GATEWAY_JOBS_KEEP_MS, "gateway_jobs_keep_ms", INT, "300000",             \
      "how long an MPI agent's final REPORT stays in STATS and /metrics")      \
    X(PROTO_DATASUM, "proto_datasum", BOOL, "false",                           \
      "send a CRC32C of every payload (receivers always verify one)")          \
    X(PROTO_MAX_VERSION, "proto_max_version", INT, "4",                        \
      "highest SciMP session version a client offers, a gateway chooses")      \
    X(CLIENT_COALESCE_US, "client_coalesce_us", INT, "20",                     \
      "longest a client frame waits for others to share its write (us)")

enum scimq_param_id {
#define SCIMQ_PARAM_ENUM(id, name, type, def, help) SCIMQ_PARAM_##id,
    SCIMQ_PARAM_MAP(SCIMQ_PARAM_ENUM)
#undef SCIMQ_PARAM_ENUM
        SCIMQ_PARAM_COUNT
};

/* Where a value came from, lowest precedence first. */
enum scimq_param_source {
    SCIMQ_PARAM_SRC_DEFAULT,
    SCIMQ_PARAM_SRC_FILE,
    SCIMQ_PARAM_SRC_ENV,
    SCIMQ_PARAM_SRC_SET
};

/* Values; the environment is read on first access. */
int64_t scimq__param_int(enum scimq_param_id id);
uint64_t scimq__param_size(enum scimq_param_id id);
int scimq__param_bool(enum scimq_param_id id);
const char *scimq__param_str(enum scimq_param_id id);
enum scimq_param_source scimq__param_source(enum scimq_param_id id);

/*
 * The highest SciMP session version a client offers or a gateway chooses:
 * proto_max_version, within the versions this build speaks (a lower one
 * makes either side speak as an older release would).
 */
uint8_t scimq__param_proto_version_max(void);

/*
 * Sets a tunable by name from text.  Returns 0, SCIMQ_ENOENT (no such
 * tunable), SCIMQ_EINVAL (value does not parse for its type) or
 * SCIMQ_ENOMEM.  A value set with a lower precedence than the current one
 * is ignored (returns 0).
 */
int scimq__param_set_from(const char *name, const char *value,
                          enum scimq_param_source src);
#define scimq__param_set(name, value)                                          \
    scimq__param_set_from((name), (value), SCIMQ_PARAM_SRC_SET)

/*
 * Loads an INI config file.  Unknown keys and bad values are errors that
 * name the file and line in err (may be NULL; errlen bytes).
 * Returns 0, SCIMQ_ENOENT (cannot open), SCIMQ_ECONFIG.
 */
int scimq__param_load_file(const char *path, char *err, size_t errlen);

/* Prints name, environment variable, type, value, source and help. */
void scimq__param_print(FILE *out);

/* Back to defaults + environment (tests). */
void scimq__param_reset(void);

/*
 * Parses a size with an optional unit: B, KiB/MiB/GiB/TiB (and K/M/G/T,
 * powers of 1024), kB/MB/GB/TB (powers of 1000).  Returns 0 or
 * SCIMQ_EINVAL / SCIMQ_ERANGE.
 */
int scimq__parse_size(const char *s, uint64_t *v_p);

/* Fills a scimq_proto_limits_t-compatible set of limits from the table. */
struct scimq_proto_limits;
void scimq__param_proto_limits(struct scimq_proto_limits *lim);

#endif /* SCIMQ_COMMON_PARAM_H */
