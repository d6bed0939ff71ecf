#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Programs that never call scimq_mpi_init/finalize, served by the PMPI
# shim: shim_loop (C, MPI_Init_thread) with libscimq-shim.so preloaded and
# statically linked with libscimq-shim.a + scimq-shim.ld-opts, and the
# Fortran shim_loop_f ("use mpi": mpi_init_) both ways when configured
# with Fortran.  Each drains a queue of N synthetic messages; the totals
# must match.  Then the failure path: with SCIMQ_QUEUE set and no gateway at SCIMQ_URL, every
# wrapped entry point (C MPI_Init, Fortran mpif.h, mpi_f08) reports the
# failure on one line from rank 0 and the program runs on unchanged.
. "$top_srcdir/tests/mpi/lib.sh"
count=${SCIMQ_TEST_MPI_COUNT:-200}

start_gateway --memory-limit 512MiB

# 1. Without the shim, the loop has no runtime: SCIMQ_ESTATE, and it says so.
export SCIMQ_QUEUE=unused
st=0
mpi_run 120 "$workdir/noshim.out" "$workdir/noshim.err" "$exdir/shim_loop" ||
    st=$?
unset SCIMQ_QUEUE
[ "$st" -ne 0 ] || fail "shim_loop without the shim succeeded"
grep -q 'call not valid in the current state' "$workdir/noshim.err" ||
    { cat "$workdir/noshim.err" >&2; fail "shim_loop without the shim: no SCIMQ_ESTATE"; }
ok "without the shim, shim_loop gets SCIMQ_ESTATE"

# 2. The shim preloaded, and linked statically.
MPI_PRELOAD=yes
run_example "C shim_loop (LD_PRELOAD)" shim_pre "$exdir/shim_loop"
MPI_PRELOAD=
run_example "C shim_loop (static)" shim_static "$exdir/shim_loop_static"

if have_fortran "$exdir/shim_loop_f" "$exdir/shim_loop_f_static"; then
    MPI_PRELOAD=yes
    run_example "Fortran shim_loop (LD_PRELOAD)" shim_f_pre \
        "$exdir/shim_loop_f"
    MPI_PRELOAD=
    run_example "Fortran shim_loop (static)" shim_f_static \
        "$exdir/shim_loop_f_static"
fi

# 3. The shim cannot start the runtime (nothing listens at the URL): one
#    line from rank 0 on stderr, the program's own output unchanged.
hellos="$exdir/hello_mpi"
fhellos="$top_builddir/tests/mpi/hello_mpif $top_builddir/tests/mpi/hello_f08"
# shellcheck disable=SC2086
have_fortran $fhellos && hellos="$hellos $fhellos"
for p in $hellos; do
    what=$(basename "$p")
    mpi_run 120 "$workdir/$what.plain.out" "$workdir/$what.plain.err" "$p" ||
        fail "$what failed"
    export SCIMQ_URL=scimq://127.0.0.1:1 SCIMQ_QUEUE=nowhere
    MPI_PRELOAD=yes
    mpi_run 120 "$workdir/$what.out" "$workdir/$what.err" "$p" ||
        { cat "$workdir/$what.err" >&2; fail "$what with a failing shim failed"; }
    MPI_PRELOAD=
    export SCIMQ_URL="$GW_URL"
    unset SCIMQ_QUEUE
    sort "$workdir/$what.plain.out" > "$workdir/a"
    sort "$workdir/$what.out" > "$workdir/b"
    cmp -s "$workdir/a" "$workdir/b" || fail "$what: output changed"
    ok "$what: output unchanged by a shim that could not start"
    expect_eq "$what: shim error lines" 1 \
        "$(grep -c '^scimq-shim: cannot start the SciMQ runtime: ' "$workdir/$what.err")"
done

stop_gateway
echo "$checks checks passed"
