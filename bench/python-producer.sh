#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# The Python binding's producer against scimq-send: same gateway, same
# size, count, streams and confirm window, same verifying consumer, same
# run.  Trials alternate the order (scimq-send then Python on odd trials,
# Python then scimq-send on even ones); each fills a fresh guaranteed queue
# with COUNT synthetic messages (bench/python-producer.py does what
# scimq-send --synthetic does, with the scimq package) while scimq-recv
# --verify --until-eos drains it.  The figure is each producer's own
# MiB/s, timed from its first PUT to its last confirmation; the table
# gives min / Q1 / median / Q3 / max over the trials and the ratio of the
# medians python / scimq-send.  Every message must verify (no loss,
# duplicate or corruption) or the run stops (exit 1).
# Output is kept in bench/results/python-producer-<date>.{txt,json}.
#
#   bench/python-producer.sh [BUILDDIR] [--trials 7] [--count 64]
#       [--size 16MiB] [--streams 4] [--memory-limit 2GiB] [--json FILE]
#
# BUILDDIR (argument or environment) is a build tree configured with the
# Python binding, build/default unless given.
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
trials=7 count=64 size=16MiB streams=4 mem_limit=2GiB json_out=''

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
    --trials) trials=$2 ;;
    --count) count=$2 ;;
    --size) size=$2 ;;
    --streams) streams=$2 ;;
    --memory-limit) mem_limit=$2 ;;
    --json) json_out=$2 ;;
    *)
        usage >&2
        exit 2
        ;;
    esac
    shift 2
done

die() {
    echo "python-producer: $*" >&2
    exit 1
}

build=$(cd "$build" && pwd) || die "no build tree $build"
gwbin=$build/src/gateway/scimq-gateway
send=$build/src/tools/scimq-send
recv=$build/src/tools/scimq-recv
ctl=$build/src/tools/scimqctl
ext=$build/python/.libs/_scimq_ffi.so
for p in "$gwbin" "$send" "$recv" "$ctl"; do
    [ -x "$p" ] || die "$p not built (BUILDDIR=$build)"
done
[ -f "$ext" ] || die "$ext not built (configured without the Python binding?)"
python=$(sed -n 's/^PYTHON = //p' "$build/Makefile")
[ -n "$python" ] && [ "$python" != : ] || die "no PYTHON in $build/Makefile"
command -v jq > /dev/null || die "needs jq"

case $size in
*KiB) nbytes=$((${size%KiB} << 10)) ;;
*MiB) nbytes=$((${size%MiB} << 20)) ;;
*GiB) nbytes=$((${size%GiB} << 30)) ;;
*) nbytes=$size ;;
esac

out="$top/bench/results"
stamp=$(date +%Y%m%d-%H%M%S)
txt="$out/python-producer-$stamp.txt"
work=$(mktemp -d "${TMPDIR:-/tmp}/scimq-pyprod.XXXXXX")
mkdir -p "$out"
gw='' producer='' consumer=''

# stop PID: SIGTERM (the gateway drains), SIGKILL after 10 s.
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

