# SPDX-License-Identifier: BSD-3-Clause
"""The scimq package against a real gateway: put and get of every buffer
kind, zero-copy ownership, ack/nack/redelivery, context managers, end of
stream, queue management and errors with their SciMQ names."""

import gc
import os
import sys
import threading
import time
import weakref

import numpy
import pytest

import scimq
from conftest import queue_stat, wait_stat


def test_put_get_buffer_kinds(client):
    client.declare("kinds")
    frame = numpy.arange(64 * 32, dtype=numpy.uint16).reshape(64, 32)
    raw = bytes(range(256)) * 10
    client.put("kinds", raw)
    client.put("kinds", memoryview(bytearray(b"view" * 100))[4:])
    client.put("kinds", frame)
    client.put("kinds", [("meta", b'{"shot": 7}'), ("data", frame[::2])])
    client.flush(timeout=30)
    assert client.pending == 0
    client.subscribe("kinds", credit=4)
    # K streams deliver in any order: each message is told by its size.
    got = {}
    for _ in range(4):
        m = client.get(timeout=30)
        assert m.queue == "kinds" and m.attempt == 1
        got[len(m)] = m
    assert sorted(got) == [396, 2059, 2560, 4096]
    assert [n for n, _ in got[2560].blocks] == ["data"]
    assert bytes(got[2560].data) == raw
    assert bytes(got[396].data) == b"view" * 99
    assert numpy.array_equal(got[4096].array("uint16", (64, 32)), frame)
    # A strided view is copied into one contiguous block, rows in order.
    m = got[2059]
    assert [n for n, _ in m.blocks] == ["meta", "data"]
    assert bytes(m["meta"]) == b'{"shot": 7}'
    assert numpy.array_equal(m.array("uint16", (32, 32)), frame[::2])
    for m in got.values():
        m.ack()
    wait_stat(client, "kinds", "counters.acked", 4)
    assert queue_stat(client, "kinds", "ready") == 0
    assert queue_stat(client, "kinds", "in_flight") == 0


def test_async_put_borrows_until_confirmed(client):
    client.declare("borrow")
    arr = numpy.zeros(1 << 20, dtype=numpy.uint8)
    before = sys.getrefcount(arr)
    client.put("borrow", arr)
    # Held by the client (no copy was made) until the gateway confirms.
    assert sys.getrefcount(arr) == before + 1
    alive = weakref.ref(arr)
    del arr
    gc.collect()
    assert alive() is not None
    client.flush(timeout=30)
    assert client.pending == 0
    gc.collect()
    assert alive() is None
    # wait=True borrows only for the call.
    arr = numpy.ones(1000, dtype=numpy.uint8)
    before = sys.getrefcount(arr)
    client.put("borrow", arr, wait=True)
    assert sys.getrefcount(arr) == before
    assert queue_stat(client, "borrow", "ready") == 2


def test_nack_redelivers_and_context_manager(client):
    client.declare("redo", ack_timeout=60)
    client.put("redo", b"one", wait=True)
    client.subscribe("redo", credit=1)
    m = client.get(timeout=30)
    assert bytes(m.data) == b"one" and m.attempt == 1
    m.extend(30)
    m.nack(requeue=True)
    with pytest.raises(RuntimeError):
        with client.get(timeout=30) as m:
            assert m.attempt == 2
            raise RuntimeError("processing failed")
    with client.get(timeout=30) as m:  # given back by the failed block
        assert m.attempt == 3 and bytes(m.data) == b"one"
    with pytest.raises(scimq.Timeout) as e:
        client.get(timeout=0.5)
    assert isinstance(e.value, TimeoutError)
    wait_stat(client, "redo", "counters.acked", 1)
    wait_stat(client, "redo", "counters.nacked", 2)


