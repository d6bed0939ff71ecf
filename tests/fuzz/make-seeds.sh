#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Regenerates the seed part of the decoder corpus from scimq-scimp.
# Usage: tests/fuzz/make-seeds.sh BUILDDIR
# Each input is one control byte (feed style + payload style, see
# fuzz_decoder.c) followed by a SciMP byte stream.
set -eu
build=${1:?usage: make-seeds.sh BUILDDIR}
here=$(cd "$(dirname "$0")" && pwd)
out="$here/corpus"
gen="$build/src/tools/scimq-scimp gen"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

$gen --all-opcodes --count 2 --size 48 > "$tmp/tour" 2>/dev/null
$gen --all-opcodes --count 2 --size 48 --datasum > "$tmp/tour-sum" 2>/dev/null
$gen --count 3 --size 100 --datasum > "$tmp/puts-sum" 2>/dev/null
$gen --count 1 --size 4KiB > "$tmp/put-4k" 2>/dev/null
$gen --count 1 --size 32 --queue "" > "$tmp/put-empty-queue" 2>/dev/null
# Single frames: LIMIT (session version 2) and a DELIVER with a block.
$gen --count 0 --only LIMIT > "$tmp/limit" 2>/dev/null
$gen --count 0 --only DELIVER --datasum > "$tmp/deliver-sum" 2>/dev/null
# Control messages (session version 4): a PUT and a DELIVER with BROADCAST.
$gen --count 1 --size 64 --broadcast > "$tmp/put-control" 2>/dev/null
$gen --count 0 --only DELIVER --broadcast --datasum > "$tmp/deliver-control-sum" 2>/dev/null
# The range frames of session version 3: ACK_RANGE / NACK_RANGE (two
# ranges each) and PUT_OK_RANGE, and ranges that break the one encoding
# (the second range touching the first; a count of 0).
$gen --count 0 --only ACK_RANGE > "$tmp/ack-range" 2>/dev/null
$gen --count 0 --only NACK_RANGE --datasum > "$tmp/nack-range-sum" 2>/dev/null
$gen --count 0 --only PUT_OK_RANGE > "$tmp/put-ok-range" 2>/dev/null
# Header checksum recomputed, so that the decoder reaches the args.
python3 - "$tmp" <<'PY'
import struct, sys
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF
d = sys.argv[1]
good = bytearray(open(d + "/ack-range", "rb").read())
for name, off, val in (("touch", 54, struct.pack(">Q", 65)),
                       ("zero", 62, struct.pack(">I", 0))):
    f = bytearray(good)
    f[off:off + len(val)] = val
    f[28:32] = b"\0\0\0\0"
    f[28:32] = struct.pack(">I", crc32c(bytes(f[:66])))
    open(d + "/bad-ranges-" + name, "wb").write(f)
PY
# Broken streams: truncated, bad magic, corrupted header and payload.
head -c 30 "$tmp/tour" > "$tmp/trunc-fixed"
head -c 200 "$tmp/puts-sum" > "$tmp/trunc-payload"
printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' > "$tmp/http"
{ printf 'SCMP\002'; tail -c +6 "$tmp/put-4k"; } > "$tmp/bad-version"
{ head -c 45 "$tmp/puts-sum"; printf 'X'; tail -c +47 "$tmp/puts-sum"; } > "$tmp/bad-hdrsum"
{ head -c 150 "$tmp/puts-sum"; printf 'X'; tail -c +152 "$tmp/puts-sum"; } > "$tmp/bad-datasum"

for f in "$tmp"/*; do
    name=$(basename "$f")
    for mode in 0 1 2 3 4 5 6 7 8; do
        { printf "\\$(printf %03o "$mode")"; cat "$f"; } > "$out/seed-$name-$mode"
    done
done
echo "$(ls "$out" | wc -l) corpus files in $out"
