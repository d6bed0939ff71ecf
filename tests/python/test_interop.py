# SPDX-License-Identifier: BSD-3-Clause
"""The binding and the C tools interoperate both ways on one gateway:
a Python producer verified by scimq-recv --verify, and scimq-send
--synthetic verified by a Python consumer."""

import subprocess
import json

import scimq
from conftest import bounded, tool

COUNT = 120
SIZES = "1KiB:2MiB"


def test_python_producer_to_scimq_recv_verify(gateway):
    recv = None
    with scimq.connect(gateway.url, streams=4, token_file=gateway.token,
                       confirm_window=16) as c:
        c.declare("py2c")
        recv = subprocess.Popen(
            [tool("scimq-recv"), "--queue", "py2c", "--streams", "4",
             "--verify", "--until-eos", "--expect", str(COUNT)],
            env=gateway.env(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        try:
            sizes = [1024 + (i * 7919 * 131) % (2 << 20)
                     for i in range(COUNT)]
            for seq, size in enumerate(sizes):
                c.put("py2c", scimq.synthetic.payload(size, seq))
            c.flush(timeout=bounded(60))
            c.close_queue("py2c")
            out, err = recv.communicate(timeout=bounded(120))
        finally:
            if recv.poll() is None:
                recv.kill()
                recv.wait()
    assert recv.returncode == 0, err.decode()
    r = json.loads(out.decode().strip().splitlines()[-1])
    assert r["verified"] == COUNT and r["messages"] == COUNT
    assert r["corrupt"] == 0 and r["lost"] == 0 and r["duplicates"] == 0
    assert r["eos"] is True and r["bytes"] == sum(sizes)


def test_scimq_send_synthetic_to_python_consumer(gateway):
    sent = gateway.run("scimq-send", "--queue", "c2py", "--streams", "4",
                       "--declare", "guaranteed", "--synthetic", "--size",
                       SIZES, "--count", str(COUNT), "--close", timeout=120)
    assert sent["messages"] == COUNT and sent["errors"] == 0
    seqs, total = [], 0
    with scimq.connect(gateway.url, streams=4,
                       token_file=gateway.token) as c:
        for msg in c.messages("c2py", credit=8, timeout=bounded(60)):
            with msg:
                seqs.append(scimq.synthetic.verify(msg.data))
                total += len(msg.data)
    assert sorted(seqs) == list(range(COUNT))
    assert total == sent["bytes"]