def test_nack_dead_letters(client):
    client.declare("dl.dead")
    client.declare("dl", dead_letter="dl.dead")
    client.put("dl", b"poison", wait=True)
    client.subscribe("dl")
    client.get(timeout=30).nack(requeue=False)
    wait_stat(client, "dl.dead", "ready", 1)
    assert queue_stat(client, "dl", "ready") == 0
    assert queue_stat(client, "dl", "in_flight") == 0


def test_iterate_until_end_of_stream(gateway, client):
    client.declare("eos")
    for i in range(20):
        client.put("eos", i.to_bytes(4, "big"))
    client.close_queue("eos")  # after the PUTs above are confirmed
    with scimq.connect(gateway.url, streams=3,
                       token_file=gateway.token) as consumer:
        seen = []
        for msg in consumer.messages("eos", credit=4, timeout=60):
            with msg:
                seen.append(int.from_bytes(msg.data, "big"))
    assert sorted(seen) == list(range(20))
    with pytest.raises(scimq.EndOfStream):
        consumer_again = scimq.connect(gateway.url, token_file=gateway.token)
        with consumer_again:
            consumer_again.subscribe("eos")
            consumer_again.get(timeout=30)


def test_views_keep_the_payload_alive(client):
    client.declare("views")
    client.put("views", scimq.synthetic.payload(1 << 16, 42), wait=True)
    client.subscribe("views")
    m = client.get(timeout=30)
    m.ack()
    view = m.data
    gone = weakref.ref(m)
    del m
    gc.collect()
    assert gone() is None
    # The message object is gone; its payload is still there for the view.
    assert scimq.synthetic.verify(view) == 42


def test_queue_management(gateway, client):
    client.declare("mgmt.a", best_effort=True)
    client.declare("mgmt.b")
    client.declare("mgmt.c")
    # Administration is refused on the data port, token or not ...
    with pytest.raises(scimq.Error) as e:
        client.bind("mgmt.b", "mgmt.c")
    assert e.value.name == "SCIMQ_EPERM"
    # ... and done through the admin socket.
    with scimq.connect(gateway.admin_url) as admin:
        admin.bind("mgmt.b", "mgmt.c")
        for _ in range(3):
            client.put("mgmt.b", b"x" * 100)
        client.flush(timeout=30)
        assert queue_stat(client, "mgmt.c", "ready") == 3
        admin.unbind("mgmt.b", "mgmt.c")
        assert admin.move("mgmt.b", "mgmt.a", 2) == 2
        assert queue_stat(client, "mgmt.a", "ready") == 2
        names = sorted(q["name"] for q in client.queues("mgmt.")["queues"])
        assert names == ["mgmt.a", "mgmt.b", "mgmt.c"]
        assert admin.delete("mgmt.c") == 3
    assert client.ping() > 0
    # The gateway of this tree speaks the library's newest version (4: SciMP 1.2).
    assert client.session_version == 4


def test_control_messages_reach_every_consumer(gateway, client):
    client.declare("ctl")
    with scimq.connect(gateway.url, streams=1, token_file=gateway.token,
                       name="pytest-b") as other:
        consumers = {"a": client, "b": other}
        for c in consumers.values():
            c.subscribe("ctl", credit=8)
        wait_stat(client, "ctl", "consumers", 2)
        client.put("ctl", b"d0", wait=True)
        client.put("ctl", b"run header", control=True, wait=True)
        client.put("ctl", b"d1", wait=True)
        got = {k: [] for k in consumers}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and \
                sum(len(v) for v in got.values()) < 4:
            for k, c in consumers.items():
                try:
                    m = c.get(timeout=0.1)
                except scimq.Timeout:
                    continue
                got[k].append((m.control, bytes(m.data)))
                m.ack()
        for k in consumers:
            # Every consumer gets it, once.
            assert [d for ctl, d in got[k] if ctl] == [b"run header"], got
        data = sorted(d for v in got.values() for ctl, d in v if not ctl)
        assert data == [b"d0", b"d1"], got
    # Acknowledged once, when both copies were.
    wait_stat(client, "ctl", "counters.acked", 3)


