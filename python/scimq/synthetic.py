# SPDX-License-Identifier: BSD-3-Clause
"""Self-verifying synthetic payloads, the format of scimq-send --synthetic
and scimq-recv --verify (doc/scimp.md, "Synthetic payloads"): a 32-byte
header (magic, sequence number, length, two CRC32C) and pseudo-random bytes
seeded by the sequence number.  The same C code as the tools fills and
checks them, so a Python producer and consumer interoperate with both."""

from ._scimq_ffi import ffi, lib
from .errors import check

HEADER_LEN = lib.SCIMQ_SYNTH_HEADER_LEN


def fill(buf, seq):
    """Writes message number seq into the writable buffer buf (any object
    with the buffer protocol: bytearray, numpy array, mmap, ...), in place;
    the payload is all of buf, at least HEADER_LEN bytes."""
    view = ffi.from_buffer(buf, require_writable=True)
    check(lib.scimq__synth_fill(view, len(view), seq), "synthetic fill")


def payload(size, seq):
    """A new bytearray of size bytes holding message number seq."""
    buf = bytearray(size)
    fill(buf, seq)
    return buf


def verify(buf):
    """Checks a synthetic payload; returns its sequence number.  Raises
    scimq.Error SCIMQ_EINVAL (not a synthetic payload) or
    SCIMQ_EPROTO_DATASUM (corrupted)."""
    view = ffi.from_buffer(buf)
    seq = ffi.new("uint64_t *")
    check(lib.scimq__synth_verify(view, len(view), seq), "synthetic verify")
    return seq[0]
