"""``Instruments.OPENAI_AGENTS``: the OpenAI Agents SDK's own trace events become the trace.

The SDK's real classes (``Agent``, ``Runner``, ``function_tool``, hand-offs, ``as_tool``) run
against the loopback OpenAI stand-in (the Responses API, and Chat Completions through
``OpenAIChatCompletionsModel``); traces are scored by the local server."""

from __future__ import annotations

import functools
import gc
import json
import logging
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from composo import (
    Composo,
    ComposoValidationError,
    LLMInteraction,
    MultiAgentTrace,
    ToolCall,
    ToolResponse,
)
from composo.tracing import AgentTracer, ComposoTracer, Instruments, read_otlp, trace_from_otlp
from tests.support.cli import run_composo
from tests.support.lazy import lazy_import
from tests.support.openai_standin import (
    OpenAIStandIn,
    chat_completion,
    function_call,
    output_message,
    response,
    tool_call,
)
from tests.support.otlp_files import OtlpJsonFileExporter
from tests.support.servers import ServerProcess

agents = lazy_import("agents")
openai = lazy_import("openai")
native = lazy_import("composo.tracing._openai_agents")  # imports the SDK

CRITERION = "Reward agents that use their tools to answer"


class Replies:
    """Answers for the stand-in's Responses endpoint, in order. Each echoes the request's
    ``instructions`` and ``tools``, as the API does."""

    def __init__(self, standin: OpenAIStandIn) -> None:
        self.queue: list[dict[str, Any]] = []
        standin.on_response(self._answer)

    def add(self, *answers: dict[str, Any]) -> None:
        self.queue.extend(answers)

    def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = dict(self.queue.pop(0))
        answer["instructions"] = body.get("instructions")
        answer["tools"] = body.get("tools") or []
        return answer


@pytest.fixture
def sdk(openai_standin: OpenAIStandIn) -> Iterator[Replies]:
    """The SDK pointed at the stand-in, with no processor exporting to OpenAI's backend."""
    agents.set_trace_processors([])
    client = openai.AsyncOpenAI(base_url=openai_standin.base_url, api_key="sk-test", max_retries=0)
    agents.set_default_openai_client(client, use_for_tracing=False)
    agents.set_default_openai_api("responses")
    yield Replies(openai_standin)
    ComposoTracer.shutdown()
    agents.set_trace_processors([])


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@functools.cache
def weather_tool() -> agents.FunctionTool:
    return agents.function_tool(get_weather)


def forecaster() -> agents.Agent[Any]:
    return agents.Agent(
        name="forecaster", instructions="Answer weather questions.", tools=[weather_tool()]
    )


def steps(trace: MultiAgentTrace, agent_id: str) -> list[Any]:
    """An agent's interactions: model calls as they are, sub-agents by name."""
    return [
        trace.agent_instance_by_id[s].name if isinstance(s, str) else s
        for s in trace.agent_instance_by_id[agent_id].interactions
    ]


def texts(call: LLMInteraction) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in call.input_messages if isinstance(m.content, str)]


def scored(client: Composo, live: ServerProcess, trace: MultiAgentTrace) -> None:
    """The trace as the local server received it, scored per agent."""
    result = client.evaluate_trace(trace=trace, criteria=CRITERION)
    names = {a.name for a in trace.agent_instance_by_id.values()}
    assert set(result.results_by_agent_name) == names
    assert set(result.agent_scores) == set(trace.agent_instance_by_id)
    (body,) = [r["body"] for r in live.requests() if r["path"].endswith("/evals/trace")]
    assert body["trace"] == trace.model_dump(mode="json", exclude_none=True)


