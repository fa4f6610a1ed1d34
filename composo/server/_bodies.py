"""Bodies into validated requests (a large one in a worker thread), and the platform's errors."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from composo._core.wire import RewardRequest, TraceRequest
from composo.server._cases import json_or_none


def refusal(detail: str, status: int = 422, headers: dict[str, str] | None = None) -> Response:
    """An error answer in the platform's shape."""
    return JSONResponse({"detail": detail}, status, headers)


_MAX_ERRORS = 5
# What a field expects, by the kinds of pydantic error that say it does not hold one.
_EXPECTED = {
    kind: expected
    for expected, kinds in {
        "a string": "string_type",
        "an object": "model_type model_attributes_type dict_type",
        "a list": "list_type",
        "an integer": "int_type int_parsing int_from_float",
        "a number": "float_type float_parsing",
        "true or false": "bool_type bool_parsing",
        "null": "none_required",
        "a UUID": "uuid_type uuid_parsing",
    }.items()
    for kind in kinds.split()
}
_Path = tuple[str | int, ...]


def _real_path(loc: Sequence[str | int], data: Any, missing: bool) -> _Path:
    """``loc`` without pydantic's union branch names: only keys and indexes in the body."""
    out: list[str | int] = []
    cur = data
    for i, part in enumerate(loc):
        present = (isinstance(cur, Mapping) and isinstance(part, str) and part in cur) or (
            isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur)
        )
        if present:
            out.append(part)
            cur = cur[part]
        elif missing and i == len(loc) - 1:
            out.append(part)
    return tuple(out)


def _message(err: Mapping[str, Any]) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown field: the API does not accept it; remove it"
    if kind == "missing":
        return "required: add this field"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}"
    if kind == "json_invalid":
        return f"the body is not valid JSON ({err.get('ctx', {}).get('error', 'unreadable')})"
    msg = str(err["msg"]).removeprefix("Value error, ").replace("\n", " ")
    if kind == "literal_error":
        return "expected " + str(err.get("ctx", {}).get("expected", msg))
    return msg


def validation_detail(errors: ValidationError, data: Any) -> str:
    """One line naming each offending field once and what it expects, as the platform's 422
    does; ``data`` (the parsed body) drops union branch names from the paths."""
    grouped: dict[_Path, list[str]] = {}
    shallow: set[_Path] = set()
    for err in errors.errors(include_url=False, include_input=False):
        path = _real_path(err["loc"], data, err["type"] == "missing")
        if err["type"] in _EXPECTED:
            shallow.add(path)
        msgs = grouped.setdefault(path, [])
        if (msg := _message(err)) not in msgs:
            msgs.append(msg)
    # A type mismatch of one union branch where another branch got further is noise.
    deeper = {p[:n] for p in grouped for n in range(len(p))}
    parts = [
        line
        for path, msgs in grouped.items()
        for line in _lines(path, msgs, path in shallow and path in deeper)
    ]
    shown = parts[:_MAX_ERRORS]
    if len(parts) > _MAX_ERRORS:
        shown.append(f"and {len(parts) - _MAX_ERRORS} more")
    return "; ".join(shown)


def _lines(path: _Path, msgs: list[str], noise: bool) -> list[str]:
    """One field's messages, its expected types merged into one "expected a or b"."""
    expected = [m.removeprefix("expected ") for m in msgs if m.startswith("expected ")]
    others = [m for m in msgs if not m.startswith("expected ")]
    if noise:
        msgs = others
    elif len(expected) > 1:
        msgs = [*others, "expected " + " or ".join(dict.fromkeys(expected))]
    where = ".".join(str(p) for p in path)
    last = str(path[-1]) if path else ""
    return [
        m if not where or m.startswith((where, last + ":", last + "[")) else f"{where}: {m}"
        for m in msgs
    ]


R = TypeVar("R", RewardRequest, TraceRequest)

INLINE_BYTES = 256 * 1024  # smaller bodies are validated at once, on the event loop
MAX_TRACE_AGENTS = 10_000  # agent instances in one trace
MAX_TRACE_INTERACTIONS = 50_000  # interactions (model calls and sub-agent calls) in one trace


async def parse_request(body: bytes, model: type[R]) -> R:
    """The validated request; an ``HTTPException`` for 422 naming the field or 413 over a limit."""
    if len(body) <= INLINE_BYTES:
        return _validate(body, model)
    return await asyncio.to_thread(_validate, body, model)


def _validate(body: bytes, model: type[R]) -> R:
    try:
        try:
            parsed = model.model_validate_json(body)
        except ValidationError as exc:
            raise HTTPException(422, validation_detail(exc, json_or_none(body))) from None
        if isinstance(parsed, TraceRequest):
            agents = parsed.trace.agent_instance_by_id
            _check_counts(len(agents), sum(len(a.interactions) for a in agents.values()))
    except (TypeError, AttributeError, KeyError, IndexError, RecursionError) as exc:
        # A validator meeting a shape it did not expect: still the client's body, never a 500.
        raise HTTPException(422, _unreadable(body, exc)) from None
    return parsed


def _unreadable(body: bytes, exc: Exception) -> str:
    data = json_or_none(body)
    fields = sorted(data) if isinstance(data, dict) else []
    where = f" (in one of: {', '.join(map(str, fields[:8]))})" if fields else ""
    return (
        f"the body has a value of a shape the API cannot read{where}: "
        f"{type(exc).__name__}: {str(exc)[:200]}"
    )


def _check_counts(agents: int, interactions: int) -> None:
    for where, count, most, what in (
        ("trace.agent_instance_by_id", agents, MAX_TRACE_AGENTS, "agent instances"),
        ("trace", interactions, MAX_TRACE_INTERACTIONS, "interactions"),
    ):
        if count > most:
            raise HTTPException(
                413,
                f"{where}: {count} {what}; this server evaluates at most {most} in one trace: "
                "split the run into several traces",
            )
