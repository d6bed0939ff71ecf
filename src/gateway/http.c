/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include <scimq/error.h>

#include "common/log.h"
#include "common/param.h"
#include "common/port_file.h"
#include "http.h"
#include "http_metrics.h"
#include "http_tcp.h"
#include "report.h"

/* The live page, http_page.html made a C string at build time. */
static const char page[] =
#include "gateway/http_page.inc"
    ;

/* A scraper or a page needs a few connections; these bound what the
 * thread holds however many clients come. */
#define HTTP_MAX_CONNECTIONS 32
#define HTTP_MAX_PER_ADDRESS 8
#define HTTP_TIMEOUT_S 10
#define HTTP_BACKLOG 16

/* The browser may load nothing from elsewhere and send nothing elsewhere:
 * the page works with no network, and cannot be made to leak. */
#define PAGE_POLICY                                                            \
    "default-src 'none'; script-src 'unsafe-inline'; "                         \
    "style-src 'unsafe-inline'; connect-src 'self'; img-src data:; "           \
    "frame-ancestors 'none'"

static void
mhd_log(void *arg, const char *fmt, va_list ap)
{
    char line[256];

    (void) arg;
    vsnprintf(line, sizeof(line), fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    SCIMQ_LOG_WARN(GATEWAY, "http: %s", line);
}

/* Builds a new snapshot when the cached one is older than cache_ms.
 * Under h->lock. */
static void
refresh_locked(struct gw_http *h)
{
    uint64_t now = gw_now_ms();
    json_t *doc;
    char *json, *metrics;
    size_t json_len, metrics_len;
    int rc;

    if (h->taken_ms != 0 && now - h->taken_ms < h->cache_ms)
        return;
    doc = gw_report_stats(h->gw, NULL);
    if (doc == NULL)
        return;
    rc = gw_http_tcp_annotate(json_object_get(doc, "connections_detail"),
                              h->gw_port);
    if (rc < 0)
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, GATEWAY, 60000,
                         "http: the kernel's TCP state of the connections "
                         "is unavailable (sock_diag): %s",
                         scimq_strerror(rc));
    json_object_set_new(doc, "http",
                        json_pack("{s:i, s:b}", "cache_ms", (int) h->cache_ms,
                                  "tcp_info", rc >= 0));
    json = json_dumps(doc, JSON_COMPACT);
    metrics = gw_metrics_render(doc, &metrics_len);
    json_decref(doc);
    if (json == NULL || metrics == NULL) {
        free(json);
        free(metrics);
        return; /* out of memory: the old snapshot stays */
    }
    json_len = strlen(json);
    free(h->json);
    free(h->metrics);
    h->json = json;
    h->json_len = json_len;
    h->metrics = metrics;
    h->metrics_len = metrics_len;
    h->taken_ms = now;
}

static enum MHD_Result
reply(struct MHD_Connection *conn, unsigned int status, const char *type,
      const char *body, size_t len, const char *policy)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, (void *) body, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ret;

    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (policy != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_SECURITY_POLICY,
                                policy);
    ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result
on_request(void *arg, struct MHD_Connection *conn, const char *url,
           const char *method, const char *version, const char *upload,
           size_t *upload_len, void **state)
{
    static const char not_found[] = "not found\n";
    static const char not_allowed[] = "read-only: GET and HEAD only\n";
    static const char no_snapshot[] = "no snapshot (out of memory)\n";
    struct gw_http *h = arg;
    enum MHD_Result ret;

    (void) version;
    (void) upload;
    (void) state;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
        strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        *upload_len = 0; /* a body, if any, is not read */
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                     "text/plain; charset=utf-8", not_allowed,
                     sizeof(not_allowed) - 1, NULL);
    }
    if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0)
        return reply(conn, MHD_HTTP_OK, "text/html; charset=utf-8", page,
                     sizeof(page) - 1, PAGE_POLICY);
    if (strcmp(url, "/metrics") == 0 || strcmp(url, "/api/stats") == 0) {
        bool metrics = url[1] == 'm';

        pthread_mutex_lock(&h->lock);
        refresh_locked(h);
        if (h->json == NULL) {
            pthread_mutex_unlock(&h->lock);
            return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                         "text/plain; charset=utf-8", no_snapshot,
                         sizeof(no_snapshot) - 1, NULL);
        }
        ret = metrics ? reply(conn, MHD_HTTP_OK,
                              "text/plain; version=0.0.4; charset=utf-8",
                              h->metrics, h->metrics_len, NULL)
                      : reply(conn, MHD_HTTP_OK, "application/json", h->json,
                              h->json_len, NULL);
        pthread_mutex_unlock(&h->lock);
        return ret;
    }
    return reply(conn, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8",
                 not_found, sizeof(not_found) - 1, NULL);
}

/* A port alone means loopback: the page and the metrics show peers and
 * queue names, so reaching them from elsewhere must be asked for. */
