#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The network fuzzer (tests/fuzz/net_fuzz): valid sessions are recorded
# through a relay (a producer, a consumer and scimqctl's requests), then
# mutated copies (bytes flipped, truncations, length fields changed, frames
# duplicated, dropped and reordered, garbage) are replayed on many
# connections from 127.0.0.2 for SCIMQ_NET_FUZZ_SECONDS (20; `make
# net-fuzz-long` runs 600) while verified producer/consumer pairs run from
# 127.0.0.1.  The gateway must stay up, every pair must get everything,
# verified, and its RSS stay bounded.
. "$top_srcdir/tests/integration/lib.sh"
fuzz="$top_builddir/tests/fuzz/net_fuzz"
fz_secs=${SCIMQ_NET_FUZZ_SECONDS:-20}
conns=${SCIMQ_NET_FUZZ_CONNS:-48}
seed=${SCIMQ_NET_FUZZ_SEED:-$(date +%s)}
echo "# $fz_secs s, $conns connections, seed $seed"

rss_kib() {
    awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}

start_gateway --memory-limit 64MiB --set gateway_prefault=false \
    --set gateway_hello_timeout_ms=2000 --set gateway_idle_timeout_ms=5000
ctl="$bindir/scimqctl"
"$ctl" queue create fz --guaranteed --ack-timeout 5 > /dev/null || fail "create fz"
"$ctl" queue create fz.b --best-effort --max-bytes 1MiB > /dev/null || fail "create fz.b"

# --- Recording ----------------------------------------------------------------
mkdir "$workdir/rec"
# Bounded by its own time (90 s); SIGTERM ends it.
"$fuzz" record 0 127.0.0.1 "$GW_PORT" "$workdir/rec" 90 \
    > "$workdir/record.json" 2> "$workdir/record.err" &
rec_pid=$!
track "$rec_pid"
has_port() { [ -s "$workdir/record.json" ]; }
wait_until 10 "the relay did not start" has_port
rport=$(head -n 1 "$workdir/record.json" | jq -r .port)
rurl="scimq://127.0.0.1:$rport"
SCIMQ_URL=$rurl bounded 60 "$bindir/scimq-send" --queue fz --synthetic \
    --size 0:32KiB --count 40 --window 4 > /dev/null || fail "recorded producer"
SCIMQ_URL=$rurl bounded 60 "$bindir/scimq-send" --queue fz.b --streams 2 \
    --synthetic --size 1KiB --count 20 > /dev/null || fail "recorded producer (2)"
SCIMQ_URL=$rurl bounded 60 "$bindir/scimq-recv" --queue fz --count 40 \
    --credit 8 --verify > "$workdir/rec_recv.json" || fail "recorded consumer"
expect_eq "recorded consumer: verified" 40 "$(json_get "$workdir/rec_recv.json" .verified)"
SCIMQ_URL=$rurl bounded 60 "$bindir/scimq-recv" --queue fz.b --count 5 --reject \
    > /dev/null 2>&1 || true
for cmd in "ping" "stats" "queue list" "queue create fz.c --best-effort" \
    "queue close fz.c"; do
    # shellcheck disable=SC2086
    SCIMQ_URL=$rurl bounded 30 "$ctl" $cmd > /dev/null || fail "recorded scimqctl $cmd"
done
kill -TERM "$rec_pid"
wait "$rec_pid" || fail "relay"
n=$(ls "$workdir/rec" | wc -l)
[ "$n" -ge 6 ] || fail "only $n sessions recorded"
ok "$n sessions recorded"

# --- Fuzzing, with verified pairs alongside -----------------------------------
# The replayed PUTs land in the recorded queues: capped best-effort ones
# now, so the fuzzer's messages cannot fill the pool and back-pressure the
# pairs (that would be the gateway doing its job, for a peer with access).
"$ctl" queue delete fz > /dev/null || fail "delete fz"
"$ctl" queue create fz --best-effort --max-bytes 4MiB > /dev/null || fail "create fz"
rss0=$(rss_kib "$GW_PID")
bounded $((fz_secs + 60)) "$fuzz" replay 127.0.0.1 "$GW_PORT" "$workdir/rec" \
    "$fz_secs" "$conns" "$seed" 127.0.0.2 > "$workdir/fuzz.json" 2> "$workdir/fuzz.err" &
fuzz_pid=$!
track "$fuzz_pid"
pairs=0 rss_max=$rss0
end=$(($(date +%s) + fz_secs))
while [ "$(date +%s)" -lt "$end" ] || [ "$pairs" -eq 0 ]; do
    q=pair$pairs
    "$ctl" queue create "$q" --guaranteed > /dev/null || fail "create $q"
    bounded 120 "$bindir/scimq-recv" --queue "$q" --verify --until-eos \
        > "$workdir/precv.json" 2> "$workdir/precv.err" &
    prc=$!
    track "$prc"
    bounded 120 "$bindir/scimq-send" --queue "$q" --streams 2 --synthetic \
        --size 1KiB:256KiB --count 100 --close > "$workdir/psend.json" \
        2> "$workdir/psend.err" || { cat "$workdir/psend.err" "$workdir/psend.json" >&2; tail -5 "$workdir/gateway.err" >&2; fail "$q: sender"; }
    wait "$prc" || { cat "$workdir/precv.err" >&2; fail "$q: consumer"; }
    [ "$(json_get "$workdir/precv.json" .verified)" = 100 ] ||
        fail "$q: verified $(json_get "$workdir/precv.json" .verified) of 100"
    [ "$(json_get "$workdir/precv.json" .corrupt)" = 0 ] || fail "$q: corrupt messages"
    "$ctl" queue delete "$q" > /dev/null || fail "delete $q"
    kill -0 "$GW_PID" 2>/dev/null || fail "the gateway died"
    r=$(rss_kib "$GW_PID")
    [ "$r" -gt "$rss_max" ] && rss_max=$r
    pairs=$((pairs + 1))
done
wait "$fuzz_pid" || { cat "$workdir/fuzz.err" >&2; fail "net_fuzz replay"; }
ok "$pairs verified pairs of 100 messages got everything while fuzzed"
kill -0 "$GW_PID" 2>/dev/null || fail "the gateway died"
"$ctl" ping > /dev/null || fail "ping after the fuzzing"
ok "the gateway is up and answers"
cat "$workdir/fuzz.json"
c=$(json_get "$workdir/fuzz.json" .connections)
[ "$c" -ge 100 ] || fail "only $c fuzz connections"
ok "$c fuzz connections, $(json_get "$workdir/fuzz.json" .mutated_frames) mutated frames"
[ "$(json_get "$workdir/fuzz.json" .errors_total)" -gt 0 ] ||
    fail "the gateway reported no ERROR: the mutations reached nothing"
ok "errors by code: $(tail -n 1 "$workdir/fuzz.json" | jq -c .errors)"
echo "gateway RSS: $rss0 KiB before, at most $rss_max KiB during; STATS protocol_errors $(gw_stat .totals.protocol_errors)"
if [ "$sanitized" = no ]; then
    # The pool is 64 MiB; the rest (connections, buffers) must not grow
    # with the fuzzing's length.
    [ $((rss_max - rss0)) -lt 196608 ] || fail "RSS grew from $rss0 to $rss_max KiB"
    ok "RSS growth $((rss_max - rss0)) KiB is bounded"
fi
stop_gateway
echo "$checks checks passed"
