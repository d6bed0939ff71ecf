#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Stopping with leases held: SIGINT, a second SIGTERM and the drain timeout
# each end the gateway promptly (it used to deadlock when a closing
# connection requeued messages for a worker that had already stopped), and
# every connection is told BYE first.
. "$top_srcdir/tests/integration/lib.sh"
scimp="$bindir/scimq-scimp"
need bash bash # /dev/tcp

# leases_held: a gateway with one worker, two consumers that never settle
# (credit 4 each) and a raw connection that waits for what the gateway says.
leases_held() {
    start_gateway --workers 1 "$@"
    "$bindir/scimqctl" queue create q --guaranteed > /dev/null || fail "create"
    bounded 60 "$bindir/scimq-send" --queue q --synthetic --size 64KiB \
        --count 20 > /dev/null || fail "send"
    for i in 1 2; do
        "$bindir/scimq-recv" --queue q --no-ack --linger 60 --credit 4 \
            > "$workdir/recv$i.json" 2> /dev/null &
        track $!
    done
    "$scimp" gen --count 0 --only HELLO -o "$workdir/hello" 2> /dev/null
    bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 3
             cat "$2" >&3
             timeout "$3" cat <&3 > "$4"' raw "$GW_PORT" "$workdir/hello" \
        $((30 * mult)) "$workdir/raw.bin" &
    raw_pid=$!
    track "$raw_pid"
    wait_until 30 "consumers never held 8 leases" stat_ge .totals.in_flight 8
    ok "8 messages leased to consumers that never settle"
}

# gone_within SECONDS WHAT: the gateway exits in time, with its summary.
gone_within() {
    i=0
    while kill -0 "$GW_PID" 2>/dev/null; do
        i=$((i + 1))
        [ "$i" -gt $(($1 * 10 * mult)) ] && fail "$2: gateway still running after $1 s (deadlock?)"
        sleep 0.1
    done
    wait "$GW_PID" && rc=0 || rc=$?
    ok "$2: gateway exited (status $rc)"
    expect_eq "$2: summary" scimq-gateway "$(json_get "$workdir/gateway.out" .tool)"
    expect_eq "$2: exit status" "$3" "$rc"
    wait "$raw_pid" 2>/dev/null || true
    "$scimp" dump "$workdir/raw.bin" > "$workdir/raw.txt" 2>&1 || true
    grep -q WELCOME "$workdir/raw.txt" || fail "$2: no WELCOME on the raw connection"
    grep -q BYE "$workdir/raw.txt" || fail "$2: no BYE before the close"
    ok "$2: BYE sent before closing"
}

leases_held
kill -INT "$GW_PID"
gone_within 5 SIGINT 0

leases_held
kill -TERM "$GW_PID"
sleep 0.5
kill -0 "$GW_PID" 2>/dev/null || fail "SIGTERM: gateway did not drain (leases are held)"
kill -TERM "$GW_PID"
gone_within 5 "second SIGTERM" 0

leases_held --set gateway_drain_timeout_ms=1000
kill -TERM "$GW_PID"
gone_within 10 "drain timeout" 1
echo "$checks checks passed"
