#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""control_peer.py HOST PORT QUEUE MAX_VERSION: a raw SciMP peer (no
libscimq) that offers session versions 1..MAX_VERSION and sends a PUT with
BROADCAST | CONFIRM (a control message), then a plain PUT with CONFIRM, to
QUEUE.  Prints one JSON line: {"version": chosen, "broadcast": [opcode,
code], "plain": opcode}: opcode 17 is PUT_OK, 5 ERROR (code its SCIMQ_E*
value, else 0).  Every read is bounded (socket timeout)."""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "integration"))
from scimp_raw import (F_BROADCAST, F_CONFIRM, connect, frame,  # noqa: E402
                       read_frame, s16)


def put(sock, rid, queue, flags):
    sock.sendall(frame(16, rid, s16(queue), flags | F_CONFIRM,
                       [(b"data", b"ctl!")]))
    op, got, args = read_frame(sock)
    assert got == rid, "answer to request %d, expected %d" % (got, rid)
    code = struct.unpack(">i", args[:4])[0] if op == 5 else 0
    return op, code


def main():
    queue = sys.argv[3].encode()
    vmax = int(sys.argv[4])
    sock, args = connect(sys.argv[1], sys.argv[2], vmax, b"control-peer")
    out = {"version": args[0]}
    out["broadcast"] = list(put(sock, 2, queue, F_BROADCAST))
    out["plain"] = put(sock, 3, queue, 0)[0]
    sock.sendall(frame(8, 99, b""))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
