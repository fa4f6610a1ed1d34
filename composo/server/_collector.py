"""Python's cyclic garbage collector held off while a large body is being handled.

Parsing, validating and judging a body of megabytes creates millions of objects that live until
the answer is sent. Each full collection walks all of them while holding the interpreter lock
(about 0.1 s for a 9 MiB trace), and a full collection is due every time the live objects grow by
a quarter, so every other request on the event loop waits that long, several times per trace.
Those objects are freed by reference counting when the request ends, so nothing is lost by
waiting: the collector runs again once no large body is in hand. Large bodies that keep
overlapping would keep it off for good, so it still makes one full pass every ``MAX_PAUSE``
seconds (cycles other requests leave behind are collected, at most that late).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["MAX_PAUSE", "collector_paused"]

MAX_PAUSE = 10.0

_lock = threading.Lock()
_holders = 0
_resume = False  # whether the collector was on when the first holder paused it
_since = 0.0  # when it was paused, or last ran while paused


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic collection while any holder is inside (across threads and tasks)."""
    global _holders, _resume, _since
    with _lock:
        if _holders == 0:
            _resume = gc.isenabled()
            gc.disable()
            _since = time.monotonic()
        elif _resume and time.monotonic() - _since > MAX_PAUSE:
            gc.collect()
            _since = time.monotonic()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _resume:
                gc.enable()
