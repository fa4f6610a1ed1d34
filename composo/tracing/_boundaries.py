"""Which OpenInference spans begin an agent instance, and what that instance is called.

One rule for both ways spans become a trace: the span-tree converter (OTLP files and the OTLP
endpoint, ``composo.tracing._spantree``) and the live span processor feeding an active
``AgentTracer`` (``composo.tracing._processor``). Nothing here imports OpenTelemetry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from composo.tracing._spans import SPAN_KIND

__all__ = [
    "AGENT_ID",
    "AGENT_NAME",
    "AGENT_SCOPE",
    "agent_identity",
    "span_kind",
    "starts_agent",
    "tool_identity",
]

AGENT_ID = "composo.agent.id"
"""Span attribute carrying an agent instance id (``AgentTracer`` sets it on its agent spans)."""
AGENT_NAME = "agent.name"
AGENT_SCOPE = "composo.tracing"
"""The instrumentation scope of ``AgentTracer``'s own agent spans."""


def span_kind(attributes: Mapping[str, Any] | None) -> str | None:
    """The OpenInference span kind, upper-cased (``None`` while a span does not say)."""
    value = attributes.get(SPAN_KIND) if attributes else None
    return str(value).upper() if value else None


def starts_agent(kind: str | None, attributes: Mapping[str, Any], *, first: bool) -> bool:
    """Whether a span begins an agent instance.

    An ``AGENT`` span does, and so does any span but a model call that names ``agent.name``; a
    ``CHAIN`` span does when it is the first boundary of its trace (``first``: no agent runs
    where it starts), so a framework's top-level run is an agent even without agent spans.
    """
    if kind == "AGENT" or (kind != "LLM" and attributes.get(AGENT_NAME)):
        return True
    return first and kind == "CHAIN"


def agent_identity(attributes: Mapping[str, Any], span_name: str, span_id: str) -> tuple[str, str]:
    """``(agent id, agent name)`` of the instance an agent span begins (``span_id`` in hex)."""
    agent_id = str(attributes.get(AGENT_ID) or span_id)
    return agent_id, str(attributes.get(AGENT_NAME) or span_name or "agent")


def tool_identity(attributes: Mapping[str, Any], span_name: str, span_id: str) -> tuple[str, str]:
    """``(agent id, agent name)`` of the sub-agent made of model calls inside a tool span that
    has no agent span of its own: it is named after the tool."""
    return span_id, str(attributes.get("tool.name") or span_name or "tool")