def handoff_run(sdk: Replies) -> AgentTracer:
    """Triage hands off to the forecaster, which asks for the weather in two cities at once."""
    triage = agents.Agent(
        name="triage", instructions="Route weather questions.", handoffs=[forecaster()]
    )
    sdk.add(
        response([function_call("transfer_to_forecaster", {}, call_id="call_handoff")]),
        response(
            [
                function_call("get_weather", {"city": "Rome"}, call_id="call_rome"),
                function_call("get_weather", {"city": "Oslo"}, call_id="call_oslo"),
            ]
        ),
        response([output_message("Sunny in Rome and in Oslo.")]),
    )
    with AgentTracer("app") as tracer:
        result = agents.Runner.run_sync(triage, "Weather in Rome and Oslo?")
    assert result.final_output == "Sunny in Rome and in Oslo."
    return tracer


def test_hand_off_with_two_tool_calls_is_a_scored_trace(
    sdk: Replies, client: Composo, live: ServerProcess
) -> None:
    ComposoTracer.init(instruments=[Instruments.OPENAI_AGENTS])
    tracer = handoff_run(sdk)
    trace = tracer.trace
    # the hand-off's two agents follow each other under the app's agent, as the SDK runs them
    assert trace.root_agent_instance_id == tracer.agent_id
    triage_id, forecaster_id = trace.agent_instance_by_id[tracer.agent_id].interactions
    assert isinstance(triage_id, str) and isinstance(forecaster_id, str)
    assert triage_id.startswith("span_")  # the SDK's own span id
    assert trace.agent_instance_by_id[triage_id].name == "triage"
    assert trace.agent_instance_by_id[forecaster_id].name == "forecaster"

    (routing,) = steps(trace, triage_id)
    assert texts(routing) == [
        ("system", "Route weather questions."),
        ("user", "Weather in Rome and Oslo?"),
    ]
    [handoff] = [m.content for m in routing.output_messages]
    assert isinstance(handoff, ToolCall) and handoff.name == "transfer_to_forecaster"
    assert [t.name for t in routing.tools_available or []] == ["transfer_to_forecaster"]

    asking, answering = steps(trace, forecaster_id)
    assert texts(asking)[0] == ("system", "Answer weather questions.")
    calls = [m.content for m in asking.output_messages]
    assert calls == [
        ToolCall(id="call_rome", name="get_weather", parameters='{"city": "Rome"}'),
        ToolCall(id="call_oslo", name="get_weather", parameters='{"city": "Oslo"}'),
    ]
    [weather] = asking.tools_available or []
    assert weather.name == "get_weather" and weather.description == "Current weather for a city."
    assert json.loads(weather.parameters)["properties"]["city"]["type"] == "string"
    answers = [m.content for m in answering.input_messages if isinstance(m.content, ToolResponse)]
    assert [(a.id, a.response, a.name) for a in answers] == [
        ("call_handoff", '{"assistant": "forecaster"}', "transfer_to_forecaster"),
        ("call_rome", "sunny in Rome", "get_weather"),
        ("call_oslo", "sunny in Oslo", "get_weather"),
    ]
    # each tool call and result once, though function spans report them as well
    assert len([m for m in answering.input_messages if m.type == "tool_call"]) == 3
    assert answering.output_messages[0].content == "Sunny in Rome and in Oslo."
    assert native.PROCESSOR.pending() == 0
    scored(client, live, trace)


