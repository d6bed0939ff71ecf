#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The minimal examples end to end: a gateway, a guaranteed queue holding N
# synthetic messages (then closed), and the C loop on 4 ranks; then the
# Fortran loop (module scimq) on a second queue, and the rest of the
# module's API (tests/mpi/fortran_api.f90) on a third, when built.  The
# totals they print must be the N messages and the bytes scimq-send
# reported, and the queues must be left empty.
. "$top_srcdir/tests/mpi/lib.sh"
count=${SCIMQ_TEST_MPI_COUNT:-200}

start_gateway --memory-limit 512MiB

[ -x "$exdir/loop" ] || fail "$exdir/loop not built"
run_example "C loop" loop_c "$exdir/loop"

if have_fortran "$exdir/loop_f" "$top_builddir/tests/mpi/fortran_api"; then
    run_example "Fortran loop" loop_f "$exdir/loop_f"

    # The rest of the module: a control message first, which rank 0 gives
    # back once (it comes again: one redelivery) and every rank then sees
    # once; one result block put by each rank.
    "$bindir/scimqctl" queue create fapi_out --guaranteed > /dev/null ||
        fail "queue create fapi_out"
    export SCIMQ_TEST_OUT_QUEUE=fapi_out
    FILL_HEADER=yes
    run_example "Fortran API" fapi "$top_builddir/tests/mpi/fortran_api"
    FILL_HEADER=
    unset SCIMQ_TEST_OUT_QUEUE
    expect_eq "Fortran API: redelivered" 1 \
        "$(sed -n 's/^redelivered: //p' "$workdir/fapi.out")"
    expect_eq "Fortran API: control messages, one per rank" "$np" \
        "$(sed -n 's/^control: //p' "$workdir/fapi.out")"
    expect_eq "Fortran API: blocks put" "$np" \
        "$(gw_stat '.queues[] | select(.name=="fapi_out") | .ready')"
fi

stop_gateway
echo "$checks checks passed"
