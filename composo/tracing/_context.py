"""Which ``AgentTracer`` is running here: a context-local stack, free of optional imports.

A ``ContextVar`` holds a tuple of the active tracers, innermost last. Threads start with an empty
stack and asyncio tasks copy the stack of the code that created them, so agents running at the
same time never see each other's calls. Integrations that capture model calls on their own (not
through OpenTelemetry) hand them to ``record_interaction``.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from composo._core.trace import LLMInteraction
    from composo.tracing._agent import AgentTracer

__all__ = ["current_tracer", "pop", "push", "record_interaction"]

_active: ContextVar[tuple[AgentTracer, ...]] = ContextVar("composo_agent_tracers", default=())


def current_tracer() -> AgentTracer | None:
    """The innermost ``AgentTracer`` active in this context, or ``None``."""
    stack = _active.get()
    return stack[-1] if stack else None


def push(tracer: AgentTracer) -> Token[tuple[AgentTracer, ...]]:
    return _active.set((*_active.get(), tracer))


def pop(tracer: AgentTracer, token: Token[tuple[AgentTracer, ...]] | None) -> None:
    """Deactivate ``tracer``; tolerant of exits in another context (e.g. an async generator)."""
    if token is not None:
        try:
            _active.reset(token)
            return
        except ValueError:
            pass
    stack = _active.get()
    if tracer in stack:
        _active.set(tuple(t for t in stack if t is not tracer))


def record_interaction(interaction: LLMInteraction) -> bool:
    """Append one model call to the innermost active ``AgentTracer``.

    Args:
        interaction: The finished model call.

    Returns:
        ``False`` (and nothing is kept) when no tracer is active in this context.
    """
    tracer = current_tracer()
    if tracer is None:
        return False
    tracer._record(interaction)
    return True
