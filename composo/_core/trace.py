"""Multi-agent trace models, exactly as the platform's trace endpoint takes them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class _Open(BaseModel):
    """Tool calls, tool responses and tool definitions carry extra fields through, as the
    platform accepts them."""

    model_config = ConfigDict(extra="allow", defer_build=True)


class ToolCall(_Open):
    """A tool call made by the model; ``parameters`` is the JSON-encoded arguments."""

    id: str
    name: str
    parameters: str


class ToolResponse(_Open):
    """What a tool answered, fed back to the model."""

    id: str
    response: str
    name: str | None = None


class InputMessage(_Model):
    role: str
    type: str | None = None  # free text: "text", "tool_call", "thinking_tokens"...
    content: str | ToolCall | ToolResponse


class OutputMessage(_Model):
    type: str | None = None
    content: str | ToolCall


class ToolSpec(_Open):
    """A tool the model could call; ``parameters`` is the JSON schema as a string."""

    name: str
    description: str = ""
    parameters: str = "{}"


class LLMInteraction(_Model):
    """One model call: what went in, what came out, which tools were offered."""

    input_messages: list[InputMessage] = Field(default_factory=list)
    output_messages: list[OutputMessage] = Field(default_factory=list)
    tools_available: list[ToolSpec] | None = None


class AgentInstance(_Model):
    """One run of an agent; an interaction that is a string is the id of a sub-agent it called."""

    id: str
    name: str
    interactions: list[str | LLMInteraction] = Field(default_factory=list)

    @classmethod
    def from_chat_session(cls, chat_session: Mapping[str, Any]) -> AgentInstance:
        """One agent instance from a chat, as the platform SDK's helper builds it.

        ``chat_session`` is ``{"messages": [...], "system": ..., "tools": [...]}`` (``system``,
        Anthropic's separate prompt, and ``tools`` optional); each assistant turn becomes an
        LLM interaction, as in :func:`trace_from_messages`. The instance's id is
        ``agent_instance_0`` and its name ``default_agent``.
        """
        messages = list(chat_session.get("messages") or ())
        if system := chat_session.get("system"):
            messages.insert(0, {"role": "system", "content": content_text(system)})
        steps = _interactions(messages, chat_session.get("tools"))
        return cls(id="agent_instance_0", name="default_agent", interactions=steps)


class MultiAgentTrace(_Model):
    """A whole agent run: agents by instance id, starting from the root."""

    root_agent_instance_id: str
    agent_instance_by_id: dict[str, AgentInstance]

    @model_validator(mode="after")
    def _consistent(self) -> MultiAgentTrace:
        agents = self.agent_instance_by_id
        if self.root_agent_instance_id not in agents:
            raise ValueError(
                f"root_agent_instance_id {self.root_agent_instance_id!r} is not a key of "
                "agent_instance_by_id"
            )
        for key, agent in agents.items():
            if agent.id != key:
                raise ValueError(
                    f"agent_instance_by_id[{key!r}].id is {agent.id!r}; they must match"
                )
            for i, step in enumerate(agent.interactions):
                if isinstance(step, str) and step not in agents:
                    raise ValueError(
                        f"agent_instance_by_id[{key!r}].interactions[{i}] names sub-agent "
                        f"{step!r}, which is not in agent_instance_by_id"
                    )
        if self.llm_interaction_count() == 0:
            raise ValueError(
                "the trace has no LLM interaction: a trace needs at least one model call "
                "to evaluate"
            )
        return self

    def llm_interaction_count(self) -> int:
        return sum(
            1
            for a in self.agent_instance_by_id.values()
            for step in a.interactions
            if isinstance(step, LLMInteraction)
        )


def content_text(content: Any) -> str:
    """A chat message's content as one string: text parts joined, anything else as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content
        )
    return json.dumps(content, default=str)


def tool_spec(tool: Mapping[str, Any]) -> ToolSpec:
    """One tool definition (OpenAI Chat Completions or Responses, or Anthropic) as a trace tool;
    built-in tools and remote MCP servers, which have no name, are named after their kind or
    server label."""
    inner = tool.get("function")
    fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else tool
    name = fn.get("name")
    kind = str(tool.get("type") or "tool")
    if not name:
        label = tool.get("server_label")
        name = f"mcp:{label}" if label else kind
        described = f"built-in {kind} tool"
        if tool.get("server_url"):
            described = f"remote MCP server at {tool['server_url']}"
        return ToolSpec(name=str(name), description=described, parameters="{}")
    params = fn.get("parameters", fn.get("input_schema", {}))
    return ToolSpec(
        name=str(name),
        description=str(fn.get("description") or ""),
        parameters=params if isinstance(params, str) else json.dumps(params),
    )


