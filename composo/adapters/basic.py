"""Plain Python values: message dicts (OpenAI or Anthropic shape), strings, tools, trace dicts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from composo._core.plugins import hookimpl
from composo._core.trace import MultiAgentTrace

_ROLE_ALIASES = {"developer": "system"}
_OPENAI_EXTRAS = frozenset({"refusal", "annotations", "audio", "function_call"})


def is_list(obj: Any) -> bool:
    """A sequence of items (a string is not one)."""
    return isinstance(obj, Sequence) and not isinstance(obj, (str, bytes))


def is_openai_object(obj: Any) -> bool:
    """An object from the ``openai`` package (checked without importing it)."""
    return type(obj).__module__.startswith("openai.") and hasattr(obj, "model_dump")


def _sources(annotations: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """Citation annotations as readable source lines, each cited source once."""
    lines: dict[str, None] = {}  # in order, each once
    for ann in annotations or ():
        kind = ann.get("type")
        if kind == "url_citation":
            inner = ann.get("url_citation") or ann  # Chat Completions nests it, Responses does not
            title, url = inner.get("title") or "", inner.get("url") or ""
            lines[f"{title} <{url}>" if title else url] = None
        elif kind in ("file_citation", "container_file_citation", "file_path"):
            lines[f"file {ann.get('filename') or ann.get('file_id')}"] = None
    return [line for line in lines if line]


def with_sources(text: str, annotations: Sequence[Mapping[str, Any]] | None) -> str:
    """``text`` followed by a numbered list of the sources its citation annotations point to."""
    lines = _sources(annotations)
    if not lines:
        return text
    listed = "\n".join(f"[{n}] {line}" for n, line in enumerate(lines, 1))
    return f"{text}\n\nSources:\n{listed}" if text else f"Sources:\n{listed}"


def _tool_call(c: Mapping[str, Any]) -> dict[str, Any]:
    """One Chat Completions tool call in the function shape (custom tools carry free text)."""
    if c.get("type") == "custom" and "custom" in c:
        name, arguments = c["custom"]["name"], json.dumps({"input": c["custom"].get("input", "")})
    else:
        name, arguments = c["function"]["name"], c["function"].get("arguments") or "{}"
    return {
        "id": c.get("id"),
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def clean_chat_message(d: Mapping[str, Any]) -> dict[str, Any]:
    """Keep only what a chat message means (drops ``None`` fields and OpenAI-only extras), with
    citations, refusals and audio transcripts written into the content so none is lost."""
    out: dict[str, Any] = {}
    for key in ("role", "content", "name", "tool_call_id"):
        if d.get(key) is not None:
            out[key] = d[key]
    calls = [_tool_call(c) for c in d.get("tool_calls") or ()]
    legacy = d.get("function_call")
    if legacy:
        calls.append(_tool_call({"id": "function_call", "function": legacy}))
    if calls:
        out["tool_calls"] = calls
    if isinstance(out.get("content"), str) and d.get("annotations"):
        out["content"] = with_sources(out["content"], d["annotations"])
    if out.get("role") == "assistant":  # the first of these that says something
        transcript = (d.get("audio") or {}).get("transcript")
        refusal = d.get("refusal") and f"[refusal] {d['refusal']}"
        fallback = out.get("content") if calls else "(empty message)"
        out["content"] = out.get("content") or transcript or refusal or fallback
    return out


def message_dict(m: Any, index: int) -> dict[str, Any]:
    """One message as a new dict; the caller's object is left as it was."""
    if isinstance(m, Mapping):
        # A dumped OpenAI message carries fields chat messages do not define (refusal,
        # annotations, audio...); fold them into the content like the object's own.
        d = clean_chat_message(m) if _OPENAI_EXTRAS.intersection(m) else dict(m)
    elif is_openai_object(m):
        d = clean_chat_message(m.model_dump(mode="json", exclude_none=True))
    else:
        raise TypeError(f"messages[{index}] is a {type(m).__name__}, expected a dict with 'role'")
    role = d.get("role")
    if role in _ROLE_ALIASES:
        d["role"] = _ROLE_ALIASES[role]
    return d


def _is_message_list(obj: Any) -> bool:
    return is_list(obj) and all(isinstance(m, Mapping) or is_openai_object(m) for m in obj)


def _is_chat_message(m: Any) -> bool:
    """A chat message, not a Responses item (``response.output`` is left to its adapter)."""
    if is_openai_object(m):
        return not type(m).__module__.startswith("openai.types.responses")
    return (
        isinstance(m, Mapping)
        and "role" in m
        and (m.get("type") is None or not isinstance(m.get("content"), list))
    )


def is_responses_message(m: Mapping[str, Any]) -> bool:
    """A Responses API output message dict (``output_text`` / ``refusal`` parts), which the
    Responses adapter reads; not a chat message."""
    content = m.get("content")
    return (
        m.get("type") == "message"
        and isinstance(content, list)
        and bool(content)
        and all(
            isinstance(p, Mapping) and p.get("type") in ("output_text", "refusal") for p in content
        )
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
    if isinstance(obj, Mapping) and "role" in obj and not is_responses_message(obj):
        return [message_dict(obj, 0)]
    if _is_message_list(obj) and obj and all(_is_chat_message(m) for m in obj):
        return [message_dict(m, i) for i, m in enumerate(obj)]
    return None


@hookimpl(trylast=True)
def composo_convert_tools(obj: Any) -> list[dict[str, Any]] | None:
    if is_list(obj) and all(isinstance(t, Mapping) for t in obj):
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
