"""What the callback remembers about a run, and how a run tree records itself as a trace: the
root, each agent (``lc_agent_name``) and each LangGraph graph is an agent instance; a model call
keeps its place from its start, and is converted on the background thread."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from composo.ext import Agent, Step, TraceRecorder, trace_from_messages
from composo.types import LLMInteraction, MultiAgentTrace, OutputMessage
from langchain_composo.messages import openai_messages, openai_tools, result_messages

AGENT_NAME_KEY = "lc_agent_name"
_GRAPH_STEP = "graph:step:"


class Run:
    """One LangChain run: a chain or graph node, a chat model call or a tool call."""

    __slots__ = (
        "agent",
        "agent_name",
        "error",
        "kind",
        "messages",
        "metadata",
        "model_calls",
        "name",
        "open",
        "output",
        "own_agent",
        "own_agent_name",
        "parent",
        "place",
        "recorder",
        "root",
        "run_id",
        "tools",
    )

    def __init__(
        self,
        run_id: UUID,
        kind: str,
        name: str,
        parent: Run | None,
        metadata: Mapping[str, Any] | None,
        *,
        tree: bool = True,
    ) -> None:
        self.run_id = run_id
        self.kind = kind  # "chain", "llm" or "tool"
        self.name = name
        self.parent = parent
        self.root: Run = parent.root if parent is not None else self
        self.metadata = metadata
        agent = metadata.get(AGENT_NAME_KEY) if metadata else None
        self.agent_name: str | None = agent if isinstance(agent, str) else None
        # LangChain copies a config's metadata into every run under it, so a sub-agent invoked
        # with its caller's config carries the caller's ``lc_agent_name``: only a name that
        # differs from the parent's is the run's own (otherwise the run is named after itself).
        self.own_agent_name = self.agent_name is not None and (
            parent is None or parent.agent_name != self.agent_name
        )
        self.error: BaseException | None = None
        self.messages: Sequence[BaseMessage | str] | None = None
        self.tools: Any = None
        self.output: Any = None
        # Root of a tree only: ids of runs under it that have not ended (cleaned up with the
        # root), and how many model calls finished under it.
        self.open: set[UUID] | None = set() if tree and parent is None else None
        if self.root.open is not None:
            self.root.open.add(run_id)
        self.model_calls = 0
        # In a tree: its recording, the agent its model calls belong to, whether it started that
        # agent, and for a model call its place in the agent's history.
        self.recorder: TraceRecorder | None = None
        self.agent: Agent | None = None
        self.own_agent = False
        self.place: Step | None = None
        if tree:
            self._join()

    def _join(self) -> None:
        parent = self.parent
        if parent is None or parent.recorder is None or parent.agent is None:
            self.recorder = TraceRecorder()
            self._start_agent(None)
        else:
            self.recorder, self.agent = parent.recorder, parent.agent
            if (
                self.kind == "chain"
                and self.own_agent_name
                and self.agent_name != parent.agent.name
            ):
                self._start_agent(parent.agent)
        if self.kind == "llm":
            assert self.recorder is not None and self.agent is not None
            self.place = self.recorder.reserve(self.agent)

    def _start_agent(self, above: Agent | None) -> None:
        assert self.recorder is not None
        self.agent = self.recorder.agent_started(str(self.run_id), _agent_name(self), above)
        self.own_agent = True

    def graph_step_started(self) -> None:
        """A LangGraph node started under this run, so this run is a graph: an agent of its own
        (LangGraph runs nothing in a graph outside its nodes, so no call of it was recorded)."""
        if self.own_agent or self.kind != "chain" or self.parent is None:
            return
        self._start_agent(self.parent.agent)

    def ended(self, output: LLMResult | None) -> None:
        """The run ended (``output``: a model call's result)."""
        if self.recorder is None:
            return
        if output is not None and self.place is not None:
            self.place.fill(functools.partial(_interaction, self))
        if self.own_agent and self.agent is not None:
            self.recorder.agent_finished(self.agent)

    def __repr__(self) -> str:
        return f"Run({self.kind} {self.name!r} {self.run_id})"

    @staticmethod
    def is_graph_step(tags: Sequence[str] | None) -> bool:
        """LangGraph tags each node run ``graph:step:N``; its parent run is then a graph."""
        return bool(tags) and any(t.startswith(_GRAPH_STEP) for t in tags or ())


def _inputs(run: Run) -> list[dict[str, Any]]:
    msgs = run.messages or []
    if msgs and isinstance(msgs[0], str):  # a completion model's prompt
        return [{"role": "user", "content": str(m)} for m in msgs]
    return openai_messages([m for m in msgs if isinstance(m, BaseMessage)])


def _output(run: Run) -> list[dict[str, Any]]:
    return (result_messages(run.output) or []) if isinstance(run.output, LLMResult) else []


def _tools(run: Run) -> list[dict[str, Any]] | None:
    return openai_tools(run.tools) if run.tools and isinstance(run.tools, Sequence) else None


def llm_evaluation(run: Run) -> dict[str, Any]:
    """``evaluate()`` arguments for one finished chat model call."""
    kwargs: dict[str, Any] = {"messages": _inputs(run), "result": _output(run)}
    if not kwargs["result"]:
        raise ValueError("the model call produced no message to evaluate")
    tools = _tools(run)
    if tools:
        kwargs["tools"] = tools
    return kwargs


def _interaction(run: Run) -> LLMInteraction | None:
    outputs = _output(run)
    if not outputs:
        return None
    conversation = _inputs(run) + outputs
    # The last assistant turn is this call; the messages before it are its input.
    one = trace_from_messages(conversation, agent_id="call", tools=_tools(run))
    steps = one.agent_instance_by_id["call"].interactions
    last = steps[-1]
    return last if isinstance(last, LLMInteraction) else None


def _agent_name(run: Run) -> str:
    if run.own_agent_name and run.agent_name:
        return run.agent_name
    return run.name or run.agent_name or "agent"


def error_note(error: BaseException) -> str:
    """How a run's exception reads in the trace the judge sees."""
    return f"The run failed with {type(error).__name__}: {error}"


def trace_of(root: Run) -> MultiAgentTrace:
    """The finished tree's trace: its agents (those that called a model), each with its model
    calls in the order they started. A root that raised keeps what ran before, and its exception
    is a last output (type ``"error"``) of the root agent's last model call.

    Raises:
        ValueError: The run was not recorded as a tree, or made no model call (a
            ``ComposoValidationError`` then, saying that the run failed first if it did).
    """
    if root.recorder is None or root.agent is None:
        raise ValueError(f"{root!r} was not recorded as a tree")
    missing = None
    if root.error is not None:
        missing = f"{error_note(root.error)}, before any model call finished, so there is no "
        missing += "trace to evaluate"
    trace = root.recorder.trace(root.agent, drop_empty=True, missing=missing)
    if root.error is not None:
        _note_error(trace, root.error)
    return trace


def _note_error(trace: MultiAgentTrace, error: BaseException) -> None:
    agents = trace.agent_instance_by_id
    # The root's last model call; when only sub-agents called models, the last of those.
    for agent in (agents[trace.root_agent_instance_id], *reversed(agents.values())):
        calls = [i for i, s in enumerate(agent.interactions) if isinstance(s, LLMInteraction)]
        if calls:
            break
    last = agent.interactions[calls[-1]]
    assert isinstance(last, LLMInteraction)
    note = OutputMessage(type="error", content=error_note(error))
    # The trace's lists are new; the call itself may be the recording's, so it is copied.
    noted = last.model_copy(update={"output_messages": [*last.output_messages, note]})
    agent.interactions[calls[-1]] = noted
