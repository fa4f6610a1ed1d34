"""Anthropic Messages API objects: a ``Message`` (object or dict) as ``result=`` or inside
``messages=``, and ``Tool`` objects as ``tools=``. Recognised by module and shape, never by
importing ``anthropic``; the answer keeps Anthropic's content blocks, which the platform takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from composo._core.plugins import hookimpl
from composo.adapters.basic import is_list

# Blocks the platform judges; a model's signed reasoning and citation bookkeeping are dropped.
_DROPPED_FIELDS = ("signature", "citations", "cache_control")


def _is_anthropic_object(obj: Any) -> bool:
    return type(obj).__module__.startswith("anthropic.") and hasattr(obj, "model_dump")


def _dump(obj: Any) -> Mapping[str, Any] | None:
    if isinstance(obj, Mapping):
        return obj
    if _is_anthropic_object(obj):
        dumped: dict[str, Any] = obj.model_dump(mode="json", exclude_none=True)
        return dumped
    return None


def _is_message(d: Mapping[str, Any]) -> bool:
    return (
        d.get("type") == "message"
        and d.get("role") == "assistant"
        and isinstance(d.get("content"), list)
        and all(isinstance(b, Mapping) and "type" in b for b in d["content"])
        and not any(b["type"] in ("output_text", "refusal") for b in d["content"])
    )


def assistant_message(d: Mapping[str, Any]) -> dict[str, Any]:
    """A ``Message`` as a conversation turn: its role and content blocks, nothing else."""
    blocks = []
    for block in d["content"]:
        if block.get("type") in ("thinking", "redacted_thinking"):
            continue  # the model's internals, not its answer
        blocks.append({k: v for k, v in block.items() if k not in _DROPPED_FIELDS})
    if all(b.get("type") == "text" for b in blocks):
        return {"role": "assistant", "content": "".join(str(b.get("text", "")) for b in blocks)}
    return {"role": "assistant", "content": blocks}


@hookimpl
def composo_convert_result(obj: Any) -> list[dict[str, Any]] | None:
    d = _dump(obj)
    if d is None or not _is_message(d):
        return None
    return [assistant_message(d)]


def _dumped_list(obj: Any, field: str, expected: str) -> list[Mapping[str, Any]] | None:
    """Each item, as a mapping, of a list holding an Anthropic object (``None`` for anything
    else); an item that is neither is named by its position in ``field``."""
    if not is_list(obj):
        return None
    if not any(_is_anthropic_object(item) for item in obj):
        return None
    out = []
    for i, item in enumerate(obj):
        d = _dump(item)
        if d is None:
            raise TypeError(f"{field}[{i}] is a {type(item).__name__}, expected {expected}")
        out.append(d)
    return out


@hookimpl
def composo_convert_messages(obj: Any) -> list[dict[str, Any]] | None:
    dumped = _dumped_list(obj, "messages", "a dict with 'role'")
    if dumped is None:
        return None
    return [assistant_message(d) if _is_message(d) else dict(d) for d in dumped]


@hookimpl
def composo_convert_tools(obj: Any) -> list[dict[str, Any]] | None:
    dumped = _dumped_list(obj, "tools", "a tool definition")
    if dumped is None:
        return None
    return [{k: v for k, v in d.items() if k != "cache_control"} for d in dumped]


@hookimpl
def composo_supported_types(kind: str) -> list[str] | None:
    return {
        "result": ["an anthropic Message (or its dict)"],
        "messages": ["anthropic Message objects inside the list"],
        "tools": ["anthropic Tool objects (or their dicts)"],
    }.get(kind)
