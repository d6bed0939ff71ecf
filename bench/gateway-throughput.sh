#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# Gateway throughput against iperf3, with what the gateway spends on it:
# CPU seconds per GiB relayed and peak resident memory.  For every message
# size, stream count K and trial, a fresh gateway is started on loopback,
# warmed up, and one scimq-bench trial (one producer with K streams ->
# guaranteed queue -> one consumer with K streams, every message
# acknowledged) moves --bytes through it; then iperf3 moves the same volume
# with K parallel streams.  Per trial:
#
#   MiB/s       scimq-bench's payload rate (first PUT to last delivery)
#   CPU s/GiB   the gateway's utime + stime (/proc/PID/stat, all threads)
#               over the trial, divided by the payload GiB it relayed
#   RSS MiB     the gateway's peak resident set (VmHWM, /proc/PID/status),
#               reset after the warm-up (clear_refs)
#
# and min / Q1 / median / Q3 / max over the trials for each.
#
# --gateway-ref PATH runs every trial with a second gateway binary too,
# interleaved (new, ref on odd trials, ref, new on even ones; same sizes,
# streams, volume, client tools), and adds the ratios of the medians,
# new / ref.
#
# --durability LIST (e.g. memory,batch,sync) runs every trial once per
# journal mode instead, interleaved, on the new gateway: memory without a
# journal, batch and sync with a fresh journal in $TMPDIR (put TMPDIR on
# the disk to measure), and adds the journal's syncs per trial and their
# latency (median, p99, both as the upper bound of their power-of-two
# bucket, and the largest); ratios are against the first mode.  With --gateway-ref
# too, every mode also runs on the reference (ref-MODE, interleaved), and
# each mode's MiB/s and CPU get the ratio to the reference's.
#
# --memory-test instead runs a producer at least twice as fast as its
# consumer against --memory-limit (256MiB), with a spill directory and
# without one (producers back-pressured), and reports the gateway's peak
# RSS against the limit + 64 MiB.  The consumer verifies every message
# (nothing lost or corrupt), nothing spilled may be left once every
# message is acknowledged, and no spill file after exit; otherwise the
# run stops with exit status 1.
#
# Output is kept in bench/results/gateway-<date>.{txt,json,trials.jsonl}
# (gateway-memory-<date>.* for the memory test).
#
#   bench/gateway-throughput.sh [BUILDDIR] [--sizes 1MiB,16MiB]
#       [--streams 1,4,8] [--trials 5] [--bytes 1GiB] [--warmup 256MiB]
#       [--memory-limit 4GiB] [--iperf3 PATH|none] [--iperf-port 5399]
#       [--gateway-args 'ARGS'] [--gateway-ref PATH] [--tools-ref DIR]
#       [--durability memory,batch,sync] [--json FILE]
#   bench/gateway-throughput.sh [BUILDDIR] --memory-test [--trials 3]
#       [--memory-limit 256MiB] [--memory-size 16MiB] [--memory-count 128]
#       [--memory-rate 32] [--memory-streams 8]
#       [--memory-variants spill,backpressure]
#       [--gateway-args 'ARGS'] [--gateway-ref PATH] [--tools-ref DIR]
#
# BUILDDIR (argument or environment) is a build tree, build/default unless
# given; its scimq-gateway is "new" and its tools drive both gateways.
# --tools-ref DIR (scimq-bench, scimq-send, scimq-recv, scimqctl) drives
# the reference gateway instead, for a client that no longer speaks to it.
# --gateway-args is split into words and given to every gateway (e.g.
# '--workers 1').  --memory-rate is the producer's messages per second;
# the consumer spends 2000 / rate ms on each message, plus the receive.
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
sizes=1MiB,16MiB streams=1,4,8 trials='' bytes=1GiB warmup=256MiB
mem_limit='' iperf=iperf3 iperf_port=5399 gwargs='' gw_ref='' tools_ref=''
memory_test=false msize=16MiB mcount=128 mrate=32 mstreams=8
mvariants=spill,backpressure

usage() {
    sed -n '/^#   bench/,/^set -eu/p' "$0" | sed -e '/^set -eu/d' \
        -e 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case $1 in
    --memory-test)
        memory_test=true
        shift
        continue
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    esac
    [ $# -ge 2 ] || { usage >&2; exit 2; }
    case $1 in
    --sizes) sizes=$2 ;;
    --streams) streams=$2 ;;
    --trials) trials=$2 ;;
    --bytes) bytes=$2 ;;
    --warmup) warmup=$2 ;;
    --memory-limit) mem_limit=$2 ;;
    --iperf3) iperf=$2 ;;
    --iperf-port) iperf_port=$2 ;;
    --gateway-args) gwargs=$2 ;;
    --gateway-ref) gw_ref=$2 ;;
    --tools-ref) tools_ref=$2 ;;
    --durability) durability=$2 ;;
    --memory-size) msize=$2 ;;
    --memory-count) mcount=$2 ;;
    --memory-rate) mrate=$2 ;;
    --memory-streams) mstreams=$2 ;;
    --memory-variants) mvariants=$2 ;;
    --json) json_out=$2 ;;
    *)
        usage >&2
        exit 2
        ;;
    esac
    shift 2
