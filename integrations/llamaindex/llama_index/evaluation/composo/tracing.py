"""LlamaIndex runs as Composo traces, read from LlamaIndex's instrumentation dispatcher.

While a ``LlamaIndexTraceCapture`` is active in the current thread or task, every LLM call
becomes an ``LLMInteraction``. Each run of a workflow agent is an agent instance (in an
``AgentWorkflow``, each stretch one agent handled, so a hand-off starts a new one); a workflow
started inside a tool is a sub-agent of the caller, and LLM calls a tool makes itself a sub-agent
named after the tool. A call offered no tools (a ReAct agent lists them in its prompt) gets the
running agent's tools, and the action a ReAct step names in prose becomes a tool call. Calls
outside any workflow belong to one instance named ``name``. Errors in the handlers are logged,
never raised into the run.
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.llms.base import BaseLLM
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
)
from llama_index.core.instrumentation.span_handlers import NullSpanHandler
from llama_index.core.tools.types import BaseTool
from llama_index.core.workflow import Workflow
from llama_index.evaluation.composo.messages import agent_tools, chat_message_dict, tool_definitions

from composo import ext
from composo.ext import Agent, Capture, TraceRecorder, to_trace_interaction, to_trace_tool
from composo.types import LLMInteraction, MultiAgentTrace, OutputMessage, ToolCall, ToolSpec

__all__ = ["LlamaIndexTraceCapture"]

_log = logging.getLogger("composo.llamaindex")
_current: ContextVar[LlamaIndexTraceCapture | None] = ContextVar(
    "composo_llamaindex_capture", default=None
)
_PENDING_LIMIT = 256
_NO_CALLS = (
    "trace: the capture saw no LLM call; run the LlamaIndex code inside "
    "`with LlamaIndexTraceCapture() as capture:` (a trace needs a model call)"
)


def _tool_specs(tools: Any) -> list[ToolSpec] | None:
    return [to_trace_tool(d) for d in tool_definitions(tools)] if tools else None


# -- LLM calls in flight ---------------------------------------------------------------------


class _Calls:
    """LLM calls between their start and end events: the tools they were offered, and whether
    they were made by another call of the same LLM (``chat()`` built on ``complete()``, or the
    reverse), which must not count twice. A streaming call's span closes before its stream is
    read (``astream_chat`` hands over to ``stream_chat`` once its own span has ended), so a call
    of the same LLM under the same parent while another has not reported its end is nested too.
    ``limit`` bounds what calls that never end can leave."""

    def __init__(self, limit: int | None = None) -> None:
        self._lock = threading.Lock()
        self._limit = limit
        self._open: dict[str, int] = {}  # span id -> id() of the LLM, while the span is open
        self._nested: set[str] = set()
        self._tools: dict[str, list[ToolSpec] | None] = {}
        # Calls whose end event has not come yet: span id -> (id() of the LLM, parent span id).
        self._flight: dict[str, tuple[int, str | None]] = {}

    def enter(self, span_id: str, parent_id: str | None, llm: Any) -> None:
        with self._lock:
            made_by_parent = parent_id is not None and (
                self._open.get(parent_id) == id(llm)
                or (id(llm), parent_id) in self._flight.values()
            )
            if made_by_parent and (self._limit is None or len(self._nested) < self._limit):
                self._nested.add(span_id)
            self._open[span_id] = id(llm)
            if self._limit is not None and len(self._flight) >= self._limit:
                self._flight.pop(next(iter(self._flight)))
            self._flight[span_id] = (id(llm), parent_id)

    def exit(self, span_id: str) -> None:
        with self._lock:
            self._open.pop(span_id, None)

    def offered(self, span_id: str | None, tools: list[ToolSpec] | None) -> None:
        if span_id is None:
            return
        with self._lock:
            if self._limit is not None and len(self._tools) >= self._limit:
                self._tools.pop(next(iter(self._tools)))
            self._tools[span_id] = tools

    def finish(self, span_id: str | None) -> tuple[bool, list[ToolSpec] | None]:
        """At a call's end event: (made by another call, so skip it; the tools it was offered)."""
        if span_id is None:
            return False, None
        with self._lock:
            nested = span_id in self._nested
            self._nested.discard(span_id)
            self._flight.pop(span_id, None)
            return nested, self._tools.pop(span_id, None)

    def clear(self) -> None:
        with self._lock:
            self._open.clear()
            self._nested.clear()
            self._tools.clear()
            self._flight.clear()

    def __len__(self) -> int:
        return len(self._open) + len(self._nested) + len(self._tools) + len(self._flight)


