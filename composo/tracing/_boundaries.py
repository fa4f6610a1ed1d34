"""A span's kind, and what it opens for the spans under it (an agent instance or a tool): the
one rule for the span-tree converter and the live span processor. The kind is the OpenInference
kind, else the one ``gen_ai.operation.name`` (or older GenAI and OpenLLMetry attributes) gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from composo.tracing._spans import SPAN_KIND

__all__ = [
    "AGENT_ID",
    "AGENT_NAME",
    "AGENT_SCOPE",
    "OPERATION",
    "Opening",
    "opening",
    "span_kind",
]

AGENT_ID = "composo.agent.id"
"""Span attribute carrying an agent instance id (``AgentTracer`` sets it on its agent spans)."""
AGENT_NAME = "agent.name"
AGENT_SCOPE = "composo.tracing"
"""The instrumentation scope of ``AgentTracer``'s own agent spans."""

OPERATION = "gen_ai.operation.name"
GENAI_AGENT_NAME = "gen_ai.agent.name"
GENAI_AGENT_ID = "gen_ai.agent.id"
GENAI_TOOL_NAME = "gen_ai.tool.name"
_ENTITY = "traceloop.entity.name"

# gen_ai.operation.name -> the OpenInference kind it corresponds to. "chat.completions" and
# "text.completions" are Semantic Kernel's names from before the conventions settled.
_OPERATIONS = {
    "invoke_agent": "AGENT",
    "create_agent": "AGENT",
    "chat": "LLM",
    "text_completion": "LLM",
    "generate_content": "LLM",
    "chat.completions": "LLM",
    "text.completions": "LLM",
    "execute_tool": "TOOL",
    "embeddings": "EMBEDDING",
    "retrieval": "RETRIEVER",
    "invoke_workflow": "CHAIN",
}
# OpenLLMetry's own span kinds (traceloop.span.kind) and model call types (llm.request.type)
_TRACELOOP = {"agent": "AGENT", "tool": "TOOL", "workflow": "CHAIN", "task": "CHAIN"}
_REQUEST_TYPES = {"chat": "LLM", "completion": "LLM", "embedding": "EMBEDDING"}


def span_kind(attributes: Mapping[str, Any] | None) -> str | None:
    """The span's kind, upper-cased (``AGENT``, ``LLM``, ``TOOL``, ``CHAIN``...); ``None`` while
    a span does not say. The GenAI tool and agent names count last: PydanticAI's spans carried
    them before they set the operation."""
    if not attributes:
        return None
    value = attributes.get(SPAN_KIND)
    if value:
        return str(value).upper()
    operation = attributes.get(OPERATION)
    if operation:
        text = str(operation).lower()
        return _OPERATIONS.get(text, text.upper())
    request = attributes.get("llm.request.type")
    if request and str(request).lower() in _REQUEST_TYPES:
        return _REQUEST_TYPES[str(request).lower()]
    traceloop = attributes.get("traceloop.span.kind")
    if traceloop and str(traceloop).lower() in _TRACELOOP:
        return _TRACELOOP[str(traceloop).lower()]
    if attributes.get(GENAI_TOOL_NAME):
        return "TOOL"
    if attributes.get(GENAI_AGENT_NAME):
        return "AGENT"
    return None


class Opening(NamedTuple):
    """What a span opens: an agent instance (``agent``), or a tool whose model calls, if any,
    form a sub-agent with this id and name."""

    agent: bool
    id: str
    name: str


def opening(
    kind: str | None, attributes: Mapping[str, Any], span_name: str, span_id: str, *, first: bool
) -> Opening | None:
    """What a span of ``kind`` opens for the spans under it (``span_id`` in hex), or ``None``.

    An agent: an ``AGENT`` span, any span but a model call naming ``agent.name``, and a ``CHAIN``
    span when no agent runs where it starts (``first``), so a framework's top-level run is an
    agent. ``gen_ai.agent.name`` only says which agent made a model call or tool call, so it
    begins nothing. Otherwise a ``TOOL`` span opens a tool.
    """
    if (
        kind == "AGENT"
        or (kind != "LLM" and attributes.get(AGENT_NAME))
        or (first and kind == "CHAIN")
    ):
        # the id is the span's: gen_ai.agent.id names the agent, which may run several times
        agent_id = str(attributes.get(AGENT_ID) or span_id)
        names = (AGENT_NAME, GENAI_AGENT_NAME, _ENTITY, GENAI_AGENT_ID)
        return Opening(True, agent_id, _name(attributes, span_name, names, "agent"))
    if kind == "TOOL":
        tool = _name(attributes, span_name, ("tool.name", GENAI_TOOL_NAME, _ENTITY), "tool")
        return Opening(False, span_id, tool)
    return None


def _name(attributes: Mapping[str, Any], span_name: str, keys: Iterable[str], default: str) -> str:
    """The first name ``keys`` give (OpenLLMetry's entity name only on its own spans), else the
    span's name."""
    for key in keys:
        found = attributes.get(key)
        if found and (key != _ENTITY or attributes.get("traceloop.span.kind")):
            return str(found)
    return _after_operation(span_name) or default


def _after_operation(span_name: str) -> str:
    """``"invoke_agent researcher"`` -> ``"researcher"``: the GenAI span names put the operation
    first; any other name is kept whole."""
    operation, _, rest = span_name.partition(" ")
    if rest and operation in _OPERATIONS:
        return rest.strip()
    return span_name
