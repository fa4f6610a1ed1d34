"""The OpenTelemetry span processor that routes model-call spans to the active ``AgentTracer``.

A span takes its place when it starts, in the caller's context, and fills or gives it back when
it ends (some instrumentors name a model call only at its end). A call counts once: a model call
inside another is part of it, and a span that ended just before another feed's record of the same
answer gives way. An instrumentor's agent or tool span opens a sub-agent for the spans under it.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from composo._core.trace import LLMInteraction
from composo.tracing._agent import AgentTracer, current_tracer
from composo.tracing._boundaries import AGENT_SCOPE, opening, span_kind
from composo.tracing._genai import interaction_from_span
from composo.tracing._recorder import Agent, RecordedStep, Step, Within, _ToolEvent

__all__ = ["AgentSpanProcessor", "recorded_elsewhere"]

recorded_elsewhere: tuple[Callable[[Span], bool], ...] = ()
"""Feeds that record some calls from their framework's own events (the OpenAI Agents SDK's,
``composo.tracing._openai_agents``): a span one of them claims at its start is left out."""


class _Slot(Step):
    """A span's place in an agent's history: running, finished as a model call, or given back
    when it ends as anything else."""

    __slots__ = ("llm", "owner", "parent", "window")

    def __init__(self, owner: int, *, llm: bool, parent: _Slot | None) -> None:
        super().__init__()
        self.owner = owner  # the id of the span that fills this slot
        # whether that span is known to be a model call (from its start, or once it ended)
        self.llm = llm
        # the place of the nearest enclosing span not yet known to be a model call when this one
        # started: if it turns out to be one, this call is part of it
        self.parent = parent
        # (instrumentation scope, start ns, end ns) of that span, to recognise nested calls
        self.window: tuple[str, int, int] | None = None

    def fill_span(self, span: ReadableSpan) -> None:
        """The owner span ended as a model call; it is converted when the trace is read."""
        scope = span.instrumentation_scope
        self.window = (scope.name if scope else "", span.start_time or 0, span.end_time or 0)
        self.llm = True
        self.fill(functools.partial(interaction_from_span, span))

    def inside_call(self) -> bool:
        """Whether an enclosing span turned out to be a model call that this one is part of."""
        outer = self.parent
        while outer is not None and not outer.llm:
            outer = outer.parent
        return outer is not None

    def omitted(
        self, history: list[Step | Agent | _ToolEvent], found: dict[int, LLMInteraction | None]
    ) -> bool:
        call = found.get(id(self))
        return (
            call is None
            or self.inside_call()
            or _wrapped(self, call, history, found)
            or _recorded_too(self, history, found)
        )


def _wrapped(
    slot: _Slot,
    call: LLMInteraction,
    steps: list[Step | Agent | _ToolEvent],
    found: dict[int, LLMInteraction | None],
) -> bool:
    """Whether another instrumentation's LLM span around this one reports the same call (a
    framework's chat model calling the OpenAI client, when the framework does not make its span
    the OpenTelemetry parent)."""
    if slot.window is None:
        return False
    scope, start, end = slot.window
    for other in steps:
        if other is slot or not isinstance(other, _Slot) or other.window is None:
            continue
        o_scope, o_start, o_end = other.window
        if o_scope != scope and o_start <= start and end <= o_end:
            outer = found[id(other)]
            if outer is not None and _answer(outer) == _answer(call):
                return True
    return False


def _recorded_too(
    slot: _Slot,
    steps: list[Step | Agent | _ToolEvent],
    found: dict[int, LLMInteraction | None],
) -> bool:
    """Whether a call recorded by another feed after this span ended is the same call: each
    record pairs with the latest unpaired span before it with the same answer."""
    if slot.window is None or not any(isinstance(s, RecordedStep) for s in steps):
        return False
    waiting: list[tuple[_Slot, int, list[tuple[str, str]]]] = []  # (span, its end, answer)
    for step in steps:
        call = found.get(id(step))
        if call is None:
            continue
        if isinstance(step, _Slot) and step.window is not None:
            waiting.append((step, step.window[2], _answer(call)))
        elif isinstance(step, RecordedStep):
            answer = _answer(call)
            same = [
                i for i, (_, end, said) in enumerate(waiting) if said == answer and end <= step.at
            ]
            if same:  # the latest unpaired span before it
                if waiting[same[-1]][0] is slot:
                    return True
                del waiting[same[-1]]
    return False


def _answer(call: LLMInteraction) -> list[tuple[str, str]]:
    """What the model answered, independent of how an instrumentation formats arguments."""
    return [
        ("text", m.content) if isinstance(m.content, str) else ("call", m.content.name)
        for m in call.output_messages
    ]


class AgentSpanProcessor(SpanProcessor):
    """Route finished LLM spans to the tracer that was active where they started."""

    def __init__(self) -> None:
        self.active = True
        # span id -> the place it fills (a span inside a claimed one: the nearest enclosing
        # span's that is or may become a model call); weak, so a span that never ends is
        # forgotten with its tracer
        self._claimed: weakref.WeakValueDictionary[int, _Slot] = weakref.WeakValueDictionary()
        # span id -> the tracer whose instrumentor agent (or tool) it runs under; weak too
        self._under: weakref.WeakValueDictionary[int, AgentTracer] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        tracer = self._tracer_for(span)
        if tracer is None:
            return
        span_id = span.context.span_id
        parent = span.parent
        spans = tracer._spans
        within = spans.get(parent.span_id) if parent is not None and spans else None
        outer, inside = self._outer(tracer, span_id, parent, within)
        if inside:
            return
        kind = span_kind(span.attributes)
        llm = kind == "LLM"
        if not llm and kind is not None:
            # Known not to be a model call; the calls inside it still belong to ``outer``.
            self._claim(tracer, span_id, outer, self._boundary(tracer, span, kind, within))
            return
        slot = _Slot(span_id, llm=llm, parent=outer)
        tracer._reserve(slot, self._target(tracer, within, llm=llm))
        self._claim(tracer, span_id, slot, within)

    def _tracer_for(self, span: Span) -> AgentTracer | None:
        """The tracer active where ``span`` starts, unless another feed records it."""
        if not self.active:
            return None
        tracer = current_tracer()
        if tracer is None or any(claims(span) for claims in recorded_elsewhere):
            return None
        return tracer

    def _outer(
        self, tracer: AgentTracer, span_id: int, parent: Any, within: Within | None
    ) -> tuple[_Slot | None, bool]:
        """The place of the nearest enclosing span that is or may become a model call, and
        whether that span is one already (then this span is part of it, and claimed here)."""
        if parent is None or not self._claimed:
            return None, False
        with self._lock:
            outer = self._claimed.get(parent.span_id)
        if outer is None or not outer.llm:
            return outer, False
        # remembered so that its own children are recognised too; only the owner fills the slot
        self._claim(tracer, span_id, outer, within)
        return outer, True

    def _target(self, tracer: AgentTracer, within: Within | None, *, llm: bool) -> Agent | None:
        """The agent whose history a span starting under ``within`` takes a place in."""
        if within is None:
            return None
        if llm and within.agent is None:
            with self._lock:
                if within.agent is None:
                    # the first model call inside a tool: the tool's calls are a sub-agent
                    within.agent = tracer._agent_started(within.id, within.name, within.owner)
        return within.here

    def _claim(
        self, tracer: AgentTracer, span_id: int, slot: _Slot | None, within: Within | None
    ) -> None:
        """Remember the place ``span_id`` fills (or is inside) and, under a boundary, where its
        children record."""
        if slot is None and within is None:
            return
        with self._lock:
            if slot is not None:
                self._claimed[span_id] = slot
            if within is not None:
                tracer._spans[span_id] = within
                self._under[span_id] = tracer

    def _boundary(
        self, tracer: AgentTracer, span: Span, kind: str, within: Within | None
    ) -> Within | None:
        """What the spans under ``span`` record into: a sub-agent it begins, a tool's calls, or
        where the span itself runs."""
        scope = span.instrumentation_scope
        if scope is not None and scope.name == AGENT_SCOPE:
            return within  # an AgentTracer's own span: that tracer is the agent
        span_id = span.context.span_id
        # never the first boundary: the tracer's own agent already runs here
        attributes = span.attributes or {}
        opened = opening(kind, attributes, span.name, format(span_id, "016x"), first=False)
        if opened is None:
            return within
        above = within.here if within is not None else None
        if opened.agent:
            return Within(span_id, tracer._agent_started(opened.id, opened.name, above))
        return Within(span_id, None, above, opened.id, opened.name)

    def on_end(self, span: ReadableSpan) -> None:
        if not self._claimed and not self._under:
            return
        ctx = span.context
        if ctx is None:
            return
        span_id = ctx.span_id
        with self._lock:
            slot = self._claimed.pop(span_id, None)
            tracer = self._under.pop(span_id, None)
            within = tracer._spans.pop(span_id, None) if tracer is not None else None
        if tracer is not None and within is not None and within.opener == span_id:
            # its sub-agent is done; calls under it still running fill their places later
            tracer._agent_finished(within.agent)
        if slot is None or slot.owner != span_id:
            return
        if span_kind(span.attributes) == "LLM":
            slot.fill_span(span)
        else:
            slot.release()

    def shutdown(self) -> None:
        self.active = False

    def pending(self) -> int:
        """How many claimed spans have not ended (for tests of bounded memory)."""
        return len(self._claimed) + len(self._under)
