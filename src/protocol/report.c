/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The body of a REPORT frame (doc/scimp.md, "REPORT"): big-endian
 * integers, names as a u8 length and bytes.  Encoder and decoder share one
 * rule check, so whatever this library encodes decodes.
 */
#include "config.h"

#include <stdbool.h>
#include <string.h>

#include <scimq/error.h>
#include <scimq/report.h>

#include "wire.h"

unsigned int
scimq_report_bucket(uint64_t us)
{
    unsigned int b = 0;

    while (us > 0 && b < SCIMQ_REPORT_BUCKETS - 1) {
        us >>= 1;
        b++;
    }
    return b;
}

/* Job ids (Slurm 123_4, PBS 123.server) and provider names (tcp;ofi_rxm):
 * safe in a Prometheus label, JSON and HTML without surprises. */
static bool
name_ok(const char *s, size_t len)
{
    if (len == 0 || len > SCIMQ_REPORT_MAX_NAME)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char) s[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || strchr("._:;+@-", ch) != NULL) ||
            ch == '\0')
            return false;
    }
    return true;
}

/* The rules both directions keep; NULL when r keeps them all. */
static const char *
report_check(const scimq_report_t *r)
{
    uint64_t sum = 0;

    if (r->flags & ~SCIMQ_REPORT_F_ALL)
        return "unknown flags";
    if (r->agents == 0 || r->agent >= r->agents)
        return "agent index not below the number of agents";
    if (r->nrank > SCIMQ_REPORT_MAX_RANKS)
        return "more rank entries than SCIMQ_REPORT_MAX_RANKS (256)";
    if (r->nrank > r->ranks)
        return "more rank entries than ranks served";
    if (r->pool_used > r->pool_total)
        return "pool bytes used above the pool's size";
    if (!name_ok(r->job, strnlen(r->job, sizeof(r->job))))
        return "job id empty, over 64 bytes or not of [A-Za-z0-9._:;+@-]";
    if (!name_ok(r->provider, strnlen(r->provider, sizeof(r->provider))))
        return "provider empty, over 64 bytes or not of [A-Za-z0-9._:;+@-]";
    for (unsigned int b = 0; b < SCIMQ_REPORT_BUCKETS; b++) {
        if (r->service_bucket[b] > UINT64_MAX - sum)
            return "service-time buckets overflow";
        sum += r->service_bucket[b];
    }
    if (sum != r->service_count)
        return "service-time buckets do not sum to the count";
    for (unsigned int i = 0; i < r->nrank; i++) {
        const scimq_report_rank_t *k = &r->rank[i];

        if (k->rank >= r->ranks)
            return "a rank not below the ranks served";
        if (i > 0 && k->rank <= r->rank[i - 1].rank)
            return "rank entries not in ascending order";
        if (k->acked > k->delivered)
            return "a rank acknowledged more than it was handed";
    }
    return NULL;
}

static size_t
report_len(const scimq_report_t *r)
{
    return SCIMQ_REPORT_FIXED_LEN + 1 + strlen(r->job) + 1 +
           strlen(r->provider) + 2 + (size_t) r->nrank * SCIMQ_REPORT_RANK_LEN;
}

int
scimq_report_encode(const scimq_report_t *r, uint8_t *buf, size_t cap,
                    size_t *len_p)
{
    size_t len, n;
    uint8_t *p = buf;

    if (r == NULL || buf == NULL || len_p == NULL)
        return SCIMQ_EINVAL;
    if (report_check(r) != NULL)
        return SCIMQ_EPROTO_ARGS;
    len = report_len(r);
    if (len > cap)
        return SCIMQ_ENOBUFS;
    wire_put8(p, SCIMQ_REPORT_FORMAT);
    wire_put8(p + 1, r->flags);
    wire_put16(p + 2, r->agent);
    wire_put16(p + 4, r->agents);
    wire_put16(p + 6, r->ranks);
    wire_put32(p + 8, r->period_ms);
    wire_put64(p + 12, r->pool_used);
    wire_put64(p + 20, r->pool_total);
    wire_put64(p + 28, r->service_count);
    wire_put64(p + 36, r->service_sum_us);
    wire_put64(p + 44, r->service_max_us);
    p += 52;
    for (unsigned int b = 0; b < SCIMQ_REPORT_BUCKETS; b++, p += 8)
        wire_put64(p, r->service_bucket[b]);
    n = strlen(r->job);
    wire_put8(p, (uint8_t) n);
    memcpy(p + 1, r->job, n);
    p += 1 + n;
    n = strlen(r->provider);
    wire_put8(p, (uint8_t) n);
    memcpy(p + 1, r->provider, n);
    p += 1 + n;
    wire_put16(p, r->nrank);
    p += 2;
    for (unsigned int i = 0; i < r->nrank; i++, p += SCIMQ_REPORT_RANK_LEN) {
        wire_put32(p, r->rank[i].rank);
        wire_put64(p + 4, r->rank[i].delivered);
        wire_put64(p + 12, r->rank[i].acked);
    }
    *len_p = len;
    return 0;
}

