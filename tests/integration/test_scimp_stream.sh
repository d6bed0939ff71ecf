#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# SciMP end to end through real pipes and files: scimq-scimp gen encodes
# frames with writev() over the payload buffers, scimq-scimp dump decodes
# them with readv() into the final buffers and verifies every payload.
. "$top_srcdir/tests/integration/lib.sh"
scimp="$bindir/scimq-scimp"
out="$workdir/out.json"

# 1. Every opcode plus 20 self-verifying PUTs with payload checksums.
bounded 60 sh -c "'$scimp' gen --all-opcodes --count 20 --size 256KiB --datasum \
    | '$scimp' dump --verify > '$out'" || fail "gen | dump failed"
expect_eq "tour: error" null "$(json_get "$out" .error)"
expect_eq "tour: PUT frames" 20 "$(json_get "$out" .by_opcode.PUT)"
expect_eq "tour: opcodes seen" 29 "$(json_get "$out" '.by_opcode | length')"
expect_eq "tour: verified" 20 "$(json_get "$out" .verified)"
expect_eq "tour: lost" 0 "$(json_get "$out" .lost)"
expect_eq "tour: corrupt" 0 "$(json_get "$out" .corrupt)"
grep -q 'QUEUE_DECLARE .*queue=demo kind=guaranteed' "$out" ||
    fail "dump does not describe QUEUE_DECLARE"
ok "dump prints decoded arguments"

# 2. Large messages take the zero-copy readv path.
bounded 120 sh -c "'$scimp' gen --count 6 --size 16MiB \
    | '$scimp' dump --verify --quiet > '$out'" || fail "16 MiB stream failed"
expect_eq "16MiB: verified" 6 "$(json_get "$out" .verified)"
expect_eq "16MiB: payload bytes" $((6 * 16777216)) "$(json_get "$out" .payload_bytes)"

# 3. A flipped payload byte is caught by the CRC32C trailer.
"$scimp" gen --count 3 --size 4KiB --datasum -o "$workdir/s.bin" 2>/dev/null
cp "$workdir/s.bin" "$workdir/bad.bin"
printf 'X' | dd of="$workdir/bad.bin" bs=1 seek=5000 conv=notrunc 2>/dev/null
if "$scimp" dump --verify --quiet "$workdir/bad.bin" > "$out" 2>/dev/null; then
    fail "corrupted payload accepted"
fi
expect_eq "corrupt payload: error" SCIMQ_EPROTO_DATASUM "$(json_get "$out" .error)"
expect_eq "corrupt payload: frames before it" 1 "$(json_get "$out" .frames)"

# 4. A stream cut inside a frame is an error, not a silent end.
head -c 6000 "$workdir/s.bin" > "$workdir/cut.bin"
if "$scimp" dump --quiet "$workdir/cut.bin" > "$out" 2> "$workdir/err"; then
    fail "truncated stream accepted"
fi
expect_eq "truncated: error" SCIMQ_EPIPE "$(json_get "$out" .error)"
grep -q "ends inside a frame" "$workdir/err" || fail "no clear truncation message"
ok "truncation message"

# 5. Garbage is refused at the first byte.
printf 'GET / HTTP/1.1\r\n\r\n' > "$workdir/http.bin"
if "$scimp" dump "$workdir/http.bin" > "$out" 2>/dev/null; then
    fail "garbage accepted"
fi
expect_eq "garbage: error" SCIMQ_EPROTO_MAGIC "$(json_get "$out" .error)"

# 6. Receiver limits come from the tunables table (environment).
"$scimp" gen --count 1 --size 2MiB -o "$workdir/big.bin" 2>/dev/null
if SCIMQ_PROTO_MAX_PAYLOAD=1MiB "$scimp" dump "$workdir/big.bin" > "$out" 2>/dev/null; then
    fail "payload over the limit accepted"
fi
expect_eq "over limit: error" SCIMQ_EPROTO_TOOBIG "$(json_get "$out" .error)"
SCIMQ_PROTO_MAX_PAYLOAD=2MiB "$scimp" dump --verify "$workdir/big.bin" > "$out" ||
    fail "payload at the limit refused"
expect_eq "at limit: verified" 1 "$(json_get "$out" .verified)"

# 7. Command-line errors are clear and exit 2.
set +e
"$scimp" gen --size 10 > /dev/null 2> "$workdir/err"
rc=$?
set -e
expect_eq "bad --size exit code" 2 "$rc"
grep -q "bad --size '10'" "$workdir/err" || fail "unclear --size error"
"$scimp" --list-params | grep -q SCIMQ_PROTO_MAX_PAYLOAD ||
    fail "--list-params lacks SCIMQ_PROTO_MAX_PAYLOAD"
ok "--list-params"
echo "$checks checks passed"