done

die() {
    echo "gateway-throughput: $*" >&2
    exit 1
}

warn() {
    echo "gateway-throughput: warning: $*" >&2
}

# Bytes in SIZE (B, KiB, MiB, GiB, or a plain number); SIZE itself when
# it is not one (the checks below reject it).
bytes_of() {
    case $1 in
    *GiB) n=${1%GiB} bits=30 ;;
    *MiB) n=${1%MiB} bits=20 ;;
    *KiB) n=${1%KiB} bits=10 ;;
    *B) n=${1%B} bits=0 ;;
    *) n=$1 bits=0 ;;
    esac
    case $n in
    '' | *[!0-9]*) echo "$1" ;;
    *) echo $((n << bits)) ;;
    esac
}

# Every count and size must be a positive integer before any gateway runs.
if $memory_test; then
    trials=${trials:-3} mem_limit=${mem_limit:-256MiB}
    checked="$trials $mcount $mrate $mstreams $(bytes_of "$msize")"
else
    trials=${trials:-5} mem_limit=${mem_limit:-4GiB}
    checked="$trials $(bytes_of "$bytes") $iperf_port"
    for s in $(echo "$sizes" | tr ',' ' '); do
        checked="$checked $(bytes_of "$s")"
    done
    for k in $(echo "$streams" | tr ',' ' '); do
        checked="$checked $k"
    done
    [ "$warmup" = 0 ] || checked="$checked $(bytes_of "$warmup")"
fi
checked="$checked $(bytes_of "$mem_limit")"
for v in $checked; do
    case $v in
    '' | *[!0-9]* | 0)
        echo "gateway-throughput: bad count or size: '$v'" >&2
        exit 2
        ;;
    esac
done

gw_new=$build/src/gateway/scimq-gateway
tools_new=$build/src/tools
tools_ref=${tools_ref:-$tools_new}
builds=gateway
if [ -n "$gw_ref" ]; then
    builds='new ref'
    [ -x "$gw_ref" ] || die "--gateway-ref $gw_ref is not an executable"
fi
if [ -n "${durability:-}" ]; then
    ! $memory_test || die "--durability and --memory-test do not go together"
    builds=$(echo "$durability" | tr ',' ' ')
    for b in $builds; do
        case $b in
        memory | batch | sync) ;;
        *) die "--durability: '$b' is not memory, batch or sync" ;;
        esac
    done
    # With --gateway-ref every mode runs on the reference too (ref-MODE).
    [ -z "$gw_ref" ] || builds="$builds $(for b in $builds; do printf 'ref-%s ' "$b"; done)"
fi
[ -x "$gw_new" ] || die "$gw_new not built (BUILDDIR=$build)"

gw_of() {
    case $1 in
    ref | ref-*) echo "$gw_ref" ;;
    *) echo "$gw_new" ;;
    esac
}
tools_of() {
    case $1 in
    ref | ref-*) echo "$tools_ref" ;;
    *) echo "$tools_new" ;;
    esac
}

if $memory_test; then
    needed='scimq-send scimq-recv scimqctl'
else
    needed=scimq-bench
fi
for b in $builds; do
    for tool in $needed; do
        [ -x "$(tools_of "$b")/$tool" ] ||
            die "no $(tools_of "$b")/$tool for '$b' (BUILDDIR, --tools-ref)"
    done
done
command -v jq > /dev/null || die "needs jq (Debian package jq)"
if ! $memory_test && [ "$iperf" != none ]; then
    command -v "$iperf" > /dev/null ||
        die "needs $iperf (Debian package iperf3), or --iperf3 none"
fi
tck=$(getconf CLK_TCK)

out="$top/bench/results"
stamp=$(date +%Y%m%d-%H%M%S)
if $memory_test; then
    base="$out/gateway-memory-$stamp"
else
    base="$out/gateway-$stamp"
fi
txt=$base.txt trials_log=$base.trials.jsonl
work=$(mktemp -d "${TMPDIR:-/tmp}/scimq-bench.XXXXXX")
mkdir -p "$out"

gw='' iperf_srv='' producer='' consumer=''
# Stops what this script started, by PID.
cleanup() {
    for p in $producer $consumer $iperf_srv $gw; do
        stop "$p" || true
    done
    rm -rf "$work"
}

