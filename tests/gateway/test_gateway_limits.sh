#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The gateway's limits against badly behaved peers (tests/gateway/gw_peer),
# each while a verified producer/consumer pair gets everything through:
# - a peer that sends PINGs and never reads: its replies are capped
#   (gateway_max_output), it is no longer read, then closed past
#   gateway_output_timeout_ms; the gateway's RSS stays bounded.
. "$top_srcdir/tests/integration/lib.sh"
peer="$top_builddir/tests/gateway/gw_peer"

# rss_kib PID: resident set size in KiB.
rss_kib() {
    awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}

# pair QUEUE COUNT: sends COUNT self-verifying messages and receives them
# all, checked; fails on any loss or corruption.
pair() {
    "$bindir/scimqctl" queue create "$1" --guaranteed > /dev/null ||
        fail "create $1"
    bounded 120 "$bindir/scimq-recv" --queue "$1" --verify --until-eos \
        > "$workdir/recv.$1.json" 2> "$workdir/recv.$1.err" &
    pair_recv=$!
    track "$pair_recv"
    bounded 120 "$bindir/scimq-send" --queue "$1" --synthetic \
        --size 1KiB:256KiB --count "$2" --close > "$workdir/send.$1.json" \
        2> "$workdir/send.$1.err" || { cat "$workdir/send.$1.err" >&2; fail "$1: sender"; }
    wait "$pair_recv" || { cat "$workdir/recv.$1.err" >&2; fail "$1: consumer"; }
    expect_eq "$1: sent" "$2" "$(json_get "$workdir/send.$1.json" .messages)"
    expect_eq "$1: received" "$2" "$(json_get "$workdir/recv.$1.json" .messages)"
    expect_eq "$1: corrupt" 0 "$(json_get "$workdir/recv.$1.json" .corrupt)"
    expect_eq "$1: end of stream" true "$(json_get "$workdir/recv.$1.json" .eos)"
}

# --- 1. A peer that never reads its PONGs -----------------------------------
start_gateway --memory-limit 64MiB --set gateway_prefault=false \
    --set gateway_max_output=1MiB --set gateway_output_timeout_ms=2000 \
    --set gateway_hello_timeout_ms=60000
"$bindir/scimqctl" ping > /dev/null || fail "ping"
rss0=$(rss_kib "$GW_PID")
bounded 60 "$peer" pings 127.0.0.1 "$GW_PORT" 30 > "$workdir/pings.json" &
pings_pid=$!
track "$pings_pid"
pair noread 200
wait "$pings_pid" || fail "gw_peer pings"
expect_eq "the non-reader was closed" true "$(json_get "$workdir/pings.json" .closed)"
rss1=$(rss_kib "$GW_PID")
echo "RSS ${rss0} KiB -> ${rss1} KiB; the peer sent $(json_get "$workdir/pings.json" .pings) PINGs"
if [ "$sanitized" = no ]; then
    # Unbounded, this grew by GiBs in seconds; the cap plus kernel socket
    # buffers and the pair's traffic stay far below 128 MiB.
    [ $((rss1 - rss0)) -lt 131072 ] || fail "RSS grew from $rss0 to $rss1 KiB"
    ok "RSS growth $((rss1 - rss0)) KiB is bounded"
fi
expect_eq "output rejections" 1 "$(gw_stat .rejections.output)"
grep -q "does not read its replies" "$workdir/gateway.err" ||
    fail "no log line for the closed non-reader"
ok "the close is logged"
"$bindir/scimqctl" ping > /dev/null || fail "ping after the flood"
ok "a well-behaved ping works"
stop_gateway

# --- 2. 1,000 unauthenticated connections from one address ------------------
start_gateway --memory-limit 64MiB --set gateway_prefault=false \
    --set gateway_hello_timeout_ms=60000
# Held until the pair is done (SIGTERM), at most 120 s.
"$peer" hold 127.0.0.1 "$GW_PORT" 1000 120 127.0.0.2 > "$workdir/hold.json" &
hold_pid=$!
track "$hold_pid"
wait_until 30 "the gateway did not refuse 936 of 1000 connections" \
    stat_eq '.rejections.unauth + .rejections.per_peer' 936
ok "936 connections refused"
"$bindir/scimqctl" ping > /dev/null || fail "ping during the flood"
ok "a well-behaved ping works during the flood"
pair unauth 200
kill -0 "$hold_pid" || fail "the flood ended before the pair"
kill -TERM "$hold_pid"
wait "$hold_pid" || fail "gw_peer hold"
expect_eq "flood: connected" 1000 "$(json_get "$workdir/hold.json" .connected)"
expect_eq "flood: closed by the gateway" 936 "$(json_get "$workdir/hold.json" .closed_by_gateway)"
expect_eq "flood: held (gateway_max_unauth_per_peer)" 64 "$(json_get "$workdir/hold.json" .held)"
grep -q "refusing connections from 127.0.0.2" "$workdir/gateway.err" ||
    fail "no log line for the refused connections"
ok "the refusals are logged"
stop_gateway

