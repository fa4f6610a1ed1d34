"""Every installed OpenInference instrumentor as an ``Instruments`` member, driving real SDK
clients against loopback stand-ins of their HTTP APIs: Anthropic (Messages, tool use, streaming),
LiteLLM (routed to the OpenAI and the Anthropic stand-ins) and the OpenAI Agents SDK (a hand-off
and a tool); Anthropic objects as ``result=`` and ``tools=``."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from composo import Composo, ComposoValidationError, MultiAgentTrace, trace_from_otlp
from composo.tracing import AgentTracer, ComposoTracer, Instruments, read_otlp
from tests.support.anthropic_standin import AnthropicStandIn, message, tool_use
from tests.support.openai_standin import (
    OpenAIStandIn,
    chat_completion,
    function_call,
    output_message,
    response,
)
from tests.support.otlp_files import OtlpJsonFileExporter
from tests.support.servers import ServerProcess

if TYPE_CHECKING:
    import anthropic

MODEL = "claude-sonnet-4-5"
WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def standin() -> Iterator[AnthropicStandIn]:
    with AnthropicStandIn() as s:
        yield s


@pytest.fixture
def claude(standin: AnthropicStandIn) -> anthropic.Anthropic:
    standin.reset()
    import anthropic  # the SDK loads in the workers that run these tests, not at collection

    return anthropic.Anthropic(base_url=standin.base_url, api_key="test-key", max_retries=0)


@pytest.fixture
def off() -> Iterator[None]:
    yield
    ComposoTracer.shutdown()


def test_installed_openinference_instrumentors_are_members(
    off: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    available = Instruments.available()
    for name in ("OPENAI", "ANTHROPIC", "LITELLM", "OPENAI_AGENTS"):
        assert name in available
        assert Instruments[name].value == name.lower()
    # One instance, through the member or the entry point: init() sees it as on.
    assert Instruments.ANTHROPIC.resolve() is available["ANTHROPIC"]
    monkeypatch.setitem(sys.modules, "openinference.instrumentation.crewai", None)  # not here
    with pytest.raises(ImportError, match=r"pip install 'openinference-instrumentation-crewai'"):
        ComposoTracer.init(Instruments.CREWAI)


@pytest.mark.slow
def test_any_instrumentor_object_can_be_passed(
    claude: anthropic.Anthropic, standin: AnthropicStandIn, off: None
) -> None:
    from openinference.instrumentation.anthropic import AnthropicInstrumentor

    ComposoTracer.init(AnthropicInstrumentor())
    assert ComposoTracer.instrumented() == ["anthropic"]
    standin.queue(message("Hello there."))
    with AgentTracer("greeter") as tracer:
        claude.messages.create(
            model=MODEL, max_tokens=20, messages=[{"role": "user", "content": "Hi"}]
        )
    [agent] = tracer.trace.agent_instance_by_id.values()
    assert agent.interactions[0].output_messages[0].content == "Hello there."
    ComposoTracer.shutdown()
    assert not AnthropicInstrumentor().is_instrumented_by_opentelemetry
    with pytest.raises(ComposoValidationError, match=r"instrument\(\)/uninstrument\(\)"):
        Instruments.wrap(object())
    with pytest.raises(ComposoValidationError, match="instruments"):
        ComposoTracer.init([Instruments.OPENAI, 42])


def test_anthropic_streamed_tool_use_is_a_tool_call(
    claude: anthropic.Anthropic, standin: AnthropicStandIn, off: None
) -> None:
    ComposoTracer.init(Instruments.ANTHROPIC)
    standin.queue(message(tool_use("get_weather", {"city": "Oslo"}, id="toolu_oslo")))
    with (
        AgentTracer("forecaster") as tracer,
        claude.messages.stream(
            model=MODEL,
            max_tokens=50,
            tools=[WEATHER],
            messages=[{"role": "user", "content": "Weather in Oslo?"}],
        ) as stream,
    ):
        final = stream.get_final_message()
    assert final.content[0].type == "tool_use"
    [call] = next(iter(tracer.trace.agent_instance_by_id.values())).interactions
    [out] = call.output_messages
    assert out.content.name == "get_weather" and out.content.id == "toolu_oslo"
    assert '"Oslo"' in out.content.parameters
    assert call.tools_available is not None and call.tools_available[0].name == "get_weather"


def test_anthropic_message_as_result_and_tools(
    claude: anthropic.Anthropic, standin: AnthropicStandIn, live: ServerProcess
) -> None:
    import anthropic

    standin.queue(message("Checking.", tool_use("get_weather", {"city": "Rome"}, id="toolu_1")))
    question = [{"role": "user", "content": "Weather in Rome?"}]
    answer = claude.messages.create(model=MODEL, max_tokens=50, tools=[WEATHER], messages=question)
    tools = [anthropic.types.ToolParam(**WEATHER)]  # type: ignore[typeddict-item]
    # a tool definition as the API returns it (a typed object, not a dict)
    typed_tool = anthropic.types.beta.BetaManagedAgentsCustomTool.model_validate(
        {**WEATHER, "type": "custom"}
    )
    before = answer.model_dump()
    with Composo(api_key=live.api_key, base_url=live.base_url) as client:
        result = client.evaluate(
            messages=question,
            result=answer,
            tools=[typed_tool],
            criteria="Reward answers that use the weather tool",
        )
        assert result.score is not None
        client.evaluate(messages=question, result=answer, tools=tools, criteria="Reward tool use")
    assert answer.model_dump() == before  # not mutated
    bodies = [r["body"] for r in live.requests()]
    sent = bodies[0]["messages"][-1]
    assert sent == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Rome"}},
        ],
    }
    assert bodies[0]["tools"][0]["name"] == "get_weather"
    assert bodies[0]["tools"][0]["input_schema"] == WEATHER["input_schema"]
    assert bodies[1]["tools"] == [WEATHER]


def test_anthropic_message_inside_a_messages_list(
    claude: anthropic.Anthropic, standin: AnthropicStandIn, live: ServerProcess
) -> None:
    standin.queue(message("Paris."))
    question = {"role": "user", "content": "Capital of France?"}
    answer = claude.messages.create(model=MODEL, max_tokens=20, messages=[question])
    with Composo(api_key=live.api_key, base_url=live.base_url) as client:
        client.evaluate(messages=[question, answer], criteria="Reward correct answers")
    [body] = [r["body"] for r in live.requests()]
    assert body["messages"][-1] == {"role": "assistant", "content": "Paris."}


@pytest.fixture
def litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import
    import litellm

    return litellm


@pytest.mark.slow
def test_litellm_calls_to_openai_and_anthropic_are_interactions(
    litellm: Any,
    openai_standin: OpenAIStandIn,
    standin: AnthropicStandIn,
    off: None,
) -> None:
    standin.reset()
    ComposoTracer.init(Instruments.LITELLM)
    openai_standin.queue_chat(chat_completion("Four."))
    standin.queue(message("Five."))
    with AgentTracer("router") as tracer:
        litellm.completion(
            model="openai/gpt-4o-mini",
            api_base=openai_standin.base_url,
            api_key="k",
            messages=[{"role": "user", "content": "2+2?"}],
        )
        litellm.completion(
            model=f"anthropic/{MODEL}",
            api_base=standin.base_url,
            api_key="k",
            max_tokens=20,
            messages=[{"role": "user", "content": "2+3?"}],
        )
    [agent] = tracer.trace.agent_instance_by_id.values()
    first, second = agent.interactions
    assert first.input_messages[0].content == "2+2?"
    assert first.output_messages[0].content == "Four."
    assert second.input_messages[0].content == "2+3?"
    assert second.output_messages[0].content == "Five."
    assert standin.requests[0]["messages"][0]["content"] in (
        "2+3?",
        [{"type": "text", "text": "2+3?"}],
    )


def agents_run(
    openai_standin: OpenAIStandIn, tmp_path: Path, *, agent_spans: bool
) -> tuple[AgentTracer, Path]:
    """The Agents SDK's triage agent hands off to a forecaster that calls a tool, inside the
    app's ``AgentTracer``, traced by OpenInference's instrumentor; returns the tracer and the
    OTLP/JSON file its spans went to."""
    import agents
    from openai import AsyncOpenAI
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    agents.set_trace_processors([])  # no export to the hosted tracing service
    agents.set_default_openai_client(
        AsyncOpenAI(base_url=openai_standin.base_url, api_key="k", max_retries=0),
        use_for_tracing=False,
    )
    agents.set_default_openai_api("responses")

    @agents.function_tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return f"sunny in {city}"

    export = tmp_path / "agents.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(export)))
    # OpenInference's instrumentor, not the native Instruments.OPENAI_AGENTS: its spans are the
    # ones an OTLP export carries
    instrumentor = OpenAIAgentsInstrumentor()
    ComposoTracer.init(instrumentor, tracer_provider=provider, agent_spans=agent_spans)
    forecaster = agents.Agent(name="forecaster", instructions="Weather.", tools=[get_weather])
    triage = agents.Agent(name="triage", instructions="Route.", handoffs=[forecaster])
    openai_standin.queue_response(
        response([function_call("transfer_to_forecaster", {})]),
        response([function_call("get_weather", {"city": "Rome"})]),
        response([output_message("It is sunny in Rome.")]),
    )
    with AgentTracer("app") as tracer:
        out = agents.Runner.run_sync(triage, "Weather in Rome?")
    assert out.final_output == "It is sunny in Rome."
    return tracer, export


def shape(trace: MultiAgentTrace, agent_id: str | None = None) -> tuple[str, list[Any]]:
    """An agent's name and its steps, sub-agents by their own shape and model calls by their
    messages: what a trace says, without its ids."""
    agent = trace.agent_instance_by_id[agent_id or trace.root_agent_instance_id]
    steps: list[Any] = [
        shape(trace, step)
        if isinstance(step, str)
        else (
            [m.model_dump() for m in step.input_messages],
            [m.model_dump() for m in step.output_messages],
        )
        for step in agent.interactions
    ]
    return agent.name, steps


def test_openai_agents_hand_off_and_tool_become_sub_agents(
    openai_standin: OpenAIStandIn, tmp_path: Path, off: None
) -> None:
    tracer, export = agents_run(openai_standin, tmp_path, agent_spans=False)
    live = tracer.trace
    assert live.llm_interaction_count() == 3
    # live: the app's agent is the root; the SDK's run (its "Agent workflow" agent span) is a
    # sub-agent of it, holding the triage and forecaster agents
    app = live.agent_instance_by_id[live.root_agent_instance_id]
    assert app.name == "app"
    [workflow_id] = app.interactions
    assert isinstance(workflow_id, str)
    workflow = live.agent_instance_by_id[workflow_id]
    assert [live.agent_instance_by_id[i].name for i in workflow.interactions] == [  # type: ignore[index]
        "triage",
        "forecaster",
    ]

    [converted] = list(read_otlp(export))
    assert converted.trace is not None, converted.error
    trace = converted.trace
    root = trace.agent_instance_by_id[trace.root_agent_instance_id]
    names = [trace.agent_instance_by_id[i].name for i in root.interactions if isinstance(i, str)]
    assert names == ["triage", "forecaster"]
    forecasting = trace.agent_instance_by_id[root.interactions[1]]  # type: ignore[index]
    first, second = forecasting.interactions
    assert first.output_messages[0].content.name == "get_weather"
    assert second.input_messages[-1].content.response == "sunny in Rome"
    assert second.output_messages[0].content == "It is sunny in Rome."
    # the file's run is the live run under the app's agent: same agents, nesting and messages
    assert shape(live, workflow_id) == shape(trace)


def test_openai_agents_run_is_the_same_live_and_from_a_file(
    openai_standin: OpenAIStandIn, tmp_path: Path, off: None
) -> None:
    tracer, export = agents_run(openai_standin, tmp_path, agent_spans=True)
    # with the app's own agent span exported, the file holds the whole live trace
    from_file = trace_from_otlp(export)
    assert shape(from_file) == shape(tracer.trace)
    assert from_file == tracer.trace
    assert from_file.root_agent_instance_id == tracer.agent_id
    assert from_file.llm_interaction_count() == 3
    assert [c.notes for c in read_otlp(export)] == [[]]