# stop PID: SIGTERM (the gateway drains), SIGKILL after 10 s.  Returns 1
# if SIGKILL was needed.  A child that has exited stays a zombie until
# waited for: that is not running.
stop() {
    kill -TERM "$1" 2> /dev/null || { wait "$1" 2> /dev/null || true; return 0; }
    i=0
    while [ "$i" -lt 100 ]; do
        case $(ps -o stat= -p "$1" 2> /dev/null) in
        '' | Z*)
            wait "$1" 2> /dev/null || true
            return 0
            ;;
        esac
        i=$((i + 1))
        sleep 0.1
    done
    kill -KILL "$1" 2> /dev/null || true
    wait "$1" 2> /dev/null || true
    return 1
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------------
# The gateway process: start, /proc figures, stop

# gw_start BUILD LIMIT [ARGS...]: a fresh gateway of BUILD on a free port
# (sets gw and url).  Its log goes to $work/gateway.out.
gw_start() {
    gw_build=$1 gw_limit=$2
    shift 2
    rm -f "$work/port"
    # shellcheck disable=SC2086 # --gateway-args is split on purpose
    "$(gw_of "$gw_build")" --listen 127.0.0.1:0 --port-file "$work/port" \
        --memory-limit "$gw_limit" $gwargs "$@" > "$work/gateway.out" 2>&1 &
    gw=$!
    i=0
    while [ ! -s "$work/port" ]; do
        i=$((i + 1))
        if [ "$i" -gt 200 ] || ! kill -0 "$gw" 2> /dev/null; then
            cat "$work/gateway.out" >&2
            die "gateway '$gw_build' did not start"
        fi
        sleep 0.05
    done
    url="scimq://$(cat "$work/port")"
    # A gateway that pre-faults its payload pool does it in the
    # background: the trial starts once that is done, or it would be
    # timed and charged to the trial.
    i=0
    while [ "$("$(tools_of "$gw_build")/scimqctl" --url "$url" stats 2> /dev/null |
        jq -r '.memory.prefault // "off"')" = running ]; do
        i=$((i + 1))
        [ "$i" -gt 1200 ] && die "gateway '$gw_build' still pre-faulting after 120 s"
        sleep 0.1
    done
}

# gw_stop: SIGTERM; sets stopped to term, or kill if it had to be killed.
gw_stop() {
    stopped=term
    stop "$gw" || {
        stopped='kill'
        warn "gateway did not stop within 10 s of SIGTERM (killed)"
    }
    gw=''
}

# CPU clock ticks (utime + stime, every thread) of PID.  The command name
# in field 2 may hold spaces: fields are counted after its ')'.
cpu_ticks() {
    sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

# Peak resident set of PID in KiB.
hwm_kib() {
    awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"
}

# Until PID's CPU time stands still for 0.2 s (10 s at most): start-up
# work (a pool being faulted in, a warm-up's connections closing) stays
# out of the measured trial.
settle() {
    prev=$(cpu_ticks "$1")
    i=0
    while [ "$i" -lt 50 ]; do
        sleep 0.2
        cur=$(cpu_ticks "$1")
        [ "$cur" != "$prev" ] || return 0
        prev=$cur
        i=$((i + 1))
    done
    warn "gateway CPU time still moving after 10 s idle"
}

# Resets PID's VmHWM to its current RSS (Linux >= 4.0, clear_refs 5).
hwm_reset_ok=unknown
hwm_reset() {
    if (echo 5 > "/proc/$1/clear_refs") 2> /dev/null; then
        hwm_reset_ok=true
    else
        [ "$hwm_reset_ok" = false ] ||
            warn "cannot reset VmHWM: peak RSS includes start-up and warm-up"
        hwm_reset_ok=false
    fi
}

# ------------------------------------------------------------------------
# Distributions

# min Q1 median Q3 max of the numbers in FILE with printf format FMT (as
# scimq__dist_of: quartiles by linear interpolation between order
# statistics); "- - - - -" when FILE is empty.
dist() {
    sort -g "$1" | awk -v f="$2" '
        function q(p,    pos, lo, r) {
            pos = p * (n - 1); lo = int(pos); r = pos - lo
            return lo + 1 < n ? v[lo] * (1 - r) + v[lo + 1] * r : v[lo]
        }
        { v[NR - 1] = $1 }
        END {
            n = NR
            if (n == 0) { print "- - - - -"; exit }
            fmt = f " " f " " f " " f " " f "\n"
            printf fmt, v[0], q(0.25), q(0.5), q(0.75), v[n - 1]
        }'
}

# JSON object of a distribution (the five words of dist), or null.
dist_json() {
    if [ "$1" = - ]; then
        echo null
    else
        echo "{\"min\":$1,\"q1\":$2,\"median\":$3,\"q3\":$4,\"max\":$5}"
    fi
}

# Median of the numbers in FILE at full precision, or "-".
median() {
    dist "$1" %.6f | cut -d' ' -f3
}

# A / B to two decimals, or "-" when either is missing or B is 0.
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a == "-" || b == "-" || b + 0 == 0) print "-"
        else printf "%.2f\n", a / b }'
}

