# SPDX-License-Identifier: BSD-3-Clause
"""Exceptions carrying SciMQ error codes and names."""

from ._scimq_ffi import ffi, lib


class Error(Exception):
    """A libscimq call failed.

    code is the negative SCIMQ_E* number, name its symbolic name
    ("SCIMQ_ENOENT"), message libscimq's description of it.
    """

    def __init__(self, code, what=None):
        self.code = code
        self.name = ffi.string(lib.scimq_err_name(code)).decode()
        self.message = ffi.string(lib.scimq_strerror(code)).decode()
        text = "%s (%s)" % (self.message, self.name)
        super().__init__("%s: %s" % (what, text) if what else text)


class Timeout(Error, TimeoutError):
    """Nothing came within the time asked (SCIMQ_ETIMEDOUT, SCIMQ_EAGAIN)."""


class EndOfStream(Error):
    """Every subscribed queue is closed and drained (SCIMQ_EOS)."""


def error(code, what=None):
    """The exception for a negative libscimq return code."""
    if code in (lib.SCIMQ_ETIMEDOUT, lib.SCIMQ_EAGAIN):
        return Timeout(code, what)
    if code == lib.SCIMQ_EOS:
        return EndOfStream(code, what)
    return Error(code, what)


def check(code, what=None):
    """Raises the exception for code unless it is 0."""
    if code != 0:
        raise error(code, what)
