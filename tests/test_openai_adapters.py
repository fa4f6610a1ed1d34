"""OpenAI objects as evaluation inputs: Chat Completions and Responses, parsed by the real
``openai`` client from the loopback stand-in's JSON, sent through ``Composo.evaluate`` to the
local server, checked on what the server received."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from composo import AsyncComposo, Composo, ComposoError
from tests.support import openai_standin as oas
from tests.support.lazy import lazy_import
from tests.support.openai_standin import OpenAIStandIn
from tests.support.servers import ServerProcess

openai = lazy_import("openai")

CRITERION = "Reward answers that use their tools well"
ROLES = {"system", "user", "assistant", "tool"}


@pytest.fixture
def oai(openai_standin: OpenAIStandIn) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=openai_standin.base_url, api_key="sk-test", max_retries=0) as c:
        yield c


def sent_messages(live: ServerProcess) -> list[dict[str, Any]]:
    """The messages of the one reward request the server received."""
    bodies = [r["body"] for r in live.requests() if r["path"].endswith("/evals/reward")]
    assert len(bodies) == 1, bodies
    messages: list[dict[str, Any]] = bodies[0]["messages"]
    return messages


def check_shape(messages: list[dict[str, Any]]) -> None:
    """Chat-message shape the platform accepts: known roles, no empty message, and every tool
    message answers a tool call made before it."""
    called: set[str] = set()
    for m in messages:
        assert m["role"] in ROLES, m
        if m["role"] == "assistant" and m.get("tool_calls"):
            for c in m["tool_calls"]:
                assert c["type"] == "function" and c["function"]["name"], c
                json.loads(c["function"]["arguments"])
                called.add(c["id"])
        else:
            assert isinstance(m["content"], str) and m["content"].strip(), m
        if m["role"] == "tool":
            assert m["tool_call_id"] in called, m


def calls(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Tool name -> parsed arguments, over every assistant tool call."""
    return {
        c["function"]["name"]: json.loads(c["function"]["arguments"])
        for m in messages
        for c in m.get("tool_calls") or ()
    }


def tool_output(messages: list[dict[str, Any]], name: str) -> str:
    """The content of the tool message answering the call named ``name``."""
    ids = [
        c["id"]
        for m in messages
        for c in m.get("tool_calls") or ()
        if c["function"]["name"] == name
    ]
    for m in messages:
        if m["role"] == "tool" and m["tool_call_id"] in ids:
            content: str = m["content"]
            return content
    raise AssertionError(f"no tool message answers {name}")


# -- the stand-in speaks the API's JSON ------------------------------------------------------------


def test_standin_chat_json_parses_with_openai_client(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI
) -> None:
    call = oas.tool_call("get_weather", {"city": "San Francisco"})
    openai_standin.queue_chat(oas.chat_completion(content="Checking.", tool_calls=[call]))
    done = oai.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "?"}]
    )
    msg = done.choices[0].message
    assert (msg.content, done.choices[0].finish_reason) == ("Checking.", "tool_calls")
    assert msg.tool_calls and msg.tool_calls[0].function.name == "get_weather"
    assert done.usage and done.usage.total_tokens > 0

    openai_standin.queue_chat(
        oas.chat_completion(content="It is sunny and warm.", tool_calls=[call])
    )
    stream = oai.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    args = "".join(
        t.function.arguments or ""
        for c in chunks
        if c.choices
        for t in c.choices[0].delta.tool_calls or ()
        if t.function
    )
    assert text == "It is sunny and warm."
    assert json.loads(args) == {"city": "San Francisco"}
    assert chunks[-1].usage is not None and not chunks[-1].choices
    assert [r["path"] for r in openai_standin.requests] == ["/v1/chat/completions"] * 2
    assert openai_standin.requests[1]["body"]["stream"] is True


async def test_standin_answers_the_async_client(openai_standin: OpenAIStandIn) -> None:
    openai_standin.on_chat(
        lambda body: oas.chat_completion(content=body["messages"][-1]["content"])
    )
    async with openai.AsyncOpenAI(base_url=openai_standin.base_url, api_key="sk-test") as c:
        done = await c.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "echo me"}]
        )
        assert done.choices[0].message.content == "echo me"
        stream = await c.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "streamed"}], stream=True
        )
        parts = [ch.choices[0].delta.content or "" async for ch in stream if ch.choices]
        assert "".join(parts) == "streamed"