# row SIZE K METRIC BUILD DIST(5 words) [RATIO NOTE]: one table line.
row() {
    printf '%-7s %3s  %-10s %-10s %9s %9s %9s %9s %9s  %s\n' "$@" | tee -a "$txt"
}

machine() {
    echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 \
        /proc/loadavg); $(date -u)"
    for b in $builds; do
        echo "$b: $(gw_of "$b") ($("$(gw_of "$b")" --version 2> /dev/null |
            head -n 1)), tools $(tools_of "$b")"
    done
}

# ------------------------------------------------------------------------
# Throughput, CPU per GiB, peak RSS

# The builds in the order of trial T: new, ref on odd trials, ref, new on
# even ones, so that neither always runs first (just after iperf3, or
# after the other's teardown) and a drift of the machine over the run
# weighs on both alike.
order() {
    if [ -n "$gw_ref" ] && [ -z "${durability:-}" ] && [ $(($1 % 2)) -eq 0 ]; then
        echo ref new
    elif [ -n "${durability:-}" ] && [ $(($1 % 2)) -eq 0 ]; then
        # Reversed on even trials, so no mode always runs first.
        echo "$builds" | tr ' ' '\n' | tac | tr '\n' ' '
    else
        echo "$builds"
    fi
}

# journal_sample BUILD T: the journal's syncs in the trial and their median
# latency, appended to $work/BUILD.{syncs,syncus}; the journal goes.
journal_sample() {
    "$(tools_of "$1")/scimqctl" --url "$url" stats > "$work/stats.json" ||
        die "stats failed ($1)"
    jq -r '.journal.syncs // 0' "$work/stats.json" >> "$work/$1.syncs"
    jq -r '.journal.sync_us.median_below // 0' "$work/stats.json" \
        >> "$work/$1.syncus"
    jq -r '.journal.sync_us.p99_below // 0' "$work/stats.json" \
        >> "$work/$1.syncp99"
    jq -r '.journal.sync_us.max // 0' "$work/stats.json" >> "$work/$1.syncmax"
    rm -rf "$work/journal.$1.$2"
}

# journal_args BUILD T: a fresh journal for a durability mode's trial.
journal_args() {
    case ${1#ref-} in
    batch | sync) echo "--journal-dir $work/journal.$1.$2 --durability ${1#ref-}" ;;
    esac
}

# bench_trial BUILD SIZE K T: one trial on a fresh gateway; appends
# MiB/s, CPU s/GiB and peak RSS MiB to $work/BUILD.{mibs,cpu,rss}.
bench_trial() {
    b=$1 size=$2 k=$3 t=$4
    bench="$(tools_of "$b")/scimq-bench"
    nbytes=$(bytes_of "$size")
    n=$(($(bytes_of "$bytes") / nbytes))
    [ "$n" -gt 0 ] || n=1
    payload=$((n * nbytes))
    # Generous bound: 10 MiB/s at least, and a minute for start-up.
    limit=$((60 + (payload >> 20) / 10))
    # shellcheck disable=SC2046 # the journal's flags, split on purpose
    gw_start "$b" "$mem_limit" $(journal_args "$b" "$t")
    if [ "$warmup" != 0 ]; then
        timeout --kill-after=10 "$limit" "$bench" --url "$url" \
            --sizes "$size" --streams "$k" --trials 1 --bytes "$warmup" \
            --iperf3 none > /dev/null 2> "$work/bench.err" ||
            { cat "$work/bench.err" >&2; die "warm-up failed ($b, $size, K=$k)"; }
    fi
    settle "$gw"
    hwm_reset "$gw"
    c0=$(cpu_ticks "$gw")
    st=0
    timeout --kill-after=10 "$limit" "$bench" --url "$url" --sizes "$size" \
        --streams "$k" --trials 1 --bytes "$bytes" --iperf3 none \
        > "$work/bench.out" 2> "$work/bench.err" || st=$?
    c1=$(cpu_ticks "$gw")
    hwm=$(hwm_kib "$gw")
    [ -z "${durability:-}" ] || journal_sample "$b" "$t"
    gw_stop
    res=$(tail -n 1 "$work/bench.out")
    mibs=$(echo "$res" | jq -r 'if .error == null then
        .results[0].gateway_MiB_per_s.median else "-" end' 2> /dev/null ||
        echo -)
    if [ "$st" -ne 0 ] || [ "$mibs" = - ]; then
        cat "$work/bench.err" "$work/gateway.out" >&2
        die "trial $t failed ($b, $size, K=$k): exit $st, $res"
    fi
    cpu=$(awk -v d="$((c1 - c0))" -v t="$tck" -v p="$payload" \
        'BEGIN { printf "%.4f\n", d / t / (p / 1073741824) }')
    rss=$(awk -v h="$hwm" 'BEGIN { printf "%.1f\n", h / 1024 }')
    echo "$mibs" >> "$work/$b.mibs"
    echo "$cpu" >> "$work/$b.cpu"
    echo "$rss" >> "$work/$b.rss"
    jq -cn --arg b "$b" --arg s "$size" --argjson k "$k" --argjson t "$t" \
        --argjson p "$payload" --argjson m "$mibs" \
        --argjson c "$(awk -v d="$((c1 - c0))" -v t="$tck" \
            'BEGIN { print d / t }')" --argjson g "$cpu" --argjson r "$rss" \
        --arg st "$stopped" --argjson h "$hwm_reset_ok" \
        '{build: $b, size_arg: $s, streams: $k, trial: $t,
          payload_bytes: $p, MiB_per_s: $m, cpu_s: $c, cpu_s_per_GiB: $g,
          peak_rss_MiB: $r, rss_reset_after_warmup: $h, stopped: $st}' \
        >> "$trials_log"
    json_trial MiB/s "$mibs" "$b" "$size K=$k" "$t"
    json_trial "CPU s/GiB" "$cpu" "$b" "$size K=$k" "$t"
    json_trial "peak RSS MiB" "$rss" "$b" "$size K=$k" "$t"
}