# --- 3. No more than gateway_max_conn_per_peer from one address --------------
start_gateway --memory-limit 64MiB --set gateway_prefault=false \
    --set gateway_hello_timeout_ms=60000 --set gateway_max_conn_per_peer=16 \
    --set gateway_max_unauth_per_peer=1000
bounded 30 "$peer" hold 127.0.0.1 "$GW_PORT" 50 3 127.0.0.2 \
    > "$workdir/hold2.json" || fail "gw_peer hold"
expect_eq "per peer: held" 16 "$(json_get "$workdir/hold2.json" .held)"
expect_eq "per peer: refused" 34 "$(gw_stat .rejections.per_peer)"
expect_eq "per peer: none refused as unauthenticated" 0 "$(gw_stat .rejections.unauth)"
"$bindir/scimqctl" ping > /dev/null || fail "ping after the per-peer refusals"
ok "a well-behaved ping works"
stop_gateway

# --- 4. File descriptors ---------------------------------------------------------
# cpu_ticks PID: user + system CPU time so far, in clock ticks.
cpu_ticks() {
    awk '{ print $14 + $15 }' "/proc/$1/stat"
}
# no_spin WHAT: the gateway takes well under a core over 2 s (a spinning
# worker alone would burn 2 s: 200 ticks at 100 Hz).
no_spin() {
    t0=$(cpu_ticks "$GW_PID")
    sleep 2
    t1=$(cpu_ticks "$GW_PID")
    echo "gateway CPU over 2 s $1: $((t1 - t0)) ticks"
    [ $((t1 - t0)) -lt 100 ] || fail "the gateway spins $1: $((t1 - t0)) ticks in 2 s"
}
fd_count() {
    ls "/proc/$1/fd" | wc -l
}
need prlimit util-linux
# (a) Started with 256 descriptors: the connections it admits are bounded
# below that (headroom for its own files), and a flood beyond it is
# refused without wedging it.
cat > "$workdir/gw-nofile" << WRAP
#!/bin/sh
exec prlimit --nofile=256:256 "$gwbin" "\$@"
WRAP
chmod +x "$workdir/gw-nofile"
gwbin_real=$gwbin
gwbin="$workdir/gw-nofile"
start_gateway --memory-limit 64MiB --set gateway_prefault=false \
    --set gateway_hello_timeout_ms=60000 --set gateway_max_conn_per_peer=1000 \
    --set gateway_max_unauth_per_peer=1000
gwbin=$gwbin_real
expect_eq "descriptor limit" 256 "$(gw_stat .limits.nofile)"
maxc=$(gw_stat .limits.max_connections)
[ "$maxc" -gt 64 ] && [ "$maxc" -lt 256 ] || fail "max connections $maxc for 256 descriptors"
ok "at most $maxc connections for 256 descriptors"
grep -q "file descriptors: limit 256; at most $maxc connections" "$workdir/gateway.err" ||
    fail "no log line for the lowered connection limit"
ok "the lowered limit is logged"
fd0=$(fd_count "$GW_PID")
"$peer" hold 127.0.0.1 "$GW_PORT" 600 120 127.0.0.2 > "$workdir/hold3.json" &
hold_pid=$!
track "$hold_pid"
# settled FILE: gw_peer hold has connected everything and seen no close
# for a second (the gateway's own STATS cannot be asked: it is full).
settled() {
    grep -q '"settled":true' "$1"
}
wait_until 60 "the flood did not settle" settled "$workdir/hold3.json"
# Every admitted connection counts: the gateway's own (STATS is asked
# over one) and, under a sanitizer, a descriptor of its runtime may take
# one or two of the admitted places.
held=$(grep '"settled":true' "$workdir/hold3.json" | jq .held)
[ "$held" -le "$maxc" ] && [ "$held" -ge $((maxc - 2)) ] ||
    fail "fd flood: $held connections held, expected $maxc (or up to 2 fewer)"
ok "fd flood: $held connections held while flooding (at most $maxc)"
no_spin "while a flood is held"
ok "no spin while flooded"
kill -TERM "$hold_pid"
wait "$hold_pid" || fail "gw_peer hold"
expect_eq "fd flood: connected" 600 "$(json_get "$workdir/hold3.json" .connected)"
expect_eq "fd flood: closed by the gateway" "$((600 - held))" "$(json_get "$workdir/hold3.json" .closed_by_gateway)"
expect_eq "fd flood: refused" "$((600 - held))" "$(gw_stat .connections_refused)"
wait_until 30 "the flood's connections were not released" stat_eq .connections 1
"$bindir/scimqctl" ping > /dev/null || fail "ping after the flood"
ok "a ping works after the flood"
pair fds 100
fd1=$(fd_count "$GW_PID")
[ "$fd1" -le $((fd0 + 4)) ] || fail "descriptors not released: $fd0 before, $fd1 after"
ok "descriptors released ($fd0 before, $fd1 after)"
stop_gateway

# (b) The limit lowered under a running gateway (prlimit --pid), so that
# accept itself runs out: the gateway pauses accepting instead of
# spinning, and serves again once the flood is gone.
start_gateway --memory-limit 64MiB --set gateway_prefault=false \
    --set gateway_hello_timeout_ms=60000 --set gateway_max_conn_per_peer=1000 \
    --set gateway_max_unauth_per_peer=1000
