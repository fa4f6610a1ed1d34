"""``Instruments.OPENAI_AGENTS``: the OpenAI Agents SDK's own trace events as Composo traces.

One trace processor feeds the SDK spans that start inside an ``AgentTracer`` into its recording:
agent spans are sub-agents, model calls take their place at start and are converted when the
trace is read, function spans add the tool call and result the model calls lack. The SDK cannot
list or remove processors, so ours is added at each switch-on (an event seen twice counts once)
and idles while off; while on, OpenTelemetry spans of the same calls are left out.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents import add_trace_processor
from agents.tracing import (
    AgentSpanData,
    FunctionSpanData,
    GenerationSpanData,
    ResponseSpanData,
    Span,
    Trace,
    TracingProcessor,
    get_current_span,
    get_current_trace,
)

from composo._core import convert
from composo._core.trace import (
    LLMInteraction,
    ToolCall,
    ToolResponse,
    ToolSpec,
    chat_interaction,
    content_text,
    tool_spec,
)
from composo.errors import ComposoValidationError
from composo.tracing import _processor
from composo.tracing._agent import current_tracer
from composo.tracing._recorder import Agent, Step, TraceRecorder

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import Span as OtelSpan

__all__ = ["AgentsSDKCapture", "AgentsSDKProcessor"]

_log = logging.getLogger("composo.tracing")

OPENINFERENCE_SCOPE = "openinference.instrumentation.openai_agents"
"""The instrumentation scope of OpenInference's Agents SDK spans (the same calls, again)."""

_DISPLACED = (
    "OpenInference's OpenAI Agents SDK instrumentor replaced Composo's trace processor (its "
    "exclusive mode), so AgentTracer records the runs from its spans instead; switch it on "
    "before Instruments.OPENAI_AGENTS, or with instrument(exclusive_processor=False)"
)
_NO_DATA = (
    "an OpenAI Agents SDK model call carried no messages (the run has "
    "trace_include_sensitive_data off), so it is left out of the trace; turn it on with "
    "RunConfig(trace_include_sensitive_data=True) or OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA=1"
)


@dataclass(eq=False, slots=True)
class _Run:
    """Where an SDK agent's spans record, and the tool calls its latest model call made that no
    function span has answered yet: ``(call id, name, arguments)``."""

    tracer: Any  # the AgentTracer it records for
    recorder: TraceRecorder
    agent: Agent
    data: AgentSpanData | None  # the SDK agent's span data (its tool names), None outside one
    pending: list[tuple[str, str, str]] = field(default_factory=list)


class AgentsSDKProcessor(TracingProcessor):
    """The Agents SDK trace processor feeding active ``AgentTracer`` recordings."""

    def __init__(self) -> None:
        self.active = False
        self._lock = threading.Lock()
        # ids of the SDK traces that started while this was on (their spans are ours to record)
        self._traces: set[str] = set()
        self._warned_displaced = False
        # SDK span id -> the run it belongs to (an agent span: its own), while the span is open
        self._open: dict[str, _Run] = {}
        # model-call span id -> its place in the agent's history
        self._calls: dict[str, Step] = {}

    def on_trace_start(self, trace: Trace) -> None:
        if self.active:
            # a trace started outside any tracer may still hold runs inside one
            with self._lock:
                self._traces.add(trace.trace_id)

    def on_trace_end(self, trace: Trace) -> None:
        if self._traces:
            with self._lock:
                self._traces.discard(trace.trace_id)

    def on_span_start(self, span: Span[Any]) -> None:
        if not self.active or span.trace_id not in self._traces or span.span_id in self._open:
            return  # not ours, or the same span again (the processor is registered twice)
        parent_id = span.parent_id
        run = self._open.get(parent_id) if parent_id is not None else None
        tracer = current_tracer()
        if run is None or (tracer is not None and tracer is not run.tracer):
            # the top of a run inside a tracer (or an AgentTracer entered inside an SDK span)
            run = _top(tracer)
            if run is None:
                return
        data = span.span_data
        span_id = span.span_id
        if isinstance(data, AgentSpanData):
            agent = run.recorder.agent_started(span_id, data.name or "agent", run.agent)
            run = _Run(run.tracer, run.recorder, agent, data)
        elif isinstance(data, (ResponseSpanData, GenerationSpanData)):
            step = run.recorder.reserve(run.agent)
            with self._lock:
                self._calls[span_id] = step
        with self._lock:
            self._open[span_id] = run

    def on_span_end(self, span: Span[Any]) -> None:
        if not self._open:
            return
        span_id = span.span_id
        with self._lock:
            run = self._open.pop(span_id, None)
            step = self._calls.pop(span_id, None)
        if run is None:
            return
        data = span.span_data
        try:
            if isinstance(data, AgentSpanData):
                run.recorder.agent_finished(run.agent)
            elif step is not None:
                _call_ended(span, step, run)
            elif isinstance(data, FunctionSpanData):
                _tool_ended(span, data, run, self._lock)
        except Exception:  # never into the user's run
            _log.warning("could not record an OpenAI Agents SDK span", exc_info=True)

    def shutdown(self) -> None:
        self.active = False

    def force_flush(self) -> None:
        return None

    def recorded_here(self, span: OtelSpan) -> bool:
        """Whether an OpenTelemetry span starting now reports what this processor records:
        OpenInference's Agents SDK spans of a run it sees (a trace's own span starts before
        the trace is current: it is left out too), or any span started inside an SDK model call
        being recorded (the OpenAI client's own span of that call)."""
        if not self.active:
            return False
        scope = span.instrumentation_scope
        if scope is not None and scope.name == OPENINFERENCE_SCOPE:
            trace = get_current_trace()
            if trace is None or trace.trace_id in self._traces:
                return True
            if not self._warned_displaced:
                self._warned_displaced = True
                _log.warning(_DISPLACED)
            return False
        if not self._calls:
            return False
        current = get_current_span()
        return current is not None and current.span_id in self._calls

    def pending(self) -> int:
        """SDK traces and spans open (for tests of bounded memory)."""
        return len(self._traces) + len(self._open)


