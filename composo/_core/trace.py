"""Multi-agent trace models, exactly as the platform's trace endpoint takes them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
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


def _tool_spec(tool: Mapping[str, Any]) -> ToolSpec:
    fn = tool.get("function", tool)
    params = fn.get("parameters", fn.get("input_schema", {}))
    return ToolSpec(
        name=str(fn.get("name", "")),
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
    specs = [_tool_spec(t) for t in tools] if tools else None
    history: list[InputMessage] = []
    interactions: list[str | LLMInteraction] = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            outputs: list[OutputMessage] = []
            text = content_text(m.get("content"))
            if text:
                outputs.append(OutputMessage(type="text", content=text))
            for call in m.get("tool_calls") or ():
                fn = call.get("function", {})
                outputs.append(
                    OutputMessage(
                        type="tool_call",
                        content=ToolCall(
                            id=str(call.get("id", "")),
                            name=str(fn.get("name", "")),
                            parameters=str(fn.get("arguments") or "{}"),
                        ),
                    )
                )
            interactions.append(
                LLMInteraction(
                    input_messages=list(history), output_messages=outputs, tools_available=specs
                )
            )
            history.extend(
                InputMessage(role="assistant", type=o.type, content=o.content) for o in outputs
            )
        elif role == "tool":
            history.append(
                InputMessage(
                    role="tool",
                    type="tool_response",
                    content=ToolResponse(
                        id=str(m.get("tool_call_id", "")),
                        response=content_text(m.get("content")),
                        name=m.get("name"),
                    ),
                )
            )
        else:
            history.append(
                InputMessage(role=str(role), type="text", content=content_text(m.get("content")))
            )
    return interactions
