#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Fan-out: piv.in is bound to piv.process and piv.store, so one PUT lands in
# both.  Each bound queue receives every message, and the payload is stored
# once (statistics: bytes allocated == bytes published).
. "$top_srcdir/tests/integration/lib.sh"
n=200
size=$((256 * 1024))

start_gateway
for q in piv.in piv.process piv.store; do
    "$bindir/scimqctl" queue create "$q" --guaranteed > /dev/null || fail "create $q"
done
"$bindir/scimqctl" queue bind piv.in piv.process > /dev/null || fail "bind"
"$bindir/scimqctl" queue bind piv.in piv.store > /dev/null || fail "bind"
expect_eq "bindings" '["piv.process","piv.store"]' \
    "$("$bindir/scimqctl" queue list piv.in | jq -c '.queues[] | select(.name=="piv.in") | .bindings | sort')"

bounded 120 "$bindir/scimq-send" --queue piv.in --streams 2 --synthetic \
    --size "$size" --count "$n" > "$workdir/send.json" || fail "sender"
for q in piv.in piv.process piv.store; do
    expect_eq "$q holds" "$n" "$(gw_stat ".queues[] | select(.name==\"$q\") | .ready")"
done
expect_eq "payload bytes allocated (no copies)" $((n * size)) "$(gw_stat .payload_allocated)"
expect_eq "payload bytes resident (shared)" $((n * size)) "$(gw_stat .memory.used)"

for q in piv.in piv.process piv.store; do
    "$bindir/scimqctl" queue close "$q" > /dev/null || fail "close $q"
done
for q in piv.process piv.store; do
    bounded 120 "$bindir/scimq-recv" --queue "$q" --verify --until-eos \
        --expect "$n" > "$workdir/$q.json" || fail "consumer of $q"
    expect_eq "$q: verified" "$n" "$(json_get "$workdir/$q.json" .verified)"
    expect_eq "$q: lost" 0 "$(json_get "$workdir/$q.json" .lost)"
done
# piv.in itself still holds its copies; its payloads are the same buffers.
expect_eq "resident after both consumers" $((n * size)) "$(gw_stat .memory.used)"
expect_eq "deleted piv.in" "$n" "$("$bindir/scimqctl" queue delete piv.in | jq .discarded)"
expect_eq "resident at the end" 0 "$(gw_stat .memory.used)"
stop_gateway
echo "$checks checks passed"
