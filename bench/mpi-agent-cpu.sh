#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# CPU the runtime's threads take from the ranks' cores: the agent's
# threads (scimq-agent, and its gateway receiver scimq-agent-rx where it
# has one) and the ranks' progress threads (scimq-prefetch), summed
# from /proc/PID/task/TID/stat over a window, as a percentage of one core:
#
#   idle  RANKS ranks of scimq-mpi-recv on an empty queue;
#   busy  the same while scimq-send feeds RATE messages per second of
#         SIZE and each rank works WORK ms on each (a sleep).
#
# Each over TRIALS trials (one job each): min / Q1 / median / Q3 / max.
# With --json FILE, each trial also as one JSON line (bench/README.md).
#
#   bench/mpi-agent-cpu.sh [BUILDDIR] [--trials 3] [--seconds 4]
#       [--ranks 2] [--rate 500] [--size 256KiB] [--work-ms 2]
#       [--provider shm] [--json FILE]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILDDIR:-$top/build/default}
case ${1:-} in
'' | -*) ;;
*)
    build=$1
    shift
    ;;
esac
trials=3 secs=4 ranks=2 rate=500 size=256KiB work_ms=2 provider=shm
json_out=
while [ $# -gt 0 ]; do
    case $1 in
    --trials) trials=$2 ;;
    --seconds) secs=$2 ;;
    --ranks) ranks=$2 ;;
    --rate) rate=$2 ;;
    --size) size=$2 ;;
    --work-ms) work_ms=$2 ;;
    --provider) provider=$2 ;;
    --json) json_out=$2 ;;
    *)
        sed -n '/^#   bench/,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# \{0,1\}//' >&2
        exit 2
        ;;
    esac
    shift 2
done

gwbin=$build/src/gateway/scimq-gateway
send=$build/src/tools/scimq-send
ctl=$build/src/tools/scimqctl
mpirecv=$build/src/mpi/scimq-mpi-recv
for p in "$gwbin" "$send" "$ctl" "$mpirecv"; do
    [ -x "$p" ] || { echo "mpi-agent-cpu: $p not built (BUILDDIR=$build)" >&2; exit 1; }
done
command -v jq > /dev/null || { echo "mpi-agent-cpu: needs jq" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_base_warn_component_unused=0
unset SCIMQ_QUEUE LD_PRELOAD 2> /dev/null || true
export SCIMQ_MPI_MAX_MESSAGE=$size

work=$(mktemp -d "${TMPDIR:-/tmp}/scimq-agent-cpu.XXXXXX")
gw='' job='' producer=''
cleanup() {
    for p in $producer $job; do
        kill -TERM "$p" 2> /dev/null || true
        wait "$p" 2> /dev/null || true
    done
    if [ -n "$gw" ]; then
        kill -TERM "$gw" 2> /dev/null || true
        wait "$gw" 2> /dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$gwbin" --listen 127.0.0.1:0 --port-file "$work/port" \
    --memory-limit 1GiB > "$work/gateway.out" 2>&1 &
gw=$!
i=0
while [ ! -s "$work/port" ]; do
    i=$((i + 1))
    [ "$i" -gt 300 ] && { cat "$work/gateway.out" >&2; exit 1; }
    sleep 0.1
done
export SCIMQ_URL="scimq://$(cat "$work/port")"
hz=$(getconf CLK_TCK)

# ticks NAME...: CPU ticks (user + system) of every thread called NAME.
ticks() {
    t=0
    for f in /proc/[0-9]*/task/[0-9]*; do
        c=$(cat "$f/comm" 2> /dev/null) || continue
        case " $* " in *" $c "*) ;; *) continue ;; esac
        v=$(awk '{print $14 + $15}' "$f/stat" 2> /dev/null) || continue
        t=$((t + ${v:-0}))
    done
    echo "$t"
}

# window: percent of a core of each thread kind over $secs seconds.
window() {
    a0=$(ticks scimq-agent scimq-agent-rx) p0=$(ticks scimq-prefetch)
    t0=$(date +%s.%N)
    sleep "$secs"
    a1=$(ticks scimq-agent scimq-agent-rx) p1=$(ticks scimq-prefetch)
    t1=$(date +%s.%N)
    echo "$a0 $a1 $p0 $p1 $t0 $t1 $hz" | awk '{d = $6 - $5;
        printf "%.2f %.2f\n", 100 * ($2 - $1) / $7 / d, 100 * ($4 - $3) / $7 / d}'
}

trial_json() { # case trial value
    [ -n "$json_out" ] || return 0
    jq -cn --arg c "$1" --argjson t "$2" --argjson v "$3" \
        '{bench:"mpi-agent-cpu", case:$c, trial:$t, value:$v,
          unit:"% of a core", reference:false}' >> "$json_out"
}

dist() {
    sort -g "$1" | awk '{v[NR] = $1} END {
        n = NR
        printf "%.1f %.1f %.1f %.1f %.1f", v[1], v[int((n + 3) / 4)],
            v[int((n + 1) / 2)], v[int((3 * n + 1) / 4)], v[n] }'
}

[ -z "$json_out" ] || : > "$json_out"
: > "$work/ia" && : > "$work/ip" && : > "$work/ba" && : > "$work/bp"
for t in $(seq "$trials"); do
    q="cpu$t"
    "$ctl" queue create "$q" --guaranteed --ack-timeout 120 > /dev/null
    mpirun -n "$ranks" --oversubscribe "$mpirecv" --queue "$q" \
        --provider "$provider" --process-ms "$work_ms" \
        > "$work/job.json" 2> "$work/job.err" &
    job=$!
    # The job is up once its agents have subscribed.
    i=0
    until "$ctl" stats 2> /dev/null |
        jq -e --arg q "$q" '.queues[] | select(.name == $q) | .consumers > 0' > /dev/null; do
        i=$((i + 1))
        [ "$i" -gt 600 ] && { cat "$work/job.err" >&2; exit 1; }
        sleep 0.1
    done
    sleep 1
    set -- $(window)
    echo "$1" >> "$work/ia" && echo "$2" >> "$work/ip"
    trial_json "idle: agent" "$t" "$1"
    trial_json "idle: $ranks prefetch threads" "$t" "$2"
    "$send" --queue "$q" --synthetic --size "$size" --rate "$rate" \
        --count $((rate * (secs + 3))) > /dev/null &
    producer=$!
    sleep 1
    set -- $(window)
    echo "$1" >> "$work/ba" && echo "$2" >> "$work/bp"
    trial_json "busy: agent" "$t" "$1"
    trial_json "busy: $ranks prefetch threads" "$t" "$2"
    kill -TERM "$producer" 2> /dev/null || true
    wait "$producer" 2> /dev/null || true
    producer=
    kill -USR1 "$job" 2> /dev/null || true
    wait "$job" || { tail "$work/job.err" >&2; exit 1; }
    job=
done
echo "# mpi-agent-cpu: $ranks ranks, provider $provider, $trials trials of" \
    "$secs s (shared machine: figures vary with the load of others);" \
    "% of one core, min Q1 median Q3 max"
echo "idle (empty queue): agent $(dist "$work/ia"); $ranks prefetch threads $(dist "$work/ip")"
echo "busy ($rate msg/s of $size, $work_ms ms work): agent $(dist "$work/ba"); $ranks prefetch threads $(dist "$work/bp")"
