/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Socket buffers (src/common/net.c): an explicit buffer above the kernel's
 * cap is read back, counted and warned about, naming the sysctl to raise;
 * buffers left at 0 are never touched (autotuning stays on); what held a
 * sender back, from TCP_INFO's times.
 *
 * The caps (net.core.wmem_max / rmem_max) are global and not writable from
 * a namespace: the test reads the current ones and asks for more, and never
 * changes them.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>

#include "cunit_main.h"
#include "common/log.h"
#include "common/net.h"

static char log_path[64];

static int
suite_init(void)
{
    int fd;

    snprintf(log_path, sizeof(log_path), "/tmp/scimq-test-net-XXXXXX");
    if ((fd = mkstemp(log_path)) < 0)
        return -1;
    close(fd);
    return scimq__log_open(log_path) == 0 ? 0 : -1;
}

static int
suite_fini(void)
{
    (void) scimq__log_open(NULL);
    unlink(log_path);
    return 0;
}

/* The whole log so far, NUL-terminated (static buffer). */
static const char *
log_text(void)
{
    static char buf[16384];
    FILE *f = fopen(log_path, "r");
    size_t n = 0;

    if (f != NULL) {
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

static int
tcp_socket(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    CU_ASSERT_FATAL(fd >= 0);
    return fd;
}

static int
buf_of(int fd, int opt)
{
    int v = 0;
    socklen_t len = sizeof(v);

    CU_ASSERT_FATAL(getsockopt(fd, SOL_SOCKET, opt, &v, &len) == 0);
    return v;
}

/* Runs first: nothing has been asked yet, so nothing was cut. */
static void
test_default_leaves_autotuning(void)
{
    int fd = tcp_socket(), snd0 = buf_of(fd, SO_SNDBUF),
        rcv0 = buf_of(fd, SO_RCVBUF);

    scimq__sock_tune(fd, 0, 0, NULL);
    /* Untouched: the kernel's initial sizes (tcp_wmem / tcp_rmem's
     * defaults), from which autotuning grows them. */
    CU_ASSERT_EQUAL(buf_of(fd, SO_SNDBUF), snd0);
    CU_ASSERT_EQUAL(buf_of(fd, SO_RCVBUF), rcv0);
    CU_ASSERT_EQUAL(scimq__net_buffers_short(), 0);
    CU_ASSERT_PTR_NULL(strstr(log_text(), "mem_max"));
    close(fd);
}

static void
test_within_cap_is_quiet(void)
{
    long wmax = scimq__net_sysctl_long("/proc/sys/net/core/wmem_max");
    int fd = tcp_socket();
    uint64_t before = scimq__net_buffers_short();

    CU_ASSERT_FATAL(wmax > 8192);
    scimq__sock_tune(fd, (uint64_t) wmax / 2, 0, NULL);
    CU_ASSERT(buf_of(fd, SO_SNDBUF) / 2 >= wmax / 2);
    CU_ASSERT_EQUAL(scimq__net_buffers_short(), before);
    CU_ASSERT_PTR_NULL(strstr(log_text(), "net.core.wmem_max"));
    close(fd);
}

static void
test_above_cap_warns(void)
{
    long wmax = scimq__net_sysctl_long("/proc/sys/net/core/wmem_max");
    long rmax = scimq__net_sysctl_long("/proc/sys/net/core/rmem_max");
    uint64_t before = scimq__net_buffers_short();
    char want[64];
    int fd;

    CU_ASSERT_FATAL(wmax > 0 && rmax > 0);
    CU_ASSERT_FATAL(wmax < (1L << 29) && rmax < (1L << 29));
    fd = tcp_socket();
    scimq__sock_tune(fd, (uint64_t) wmax * 2 + 4096, 0, NULL);
    /* The kernel really capped it (the premise), and that was counted. */
    CU_ASSERT(buf_of(fd, SO_SNDBUF) / 2 <= wmax);
    CU_ASSERT_EQUAL(scimq__net_buffers_short(), before + 1);
    /* The warning names the sysctl, its value, what to set and why. */
    snprintf(want, sizeof(want), "net.core.wmem_max = %ld", wmax);
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), want));
    snprintf(want, sizeof(want), "sysctl -w net.core.wmem_max=%ld",
             wmax * 2 + 4096);
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), want));
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), "autotuning off"));
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), "net_sndbuf"));
    close(fd);

    /* The receive side names its own sysctl. */
    fd = tcp_socket();
    scimq__sock_tune(fd, 0, (uint64_t) rmax * 2 + 4096, NULL);
    CU_ASSERT(buf_of(fd, SO_RCVBUF) / 2 <= rmax);
    CU_ASSERT_EQUAL(scimq__net_buffers_short(), before + 2);
    snprintf(want, sizeof(want), "net.core.rmem_max = %ld", rmax);
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), want));
    CU_ASSERT_PTR_NOT_NULL(strstr(log_text(), "net.ipv4.tcp_rmem"));
    close(fd);

    /* Every cut socket is counted, the warning is given once. */
    fd = tcp_socket();
    scimq__sock_tune(fd, (uint64_t) wmax * 2 + 4096, 0, NULL);
    CU_ASSERT_EQUAL(scimq__net_buffers_short(), before + 3);
    {
        const char *t = log_text(), *p = strstr(t, "net.core.wmem_max = ");

        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_PTR_NULL(strstr(p + 1, "net.core.wmem_max = "));
    }
    close(fd);
}

