#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Control messages (SciMP BROADCAST, session version 4; doc/scimp.md,
# "Control messages"):
#  1. three consumers on one queue, data, a control message, more data,
#     another control: every consumer gets each control exactly once, in
#     order; the data is shared out, each message delivered exactly once;
#     no data message put after a control is taken before every copy of it
#     began to be settled, and no copy is taken before every data message
#     put before it did (CLOCK_MONOTONIC timelines of the consumers);
#  2. a consumer of session version 3 next to one of version 4: it never
#     sees the control message, data still flows to both; a consumer that
#     subscribes while a copy is unsettled gets one, one that subscribes
#     after every copy was settled does not;
#  3. BROADCAST on a session of version 3 is refused: by the library
#     (SCIMQ_ENOTSUP) and, from a raw peer, by the gateway (ERROR
#     SCIMQ_EPROTO_FLAGS, the connection stays usable);
#  4. a journaled gateway killed (SIGKILL) with a control message queued
#     gives it back after the restart as a control message, in its place.
. "$top_srcdir/tests/integration/lib.sh"
need python3 python3

EPROTO_FLAGS=-4005

# consumers_eq QUEUE N: the gateway counts N consumers on QUEUE.
consumers_eq() {
    stat_eq ".queues[] | select(.name == \"$1\") | .consumers" "$2"
}

# start_consumer NAME QUEUE [VAR=VALUE...]: a verifying consumer in the
# background until end of stream; its pid in pid_NAME.
start_consumer() {
    sc_name=$1 sc_q=$2
    shift 2
    bounded 120 env "$@" "$bindir/scimq-recv" --queue "$sc_q" --verify \
        --until-eos --process-ms 1 --seq-log "$workdir/$sc_name.seq" \
        --timeline "$workdir/$sc_name.tl" > "$workdir/$sc_name.json" \
        2> "$workdir/$sc_name.err" &
    track $!
    eval "pid_$sc_name=\$!"
}

# wait_consumer NAME: it ended well.
wait_consumer() {
    eval "wc_pid=\$pid_$1"
    wait "$wc_pid" || fail "consumer $1: $(cat "$workdir/$1.err")"
}

# send QUEUE FIRST COUNT [ARGS...]: synthetic messages FIRST.. in order
# (each scimq-send returns once all of its messages are confirmed).
send() {
    s_q=$1 s_first=$2 s_n=$3
    shift 3
    bounded 60 "$bindir/scimq-send" --queue "$s_q" --synthetic --size 256B \
        --count "$s_n" --first-seq "$s_first" "$@" > "$workdir/send.json" \
        2> "$workdir/send.err" || fail "send $s_q $s_first+$s_n: $(cat "$workdir/send.err")"
}

# order_violations SEQ TIMELINE: for the control message SEQ in the merged
# TIMELINE (taken_ns settling_ns seq kind), 1 for each rule broken: a data
# message put after it taken before the last copy began to be settled; a
# copy taken before the last data message put before it did.
order_violations() {
    awk -v c="$1" '
        $4 == "control" && $3 == c {
            if ($2 > cset) cset = $2
            if (ctake == "" || $1 < ctake) ctake = $1
        }
        $4 == "data" && $3 > c && (after == "" || $1 < after) { after = $1 }
        $4 == "data" && $3 < c && $2 > before { before = $2 }
        END {
            v = 0
            if (ctake == "") v++
            if (after != "" && after <= cset) v++
            if (before != "" && before >= ctake) v++
            print v
        }' "$2"
}

# ---------------------------------------------------------------------------
# 1. Three consumers.
start_gateway
"$bindir/scimqctl" queue create ctl --guaranteed > /dev/null || fail "create ctl"
for i in 1 2 3; do
    start_consumer "c$i" ctl
done
wait_until 30 "three consumers on ctl" consumers_eq ctl 3
send ctl 0 100
send ctl 100 1 --control
expect_eq "the control message is sent as one" true "$(json_get "$workdir/send.json" .control)"
send ctl 101 100
send ctl 201 1 --control --close
data=0
for i in 1 2 3; do
    wait_consumer "c$i"
    j="$workdir/c$i.json"
    expect_eq "c$i: session version" 4 "$(json_get "$j" .session_version)"
    expect_eq "c$i: control messages" 2 "$(json_get "$j" .control)"
    expect_eq "c$i: each control once, in order" 100,201 \
        "$(json_get "$j" '.control_seqs | map(tostring) | join(",")')"
    expect_eq "c$i: corrupt" 0 "$(json_get "$j" .corrupt)"
    expect_eq "c$i: duplicates" 0 "$(json_get "$j" .duplicates)"
    expect_eq "c$i: end of stream" true "$(json_get "$j" .eos)"
    [ "$(json_get "$j" .messages)" -gt 0 ] || fail "c$i got no data"
    data=$((data + $(json_get "$j" .messages)))
