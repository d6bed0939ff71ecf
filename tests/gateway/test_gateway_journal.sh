#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The journal across restarts:
#  1. SIGTERM with a backlog: the gateway drains what is leased, exits, and
#     the next start delivers the whole backlog.
#  2. A journal twice the memory limit is recovered without reading the
#     payloads into memory: peak RSS within the limit + 64 MiB, and every
#     message is then delivered, verified.
#  3. A torn tail (garbage after the last record, then a record cut short)
#     is cut at the first bad record; everything before it is recovered.
#  4. The disk limit bounds the journal: producers wait (TCP back-pressure)
#     until consumers free segments; nothing is refused or lost.
#  5. Durability per queue on one gateway: after SIGKILL the sync and batch
#     queues keep every confirmed message, the memory queue keeps its
#     declaration and none of its messages.
#  6. Compaction: one message nobody consumes, then 48 MiB through another
#     queue in 1 MiB segments.  Without compaction every segment after the
#     old message stays; with it the journal keeps a few, the old message
#     moves (and survives SIGKILL, with its attempt count).
#  7. A memory queue's payloads spill into the journal (no spill
#     directory): 48 MiB into a 16 MiB gateway, all delivered, verified;
#     recovery after SIGKILL skips them (the queue is not durable).
. "$top_srcdir/tests/integration/lib.sh"
journal="$workdir/journal"
jstat() { gw_stat ".journal.$1"; }
# crash: SIGKILL, no drain, nothing flushed.
crash() {
    kill -KILL "$GW_PID"
    wait "$GW_PID" 2> /dev/null || true
}
# drain QUEUE N WHAT: closes QUEUE and consumes it to its end; every one
# of the N synthetic messages 0..N-1 arrives, verified.
drain() {
    "$bindir/scimqctl" queue close "$1" > /dev/null || fail "close $1"
    bounded 120 "$bindir/scimq-recv" --queue "$1" --verify --until-eos \
        --expect "$2" > "$workdir/recv.$1.json" || fail "$3: consumer failed"
    expect_eq "$3: verified" "$2" "$(json_get "$workdir/recv.$1.json" .verified)"
    expect_eq "$3: lost" 0 "$(json_get "$workdir/recv.$1.json" .lost)"
}

# 1. SIGTERM with a backlog.
start_gateway --journal-dir "$journal"
"$bindir/scimqctl" queue create backlog --guaranteed > /dev/null || fail "create"
bounded 60 "$bindir/scimq-send" --queue backlog --synthetic --size 64KiB \
    --count 30 > /dev/null || fail "send"
stop_gateway
start_gateway --journal-dir "$journal"
expect_eq "after SIGTERM: recovered" 30 "$(jstat recovered.messages)"
drain backlog 30 "after SIGTERM"
stop_gateway
rm -rf "$journal"

# 2. Twice the memory limit in the journal.
start_gateway --journal-dir "$journal" --memory-limit 32MiB
"$bindir/scimqctl" queue create big --guaranteed > /dev/null || fail "create"
bounded 120 "$bindir/scimq-send" --queue big --synthetic --size 1MiB \
    --count 64 > /dev/null || fail "send"
crash
start_gateway --journal-dir "$journal" --memory-limit 32MiB
expect_eq "twice the memory: recovered" 64 "$(jstat recovered.messages)"
hwm=$(awk '/^VmHWM/ {print $2 * 1024}' "/proc/$GW_PID/status")
if [ "$sanitized" = yes ]; then
    echo "peak RSS $hwm B not checked: sanitizer build"
else
    [ "$hwm" -le $(((32 + 64) * 1048576)) ] ||
        fail "peak RSS $hwm B while recovering 64 MiB (limit 32 MiB + 64 MiB)"
    ok "peak RSS $hwm B while recovering 64 MiB into 32 MiB"
fi
drain big 64 "twice the memory"
stop_gateway
rm -rf "$journal"