static void
test_limit_names(void)
{
    CU_ASSERT_STRING_EQUAL(scimq__sock_limit(0, 0, 0), "idle");
    CU_ASSERT_STRING_EQUAL(scimq__sock_limit(1000000, 0, 0), "cwnd");
    CU_ASSERT_STRING_EQUAL(scimq__sock_limit(1000000, 100000, 0), "cwnd");
    CU_ASSERT_STRING_EQUAL(scimq__sock_limit(1000000, 100001, 0), "rwnd");
    CU_ASSERT_STRING_EQUAL(scimq__sock_limit(1000000, 0, 600000), "sndbuf");
    CU_ASSERT_STRING_EQUAL(scimq__sock_limit(1000000, 300000, 500000),
                           "sndbuf");
    CU_ASSERT_STRING_EQUAL(scimq__sock_limit(1000000, 500000, 300000), "rwnd");
}

/*
 * A sender whose peer does not read: it is busy and held back by the
 * receive window or its own send buffer, never by congestion control, and
 * TCP_INFO says so (the kernel adds the stall still running when asked).
 */
static void
test_sock_info_stalled_sender(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    struct scimq_sock_info si;
    static char data[1 << 16];
    int l = tcp_socket(), c = tcp_socket(), s, small = 16384;
    struct timespec pause = {.tv_nsec = 50 * 1000 * 1000};
    size_t sent = 0;
    const char *limit;

    /* A small receive buffer (inherited by the accepted socket) closes
     * the window after a few segments. */
    CU_ASSERT_FATAL(
        setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) == 0);
    CU_ASSERT_FATAL(bind(l, (struct sockaddr *) &a, sizeof(a)) == 0);
    CU_ASSERT_FATAL(listen(l, 1) == 0);
    CU_ASSERT_FATAL(getsockname(l, (struct sockaddr *) &a, &len) == 0);
    CU_ASSERT_FATAL(connect(c, (struct sockaddr *) &a, sizeof(a)) == 0);
    CU_ASSERT_FATAL((s = accept(l, NULL, NULL)) >= 0);
    /* Write until the kernel takes no more (bounded: 4096 x 64 KiB). */
    for (int i = 0; i < 4096; i++) {
        ssize_t n = send(c, data, sizeof(data), MSG_DONTWAIT);

        if (n <= 0)
            break;
        sent += (size_t) n;
    }
    CU_ASSERT_FATAL(sent > 0);
    nanosleep(&pause, NULL);
    CU_ASSERT_EQUAL(scimq__sock_info(c, &si), 0);
    CU_ASSERT(si.sndbuf > 0 && si.rcvbuf > 0);
    CU_ASSERT(si.cwnd > 0);
    CU_ASSERT(si.rtt_us > 0);
    /* Stalled for the 50 ms at least. */
    CU_ASSERT(si.busy_us >= 40000);
    CU_ASSERT(si.rwnd_limited_us + si.sndbuf_limited_us >= 40000);
    CU_ASSERT(si.rwnd_limited_us <= si.busy_us);
    CU_ASSERT(si.sndbuf_limited_us <= si.busy_us);
    limit =
        scimq__sock_limit(si.busy_us, si.rwnd_limited_us, si.sndbuf_limited_us);
    CU_ASSERT(strcmp(limit, "rwnd") == 0 || strcmp(limit, "sndbuf") == 0);
    close(s);
    close(c);
    close(l);
}

static const struct scimq_cunit_test buffer_tests[] = {
    {"buffers at 0 are left to autotuning", test_default_leaves_autotuning, 1},
    {"a buffer within the cap is quiet", test_within_cap_is_quiet, 1},
    {"a buffer above the cap is counted and warned, naming the sysctl",
     test_above_cap_warns, 1},
    {"what limited a sender", test_limit_names, 1},
    {"TCP_INFO of a stalled sender", test_sock_info_stalled_sender, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_suite suites[] = {
    {"net buffers", suite_init, suite_fini, buffer_tests},
    {NULL, NULL, NULL, NULL}};

SCIMQ_CUNIT_MAIN(suites)
