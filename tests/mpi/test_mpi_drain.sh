#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# 4 and 8 ranks drain 2,000 self-verifying messages of 64 KiB .. 16 MiB
# through the runtime (agent -> libfabric RMA -> ranks) with zero loss and
# zero corruption, on the shm provider and on tcp;ofi_rxm; and 2 ranks
# that poll (scimq_mpi_try_next()) at P = 0 and 1.
. "$top_srcdir/tests/mpi/lib.sh"
count=${SCIMQ_TEST_MPI_COUNT:-2000}
export SCIMQ_MPI_MAX_MESSAGE=16MiB
recv="$top_builddir/src/mpi/scimq-mpi-recv"

start_gateway --memory-limit 1GiB --spill-dir "$workdir/spill"
run=0
for provider in shm "tcp;ofi_rxm"; do
    for n in 4 8; do
        run=$((run + 1))
        q="drain$run"
        "$bindir/scimqctl" queue create "$q" --guaranteed --ack-timeout 120 \
            > /dev/null || fail "create $q"
        # Producer and job run together, as in a real experiment.
        "$bindir/scimq-send" --queue "$q" --streams 4 --synthetic \
            --size 64KiB:16MiB --count "$count" --close \
            > "$workdir/send.$q.json" 2> "$workdir/send.$q.err" &
        send_pid=$!
        track "$send_pid"
        np=$n
        mpi_run 600 "$workdir/$q.json" "$workdir/$q.err" "$recv" \
            --queue "$q" --verify --expect "$count" --provider "$provider" ||
            { tail -20 "$workdir/$q.err" >&2; fail "$n ranks on $provider failed"; }
        wait "$send_pid" || fail "sender for $q failed"
        what="$n ranks, $provider"
        expect_eq "$what: messages" "$count" "$(json_get "$workdir/$q.json" .messages)"
        expect_eq "$what: verified" "$count" "$(json_get "$workdir/$q.json" .verified)"
        expect_eq "$what: lost" 0 "$(json_get "$workdir/$q.json" .lost)"
        expect_eq "$what: corrupt" 0 "$(json_get "$workdir/$q.json" .corrupt)"
        expect_eq "$what: bytes" "$(json_get "$workdir/send.$q.json" .bytes)" \
            "$(json_get "$workdir/$q.json" .bytes)"
        expect_eq "$what: ranks that worked" "$n" \
            "$(json_get "$workdir/$q.json" '[.per_rank[] | select(.messages > 0)] | length')"
        expect_eq "$what: left in the queue" 0 \
            "$(gw_stat ".queues[] | select(.name==\"$q\") | .ready + .in_flight")"
    done
done
# A program that polls (scimq_mpi_try_next(), never waiting in the
# runtime) drains too, at P = 0 (it asks only while it calls) and P = 1.
for depth in 0 1; do
    q="poll$depth"
    fill_queue "$q" 300
    np=2
    SCIMQ_MPI_PREFETCH=$depth
    export SCIMQ_MPI_PREFETCH
    mpi_run 300 "$workdir/$q.json" "$workdir/$q.err" \
        "$recv" --queue "$q" --verify --expect 300 --poll ||
        { tail -20 "$workdir/$q.err" >&2; fail "polling at P = $depth failed"; }
    unset SCIMQ_MPI_PREFETCH
    what="polling, P = $depth"
    expect_eq "$what: messages" 300 "$(json_get "$workdir/$q.json" .messages)"
    expect_eq "$what: lost" 0 "$(json_get "$workdir/$q.json" .lost)"
    expect_eq "$what: corrupt" 0 "$(json_get "$workdir/$q.json" .corrupt)"
    expect_eq "$what: bytes" "$SENT_BYTES" "$(json_get "$workdir/$q.json" .bytes)"
    expect_eq "$what: left in the queue" 0 \
        "$(gw_stat ".queues[] | select(.name==\"$q\") | .ready + .in_flight")"
done
stop_gateway
echo "$checks checks passed"