prlimit --pid "$GW_PID" --nofile=128: || fail "prlimit --pid"
fd0=$(fd_count "$GW_PID")
"$peer" hold 127.0.0.1 "$GW_PORT" 400 120 127.0.0.2 > "$workdir/hold4.json" &
hold_pid=$!
track "$hold_pid"
wait_until 60 "the flood did not settle" settled "$workdir/hold4.json"
no_spin "out of descriptors"
ok "no spin out of descriptors"
kill -TERM "$hold_pid"
wait "$hold_pid" || fail "gw_peer hold"
# (Held counts connections waiting in the kernel's backlog too.)
echo "flood at EMFILE: held $(json_get "$workdir/hold4.json" .held), closed $(json_get "$workdir/hold4.json" .closed_by_gateway)"
ping_quiet() {
    "$bindir/scimqctl" ping > /dev/null 2>&1
}
wait_until 30 "no ping after the flood" ping_quiet
ok "a ping works after the flood, at 128 descriptors"
# Connections left in a paused worker's backlog are accepted in one burst
# when it resumes, and at 128 descriptors that burst runs out again; with
# the limit raised (as an operator would) the pair must simply work.
prlimit --pid "$GW_PID" --nofile=1024: || fail "prlimit --pid"
pair emfile 100
echo "fds rejections (accept paused): $(gw_stat .rejections.fds)"
fd1=$(fd_count "$GW_PID")
[ "$fd1" -le $((fd0 + 4)) ] || fail "descriptors not released: $fd0 before, $fd1 after"
ok "descriptors released ($fd0 before, $fd1 after)"
stop_gateway

# --- 5. A slow-drip PUT ------------------------------------------------------------
# One payload byte every 100 ms resets the idle timeout every time; the
# minimum rate (64 KiB/s after the grace) cuts it.
start_gateway --memory-limit 64MiB --set gateway_prefault=false \
    --set gateway_min_rate_grace_ms=2000
"$bindir/scimqctl" queue create drip --guaranteed > /dev/null || fail "create drip"
bounded 90 "$peer" drip 127.0.0.1 "$GW_PORT" drip 100 60 > "$workdir/drip.json" &
drip_pid=$!
track "$drip_pid"
pair slowdrip 200
wait "$drip_pid" || fail "gw_peer drip"
expect_eq "slow drip: cut" true "$(json_get "$workdir/drip.json" .closed)"
expect_eq "slow drip: error" SCIMQ_ETIMEDOUT "$(json_get "$workdir/drip.json" .error)"
case "$(json_get "$workdir/drip.json" .text)" in
*"too slow"*) ok "the ERROR says too slow" ;;
*) fail "ERROR text: $(json_get "$workdir/drip.json" .text)" ;;
esac
echo "slow drip cut after $(json_get "$workdir/drip.json" .after_ms) ms, $(json_get "$workdir/drip.json" .dripped) bytes"
expect_eq "slow rejections" 1 "$(gw_stat .rejections.slow)"
expect_eq "nothing of the drip queued" 0 "$(gw_stat '.queues[] | select(.name == "drip") | .ready')"
stop_gateway

# --- 6. Token files others can read are refused ------------------------------
printf 'sesame-%s\n' "$$" > "$workdir/token"
chmod 644 "$workdir/token"
if "$gwbin" --listen 127.0.0.1:0 --token-file "$workdir/token" \
    > /dev/null 2> "$workdir/token.err"; then
    fail "the gateway started with a world-readable token file"
fi
grep -q "accessible by group or others: refused (chmod 600" "$workdir/token.err" ||
    fail "no clear message for a world-readable token: $(cat "$workdir/token.err")"
ok "the gateway refuses a token file of mode 644, saying why"
chmod 640 "$workdir/token"
"$gwbin" --listen 127.0.0.1:0 --token-file "$workdir/token" > /dev/null 2>&1 &&
    fail "the gateway started with a group-readable token file"
ok "the gateway refuses a token file of mode 640"
chmod 600 "$workdir/token"
start_gateway --token-file "$workdir/token"
bounded 30 "$bindir/scimqctl" --token-file "$workdir/token" ping > /dev/null ||
    fail "ping with a 600 token"
ok "a token file of mode 600 is used"
cp "$workdir/token" "$workdir/token.644"
chmod 644 "$workdir/token.644"
if bounded 30 "$bindir/scimqctl" --token-file "$workdir/token.644" ping \
    > "$workdir/ctl.json" 2> "$workdir/ctl.err"; then
    fail "a client used a world-readable token file"
fi
grep -q "token file .*token.644 is accessible by group or others" "$workdir/ctl.err" ||
    fail "no clear client message: $(cat "$workdir/ctl.err")"
ok "a client refuses a token file of mode 644, saying why"
expect_eq "so it is not authenticated" SCIMQ_EAUTH "$(json_get "$workdir/ctl.json" .error)"
stop_gateway

echo "$checks checks passed"