# json_trial UNIT VALUE SERIES CASE T: with --json FILE, trial T of CASE
# as one JSON line (bench/README.md, "JSON lines"; FILE is started afresh
# by the run).  The in-run reference of a case is iperf3, the --gateway-ref
# build or the first --durability mode.
json_trial() {
    [ -n "${json_out:-}" ] || return 0
    if [ -z "${json_started:-}" ]; then
        : > "$json_out"
        json_started=1
    fi
    jr=false
    case $3 in
    iperf3 | ref | ref-*) jr=true ;;
    esac
    jfirst=${durability:-}
    jfirst=${jfirst%%,*}
    [ -z "$jfirst" ] || [ "$3" != "$jfirst" ] || jr=true
    jq -cn --arg u "$1" --argjson v "$2" --arg s "$3" --arg c "$4" \
        --argjson t "$5" --argjson r "$jr" \
        '{bench: "gateway-throughput", case: $c, trial: $t, value: $v,
          unit: $u, reference: $r, series: $s}' >> "$json_out"
}

# iperf_trial K SECONDS T: iperf3 over K streams for SECONDS; appends its
# MiB/s to $work/iperf3.mibs (a failed run is reported and left out, as
# scimq-bench does).
iperf_trial() {
    st=0
    timeout --kill-after=10 $(($2 + 30)) "$iperf" -c 127.0.0.1 \
        -p "$iperf_port" -P "$1" -t "$2" -J > "$work/iperf.json" \
        2> /dev/null || st=$?
    v=$(jq -r '.end.sum_received.bits_per_second / 8 / 1048576' \
        "$work/iperf.json" 2> /dev/null || echo -)
    case $v in
    '' | - | null | 0)
        warn "iperf3 trial $3 (K=$1) failed (exit $st)"
        return 0
        ;;
    esac
    echo "$v" >> "$work/iperf3.mibs"
    jq -cn --argjson k "$1" --argjson t "$3" --argjson m "$v" \
        '{build: "iperf3", streams: $k, trial: $t, MiB_per_s: $m}' \
        >> "$trials_log"
    json_trial MiB/s "$v" iperf3 "$size K=$1" "$3"
}

