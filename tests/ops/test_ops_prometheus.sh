#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The gateway's /metrics under a real Prometheus (Debian's prometheus, its
# own configuration and database in the test directory, on loopback,
# scraping every second).  A known stream of messages goes through a
# guaranteed queue (scimq-send, then scimq-recv --verify), and Prometheus'
# HTTP API must return the series with exactly the numbers of that stream:
# messages and bytes put, ready, then acknowledged; the consumer's two
# streams with their TCP state while it is connected; the gateway's
# memory limit.  promtool must find the exposition well-formed, and the
# HTTP side must refuse anything but reading.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/ops/lib.sh"
need prometheus prometheus
need promtool prometheus
need python3 python3
count=${SCIMQ_TEST_OPS_COUNT:-300}
size=65536
q=ops.frames

start_http_gateway --memory-limit 256MiB --set gateway_http_cache_ms=200

# --- The endpoint itself ----------------------------------------------------
case "$HTTP" in
127.0.0.1:*) ok "a port alone listens on loopback ($HTTP)" ;;
*) fail "--http 0 listens on $HTTP, not on loopback" ;;
esac
curl -sS -o "$workdir/m0" -D "$workdir/h0" "$HTTP_URL/metrics" ||
    fail "GET /metrics"
grep -qi '^content-type: text/plain; version=0.0.4' "$workdir/h0" ||
    fail "/metrics content type: $(grep -i content-type "$workdir/h0")"
ok "/metrics is the text format 0.0.4"
promtool check metrics < "$workdir/m0" > "$workdir/promtool.out" 2>&1 || {
    cat "$workdir/promtool.out" >&2
    fail "promtool check metrics"
}
[ ! -s "$workdir/promtool.out" ] || {
    cat "$workdir/promtool.out" >&2
    fail "promtool has remarks"
}
ok "promtool check metrics: no remarks"
expect_eq "POST /metrics" 405 \
    "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$HTTP_URL/metrics")"
expect_eq "DELETE /api/stats" 405 \
    "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$HTTP_URL/api/stats")"
expect_eq "GET /admin" 404 \
    "$(curl -s -o /dev/null -w '%{http_code}' "$HTTP_URL/admin")"

# --- Prometheus ---------------------------------------------------------------
pport=$(free_port)
prom="http://127.0.0.1:$pport"
mkdir -p "$workdir/prom/data"
cat > "$workdir/prom/prometheus.yml" << EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: scimq
    static_configs:
      - targets: ['$HTTP']
EOF
prometheus --config.file="$workdir/prom/prometheus.yml" \
    --storage.tsdb.path="$workdir/prom/data" \
    --web.listen-address="127.0.0.1:$pport" --log.level=warn \
    > "$workdir/prom/log" 2>&1 &
prom_pid=$!
track "$prom_pid"
prom_ready() {
    kill -0 "$prom_pid" 2>/dev/null || {
        cat "$workdir/prom/log" >&2
        fail "prometheus exited"
    }
    curl -sf "$prom/-/ready" > /dev/null 2>&1
}
wait_until 60 "prometheus did not become ready" prom_ready
ok "prometheus $(prometheus --version 2>&1 | head -n 1 | cut -d' ' -f3) ready on 127.0.0.1:$pport"

# prom_value QUERY: the value of an instant query's first sample ("" if none).
prom_value() {
    curl -s --get --data-urlencode "query=$1" "$prom/api/v1/query" |
        jq -r '.data.result[0].value[1] // empty'
}
# prom_is QUERY VALUE: the query's value is VALUE.
prom_is() {
    [ "$(prom_value "$1")" = "$2" ]
}
# prom_expect WHAT QUERY VALUE: waits (bounded) for Prometheus to scrape it.
prom_expect() {
    wait_until 60 "$1: expected $3, Prometheus says '$(prom_value "$2")'" \
        prom_is "$2" "$3"
    ok "$1: $2 = $3"
}

prom_expect "target scraped" 'up{job="scimq"}' 1
prom_expect "memory limit" 'scimq_memory_limit_bytes' 268435456

# --- A known stream -----------------------------------------------------------
"$bindir/scimqctl" queue create "$q" --guaranteed --ack-timeout 120 > /dev/null ||
    fail "queue create"
bounded 300 "$bindir/scimq-send" --queue "$q" --streams 2 --synthetic \
    --size "$size" --count "$count" > "$workdir/send.json" 2> "$workdir/send.err" || {
    cat "$workdir/send.err" >&2
    fail "scimq-send"
}
expect_eq "sent" "$count" "$(json_get "$workdir/send.json" .messages)"
prom_expect "put" "scimq_queue_put_total{queue=\"$q\"}" "$count"
prom_expect "put bytes" "scimq_queue_put_bytes_total{queue=\"$q\"}" \
    $((count * size))
prom_expect "ready" "scimq_queue_ready_messages{queue=\"$q\"}" "$count"
prom_expect "in flight" "scimq_queue_in_flight_messages{queue=\"$q\"}" 0
prom_expect "acked before a consumer" "scimq_queue_acked_total{queue=\"$q\"}" 0

"$bindir/scimq-recv" --queue "$q" --streams 2 --verify --until-eos \
    > "$workdir/recv.json" 2> "$workdir/recv.err" &
