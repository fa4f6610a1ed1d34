"""Turn ``evaluate()`` / ``evaluate_trace()`` arguments into validated request bodies (both
clients, the batch plan, background evaluation). The rules are the wire models'; this converts
what the caller passed and words a refusal with the caller's argument names."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from composo._core import convert, cores, wire
from composo._core.limits import MIN_MESSAGES
from composo._core.options import ExplanationCleaning, check_names, set_options
from composo._core.wire import RequestOptions, RewardRequest, TraceRequest
from composo.errors import ComposoValidationError, validation_error

_R = TypeVar("_R", bound=BaseModel)
_T = TypeVar("_T")


def _refused(check: Callable[..., _T], *args: Any) -> _T:
    try:
        return check(*args)
    except ValueError as exc:
        raise ComposoValidationError(str(exc)) from None


def normalize_criteria(
    criteria: Any, evaluator_name: Any, *, check: bool = True
) -> tuple[list[dict[str, str]], bool]:
    """One dict per request (``evaluation_criteria`` or ``evaluator_name``) and whether a single
    value (not a list) was given. ``check=False`` leaves the values to the wire model (which
    checks them when the request is built)."""
    if (criteria is None) == (evaluator_name is None):
        raise ComposoValidationError(
            "criteria: give exactly one of criteria= (e.g. 'Reward accurate answers') or "
            "evaluator_name= (a saved evaluator)"
        )
    rule: Callable[[object, str], str]
    if criteria is not None:
        field, key, values, rule = "criteria", "evaluation_criteria", criteria, wire.check_criterion
    else:
        field, key, values = "evaluator_name", "evaluator_name", evaluator_name
        rule = wire.check_evaluator_name
    single = isinstance(values, str)
    items = [values] if single else values
    if not isinstance(items, Sequence) or isinstance(items, bytes) or not items:
        raise ComposoValidationError(f"{field}: expected a string or a non-empty list of strings")
    if not check:
        return [{key: value} for value in items], single
    return [
        {key: _refused(rule, value, field if single else f"{field}[{i}]")}
        for i, value in enumerate(items)
    ], single


def normalize_tags(tags: Any) -> dict[str, str] | None:
    """Flat string-to-string tags; numbers and booleans become strings, anything else is refused."""
    return _refused(wire.check_tags, tags)


def check_model_core(model_core: Any) -> str | None:
    """``model_core`` if it is one of :data:`~composo._core.cores.MODEL_CORES`, else refused."""
    return cores.check_model_core(model_core, ComposoValidationError)


def check_options(options: Mapping[str, Any], where: str, *, trace: bool = False) -> dict[str, Any]:
    """Options taken ahead of the calls (a framework handler's), checked as the clients check
    them (an unknown name is a ``TypeError``; ``trace=True`` adds a trace's refusals); returns
    those that are set."""
    check_names(options, where)
    given = set_options(options)
    cleaning = given.get("explanation_cleaning")
    if cleaning is not None and cleaning not in get_args(ExplanationCleaning):
        raise ComposoValidationError(
            f"explanation_cleaning: {cleaning!r} is not a cleaning; use one of "
            f"{', '.join(map(repr, get_args(ExplanationCleaning)))} or None"
        )
    try:
        RequestOptions.model_validate(
            {k: v for k, v in given.items() if k != "explanation_cleaning"}
        )
        if trace:
            wire.check_trace_options(given)
    except ValidationError as exc:
        raise validation_error(exc) from None
    except ValueError as exc:
        raise ComposoValidationError(str(exc)) from None
    return given


def conversation(
    messages: Any = None, input: Any = None, result: Any = None
) -> list[dict[str, Any]]:
    """The messages to send: ``messages`` or the Responses ``input``, then the ``result``."""
    if (messages is None) == (input is None):
        raise ComposoValidationError(
            "messages: give exactly one of messages= (a chat message list) or input= "
            "(the OpenAI Responses API input)"
        )
    if isinstance(messages, (str, bytes)):
        raise ComposoValidationError(
            "messages: expected a list of message dicts, got a string; e.g. "
            "[{'role': 'user', 'content': ...}, {'role': 'assistant', 'content': ...}]"
        )
    msgs = (
        convert.to_messages(messages) if messages is not None else convert.to_input_messages(input)
    )
    if result is not None:
        msgs = msgs + convert.to_result_messages(result)
    if len(msgs) < MIN_MESSAGES:
        raise ComposoValidationError(
            f"messages: the conversation has {len(msgs)} message(s)"
            f"{' after appending result' if result is not None else ''}; at least "
            f"{MIN_MESSAGES} are needed, "
            "e.g. the user's question and the assistant's answer (pass the answer as result=)"
        )
    _check_judgeable(msgs)
    return msgs


_SAYS = ("content", "tool_calls", "function_call")


def _check_judgeable(msgs: list[dict[str, Any]]) -> None:
    """Refuse, before any request, a message that says nothing (a misspelled ``content``) and a
    conversation with no answer to judge."""
    for i, msg in enumerate(msgs):
        if isinstance(msg, dict) and all(msg.get(key) is None for key in _SAYS):
            keys = ", ".join(repr(k) for k in msg) or "none"
            raise ComposoValidationError(
                f"messages[{i}]: has neither 'content' nor 'tool_calls' (its keys: {keys}); "
                "a message is {'role': ..., 'content': ...}"
            )
    if not any(isinstance(m, dict) and m.get("role") == "assistant" for m in msgs):
        raise ComposoValidationError(
            "messages: nothing to judge: no message has role 'assistant'; add the answer as "
            "an assistant message or pass it as result="
        )


def _requests(
    model: type[_R], sources: list[dict[str, str]], single: bool, common: Mapping[str, Any]
) -> list[_R]:
    out = []
    for i, source in enumerate(sources):
        try:
            out.append(model(**common, **source))
        except ValidationError as exc:
            (key,) = source
            where = ("criteria" if key == "evaluation_criteria" else key) + (
                "" if single else f"[{i}]"
            )
            raise validation_error(exc, rename={key: where}) from None
    return out


def reward_requests(
    criteria: Any,
    evaluator_name: Any,
    options: Mapping[str, Any],
    *,
    messages: Any = None,
    input: Any = None,
    result: Any = None,
    system: str | None = None,
    tools: Any = None,
) -> list[RewardRequest]:
    """Validated reward requests, one per criterion (in the order given)."""
    sources, single = normalize_criteria(criteria, evaluator_name, check=False)
    common: dict[str, Any] = {
        **set_options(options),
        "messages": conversation(messages, input, result),
    }
    if system is not None:
        common["system"] = system
    if tools is None and result is not None:
        tools = convert.result_tools(result)
    if tools is not None:
        common["tools"] = convert.to_tools(tools)
    return _requests(RewardRequest, sources, single, common)


def trace_requests(
    criteria: Any, evaluator_name: Any, options: Mapping[str, Any], *, trace: Any
) -> list[TraceRequest]:
    """Validated trace requests, one per criterion (in the order given)."""
    sources, single = normalize_criteria(criteria, evaluator_name, check=False)
    if trace is None:
        raise ComposoValidationError("trace: required (a MultiAgentTrace or a dict of that shape)")
    common = {**set_options(options), "trace": convert.to_trace(trace)}
    return _requests(TraceRequest, sources, single, common)
