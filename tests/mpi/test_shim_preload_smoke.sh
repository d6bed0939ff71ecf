#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The PMPI shim leaves every program it does not serve exactly as it was:
# with libscimq-shim.so in LD_PRELOAD, `true`, `ls /` and plain MPI hello
# programs (C; Fortran through mpif.h and mpi_f08 with Fortran) print the
# same lines and exit with the same status as without it, when SCIMQ_QUEUE
# is unset and also when SCIMQ_SHIM_DISABLE=1 turns the shim off.  Needs no
# gateway: a runtime that started would fail on the dead URL and say so.
. "$top_srcdir/tests/mpi/lib.sh"

# same WHAT CMD...: CMD's stdout, stderr and status with and without the
# shim preloaded (in the current environment) must be identical.
same() {
    what=$1
    shift
    st=0
    bounded 60 env "$san_env" "$@" \
        > "$workdir/plain.out" 2> "$workdir/plain.err" || st=$?
    pst=0
    bounded 60 env "$san_env" LD_PRELOAD="$shim_preload" "$@" \
        > "$workdir/shim.out" 2> "$workdir/shim.err" || pst=$?
    expect_eq "$what: exit status" "$st" "$pst"
    cmp -s "$workdir/plain.out" "$workdir/shim.out" ||
        { diff "$workdir/plain.out" "$workdir/shim.out" >&2; fail "$what: stdout differs"; }
    cmp -s "$workdir/plain.err" "$workdir/shim.err" ||
        { diff "$workdir/plain.err" "$workdir/shim.err" >&2; fail "$what: stderr differs"; }
    ok "$what: same output with the shim"
}

# same_mpi WHAT PROGRAM: the same for an MPI program under mpirun.  The
# preload reaches mpirun, its daemons and the ranks; lines of different
# ranks interleave freely, so they are compared sorted.
same_mpi() {
    what=$1
    shift
    st=0
    mpi_run 120 "$workdir/plain.out" "$workdir/plain.err" "$@" || st=$?
    pst=0
    MPI_PRELOAD=yes
    mpi_run 120 "$workdir/shim.out" "$workdir/shim.err" "$@" || pst=$?
    MPI_PRELOAD=
    expect_eq "$what: exit status without the shim" 0 "$st"
    expect_eq "$what: exit status with the shim" 0 "$pst"
    for s in out err; do
        sort "$workdir/plain.$s" > "$workdir/plain.$s.sorted"
        sort "$workdir/shim.$s" > "$workdir/shim.$s.sorted"
        cmp -s "$workdir/plain.$s.sorted" "$workdir/shim.$s.sorted" ||
            { diff "$workdir/plain.$s.sorted" "$workdir/shim.$s.sorted" >&2
              fail "$what: std$s differs"; }
    done
    expect_eq "$what: lines" "$np" "$(wc -l < "$workdir/shim.out")"
    ok "$what: same output with the shim"
}

[ -x "$exdir/hello_mpi" ] || fail "$exdir/hello_mpi not built"
mpi_programs="$exdir/hello_mpi"
fhellos="$top_builddir/tests/mpi/hello_mpif $top_builddir/tests/mpi/hello_f08"
# shellcheck disable=SC2086
have_fortran $fhellos && mpi_programs="$mpi_programs $fhellos"

# 0. The preload does take effect, in a plain process and in the ranks
#    mpirun starts (else the comparisons below would prove nothing).
n=$(env "$san_env" LD_PRELOAD="$shim_preload" \
    grep -c libscimq-shim /proc/self/maps || true)
[ "$n" -gt 0 ] || fail "the shim is not mapped into a preloaded process"
ok "the shim is mapped into a preloaded process"
MPI_PRELOAD=yes
mpi_run 120 "$workdir/maps.out" "$workdir/maps.err" \
    sh -c 'grep -c libscimq-shim /proc/self/maps' ||
    { cat "$workdir/maps.err" >&2; fail "mpirun with the shim preloaded"; }
MPI_PRELOAD=
expect_eq "ranks with the shim mapped" "$np" "$(awk '$1 > 0' "$workdir/maps.out" | wc -l)"

# 1. No SciMQ settings at all.
same "true" true
same "ls /" ls /
same "ls of a missing file" ls /nonexistent-scimq-smoke
for p in $mpi_programs; do
    same_mpi "$(basename "$p")" "$p"
done

# 2. Settings present, but the shim turned off.  The URL leads nowhere: a
#    runtime that started anyway would fail and print its error line.
export SCIMQ_URL=scimq://127.0.0.1:1 SCIMQ_QUEUE=smoke SCIMQ_SHIM_DISABLE=1
same "true (disabled)" true
same "ls / (disabled)" ls /
for p in $mpi_programs; do
    same_mpi "$(basename "$p") (disabled)" "$p"
done
unset SCIMQ_URL SCIMQ_QUEUE SCIMQ_SHIM_DISABLE

# 3. A program that never calls MPI_Init is not touched even with the
#    settings on.
export SCIMQ_URL=scimq://127.0.0.1:1 SCIMQ_QUEUE=smoke
same "true (SCIMQ_QUEUE set)" true
same "ls / (SCIMQ_QUEUE set)" ls /
unset SCIMQ_URL SCIMQ_QUEUE

echo "$checks checks passed"
