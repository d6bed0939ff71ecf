# SPDX-License-Identifier: BSD-3-Clause
# Shared helpers for the SciMQ job scripts (sourced by the Slurm, PBS and
# workstation scripts; bash).  See jobscripts/README.md.
#
#   scimq_locate_tools             sets SCIMQ_GATEWAY_BIN, SCIMQ_CTL, SCIMQ_SEND,
#                                  SCIMQ_MPI_RECV (SCIMQ_BUILDDIR, SCIMQ_PREFIX
#                                  or PATH, in that order)
#   scimq_job_dir                  sets SCIMQ_JOB_DIR (per-job directory)
#   scimq_gateway_start [ARGS]     background gateway on this host, waits
#                                  (bounded) for its port file, exports
#                                  SCIMQ_URL; stopped by PID on EXIT
#   scimq_gateway_from_portfile F  login-node deployment: SCIMQ_URL from F
#   scimq_run_mpi CMD...           runs the launcher in the background and
#                                  forwards SIGTERM to it (walltime warning)
#   scimq_stats_summary [QUEUE]    one JSON summary line from scimqctl stats
#
# Every wait is bounded by SCIMQ_WAIT_S (default 60 s).

: "${SCIMQ_WAIT_S:=60}"

scimq_log() {
    echo "scimq-job: $*" >&2
}

scimq_die() {
    scimq_log "error: $*"
    exit 1
}

# --- tools -----------------------------------------------------------------
scimq_locate_tools() {
    if [ -n "${SCIMQ_BUILDDIR:-}" ]; then
        SCIMQ_GATEWAY_BIN=$SCIMQ_BUILDDIR/src/gateway/scimq-gateway
        SCIMQ_CTL=$SCIMQ_BUILDDIR/src/tools/scimqctl
        SCIMQ_SEND=$SCIMQ_BUILDDIR/src/tools/scimq-send
        SCIMQ_MPI_RECV=$SCIMQ_BUILDDIR/src/mpi/scimq-mpi-recv
    elif [ -n "${SCIMQ_PREFIX:-}" ]; then
        SCIMQ_GATEWAY_BIN=$SCIMQ_PREFIX/bin/scimq-gateway
        SCIMQ_CTL=$SCIMQ_PREFIX/bin/scimqctl
        SCIMQ_SEND=$SCIMQ_PREFIX/bin/scimq-send
        SCIMQ_MPI_RECV=$SCIMQ_PREFIX/bin/scimq-mpi-recv
    else
        SCIMQ_GATEWAY_BIN=$(command -v scimq-gateway || echo scimq-gateway)
        SCIMQ_CTL=$(command -v scimqctl || echo scimqctl)
        SCIMQ_SEND=$(command -v scimq-send || echo scimq-send)
        SCIMQ_MPI_RECV=$(command -v scimq-mpi-recv || echo scimq-mpi-recv)
    fi
    [ -x "$SCIMQ_CTL" ] || scimq_die "scimqctl not found (set SCIMQ_PREFIX or SCIMQ_BUILDDIR)"
    command -v jq > /dev/null 2>&1 || scimq_die "jq not found"
    export SCIMQ_GATEWAY_BIN SCIMQ_CTL SCIMQ_SEND SCIMQ_MPI_RECV
}

# --- per-job directory -------------------------------------------------------
scimq_job_dir() {
    if [ -z "${SCIMQ_JOB_DIR:-}" ]; then
        id=${SLURM_JOB_ID:-${PBS_JOBID:-$$}}
        base=${SLURM_SUBMIT_DIR:-${PBS_O_WORKDIR:-${TMPDIR:-/tmp}}}
        SCIMQ_JOB_DIR=$base/scimq-job.$id
    fi
    mkdir -p "$SCIMQ_JOB_DIR" || scimq_die "cannot create $SCIMQ_JOB_DIR"
    export SCIMQ_JOB_DIR
}

# --- cleanup -----------------------------------------------------------------
# With proctrack/linuxproc (and under PBS's mom too) background processes
# survive the job: everything started here is stopped on EXIT, by PID.
SCIMQ_GATEWAY_PID=
scimq__cleanup() {
    rc=$?
    if [ -n "$SCIMQ_GATEWAY_PID" ] && kill -0 "$SCIMQ_GATEWAY_PID" 2> /dev/null; then
        # SIGTERM drains (waits for leased messages to be settled); bounded.
        kill -TERM "$SCIMQ_GATEWAY_PID" 2> /dev/null || true
        i=0
        while kill -0 "$SCIMQ_GATEWAY_PID" 2> /dev/null; do
            i=$((i + 1))
            if [ "$i" -gt $((SCIMQ_WAIT_S * 10)) ]; then
                scimq_log "gateway $SCIMQ_GATEWAY_PID did not drain; SIGKILL"
                kill -KILL "$SCIMQ_GATEWAY_PID" 2> /dev/null || true
                break
            fi
            sleep 0.1
        done
        wait "$SCIMQ_GATEWAY_PID" 2> /dev/null || true
        # Its exit summary (one JSON line).
        [ -s "$SCIMQ_JOB_DIR/gateway.out" ] &&
            echo "scimq-gateway-exit: $(tail -n 1 "$SCIMQ_JOB_DIR/gateway.out")"
    fi
    SCIMQ_GATEWAY_PID=
    return "$rc"
}
trap scimq__cleanup EXIT

