"""``ComposoEvaluator`` as LlamaIndex users run it: directly, on query engine responses and in
``BatchEvalRunner``, against the local server."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref

import httpx
import pytest

from composo import (
    APIConnectionError,
    AsyncComposo,
    AuthenticationError,
    Composo,
    ComposoValidationError,
    criteria,
)
from tests.support.servers import free_port

pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning:inspect", "ignore:asyncio_module:DeprecationWarning"
)

QUESTION = "How tall is the Eiffel Tower?"
CONTEXTS = ["The Eiffel Tower is 330 metres tall.", "It was finished in 1889 in Paris."]
ANSWER = "The Eiffel Tower is 330 metres tall."


def reward_bodies(live) -> list[dict]:
    return [r["body"] for r in live.requests() if r["path"].endswith("/evals/reward")]


@pytest.fixture(scope="module")
def query_engine():
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM

    docs = [
        Document(text="The Eiffel Tower is 330 metres tall and stands in Paris."),
        Document(text="The Colosseum in Rome held about 50,000 spectators."),
        Document(text="Big Ben is the nickname of the great bell in London."),
        Document(text="The Sagrada Familia in Barcelona is still being built."),
    ]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    return index.as_query_engine(llm=MockLLM(max_tokens=16), similarity_top_k=2)


def test_evaluate_returns_an_evaluation_result_with_contexts_as_source_material(
    client: Composo, live
) -> None:
    from llama_index.core.evaluation import EvaluationResult
    from llama_index.evaluation.composo import ComposoFaithfulnessEvaluator

    evaluator = ComposoFaithfulnessEvaluator(client=client, threshold=0.5)
    result = evaluator.evaluate(query=QUESTION, response=ANSWER, contexts=CONTEXTS)

    assert isinstance(result, EvaluationResult)
    assert (result.query, result.response, result.contexts) == (QUESTION, ANSWER, CONTEXTS)
    assert result.score is not None and 0 <= result.score <= 1
    assert result.passing is (result.score >= 0.5)
    assert result.feedback and not result.invalid_result
    [body] = reward_bodies(live)
    assert body["evaluation_criteria"] == criteria.rag_faithfulness
    assert body["messages"] == [
        {"role": "user", "content": QUESTION},
        {
            "role": "system",
            "content": "Source material retrieved for the answer that follows:\n\n"
            "[1] The Eiffel Tower is 330 metres tall.\n\n[2] It was finished in 1889 in Paris.",
        },
        {"role": "assistant", "content": ANSWER},
    ]


def test_threshold_decides_passing(client: Composo) -> None:
    from llama_index.evaluation.composo import ComposoEvaluator

    low = ComposoEvaluator(criteria.rag_relevance, client=client, threshold=0.0)
    high = ComposoEvaluator(criteria.rag_relevance, client=client, threshold=1.0)
    a = low.evaluate(query=QUESTION, response="Paris has many museums.")
    b = high.evaluate(query=QUESTION, response="Paris has many museums.")
    assert a.score == b.score and a.score is not None and a.score < 1.0
    assert a.passing is True and b.passing is False


async def test_aevaluate_runs_on_the_event_loop_thread(live) -> None:
    from llama_index.evaluation.composo import ComposoRelevancyEvaluator

    threads: list[int] = []

    async def note_thread(request: httpx.Request) -> None:
        threads.append(threading.get_ident())

    http = httpx.AsyncClient(event_hooks={"request": [note_thread]})
    async with AsyncComposo(api_key=live.api_key, base_url=live.base_url, http_client=http) as ac:
        evaluator = ComposoRelevancyEvaluator(client=ac)
        results = await asyncio.gather(
            *(
                evaluator.aevaluate(query=QUESTION, response=ANSWER, contexts=CONTEXTS)
                for _ in range(3)
            )
        )
    await http.aclose()
    assert all(r.score is not None and not r.invalid_result for r in results)
    assert threads == [threading.get_ident()] * 3


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_finished_event_loops_and_their_connections_are_not_kept(client: Composo) -> None:
    # asyncio.run(evaluator.aevaluate(...)) once per item: each run's loop must be let go.
    from llama_index.core.evaluation import EvaluationResult
    from llama_index.evaluation.composo import ComposoRelevancyEvaluator

    evaluator = ComposoRelevancyEvaluator(client=client)
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def one() -> EvaluationResult:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        return await evaluator.aevaluate(query=QUESTION, response=ANSWER)

    for _ in range(4):
        assert asyncio.run(one()).score is not None
    gc.collect()
    assert sum(ref() is not None for ref in loops) <= 1  # at most the last one, until next use


async def test_sync_evaluate_works_inside_a_running_event_loop(client: Composo) -> None:
    from llama_index.evaluation.composo import ComposoRelevancyEvaluator

    result = ComposoRelevancyEvaluator(client=client).evaluate(query=QUESTION, response=ANSWER)
    assert result.score is not None


def test_evaluate_response_uses_the_query_engine_source_nodes(
    client: Composo, live, query_engine
) -> None:
    from llama_index.evaluation.composo import ComposoFaithfulnessEvaluator

    response = query_engine.query(QUESTION)
    result = ComposoFaithfulnessEvaluator(client=client).evaluate_response(
        query=QUESTION, response=response
    )
    assert result.response == response.response
    assert result.contexts == [n.node.get_content() for n in response.source_nodes]
    [body] = reward_bodies(live)
    assert body["messages"][1]["role"] == "system"
    for text in result.contexts:
        assert text in body["messages"][1]["content"]


def test_criterion_that_does_not_apply_gives_no_score_and_no_verdict(client: Composo) -> None:
    from llama_index.evaluation.composo import ComposoToolUseEvaluator

    result = ComposoToolUseEvaluator(client=client).evaluate(query=QUESTION, response=ANSWER)
    assert result.score is None and result.passing is None
    assert not result.invalid_result
    assert "not applicable" in result.feedback.lower()


def test_tool_use_evaluator_judges_a_chat_history_with_tool_calls(client: Composo, live) -> None:
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from llama_index.evaluation.composo import ComposoToolUseEvaluator

    history = [
        ChatMessage(role="user", content="What is the weather in Paris?"),
        ChatMessage(
            role="assistant",
            blocks=[
                ToolCallBlock(tool_call_id="c1", tool_name="weather", tool_kwargs={"city": "Paris"})
            ],
        ),
        ChatMessage(role="tool", content="sunny", additional_kwargs={"tool_call_id": "c1"}),
    ]
    result = ComposoToolUseEvaluator(client=client).evaluate(
        messages=history, response="It is sunny in Paris."
    )
    assert result.score is not None
    assert result.feedback.count("\n") == len(criteria.TOOL_USE) - 1  # one line per criterion
    assert {b["evaluation_criteria"] for b in reward_bodies(live)} == set(criteria.TOOL_USE)


def test_several_criteria_average_the_applicable_scores(client: Composo) -> None:
    from llama_index.evaluation.composo import ComposoEvaluator

    both = ComposoEvaluator([criteria.rag_relevance, criteria.tool_selection], client=client)
    one = ComposoEvaluator(criteria.rag_relevance, client=client)
    r_both = both.evaluate(query=QUESTION, response=ANSWER)
    r_one = one.evaluate(query=QUESTION, response=ANSWER)
    assert r_both.score == r_one.score  # the tool criterion does not apply and is left out
    assert "not applicable" in r_both.feedback


def test_server_down_gives_an_invalid_result_not_a_crash() -> None:
    from llama_index.evaluation.composo import ComposoRelevancyEvaluator

    evaluator = ComposoRelevancyEvaluator(
        api_key="k", base_url=f"http://127.0.0.1:{free_port()}", timeout=5
    )
    result = evaluator.evaluate(query=QUESTION, response=ANSWER)
    assert result.invalid_result is True
    assert "APIConnectionError" in result.invalid_reason
    assert result.score is None and result.passing is None
    assert result.query == QUESTION

    strict = ComposoRelevancyEvaluator(
        api_key="k", base_url=f"http://127.0.0.1:{free_port()}", timeout=5, raise_on_error=True
    )
    with pytest.raises(APIConnectionError):
        strict.evaluate(query=QUESTION, response=ANSWER)


async def test_wrong_api_key_gives_an_invalid_result(live) -> None:
    from llama_index.evaluation.composo import ComposoRelevancyEvaluator

    evaluator = ComposoRelevancyEvaluator(api_key="not-the-key", base_url=live.base_url)
    result = await evaluator.aevaluate(query=QUESTION, response=ANSWER)
    assert result.invalid_result is True
    assert "AuthenticationError" in result.invalid_reason
    assert "not-the-key" not in result.invalid_reason
    with pytest.raises(AuthenticationError):
        await ComposoRelevancyEvaluator(
            api_key="not-the-key", base_url=live.base_url, raise_on_error=True
        ).aevaluate(query=QUESTION, response=ANSWER)
    await evaluator.aclose()


def test_bad_input_is_refused_before_any_request(client: Composo, live) -> None:
    from llama_index.evaluation.composo import ComposoEvaluator

    with pytest.raises(ComposoValidationError, match="criteria"):
        ComposoEvaluator("Good answers please", client=client)
    with pytest.raises(ComposoValidationError, match="threshold"):
        ComposoEvaluator(criteria.rag_relevance, client=client, threshold=2)
    evaluator = ComposoEvaluator(criteria.rag_relevance, client=client)
    with pytest.raises(ComposoValidationError, match="response"):
        evaluator.evaluate(query=QUESTION)
    with pytest.raises(ComposoValidationError, match="query"):
        evaluator.evaluate(response=ANSWER)
    with pytest.raises(ComposoValidationError, match="contexts"):
        evaluator.evaluate(query=QUESTION, response=ANSWER, contexts="one long string")
    with pytest.raises(ComposoValidationError, match="reference"):
        evaluator.evaluate(query=QUESTION, response=ANSWER, reference="330 m")
    assert live.requests() == []


def test_options_are_the_clients_and_settings_go_to_the_client_made_here(
    client: Composo, live
) -> None:
    from llama_index.evaluation.composo import ComposoEvaluator

    with pytest.raises(TypeError, match="unexpected keyword argument 'tagz'"):
        ComposoEvaluator(criteria.rag_relevance, client=client, tagz={"a": "b"})
    with pytest.raises(ComposoValidationError, match="data_retention"):
        ComposoEvaluator(criteria.rag_relevance, client=client, data_retention="forever")
    with pytest.raises(ComposoValidationError, match="timeout: set it on the client"):
        ComposoEvaluator(criteria.rag_relevance, client=client, timeout=5)
    evaluator = ComposoEvaluator(
        criteria.rag_relevance, client=client, evaluate_latest=True, tags={"suite": "rag"}
    )
    assert evaluator.evaluate(query=QUESTION, response=ANSWER).score is not None
    [body] = reward_bodies(live)
    assert body["evaluate_latest"] is True and body["tags"] == {"suite": "rag"}


async def test_aevaluate_with_a_blocking_client_uses_that_client(live) -> None:
    """Its calls go through the client as given (its own httpx client here), off the loop."""
    from llama_index.evaluation.composo import ComposoRelevancyEvaluator

    threads: list[int] = []
    http = httpx.Client(event_hooks={"request": [lambda r: threads.append(threading.get_ident())]})
    with Composo(api_key=live.api_key, base_url=live.base_url, http_client=http) as given:
        result = await ComposoRelevancyEvaluator(client=given).aevaluate(
            query=QUESTION, response=ANSWER
        )
    http.close()
    assert result.score is not None
    assert len(threads) == 1 and threads[0] != threading.get_ident()


def test_missing_api_key_fails_when_the_evaluator_is_made(monkeypatch) -> None:
    from llama_index.evaluation.composo import ComposoFaithfulnessEvaluator

    monkeypatch.delenv("COMPOSO_API_KEY", raising=False)
    with pytest.raises(ComposoValidationError, match="COMPOSO_API_KEY"):
        ComposoFaithfulnessEvaluator()


def test_batch_eval_runner_with_several_workers_and_progress(live, query_engine) -> None:
    from llama_index.core.evaluation import BatchEvalRunner
    from llama_index.evaluation.composo import (
        ComposoFaithfulnessEvaluator,
        ComposoRelevancyEvaluator,
    )

    evaluators = {
        "faithfulness": ComposoFaithfulnessEvaluator(api_key=live.api_key, base_url=live.base_url),
        "relevancy": ComposoRelevancyEvaluator(api_key=live.api_key, base_url=live.base_url),
    }
    runner = BatchEvalRunner(evaluators, workers=4, show_progress=True)
    queries = [
        QUESTION,
        "How many people did the Colosseum hold?",
        "What is Big Ben?",
        "Is the Sagrada Familia finished?",
    ]
    results = runner.evaluate_queries(query_engine, queries=queries)

    assert set(results) == {"faithfulness", "relevancy"}
    for name, rows in results.items():
        assert [r.query for r in rows] == queries
        assert all(r.score is not None and not r.invalid_result for r in rows), name
        assert all(r.contexts for r in rows)
    assert len(reward_bodies(live)) == 2 * len(queries)

    # the same evaluators again, on strings, in a second event loop
    again = runner.evaluate_response_strs(
        queries=queries[:2], response_strs=[ANSWER, "About 50,000."], contexts_list=[CONTEXTS, None]
    )
    assert all(not r.invalid_result for rows in again.values() for r in rows)


def test_batch_keeps_going_when_the_server_fails(live) -> None:
    from llama_index.core.evaluation import BatchEvalRunner
    from llama_index.evaluation.composo import ComposoRelevancyEvaluator

    live.fault({"status": 401, "detail": "bad key"}, {"status": 401, "detail": "bad key"})
    runner = BatchEvalRunner(
        {"relevancy": ComposoRelevancyEvaluator(api_key=live.api_key, base_url=live.base_url)},
        workers=2,
    )
    rows = runner.evaluate_response_strs(queries=[QUESTION] * 4, response_strs=[ANSWER] * 4)[
        "relevancy"
    ]
    assert sum(r.invalid_result for r in rows) == 2
    assert sum(r.score is not None for r in rows) == 2


def test_goal_pursuit_evaluates_a_trace(client: Composo, live) -> None:
    from llama_index.evaluation.composo import ComposoGoalPursuitEvaluator

    from composo import trace_from_messages

    run = trace_from_messages(
        [
            {"role": "user", "content": "Book a table for two in Paris tonight"},
            {"role": "assistant", "content": "Booked a table for two in Paris at 8pm tonight."},
        ],
        name="booker",
    )
    result = ComposoGoalPursuitEvaluator(client=client).evaluate(trace=run)
    assert result.score is not None and not result.invalid_result
    [req] = live.requests()
    assert req["path"].endswith("/evals/trace")
    assert req["body"]["evaluation_criteria"] == criteria.agent_goal_pursuit


async def test_evaluate_response_takes_a_workflow_agent_output(client: Composo, live) -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.evaluation.composo import ComposoRelevancyEvaluator

    def reply(messages: list[ChatMessage], **kwargs: object) -> ChatMessage:
        return ChatMessage(role="assistant", content="The Eiffel Tower is 330 metres tall.")

    agent = FunctionAgent(name="guide", llm=MockFunctionCallingLLM(response_generator=reply))
    output = await agent.run(QUESTION)
    result = await ComposoRelevancyEvaluator(client=client).aevaluate_response(
        query=QUESTION, response=output
    )
    assert result.response == "The Eiffel Tower is 330 metres tall."
    assert result.score is not None
    [body] = reward_bodies(live)
    assert body["messages"] == [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "The Eiffel Tower is 330 metres tall."},
    ]
    with pytest.raises(ComposoValidationError, match="response"):
        ComposoRelevancyEvaluator(client=client).evaluate_response(query=QUESTION, response=42)


def test_contexts_go_just_before_the_answer_of_a_chat_history(client: Composo, live) -> None:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.evaluation.composo import (
        ComposoFaithfulnessEvaluator,
        ComposoGoalPursuitEvaluator,
    )

    history = [
        ChatMessage(role="user", content=QUESTION),
        ChatMessage(role="assistant", content=ANSWER),
    ]
    ComposoFaithfulnessEvaluator(client=client).evaluate(messages=history, contexts=CONTEXTS)
    [body] = reward_bodies(live)
    assert [m["role"] for m in body["messages"]] == ["user", "system", "assistant"]
    assert CONTEXTS[0] in body["messages"][1]["content"]

    with pytest.raises(ComposoValidationError, match="trace"):
        ComposoGoalPursuitEvaluator(client=client).evaluate(query=QUESTION, trace={"x": 1})


async def test_async_evaluations_keep_the_clients_requests_in_flight_not_one_thread_each() -> None:
    """An evaluator that made its own client awaits it: twelve ``aevaluate`` calls are all in
    flight at once, however few threads the event loop's default executor has."""
    from concurrent.futures import ThreadPoolExecutor

    from llama_index.evaluation.composo import ComposoEvaluator

    from tests.support.echo import Echo

    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(2))
    with Echo(latency=1.0) as srv:
        evaluator = ComposoEvaluator(
            "Reward accurate answers", api_key="k", base_url=srv.url, max_concurrent_requests=12
        )
        try:
            results = await asyncio.gather(
                *(evaluator.aevaluate(query=QUESTION, response=f"a{i}") for i in range(12))
            )
        finally:
            await evaluator.aclose()
        arrived = [a.at for a in srv.arrivals]
    assert [r.score for r in results] == [1.0] * 12
    assert len(arrived) == 12
    assert max(arrived) - min(arrived) < 0.9  # all twelve came before the first answer (1 s)
