"""After ``os.fork()`` the child's connections are the parent's sockets, its locks may be held by
threads it lacks, its pools have no threads: registered objects drop those in the child and
build fresh ones on next use. What is dropped stays referenced, never closed (an SQLite
connection closed there may act on the parent's files)."""

from __future__ import annotations

import logging
import os
import weakref
from typing import Any, Protocol

_log = logging.getLogger("composo")


class Forkable(Protocol):
    def _after_fork(self) -> None: ...


_registered: weakref.WeakSet[Any] = weakref.WeakSet()
_left_behind: list[Any] = []


def register(obj: Forkable) -> None:
    """Call ``obj._after_fork()`` in every child forked while ``obj`` is alive."""
    _registered.add(obj)


def leave_behind(*objects: Any) -> None:
    """Keep the parent's ``objects`` referenced in this (child) process, unused and unclosed."""
    _left_behind.extend(o for o in objects if o is not None)


def _in_child() -> None:
    for obj in list(_registered):
        try:
            obj._after_fork()
        except Exception:  # never break the child's start over one object
            _log.exception("composo: resetting %r after fork failed", type(obj).__name__)


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_in_child)
