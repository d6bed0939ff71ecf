/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/net.h"
#include "connreg.h"

void
gw_connreg_init(struct gw_connreg *r, uint64_t now)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->lock, NULL);
    r->rate_t_ms = now;
}

void
gw_connreg_destroy(struct gw_connreg *r)
{
    struct gw_peer_count *p, *tmp;

    HASH_ITER(hh, r->peers, p, tmp)
    {
        HASH_DEL(r->peers, p);
        free(p);
    }
    pthread_mutex_destroy(&r->lock);
}

/* Admits ci against its address's counts (lock held). */
static enum gw_reject
admit_locked(struct gw_connreg *r, struct gw_conn_info *ci,
             const struct gw_peer_limits *lim)
{
    struct gw_peer_count *p;

    HASH_FIND_STR(r->peers, ci->addr, p);
    if (p != NULL && p->conns >= lim->per_peer)
        return GW_REJECT_PER_PEER;
    if (r->unauth >= lim->unauth ||
        (p != NULL && p->unauth >= lim->unauth_per_peer))
        return GW_REJECT_UNAUTH;
    if (p == NULL) {
        p = calloc(1, sizeof(*p));
        if (p == NULL)
            return GW_REJECT_PER_PEER; /* cannot count it: not admitted */
        memcpy(p->addr, ci->addr, sizeof(p->addr));
        HASH_ADD_STR(r->peers, addr, p);
    }
    p->conns++;
    p->unauth++;
    r->unauth++;
    ci->counted = ci->unauth = true;
    return GW_REJECT_COUNT;
}

enum gw_reject
gw_connreg_add(struct gw_connreg *r, struct gw_conn_info *ci,
               const struct gw_peer_limits *lim)
{
    enum gw_reject why;

    pthread_mutex_lock(&r->lock);
    HASH_ADD(hh, r->all, id, sizeof(ci->id), ci);
    r->accepted++;
    why = admit_locked(r, ci, lim);
    pthread_mutex_unlock(&r->lock);
    if (why != GW_REJECT_COUNT)
        atomic_fetch_add(&r->rejections[why], 1);
    return why;
}

/* Takes ci off its address's counts (lock held). */
static void
uncount_locked(struct gw_connreg *r, struct gw_conn_info *ci, bool all)
{
    struct gw_peer_count *p;

    if (!ci->counted)
        return;
    HASH_FIND_STR(r->peers, ci->addr, p);
    if (p == NULL)
        return;
    if (ci->unauth) {
        p->unauth--;
        r->unauth--;
        ci->unauth = false;
    }
    if (all) {
        ci->counted = false;
        if (--p->conns == 0) {
            HASH_DEL(r->peers, p);
            free(p);
        }
    }
}

void
gw_connreg_authed(struct gw_connreg *r, struct gw_conn_info *ci)
{
    pthread_mutex_lock(&r->lock);
    uncount_locked(r, ci, false);
    pthread_mutex_unlock(&r->lock);
}

void
gw_connreg_remove(struct gw_connreg *r, struct gw_conn_info *ci)
{
    pthread_mutex_lock(&r->lock);
    uncount_locked(r, ci, true);
    HASH_DEL(r->all, ci);
    r->bytes_in += ci->bytes_in;
    r->bytes_out += ci->bytes_out;
    r->frames_in += ci->frames_in;
    r->frames_out += ci->frames_out;
    pthread_mutex_unlock(&r->lock);
}

void
gw_connreg_joined(struct gw_connreg *r, struct gw_conn_info *ci,
                  const uint8_t sid[SCIMQ_PROTO_SESSION_ID_LEN], int stream)
{
    pthread_mutex_lock(&r->lock);
    memcpy(ci->session_id, sid, sizeof(ci->session_id));
    ci->stream = stream;
    ci->in_session = true;
    pthread_mutex_unlock(&r->lock);
}

/* Bytes in and out so far, closed connections included (lock held). */
static void
totals_locked(struct gw_connreg *r, uint64_t *in, uint64_t *out, uint64_t *fin,
              uint64_t *fout)
{
    struct gw_conn_info *ci, *tmp;

    *in = r->bytes_in;
    *out = r->bytes_out;
    *fin = r->frames_in;
    *fout = r->frames_out;
    HASH_ITER(hh, r->all, ci, tmp)
    {
        *in += ci->bytes_in;
        *out += ci->bytes_out;
        *fin += ci->frames_in;
        *fout += ci->frames_out;
    }
}

