#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# Small messages through the gateway: messages per second, the gateway's
# CPU per message, and the time from PUT to delivery.  For every message
# size, stream count K and trial, a fresh gateway is started on loopback,
# warmed up, and one scimq-bench trial (one producer with K streams ->
# guaranteed queue -> one consumer with K streams, every message
# acknowledged, both with the tools' default windows) moves the trial's
# messages through it as fast as the windows let; then, on the same
# gateway, a second trial offers a fixed rate for --latency-seconds: the
# smaller of --latency-rate messages and --latency-bandwidth bytes per
# second (by default 10,000 msg/s up to 8 KiB, 2,048/s at 64 KiB), the
# same for both builds, well below what either sustains.  Every
# message carries its PUT time (CLOCK_MONOTONIC, producer and consumer are
# threads of one scimq-bench process: one clock), so each trial gives:
#
#   msg/s          messages delivered per second (first PUT to last
#                  delivery), and MiB/s of payload
#   CPU us/msg     the gateway's utime + stime (/proc/PID/stat, all
#                  threads) over the saturated trial, per message relayed
#   p50/p99 us     PUT-to-delivery latency percentiles of the trial's
#                  messages: at saturation (how far the windows let the
#                  producer run ahead) and at the offered rate
#
# and min / Q1 / median / Q3 / max over the trials for each.
#
# --gateway-ref PATH runs every trial with a second gateway binary too,
# interleaved (new, ref on odd trials, ref, new on even ones; same sizes,
# streams, messages and client tools), and adds the ratios of the medians,
# new / ref.  --tools-ref DIR drives the reference with its own
# scimq-bench and scimqctl.
#
# Output is kept in bench/results/small-<date>.{txt,json,trials.jsonl};
# --json FILE writes one JSON line per trial and metric (bench/README.md,
# "JSON lines").
#
#   bench/small-messages.sh [BUILDDIR] [--sizes 64B,1KiB,16KiB,64KiB]
#       [--streams 1,4] [--trials 5] [--bytes 1GiB] [--max-count 200000]
#       [--warmup 20000] [--latency-rate 10000] [--latency-bandwidth 128MiB]
#       [--latency-seconds 2]
#       [--memory-limit 1GiB] [--gateway-args 'ARGS'] [--gateway-ref PATH]
#       [--tools-ref DIR] [--json FILE]
#
# A trial moves --bytes, at most --max-count messages (so 64 B and 1 KiB
# trials are --max-count messages, 64 KiB ones 16384); the warm-up moves
# --warmup messages (0: none).  BUILDDIR (argument or environment) is a
# build tree, build/default unless given.
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
sizes=64B,1KiB,16KiB,64KiB streams=1,4 trials=5 bytes=1GiB maxcount=200000
warmup=20000 lrate=10000 lbw=128MiB lsecs=2 mem_limit=1GiB gwargs=''
gw_ref=''
tools_ref='' json_out=''

usage() {
    sed -n '/^#   bench/,/^set -eu/p' "$0" | sed -e '/^set -eu/d' \
        -e 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case $1 in
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
    --max-count) maxcount=$2 ;;
    --warmup) warmup=$2 ;;
    --latency-rate) lrate=$2 ;;
    --latency-bandwidth) lbw=$2 ;;
    --latency-seconds) lsecs=$2 ;;
    --memory-limit) mem_limit=$2 ;;
    --gateway-args) gwargs=$2 ;;
    --gateway-ref) gw_ref=$2 ;;
    --tools-ref) tools_ref=$2 ;;
    --json) json_out=$2 ;;
    *)
        usage >&2
        exit 2
        ;;
    esac
    shift 2
done

die() {
    echo "small-messages: $*" >&2
    exit 1
}

warn() {
    echo "small-messages: warning: $*" >&2
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
checked="$trials $(bytes_of "$bytes") $maxcount $lrate $lsecs"
checked="$checked $(bytes_of "$lbw")"
checked="$checked $(bytes_of "$mem_limit")"
for s in $(echo "$sizes" | tr ',' ' '); do
    checked="$checked $(bytes_of "$s")"
    [ "$(bytes_of "$s")" -ge 8 ] 2> /dev/null ||
        { echo "small-messages: sizes are at least 8 B: '$s'" >&2; exit 2; }
done
for k in $(echo "$streams" | tr ',' ' '); do
    checked="$checked $k"
done
[ "$warmup" = 0 ] || checked="$checked $warmup"
for v in $checked; do
    case $v in
    '' | *[!0-9]* | 0)
        echo "small-messages: bad count or size: '$v'" >&2
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
[ -x "$gw_new" ] || die "$gw_new not built (BUILDDIR=$build)"