def test_agent_as_tool_is_a_sub_agent_where_it_was_called(
    sdk: Replies, client: Composo, live: ServerProcess
) -> None:
    ComposoTracer.init(instruments=[Instruments.OPENAI_AGENTS])
    ask = forecaster().as_tool(tool_name="ask_forecaster", tool_description="Ask the forecaster.")
    planner = agents.Agent(name="planner", instructions="Plan trips.", tools=[ask])
    sdk.add(
        response([function_call("ask_forecaster", {"input": "Rome?"}, call_id="call_ask")]),
        response([function_call("get_weather", {"city": "Rome"}, call_id="call_rome")]),
        response([output_message("Sunny.")]),
        response([output_message("Pack sunglasses for Rome.")]),
    )
    with AgentTracer("app") as tracer:
        agents.Runner.run_sync(planner, "Plan a day in Rome.")
    trace = tracer.trace
    [planner_id] = trace.agent_instance_by_id[tracer.agent_id].interactions
    assert isinstance(planner_id, str)
    first, inner, last = steps(trace, planner_id)
    assert inner == "forecaster"  # between the call that asked and the call that used it
    assert first.output_messages[0].content == ToolCall(
        id="call_ask", name="ask_forecaster", parameters='{"input": "Rome?"}'
    )
    [offered] = first.tools_available or []
    assert (offered.name, offered.description) == ("ask_forecaster", "Ask the forecaster.")
    [answer] = [m.content for m in last.input_messages if isinstance(m.content, ToolResponse)]
    assert (answer.id, answer.response) == ("call_ask", "Sunny.")
    forecaster_id = trace.agent_instance_by_id[planner_id].interactions[1]
    assert isinstance(forecaster_id, str)
    asking, answering = steps(trace, forecaster_id)
    assert texts(asking) == [("system", "Answer weather questions."), ("user", "Rome?")]
    assert asking.output_messages[0].content == ToolCall(
        id="call_rome", name="get_weather", parameters='{"city": "Rome"}'
    )
    [result] = [m.content for m in answering.input_messages if isinstance(m.content, ToolResponse)]
    assert (result.id, result.response) == ("call_rome", "sunny in Rome")
    assert trace.llm_interaction_count() == 4
    scored(client, live, trace)


def shape(trace: MultiAgentTrace, agent_id: str) -> tuple[str, list[Any]]:
    """An agent's name and steps: model calls by what was said, sub-agents by their shape."""
    agent = trace.agent_instance_by_id[agent_id]
    return agent.name, [
        shape(trace, s)
        if isinstance(s, str)
        else ([m.content for m in s.input_messages], s.output_messages)
        for s in agent.interactions
    ]


@pytest.mark.parametrize("openinference_first", [True, False])
def test_openinference_and_openai_instrumentors_on_too_record_nothing_twice(
    sdk: Replies,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    openinference_first: bool,
) -> None:
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    ComposoTracer.init(instruments=[Instruments.OPENAI_AGENTS])
    tracer = handoff_run(sdk)
    alone = shape(tracer.trace, tracer.agent_id)
    ComposoTracer.shutdown()

    export = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(export)))
    openinference = OpenAIAgentsInstrumentor()
    both: list[Any] = [Instruments.OPENAI_AGENTS, Instruments.OPENAI]
    both.insert(0 if openinference_first else 1, openinference)
    with caplog.at_level(logging.WARNING, "composo.tracing"):
        ComposoTracer.init(instruments=both, tracer_provider=provider)
        tracer = handoff_run(sdk)
    trace = tracer.trace
    # the same agents and model calls, each once, whichever feed recorded them
    assert shape(trace, tracer.agent_id) == alone
    assert trace.llm_interaction_count() == 3
    # switched on after Composo's processor, OpenInference's (exclusive by default) displaces it:
    # its spans are recorded instead, and the log says how to keep both
    assert ("replaced Composo's trace processor" in caplog.text) is not openinference_first
    # OpenInference's spans still went to the application's exporter
    [exported] = list(read_otlp(export))
    assert exported.trace is not None and exported.trace.llm_interaction_count() == 3


