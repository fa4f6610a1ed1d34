"""What a judge is asked to judge: one criterion against one conversation.

Reward requests arrive as chat messages (OpenAI or Anthropic shape); each agent instance of a trace
is rendered into the same OpenAI-style shape, so every judge reads one format.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from composo._core.trace import AgentInstance, LLMInteraction, ToolCall, ToolResponse
from composo._core.wire import RewardRequest

__all__ = ["Case", "ToolUse", "agent_case", "content_text", "reward_case", "tool_uses"]


@dataclass(frozen=True)
class ToolUse:
    """A tool call found in a conversation."""

    name: str
    arguments: str
    message_index: int


@dataclass(frozen=True)
class Case:
    """``criterion`` judged against ``messages`` (OpenAI-style dicts).

    ``evaluate_latest`` means only the last assistant turn is judged, the rest is context.
    ``subject`` is ``"response"`` for reward requests and ``"agent"`` for a trace's agent instance.
    """

    criterion: str
    messages: tuple[Mapping[str, Any], ...]
    system: str | None = None
    tools: tuple[Mapping[str, Any], ...] = ()
    evaluate_latest: bool = True
    subject: str = "response"
    agent_name: str | None = None
    sub_agents_called: tuple[str, ...] = ()


def content_text(content: Any) -> str:
    """The readable text of a message's content, whatever its shape."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping):
                kind = block.get("type")
                if kind in ("text", "input_text", "output_text"):
                    parts.append(str(block.get("text", "")))
                elif kind == "tool_result":
                    parts.append(content_text(block.get("content")))
        return " ".join(p for p in parts if p)
    if isinstance(content, Mapping):
        return content_text([content])
    return str(content)


def tool_uses(messages: tuple[Mapping[str, Any], ...]) -> list[ToolUse]:
    """Every tool call: OpenAI ``tool_calls`` and Anthropic ``tool_use`` blocks."""
    out: list[ToolUse] = []
    for i, m in enumerate(messages):
        for call in m.get("tool_calls") or ():
            if isinstance(call, Mapping):
                fn = call.get("function") or {}
                args = fn.get("arguments", "")
                out.append(
                    ToolUse(
                        str(fn.get("name", "")),
                        args if isinstance(args, str) else json.dumps(args),
                        i,
                    )
                )
        content = m.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, Mapping) and block.get("type") == "tool_use":
                    out.append(
                        ToolUse(str(block.get("name", "")), json.dumps(block.get("input", {})), i)
                    )
    return out


def reward_case(request: RewardRequest, criterion: str) -> Case:
    return Case(
        criterion=criterion,
        messages=tuple(request.messages),
        system=request.system,
        tools=tuple(request.tools or ()),
        evaluate_latest=request.evaluate_latest is not False,
        subject="response",
    )


def _input_message(role: str, content: str | ToolCall | ToolResponse) -> dict[str, Any]:
    if isinstance(content, ToolCall):
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [_openai_call(content)],
        }
    if isinstance(content, ToolResponse):
        msg: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": content.id,
            "content": content.response,
        }
        if content.name:
            msg["name"] = content.name
        return msg
    return {
        "role": role if role in ("system", "user", "assistant", "tool") else "user",
        "content": content,
    }


def _openai_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.parameters},
    }


def _output_message(interaction: LLMInteraction) -> dict[str, Any]:
    texts = [o.content for o in interaction.output_messages if isinstance(o.content, str)]
    calls = [
        _openai_call(o.content)
        for o in interaction.output_messages
        if isinstance(o.content, ToolCall)
    ]
    msg: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        msg["tool_calls"] = calls
    return msg


def agent_case(agent: AgentInstance, criterion: str, names: Mapping[str, str]) -> Case | None:
    """One agent instance's own model calls as a conversation; ``None`` if it made none.

    Each interaction's inputs usually repeat the earlier ones, so only inputs beyond what has
    been seen are appended. Sub-agent calls are noted as assistant turns naming the sub-agent.
    """
    messages: list[dict[str, Any]] = []
    seen_inputs = 0
    tools: dict[str, Mapping[str, Any]] = {}
    sub_agents: list[str] = []
    any_llm = False
    for step in agent.interactions:
        if isinstance(step, str):
            name = names.get(step, step)
            sub_agents.append(name)
            messages.append({"role": "assistant", "content": f"[called sub-agent {name}]"})
            continue
        any_llm = True
        inputs = step.input_messages
        new = inputs[seen_inputs:] if len(inputs) >= seen_inputs else inputs
        system_inputs = [m for m in new if m.role == "system" and isinstance(m.content, str)]
        for m in new:
            if m in system_inputs:
                continue
            messages.append(_input_message(m.role, m.content))
        seen_inputs = len(inputs) + len(step.output_messages)
        messages.append(_output_message(step))
        for spec in step.tools_available or ():
            try:
                params = json.loads(spec.parameters)
            except ValueError:
                params = {}
            tools[spec.name] = {
                "type": "function",
                "function": {
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": params,
                },
            }
    if not any_llm:
        return None
    system = next(
        (
            m.content
            for step in agent.interactions
            if isinstance(step, LLMInteraction)
            for m in step.input_messages
            if m.role == "system" and isinstance(m.content, str)
        ),
        None,
    )
    return Case(
        criterion=criterion,
        messages=tuple(messages),
        system=system,
        tools=tuple(tools.values()),
        evaluate_latest=False,
        subject="agent",
        agent_name=agent.name,
        sub_agents_called=tuple(sub_agents),
    )
