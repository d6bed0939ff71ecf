#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The journal keeps its promise under crashes: while a producer streams
# self-verifying messages of mixed sizes into a queue fanned out to a
# second one, and a consumer of each acknowledges as it goes, the gateway
# is SIGKILLed at random moments and restarted on the same journal, many
# times.  Every message the producer got a PUT_OK for reaches both
# consumers (duplicates are allowed: messages not yet acknowledged when a
# gateway died are delivered again).  Segments are small (2 MiB), so that
# segments roll, are dropped, and are written again into the files of
# dropped ones (spares) between the crashes, and crashes hit all of it.
. "$top_srcdir/tests/integration/lib.sh"
n=${SCIMQ_TEST_CRASH_COUNT:-1200}
kills=${SCIMQ_TEST_CRASH_KILLS:-25}
durability=${SCIMQ_TEST_CRASH_DURABILITY:-sync}
segment=${SCIMQ_TEST_CRASH_SEGMENT:-2MiB}
journal="$workdir/journal"

# The first start picks a free port; every restart takes the same one.
start_gateway --journal-dir "$journal" --durability "$durability" \
    --memory-limit 256MiB --set gateway_prefault=false \
    --set "gateway_journal_segment=$segment"
port=$GW_PORT
restart() {
    "$gwbin" --listen "127.0.0.1:$port" --port-file "$workdir/gateway.port" \
        --journal-dir "$journal" --durability "$durability" \
        --memory-limit 256MiB --set gateway_prefault=false \
        --set "gateway_journal_segment=$segment" \
        >> "$workdir/gateway.out" 2>> "$workdir/gateway.err" &
    GW_PID=$!
    track "$GW_PID"
    i=0
    while [ ! -s "$workdir/gateway.port" ]; do
        i=$((i + 1))
        [ "$i" -gt $((100 * mult)) ] && { tail "$workdir/gateway.err" >&2; fail "restart failed"; }
        sleep 0.05
    done
}
"$bindir/scimqctl" queue create a --guaranteed --ack-timeout 10 > /dev/null || fail "create a"
"$bindir/scimqctl" queue create b --guaranteed --ack-timeout 10 > /dev/null || fail "create b"
"$bindir/scimqctl" queue bind a b > /dev/null || fail "bind"

"$bindir/scimq-send" --queue a --streams 2 --synthetic --size 4KiB:256KiB \
    --count "$n" --rate 60 > "$workdir/send.json" 2> "$workdir/send.err" &
send_pid=$!
track "$send_pid"
# Consumers a little slower than the producer: a backlog is always there
# for a crash to catch.
for q in a b; do
    "$bindir/scimq-recv" --queue "$q" --streams 2 --verify --until-eos \
        --process-ms 20 \
        --seq-log "$workdir/seq.$q" > "$workdir/recv.$q.json" \
        2> "$workdir/recv.$q.err" &
    eval "recv_$q=\$!"
    track $!
done

k=0
spare_lives=0
while [ "$k" -lt "$kills" ]; do
    # 0.3 .. 1.2 s of normal life (times the multiplier: a sanitizer
    # build needs that much longer to recover, reconnect and confirm; a
    # life shorter than that would kill every resent PUT again until the
    # producer gives it up), then SIGKILL.
    ms=$(( ($(od -An -N2 -tu2 /dev/urandom) % 900 + 300) * mult ))
    sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
    # Which lives die with a spare file on disk (a dropped segment kept
    # for reuse; the last life may have taken every spare back).
    find "$journal" -name '*.spare' | grep -q . && spare_lives=$((spare_lives + 1))
    kill -KILL "$GW_PID"
    wait "$GW_PID" 2> /dev/null || true
    rm -f "$workdir/gateway.port"
    k=$((k + 1))
    restart
done
ok "$k SIGKILLs, each followed by a restart on the same journal"
recovered=$(grep -c 'recovered [1-9]' "$workdir/gateway.err" || true)
[ "$recovered" -ge 1 ] || fail "no restart recovered a message"
ok "$recovered restarts recovered messages from the journal"

bounded 300 sh -c "while kill -0 $send_pid 2>/dev/null; do sleep 0.2; done"
wait "$send_pid" || { tail "$workdir/send.err" >&2; fail "producer failed"; }
expect_eq "confirmed" "$n" "$(json_get "$workdir/send.json" .messages)"
"$bindir/scimqctl" queue close a > /dev/null || fail "close a"
"$bindir/scimqctl" queue close b > /dev/null || fail "close b"
for q in a b; do
    eval "pid=\$recv_$q"
    bounded 300 sh -c "while kill -0 $pid 2>/dev/null; do sleep 0.2; done"
    wait "$pid" || { tail "$workdir/recv.$q.err" >&2; fail "consumer of $q failed"; }
    expect_eq "$q: corrupt" 0 "$(json_get "$workdir/recv.$q.json" .corrupt)"
    sort -n -u "$workdir/seq.$q" > "$workdir/uniq.$q"
    expect_eq "$q: distinct confirmed messages delivered" "$n" "$(wc -l < "$workdir/uniq.$q")"
    expect_eq "$q: highest" $((n - 1)) "$(tail -n 1 "$workdir/uniq.$q")"
    ok "$q: $(($(wc -l < "$workdir/seq.$q") - n)) duplicates (unacknowledged when a gateway died)"
done
reused=$(grep -c 'earlier use' "$workdir/gateway.err" || true)
# Once everything is settled, the segments are dropped: the last two
# are kept as spares, those of earlier lives too (all of this format).
has_spare() { find "$journal" -name '*.spare' | grep -q .; }
wait_until 10 "no dropped segment was kept as a spare file" has_spare
spares=$(find "$journal" -name '*.spare' | wc -l)
ok "$spares spare file(s) at the end; $spare_lives of $k gateways died with one; $reused recoveries cut a segment's tail"
stop_gateway
echo "$checks checks passed"
