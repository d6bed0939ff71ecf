#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Parallel streams: one of a session's K TCP streams is cut mid-transfer
# (ss -K destroys the socket in the kernel, as a failing link would).  The
# session carries on over the other streams and reconnects the lost one;
# nothing is lost, on the producer side and on the consumer side.
. "$top_srcdir/tests/integration/lib.sh"
n=400

need_root "ss -K destroys sockets with CAP_NET_ADMIN"
need ss iproute2
# The probe matches no socket (TEST-NET-1); it fails only when the kernel
# cannot destroy sockets at all.
ss -K dst 192.0.2.1 > /dev/null 2> "$workdir/ss.err" ||
    { cat "$workdir/ss.err" >&2
      fail "ss -K cannot destroy sockets: the kernel needs CONFIG_INET_DIAG_DESTROY"; }

# cut_one PID: destroys one established TCP connection of process PID to
# the gateway (waiting up to 10 s for one to exist); prints its local port.
cut_one() {
    tries=0
    port=
    while [ -z "$port" ] && [ "$tries" -lt $((100 * mult)) ]; do
        port=$(ss -tnp state established "( dport = :$GW_PORT )" 2>/dev/null |
            grep "pid=$1," | awk '{print $3}' | head -1 | sed 's/.*://')
        [ -n "$port" ] || sleep 0.1
        tries=$((tries + 1))
    done
    [ -n "$port" ] || return 1
    ss -K state established "( sport = :$port and dport = :$GW_PORT )" \
        > /dev/null 2>&1
    echo "$port"
}

start_gateway
"$bindir/scimqctl" queue create cut --guaranteed --ack-timeout 60 > /dev/null || fail "create"

# Producer: 4 streams, paced so the cut lands mid-transfer.
"$bindir/scimq-send" --queue cut --streams 4 --synthetic --size 256KiB \
    --count "$n" --rate 50 --close > "$workdir/send.json" 2> "$workdir/send.err" &
send_pid=$!
track "$send_pid"
# Consumer: 4 streams, a little slower than the producer.
"$bindir/scimq-recv" --queue cut --streams 4 --verify --until-eos \
    --expect "$n" --process-ms 3 --seq-log "$workdir/seq" \
    > "$workdir/recv.json" 2> "$workdir/recv.err" &
recv_pid=$!
track "$recv_pid"

# Cut once the transfer (8 s at 50 messages/s) is under way on both sides:
# a stream cut while a client still connects fails the connect, by design.
q='.queues[] | select(.name=="cut") | .counters'
wait_until 60 "the transfer never started" stat_ge "$q.delivered" 10
p=$(cut_one "$send_pid") || fail "no producer stream to cut"
ok "producer stream from port $p cut"
p=$(cut_one "$recv_pid") || fail "no consumer stream to cut"
ok "consumer stream from port $p cut"
# STATS shows every stream's TCP state, sampled once a second by its worker.
tcp='[.connections_detail[] | select(.stream >= 0 and .tcp.cwnd > 0 and
    .tcp.rtt_us > 0 and (.tcp.limited | test("^(sndbuf|rwnd|cwnd|idle)$")))]
    | length'
wait_until 30 "no stream's TCP_INFO in STATS" stat_ge "$tcp" 4
ok "STATS: TCP state of $(gw_stat "$tcp") streams"

i=0
while kill -0 "$send_pid" 2>/dev/null || kill -0 "$recv_pid" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -gt $((1200 * mult)) ] && fail "transfer did not finish"
    sleep 0.1
done
wait "$send_pid" || { cat "$workdir/send.err" >&2; fail "producer failed"; }
wait "$recv_pid" || { cat "$workdir/recv.err" >&2; fail "consumer failed"; }
expect_eq "sent" "$n" "$(json_get "$workdir/send.json" .messages)"
expect_eq "verified distinct" "$n" "$(sort -nu "$workdir/seq" | wc -l)"
expect_eq "lost" 0 "$(json_get "$workdir/recv.json" .lost)"
expect_eq "corrupt" 0 "$(json_get "$workdir/recv.json" .corrupt)"
expect_eq "end of stream" true "$(json_get "$workdir/recv.json" .eos)"
# 4 + 4 streams, the queue create, this stats call, and 2 reconnections.
accepted=$(gw_stat .connections_accepted)
[ "$accepted" -ge 12 ] || fail "only $accepted connections: no stream reconnected"
ok "$accepted connections accepted (the cut streams reconnected)"
stop_gateway
echo "$checks checks passed"