gw_of() {
    if [ "$1" = ref ]; then echo "$gw_ref"; else echo "$gw_new"; fi
}
tools_of() {
    if [ "$1" = ref ]; then echo "$tools_ref"; else echo "$tools_new"; fi
}
for b in $builds; do
    for tool in scimq-bench scimqctl; do
        [ -x "$(tools_of "$b")/$tool" ] ||
            die "no $(tools_of "$b")/$tool for '$b' (BUILDDIR, --tools-ref)"
    done
done
command -v jq > /dev/null || die "needs jq (Debian package jq)"
tck=$(getconf CLK_TCK)

out="$top/bench/results"
base="$out/small-$(date +%Y%m%d-%H%M%S)"
txt=$base.txt trials_log=$base.trials.jsonl
work=$(mktemp -d "${TMPDIR:-/tmp}/scimq-small.XXXXXX")
mkdir -p "$out"
[ -z "$json_out" ] || : > "$json_out"

gw=''
# Stops what this script started, by PID.
cleanup() {
    [ -z "$gw" ] || stop "$gw" || true
    rm -rf "$work"
}

# stop PID: SIGTERM (the gateway drains), SIGKILL after 10 s.  Returns 1
# if SIGKILL was needed.
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

# gw_start BUILD: a fresh gateway of BUILD on a free port (sets gw, url),
# once its payload pool is faulted in (a background job of the gateway
# that would otherwise be charged to the trial).
gw_start() {
    rm -f "$work/port"
    # shellcheck disable=SC2086 # --gateway-args is split on purpose
    "$(gw_of "$1")" --listen 127.0.0.1:0 --port-file "$work/port" \
        --memory-limit "$mem_limit" $gwargs > "$work/gateway.out" 2>&1 &
    gw=$!
    i=0
    while [ ! -s "$work/port" ]; do
        i=$((i + 1))
        if [ "$i" -gt 200 ] || ! kill -0 "$gw" 2> /dev/null; then
            cat "$work/gateway.out" >&2
            die "gateway '$1' did not start"
        fi
        sleep 0.05
    done
    url="scimq://$(cat "$work/port")"
    i=0
    while [ "$("$(tools_of "$1")/scimqctl" --url "$url" stats 2> /dev/null |
        jq -r '.memory.prefault // "off"')" = running ]; do
        i=$((i + 1))
        [ "$i" -gt 1200 ] && die "gateway '$1' still pre-faulting after 120 s"
        sleep 0.1
    done
}

gw_stop() {
    stop "$gw" || warn "gateway did not stop within 10 s of SIGTERM (killed)"
    gw=''
}

# CPU clock ticks (utime + stime, every thread) of PID; fields counted
# after the ')' that ends the command name.
cpu_ticks() {
    sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

# Until PID's CPU time stands still for 0.2 s (10 s at most).
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

# min Q1 median Q3 max of the numbers in FILE with printf format FMT
# (quartiles by linear interpolation, as scimq__dist_of); "- - - - -"
# when FILE is empty.
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

dist_json() {
    if [ "$1" = - ]; then
        echo null
    else
        echo "{\"min\":$1,\"q1\":$2,\"median\":$3,\"q3\":$4,\"max\":$5}"
    fi
}

median() {
    dist "$1" %.6f | cut -d' ' -f3
}

# A / B to two decimals, or "-".
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a == "-" || b == "-" || b + 0 == 0) print "-"
        else printf "%.2f\n", a / b }'
}

row() {
    printf '%-6s %2s  %-15s %-7s %9s %9s %9s %9s %9s  %s\n' "$@" | tee -a "$txt"
}

# json_trial UNIT VALUE BUILD CASE T: one JSON line of --json FILE.
json_trial() {
    [ -n "$json_out" ] || return 0
    jr=false
    [ "$3" != ref ] || jr=true
    jq -cn --arg u "$1" --argjson v "$2" --arg s "$3" --arg c "$4" \
        --argjson t "$5" --argjson r "$jr" \
        '{bench: "small-messages", case: $c, trial: $t, value: $v,
          unit: $u, reference: $r, series: $s}' >> "$json_out"
}

