"""Writes held back until the answer is awaited, so a request's head and a small body leave in
one ``send`` (one packet, half the system calls) instead of two. Used by both clients' own
connections (the sync deadline streams and the async transport)."""

from __future__ import annotations

__all__ = ["COALESCE_BYTES", "HeldWrites"]

COALESCE_BYTES = 64 * 1024
"""Bytes held back at most; a larger write goes out at once, with what was held."""


class HeldWrites:
    """The bytes written to a connection and not sent yet."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending = b""

    def add(self, data: bytes) -> bytes:
        """Hold ``data``; returns what must be sent now (``b""`` while under the limit)."""
        pending = self.pending + data
        if len(pending) < COALESCE_BYTES:
            self.pending = pending  # sent by the read that waits for the answer
            return b""
        self.pending = b""
        return pending

    def take(self) -> bytes:
        """Everything held, to send before reading."""
        pending, self.pending = self.pending, b""
        return pending
