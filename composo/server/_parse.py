"""Request bodies into validated requests, without stalling the event loop, and the size limits
of traces.

A large body is validated in a worker thread, and a large trace one agent (and one interaction)
at a time: a single pydantic call over megabytes holds the interpreter lock for its whole
duration, which would stall the event loop even from another thread; many small calls let it run
in between.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from pydantic import ValidationError

from composo._core.trace import AgentInstance, LLMInteraction
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
    if len(body) <= INLINE_BYTES:
        try:
            parsed = model.model_validate_json(body)
        except ValidationError as exc:
            raise Refused(422, validation_detail(exc, _loads_or_nothing(body))) from None
    else:
        try:
            data = loads(body)
        except ValueError:
            try:  # pydantic's message says where the JSON breaks
                model.model_validate_json(body)
            except ValidationError as exc:
                raise Refused(422, validation_detail(exc)) from None
            raise Refused(422, "the body is not valid JSON") from None
        if model is TraceRequest:
            data = _prevalidated_trace(data)
        try:
            parsed = model.model_validate(data)
        except ValidationError as exc:
            raise Refused(422, validation_detail(exc, data)) from None
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


def _prevalidated_trace(data: Any) -> Any:
    """``data`` with each agent instance already validated (piece by piece), so the final
    validation only checks how they fit together. Shapes it cannot read are left as they are
    for the final validation to report."""
    if not isinstance(data, dict):
        return data
    trace = data.get("trace")
    if not isinstance(trace, dict):
        return data
    agents = trace.get("agent_instance_by_id")
    if not isinstance(agents, dict):
        return data
    _check_counts(
        len(agents),
        sum(
            len(a["interactions"])
            for a in agents.values()
            if isinstance(a, dict) and isinstance(a.get("interactions"), list)
        ),
    )
    errors: list[dict[str, Any]] = []
    validated: dict[str, Any] = {}
    for key, agent in agents.items():
        where: tuple[str | int, ...] = ("trace", "agent_instance_by_id", key)
        try:
            validated[key] = _agent(agent, where, errors)
        except ValidationError as exc:
            errors += _located(exc, where)
        if len(errors) > 20:
            break
    if errors:
        raise Refused(422, validation_detail(errors, data))
    return {**data, "trace": {**trace, "agent_instance_by_id": validated}}


def _agent(agent: Any, where: tuple[str | int, ...], errors: list[dict[str, Any]]) -> Any:
    if isinstance(agent, dict) and isinstance(agent.get("interactions"), list):
        before = len(errors)
        steps: list[Any] = []
        for i, step in enumerate(agent["interactions"]):
            if isinstance(step, dict):
                try:
                    step = LLMInteraction.model_validate(step)
                except ValidationError as exc:
                    errors += _located(exc, (*where, "interactions", i))
            steps.append(step)
        if len(errors) > before:
            return agent
        agent = {**agent, "interactions": steps}
    return AgentInstance.model_validate(agent)


def _located(exc: ValidationError, where: tuple[str | int, ...]) -> list[dict[str, Any]]:
    return [
        {**err, "loc": (*where, *err["loc"])}
        for err in exc.errors(include_url=False, include_input=False)
    ]
