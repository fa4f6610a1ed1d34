"""Traces recorded by the OpenTelemetry GenAI conventions.

PydanticAI's own instrumentation, with its real ``Agent`` classes and a scripted ``FunctionModel``
(no network): a lead agent delegating to a researcher through a tool, each calling one tool. The
run is read live (``Instruments.PYDANTIC_AI`` and ``AgentTracer``), from its OTLP/JSON export
(``trace_from_otlp`` and ``composo evaluate-traces``) and by ``composo serve --otlp`` (protobuf),
and scored by the local server. Span trees written with the OpenTelemetry SDK's own API in each
form the conventions have had (message attributes, per-message events, indexed attributes,
PydanticAI's first format) read to one and the same trace.
"""

from __future__ import annotations

import base64
import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from google.protobuf.json_format import MessageToDict, ParseDict
from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from composo import Composo, MultiAgentTrace, ToolCall, ToolResponse, trace_from_otlp
from composo.tracing import AgentTracer, ComposoTracer, Instruments, read_otlp
from composo.tracing._otlp import records_from_protobuf
from composo.tracing._spantree import convert_spans
from tests.support.cli import run_composo
from tests.support.lazy import lazy_import
from tests.support.otlp_files import OtlpJsonFileExporter
from tests.support.servers import HTTP, TEST_API_KEY, ServerProcess

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import AgentInfo, FunctionModel

pydantic_ai = lazy_import("pydantic_ai")

CRITERION = "Reward agents that answer the user's question using their tools"
QUESTION = "Why do batteries die in the cold?"
FOUND = "notes on cold batteries: reactions slow below 0C"
FINDING = "Cold slows the chemistry."
ANSWER = "Batteries die in the cold because their chemistry slows."


# -- PydanticAI ------------------------------------------------------------------------------------


def scripted(*answers: ModelResponse) -> FunctionModel:
    """A model giving these answers in turn."""
    from pydantic_ai.models.function import FunctionModel

    queue = list(answers)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return queue.pop(0)

    return FunctionModel(respond)


def run_two_agents() -> str:
    """The lead asks the researcher (a tool that runs the researcher agent), who searches the
    notes (a tool), then both answer."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

    researcher = pydantic_ai.Agent(
        scripted(
            ModelResponse(
                parts=[ToolCallPart("search_notes", {"query": "cold batteries"}, "call_search")]
            ),
            ModelResponse(parts=[TextPart(FINDING)]),
        ),
        name="researcher",
        instructions="Find facts in the notes.",
    )

    @researcher.tool_plain
    def search_notes(query: str) -> str:
        """Search the team's notes."""
        return f"notes on {query}: reactions slow below 0C"

    lead = pydantic_ai.Agent(
        scripted(
            ModelResponse(
                parts=[ToolCallPart("ask_researcher", {"question": QUESTION}, "call_delegate")]
            ),
            ModelResponse(parts=[TextPart(ANSWER)]),
        ),
        name="lead",
        instructions="Answer the user; delegate research.",
    )

    @lead.tool
    async def ask_researcher(ctx: pydantic_ai.RunContext[None], question: str) -> str:
        """Ask the researcher a question."""
        result = await researcher.run(question, usage=ctx.usage)
        return result.output

    return lead.run_sync(QUESTION).output


@pytest.fixture
def memory() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A provider keeping its spans in memory; tracing is off again afterwards."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    ComposoTracer.shutdown()
    provider.shutdown()


@pytest.fixture(scope="module")
def otlp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    results = tmp_path_factory.mktemp("otlp") / "results.jsonl"
    args = ["--otlp", "--trace-criteria", CRITERION, "--otlp-results", str(results)]
    with ServerProcess(extra_args=[*args, "--otlp-idle", "0.5"]) as srv:
        yield srv


def by_name(trace: MultiAgentTrace, name: str) -> Any:
    [agent] = [a for a in trace.agent_instance_by_id.values() if a.name == name]
    return agent


