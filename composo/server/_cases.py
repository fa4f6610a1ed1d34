"""What a judge is asked to judge: one criterion against one conversation. Reward messages (OpenAI
or Anthropic shape) and each agent instance of a trace become one OpenAI-style shape."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from composo._core.trace import AgentInstance, LLMInteraction, ToolCall, ToolResponse
from composo._core.wire import RewardRequest


@dataclass(frozen=True)
class ToolUse:
    name: str
    arguments: str
    message_index: int


@dataclass(frozen=True)
class Case:
    """``criterion`` judged against OpenAI-style ``messages``: the last assistant turn when
    ``evaluate_latest``; ``subject`` is ``"response"`` (reward) or ``"agent"`` (a trace's)."""

    criterion: str
    messages: tuple[Mapping[str, Any], ...]
    system: str | None = None
    tools: tuple[Mapping[str, Any], ...] = ()
    evaluate_latest: bool = True
    subject: str = "response"
    agent_name: str | None = None


def json_text(value: Any) -> str:
    """Any JSON value as compact text (what an odd shape is shown to a judge as)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def json_or_none(text: str | bytes) -> Any:
    """The JSON value ``text`` holds, or ``None`` when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def content_text(content: Any) -> str:
    """The readable text of a message's content, whatever its shape."""
    if isinstance(content, Mapping):
        content = [content]
    if isinstance(content, list):
        return " ".join(t for t in map(_block_text, content) if t)
    return "" if content is None else json_text(content)


def _block_text(block: Any) -> str:
    """A content block's text: a string, a text part, or a tool result's content."""
    if isinstance(block, str):
        return block
    if isinstance(block, Mapping):
        kind = block.get("type")
        if kind in ("text", "input_text", "output_text"):
            return json_text(block.get("text", ""))
        if kind == "tool_result":
            return content_text(block.get("content"))
    return ""


def tool_uses(messages: tuple[Mapping[str, Any], ...]) -> list[ToolUse]:
    """Every tool call: OpenAI ``tool_calls`` and Anthropic ``tool_use`` blocks."""
    out: list[ToolUse] = []
    for i, m in enumerate(messages):
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            out.append(ToolUse(fn["name"], fn["arguments"], i))
        content = m.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, Mapping) and block.get("type") == "tool_use":
                    name, args = block.get("name", ""), block.get("input", {})
                    out.append(ToolUse(json_text(name), json_text(args), i))
    return out


def tool_results(messages: tuple[Mapping[str, Any], ...]) -> list[tuple[int, str]]:
    """Each tool result and its message's index (tool turns, Anthropic ``tool_result`` blocks)."""
    out: list[tuple[int, str]] = []
    for i, m in enumerate(messages):
        content = m.get("content")
        if m.get("role") in ("tool", "function"):
            out.append((i, content_text(content)))
        elif isinstance(content, list):
            out += [
                (i, content_text(b.get("content")))
                for b in content
                if isinstance(b, Mapping) and b.get("type") == "tool_result"
            ]
    return out


# The platform does not check message shapes. Judges read a ``role`` string, a ``content`` that is
# a string, None or a list of blocks, and OpenAI-shaped ``tool_calls``; whatever does not fit is
# shown to the judge as text in the content, so nothing is dropped.

_MAX_DEPTH = 32


def _block(block: Any, depth: int) -> Any:
    if isinstance(block, str):
        return block
    if not isinstance(block, Mapping):
        return {"type": "text", "text": json_text(block)}
    out = dict(block)
    if "type" in out:
        out["type"] = json_text(out["type"])
    if out.get("type") == "tool_result":
        out["content"] = _content(out.get("content"), depth + 1)
    return out


def _content(content: Any, depth: int = 0) -> Any:
    if content is None or isinstance(content, str):
        return content
    if depth > _MAX_DEPTH:
        return json_text(content)
    if isinstance(content, Mapping):
        content = [content]
    if isinstance(content, list):
        return [_block(b, depth) for b in content]
    return json_text(content)


def _call(call: Any) -> dict[str, Any] | None:
    """An OpenAI tool call in the one shape, or ``None`` when it has no readable name."""
    if not isinstance(call, Mapping):
        return None
    fn = call.get("function", call)
    if isinstance(fn, str):  # {"function": "name"}
        fn = {"name": fn, "arguments": call.get("arguments", "")}
    if not isinstance(fn, Mapping):
        return None
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        return None
    return _openai_call(json_text(call.get("id", "")), name, json_text(fn.get("arguments", "")))


