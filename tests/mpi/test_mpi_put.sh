#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# scimq_mpi_put() goes through the node's agent: 4 ranks in 2 pseudo-nodes
# put 50 self-verifying messages each; while the job is up the gateway has
# exactly one session per agent (STATS sessions, beside the one scimqctl
# itself opens), and every message arrives intact (scimq-recv --verify:
# 200 verified, none lost, duplicated or corrupt); on shm and tcp;ofi_rxm.
# A put to a queue that does not exist returns its error to the rank.
. "$top_srcdir/tests/mpi/lib.sh"
put="$top_builddir/tests/mpi/mpi_put"
[ -x "$put" ] || fail "$put not built"
start_gateway --memory-limit 256MiB
base=$(gw_stat .sessions)
np=4
run=0
for provider in shm "tcp;ofi_rxm"; do
    run=$((run + 1))
    in="putin$run" out="putout$run" hold="$workdir/hold$run"
    for q in "$in" "$out"; do
        "$bindir/scimqctl" queue create "$q" --guaranteed > /dev/null ||
            fail "create $q"
    done
    SCIMQ_QUEUE=$in SCIMQ_MPI_PROVIDER=$provider SCIMQ_MPI_RANKS_PER_NODE=2 \
        mpi_run 300 "$workdir/put$run.out" "$workdir/put$run.err" \
        "$put" "$out" 50 20000 "$hold" &
    job=$!
    track "$job"
    i=0
    while [ ! -e "$hold.ready" ]; do
        i=$((i + 1))
        [ "$i" -le $((1200 * mult)) ] && kill -0 "$job" 2> /dev/null ||
            { cat "$workdir/put$run.err" >&2; fail "$provider: puts did not finish"; }
        sleep 0.1
    done
    expect_eq "$provider: gateway sessions while 2 agents run" $((base + 2)) \
        "$(gw_stat .sessions)"
    touch "$hold.go"
    wait "$job" || { cat "$workdir/put$run.err" >&2; fail "$provider: job failed"; }
    expect_eq "$provider: puts" "puts 200 errors 0" "$(cat "$workdir/put$run.out")"
    "$bindir/scimqctl" queue close "$out" > /dev/null || fail "close $out"
    bounded 120 "$bindir/scimq-recv" --queue "$out" --verify --expect 200 \
        --until-eos > "$workdir/recv$run.json" || fail "$provider: scimq-recv"
    expect_eq "$provider: verified" 200 "$(json_get "$workdir/recv$run.json" .verified)"
    expect_eq "$provider: lost" 0 "$(json_get "$workdir/recv$run.json" .lost)"
    expect_eq "$provider: duplicates" 0 "$(json_get "$workdir/recv$run.json" .duplicates)"
    expect_eq "$provider: corrupt" 0 "$(json_get "$workdir/recv$run.json" .corrupt)"
done
# A queue that does not exist: each put fails with SCIMQ_ENOENT, reported.
np=2
SCIMQ_QUEUE=putin1 mpi_run 120 "$workdir/bad.out" "$workdir/bad.err" \
    "$put" no.such.queue 2 100 && fail "puts to a missing queue succeeded"
expect_eq "missing queue: no put succeeded" "puts 0 errors 4" "$(cat "$workdir/bad.out")"
expect_eq "missing queue: named" 2 "$(grep -c 'put: no such queue' "$workdir/bad.err")"
stop_gateway
echo "$checks checks passed"