def _top(tracer: Any) -> _Run | None:
    """Where a run starting here records: the active tracer's agent, if a tracer is active."""
    if tracer is None:
        return None
    recorder = tracer._recorder
    agent = tracer._here()
    if recorder is None or agent is None:
        return None
    return _Run(tracer, recorder, agent, None)


_warned = False


def _call_ended(span: Span[Any], step: Step, run: _Run) -> None:
    global _warned
    failed = span.error is not None  # nothing the model answered
    found = None if failed else _reading(span.span_data, run)
    if found is not None:
        step.fill(found)
        return
    step.release()
    if not failed and not _warned:
        _warned = True
        _log.warning(_NO_DATA)


def _reading(data: Any, run: _Run) -> Callable[[], LLMInteraction | None] | None:
    """What converts a model call span when the trace is read (``None``: it has no messages);
    the tool calls it made wait for their function spans."""
    if isinstance(data, ResponseSpanData):
        response, given = data.response, data.input
        if response is None:
            return None
        run.pending = _function_calls(getattr(response, "output", None) or ())
        given = given if isinstance(given, str) or given is None else list(given)
        return functools.partial(_read, _from_response, response, given, run.data)
    assert isinstance(data, GenerationSpanData)
    output = list(data.output) if data.output is not None else None
    if output is None and data.input is None:
        return None
    run.pending = _function_calls(_generation_items(output or []))
    given_messages = list(data.input) if data.input is not None else []
    return functools.partial(_read, _from_generation, given_messages, output, run.data)


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def _function_calls(items: Sequence[Any]) -> list[tuple[str, str, str]]:
    """``(id, name, arguments)`` of the function calls among output items (Responses items or a
    chat message's ``tool_calls``)."""
    out = []
    for item in items:
        if _field(item, "type") == "function_call":
            call_id, name, args = (
                str(_field(item, k) or "") for k in ("call_id", "name", "arguments")
            )
            out.append((call_id, name, args))
        for call in _field(item, "tool_calls") or ():
            fn = _field(call, "function")
            if fn is not None:
                args = _field(fn, "arguments")
                out.append((str(_field(call, "id") or ""), str(_field(fn, "name")), str(args)))
    return out


def _response_dump(output: Sequence[Any]) -> Any:
    """The Responses ``Response`` dump a generation span's output may be instead of chat
    messages (what the SDK's streamed Chat Completions path records), else ``None``."""
    return output[0] if len(output) == 1 and _field(output[0], "object") == "response" else None


def _generation_items(output: Sequence[Any]) -> Sequence[Any]:
    dump = _response_dump(output)
    return output if dump is None else (_field(dump, "output") or ())


def _agent_tools(data: AgentSpanData | None) -> list[ToolSpec] | None:
    """The tools the SDK agent had, by name only (what its span records)."""
    names = data.tools if data is not None else None
    return [ToolSpec(name=n) for n in names] if names else None


