"""The OpenTelemetry span processor that hands LLM spans to the active ``AgentTracer``.

A span is claimed when it starts, in the caller's context, by the innermost active tracer; its
place is filled or given back when it ends. Spans outside any tracer cost one context-variable
read. Some instrumentors (OpenInference's LangChain one) only say that a span is a model call
when it ends, so a span started without a kind takes a place too (keeping the call in order)
and gives it back if it ends as anything else. A model call inside another (a framework's call
wrapping the OpenAI client's) is one call and is not counted twice: known at the start, the inner
span never takes a place; known only at the end, the inner call is left out of the trace.
"""

from __future__ import annotations

import threading
import weakref

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from composo.tracing import _context as context
from composo.tracing._agent import _Slot
from composo.tracing._spans import has_span_kind, is_llm_span

__all__ = ["AgentSpanProcessor"]


class AgentSpanProcessor(SpanProcessor):
    """Route finished LLM spans to the tracer that was active where they started."""

    def __init__(self) -> None:
        self.active = True
        # span id -> the place it fills, or for a span inside a claimed one, the place of the
        # nearest enclosing span that is or may become a model call. Weak, so that a span that
        # never ends (an abandoned stream) is forgotten together with its tracer.
        self._claimed: weakref.WeakValueDictionary[int, _Slot] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if not self.active:
            return
        tracer = context.current_tracer()
        if tracer is None:
            return
        span_id = span.context.span_id
        parent = span.parent
        outer: _Slot | None = None
        if parent is not None and self._claimed:
            with self._lock:
                outer = self._claimed.get(parent.span_id)
                if outer is not None and outer.llm:
                    # Inside a model call: part of it. Remembered so that its own children are
                    # recognised too; only the owner span fills the slot.
                    self._claimed[span_id] = outer
                    return
        attributes = span.attributes
        llm = is_llm_span(attributes)
        if not llm and has_span_kind(attributes):
            # Known not to be a model call; the calls inside it still belong to ``outer``.
            if outer is not None:
                with self._lock:
                    self._claimed[span_id] = outer
            return
        slot = tracer._reserve(span_id, llm=llm, parent=outer)
        with self._lock:
            self._claimed[span_id] = slot

    def on_end(self, span: ReadableSpan) -> None:
        if not self._claimed:
            return
        ctx = span.context
        if ctx is None:
            return
        span_id = ctx.span_id
        with self._lock:
            slot = self._claimed.pop(span_id, None)
        if slot is None or slot.owner != span_id:
            return
        if is_llm_span(span.attributes):
            scope = span.instrumentation_scope
            slot.fill(span, (scope.name if scope else "", span.start_time or 0, span.end_time or 0))
        else:
            slot.release()

    def shutdown(self) -> None:
        self.active = False

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def pending(self) -> int:
        """How many claimed spans have not ended (for tests of bounded memory)."""
        return len(self._claimed)
