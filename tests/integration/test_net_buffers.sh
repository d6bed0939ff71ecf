#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Socket buffers that do not hurt: by default the gateway and the tools
# leave them to the kernel's autotuning (nothing is warned, nothing
# counted); a buffer set above the kernel's cap (net.core.wmem_max /
# rmem_max, read here and never changed: they are global) is cut by the
# kernel, and the gateway and the client library say so, naming the
# sysctl, and the gateway counts it in STATS "net".
. "$top_srcdir/tests/integration/lib.sh"
ctl="$bindir/scimqctl"
wmax=$(cat /proc/sys/net/core/wmem_max)
rmax=$(cat /proc/sys/net/core/rmem_max)
big_r=$((rmax * 2 + 4096))
big_w=$((wmax * 2 + 4096))

# 1. Defaults: no buffer set, nothing cut, nothing said.
start_gateway
bounded 30 "$bindir/scimq-send" --queue plain --declare guaranteed \
    --synthetic --size 64KiB --count 4 > "$workdir/send0.json" \
    2> "$workdir/send0.err" || fail "send with default buffers"
expect_eq "STATS net.buffers_short with default buffers" 0 \
    "$(gw_stat .net.buffers_short)"
expect_eq "STATS net.rmem_max is the kernel's" "$rmax" "$(gw_stat .net.rmem_max)"
expect_eq "STATS net.wmem_max is the kernel's" "$wmax" "$(gw_stat .net.wmem_max)"
if grep -q 'mem_max' "$workdir/gateway.err" "$workdir/send0.err"; then
    fail "a warning about buffers nobody set"
fi
ok "no buffer warning with default buffers"
stop_gateway

# 2. The gateway asked for a receive buffer above rmem_max: every accepted
#    connection is cut and counted, the warning names the sysctl once.
SCIMQ_NET_RCVBUF=$big_r start_gateway
bounded 30 "$bindir/scimq-send" --queue big --declare guaranteed \
    --streams 2 --synthetic --size 64KiB --count 4 > "$workdir/send1.json" \
    2> "$workdir/send1.err" || fail "send to a gateway with a big rcvbuf"
expect_eq "messages sent" 4 "$(json_get "$workdir/send1.json" .messages)"
n=$(gw_stat .net.buffers_short)
# The producer's two streams and scimqctl's connections, at least.
[ "$n" -ge 2 ] || fail "STATS net.buffers_short = $n, expected >= 2"
ok "STATS net.buffers_short = $n connections cut"
grep -q "net.core.rmem_max = $rmax" "$workdir/gateway.err" ||
    fail "the gateway's warning does not name net.core.rmem_max = $rmax: $(cat "$workdir/gateway.err")"
grep -q "sysctl -w net.core.rmem_max=$big_r" "$workdir/gateway.err" ||
    fail "the gateway's warning does not say what to set"
grep -q "autotuning off" "$workdir/gateway.err" ||
    fail "the gateway's warning does not say autotuning is off"
ok "the gateway warns, naming net.core.rmem_max and its value"
expect_eq "the warning is given once" 1 \
    "$(grep -c 'net.core.rmem_max = ' "$workdir/gateway.err")"
stop_gateway

# 3. A producer asked for a send buffer above wmem_max: the client library
#    warns the same way (on the tool's stderr).
start_gateway
SCIMQ_NET_SNDBUF=$big_w bounded 30 "$bindir/scimq-send" --queue snd \
    --declare guaranteed --synthetic --size 64KiB --count 4 \
    > "$workdir/send2.json" 2> "$workdir/send2.err" ||
    fail "send with a big sndbuf"
expect_eq "messages sent with a big sndbuf" 4 \
    "$(json_get "$workdir/send2.json" .messages)"
grep -q "net.core.wmem_max = $wmax" "$workdir/send2.err" ||
    fail "scimq-send's warning does not name net.core.wmem_max = $wmax: $(cat "$workdir/send2.err")"
ok "the client library warns, naming net.core.wmem_max and its value"
expect_eq "the gateway cut nothing of its own" 0 "$(gw_stat .net.buffers_short)"
stop_gateway
echo "$checks checks passed"
