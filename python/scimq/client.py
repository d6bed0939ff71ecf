# SPDX-License-Identifier: BSD-3-Clause
"""A SciMQ session of K parallel TCP streams: producing, consuming and
managing queues."""

import itertools
import json
import os
import threading

from ._scimq_ffi import ffi, lib
from .errors import Error, check, error
from .message import Message

_DURABILITY = {"memory": lib.SCIMQ_DURABILITY_MEMORY,
               "batch": lib.SCIMQ_DURABILITY_BATCH,
               "sync": lib.SCIMQ_DURABILITY_SYNC}

# get() without a time limit waits in slices this long (ms), so that
# Ctrl-C (KeyboardInterrupt) is seen between them.
_WAIT_SLICE_MS = 200


def _ms(seconds, default):
    return default if seconds is None else max(0, int(seconds * 1000))


def _block_buffer(data):
    """A cdata over data's memory (zero copy), or over a contiguous copy
    for a buffer that is not contiguous (a strided numpy view): the C API
    takes contiguous blocks."""
    try:
        return ffi.from_buffer(data)
    except (TypeError, ValueError, BufferError):
        return ffi.from_buffer(memoryview(data).tobytes())


class Client:
    """One session with a gateway; see scimq.connect().

    Thread-safe, like the library underneath: threads may put, get and
    manage queues through one client.  Calls into the library release the
    GIL while they wait.
    """

    def __init__(self, url=None, *, streams=1, token_file=None,
                 name="python", confirm_window=64, connect_timeout=10.0,
                 request_timeout=30.0, reconnect=30.0, auto_extend=False,
                 max_hold=None):
        url = url or os.environ.get("SCIMQ_URL")
        if not url:
            raise ValueError("no gateway URL (argument or $SCIMQ_URL)")
        opts = ffi.new("scimq_client_options_t *")
        lib.scimq_client_options_default(opts)
        opts.streams = streams
        keep = []  # option strings must live until scimq_client_open returns
        if token_file is not None:
            keep.append(ffi.new("char[]", os.fsencode(token_file)))
            opts.token_file = keep[-1]
        keep.append(ffi.new("char[]", name.encode()))
        opts.client_name = keep[-1]
        opts.confirm_window = confirm_window
        opts.connect_timeout_ms = _ms(connect_timeout, 10000)
        opts.request_timeout_ms = _ms(request_timeout, 30000)
        opts.reconnect_ms = _ms(reconnect, 30000)
        opts.auto_extend = 1 if auto_extend else 0
        if max_hold is not None:
            opts.max_hold_ms = _ms(max_hold, 0)
        self.url = url
        self.streams = streams
        self._tracker = lib.pyscimq_tracker_new()
        if self._tracker == ffi.NULL:
            raise MemoryError()
        c_p = ffi.new("scimq_client_t **")
        rc = lib.scimq_client_open(url.encode(), opts, c_p)
        if rc != 0:
            lib.pyscimq_tracker_free(self._tracker)
            self._tracker = None
            raise error(rc, "connect %s" % url)
        self._c = c_p[0]
        # token -> what an asynchronous PUT borrowed (buffers, block
        # descriptors, names), dropped once the gateway confirmed it.
        self._borrowed = {}
        self._tokens = itertools.count(1)
        self._lock = threading.Lock()
        self._collect_buf = ffi.new("uint64_t[]", max(64, confirm_window))

    # -- lifecycle ---------------------------------------------------------

    def _handle(self):
        if self._c is None:
            raise Error(lib.SCIMQ_EINVAL, "client is closed")
        return self._c

    def close(self):
        """Waits for outstanding confirmations, returns unsettled
        deliveries, says BYE.  Raises scimq.Error for a PUT that was never
        confirmed.  Closing twice is harmless."""
        if self._c is None:
            return
        c, self._c = self._c, None
        rc = lib.scimq_client_close(c)
        # Every PUT is released by now: run what is left of the callbacks.
        self._collect()
        with self._lock:
            self._borrowed.clear()
            tracker, self._tracker = self._tracker, None
        lib.pyscimq_tracker_free(tracker)
        check(rc, "close")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    def __del__(self):
        if getattr(self, "_c", None) is not None:
            try:
                self.close()
            except Error:
                pass

    @property
    def session_version(self):
        """The SciMP session version the gateway chose (1 or 2)."""
        return lib.scimq_client_session_version(self._handle())

    # -- producing ---------------------------------------------------------

    def _collect(self):
        """Drops what released PUTs borrowed and runs their on_release
        callbacks (after the lock, so that they may put again); returns
        how many were released."""
        buf = self._collect_buf
        released = []
        with self._lock:
            if self._tracker is None:
                return 0
            while True:
                n = lib.pyscimq_collect(self._tracker, buf, len(buf))
                for i in range(n):
                    released.append(self._borrowed.pop(buf[i])[1])
                if n < len(buf):
                    break
        for fn in released:
            if fn is not None:
                fn()
        return len(released)

    def put(self, queue, data, *, name="data", wait=False, on_release=None,
            control=False):
        """Publishes one message to queue (and the queues bound to it).

        data is one buffer (bytes, bytearray, memoryview, numpy array, any
        object with the buffer protocol) sent as a block named name, or a
        sequence of (name, buffer) pairs, one block each.  The buffers are
        sent from where they are, without a copy (a non-contiguous array is
        copied once, since a block is contiguous).

        By default the call returns as soon as the message is handed to a
        stream (it blocks only while confirm_window messages are
        unconfirmed) and the client keeps a reference to the buffers until
        the gateway confirms the message: do not modify them before that
        (flush() waits for every confirmation).  on_release, if given, is
        called without arguments once the library is done with the
        buffers (the message confirmed, or failed), from the thread that
        next calls put(), flush(), wait_released() or pending: a ring of
        frame buffers can be refilled from there (see wait_released()).
        With wait=True it returns once the gateway confirmed the message.
        A confirmed failure of an asynchronous PUT is raised by the next
        flush() or close().

        control=True sends a control message (SciMP session version 4):
        every consumer of the queue gets it, in order with the data, as a
        Message whose control is True; SCIMQ_ENOTSUP on an older session.
        """
        if isinstance(data, (list, tuple)):
            pairs = data
        else:
            pairs = ((name, data),)
        c = self._handle()
        n = len(pairs)
        blocks = ffi.new("scimq_block_t[]", n)
        keep = [blocks]
        for i, (bname, buf) in enumerate(pairs):
            cname = ffi.new("char[]", bname.encode()) if bname else ffi.NULL
            cbuf = _block_buffer(buf)
            keep.append(cname)
            keep.append(cbuf)
            blocks[i].name = cname
            blocks[i].data = cbuf
            blocks[i].len = len(cbuf)
        qname = queue.encode()
        flags = lib.SCIMQ_PUT_CONTROL if control else 0
        if wait:
            check(lib.scimq_client_put_flags(c, qname, blocks, n, flags,
                                             ffi.NULL, ffi.NULL),
                  "put %s" % queue)
            return
        self._collect()
        token = next(self._tokens)
        with self._lock:
            self._borrowed[token] = (keep, on_release)
        rc = lib.pyscimq_put_async(c, self._tracker, qname, blocks, n, flags,
                                   token)
        if rc != 0:
            with self._lock:
                self._borrowed.pop(token, None)
            raise error(rc, "put %s" % queue)

    @property
    def pending(self):
        """Asynchronous PUTs not released yet (their buffers are held)."""
        self._collect()
        with self._lock:
            return len(self._borrowed)

    def wait_released(self, timeout=None):
        """Waits until at least one asynchronous PUT is released (or
        timeout seconds; None: for ever, interruptible), runs the
        on_release callbacks of all that were, and returns how many; 0 at
        once when none is outstanding."""
        self._handle()
        left = None if timeout is None else _ms(timeout, 0)
        while True:
            n = self._collect()
            if n > 0 or left == 0:
                return n
            with self._lock:
                if not self._borrowed:
                    return 0
            step = _WAIT_SLICE_MS if left is None else min(left,
                                                           _WAIT_SLICE_MS)
            if left is not None:
                left -= step
            lib.pyscimq_wait(self._tracker, step)

    def flush(self, timeout=None):
        """Waits until every PUT is confirmed; raises scimq.Timeout, or the
        first error the gateway reported for an asynchronous PUT."""
        rc = lib.scimq_client_flush(self._handle(), _ms(timeout, -1))
        self._collect()
        check(rc, "flush")

    # -- consuming ---------------------------------------------------------

    def subscribe(self, queue, credit=8, credit_bytes=256 << 20):
        """Starts consuming queue with at most credit unsettled messages and
        about credit_bytes of payload outstanding."""
        check(lib.scimq_client_subscribe(self._handle(), queue.encode(),
                                         credit, credit_bytes),
              "subscribe %s" % queue)

    def limit(self, queue, max_message):
        """The largest message (bytes) this consumer takes from queue; 0
        lifts the limit.  Before subscribe()."""
        check(lib.scimq_client_limit(self._handle(), queue.encode(),
                                     max_message), "limit %s" % queue)

    def get(self, timeout=None):
        """The next message from any subscribed queue.  timeout in seconds;
        None waits for ever (interruptible), 0 does not wait.  Raises
        scimq.Timeout when nothing came, scimq.EndOfStream once every
        subscribed queue is closed and drained."""
        c = self._handle()
        msg_p = ffi.new("scimq_message_t **")
        if timeout is not None:
            rc = lib.scimq_client_get(c, msg_p, _ms(timeout, 0))
        else:
            while True:
                rc = lib.scimq_client_get(c, msg_p, _WAIT_SLICE_MS)
                if rc != lib.SCIMQ_ETIMEDOUT:
                    break
        check(rc, "get")
        return Message(self, msg_p[0])

    def messages(self, *queues, credit=8, credit_bytes=256 << 20,
                 timeout=None):
        """Iterates over messages until end of stream, subscribing to queues
        first (none: those already subscribed).  timeout bounds the wait for
        each message (scimq.Timeout).  Settle each one (ack, nack, or use it
        as a context manager)."""
        for q in queues:
            self.subscribe(q, credit, credit_bytes)
        while True:
            try:
                msg = self.get(timeout)
            except Error as e:
                if e.code == lib.SCIMQ_EOS:
                    return
                raise
            yield msg

    # -- queue management --------------------------------------------------
    # delete, bind, unbind and move are administration: the gateway takes
    # them only through its admin socket, connect("unix:PATH") as the
    # gateway's user; on the data port they fail with SCIMQ_EPERM.

    def declare(self, queue, *, best_effort=False, ack_timeout=None,
                max_attempts=0, max_bytes=0, dead_letter=None,
                durability=None):
        """Creates queue (nothing if it exists with the same settings;
        SCIMQ_EEXIST if with other ones).  ack_timeout in seconds; None or
        0 for the gateway's defaults.  durability, for a guaranteed queue:
        when its PUT_OK is sent, "memory", "batch" or "sync" (the latter
        two need a gateway journal); None: the gateway's --durability."""
        opts = ffi.new("scimq_queue_options_t *")
        if durability is not None:
            try:
                opts.durability = _DURABILITY[durability]
            except KeyError:
                raise ValueError("durability: memory, batch or sync, not %r"
                                 % (durability,)) from None
        opts.kind = (lib.SCIMQ_QUEUE_BEST_EFFORT if best_effort
                     else lib.SCIMQ_QUEUE_GUARANTEED)
        opts.ack_timeout_ms = _ms(ack_timeout, 0)
        opts.max_attempts = max_attempts
        opts.max_bytes = max_bytes
        dl = ffi.new("char[]", dead_letter.encode()) if dead_letter else None
        opts.dead_letter = dl if dl is not None else ffi.NULL
        check(lib.scimq_client_queue_declare(self._handle(), queue.encode(),
                                             opts), "declare %s" % queue)

    def delete(self, queue):
        """Deletes queue; returns how many messages it discarded."""
        n = ffi.new("uint64_t *")
        check(lib.scimq_client_queue_delete(self._handle(), queue.encode(),
                                            n), "delete %s" % queue)
        return n[0]

    def bind(self, queue, target):
        """PUTs to queue also land in target (fan-out, payload shared)."""
        check(lib.scimq_client_queue_bind(self._handle(), queue.encode(),
                                          target.encode()), "bind")

    def unbind(self, queue, target):
        check(lib.scimq_client_queue_unbind(self._handle(), queue.encode(),
                                            target.encode()), "unbind")

    def close_queue(self, queue):
        """End of stream: no more PUTs; consumers end once it is drained.
        Waits for this client's asynchronous PUTs to be confirmed first
        (flush()), so that none of them meets the closed queue."""
        self.flush()
        check(lib.scimq_client_queue_close(self._handle(), queue.encode()),
              "close %s" % queue)

    def move(self, queue, target, max_msgs=0):
        """Moves up to max_msgs (0: all) ready messages; returns how many."""
        n = ffi.new("uint64_t *")
        check(lib.scimq_client_queue_move(self._handle(), queue.encode(),
                                          target.encode(), max_msgs, n),
              "move")
        return n[0]

    def _json(self, fn, arg, what):
        out = ffi.new("char **")
        check(fn(self._handle(), arg, out), what)
        try:
            return json.loads(ffi.string(out[0]).decode())
        finally:
            lib.free(out[0])

    def queues(self, prefix=""):
        """The gateway's queues whose name starts with prefix (its JSON)."""
        return self._json(lib.scimq_client_queue_list, prefix.encode(),
                          "queue list")

    def stats(self, queue=None):
        """Gateway statistics (of one queue, or all) as a dict."""
        return self._json(lib.scimq_client_stats,
                          queue.encode() if queue else ffi.NULL, "stats")

    def ping(self):
        """Round trip time of a PING on stream 0, in seconds."""
        rtt = ffi.new("uint64_t *")
        check(lib.scimq_client_ping(self._handle(), rtt), "ping")
        return rtt[0] / 1e9


def connect(url=None, **options):
    """Opens a session with the gateway at url (None: $SCIMQ_URL), as
    libscimq takes it: "scimq://HOST:PORT", "scimqs://HOST:PORT" (TLS,
    with libscimq's tls_ca, tls_cert and tls_key settings, e.g.
    $SCIMQ_TLS_CA) or "unix:PATH" (the gateway's admin socket).  Options: streams (K parallel TCP streams, 1), token_file
    (None: $SCIMQ_TOKEN_FILE), name (shown in gateway stats),
    confirm_window (unconfirmed PUTs in flight, 64), connect_timeout,
    request_timeout, reconnect (seconds), auto_extend, max_hold.  Use the
    client as a context manager, or close() it."""
    return Client(url, **options)
