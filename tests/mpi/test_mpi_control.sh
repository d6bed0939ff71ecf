#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Control messages to every rank (SCIMQ_MPI_MSG_CONTROL): a run header,
# the data, an end of series, put before the job starts.
# 1. 2 x 2 ranks (pseudo-nodes, two agents) and 4 x 1 ranks with 2 ingest
#    agents, on shm and tcp;ofi_rxm: every rank gets both control messages
#    once, the header before any data and the end after all of its data;
#    every data message verified once; the gateway counts each control
#    message acknowledged once.
# 2. A rank killed while it works on its copy of the header: its agent
#    stops waiting for it, the header is acknowledged, and the other ranks
#    drain the data, each message once.
. "$top_srcdir/tests/mpi/lib.sh"
need pgrep procps
need setsid util-linux
recv="$top_builddir/src/mpi/scimq-mpi-recv"
count=${SCIMQ_TEST_MPI_COUNT:-200}
HEADER=1000000 END=1000001

start_gateway --memory-limit 512MiB

# fill QUEUE: header, $count data messages, end of series; closed.
fill() {
    "$bindir/scimqctl" queue create "$1" --guaranteed --ack-timeout 120 \
        > /dev/null || fail "create $1"
    bounded 60 "$bindir/scimq-send" --queue "$1" --synthetic --size 200B \
        --count 1 --first-seq "$HEADER" --control > /dev/null ||
        fail "$1: send the header"
    bounded 120 "$bindir/scimq-send" --queue "$1" --synthetic \
        --size 1KiB:128KiB --count "$count" > "$workdir/send.$1.json" ||
        fail "$1: send the data"
    bounded 60 "$bindir/scimq-send" --queue "$1" --synthetic --size 200B \
        --count 1 --first-seq "$END" --control --close > /dev/null ||
        fail "$1: send the end of series"
}

# per_rank OUT FILTER: FILTER (jq) over the ranks' entries, one line each.
per_rank() {
    json_get "$1" "[.per_rank[] | $2] | map(tostring) | join(\" \")"
}

# 1. "NP PER_NODE INGEST AGENTS PREFETCH"
run=0
for provider in shm "tcp;ofi_rxm"; do
    for shape in "4 2 1 2 1" "4 1 2 2 auto"; do
        set -- $shape
        run=$((run + 1))
        q="ctl$run"
        what="$1 ranks by $2, ingest $3, prefetch $5, $provider"
        fill "$q"
        np=$1
        SCIMQ_MPI_RANKS_PER_NODE=$2 SCIMQ_MPI_INGEST=$3 SCIMQ_MPI_PREFETCH=$5 \
            mpi_run 600 "$workdir/$q.json" "$workdir/$q.err" "$recv" \
            --queue "$q" --verify --expect "$count" --provider "$provider" \
            --process-ms 2 ||
            { tail -20 "$workdir/$q.err" >&2; fail "$what failed"; }
        o="$workdir/$q.json"
        all() { printf "%s " $(seq "$np" | sed "s/.*/$1/") | sed 's/ $//'; }
        expect_eq "$what: agents" "$4" "$(json_get "$o" .agents)"
        expect_eq "$what: control messages per rank" "$(all 2)" \
            "$(per_rank "$o" .control)"
        expect_eq "$what: header and end, once each, in order" \
            "$(all "$HEADER,$END")" \
            "$(per_rank "$o" '.control_seqs | map(tostring) | join(",")')"
        # control_after: data messages the rank had processed before each.
        expect_eq "$what: the header before any data" "$(all 0)" \
            "$(per_rank "$o" .control_after[0])"
        expect_eq "$what: the end after all of the rank's data" \
            "$(per_rank "$o" .messages)" "$(per_rank "$o" .control_after[1])"
        expect_eq "$what: verified" "$count" "$(json_get "$o" .verified)"
        expect_eq "$what: duplicates" 0 "$(json_get "$o" .duplicates)"
        expect_eq "$what: lost" 0 "$(json_get "$o" .lost)"
        expect_eq "$what: corrupt" 0 "$(json_get "$o" .corrupt)"
        expect_eq "$what: end of stream" true "$(json_get "$o" .eos)"
        qs=".queues[] | select(.name==\"$q\")"
        expect_eq "$what: acknowledged (each control message once)" \
            $((count + 2)) "$(gw_stat "$qs | .counters.acked")"
        expect_eq "$what: left in the queue" 0 \
            "$(gw_stat "$qs | .ready + .in_flight")"
        expect_eq "$what: refused control messages" 0 \
            "$(grep -c 'malformed control message\|asks for more than' "$workdir/$q.err" || true)"
    done
done

# 2. World rank 1 (node 0, its agent in rank 0) works 600 s on the header
#    and is killed; the others take 20 ms.
export SCIMQ_MPI_RANKS_PER_NODE=2
np=4
q=ctl_kill
log="$workdir/kill"
fill "$q"
qs=".queues[] | select(.name==\"$q\")"
setsid env "$san_env" "$MPIEXEC" -n "$np" --oversubscribe --enable-recovery \
    "$recv" --queue "$q" --verify --process-ms 2 --control-ms 20 \
    --slow-ranks 1 --slow-factor 30000 --seq-log "$log" \
    > "$log.json" 2> "$log.err" &
job=$!
track "$job"
# The gateway hands the header to the two agents, which hand it to their
# ranks at once (a second is ample, the sanitizers' multiplier aside).
# counter_ge NAME N: the queue's counter NAME has reached N.
counter_ge() {
    [ "$(gw_stat "$qs | .counters.$1")" -ge "$2" ]
}
wait_until 60 "$q: the header handed to both agents" counter_ge delivered 2
sleep "$mult"
expect_eq "$q: nothing acknowledged while rank 1 holds the header" 0 \
    "$(gw_stat "$qs | .counters.acked")"
pid=$(pgrep -f "seq-log $log" | while read -r p; do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null |
        grep -qx "OMPI_COMM_WORLD_RANK=1" && echo "$p"
done | head -1)
[ -n "$pid" ] || fail "$q: no process for rank 1"
ranks=$(pgrep -f "seq-log $log" || true)
kill -KILL "$pid"
wait_until 180 "$q: the survivors drain the queue" \
    counter_ge acked $((count + 2))
ok "$q: the header, every data message and the end acknowledged without rank 1"
grep -q 'node rank 1 .* is dead' "$log.err" ||
    fail "$q: the agent did not notice its dead rank"
kill -KILL -- -"$job" 2>/dev/null || kill -KILL "$job"
wait "$job" 2>/dev/null || true
for p in $ranks; do
    rm -f /dev/shm/"$p":* 2>/dev/null || true
done
cat "$log".[0-9]* | sort -n > "$workdir/$q.all"
expect_eq "$q: distinct data messages processed" "$count" \
    "$(sort -nu "$workdir/$q.all" | wc -l)"
expect_eq "$q: duplicates" 0 "$(uniq -d "$workdir/$q.all" | wc -l)"
expect_eq "$q: data processed by the killed rank" 0 \
    "$(wc -l < "$log.1" | tr -d ' ')"
stop_gateway
echo "$checks checks passed"