done
expect_eq "data delivered, all consumers" 200 "$data"
{ seq 0 99; seq 101 200; } > "$workdir/want.seq"
cat "$workdir"/c1.seq "$workdir"/c2.seq "$workdir"/c3.seq | sort -n \
    > "$workdir/got.seq"
cmp -s "$workdir/want.seq" "$workdir/got.seq" ||
    fail "data sequence numbers: not each of 0..99, 101..200 exactly once"
ok "each data message exactly once across the consumers"
cat "$workdir"/c1.tl "$workdir"/c2.tl "$workdir"/c3.tl > "$workdir/all.tl"
expect_eq "timeline lines" 206 "$(wc -l < "$workdir/all.tl" | tr -d ' ')"
expect_eq "control 100: ordered with the data" 0 "$(order_violations 100 "$workdir/all.tl")"
expect_eq "control 201: ordered with the data" 0 "$(order_violations 201 "$workdir/all.tl")"
expect_eq "acknowledged (a control message once)" 202 \
    "$(gw_stat '.queues[] | select(.name == "ctl") | .counters.acked')"

# ---------------------------------------------------------------------------
# 2. A consumer of session version 3 next to one of version 4.
"$bindir/scimqctl" queue create mix --guaranteed > /dev/null || fail "create mix"
start_consumer new mix
start_consumer old mix SCIMQ_PROTO_MAX_VERSION=3
wait_until 30 "two consumers on mix" consumers_eq mix 2
send mix 0 50
send mix 50 1 --control
send mix 51 50 --close
wait_consumer new
wait_consumer old
expect_eq "version 3 consumer: session version" 3 "$(json_get "$workdir/old.json" .session_version)"
expect_eq "version 3 consumer: control messages" 0 "$(json_get "$workdir/old.json" .control)"
expect_eq "version 4 consumer: control messages" 1 "$(json_get "$workdir/new.json" .control)"
expect_eq "version 4 consumer: the control" 50 "$(json_get "$workdir/new.json" '.control_seqs | map(tostring) | join(",")')"
expect_eq "data delivered, both consumers" 100 \
    "$(( $(json_get "$workdir/old.json" .messages) + $(json_get "$workdir/new.json" .messages) ))"
[ "$(awk '$1 > 50' "$workdir/old.seq" | wc -l)" -gt 0 ] ||
    fail "the version 3 consumer got no data put after the control message"
ok "data after the control message still flows to the version 3 consumer"
{ seq 0 49; seq 51 100; } > "$workdir/want.seq"
sort -n "$workdir/old.seq" "$workdir/new.seq" > "$workdir/got.seq"
cmp -s "$workdir/want.seq" "$workdir/got.seq" ||
    fail "mix: data sequence numbers not each of 0..49, 51..100 exactly once"
ok "mix: each data message exactly once"

# ---------------------------------------------------------------------------
# 2b. A consumer that subscribes while a copy is still unsettled gets one
#     too (the agents of an MPI job start one after the other); one that
#     subscribes once every copy is settled does not.
"$bindir/scimqctl" queue create late --guaranteed > /dev/null || fail "create late"
lq='.queues[] | select(.name == "late")'
hold_ms=$((3000 * mult))
bounded 120 "$bindir/scimq-recv" --queue late --verify --until-eos \
    --process-ms "$hold_ms" > "$workdir/early.json" 2> "$workdir/early.err" &
track $!
pid_early=$!
wait_until 30 "one consumer on late" consumers_eq late 1
send late 0 1 --control
wait_until 30 "the control message handed to the first consumer" \
    stat_eq "$lq | .counters.delivered" 1
start_consumer joined late
wait_until 30 "two consumers on late" consumers_eq late 2
# The first consumer still holds its copy ($hold_ms ms): the second gets
# one as it subscribes.
wait_until 30 "a copy for the consumer that joined" \
    stat_eq "$lq | .counters.delivered" 2
