"""``AgentTracer`` and ``agent_tracer``: mark where an agent runs, get its calls back as a trace.

Each model call made while a tracer is active takes a place in that tracer's history when it
starts (so calls and sub-agents keep the order in which they ran) and is filled in when it ends.
A span that may only turn out to be a model call when it ends takes a place too, given back if it
does not. Spans are only turned into ``LLMInteraction`` objects when ``trace`` is read, which keeps
the cost paid during the user's run to a dict insert.
"""

from __future__ import annotations

import functools
import inspect
import logging
import uuid
import weakref
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, ParamSpec, TypeVar, overload

from composo._core.trace import AgentInstance, LLMInteraction, MultiAgentTrace
from composo.errors import ComposoValidationError
from composo.tracing import _context as context

__all__ = ["AgentTracer", "agent_tracer"]

_log = logging.getLogger("composo.tracing")

P = ParamSpec("P")
R = TypeVar("R")

_NO_CALLS = (
    "AgentTracer(name={name!r}) captured no LLM call, so there is no trace to evaluate. "
    "Call ComposoTracer.init(instruments=Instruments.OPENAI) once before the model is called, and "
    "make the calls inside the `with AgentTracer(...)` block (work handed to another thread needs "
    "contextvars.copy_context().run to stay attached to the agent)."
)


class _Slot:
    """One model call's place in an agent's history: a span's (running, finished, or not yet
    known to be a model call), or an interaction handed over directly."""

    __slots__ = ("__weakref__", "agent", "interaction", "llm", "owner", "parent", "span", "window")

    def __init__(
        self,
        interaction: LLMInteraction | None = None,
        owner: int = 0,
        *,
        agent: AgentTracer | None = None,
        llm: bool = True,
        parent: _Slot | None = None,
    ) -> None:
        self.span: Any = None
        self.interaction = interaction
        self.owner = owner  # the id of the span that fills this slot
        # whether that span is known to be a model call (from its start, or once it ended)
        self.llm = llm
        # the place of the nearest enclosing span not yet known to be a model call when this one
        # started: if it turns out to be one, this call is part of it
        self.parent = parent
        # weak, so that a span outliving its agent does not keep the agent alive
        self.agent = None if agent is None else weakref.ref(agent)
        # (instrumentation scope, start ns, end ns) of that span, to recognise nested calls
        self.window: tuple[str, int, int] | None = None

    def fill(self, span: Any, window: tuple[str, int, int]) -> None:
        """The owner span ended as a model call."""
        self.window = window
        self.llm = True
        self.span = span

    def release(self) -> None:
        """The owner span ended and was not a model call: give its place back."""
        agent = self.agent() if self.agent is not None else None
        if agent is not None:
            agent._steps.pop(self, None)

    def inside_call(self) -> bool:
        """Whether an enclosing span turned out to be a model call that this one is part of."""
        outer = self.parent
        while outer is not None:
            if outer.llm:
                return True
            outer = outer.parent
        return False

    def resolve(self) -> LLMInteraction | None:
        """The interaction, converted from the span once; ``None`` while the call is running
        or when it failed."""
        span = self.span
        if self.interaction is None and span is not None:
            from composo.tracing._spans import interaction_from_span

            self.interaction = interaction_from_span(span)
            self.span = None
        return self.interaction


