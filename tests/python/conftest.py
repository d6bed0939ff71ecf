# SPDX-License-Identifier: BSD-3-Clause
"""Fixtures: a real scimq-gateway on loopback with a token, started and
stopped (by PID) by the tests, and the build tree's command-line tools."""

import json
import os
import subprocess
import tempfile
import time

import pytest

BINDIR = os.environ.get("SCIMQ_TEST_BINDIR")
MULT = int(os.environ.get("SCIMQ_TEST_TIMEOUT_MULTIPLIER", "1") or "1")


def bounded(seconds):
    """A time limit scaled like the shell tests' (lib.sh bounded)."""
    return seconds * MULT


def tool(name):
    return os.path.join(BINDIR, "tools", name)


class Gateway:
    def __init__(self, workdir):
        self.dir = workdir
        self.token = os.path.join(workdir, "token")
        fd = os.open(self.token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, os.urandom(32).hex().encode())
        os.close(fd)
        port_file = os.path.join(workdir, "port")
        self.err = open(os.path.join(workdir, "gateway.err"), "w")
        self.proc = subprocess.Popen(
            [os.path.join(BINDIR, "gateway", "scimq-gateway"),
             "--listen", "127.0.0.1:0", "--port-file", port_file,
             "--token-file", self.token, "--memory-limit", "512MiB",
             "--admin-socket", os.path.join(workdir, "admin.sock"),
             "--workers", "1"],
            stdout=subprocess.DEVNULL, stderr=self.err)
        deadline = time.monotonic() + bounded(20)
        while not (os.path.exists(port_file) and os.path.getsize(port_file)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("gateway did not start: " + self.log())
            time.sleep(0.05)
        with open(port_file) as f:
            self.url = "scimq://" + f.read().strip()
        # Administration (delete, bind, unbind, move) goes there only.
        self.admin_url = "unix:" + os.path.join(workdir, "admin.sock")

    def env(self):
        """The environment of a tool talking to this gateway."""
        env = dict(os.environ)
        env["SCIMQ_URL"] = self.url
        env["SCIMQ_TOKEN_FILE"] = self.token
        return env

    def run(self, name, *args, timeout=60):
        """Runs a tool to completion; returns its last JSON line."""
        p = subprocess.run([tool(name)] + list(args), env=self.env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=bounded(timeout), check=False)
        lines = p.stdout.decode().strip().splitlines()
        assert p.returncode == 0, (name, p.returncode, p.stderr.decode())
        return json.loads(lines[-1])

    def log(self):
        with open(self.err.name) as f:
            return f.read()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=bounded(30))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.close()


@pytest.fixture(scope="module")
def gateway():
    base = os.environ.get("SCIMQ_TEST_WORKDIR") or tempfile.gettempdir()
    with tempfile.TemporaryDirectory(dir=base) as workdir:
        gw = Gateway(workdir)
        try:
            yield gw
        finally:
            gw.stop()


@pytest.fixture
def client(gateway):
    import scimq

    with scimq.connect(gateway.url, streams=2, token_file=gateway.token,
                       name="pytest") as c:
        yield c


def queue_stat(client, queue, field):
    """One field of a queue's statistics (ready, in_flight, counters...)."""
    for q in client.stats()["queues"]:
        if q["name"] == queue:
            return q[field]
    raise KeyError(queue)


def wait_stat(client, queue, field, expected, seconds=30):
    """Waits until queue_stat(...) (or a key of its counters, field
    "counters.NAME") is expected: an ACK or NACK goes out on the stream
    its delivery came on, STATS on stream 0, so a reply may precede it."""
    deadline = time.monotonic() + bounded(seconds)
    while True:
        if field.startswith("counters."):
            value = queue_stat(client, queue, "counters")[field[9:]]
        else:
            value = queue_stat(client, queue, field)
        if value == expected:
            return
        assert time.monotonic() < deadline, (queue, field, value, expected)
        time.sleep(0.05)