throughput() {
    if [ "$iperf" != none ]; then
        "$iperf" -s -p "$iperf_port" > /dev/null 2>&1 &
        iperf_srv=$!
        sleep 1 # let the server listen
        kill -0 "$iperf_srv" 2> /dev/null ||
            die "iperf3 server did not start on port $iperf_port"
    fi
    {
        machine
        echo "one producer -> gateway -> one consumer, K streams each," \
            "guaranteed queue, acks; $trials trials of $bytes per size and K" \
            "(warm-up $warmup), fresh gateway per trial, --memory-limit" \
            "$mem_limit${gwargs:+, $gwargs}"
        [ -z "$gw_ref" ] || echo "interleaved: new ref, ref new, new ref," \
            "...; ratio = new / ref of the medians"
        printf '%-7s %3s  %-10s %-10s %9s %9s %9s %9s %9s  %s\n' size K \
            metric build min Q1 median Q3 max ratio
    } | tee "$txt"
    json=
    for size in $(echo "$sizes" | tr ',' ' '); do
        for k in $(echo "$streams" | tr ',' ' '); do
            for b in $builds iperf3; do
                : > "$work/$b.mibs"
                : > "$work/$b.cpu"
                : > "$work/$b.rss"
                : > "$work/$b.syncs"
                : > "$work/$b.syncus"
            done
            t=1
            while [ "$t" -le "$trials" ]; do
                for b in $(order "$t"); do
                    bench_trial "$b" "$size" "$k" "$t"
                    [ "$b" = ref ] || [ "$b" = batch ] || [ "$b" = sync ] ||
                        main_mibs=$mibs
                done
                if [ "$iperf" != none ]; then
                    # Same volume as the (new) gateway's trial, as
                    # scimq-bench does: whole seconds, one at least.
                    secs=$(awk -v p="$payload" -v r="$main_mibs" \
                        'BEGIN { s = p / (r * 1048576); printf "%.0f\n",
                                 s < 1 ? 1 : s }')
                    iperf_trial "$k" "$secs" "$t"
                fi
                t=$((t + 1))
            done
            conf_json "$size" "$k"
            json="${json:+$json,}$obj"
            echo | tee -a "$txt"
        done
    done
    jq -cn --argjson r "[$json]" --argjson t "$trials" --arg b "$bytes" \
        --arg w "$warmup" --arg l "$mem_limit" --arg g "$gwargs" \
        '{tool: "gateway-throughput", trials: $t, bytes_per_trial: $b,
          warmup: $w, memory_limit: $l, gateway_args: $g, results: $r}' | tee -a "$txt" > "$base.json"
}

# conf_json SIZE K: prints the rows of one configuration and sets obj
# (distributions and ratios at full precision; the table rounds).
conf_json() {
    size=$1 k=$2
    first_build=${builds%% *}
    obj=$(jq -cn --arg s "$size" --argjson b "$(bytes_of "$size")" \
        --argjson k "$k" --argjson n "$(wc -l < "$work/$first_build.mibs")" \
        '{size: $b, size_arg: $s, streams: $k, trials: $n}')
    metrics='mibs cpu rss'
    [ -z "${durability:-}" ] || metrics='mibs cpu rss syncs syncus syncp99 syncmax'
    for metric in $metrics; do
        case $metric in
        mibs) name=MiB/s fmt=%.0f key=MiB_per_s ;;
        cpu) name='CPU s/GiB' fmt=%.3f key=cpu_s_per_GiB ;;
        rss) name='RSS MiB' fmt=%.0f key=peak_rss_MiB ;;
        syncs) name='syncs' fmt=%.0f key=syncs ;;
        syncus) name='sync us<' fmt=%.0f key=sync_median_us ;;
        syncp99) name='p99 us<' fmt=%.0f key=sync_p99_us ;;
        syncmax) name='max us' fmt=%.0f key=sync_max_us ;;
        esac
        for b in $builds; do
            note=
            [ "$b" != new ] || note="$(ratio "$(median "$work/new.$metric")" \
                "$(median "$work/ref.$metric")") (new/ref)"
            if [ -n "${durability:-}" ] && [ "$b" != "$first_build" ] &&
                [ "$metric" = mibs ]; then
                note="$(ratio "$(median "$work/$b.$metric")" \
                    "$(median "$work/$first_build.$metric")") ($b/$first_build)"
            fi
            # The same mode on the reference, side by side.
            if [ -n "${durability:-}" ] && [ -n "$gw_ref" ] &&
                [ "${b#ref-}" = "$b" ] && { [ "$metric" = mibs ] ||
                [ "$metric" = cpu ]; }; then
                note="${note:+$note, }$(ratio "$(median "$work/$b.$metric")" \
                    "$(median "$work/ref-$b.$metric")") ($b/ref-$b)"
            fi
            # shellcheck disable=SC2046 # five numbers, split on purpose
            row "$size" "$k" "$name" "$b" $(dist "$work/$b.$metric" "$fmt") \
                "$note"
            # The first build keeps the historical keys (gateway_*).
            prefix=gateway
            [ "$b" != ref ] || prefix=ref
            [ -z "${durability:-}" ] || prefix=$b
            # shellcheck disable=SC2046
            obj=$(echo "$obj" | jq -c --arg key "${prefix}_$key" \
                --argjson d "$(dist_json $(dist "$work/$b.$metric" %.6f))" \
                '.[$key] = $d')
        done
        if [ "$metric" = mibs ] && [ "$iperf" != none ]; then
            # shellcheck disable=SC2046
            row "$size" "$k" "$name" iperf3 $(dist "$work/iperf3.mibs" %.0f) \
                "$(ratio "$(median "$work/$first_build.mibs")" \
                    "$(median "$work/iperf3.mibs")") ($first_build/iperf3)"
        fi
    done
    # shellcheck disable=SC2046
    obj=$(echo "$obj" | jq -c \
        --argjson ip "$(dist_json $(dist "$work/iperf3.mibs" %.6f))" \
        'def r(a; b): if a == null or b == null or b.median == 0 then null
                      else a.median / b.median end;
         .iperf3_MiB_per_s = $ip
         | .ratio = r(.gateway_MiB_per_s; $ip)
         | if .ref_MiB_per_s == null then . else
             .new_over_ref = {
                 MiB_per_s: r(.gateway_MiB_per_s; .ref_MiB_per_s),
                 cpu_s_per_GiB: r(.gateway_cpu_s_per_GiB; .ref_cpu_s_per_GiB),
                 peak_rss_MiB: r(.gateway_peak_rss_MiB; .ref_peak_rss_MiB)}
           end')
}

