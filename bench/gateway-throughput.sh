#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# Gateway throughput against iperf3, same loopback, same stream counts, same
# run.  Starts its own gateway, runs scimq-bench over message sizes 1 MiB
# and 16 MiB with K = 1, 4, 8 streams, and keeps the output in
# bench/results/gateway-<date>.{txt,json}.
#
#   bench/gateway-throughput.sh [BUILDDIR] [extra scimq-bench flags]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/default}
[ $# -gt 0 ] && shift
out="$top/bench/results"
stamp=$(date +%Y%m%d-%H%M%S)
work=$(mktemp -d "${TMPDIR:-/tmp}/scimq-bench.XXXXXX")
mkdir -p "$out"

"$build/src/gateway/scimq-gateway" --listen 127.0.0.1:0 \
    --port-file "$work/port" --memory-limit 4GiB > "$work/gateway.out" 2>&1 &
gw=$!
trap 'kill -TERM $gw 2>/dev/null; wait $gw 2>/dev/null; rm -rf "$work"' EXIT
i=0
while [ ! -s "$work/port" ]; do
    i=$((i + 1))
    [ "$i" -gt 100 ] && { cat "$work/gateway.out" >&2; exit 1; }
    sleep 0.1
done

echo "machine: $(nproc) cores, $(uname -r); $(date -u)" | tee "$out/gateway-$stamp.txt"
"$build/src/tools/scimq-bench" --url "scimq://$(cat "$work/port")" \
    --sizes 1MiB,16MiB --streams 1,4,8 --trials 5 --bytes 1GiB "$@" \
    | tee -a "$out/gateway-$stamp.txt" | tail -1 > "$out/gateway-$stamp.json"
echo "results in $out/gateway-$stamp.txt"
