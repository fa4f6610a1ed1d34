"""The OpenTelemetry span processor that hands LLM spans to the active ``AgentTracer``.

A span is claimed when it starts, in the caller's context, by the innermost active tracer; its
place is released when it ends. Spans outside any tracer cost one context-variable read. An LLM
span started inside another claimed LLM span (a framework's call wrapping the OpenAI client's)
is the same model call and is not counted twice.
"""

from __future__ import annotations

import threading
import weakref

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from composo.tracing import context
from composo.tracing.agent import _Slot
from composo.tracing.spans import is_llm_span

__all__ = ["AgentSpanProcessor"]


class AgentSpanProcessor(SpanProcessor):
    """Route finished LLM spans to the tracer that was active where they started."""

    def __init__(self) -> None:
        self.active = True
        # span id -> the call's place; weak, so a span that never ends (an abandoned stream)
        # is forgotten together with its tracer.
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
        if parent is not None and self._claimed:
            with self._lock:
                outer = self._claimed.get(parent.span_id)
                if outer is not None:
                    # Inside a claimed LLM span: part of that call. Remembered so that its own
                    # children are recognised too; only the owner span fills the slot.
                    self._claimed[span_id] = outer
                    return
        if not is_llm_span(span.attributes):
            return
        slot = tracer._reserve(span_id)
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
        if slot is not None and slot.owner == span_id:
            scope = span.instrumentation_scope
            slot.window = (scope.name if scope else "", span.start_time or 0, span.end_time or 0)
            slot.span = span

    def shutdown(self) -> None:
        self.active = False

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def pending(self) -> int:
        """How many claimed spans have not ended (for tests of bounded memory)."""
        return len(self._claimed)
