#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""screenshot.py URL SECONDS OUT.png [PROFILE_DIR]

Opens URL in headless Chromium and takes a screenshot after SECONDS of
real time, so a page that polls (the gateway's live page) has drawn that
much history; chromium --screenshot takes it at load, or after a virtual
time budget in which a poll's fetches race ahead of the data.  Chromium
is driven over its DevTools pipe (--remote-debugging-pipe: fd 3 in, fd 4
out, messages ended by NUL), with the standard library only.  It is
stopped by its PID whatever happens.
"""
import base64
import json
import os
import subprocess
import sys
import time


def main():
    url, seconds, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    profile = sys.argv[4] if len(sys.argv) > 4 else out + ".profile"
    to_child, from_parent = os.pipe()
    to_parent, from_child = os.pipe()

    def fds():
        # Copies first: a pipe may already be fd 3 or 4, and dup2 onto
        # itself would leave it close-on-exec.
        a, b = os.dup(to_child), os.dup(from_child)
        os.dup2(a, 3)
        os.dup2(b, 4)

    proc = subprocess.Popen(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
         "--no-first-run", "--disable-extensions", "--hide-scrollbars",
         "--window-size=1400,1100", "--remote-debugging-pipe",
         "--user-data-dir=" + profile, url],
        preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    os.close(to_child)
    os.close(from_child)
    pending = b""
    next_id = [0]

    def call(method, params=None, session=None):
        nonlocal pending
        next_id[0] += 1
        msg = {"id": next_id[0], "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(from_parent, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            while b"\0" in pending:
                raw, pending = pending.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == next_id[0]:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply["result"]
            chunk = os.read(to_parent, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            pending += chunk
        raise RuntimeError(f"{method}: no answer in 30 s")

    try:
        page = None
        for _ in range(100):
            pages = [t for t in call("Target.getTargets")["targetInfos"]
                     if t["type"] == "page"]
            if pages:
                page = pages[0]["targetId"]
                break
            time.sleep(0.1)
        if page is None:
            raise RuntimeError("chromium opened no page")
        session = call("Target.attachToTarget",
                       {"targetId": page, "flatten": True})["sessionId"]
        time.sleep(seconds)
        size = call("Page.getLayoutMetrics", None, session)["cssContentSize"]
        shot = call("Page.captureScreenshot",
                    {"format": "png", "captureBeyondViewport": True,
                     "clip": {"x": 0, "y": 0, "width": size["width"],
                              "height": size["height"], "scale": 1}},
                    session)
        with open(out, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        call("Browser.close")
    finally:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
