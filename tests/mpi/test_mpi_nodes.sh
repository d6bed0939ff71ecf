#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Several nodes on one machine: pseudo-nodes (SCIMQ_MPI_RANKS_PER_NODE,
# one agent each) and the ingest mode (SCIMQ_MPI_INGEST: one agent for
# several nodes, whose other ranks read across the fabric).
# 1. Drain: 2 x 2 and 4 x 2 ranks, and 4 x 1 ranks with 2 ingest agents,
#    on shm and tcp;ofi_rxm, each with another prefetch setting (0, 1,
#    auto, 3, inline off): every message verified once, each agent's ranks
#    worked, the queue empty, as many agents as asked.
# 2. Kill matrix on 2 x 2 ranks: a rank (its agent gives its messages
#    back), an agent's rank (its node's other rank notices, the gateway
#    requeues what that agent held, the other node drains the queue), and
#    the whole job (a second job drains the rest).  Nothing is lost;
#    duplicates are only messages the killed processes had processed.
. "$top_srcdir/tests/mpi/lib.sh"
need pgrep procps
need setsid util-linux
recv="$top_builddir/src/mpi/scimq-mpi-recv"
count=${SCIMQ_TEST_MPI_COUNT:-300}

start_gateway --memory-limit 512MiB

# 1. Drain.  "NP PER_NODE INGEST AGENTS PREFETCH INLINE_MAX"
run=0
for provider in shm "tcp;ofi_rxm"; do
    for shape in "4 2 1 2 1 64KiB" "8 2 1 4 auto 64KiB" "4 1 2 2 0 64KiB" \
        "4 2 1 2 3 0"; do
        set -- $shape
        run=$((run + 1))
        q="nodes$run"
        what="$1 ranks by $2, ingest $3, prefetch $5, inline $6, $provider"
        "$bindir/scimqctl" queue create "$q" --guaranteed --ack-timeout 120 \
            > /dev/null || fail "create $q"
        bounded 120 "$bindir/scimq-send" --queue "$q" --synthetic \
            --size 1KiB:256KiB --count "$count" --close \
            > "$workdir/send.$q.json" || fail "send $q"
        np=$1
        SCIMQ_MPI_RANKS_PER_NODE=$2 SCIMQ_MPI_INGEST=$3 \
            SCIMQ_MPI_PREFETCH=$5 SCIMQ_MPI_INLINE_MAX=$6 \
            mpi_run 600 "$workdir/$q.json" "$workdir/$q.err" "$recv" \
            --queue "$q" --verify --expect "$count" --provider "$provider" \
            --process-ms 2 ||
            { tail -20 "$workdir/$q.err" >&2; fail "$what failed"; }
        expect_eq "$what: agents" "$4" "$(json_get "$workdir/$q.json" .agents)"
        expect_eq "$what: verified" "$count" "$(json_get "$workdir/$q.json" .verified)"
        expect_eq "$what: duplicates" 0 "$(json_get "$workdir/$q.json" .duplicates)"
        expect_eq "$what: lost" 0 "$(json_get "$workdir/$q.json" .lost)"
        expect_eq "$what: corrupt" 0 "$(json_get "$workdir/$q.json" .corrupt)"
        expect_eq "$what: bytes" "$(json_get "$workdir/send.$q.json" .bytes)" \
            "$(json_get "$workdir/$q.json" .bytes)"
        # Ranks by agent: each node's ranks took part (ingest: the ranks
        # of the node without an agent did too).  With 2 ms of work per
        # message no rank can drain the queue before another starts: a
        # rank holds P + 1 messages at most.
        expect_eq "$what: agents whose ranks worked" "$4" \
            "$(json_get "$workdir/$q.json" '[.per_rank[] | select(.messages > 0) | .node] | unique | length')"
        expect_eq "$what: ranks that worked" "$1" \
            "$(json_get "$workdir/$q.json" '[.per_rank[] | select(.messages > 0)] | length')"
        expect_eq "$what: left in the queue" 0 \
            "$(gw_stat ".queues[] | select(.name==\"$q\") | .ready + .in_flight")"
        # No rank asked for more than P + 1 messages, no control message
        # was refused.
        expect_eq "$what: credits refused" 0 \
            "$(grep -c 'asks for more than\|malformed control message' "$workdir/$q.err" || true)"
    done
done

# A pool budget of one slot per agent (its two ranks take turns) and the
# agent on a given CPU: still every message, once.
q=budget
"$bindir/scimqctl" queue create "$q" --guaranteed --ack-timeout 120 \
    > /dev/null || fail "create $q"
bounded 120 "$bindir/scimq-send" --queue "$q" --synthetic --size 1KiB:256KiB \
    --count "$count" --close > "$workdir/send.$q.json" || fail "send $q"
np=4
SCIMQ_MPI_RANKS_PER_NODE=2 SCIMQ_MPI_POOL_BYTES=2MiB SCIMQ_MPI_AGENT_CORE=0 \
    SCIMQ_LOG_LEVEL=mpi=info \
    mpi_run 600 "$workdir/$q.json" "$workdir/$q.err" "$recv" --queue "$q" \
    --verify --expect "$count" ||
    { tail -20 "$workdir/$q.err" >&2; fail "pool budget run failed"; }
expect_eq "budget: verified" "$count" "$(json_get "$workdir/$q.json" .verified)"
expect_eq "budget: duplicates" 0 "$(json_get "$workdir/$q.json" .duplicates)"
# A 2 MiB pool holds one 1 MiB message: a credit of 1 MiB.
expect_eq "budget: agents with a 2 MiB pool and 1 MiB of credit" 2 \
    "$(grep -c 'pool 2097152 bytes for 2 ranks, credit 1048576 bytes' \
        "$workdir/$q.err")"
