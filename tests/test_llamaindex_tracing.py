"""``LlamaIndexTraceCapture``: real LlamaIndex agents and workflows (mock LLMs) become traces the
local server evaluates."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import TYPE_CHECKING

import pytest

from composo import (
    Composo,
    ComposoValidationError,
    InputMessage,
    LLMInteraction,
    MultiAgentTrace,
    criteria,
)

if TYPE_CHECKING:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.llms.mock import MockFunctionCallingLLM

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:inspect")


def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def weather_llm(city: str = "Paris") -> MockFunctionCallingLLM:
    """Calls ``weather`` once, then answers from its result."""

    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    def reply(messages: list[ChatMessage], **kwargs: object) -> ChatMessage:
        mine = f"call_{city}"
        results = [m for m in messages if m.additional_kwargs.get("tool_call_id") == mine]
        if results:
            return ChatMessage(role="assistant", content=f"The weather: {results[-1].content}.")
        return ChatMessage(
            role="assistant",
            blocks=[
                ToolCallBlock(tool_call_id=mine, tool_name="weather", tool_kwargs={"city": city})
            ],
        )

    return MockFunctionCallingLLM(response_generator=reply)


def weather_agent(city: str = "Paris", name: str = "weather_agent") -> FunctionAgent:
    from llama_index.core.agent.workflow import FunctionAgent

    return FunctionAgent(
        name=name,
        description="Answers weather questions",
        tools=[weather],
        llm=weather_llm(city),
        system_prompt="You answer weather questions.",
    )


def interactions(trace: MultiAgentTrace, name: str) -> list[LLMInteraction]:
    [agent] = [a for a in trace.agent_instance_by_id.values() if a.name == name]
    return [i for i in agent.interactions if isinstance(i, LLMInteraction)]


async def test_function_agent_with_a_tool(client: Composo) -> None:
    from llama_index.evaluation.composo import ComposoGoalPursuitEvaluator, LlamaIndexTraceCapture

    with LlamaIndexTraceCapture() as capture:
        answer = await weather_agent().run("What is the weather in Paris?")
    assert str(answer) == "The weather: sunny in Paris."

    trace = capture.trace
    root = trace.agent_instance_by_id[trace.root_agent_instance_id]
    assert root.name == "weather_agent"
    first, second = interactions(trace, "weather_agent")
    assert [(m.role, m.content) for m in first.input_messages] == [
        ("system", "You answer weather questions."),
        ("user", "What is the weather in Paris?"),
    ]
    [call] = [o.content for o in first.output_messages]
    assert (call.id, call.name, json.loads(call.parameters)) == (
        "call_Paris",
        "weather",
        {"city": "Paris"},
    )
    assert [t.name for t in first.tools_available] == ["weather"]
    assert json.loads(first.tools_available[0].parameters)["required"] == ["city"]
    result = second.input_messages[-1]
    assert result.type == "tool_response"
    assert (result.content.id, result.content.response, result.content.name) == (
        "call_Paris",
        "sunny in Paris",
        "weather",
    )
    assert second.output_messages[0].content == "The weather: sunny in Paris."

    verdict = client.evaluate_trace(capture, criteria=criteria.agent_goal_pursuit)
    assert set(verdict.agent_scores) == {trace.root_agent_instance_id}
    assert verdict.overall_score is not None
    as_evaluator = await ComposoGoalPursuitEvaluator(client=client).aevaluate(trace=capture)
    assert as_evaluator.score == verdict.overall_score


async def test_two_agent_workflow_with_a_hand_off(client: Composo, live) -> None:
    from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.evaluation.composo import LlamaIndexTraceCapture

    def plan(messages: list[ChatMessage], **kwargs: object) -> ChatMessage:
        if any(m.role == "tool" for m in messages):
            return ChatMessage(role="assistant", content="Handed over.")
        return ChatMessage(
            role="assistant",
            blocks=[
                ToolCallBlock(
                    tool_call_id="h1",
                    tool_name="handoff",
                    tool_kwargs={"to_agent": "weather_agent", "reason": "weather question"},
                )
            ],
        )

    planner = FunctionAgent(
        name="planner",
        description="Routes requests",
        llm=MockFunctionCallingLLM(response_generator=plan),
        can_handoff_to=["weather_agent"],
        system_prompt="Route the request.",
    )
    workflow = AgentWorkflow(agents=[planner, weather_agent()], root_agent="planner")
    async with LlamaIndexTraceCapture(name="trip_helper") as capture:
        answer = await workflow.run(user_msg="Weather in Paris?")
    assert "sunny in Paris" in str(answer)

    trace = capture.trace
    root = trace.agent_instance_by_id[trace.root_agent_instance_id]
    assert root.name == "trip_helper"
    assert [trace.agent_instance_by_id[i].name for i in root.interactions] == [
        "planner",
        "weather_agent",
    ]
    [handoff] = interactions(trace, "planner")
    assert handoff.output_messages[0].content.name == "handoff"
    assert len(interactions(trace, "weather_agent")) == 2

    verdict = client.evaluate_trace(trace, criteria=criteria.agent_tool_efficiency)
    assert set(verdict.agent_scores) == set(trace.agent_instance_by_id)
    [req] = live.requests()
    sent = req["body"]["trace"]["agent_instance_by_id"]
    assert sorted(a["name"] for a in sent.values()) == ["planner", "trip_helper", "weather_agent"]


async def test_an_agent_called_as_a_tool_is_a_sub_agent() -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import FunctionTool
    from llama_index.evaluation.composo import LlamaIndexTraceCapture

    inner = weather_agent("Oslo", name="forecaster")

    async def ask_forecaster(question: str) -> str:
        """Ask the forecasting agent."""
        return str(await inner.run(question))

    def delegate(messages: list[ChatMessage], **kwargs: object) -> ChatMessage:
        results = [m for m in messages if m.role == "tool"]
        if results:
            return ChatMessage(role="assistant", content=f"Forecaster says: {results[-1].content}")
        return ChatMessage(
            role="assistant",
            blocks=[
                ToolCallBlock(
                    tool_call_id="d1", tool_name="ask_forecaster", tool_kwargs={"question": "Oslo?"}
                )
            ],
        )

    outer = FunctionAgent(
        name="assistant",
        tools=[FunctionTool.from_defaults(async_fn=ask_forecaster)],
        llm=MockFunctionCallingLLM(response_generator=delegate),
    )
    with LlamaIndexTraceCapture() as capture:
        await outer.run("Weather in Oslo?")

    trace = capture.trace
    root = trace.agent_instance_by_id[trace.root_agent_instance_id]
    assert root.name == "assistant"
    steps = root.interactions
    assert isinstance(steps[0], LLMInteraction) and isinstance(steps[2], LLMInteraction)
    assert trace.agent_instance_by_id[steps[1]].name == "forecaster"  # at the point it ran
    assert len(interactions(trace, "forecaster")) == 2


async def test_concurrent_captures_keep_their_own_calls() -> None:
    from llama_index.evaluation.composo import LlamaIndexTraceCapture

    async def run(city: str) -> MultiAgentTrace:
        async with LlamaIndexTraceCapture() as capture:
            await weather_agent(city).run(f"Weather in {city}?")
        return capture.trace

    traces = await asyncio.gather(*(run(c) for c in ["Paris", "Oslo", "Rome", "Lima"]))
    for city, trace in zip(["Paris", "Oslo", "Rome", "Lima"], traces, strict=True):
        [agent] = trace.agent_instance_by_id.values()
        texts = json.dumps(trace.model_dump())
        assert len(agent.interactions) == 2
        assert city in texts
        assert all(other not in texts for other in {"Paris", "Oslo", "Rome", "Lima"} - {city})


def test_captures_in_threads_and_plain_llm_calls() -> None:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.llms import MockLLM
    from llama_index.evaluation.composo import LlamaIndexTraceCapture

    out: dict[str, MultiAgentTrace] = {}

    def work(word: str) -> None:
        llm = MockLLM()
        with LlamaIndexTraceCapture(name=f"chat_{word}") as capture:
            for _ in range(3):
                llm.chat([ChatMessage(role="user", content=f"say {word}")])
        out[word] = capture.trace

    threads = [threading.Thread(target=work, args=(w,)) for w in ["alpha", "beta", "gamma"]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for word, trace in out.items():
        [agent] = trace.agent_instance_by_id.values()
        assert agent.name == f"chat_{word}"
        assert len(agent.interactions) == 3
        assert all(i.input_messages[0].content == f"say {word}" for i in agent.interactions)


def test_query_engine_calls_are_captured() -> None:
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM
    from llama_index.evaluation.composo import LlamaIndexTraceCapture

    docs = [Document(text="The Colosseum in Rome held about 50,000 spectators.")]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    engine = index.as_query_engine(llm=MockLLM(max_tokens=8))
    with LlamaIndexTraceCapture(name="rag") as capture:
        engine.query("How many people did the Colosseum hold?")
    [agent] = capture.trace.agent_instance_by_id.values()
    assert agent.name == "rag"
    [call] = agent.interactions
    assert "50,000 spectators" in call.input_messages[0].content  # the prompt with the context


def test_nothing_is_recorded_outside_a_capture_and_handlers_leave() -> None:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.llms import MockLLM
    from llama_index.evaluation.composo import LlamaIndexTraceCapture

    root = get_dispatcher()
    before = (list(root.event_handlers), list(root.span_handlers))
    llm = MockLLM()
    llm.chat([ChatMessage(role="user", content="before")])
    with LlamaIndexTraceCapture() as capture:
        assert len(root.event_handlers) == len(before[0]) + 1
        llm.chat([ChatMessage(role="user", content="inside")])
    llm.chat([ChatMessage(role="user", content="after")])
    assert (list(root.event_handlers), list(root.span_handlers)) == before
    [agent] = capture.trace.agent_instance_by_id.values()
    assert [i.input_messages[0].content for i in agent.interactions] == ["inside"]
    assert capture._spans == {} and len(capture._calls) == 0


def test_a_capture_without_llm_calls_explains_itself() -> None:
    from llama_index.evaluation.composo import LlamaIndexTraceCapture

    with LlamaIndexTraceCapture() as capture:
        pass
    with pytest.raises(ComposoValidationError, match="no LLM call"):
        _ = capture.trace
    with pytest.raises(RuntimeError, match="once"), capture:
        pass


async def test_a_failing_tool_does_not_break_the_run_or_the_capture() -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.tools import FunctionTool
    from llama_index.evaluation.composo import LlamaIndexTraceCapture

    def broken(city: str) -> str:
        """Always fails."""
        raise RuntimeError("service down")

    agent = FunctionAgent(
        name="fragile",
        tools=[FunctionTool.from_defaults(fn=broken, name="weather")],
        llm=weather_llm("Paris"),
    )
    with LlamaIndexTraceCapture() as capture:
        answer = await agent.run("Weather in Paris?")
    assert "service down" in str(answer)
    second = interactions(capture.trace, "fragile")[1]
    assert "service down" in second.input_messages[-1].content.response


async def test_instrument_hands_llamaindex_calls_to_the_active_agent_tracer() -> None:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.llms import MockLLM

    from composo.tracing import AgentTracer, ComposoTracer, Instruments

    ComposoTracer.init(instruments=Instruments.LLAMA_INDEX)
    try:
        await weather_agent().run("Weather outside any tracer?")  # nothing to record it: fine
        async with AgentTracer(name="concierge") as tracer:
            await weather_agent("Rome").run("What is the weather in Rome?")
            MockLLM().chat([ChatMessage(role="user", content="One more, made directly")])
    finally:
        ComposoTracer.shutdown()
    trace = tracer.trace
    [agent] = trace.agent_instance_by_id.values()
    assert agent.name == "concierge"
    first, second, third = agent.interactions
    assert first.output_messages[0].content.name == "weather"
    assert second.input_messages[-1].content.response == "sunny in Rome"
    # chat() of a completion model runs complete() inside: still one interaction
    assert third.input_messages == [
        InputMessage(role="user", type="text", content="One more, made directly")
    ]
    names = [h.class_name() for h in get_dispatcher().event_handlers]
    assert "ComposoTraceEventHandler" not in names  # switched off with the tracer