def _message(m: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(m)
    out["role"] = json_text(out.get("role"))
    content = _content(out.get("content"))
    raw = out.pop("tool_calls", None)
    items = [] if raw is None else raw if isinstance(raw, list) else [raw]
    shaped = [(_call(item), item) for item in items]
    if calls := [call for call, _ in shaped if call is not None]:
        out["tool_calls"] = calls
    if unread := [f"[tool call: {json_text(item)}]" for call, item in shaped if call is None]:
        text = "\n".join(unread)
        if isinstance(content, list):
            content = [*content, {"type": "text", "text": text}]
        else:
            content = f"{content}\n{text}" if content else text
    out["content"] = content
    for key in ("name", "tool_call_id"):
        if key in out:
            out[key] = json_text(out[key])
    return out


def _tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A tool definition whose name and description are strings (OpenAI or Anthropic shape)."""
    fn = tool.get("function")
    shaped = dict(
        tool if fn is None else fn if isinstance(fn, Mapping) else {"name": json_text(fn)}
    )
    for key in ("name", "description"):
        value = shaped.get(key)
        shaped[key] = "" if value is None else json_text(value)
    return {**tool, "function": shaped} if fn is not None else shaped


def reward_case(request: RewardRequest, criterion: str) -> Case:
    return Case(
        criterion=criterion,
        messages=tuple(_message(m) for m in request.messages),
        system=request.system,
        tools=tuple(_tool(t) for t in request.tools or ()),
        evaluate_latest=request.evaluate_latest is not False,
    )


def _input_message(role: str, content: str | ToolCall | ToolResponse) -> dict[str, Any]:
    if isinstance(content, ToolCall):
        return {"role": "assistant", "content": None, "tool_calls": [_tool_call(content)]}
    if isinstance(content, ToolResponse):
        named = {"name": content.name} if content.name else {}
        return {"role": "tool", "tool_call_id": content.id, "content": content.response, **named}
    return {
        "role": role if role in ("system", "user", "assistant", "tool") else "user",
        "content": content,
    }


def _openai_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _tool_call(call: ToolCall) -> dict[str, Any]:
    return _openai_call(call.id, call.name, call.parameters)


def _output_message(interaction: LLMInteraction) -> dict[str, Any]:
    outputs = [o.content for o in interaction.output_messages]
    texts = [c for c in outputs if isinstance(c, str)]
    calls = [_tool_call(c) for c in outputs if isinstance(c, ToolCall)]
    msg: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        msg["tool_calls"] = calls
    return msg


def agent_case(agent: AgentInstance, criterion: str, names: Mapping[str, str]) -> Case | None:
    """One agent instance's own model calls as a conversation (``None``: it made none). Inputs
    usually repeat earlier ones, so only unseen ones are appended; sub-agent calls are noted."""
    if all(isinstance(step, str) for step in agent.interactions):
        return None
    messages: list[dict[str, Any]] = []
    seen_inputs = 0
    tools: dict[str, Mapping[str, Any]] = {}
    system: str | None = None
    for step in agent.interactions:
        if isinstance(step, str):
            name = names.get(step, step)
            messages.append({"role": "assistant", "content": f"[called sub-agent {name}]"})
            continue
        inputs = step.input_messages
        if system is None:
            prompts = (m.content for m in inputs if m.role == "system")
            system = next((p for p in prompts if isinstance(p, str)), None)
        new = inputs[seen_inputs:] if len(inputs) >= seen_inputs else inputs
        for m in new:
            if not (m.role == "system" and isinstance(m.content, str)):  # the case's own field
                messages.append(_input_message(m.role, m.content))
        seen_inputs = len(inputs) + len(step.output_messages)
        messages.append(_output_message(step))
        for spec in step.tools_available or ():
            try:
                params = json.loads(spec.parameters)
            except ValueError:
                params = {}
            fn = {"name": spec.name, "description": spec.description, "parameters": params}
            tools[spec.name] = {"type": "function", "function": fn}
    return Case(
        criterion=criterion,
        messages=tuple(messages),
        system=system,
        tools=tuple(tools.values()),
        evaluate_latest=False,
        subject="agent",
        agent_name=agent.name,
    )
