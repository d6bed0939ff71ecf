# SPDX-License-Identifier: BSD-3-Clause
# Helpers for the MPI tests (sourced, after tests/integration/lib.sh's
# rules: every wait bounded, every process started is stopped).

. "$top_srcdir/tests/integration/lib.sh"

# These tests are built only when configure found MPI: a missing launcher
# is a broken installation, not a reason to skip.
[ -n "${MPIEXEC:-}" ] ||
    fail "configure found MPI but no mpirun/mpiexec: install the Debian package openmpi-bin"
need "$MPIEXEC" openmpi-bin

# Open MPI as root, on loopback and shared memory only, quietly
# (../shared/PLATFORM.md: never btl ofi).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_base_warn_component_unused=0
# Test messages are small: small pool slots fault in fast.
export SCIMQ_MPI_MAX_MESSAGE=${SCIMQ_MPI_MAX_MESSAGE:-1MiB}
# No inherited SciMQ settings: each test says what it wants.
unset SCIMQ_QUEUE SCIMQ_SHIM_DISABLE LD_PRELOAD 2> /dev/null || true

exdir="$top_builddir/examples/minimal"
shim="$top_builddir/mpi-shim/.libs/libscimq-shim.so"
[ -f "$shim" ] || fail "$shim not built"
# Uninstalled, the shim finds libscimq-mpi here (installed: its rpath).
LD_LIBRARY_PATH="$top_builddir/src/mpi/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
np=${SCIMQ_TEST_NP:-4}

# have_fortran PROGRAM...: whether the Fortran parts of a test run.
# Fortran is the one optional part of the MPI tests, and configure decides
# (SCIMQ_TEST_FORTRAN, from HAVE_MPI_FORTRAN; scripts/build.sh asks for it
# with --enable-fortran): with Fortran configured, every PROGRAM must have
# been built, and a missing one fails the test; without, the test says in
# its log that it leaves them out.
have_fortran() {
    case ${SCIMQ_TEST_FORTRAN:-} in
    yes)
        for p in "$@"; do
            [ -x "$p" ] || fail "$p not built although configure found Fortran"
        done
        return 0
        ;;
    no)
        echo "# Fortran parts left out: configured without Fortran (no gfortran, or --disable-fortran)"
        return 1
        ;;
    *) fail "SCIMQ_TEST_FORTRAN='${SCIMQ_TEST_FORTRAN:-}': run through make check" ;;
    esac
}

# Sanitizer builds (./configure --enable-asan): LD_PRELOAD puts the shim
# ahead of a program's own libraries, and ASan insists on its runtime
# coming first, so the runtime is preloaded before the shim.  Open MPI
# (and ls) leave memory behind at exit that is not ours to report.
shim_preload=$shim
asan_rt=$(ldd "$shim" 2> /dev/null | awk '/libasan/ {print $3; exit}')
[ -z "$asan_rt" ] || shim_preload="$asan_rt $shim"
san_env="ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"

# mpi_run SECONDS OUT ERR PROGRAM [ARGS...]: runs PROGRAM on $np ranks,
# stdout to OUT, stderr to ERR; returns mpirun's status.  The environment
# (SCIMQ_*) reaches the local ranks from mpirun's.  With MPI_PRELOAD=yes,
# the shim is preloaded into mpirun, its daemons and the ranks (and into
# nothing else the test runs).
MPI_PRELOAD=
mpi_run() {
    secs=$1 out=$2 err=$3
    shift 3
    set -- env "$san_env" "$MPIEXEC" -n "$np" --oversubscribe "$@"
    [ -z "$MPI_PRELOAD" ] || set -- env LD_PRELOAD="$shim_preload" "$@"
    bounded "$secs" "$@" > "$out" 2> "$err"
}

# fill_queue QUEUE COUNT: a guaranteed queue holding COUNT self-verifying
# messages of mixed sizes, closed (end of stream once drained); with
# FILL_HEADER=yes, a control message before them (every rank gets it).
# Sets SENT_BYTES (of the COUNT messages).
fill_queue() {
    "$bindir/scimqctl" queue create "$1" --guaranteed --ack-timeout 60 \
        > /dev/null || fail "queue create $1"
    if [ "${FILL_HEADER:-}" = yes ]; then
        bounded 60 "$bindir/scimq-send" --queue "$1" --synthetic --size 64B \
            --count 1 --first-seq 1000000 --control > /dev/null ||
            fail "scimq-send --control to $1"
    fi
    bounded 60 "$bindir/scimq-send" --queue "$1" --synthetic \
        --size 1KiB:64KiB --count "$2" --close \
        > "$workdir/send.$1.json" 2> "$workdir/send.$1.err" ||
        { cat "$workdir/send.$1.err" >&2; fail "scimq-send to $1"; }
    expect_eq "$1: sent" "$2" "$(json_get "$workdir/send.$1.json" .messages)"
    SENT_BYTES=$(json_get "$workdir/send.$1.json" .bytes)
}

# check_totals WHAT OUT COUNT BYTES: the "total:" line an example printed.
check_totals() {
    line=$(grep '^total: ' "$2" || true)
    [ -n "$line" ] || { cat "$2" >&2; fail "$1: no totals printed"; }
    expect_eq "$1: messages" "$3" "$(echo "$line" | awk '{print $2}')"
    expect_eq "$1: bytes" "$4" "$(echo "$line" | awk '{print $4}')"
    # Every rank reported, and the per-rank lines add up.
    expect_eq "$1: ranks reporting" "$np" "$(grep -c '^rank [0-9]*: ' "$2")"
    sum=$(awk '/^rank [0-9]+: / {m += $3; b += $5} END {print m, b}' "$2")
    expect_eq "$1: per-rank sums" "$3 $4" "$sum"
}

# run_example WHAT QUEUE PROGRAM [ARGS...]: fills QUEUE with $count
# messages, runs PROGRAM on it and checks the totals.
run_example() {
    what=$1 q=$2
    shift 2
    fill_queue "$q" "$count"
    export SCIMQ_QUEUE="$q"
    mpi_run 180 "$workdir/$q.out" "$workdir/$q.err" "$@" ||
        { cat "$workdir/$q.out" "$workdir/$q.err" >&2; fail "$what failed"; }
    unset SCIMQ_QUEUE
    check_totals "$what" "$workdir/$q.out" "$count" "$SENT_BYTES"
    expect_eq "$what: left in the queue" 0 \
        "$(gw_stat ".queues[] | select(.name==\"$q\") | .ready")"
}