# --- gateway started by the job ------------------------------------------------
# SCIMQ_GATEWAY_LISTEN (0.0.0.0:0: all interfaces, any free port), the URL
# host SCIMQ_GATEWAY_HOST (this host's name, for ranks on other nodes),
# SCIMQ_GATEWAY_MEMORY (--memory-limit, 1GiB), SCIMQ_GATEWAY_ARGS (more).
# The gateway requires a token: SCIMQ_TOKEN_FILE if set, else a new random
# one, mode 600, in the job directory (which the ranks see); it is exported
# as SCIMQ_TOKEN_FILE, so the job's tools and ranks authenticate.  Anyone
# on the node can reach the port; only the job's user can read the token.
scimq_gateway_start() {
    scimq_job_dir
    [ -x "$SCIMQ_GATEWAY_BIN" ] || scimq_die "scimq-gateway not found"
    if [ -z "${SCIMQ_TOKEN_FILE:-}" ]; then
        SCIMQ_TOKEN_FILE=$SCIMQ_JOB_DIR/token
        # A requeued job (same id, same directory) keeps its token.
        [ -e "$SCIMQ_TOKEN_FILE" ] ||
            "$SCIMQ_GATEWAY_BIN" --init-token "$SCIMQ_TOKEN_FILE" > /dev/null ||
            scimq_die "cannot write a token to $SCIMQ_TOKEN_FILE"
    fi
    export SCIMQ_TOKEN_FILE
    port_file=$SCIMQ_JOB_DIR/gateway.port
    rm -f "$port_file"
    # shellcheck disable=SC2086
    "$SCIMQ_GATEWAY_BIN" --listen "${SCIMQ_GATEWAY_LISTEN:-0.0.0.0:0}" \
        --port-file "$port_file" --token-file "$SCIMQ_TOKEN_FILE" \
        --memory-limit "${SCIMQ_GATEWAY_MEMORY:-1GiB}" \
        ${SCIMQ_GATEWAY_ARGS:-} "$@" \
        > "$SCIMQ_JOB_DIR/gateway.out" 2> "$SCIMQ_JOB_DIR/gateway.err" &
    SCIMQ_GATEWAY_PID=$!
    i=0
    while [ ! -s "$port_file" ]; do
        i=$((i + 1))
        if [ "$i" -gt $((SCIMQ_WAIT_S * 10)) ] ||
            ! kill -0 "$SCIMQ_GATEWAY_PID" 2> /dev/null; then
            cat "$SCIMQ_JOB_DIR/gateway.err" >&2
            scimq_die "gateway did not start"
        fi
        sleep 0.1
    done
    port=${SCIMQ_GATEWAY_PORT_OVERRIDE:-$(sed 's/.*://' "$port_file")}
    host=$(sed 's/:[^:]*$//' "$port_file")
    case $host in
    0.0.0.0 | '' | '[::]' | '::') host=${SCIMQ_GATEWAY_HOST:-$(hostname)} ;;
    esac
    SCIMQ_URL=scimq://$host:$port
    export SCIMQ_URL
    scimq_log "gateway $SCIMQ_GATEWAY_PID at $SCIMQ_URL"
}

# --- gateway already running (login node) ----------------------------------------
# FILE holds HOST:PORT (scimq-gateway --port-file).  A wildcard host is
# replaced by SCIMQ_GATEWAY_HOST.  Waits (bounded) for the file, then pings.
scimq_gateway_from_portfile() {
    f=$1
    i=0
    while [ ! -s "$f" ]; do
        i=$((i + 1))
        [ "$i" -gt $((SCIMQ_WAIT_S * 10)) ] && scimq_die "no port file $f"
        sleep 0.1
    done
    hp=$(head -n 1 "$f")
    host=${hp%:*} port=${hp##*:}
    case $host in
    0.0.0.0 | '' | '[::]' | '::')
        [ -n "${SCIMQ_GATEWAY_HOST:-}" ] ||
            scimq_die "$f has a wildcard address; set SCIMQ_GATEWAY_HOST"
        host=$SCIMQ_GATEWAY_HOST
        ;;
    esac
    SCIMQ_URL=scimq://$host:$port
    export SCIMQ_URL
    timeout "$SCIMQ_WAIT_S" "$SCIMQ_CTL" ping > /dev/null ||
        scimq_die "gateway at $SCIMQ_URL does not answer"
    scimq_log "using gateway at $SCIMQ_URL"
}