def trace_from_messages(
    messages: Iterable[Mapping[str, Any]],
    *,
    name: str = "agent",
    agent_id: str | None = None,
    tools: Iterable[Mapping[str, Any]] | None = None,
) -> MultiAgentTrace:
    """Build a one-agent trace from an OpenAI-style chat message list.

    Every assistant turn becomes one LLM interaction whose inputs are the messages before it.
    """
    aid = agent_id or str(uuid.uuid4())
    interactions = _interactions(messages, tools)
    return MultiAgentTrace(
        root_agent_instance_id=aid,
        agent_instance_by_id={aid: AgentInstance(id=aid, name=name, interactions=interactions)},
    )


def _interactions(
    messages: Iterable[Mapping[str, Any]], tools: Iterable[Mapping[str, Any]] | None
) -> list[str | LLMInteraction]:
    """One LLM interaction per assistant turn, its inputs the messages before it."""
    specs = [tool_spec(t) for t in tools] if tools else None
    history: list[InputMessage] = []
    interactions: list[str | LLMInteraction] = []
    for m in messages:
        if m.get("role") != "assistant":
            history.extend(input_messages([m]))
            continue
        outputs = output_messages([m])
        interactions.append(
            LLMInteraction(
                input_messages=list(history), output_messages=outputs, tools_available=specs
            )
        )
        history.extend(
            InputMessage(role="assistant", type=o.type, content=o.content) for o in outputs
        )
    return interactions


def chat_interaction(
    inputs: Iterable[Mapping[str, Any]],
    outputs: Iterable[Mapping[str, Any]],
    tools: list[ToolSpec] | None,
    *,
    keep_empty: bool = False,
) -> LLMInteraction:
    """One model call from its chat messages (OpenAI-style dicts) and the tools offered; an
    unnamed tool response is named after the call it answers, and ``keep_empty`` keeps an empty
    text answer."""
    return LLMInteraction(
        input_messages=input_messages(inputs, name_responses=True),
        output_messages=output_messages(outputs, keep_empty=keep_empty),
        tools_available=tools,
    )


def _calls(msg: Mapping[str, Any]) -> list[ToolCall]:
    out = []
    for call in msg.get("tool_calls") or ():
        fn = call.get("function") or {}
        args = fn.get("arguments")
        out.append(
            ToolCall(
                id=str(call.get("id") or ""),
                name=str(fn.get("name") or ""),
                parameters=args if isinstance(args, str) and args else json.dumps(args or {}),
            )
        )
    return out


def _turns(
    messages: Iterable[Mapping[str, Any]],
) -> Iterator[tuple[Mapping[str, Any], str, list[ToolCall] | None, str | None]]:
    """Each message with its text and tool calls; a tool result (``None`` for calls) with the
    name of the earlier call it answers."""
    names: dict[str, str] = {}  # tool call id -> tool name
    for msg in messages:
        text = content_text(msg.get("content"))
        if msg.get("role") in ("tool", "function"):
            yield msg, text, None, names.get(str(msg.get("tool_call_id") or ""))
            continue
        calls = _calls(msg)
        names.update((call.id, call.name) for call in calls)
        yield msg, text, calls, None


def input_messages(
    messages: Iterable[Mapping[str, Any]], *, name_responses: bool = False
) -> list[InputMessage]:
    """Chat messages (OpenAI-style dicts) as trace inputs: tool results become tool responses,
    assistant tool calls become one tool-call message each.

    Args:
        messages: The model call's input messages.
        name_responses: Name an unnamed tool response after the earlier call it answers.
    """
    out: list[InputMessage] = []
    for msg, text, calls, answered in _turns(messages):
        role = str(msg.get("role") or "user")
        if calls is None:
            name = msg.get("name") or (answered if name_responses else None)
            response = ToolResponse(id=str(msg.get("tool_call_id") or ""), response=text, name=name)
            out.append(InputMessage(role="tool", type="tool_response", content=response))
            continue
        if text or not calls:
            out.append(InputMessage(role=role, type="text", content=text))
        out.extend(InputMessage(role=role, type="tool_call", content=call) for call in calls)
    return out


def output_messages(
    messages: Iterable[Mapping[str, Any]], *, keep_empty: bool = False
) -> list[OutputMessage]:
    """The model's answer: its text and tool calls, in order. What a built-in tool returned
    inside the same call (a ``tool`` message) is kept as text naming the tool.

    Args:
        messages: The model call's output messages (OpenAI-style dicts).
        keep_empty: Keep an empty text answer (a message with neither text nor tool calls).
    """
    out: list[OutputMessage] = []
    for msg, text, calls, answered in _turns(messages):
        if calls is None:
            tool = answered or msg.get("name") or "tool"
            out.append(OutputMessage(type="text", content=f"[{tool} result] {text}"))
            continue
        if text or (keep_empty and not calls):
            out.append(OutputMessage(type="text", content=text))
        out.extend(OutputMessage(type="tool_call", content=call) for call in calls)
    return out
