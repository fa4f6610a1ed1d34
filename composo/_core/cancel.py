"""Stopping the sync client's threads when their caller stops waiting (Ctrl-C, an exception, an
iterator closed early). A thread cannot be interrupted; what it waits on can: cancelling a
:class:`Scope` wakes its sleeps and shuts the sockets its calls block on, even against a server
that never answers."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Protocol


class Cancelled(Exception):
    """The caller stopped waiting for this work; nothing of it is reported."""


class Abortable(Protocol):
    def abort(self) -> None: ...


_local = threading.local()


class Scope:
    """One run's work: cancelled once, it stays cancelled."""

    __slots__ = ("_event", "_lock", "_waiting", "cancelled")

    def __init__(self) -> None:
        self.cancelled = False
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._waiting: set[Abortable] = set()

    def cancel(self) -> None:
        """Stop the work: sleeps end, and every stream blocked in a read or write is shut."""
        with self._lock:
            self.cancelled = True
            waiting, self._waiting = list(self._waiting), set()
        self._event.set()
        for stream in waiting:
            stream.abort()

    def enter(self, stream: Abortable) -> None:
        """``stream`` is about to block; raises :class:`Cancelled` if the scope is cancelled."""
        with self._lock:
            if self.cancelled:
                raise Cancelled("the call was cancelled")
            self._waiting.add(stream)

    def leave(self, stream: Abortable) -> None:
        with self._lock:
            self._waiting.discard(stream)

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or raise :class:`Cancelled` as soon as the scope is cancelled."""
        if self._event.wait(seconds) or self.cancelled:
            raise Cancelled("the call was cancelled")


def current() -> Scope | None:
    scope: Scope | None = getattr(_local, "scope", None)
    return scope


@contextlib.contextmanager
def within(scope: Scope) -> Iterator[Scope]:
    outer = current()
    _local.scope = scope
    try:
        yield scope
    finally:
        _local.scope = outer


def check(kind: type[Exception] = Cancelled) -> None:
    """Raise ``kind`` (a transport's own error, so its clean-up runs) if this thread's work was
    cancelled."""
    scope = current()
    if scope is not None and scope.cancelled:
        raise kind("the call was cancelled")


def sleep(seconds: float) -> None:
    """``time.sleep`` that a cancelled scope cuts short (with :class:`Cancelled`)."""
    scope = current()
    if scope is None:
        time.sleep(seconds)
    else:
        scope.wait(seconds)
