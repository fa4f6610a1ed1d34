"""How many bytes of request bodies the server holds at once, across all connections.

The per-request limit (``max_body_bytes``) bounds one body; without a budget for all of them,
a thousand slow uploads under the connection cap hold a thousand bodies (900 KiB each took the
server from 54 MB to about 970 MB). The gate takes a body's declared length from the budget
before reading it and gives it back when the request is answered; a request that does not fit
is answered 503 with ``Retry-After`` before any of its body is read.

After a burst, the freed bodies stay with the process: glibc's allocator keeps freed heap pages
(and raises its threshold for returning large blocks to the system each time one is freed), so
resident memory stays near the burst's peak. When the budget empties after holding more than
``TRIM_AFTER`` bytes, the allocator is asked to hand its free pages back (``malloc_trim``, off
the event loop); on other C libraries nothing is asked and the memory is reused by the next
burst instead.
"""

from __future__ import annotations

import asyncio
import ctypes
from collections.abc import Callable

__all__ = ["TRIM_AFTER", "InFlight"]

TRIM_AFTER = 32 * 1024 * 1024


def _malloc_trim() -> Callable[[], None] | None:
    """glibc's ``malloc_trim(0)``, or ``None`` where the C library has no such function. Looked
    up in the symbols the interpreter already has loaded (no search for a library file)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int

    def call() -> None:
        trim(0)

    return call


class InFlight:
    """A byte budget taken and given back on the event loop (not thread-safe: one loop)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._high = 0  # the most held since memory was last handed back
        self._trim: Callable[[], None] | None = None
        self._looked_up = False
        self._trimming: asyncio.Future[None] | None = None

    def take(self, size: int) -> bool:
        """Reserve ``size`` bytes; ``False`` (nothing reserved) when they do not fit."""
        if self.held + size > self.limit:
            return False
        self.held += size
        self._high = max(self._high, self.held)
        return True

    def give(self, size: int) -> None:
        """Give back what :meth:`take` reserved, once the body is no longer needed."""
        self.held -= size
        if self.held == 0 and self._high > TRIM_AFTER:
            self._high = 0
            self._hand_back()

    def _hand_back(self) -> None:
        if not self._looked_up:
            self._trim, self._looked_up = _malloc_trim(), True
        if self._trim is None or (self._trimming is not None and not self._trimming.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        # ctypes lets go of the interpreter lock for the call; in a thread the loop runs on.
        self._trimming = loop.run_in_executor(None, self._trim)
