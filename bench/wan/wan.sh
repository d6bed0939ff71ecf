#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The long-haul link emulator: SciMQ against iperf3 over an emulated WAN
# link, same K, same link, alternating rounds (bench/wan/README.md).
#
# Two network namespaces joined by a veth pair: "p" holds the producer
# (scimq-send, the iperf3 client), "g" the gateway, the consumer
# (scimq-recv --verify) and the iperf3 server.  On each veth's egress a tc
# tbf rate limit (RATE, a queue of QUEUE_MS); on each side's ingress an
# iptables NFQUEUE rule into bench/wan/wan-delay, which holds every packet
# RTT/2 and, on the way from producer to gateway, drops LOSS percent at
# random (the kernel has no netem).  Offloads are off, so rate and loss
# act on MTU-sized packets.  Traffic never leaves the two namespaces
# (192.0.2.0/30, a documentation prefix); everything started is stopped
# by PID and both namespaces are deleted on exit.
#
# For every RTT, loss, congestion control and K: ROUNDS rounds, each one
# SciMQ transfer (BYTES in messages of SIZE into a fresh guaranteed queue,
# every message verified by the consumer; the figure is the producer's
# MiB/s from its first PUT to its last confirmation, tail included) and
# one iperf3 transfer of BYTES over K streams (receiver's MiB/s), SciMQ
# first on odd rounds, iperf3 first on even ones.  Prints min / Q1 /
# median / Q3 / max of both and of the per-round ratio SciMQ / iperf3.
#
#   bench/wan/wan.sh [BUILDDIR] [--rtt 10,50] [--loss 0.01] [--streams 4]
#       [--cc cubic] [--size 16MiB] [--bytes 256MiB] [--rounds 3]
#       [--rate 1gbit] [--queue-ms 20] [--memory-limit 1GiB] [--json FILE]
#       [--tcp-mem-max BYTES] [--set NAME=VALUE]... [--full]
#
#   --rtt MS,...       round-trip times (ms), each split over both ways
#   --loss PCT,...     random loss, percent of producer -> gateway packets
#   --streams K,...    parallel TCP streams (scimq-send --streams, iperf3 -P)
#   --cc NAME,...      congestion control of the producer's sockets
#                      (SCIMQ_NET_CONGESTION, iperf3 -C): cubic, bbr, reno
#   --tcp-mem-max B    the last field of tcp_rmem and tcp_wmem (how far
#                      autotuning may grow a buffer) in both namespaces
#                      (per namespace: the host's stay as they are)
#   --set NAME=VALUE   a SciMQ setting for the gateway, producer and
#                      consumer, e.g. --set SCIMQ_NET_SNDBUF=12500000
#   --full             the full matrix: RTT 10,50, loss 0.01,0.1, K 4,16,
#                      cubic, 16 MiB messages, 2 GiB per round, 5 rounds
#
# Needs root (namespaces, tc, iptables) and a build tree with
# bench/wan/wan-delay (configure found libnetfilter-queue-dev).  Output is
# kept in bench/results/wan-<date>.{txt,json} (and FILE with --json: one
# line per round and metric, the format bench/plot reads).
set -eu -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILDDIR:-$top/build/default}
case ${1:-} in
'' | -*) ;;
*)
    build=$1
    shift
    ;;
esac
rtts=10,50 losses=0.01 streams_list=4 ccs=cubic size=16MiB bytes=256MiB
rounds=3 rate=1gbit queue_ms=20 mem_limit=1GiB json_out=''
tcp_mem_max='' scimq_env=''

