"""ComposoCallback in "llm" mode with real langchain-core models and chains, against the local
server: what is sent, what is recorded, and that evaluation never gets in the chain's way."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from composo import (
    APIConnectionError,
    AsyncComposo,
    AuthenticationError,
    Composo,
    ComposoValidationError,
)
from composo._background import BacklogFullError
from tests.support.lazy import lazy_import
from tests.support.servers import ServerProcess, free_port

if TYPE_CHECKING:
    from langchain_composo import ComposoCallback, EvaluationRecord
    from langchain_core.runnables import Runnable

fakes = lazy_import("tests.support.langchain_models")

CRITERION = "Reward answers that address the user's question"
BINARY = "Passes if the answer is polite"


def body_of(record: EvaluationRecord, live: ServerProcess) -> dict[str, Any]:
    """The request body the server received for this record's criterion."""
    bodies = [r["body"] for r in live.requests() if r["path"].endswith("/evals/reward")]
    matching = [b for b in bodies if b.get("evaluation_criteria") == record.criterion]
    assert matching, f"no reward request for {record.criterion!r}"
    return matching[-1]


def reward_bodies(live: ServerProcess) -> list[dict[str, Any]]:
    return [r["body"] for r in live.requests() if r["path"].endswith("/evals/reward")]


@pytest.fixture
def callback(client: Composo) -> Iterator[ComposoCallback]:
    from langchain_composo import ComposoCallback

    cb = ComposoCallback(criteria=[CRITERION, BINARY], client=client)
    yield cb
    cb.close()


def test_plain_model_call_is_scored_per_criterion(
    callback: ComposoCallback, live: ServerProcess
) -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    model = GenericFakeChatModel(messages=iter([AIMessage("Paris is the capital of France.")]))
    run_id = uuid.uuid4()
    answer = model.invoke(
        [SystemMessage("Answer briefly."), HumanMessage("What is the capital of France?")],
        config={"callbacks": [callback], "run_id": run_id},
    )
    assert answer.content == "Paris is the capital of France."
    assert callback.flush(timeout=30)
    records = callback.results
    assert sorted(r.criterion for r in records) == sorted([CRITERION, BINARY])
    for r in records:
        assert r.ok and r.run_id == str(run_id)
        assert r.score is not None and 0.0 <= r.score <= 1.0
        assert r.explanation and r.response is not None
    assert {r.score for r in records if r.criterion == BINARY} <= {0.0, 1.0}
    body = body_of(records[0], live)
    assert body["messages"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris is the capital of France."},
    ]
    assert callback.open_runs == 0


def test_tools_offered_and_tool_calls_are_sent(client: Composo, live: ServerProcess) -> None:
    from langchain_composo import ComposoCallback
    from langchain_core.messages import AIMessage

    cb = ComposoCallback(criteria="Reward calling the right tool", client=client)
    model = fakes.ToolCallingFakeChat(
        messages=iter(
            [
                AIMessage(
                    "", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "c1"}]
                )
            ]
        )
    ).bind_tools([fakes.get_weather])
    model.invoke("Weather in Oslo?", config={"callbacks": [cb]})
    assert cb.flush(timeout=30)
    [record] = cb.results
    assert record.ok, record.error
    body = body_of(record, live)
    assert body["tools"][0]["function"]["name"] == "get_weather"
    assert body["tools"][0]["function"]["parameters"]["required"] == ["city"]
    assistant = body["messages"][-1]
    assert assistant["role"] == "assistant"
    assert assistant["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Oslo"}',
    }
    assert assistant["tool_calls"][0]["id"] == "c1"


def test_tool_call_with_unparseable_arguments_is_sent_as_text(
    client: Composo, live: ServerProcess
) -> None:
    from langchain_composo import ComposoCallback
    from langchain_core.messages import AIMessage

    cb = ComposoCallback(
        criteria="Fails if the agent calls a tool with invented arguments", client=client
    )
    bad = {"name": "get_weather", "args": "{city: Oslo", "id": "c1", "error": "bad JSON"}
    model = fakes.ToolCallingFakeChat(
        messages=iter([AIMessage("", invalid_tool_calls=[bad])])  # type: ignore[list-item]
    ).bind_tools([fakes.get_weather])
    model.invoke("Weather in Oslo?", config={"callbacks": [cb]})
    assert cb.flush(timeout=30)
    [record] = cb.results
    assert record.ok, record.error
    assert body_of(record, live)["messages"][-1] == {
        "role": "assistant",
        "content": "Invalid tool call get_weather with arguments {city: Oslo (error: bad JSON)",
    }
    cb.close()