static int
parse_spec(const char *spec, char *host, size_t hostlen, uint16_t *port_p)
{
    char text[SCIMQ_HOST_MAX + 16];

    if (spec[strspn(spec, "0123456789")] == '\0' && spec[0] != '\0') {
        snprintf(text, sizeof(text), "127.0.0.1:%s", spec);
        spec = text;
    }
    if (scimq__hostport_parse(spec, host, hostlen, port_p) != 0)
        return SCIMQ_EINVAL;
    if (host[0] == '\0')
        snprintf(host, hostlen, "127.0.0.1");
    return 0;
}

/* The listening socket is made here, so port 0 can be read back. */
static int
listen_on(struct gw_http *h, bool *v6_p, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char port[8];
    int fd, one = 1, rc;

    snprintf(port, sizeof(port), "%u", h->port);
    rc = getaddrinfo(h->host, port, &hints, &ai);
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", h->host, gai_strerror(rc));
        return SCIMQ_EINVAL;
    }
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
        listen(fd, HTTP_BACKLOG) != 0 ||
        getsockname(fd, (struct sockaddr *) &ss, &len) != 0) {
        rc = -errno;
        snprintf(err, errlen, "%s:%s: %s", h->host, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return rc;
    }
    *v6_p = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    h->port = ntohs(ss.ss_family == AF_INET6
                        ? ((struct sockaddr_in6 *) &ss)->sin6_port
                        : ((struct sockaddr_in *) &ss)->sin_port);
    return fd;
}

int
gw_http_start(struct gw_http *h, struct gateway *gw, const char *spec,
              uint16_t gw_port, uint32_t cache_ms, char *err, size_t errlen)
{
    unsigned int flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    bool v6 = false;
    int fd;

    memset(h, 0, sizeof(*h));
    h->gw = gw;
    h->gw_port = gw_port;
    h->cache_ms = cache_ms;
    if (parse_spec(spec, h->host, sizeof(h->host), &h->port) != 0) {
        snprintf(err, errlen, "bad address '%s' (HOST:PORT or PORT)", spec);
        return SCIMQ_EINVAL;
    }
    fd = listen_on(h, &v6, err, errlen);
    if (fd < 0)
        return fd;
    if (v6)
        flags |= MHD_USE_IPv6;
    pthread_mutex_init(&h->lock, NULL);
    h->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER,
        mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int) HTTP_MAX_CONNECTIONS,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int) HTTP_MAX_PER_ADDRESS,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int) HTTP_TIMEOUT_S,
        MHD_OPTION_END);
    if (h->daemon == NULL) {
        snprintf(err, errlen, "libmicrohttpd did not start");
        close(fd);
        pthread_mutex_destroy(&h->lock);
        return SCIMQ_EIO;
    }
    return 0;
}

int
gw_http_start_configured(struct gw_http *h, struct gateway *gw,
                         uint16_t gw_port)
{
    const char *spec = scimq__param_str(SCIMQ_PARAM_GATEWAY_HTTP);
    const char *port_file =
        scimq__param_str(SCIMQ_PARAM_GATEWAY_HTTP_PORT_FILE);
    int64_t cache_ms = scimq__param_int(SCIMQ_PARAM_GATEWAY_HTTP_CACHE_MS);
    char err[512] = "";
    int rc;

    memset(h, 0, sizeof(*h));
    if (spec == NULL || spec[0] == '\0')
        return 0;
    if (cache_ms < 0 || cache_ms > 60000) {
        fprintf(stderr,
                "scimq-gateway: gateway_http_cache_ms must be 0..60000\n");
        return SCIMQ_EINVAL;
    }
    rc = gw_http_start(h, gw, spec, gw_port, (uint32_t) cache_ms, err,
                       sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "scimq-gateway: --http: %s\n", err);
        return rc;
    }
    if (port_file != NULL && port_file[0] != '\0') {
        rc = scimq__port_file_write(port_file, h->host, h->port);
        if (rc != 0) {
            fprintf(stderr, "scimq-gateway: cannot write %s: %s\n", port_file,
                    scimq_strerror(rc));
            gw_http_stop(h);
            return rc;
        }
        h->port_file = port_file;
    }
    fprintf(stderr,
            "scimq-gateway: HTTP (read-only: /metrics, /, /api/stats) on "
            "%s%s%s:%u\n",
            strchr(h->host, ':') ? "[" : "", h->host,
            strchr(h->host, ':') ? "]" : "", h->port);
    return 0;
}

void
gw_http_stop(struct gw_http *h)
{
    if (h->daemon == NULL)
        return;
    if (h->port_file != NULL)
        unlink(h->port_file);
    /* MHD_stop_daemon joins the thread and closes the listening socket
     * it was given. */
    MHD_stop_daemon(h->daemon);
    h->daemon = NULL;
    free(h->json);
    free(h->metrics);
    h->json = h->metrics = NULL;
    pthread_mutex_destroy(&h->lock);
}
