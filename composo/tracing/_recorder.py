"""``TraceRecorder``: the one place where every capture's agent events become a
``MultiAgentTrace``. A model call's place is kept when it starts, so calls and sub-agents keep
their order; recording is a dict insert under a lock, conversion happens when ``trace`` is read.
"""

from __future__ import annotations

import logging
import threading
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from composo._core import trace as model
from composo._core.trace import LLMInteraction, MultiAgentTrace, ToolCall, ToolResponse
from composo.errors import ComposoValidationError

__all__ = ["Agent", "Capture", "Interaction", "RecordedStep", "Step", "TraceRecorder", "Within"]

_log = logging.getLogger("composo.tracing")

Interaction = LLMInteraction | Callable[[], LLMInteraction | None]
"""A model call, or a function that converts it when the trace is read (``None``: no call)."""

_NO_CALLS = "trace: no model call was recorded, so there is no trace to evaluate"

C = TypeVar("C", bound="Capture")


class Capture:
    """Base of a ``with`` / ``async with`` block that records once while it is active.

    Subclasses define ``_activate`` and ``_deactivate``: a context-variable change, never I/O,
    so the async forms run them unchanged.
    """

    _again = "{self!r} has already run; create a new one for each run"
    _running = "running"
    _finished = "closed"
    _state = "new"

    def _activate(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def _deactivate(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __enter__(self: C) -> C:
        """Start recording in this thread or task (``RuntimeError`` if it has recorded once)."""
        if self._state != "new":
            raise RuntimeError(self._again.format(self=self))
        self._activate()
        self._state = self._running
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Stop recording; calls still running may finish into the recording afterwards."""
        self._deactivate()
        self._state = self._finished

    async def __aenter__(self: C) -> C:
        return self.__enter__()

    async def __aexit__(self, *exc_info: object) -> None:
        self.__exit__(*exc_info)


class Step:
    """One model call's place in an agent's history; feeds that recognise a call reported
    twice override :meth:`omitted`."""

    __slots__ = ("__weakref__", "_agent", "_value")

    def __init__(self, value: Interaction | None = None) -> None:
        self._value = value
        # weak, so that a call outliving its agent does not keep the agent alive
        self._agent: weakref.ref[Agent] | None = None

    def fill(self, interaction: Interaction) -> None:
        """The call ended: ``interaction`` is what it was (or a function converting it)."""
        self._value = interaction

    def release(self) -> None:
        """The call ended without being a model call (or failed): give its place back."""
        agent = self._agent() if self._agent is not None else None
        if agent is not None:
            agent._history.pop(self, None)

    @property
    def filled(self) -> bool:
        return self._value is not None

    def resolve(self) -> LLMInteraction | None:
        """The interaction, converted once; ``None`` while the call is running or when it left
        nothing to evaluate."""
        value = self._value
        if value is None or isinstance(value, LLMInteraction):
            return value
        result = value()
        self._value = result
        return result

    def omitted(
        self, history: list[Step | Agent | _ToolEvent], found: dict[int, LLMInteraction | None]
    ) -> bool:
        """Whether to leave this call out although it resolved (``found``: id(step) -> call)."""
        return False


class RecordedStep(Step):
    """A model call handed over by ``record_interaction``, stamped (``time.time_ns()``) so a
    span of the same call is counted once."""

    __slots__ = ("at",)

    def __init__(self, value: Interaction | None = None, at: int = 0) -> None:
        super().__init__(value)
        self.at = at


@dataclass(eq=False, slots=True)
class _ToolEvent:
    call: ToolCall | None = None
    response: ToolResponse | None = None


class Agent:
    """An agent instance in a recording, accepted wherever an agent id is."""

    __slots__ = ("__weakref__", "_history", "finished", "id", "name", "parent")

    def __init__(self, agent_id: str, name: str, parent: Agent | None) -> None:
        self.id = agent_id
        self.name = name
        self.parent = parent
        self.finished = False
        # insertion-ordered; a dict so that a place given back is removed in O(1)
        self._history: dict[Step | Agent | _ToolEvent, None] = {}

    def __repr__(self) -> str:
        return f"Agent(id={self.id!r}, name={self.name!r})"


@dataclass(eq=False, slots=True)
class Within:
    """Where the spans under an instrumentor's agent or tool span (``opener``) record: the
    sub-agent it opened (``agent``); for a tool, ``None`` until a model call inside opens the tool's
    sub-agent (``id``, ``name``), and ``owner`` is where the tool runs (``None``: the tracer's)."""

    opener: int
    agent: Agent | None
    owner: Agent | None = None
    id: str = ""
    name: str = ""

    @property
    def here(self) -> Agent | None:
        """The agent that a sub-agent or a record made here belongs to."""
        return self.agent if self.agent is not None else self.owner


class TraceRecorder:
    """Agents and their model calls, in the order they happened, as a ``MultiAgentTrace``.
    Safe from any thread; ``trace`` read while recording holds the calls finished so far.

    Args:
        kind: What the agents are called in error messages (e.g. ``"AgentTracers"``).
    """

    def __init__(self, *, kind: str = "agents") -> None:
        self._lock = threading.Lock()
        self._agents: dict[str, Agent] = {}
        self._roots: dict[Agent, None] = {}
        self._kind = kind

    def __repr__(self) -> str:
        return f"TraceRecorder(agents={len(self._agents)}, roots={len(self._roots)})"

    def agent_started(
        self, agent_id: str | None, name: str, parent: Agent | str | None = None
    ) -> Agent:
        """An agent began: a root, or a sub-agent referenced from ``parent``'s history here.

        Args:
            agent_id: The agent instance id (``None``: a fresh UUID).
            name: The agent's name; instances of one name are scored together.
            parent: The agent it runs under (an :class:`Agent` or an id; ``LookupError`` when
                no agent of this recording has it), or ``None``.

        Returns:
            The agent, to pass to the other events.
        """
        agent_id = agent_id or str(uuid.uuid4())
        with self._lock:
            above = self._find(parent) if parent is not None else None
            agent = Agent(agent_id, name, above)
            self._agents.setdefault(agent_id, agent)
            if above is None:
                self._roots[agent] = None
            else:
                above._history[agent] = None
        return agent

    def agent_finished(self, agent: Agent | str) -> None:
        """The agent ended. Calls still running in it may fill their places afterwards."""
        with self._lock:
            self._find(agent).finished = True

    def reserve(self, agent: Agent | str, step: Step | None = None) -> Step:
        """Keep a place for a model call ``agent`` starts now (``step``, a plain :class:`Step` by
        default); ``fill`` or ``release`` it at its end."""
        step = Step() if step is None else step
        with self._lock:
            owner = self._find(agent)
            step._agent = weakref.ref(owner)
            owner._history[step] = None
        return step

    def record(self, agent: Agent | str, interaction: Interaction) -> Step:
        """A model call that has ended (or a function converting it when the trace is read),
        in ``agent``'s history from now; returns its place."""
        return self.reserve(agent, Step(interaction))

    def tool_called(self, agent: Agent | str, call: ToolCall) -> None:
        """``agent`` called a tool; added to its latest model call's output unless there."""
        with self._lock:
            self._find(agent)._history[_ToolEvent(call=call)] = None

    def tool_responded(self, agent: Agent | str, response: ToolResponse) -> None:
        """A tool answered ``agent``; added to its next model call's input unless there."""
        with self._lock:
            self._find(agent)._history[_ToolEvent(response=response)] = None

    def interaction_count(self) -> int:
        """Model calls that have ended (not converted)."""
        with self._lock:
            return sum(
                1
                for a in self._agents.values()
                for s in list(a._history)
                if isinstance(s, Step) and s.filled
            )

    @property
    def agent_count(self) -> int:
        """Agents started so far."""
        return len(self._agents)

    @property
    def open_agents(self) -> int:
        """Agents started and not finished."""
        with self._lock:
            return sum(1 for a in self._agents.values() if not a.finished)

    def trace(
        self,
        root: Agent | str | None = None,
        *,
        name: str | None = None,
        drop_empty: bool = False,
        missing: str | None = None,
        root_id: str | None = None,
    ) -> MultiAgentTrace:
        """The recording (or the part under ``root``) as the platform's trace.

        Args:
            root: The agent whose run to return; by default every root: one is the trace's root,
                several become the interactions of a new root agent named ``name``.
            name: The new root's name when there are several roots (default ``"agent"``).
            drop_empty: Leave out sub-agents that made no model call.
            missing: The error message when no model call was recorded.
            root_id: The new root's id when there are several roots (default: a fresh UUID).

        Returns:
            The trace; model calls are converted now.

        Raises:
            ComposoValidationError: No model call was recorded, or one agent id is used by two
                agents of the trace.
        """
        with self._lock:
            roots = [self._find(root)] if root is not None else list(self._roots)
            histories: dict[Agent, list[Step | Agent | _ToolEvent]] = {}
            todo = list(roots)
            while todo:
                agent = todo.pop()
                history = list(agent._history)
                histories[agent] = history
                todo.extend(s for s in history if isinstance(s, Agent))
        agents: dict[str, model.AgentInstance] = {}

        def build(agent: Agent, top: bool) -> bool:
            if agent.id in agents:
                raise ComposoValidationError(
                    f"agent_id: {agent.id!r} is used by two {self._kind} in one trace; give each "
                    "run its own id, or leave agent_id unset to get a fresh one"
                )
            instance = model.AgentInstance(id=agent.id, name=agent.name)
            agents[agent.id] = instance  # parents before their sub-agents
            history = histories[agent]
            found = {id(s): s.resolve() for s in history if isinstance(s, Step)}
            steps = instance.interactions
            responses: list[ToolResponse] = []
            for item in history:
                if isinstance(item, Agent):
                    if build(item, False):
                        steps.append(item.id)
                elif isinstance(item, Step):
                    call = found[id(item)]
                    if call is None or item.omitted(history, found):
                        continue
                    if responses:
                        call, responses = _with_responses(call, responses), []
                    steps.append(call)
                elif item.call is not None:
                    _add_call(steps, item.call)
                elif item.response is not None:
                    responses.append(item.response)
            if responses:
                _log.debug(
                    "%d tool response(s) of %s came after its last model call",
                    len(responses),
                    agent,
                )
            if drop_empty and not top and not steps:
                del agents[agent.id]  # an agent that called no model has nothing to judge
                return False
            return True

        for agent in roots:
            build(agent, True)
        if not any(isinstance(s, LLMInteraction) for a in agents.values() for s in a.interactions):
            raise ComposoValidationError(missing or _NO_CALLS)
        if len(roots) == 1:
            return MultiAgentTrace(root_agent_instance_id=roots[0].id, agent_instance_by_id=agents)
        top = model.AgentInstance(
            id=root_id or str(uuid.uuid4()),
            name=name or "agent",
            interactions=[a.id for a in roots],
        )
        return MultiAgentTrace(
            root_agent_instance_id=top.id, agent_instance_by_id={top.id: top, **agents}
        )

    def _find(self, agent: Agent | str) -> Agent:
        if isinstance(agent, Agent):
            return agent
        found = self._agents.get(agent)
        if found is None:
            raise LookupError(
                f"agent {agent!r} has not started in this recording; call agent_started first"
            )
        return found


def _with_responses(call: LLMInteraction, responses: list[ToolResponse]) -> LLMInteraction:
    have = {m.content.id for m in call.input_messages if isinstance(m.content, ToolResponse)}
    extra = [
        model.InputMessage(role="tool", type="tool_response", content=r)
        for r in responses
        if r.id not in have
    ]
    if not extra:
        return call
    return call.model_copy(update={"input_messages": [*call.input_messages, *extra]})


def _add_call(steps: list[str | LLMInteraction], tool: ToolCall) -> None:
    for i in range(len(steps) - 1, -1, -1):
        call = steps[i]
        if isinstance(call, LLMInteraction):
            if not any(
                isinstance(m.content, ToolCall) and m.content.id == tool.id
                for m in call.output_messages
            ):
                outputs = [
                    *call.output_messages,
                    model.OutputMessage(type="tool_call", content=tool),
                ]
                steps[i] = call.model_copy(update={"output_messages": outputs})
            return
    _log.debug("tool call %s came before any model call of its agent", tool.name)
