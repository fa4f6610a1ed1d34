"""What the callback remembers about a run, and how a finished run tree becomes a trace.

Recording only keeps references (microseconds, in the user's thread); converting messages and
building the :class:`MultiAgentTrace` happens later, on the background thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from composo.ext import trace_from_messages
from composo.types import AgentInstance, LLMInteraction, MultiAgentTrace
from langchain_composo.messages import openai_messages, openai_tools, result_messages

__all__ = ["Run", "build_trace", "llm_evaluation"]

AGENT_NAME_KEY = "lc_agent_name"
_GRAPH_STEP = "graph:step:"


class Run:
    """One LangChain run: a chain or graph node, a chat model call or a tool call."""

    __slots__ = (
        "agent_name",
        "children",
        "is_graph",
        "kind",
        "messages",
        "metadata",
        "model_calls",
        "name",
        "open",
        "output",
        "parent",
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
        self.children: list[Run] = []
        self.is_graph = False
        self.messages: Sequence[BaseMessage | str] | None = None
        self.tools: Any = None
        self.output: Any = None
        # Root of a tree only: ids of runs under it that have not ended (cleaned up with the
        # root), and how many model calls finished under it.
        self.open: set[UUID] | None = {run_id} if tree and parent is None else None
        self.model_calls = 0

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
    out = run.output
    if not isinstance(out, LLMResult):
        return []
    return result_messages(out) or []


def _tools(run: Run) -> list[dict[str, Any]] | None:
    tools = run.tools
    if not tools or not isinstance(tools, Sequence):
        return None
    return openai_tools(tools)


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


def _starts_agent(run: Run, current: AgentInstance) -> bool:
    if run.kind != "chain":
        return False
    if run.agent_name is not None and run.agent_name != current.name:
        return True
    return run.is_graph


def _agent_name(run: Run) -> str:
    return run.agent_name or run.name or "agent"


def build_trace(root: Run) -> MultiAgentTrace:
    """The run tree as agents: the root run, each agent (``lc_agent_name``) and each LangGraph
    graph or subgraph is an agent instance; its model calls, in order, are its interactions."""
    agents: dict[str, AgentInstance] = {}

    def new_agent(run: Run) -> AgentInstance:
        agent = AgentInstance(id=str(run.run_id), name=_agent_name(run))
        agents[agent.id] = agent
        return agent

    def walk(run: Run, agent: AgentInstance) -> None:
        for child in run.children:
            if child.kind == "llm":
                step = _interaction(child)
                if step is not None:
                    agent.interactions.append(step)
            elif _starts_agent(child, agent):
                sub = new_agent(child)
                walk(child, sub)
                if sub.interactions:
                    agent.interactions.append(sub.id)
                else:
                    del agents[sub.id]  # a graph that called no model has nothing to judge
            else:
                walk(child, agent)

    top = new_agent(root)
    if root.kind == "llm":
        step = _interaction(root)
        if step is not None:
            top.interactions.append(step)
    walk(root, top)
    return MultiAgentTrace(root_agent_instance_id=top.id, agent_instance_by_id=agents)