# The builds in the order of trial T (new, ref on odd trials, ref, new on
# even ones, so that neither always runs first).
order() {
    if [ -n "$gw_ref" ] && [ $(($1 % 2)) -eq 0 ]; then
        echo ref new
    else
        echo "$builds"
    fi
}

# bench_run BUILD SIZE K COUNT [ARGS...]: one scimq-bench trial with
# latency; its result object in $res (the run stops on a failure).
bench_run() {
    br_b=$1 br_size=$2 br_k=$3 br_n=$4
    shift 4
    st=0
    # Generous bound: 1000 messages per second at least, and a minute.
    timeout --kill-after=10 $((60 + br_n / 1000)) \
        "$(tools_of "$br_b")/scimq-bench" --url "$url" --sizes "$br_size" \
        --streams "$br_k" --trials 1 --count "$br_n" --latency \
        --iperf3 none "$@" > "$work/bench.out" 2> "$work/bench.err" || st=$?
    res=$(tail -n 1 "$work/bench.out" | jq -c 'if .error == null then
        .results[0] else empty end' 2> /dev/null || true)
    if [ "$st" -ne 0 ] || [ -z "$res" ]; then
        cat "$work/bench.err" "$work/gateway.out" >&2
        die "trial failed ($br_b, $br_size, K=$br_k $*): exit $st"
    fi
}

# trial BUILD SIZE K T: appends the trial's figures to $work/BUILD.METRIC.
trial() {
    b=$1 size=$2 k=$3 t=$4
    nbytes=$(bytes_of "$size")
    n=$(($(bytes_of "$bytes") / nbytes))
    # The offered rate of the latency trial, and its messages.
    rate=$(($(bytes_of "$lbw") / nbytes))
    [ "$rate" -le "$lrate" ] || rate=$lrate
    [ "$rate" -gt 0 ] || rate=1
    lcount=$((rate * lsecs))
    [ "$lcount" -ge 100 ] || lcount=100
    [ "$n" -le "$maxcount" ] || n=$maxcount
    [ "$n" -gt 0 ] || n=1
    gw_start "$b"
    [ "$warmup" = 0 ] || bench_run "$b" "$size" "$k" "$warmup"
    settle "$gw"
    c0=$(cpu_ticks "$gw")
    bench_run "$b" "$size" "$k" "$n"
    c1=$(cpu_ticks "$gw")
    sat=$res
    bench_run "$b" "$size" "$k" "$lcount" --rate "$rate"
    paced=$res
    gw_stop
    cpu=$(awk -v d="$((c1 - c0))" -v t="$tck" -v n="$n" \
        'BEGIN { printf "%.3f\n", d / t / n * 1e6 }')
    msgs=$(echo "$sat" | jq '.gateway_msg_per_s.median')
    mibs=$(echo "$sat" | jq '.gateway_MiB_per_s.median')
    sp50=$(echo "$sat" | jq '.latency_p50_us.median')
    sp99=$(echo "$sat" | jq '.latency_p99_us.median')
    rp50=$(echo "$paced" | jq '.latency_p50_us.median')
    rp99=$(echo "$paced" | jq '.latency_p99_us.median')
    rmsgs=$(echo "$paced" | jq '.gateway_msg_per_s.median')
    for m in msgs mibs cpu sp50 sp99 rp50 rp99; do
        eval "echo \"\$$m\"" >> "$work/$b.$m"
    done
    jq -cn --arg b "$b" --arg s "$size" --argjson k "$k" --argjson t "$t" \
        --argjson n "$n" --argjson msgs "$msgs" --argjson mibs "$mibs" \
        --argjson cpu "$cpu" --argjson ticks "$((c1 - c0))" \
        --argjson sp50 "$sp50" --argjson sp99 "$sp99" --argjson rate "$rate" \
        --argjson rmsgs "$rmsgs" --argjson rp50 "$rp50" --argjson rp99 "$rp99" \
        --argjson sat "$sat" \
        '{build: $b, size_arg: $s, streams: $k, trial: $t, messages: $n,
          msg_per_s: $msgs, MiB_per_s: $mibs, cpu_us_per_msg: $cpu,
          cpu_ticks: $ticks, p50_us: $sp50, p99_us: $sp99,
          paced: {offered_per_s: $rate, msg_per_s: $rmsgs, p50_us: $rp50,
                  p99_us: $rp99},
          credit_msgs: $sat.credit_msgs, credit_bytes: $sat.credit_bytes,
          window: $sat.window}' >> "$trials_log"
    c="$size K=$k"
    json_trial msg/s "$msgs" "$b" "$c" "$t"
    json_trial MiB/s "$mibs" "$b" "$c" "$t"
    json_trial "CPU us/msg" "$cpu" "$b" "$c" "$t"
    json_trial "p50 us saturated" "$sp50" "$b" "$c" "$t"
    json_trial "p99 us saturated" "$sp99" "$b" "$c" "$t"
    json_trial "p50 us paced" "$rp50" "$b" "$c" "$t"
    json_trial "p99 us paced" "$rp99" "$b" "$c" "$t"
}

