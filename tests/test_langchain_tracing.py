"""``Instruments.LANGCHAIN``: LangChain model calls reach ``AgentTracer`` through OpenInference
spans (real langchain-core, OpenTelemetry SDK, local server)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from composo import Composo, LLMInteraction
from composo.tracing import AgentTracer, ComposoTracer, Instruments
from tests.support.lazy import lazy_import
from tests.support.servers import ServerProcess

fakes = lazy_import("tests.support.langchain_models")


@pytest.fixture
def langchain_tracing() -> Iterator[None]:
    ComposoTracer.init(instruments=Instruments.LANGCHAIN)
    yield
    ComposoTracer.shutdown()


def test_instrument_is_contributed_by_the_plugin() -> None:
    from langchain_composo.instruments import LangChainInstrument

    provided = Instruments.available()["LANGCHAIN"]
    assert isinstance(provided, LangChainInstrument)
    # One object per process, whichever way it is named: init() sees it as on.
    assert Instruments.LANGCHAIN.resolve() is provided
    assert Instruments("langchain").resolve() is provided
    assert provided.name == "langchain"


def test_agent_tracer_captures_langchain_calls(
    langchain_tracing: None, client: Composo, live: ServerProcess
) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage

    agent = create_agent(
        fakes.ToolCallingFakeChat(
            messages=iter(
                [
                    AIMessage(
                        "",
                        tool_calls=[{"name": "get_weather", "args": {"city": "Rome"}, "id": "g"}],
                    ),
                    AIMessage("Sunny in Rome."),
                ]
            )
        ),
        tools=[fakes.get_weather],
        name="weather_agent",
    )
    with AgentTracer(name="planner") as planner:
        fakes.EchoChat().invoke([HumanMessage("Plan a day in Rome")])
        with AgentTracer(name="weather") as weather:
            agent.invoke({"messages": [HumanMessage("Weather in Rome?")]})
        fakes.EchoChat().invoke([HumanMessage("Book a table")])

    trace = planner.trace
    root = trace.agent_instance_by_id[trace.root_agent_instance_id]
    first_call, sub_agent, last_call = root.interactions
    assert isinstance(first_call, LLMInteraction) and isinstance(last_call, LLMInteraction)
    assert first_call.output_messages[0].content == "You asked: Plan a day in Rome"
    assert sub_agent == weather.agent_id
    assert last_call.output_messages[0].content == "You asked: Book a table"
    sub = trace.agent_instance_by_id[weather.agent_id]
    first, second = sub.interactions
    assert isinstance(first, LLMInteraction) and isinstance(second, LLMInteraction)
    call = first.output_messages[0].content
    assert getattr(call, "name", None) == "get_weather"
    assert first.tools_available and first.tools_available[0].name == "get_weather"
    assert second.output_messages[0].content == "Sunny in Rome."

    # The graph's chain and tool spans took places while they ran and gave them all back.
    assert ComposoTracer._processor is not None and ComposoTracer._processor.pending() == 0
    result = client.evaluate_trace(trace, criteria="Reward agents that use tools well")
    assert set(result.results_by_agent_name) == {"planner", "weather"}
    assert live.requests()[-1]["body"]["trace"]["root_agent_instance_id"] == root.id


def test_async_agents_keep_their_own_calls(langchain_tracing: None) -> None:
    from langchain_core.messages import HumanMessage

    async def one(question: str) -> AgentTracer:
        async with AgentTracer(name="asker") as tracer:
            await fakes.EchoChat().ainvoke([HumanMessage(question)])
        return tracer

    async def both() -> list[AgentTracer]:
        return list(await asyncio.gather(one("first?"), one("second?")))

    tracers = asyncio.run(both())
    for tracer, question in zip(tracers, ["first?", "second?"], strict=True):
        [agent] = tracer.trace.agent_instance_by_id.values()
        [step] = agent.interactions
        assert isinstance(step, LLMInteraction)
        assert step.output_messages[0].content == f"You asked: {question}"


def test_shutdown_stops_capturing(langchain_tracing: None) -> None:
    from langchain_core.messages import HumanMessage

    ComposoTracer.shutdown()
    with AgentTracer(name="off") as tracer:
        fakes.EchoChat().invoke([HumanMessage("anyone?")])
    with pytest.raises(ValueError, match="captured no LLM call"):
        _ = tracer.trace
