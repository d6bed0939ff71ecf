#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Load balance: ranks 0 and 1 work 5 times longer per message than ranks 2
# and 3.  Demand-driven delivery must give the fast ranks proportionally
# more messages (about 5x), not an equal share that would pace the whole
# job at the slowest rank.
. "$top_srcdir/tests/mpi/lib.sh"
count=300
recv="$top_builddir/src/mpi/scimq-mpi-recv"

start_gateway
fill_queue balance "$count"
np=4
mpi_run 300 "$workdir/balance.json" "$workdir/balance.err" "$recv" \
    --queue balance --verify --expect "$count" --process-ms 20 \
    --slow-ranks 0,1 --slow-factor 5 ||
    { tail -20 "$workdir/balance.err" >&2; fail "job failed"; }
expect_eq "verified" "$count" "$(json_get "$workdir/balance.json" .verified)"
expect_eq "lost" 0 "$(json_get "$workdir/balance.json" .lost)"
per() { json_get "$workdir/balance.json" ".per_rank[$1].messages"; }
slow_max=$(( $(per 0) > $(per 1) ? $(per 0) : $(per 1) ))
fast_min=$(( $(per 2) < $(per 3) ? $(per 2) : $(per 3) ))
echo "per rank: $(per 0) $(per 1) (slow)  $(per 2) $(per 3) (fast)"
# Expected ratio 5 (an equal share would be 1); allow for start-up, the
# last messages and a loaded machine (make check runs other MPI tests on
# the same 2 cores at the same time).
[ "$fast_min" -ge $((2 * slow_max)) ] ||
    fail "fast ranks got $fast_min, slow ranks $slow_max: not demand-driven"
ok "fast ranks took >= 2x the slow ranks' share ($fast_min vs $slow_max)"
stop_gateway
echo "$checks checks passed"
