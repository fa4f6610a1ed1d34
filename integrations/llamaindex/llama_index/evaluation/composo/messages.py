"""LlamaIndex chat objects as OpenAI-style message dicts, the shape Composo evaluates.

Source material (retrieved nodes) travels as one ``system`` message just before the answer it
supports, headed ``SOURCE_MATERIAL_HEADER`` and numbered ``[1]``, ``[2]``..., so RAG criteria see
what the answer was allowed to rely on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    CitableBlock,
    CitationBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)

SOURCE_MATERIAL_HEADER = "Source material retrieved for the answer that follows:"

_log = logging.getLogger("composo.llamaindex")

_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """One OpenAI tool call; ``arguments`` is a JSON string or a value to encode."""
    if not isinstance(arguments, str):
        arguments = "{}" if arguments is None else json.dumps(arguments, default=str)
    fn = {"name": str(name), "arguments": arguments or "{}"}
    return {"id": str(call_id or ""), "type": "function", "function": fn}


def _same_call_key(call: Mapping[str, Any]) -> str:
    fn = call["function"]
    try:
        args = json.dumps(json.loads(fn["arguments"]), sort_keys=True)
    except ValueError:
        args = fn["arguments"]
    return f"{fn['name']}\x00{args}"


def _same_call(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """The same when their ids match, or, when one has no id, their name and arguments."""
    if a["id"] and b["id"]:
        return bool(a["id"] == b["id"])
    return _same_call_key(a) == _same_call_key(b)


def _unique_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each call once: it is often kept both as a ``ToolCallBlock`` and in ``additional_kwargs``."""
    kept: list[dict[str, Any]] = []
    for call in calls:
        twin = next((k for k in kept if _same_call(k, call)), None)
        if twin is None:
            kept.append(call)
        elif not twin["id"]:
            twin["id"] = call["id"]
    return kept


def _extra_tool_call(raw: Any) -> dict[str, Any] | None:
    """One entry of ``additional_kwargs["tool_calls"]``: an OpenAI dict or object, an Anthropic
    ``tool_use`` dict, or a LlamaIndex ``ToolSelection``."""
    if hasattr(raw, "model_dump") and type(raw).__module__.startswith("openai."):
        raw = raw.model_dump(mode="json", exclude_none=True)
    if isinstance(raw, Mapping):
        fn = raw.get("function")
        if isinstance(fn, Mapping):
            return _call(raw.get("id"), fn.get("name", ""), fn.get("arguments"))
        if "name" in raw:  # Anthropic tool_use block
            return _call(raw.get("id"), raw["name"], raw.get("input"))
        return None
    if hasattr(raw, "tool_name") and hasattr(raw, "tool_kwargs"):  # ToolSelection
        return _call(getattr(raw, "tool_id", ""), raw.tool_name, raw.tool_kwargs)
    return None


def _block_text(block: Any) -> str | None:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ThinkingBlock | ToolCallBlock):
        return None  # reasoning is not part of the answer; tool calls are handled separately
    if isinstance(block, CitableBlock):
        return "".join(c.text for c in block.content if isinstance(c, TextBlock))
    if isinstance(block, CitationBlock):
        cited = block.cited_content
        return cited.text if isinstance(cited, TextBlock) else f"[{cited.block_type}]"
    kind = getattr(block, "block_type", type(block).__name__)
    where = getattr(block, "url", None) or getattr(block, "path", None)
    _log.debug("a %s block is sent as a placeholder: Composo evaluates text", kind)
    return f"[{kind}: {where}]" if where else f"[{kind}]"


def chat_message_dict(message: ChatMessage, index: int = 0) -> dict[str, Any]:
    """One ``ChatMessage`` as a new dict; the message itself is left untouched."""
    role = _role(message, index)
    texts = [t for t in (_block_text(b) for b in message.blocks) if t is not None]
    out: dict[str, Any] = {"role": role, "content": "\n".join(texts) if texts else None}
    calls = _tool_calls(message, index)
    if calls:
        out["tool_calls"] = calls
    if role == "tool":
        out.update(_tool_reply(message.additional_kwargs))
    if role != "assistant" and out["content"] is None:
        out["content"] = ""
    return out


def _role(message: ChatMessage, index: int) -> str:
    role_value = getattr(message.role, "value", message.role)
    role = _ROLES.get(str(role_value))
    if role is None:
        raise ValueError(
            f"messages[{index}].role is {role_value!r}; Composo takes system, user, assistant "
            "and tool messages"
        )
    return role


def _tool_calls(message: ChatMessage, index: int) -> list[dict[str, Any]]:
    """The tool calls of its blocks and ``additional_kwargs``, each once, with an id."""
    calls = [
        _call(block.tool_call_id, block.tool_name, block.tool_kwargs)
        for block in message.blocks
        if isinstance(block, ToolCallBlock)
    ]
    for raw in message.additional_kwargs.get("tool_calls") or ():
        extra_call = _extra_tool_call(raw)
        if extra_call is None:
            raise ValueError(
                f"messages[{index}].additional_kwargs['tool_calls'] holds a "
                f"{type(raw).__name__} that is not a tool call"
            )
        calls.append(extra_call)
    kept = _unique_calls(calls)
    for j, call in enumerate(kept):
        if not call["id"]:
            call["id"] = f"call_{index}_{j}"
    return kept