def check_two_agents(trace: MultiAgentTrace) -> None:
    """Both agents by name, the researcher's run where the lead called it, every model call's
    messages, both tool calls with their arguments and matched responses, the tools offered."""
    lead, researcher = by_name(trace, "lead"), by_name(trace, "researcher")
    asked, sub, answered = lead.interactions
    assert sub == researcher.id
    assert [(m.role, m.content) for m in asked.input_messages] == [
        ("system", "Answer the user; delegate research."),
        ("user", QUESTION),
    ]
    delegate = ToolCall(
        id="call_delegate", name="ask_researcher", parameters=json.dumps({"question": QUESTION})
    )
    assert [m.content for m in asked.output_messages] == [delegate]
    assert [(t.name, t.description) for t in asked.tools_available or []] == [
        ("ask_researcher", "Ask the researcher a question.")
    ]
    assert "question" in json.loads((asked.tools_available or [])[0].parameters)["properties"]
    assert answered.input_messages[-1].content == ToolResponse(
        id="call_delegate", response=FINDING, name="ask_researcher"
    )
    assert [m.content for m in answered.output_messages] == [ANSWER]

    searched, read = researcher.interactions
    assert [m.content for m in searched.input_messages] == ["Find facts in the notes.", QUESTION]
    search = ToolCall(
        id="call_search", name="search_notes", parameters=json.dumps({"query": "cold batteries"})
    )
    assert [m.content for m in searched.output_messages] == [search]
    assert [t.name for t in searched.tools_available or []] == ["search_notes"]
    assert read.input_messages[-1].content == ToolResponse(
        id="call_search", response=FOUND, name="search_notes"
    )
    assert [m.content for m in read.output_messages] == [FINDING]


def test_a_pydantic_ai_run_is_a_two_agent_trace_live_from_its_export_and_scored(
    memory: tuple[TracerProvider, InMemorySpanExporter],
    client: Composo,
    live: ServerProcess,
    tmp_path: Path,
) -> None:
    provider, exporter = memory
    ComposoTracer.init(Instruments.PYDANTIC_AI, tracer_provider=provider, agent_spans=True)
    with AgentTracer("assistant", agent_id="assistant-1") as tracer:
        assert run_two_agents() == ANSWER
    trace = tracer.trace
    assert trace.root_agent_instance_id == "assistant-1"
    assert trace.agent_instance_by_id["assistant-1"].interactions == [by_name(trace, "lead").id]
    check_two_agents(trace)

    verdict = client.evaluate_trace(trace, criteria=CRITERION)
    assert {"lead", "researcher"} <= set(verdict.results_by_agent_name)
    assert verdict.overall_score is not None

    # the same run's spans, written as the Collector's file exporter writes them
    export = tmp_path / "export.jsonl"
    OtlpJsonFileExporter(export).export(exporter.get_finished_spans())
    assert trace_from_otlp(export) == trace
    [converted] = list(read_otlp(export))
    assert converted.notes == []

    out = tmp_path / "results.jsonl"
    args = ["evaluate-traces", str(export), "-c", CRITERION, "-o", str(out)]
    done = run_composo(*args, "--api-key", live.api_key, "--base-url", live.base_url)
    assert done.returncode == 0, done.stderr
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["id"] == converted.trace_id and row["error"] is None
    assert isinstance(row["score"], float)


def test_pydantic_ai_spans_reach_composo_serve_otlp_as_protobuf(
    memory: tuple[TracerProvider, InMemorySpanExporter], otlp_server: ServerProcess
) -> None:
    provider, exporter = memory
    ComposoTracer.init(Instruments.PYDANTIC_AI, tracer_provider=provider)
    run_two_agents()  # no AgentTracer: PydanticAI's own agents are the whole trace
    spans = exporter.get_finished_spans()
    endpoint = f"{otlp_server.base_url}/v1/traces"
    sender = OTLPSpanExporter(endpoint=endpoint, headers={"API-Key": TEST_API_KEY})
    assert sender.export(spans).name == "SUCCESS"
    sender.shutdown()
    trace_id = format(spans[0].context.trace_id, "032x")

    deadline = time.monotonic() + 20
    while True:
        answer = HTTP.get(f"{endpoint}/{trace_id}", headers={"API-Key": TEST_API_KEY})
        if answer.status_code == 200 and answer.json().get("trace"):
            break
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.05)
    entry = answer.json()
    assert entry["error"] is None and CRITERION in entry["tasks"]
    trace = MultiAgentTrace.model_validate(entry["trace"])
    check_two_agents(trace)
    assert trace.agent_instance_by_id[trace.root_agent_instance_id].name == "lead"


