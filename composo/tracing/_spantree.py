"""Span trees (OTLP files, the OTLP endpoint) -> ``MultiAgentTrace``.

Spans are walked in start order into a ``TraceRecorder`` by the kinds ``_boundaries`` gives: an
LLM span inside another counts once, tool spans answer the last model call's tool call, and any
other span with a payload is context for the next model call. What could not be used is said in
``Converted.notes``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from composo._core.trace import InputMessage, MultiAgentTrace, ToolCall, ToolResponse
from composo.errors import ComposoValidationError
from composo.tracing._boundaries import opening, span_kind
from composo.tracing._genai import (
    interaction_from_attributes,
    tool_arguments,
    tool_call_id,
    tool_result,
)
from composo.tracing._recorder import Agent, TraceRecorder

__all__ = ["CONTEXT_LIMIT", "Converted", "SpanRecord", "convert_spans"]

CONTEXT_LIMIT = 4000  # characters of a context span's input or output kept in the trace


@dataclass
class SpanRecord:
    """One finished span, as read from an export or a live provider."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    attributes: dict[str, Any] = field(default_factory=dict)
    start: int = 0
    end: int = 0
    error: str | None = None  # the status description when the span failed
    scope: str = ""
    # its GenAI events (name, attributes): the older conventions carry messages in them
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def kind(self) -> str | None:
        return span_kind(self.attributes)


@dataclass
class Converted:
    """The result of converting one trace id's spans.

    Attributes:
        trace_id: The OpenTelemetry trace id (hex).
        trace: The trace, or ``None`` when ``error`` says why there is none.
        error: Why no trace could be formed (no model call, too many spans, damaged input).
        notes: What was read differently from a plain model call, or left out, and why.
        spans: How many spans the trace id had.
    """

    trace_id: str
    trace: MultiAgentTrace | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    spans: int = 0


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= CONTEXT_LIMIT else text[:CONTEXT_LIMIT] + " [...]"


def _context(span: SpanRecord) -> InputMessage | None:
    attrs = span.attributes
    parts = []
    for key, genai in (("input", "gen_ai.retrieval.query.text"), ("output", None)):
        value = attrs.get(f"{key}.value", attrs.get(genai) if genai else None)
        if value not in (None, ""):
            parts.append(f"{key}: {_text(value)}")
    found = attrs.get("gen_ai.retrieval.documents")
    if found not in (None, "", []) and "output.value" not in attrs:
        parts.append("documents: " + _text(found))
    docs = sorted(
        k for k in attrs if k.startswith("retrieval.documents.") and k.endswith(".content")
    )
    if docs and "output.value" not in attrs:
        parts.append("documents: " + _text(" | ".join(str(attrs[k]) for k in docs)))
    if not parts:
        return None
    kind = (span.kind or "span").lower()
    return InputMessage(
        role="context", type=kind, content=f"[{kind} {span.name}] " + "; ".join(parts)
    )


