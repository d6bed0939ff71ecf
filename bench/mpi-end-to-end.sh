#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# End-to-end throughput from the gateway into the ranks of an MPI job,
# against the gateway to one TCP consumer: same gateway, same producer,
# same message count and size, same run.  For every size and trial, a
# guaranteed queue is filled with COUNT synthetic messages (scimq-send
# --close) while the consumer runs, once for each consumer, alternately:
#
#   mpi  mpirun -np RANKS scimq-mpi-recv --verify   (agent, pool, fi_read)
#   tcp  scimq-recv --streams 2 --verify --until-eos (one TCP consumer)
#
# The producer uses as many streams as the consumers (2).  Each consumer
# reports payload bytes and seconds (its clock starts before the first
# message: the producer is started once the consumer's session is up);
# MiB/s per trial, then min / Q1 / median / Q3 / max of each and
# the ratio of the medians, mpi / tcp.  Both consumers must verify every
# message: any loss, duplicate or corruption aborts the run (exit 1).
# Output is kept in bench/results/mpi-e2e-<date>.{txt,json,trials.jsonl}.
#
#   bench/mpi-end-to-end.sh [BUILDDIR] [--trials 5] [--count 300]
#       [--sizes 16MiB,1MiB] [--ranks 4] [--streams 2] [--provider P]
#       [--json FILE]
#
# BUILDDIR (argument or environment) is a build tree, build/default unless
# given; a tree configured in place works too (BUILDDIR=/path/to/source).
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
trials=5 count=300 sizes=16MiB ranks=4 streams=2 provider=

usage() {
    sed -n '/^#   bench/,/^set -eu/p' "$0" | sed -e '/^set -eu/d' \
        -e 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case $1 in
    --trials) trials=$2 ;;
    --count) count=$2 ;;
    --sizes) sizes=$2 ;;
    --ranks) ranks=$2 ;;
    --streams) streams=$2 ;;
    --provider) provider=$2 ;;
    --json) json_out=$2 ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        usage >&2
        exit 2
        ;;
    esac
    [ $# -ge 2 ] || { usage >&2; exit 2; }
    shift 2
done

gwbin=$build/src/gateway/scimq-gateway
send=$build/src/tools/scimq-send
recv=$build/src/tools/scimq-recv
ctl=$build/src/tools/scimqctl
mpirecv=$build/src/mpi/scimq-mpi-recv
mpirun=${MPIEXEC:-mpirun}
for p in "$gwbin" "$send" "$recv" "$ctl" "$mpirecv"; do
    [ -x "$p" ] || { echo "mpi-end-to-end: $p not built (BUILDDIR=$build)" >&2; exit 1; }
done
command -v "$mpirun" > /dev/null || { echo "mpi-end-to-end: no $mpirun" >&2; exit 1; }
command -v jq > /dev/null || { echo "mpi-end-to-end: needs jq" >&2; exit 1; }

# Open MPI as root, off libfabric itself (../shared/PLATFORM.md).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_base_warn_component_unused=0
unset SCIMQ_URL SCIMQ_QUEUE SCIMQ_MPI_MAX_MESSAGE LD_PRELOAD 2> /dev/null || true

out="$top/bench/results"
stamp=$(date +%Y%m%d-%H%M%S)
txt="$out/mpi-e2e-$stamp.txt"
trials_log="$out/mpi-e2e-$stamp.trials.jsonl"
work=$(mktemp -d "${TMPDIR:-/tmp}/scimq-e2e.XXXXXX")
mkdir -p "$out"

gw='' running='' producer=''
# Stops what this script started, by PID.  An MPI job killed mid-run
# leaves its shm regions (/dev/shm/PID:N:M): remove those of its ranks.
cleanup() {
    [ -z "$producer" ] || stop "$producer"
    if [ -n "$running" ]; then
        pids=$(descendants "$running")
        stop "$running"
        for p in $pids; do
            kill -KILL "$p" 2> /dev/null || true
            rm -f /dev/shm/"$p":*
        done
    fi
    [ -z "$gw" ] || stop "$gw"
    rm -rf "$work"
}

# stop PID: SIGTERM (the gateway drains), SIGKILL after 10 s.  A child
# that has exited stays a zombie until waited for: that is not running.
stop() {
    kill -TERM "$1" 2> /dev/null || return 0
    i=0
    while [ "$i" -lt 100 ]; do
        case $(ps -o stat= -p "$1" 2> /dev/null) in
        '' | Z*) break ;;
        esac
        i=$((i + 1))
        sleep 0.1
    done
    kill -KILL "$1" 2> /dev/null || true
    wait "$1" 2> /dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

descendants() {
    for c in $(pgrep -P "$1" 2> /dev/null || true); do
        echo "$c"
        descendants "$c"
    done
}

die() {
    echo "mpi-end-to-end: $*" >&2
    exit 1
}

# Bytes in SIZE (B, KiB, MiB, GiB).
bytes_of() {
    case $1 in
    *GiB) echo $((${1%GiB} << 30)) ;;
    *MiB) echo $((${1%MiB} << 20)) ;;
    *KiB) echo $((${1%KiB} << 10)) ;;
    *B) echo "${1%B}" ;;
    *) echo "$1" ;;
    esac
}