def test_chat_completions_model_calls_and_tool_names(
    sdk: Replies, openai_standin: OpenAIStandIn
) -> None:
    ComposoTracer.init(instruments=[Instruments.OPENAI_AGENTS])
    client = openai.AsyncOpenAI(base_url=openai_standin.base_url, api_key="sk-test", max_retries=0)
    model = agents.OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
    agent = agents.Agent(
        name="forecaster", instructions="Answer briefly.", tools=[weather_tool()], model=model
    )
    openai_standin.queue_chat(
        chat_completion(tool_calls=[tool_call("get_weather", {"city": "Oslo"}, id="call_oslo")]),
        chat_completion(content="Sunny in Oslo."),
    )
    with AgentTracer("app") as tracer:
        agents.Runner.run_sync(agent, "Weather in Oslo?")
    trace = tracer.trace
    [agent_id] = trace.agent_instance_by_id[tracer.agent_id].interactions
    assert isinstance(agent_id, str)
    asking, answering = steps(trace, agent_id)
    assert texts(asking) == [("system", "Answer briefly."), ("user", "Weather in Oslo?")]
    assert asking.output_messages[0].content == ToolCall(
        id="call_oslo", name="get_weather", parameters='{"city": "Oslo"}'
    )
    # the SDK's spans name a chat model's tools but carry no schema
    assert [t.name for t in asking.tools_available or []] == ["get_weather"]
    [result] = [m.content for m in answering.input_messages if isinstance(m.content, ToolResponse)]
    assert (result.id, result.response) == ("call_oslo", "sunny in Oslo")
    assert answering.output_messages[0].content == "Sunny in Oslo."


def seen() -> Any:
    """An application's own processor: counts the spans it receives."""

    class Seen(agents.TracingProcessor):
        def __init__(self) -> None:
            self.spans = 0

        def on_trace_start(self, trace: agents.Trace) -> None:
            pass

        def on_trace_end(self, trace: agents.Trace) -> None:
            pass

        def on_span_start(self, span: agents.Span[Any]) -> None:
            self.spans += 1

        def on_span_end(self, span: agents.Span[Any]) -> None:
            pass

        def shutdown(self) -> None:
            pass

        def force_flush(self) -> None:
            pass

    return Seen()


def test_runs_outside_a_tracer_and_after_shutdown_are_not_kept(sdk: Replies) -> None:
    mine = seen()
    agents.add_trace_processor(mine)
    agent = agents.Agent(name="greeter", instructions="Greet.")
    ComposoTracer.init(instruments="openai_agents")
    assert ComposoTracer.instrumented() == ["openai_agents"]
    sdk.add(response([output_message("Hello.")]))
    agents.Runner.run_sync(agent, "Hi")  # no AgentTracer: nothing recorded, nothing kept
    assert native.PROCESSOR.pending() == 0
    ComposoTracer.shutdown()
    sdk.add(response([output_message("Hello.")]))
    with AgentTracer("app") as tracer:
        agents.Runner.run_sync(agent, "Hi")
    with pytest.raises(ComposoValidationError, match="captured no LLM call"):
        _ = tracer.trace
    # on again: the processor is added again (now twice) and records each call once
    ComposoTracer.init(instruments=[Instruments.OPENAI_AGENTS])
    sdk.add(response([output_message("Hello again.")]))
    with AgentTracer("app") as tracer:
        agents.Runner.run_sync(agent, "Hi")
    assert tracer.trace.llm_interaction_count() == 1
    assert mine.spans >= 9  # the application's processor saw every run's spans
    assert native.PROCESSOR.pending() == 0
    gone = weakref.ref(tracer)
    del tracer
    gc.collect()
    assert gone() is None  # the processor keeps nothing of a finished run


