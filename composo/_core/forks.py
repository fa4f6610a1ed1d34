"""What a process made by ``os.fork()`` must not share with its parent.

A forked child starts with copies of the parent's objects but only the thread that forked: its
copies of open connections are the very sockets the parent is using (a request sent on one by
each process gets the other's answer), its locks may be held by threads that do not exist there,
and its thread pools have no threads. Every object that holds such things registers here; in the
child, right after the fork, each one drops them and builds fresh ones on next use.

The parent's sockets and files are left as they are: the child never closes, shuts or reuses
them. What it drops is kept referenced in :data:`_left_behind` so that collecting it in the child
cannot close anything either (closing a descriptor in the child would be harmless to the parent,
but an SQLite connection closed there may act on the parent's files, and the warnings would be
noise). Nothing here runs in a process that never forks.
"""

from __future__ import annotations

import logging
import os
import weakref
from typing import Any, Protocol

__all__ = ["Forkable", "leave_behind", "register"]

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