class _Walk:
    """The state of one conversion: the recorder, pending context per agent, what was skipped."""

    def __init__(self, spans: list[SpanRecord]) -> None:
        self.recorder = TraceRecorder(kind="agent spans")
        ids = {s.span_id for s in spans}
        self.children: dict[str | None, list[SpanRecord]] = {}
        for s in spans:
            parent = s.parent_id if s.parent_id in ids else None
            self.children.setdefault(parent, []).append(s)
        for kids in self.children.values():
            kids.sort(key=lambda s: (s.start, s.end, s.span_id))
        self.orphans = sum(1 for s in spans if s.parent_id and s.parent_id not in ids)
        self.context: dict[Agent, list[InputMessage]] = {}
        self.last_calls: dict[Agent, list[ToolCall]] = {}
        self.skipped: Counter[str] = Counter()
        self.kept: Counter[str] = Counter()
        self.implicit: Agent | None = None

    def agent_for(self, agent: Agent | None, span: SpanRecord) -> Agent:
        if agent is not None:
            return agent
        if self.implicit is None:
            self.implicit = self.recorder.agent_started(span.span_id, "agent")
        return self.implicit

    def has_llm(self, span: SpanRecord) -> bool:
        todo = list(self.children.get(span.span_id, ()))
        while todo:
            s = todo.pop()
            if s.kind == "LLM":
                return True
            if s.kind == "AGENT":
                continue
            todo.extend(self.children.get(s.span_id, ()))
        return False

    def run(self) -> None:
        # (span, agent it runs in, inside a model call) ; iterative, for arbitrarily deep trees
        stack: list[tuple[SpanRecord, Agent | None, bool]] = [
            (s, None, False) for s in reversed(self.children.get(None, []))
        ]
        while stack:
            span, agent, in_llm = stack.pop()
            inner = self._visit(span, agent, in_llm)
            for child in reversed(self.children.get(span.span_id, [])):
                stack.append((child, *inner))

    def _visit(
        self, span: SpanRecord, agent: Agent | None, in_llm: bool
    ) -> tuple[Agent | None, bool]:
        """Record one span; returns where the spans under it run (agent, inside a model call)."""
        kind = span.kind
        if in_llm:
            if kind == "LLM":
                self.skipped["model call inside another model call (counted once)"] += 1
            return agent, True
        first = agent is None and self.implicit is None
        opened = opening(kind, span.attributes, span.name, span.span_id, first=first)
        if opened is not None and opened.agent:
            return self.recorder.agent_started(opened.id, opened.name, agent), False
        if kind == "LLM":
            self._model_call(span, self.agent_for(agent, span))
            return agent, True
        if opened is not None:
            owner = self.agent_for(agent, span)
            self._tool(span, owner, opened.name)
            if self.has_llm(span):
                return self.recorder.agent_started(opened.id, opened.name, owner), False
        elif kind != "CHAIN":
            self._as_context(span, agent, kind)
        return agent, False

    def _as_context(self, span: SpanRecord, agent: Agent | None, kind: str | None) -> None:
        message = _context(span)
        if message is None:
            self.skipped[f"{(kind or 'unlabelled').lower()} span without a payload"] += 1
        else:
            self.context.setdefault(self.agent_for(agent, span), []).append(message)
            self.kept[(kind or "unlabelled").lower()] += 1

    def _model_call(self, span: SpanRecord, agent: Agent) -> None:
        if span.error is not None:
            self.skipped["failed model call"] += 1
            return
        try:
            call = interaction_from_attributes(span.attributes, span.events)
        except (ValueError, TypeError, KeyError) as exc:
            self.skipped[f"model call {span.name!r} that could not be read ({exc})"] += 1
            return
        if not call.input_messages and not call.output_messages:
            self.skipped["model call without input or output messages"] += 1
            return
        extra = self.context.pop(agent, None)
        if extra:
            call = call.model_copy(update={"input_messages": [*call.input_messages, *extra]})
        self.recorder.record(agent, call)
        self.last_calls[agent] = [
            m.content for m in call.output_messages if isinstance(m.content, ToolCall)
        ]

    def _tool(self, span: SpanRecord, agent: Agent, name: str) -> None:
        attrs = span.attributes
        known = tool_call_id(attrs)
        calls = self.last_calls.get(agent, [])
        match = next((c for c in calls if known and c.id == known), None)
        if match is None:
            match = next((c for c in calls if c.name == name), None)
        if match is not None:
            calls.remove(match)
            call_id = match.id
        else:
            call_id = known or ""
            # a GenAI call its model call did not show: keep it (an output function that no
            # tool call ran has no call id, and is no call of the model's)
            genai = known and "gen_ai.tool.name" in attrs
            arguments = tool_arguments(attrs) if genai else None
            if arguments is not None:
                self.recorder.tool_called(
                    agent, ToolCall(id=call_id, name=name, parameters=arguments)
                )
        output = tool_result(attrs, span.events)
        if output is None:
            self.skipped["tool span without an output"] += 1
            return
        self.recorder.tool_responded(
            agent, ToolResponse(id=call_id, response=_text(output), name=name)
        )

    def notes(self) -> list[str]:
        out = []
        if self.orphans:
            out.append(f"{self.orphans} span(s) whose parent is missing were read as top-level")
        for kind, n in sorted(self.kept.items()):
            out.append(f"{n} {kind} span(s) kept as context of the next model call")
        left = sum(len(v) for v in self.context.values())
        if left:
            out.append(
                f"{left} context span(s) came after their agent's last model call and are not "
                "in the trace"
            )
        for reason, n in sorted(self.skipped.items()):
            out.append(f"{n} {reason} left out")
        return out


def convert_spans(trace_id: str, spans: Iterable[SpanRecord]) -> Converted:
    """One trace id's finished spans (in any order) as a trace, or the error saying why they
    form none, with notes on what was left out."""
    items = list(spans)
    walk = _Walk(items)
    walk.run()
    notes = walk.notes()
    out = Converted(trace_id, notes=notes, spans=len(items))
    if walk.recorder.interaction_count() == 0:
        kinds = Counter(s.kind or "unlabelled" for s in items)
        found = ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items())) or "none"
        out.error = (
            f"trace {trace_id}: no LLM interaction among its {len(items)} span(s) (span kinds: "
            f"{found}); a trace needs at least one model call with its messages, as OpenInference "
            "llm.* attributes or by the OpenTelemetry GenAI conventions (gen_ai.operation.name "
            "'chat' with gen_ai.input.messages / gen_ai.output.messages or their events)"
        )
        if notes:
            out.error += f" ({'; '.join(notes)})"
        return out
    try:
        out.trace = walk.recorder.trace(drop_empty=True, name="agent", root_id=trace_id)
    except ComposoValidationError as exc:
        out.error = f"trace {trace_id}: {exc}"
    return out
