#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Rank liveness and leases in the MPI runtime.
# 1. Work three times longer than the queue's ack timeout: the agent keeps
#    the leases alive (libscimq auto-extension), so nothing is delivered
#    twice and nothing expires at the gateway.
# 2. A rank SIGKILLed mid-stream while the job goes on (mpirun
#    --enable-recovery, as a launcher that does not kill the whole job on
#    one failure): its agent notices the dead process and gives its
#    messages back at once (NACK requeue), well before any lease (60 s)
#    could expire, and the other ranks process them.  Every message is
#    processed; duplicates are only messages the dead rank had processed
#    and not acknowledged.
. "$top_srcdir/tests/mpi/lib.sh"
need pgrep procps
need setsid util-linux
recv="$top_builddir/src/mpi/scimq-mpi-recv"

start_gateway

# 1. 6 s of work per message, 2 s ack timeout (the lease is extended every
# half lease: 1 s of margin, which a loaded machine needs; both times the
# multiplier for the sanitizer builds).
"$bindir/scimqctl" queue create long --guaranteed --ack-timeout $((2 * mult)) \
    > /dev/null || fail "queue create long"
bounded 60 "$bindir/scimq-send" --queue long --synthetic --size 4KiB \
    --count 4 --close > "$workdir/send.long.json" || fail "send long"
np=2
mpi_run 180 "$workdir/long.json" "$workdir/long.err" "$recv" --queue long \
    --verify --expect 4 --process-ms $((6000 * mult)) ||
    { tail -20 "$workdir/long.err" >&2; fail "long job failed"; }
expect_eq "long: verified" 4 "$(json_get "$workdir/long.json" .verified)"
expect_eq "long: duplicates" 0 "$(json_get "$workdir/long.json" .duplicates)"
expect_eq "long: lost" 0 "$(json_get "$workdir/long.json" .lost)"
expect_eq "long: redelivered" 0 "$(json_get "$workdir/long.json" .redelivered)"
q='.queues[] | select(.name=="long")'
expect_eq "long: expired at the gateway" 0 \
    "$(gw_stat "$q | .counters.expired")"
expect_eq "long: acked at the gateway" 4 "$(gw_stat "$q | .counters.acked")"

# 2. Kill node rank 2 of 3 while the job goes on.
count=150
"$bindir/scimqctl" queue create dead --guaranteed --ack-timeout 60 \
    > /dev/null || fail "queue create dead"
bounded 60 "$bindir/scimq-send" --queue dead --synthetic --size 1KiB:64KiB \
    --count "$count" --close > "$workdir/send.dead.json" || fail "send dead"
np=3
setsid env "$san_env" "$MPIEXEC" -n "$np" --oversubscribe --enable-recovery \
    "$recv" --queue dead --verify --process-ms 100 --seq-log "$workdir/k" \
    > "$workdir/k.json" 2> "$workdir/k.err" &
job=$!
track "$job"
i=0
while [ "$(cat "$workdir/k.2" 2>/dev/null | wc -l)" -lt 5 ]; do
    i=$((i + 1))
    [ "$i" -gt $((600 * mult)) ] && { cat "$workdir/k.err" >&2; fail "rank 2 processed nothing"; }
    sleep 0.1
done
victim=
ranks=$(pgrep -f "seq-log $workdir/k" || true)
for p in $ranks; do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null |
        grep -qx 'OMPI_COMM_WORLD_RANK=2'; then
        victim=$p
    fi
done
[ -n "$victim" ] || fail "no process for rank 2"
kill -KILL "$victim"
# Its agent notices and gives its messages back: a liveness check, bounded
# generously (it looks every 200 ms), not a timing claim.
i=0
while ! grep -q 'node rank 2 .* is dead' "$workdir/k.err"; do
    i=$((i + 1))
    [ "$i" -gt $((100 * mult)) ] && { cat "$workdir/k.err" >&2; fail "the dead rank was not noticed within 10 s"; }
    sleep 0.1
done
given=$(sed -n 's/.*node rank 2 .* is dead ([^)]*): \([0-9]*\) message.*/\1/p' \
    "$workdir/k.err" | head -1)
ok "the agent noticed the dead rank and gave back $given message(s)"
dq='.queues[] | select(.name=="dead")'
expect_eq "dead: given back to the gateway (nacked)" "$given" \
    "$(gw_stat "$dq | .counters.nacked")"
# The others finish the queue: everything acknowledged.
i=0
while [ "$(gw_stat "$dq | .counters.acked")" -lt "$count" ]; do
    i=$((i + 1))
    [ "$i" -gt $((1200 * mult)) ] && { cat "$workdir/k.err" >&2; fail "the job did not drain the queue"; }
    sleep 0.1
done
ok "the surviving ranks acknowledged all $count messages"
expect_eq "dead: expired at the gateway" 0 "$(gw_stat "$dq | .counters.expired")"
expect_eq "dead: left in the queue" 0 "$(gw_stat "$dq | .ready + .in_flight")"
kill -KILL -- -"$job" 2>/dev/null || kill -KILL "$job"
wait "$job" 2>/dev/null || true
i=0
while pgrep -f "seq-log $workdir/k" > /dev/null; do
    i=$((i + 1))
    [ "$i" -gt $((100 * mult)) ] && fail "ranks of the job survived"
    sleep 0.1
done
# libfabric shm regions of the killed processes (see test_mpi_kill.sh).
for p in $ranks; do
    rm -f /dev/shm/"$p":* 2>/dev/null || true
done
cat "$workdir"/k.[0-9]* | sort -n > "$workdir/all"
sort -nu "$workdir/all" > "$workdir/unique"
expect_eq "dead: distinct messages processed" "$count" \
    "$(wc -l < "$workdir/unique")"
uniq -d "$workdir/all" | sort > "$workdir/dups"
dups=$(wc -l < "$workdir/dups")
sort "$workdir/k.2" > "$workdir/k2.lex"
expect_eq "dead: duplicates the dead rank had not processed" 0 \
    "$(comm -23 "$workdir/dups" "$workdir/k2.lex" | wc -l)"
# The message in hand, and the one before it if its DONE was in flight.
[ "$dups" -le 2 ] || fail "$dups duplicates: more than the dead rank held"
ok "$dups duplicate(s), all processed by the dead rank"
stop_gateway
echo "$checks checks passed"