/* Reads a name of a u8 length into dst (NUL-terminated); NULL if short. */
static const uint8_t *
name_read(const uint8_t *p, const uint8_t *end, char *dst)
{
    size_t n;

    if (end - p < 1)
        return NULL;
    n = wire_get8(p);
    if (n > SCIMQ_REPORT_MAX_NAME || (size_t) (end - p - 1) < n)
        return NULL;
    memcpy(dst, p + 1, n);
    dst[n] = '\0';
    return p + 1 + n;
}

int
scimq_report_decode(const void *buf, size_t len, scimq_report_t *r,
                    const char **why_p)
{
    const uint8_t *p = buf, *end = p + len;
    const char *why = NULL;

    if (buf == NULL || r == NULL) {
        why = "no report";
        goto fail;
    }
    memset(r, 0, sizeof(*r));
    if (len > SCIMQ_REPORT_MAX_LEN) {
        why = "report longer than SCIMQ_REPORT_MAX_LEN bytes";
        goto fail;
    }
    if (len < 1 || wire_get8(p) != SCIMQ_REPORT_FORMAT) {
        why = "unknown report format (1 expected)";
        goto fail;
    }
    if (len < SCIMQ_REPORT_FIXED_LEN) {
        why = "report shorter than its fixed part";
        goto fail;
    }
    r->flags = wire_get8(p + 1);
    r->agent = wire_get16(p + 2);
    r->agents = wire_get16(p + 4);
    r->ranks = wire_get16(p + 6);
    r->period_ms = wire_get32(p + 8);
    r->pool_used = wire_get64(p + 12);
    r->pool_total = wire_get64(p + 20);
    r->service_count = wire_get64(p + 28);
    r->service_sum_us = wire_get64(p + 36);
    r->service_max_us = wire_get64(p + 44);
    p += 52;
    for (unsigned int b = 0; b < SCIMQ_REPORT_BUCKETS; b++, p += 8)
        r->service_bucket[b] = wire_get64(p);
    if ((p = name_read(p, end, r->job)) == NULL ||
        (p = name_read(p, end, r->provider)) == NULL || end - p < 2) {
        why = "report cut short in its names";
        goto fail;
    }
    r->nrank = wire_get16(p);
    p += 2;
    if (r->nrank > SCIMQ_REPORT_MAX_RANKS) {
        why = "more rank entries than SCIMQ_REPORT_MAX_RANKS (256)";
        goto fail;
    }
    if ((size_t) (end - p) != (size_t) r->nrank * SCIMQ_REPORT_RANK_LEN) {
        why = (size_t) (end - p) < (size_t) r->nrank * SCIMQ_REPORT_RANK_LEN
                  ? "report cut short in its rank entries"
                  : "bytes after the last rank entry";
        goto fail;
    }
    for (unsigned int i = 0; i < r->nrank; i++, p += SCIMQ_REPORT_RANK_LEN) {
        r->rank[i].rank = wire_get32(p);
        r->rank[i].delivered = wire_get64(p + 4);
        r->rank[i].acked = wire_get64(p + 12);
    }
    why = report_check(r);
    if (why == NULL)
        return 0;
fail:
    if (why_p != NULL)
        *why_p = why;
    return SCIMQ_EPROTO_ARGS;
}