def test_pydantic_ai_instrumentation_goes_off_with_the_tracer(
    memory: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = memory
    ComposoTracer.init([Instruments.PYDANTIC_AI], tracer_provider=provider)
    assert "pydantic_ai" in ComposoTracer.instrumented()
    run_two_agents()
    spans = len(exporter.get_finished_spans())
    assert spans > 0
    ComposoTracer.shutdown()
    run_two_agents()
    assert len(exporter.get_finished_spans()) == spans  # PydanticAI's agents are quiet again


def test_pydantic_ai_member_names_its_extra_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)  # not installed here
    with pytest.raises(ImportError, match=r"pip install 'composo\[pydantic-ai\]'"):
        ComposoTracer.init(Instruments.PYDANTIC_AI)
    assert ComposoTracer.instrumented() == []
    ComposoTracer.shutdown()


# -- span trees written with the SDK's own API -----------------------------------------------------

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
SYSTEM = "You plan trips."
ASK = "Is it warm in Rome?"
ARGS = {"city": "Rome"}
RESULT = "sunny, 24C"
REPLY = "Yes: sunny and 24C."
POEM_ASK = "A line about sun in Rome"
POEM = "Sun on old stones."

# One model call: (system, [(role, text | tool call | tool response)], [output: text | call])
Call = tuple[str | None, list[tuple[str, Any]], list[Any]]
TOOL_CALL = ("call", "call_rome", "get_weather", ARGS)
TOOL_RESPONSE = ("response", "call_rome", "get_weather", RESULT)
FIRST: Call = (SYSTEM, [("user", ASK)], [TOOL_CALL])
SECOND: Call = (SYSTEM, [("user", ASK), ("assistant", TOOL_CALL), ("tool", TOOL_RESPONSE)], [REPLY])
POEM_CALL: Call = (None, [("user", POEM_ASK)], [POEM])


def _part(item: Any) -> dict[str, Any]:
    if isinstance(item, str):
        return {"type": "text", "content": item}
    kind, call_id, name, value = item
    if kind == "call":
        return {"type": "tool_call", "id": call_id, "name": name, "arguments": value}
    return {"type": "tool_call_response", "id": call_id, "response": value}


def as_attributes(call: Call) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """The current conventions: JSON messages of typed parts."""
    system, inputs, outputs = call
    attrs = {
        "gen_ai.input.messages": json.dumps(
            [{"role": role, "parts": [_part(item)]} for role, item in inputs]
        ),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [_part(o) for o in outputs]}]
        ),
    }
    if system:
        attrs["gen_ai.system_instructions"] = json.dumps([{"type": "text", "content": system}])
    return attrs, []


def _event(role: str, item: Any) -> tuple[str, dict[str, Any]]:
    """One message as the older conventions' event (arguments as JSON text, as they wrote)."""
    if role == "tool":
        _, call_id, _, value = item
        return "gen_ai.tool.message", {"role": "tool", "id": call_id, "content": value}
    if isinstance(item, str):
        return f"gen_ai.{role}.message", {"role": role, "content": item}
    _, call_id, name, value = item
    call = {"id": call_id, "type": "function"}
    call["function"] = {"name": name, "arguments": json.dumps(value)}
    return f"gen_ai.{role}.message", {"role": role, "tool_calls": [call]}


def _events(call: Call) -> list[tuple[str, dict[str, Any]]]:
    system, inputs, outputs = call
    events = [("gen_ai.system.message", {"role": "system", "content": system})] if system else []
    events += [_event(role, item) for role, item in inputs]
    for item in outputs:
        _, message = _event("assistant", item)
        events.append(("gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": message}))
    return events


def as_span_events(call: Call) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """The older conventions: one span event per message, structured values as JSON text."""
    flat = [
        (name, {k: v if isinstance(v, str | int) else json.dumps(v) for k, v in body.items()})
        for name, body in _events(call)
    ]
    return {}, flat


def as_events_attribute(call: Call) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """PydanticAI's first format: the same events as a JSON list in the attribute ``events``."""
    return {"events": json.dumps([{"event.name": n, **body} for n, body in _events(call)])}, []