def _llm_call(span_id: str, instance: Any) -> bool:
    """A span of an LLM's call method: ``[a][stream_]chat`` or ``[a][stream_]complete``
    (``"MockLLM.achat-<uuid>"``)."""
    if not isinstance(instance, BaseLLM):
        return False
    method = span_id.split("-", 1)[0].rsplit(".", 1)[-1]
    return method.removeprefix("a").removeprefix("stream_") in ("chat", "complete")


# -- what one capture records ----------------------------------------------------------------


@dataclass(slots=True, eq=False)
class _Scope:
    """A workflow run or a tool call: the LLM calls under it belong to one agent at a time."""

    agent_name: str
    parent: _Scope | None
    fixed: bool  # a single agent or a tool: its steps cannot rename it
    tool: bool = False
    workflow: Workflow | None = None  # the agent or AgentWorkflow run, whose tools are known
    agent: Agent | None = None
    spans: list[str] = field(default_factory=list)


def _opened(id_: str, instance: Any, parent: _Scope | None) -> _Scope | None:
    """The scope a span opens: a workflow's run, or a tool's call inside one."""
    if isinstance(instance, Workflow) and id_.startswith(f"{type(instance).__name__}.run-"):
        while parent is not None and parent.tool:
            parent = parent.parent  # an agent run inside a tool is the caller's sub-agent
        given = getattr(instance, "name", None)
        if isinstance(given, str) and given:  # one named agent
            return _Scope(given, parent, fixed=True, workflow=instance)
        return _Scope(type(instance).__name__, parent, fixed=False, workflow=instance)
    if parent is not None and isinstance(instance, BaseTool):
        name = str(instance.metadata.name or type(instance).__name__)
        return _Scope(name, parent, fixed=True, tool=True)
    return None