def lcel_chain() -> Runnable[dict[str, str], str]:
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate

    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are a geography tutor."), ("human", "{question}")]
    )
    return prompt | fakes.EchoChat() | StrOutputParser()


QUESTIONS = [f"What is the capital of country number {i}?" for i in range(6)]


def assert_kept_apart(callback: ComposoCallback, live: ServerProcess, n: int) -> None:
    """Every question was evaluated once, against the answer to that same question."""
    assert callback.flush(timeout=60)
    records = [r for r in callback.results if r.criterion == CRITERION]
    assert len(records) == n and all(r.ok for r in records)
    assert len({r.run_id for r in records}) == n
    bodies = [b for b in reward_bodies(live) if b["evaluation_criteria"] == CRITERION]
    pairs = {(b["messages"][1]["content"], b["messages"][2]["content"]) for b in bodies}
    assert pairs == {(q, f"You asked: {q}") for q in QUESTIONS[:n]}
    assert callback.open_runs == 0


def test_lcel_chain_invoke_batch_and_stream(callback: ComposoCallback, live: ServerProcess) -> None:
    chain = lcel_chain()
    config: Any = {"callbacks": [callback]}
    assert chain.invoke({"question": QUESTIONS[0]}, config=config) == f"You asked: {QUESTIONS[0]}"
    chain.batch([{"question": q} for q in QUESTIONS[1:4]], config=config)
    streamed = "".join(chain.stream({"question": QUESTIONS[4]}, config=config))
    assert streamed == f"You asked: {QUESTIONS[4]}"
    assert_kept_apart(callback, live, 5)
    body = reward_bodies(live)[0]
    assert body["messages"][0] == {"role": "system", "content": "You are a geography tutor."}


async def test_ainvoke_abatch_and_gather_share_one_handler(
    callback: ComposoCallback, live: ServerProcess
) -> None:
    chain = lcel_chain()
    config: Any = {"callbacks": [callback]}
    await chain.ainvoke({"question": QUESTIONS[0]}, config=config)
    await chain.abatch([{"question": q} for q in QUESTIONS[1:3]], config=config)
    await asyncio.gather(*(chain.ainvoke({"question": q}, config=config) for q in QUESTIONS[3:6]))
    assert await callback.aflush(timeout=60)
    assert_kept_apart(callback, live, 6)


