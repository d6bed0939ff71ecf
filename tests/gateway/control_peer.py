#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""control_peer.py HOST PORT QUEUE MAX_VERSION: a raw SciMP peer (no
libscimq) that offers session versions 1..MAX_VERSION and sends a PUT with
BROADCAST | CONFIRM (a control message), then a plain PUT with CONFIRM, to
QUEUE.  Prints one JSON line: {"version": chosen, "broadcast": [opcode,
code], "plain": opcode}: opcode 17 is PUT_OK, 5 ERROR (code its SCIMQ_E*
value, else 0).  Every read is bounded (socket timeout)."""
import json
import socket
import struct
import sys

POLY = 0x82F63B78  # CRC32C (Castagnoli), reflected
TABLE = []
for n in range(256):
    c = n
    for _ in range(8):
        c = (c >> 1) ^ POLY if c & 1 else c >> 1
    TABLE.append(c)

F_CONFIRM, F_BROADCAST = 0x0002, 0x0004


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def frame(opcode, rid, args, flags=0, blocks=()):
    table = b"".join(struct.pack(">IQ", len(n), len(d)) for n, d in blocks)
    names = b"".join(n for n, _ in blocks)
    data = b"".join(d for _, d in blocks)
    hlen = 40 + len(args) + len(table) + len(names)
    hdr = struct.pack(">IBBHQIHHIIQ", 0x53434D50, 1, opcode, flags, rid, hlen,
                      len(args), 0, len(blocks), 0, len(data))
    hdr += args + table + names
    s = crc32c(hdr)
    return hdr[:28] + struct.pack(">I", s) + hdr[32:] + data


def s16(b):
    return struct.pack(">H", len(b)) + b


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("the gateway closed the connection")
        buf += chunk
    return buf


def read_frame(sock):
    fixed = recv_exact(sock, 40)
    (magic, _v, opcode, _f, rid, hlen, alen, _r, _b, _s,
     plen) = struct.unpack(">IBBHQIHHIIQ", fixed)
    assert magic == 0x53434D50
    rest = recv_exact(sock, hlen - 40)
    if plen:
        recv_exact(sock, plen)
    return opcode, rid, rest[:alen]


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
    sock = socket.create_connection((sys.argv[1], int(sys.argv[2])), 10)
    sock.settimeout(10)
    hello = struct.pack(">BBHHQ", 1, vmax, 0, 1, 0) + bytes(16) + \
        s16(b"control-peer")
    sock.sendall(frame(1, 1, hello))
    op, _, args = read_frame(sock)
    assert op == 2, "WELCOME expected, got opcode %d" % op
    assert args[1] == 0, "this peer cannot authenticate"
    out = {"version": args[0]}
    out["broadcast"] = list(put(sock, 2, queue, F_BROADCAST))
    out["plain"] = put(sock, 3, queue, 0)[0]
    sock.sendall(frame(8, 99, b""))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
