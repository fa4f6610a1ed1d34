"""LangChain messages, prompts, results and tools as the OpenAI-style dicts Composo takes.

This module imports ``langchain_core``; the plugin module only loads it once a LangChain object
is seen, so evaluating plain dicts never pays for LangChain.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult, Generation, LLMResult
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import RunnableBinding
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

# Content parts the evaluation API understands; provider-only parts (reasoning, citations...)
# are not part of the answer a user saw.
_OPENAI_PARTS = frozenset({"text", "image_url", "input_audio", "file", "refusal"})


def is_message_list(obj: Any) -> bool:
    """A list of LangChain messages (dicts may be mixed in, as LangChain itself allows)."""
    return (
        isinstance(obj, Sequence)
        and not isinstance(obj, (str, bytes))
        and all(isinstance(m, (BaseMessage, Mapping)) for m in obj)
        and any(isinstance(m, BaseMessage) for m in obj)
    )


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
        if not parts:
            # Nothing but reasoning (or nothing at all): its summary, never an empty list.
            d["content"] = _reasoning_summary(content)
        elif all(isinstance(p, Mapping) and p.get("type") == "text" for p in parts):
            # An answer's blocks are fragments of one text (cited spans), joined as LangChain's
            # ``.text`` does; other roles' blocks are separate parts (instructions, question).
            glue = "" if d.get("role") == "assistant" else "\n"
            d["content"] = glue.join(str(p.get("text", "")) for p in parts)
        else:
            d["content"] = parts
    return d


def _reasoning_summary(content: list[Any]) -> str:
    texts: list[str] = []
    for block in content:
        if not isinstance(block, Mapping) or block.get("type") != "reasoning":
            continue
        summary = block.get("summary")
        found = [
            str(s["text"])
            for s in (summary if isinstance(summary, list) else [])
            if isinstance(s, Mapping) and s.get("text")
        ]
        if not found and isinstance(block.get("reasoning"), str) and block["reasoning"]:
            found = [block["reasoning"]]
        texts.extend(found)
    return "\n\n".join(texts)


def _with_invalid_tool_calls(message: Any) -> Any:
    """An ``AIMessage`` whose tool calls could not be parsed, with those calls as text in its
    content, so the judge sees them (an unanswered ``tool_calls`` entry could be refused)."""
    if not isinstance(message, AIMessage) or not message.invalid_tool_calls:
        return message
    lines = [
        f"Invalid tool call {call.get('name') or '(unnamed)'} with arguments "
        f"{call.get('args') or ''}" + (f" (error: {call['error']})" if call.get("error") else "")
        for call in message.invalid_tool_calls
    ]
    text = "\n".join(lines)
    content: str | list[Any]
    if isinstance(message.content, str):
        content = f"{message.content}\n{text}" if message.content else text
    else:
        has_text = any(
            isinstance(b, str) or (isinstance(b, Mapping) and b.get("type") == "text")
            for b in message.content
        )
        content = [*message.content, {"type": "text", "text": f"\n{text}" if has_text else text}]
    return message.model_copy(update={"content": content, "invalid_tool_calls": []})


def openai_messages(messages: Sequence[BaseMessage | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """New OpenAI-style message dicts (the caller's messages are not touched)."""
    converted = convert_to_openai_messages(
        [_with_invalid_tool_calls(m) for m in messages], text_format="block"
    )
    return [_clean(dict(m)) for m in converted]


def prompt_messages(obj: Any) -> list[dict[str, Any]] | None:
    """A ``ChatPromptValue`` (what a prompt template produces) or any other prompt value."""
    return openai_messages(obj.to_messages()) if isinstance(obj, PromptValue) else None


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
    return [
        dict(t)  # already a provider tool definition
        if isinstance(t, Mapping) and ("function" in t or "input_schema" in t)
        else convert_to_openai_tool(t)
        for t in tools
    ]
