#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The storage consumer, fed by fan-out: 60 self-verifying messages and a
# control message after them (an end of series) are put to in.q, bound to
# proc.q (a consumer) and store.q (scimq-store); the control message is
# stored like data and counted apart.  The
# store writes one file per message and a manifest; every stored file is
# then sent back through the gateway and verified, so the files are proved
# byte-exact, not just counted.  Then a message redelivered after it was
# stored is stored once.
. "$top_srcdir/tests/integration/lib.sh"
store="$top_builddir/examples/store/scimq-store"
n=60

# store_finished ERRFILE: waits (bounded) for the store $store_pid to end
# at end of stream, and for its success.
store_finished() {
    wait_until 60 "the store ends" sh -c "! kill -0 $store_pid 2>/dev/null"
    wait "$store_pid" || { cat "$1" >&2; fail "store failed"; }
}

start_gateway
for q in in.q proc.q store.q check.q; do
    "$bindir/scimqctl" queue create "$q" --guaranteed > /dev/null || fail "create $q"
done
"$bindir/scimqctl" queue bind in.q proc.q > /dev/null || fail "bind"
"$bindir/scimqctl" queue bind in.q store.q > /dev/null || fail "bind"
"$store" --queue store.q --dir "$workdir/kept" > "$workdir/store.json" \
    2> "$workdir/store.err" &
store_pid=$!
track "$store_pid"
bounded 60 "$bindir/scimq-send" --queue in.q --synthetic --size 1KiB:512KiB \
    --count "$n" > /dev/null || fail "send"
bounded 60 "$bindir/scimq-send" --queue in.q --synthetic --size 200B \
    --count 1 --first-seq "$n" --control > /dev/null || fail "send the control message"
for q in in.q proc.q store.q; do
    "$bindir/scimqctl" queue close "$q" > /dev/null || fail "close $q"
done
bounded 60 "$bindir/scimq-recv" --queue proc.q --verify --until-eos --expect "$n" \
    > "$workdir/proc.json" || fail "processing consumer"
store_finished "$workdir/store.err"
expect_eq "processed" "$n" "$(json_get "$workdir/proc.json" .verified)"
expect_eq "processed: the control message" 1 "$(json_get "$workdir/proc.json" .control)"
expect_eq "stored messages" "$n" "$(json_get "$workdir/store.json" .messages)"
expect_eq "stored control messages" 1 "$(json_get "$workdir/store.json" .control)"
expect_eq "manifest lines" $((n + 1)) "$(wc -l < "$workdir/kept/MANIFEST")"
expect_eq "files" $((n + 1)) "$(ls "$workdir/kept" | grep -vc MANIFEST)"
# Sizes in the manifest match the files.
bad=$(while read -r id blk bytes crc file; do
    [ "$(wc -c < "$workdir/kept/$file")" -eq "$bytes" ] || echo "$file"
done < "$workdir/kept/MANIFEST" | wc -l)
expect_eq "files whose size differs from the manifest" 0 "$bad"
# Every stored file goes back through the gateway and verifies.
bounded 60 "$bindir/scimq-send" --queue check.q --close "$workdir"/kept/0* \
    > /dev/null || fail "send back"
bounded 60 "$bindir/scimq-recv" --queue check.q --verify --until-eos \
    --expect $((n + 1)) > "$workdir/check.json" || fail "verify stored files"
expect_eq "stored files verified" $((n + 1)) "$(json_get "$workdir/check.json" .verified)"
expect_eq "stored files lost" 0 "$(json_get "$workdir/check.json" .lost)"

# Redelivered after it was stored: the store subscribes to a queue with a
# 1 s lease and is stopped (SIGSTOP) before anything is put; the gateway
# hands it its credit's worth, whose leases run out while it is stopped,
# and delivers those again once it resumes and has stored them.  Each
# message is stored once: one manifest line per message, the redeliveries
# counted apart.
m=40
"$bindir/scimqctl" queue create lease.q --guaranteed --ack-timeout 1 \
    > /dev/null || fail "create lease.q"
"$store" --queue lease.q --dir "$workdir/kept2" > "$workdir/store2.json" \
    2> "$workdir/store2.err" &
store_pid=$!
track "$store_pid"
wait_until 30 "the store subscribes" \
    stat_eq '.queues[] | select(.name == "lease.q") | .consumers' 1
kill -STOP "$store_pid"
bounded 60 "$bindir/scimq-send" --queue lease.q --synthetic --size 256KiB \
    --count "$m" --close > /dev/null || fail "send to lease.q"
wait_until 30 "leases held by the stopped store ran out" \
    stat_ge '.queues[] | select(.name == "lease.q") | .counters.redelivered' 1
kill -CONT "$store_pid"
store_finished "$workdir/store2.err"
expect_eq "lease.q: stored messages" "$m" "$(json_get "$workdir/store2.json" .messages)"
expect_eq "lease.q: manifest lines (one per message)" "$m" \
    "$(wc -l < "$workdir/kept2/MANIFEST")"
expect_eq "lease.q: distinct ids in the manifest" "$m" \
    "$(cut -f1 "$workdir/kept2/MANIFEST" | sort -u | wc -l)"
redelivered=$(json_get "$workdir/store2.json" .redelivered)
[ "$redelivered" -ge 1 ] || fail "no message was redelivered after it was stored"
ok "lease.q: $redelivered redeliveries of stored messages acknowledged, not stored again"
stop_gateway
echo "$checks checks passed"