async def test_streamed_run_in_an_async_tracer(sdk: Replies) -> None:
    ComposoTracer.init(instruments=[Instruments.OPENAI_AGENTS])
    sdk.add(
        response([function_call("get_weather", {"city": "Rome"}, call_id="call_rome")]),
        response([output_message("Sunny.")]),
    )
    async with AgentTracer("app") as tracer:
        streamed = agents.Runner.run_streamed(forecaster(), "Rome?")
        async for _ in streamed.stream_events():
            pass
    trace = tracer.trace
    [agent_id] = trace.agent_instance_by_id[tracer.agent_id].interactions
    assert isinstance(agent_id, str)
    asking, answering = steps(trace, agent_id)
    assert asking.output_messages[0].content == ToolCall(
        id="call_rome", name="get_weather", parameters='{"city": "Rome"}'
    )
    [result] = [m.content for m in answering.input_messages if isinstance(m.content, ToolResponse)]
    assert (result.id, result.response) == ("call_rome", "sunny in Rome")
    assert answering.output_messages[0].content == "Sunny."


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.delitem(sys.modules, "composo.tracing._openai_agents", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'composo\[agents\]'"):
        ComposoTracer.init(instruments=[Instruments.OPENAI_AGENTS])
    assert ComposoTracer.instrumented() == []
    ComposoTracer.shutdown()


def test_failed_model_call_gives_its_place_back(
    sdk: Replies, openai_standin: OpenAIStandIn
) -> None:
    ComposoTracer.init(instruments=[Instruments.OPENAI_AGENTS])
    openai_standin.fail(400, "bad request", path="/responses")
    with AgentTracer("app") as tracer, pytest.raises(Exception, match="bad request"):
        agents.Runner.run_sync(agents.Agent(name="greeter"), "Hi")
    with pytest.raises(ComposoValidationError, match="captured no LLM call"):
        _ = tracer.trace
    assert native.PROCESSOR.pending() == 0


def test_runs_without_sensitive_data_are_left_out_with_a_warning(
    sdk: Replies, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("composo.tracing._openai_agents._warned", False)
    ComposoTracer.init(instruments=[Instruments.OPENAI_AGENTS])
    sdk.add(response([output_message("Hello.")]))
    config = agents.RunConfig(trace_include_sensitive_data=False)
    with caplog.at_level(logging.WARNING, "composo.tracing"), AgentTracer("app") as tracer:
        agents.Runner.run_sync(agents.Agent(name="greeter"), "Hi", run_config=config)
    assert "trace_include_sensitive_data" in caplog.text
    with pytest.raises(ComposoValidationError, match="captured no LLM call"):
        _ = tracer.trace


def offered(trace: MultiAgentTrace) -> dict[str, list[Any]]:
    """The tools each agent's model calls were offered, by agent name, call by call."""
    return {
        a.name: [i.tools_available for i in a.interactions if isinstance(i, LLMInteraction)]
        for a in trace.agent_instance_by_id.values()
        if a.id != trace.root_agent_instance_id
    }


def test_otlp_export_of_a_hand_off_reads_back_to_the_live_trace(
    sdk: Replies, tmp_path: Path, live: ServerProcess
) -> None:
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    ComposoTracer.init(instruments=[Instruments.OPENAI_AGENTS])
    tracer = handoff_run(sdk)
    captured = tracer.trace
    ComposoTracer.shutdown()

    # the same run in an application that only exports: OpenInference's spans to a
    # Collector-style file, Composo not involved
    export = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(export)))
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        handoff_run(sdk)
    finally:
        instrumentor.uninstrument()
    read = trace_from_otlp(export)

    # the export has no AgentTracer: its root is the SDK's workflow, where the live trace has the
    # application's agent, and ids are either source's span ids. Below the root, the same agents,
    # model calls, tool calls, results (named after the calls they answer) and tools offered.
    root_name, below = shape(read, read.root_agent_instance_id)
    assert root_name == "Agent workflow"
    assert ("app", below) == shape(captured, tracer.agent_id)
    assert offered(read) == offered(captured)
    assert read.llm_interaction_count() == captured.llm_interaction_count() == 3

    out = tmp_path / "results.jsonl"
    args = ["evaluate-traces", export, "-c", CRITERION, "-o", out]
    done = run_composo(*args, "--api-key", live.api_key, "--base-url", live.base_url)
    assert done.returncode == 0, done.stderr
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["error"] is None and isinstance(row["score"], float)
    [body] = [r["body"] for r in live.requests() if r["path"].endswith("/evals/trace")]
    assert body["trace"] == read.model_dump(mode="json", exclude_none=True)
