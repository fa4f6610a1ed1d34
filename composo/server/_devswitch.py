"""The development fault switch: queued failures and a record of what arrived. Off in normal use;
``--dev-faults`` (or ``COMPOSO_SERVER_DEV_FAULTS=1``) turns it on so client retry tests can run
against a real server."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DevSwitch", "Fault", "FaultList"]

_HIDDEN_HEADERS = frozenset({"api-key", "authorization", "cookie"})


class Fault(BaseModel):
    """One failure for one upcoming evaluation request. ``delay`` is applied first; then ``drop``
    closes the connection without an answer, or ``status`` answers that status with ``detail``
    (and ``Retry-After`` when given). A fault with only ``delay`` delays a normal answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: int | None = Field(default=None, ge=100, le=599)
    retry_after: str | None = None
    delay: float = Field(default=0.0, ge=0.0, le=300.0)
    drop: bool = False
    detail: str | None = None
    path: str | None = None


class FaultList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    faults: list[Fault]


@dataclass
class DevSwitch:
    """Queued faults (consumed in order) and recorded requests, in memory only."""

    faults: list[Fault]
    requests: list[dict[str, Any]]

    @classmethod
    def empty(cls) -> DevSwitch:
        return cls([], [])

    def reset(self) -> None:
        self.faults.clear()
        self.requests.clear()

    def take(self, path: str) -> Fault | None:
        """The first queued fault that applies to ``path``, removed from the queue."""
        for i, fault in enumerate(self.faults):
            if fault.path is None or fault.path in path:
                return self.faults.pop(i)
        return None

    def record(
        self, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> None:
        try:
            parsed: Any = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode("utf-8", "replace")
        self.requests.append(
            {
                "method": method,
                "path": path,
                "headers": {
                    k.decode("latin-1"): v.decode("latin-1")
                    for k, v in headers
                    if k.decode("latin-1").lower() not in _HIDDEN_HEADERS
                },
                "body": parsed,
            }
        )
