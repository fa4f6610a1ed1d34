"""``--dev-faults``: queued failures and a record of what arrived, for client retry tests."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from composo.server._received import SECRET_HEADERS

MAX_RECORDED_REQUESTS = 1000
MAX_RECORDED_BYTES = 32 * 1024 * 1024
MAX_QUEUED_FAULTS = 1000


class Fault(BaseModel):
    """One failure for one upcoming evaluation request: ``delay`` first, then ``drop`` (close
    without an answer) or ``status`` with ``detail`` and ``Retry-After``; else a normal answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: int | None = Field(default=None, ge=100, le=599)
    retry_after: str | None = Field(default=None, max_length=64)
    delay: float = Field(default=0.0, ge=0.0, le=300.0)
    drop: bool = False
    detail: str | None = None
    path: str | None = Field(default=None, max_length=1024)


class FaultList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    faults: list[Fault] = Field(max_length=MAX_QUEUED_FAULTS)


class DevSwitch:
    """Queued faults and the requests recorded (bounded in number and bytes)."""

    def __init__(self) -> None:
        self._released = asyncio.Event()
        self.reset()

    def reset(self) -> None:
        """Forget the queue and the record, and end every delay still running: a request a
        test left waiting does not outlive it (nor hold up the server's shutdown)."""
        self._released.set()
        self._released = asyncio.Event()
        self.faults: list[Fault] = []
        # Each request as /_dev/requests shows it, and its raw body.
        self._recorded: deque[tuple[dict[str, Any], bytes]] = deque()
        self._bytes = 0

    def queue(self, faults: list[Fault]) -> int:
        """Add ``faults`` (the oldest past the bounds go); returns how many wait."""
        self.faults.extend(faults)
        del self.faults[: max(0, len(self.faults) - MAX_QUEUED_FAULTS)]
        while (
            len(self.faults) > 1
            and sum(len(f.detail or "") for f in self.faults) > MAX_RECORDED_BYTES
        ):
            del self.faults[0]
        return len(self.faults)

    async def delay(self, seconds: float) -> None:
        """Wait ``seconds``, or until the next reset."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._released.wait(), seconds)

    def take(self, path: str) -> Fault | None:
        """The first queued fault for ``path``, removed from the queue."""
        for i, fault in enumerate(self.faults):
            if fault.path is None or fault.path in path:
                return self.faults.pop(i)
        return None

    def record(self, scope: Mapping[str, Any], body: bytes, refused: int | None = None) -> None:
        """What arrived; of a request ``refused`` before its body was read, only where it went."""
        entry: dict[str, Any] = {"method": scope["method"], "path": scope["path"], "headers": {}}
        if refused is None:
            pairs = ((k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"])
            entry["headers"] = {k: v for k, v in pairs if k.lower() not in SECRET_HEADERS}
        else:
            entry["refused"] = refused
        self._recorded.append((entry, body))
        self._bytes += len(body)
        while len(self._recorded) > 1 and (
            len(self._recorded) > MAX_RECORDED_REQUESTS or self._bytes > MAX_RECORDED_BYTES
        ):
            self._bytes -= len(self._recorded.popleft()[1])

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The record, bodies parsed as JSON where they are JSON."""
        return [{**entry, "body": _parsed(body)} for entry, body in self._recorded]


def _parsed(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return body.decode("utf-8", "replace")