def test_standin_responses_json_parses_with_openai_client(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI
) -> None:
    items = every_output_item()
    openai_standin.queue_response(
        oas.response(list(items.values())), oas.response(list(items.values()))
    )
    resp = oai.responses.create(model="gpt-4.1", input="hi")
    assert [type(i).__name__ for i in resp.output] == [
        "ResponseReasoningItem", "ResponseFunctionWebSearch", "ResponseFileSearchToolCall",
        "ResponseCodeInterpreterToolCall", "McpListTools", "McpCall", "McpCall",
        "McpApprovalRequest", "ResponseComputerToolCall", "ImageGenerationCall", "LocalShellCall",
        "ResponseCustomToolCall", "ResponseFunctionToolCall", "ResponseOutputMessage",
        "ResponseOutputMessage",
    ]  # fmt: skip
    assert resp.output_text == "Launch confirmed."
    with oai.responses.stream(model="gpt-4.1", input="hi") as stream:
        streamed = stream.get_final_response()
    assert streamed.output_text == "Launch confirmed."
    assert [i.type for i in streamed.output] == [i.type for i in resp.output]


def test_standin_reports_errors_the_way_openai_does(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI
) -> None:
    openai_standin.fail(429, "Rate limit reached", path="/responses")
    with pytest.raises(openai.RateLimitError, match="Rate limit reached"):
        oai.responses.create(model="gpt-4.1", input="hi")
    assert oai.responses.create(model="gpt-4.1", input="hi").output_text == "ok"


# -- Chat Completions ------------------------------------------------------------------------------