# conf SIZE K: the rows of one configuration; sets obj.
conf() {
    size=$1 k=$2
    obj=$(jq -cn --arg s "$size" --argjson b "$(bytes_of "$size")" \
        --argjson k "$k" '{size: $b, size_arg: $s, streams: $k}')
    for metric in msgs mibs cpu sp50 sp99 rp50 rp99; do
        case $metric in
        msgs) name=msg/s fmt=%.0f ;;
        mibs) name=MiB/s fmt=%.1f ;;
        cpu) name='CPU us/msg' fmt=%.2f ;;
        sp50) name='p50 us (sat)' fmt=%.0f ;;
        sp99) name='p99 us (sat)' fmt=%.0f ;;
        rp50) name="p50 us paced" fmt=%.0f ;;
        rp99) name="p99 us paced" fmt=%.0f ;;
        esac
        for b in $builds; do
            note=
            [ "$b" != new ] || note="$(ratio "$(median "$work/new.$metric")" \
                "$(median "$work/ref.$metric")") (new/ref)"
            # shellcheck disable=SC2046 # five numbers, split on purpose
            row "$size" "$k" "$name" "$b" $(dist "$work/$b.$metric" "$fmt") \
                "$note"
            # shellcheck disable=SC2046
            obj=$(echo "$obj" | jq -c --arg key "${b}_$metric" \
                --argjson d "$(dist_json $(dist "$work/$b.$metric" %.6f))" \
                '.[$key] = $d')
        done
    done
}

{
    echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 \
        /proc/loadavg); $(date -u)"
    for b in $builds; do
        echo "$b: $(gw_of "$b"), tools $(tools_of "$b")"
    done
    echo "one producer -> gateway -> one consumer, K streams each," \
        "guaranteed queue, every message acknowledged, the tools' default" \
        "windows; $trials trials per size and K of $bytes (at most" \
        "$maxcount messages), warm-up $warmup messages, fresh gateway per" \
        "trial (--memory-limit $mem_limit${gwargs:+, $gwargs}); paced:" \
        "latency at min($lrate msg/s, $lbw/s) offered for $lsecs s"
    [ -z "$gw_ref" ] || echo "interleaved: new ref, ref new, ...;" \
        "ratio = new / ref of the medians"
    printf '%-6s %2s  %-15s %-7s %9s %9s %9s %9s %9s  %s\n' size K metric \
        build min Q1 median Q3 max ratio
} | tee "$txt"
json=
for size in $(echo "$sizes" | tr ',' ' '); do
    for k in $(echo "$streams" | tr ',' ' '); do
        for b in $builds; do
            for m in msgs mibs cpu sp50 sp99 rp50 rp99; do
                : > "$work/$b.$m"
            done
        done
        t=1
        while [ "$t" -le "$trials" ]; do
            for b in $(order "$t"); do
                trial "$b" "$size" "$k" "$t"
            done
            t=$((t + 1))
        done
        conf "$size" "$k"
        json="${json:+$json,}$obj"
        echo | tee -a "$txt"
    done
done
jq -cn --argjson r "[$json]" --argjson t "$trials" --arg b "$bytes" \
    --argjson m "$maxcount" --argjson w "$warmup" --argjson lr "$lrate" \
    --arg lb "$lbw" --argjson ls "$lsecs" --arg l "$mem_limit" \
    --arg g "$gwargs" \
    '{tool: "small-messages", trials: $t, bytes_per_trial: $b,
      max_count: $m, warmup: $w, latency_rate: $lr, latency_bandwidth: $lb,
      latency_seconds: $ls, memory_limit: $l,
      gateway_args: $g, results: $r}' | tee -a "$txt" > "$base.json"