def as_indexed(call: Call) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """OpenLLMetry's indexed attributes."""
    system, inputs, outputs = call
    attrs: dict[str, Any] = {}
    messages = [("system", system)] if system else []
    for i, (role, item) in enumerate([*messages, *inputs]):
        key = f"gen_ai.prompt.{i}"
        attrs[f"{key}.role"] = role
        if isinstance(item, str):
            attrs[f"{key}.content"] = item
        elif role == "tool":
            attrs[f"{key}.tool_call_id"], attrs[f"{key}.content"] = item[1], item[3]
        else:
            attrs[f"{key}.tool_calls.0.id"] = item[1]
            attrs[f"{key}.tool_calls.0.name"] = item[2]
            attrs[f"{key}.tool_calls.0.arguments"] = json.dumps(item[3])
    attrs["gen_ai.completion.0.role"] = "assistant"
    for item in outputs:
        if isinstance(item, str):
            attrs["gen_ai.completion.0.content"] = item
        else:
            attrs["gen_ai.completion.0.tool_calls.0.id"] = item[1]
            attrs["gen_ai.completion.0.tool_calls.0.name"] = item[2]
            attrs["gen_ai.completion.0.tool_calls.0.arguments"] = json.dumps(item[3])
    return attrs, []


def as_details_event(call: Call) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """The current messages on a ``gen_ai.client.inference.operation.details`` event (Strands)."""
    attrs, _ = as_attributes(call)
    return {}, [("gen_ai.client.inference.operation.details", attrs)]


FORMS: dict[str, Callable[[Call], tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]]] = {
    "attributes": as_attributes,
    "span events": as_span_events,
    "events attribute": as_events_attribute,
    "indexed attributes": as_indexed,
    "details event": as_details_event,
}


def write_tree(provider: TracerProvider, form: str) -> None:
    """A planner (one tool, then a writer sub-agent, then its answer) in one GenAI form."""
    app = provider.get_tracer("app")
    encode = FORMS[form]

    def chat(call: Call, tools: bool = False) -> None:
        attrs, events = encode(call)
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1", **attrs}
        if tools:
            attrs["gen_ai.tool.definitions"] = json.dumps([WEATHER])
        with app.start_as_current_span("chat gpt-4.1", attributes=attrs) as span:
            for name, body in events:
                span.add_event(name, attributes=body)

    planner = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}
    with app.start_as_current_span("invoke_agent planner", attributes=planner):
        chat(FIRST, tools=True)
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_rome",
            "gen_ai.tool.call.arguments": json.dumps(ARGS),
            "gen_ai.tool.call.result": RESULT,
        }
        with app.start_as_current_span("execute_tool get_weather", attributes=tool):
            pass
        writer = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "writer"}
        with app.start_as_current_span("invoke_agent writer", attributes=writer):
            chat(POEM_CALL)
        chat(SECOND, tools=True)


def otlp_json(spans: tuple[ReadableSpan, ...]) -> dict[str, Any]:
    """The export request as OTLP/JSON (the OTLP exporter's own encoder)."""
    found: dict[str, Any] = MessageToDict(encode_spans(spans))
    return found


