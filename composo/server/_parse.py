"""Request bodies into validated requests (a large one in a worker thread), and the size limits
of traces."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from pydantic import ValidationError

from composo._core.wire import RewardRequest, TraceRequest
from composo.server._bodies import loads, validation_detail

__all__ = [
    "INLINE_BYTES",
    "MAX_TRACE_AGENTS",
    "MAX_TRACE_INTERACTIONS",
    "Refused",
    "parse_request",
]

R = TypeVar("R", RewardRequest, TraceRequest)

INLINE_BYTES = 256 * 1024  # smaller bodies are validated at once, on the event loop
MAX_TRACE_AGENTS = 10_000  # agent instances in one trace
MAX_TRACE_INTERACTIONS = 50_000  # interactions (model calls and sub-agent calls) in one trace


class Refused(Exception):
    """The request is answered ``status`` with ``detail`` instead of being evaluated."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


async def parse_request(body: bytes, model: type[R]) -> R:
    """The validated request, or :class:`Refused` (422 naming the field, 413 over a limit)."""
    if len(body) <= INLINE_BYTES:
        return _validate(body, model)
    return await asyncio.to_thread(_validate, body, model)


def _validate(body: bytes, model: type[R]) -> R:
    try:
        return _validate_body(body, model)
    except (TypeError, AttributeError, KeyError, IndexError, RecursionError) as exc:
        # A validator meeting a shape it did not expect: still the client's body, never a 500.
        raise Refused(422, _unreadable(body, exc)) from None


def _unreadable(body: bytes, exc: Exception) -> str:
    data = _loads_or_nothing(body)
    fields = sorted(data) if isinstance(data, dict) else []
    where = f" (in one of: {', '.join(map(str, fields[:8]))})" if fields else ""
    return (
        f"the body has a value of a shape the API cannot read{where}: "
        f"{type(exc).__name__}: {str(exc)[:200]}"
    )


def _validate_body(body: bytes, model: type[R]) -> R:
    try:
        parsed = model.model_validate_json(body)
    except ValidationError as exc:
        raise Refused(422, validation_detail(exc, _loads_or_nothing(body))) from None
    if isinstance(parsed, TraceRequest):
        agents = parsed.trace.agent_instance_by_id
        _check_counts(len(agents), sum(len(a.interactions) for a in agents.values()))
    return parsed


def _loads_or_nothing(body: bytes) -> Any:
    try:
        return loads(body)
    except ValueError:
        return None


def _check_counts(agents: int, interactions: int) -> None:
    if agents > MAX_TRACE_AGENTS:
        raise Refused(
            413,
            f"trace.agent_instance_by_id: {agents} agent instances; this server evaluates at "
            f"most {MAX_TRACE_AGENTS} in one trace: split the run into several traces",
        )
    if interactions > MAX_TRACE_INTERACTIONS:
        raise Refused(
            413,
            f"trace: {interactions} interactions; this server evaluates at most "
            f"{MAX_TRACE_INTERACTIONS} in one trace: split the run into several traces",
        )
