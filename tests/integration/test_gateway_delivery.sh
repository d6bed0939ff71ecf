#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Guaranteed delivery under failure: 10,000 self-verifying messages of mixed
# sizes (1 KiB .. 16 MiB) over 4 parallel streams into a guaranteed queue,
# three consumers, one killed with SIGKILL mid-way.  Every message must be
# verified at least once; the only duplicates allowed are messages the
# killed consumer had verified but not yet acknowledged.
. "$top_srcdir/tests/integration/lib.sh"
count=${SCIMQ_TEST_DELIVERY_COUNT:-10000}
credit=4

start_gateway --memory-limit 1GiB
"$bindir/scimqctl" queue create data --guaranteed --ack-timeout 60 > /dev/null ||
    fail "queue create"

for i in 1 2 3; do
    process=0
    [ "$i" -eq 3 ] && process=2 # the victim is slower, so it has work in hand
    "$bindir/scimq-recv" --queue data --streams 2 --verify --until-eos \
        --credit "$credit" --process-ms "$process" \
        --seq-log "$workdir/seq.$i" > "$workdir/recv.$i.json" \
        2> "$workdir/recv.$i.err" &
    eval "recv_$i=\$!"
    track $!
done

# The queue is closed only after the kill below: until then no consumer
# can reach its end of stream, so consumer 3 is still there to be killed
# however fast the others drain the queue.
"$bindir/scimq-send" --queue data --streams 4 --synthetic --size 1KiB:16MiB \
    --count "$count" > "$workdir/send.json" 2> "$workdir/send.err" &
send_pid=$!
track "$send_pid"

# Kill consumer 3 once it has processed a fair share (a tenth of its
# third, 200 at the full count).
share=$((count / 50))
i=0
while [ "$( (wc -l < "$workdir/seq.3") 2>/dev/null || echo 0)" -lt "$share" ]; do
    i=$((i + 1))
    [ "$i" -gt $((600 * mult)) ] && fail "consumer 3 never got $share messages"
    sleep 0.1
done
kill -KILL "$recv_3"
ok "consumer 3 killed after $(wc -l < "$workdir/seq.3") messages"

bounded_wait() { # bounded_wait PID SECONDS
    ticks=0
    while kill -0 "$1" 2>/dev/null; do
        ticks=$((ticks + 1))
        [ "$ticks" -gt $(($2 * 10 * mult)) ] && fail "process $1 did not finish"
        sleep 0.1
    done
    wait "$1"
}
bounded_wait "$send_pid" 600 || { cat "$workdir/send.err" >&2; fail "sender failed"; }
expect_eq "sent" "$count" "$(json_get "$workdir/send.json" .messages)"
expect_eq "send errors" 0 "$(json_get "$workdir/send.json" .errors)"
"$bindir/scimqctl" queue close data > /dev/null || fail "queue close"
for i in 1 2; do
    eval "pid=\$recv_$i"
    bounded_wait "$pid" 600 || { cat "$workdir/recv.$i.err" >&2; fail "consumer $i failed"; }
    expect_eq "consumer $i: end of stream" true "$(json_get "$workdir/recv.$i.json" .eos)"
    expect_eq "consumer $i: corrupt" 0 "$(json_get "$workdir/recv.$i.json" .corrupt)"
done

# Every sequence number 0..count-1 verified at least once.
cat "$workdir/seq.1" "$workdir/seq.2" "$workdir/seq.3" | sort -n > "$workdir/all"
sort -nu "$workdir/all" > "$workdir/unique"
expect_eq "distinct messages verified" "$count" "$(wc -l < "$workdir/unique")"
expect_eq "lowest" 0 "$(head -1 "$workdir/unique")"
expect_eq "highest" $((count - 1)) "$(tail -1 "$workdir/unique")"

# Duplicates: only what consumer 3 verified without acknowledging.
uniq -d "$workdir/all" > "$workdir/dups"
ndup=$(wc -l < "$workdir/dups")
[ "$ndup" -le "$credit" ] || fail "$ndup duplicates, more than the killed consumer's credit ($credit)"
# comm wants lexical order.
sort "$workdir/dups" > "$workdir/dups.lex"
sort "$workdir/seq.3" > "$workdir/seq.3.lex"
extra=$(comm -23 "$workdir/dups.lex" "$workdir/seq.3.lex" | wc -l)
expect_eq "duplicates not from the killed consumer" 0 "$extra"
ok "$ndup duplicates, all from the killed consumer"

expect_eq "gateway: ready left" 0 "$(gw_stat .totals.ready)"
expect_eq "gateway: in flight left" 0 "$(gw_stat .totals.in_flight)"
stop_gateway
echo "$checks checks passed"
