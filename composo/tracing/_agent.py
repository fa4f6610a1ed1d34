"""``AgentTracer`` and ``agent_tracer``: mark where an agent runs, get its calls back as a trace.

Tracers entered inside a root tracer, and an instrumented framework's agent spans, are sub-agents
of its recording. Which tracer runs here is a context-local stack: threads start empty and asyncio
tasks copy their creator's, so agents running at once never see each other's calls.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from contextvars import ContextVar, Token
from typing import Any, ParamSpec, TypeVar, overload

from composo._core.trace import LLMInteraction, MultiAgentTrace
from composo.errors import ComposoValidationError
from composo.tracing._recorder import (
    Agent,
    Capture,
    RecordedStep,
    Step,
    TraceRecorder,
    Within,
)

__all__ = ["AgentTracer", "agent_tracer", "current_tracer", "record_interaction"]

_log = logging.getLogger("composo.tracing")

P = ParamSpec("P")
R = TypeVar("R")

_NO_CALLS = (
    "AgentTracer(name={name!r}) captured no LLM call, so there is no trace to evaluate. "
    "Call ComposoTracer.init(instruments=Instruments.OPENAI) once before the model is called, and "
    "make the calls inside the `with AgentTracer(...)` block (work handed to another thread needs "
    "contextvars.copy_context().run to stay attached to the agent)."
)


def _check_text(field: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ComposoValidationError(
            f"{field}: expected a non-empty string, e.g. AgentTracer({field}='researcher'), "
            f"got {value!r}"
        )
    return value


class AgentTracer(Capture):
    """Collect the model calls made while active into a ``MultiAgentTrace``.

    Use as ``with AgentTracer(name="researcher") as tracer:`` (or ``async with``). A tracer
    entered while another is active becomes a sub-agent of it, referenced from the parent at the
    point it ran; so does each agent an instrumented framework reports (an agent span, or an
    OpenAI Agents SDK agent), with the calls made under it. ``tracer.trace`` can be read inside
    the block (calls so far) or after it.

    Args:
        name: The agent's name (default ``"agent"``); instances of one name are scored together.
        agent_id: The agent instance id (default: a fresh UUID).

    Raises:
        ComposoValidationError: ``name`` or ``agent_id`` is not a non-empty string.
    """

    def __init__(self, name: str | None = None, agent_id: str | None = None) -> None:
        self.name: str = _check_text("name", name) or "agent"
        self.agent_id: str = _check_text("agent_id", agent_id) or str(uuid.uuid4())
        # The recording is shared by a root tracer and every tracer entered inside it.
        self._recorder: TraceRecorder | None = None
        self._agent: Agent | None = None
        self._token: Token[tuple[AgentTracer, ...]] | None = None
        self._span = ExitStack()  # the agent span, with ComposoTracer.init(agent_spans=True)
        # running spans under an instrumentor's agent or tool span -> where they record
        self._spans: dict[int, Within] = {}

    def __repr__(self) -> str:
        return f"AgentTracer(name={self.name!r}, agent_id={self.agent_id!r}, state={self._state})"

    _again = "{self!r} has already run; create a new AgentTracer for each agent run"

    def _activate(self) -> None:
        """A sub-agent of the tracer active here, if any, else the root of a new recording."""
        parent = current_tracer()
        shared = parent._recorder if parent is not None else None
        above = parent._here() if parent is not None and shared is not None else None
        self._start_span()  # after finding ``above``: the agent span becomes the current span
        self._recorder = shared or TraceRecorder(kind="AgentTracers")
        self._agent = self._recorder.agent_started(self.agent_id, self.name, above)
        self._token = _active.set((*_active.get(), self))

    def _deactivate(self) -> None:
        _pop(self, self._token)
        self._token = None
        if self._recorder is not None and self._agent is not None:
            self._recorder.agent_finished(self._agent)
        self._span.close()

    def _start_span(self) -> None:
        """With ``agent_spans`` on, an OpenInference agent span around the run, so exported
        traces carry the agent boundary (read back by ``composo.tracing._spantree``)."""
        module = sys.modules.get("composo.tracing._tracer")  # loaded by ComposoTracer.init
        tracer = module.ComposoTracer.agent_span_tracer() if module is not None else None
        if tracer is not None:
            from composo.tracing._boundaries import AGENT_ID, AGENT_NAME
            from composo.tracing._spans import SPAN_KIND

            attributes = {SPAN_KIND: "AGENT", AGENT_NAME: self.name, AGENT_ID: self.agent_id}
            self._span.enter_context(tracer.start_as_current_span(self.name, attributes=attributes))

    # Recording, called by the span processor and by integrations.

    def _reserve(self, step: Step, agent: Agent | None = None) -> Step:
        """Keep a place for a call that starts now, in ``agent``'s history (a sub-agent an
        instrumentor's span opened) or by default this agent's."""
        if self._recorder is None or self._agent is None:
            raise RuntimeError(f"{self!r} is not running")
        return self._recorder.reserve(agent or self._agent, step)

    def _agent_started(self, agent_id: str, name: str, parent: Agent | None) -> Agent:
        """An instrumentor's span began a sub-agent of ``parent`` (default: this agent)."""
        if self._recorder is None or self._agent is None:
            raise RuntimeError(f"{self!r} is not running")
        return self._recorder.agent_started(agent_id, name, parent or self._agent)

    def _agent_finished(self, agent: Agent | None) -> None:
        if self._recorder is not None and agent is not None:
            self._recorder.agent_finished(agent)

    def _here(self) -> Agent | None:
        """The agent that code running now belongs to: the sub-agent an instrumentor's span
        around it opened (found through the current OpenTelemetry span), else this one."""
        if self._spans:
            trace_api = sys.modules.get("opentelemetry.trace")  # loaded with the processor
            if trace_api is not None:
                span_id = trace_api.get_current_span().get_span_context().span_id
                within = self._spans.get(span_id)
                if within is not None and within.here is not None:
                    return within.here
        return self._agent

    def _record(self, interaction: LLMInteraction) -> None:
        agent = self._here()
        if self._recorder is not None and agent is not None:
            # stamped, so that a span of the same call (seen by two instruments) counts once
            self._recorder.reserve(agent, RecordedStep(interaction, time.time_ns()))

    @property
    def trace(self) -> MultiAgentTrace:
        """This agent and its sub-agents as the platform's trace (the calls finished so far).

        Raises:
            ComposoValidationError: No model call was captured, or two tracers of the trace
                share an ``agent_id``.
        """
        missing = _NO_CALLS.format(name=self.name)
        if self._recorder is None or self._agent is None:
            raise ComposoValidationError(missing)
        return self._recorder.trace(self._agent, missing=missing)