"$gwbin" --listen 127.0.0.1:0 --port-file "$work/port" \
    --memory-limit 2GiB > "$work/gateway.out" 2>&1 &
gw=$!
i=0
while [ ! -s "$work/port" ]; do
    i=$((i + 1))
    [ "$i" -gt 100 ] && { cat "$work/gateway.out" >&2; die "gateway did not start"; }
    sleep 0.1
done
url="scimq://$(cat "$work/port")"

# Sessions open at the gateway, this query's own included.
sessions() {
    v=$(timeout 10 "$ctl" --url "$url" stats 2> /dev/null |
        jq -r '.sessions // -1' 2> /dev/null || true)
    echo "${v:--1}"
}

# wait_sessions N PID: until N sessions are open (50 ms steps, 60 s at
# most); fails early if PID (the consumer) is gone.
wait_sessions() {
    i=0
    while [ "$(sessions)" -ne "$1" ]; do
        i=$((i + 1))
        [ "$i" -le 1200 ] || return 1
        [ -z "$2" ] || kill -0 "$2" 2> /dev/null || return 1
        sleep 0.05
    done
}

# wait_line WORD FILE: until FILE holds WORD (20 ms steps, 60 s at most),
# or the consumer ($running) is gone.
wait_line() {
    i=0
    until grep -q "$1" "$2" 2> /dev/null; do
        i=$((i + 1))
        [ "$i" -le 3000 ] && kill -0 "$running" 2> /dev/null || return 1
        sleep 0.02
    done
}

# json_trial KIND SIZE T MIBS: with --json FILE, the trial as one JSON line
# (bench/README.md, "JSON lines"; FILE is started afresh by the run); the
# TCP consumer is the in-run reference.
json_trial() {
    [ -n "${json_out:-}" ] || return 0
    if [ -z "${json_started:-}" ]; then
        : > "$json_out"
        json_started=1
    fi
    jq -cn --arg c "$2 ranks=$ranks K=$streams" --argjson t "$3" \
        --argjson v "$4" --arg s "$1" --argjson r "$([ "$1" = tcp ] &&
            echo true || echo false)" \
        '{bench: "mpi-end-to-end", case: $c, trial: $t, value: $v,
          unit: "MiB/s", reference: $r, series: $s}' >> "$json_out"
}