# ------------------------------------------------------------------------
# Memory: a producer faster than its consumer, against the memory limit

# memory_trial BUILD VARIANT T: appends the peak RSS (MiB) to
# $work/BUILD.VARIANT.rss; stops the run on any loss, corruption, tool
# failure or spill file left behind.
memory_trial() {
    b=$1 variant=$2 t=$3
    tools=$(tools_of "$b")
    q=mem.$variant.$t
    nbytes=$(bytes_of "$msize")
    process_ms=$((2000 / mrate))
    # Generous bound: the consumer's pace, twice, and a minute.
    limit=$((60 + 2 * mcount * (process_ms + 100) / 1000))
    spill=$work/spill.$b.$variant.$t
    set --
    if [ "$variant" = spill ]; then
        mkdir -p "$spill"
        set -- --spill-dir "$spill" --disk-limit 64GiB
    fi
    gw_start "$b" "$mem_limit" "$@"
    "$tools/scimqctl" --url "$url" queue create "$q" --guaranteed \
        > /dev/null || die "cannot create queue $q ($b)"
    hwm0=$(hwm_kib "$gw")
    c0=$(cpu_ticks "$gw")
    timeout --kill-after=10 "$limit" "$tools/scimq-recv" --url "$url" \
        --queue "$q" --streams "$mstreams" --verify --until-eos \
        --expect "$mcount" --process-ms "$process_ms" \
        > "$work/consumer.json" 2> "$work/consumer.err" &
    consumer=$!
    timeout --kill-after=10 "$limit" "$tools/scimq-send" --url "$url" \
        --queue "$q" --streams "$mstreams" --synthetic --size "$msize" \
        --count "$mcount" --rate "$mrate" --close \
        > "$work/send.json" 2> "$work/send.err" &
    producer=$!
    st=0
    wait "$producer" || st=$?
    producer=''
    [ "$st" -eq 0 ] || { cat "$work/send.err" "$work/gateway.out" >&2;
        die "scimq-send failed ($b, $variant, trial $t): exit $st"; }
    wait "$consumer" || st=$?
    consumer=''
    res=$(tail -n 1 "$work/consumer.json")
    ok=$(echo "$res" | jq -r --argjson n "$mcount" \
        '.verified >= $n and .lost == 0 and .corrupt == 0 and
         .eos == true and (.error == null)' 2> /dev/null || echo false)
    if [ "$st" -ne 0 ] || [ "$ok" != true ]; then
        cat "$work/consumer.err" "$work/gateway.out" >&2
        die "consumer ($b, $variant, trial $t): exit $st, result: $res"
    fi
    # Every message is acknowledged: nothing spilled may stay (the
    # gateway's spill.bytes; 10 s at most), and at exit the spill
    # directory is emptied.
    if [ "$variant" = spill ]; then
        i=0
        while [ "$("$(tools_of "$b")/scimqctl" --url "$url" stats |
            jq -r '.spill.bytes')" != 0 ] && [ "$i" -lt 100 ]; do
            i=$((i + 1))
            sleep 0.1
        done
        [ "$i" -lt 100 ] || die "spilled bytes left after every message was acknowledged ($b, trial $t)"
    fi
    c1=$(cpu_ticks "$gw")
    hwm=$(hwm_kib "$gw")
    gw_stop
    left=0
    [ "$variant" != spill ] || left=$(find "$spill" -mindepth 1 | wc -l)
    [ "$left" -eq 0 ] || { ls -la "$spill" >&2;
        die "$left spill file(s) left after the gateway's exit ($b, trial $t)"; }
    rss=$(awk -v h="$hwm" 'BEGIN { printf "%.1f\n", h / 1024 }')
    prod=$(jq -r '.MiB_per_s // null' "$work/send.json" 2> /dev/null || echo null)
    echo "$rss" >> "$work/$b.$variant.rss"
    echo "$prod" >> "$work/$b.$variant.prod"
    echo "$res" | jq -r .MiB_per_s >> "$work/$b.$variant.cons"
    echo "$res" | jq -c --arg b "$b" --arg v "$variant" --argjson t "$t" \
        --argjson r "$rss" --argjson r0 "$(awk -v h="$hwm0" \
            'BEGIN { printf "%.1f\n", h / 1024 }')" \
        --argjson c "$(awk -v d="$((c1 - c0))" -v t="$tck" \
            'BEGIN { print d / t }')" --argjson p "${prod:-null}" \
        --arg st "$stopped" \
        '{build: $b, variant: $v, trial: $t, peak_rss_MiB: $r,
          rss_before_MiB: $r0, gateway_cpu_s: $c, producer_MiB_per_s: $p,
          consumer: ., stopped: $st}' >> "$trials_log"
    json_trial "peak RSS MiB" "$rss" "$b" "$variant" "$t"
}