def test_chat_completion_object_as_result(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    call = oas.tool_call("get_weather", {"location": "San Francisco"}, id="call_sf")
    openai_standin.queue_chat(oas.chat_completion(tool_calls=[call]))
    question = [{"role": "user", "content": "What's the weather in SF?"}]
    completion = oai.chat.completions.create(model="gpt-4o-mini", messages=question)
    before = completion.model_dump()

    result = client.evaluate(messages=question, result=completion, criteria=CRITERION)

    assert result.score is None or 0 <= result.score <= 1
    sent = sent_messages(live)
    assert sent[0] == question[0]
    assert sent[1]["role"] == "assistant"
    assert sent[1]["tool_calls"][0]["id"] == "call_sf"
    assert calls(sent) == {"get_weather": {"location": "San Francisco"}}
    assert completion.model_dump() == before


def test_one_choice_as_result(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    openai_standin.queue_chat(oas.chat_completion(content="Paris is the capital of France."))
    question = [{"role": "user", "content": "Capital of France?"}]
    completion = oai.chat.completions.create(model="gpt-4o-mini", messages=question)

    client.evaluate(messages=question, result=completion.choices[0], criteria=CRITERION)
    client.evaluate(
        messages=question, result=completion.choices[0].model_dump(), criteria=CRITERION
    )

    answer = {"role": "assistant", "content": "Paris is the capital of France."}
    assert [body[-1] for body in (r["body"]["messages"] for r in live.requests())] == [answer] * 2


def test_chat_completion_dict_sends_the_same_as_the_object(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    openai_standin.queue_chat(oas.chat_completion(content="Paris is the capital of France."))
    question = [{"role": "user", "content": "Capital of France?"}]
    completion = oai.chat.completions.create(model="gpt-4o-mini", messages=question)

    client.evaluate(messages=question, result=completion, criteria=CRITERION)
    from_object = sent_messages(live)
    live.reset()
    as_dict = completion.model_dump()
    client.evaluate(messages=question, result=as_dict, criteria=CRITERION)

    assert sent_messages(live) == from_object
    assert from_object[1] == {"role": "assistant", "content": "Paris is the capital of France."}
    assert as_dict == completion.model_dump()


def test_openai_message_objects_inside_messages(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    call = oas.tool_call("lookup_order", {"order_id": "A-17"}, id="call_a17")
    openai_standin.queue_chat(oas.chat_completion(tool_calls=[call]))
    openai_standin.queue_chat(oas.chat_completion(content="Order A-17 ships tomorrow."))
    history: list[Any] = [
        {"role": "developer", "content": "You are a support agent."},
        {"role": "user", "content": "Where is order A-17?"},
    ]
    first = oai.chat.completions.create(model="gpt-4o-mini", messages=history)
    history.append(first.choices[0].message)  # the object itself, as users append it
    history.append({"role": "tool", "tool_call_id": "call_a17", "content": '{"ships": "tomorrow"}'})
    final = oai.chat.completions.create(model="gpt-4o-mini", messages=history)
    snapshot = copy.deepcopy(history[:1] + history[3:])

    client.evaluate(messages=history, result=final.choices[0].message, criteria=CRITERION)

    sent = sent_messages(live)
    check_shape(sent)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant"]
    assert calls(sent) == {"lookup_order": {"order_id": "A-17"}}
    assert sent[2]["tool_calls"][0]["id"] == sent[3]["tool_call_id"] == "call_a17"
    assert sent[4]["content"] == "Order A-17 ships tomorrow."
    assert history[0]["role"] == "developer"
    assert history[:1] + history[3:] == snapshot


def test_chat_refusal_citations_and_streamed_completion(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    question = [{"role": "user", "content": "Latest Falcon 9 news?"}]
    cite = oas.url_annotation("https://example.org/falcon9", "Falcon 9 flies again", 0, 10)
    openai_standin.queue_chat(oas.chat_completion(content="It flew today.", annotations=[cite]))
    with oai.chat.completions.stream(model="gpt-4o-search-preview", messages=question) as s:
        streamed = s.get_final_completion()
    client.evaluate(messages=question, result=streamed, criteria=CRITERION)
    answer = sent_messages(live)[1]["content"]
    assert answer.startswith("It flew today.")
    # the non-streamed completion carries the citation
    live.reset()
    openai_standin.queue_chat(oas.chat_completion(content="It flew today.", annotations=[cite]))
    done = oai.chat.completions.create(model="gpt-4o-search-preview", messages=question)
    client.evaluate(messages=question, result=done, criteria=CRITERION)
    answer = sent_messages(live)[1]["content"]
    assert "Falcon 9 flies again <https://example.org/falcon9>" in answer

    live.reset()
    openai_standin.queue_chat(oas.chat_completion(refusal="I can't help with that."))
    refused = oai.chat.completions.create(model="gpt-4o-mini", messages=question)
    client.evaluate(messages=question, result=refused, criteria=CRITERION)
    assert sent_messages(live)[1] == {
        "role": "assistant",
        "content": "[refusal] I can't help with that.",
    }


def test_dumped_message_dict_and_custom_tool_call(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    custom = {
        "id": "call_sql",
        "type": "custom",
        "custom": {"name": "run_sql", "input": "SELECT 1"},
    }
    openai_standin.queue_chat(oas.chat_completion(content="Running it.", tool_calls=[custom]))
    question = [{"role": "user", "content": "How many rows?"}]
    message = oai.chat.completions.create(model="gpt-5", messages=question).choices[0].message
    dumped = message.model_dump()  # refusal/audio/annotations None and a custom call

    client.evaluate(messages=question, result=dumped, criteria=CRITERION)

    (answer,) = sent_messages(live)[1:]
    assert answer == {
        "role": "assistant",
        "content": "Running it.",
        "tool_calls": [
            {
                "id": "call_sql",
                "type": "function",
                "function": {"name": "run_sql", "arguments": '{"input": "SELECT 1"}'},
            }
        ],
    }
    assert dumped == message.model_dump()


# -- Responses API ---------------------------------------------------------------------------------


def every_output_item() -> dict[str, dict[str, Any]]:
    return {
        "reasoning": oas.reasoning("The user wants launch news, so search first."),
        "web_search_call": oas.web_search_call(
            "SpaceX launch today", ["https://example.org/launch"]
        ),
        "file_search_call": oas.file_search_call(
            ["launch manifest"], [{"filename": "manifest.pdf", "text": "Crew-11 in August"}]
        ),
        "code_interpreter_call": oas.code_interpreter_call("print(2 + 2)", ["4\n"]),
        "mcp_list_tools": oas.mcp_list_tools("deepwiki", ["ask_question", "read_wiki"]),
        "mcp_call": oas.mcp_call("deepwiki", "ask_question", {"q": "engines?"}, output="nine"),
        "mcp_call_error": oas.mcp_call("deepwiki", "read_wiki", {"page": 3}, error="Not Found"),
        "mcp_approval_request": oas.mcp_approval_request("stripe", "create_refund", {"id": "ch_1"}),
        "computer_call": oas.computer_call({"type": "click", "button": "left", "x": 12, "y": 34}),
        "image_generation_call": oas.image_generation_call("a rocket at dawn"),
        "local_shell_call": oas.local_shell_call(["ls", "-la"]),
        "custom_tool_call": oas.custom_tool_call("run_sql", "SELECT 1"),
        "function_call": oas.function_call("notify", {"channel": "#launches"}),
        "refusal": oas.refusal_message("I won't share private data."),
        "message": oas.output_message(
            "Launch confirmed.",
            [oas.url_citation("https://example.org/launch", "Launch report", 0, 6)],
        ),
    }


# item -> what the evaluator must be able to read about it in the messages sent
EXPECTED: dict[str, list[str]] = {
    "reasoning": ["The user wants launch news, so search first."],
    "web_search_call": ['"web_search"', "SpaceX launch today", "https://example.org/launch"],
    "file_search_call": ['"file_search"', "launch manifest", "manifest.pdf", "Crew-11 in August"],
    "code_interpreter_call": ['"code_interpreter"', "print(2 + 2)", '"4\\n"'],
    "mcp_list_tools": ['"mcp_list_tools"', "deepwiki", "ask_question", "read_wiki"],
    "mcp_call": ['"ask_question"', "engines?", "nine", "deepwiki"],
    "mcp_call_error": ['"read_wiki"', "Not Found"],
    "mcp_approval_request": ['"create_refund"', "ch_1", "stripe", "approval"],
    "computer_call": ['"computer"', "click", "34"],
    "image_generation_call": ['"image_generation"', "a rocket at dawn", "png image"],
    "local_shell_call": ['"local_shell"', "-la"],
    "custom_tool_call": ['"run_sql"', "SELECT 1"],
    "function_call": ['"notify"', "#launches"],
    "refusal": ["[refusal] I won't share private data."],
    "message": ["Launch confirmed.", "Launch report <https://example.org/launch>"],
}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_each_responses_output_item_reaches_the_evaluator(
    kind: str,
    openai_standin: OpenAIStandIn,
    oai: openai.OpenAI,
    client: Composo,
    live: ServerProcess,
) -> None:
    item = every_output_item()[kind]
    openai_standin.queue_response(oas.response([item]))
    resp = oai.responses.create(model="gpt-4.1", input="Any launch news?")

    client.evaluate(input="Any launch news?", result=resp, criteria=CRITERION)

    sent = sent_messages(live)
    check_shape(sent)
    assert sent[0] == {"role": "user", "content": "Any launch news?"}
    text = json.dumps(sent[1:], ensure_ascii=False)
    for needle in EXPECTED[kind]:
        assert needle in text, (needle, sent[1:])


def test_builtin_tools_response_in_order(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    openai_standin.on_response(oas.reference_response)
    tools: Any = [
        {"type": "web_search"},
        {"type": "code_interpreter", "container": {"type": "auto"}},
    ]
    resp = oai.responses.create(model="gpt-4.1", input="SpaceX launches?", tools=tools)
    before = resp.model_dump()

    result = client.evaluate(input="SpaceX launches?", result=resp, criteria=CRITERION)

    assert result.score is None or 0 <= result.score <= 1
    sent = sent_messages(live)
    check_shape(sent)
    assert [m["role"] for m in sent] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    args = calls(sent)
    assert args["web_search"] == {"query": "latest SpaceX news launch"}
    assert "plt.plot(dates" in args["code_interpreter"]["code"]
    assert "https://www.space.com/spacex-axiom-mission-4-launch" in tool_output(sent, "web_search")
    assert "2025-06-23" in tool_output(sent, "code_interpreter")
    assert sent[-1]["content"].startswith("The latest SpaceX story")
    assert (
        "Sources:\n[1] SpaceX launches Axiom Mission 4 to the ISS <https://" in sent[-1]["content"]
    )
    assert resp.model_dump() == before


def test_mcp_response_and_its_dict_send_the_same(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    openai_standin.on_response(oas.reference_response)
    mcp: Any = {
        "type": "mcp",
        "server_label": "coingecko",
        "server_url": "https://x",
        "require_approval": "never",
    }
    resp = oai.responses.create(model="gpt-4.1", input="BTC and ETH prices?", tools=[mcp])

    client.evaluate(input="BTC and ETH prices?", result=resp, criteria=CRITERION)
    sent = sent_messages(live)
    live.reset()
    client.evaluate(input="BTC and ETH prices?", result=resp.model_dump(), criteria=CRITERION)

    assert sent_messages(live) == sent
    check_shape(sent)
    assert calls(sent)["get_simple_price"] == {"ids": "bitcoin,ethereum", "vs_currencies": "usd"}
    assert calls(sent)["mcp_list_tools"] == {"server_label": "coingecko"}
    listed = tool_output(sent, "mcp_list_tools")
    assert all(n in listed for n in ("get_simple_price", "get_coins_markets", "get_search"))
    assert '"usd": 67321.12' in tool_output(sent, "get_simple_price")
    assert "coingecko" in tool_output(sent, "get_simple_price")
    assert "$67,321.12" in sent[-1]["content"]


def test_multi_turn_input_with_earlier_output_and_function_results(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    openai_standin.queue_response(
        oas.response([oas.function_call("get_weather", {"city": "Oslo"}, call_id="call_oslo")]),
        oas.response([oas.output_message("It is 4°C and raining in Oslo.")]),
    )
    conversation: list[Any] = [
        {"role": "developer", "content": "Answer in one sentence."},
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Oslo?"}]},
    ]
    first = oai.responses.create(model="gpt-4.1", input=conversation)
    conversation += first.output  # openai objects, as the docs show
    conversation.append(
        {
            "type": "function_call_output",
            "call_id": "call_oslo",
            "output": '{"temp_c": 4, "rain": true}',
        }
    )
    final = oai.responses.create(model="gpt-4.1", input=conversation)
    snapshot = [
        i.model_dump() if hasattr(i, "model_dump") else copy.deepcopy(i) for i in conversation
    ]

    client.evaluate(input=conversation, result=final, criteria=CRITERION)

    sent = sent_messages(live)
    check_shape(sent)
    assert sent == [
        {"role": "system", "content": "Answer in one sentence."},
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_oslo",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_oslo", "content": '{"temp_c": 4, "rain": true}'},
        {"role": "assistant", "content": "It is 4°C and raining in Oslo."},
    ]
    now = [i.model_dump() if hasattr(i, "model_dump") else i for i in conversation]
    assert now == snapshot


def test_output_list_as_result(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    openai_standin.on_response(oas.reference_response)
    resp = oai.responses.create(model="gpt-4.1", input="Prices?", tools=[{"type": "mcp"}])  # type: ignore[list-item]
    client.evaluate(input="Prices?", result=resp, criteria=CRITERION)
    whole = sent_messages(live)
    live.reset()
    client.evaluate(input="Prices?", result=resp.output, criteria=CRITERION)
    assert sent_messages(live) == whole


def test_one_output_item_as_result(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    answer = oas.output_message("Paris.", [oas.url_citation("https://x.org/fr", "France facts")])
    openai_standin.queue_response(
        oas.response([answer]),
        oas.response([oas.function_call("get_weather", {"city": "Oslo"}, call_id="call_1")]),
    )
    said = oai.responses.create(model="gpt-4.1", input="Capital of France?")
    called = oai.responses.create(model="gpt-4.1", input="Weather in Oslo?")

    for item in (said.output[0], said.output[0].model_dump()):
        live.reset()
        client.evaluate(input="Capital of France?", result=item, criteria=CRITERION)
        sent = sent_messages(live)
        check_shape(sent)
        assert sent[1] == {
            "role": "assistant",
            "content": "Paris.\n\nSources:\n[1] France facts <https://x.org/fr>",
        }
    for item in (called.output[0], called.output[0].model_dump()):
        live.reset()
        client.evaluate(input="Weather in Oslo?", result=item, criteria=CRITERION)
        sent = sent_messages(live)
        check_shape(sent)
        assert calls(sent) == {"get_weather": {"city": "Oslo"}}


def test_input_with_earlier_builtin_tool_output_and_images(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    openai_standin.on_response(oas.reference_response)
    ask: list[Any] = [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Find the launch in this photo"},
                {"type": "input_image", "image_url": "https://example.org/pad.png"},
            ],
        }
    ]
    first = oai.responses.create(model="gpt-4.1", input=ask, tools=[{"type": "web_search"}])
    follow_up = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "As a table"}],
    }
    turn_two = [*ask, *first.output, follow_up]
    openai_standin.queue_response(oas.response([oas.output_message("| date |")]))
    second = oai.responses.create(model="gpt-4.1", input=turn_two)

    client.evaluate(input=turn_two, result=second, criteria=CRITERION)

    sent = sent_messages(live)
    check_shape(sent)
    assert [m["role"] for m in sent] == [
        "user", "assistant", "tool", "assistant", "tool", "assistant", "user", "assistant",
    ]  # fmt: skip
    assert (
        sent[0]["content"] == "Find the launch in this photo\n[image: https://example.org/pad.png]"
    )
    assert list(calls(sent)) == ["web_search", "code_interpreter"]
    assert "Sources:\n[1] SpaceX launches Axiom Mission 4" in sent[5]["content"]
    assert sent[6:] == [
        {"role": "user", "content": "As a table"},
        {"role": "assistant", "content": "| date |"},
    ]


async def test_async_client_with_a_response(
    openai_standin: OpenAIStandIn, aclient: AsyncComposo, live: ServerProcess
) -> None:
    openai_standin.on_response(oas.reference_response)
    async with openai.AsyncOpenAI(base_url=openai_standin.base_url, api_key="sk-test") as oa:
        resp = await oa.responses.create(
            model="gpt-4.1", input="Plot SpaceX launches", tools=[{"type": "web_search"}]
        )
    results = await aclient.evaluate(
        input="Plot SpaceX launches", result=resp, criteria=[CRITERION, "Reward cited sources"]
    )
    assert len(results) == 2
    bodies = [r["body"] for r in live.requests() if r["path"].endswith("/evals/reward")]
    assert len(bodies) == 2 and bodies[0]["messages"] == bodies[1]["messages"]
    assert calls(bodies[0]["messages"])["web_search"] == {"query": "latest SpaceX news launch"}


def test_failed_response_is_described_not_sent_empty(client: Composo, live: ServerProcess) -> None:
    failed = oas.response([])
    failed.update(status="failed", error={"code": "server_error", "message": "The model crashed"})
    client.evaluate(input="Hello?", result=failed, criteria=CRITERION)
    answer = sent_messages(live)[1]
    assert answer["role"] == "assistant"
    assert "status failed" in answer["content"] and "The model crashed" in answer["content"]


@pytest.mark.parametrize(
    ("bad_input", "fragment"),
    [
        ([{"role": "critic", "content": "hm"}], "input[0].role is 'critic'"),
        (
            [{"role": "user", "content": "hi"}, {"type": "item_reference", "id": "msg_1"}],
            "input[1]",
        ),
        ([42], "input[0] is a int"),
    ],
)
def test_bad_input_is_refused_before_any_request(
    bad_input: Any, fragment: str, client: Composo, live: ServerProcess
) -> None:
    with pytest.raises(ComposoError, match="input") as info:
        client.evaluate(input=bad_input, result="fine", criteria=CRITERION)
    assert isinstance(info.value, ValueError)
    assert fragment in str(info.value)
    assert live.requests() == []


def test_unknown_result_lists_the_openai_types(client: Composo, live: ServerProcess) -> None:
    with pytest.raises(ComposoError) as info:
        client.evaluate(input="hi", result=object(), criteria=CRITERION)
    message = str(info.value)
    assert "Responses Response" in message and "ChatCompletion" in message
    assert live.requests() == []


def test_adapters_do_not_import_openai() -> None:
    import subprocess
    import sys

    code = (
        "import sys, composo.adapters.openai_responses, composo.adapters.openai_chat;"
        "print('openai' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_response_offers_its_tools_through_the_plugin_hook() -> None:
    from composo._core import convert

    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    assert convert.result_tools({"object": "response", "tools": tools, "output": []}) == tools
    assert convert.result_tools({"object": "response", "tools": []}) is None
    assert convert.result_tools([{"role": "assistant", "content": "hi"}]) is None
