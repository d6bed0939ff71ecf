#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""report_peer.py HOST PORT: a raw SciMP peer (no libscimq) that sends
REPORT frames (opcode 40) on a session of version 3: first the test vector
of doc/scimp.md ("REPORT"), which must get no answer, then malformed
bodies, each of which must get an ERROR (SCIMQ_EPROTO_ARGS) naming its
request id, with a PING after each to show the connection still works.
Prints one JSON line: {"vector_quiet":..., "errors":[[code, text], ...],
"pongs": n}.  Every read is bounded (socket timeout)."""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "integration"))
from scimp_raw import connect, frame, read_frame, s16  # noqa: E402


def vector():
    b = struct.pack(">BBHHHI", 1, 0, 0, 1, 2, 2000)
    b += struct.pack(">QQQQQ", 4 << 20, 8 << 20, 3, 4000, 2500)
    buckets = [0] * 32
    buckets[10], buckets[12] = 2, 1
    b += b"".join(struct.pack(">Q", x) for x in buckets)
    b += b"\x044242\x03shm" + struct.pack(">H", 2)
    b += struct.pack(">IQQ", 0, 5, 5) + struct.pack(">IQQ", 1, 3, 2)
    assert len(b) == 359
    return b


def main():
    sock, args = connect(sys.argv[1], sys.argv[2], 3, b"report-peer")
    assert args[0] >= 3, "session version %d, REPORT needs 3" % args[0]
    out = {"vector_quiet": None, "errors": [], "pongs": 0}
    good = vector()
    bad = [
        good[:200],                                  # cut short
        b"\x02" + good[1:],                          # unknown format
        good[:317] + b"\x01\x2c" + good[319:],       # 300 rank entries
        good + b"\x00",                              # trailing byte
        good[:309] + b"\"" + good[310:],             # a quote in the job id
        good[:331] + b"\x04" + good[332:],           # acked above delivered
        bytes(6000),                                 # over the size bound
    ]
    rid = 10
    for body in [good] + bad:
        rid += 1
        sock.sendall(frame(40, rid, s16(body)))
        sock.sendall(frame(6, rid + 1000, struct.pack(">Q", rid)))
        op, got_rid, args = read_frame(sock)
        if body is good:
            out["vector_quiet"] = op == 7 and got_rid == rid + 1000
            if op == 7:
                out["pongs"] += 1
            continue
        if op == 5 and got_rid == rid:
            code = struct.unpack(">i", args[:4])[0]
            n = struct.unpack(">H", args[4:6])[0]
            out["errors"].append([code, args[6:6 + n].decode()])
            op, got_rid, args = read_frame(sock)
        if op == 7 and got_rid == rid + 1000:
            out["pongs"] += 1
    sock.sendall(frame(8, 99, b""))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