def _check_text(field: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ComposoValidationError(
            f"{field}: expected a non-empty string, e.g. AgentTracer({field}='researcher'), "
            f"got {value!r}"
        )
    return value


class AgentTracer:
    """Collect the model calls made while active into a ``MultiAgentTrace``.

    Use as ``with AgentTracer(name="researcher") as tracer:`` (or ``async with``). A tracer
    entered while another is active becomes a sub-agent of it, referenced from the parent at the
    point it ran. ``tracer.trace`` can be read inside the block (calls so far) or after it.
    """

    def __init__(self, name: str | None = None, agent_id: str | None = None) -> None:
        self.name: str = _check_text("name", name) or "agent"
        self.agent_id: str = _check_text("agent_id", agent_id) or str(uuid.uuid4())
        # insertion-ordered; a dict so that a place given back is removed in O(1), thread-safely
        self._steps: dict[_Slot | AgentTracer, None] = {}
        self._token: Any = None
        self._state = "new"

    def __repr__(self) -> str:
        return f"AgentTracer(name={self.name!r}, agent_id={self.agent_id!r}, state={self._state})"

    # -- activation -----------------------------------------------------------------------------

    def __enter__(self) -> AgentTracer:
        if self._state != "new":
            raise RuntimeError(
                f"{self!r} has already run; create a new AgentTracer for each agent run"
            )
        parent = context.current_tracer()
        if parent is not None:
            parent._steps[self] = None
        self._token = context.push(self)
        self._state = "running"
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        context.pop(self, self._token)
        self._token = None
        self._state = "closed"

    async def __aenter__(self) -> AgentTracer:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- recording (called by the span processor and by integrations) ----------------------------

    def _reserve(self, owner: int, *, llm: bool = True, parent: _Slot | None = None) -> _Slot:
        """A place for span ``owner``; ``llm=False`` while it is not known to be a model call."""
        slot = _Slot(owner=owner, agent=self, llm=llm, parent=parent)
        self._steps[slot] = None
        return slot

    def _record(self, interaction: LLMInteraction) -> None:
        self._steps[_Slot(interaction)] = None

    # -- reading --------------------------------------------------------------------------------

    @property
    def trace(self) -> MultiAgentTrace:
        """This agent and its sub-agents as the platform's trace (the calls finished so far)."""
        agents: dict[str, AgentInstance] = {}
        self._collect(agents)
        if not any(
            isinstance(step, LLMInteraction) for a in agents.values() for step in a.interactions
        ):
            raise ComposoValidationError(_NO_CALLS.format(name=self.name))
        return MultiAgentTrace(root_agent_instance_id=self.agent_id, agent_instance_by_id=agents)

    def _collect(self, agents: dict[str, AgentInstance]) -> None:
        steps = list(self._steps.copy())  # dict.copy is atomic against concurrent inserts
        found = {id(s): s.resolve() for s in steps if isinstance(s, _Slot)}
        interactions: list[str | LLMInteraction] = []
        for step in steps:
            if isinstance(step, AgentTracer):
                step._collect(agents)
                interactions.append(step.agent_id)
                continue
            call = found[id(step)]
            if (
                call is not None
                and not step.inside_call()
                and not _wrapped(step, call, steps, found)
            ):
                interactions.append(call)
        if self.agent_id in agents:
            raise ComposoValidationError(
                f"agent_id: {self.agent_id!r} is used by two AgentTracers in one trace; give each "
                "run its own id, or leave agent_id unset to get a fresh one"
            )
        agents[self.agent_id] = AgentInstance(
            id=self.agent_id, name=self.name, interactions=interactions
        )


def _wrapped(
    slot: _Slot,
    call: LLMInteraction,
    steps: list[_Slot | AgentTracer],
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


def _answer(call: LLMInteraction) -> list[tuple[str, str]]:
    """What the model answered, independent of how an instrumentation formats arguments."""
    return [
        ("text", m.content) if isinstance(m.content, str) else ("call", m.content.name)
        for m in call.output_messages
    ]


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
def agent_tracer(name: Callable[P, R], *, on_trace: None = None) -> Callable[P, R]: ...


@overload
def agent_tracer(
    name: str | None = None, *, on_trace: Callable[[MultiAgentTrace], Any] | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def agent_tracer(
    name: str | Callable[P, R] | None = None,
    *,
    on_trace: Callable[[MultiAgentTrace], Any] | None = None,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Run each call of the decorated function (sync or async) inside its own ``AgentTracer``.

    ``name`` defaults to the function's name. Called from inside another tracer, each run is a
    sub-agent of it; ``on_trace`` receives the run's own trace when the function returns.
    """
    if callable(name):
        return agent_tracer()(name)
    label = _check_text("name", name)

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        agent_name = label or getattr(fn, "__name__", "agent")
        if inspect.iscoroutinefunction(fn):
            afn: Callable[P, Awaitable[Any]] = fn

            @functools.wraps(fn)
            async def arun(*args: P.args, **kwargs: P.kwargs) -> Any:
                tracer = AgentTracer(agent_name)
                async with tracer:
                    result = await afn(*args, **kwargs)
                _deliver(tracer, on_trace)
                return result

            wrapped: Callable[P, R] = arun  # type: ignore[assignment]
            return wrapped

        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            tracer = AgentTracer(agent_name)
            with tracer:
                result = fn(*args, **kwargs)
            _deliver(tracer, on_trace)
            return result

        return run

    return decorate
