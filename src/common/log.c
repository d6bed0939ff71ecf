/* SPDX-License-Identifier: BSD-3-Clause */
/* Logging: configuration from the param table, formatting, one write(2). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <scimq/error.h>

#include "error_internal.h"
#include "log.h"
#include "param.h"

/* Longest line written; longer messages are cut and end in "...". */
#define LOG_LINE_MAX 1024

_Atomic int scimq__log_levels[SCIMQ_SUBSYS_COUNT] = {
#define LEVEL_UNSET(e, name) [SCIMQ_SUBSYS_##e] = -1,
    SCIMQ_LOG_SUBSYS_MAP(LEVEL_UNSET)
#undef LEVEL_UNSET
};

static const char *const subsys_names[SCIMQ_SUBSYS_COUNT] = {
#define SUBSYS_NAME(e, name) [SCIMQ_SUBSYS_##e] = name,
    SCIMQ_LOG_SUBSYS_MAP(SUBSYS_NAME)
#undef SUBSYS_NAME
};

static const char *const level_names[] = {"NONE", "ERROR", "WARN",
                                          "INFO", "DEBUG", "TRACE"};

static _Atomic int log_fd = STDERR_FILENO;
static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;

int
scimq__log_level_parse(const char *s)
{
    for (int l = SCIMQ_LOG_NONE; l <= SCIMQ_LOG_TRACE; l++)
        if (strcasecmp(s, level_names[l]) == 0)
            return l;
    if (strcasecmp(s, "warning") == 0)
        return SCIMQ_LOG_WARN;
    return -1;
}

static int
subsys_lookup(const char *s, size_t len)
{
    for (int i = 0; i < SCIMQ_SUBSYS_COUNT; i++)
        if (strlen(subsys_names[i]) == len &&
            strncasecmp(s, subsys_names[i], len) == 0)
            return i;
    return -1;
}

/*
 * Applies "level[,subsys=level...]" and the subsystem filter.  Unknown
 * words are reported once on stderr and otherwise ignored: a typo in a
 * logging variable must not stop a twelve-hour run.
 */
static void
log_apply(const char *spec, const char *filter, int *levels)
{
    bool allowed[SCIMQ_SUBSYS_COUNT];
    char word[64];

    for (int i = 0; i < SCIMQ_SUBSYS_COUNT; i++) {
        levels[i] = SCIMQ_LOG_WARN;
        allowed[i] = filter[0] == '\0';
    }
    for (const char *p = filter; *p;) {
        size_t n = strcspn(p, ",");
        int s = subsys_lookup(p, n);

        if (s >= 0)
            allowed[s] = true;
        else if (n > 0)
            fprintf(stderr,
                    "scimq: SCIMQ_LOG_SUBSYS: unknown subsystem "
                    "'%.*s'\n",
                    (int) n, p);
        p += n + (p[n] == ',');
    }
    for (const char *p = spec; *p;) {
        size_t n = strcspn(p, ",");
        const char *eq = memchr(p, '=', n);
        int level, s = -1;

        if (eq != NULL) {
            s = subsys_lookup(p, (size_t) (eq - p));
            snprintf(word, sizeof(word), "%.*s", (int) (p + n - eq - 1),
                     eq + 1);
        } else {
            snprintf(word, sizeof(word), "%.*s", (int) n, p);
        }
        level = scimq__log_level_parse(word);
        if (level < 0 || (eq != NULL && s < 0)) {
            if (n > 0)
                fprintf(stderr, "scimq: SCIMQ_LOG_LEVEL: cannot use '%.*s'\n",
                        (int) n, p);
        } else if (eq == NULL) {
            for (int i = 0; i < SCIMQ_SUBSYS_COUNT; i++)
                levels[i] = level;
        } else {
            levels[s] = level;
        }
        p += n + (p[n] == ',');
    }
    for (int i = 0; i < SCIMQ_SUBSYS_COUNT; i++)
        if (!allowed[i] && levels[i] > SCIMQ_LOG_ERROR)
            levels[i] = SCIMQ_LOG_ERROR;
}

void
scimq__log_configure(void)
{
    int levels[SCIMQ_SUBSYS_COUNT];
    const char *file;

    pthread_mutex_lock(&config_lock);
    log_apply(scimq__param_str(SCIMQ_PARAM_LOG_LEVEL),
              scimq__param_str(SCIMQ_PARAM_LOG_SUBSYS), levels);
    file = scimq__param_str(SCIMQ_PARAM_LOG_FILE);
    for (int i = 0; i < SCIMQ_SUBSYS_COUNT; i++)
        atomic_store(&scimq__log_levels[i], levels[i]);
    pthread_mutex_unlock(&config_lock);
    if (file[0] != '\0' && scimq__log_open(file) != 0)
        fprintf(stderr, "scimq: cannot open log file %s: %s\n", file,
                strerror(errno));
}

int
scimq__log_open(const char *path)
{
    int fd = STDERR_FILENO, old;

    if (path != NULL) {
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
            return scimq__err_from_errno(errno);
    }
    /* Swap first, close after: a concurrent writer sees a valid fd. */
    old = atomic_exchange(&log_fd, fd);
    if (old != STDERR_FILENO && old != fd)
        close(old);
    return 0;
}

int
scimq__log_sparse_ok(_Atomic uint64_t *last_ns, uint64_t interval_ns)
{
    struct timespec ts;
    uint64_t now, last;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
    last = atomic_load(last_ns);
    if (last != 0 && now - last < interval_ns)
        return 0;
    /* Only the thread that wins the exchange logs. */
    return atomic_compare_exchange_strong(last_ns, &last, now);
}

void
scimq__log_write(int level, int subsys, const char *file, int line,
                 const char *fmt, ...)
{
    int saved_errno = errno;
    char buf[LOG_LINE_MAX];
    struct timespec ts;
    struct tm tm;
    const char *base = strrchr(file, '/');
    size_t len;
    va_list ap;
    int n;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(buf, sizeof(buf),
                 "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ scimq[%ld] %s %s: ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000, (long) getpid(),
                 level_names[level], subsys_names[subsys]);
    len = n > 0 ? (size_t) n : 0;
    va_start(ap, fmt);
    n = vsnprintf(buf + len, sizeof(buf) - len, fmt, ap);
    va_end(ap);
    len = n < 0 ? len : len + (size_t) n;
    if (level >= SCIMQ_LOG_DEBUG && len < sizeof(buf)) {
        n = snprintf(buf + len, sizeof(buf) - len, " (%s:%d)",
                     base ? base + 1 : file, line);
        len = n < 0 ? len : len + (size_t) n;
    }
    if (len >= sizeof(buf) - 1) {
        len = sizeof(buf) - 1;
        memcpy(buf + len - 3, "...", 3);
    }
    buf[len++] = '\n';
    /* One write: lines from threads and processes never interleave. */
    if (write(atomic_load(&log_fd), buf, len) < 0) {
        /* Nowhere left to report it. */
    }
    errno = saved_errno;
}
