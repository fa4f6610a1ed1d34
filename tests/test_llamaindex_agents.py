"""Workflow agents' tool use reaches the judge: an ``AgentOutput``'s tool calls, the tools the
agent was given, and ReAct agents (tools in the prompt, actions in prose) in both the evaluator
and the trace capture (real llama-index-core agents with scripted LLMs, local server)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from composo import Composo, ComposoValidationError, LLMInteraction, ToolCall, criteria
from tests.support.servers import ServerProcess

if TYPE_CHECKING:
    from llama_index.core.agent.workflow import FunctionAgent, ReActAgent
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.llms import CustomLLM

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:inspect")

QUESTION = "What is the weather in Paris?"


def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def time_in(city: str) -> str:
    """Local time in a city."""
    return f"noon in {city}"


def function_agent() -> FunctionAgent:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    def reply(messages: list[ChatMessage], **kwargs: object) -> ChatMessage:
        results = [m for m in messages if m.role == "tool"]
        if results:
            return ChatMessage(role="assistant", content=f"The weather: {results[-1].content}.")
        call = ToolCallBlock(tool_call_id="w1", tool_name="weather", tool_kwargs={"city": "Paris"})
        return ChatMessage(role="assistant", blocks=[call])

    return FunctionAgent(
        name="forecaster",
        tools=[weather, time_in],
        llm=MockFunctionCallingLLM(response_generator=reply),
    )


@functools.cache
def scripted_react_llm() -> type[CustomLLM]:
    """A completion model that answers with the next scripted ReAct step (streams too)."""
    from llama_index.core.base.llms.types import (
        CompletionResponse,
        CompletionResponseGen,
        LLMMetadata,
    )
    from llama_index.core.llms import CustomLLM
    from llama_index.core.llms.callbacks import llm_completion_callback

    class ScriptedReActLLM(CustomLLM):
        steps: list[str]

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(is_chat_model=False)

        @llm_completion_callback()
        def complete(
            self, prompt: str, formatted: bool = False, **kwargs: Any
        ) -> CompletionResponse:
            return CompletionResponse(text=self.steps.pop(0))

        @llm_completion_callback()
        def stream_complete(
            self, prompt: str, formatted: bool = False, **kwargs: Any
        ) -> CompletionResponseGen:
            text = self.steps.pop(0)

            def gen() -> Iterator[CompletionResponse]:
                yield CompletionResponse(text=text, delta=text)

            return gen()

    return ScriptedReActLLM


def react_agent(streaming: bool = True) -> ReActAgent:
    from llama_index.core.agent.workflow import ReActAgent

    steps = [
        'Thought: I need the weather.\nAction: weather\nAction Input: {"city": "Paris"}',
        "Thought: I can answer.\nAnswer: It is sunny in Paris.",
    ]
    return ReActAgent(
        name="reasoner",
        tools=[weather, time_in],
        llm=scripted_react_llm()(steps=steps),
        streaming=streaming,
    )


def reward_bodies(live: ServerProcess) -> list[dict[str, Any]]:
    return [r["body"] for r in live.requests() if r["path"].endswith("/evals/reward")]


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or ()]


async def test_agent_output_tool_calls_and_agent_tools_are_evaluated(
    client: Composo, live: ServerProcess
) -> None:
    from llama_index.evaluation.composo import ComposoToolUseEvaluator

    agent = function_agent()
    output = await agent.run(QUESTION)
    assert [c.tool_name for c in output.tool_calls] == ["weather"]

    result = await ComposoToolUseEvaluator(client=client).aevaluate_response(
        query=QUESTION, response=output, agent=agent
    )
    assert result.score is not None and not result.invalid_result, result.feedback
    bodies = reward_bodies(live)
    assert bodies and all(b["messages"] == bodies[0]["messages"] for b in bodies)
    body = bodies[0]
    call_turn, tool_turn, answer = body["messages"][1:]
    [call] = call_turn["tool_calls"]
    assert call["function"]["name"] == "weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert tool_turn == {
        "role": "tool",
        "tool_call_id": call["id"],
        "name": "weather",
        "content": "sunny in Paris",
    }
    assert answer == {"role": "assistant", "content": "The weather: sunny in Paris."}
    assert tool_names(body) == ["weather", "time_in"]


async def test_result_adapter_reads_agent_output_tool_calls_and_tools_agent(
    client: Composo, live: ServerProcess
) -> None:
    from llama_index.core.base.llms.types import ChatMessage

    agent = function_agent()
    output = await agent.run(QUESTION)
    verdict = client.evaluate(
        messages=[ChatMessage(role="user", content=QUESTION)],
        result=output,
        tools=agent,
        criteria=criteria.tool_selection,
    )
    assert verdict.score is not None, verdict.explanation
    [body] = reward_bodies(live)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert tool_names(body) == ["weather", "time_in"]


async def test_react_agent_output_is_judged_with_its_tools(
    client: Composo, live: ServerProcess
) -> None:
    from llama_index.evaluation.composo import ComposoEvaluator

    agent = react_agent()
    output = await agent.run(QUESTION)
    result = await ComposoEvaluator(criteria.tool_selection, client=client).aevaluate_response(
        query=QUESTION, response=output, agent=agent
    )
    assert result.score is not None, result.feedback
    [body] = reward_bodies(live)
    assert tool_names(body) == ["weather", "time_in"]
    assert body["messages"][1]["tool_calls"][0]["function"]["name"] == "weather"
    assert body["messages"][-1] == {"role": "assistant", "content": "It is sunny in Paris."}


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "not-streaming"])
async def test_react_agent_trace_has_its_tools_and_actions(
    streaming: bool, client: Composo
) -> None:
    from llama_index.evaluation.composo import LlamaIndexTraceCapture

    agent = react_agent(streaming)
    with LlamaIndexTraceCapture() as capture:
        output = await agent.run(QUESTION)
    assert str(output) == "It is sunny in Paris."
    trace = capture.trace
    [instance] = trace.agent_instance_by_id.values()
    assert instance.name == "reasoner"
    steps = [i for i in instance.interactions if isinstance(i, LLMInteraction)]
    assert len(steps) == 2  # one interaction per model call, streamed or not
    for step in steps:
        assert [t.name for t in step.tools_available or ()] == ["weather", "time_in"]
    first, second = steps
    assert isinstance(first.output_messages[0].content, str)  # the prose stays as it was
    call = first.output_messages[-1].content
    assert isinstance(call, ToolCall) and first.output_messages[-1].type == "tool_call"
    assert (call.name, json.loads(call.parameters)) == ("weather", {"city": "Paris"})
    assert all(isinstance(m.content, str) for m in second.output_messages)  # an answer

    verdict = client.evaluate_trace(capture, criteria=criteria.tool_selection)
    assert verdict.overall_score is not None, verdict.explanation


def test_agent_argument_must_be_an_agent(client: Composo, live: ServerProcess) -> None:
    from llama_index.evaluation.composo import ComposoEvaluator

    evaluator = ComposoEvaluator(criteria.tool_selection, client=client)
    with pytest.raises(ComposoValidationError, match="agent: expected a llama_index workflow"):
        evaluator.evaluate(query=QUESTION, response="Sunny.", agent="forecaster")
    assert live.requests() == []