def _read(convert_call: Callable[..., LLMInteraction], *args: Any) -> LLMInteraction | None:
    try:
        return convert_call(*args)
    except ComposoValidationError as exc:
        _log.warning("could not read an OpenAI Agents SDK model call into the trace: %s", exc)
        return None


def _from_response(
    response: Any, given: str | list[Any] | None, agent: AgentSpanData | None
) -> LLMInteraction:
    """One Responses API call: the instructions and input items it was sent, the response."""
    inputs = convert.to_input_messages(given) if given else []
    instructions = getattr(response, "instructions", None)
    if instructions:  # text, or input items
        said = instructions
        if not isinstance(said, str):
            said = content_text([m.get("content") for m in convert.to_input_messages(list(said))])
        inputs.insert(0, {"role": "system", "content": said})
    outputs = convert.to_result_messages(response)
    offered = getattr(response, "tools", None)
    tools = [tool_spec(t) for t in convert.to_tools(list(offered))] if offered else None
    return chat_interaction(inputs, outputs, tools or _agent_tools(agent), keep_empty=True)


def _from_generation(
    given: list[Any], output: list[Any] | None, agent: AgentSpanData | None
) -> LLMInteraction:
    """One Chat Completions (or other provider's) call, as the SDK's generation span has it."""
    inputs = convert.to_messages(given) if given else []
    dump = _response_dump(output or [])
    answer = output if dump is None else dump
    outputs = convert.to_result_messages(answer) if answer else []
    return chat_interaction(inputs, outputs, _agent_tools(agent), keep_empty=True)


def _tool_ended(span: Span[Any], data: FunctionSpanData, run: _Run, lock: threading.Lock) -> None:
    """A function tool ran: its call and result, under the id the model gave the call."""
    if data.input is None and data.output is None:
        return  # sensitive data off: nothing to show
    name = data.name
    arguments = data.input or "{}"
    with lock:  # tools run in parallel take their ids one at a time
        call_id = _match(run, name, arguments) or span.span_id
    run.recorder.tool_called(run.agent, ToolCall(id=call_id, name=name, parameters=arguments))
    if data.output is not None:
        answer = ToolResponse(id=call_id, response=str(data.output), name=name)
        run.recorder.tool_responded(run.agent, answer)


def _match(run: _Run, name: str, arguments: str) -> str | None:
    """The id of the latest model call's call of ``name`` with these arguments (else the first
    of that name), taken so that it answers one function span only."""
    pending = run.pending
    for exact in (True, False):
        for i, (call_id, called, args) in enumerate(pending):
            if called == name and (args == arguments or not exact):
                del pending[i]
                return call_id or None
    return None


PROCESSOR = AgentsSDKProcessor()
"""The one processor, added to the SDK's trace provider each time the instrument is switched on."""

_lock = threading.Lock()


class AgentsSDKCapture:
    """Switches the native capture on and off (what ``Instruments.OPENAI_AGENTS`` resolves to,
    through the instrumentor interface ``ComposoTracer.init`` uses; no OpenTelemetry spans)."""

    @property
    def is_instrumented_by_opentelemetry(self) -> bool:
        return PROCESSOR.active

    def instrument(self, tracer_provider: Any = None, **kwargs: Any) -> None:
        """Add the processor to the SDK's trace provider and start recording."""
        with _lock:
            # Added each time: the SDK cannot say whether it is still registered (OpenInference's
            # exclusive instrumentor replaces them all); an event delivered twice counts once.
            add_trace_processor(PROCESSOR)
            PROCESSOR.active = True
            hooks = _processor.recorded_elsewhere
            if PROCESSOR.recorded_here not in hooks:
                _processor.recorded_elsewhere = (*hooks, PROCESSOR.recorded_here)
        if os.environ.get("OPENAI_AGENTS_DISABLE_TRACING", "").lower() in ("1", "true"):
            _log.warning(
                "OPENAI_AGENTS_DISABLE_TRACING is set, so the OpenAI Agents SDK reports no runs "
                "and AgentTracer sees none of its calls"
            )

    def uninstrument(self, **kwargs: Any) -> None:
        """Stop recording (the processor stays registered, idle: the SDK cannot remove one)."""
        with _lock:
            PROCESSOR.active = False
            _processor.recorded_elsewhere = tuple(
                h for h in _processor.recorded_elsewhere if h != PROCESSOR.recorded_here
            )
