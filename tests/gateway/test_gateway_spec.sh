#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Where the gateway and doc/scimp.md used to disagree, on the wire:
#  - WELCOME without authentication carries an all-zero nonce (§6.2);
#  - a client frame of a gateway-only opcode gets ERROR SCIMQ_ENOTSUP and
#    the connection stays (§6.2); a client's PONG and ERROR are ignored:
#    the PING sent after all of them is answered;
#  - an ignored settlement is counted (settlements_ignored).
. "$top_srcdir/tests/integration/lib.sh"
scimp="$bindir/scimq-scimp"
need bash bash # /dev/tcp
need od coreutils

start_gateway
for op in HELLO EOS PUT_OK PONG ERROR ACK PING; do
    "$scimp" gen --count 0 --only "$op" 2> /dev/null
done > "$workdir/frames.bin"
bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 3
         cat "$2" >&3
         timeout "$3" cat <&3 > "$4"' raw "$GW_PORT" "$workdir/frames.bin" \
    $((3 * mult)) "$workdir/reply.bin" && fail "the gateway closed the connection"
"$scimp" dump "$workdir/reply.bin" > "$workdir/reply.txt" || fail "bad reply stream"
sed -n 's/^#[0-9]* *\([A-Z_]*\).*/\1/p' "$workdir/reply.txt" | tr '\n' ' ' > "$workdir/ops"
expect_eq "replies" "WELCOME ERROR ERROR PONG " "$(cat "$workdir/ops")"
expect_eq "gateway-only opcodes" 2 "$(grep -c 'ERROR.*code=SCIMQ_ENOTSUP' "$workdir/reply.txt")"
# WELCOME args: version, auth, stream index, max payload, session id (16),
# then the nonce (32) at byte 40 + 28 of the stream (doc/scimp.md §3).
nonce=$(od -An -v -tx1 -j 68 -N 32 "$workdir/reply.bin" | tr -d ' \n')
expect_eq "WELCOME nonce without auth" \
    0000000000000000000000000000000000000000000000000000000000000000 "$nonce"
expect_eq "ignored settlements" 1 "$(gw_stat .settlements_ignored)"
stop_gateway
echo "$checks checks passed"