def file_trace(form: str) -> MultiAgentTrace:
    """The tree written in ``form`` by a provider of its own, read from its OTLP/JSON export."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    write_tree(provider, form)
    return trace_from_otlp(otlp_json(exporter.get_finished_spans()))


def shape(trace: MultiAgentTrace) -> list[tuple[str, list[Any]]]:
    """A trace with its agents named instead of numbered (span ids differ from run to run)."""
    agents = trace.agent_instance_by_id
    return [
        (a.name, [agents[s].name if isinstance(s, str) else s for s in a.interactions])
        for a in agents.values()
    ]


@pytest.mark.parametrize("form", list(FORMS))
def test_every_form_of_the_conventions_gives_the_same_trace_live_and_from_files(
    memory: tuple[TracerProvider, InMemorySpanExporter], form: str
) -> None:
    provider, exporter = memory
    ComposoTracer.init([], tracer_provider=provider, agent_spans=True)
    with AgentTracer("trip", agent_id="trip-1") as tracer:
        write_tree(provider, form)
    live = tracer.trace
    assert trace_from_otlp(otlp_json(exporter.get_finished_spans())) == live

    planner = by_name(live, "planner")
    first, writer, second = planner.interactions
    assert writer == by_name(live, "writer").id
    assert [(m.role, m.type, m.content) for m in first.input_messages] == [
        ("system", "text", SYSTEM),
        ("user", "text", ASK),
    ]
    call = ToolCall(id="call_rome", name="get_weather", parameters=json.dumps(ARGS))
    assert [m.content for m in first.output_messages] == [call]
    assert [t.name for t in first.tools_available or []] == ["get_weather"]
    assert [m.content for m in second.input_messages[2:]] == [
        call,
        ToolResponse(id="call_rome", response=RESULT, name="get_weather"),
    ]
    assert [m.content for m in second.output_messages] == [REPLY]
    [poem] = by_name(live, "writer").interactions
    assert [m.content for m in poem.output_messages] == [POEM]
    # exactly the trace the current attribute form gives
    assert shape(file_trace(form)) == shape(file_trace("attributes"))


def test_a_trace_mixing_openinference_and_genai_spans_is_one_tree() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = provider.get_tracer("app")
    oi_agent = {"openinference.span.kind": "AGENT", "agent.name": "router"}
    oi_llm = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": POEM_ASK,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": POEM,
    }
    genai = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}
    with app.start_as_current_span("router", attributes=oi_agent):
        with app.start_as_current_span("invoke_agent planner", attributes=genai):
            attrs, _ = as_attributes(FIRST)
            attrs["gen_ai.operation.name"] = "chat"
            with (
                app.start_as_current_span("chat", attributes=attrs),
                app.start_as_current_span("inner", attributes=oi_llm),
            ):
                pass  # the provider client's own span inside the framework's: one call
        with app.start_as_current_span("llm", attributes=oi_llm):
            pass
    trace = trace_from_otlp(otlp_json(exporter.get_finished_spans()))
    router = trace.agent_instance_by_id[trace.root_agent_instance_id]
    assert router.name == "router"
    planner_id, own = router.interactions
    assert trace.agent_instance_by_id[planner_id].name == "planner"
    assert [m.content for m in own.output_messages] == [POEM]
    [call] = trace.agent_instance_by_id[planner_id].interactions
    assert call.output_messages[0].content.name == "get_weather"


def _any(value: Any) -> dict[str, Any]:
    """An OTLP/JSON ``AnyValue``, structured (arrays and key-value lists, not JSON text)."""
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_any(v) for v in value]}}
    return {"kvlistValue": {"values": [{"key": k, "value": _any(v)} for k, v in value.items()]}}


def test_structured_attribute_values_decode_from_otlp_json_and_protobuf() -> None:
    """Exporters in other languages may send messages as arrays of key-value lists."""
    trace_id = base64.b64encode(bytes.fromhex("0af7651916cd43dd8448eb211c80319c")).decode()
    system, inputs, outputs = FIRST

    def span(span_id: str, parent: str | None, name: str, attrs: dict[str, Any]) -> dict[str, Any]:
        found = {
            "traceId": trace_id,
            "spanId": base64.b64encode(bytes.fromhex(span_id)).decode(),
            "name": name,
            "startTimeUnixNano": "1",
            "endTimeUnixNano": "2",
            "attributes": [{"key": k, "value": _any(v)} for k, v in attrs.items()],
        }
        if parent:
            found["parentSpanId"] = base64.b64encode(bytes.fromhex(parent)).decode()
        return found

    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": [{"role": r, "parts": [_part(i)]} for r, i in inputs],
        "gen_ai.output.messages": [{"role": "assistant", "parts": [_part(o) for o in outputs]}],
        "gen_ai.system_instructions": [{"type": "text", "content": system}],
        "gen_ai.tool.definitions": [WEATHER],
        "gen_ai.response.finish_reasons": ["tool_calls"],
        "gen_ai.usage.input_tokens": 12,
    }
    planner = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}
    doc = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            span("00f067aa0ba902b7", None, "invoke_agent planner", planner),
                            span("00f067aa0ba902b8", "00f067aa0ba902b7", "chat", chat),
                        ]
                    }
                ]
            }
        ]
    }
    from_json = trace_from_otlp(doc)
    request = ParseDict(doc, ExportTraceServiceRequest())
    records = list(records_from_protobuf(request.SerializeToString()))
    from_protobuf = convert_spans(records[0].trace_id, records).trace
    assert from_protobuf == from_json
    [call] = by_name(from_json, "planner").interactions
    assert [m.content for m in call.input_messages] == [SYSTEM, ASK]
    assert call.output_messages[0].content == ToolCall(
        id="call_rome", name="get_weather", parameters=json.dumps(ARGS)
    )
    assert [t.name for t in call.tools_available or []] == ["get_weather"]


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6])
def test_every_pydantic_ai_data_format_gives_the_two_agent_trace(version: int) -> None:
    """PydanticAI's formats: version 2 names spans ``agent run`` / ``running tool``; from
    version 6 tool results come in ``tool`` messages instead of ``user`` ones."""
    from pydantic_ai.models.instrumented import InstrumentationSettings

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with pytest.warns() if version < 5 else contextlib.nullcontext():  # older formats warn
        settings = InstrumentationSettings(tracer_provider=provider, version=version)  # type: ignore[arg-type]
    pydantic_ai.Agent.instrument_all(settings)
    try:
        run_two_agents()
    finally:
        pydantic_ai.Agent.instrument_all(False)
    check_two_agents(trace_from_otlp(otlp_json(exporter.get_finished_spans())))


def span_tree(
    provider: TracerProvider, spans: list[tuple[int, str, dict[str, Any], list[Any]]]
) -> None:
    """Spans given as (depth, name, attributes, events), each under the last one less deep."""
    app = provider.get_tracer("app")
    open_spans: list[Any] = []
    for depth, name, attrs, events in spans:
        while len(open_spans) > depth:
            open_spans.pop().end()
        parent = open_spans[-1] if open_spans else None
        context = trace_api.set_span_in_context(parent) if parent is not None else None
        span = app.start_span(name, context=context, attributes=attrs)
        for event_name, body in events:
            span.add_event(event_name, attributes=body)
        open_spans.append(span)
    while open_spans:
        open_spans.pop().end()


def _blocks(*items: Any) -> str:
    return json.dumps(list(items))


FRAMEWORKS: dict[str, list[tuple[int, str, dict[str, Any], list[Any]]]] = {
    # Strands Agents: Bedrock content blocks as JSON text in span events
    "strands": [
        (
            0,
            "invoke_agent planner",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
            [],
        ),
        (1, "execute_event_loop_cycle", {}, []),
        (
            2,
            "chat",
            {"gen_ai.operation.name": "chat"},
            [
                ("gen_ai.system.message", {"content": _blocks({"text": SYSTEM})}),
                ("gen_ai.user.message", {"content": _blocks({"text": ASK})}),
                (
                    "gen_ai.choice",
                    {
                        "finish_reason": "tool_use",
                        "message": _blocks(
                            {
                                "toolUse": {
                                    "toolUseId": "call_rome",
                                    "name": "get_weather",
                                    "input": ARGS,
                                }
                            }
                        ),
                    },
                ),
            ],
        ),
        (
            2,
            "execute_tool get_weather",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_rome",
            },
            [
                (
                    "gen_ai.tool.message",
                    {"role": "tool", "content": json.dumps(ARGS), "id": "call_rome"},
                ),
                ("gen_ai.choice", {"message": _blocks({"text": RESULT}), "id": "call_rome"}),
            ],
        ),
        (1, "execute_event_loop_cycle", {}, []),
        (
            2,
            "chat",
            {"gen_ai.operation.name": "chat"},
            [
                ("gen_ai.system.message", {"content": _blocks({"text": SYSTEM})}),
                ("gen_ai.user.message", {"content": _blocks({"text": ASK})}),
                (
                    "gen_ai.assistant.message",
                    {
                        "content": _blocks(
                            {
                                "toolUse": {
                                    "toolUseId": "call_rome",
                                    "name": "get_weather",
                                    "input": ARGS,
                                }
                            }
                        )
                    },
                ),
                (
                    "gen_ai.tool.message",
                    {
                        "content": _blocks(
                            {
                                "toolResult": {
                                    "toolUseId": "call_rome",
                                    "content": [{"text": RESULT}],
                                    "status": "success",
                                }
                            }
                        )
                    },
                ),
                (
                    "gen_ai.choice",
                    {"finish_reason": "end_turn", "message": _blocks({"text": REPLY})},
                ),
            ],
        ),
    ],
    # Semantic Kernel: the whole prompt and completion as JSON in one event each
    "semantic kernel": [
        (
            0,
            "invoke_agent planner",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
            [],
        ),
        (
            1,
            "chat.completions gpt-4.1",
            {"gen_ai.operation.name": "chat.completions"},
            [
                (
                    "gen_ai.content.prompt",
                    {
                        "gen_ai.prompt": json.dumps(
                            [
                                {"role": "system", "content": SYSTEM},
                                {"role": "user", "content": ASK},
                            ]
                        )
                    },
                ),
                (
                    "gen_ai.content.completion",
                    {
                        "gen_ai.completion": json.dumps(
                            [
                                {
                                    "role": "assistant",
                                    "content": None,
                                    "tool_calls": [
                                        {
                                            "id": "call_rome",
                                            "type": "function",
                                            "function": {
                                                "name": "get_weather",
                                                "arguments": json.dumps(ARGS),
                                            },
                                        }
                                    ],
                                }
                            ]
                        )
                    },
                ),
            ],
        ),
        (
            1,
            "execute_tool get_weather",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_rome",
                "gen_ai.tool.call.result": RESULT,
            },
            [],
        ),
        (
            1,
            "chat.completions gpt-4.1",
            {"gen_ai.operation.name": "chat.completions"},
            [
                (
                    "gen_ai.content.prompt",
                    {
                        "gen_ai.prompt": json.dumps(
                            [
                                {"role": "system", "content": SYSTEM},
                                {"role": "user", "content": ASK},
                                {
                                    "role": "assistant",
                                    "content": None,
                                    "tool_calls": [
                                        {
                                            "id": "call_rome",
                                            "type": "function",
                                            "function": {
                                                "name": "get_weather",
                                                "arguments": json.dumps(ARGS),
                                            },
                                        }
                                    ],
                                },
                                {"role": "tool", "tool_call_id": "call_rome", "content": RESULT},
                            ]
                        )
                    },
                ),
                (
                    "gen_ai.content.completion",
                    {"gen_ai.completion": json.dumps([{"role": "assistant", "content": REPLY}])},
                ),
            ],
        ),
    ],
    # OpenLLMetry: its own span kinds and entity attributes around indexed model calls
    "openllmetry": [
        (
            0,
            "planner.agent",
            {"traceloop.span.kind": "agent", "traceloop.entity.name": "planner"},
            [],
        ),
        (1, "openai.chat", {"llm.request.type": "chat", **as_indexed(FIRST)[0]}, []),
        (
            1,
            "get_weather.tool",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "get_weather",
                "traceloop.entity.input": json.dumps({"args": [], "kwargs": ARGS}),
                "traceloop.entity.output": RESULT,
            },
            [],
        ),
        (1, "openai.chat", {"llm.request.type": "chat", **as_indexed(SECOND)[0]}, []),
    ],
}


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_other_frameworks_genai_spans_become_an_agent_with_its_tool_call(framework: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    span_tree(provider, FRAMEWORKS[framework])
    trace = trace_from_otlp(otlp_json(exporter.get_finished_spans()))
    planner = trace.agent_instance_by_id[trace.root_agent_instance_id]
    assert planner.name == "planner"
    first, second = planner.interactions
    call = ToolCall(id="call_rome", name="get_weather", parameters=json.dumps(ARGS))
    assert [m.content for m in first.input_messages] == [SYSTEM, ASK]
    assert [m.content for m in first.output_messages] == [call]
    responses = [m.content for m in second.input_messages if isinstance(m.content, ToolResponse)]
    assert [(r.id, r.response) for r in responses] == [("call_rome", RESULT)]
    assert call in [m.content for m in second.input_messages]
    assert [m.content for m in second.output_messages] == [REPLY]


def test_a_tool_span_adds_the_call_its_model_call_did_not_show() -> None:
    """Some frameworks record a model call's text only; the tool span, with its call id, then
    says which call was made. An output function that no tool call ran (no call id) adds none."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    chat = {"gen_ai.operation.name": "chat"}
    first = {**chat, **as_attributes((SYSTEM, [("user", ASK)], ["Let me check."]))[0]}
    second = {**chat, **as_attributes((SYSTEM, [("user", ASK)], [REPLY]))[0]}
    tool = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_rome",
        "gen_ai.tool.call.arguments": json.dumps(ARGS),
        "gen_ai.tool.call.result": RESULT,
    }
    output = {**tool, "gen_ai.tool.name": "final_result", "gen_ai.tool.call.arguments": "{}"}
    del output["gen_ai.tool.call.id"]
    planner = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}
    tree = [(0, "invoke_agent planner", planner, []), (1, "chat", first, [])]
    tree += [(1, "tool", tool, []), (1, "chat", second, []), (1, "output", output, [])]
    span_tree(provider, tree)
    trace = trace_from_otlp(otlp_json(exporter.get_finished_spans()))
    asked, answered = by_name(trace, "planner").interactions
    call = ToolCall(id="call_rome", name="get_weather", parameters=json.dumps(ARGS))
    assert [m.content for m in asked.output_messages] == ["Let me check.", call]
    assert answered.input_messages[-1].content == ToolResponse(
        id="call_rome", response=RESULT, name="get_weather"
    )
    assert [m.content for m in answered.output_messages] == [REPLY]
