"""ComposoCallback in "trace" mode: a LangChain agent or LangGraph run becomes one multi-agent
trace, evaluated when the outermost run ends (real langchain / langgraph, local server)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from composo import Composo, MultiAgentTraceResponse
from tests.support.lazy import lazy_import
from tests.support.servers import ServerProcess

if TYPE_CHECKING:
    from langchain_composo import ComposoCallback

fakes = lazy_import("tests.support.langchain_models")
# A global: LangGraph reads its nodes' state annotations in the module's namespace.
langgraph_graph = lazy_import("langgraph.graph")

CRITERION = "Reward agents that use their tools to answer"


def trace_bodies(live: ServerProcess) -> list[dict[str, Any]]:
    return [r["body"] for r in live.requests() if r["path"].endswith("/evals/trace")]


def weather_agent(city: str = "Paris") -> Any:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage

    model = fakes.ToolCallingFakeChat(
        messages=iter(
            [
                AIMessage(
                    "", tool_calls=[{"name": "get_weather", "args": {"city": city}, "id": "w1"}]
                ),
                AIMessage(f"It is sunny and 21C in {city}."),
            ]
        )
    )
    return create_agent(
        model, tools=[fakes.get_weather], name="weather_agent", system_prompt="Be brief."
    )


@pytest.fixture
def tracer(client: Composo) -> Any:
    from langchain_composo import ComposoCallback

    cb = ComposoCallback(criteria=CRITERION, client=client, mode="trace")
    yield cb
    cb.close()


def test_tool_calling_agent_becomes_one_trace(tracer: ComposoCallback, live: ServerProcess) -> None:
    from langchain_core.messages import HumanMessage

    run_id = uuid.uuid4()
    out = weather_agent().invoke(
        {"messages": [HumanMessage("Weather in Paris?")]},
        config={"callbacks": [tracer], "run_id": run_id},
    )
    assert out["messages"][-1].content == "It is sunny and 21C in Paris."
    assert tracer.flush(timeout=30)
    [record] = tracer.results
    assert record.ok, record.error
    assert record.run_id == str(run_id) and record.kind == "evaluate_trace"
    assert isinstance(record.response, MultiAgentTraceResponse)
    assert record.score == record.response.overall_score and record.score is not None
    assert "weather_agent" in record.response.results_by_agent_name

    [body] = trace_bodies(live)
    trace = body["trace"]
    assert trace["root_agent_instance_id"] == str(run_id)
    [agent] = trace["agent_instance_by_id"].values()
    assert agent["name"] == "weather_agent"
    first, second = agent["interactions"]
    assert [m["content"] for m in first["input_messages"]] == ["Be brief.", "Weather in Paris?"]
    assert first["output_messages"] == [
        {
            "type": "tool_call",
            "content": {"id": "w1", "name": "get_weather", "parameters": '{"city": "Paris"}'},
        }
    ]
    assert [t["name"] for t in first["tools_available"]] == ["get_weather"]
    tool_reply = second["input_messages"][-1]
    assert tool_reply["role"] == "tool" and tool_reply["type"] == "tool_response"
    assert tool_reply["content"] == {
        "id": "w1",
        "response": "Sunny and 21C in Paris",
        "name": "get_weather",
    }
    assert second["output_messages"] == [
        {"type": "text", "content": "It is sunny and 21C in Paris."}
    ]
    assert tracer.open_runs == 0


def test_tool_call_with_unparseable_arguments_is_in_the_trace(
    tracer: ComposoCallback, live: ServerProcess
) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage

    bad = {"name": "get_weather", "args": "{city: Paris", "id": "w1", "error": "bad JSON"}
    model = fakes.ToolCallingFakeChat(
        messages=iter([AIMessage("", invalid_tool_calls=[bad])])  # type: ignore[list-item]
    )
    agent = create_agent(model, tools=[fakes.get_weather], name="weather_agent")
    agent.invoke({"messages": [HumanMessage("Weather in Paris?")]}, config={"callbacks": [tracer]})
    assert tracer.flush(timeout=30)
    [record] = tracer.results
    assert record.ok, record.error
    [body] = trace_bodies(live)
    [agent_instance] = body["trace"]["agent_instance_by_id"].values()
    [step] = agent_instance["interactions"]
    assert step["output_messages"] == [
        {
            "type": "text",
            "content": (
                "Invalid tool call get_weather with arguments {city: Paris (error: bad JSON)"
            ),
        }
    ]


def test_sub_agent_called_as_a_tool_is_its_own_agent(
    tracer: ComposoCallback, live: ServerProcess
) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool

    researcher = create_agent(
        fakes.ToolCallingFakeChat(messages=iter([AIMessage("Paris has 2.1 million people.")])),
        tools=[],
        name="researcher",
    )

    @tool
    def ask_researcher(question: str) -> str:
        """Ask the research assistant a question."""
        reply = researcher.invoke({"messages": [HumanMessage(question)]})
        return str(reply["messages"][-1].content)

    supervisor = create_agent(
        fakes.ToolCallingFakeChat(
            messages=iter(
                [
                    AIMessage(
                        "",
                        tool_calls=[
                            {
                                "name": "ask_researcher",
                                "args": {"question": "Paris size?"},
                                "id": "r1",
                            }
                        ],
                    ),
                    AIMessage("About 2.1 million people live in Paris."),
                ]
            )
        ),
        tools=[ask_researcher],
        name="supervisor",
    )
    supervisor.invoke(
        {"messages": [HumanMessage("How big is Paris?")]}, config={"callbacks": [tracer]}
    )
    assert tracer.flush(timeout=30)
    assert tracer.results[0].ok, tracer.results[0].error

    [body] = trace_bodies(live)
    agents = body["trace"]["agent_instance_by_id"]
    root = agents[body["trace"]["root_agent_instance_id"]]
    assert root["name"] == "supervisor"
    kinds = ["agent" if isinstance(i, str) else "llm" for i in root["interactions"]]
    assert kinds == ["llm", "agent", "llm"]  # the sub-agent ran between the two model calls
    sub = agents[root["interactions"][1]]
    assert sub["name"] == "researcher"
    [sub_call] = sub["interactions"]
    assert sub_call["input_messages"] == [
        {"role": "user", "type": "text", "content": "Paris size?"}
    ]
    response = tracer.results[0].response
    assert isinstance(response, MultiAgentTraceResponse)
    assert set(response.results_by_agent_name) == {"supervisor", "researcher"}


def test_langgraph_subgraph_is_a_sub_agent(tracer: ComposoCallback, live: ServerProcess) -> None:
    from langchain_core.messages import HumanMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    writer = fakes.EchoChat()
    planner = fakes.EchoChat()

    def write(state: langgraph_graph.MessagesState) -> dict[str, Any]:
        return {"messages": [writer.invoke(state["messages"])]}

    def plan(state: langgraph_graph.MessagesState) -> dict[str, Any]:
        return {"messages": [planner.invoke(state["messages"])]}

    inner = StateGraph(MessagesState)
    inner.add_node("write", write)
    inner.add_edge(START, "write")
    inner.add_edge("write", END)
    outer = StateGraph(MessagesState)
    outer.add_node("plan", plan)
    outer.add_node("writer_team", inner.compile(name="writer_team"))
    outer.add_edge(START, "plan")
    outer.add_edge("plan", "writer_team")
    outer.add_edge("writer_team", END)
    graph = outer.compile(name="editor")

    graph.invoke({"messages": [HumanMessage("Draft a haiku")]}, config={"callbacks": [tracer]})
    assert tracer.flush(timeout=30)
    assert tracer.results[0].ok, tracer.results[0].error
    [body] = trace_bodies(live)
    agents = body["trace"]["agent_instance_by_id"]
    root = agents[body["trace"]["root_agent_instance_id"]]
    assert root["name"] == "editor"
    assert isinstance(root["interactions"][0], dict) and isinstance(root["interactions"][1], str)
    sub = agents[root["interactions"][1]]
    assert sub["name"] == "writer_team"
    assert sub["interactions"][0]["output_messages"][0]["content"].startswith("You asked:")


def test_concurrent_agent_runs_stay_apart(tracer: ComposoCallback, live: ServerProcess) -> None:
    from langchain_core.messages import HumanMessage
    from langchain_core.runnables import RunnableConfig

    cities = ["Oslo", "Lima", "Cairo", "Perth"]
    agents = {c: weather_agent(c) for c in cities}

    async def run_all() -> None:
        await asyncio.gather(
            *(
                agents[c].ainvoke(
                    {"messages": [HumanMessage(f"Weather in {c}?")]},
                    config=RunnableConfig(callbacks=[tracer]),
                )
                for c in cities
            )
        )

    asyncio.run(run_all())
    assert tracer.flush(timeout=30)
    assert len(tracer.results) == len(cities) and all(r.ok for r in tracer.results)
    seen = set()
    for body in trace_bodies(live):
        [agent] = body["trace"]["agent_instance_by_id"].values()
        question = agent["interactions"][0]["input_messages"][-1]["content"]
        city = question.removeprefix("Weather in ").rstrip("?")
        answer = agent["interactions"][1]["output_messages"][0]["content"]
        assert answer == f"It is sunny and 21C in {city}."
        assert len(agent["interactions"]) == 2
        seen.add(city)
    assert seen == set(cities)
    assert tracer.open_runs == 0


def test_failed_run_is_evaluated_with_its_error_and_leaves_nothing_behind(
    tracer: ComposoCallback, live: ServerProcess
) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool

    @tool
    def flaky(city: str) -> str:
        """Always fails."""
        raise ConnectionError("weather service unreachable")

    agent = create_agent(
        fakes.ToolCallingFakeChat(
            messages=iter(
                [AIMessage("", tool_calls=[{"name": "flaky", "args": {"city": "X"}, "id": "f1"}])]
            )
        ),
        tools=[flaky],
        name="fragile",
    )
    with pytest.raises(ConnectionError):
        agent.invoke({"messages": [HumanMessage("go")]}, config={"callbacks": [tracer]})
    assert tracer.open_runs == 0
    assert tracer.flush(timeout=30)
    [record] = tracer.results
    assert record.ok, record.error
    assert record.name == "fragile" and record.kind == "evaluate_trace"
    assert record.metadata["error"] == (
        "The run failed with ConnectionError: weather service unreachable"
    )
    [body] = trace_bodies(live)
    [agent_sent] = body["trace"]["agent_instance_by_id"].values()
    [call] = agent_sent["interactions"]
    # What ran before the failure, then the failure itself, as the judge sees it.
    assert call["output_messages"][0]["type"] == "tool_call"
    assert call["output_messages"][-1] == {
        "type": "error",
        "content": "The run failed with ConnectionError: weather service unreachable",
    }


def test_run_failing_before_any_model_call_is_a_failed_record_and_a_warning(
    tracer: ComposoCallback, live: ServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    class Broken(fakes.ToolCallingFakeChat):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            raise TimeoutError("model provider timed out")

    agent = create_agent(Broken(messages=iter(())), tools=[fakes.get_weather], name="stalled")
    with caplog.at_level(logging.WARNING, logger="composo"), pytest.raises(TimeoutError):
        agent.invoke({"messages": [HumanMessage("go")]}, config={"callbacks": [tracer]})
    assert tracer.flush(timeout=30)
    [record] = tracer.results
    assert not record.ok and isinstance(record.error, ValueError)
    assert "TimeoutError: model provider timed out" in str(record.error)
    assert record.name == "stalled"
    assert tracer.stats["failed"] == 1
    assert any(
        r.levelno == logging.WARNING and "model provider timed out" in r.getMessage()
        for r in caplog.records
    )
    assert trace_bodies(live) == []


def test_a_chain_without_model_calls_is_skipped(
    tracer: ComposoCallback, live: ServerProcess
) -> None:
    from langchain_core.runnables import RunnableLambda

    RunnableLambda(lambda x: x * 2).invoke(3, config={"callbacks": [tracer]})
    assert tracer.flush(timeout=30)
    assert tracer.results == [] and tracer.open_runs == 0


def test_cancelled_async_run_leaves_nothing_behind(
    tracer: ComposoCallback, live: ServerProcess
) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool

    @tool
    async def slow_lookup(city: str) -> str:
        """Takes far too long."""
        await asyncio.sleep(30)
        return "late"

    agent = create_agent(
        fakes.ToolCallingFakeChat(
            messages=iter(
                [
                    AIMessage(
                        "", tool_calls=[{"name": "slow_lookup", "args": {"city": "X"}, "id": "s"}]
                    )
                ]
            )
        ),
        tools=[slow_lookup],
        name="impatient",
    )

    async def run() -> None:
        await asyncio.wait_for(
            agent.ainvoke({"messages": [HumanMessage("go")]}, config={"callbacks": [tracer]}),
            timeout=0.5,
        )

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(run())
    assert tracer.open_runs == 0
    assert tracer.flush(timeout=30)
    assert tracer.results == [] and trace_bodies(live) == []


def test_streamed_and_batched_agents_are_traced(
    tracer: ComposoCallback, live: ServerProcess
) -> None:
    from langchain_core.messages import HumanMessage

    chunks = list(
        weather_agent("Quito").stream(
            {"messages": [HumanMessage("Weather in Quito?")]}, config={"callbacks": [tracer]}
        )
    )
    assert chunks
    prompt = {"messages": [HumanMessage("Weather in Bern?")]}
    agent = weather_agent("Bern")
    agent.batch([prompt], config={"callbacks": [tracer]})
    assert tracer.flush(timeout=30)
    assert len(tracer.results) == 2 and all(r.ok for r in tracer.results)
    answers = {
        next(iter(b["trace"]["agent_instance_by_id"].values()))["interactions"][1][
            "output_messages"
        ][0]["content"]
        for b in trace_bodies(live)
    }
    assert answers == {"It is sunny and 21C in Quito.", "It is sunny and 21C in Bern."}