_active: ContextVar[tuple[AgentTracer, ...]] = ContextVar("composo_agent_tracers", default=())


def current_tracer() -> AgentTracer | None:
    """The innermost ``AgentTracer`` active in this context, or ``None``."""
    stack = _active.get()
    return stack[-1] if stack else None


def _pop(tracer: AgentTracer, token: Token[tuple[AgentTracer, ...]] | None) -> None:
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
    """Append one model call to the innermost active ``AgentTracer``; ``False`` (nothing is
    kept) when no tracer is active in this context."""
    tracer = current_tracer()
    if tracer is None:
        return False
    tracer._record(interaction)
    return True


def _deliver(tracer: AgentTracer, on_trace: Callable[[MultiAgentTrace], Any] | None) -> None:
    if on_trace is None:
        return
    try:
        trace = tracer.trace
    except ComposoValidationError as exc:
        _log.warning("not passing a trace to on_trace: %s", exc)
        return
    on_trace(trace)


@overload
def agent_tracer(
    name: Callable[P, R], agent_id: None = None, *, on_trace: None = None
) -> Callable[P, R]: ...


@overload
def agent_tracer(
    name: str | None = None,
    agent_id: str | None = None,
    *,
    on_trace: Callable[[MultiAgentTrace], Any] | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def agent_tracer(
    name: str | Callable[P, R] | None = None,
    agent_id: str | None = None,
    *,
    on_trace: Callable[[MultiAgentTrace], Any] | None = None,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Run each call of the decorated function (sync or async) inside its own ``AgentTracer``.

    Called from inside another tracer, each run is a sub-agent of it. Use bare
    (``@agent_tracer``) or with arguments (``@agent_tracer("researcher", on_trace=...)``).

    Args:
        name: The agent's name (default: the function's name).
        agent_id: The instance id of every run (the platform SDK's argument; default: a fresh
            id per run). Two runs inside one trace cannot share an id.
        on_trace: Receives the run's own trace when the function returns (a run that made no
            model call is logged and skipped).

    Returns:
        The wrapped function, or a decorator making one.

    Raises:
        ComposoValidationError: ``name`` or ``agent_id`` is not a non-empty string.
    """
    if callable(name):
        return agent_tracer()(name)
    label = _check_text("name", name)
    instance_id = _check_text("agent_id", agent_id)

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        agent_name = label or getattr(fn, "__name__", "agent")
        if inspect.iscoroutinefunction(fn):
            afn: Callable[P, Awaitable[Any]] = fn

            @functools.wraps(fn)
            async def arun(*args: P.args, **kwargs: P.kwargs) -> Any:
                tracer = AgentTracer(agent_name, instance_id)
                async with tracer:
                    result = await afn(*args, **kwargs)
                _deliver(tracer, on_trace)
                return result

            wrapped: Callable[P, R] = arun  # type: ignore[assignment]
            return wrapped

        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            tracer = AgentTracer(agent_name, instance_id)
            with tracer:
                result = fn(*args, **kwargs)
            _deliver(tracer, on_trace)
            return result

        return run

    return decorate