class LlamaIndexTraceCapture(Capture):
    """Record what LlamaIndex does inside ``with`` / ``async with`` as a ``MultiAgentTrace``.

    Read ``trace`` after the block (or pass the capture itself as ``trace=`` to
    ``evaluate_trace``). A capture is used once; nothing global keeps its data.

    Args:
        name: Names the instance for LLM calls made outside any workflow, and the root when
            several agents ran side by side.
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._recorder = TraceRecorder()
        self._spans: dict[str, _Scope] = {}
        self._runs: dict[str, _Scope] = {}
        self._calls = _Calls()
        # Tool definitions of the agents seen, by id() (the agent is kept so the id stays its).
        self._tools: dict[int, tuple[Any, list[ToolSpec] | None]] = {}
        self._loose = _Scope(name or "llama_index", None, fixed=True)
        self._token: Token[LlamaIndexTraceCapture | None] | None = None

    def __repr__(self) -> str:
        return (
            f"LlamaIndexTraceCapture(name={self.name!r}, state={self._state!r}, "
            f"agents={self._recorder.agent_count})"
        )

    _again = "a LlamaIndexTraceCapture records once; create a new one"
    _running = "active"
    _finished = "finished"

    def _activate(self) -> None:
        _hub.acquire()
        self._token = _current.set(self)

    def _deactivate(self) -> None:
        if self._token is not None:
            try:
                _current.reset(self._token)
            except ValueError:  # exited in another context than entered: just stop recording
                _current.set(None)
            self._token = None
        with self._lock:
            self._spans.clear()
            self._runs.clear()
        self._calls.clear()
        self._tools.clear()
        _hub.release()

    @property
    def llm_call_count(self) -> int:
        """LLM calls recorded so far."""
        return self._recorder.interaction_count()

    @property
    def trace(self) -> MultiAgentTrace:
        """The captured run.

        Raises:
            ComposoValidationError: No LLM call was seen.
        """
        return self._recorder.trace(name=self.name or "agent_workflow", missing=_NO_CALLS)

    def _span_enter(self, id_: str, bound_args: Any, instance: Any, parent_id: str | None) -> None:
        if _llm_call(id_, instance):
            self._calls.enter(id_, parent_id, instance)
        with self._lock:
            parent = self._spans.get(parent_id) if parent_id else None
            scope = _opened(id_, instance, parent)
            if scope is not None:
                self._runs[id_] = scope
            elif parent is not None:
                scope = parent
                ev = bound_args.arguments.get("ev") if bound_args is not None else None
                current = getattr(ev, "current_agent_name", None)
                if isinstance(current, str) and current and not scope.fixed:
                    scope.agent_name = current
            else:
                return
            self._spans[id_] = scope
            scope.spans.append(id_)

    def _span_end(self, id_: str) -> None:
        self._calls.exit(id_)
        with self._lock:
            scope = self._runs.pop(id_, None)
            if scope is not None:
                for span_id in scope.spans:
                    self._spans.pop(span_id, None)

    def _record(self, span_id: str | None, interaction: LLMInteraction) -> None:
        with self._lock:
            scope = self._spans.get(span_id) if span_id else None
            agent = self._running_agent(scope) if scope is not None else None
        if agent is not None and not interaction.tools_available:
            # Outside the lock: the parser and tool conversion may report spans of their own.
            interaction = self._with_agent_tools(agent, interaction)
        with self._lock:
            self._recorder.record(self._agent_for(scope or self._loose), interaction)

    def _with_agent_tools(self, agent: Any, interaction: LLMInteraction) -> LLMInteraction:
        """A ReAct agent describes its tools in the prompt and offers the model none, and its
        model names a tool in prose (``Action:`` / ``Action Input:``): the agent's own tools are
        what the call could use, and the action it chose is a tool call."""
        tools = self._agent_tools(agent)
        update: dict[str, Any] = {}
        if tools:
            update["tools_available"] = tools
        parser = getattr(agent, "output_parser", None)
        outputs = interaction.output_messages
        if parser is not None and len(outputs) == 1 and isinstance(outputs[0].content, str):
            call = _react_action(parser, outputs[0].content, self._recorder.interaction_count())
            if call is not None:
                update["output_messages"] = [*outputs, call]
        return interaction.model_copy(update=update) if update else interaction

    @staticmethod
    def _running_agent(scope: _Scope) -> Any:
        """The workflow agent running in ``scope`` now (in an ``AgentWorkflow``, the current
        one), or ``None``."""
        workflow = scope.workflow
        if workflow is None:
            return None
        agents = getattr(workflow, "agents", None)
        return agents.get(scope.agent_name) if isinstance(agents, dict) else workflow

    def _agent_tools(self, agent: Any) -> list[ToolSpec] | None:
        """The tools ``agent`` was given, converted once per agent."""
        known = self._tools.get(id(agent))
        if known is None:
            known = self._tools[id(agent)] = (agent, _tool_specs(agent_tools(agent)))
        return known[1]

    def _agent_for(self, scope: _Scope) -> Agent:
        """The agent of ``scope`` now: a new instance at the start or when the name changed (a
        hand-off), referenced from the enclosing scope's agent at this point."""
        if scope.agent is None or scope.agent.name != scope.agent_name:
            parent = self._agent_for(scope.parent) if scope.parent is not None else None
            scope.agent = self._recorder.agent_started(None, scope.agent_name, parent)
        return scope.agent


def _react_action(parser: Any, text: str, n: int) -> OutputMessage | None:
    """The tool call a ReAct step's text names, if it names one (its parser's reading)."""
    try:
        step = parser.parse(text)
    except Exception:  # an answer, or text the parser cannot read: no call
        return None
    action = getattr(step, "action", None)
    if not isinstance(action, str) or not action:
        return None
    arguments = json.dumps(getattr(step, "action_input", None) or {}, default=str)
    call = ToolCall(id=f"react_{n}", name=action, parameters=arguments)
    return OutputMessage(type="tool_call", content=call)