# 3. A torn tail.
start_gateway --journal-dir "$journal"
"$bindir/scimqctl" queue create torn --guaranteed > /dev/null || fail "create"
bounded 60 "$bindir/scimq-send" --queue torn --synthetic --size 10KiB \
    --count 10 > /dev/null || fail "send"
crash
last=$(ls "$journal"/*.seg | tail -n 1)
head -c 100 /dev/urandom >> "$last"
start_gateway --journal-dir "$journal"
expect_eq "garbage tail: recovered" 10 "$(jstat recovered.messages)"
expect_eq "garbage tail: cut" 100 "$(jstat recovered.truncated_bytes)"
bounded 60 "$bindir/scimq-send" --queue torn --synthetic --size 10KiB \
    --count 1 --first-seq 10 > /dev/null || fail "send"
crash
# The record of message 10 is cut in the middle.  It is alone in the last
# segment (a new one per start), with at most a PAD record of one block
# after it, so half the file falls inside it.
last=$(ls "$journal"/*.seg | tail -n 1)
truncate -s $(($(stat -c %s "$last") / 2)) "$last"
start_gateway --journal-dir "$journal"
expect_eq "cut record: recovered" 10 "$(jstat recovered.messages)"
[ "$(jstat recovered.truncated_bytes)" -gt 0 ] || fail "the cut record was not dropped"
ok "the cut record was dropped"
drain torn 10 "torn"
stop_gateway
rm -rf "$journal"

# 4. The disk limit.
start_gateway --journal-dir "$journal" --disk-limit 8MiB \
    --set gateway_journal_segment=2MiB
"$bindir/scimqctl" queue create full --guaranteed > /dev/null || fail "create"
"$bindir/scimq-send" --queue full --synthetic --size 1MiB --count 40 --close \
    > "$workdir/send4.json" 2> "$workdir/send4.err" &
send_pid=$!
track "$send_pid"
wait_until 30 "producer never back-pressured by the disk limit" stat_ge .totals.parked_producers 1
ok "producer waits at the disk limit"
[ "$(jstat bytes)" -le $((9 * 1048576)) ] || fail "journal over the disk limit: $(jstat bytes) B"
ok "journal within the disk limit"
kill -0 "$send_pid" 2> /dev/null || fail "the producer finished into a full journal"
bounded 120 "$bindir/scimq-recv" --queue full --verify --until-eos \
    --expect 40 > "$workdir/recv4.json" || fail "consumer failed"
wait "$send_pid" || fail "producer failed"
expect_eq "disk limit: verified" 40 "$(json_get "$workdir/recv4.json" .verified)"
expect_eq "disk limit: lost" 0 "$(json_get "$workdir/recv4.json" .lost)"
stop_gateway
rm -rf "$journal"

# 5. Durability per queue.
start_gateway --journal-dir "$journal" --durability sync
"$bindir/scimqctl" queue create qsync --guaranteed > /dev/null || fail "create"
"$bindir/scimqctl" queue create qbatch --durability batch > /dev/null ||
    fail "create batch"
"$bindir/scimqctl" queue create qmem --durability memory > /dev/null ||
    fail "create memory"
if "$bindir/scimqctl" queue create qbe --best-effort --durability sync \
    > /dev/null 2>&1; then
    fail "a best-effort queue was declared sync"
fi
ok "a best-effort queue cannot be declared sync"
expect_eq "qbatch durability" batch "$(gw_stat '.queues[] | select(.name == "qbatch") | .durability')"
expect_eq "qmem durability" memory "$(gw_stat '.queues[] | select(.name == "qmem") | .durability')"
for q in qsync qbatch qmem; do
    bounded 60 "$bindir/scimq-send" --queue "$q" --synthetic --size 16KiB \
        --count 20 > /dev/null || fail "send $q"
done
crash
start_gateway --journal-dir "$journal" --durability sync
expect_eq "per queue: recovered" 40 "$(jstat recovered.messages)"
expect_eq "qmem after the crash: ready" 0 "$(gw_stat '.queues[] | select(.name == "qmem") | .ready')"
expect_eq "qmem after the crash: durability" memory "$(gw_stat '.queues[] | select(.name == "qmem") | .durability')"
drain qsync 20 "sync queue"
drain qbatch 20 "batch queue"
stop_gateway
rm -rf "$journal"

# 6. Compaction.  stream_past_stuck PERCENT: a fresh journal of 1 MiB
# segments, one message in "stuck" (delivered once, given back), then 48 x
# 1 MiB through "busy" to a verified consumer.
stream_past_stuck() {
    rm -rf "$journal"
    start_gateway --journal-dir "$journal" --set gateway_journal_segment=1MiB \
        --set "gateway_journal_compact=$1"
    "$bindir/scimqctl" queue create stuck --guaranteed > /dev/null || fail "create"
    "$bindir/scimqctl" queue create busy --guaranteed > /dev/null || fail "create"
    bounded 60 "$bindir/scimq-send" --queue stuck --synthetic --size 64KiB \
        --count 1 > /dev/null || fail "send stuck"
    # One delivery that is not acknowledged: attempt 1, back in the queue.
    bounded 60 "$bindir/scimq-recv" --queue stuck --count 1 --reject \
        > /dev/null || fail "reject stuck"
    bounded 120 "$bindir/scimq-send" --queue busy --synthetic --size 1MiB \
        --count 48 --close > /dev/null || fail "send busy"
    bounded 120 "$bindir/scimq-recv" --queue busy --verify --until-eos \
        --expect 48 > "$workdir/recv6.json" || fail "consumer of busy"
    expect_eq "compaction $1: busy verified" 48 "$(json_get "$workdir/recv6.json" .verified)"
}
stream_past_stuck 0
[ "$(jstat segments)" -ge 40 ] ||
    fail "without compaction the journal kept only $(jstat segments) segments"
ok "without compaction the old message keeps $(jstat segments) segments"
stop_gateway
stream_past_stuck 25
wait_until 30 "compaction never moved the old message" stat_ge .journal.compaction.moved_payloads 1
wait_until 30 "the journal kept $(jstat segments) segments" stat_le .journal.segments 4
ok "with compaction the journal keeps $(jstat segments) segments"
crash
start_gateway --journal-dir "$journal"
expect_eq "compacted: recovered" 1 "$(jstat recovered.messages)"
drain stuck 1 "compacted message"
# Its one earlier delivery was kept: this one is its second attempt.
expect_eq "compacted: attempt kept" 1 "$(json_get "$workdir/recv.stuck.json" .redelivered)"
stop_gateway
rm -rf "$journal"

# 7. Spilling into the journal.
start_gateway --journal-dir "$journal" --memory-limit 16MiB
"$bindir/scimqctl" queue create mem --durability memory > /dev/null ||
    fail "create"
bounded 120 "$bindir/scimq-send" --queue mem --synthetic --size 1MiB \
    --count 48 > /dev/null || fail "send mem"
[ "$(gw_stat .spill.spilled_total)" -ge $((32 * 1048576)) ] ||
    fail "only $(gw_stat .spill.spilled_total) B spilled into the journal"
ok "$(gw_stat .spill.spilled_total) B spilled into the journal"
drain mem 48 "spilled into the journal"
expect_eq "spilled bytes left" 0 "$(gw_stat .spill.bytes)"
"$bindir/scimqctl" queue create mem2 --durability memory > /dev/null ||
    fail "create"
bounded 120 "$bindir/scimq-send" --queue mem2 --synthetic --size 1MiB \
    --count 40 > /dev/null || fail "send mem2"
crash
start_gateway --journal-dir "$journal" --memory-limit 16MiB
expect_eq "spills are not recovered" 0 "$(jstat recovered.messages)"
expect_eq "the memory queue is back, empty" 0 "$(gw_stat '.queues[] | select(.name == "mem2") | .ready')"
stop_gateway
echo "$checks checks passed"