usage() {
    sed -n '/^#   bench\/wan/,/^set -eu/p' "$0" | sed -e '/^set -eu/d' \
        -e 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case $1 in
    -h | --help)
        usage
        exit 0
        ;;
    --full)
        rtts=10,50 losses=0.01,0.1 streams_list=4,16 ccs=cubic size=16MiB
        bytes=2GiB rounds=5
        shift
        continue
        ;;
    esac
    [ $# -ge 2 ] || { usage >&2; exit 2; }
    case $1 in
    --rtt) rtts=$2 ;;
    --loss) losses=$2 ;;
    --streams) streams_list=$2 ;;
    --cc) ccs=$2 ;;
    --size) size=$2 ;;
    --bytes) bytes=$2 ;;
    --rounds) rounds=$2 ;;
    --rate) rate=$2 ;;
    --queue-ms) queue_ms=$2 ;;
    --memory-limit) mem_limit=$2 ;;
    --json) json_out=$2 ;;
    --tcp-mem-max) tcp_mem_max=$2 ;;
    --set)
        case $2 in
        SCIMQ_*=*) scimq_env="$scimq_env $2" ;;
        *)
            echo "wan: --set takes SCIMQ_NAME=VALUE, not $2" >&2
            exit 2
            ;;
        esac
        ;;
    *)
        usage >&2
        exit 2
        ;;
    esac
    shift 2
done

die() {
    echo "wan: $*" >&2
    exit 1
}

# size TEXT: bytes of 123, 4KiB, 16MiB, 2GiB.
tobytes() {
    case $1 in
    *KiB) echo $((${1%KiB} << 10)) ;;
    *MiB) echo $((${1%MiB} << 20)) ;;
    *GiB) echo $((${1%GiB} << 30)) ;;
    *) echo "$1" ;;
    esac
}

[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, tc, iptables)"
build=$(cd "$build" && pwd) || die "no build tree $build"
gwbin=$build/src/gateway/scimq-gateway
send=$build/src/tools/scimq-send
recv=$build/src/tools/scimq-recv
ctl=$build/src/tools/scimqctl
delay=$build/bench/wan/wan-delay
for p in "$gwbin" "$send" "$recv" "$ctl"; do
    [ -x "$p" ] || die "$p not built (BUILDDIR=$build)"
done
[ -x "$delay" ] || die "$delay not built: configure did not find" \
    "libnetfilter_queue (Debian: libnetfilter-queue-dev)"
for c in ip:iproute2 tc:iproute2 iptables:iptables ethtool:ethtool \
    iperf3:iperf3 jq:jq timeout:coreutils; do
    command -v "${c%%:*}" > /dev/null ||
        die "needs ${c%%:*} (Debian: ${c#*:})"
done
nbytes=$(tobytes "$size")
count=$(($(tobytes "$bytes") / nbytes))
[ "$count" -ge 1 ] || die "--bytes $bytes is less than one --size $size"
vol=$((count * nbytes))

out=$top/bench/results
stamp=$(date +%Y%m%d-%H%M%S)
txt=$out/wan-$stamp.txt
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/scimq-wan.XXXXXX")
nsp=scimq-wan-$$-p nsg=scimq-wan-$$-g
ifp=swp$$ ifg=swg$$
addrp=192.0.2.1 addrg=192.0.2.2
pids='' consumer=''
delay_p='' delay_g=''

