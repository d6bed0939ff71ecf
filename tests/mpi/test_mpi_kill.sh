#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A job killed mid-stream (SIGKILL to mpirun and its ranks, as when a node
# dies or the batch system kills it) loses nothing: its unacknowledged
# messages return to the queue and a second job, started afterwards,
# processes them.  Every message is processed at least once; duplicates
# are only messages the first job had processed but not yet acknowledged.
. "$top_srcdir/tests/mpi/lib.sh"
count=1000
# Without pgrep the orphan check below would find nothing and pass.
need pgrep procps
need setsid util-linux
recv="$top_builddir/src/mpi/scimq-mpi-recv"

start_gateway
"$bindir/scimqctl" queue create survive --guaranteed --ack-timeout 120 \
    > /dev/null || fail "create"
bounded 120 "$bindir/scimq-send" --queue survive --synthetic --size 1KiB:256KiB \
    --count "$count" --close > "$workdir/send.json" || fail "send"

# Job A in its own process group, so that the whole job can be killed.
np=4
setsid env "$san_env" "$MPIEXEC" -n "$np" --oversubscribe "$recv" \
    --queue survive --verify --process-ms 20 --seq-log "$workdir/a" \
    > "$workdir/a.json" 2> "$workdir/a.err" &
job_a=$!
track "$job_a"
i=0
while [ "$(cat "$workdir"/a.* 2>/dev/null | wc -l)" -lt 200 ]; do
    i=$((i + 1))
    [ "$i" -gt $((600 * mult)) ] && fail "job A processed nothing"
    sleep 0.1
done
ranks_a=$(pgrep -f "seq-log $workdir/a" || true)
kill -KILL -- -"$job_a" 2>/dev/null || kill -KILL "$job_a"
wait "$job_a" 2>/dev/null || true
# The ranks must be gone too (no orphan keeps consuming).
i=0
while pgrep -f "seq-log $workdir/a" > /dev/null; do
    i=$((i + 1))
    [ "$i" -gt $((100 * mult)) ] && fail "ranks of job A survived"
    sleep 0.1
done
done_a=$(cat "$workdir"/a.[0-9]* | wc -l)
ok "job A killed after processing $done_a messages"
# libfabric shm leaves its regions (/dev/shm/<pid>:...) behind when a job
# is killed: remove the killed ranks' ones (the runtime also removes stale
# regions carrying its own PID before it opens an endpoint).
for p in $ranks_a; do
    rm -f /dev/shm/"$p":* 2>/dev/null || true
done

mpi_run 300 "$workdir/b.json" "$workdir/b.err" "$recv" --queue survive \
    --verify --seq-log "$workdir/b" ||
    { tail -20 "$workdir/b.err" >&2; fail "job B failed"; }
cat "$workdir"/a.[0-9]* "$workdir/b" | sort -n > "$workdir/all"
sort -nu "$workdir/all" > "$workdir/unique"
expect_eq "distinct messages processed" "$count" "$(wc -l < "$workdir/unique")"
expect_eq "lowest" 0 "$(head -1 "$workdir/unique")"
expect_eq "highest" $((count - 1)) "$(tail -1 "$workdir/unique")"
uniq -d "$workdir/all" > "$workdir/dups"
dups=$(wc -l < "$workdir/dups")
# Duplicates are messages job A processed whose acknowledgement had not
# reached the gateway: per rank, the message in hand and the one before it
# (its DONE may still be on its way through the agent).  Each must be in
# job A's logs: job B never repeats its own work.
[ "$dups" -le $((2 * np)) ] || fail "$dups duplicates: more than job A held"
sort "$workdir/dups" > "$workdir/dups.lex"
cat "$workdir"/a.[0-9]* | sort > "$workdir/a.lex"
expect_eq "duplicates job A had not processed" 0 \
    "$(comm -23 "$workdir/dups.lex" "$workdir/a.lex" | wc -l)"
ok "$dups duplicates, all processed by job A before it was killed"
expect_eq "left in the queue" 0 \
    "$(gw_stat '.queues[] | select(.name=="survive") | .ready + .in_flight')"
stop_gateway
echo "$checks checks passed"
