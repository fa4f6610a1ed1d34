"""The ``composo`` plugin for LlamaIndex objects. Every process imports it on its first
evaluation, so it reads only ``type(obj).__module__`` until it meets a LlamaIndex object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from composo.plugins import hookimpl

_LLAMA = "llama_index."
_OURS = "llama_index.evaluation.composo"


def _from_llama_index(obj: Any) -> bool:
    return type(obj).__module__.startswith(_LLAMA)


def _class_name(obj: Any) -> str:
    return type(obj).__name__


def _is_sequence(obj: Any) -> bool:
    return isinstance(obj, Sequence) and not isinstance(obj, (str, bytes))


def _chat_history(obj: Any) -> bool:
    """A list holding at least one LlamaIndex ``ChatMessage`` (other entries may be dicts)."""
    return (
        _is_sequence(obj)
        and all(isinstance(m, Mapping) or _chat_message(m) for m in obj)
        and any(_chat_message(m) for m in obj)
    )


def _chat_message(obj: Any) -> bool:
    return _from_llama_index(obj) and _class_name(obj) == "ChatMessage"


@hookimpl
def composo_convert_messages(obj: Any) -> list[dict[str, Any]] | None:
    if not _chat_history(obj):
        return None
    from llama_index.evaluation.composo.messages import chat_messages

    return chat_messages(obj)


@hookimpl
def composo_convert_result(obj: Any) -> list[dict[str, Any]] | None:
    history = _chat_history(obj)
    if not history and not _from_llama_index(obj):
        return None
    from llama_index.evaluation.composo import messages

    name = _class_name(obj)
    if history:
        return messages.chat_messages(obj)
    if name == "ChatMessage":
        return [messages.chat_message_dict(obj)]
    if name == "CompletionResponse":
        return [{"role": "assistant", "content": obj.text}]
    if name == "ChatResponse":
        return [messages.chat_message_dict(obj.message)]
    if name in ("Response", "AgentChatResponse", "PydanticResponse"):
        return messages.response_messages(obj)
    if name == "AgentOutput":  # what a workflow agent's run() returns
        return messages.agent_output_messages(obj)
    return None


@hookimpl
def composo_convert_tools(obj: Any) -> list[dict[str, Any]] | None:
    if _from_llama_index(obj) and hasattr(obj, "tools"):  # a workflow agent: its tools
        from llama_index.evaluation.composo.messages import agent_tools, tool_definitions

        tools = agent_tools(obj)
        return tool_definitions(tools) if tools is not None else None
    if not (
        _is_sequence(obj)
        and all(_from_llama_index(t) or isinstance(t, Mapping) for t in obj)
        and any(_from_llama_index(t) and hasattr(t, "metadata") for t in obj)
    ):
        return None
    from llama_index.evaluation.composo.messages import tool_definitions

    return tool_definitions(obj)


@hookimpl
def composo_convert_trace(obj: Any) -> Any:
    if type(obj).__module__.startswith(_OURS) and hasattr(obj, "trace"):
        return obj.trace  # a finished ``LlamaIndexTraceCapture``
    return None


@hookimpl
def composo_supported_types(kind: str) -> list[str] | None:
    return {
        "messages": ["a list of llama_index ChatMessage objects (a chat history)"],
        "result": [
            "a llama_index ChatMessage, ChatResponse or CompletionResponse",
            "a llama_index Response or AgentChatResponse (source nodes become source material)",
            "a llama_index workflow AgentOutput (its tool_calls included)",
        ],
        "tools": [
            "a list of llama_index tools (FunctionTool, QueryEngineTool...)",
            "a llama_index workflow agent or AgentWorkflow (the tools it was given)",
        ],
        "trace": ["a finished llama_index.evaluation.composo.LlamaIndexTraceCapture"],
    }.get(kind)


@hookimpl
def composo_instruments() -> list[Any] | None:
    from llama_index.evaluation.composo.instrument import INSTRUMENT

    return [INSTRUMENT]