memory() {
    limit_mib=$(($(bytes_of "$mem_limit") >> 20))
    bound=$((limit_mib + 64))
    process_ms=$((2000 / mrate))
    {
        machine
        echo "memory test: --memory-limit $mem_limit, bound $bound MiB" \
            "(limit + 64 MiB); $mcount x $msize per trial, producer" \
            "$mrate msg/s, consumer $process_ms ms per message (verified)," \
            "$mstreams streams each; $trials trials; fresh gateway per" \
            "trial${gwargs:+, $gwargs}"
        echo "spill: --spill-dir (must be empty at the end);" \
            "backpressure: no spill directory, producers wait"
        printf '%-13s %-8s %9s %9s %9s %9s %9s  %-7s %s\n' variant build \
            min Q1 median Q3 max bound ratio
    } | tee "$txt"
    json=
    for variant in $(echo "$mvariants" | tr ',' ' '); do
        case $variant in
        spill | backpressure) ;;
        *) die "unknown --memory-variants entry '$variant'" ;;
        esac
        for b in $builds; do
            : > "$work/$b.$variant.rss"
            : > "$work/$b.$variant.prod"
            : > "$work/$b.$variant.cons"
        done
        t=1
        while [ "$t" -le "$trials" ]; do
            for b in $(order "$t"); do
                memory_trial "$b" "$variant" "$t"
            done
            t=$((t + 1))
        done
        vobj="{\"variant\":\"$variant\""
        for b in $builds; do
            # shellcheck disable=SC2046
            set -- $(dist "$work/$b.$variant.rss" %.6f)
            # The worst trial decides.
            verdict=$(awk -v m="$5" -v l="$bound" \
                'BEGIN { print (m <= l ? "within" : "OVER") }')
            vobj="$vobj,\"${b}_peak_rss_MiB\":$(dist_json "$@")"
            note=
            [ "$b" != new ] || note="$(ratio "$3" \
                "$(median "$work/ref.$variant.rss")") (new/ref)"
            # shellcheck disable=SC2046,SC2183 # dist prints five words
            printf '%-13s %-8s %9s %9s %9s %9s %9s  %-7s %s\n' "$variant" \
                "$b" $(dist "$work/$b.$variant.rss" %.0f) "$verdict" \
                "$note" | tee -a "$txt"
            vobj="$vobj,\"${b}_within_bound\":$([ "$verdict" = within ] &&
                echo true || echo false)"
        done
        # Was the producer faster?  Achieved rates (back-pressure slows it
        # down to the consumer's pace, which is the point of that variant).
        for b in $builds; do
            printf '%-13s %-8s producer %s MiB/s, consumer %s MiB/s (medians)\n' \
                "$variant" "$b" "$(median "$work/$b.$variant.prod" | cut -d. -f1)" \
                "$(median "$work/$b.$variant.cons" | cut -d. -f1)" | tee -a "$txt"
        done
        json="${json:+$json,}$vobj}"
    done
    echo "every trial: consumer verified all $mcount messages (lost 0," \
        "corrupt 0, end of stream), no spill file left" | tee -a "$txt"
    jq -cn --argjson r "[$json]" --argjson t "$trials" --arg l "$mem_limit" \
        --argjson bd "$bound" --arg s "$msize" --argjson n "$mcount" \
        --argjson rt "$mrate" --argjson k "$mstreams" --arg g "$gwargs" \
        '{tool: "gateway-throughput", test: "memory", memory_limit: $l,
          bound_MiB: $bd, size: $s, count: $n, producer_msg_per_s: $rt,
          streams: $k, trials: $t, gateway_args: $g, results: $r}' |
        tee -a "$txt" > "$base.json"
}

if $memory_test; then
    memory
else
    throughput
fi
echo "results in $txt"
