#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# What TLS costs on the data port: scimq-bench (one producer with K
# streams -> guaranteed queue -> one consumer with K streams, every message
# acknowledged) through a plain gateway and through one with TLS
# (--tls-cert/--tls-key, a throw-away P-256 certificate; clients
# scimqs://), both with a token, in the same run: for every trial, size and
# K, the plain and the TLS trial run back to back (the order alternating
# from trial to trial), so a busy machine loads both alike.  Prints, per
# size and K, MiB/s min / Q1 / median / Q3 / max for each and the ratio of
# the medians, TLS / plain.  Loopback: what is measured is the gateway's
# and the clients' CPU, the cipher included (AES-GCM with AES-NI here).
#
#   bench/tls-throughput.sh [--build DIR] [--sizes 1MiB,16MiB]
#                           [--streams 1,4] [--trials 5] [--bytes 512MiB]
#                           [--json FILE]
# --json FILE: each trial also as one JSON line (bench/README.md).
set -eu

build=build/default sizes=1MiB,16MiB streams=1,4 trials=5 bytes=512MiB
json_out=
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --streams) streams=$2; shift 2 ;;
    --trials) trials=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --json) json_out=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--sizes L] [--streams L] [--trials N] [--bytes SIZE]" >&2; exit 2 ;;
    esac
done
gw=$build/src/gateway/scimq-gateway bench=$build/src/tools/scimq-bench
for p in "$gw" "$bench"; do
    [ -x "$p" ] || { echo "$0: $p not built" >&2; exit 1; }
done
for c in openssl jq; do
    command -v $c > /dev/null || { echo "$0: $c missing (Debian package $c)" >&2; exit 1; }
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/scimq-tls-bench.XXXXXX")
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$dir/key.pem" -out "$dir/cert.pem" -days 1 -subj /CN=localhost \
    -addext subjectAltName=IP:127.0.0.1 2>/dev/null
"$gw" --init-token "$dir/token" > /dev/null 2>&1
export SCIMQ_TOKEN_FILE="$dir/token" SCIMQ_TLS_CA="$dir/cert.pem"

# start NAME ARGS...: a gateway; its port in $dir/NAME.port.
start() {
    name=$1
    shift
    "$gw" --listen 127.0.0.1:0 --port-file "$dir/$name.port" \
        --token-file "$dir/token" --memory-limit 1GiB --admin-socket off "$@" \
        > /dev/null 2> "$dir/$name.err" &
    pids="$pids $!"
    i=0
    until [ -s "$dir/$name.port" ]; do
        i=$((i + 1))
        [ "$i" -lt 300 ] || { cat "$dir/$name.err" >&2; exit 1; }
        sleep 0.1
    done
}
start plain
start tls --tls-cert "$dir/cert.pem" --tls-key "$dir/key.pem"
url_plain=scimq://$(cat "$dir/plain.port")
url_tls=scimqs://$(cat "$dir/tls.port")
# Both pools pre-faulted before the first trial.
sleep 3

# json_trial MODE SIZE K T MIBS: with --json FILE, the trial as one JSON
# line for bench/plot; plain is the in-run reference.
json_trial() {
    [ -n "$json_out" ] || return 0
    jq -cn --arg c "$2 K=$3" --argjson t "$4" --argjson v "$5" --arg s "$1" \
        --argjson r "$([ "$1" = plain ] && echo true || echo false)" \
        '{bench: "tls-throughput", case: $c, trial: $t, value: $v,
          unit: "MiB/s", reference: $r, series: $s}' >> "$json_out"
}
[ -z "$json_out" ] || : > "$json_out"

# trial MODE SIZE K: one scimq-bench trial; appends "MODE SIZE K MiB/s".
trial() {
    eval "url=\$url_$1"
    v=$("$bench" --url "$url" --sizes "$2" --streams "$3" --trials 1 \
        --bytes "$bytes" --iperf3 none 2> "$dir/bench.err" | tail -n 1 |
        jq -r '.results[0].gateway_MiB_per_s.median') ||
        { cat "$dir/bench.err" >&2; exit 1; }
    echo "$1 $2 $3 $v" >> "$dir/trials"
    json_trial "$1" "$2" "$3" "$t" "$v"
}
t=1
while [ "$t" -le "$trials" ]; do
    for s in $(echo "$sizes" | tr , ' '); do
        for k in $(echo "$streams" | tr , ' '); do
            if [ $((t % 2)) -eq 1 ]; then
                trial plain "$s" "$k"; trial tls "$s" "$k"
            else
                trial tls "$s" "$k"; trial plain "$s" "$k"
            fi
        done
    done
    t=$((t + 1))
done

# dist MODE SIZE K: "min q1 median q3 max" of its trials.
dist() {
    awk -v m="$1" -v s="$2" -v k="$3" '$1 == m && $2 == s && $3 == k { print $4 }' \
        "$dir/trials" | sort -g | awk '{ v[NR] = $1 }
        function q(p,   i, f) { i = 1 + (NR - 1) * p; f = int(i);
            return v[f] + (i - f) * (v[f + 1 < NR ? f + 1 : NR] - v[f]) }
        END { printf "%.0f %.0f %.0f %.0f %.0f", v[1], q(0.25), q(0.5), q(0.75), v[NR] }'
}
echo "MiB/s over $trials trials each, $bytes per trial, loopback ($(nproc) cores)"
printf '%-6s %2s  %-34s  %-34s  %s\n' size K "plain: min Q1 median Q3 max" \
    "TLS: min Q1 median Q3 max" "TLS/plain"
for s in $(echo "$sizes" | tr , ' '); do
    for k in $(echo "$streams" | tr , ' '); do
        p=$(dist plain "$s" "$k") x=$(dist tls "$s" "$k")
        printf '%-6s %2s  %-34s  %-34s  %.2f\n' "$s" "$k" "$p" "$x" \
            "$(echo "$p $x" | awk '{ print $8 / $3 }')"
    done
done