expect_eq "budget: agents on CPU 0" 2 "$(grep -c 'agent: on CPU 0' "$workdir/$q.err")"
# A setting that is not one: every rank refuses to start, saying so.
SCIMQ_MPI_PREFETCH=many mpi_run 120 "$workdir/bad.json" "$workdir/bad.err" \
    "$recv" --queue "$q" && fail "SCIMQ_MPI_PREFETCH=many was accepted"
expect_eq "bad prefetch: error" SCIMQ_ECONFIG "$(json_get "$workdir/bad.json" .error)"

# rank_pid PATTERN RANK: the process of world rank RANK among those whose
# command line matches PATTERN.
rank_pid() {
    for p in $(pgrep -f "$1" || true); do
        if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null |
            grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# 2. Kill matrix, 2 x 2 ranks on shm: ranks 0 and 2 host the agents.
export SCIMQ_MPI_RANKS_PER_NODE=2
np=4
for victim in rank agent job; do
    q="kill_$victim"
    log="$workdir/k$victim"
    "$bindir/scimqctl" queue create "$q" --guaranteed --ack-timeout 60 \
        > /dev/null || fail "create $q"
    bounded 60 "$bindir/scimq-send" --queue "$q" --synthetic \
        --size 1KiB:64KiB --count "$count" --close > /dev/null ||
        fail "send $q"
    setsid env "$san_env" "$MPIEXEC" -n "$np" --oversubscribe \
        --enable-recovery "$recv" --queue "$q" --verify --process-ms 30 \
        --seq-log "$log" > "$log.json" 2> "$log.err" &
    job=$!
    track "$job"
    i=0
    while [ "$(cat "$log".[0-9]* 2>/dev/null | wc -l)" -lt 40 ]; do
        i=$((i + 1))
        [ "$i" -gt $((600 * mult)) ] && { cat "$log.err" >&2; fail "$q: nothing processed"; }
        sleep 0.1
    done
    ranks=$(pgrep -f "seq-log $log" || true)
    qs=".queues[] | select(.name==\"$q\")"
    case $victim in
    rank | agent)
        # rank: world rank 1 (node 0, served by rank 0's agent); agent:
        # world rank 2, which hosts node 1's agent (rank 3 loses it).
        r=1
        [ "$victim" = agent ] && r=2
        pid=$(rank_pid "seq-log $log" "$r") || fail "$q: no process for rank $r"
        t_kill=$(date +%s.%N)
        kill -KILL "$pid"
        # The surviving ranks finish the queue.
        i=0
        while [ "$(gw_stat "$qs | .counters.acked")" -lt "$count" ]; do
            i=$((i + 1))
            [ "$i" -gt $((1800 * mult)) ] && { cat "$log.err" >&2; fail "$q: the survivors did not drain the queue"; }
            sleep 0.1
        done
        ok "$q: the survivors acknowledged all $count messages"
        if [ "$victim" = agent ]; then
            grep -q 'its agent (pid [0-9]*) is gone' "$log.err" ||
                fail "$q: rank 3 did not notice its agent's death"
            ok "$q: the agent's other rank noticed"
        else
            grep -q 'node rank 1 .* is dead' "$log.err" ||
                fail "$q: the agent did not notice its dead rank"
            # When (a figure for the log, not a timed assertion): the log
            # line's time stamp against the kill.
            t_seen=$(grep -m1 'node rank 1 .* is dead' "$log.err" |
                sed 's/^\([0-9T:.-]*\)Z.*/\1/' | xargs -I{} date -u -d {} +%s.%N)
            ok "$q: the agent noticed its dead rank and gave its messages back $(echo "$t_seen $t_kill" | awk '{printf "%.3f", $1 - $2}') s after the kill"
        fi
        kill -KILL -- -"$job" 2>/dev/null || kill -KILL "$job"
        wait "$job" 2>/dev/null || true
        ;;
    job)
        kill -KILL -- -"$job" 2>/dev/null || kill -KILL "$job"
        wait "$job" 2>/dev/null || true
        ;;
    esac
    i=0
    while pgrep -f "seq-log $log" > /dev/null; do
        i=$((i + 1))
        [ "$i" -gt $((100 * mult)) ] && fail "$q: processes of the job survived"
        sleep 0.1
    done
    # libfabric shm regions of the killed processes (see test_mpi_kill.sh).
    for p in $ranks; do
        rm -f /dev/shm/"$p":* 2>/dev/null || true
    done
    cat "$log".[0-9]* > "$workdir/$q.a"
    if [ "$victim" = job ]; then
        mpi_run 300 "$workdir/$q.b.json" "$workdir/$q.b.err" "$recv" \
            --queue "$q" --verify --seq-log "$workdir/$q.b" ||
            { tail -20 "$workdir/$q.b.err" >&2; fail "$q: second job failed"; }
        cat "$workdir/$q.b" >> "$workdir/$q.a"
    fi
    sort -n "$workdir/$q.a" > "$workdir/$q.all"
    expect_eq "$q: distinct messages processed" "$count" \
        "$(sort -nu "$workdir/$q.all" | wc -l)"
    dups=$(uniq -d "$workdir/$q.all" | wc -l)
    # Processed, not yet acknowledged, per killed rank: the message in hand
    # and the one before it (its DONE on its way).
    [ "$dups" -le $((2 * np)) ] || fail "$q: $dups duplicates"
    ok "$q: $dups duplicate(s)"
    expect_eq "$q: left in the queue" 0 "$(gw_stat "$qs | .ready + .in_flight")"
done
stop_gateway
echo "$checks checks passed"
