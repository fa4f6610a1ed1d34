"""LangChain messages, prompts, results and tools as the OpenAI-style dicts Composo takes.

This module imports ``langchain_core``; the plugin module only loads it once a LangChain object
is seen, so evaluating plain dicts never pays for LangChain.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult, Generation, LLMResult
from langchain_core.prompt_values import ChatPromptValue, PromptValue
from langchain_core.runnables import RunnableBinding
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

__all__ = [
    "bound_tools",
    "is_message_list",
    "is_tool_list",
    "openai_messages",
    "openai_tools",
    "prompt_messages",
    "result_messages",
]

# Content parts the evaluation API understands; provider-only parts (reasoning, citations...)
# are not part of the answer a user saw.
_OPENAI_PARTS = frozenset({"text", "image_url", "input_audio", "file", "refusal"})


def is_message_list(obj: Any) -> bool:
    """A list of LangChain messages (dicts may be mixed in, as LangChain itself allows)."""
    if not isinstance(obj, Sequence) or isinstance(obj, (str, bytes)) or not obj:
        return False
    has_lc = False
    for m in obj:
        if isinstance(m, BaseMessage):
            has_lc = True
        elif not isinstance(m, Mapping):
            return False
    return has_lc


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    role = d.get("role")
    if role == "developer":
        d["role"] = "system"
    elif role == "function":
        # Legacy function messages answer the call named like the function.
        d["role"] = "tool"
        d.setdefault("tool_call_id", d.get("name", ""))
    content = d.get("content")
    if isinstance(content, list):
        parts = [p for p in content if not isinstance(p, Mapping) or p.get("type") in _OPENAI_PARTS]
        if parts and all(isinstance(p, Mapping) and p.get("type") == "text" for p in parts):
            d["content"] = "\n".join(str(p.get("text", "")) for p in parts)
        else:
            d["content"] = parts
    return d


def openai_messages(messages: Sequence[BaseMessage | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """New OpenAI-style message dicts (the caller's messages are not touched)."""
    converted = convert_to_openai_messages(list(messages))
    return [_clean(dict(m)) for m in converted]


def prompt_messages(obj: Any) -> list[dict[str, Any]] | None:
    """A ``ChatPromptValue`` (what a prompt template produces) or any other prompt value."""
    if isinstance(obj, ChatPromptValue):
        return openai_messages(obj.messages)
    if isinstance(obj, PromptValue):
        return openai_messages(obj.to_messages())
    return None


def _generation_messages(gen: Generation) -> list[dict[str, Any]]:
    if isinstance(gen, ChatGeneration):
        return openai_messages([gen.message])
    return [{"role": "assistant", "content": gen.text}]


def result_messages(obj: Any) -> list[dict[str, Any]] | None:
    """The answer in an ``AIMessage``, message list, ``ChatGeneration``, ``ChatResult`` or
    ``LLMResult`` (the first generation: the one the application used)."""
    if isinstance(obj, BaseMessage):
        return openai_messages([obj])
    if is_message_list(obj):
        return openai_messages(obj)
    if isinstance(obj, Generation):
        return _generation_messages(obj)
    if isinstance(obj, ChatResult):
        if not obj.generations:
            raise ValueError("the ChatResult has no generations to evaluate")
        return _generation_messages(obj.generations[0])
    if isinstance(obj, LLMResult):
        if not obj.generations or not obj.generations[0]:
            raise ValueError("the LLMResult has no generations to evaluate")
        return _generation_messages(obj.generations[0][0])
    return None


def _is_tool(t: Any) -> bool:
    if isinstance(t, (BaseTool, Mapping)):
        return True
    if isinstance(t, type):
        return issubclass(t, BaseModel)
    return inspect.isfunction(t)


def is_tool_list(obj: Any) -> bool:
    """What ``bind_tools`` takes: LangChain tools, functions, pydantic models, tool dicts (at
    least one of them not a dict, or the plain-dict adapter would have answered)."""
    return (
        isinstance(obj, Sequence)
        and not isinstance(obj, (str, bytes))
        and bool(obj)
        and all(_is_tool(t) for t in obj)
        and not all(isinstance(t, Mapping) for t in obj)
    )


def bound_tools(obj: Any) -> list[Any] | None:
    """The tools of a model returned by ``bind_tools`` (a ``RunnableBinding``)."""
    if isinstance(obj, RunnableBinding):
        tools = obj.kwargs.get("tools")
        if isinstance(tools, Sequence) and not isinstance(tools, (str, bytes)):
            return list(tools)
    return None


def openai_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """OpenAI tool definitions for LangChain tools, functions, pydantic models or tool dicts."""
    out: list[dict[str, Any]] = []
    for t in tools:
        if isinstance(t, Mapping) and ("function" in t or "input_schema" in t):
            out.append(dict(t))  # already a provider tool definition
        else:
            out.append(convert_to_openai_tool(t))
    return out