# --- MPI launcher, SIGTERM forwarding ----------------------------------------------
# Runs CMD... (the launcher: srun or mpirun with the program) in the
# background and waits for it.  A SIGTERM to this script -- e.g. sbatch
# --signal=B:TERM@120, sent to the batch shell 120 s before the walltime --
# is passed on to the launcher as SIGUSR1: mpirun and srun forward SIGUSR1
# to the ranks without killing them (a SIGTERM to mpirun kills the job
# within a second), and scimq-mpi-recv (like any program written the same
# way) then stops asking, acknowledges what it processed and finalizes.
# The script keeps waiting for the launcher to finish.  Returns its status.
SCIMQ_LAUNCHER_PID=
SCIMQ_TERM_RECEIVED=0
scimq__on_term() {
    SCIMQ_TERM_RECEIVED=1
    scimq_log "SIGTERM: forwarding to launcher ${SCIMQ_LAUNCHER_PID:-?} as SIGUSR1"
    [ -n "$SCIMQ_LAUNCHER_PID" ] && kill -USR1 "$SCIMQ_LAUNCHER_PID" 2> /dev/null
    return 0
}
scimq_run_mpi() {
    trap scimq__on_term TERM
    "$@" &
    SCIMQ_LAUNCHER_PID=$!
    while :; do
        rc=0
        wait "$SCIMQ_LAUNCHER_PID" || rc=$?
        # wait returns >128 when a trapped signal interrupts it: keep waiting.
        if [ "$rc" -gt 128 ] && kill -0 "$SCIMQ_LAUNCHER_PID" 2> /dev/null; then
            continue
        fi
        break
    done
    SCIMQ_LAUNCHER_PID=
    trap - TERM
    [ "$SCIMQ_TERM_RECEIVED" = 1 ] && scimq_log "launcher ended after SIGTERM (status $rc)"
    return "$rc"
}

# The default launcher: srun inside a Slurm allocation, mpirun elsewhere.
# SCIMQ_LAUNCHER overrides it (a command line, word-split), SCIMQ_NP is
# the number of ranks for mpirun (default: the allocation's task count).
scimq_launcher() {
    if [ -n "${SCIMQ_LAUNCHER:-}" ]; then
        echo "$SCIMQ_LAUNCHER"
    elif [ -n "${SLURM_JOB_ID:-}" ] && command -v srun > /dev/null 2>&1; then
        echo "srun --mpi=${SCIMQ_SRUN_MPI:-pmix}"
    else
        np=${SCIMQ_NP:-${SLURM_NTASKS:-${PBS_NP:-2}}}
        echo "mpirun -n $np"
    fi
}

# --- statistics ---------------------------------------------------------------
# One line: "scimq-summary: {json}" with the gateway's totals and the
# counters of QUEUE (default $SCIMQ_QUEUE).
scimq_stats_summary() {
    q=${1:-${SCIMQ_QUEUE:-}}
    stats=$(timeout "$SCIMQ_WAIT_S" "$SCIMQ_CTL" stats) || {
        scimq_log "scimqctl stats failed"
        return 1
    }
    echo "scimq-summary: $(echo "$stats" | jq -c --arg q "$q" '
        (.queues // [] | map(select(.name == $q)) | .[0]) as $Q |
        {summary: "scimq", url: env.SCIMQ_URL, queue: $q,
         uptime_s, bytes_in, bytes_out,
         memory_used: .memory.used, memory_limit: .memory.limit,
         spill_bytes: .spill.bytes,
         ready: $Q.ready, in_flight: $Q.in_flight, closed: $Q.closed,
         put: $Q.counters.put, delivered: $Q.counters.delivered,
         acked: $Q.counters.acked, nacked: $Q.counters.nacked,
         redelivered: $Q.counters.redelivered,
         dead_lettered: $Q.counters.dead_lettered,
         dropped: $Q.counters.dropped}')"
}

# SCIMQ_APP: the MPI program and its arguments (word-split); default the
# verifying consumer.  Users plug their own code in here.
scimq_app() {
    echo "${SCIMQ_APP:-$SCIMQ_MPI_RECV --verify ${SCIMQ_EXPECT:+--expect $SCIMQ_EXPECT}}"
}
