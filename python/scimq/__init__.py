# SPDX-License-Identifier: BSD-3-Clause
"""SciMQ for Python: producers and consumers of a scimq-gateway over K
parallel TCP streams, on top of libscimq.

    import scimq

    with scimq.connect("scimq://login1:7470", streams=4) as c:
        c.declare("frames")
        c.put("frames", frame)              # bytes, memoryview, numpy array
        c.close_queue("frames")

    with scimq.connect(streams=4) as c:
        for msg in c.messages("frames"):    # until end of stream
            with msg:                       # ack on success, nack on error
                process(msg.array("uint16", (2048, 2048)))
"""

from . import synthetic
from .client import Client, connect
from .errors import EndOfStream, Error, Timeout
from .message import Message

__all__ = ["Client", "connect", "Message", "Error", "Timeout",
           "EndOfStream", "synthetic"]
