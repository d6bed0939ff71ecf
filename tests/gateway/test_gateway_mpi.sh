#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The MPI runtime meets the edge cases of the gateway: an empty message
# reaches a rank (and end of stream follows), and a message larger than the
# ranks' buffers (SCIMQ_MPI_MAX_MESSAGE) is dead-lettered by the gateway on
# the agent's LIMIT, never sent round again; the job ends.
. "$top_srcdir/tests/mpi/lib.sh"
recv="$top_builddir/src/mpi/scimq-mpi-recv"
export SCIMQ_MPI_MAX_MESSAGE=1MiB
np=2

head -c 1024 /dev/urandom > "$workdir/small.dat"
: > "$workdir/empty.dat"
head -c $((3 * 1048576)) /dev/urandom > "$workdir/big.dat"

start_gateway --memory-limit 64MiB
"$bindir/scimqctl" queue create dlq --guaranteed > /dev/null || fail "create dlq"
"$bindir/scimqctl" queue create q --guaranteed --dead-letter dlq \
    > /dev/null || fail "create q"
bounded 60 "$bindir/scimq-send" --queue q "$workdir/small.dat" \
    "$workdir/empty.dat" "$workdir/big.dat" "$workdir/small.dat" --close \
    > "$workdir/send.json" || fail "send"
expect_eq "confirmed" 4 "$(json_get "$workdir/send.json" .messages)"
mpi_run 120 "$workdir/job.json" "$workdir/job.err" "$recv" --queue q ||
    { tail -20 "$workdir/job.err" >&2; fail "the job did not end"; }
expect_eq "messages on the ranks" 3 "$(json_get "$workdir/job.json" .messages)"
expect_eq "bytes on the ranks" 2048 "$(json_get "$workdir/job.json" .bytes)"
expect_eq "too large" 1 "$(gw_stat '.queues[] | select(.name == "q") | .counters.too_large')"
expect_eq "redelivered" 0 "$(gw_stat '.queues[] | select(.name == "q") | .counters.redelivered')"
expect_eq "in the dead-letter queue" 1 "$(gw_stat '.queues[] | select(.name == "dlq") | .ready')"
expect_eq "left in q" 0 "$(gw_stat '.queues[] | select(.name == "q") | .ready + .in_flight')"
stop_gateway
echo "$checks checks passed"