cleanup() {
    for p in $producer $consumer $gw; do
        stop "$p"
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The package as the tests use it: sources and the built extension.
mkdir -p "$work/site/scimq"
ln -s "$top"/python/scimq/*.py "$work/site/scimq/"
ln -s "$ext" "$work/site/scimq/_scimq_ffi.so"

umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"
"$gwbin" --listen 127.0.0.1:0 --port-file "$work/port" \
    --token-file "$work/token" --memory-limit "$mem_limit" \
    > "$work/gateway.out" 2>&1 &
gw=$!
i=0
while [ ! -s "$work/port" ]; do
    i=$((i + 1))
    [ "$i" -lt 200 ] && kill -0 "$gw" 2> /dev/null ||
        { cat "$work/gateway.out" >&2; die "gateway did not start"; }
    sleep 0.1
done
SCIMQ_URL="scimq://$(cat "$work/port")" SCIMQ_TOKEN_FILE=$work/token
export SCIMQ_URL SCIMQ_TOKEN_FILE
# The pool is pre-faulted in the background: measure once that is done.
i=0
until [ "$("$ctl" stats | jq -r '.memory.prefault // "done"')" = done ]; do
    i=$((i + 1))
    [ "$i" -lt 600 ] || die "gateway pool pre-fault did not finish in 60 s"
    sleep 0.1
done

# trial IMPL T: one producer run into a fresh queue, verified; appends its
# MiB/s to $work/IMPL.
trial() {
    q=bench.$1.$2
    "$ctl" queue create "$q" --guaranteed > /dev/null ||
        die "cannot create $q"
    limit=$((60 + count * (nbytes >> 20) / 10))
    timeout --kill-after=10 "$limit" "$recv" --queue "$q" \
        --streams "$streams" --verify --until-eos --expect "$count" \
        > "$work/consumer.json" 2> "$work/consumer.err" &
    consumer=$!
    st=0
    case $1 in
    scimq-send)
        timeout --kill-after=10 "$limit" "$send" --queue "$q" \
            --streams "$streams" --synthetic --size "$nbytes" \
            --count "$count" --close > "$work/producer.json" \
            2> "$work/producer.err" || st=$?
        ;;
    python)
        PYTHONPATH="$work/site" PYTHONDONTWRITEBYTECODE=1 \
            timeout --kill-after=10 "$limit" "$python" \
            "$top/bench/python-producer.py" --queue "$q" \
            --streams "$streams" --size "$nbytes" --count "$count" --close \
            > "$work/producer.json" 2> "$work/producer.err" || st=$?
        ;;
    esac
    [ "$st" -eq 0 ] || { cat "$work/producer.err" >&2;
        die "$1 failed (trial $2): exit $st"; }
    wait "$consumer" || st=$?
    consumer=''
    res=$(tail -n 1 "$work/consumer.json")
    ok=$(echo "$res" | jq -r --argjson n "$count" \
        '.verified == $n and .lost == 0 and .corrupt == 0 and
         .duplicates == 0 and .eos == true' 2> /dev/null || echo false)
    [ "$st" -eq 0 ] && [ "$ok" = true ] || { cat "$work/consumer.err" >&2;
        die "consumer of $1 (trial $2): exit $st, $res"; }
    "$ctl" queue delete "$q" > /dev/null || die "cannot delete $q"
    v=$(tail -n 1 "$work/producer.json" | jq -r .MiB_per_s)
    echo "$v" >> "$work/$1"
    if [ -n "$json_out" ]; then
        ref=false
        [ "$1" = python ] || ref=true
        jq -cn --arg c "$size K=$streams" --argjson t "$2" --argjson v "$v" \
            --arg s "$1" --argjson r "$ref" \
            '{bench: "python-producer", case: $c, trial: $t, value: $v,
              unit: "MiB/s", reference: $r, series: $s}' >> "$json_out"
    fi
}

# dist FILE: min Q1 median Q3 max (quartiles by linear interpolation
# between order statistics, as the other benchmarks).
dist() {
    sort -g "$1" | awk '
        function q(p,    pos, lo, r) {
            pos = p * (n - 1); lo = int(pos); r = pos - lo
            return lo + 1 < n ? v[lo] * (1 - r) + v[lo + 1] * r : v[lo]
        }
        { v[NR - 1] = $1 }
        END { n = NR; printf "%.0f %.0f %.0f %.0f %.0f\n", v[0], q(0.25),
              q(0.5), q(0.75), v[n - 1] }'
}

[ -z "$json_out" ] || : > "$json_out"
: > "$work/python"
: > "$work/scimq-send"
{
    echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 \
        /proc/loadavg); $(date -u)"
    echo "producer -> gateway ($mem_limit) -> scimq-recv --verify, $count" \
        "messages of $size per trial over K=$streams streams, $trials" \
        "trials, order alternating; $python"
} | tee "$txt"
t=1
while [ "$t" -le "$trials" ]; do
    if [ $((t % 2)) -eq 1 ]; then
        trial scimq-send "$t"
        trial python "$t"
    else
        trial python "$t"
        trial scimq-send "$t"
    fi
    t=$((t + 1))
done

set -- $(dist "$work/python") $(dist "$work/scimq-send")
ratio=$(awk -v a="$3" -v b="$8" 'BEGIN { printf "%.2f\n", a / b }')
{
    printf '%-11s %6s %6s %6s %6s %6s  (MiB/s)\n' producer min Q1 median Q3 max
    printf '%-11s %6s %6s %6s %6s %6s\n' python "$1" "$2" "$3" "$4" "$5"
    printf '%-11s %6s %6s %6s %6s %6s\n' scimq-send "$6" "$7" "$8" "$9" "${10}"
    echo "python / scimq-send (medians): $ratio"
} | tee -a "$txt"
jq -cn --arg s "$size" --argjson k "$streams" --argjson n "$count" \
    --argjson t "$trials" --argjson p "[$1,$2,$3,$4,$5]" \
    --argjson c "[$6,$7,$8,$9,${10}]" --argjson r "$ratio" \
    '{bench: "python-producer", size: $s, streams: $k, count: $n,
      trials: $t, python_MiB_per_s: $p, scimq_send_MiB_per_s: $c,
      python_over_scimq_send: $r}' > "$out/python-producer-$stamp.json"
