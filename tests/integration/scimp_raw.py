# SPDX-License-Identifier: BSD-3-Clause
"""SciMP frames by hand, for the tests' raw peers (no libscimq): the
CRC32C, the 40-byte fixed header with its checksum, blocks, and bounded
reads of the gateway's answers.  The layout is doc/scimp.md's; written
from the spec, apart from the library, so that a peer checks the gateway
against the document rather than against the library's own encoder."""
import socket
import struct

POLY = 0x82F63B78  # CRC32C (Castagnoli), reflected
TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ POLY if _c & 1 else _c >> 1
    TABLE.append(_c)

F_DATASUM, F_CONFIRM, F_BROADCAST = 0x0001, 0x0002, 0x0004


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def frame(opcode, rid, args, flags=0, blocks=()):
    """One frame: blocks are (name, data) pairs of bytes."""
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
    """A string argument: u16 length, bytes."""
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
    """The next frame: (opcode, request id, args); the payload is read and
    dropped."""
    fixed = recv_exact(sock, 40)
    (magic, _v, opcode, _f, rid, hlen, alen, _r, _b, _s,
     plen) = struct.unpack(">IBBHQIHHIIQ", fixed)
    assert magic == 0x53434D50
    rest = recv_exact(sock, hlen - 40)
    if plen:
        recv_exact(sock, plen)
    return opcode, rid, rest[:alen]


def connect(host, port, vmax, name, timeout=10):
    """A session offering versions 1..vmax, without a token: (socket, the
    WELCOME's args).  Every read on the socket is bounded by timeout."""
    sock = socket.create_connection((host, int(port)), timeout)
    sock.settimeout(timeout)
    hello = struct.pack(">BBHHQ", 1, vmax, 0, 1, 0) + bytes(16) + s16(name)
    sock.sendall(frame(1, 1, hello))
    op, _, args = read_frame(sock)
    assert op == 2, "WELCOME expected, got opcode %d" % op
    assert args[1] == 0, "this peer cannot authenticate"
    return sock, args
