"""LlamaIndex objects passed straight to ``Composo().evaluate`` (the installed plugin), checked by
what the local server receives."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from composo import Composo, ComposoValidationError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:inspect")

CRITERION = "Reward answers that respond to the user's question"


def sent_messages(live) -> list[dict]:
    bodies = [r["body"] for r in live.requests() if r["path"].endswith("/evals/reward")]
    assert len(bodies) == 1
    return bodies[0]["messages"]


def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def test_chat_history_roles_and_text_blocks(client: Composo, live) -> None:
    from llama_index.core.base.llms.types import ChatMessage, TextBlock, ThinkingBlock

    history = [
        ChatMessage(role="developer", content="Be brief."),
        ChatMessage(role="user", blocks=[TextBlock(text="What is"), TextBlock(text="2 + 2?")]),
        ChatMessage(
            role="assistant",
            blocks=[ThinkingBlock(content="simple sum"), TextBlock(text="2 + 2 is 4.")],
        ),
    ]
    before = [m.model_dump() for m in history]
    result = client.evaluate(messages=history, criteria=CRITERION)

    assert 0.0 <= result.score <= 1.0
    assert sent_messages(live) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is\n2 + 2?"},
        {"role": "assistant", "content": "2 + 2 is 4."},  # reasoning is not the answer
    ]
    assert [m.model_dump() for m in history] == before


def test_tool_calls_from_blocks_and_additional_kwargs_are_not_duplicated(
    client: Composo, live
) -> None:
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from openai.types.chat import ChatCompletionMessageToolCall

    openai_call = ChatCompletionMessageToolCall(
        id="call_b",
        type="function",
        function={"name": "weather", "arguments": '{"city": "Oslo"}'},
    )
    history = [
        ChatMessage(role="user", content="Weather in Paris and Oslo?"),
        ChatMessage(
            role="assistant",
            blocks=[
                ToolCallBlock(
                    tool_call_id="call_a", tool_name="weather", tool_kwargs={"city": "Paris"}
                )
            ],
            additional_kwargs={
                # the same call again, as an OpenAI dict, plus one only known as an OpenAI object
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                    },
                    openai_call,
                ]
            },
        ),
        ChatMessage(
            role="tool", content="sunny in Paris", additional_kwargs={"tool_call_id": "call_a"}
        ),
        ChatMessage(
            role="tool", content="rain in Oslo", additional_kwargs={"tool_call_id": "call_b"}
        ),
        ChatMessage(role="assistant", content="Paris is sunny; Oslo has rain."),
    ]
    client.evaluate(messages=history, criteria=CRITERION)

    msgs = sent_messages(live)
    calls = msgs[1]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_a", "call_b"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris"}
    assert calls[1]["function"] == {"name": "weather", "arguments": '{"city": "Oslo"}'}
    assert msgs[1]["content"] is None
    assert msgs[2] == {"role": "tool", "content": "sunny in Paris", "tool_call_id": "call_a"}
    assert msgs[3]["tool_call_id"] == "call_b"


def test_tool_selections_and_id_less_blocks_get_usable_ids(client: Composo, live) -> None:
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from llama_index.core.tools import ToolSelection

    history = [
        ChatMessage(role="user", content="Weather in Rome?"),
        ChatMessage(
            role="assistant",
            blocks=[ToolCallBlock(tool_name="weather", tool_kwargs={"city": "Rome"})],
            additional_kwargs={
                "tool_calls": [
                    ToolSelection(
                        tool_id="sel_1", tool_name="weather", tool_kwargs={"city": "Rome"}
                    )
                ]
            },
        ),
        ChatMessage(role="tool", content="warm", additional_kwargs={"tool_call_id": "sel_1"}),
        ChatMessage(role="assistant", content="It is warm in Rome."),
    ]
    client.evaluate(messages=history, criteria=CRITERION)
    calls = sent_messages(live)[1]["tool_calls"]
    assert len(calls) == 1 and calls[0]["id"] == "sel_1"


def test_chat_response_as_result_and_tools(client: Composo, live) -> None:
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse
    from llama_index.core.tools import FunctionTool

    answer = ChatResponse(message=ChatMessage(role="assistant", content="Take an umbrella."))
    client.evaluate(
        messages=[ChatMessage(role="user", content="Do I need an umbrella in Oslo?")],
        result=answer,
        tools=[FunctionTool.from_defaults(fn=weather)],
        criteria=CRITERION,
    )
    body = live.requests()[0]["body"]
    assert body["messages"][-1] == {"role": "assistant", "content": "Take an umbrella."}
    assert body["tools"][0]["function"]["name"] == "weather"
    assert body["tools"][0]["function"]["parameters"]["required"] == ["city"]


def test_non_text_blocks_become_visible_placeholders(client: Composo, live) -> None:
    from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock

    history = [
        ChatMessage(
            role="user",
            blocks=[
                TextBlock(text="What is in this picture?"),
                ImageBlock(url="https://example.com/cat.png"),
            ],
        ),
        ChatMessage(role="assistant", content="A cat."),
    ]
    client.evaluate(messages=history, criteria=CRITERION)
    assert "[image: https://example.com/cat.png]" in sent_messages(live)[0]["content"]


@pytest.fixture(scope="module")
def query_engine():
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM

    docs = [
        Document(text="The Eiffel Tower is 330 metres tall and stands in Paris."),
        Document(text="The Colosseum in Rome held about 50,000 spectators."),
        Document(text="Big Ben is the nickname of the great bell in London."),
    ]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    return index.as_query_engine(llm=MockLLM(max_tokens=16), similarity_top_k=2)


def test_query_engine_response_sends_source_nodes_as_source_material(
    client: Composo, live, query_engine
) -> None:
    response = query_engine.query("How tall is the Eiffel Tower?")
    client.evaluate(
        messages=[{"role": "user", "content": "How tall is the Eiffel Tower?"}],
        result=response,
        criteria=CRITERION,
    )
    msgs = sent_messages(live)
    assert [m["role"] for m in msgs] == ["user", "system", "assistant"]
    source = msgs[1]["content"]
    assert source.startswith("Source material retrieved for the answer that follows:")
    for i, node in enumerate(response.source_nodes, 1):
        assert f"[{i}] {node.node.get_content()}" in source
    assert msgs[2]["content"] == response.response


def test_agent_chat_response_tool_calls_and_their_nodes_are_not_repeated(
    client: Composo, live, query_engine
) -> None:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.chat_engine.types import AgentChatResponse
    from llama_index.core.tools import ToolOutput

    looked_up = query_engine.query("Colosseum capacity")
    reply = AgentChatResponse(
        response="The Colosseum held about 50,000 people.",
        sources=[
            ToolOutput(
                tool_name="city_facts",
                content=str(looked_up),
                raw_input={"input": "Colosseum capacity"},
                raw_output=looked_up,
            )
        ],
    )
    assert reply.source_nodes  # LlamaIndex copies the tool's nodes onto the response
    client.evaluate(
        messages=[ChatMessage(role="user", content="How many people did the Colosseum hold?")],
        result=reply,
        criteria=CRITERION,
    )
    msgs = sent_messages(live)
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "assistant"]
    call = msgs[1]["tool_calls"][0]
    assert call["function"]["name"] == "city_facts"
    assert json.loads(call["function"]["arguments"]) == {"input": "Colosseum capacity"}
    assert msgs[2]["tool_call_id"] == call["id"] and msgs[2]["content"] == str(looked_up)


def test_bad_tool_call_entry_is_refused_before_the_network(client: Composo, live) -> None:
    from llama_index.core.base.llms.types import ChatMessage

    history = [
        ChatMessage(role="user", content="hi"),
        ChatMessage(role="assistant", content="hello", additional_kwargs={"tool_calls": [42]}),
    ]
    with pytest.raises(ComposoValidationError, match=r"additional_kwargs\['tool_calls'\]"):
        client.evaluate(messages=history, criteria=CRITERION)
    assert live.requests() == []


@pytest.mark.slow
def test_plugin_works_without_importing_the_integration(live) -> None:
    """Installed, the plugin is found through the entry point; it loads LlamaIndex only for
    LlamaIndex objects."""
    code = textwrap.dedent(
        f"""
        import sys
        from composo import Composo

        client = Composo(api_key={live.api_key!r}, base_url={live.base_url!r})
        plain = [{{"role": "user", "content": "hi"}}, {{"role": "assistant", "content": "hello"}}]
        client.evaluate(messages=plain, criteria="Reward friendly replies")
        assert "llama_index.core" not in sys.modules, "a plain evaluation imported llama_index"

        from llama_index.core.llms import ChatMessage

        history = [ChatMessage(role="user", content="hi")]
        history.append(ChatMessage(role="assistant", content="hello"))
        result = client.evaluate(messages=history, criteria="Reward friendly replies")
        assert result.score is not None
        assert "llama_index.evaluation.composo.evaluator" not in sys.modules
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


async def test_workflow_agent_output_and_completion_response_as_result(
    client: Composo, live
) -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.llms import MockLLM
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    def reply(messages: list[ChatMessage], **kwargs: object) -> ChatMessage:
        return ChatMessage(role="assistant", content="Hello from the agent.")

    agent = FunctionAgent(name="greeter", llm=MockFunctionCallingLLM(response_generator=reply))
    output = await agent.run("Say hello")
    question = [ChatMessage(role="user", content="Say hello")]
    client.evaluate(messages=question, result=output, criteria=CRITERION)
    client.evaluate(messages=question, result=MockLLM().complete("Hello there"), criteria=CRITERION)
    first, second = (r["body"]["messages"] for r in live.requests())
    assert first[-1] == {"role": "assistant", "content": "Hello from the agent."}
    assert second[-1] == {"role": "assistant", "content": "Hello there"}
