# SPDX-License-Identifier: BSD-3-Clause
"""A received message: its blocks are views into the payload buffer the
library received it into, never copies."""

from ._scimq_ffi import ffi, lib
from .errors import check


def _free_message(ptr):
    # A message knows its client; it may outlive it (scimq_message_free).
    lib.scimq_message_free(ffi.NULL, ptr)


class Message:
    """One delivery from scimq.Client.get().

    blocks is a list of (name, memoryview) pairs in the order they were
    put; data is the block named "data", else the first (the rule of
    scimq-recv).  The views are writable and point into the received
    payload; each one keeps that payload alive, so they stay valid for as
    long as they (or the message) are referenced, after the message is
    acknowledged too.  The payload goes back to the library when the last
    of them is gone.  control is True for a control message (put with
    control=True), which every consumer of its queue gets.

    Used as a context manager, the message is acknowledged when the block
    ends normally and given back for redelivery (nack, requeue) when it
    ends with an exception, unless it was settled inside the block.
    """

    __slots__ = ("_client", "_ptr", "delivery_id", "msg_id", "attempt",
                 "queue", "blocks", "control", "_settled", "__weakref__")

    def __init__(self, client, raw):
        self._client = client
        self._ptr = ffi.gc(raw, _free_message)
        self.delivery_id = raw.delivery_id
        self.msg_id = raw.msg_id
        self.attempt = raw.attempt
        # A control message: every consumer of the queue gets one.
        self.control = bool(raw.flags & lib.SCIMQ_MESSAGE_CONTROL)
        self.queue = ffi.string(raw.queue).decode()
        self._settled = False
        blocks = []
        for i in range(raw.block_count):
            blk = raw.blocks[i]
            name = ffi.string(blk.name).decode() if blk.name else ""
            blocks.append((name, self._view(blk.data, blk.len)))
        self.blocks = blocks

    def _view(self, data, length):
        # The view's pointer owns a reference to the message pointer (the
        # closure of its no-op destructor), so the payload outlives it.
        owner = self._ptr
        base = ffi.gc(ffi.cast("char *", data), lambda _p, o=owner: None)
        return memoryview(ffi.buffer(base, length))

    @property
    def data(self):
        for name, view in self.blocks:
            if name == "data":
                return view
        return self.blocks[0][1] if self.blocks else memoryview(b"")

    def __getitem__(self, name):
        for bname, view in self.blocks:
            if bname == name:
                return view
        raise KeyError(name)

    def __len__(self):
        return sum(len(v) for _, v in self.blocks)

    def array(self, dtype="uint8", shape=None, block=None):
        """The block (data by default) as a numpy array over the payload,
        without a copy."""
        import numpy

        view = self.data if block is None else self[block]
        arr = numpy.frombuffer(view, dtype=dtype)
        return arr if shape is None else arr.reshape(shape)

    def ack(self):
        """Acknowledges the delivery: the gateway forgets the message."""
        check(lib.scimq_client_ack(self._client._handle(), self._ptr), "ack")
        self._settled = True

    def nack(self, requeue=True, delay=0.0):
        """Gives the delivery back: requeued (after delay seconds) or, with
        requeue=False, dead-lettered."""
        check(lib.scimq_client_nack(self._client._handle(), self._ptr,
                                    1 if requeue else 0, int(delay * 1000)),
              "nack")
        self._settled = True

    def extend(self, lease):
        """Extends the lease of the delivery by lease seconds."""
        check(lib.scimq_client_extend(self._client._handle(), self._ptr,
                                      int(lease * 1000)), "extend")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self._settled:
            if exc_type is None:
                self.ack()
            else:
                self.nack(requeue=True)
        return False

    def __repr__(self):
        return "<scimq.Message %s #%d attempt %d, %d blocks, %d bytes>" % (
            self.queue, self.msg_id, self.attempt, len(self.blocks),
            len(self))
