#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The Python producer of bench/python-producer.sh: scimq-send --synthetic
written with the scimq package, doing the same work per message so that
the two compare the binding and nothing else.  Like scimq-send it fills a
pool of `window` buffers (256 MiB / size, 2..64) with self-verifying
payloads (the same C code), puts each asynchronously, refills a buffer
once the gateway confirmed the message sent from it, and times from the
first put to the last confirmation.  Ends with scimq-send's JSON line.

    python-producer.py --queue Q --size BYTES --count N [--streams K]
                       [--window W] [--close]     ($SCIMQ_URL, $SCIMQ_TOKEN_FILE)
"""

import argparse
import json
import sys
import time

import numpy

import scimq


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url")
    ap.add_argument("--queue", required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--window", type=int, default=0)
    ap.add_argument("--close", action="store_true")
    a = ap.parse_args()
    window = a.window or max(2, min(64, (256 << 20) // a.size))
    sent = nbytes = 0
    with scimq.connect(a.url, streams=a.streams, confirm_window=window,
                       name="python-producer") as c:
        t0 = time.monotonic()
        free = [numpy.empty(a.size, dtype=numpy.uint8) for _ in range(window)]
        for seq in range(a.count):
            while not free:
                c.wait_released()
            buf = free.pop()
            scimq.synthetic.fill(buf, seq)
            c.put(a.queue, buf, on_release=lambda b=buf: free.append(b))
            sent += 1
            nbytes += a.size
        c.flush()
        dt = time.monotonic() - t0
        if a.close:
            c.close_queue(a.queue)
    print(json.dumps({"tool": "python-producer", "queue": a.queue,
                      "messages": sent, "bytes": nbytes,
                      "streams": a.streams, "seconds": dt,
                      "MiB_per_s": nbytes / dt / 1048576 if dt > 0 else 0.0,
                      "closed": a.close, "errors": 0}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