def test_threads_share_one_handler(callback: ComposoCallback, live: ServerProcess) -> None:
    chain = lcel_chain()
    threads = [
        threading.Thread(target=chain.invoke, args=({"question": q}, {"callbacks": [callback]}))
        for q in QUESTIONS
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert_kept_apart(callback, live, len(QUESTIONS))


def test_async_client_is_accepted(live: ServerProcess) -> None:
    from langchain_composo import ComposoCallback

    aclient = AsyncComposo(api_key=live.api_key, base_url=live.base_url)
    cb = ComposoCallback(criteria=CRITERION, client=aclient, tags={"env": "test", "build": 7})
    fakes.EchoChat().invoke("Is this scored?", config={"callbacks": [cb]})
    assert cb.flush(timeout=30)
    [record] = cb.results
    assert record.ok, record.error
    assert body_of(record, live)["tags"] == {"env": "test", "build": "7"}
    cb.close()


def test_every_evaluate_option_reaches_the_requests(client: Composo, live: ServerProcess) -> None:
    from langchain_composo import ComposoCallback

    with ComposoCallback(
        criteria=CRITERION,
        client=client,
        data_retention="none",
        explanation_cleaning="end_user",
        evaluate_latest=True,
    ) as cb:
        fakes.EchoChat().invoke("Is this scored?", config={"callbacks": [cb]})
    [record] = cb.results
    body = body_of(record, live)
    assert (body["data_retention"], body["explanation_cleaning"]) == ("none", "end_user")
    assert body["evaluate_latest"] is True


def test_on_result_sees_each_record_and_its_errors_do_not_escape(
    client: Composo, caplog: pytest.LogCaptureFixture
) -> None:
    from langchain_composo import ComposoCallback

    seen: list[EvaluationRecord] = []

    def on_result(record: EvaluationRecord) -> None:
        seen.append(record)
        raise ValueError("bug in the user's hook")

    cb = ComposoCallback(criteria=[CRITERION, BINARY], client=client, on_result=on_result)
    with caplog.at_level(logging.ERROR, logger="composo"):
        fakes.EchoChat().invoke("hello?", config={"callbacks": [cb]})
        assert cb.flush(timeout=30)
    assert len(seen) == 2 and all(r.ok for r in seen)
    assert len(cb.results) == 2  # records are kept even though the hook failed
    assert "on_result raised" in caplog.text


# -- failure cases: the chain always finishes; failures are recorded and logged ---------------


def test_server_down_is_recorded_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    from langchain_composo import ComposoCallback

    down = Composo(api_key="k", base_url=f"http://127.0.0.1:{free_port()}", timeout=5)
    cb = ComposoCallback(criteria=CRITERION, client=down)
    with caplog.at_level(logging.WARNING, logger="composo"):
        assert fakes.EchoChat().invoke("anyone there?", config={"callbacks": [cb]}).content
        assert cb.flush(timeout=30)
    [record] = cb.results
    assert isinstance(record.error, APIConnectionError)
    assert record.score is None and record.response is None
    assert "failed" in caplog.text and CRITERION in caplog.text
    assert cb.stats == {"completed": 0, "failed": 1, "pending": 0}
    down.close()


def test_wrong_key_is_recorded_and_raise_error_raises_it(live: ServerProcess) -> None:
    from langchain_composo import ComposoCallback

    bad = Composo(api_key="not-the-key", base_url=live.base_url)
    quiet = ComposoCallback(criteria=CRITERION, client=bad)
    fakes.EchoChat().invoke("q?", config={"callbacks": [quiet]})
    assert quiet.flush(timeout=30)  # no raise by default
    assert isinstance(quiet.results[0].error, AuthenticationError)

    arrived = threading.Event()
    loud = ComposoCallback(
        criteria=CRITERION, client=bad, raise_error=True, on_result=lambda r: arrived.set()
    )
    fakes.EchoChat().invoke("q?", config={"callbacks": [loud]})
    with pytest.raises(AuthenticationError):
        loud.flush(timeout=30)
    loud.flush(timeout=30)  # each failure is raised once

    arrived.clear()
    fakes.EchoChat().invoke("first", config={"callbacks": [loud]})
    assert arrived.wait(30)
    # The next run is told, instead of the failure passing unnoticed.
    with pytest.raises(AuthenticationError):
        fakes.EchoChat().invoke("second", config={"callbacks": [loud]})
    bad.close()


def test_slow_server_does_not_hold_up_the_chain(client: Composo, live: ServerProcess) -> None:
    from langchain_composo import ComposoCallback

    live.fault({"delay": 1.0})
    cb = ComposoCallback(criteria=CRITERION, client=client)
    answer = fakes.EchoChat().invoke("slow?", config={"callbacks": [cb]})
    # The chain has its answer while the evaluation is still waiting on the server.
    assert answer.content == "You asked: slow?"
    assert cb.pending == 1 and cb.results == []
    assert cb.flush(timeout=30)
    assert cb.results[0].ok and cb.pending == 0


def test_flush_timeout_reports_unfinished_work(client: Composo, live: ServerProcess) -> None:
    from langchain_composo import ComposoCallback

    live.fault({"delay": 1.0})
    cb = ComposoCallback(criteria=CRITERION, client=client)
    fakes.EchoChat().invoke("x?", config={"callbacks": [cb]})
    assert cb.flush(timeout=0.05) is False
    assert cb.flush(timeout=30) is True


def test_full_backlog_is_recorded_not_silently_dropped(
    client: Composo, live: ServerProcess
) -> None:
    from langchain_composo import ComposoCallback

    live.fault({"delay": 1})
    cb = ComposoCallback(criteria=CRITERION, client=client, max_pending=1)
    fakes.EchoChat().invoke("first", config={"callbacks": [cb]})
    fakes.EchoChat().invoke("second", config={"callbacks": [cb]})
    assert cb.flush(timeout=30)
    errors = [r for r in cb.results if not r.ok]
    assert len(errors) == 1 and isinstance(errors[0].error, BacklogFullError)
    assert "max_pending" in str(errors[0].error)
    assert sum(r.ok for r in cb.results) == 1


def test_failed_and_abandoned_runs_are_cleaned_up(callback: ComposoCallback) -> None:
    with pytest.raises(RuntimeError, match="provider is down"):
        fakes.BrokenChat().invoke("hi", config={"callbacks": [callback]})
    assert callback.open_runs == 0
    assert callback.flush(timeout=30)
    assert callback.results == []  # a failed call has no answer to judge
    stream = lcel_chain().stream({"question": "a long answer"}, config={"callbacks": [callback]})
    next(iter(stream))
    stream.close()  # the caller stops reading half way
    assert callback.open_runs == 0


def test_results_are_bounded(client: Composo) -> None:
    from langchain_composo import ComposoCallback

    cb = ComposoCallback(criteria=CRITERION, client=client, max_results=2)
    for q in QUESTIONS[:4]:
        fakes.EchoChat().invoke(q, config={"callbacks": [cb]})
    assert cb.flush(timeout=30)
    assert len(cb.results) == 2
    assert cb.stats["completed"] == 4


# -- bad configuration fails at once, before any run -------------------------------------------


def test_bad_arguments_fail_fast(client: Composo) -> None:
    from langchain_composo import ComposoCallback

    with pytest.raises(ComposoValidationError, match="criteria"):
        ComposoCallback(criteria="Be nice", client=client)
    with pytest.raises(ComposoValidationError, match="mode"):
        ComposoCallback(criteria=CRITERION, client=client, mode="spans")  # type: ignore[arg-type]
    with pytest.raises(ComposoValidationError, match="tags"):
        ComposoCallback(criteria=CRITERION, client=client, tags={"k": ["nested"]})
    with pytest.raises(ComposoValidationError, match="model_core"):
        ComposoCallback(criteria=CRITERION, client=client, model_core="align-9")
    with pytest.raises(ComposoValidationError, match="cannot evaluate traces"):
        ComposoCallback(
            criteria=BINARY, client=client, mode="trace", model_core="align-lightning-20251127"
        )
    with pytest.raises(ComposoValidationError, match="client"):
        ComposoCallback(criteria=CRITERION, client="http://x")  # type: ignore[arg-type]
    # the options are the clients' own, checked as they check them
    with pytest.raises(TypeError, match="unexpected keyword argument 'tagz'"):
        ComposoCallback(criteria=CRITERION, client=client, tagz={"k": "v"})  # type: ignore[call-arg]
    with pytest.raises(ComposoValidationError, match="evaluate_latest"):
        ComposoCallback(criteria=CRITERION, client=client, mode="trace", evaluate_latest=True)
    lightning = Composo.from_client(client, model_core="align-lightning-20251127")
    with pytest.raises(ComposoValidationError, match="cannot evaluate traces"):
        ComposoCallback(criteria=BINARY, client=lightning, mode="trace")
    lightning.close()


def test_backlog_smaller_than_the_criteria_of_one_run_is_refused(client: Composo) -> None:
    # Each run queues one evaluation per criterion; with fewer places every run would be skipped.
    from langchain_composo import ComposoCallback

    with pytest.raises(ComposoValidationError, match="max_pending"):
        ComposoCallback(criteria=[CRITERION, BINARY], client=client, max_pending=1)
    ComposoCallback(criteria=[CRITERION, BINARY], client=client, max_pending=2).close()


def test_default_client_reads_the_environment(
    composo_env: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_composo import ComposoCallback

    cb = ComposoCallback(criteria=CRITERION)
    fakes.EchoChat().invoke("env?", config={"callbacks": [cb]})
    assert cb.flush(timeout=30) and cb.results[0].ok
    cb.close()
    monkeypatch.delenv("COMPOSO_API_KEY")
    with pytest.raises(ComposoValidationError, match="COMPOSO_API_KEY"):
        ComposoCallback(criteria=CRITERION)


def test_completion_models_are_scored_too(client: Composo, live: ServerProcess) -> None:
    from langchain_composo import ComposoCallback
    from langchain_core.language_models.fake import FakeListLLM

    cb = ComposoCallback(criteria=CRITERION, client=client)
    FakeListLLM(responses=["Paris."]).invoke("Capital of France?", config={"callbacks": [cb]})
    assert cb.flush(timeout=30)
    [record] = cb.results
    assert record.ok, record.error
    assert body_of(record, live)["messages"] == [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris."},
    ]