def _tool_reply(extra: Mapping[str, Any]) -> dict[str, str]:
    """The call id and tool name a tool message's ``additional_kwargs`` carry."""
    call_id = extra.get("tool_call_id") or extra.get("tool_use_id")
    found = {"tool_call_id": call_id, "name": extra.get("name") or extra.get("tool_name")}
    return {k: str(v) for k, v in found.items() if v}


def chat_messages(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """A chat history (``ChatMessage`` objects, optionally mixed with message dicts)."""
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if isinstance(m, ChatMessage):
            out.append(chat_message_dict(m, i))
        elif isinstance(m, Mapping):
            out.append(dict(m))
        else:
            raise TypeError(f"messages[{i}] is a {type(m).__name__}, expected a ChatMessage")
    return out


def node_text(node: Any) -> str:
    """The text of a ``NodeWithScore`` / node (without its metadata header)."""
    get = getattr(node, "get_content", None)  # a NodeWithScore's is its node's
    return str(get()) if callable(get) else str(node)


def source_material_message(contexts: Sequence[str]) -> dict[str, Any]:
    """The system message that carries retrieved contexts (see the module docstring)."""
    body = "\n\n".join(f"[{i}] {c}" for i, c in enumerate(contexts, 1))
    return {"role": "system", "content": f"{SOURCE_MATERIAL_HEADER}\n\n{body}"}


def _tool_output_text(output: Any) -> str:
    content = getattr(output, "content", None)
    return str(content) if content is not None else str(getattr(output, "raw_output", ""))


def response_messages(response: Any) -> list[dict[str, Any]]:
    """A query-engine ``Response`` or an ``AgentChatResponse`` as the messages that answered.

    Tool calls recorded in ``sources`` become an assistant tool-call turn and tool results;
    ``source_nodes`` not already returned by those tools become source material.
    """
    ran = list(getattr(response, "sources", None) or ())
    out = _tool_turns(
        (f"call_{i}", t.tool_name, getattr(t, "raw_input", None), t) for i, t in enumerate(ran)
    )
    covered = {
        id(n)
        for t in ran
        for n in getattr(getattr(t, "raw_output", None), "source_nodes", None) or ()
    }
    contexts = [node_text(n) for n in response.source_nodes or () if id(n) not in covered]
    if contexts:
        out.append(source_material_message(contexts))
    text = getattr(response, "response", None)
    if text is None:
        raise ValueError("the response has no text (response.response is None)")
    out.append({"role": "assistant", "content": str(text)})
    return out


def _tool_turns(ran: Iterable[tuple[str, Any, Any, Any]]) -> list[dict[str, Any]]:
    """One assistant turn calling each tool, then each result: ``(id, name, arguments, tool
    output)`` per call."""
    ran = list(ran)
    if not ran:
        return []
    calls = [_call(i, name, args) for i, name, args, _ in ran]
    results = [
        {"role": "tool", "tool_call_id": i, "name": str(name), "content": _tool_output_text(o)}
        for i, name, _, o in ran
    ]
    return [{"role": "assistant", "content": None, "tool_calls": calls}, *results]


def tool_definitions(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """LlamaIndex tools (``FunctionTool``, ``QueryEngineTool``...) as OpenAI tool definitions."""
    return [
        dict(t) if isinstance(t, Mapping) else t.metadata.to_openai_tool(skip_length_check=True)
        for t in tools
    ]


def agent_output_messages(output: Any) -> list[dict[str, Any]]:
    """A workflow agent's ``AgentOutput`` (what ``await agent.run(...)`` returns) as the messages
    that answered: the tool calls it records in ``tool_calls`` (one assistant turn making them,
    then each result), then the answer."""
    out = _tool_turns(
        (str(r.tool_id or f"call_{i}"), r.tool_name, r.tool_kwargs, r.tool_output)
        for i, r in enumerate(getattr(output, "tool_calls", None) or ())
    )
    answer = chat_message_dict(output.response)
    if answer.get("content") is None and "tool_calls" not in answer:
        answer["content"] = ""
    out.append(answer)
    return out


def _is_workflow_agent(obj: Any) -> bool:
    kind = type(obj)
    return (
        kind.__module__.startswith("llama_index.")
        and hasattr(obj, "tools")
        and (hasattr(obj, "tool_retriever") or hasattr(obj, "agents"))
    )


def agent_tools(obj: Any) -> list[Any] | None:
    """The tools a workflow agent (``FunctionAgent``, ``ReActAgent``...) or an ``AgentWorkflow``
    was given, as LlamaIndex tools (plain functions become ``FunctionTool``); ``None`` if
    ``obj`` is not an agent or has no fixed tools (a ``tool_retriever`` picks them per call)."""
    from llama_index.core.tools import FunctionTool
    from llama_index.core.tools.types import BaseTool

    if not _is_workflow_agent(obj):
        return None
    agents = getattr(obj, "agents", None)  # an AgentWorkflow's: every agent's tools
    owners = agents.values() if isinstance(agents, Mapping) else [obj]
    tools: dict[str, Any] = {}  # by name, the first of each
    for owner in owners:
        for t in getattr(owner, "tools", None) or ():
            tool = t if isinstance(t, BaseTool) else FunctionTool.from_defaults(fn=t)
            tools.setdefault(str(tool.metadata.name), tool)
    return list(tools.values()) or None
