"""Turn ``evaluate()`` / ``evaluate_trace()`` arguments into validated request bodies.

Shared by both clients, so the sync and async faces cannot drift apart. Everything here runs
before the network: bad input is refused with the field's name and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from composo._core import convert
from composo._core.wire import MODEL_CORES, RewardRequest, TraceRequest, check_criterion
from composo.errors import ComposoValidationError, validation_error

__all__ = [
    "normalize_criteria",
    "normalize_tags",
    "reward_requests",
    "trace_requests",
]

_TAG_LIMIT = 64


def normalize_criteria(criteria: Any, evaluator_name: Any) -> tuple[list[dict[str, str]], bool]:
    """One dict per request (``evaluation_criteria`` or ``evaluator_name``) and whether a single
    value (not a list) was given."""
    if (criteria is None) == (evaluator_name is None):
        raise ComposoValidationError(
            "criteria: give exactly one of criteria= (e.g. 'Reward accurate answers') or "
            "evaluator_name= (a saved evaluator)"
        )
    if criteria is not None:
        field, values = "criteria", criteria
    else:
        field, values = "evaluator_name", evaluator_name
    single = isinstance(values, str)
    items = [values] if single else values
    if not isinstance(items, Sequence) or isinstance(items, bytes) or not items:
        raise ComposoValidationError(f"{field}: expected a string or a non-empty list of strings")
    out: list[dict[str, str]] = []
    for i, value in enumerate(items):
        where = field if single else f"{field}[{i}]"
        if field == "criteria":
            try:
                out.append({"evaluation_criteria": check_criterion(value, where)})
            except ValueError as exc:
                raise ComposoValidationError(str(exc)) from None
        else:
            if not isinstance(value, str) or not value.strip() or len(value) > 255:
                raise ComposoValidationError(f"{where}: expected a name of 1 to 255 characters")
            out.append({"evaluator_name": value})
    return out, single


def normalize_tags(tags: Any) -> dict[str, str] | None:
    """Flat string-to-string tags; numbers and booleans become strings, anything else is refused."""
    if tags is None:
        return None
    if not isinstance(tags, Mapping):
        raise ComposoValidationError(
            f"tags: expected a dict of strings, e.g. {{'env': 'prod'}}, got {type(tags).__name__}"
        )
    out: dict[str, str] = {}
    for key, value in tags.items():
        if not isinstance(key, str):
            raise ComposoValidationError(f"tags: key {key!r} must be a string")
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            text = str(value)
        else:
            raise ComposoValidationError(
                f"tags[{key!r}]: values must be strings (or numbers/booleans), "
                f"got {type(value).__name__}; flatten nested values into their own keys"
            )
        if len(key) > _TAG_LIMIT or len(text) > _TAG_LIMIT:
            raise ComposoValidationError(
                f"tags[{key[:20]!r}]: keys and values are at most {_TAG_LIMIT} characters"
            )
        out[key] = text
    return out


def check_model_core(model_core: Any) -> str | None:
    if model_core is not None and model_core not in MODEL_CORES:
        raise ComposoValidationError(
            f"model_core: {model_core!r} is not a model core; use one of {', '.join(MODEL_CORES)}"
        )
    return str(model_core) if model_core is not None else None


def conversation(
    messages: Any = None, input: Any = None, result: Any = None
) -> list[dict[str, Any]]:
    """The messages to send: ``messages`` or the Responses ``input``, then the ``result``."""
    if (messages is None) == (input is None):
        raise ComposoValidationError(
            "messages: give exactly one of messages= (a chat message list) or input= "
            "(the OpenAI Responses API input)"
        )
    msgs = (
        convert.to_messages(messages) if messages is not None else convert.to_input_messages(input)
    )
    if result is not None:
        msgs = msgs + convert.to_result_messages(result)
    if len(msgs) < 2:
        raise ComposoValidationError(
            f"messages: the conversation has {len(msgs)} message(s)"
            f"{' after appending result' if result is not None else ''}; at least 2 are needed, "
            "e.g. the user's question and the assistant's answer (pass the answer as result=)"
        )
    return msgs


def reward_requests(
    *,
    messages: Any = None,
    input: Any = None,
    criteria: Any = None,
    system: str | None = None,
    tools: Any = None,
    result: Any = None,
    tags: Any = None,
    evaluate_latest: bool | None = None,
    evaluator_name: Any = None,
    explanation_cleaning: str | None = None,
    data_retention: str | None = None,
    model_core: str | None = None,
    trace_id: Any = None,
) -> tuple[list[RewardRequest], bool]:
    """Validated reward requests, one per criterion, and whether a single criterion was given."""
    sources, single = normalize_criteria(criteria, evaluator_name)
    common: dict[str, Any] = {
        "messages": conversation(messages, input, result),
        "system": system,
        "tools": convert.to_tools(tools) if tools is not None else None,
        "tags": normalize_tags(tags),
        "evaluate_latest": evaluate_latest,
        "explanation_cleaning": explanation_cleaning,
        "data_retention": data_retention,
        "model_core": check_model_core(model_core),
        "trace_id": trace_id,
    }
    try:
        return [RewardRequest(**common, **src) for src in sources], single
    except ValidationError as exc:
        raise validation_error(exc) from None


def trace_requests(
    *,
    trace: Any,
    criteria: Any = None,
    evaluator_name: Any = None,
    model_core: str | None = None,
    tags: Any = None,
    explanation_cleaning: str | None = None,
    data_retention: str | None = None,
) -> tuple[list[TraceRequest], bool]:
    """Validated trace requests, one per criterion, and whether a single criterion was given."""
    sources, single = normalize_criteria(criteria, evaluator_name)
    if trace is None:
        raise ComposoValidationError("trace: required (a MultiAgentTrace or a dict of that shape)")
    common: dict[str, Any] = {
        "trace": convert.to_trace(trace),
        "model_core": check_model_core(model_core),
        "tags": normalize_tags(tags),
        "explanation_cleaning": explanation_cleaning,
        "data_retention": data_retention,
    }
    try:
        return [TraceRequest(**common, **src) for src in sources], single
    except ValidationError as exc:
        raise validation_error(exc) from None
