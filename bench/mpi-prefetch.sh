#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# Prefetch, end to end through the real gateway, agent and runtime
# (scimq-mpi-recv; the work per message is a sleep, so ranks do not
# compete for the cores and the figure is the runtime's, not the CPU's).
#
#   efficiency  one rank drains COUNT messages of SIZE, a queue filled
#               before the job, working --process-ms MS on each, with
#               SCIMQ_MPI_PREFETCH = 0, 1 and auto.  Efficiency = time
#               working / time in the loop.  The transfer time t is
#               measured in the same run (P = 0, no work: seconds per
#               message), s = MS / t, printed beside the bounded-buffer
#               model: s/(s+1) for a synchronous drain, min(s, 1) for an
#               overlapped one.
#   straggler   RANKS ranks, two of them FACTOR times slower, the last MS of
#               --work-ms per message, SCOUNT messages of SSIZE (small, so
#               that the gateway is not what limits): messages per second
#               against the capacity-weighted ideal (sum over ranks of one
#               over their service time).  4000 messages (2.5 s at the
#               ideal rate): with 800 the job's start and its tail (the
#               slow ranks finishing the P + 1 messages they hold, 40 ms)
#               were a tenth of the run.
#
# Each figure over TRIALS trials: min / Q1 / median / Q3 / max.  With
# --json FILE, each trial also as one JSON line (bench/README.md).
#
#   bench/mpi-prefetch.sh [BUILDDIR] [--trials 5] [--count 200]
#       [--size 1MiB] [--work-ms 1,4] [--ranks 8] [--slow-factor 5]
#       [--straggler-size 64KiB] [--straggler-count 4000]
#       [--only efficiency|straggler] [--provider shm] [--json FILE]
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
trials=5 count=200 size=1MiB works=1,4 ranks=8 factor=5 provider=shm
ssize=64KiB scount=4000 only=
json_out=
while [ $# -gt 0 ]; do
    case $1 in
    --trials) trials=$2 ;;
    --count) count=$2 ;;
    --size) size=$2 ;;
    --work-ms) works=$2 ;;
    --ranks) ranks=$2 ;;
    --slow-factor) factor=$2 ;;
    --provider) provider=$2 ;;
    --straggler-size) ssize=$2 ;;
    --straggler-count) scount=$2 ;;
    --only) only=$2 ;;
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
    [ -x "$p" ] || { echo "mpi-prefetch: $p not built (BUILDDIR=$build)" >&2; exit 1; }
done
command -v jq > /dev/null || { echo "mpi-prefetch: needs jq" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_base_warn_component_unused=0
unset SCIMQ_QUEUE SCIMQ_MPI_PREFETCH LD_PRELOAD 2> /dev/null || true
export SCIMQ_MPI_MAX_MESSAGE=$size

work=$(mktemp -d "${TMPDIR:-/tmp}/scimq-prefetch.XXXXXX")
gw=
cleanup() {
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
q=0

# fill N [SIZE]: a new queue holding N messages of SIZE ($size), closed;
# its name in $qn.
fill() {
    q=$((q + 1))
    qn="pf$q"
    "$ctl" queue create "$qn" --guaranteed --ack-timeout 120 > /dev/null
    timeout 300 "$send" --queue "$qn" --synthetic --size "${2:-$size}" \
        --count "$1" --close > /dev/null
}

# job NP PREFETCH ARGS...: runs scimq-mpi-recv on $qn, its JSON in $work/j.
job() {
    np=$1 p=$2
    shift 2
    SCIMQ_MPI_PREFETCH=$p timeout 600 mpirun -n "$np" --oversubscribe \
        "$mpirecv" --queue "$qn" --verify --provider "$provider" "$@" \
        > "$work/j" 2> "$work/j.err" || { tail "$work/j.err" >&2; exit 1; }
    [ "$(jq -r .lost "$work/j")" = 0 ] && [ "$(jq -r .corrupt "$work/j")" = 0 ] ||
        { echo "mpi-prefetch: loss or corruption" >&2; exit 1; }
}

trial_json() { # bench case trial value unit reference
    [ -n "$json_out" ] || return 0
    jq -cn --arg b "$1" --arg c "$2" --argjson t "$3" --argjson v "$4" \
        --arg u "$5" --argjson r "$6" \
        '{bench:$b, case:$c, trial:$t, value:$v, unit:$u, reference:$r}' \
        >> "$json_out"
}

# dist FILE: min Q1 median Q3 max of the numbers in FILE.
dist() {
    sort -g "$1" | awk '{v[NR] = $1} END {
        n = NR
        printf "%.3f %.3f %.3f %.3f %.3f", v[1], v[int((n + 3) / 4)],
            v[int((n + 1) / 2)], v[int((3 * n + 1) / 4)], v[n] }'
}
median() { dist "$1" | awk '{print $3}'; }

[ -z "$json_out" ] || : > "$json_out"
echo "# mpi-prefetch: $size messages, provider $provider, $trials trials" \
    "(shared machine: figures vary with the load of others)"

if [ "$only" != straggler ]; then
# Transfer time per message: P = 0, no work.
: > "$work/t"
for t in $(seq "$trials"); do
    fill "$count"
    job 1 0
    s=$(jq -r .seconds "$work/j")
    echo "$s $count" | awk '{printf "%.6f\n", 1000 * $1 / $2}' >> "$work/t"
    trial_json transfer "P=0 work=0" "$t" "$(tail -1 "$work/t")" ms true
done
tms=$(median "$work/t")
echo "transfer time per message (ms): $(dist "$work/t")"

for w in $(echo "$works" | tr , ' '); do
    sr=$(echo "$w $tms" | awk '{printf "%.3f", $1 / $2}')
    echo "work $w ms, s = $sr: model synchronous $(echo "$sr" | awk '{printf "%.3f", $1 / ($1 + 1)}'), overlapped $(echo "$sr" | awk '{printf "%.3f", $1 < 1 ? $1 : 1}')"
    for p in 0 1 auto; do
        : > "$work/e"
        for t in $(seq "$trials"); do
            fill "$count"
            job 1 "$p" --process-ms "$w"
            jq -r '.per_rank[0].busy_s / .seconds' "$work/j" >> "$work/e"
            trial_json efficiency "P=$p work=${w}ms" "$t" "$(tail -1 "$work/e")" ratio false
        done
        echo "  P=$p efficiency: $(dist "$work/e")"
    done
done

fi

[ "$only" != efficiency ] || exit 0
# Straggler: ranks 0 and 1 are FACTOR times slower.
w=$(echo "$works" | tr , ' ' | awk '{print $NF}')
ideal=$(echo "$ranks $factor $w" | awk '{printf "%.3f", (($1 - 2) + 2 / $2) * 1000 / $3}')
: > "$work/s"
for t in $(seq "$trials"); do
    fill "$scount" "$ssize"
    job "$ranks" 1 --process-ms "$w" --slow-ranks 0,1 --slow-factor "$factor"
    jq -r --argjson i "$ideal" '.messages / .seconds / $i' "$work/j" >> "$work/s"
    trial_json straggler "$ranks ranks, 2 x$factor slower, P=1" "$t" "$(tail -1 "$work/s")" ratio false
done
echo "straggler ($ranks ranks, 2 of them ${factor}x slower, ${w} ms work, $scount x $ssize;" \
    "ideal $ideal msg/s): throughput / ideal $(dist "$work/s")"
