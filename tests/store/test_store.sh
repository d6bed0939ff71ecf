#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The storage consumer, fed by fan-out: 60 self-verifying messages are put
# to in.q, bound to proc.q (a consumer) and store.q (scimq-store).  The
# store writes one file per message and a manifest; every stored file is
# then sent back through the gateway and verified, so the files are proved
# byte-exact, not just counted.  Then a message redelivered after it was
# stored is stored once.
. "$top_srcdir/tests/integration/lib.sh"
store="$top_builddir/examples/store/scimq-store"
n=60

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
for q in in.q proc.q store.q; do
    "$bindir/scimqctl" queue close "$q" > /dev/null || fail "close $q"
done
bounded 60 "$bindir/scimq-recv" --queue proc.q --verify --until-eos --expect "$n" \
    > "$workdir/proc.json" || fail "processing consumer"
i=0
while kill -0 "$store_pid" 2>/dev/null; do
    i=$((i + 1)); [ "$i" -gt $((600 * mult)) ] && fail "store did not finish"; sleep 0.1
done
wait "$store_pid" || { cat "$workdir/store.err" >&2; fail "store failed"; }
expect_eq "processed" "$n" "$(json_get "$workdir/proc.json" .verified)"
expect_eq "stored messages" "$n" "$(json_get "$workdir/store.json" .messages)"
expect_eq "manifest lines" "$n" "$(wc -l < "$workdir/kept/MANIFEST")"
expect_eq "files" "$n" "$(ls "$workdir/kept" | grep -vc MANIFEST)"
# Sizes in the manifest match the files.
bad=$(while read -r id blk bytes crc file; do
    [ "$(wc -c < "$workdir/kept/$file")" -eq "$bytes" ] || echo "$file"
done < "$workdir/kept/MANIFEST" | wc -l)
expect_eq "files whose size differs from the manifest" 0 "$bad"
# Every stored file goes back through the gateway and verifies.
bounded 60 "$bindir/scimq-send" --queue check.q --close "$workdir"/kept/0* \
    > /dev/null || fail "send back"
bounded 60 "$bindir/scimq-recv" --queue check.q --verify --until-eos --expect "$n" \
    > "$workdir/check.json" || fail "verify stored files"
expect_eq "stored files verified" "$n" "$(json_get "$workdir/check.json" .verified)"
expect_eq "stored files lost" 0 "$(json_get "$workdir/check.json" .lost)"

# Redelivered after it was stored: the store is stopped (SIGSTOP) while it
# holds messages of a queue with a 1 s lease, so their leases run out and
# the gateway delivers them again once it resumes.  Each is stored once:
# the manifest has one line per message, the redeliveries are counted.
m=40
"$bindir/scimqctl" queue create lease.q --guaranteed --ack-timeout 1 \
    > /dev/null || fail "create lease.q"
bounded 60 "$bindir/scimq-send" --queue lease.q --synthetic --size 256KiB \
    --count "$m" --close > /dev/null || fail "send to lease.q"
"$store" --queue lease.q --dir "$workdir/kept2" > "$workdir/store2.json" \
    2> "$workdir/store2.err" &
store_pid=$!
track "$store_pid"
# Stopped once it has stored a first message (and holds its credit's worth).
wait_until 30 "the store stores a first message" \
    test -s "$workdir/kept2/MANIFEST"
kill -STOP "$store_pid"
sleep 3
kill -CONT "$store_pid"
i=0
while kill -0 "$store_pid" 2>/dev/null; do
    i=$((i + 1)); [ "$i" -gt $((600 * mult)) ] && fail "store did not finish"; sleep 0.1
done
wait "$store_pid" || { cat "$workdir/store2.err" >&2; fail "store failed"; }
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
