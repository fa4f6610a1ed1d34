"""Tracing end to end: the real ``openai`` client (sync and async) against the loopback OpenAI
stand-in, instrumented by ``ComposoTracer``; each captured trace goes through
``evaluate_trace`` to the local Composo server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from composo import (
    AgentTracer,
    Composo,
    ComposoTracer,
    ComposoValidationError,
    Instruments,
    LLMInteraction,
    MultiAgentTrace,
    ToolCall,
    ToolResponse,
    agent_tracer,
)
from tests.support.lazy import lazy_import
from tests.support.openai_standin import (
    OpenAIStandIn,
    chat_completion,
    code_interpreter_call,
    crypto_mcp_response,
    function_call,
    output_message,
    reasoning,
    response,
    spacex_response,
    tool_call,
)
from tests.support.servers import ServerProcess

openai = lazy_import("openai")

WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
CRITERION = "Reward agents that answer the user's question using their tools"


@pytest.fixture
def tracing() -> Iterator[None]:
    ComposoTracer.init(instruments=Instruments.OPENAI)
    yield
    ComposoTracer.shutdown()


@pytest.fixture
def oai(openai_standin: OpenAIStandIn, tracing: None) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=openai_standin.base_url, api_key="sk-test", max_retries=0) as c:
        yield c


@pytest.fixture
async def aoai(openai_standin: OpenAIStandIn, tracing: None) -> Any:
    async with openai.AsyncOpenAI(
        base_url=openai_standin.base_url, api_key="sk-test", max_retries=0
    ) as c:
        yield c


def llm_steps(trace: MultiAgentTrace, agent_id: str | None = None) -> list[LLMInteraction]:
    agent = trace.agent_instance_by_id[agent_id or trace.root_agent_instance_id]
    return [s for s in agent.interactions if isinstance(s, LLMInteraction)]


def evaluated(client: Composo, live: ServerProcess, trace: MultiAgentTrace) -> dict[str, Any]:
    """Send the trace through evaluate_trace; return the trace body the server received."""
    result = client.evaluate_trace(trace=trace, criteria=CRITERION)
    assert result.overall_score is None or 0.0 <= result.overall_score <= 1.0
    assert set(result.results_by_agent_name) == {
        a.name for a in trace.agent_instance_by_id.values()
    }
    assert set(result.agent_scores) == set(trace.agent_instance_by_id)
    (body,) = [r["body"] for r in live.requests() if r["path"].endswith("/evals/trace")]
    sent: dict[str, Any] = body["trace"]
    assert sent == trace.model_dump(mode="json", exclude_none=True)
    return sent


# -- Chat Completions ------------------------------------------------------------------------------


def test_plain_chat_call_is_one_interaction(
    oai: openai.OpenAI, openai_standin: OpenAIStandIn, client: Composo, live: ServerProcess
) -> None:
    openai_standin.queue_chat(chat_completion(content="Quantum computers use qubits."))
    with AgentTracer(name="research_agent") as tracer:
        oai.chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {"role": "system", "content": "You research topics."},
                {"role": "user", "content": "Research: quantum computing"},
            ],
        )
        trace = tracer.trace  # readable inside the block, as the reference does
    assert trace.agent_instance_by_id[tracer.agent_id].name == "research_agent"
    (step,) = llm_steps(trace)
    assert [(m.role, m.content) for m in step.input_messages] == [
        ("system", "You research topics."),
        ("user", "Research: quantum computing"),
    ]
    assert [(m.type, m.content) for m in step.output_messages] == [
        ("text", "Quantum computers use qubits.")
    ]
    assert step.tools_available is None
    evaluated(client, live, trace)


def test_tool_calls_and_tool_results_fed_back(
    oai: openai.OpenAI, openai_standin: OpenAIStandIn, client: Composo, live: ServerProcess
) -> None:
    openai_standin.queue_chat(
        chat_completion(tool_calls=[tool_call("get_weather", {"city": "Paris"}, id="call_w1")]),
        chat_completion(content="It is 21C and sunny in Paris."),
    )
    with AgentTracer(name="weather") as tracer:
        messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
        first = oai.chat.completions.create(
            model="gpt-4o-mini", messages=messages, tools=[WEATHER_TOOL]
        )
        messages.append(first.choices[0].message)
        messages.append({"role": "tool", "tool_call_id": "call_w1", "content": "21C, sunny"})
        oai.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[WEATHER_TOOL])
    call, answer = llm_steps(tracer.trace)
    assert call.output_messages[0].type == "tool_call"
    assert call.output_messages[0].content == ToolCall(
        id="call_w1", name="get_weather", parameters='{"city": "Paris"}'
    )
    (spec,) = call.tools_available or []
    assert spec.name == "get_weather" and spec.description == "Current weather for a city"
    assert json.loads(spec.parameters)["properties"] == {"city": {"type": "string"}}
    inputs = answer.input_messages
    assert [m.type for m in inputs] == ["text", "tool_call", "tool_response"]
    assert inputs[1].role == "assistant" and inputs[1].content == call.output_messages[0].content
    assert inputs[2].content == ToolResponse(
        id="call_w1", response="21C, sunny", name="get_weather"
    )
    assert answer.output_messages[0].content == "It is 21C and sunny in Paris."
    sent = evaluated(client, live, tracer.trace)
    sent_steps = sent["agent_instance_by_id"][tracer.agent_id]["interactions"]
    assert sent_steps[1]["input_messages"][2] == {
        "role": "tool",
        "type": "tool_response",
        "content": {"id": "call_w1", "response": "21C, sunny", "name": "get_weather"},
    }


def test_streamed_chat_with_text_and_tool_call(
    oai: openai.OpenAI, openai_standin: OpenAIStandIn, client: Composo, live: ServerProcess
) -> None:
    openai_standin.queue_chat(
        chat_completion(
            content="Checking the forecast for you now.",
            tool_calls=[tool_call("get_weather", {"city": "Lima", "unit": "C"}, id="call_s")],
        )
    )
    with AgentTracer(name="streamer") as tracer:
        stream = oai.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Weather in Lima?"}],
            tools=[WEATHER_TOOL],
            stream=True,
            stream_options={"include_usage": True},
        )
        with stream:
            chunks = list(stream)
    assert len(chunks) > 4  # really streamed
    (step,) = llm_steps(tracer.trace)
    text, call = step.output_messages
    assert text.content == "Checking the forecast for you now."
    assert call.content == ToolCall(
        id="call_s", name="get_weather", parameters='{"city": "Lima", "unit": "C"}'
    )
    evaluated(client, live, tracer.trace)


def test_calls_outside_any_tracer_are_ignored(
    oai: openai.OpenAI, openai_standin: OpenAIStandIn
) -> None:
    ask = {"model": "gpt-4o-mini"}
    oai.chat.completions.create(messages=[{"role": "user", "content": "before"}], **ask)
    with AgentTracer() as tracer:
        oai.chat.completions.create(messages=[{"role": "user", "content": "inside"}], **ask)
    oai.chat.completions.create(messages=[{"role": "user", "content": "after"}], **ask)
    (step,) = llm_steps(tracer.trace)
    assert step.input_messages[0].content == "inside"
    assert tracer.trace.agent_instance_by_id[tracer.agent_id].name == "agent"
    assert len(openai_standin.requests) == 3


def test_failed_call_is_left_out(oai: openai.OpenAI, openai_standin: OpenAIStandIn) -> None:
    openai_standin.fail(500, "overloaded", path="/chat/completions")
    with AgentTracer() as tracer:
        with pytest.raises(openai.InternalServerError):
            oai.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "first try"}]
            )
        oai.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "second try"}]
        )
    (step,) = llm_steps(tracer.trace)
    assert step.input_messages[0].content == "second try"


def test_no_llm_call_fails_before_the_network(
    oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    with AgentTracer(name="idle") as tracer:
        pass
    with pytest.raises(ComposoValidationError) as err:
        client.evaluate_trace(trace=tracer.trace, criteria=CRITERION)
    message = str(err.value)
    assert "AgentTracer(name='idle') captured no LLM call" in message
    assert "ComposoTracer.init(instruments=Instruments.OPENAI)" in message
    assert live.requests() == []


# -- Responses API ---------------------------------------------------------------------------------


def test_responses_text(
    oai: openai.OpenAI, openai_standin: OpenAIStandIn, client: Composo, live: ServerProcess
) -> None:
    openai_standin.queue_response(
        response([reasoning("The user wants a haiku."), output_message("Autumn moon rises")])
    )
    with AgentTracer(name="poet") as tracer:
        oai.responses.create(model="gpt-4.1", instructions="Write haiku.", input="A haiku, please")
    (step,) = llm_steps(tracer.trace)
    assert [(m.role, m.content) for m in step.input_messages] == [
        ("system", "Write haiku."),
        ("user", "A haiku, please"),
    ]
    assert [m.content for m in step.output_messages] == [
        "Reasoning summary: The user wants a haiku.",
        "Autumn moon rises",
    ]
    evaluated(client, live, tracer.trace)


def test_responses_function_call_round_trip(
    oai: openai.OpenAI, openai_standin: OpenAIStandIn, client: Composo, live: ServerProcess
) -> None:
    tools: list[Any] = [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Current weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    openai_standin.queue_response(
        response([function_call("get_weather", {"city": "Oslo"}, call_id="call_r1")]),
        response([output_message("Oslo: -3C and snowing.")]),
    )
    with AgentTracer(name="weather") as tracer:
        items: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
        first = oai.responses.create(model="gpt-4.1", input=items, tools=tools)
        items += [o.model_dump(exclude_none=True) for o in first.output]
        items.append({"type": "function_call_output", "call_id": "call_r1", "output": "-3C, snow"})
        oai.responses.create(model="gpt-4.1", input=items, tools=tools)
    call, answer = llm_steps(tracer.trace)
    assert call.output_messages[0].content == ToolCall(
        id="call_r1", name="get_weather", parameters='{"city": "Oslo"}'
    )
    assert [t.name for t in call.tools_available or []] == ["get_weather"]
    assert answer.input_messages[-1].content == ToolResponse(
        id="call_r1", response="-3C, snow", name="get_weather"
    )
    assert answer.input_messages[-2].content == call.output_messages[0].content
    assert answer.output_messages[0].content == "Oslo: -3C and snowing."
    evaluated(client, live, tracer.trace)


def test_responses_built_in_tools(
    oai: openai.OpenAI, openai_standin: OpenAIStandIn, client: Composo, live: ServerProcess
) -> None:
    builtin: list[Any] = [
        {"type": "web_search"},
        {"type": "code_interpreter", "container": {"type": "auto"}},
    ]
    openai_standin.queue_response(spacex_response(builtin))
    with AgentTracer(name="spacex") as tracer:
        oai.responses.create(model="gpt-4.1", input="Latest SpaceX news?", tools=builtin)
    (step,) = llm_steps(tracer.trace)
    kinds = [
        (m.type, m.content.name if isinstance(m.content, ToolCall) else None)
        for m in step.output_messages
    ]
    assert kinds == [
        ("tool_call", "web_search"),
        ("text", None),
        ("tool_call", "code_interpreter"),
        ("text", None),
        ("text", None),
    ]
    search, found, code, ran, answer = (m.content for m in step.output_messages)
    assert isinstance(search, ToolCall) and json.loads(search.parameters)["query"]
    assert isinstance(found, str) and "https://www.space.com/" in found
    assert isinstance(code, ToolCall) and "matplotlib" in json.loads(code.parameters)["code"]
    assert isinstance(ran, str) and "2025-06-23" in ran
    assert isinstance(answer, str) and answer.startswith("The latest SpaceX story")
    assert [t.name for t in step.tools_available or []] == ["web_search", "code_interpreter"]
    evaluated(client, live, tracer.trace)


def test_responses_mcp_items_streamed(
    oai: openai.OpenAI, openai_standin: OpenAIStandIn, client: Composo, live: ServerProcess
) -> None:
    mcp: Any = {"type": "mcp", "server_label": "coingecko", "server_url": "https://mcp.example/mcp"}
    openai_standin.queue_response(crypto_mcp_response([mcp]))
    with (
        AgentTracer(name="prices") as tracer,
        oai.responses.create(
            model="gpt-4.1", input="BTC and ETH prices?", tools=[mcp], stream=True
        ) as stream,
    ):
        events = [e.type for e in stream]
    assert events[-1] == "response.completed"
    (step,) = llm_steps(tracer.trace)
    calls = [m.content for m in step.output_messages if isinstance(m.content, ToolCall)]
    assert [c.name for c in calls] == ["mcp_list_tools", "get_simple_price"]
    assert json.loads(calls[1].parameters) == {"ids": "bitcoin,ethereum", "vs_currencies": "usd"}
    texts = [m.content for m in step.output_messages if isinstance(m.content, str)]
    assert any("67321.12" in t for t in texts)  # what the MCP tool returned
    assert texts[-1].startswith("Current prices from CoinGecko")
    (spec,) = step.tools_available or []
    assert spec.name == "mcp:coingecko" and "https://mcp.example/mcp" in spec.description
    evaluated(client, live, tracer.trace)


# -- async client ----------------------------------------------------------------------------------


async def test_async_client_chat_stream_and_responses(
    aoai: openai.AsyncOpenAI, openai_standin: OpenAIStandIn, client: Composo, live: ServerProcess
) -> None:
    openai_standin.queue_chat(
        chat_completion(tool_calls=[tool_call("get_weather", {"city": "Rome"}, id="call_a")]),
        chat_completion(content="Rome is warm today."),
    )
    openai_standin.queue_response(
        response([code_interpreter_call("print(2 + 2)", ["4\n"]), output_message("It is 4.")])
    )
    async with AgentTracer(name="async_agent") as tracer:
        await aoai.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Weather in Rome?"}],
            tools=[WEATHER_TOOL],
        )
        stream = await aoai.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Say it"}],
            stream=True,
        )
        async with stream:
            async for _ in stream:
                pass
        await aoai.responses.create(model="gpt-4.1", input="What is 2 + 2?")
    call, streamed, resp = llm_steps(tracer.trace)
    assert isinstance(call.output_messages[0].content, ToolCall)
    assert streamed.output_messages[0].content == "Rome is warm today."
    code = resp.output_messages[0].content
    assert isinstance(code, ToolCall) and code.name == "code_interpreter"
    assert resp.output_messages[-1].content == "It is 4."
    evaluated(client, live, tracer.trace)


# -- agents inside agents, and at the same time ---------------------------------------------------


def test_nested_agents_are_referenced_where_they_ran(
    oai: openai.OpenAI, openai_standin: OpenAIStandIn, client: Composo, live: ServerProcess
) -> None:
    openai_standin.on_chat(
        lambda body: chat_completion(content=f"re: {body['messages'][-1]['content']}")
    )

    @agent_tracer(name="researcher")
    def research(topic: str) -> str:
        done = oai.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": topic}]
        )
        return done.choices[0].message.content or ""

    def ask(text: str) -> None:
        oai.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": text}]
        )

    with AgentTracer(name="orchestrator", agent_id="orch-1") as tracer:
        ask("plan")
        assert research("topic A") == "re: topic A"
        ask("merge")
        research("topic B")
    trace = tracer.trace
    assert trace.root_agent_instance_id == "orch-1"
    steps = trace.agent_instance_by_id["orch-1"].interactions
    assert isinstance(steps[0], LLMInteraction) and isinstance(steps[2], LLMInteraction)
    assert isinstance(steps[1], str) and isinstance(steps[3], str)
    assert steps[2].input_messages[0].content == "merge"
    for sub, topic in ((steps[1], "topic A"), (steps[3], "topic B")):
        agent = trace.agent_instance_by_id[sub]
        assert agent.name == "researcher"
        (only,) = agent.interactions
        assert isinstance(only, LLMInteraction) and only.input_messages[0].content == topic
    assert len(trace.agent_instance_by_id) == 3
    result = client.evaluate_trace(trace=trace, criteria=CRITERION)
    assert set(result.results_by_agent_name) == {"orchestrator", "researcher"}
    assert set(result.agent_scores) == set(trace.agent_instance_by_id)


async def test_concurrent_asyncio_agents_keep_their_own_calls(
    aoai: openai.AsyncOpenAI, openai_standin: OpenAIStandIn
) -> None:
    openai_standin.on_chat(
        lambda body: chat_completion(content=f"answer to {body['messages'][-1]['content']}")
    )

    async def agent(n: int) -> MultiAgentTrace:
        async with AgentTracer(name=f"agent{n}") as tracer:
            for turn in range(3):
                await aoai.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": f"a{n} t{turn}"}]
                )
                await asyncio.sleep(0)
        return tracer.trace

    traces = await asyncio.gather(*(agent(n) for n in range(6)))
    for n, trace in enumerate(traces):
        steps = llm_steps(trace)
        assert [s.input_messages[0].content for s in steps] == [f"a{n} t{t}" for t in range(3)]
        assert [s.output_messages[0].content for s in steps] == [
            f"answer to a{n} t{t}" for t in range(3)
        ]


def test_concurrent_thread_agents_keep_their_own_calls(
    oai: openai.OpenAI, openai_standin: OpenAIStandIn
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def agent(n: int) -> MultiAgentTrace:
        with AgentTracer(name=f"worker{n}") as tracer:
            for turn in range(3):
                oai.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": f"w{n} t{turn}"}]
                )
        return tracer.trace

    with ThreadPoolExecutor(4) as pool:
        traces = list(pool.map(agent, range(8)))
    for n, trace in enumerate(traces):
        got = [s.input_messages[0].content for s in llm_steps(trace)]
        assert got == [f"w{n} t{t}" for t in range(3)]
