"""Composo plugin hooks for LangChain objects. Every composo process imports this module, so it
imports nothing from LangChain: an object can only be LangChain's once ``langchain_core`` is
imported, and only then is the converter module loaded.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from composo import hookimpl


def _maybe_langchain(obj: Any) -> bool:
    if "langchain_core" not in sys.modules:
        return False
    if type(obj).__module__.startswith(("langchain", "langgraph")):
        return True
    # Lists hold the interesting objects; a subclass may live in the user's own module.
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)):
        return any(not isinstance(item, (Mapping, str)) for item in obj)
    return hasattr(obj, "lc_serializable") or hasattr(obj, "generations")


Converter = Callable[[Any], list[dict[str, Any]] | None]


def _langchain_only(convert: Converter) -> Converter:
    """A converter that answers only for what may be a LangChain object (``None``: not ours)."""

    @functools.wraps(convert)
    def hook(obj: Any) -> list[dict[str, Any]] | None:
        return convert(obj) if _maybe_langchain(obj) else None

    return hook


@hookimpl
@_langchain_only
def composo_convert_messages(obj: Any) -> list[dict[str, Any]] | None:
    from langchain_composo import messages

    if messages.is_message_list(obj):
        return messages.openai_messages(obj)
    return messages.prompt_messages(obj)


@hookimpl
@_langchain_only
def composo_convert_result(obj: Any) -> list[dict[str, Any]] | None:
    from langchain_composo import messages

    return messages.result_messages(obj)


@hookimpl
@_langchain_only
def composo_convert_tools(obj: Any) -> list[dict[str, Any]] | None:
    from langchain_composo import messages

    if messages.is_tool_list(obj):
        return messages.openai_tools(obj)
    bound = messages.bound_tools(obj)
    return messages.openai_tools(bound) if bound is not None else None


_instrument: Any = None


@hookimpl
def composo_instruments() -> list[Any]:
    """``Instruments.LANGCHAIN`` (one object per process, so switching it off finds it again)."""
    global _instrument
    if _instrument is None:
        from langchain_composo.instruments import LangChainInstrument

        _instrument = LangChainInstrument()
    return [_instrument]


@hookimpl
def composo_supported_types(kind: str) -> list[str] | None:
    return {
        "messages": [
            "a list of LangChain messages (SystemMessage, HumanMessage, AIMessage with "
            "tool_calls, ToolMessage)",
            "a LangChain ChatPromptValue",
        ],
        "result": ["a LangChain AIMessage, ChatGeneration, ChatResult or LLMResult"],
        "tools": [
            "a list of what bind_tools takes (LangChain tools, functions, pydantic models)",
            "a chat model returned by bind_tools",
        ],
    }.get(kind)