# trial KIND SIZE T: trial T of one consumer, draining a queue filled
# while it runs; appends its MiB/s to $work/KIND.SIZE.
trial() {
    kind=$1 size=$2 t=$3
    q="e2e.$kind.$size.$t"
    nbytes=$(bytes_of "$size")
    # Generous bound: 20 MiB/s at least, and a minute for start-up.
    limit=$((60 + count * (nbytes >> 20) / 20))
    "$ctl" --url "$url" queue create "$q" --guaranteed > /dev/null ||
        die "cannot create queue $q"
    # The previous consumer has left: only this query's session is open.
    wait_sessions 1 "" || die "the gateway still holds old sessions"
    if [ "$kind" = mpi ]; then
        # Rank 0 logs "consuming ..." once scimq_mpi_init is done (INFO).
        # --foreground: timeout signals mpirun once (a second SIGTERM
        # makes mpirun leave at once, without stopping its ranks).
        SCIMQ_LOG_LEVEL=warn,mpi=info timeout --foreground \
            --kill-after=10 "$limit" "$mpirun" -np "$ranks" \
            --oversubscribe "$mpirecv" --url "$url" --queue "$q" --verify \
            --until-eos --expect "$count" --streams "$streams" \
            --max-message "$size" ${provider:+--provider "$provider"} \
            > "$work/consumer.json" 2> "$work/consumer.err" &
    else
        timeout --kill-after=10 "$limit" "$recv" --url "$url" --queue "$q" \
            --streams "$streams" --verify --until-eos --expect "$count" \
            > "$work/consumer.json" 2> "$work/consumer.err" &
    fi
    running=$!
    # Start producing once the consumer is ready, so that its clock starts
    # about when the first message leaves: scimq-recv times from its own
    # start, so its connected session is enough; scimq-mpi-recv times from
    # the end of its initialisation (pool faulted in, agent subscribed),
    # so wait for that, or the agent would fill its pool before the clock
    # starts.
    if ! wait_sessions 2 "$running" ||
        { [ "$kind" = mpi ] && ! wait_line consuming "$work/consumer.err"; }; then
        cat "$work/consumer.err" >&2
        die "$kind consumer did not start"
    fi
    # In the background: a signal interrupts wait, not a foreground child.
    timeout --kill-after=10 "$limit" "$send" --url "$url" --queue "$q" \
        --streams "$streams" --synthetic --size "$size" --count "$count" \
        --close > "$work/send.json" 2> "$work/send.err" &
    producer=$!
    st=0
    wait "$producer" || st=$?
    producer=''
    [ "$st" -eq 0 ] ||
        { cat "$work/send.err" >&2; die "scimq-send failed ($kind, $size)"; }
    wait "$running" || st=$?
    running=
    res=$(tail -n 1 "$work/consumer.json")
    # Per trial: the consumer's summary, and the producer's rate (close to
    # the consumer's, the producer side may be what limits both).
    prod=$(jq -r '.MiB_per_s // null' "$work/send.json" 2> /dev/null || echo null)
    echo "$res" | jq -c --arg k "$kind" --arg s "$size" --argjson t "$t" \
        --argjson p "${prod:-null}" --slurp \
        '.[0] + {kind: $k, size_arg: $s, trial: $t, producer_MiB_per_s: $p}' \
        >> "$trials_log" 2> /dev/null || true
    # Zero loss or no measurement: every message verified exactly once.
    ok=$(echo "$res" | jq -r --argjson n "$count" \
        '.messages == $n and .verified == $n and .lost == 0 and
         .corrupt == 0 and .duplicates == 0 and .eos == true and
         (.error == null)' 2> /dev/null || echo false)
    if [ "$st" -ne 0 ] || [ "$ok" != true ]; then
        cat "$work/consumer.err" >&2
        die "$kind trial $t ($size): exit $st, result: $res"
    fi
    echo "$res" | jq -r '.bytes / .seconds / 1048576' >> "$work/$kind.$size"
    json_trial "$kind" "$size" "$t" "$(tail -n 1 "$work/$kind.$size")"
    "$ctl" --url "$url" queue delete "$q" > /dev/null 2>&1 || true
}

# min Q1 median Q3 max of the numbers in FILE (as scimq__dist_of does:
# quartiles by linear interpolation between order statistics).
dist() {
    sort -g "$1" | awk '
        function q(p,    pos, lo, f) {
            pos = p * (n - 1); lo = int(pos); f = pos - lo
            return lo + 1 < n ? v[lo] * (1 - f) + v[lo + 1] * f : v[lo]
        }
        { v[NR - 1] = $1 }
        END { n = NR; printf "%.1f %.1f %.1f %.1f %.1f\n",
              v[0], q(0.25), q(0.5), q(0.75), v[n - 1] }'
}

{
    echo "machine: $(nproc) cores, $(uname -r); $(date -u)"
    echo "gateway -> consumer, guaranteed queue, $count messages per trial," \
        "$trials trials; mpi: $ranks ranks, tcp: 1 process; $streams streams each"
    printf '%-7s  %-42s  %-42s  %s\n' size \
        "mpi MiB/s  min / Q1 / median / Q3 / max" \
        "tcp MiB/s  min / Q1 / median / Q3 / max" ratio
} | tee "$txt"
json=
for size in $(echo "$sizes" | tr ',' ' '); do
    : > "$work/mpi.$size"
    : > "$work/tcp.$size"
    t=1
    while [ "$t" -le "$trials" ]; do
        trial mpi "$size" "$t"
        trial tcp "$size" "$t"
        t=$((t + 1))
    done
    # shellcheck disable=SC2046 # ten numbers, split on purpose
    set -- $(dist "$work/mpi.$size") $(dist "$work/tcp.$size")
    ratio=$(awk -v a="$3" -v b="$8" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
    printf '%-7s  %8s %8s %8s %8s %8s  %8s %8s %8s %8s %8s  %5s\n' \
        "$size" "$@" "$ratio" | tee -a "$txt"
    obj=$(jq -cn --arg s "$size" --argjson b "$(bytes_of "$size")" \
        --argjson m "[$1,$2,$3,$4,$5]" --argjson c "[$6,$7,$8,$9,${10}]" \
        --argjson r "$ratio" \
        'def d(a): {min: a[0], q1: a[1], median: a[2], q3: a[3], max: a[4]};
         {size: $b, size_arg: $s, mpi_MiB_per_s: d($m),
          tcp_MiB_per_s: d($c), ratio: $r}')
    json="${json:+$json,}$obj"
done
jq -cn --argjson r "[$json]" --argjson n "$count" --argjson t "$trials" \
    --argjson k "$ranks" --argjson s "$streams" \
    '{tool: "mpi-end-to-end", count: $n, trials: $t, ranks: $k,
      streams: $s, results: $r}' | tee -a "$txt" > "$out/mpi-e2e-$stamp.json"
echo "results in $txt"