wait_until 60 "the control message settled" stat_eq "$lq | .counters.acked" 1
start_consumer after late
wait_until 30 "three consumers on late" consumers_eq late 3
send late 1 10 --close
wait "$pid_early" || fail "consumer early: $(cat "$workdir/early.err")"
wait_consumer joined
wait_consumer after
expect_eq "late: the first consumer's control" 0 \
    "$(json_get "$workdir/early.json" '.control_seqs | map(tostring) | join(",")')"
expect_eq "late: the joined consumer's control" 0 \
    "$(json_get "$workdir/joined.json" '.control_seqs | map(tostring) | join(",")')"
expect_eq "late: a consumer after the settlement: no control" 0 \
    "$(json_get "$workdir/after.json" .control)"
expect_eq "late: data delivered" 10 \
    "$(( $(json_get "$workdir/early.json" .messages) + $(json_get "$workdir/joined.json" .messages) + $(json_get "$workdir/after.json" .messages) ))"
expect_eq "late: acknowledged (the control message once)" 11 \
    "$(gw_stat "$lq | .counters.acked")"

# ---------------------------------------------------------------------------
# 3. BROADCAST below session version 4: refused.
"$bindir/scimqctl" queue create raw --guaranteed > /dev/null || fail "create raw"
if bounded 60 env SCIMQ_PROTO_MAX_VERSION=3 "$bindir/scimq-send" --queue raw \
    --synthetic --size 64B --count 1 --control > "$workdir/send3.json" \
    2> /dev/null; then
    fail "the library sent a control message on a session of version 3"
fi
expect_eq "library, version 3: refused" SCIMQ_ENOTSUP "$(json_get "$workdir/send3.json" .error)"
bounded 60 python3 "$top_srcdir/tests/gateway/control_peer.py" 127.0.0.1 \
    "$GW_PORT" raw 3 > "$workdir/peer3.json" 2> "$workdir/peer.err" ||
    { cat "$workdir/peer.err" >&2; fail "control_peer (version 3)"; }
expect_eq "raw peer: session version" 3 "$(json_get "$workdir/peer3.json" .version)"
expect_eq "gateway, version 3: BROADCAST refused" "5 $EPROTO_FLAGS" \
    "$(json_get "$workdir/peer3.json" '.broadcast | map(tostring) | join(" ")')"
expect_eq "gateway, version 3: the next PUT confirmed" 17 "$(json_get "$workdir/peer3.json" .plain)"
bounded 60 python3 "$top_srcdir/tests/gateway/control_peer.py" 127.0.0.1 \
    "$GW_PORT" raw 4 > "$workdir/peer4.json" 2> "$workdir/peer.err" ||
    { cat "$workdir/peer.err" >&2; fail "control_peer (version 4)"; }
expect_eq "gateway, version 4: BROADCAST confirmed" "17 0" \
    "$(json_get "$workdir/peer4.json" '.broadcast | map(tostring) | join(" ")')"
expect_eq "raw queue: the two PUTs of version 4, one of version 3" 3 \
    "$(gw_stat '.queues[] | select(.name == "raw") | .ready')"
stop_gateway

# ---------------------------------------------------------------------------
# 4. A journaled gateway killed with a control message queued.
start_gateway --journal-dir "$workdir/journal"
"$bindir/scimqctl" queue create j --guaranteed --durability batch \
    > /dev/null || fail "create j"
send j 0 5
send j 5 1 --control
send j 6 4
kill -KILL "$GW_PID"
wait "$GW_PID" 2> /dev/null || true
start_gateway --journal-dir "$workdir/journal"
expect_eq "recovered" 10 "$(gw_stat '.queues[] | select(.name == "j") | .ready')"
"$bindir/scimqctl" queue close j > /dev/null || fail "close j"
start_consumer jr j
wait_consumer jr
expect_eq "after the restart: control messages" 1 "$(json_get "$workdir/jr.json" .control)"
expect_eq "after the restart: the control" 5 "$(json_get "$workdir/jr.json" '.control_seqs | map(tostring) | join(",")')"
expect_eq "after the restart: data" 9 "$(json_get "$workdir/jr.json" .messages)"
expect_eq "after the restart: in its place" \
    "data data data data data control data data data data" \
    "$(awk '{ print $4 }' "$workdir/jr.tl" | tr '\n' ' ' | sed 's/ $//')"
stop_gateway
echo "$checks checks passed"