# stop PID: SIGTERM, SIGKILL after 10 s.
stop() {
    kill -TERM "$1" 2> /dev/null || return 0
    local i=0
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
    for p in $consumer $pids $delay_p $delay_g; do
        stop "$p"
    done
    ip netns del "$nsp" 2> /dev/null || true
    ip netns del "$nsg" 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Foreground commands only: a function run with & is a subshell, whose PID
# is not the program's.
inp() { ip netns exec "$nsp" "$@"; }
ing() { ip netns exec "$nsg" "$@"; }

# The link: two namespaces, one veth pair, offloads off.
ip netns add "$nsp"
ip netns add "$nsg"
ip link add "$ifp" netns "$nsp" type veth peer name "$ifg" netns "$nsg"
ip -n "$nsp" addr add "$addrp/30" dev "$ifp"
ip -n "$nsg" addr add "$addrg/30" dev "$ifg"
for n in "$nsp:$ifp" "$nsg:$ifg"; do
    ip -n "${n%%:*}" link set lo up
    ip -n "${n%%:*}" link set "${n#*:}" up
    ip netns exec "${n%%:*}" ethtool -K "${n#*:}" tso off gso off gro off \
        > /dev/null 2>&1 || die "ethtool -K ${n#*:}: cannot turn offloads off"
    ip netns exec "${n%%:*}" iptables -t raw -A PREROUTING -i "${n#*:}" \
        -j NFQUEUE --queue-num 0 || die "iptables NFQUEUE in ${n%%:*}"
    if [ -n "$tcp_mem_max" ]; then
        for f in tcp_rmem tcp_wmem; do
            ip netns exec "${n%%:*}" sh -c "set -- \$(cat /proc/sys/net/ipv4/$f)
                echo \"\$1 \$2 $tcp_mem_max\" > /proc/sys/net/ipv4/$f" ||
                die "cannot set $f in ${n%%:*}"
        done
    fi
done

# link_set RTT_MS LOSS: the rate limits and fresh delay lines.
link_set() {
    local half_us=$(($1 * 500)) q
    # tbf's queue in bytes: QUEUE_MS at RATE (tc accepts "latency" too,
    # but a byte limit is what the table below reports).
    for n in "$nsp:$ifp" "$nsg:$ifg"; do
        tc -n "${n%%:*}" qdisc replace dev "${n#*:}" root tbf rate "$rate" \
            burst 64kb latency "${queue_ms}ms"
    done
    [ -z "$delay_p" ] || { stop "$delay_p"; stop "$delay_g"; }
    delay_p='' delay_g=''
    # The acks' way: delayed, not lossy.
    # (ip netns exec execs the program: $! is its PID.)
    ip netns exec "$nsp" "$delay" --queue 0 --delay-us "$half_us" \
        > "$work/delay-p.out" 2> "$work/delay-p.err" &
    delay_p=$!
    ip netns exec "$nsg" "$delay" --queue 0 --delay-us "$half_us" \
        --loss "$2" --seed "$$" > "$work/delay-g.out" 2> "$work/delay-g.err" &
    delay_g=$!
    for q in p g; do
        local i=0
        until grep -q ready "$work/delay-$q.out" 2> /dev/null; do
            i=$((i + 1))
            [ "$i" -lt 100 ] || { cat "$work/delay-$q.err" >&2;
                die "delay line in $q did not start"; }
            sleep 0.1
        done
    done
}

# The gateway, once for the run, on the "g" side of the link.
umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"
ip netns exec "$nsg" env $scimq_env "$gwbin" --listen "$addrg:0" --port-file "$work/port" \
    --token-file "$work/token" --memory-limit "$mem_limit" \
    > "$work/gateway.out" 2>&1 &
pids="$pids $!"
gwpid=$!
i=0
while [ ! -s "$work/port" ]; do
    i=$((i + 1))
    [ "$i" -lt 300 ] && kill -0 "$gwpid" 2> /dev/null ||
        { cat "$work/gateway.out" >&2; die "gateway did not start"; }
    sleep 0.1
done
SCIMQ_URL="scimq://$(cat "$work/port")" SCIMQ_TOKEN_FILE=$work/token
export SCIMQ_URL SCIMQ_TOKEN_FILE
i=0
until [ "$(ing "$ctl" stats | jq -r '.memory.prefault // "done"')" = done ]; do
    i=$((i + 1))
    [ "$i" -lt 600 ] || die "gateway pool pre-fault did not finish in 60 s"
    sleep 0.1
done
ip netns exec "$nsg" iperf3 -s -B "$addrg" -p 5201 \
    > "$work/iperf3-server.out" 2>&1 &
pids="$pids $!"

limit=$((120 + (vol >> 20)))

# scimq_round CASE R K CC: appends MiB/s to $work/scimq.
scimq_round() {
    local q=wan.$2.$RANDOM st=0 res ok
    ing "$ctl" queue create "$q" --guaranteed > /dev/null ||
        die "cannot create $q"
    ip netns exec "$nsg" env $scimq_env timeout --kill-after=10 "$limit" \
        "$recv" --queue "$q" --streams "$3" --verify --until-eos --expect "$count" \
        > "$work/consumer.json" 2> "$work/consumer.err" &
    consumer=$!
    inp env $scimq_env SCIMQ_NET_CONGESTION="$4" timeout --kill-after=10 \
        "$limit" "$send" \
        --queue "$q" --streams "$3" --synthetic --size "$nbytes" \
        --count "$count" --close > "$work/producer.json" \
        2> "$work/producer.err" || st=$?
    [ "$st" -eq 0 ] || { cat "$work/producer.err" >&2; stop "$consumer";
        die "scimq-send failed ($1, round $2): exit $st"; }
    wait "$consumer" || st=$?
    consumer=''
    res=$(tail -n 1 "$work/consumer.json")
    ok=$(echo "$res" | jq -r --argjson n "$count" \
        '.verified == $n and .lost == 0 and .corrupt == 0 and
         .duplicates == 0 and .eos == true' 2> /dev/null || echo false)
    [ "$st" -eq 0 ] && [ "$ok" = true ] || { cat "$work/consumer.err" >&2;
        die "consumer ($1, round $2): exit $st, $res"; }
    ing "$ctl" queue delete "$q" > /dev/null || die "cannot delete $q"
    tail -n 1 "$work/producer.json" | jq -r .MiB_per_s >> "$work/scimq"
}

# iperf_round CASE R K CC: appends MiB/s to $work/iperf3, RTT to $work/rtt.
iperf_round() {
    local st=0
    inp timeout --kill-after=10 "$limit" iperf3 -c "$addrg" -p 5201 \
        -P "$3" -n "$vol" -C "$4" -J > "$work/iperf3.json" \
        2> "$work/iperf3.err" || st=$?
    [ "$st" -eq 0 ] || { cat "$work/iperf3.err" "$work/iperf3.json" >&2;
        die "iperf3 failed ($1, round $2): exit $st"; }
    jq -r '.end.sum_received.bytes / .end.sum_received.seconds / 1048576' \
        "$work/iperf3.json" >> "$work/iperf3"
    jq -r '[.end.streams[].sender.mean_rtt] | add / length / 1000' \
        "$work/iperf3.json" >> "$work/rtt"
}

# dist FILE: min Q1 median Q3 max (quartiles by linear interpolation
# between order statistics, as the other benchmarks).
dist() {
    sort -g "$1" | awk -v fmt="${2:-%.0f}" '
        function q(p,    pos, lo, r) {
            pos = p * (n - 1); lo = int(pos); r = pos - lo
            return lo + 1 < n ? v[lo] * (1 - r) + v[lo + 1] * r : v[lo]
        }
        { v[NR - 1] = $1 }
        END { n = NR; f = fmt " " fmt " " fmt " " fmt " " fmt "\n"
              printf f, v[0], q(0.25), q(0.5), q(0.75), v[n - 1] }'
}

emit() { # CASE ROUND VALUE UNIT REFERENCE SERIES
    [ -n "$json_out" ] || return 0
    jq -cn --arg c "$1" --argjson t "$2" --argjson v "$3" --arg u "$4" \
        --argjson r "$5" --arg s "$6" \
        '{bench: "wan", case: $c, trial: $t, value: $v, unit: $u,
          reference: $r, series: $s}' >> "$json_out"
}

[ -z "$json_out" ] || : > "$json_out"
: > "$work/summary.jsonl"
{
    echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 \
        /proc/loadavg); $(date -u)"
    echo "link: $rate, tbf queue ${queue_ms} ms, delay line (NFQUEUE)" \
        "RTT/2 each way, random loss producer -> gateway; tcp_rmem" \
        "$(inp cat /proc/sys/net/ipv4/tcp_rmem | tr '\t' ' '), tcp_wmem" \
        "$(inp cat /proc/sys/net/ipv4/tcp_wmem | tr '\t' ' ')"
    [ -z "$scimq_env" ] || echo "SciMQ settings:$scimq_env"
    echo "per round: $count x $size ($((vol >> 20)) MiB), SciMQ" \
        "(producer's MiB/s, first PUT to last PUT_OK, every message" \
        "verified) and iperf3 -n, same K; $rounds rounds, order alternating"
} | tee "$txt"

