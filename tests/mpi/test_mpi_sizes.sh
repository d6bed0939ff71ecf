#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The largest message comes from the gateway: with SCIMQ_MPI_MAX_MESSAGE
# unset, the agent takes the gateway's proto_max_payload (WELCOME) within
# its pool budget, the ranks size their buffers from it, and messages of
# exactly that size are processed; within a smaller pool budget the
# largest shrinks to what the budget holds and larger messages are
# dead-lettered by the gateway (the job ends, nothing loops); the agent's
# credit is by bytes (64 MiB, at most half the pool).
. "$top_srcdir/tests/mpi/lib.sh"
unset SCIMQ_MPI_MAX_MESSAGE
recv="$top_builddir/src/mpi/scimq-mpi-recv"
max=$((3 * 1024 * 1024))
start_gateway --memory-limit 256MiB --set proto_max_payload=3MiB
np=2

q=sizes1
"$bindir/scimqctl" queue create "$q" --guaranteed --ack-timeout 120 \
    > /dev/null || fail "create $q"
bounded 120 "$bindir/scimq-send" --queue "$q" --synthetic --size 3MiB \
    --count 12 --close > "$workdir/send.$q.json" || fail "send $q"
SCIMQ_LOG_LEVEL=mpi=info mpi_run 300 "$workdir/$q.json" "$workdir/$q.err" \
    "$recv" --queue "$q" --verify --expect 12 ||
    { tail -20 "$workdir/$q.err" >&2; fail "run on $q failed"; }
expect_eq "gateway's largest: verified" 12 "$(json_get "$workdir/$q.json" .verified)"
expect_eq "gateway's largest: duplicates" 0 "$(json_get "$workdir/$q.json" .duplicates)"
expect_eq "gateway's largest: taken from the gateway" 1 \
    "$(grep -c "largest message $max bytes (pool budget, the gateway's)" "$workdir/$q.err")"
# 256 MiB pool (the default budget): a 64 MiB credit window.
expect_eq "gateway's largest: credit by bytes" 1 \
    "$(grep -c 'pool 268435456 bytes for 2 ranks, credit 67108864 bytes' "$workdir/$q.err")"

# A 12 MiB budget holds 2 ranks x 3 messages of 2 MiB - 4 KiB: 3 MiB
# messages are too large for this job and go to the dead-letter queue.
q=sizes2
"$bindir/scimqctl" queue create "$q.dead" --guaranteed > /dev/null ||
    fail "create $q.dead"
"$bindir/scimqctl" queue create "$q" --guaranteed --ack-timeout 120 \
    --dead-letter "$q.dead" > /dev/null || fail "create $q"
bounded 120 "$bindir/scimq-send" --queue "$q" --synthetic --size 1MiB \
    --count 4 > "$workdir/send.$q.a.json" || fail "send $q"
bounded 120 "$bindir/scimq-send" --queue "$q" --synthetic --size 3MiB \
    --count 3 > "$workdir/send.$q.b.json" || fail "send $q"
"$bindir/scimqctl" queue close "$q" > /dev/null || fail "close $q"
SCIMQ_MPI_POOL_BYTES=12MiB SCIMQ_LOG_LEVEL=mpi=info mpi_run 300 \
    "$workdir/$q.json" "$workdir/$q.err" "$recv" --queue "$q" ||
    { tail -20 "$workdir/$q.err" >&2; fail "run on $q failed"; }
expect_eq "small budget: largest" 1 \
    "$(grep -c "largest message $((2 * 1024 * 1024 - 4096)) bytes (pool budget)" "$workdir/$q.err")"
expect_eq "small budget: processed" 4 "$(json_get "$workdir/$q.json" .messages)"
expect_eq "small budget: end of stream" true "$(json_get "$workdir/$q.json" .eos)"
expect_eq "small budget: dead-lettered" 3 \
    "$(gw_stat ".queues[] | select(.name==\"$q.dead\") | .ready")"
expect_eq "small budget: left in the queue" 0 \
    "$(gw_stat ".queues[] | select(.name==\"$q\") | .ready + .in_flight")"
stop_gateway
echo "$checks checks passed"
