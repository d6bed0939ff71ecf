#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Empty messages are messages: delivered (in order, between others), end of
# stream follows, also when the others were spilled to disk.  (A zero-length
# payload used to be taken for one on disk: never delivered, no EOS.)
. "$top_srcdir/tests/integration/lib.sh"

head -c 1024 /dev/urandom > "$workdir/one.dat"
: > "$workdir/empty.dat"

start_gateway --memory-limit 2MiB --spill-dir "$workdir/spill"
bounded 60 "$bindir/scimq-send" --queue z --declare guaranteed \
    "$workdir/one.dat" "$workdir/empty.dat" "$workdir/one.dat" --close \
    > "$workdir/send.json" || fail "send"
expect_eq "confirmed" 3 "$(json_get "$workdir/send.json" .messages)"
bounded 60 "$bindir/scimq-recv" --queue z --until-eos \
    > "$workdir/recv.json" || fail "the consumer never got end of stream"
expect_eq "delivered" 3 "$(json_get "$workdir/recv.json" .messages)"
expect_eq "bytes" 2048 "$(json_get "$workdir/recv.json" .bytes)"
expect_eq "end of stream" true "$(json_get "$workdir/recv.json" .eos)"

# Through spill: 24 x 256 KiB wait in a 2 MiB gateway around an empty one.
"$bindir/scimqctl" queue create s --guaranteed > /dev/null || fail "create"
bounded 60 "$bindir/scimq-send" --queue s --synthetic --size 256KiB \
    --count 12 > /dev/null || fail "send"
bounded 60 "$bindir/scimq-send" --queue s "$workdir/empty.dat" \
    > /dev/null || fail "send empty"
bounded 60 "$bindir/scimq-send" --queue s --synthetic --size 256KiB \
    --count 12 --first-seq 12 --close > /dev/null || fail "send"
[ "$(gw_stat .spill.spilled_total)" -gt 0 ] || fail "nothing was spilled"
ok "payloads spilled"
bounded 60 "$bindir/scimq-recv" --queue s --until-eos \
    > "$workdir/recv2.json" || fail "the consumer never got end of stream"
expect_eq "spilled: delivered" 25 "$(json_get "$workdir/recv2.json" .messages)"
expect_eq "spilled: bytes" $((24 * 262144)) "$(json_get "$workdir/recv2.json" .bytes)"
expect_eq "spilled: end of stream" true "$(json_get "$workdir/recv2.json" .eos)"
expect_eq "spilled bytes left" 0 "$(gw_stat .spill.bytes)"
stop_gateway
expect_eq "spill files left after exit" 0 "$(ls "$workdir/spill" | wc -l)"
echo "$checks checks passed"