for rtt in ${rtts//,/ }; do
    for loss in ${losses//,/ }; do
        link_set "$rtt" "$loss"
        for cc in ${ccs//,/ }; do
            for k in ${streams_list//,/ }; do
                # No "%" in a case: bench/plot gives case names to gnuplot
                # as formats.
                case_="RTT=${rtt}ms loss=${loss}pct $cc K=$k"
                : > "$work/scimq"
                : > "$work/iperf3"
                : > "$work/rtt"
                : > "$work/ratio"
                r=1
                while [ "$r" -le "$rounds" ]; do
                    if [ $((r % 2)) -eq 1 ]; then
                        scimq_round "$case_" "$r" "$k" "$cc"
                        iperf_round "$case_" "$r" "$k" "$cc"
                    else
                        iperf_round "$case_" "$r" "$k" "$cc"
                        scimq_round "$case_" "$r" "$k" "$cc"
                    fi
                    s=$(tail -n 1 "$work/scimq")
                    p=$(tail -n 1 "$work/iperf3")
                    awk -v a="$s" -v b="$p" 'BEGIN { printf "%.3f\n", a / b }' \
                        >> "$work/ratio"
                    emit "$case_" "$r" "$s" MiB/s false scimq
                    emit "$case_" "$r" "$p" MiB/s true iperf3
                    emit "$case_" "$r" "$(tail -n 1 "$work/ratio")" \
                        "SciMQ / iperf3" false ratio
                    r=$((r + 1))
                done
                set -- $(dist "$work/scimq") $(dist "$work/iperf3")
                ds="[$1,$2,$3,$4,$5]" di="[$6,$7,$8,$9,${10}]"
                {
                    echo "$case_ (iperf3's mean RTT: $(dist "$work/rtt" \
                        %.1f | cut -d' ' -f3) ms, median)"
                    printf '  %-16s %6s %6s %6s %6s %6s\n' MiB/s min Q1 \
                        median Q3 max
                    printf '  %-16s %6s %6s %6s %6s %6s\n' SciMQ "$1" "$2" \
                        "$3" "$4" "$5"
                    printf '  %-16s %6s %6s %6s %6s %6s\n' iperf3 "$6" "$7" \
                        "$8" "$9" "${10}"
                    set -- $(dist "$work/ratio" %.2f)
                    printf '  %-16s %6s %6s %6s %6s %6s\n' \
                        "SciMQ/iperf3" "$1" "$2" "$3" "$4" "$5"
                } | tee -a "$txt"
                dr=$(dist "$work/ratio" %.3f | tr ' ' ,)
                jq -cn --arg c "$case_" --argjson s "$ds" --argjson i "$di" \
                    --argjson r "[$dr]" \
                    '{case: $c, scimq_MiB_per_s: $s, iperf3_MiB_per_s: $i,
                      scimq_over_iperf3: $r}' >> "$work/summary.jsonl"
            done
        done
        # What the delay lines did for this RTT and loss.
        stop "$delay_p"
        stop "$delay_g"
        delay_p='' delay_g=''
        tail -n 1 "$work/delay-g.out" | jq -r '"  delay line p -> g: \(.packets)
 packets, \(.dropped_random) dropped at random (\(if .packets > 0 then
 (.dropped_random * 10000 / .packets | round) / 100 else 0 end) %), \(.dropped_full)
 dropped full, at most \(.max_held) held"' | tr -d '\n' | tee -a "$txt"
        echo | tee -a "$txt"
    done
done
jq -cs --arg rate "$rate" --arg size "$size" --argjson n "$count" \
    --argjson rounds "$rounds" \
    '{bench: "wan", rate: $rate, size: $size, count: $n, rounds: $rounds,
      cases: .}' "$work/summary.jsonl" > "$out/wan-$stamp.json"
echo "kept: $txt, $out/wan-$stamp.json"