void
gw_connreg_rates(struct gw_connreg *r, uint64_t now)
{
    uint64_t in, out, fin, fout;

    pthread_mutex_lock(&r->lock);
    if (now - r->rate_t_ms >= 1000) {
        totals_locked(r, &in, &out, &fin, &fout);
        r->rate_in_bps = (double) (in - r->rate_in_last) * 1000.0 /
                         (double) (now - r->rate_t_ms);
        r->rate_out_bps = (double) (out - r->rate_out_last) * 1000.0 /
                          (double) (now - r->rate_t_ms);
        r->rate_in_last = in;
        r->rate_out_last = out;
        r->rate_t_ms = now;
    }
    pthread_mutex_unlock(&r->lock);
}

void
gw_connreg_totals_json(struct gw_connreg *r, json_t *totals)
{
    json_object_set_new(totals, "protocol_errors",
                        json_integer((json_int_t) r->protocol_errors));
}

static const char *const reject_names[GW_REJECT_COUNT] = {
    [GW_REJECT_PER_PEER] = "per_peer", /* refused at accept */
    [GW_REJECT_UNAUTH] = "unauth",     /* refused at accept */
    [GW_REJECT_OUTPUT] = "output",     /* closed */
    [GW_REJECT_FDS] = "fds",           /* accepting paused */
    [GW_REJECT_SLOW] = "slow",         /* closed */
};

/* The last TCP_INFO sample: what the kernel said about the stream, and
 * what held its sender back (common/net.h, scimq__sock_limit). */
static json_t *
tcp_json(const struct gw_conn_info *ci)
{
    uint64_t busy = ci->busy_us, rwnd = ci->rwnd_limited_us,
             sndbuf = ci->sndbuf_limited_us;

    return json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s}", "rtt_us",
        (json_int_t) ci->rtt_us, "retransmits", (json_int_t) ci->retransmits,
        "cwnd", (json_int_t) ci->cwnd, "delivery_rate_Bps",
        (json_int_t) ci->delivery_rate, "busy_us", (json_int_t) busy,
        "rwnd_limited_us", (json_int_t) rwnd, "sndbuf_limited_us",
        (json_int_t) sndbuf, "limited", scimq__sock_limit(busy, rwnd, sndbuf));
}

void
gw_connreg_json(struct gw_connreg *r, json_t *root)
{
    json_t *conns = json_array();
    struct gw_conn_info *ci, *tmp;
    uint64_t in, out, fin, fout;

    pthread_mutex_lock(&r->lock);
    totals_locked(r, &in, &out, &fin, &fout);
    HASH_ITER(hh, r->all, ci, tmp)
    {
        char sid[2 * SCIMQ_PROTO_SESSION_ID_LEN + 1] = "";

        if (ci->in_session)
            for (int i = 0; i < SCIMQ_PROTO_SESSION_ID_LEN; i++)
                snprintf(sid + 2 * i, 3, "%02x", ci->session_id[i]);
        json_array_append_new(
            conns,
            json_pack("{s:I, s:i, s:s, s:s, s:i, s:I, s:I, s:I, s:I, s:i, "
                      "s:i, s:s}",
                      "id", (json_int_t) ci->id, "worker", ci->worker, "peer",
                      ci->peer, "session", sid, "stream",
                      ci->in_session ? ci->stream : -1, "bytes_in",
                      (json_int_t) ci->bytes_in, "bytes_out",
                      (json_int_t) ci->bytes_out, "frames_in",
                      (json_int_t) ci->frames_in, "frames_out",
                      (json_int_t) ci->frames_out, "sndbuf", ci->sndbuf,
                      "rcvbuf", ci->rcvbuf, "congestion", ci->congestion));
        if (!ci->admin)
            json_object_set_new(
                json_array_get(conns, json_array_size(conns) - 1), "tcp",
                tcp_json(ci));
    }
    json_object_set_new(root, "connections",
                        json_integer((json_int_t) HASH_COUNT(r->all)));
    json_object_set_new(root, "connections_accepted",
                        json_integer((json_int_t) r->accepted));
    json_object_set_new(root, "connections_refused",
                        json_integer((json_int_t) r->refused));
    json_object_set_new(root, "bytes_in", json_integer((json_int_t) in));
    json_object_set_new(root, "bytes_out", json_integer((json_int_t) out));
    json_object_set_new(root, "rate_in_Bps", json_real(r->rate_in_bps));
    json_object_set_new(root, "rate_out_Bps", json_real(r->rate_out_bps));
    json_object_set_new(root, "frames_in", json_integer((json_int_t) fin));
    json_object_set_new(root, "frames_out", json_integer((json_int_t) fout));
    json_object_set_new(root, "auth_failures",
                        json_integer((json_int_t) r->auth_failures));
    pthread_mutex_unlock(&r->lock);
    json_object_set_new(root, "connections_detail", conns);
    conns = json_object();
    for (int i = 0; i < GW_REJECT_COUNT; i++)
        json_object_set_new(conns, reject_names[i],
                            json_integer((json_int_t) r->rejections[i]));
    json_object_set_new(root, "rejections", conns);
}
