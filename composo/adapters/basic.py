"""Plain Python values: message dicts (OpenAI or Anthropic shape), strings, tool dicts, trace dicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from composo.plugins import hookimpl
from composo.trace import MultiAgentTrace

_ROLE_ALIASES = {"developer": "system"}


def is_openai_object(obj: Any) -> bool:
    """An object from the ``openai`` package (checked without importing it)."""
    return type(obj).__module__.startswith("openai.") and hasattr(obj, "model_dump")


def clean_chat_message(d: Mapping[str, Any]) -> dict[str, Any]:
    """Keep only what a chat message means (drops ``None`` fields and OpenAI-only extras)."""
    out: dict[str, Any] = {}
    for key in ("role", "content", "name", "tool_call_id"):
        if d.get(key) is not None:
            out[key] = d[key]
    if d.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": c.get("id"),
                "type": c.get("type", "function"),
                "function": {
                    "name": c["function"]["name"],
                    "arguments": c["function"].get("arguments") or "{}",
                },
            }
            for c in d["tool_calls"]
        ]
    if out.get("role") == "assistant" and "content" not in out:
        out["content"] = None
    if d.get("refusal") and not out.get("content"):
        out["content"] = f"[refusal] {d['refusal']}"
    return out


def message_dict(m: Any, index: int) -> dict[str, Any]:
    """One message as a new dict; the caller's object is left as it was."""
    if isinstance(m, Mapping):
        d = dict(m)
    elif is_openai_object(m):
        d = clean_chat_message(m.model_dump(mode="json", exclude_none=True))
    else:
        raise TypeError(f"messages[{index}] is a {type(m).__name__}, expected a dict with 'role'")
    role = d.get("role")
    if role in _ROLE_ALIASES:
        d["role"] = _ROLE_ALIASES[role]
    return d


def _is_message_list(obj: Any) -> bool:
    return (
        isinstance(obj, Sequence)
        and not isinstance(obj, (str, bytes))
        and all(isinstance(m, Mapping) or is_openai_object(m) for m in obj)
    )


@hookimpl(trylast=True)
def composo_convert_messages(obj: Any) -> list[dict[str, Any]] | None:
    if not _is_message_list(obj):
        return None
    return [message_dict(m, i) for i, m in enumerate(obj)]


@hookimpl(trylast=True)
def composo_convert_result(obj: Any) -> list[dict[str, Any]] | None:
    if isinstance(obj, str):
        return [{"role": "assistant", "content": obj}]
    if isinstance(obj, Mapping) and "role" in obj:
        return [message_dict(obj, 0)]
    if _is_message_list(obj) and obj:
        return [message_dict(m, i) for i, m in enumerate(obj)]
    return None


@hookimpl(trylast=True)
def composo_convert_tools(obj: Any) -> list[dict[str, Any]] | None:
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)):
        if all(isinstance(t, Mapping) for t in obj):
            return [dict(t) for t in obj]
    return None


@hookimpl(trylast=True)
def composo_convert_trace(obj: Any) -> MultiAgentTrace | None:
    if isinstance(obj, Mapping):
        return MultiAgentTrace.model_validate(obj)
    return None


@hookimpl(trylast=True)
def composo_convert_item(obj: Any) -> Mapping[str, Any] | None:
    return dict(obj) if isinstance(obj, Mapping) else None


@hookimpl
def composo_supported_types(kind: str) -> list[str] | None:
    return {
        "messages": ["a list of message dicts with 'role' and 'content' (OpenAI or Anthropic)"],
        "result": ["a string (the assistant's text)", "an assistant message dict"],
        "tools": ["a list of tool definition dicts (OpenAI or Anthropic)"],
        "trace": ["a MultiAgentTrace", "a dict of the same shape"],
        "item": ["a dict of evaluate() arguments"],
    }.get(kind)