def test_errors_carry_scimq_names(gateway, client):
    with pytest.raises(scimq.Error) as e:
        client.put("no.such.queue", b"x", wait=True)
    assert e.value.name == "SCIMQ_ENOENT" and e.value.code < 0
    client.declare("conflict")
    with pytest.raises(scimq.Error) as e:
        client.declare("conflict", best_effort=True)
    assert e.value.name == "SCIMQ_EEXIST"
    with pytest.raises(scimq.Error) as e:
        client.subscribe("conflict", credit=0)
    assert e.value.name == "SCIMQ_EINVAL"
    # This gateway has no journal: batch durability cannot be honoured.
    with pytest.raises(scimq.Error) as e:
        client.declare("durable", durability="batch")
    assert e.value.name == "SCIMQ_ENOTSUP"
    client.declare("durable", durability="memory")
    bad = os.path.join(gateway.dir, "bad-token")
    fd = os.open(bad, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"not the secret")
    os.close(fd)
    with pytest.raises(scimq.Error) as e:
        scimq.connect(gateway.url, token_file=bad, connect_timeout=10)
    assert e.value.name == "SCIMQ_EAUTH"
    closed = scimq.connect(gateway.url, token_file=gateway.token)
    closed.close()
    closed.close()
    with pytest.raises(scimq.Error):
        closed.ping()


def test_synthetic_format_detects_damage():
    buf = scimq.synthetic.payload(4096, 9)
    assert scimq.synthetic.verify(buf) == 9
    buf[1000] ^= 0x40
    with pytest.raises(scimq.Error) as e:
        scimq.synthetic.verify(buf)
    assert e.value.name == "SCIMQ_EPROTO_DATASUM"
    with pytest.raises(scimq.Error) as e:
        scimq.synthetic.verify(b"just some bytes, not a synthetic payload")
    assert e.value.name == "SCIMQ_EINVAL"
    arr = numpy.empty(100, dtype=numpy.uint64)
    scimq.synthetic.fill(arr, 5)
    assert scimq.synthetic.verify(arr) == 5


def test_ring_of_frames_reused_on_release(gateway, client):
    """The camera loop: a few frame buffers, each refilled once the
    gateway confirmed the message sent from it."""
    client.declare("ring")
    ring = [numpy.empty(1 << 18, dtype=numpy.uint8) for _ in range(3)]
    free = list(ring)
    count = 40
    for seq in range(count):
        while not free:
            assert client.wait_released(timeout=30) > 0
        frame = free.pop()
        scimq.synthetic.fill(frame, seq)
        client.put("ring", frame, on_release=lambda f=frame: free.append(f))
        # pending first: it runs the callbacks of what was released.
        held = client.pending
        assert len(free) + held == len(ring)
    client.flush(timeout=30)
    assert client.pending == 0 and len(free) == len(ring)
    assert client.wait_released(timeout=0) == 0
    assert client.wait_released() == 0  # nothing outstanding: no wait
    client.close_queue("ring")
    got = gateway.run("scimq-recv", "--queue", "ring", "--verify",
                      "--until-eos", "--expect", str(count))
    assert got["verified"] == count and got["lost"] == 0
    assert got["duplicates"] == 0 and got["corrupt"] == 0


def test_threads_share_one_client(client):
    """Producers in four threads and a consumer in a fifth, one client."""
    client.declare("threads")
    client.subscribe("threads", credit=16)
    seen, errors = [], []

    def produce(k):
        try:
            for i in range(25):
                client.put("threads", (k * 100 + i).to_bytes(4, "big"))
            client.flush(timeout=60)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    def consume():
        try:
            while len(seen) < 100:
                with client.get(timeout=60) as m:
                    seen.append(int.from_bytes(m.data, "big"))
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
    threads.append(threading.Thread(target=consume))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads)
    assert sorted(seen) == sorted(k * 100 + i for k in range(4)
                                  for i in range(25))
    assert client.pending == 0