# -- the handlers on the dispatcher ----------------------------------------------------------


class _Hub:
    """Installs the handlers while someone needs them. With the tracing instrument on, calls made
    outside any capture are forwarded to ``composo.tracing`` (the innermost ``AgentTracer``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self.forwarding = 0
        self._handlers: tuple[_EventHandler, _SpanHandler] | None = None
        self.calls = _Calls(limit=_PENDING_LIMIT)  # for forwarded calls: no capture to hold them

    def acquire(self, forward: bool = False) -> None:
        with self._lock:
            self._users += 1
            self.forwarding += int(forward)
            if self._handlers is None:
                events, spans = _EventHandler(), _SpanHandler()
                root = get_dispatcher()
                # New lists, so a dispatch already iterating the old one is not disturbed.
                root.event_handlers = [*root.event_handlers, events]
                root.span_handlers = [*root.span_handlers, spans]
                self._handlers = (events, spans)

    def release(self, forward: bool = False) -> None:
        with self._lock:
            self._users = max(0, self._users - 1)
            self.forwarding = max(0, self.forwarding - int(forward))
            if self.forwarding == 0:
                self.calls.clear()
            if self._users == 0 and self._handlers is not None:
                events, spans = self._handlers
                root = get_dispatcher()
                root.event_handlers = [h for h in root.event_handlers if h is not events]
                root.span_handlers = [h for h in root.span_handlers if h is not spans]
                self._handlers = None


_hub = _Hub()


class _EventHandler(BaseEventHandler):
    @classmethod
    def class_name(cls) -> str:
        return "ComposoTraceEventHandler"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        capture = _current.get()
        if capture is None and not _hub.forwarding:
            return
        try:
            _handle(capture, event)
        except Exception:  # never into the user's run
            _log.debug("could not record a LlamaIndex %s", type(event).__name__, exc_info=True)


def _handle(capture: LlamaIndexTraceCapture | None, event: BaseEvent) -> None:
    calls = capture._calls if capture is not None else _hub.calls
    if isinstance(event, LLMChatStartEvent):
        calls.offered(event.span_id, _tool_specs(event.additional_kwargs.get("tools")))
        return
    if not isinstance(event, (LLMChatEndEvent, LLMCompletionEndEvent)):
        return
    nested, tools = calls.finish(event.span_id)
    if nested or event.response is None:
        return
    if isinstance(event, LLMChatEndEvent):
        inputs = [chat_message_dict(m, i) for i, m in enumerate(event.messages)]
        outputs = [chat_message_dict(event.response.message)]
    else:
        inputs = [{"role": "user", "content": event.prompt}]
        outputs = [{"role": "assistant", "content": event.response.text}]
    interaction = to_trace_interaction(inputs, outputs, tools, keep_empty=True)
    if capture is not None:
        capture._record(event.span_id, interaction)
    else:
        ext.record_interaction(interaction)  # to the running AgentTracer


class _SpanHandler(NullSpanHandler):  # keeps no span objects of its own
    @classmethod
    def class_name(cls) -> str:
        return "ComposoTraceSpanHandler"

    def span_enter(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        parent_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        capture = _current.get()
        try:
            if capture is not None:
                capture._span_enter(id_, bound_args, instance, parent_id)
            elif _hub.forwarding and _llm_call(id_, instance):
                _hub.calls.enter(id_, parent_id, instance)
        except Exception:
            _log.debug("could not follow a LlamaIndex span", exc_info=True)

    # A span returned (exit) or raised (drop): either way it ends here.
    def span_exit(self, id_: str, *args: Any, **kwargs: Any) -> None:
        self._end(id_)

    def span_drop(self, id_: str, *args: Any, **kwargs: Any) -> None:
        self._end(id_)

    @staticmethod
    def _end(id_: str) -> None:
        capture = _current.get()
        if capture is not None:
            capture._span_end(id_)
        elif _hub.forwarding:
            _hub.calls.exit(id_)