recv_pid=$!
track "$recv_pid"
prom_expect "acked" "scimq_queue_acked_total{queue=\"$q\"}" "$count"
prom_expect "delivered" "scimq_queue_delivered_total{queue=\"$q\"}" "$count"
prom_expect "ready after" "scimq_queue_ready_messages{queue=\"$q\"}" 0
prom_expect "redelivered" "scimq_queue_redelivered_total{queue=\"$q\"}" 0
prom_expect "dead-lettered" "scimq_queue_dead_lettered_total{queue=\"$q\"}" 0
prom_expect "consumers" "scimq_queue_consumers{queue=\"$q\"}" 1

# The consumer's two streams, one session, with the kernel's TCP state.
session=$("$bindir/scimqctl" stats | jq -r \
    '[.connections_detail[] | select(.stream == 1)][0].session')
[ -n "$session" ] && [ "$session" != null ] || fail "no consumer session in STATS"
prom_expect "the session's streams" \
    "count(scimq_connection_info{session=\"$session\",state=\"established\"})" 2
prom_expect "their RTT series" \
    "count(scimq_connection_rtt_seconds{session=\"$session\"} > 0)" 2
prom_expect "their congestion windows" \
    "count(scimq_connection_cwnd_segments{session=\"$session\"} > 0)" 2
prom_expect "their congestion control named" \
    "count(scimq_connection_info{session=\"$session\",congestion!=\"\"})" 2
# Each payload went out on one of them: their bytes out cover the payloads.
prom_expect "bytes out on the streams cover the payloads" \
    "sum(scimq_connection_bytes_out_total{session=\"$session\"}) >= bool $((count * size))" 1

# The series API names every per-queue family.
curl -s --get --data-urlencode "match[]={__name__=~\"scimq_queue_.*\",queue=\"$q\"}" \
    "$prom/api/v1/series" | jq -r '.data[].__name__' | sort -u > "$workdir/series"
for s in ready_messages delayed_messages in_flight_messages bytes consumers \
    put_total put_bytes_total delivered_total delivered_bytes_total \
    acked_total nacked_total redelivered_total expired_total \
    dead_lettered_total info; do
    grep -qx "scimq_queue_$s" "$workdir/series" || fail "no series scimq_queue_$s"
done
ok "series API: the 15 per-queue families of $q"
expect_eq "queues series labels" "queue" "$(curl -s --get \
    --data-urlencode "match[]=scimq_queue_ready_messages" "$prom/api/v1/series" |
    jq -r '[.data[] | keys[] | select(. != "__name__" and . != "job" and . != "instance")] | unique | join(",")')"

# End of stream: the consumer verified every message once.
"$bindir/scimqctl" queue close "$q" > /dev/null || fail "queue close"
wait_until 120 "scimq-recv did not finish" sh -c "! kill -0 $recv_pid 2>/dev/null"
wait "$recv_pid" || {
    cat "$workdir/recv.err" >&2
    fail "scimq-recv failed"
}
expect_eq "verified" "$count" "$(json_get "$workdir/recv.json" .verified)"
expect_eq "corrupt" 0 "$(json_get "$workdir/recv.json" .corrupt)"
expect_eq "duplicates" 0 "$(json_get "$workdir/recv.json" .duplicates)"
prom_expect "its streams gone" \
    "count(scimq_connection_info{session=\"$session\"}) or vector(0)" 0

stop_pid "$prom_pid" prometheus
ok "prometheus stopped"
stop_gateway

# --- The snapshot cache -------------------------------------------------------
# Within gateway_http_cache_ms every answer is the same snapshot: a PUT
# meanwhile changes nothing, in /api/stats or /metrics.
start_http_gateway --set gateway_http_cache_ms=60000
"$bindir/scimqctl" queue create ops.cache > /dev/null || fail "queue create"
curl -sS "$HTTP_URL/api/stats" > "$workdir/s1.json" || fail "GET /api/stats"
bounded 60 "$bindir/scimq-send" --queue ops.cache --synthetic --size 1KiB \
    --count 5 > /dev/null 2>&1 || fail "scimq-send"
expect_eq "STATS sees the PUTs" 5 \
    "$(gw_stat '.queues[] | select(.name == "ops.cache") | .ready')"
curl -sS "$HTTP_URL/api/stats" > "$workdir/s2.json" || fail "GET /api/stats"
expect_eq "cached snapshot: same time" "$(jq .uptime_s "$workdir/s1.json")" \
    "$(jq .uptime_s "$workdir/s2.json")"
expect_eq "cached snapshot: ready still" 0 \
    "$(jq '.queues[] | select(.name == "ops.cache") | .ready' "$workdir/s2.json")"
curl -sS "$HTTP_URL/metrics" > "$workdir/m2" || fail "GET /metrics"
grep -qx 'scimq_queue_ready_messages{queue="ops.cache"} 0' "$workdir/m2" ||
    fail "/metrics is not the cached snapshot"
ok "/metrics from the same snapshot"
stop_gateway

# A bad --http stops the gateway at start, saying why.
if bounded 30 "$gwbin" --listen 127.0.0.1:0 --http 'no:where' \
    > /dev/null 2> "$workdir/bad.err"; then
    fail "the gateway started with --http no:where"
fi
grep -q -- "--http: bad address 'no:where'" "$workdir/bad.err" ||
    fail "no reason given: $(cat "$workdir/bad.err")"
ok "--http no:where refused at start"
echo "$checks checks passed"
