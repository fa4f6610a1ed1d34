"""Code written for the platform's own SDK (``composo`` 0.4.0) runs unchanged: its documented
programs, import paths, positional calls, return shapes, errors and result helpers, each driven
as its users write them against the local server. The criteria texts below are the platform's
published ones, copied as the interface constants they are."""

from __future__ import annotations

import builtins
from typing import Any

import pytest

from tests.support.servers import ServerProcess

QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]
CRITERION = "Reward accurate and informative responses"

# The platform SDK's criteria library, word for word.
PUBLISHED = {
    "rag_faithfulness": "Reward responses that make only claims directly supported by the "
    "provided source material without any hallucination or speculation",
    "rag_completeness": "Reward responses that comprehensively include all relevant information "
    "from the source material needed to fully answer the question",
    "rag_precision": "Reward responses that include only information necessary to answer the "
    "question without extraneous details from the source material",
    "rag_relevance": "Reward responses where all content directly addresses and is relevant to "
    "answering the user's specific question",
    "agent_exploration": "Reward agents that plan effectively: exploring new information and "
    "capabilities, and investigating unknowns despite uncertainty",
    "agent_exploitation": "Reward agents that plan effectively: exploiting existing knowledge and "
    "available context to create reliable plans with predictable outcomes",
    "agent_tool_use": "Reward agents that operate tools correctly in accordance with the tool "
    "definition, using all relevant context available in tool calls",
    "agent_goal_pursuit": "Reward agents that work towards the goal specified by the user",
    "agent_faithfulness": "Reward agents that only make claims that are directly supported by "
    "given source material or returns from tool calls without any hallucination or speculation",
}
PUBLISHED_RAG = ["rag_faithfulness", "rag_completeness", "rag_precision", "rag_relevance"]
PUBLISHED_AGENT = [
    "agent_exploration",
    "agent_exploitation",
    "agent_tool_use",
    "agent_goal_pursuit",
    "agent_faithfulness",
]


def bodies(live: ServerProcess) -> list[dict[str, Any]]:
    return [r["body"] for r in live.requests() if r["path"].startswith("/api/v1/evals/")]


def two_agent_trace() -> Any:
    """A trace built as the platform SDK's users build one, with its model names."""
    from composo.models.api_types import (
        AgentInstance,
        LLMInput,
        LLMInteraction,
        LLMOutput,
        LLMToolCall,
        LLMToolDefinition,
        MultiAgentTrace,
    )

    search = LLMToolDefinition(name="search", description="Search the web", parameters="{}")
    planner = AgentInstance(
        id="planner-1",
        name="planner",
        interactions=[
            LLMInteraction(
                input_messages=[LLMInput(role="user", content="Find the capital of France")],
                output_messages=[LLMOutput(type="text", content="I will ask the researcher.")],
            ),
            "researcher-1",
        ],
    )
    researcher = AgentInstance(
        id="researcher-1",
        name="researcher",
        interactions=[
            LLMInteraction(
                input_messages=[LLMInput(role="user", content="Capital of France?")],
                output_messages=[
                    LLMOutput(
                        type="tool_call",
                        content=LLMToolCall(id="c1", name="search", parameters='{"q": "x"}'),
                    ),
                    LLMOutput(type="text", content="The capital of France is Paris."),
                ],
                tools_available=[search],
            )
        ],
    )
    return MultiAgentTrace(
        root_agent_instance_id="planner-1",
        agent_instance_by_id={"planner-1": planner, "researcher-1": researcher},
    )


# -- the README's quick start and the reference's examples --------------------------------------


def test_the_quick_start_runs_as_written(composo_env: ServerProcess) -> None:
    from composo import Composo

    composo_client = Composo()
    result = composo_client.evaluate(
        messages=[
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hello! How can I help you today?"},
        ],
        criteria="Reward responses that are friendly",
    )
    assert 0.0 <= result.score <= 1.0
    assert result.explanation


def test_several_criteria_then_a_context_manager(composo_env: ServerProcess) -> None:
    from composo import Composo

    with Composo() as client:
        results = client.evaluate(
            messages=QA, criteria=[CRITERION, "Penalize overly technical jargon"]
        )
        assert [type(r).__name__ for r in results] == ["EvaluationResponse"] * 2
        response = client.evaluate(messages=QA, criteria=CRITERION, block=False)
        assert isinstance(response["task_id"], str)


# -- a list of one gives one result -------------------------------------------------------------


@pytest.mark.parametrize("block", [True, False])
def test_a_one_item_list_gives_one_result(composo_env: ServerProcess, block: bool) -> None:
    from composo import Composo
    from composo.models import EvaluationResponse
    from composo.models.api_types import MultiAgentTraceResponse

    client = Composo()
    result = client.evaluate(messages=QA, criteria=[CRITERION], block=block)
    named = client.evaluate(messages=QA, evaluator_name=["rag_faithfulness"], block=block)
    verdict = client.evaluate_trace(two_agent_trace(), criteria=[CRITERION], block=block)
    if block:
        assert isinstance(result, EvaluationResponse) and result.score is not None
        assert isinstance(named, EvaluationResponse)
        assert isinstance(verdict, MultiAgentTraceResponse)
    else:
        assert all("task_id" in r for r in (result, named, verdict))
    assert len(bodies(composo_env)) == 3


@pytest.mark.parametrize("block", [True, False])
async def test_a_one_item_list_gives_one_result_when_awaited(
    composo_env: ServerProcess, block: bool
) -> None:
    from composo import AsyncComposo
    from composo.models import EvaluationResponse
    from composo.models.api_types import MultiAgentTraceResponse

    async with AsyncComposo() as client:
        result = await client.evaluate(messages=QA, criteria=[CRITERION], block=block)
        verdict = await client.evaluate_trace(
            two_agent_trace(), evaluator_name=["agent_goal_pursuit"], block=block
        )
    if block:
        assert isinstance(result, EvaluationResponse) and result.score is not None
        assert isinstance(verdict, MultiAgentTraceResponse)
    else:
        assert "task_id" in result and "task_id" in verdict


# -- positional calls in the platform SDK's order -----------------------------------------------


def test_evaluate_takes_the_platform_sdk_positional_order(composo_env: ServerProcess) -> None:
    from composo import Composo

    client = Composo()
    # messages, input, system, tools, result, criteria, block, tags, evaluate_latest,
    # evaluator_name, explanation_cleaning, data_retention
    result = client.evaluate(
        QA[:1],
        None,
        "Answer in one sentence.",
        None,
        QA[1],
        CRITERION,
        True,
        {"env": "ci"},
        True,
        None,
        "end_user",
        "none",
    )
    assert result.score is not None and result.cleaned_explanation
    (body,) = bodies(composo_env)
    assert body["messages"] == QA and body["system"] == "Answer in one sentence."
    assert body["evaluation_criteria"] == CRITERION and body["tags"] == {"env": "ci"}
    assert body["evaluate_latest"] is True and body["data_retention"] == "none"


def test_evaluate_trace_takes_the_platform_sdk_positional_order(
    composo_env: ServerProcess,
) -> None:
    from composo import Composo

    client = Composo()
    # trace, criteria, model_core, block, tags, evaluate_latest, evaluator_name, data_retention
    task = client.evaluate_trace(
        two_agent_trace(), CRITERION, "align-20250529", False, {"k": "v"}, False, None, "none"
    )
    assert isinstance(task["task_id"], str)
    (body,) = bodies(composo_env)
    assert body["model_core"] == "align-20250529" and body["tags"] == {"k": "v"}
    assert body["evaluate_latest"] is False and body["data_retention"] == "none"


# -- import paths -------------------------------------------------------------------------------


def test_the_platform_sdk_import_paths_give_our_classes() -> None:
    import composo
    import composo.types
    from composo.client import AsyncComposo, Composo
    from composo.models import EvaluationResponse, RequestBase, RewardRequest, ScoreResponse
    from composo.models.api_types import MultiAgentTrace, MultiAgentTraceResponse

    assert Composo is composo.Composo and AsyncComposo is composo.AsyncComposo
    assert EvaluationResponse is composo.types.EvaluationResponse
    assert RewardRequest is composo.types.RewardRequest
    assert issubclass(RewardRequest, RequestBase)
    assert issubclass(composo.types.TraceRequest, RequestBase)
    assert MultiAgentTrace is composo.MultiAgentTrace
    assert MultiAgentTraceResponse is composo.MultiAgentTraceResponse
    assert ScoreResponse(score=0.5, explanation="ok").score == 0.5
    # What the platform SDK's ``composo`` exports (its tracing names belong to composo.tracing).
    exported = {
        "Composo",
        "AsyncComposo",
        "ComposoError",
        "RateLimitError",
        "MalformedError",
        "APIError",
        "AuthenticationError",
        "BadRequestError",
        "criteria",
        "ComposoTracer",
        "Instruments",
        "AgentTracer",
        "agent_tracer",
        "__version__",
    }
    assert exported <= set(composo.__all__)


def test_the_builtin_timeout_error_is_not_shadowed() -> None:
    import composo
    import composo.exceptions

    namespace: dict[str, Any] = {}
    exec("from composo import *", namespace)
    assert "TimeoutError" not in namespace and not hasattr(composo, "TimeoutError")
    assert composo.exceptions.TimeoutError is not builtins.TimeoutError
    assert not issubclass(composo.exceptions.TimeoutError, builtins.TimeoutError)


# -- the criteria library -----------------------------------------------------------------------


def test_the_criteria_are_the_published_texts() -> None:
    from composo import criteria
    from composo.models import criteria as models_criteria

    for library in (criteria, models_criteria):
        assert {name: getattr(library, name) for name in PUBLISHED} == PUBLISHED
        assert library.rag == [PUBLISHED[n] for n in PUBLISHED_RAG]
        assert library.agent == [PUBLISHED[n] for n in PUBLISHED_AGENT]
    # Our groups hold the published texts too, and our own criteria beside them.
    assert criteria.rag == criteria.RAG and criteria.RAG is not criteria.rag
    assert criteria.AGENT[: len(criteria.agent)] == criteria.agent
    assert set(criteria.rag + criteria.agent) <= set(criteria.ALL)


def test_the_published_criteria_evaluate(composo_env: ServerProcess) -> None:
    from composo import Composo, criteria

    results = Composo().evaluate(messages=QA, criteria=criteria.rag)
    assert [r.criterion for r in results] == criteria.rag
    verdicts = Composo().evaluate_trace(two_agent_trace(), criteria=criteria.agent)
    assert [v.criterion for v in verdicts] == criteria.agent


# -- errors -------------------------------------------------------------------------------------


def test_errors_are_built_positionally_and_read_as_there() -> None:
    from composo.exceptions import ComposoError, RateLimitError

    error = RateLimitError("slow down", 429, '{"detail": "slow down"}')
    assert isinstance(error, ComposoError)
    assert (error.message, error.status_code, error.response_body) == (
        "slow down",
        429,
        '{"detail": "slow down"}',
    )
    assert ComposoError("plain").status_code is None
    with pytest.raises(ComposoError, match="slow down"):
        raise error


@pytest.mark.parametrize(
    ("status", "name"),
    [
        (400, "BadRequestError"),
        (401, "AuthenticationError"),
        (408, "TimeoutError"),
        (422, "MalformedError"),
        (429, "RateLimitError"),
        (500, "APIError"),
    ],
)
def test_get_exception_for_status_code_maps_as_there(status: int, name: str) -> None:
    import composo.exceptions as exceptions

    error = exceptions.get_exception_for_status_code(status, "refused", "the body")
    assert isinstance(error, getattr(exceptions, name))
    assert (error.message, error.status_code, error.response_body) == (
        "refused",
        status,
        "the body",
    )


def test_a_status_of_no_family_is_still_a_composo_error() -> None:
    from composo.exceptions import ComposoError, get_exception_for_status_code

    error = get_exception_for_status_code(418)
    assert isinstance(error, ComposoError) and error.status_code == 418


def test_a_408_answer_is_caught_as_the_platform_sdks_timeout_error(live: ServerProcess) -> None:
    from composo import Composo
    from composo.exceptions import TimeoutError

    live.fault({"status": 408, "detail": "too slow"}, {"status": 408, "detail": "too slow"})
    client = Composo(api_key=live.api_key, base_url=live.base_url, num_retries=1)
    with pytest.raises(TimeoutError) as info:
        client.evaluate(messages=QA, criteria=CRITERION)
    assert info.value.status_code == 408 and "too slow" in info.value.message
    assert len(bodies(live)) == 2  # retried once, as 408 may pass


def test_server_refusals_are_caught_by_the_platform_sdk_names(live: ServerProcess) -> None:
    from composo import AuthenticationError, Composo, RateLimitError

    with pytest.raises(AuthenticationError):
        Composo(api_key="not-the-key", base_url=live.base_url).evaluate(
            messages=QA, criteria=CRITERION
        )
    live.fault({"status": 429}, {"status": 429})
    with pytest.raises(RateLimitError):
        Composo(api_key=live.api_key, base_url=live.base_url).evaluate(
            messages=QA, criteria=CRITERION
        )


# -- result helpers -----------------------------------------------------------------------------


def test_from_dict_reads_a_response() -> None:
    from composo.models import EvaluationResponse

    response = EvaluationResponse.from_dict({"score": 0.8, "explanation": "Accurate."})
    assert (response.score, response.explanation) == (0.8, "Accurate.")


def test_get_rounded_rounds_every_instance_and_leaves_the_result_unchanged(
    composo_env: ServerProcess,
) -> None:
    from composo import Composo

    verdict = Composo().evaluate_trace(two_agent_trace(), criteria=CRITERION)
    before = verdict.model_dump()
    rounded = verdict.get_rounded()
    scores = {
        instance: result.score
        for agent in rounded.results_by_agent_name.values()
        for instance, result in agent.results_by_agent_instance_id.items()
        if result is not None
    }
    assert scores and set(scores.values()) <= {0.0, 1.0}
    for instance, score in scores.items():
        assert score == (1.0 if verdict.agent_scores[instance] >= 0.5 else 0.0)
    assert rounded.agent_scores == scores
    assert verdict.model_dump() == before  # the result held is not changed


def test_one_instance_result_rounds_at_one_half() -> None:
    from composo.models import ScoreResponse

    assert ScoreResponse(score=0.5, explanation="x").get_rounded().score == 1.0
    low = ScoreResponse(score=0.49, explanation="x")
    assert low.get_rounded().score == 0.0 and low.score == 0.49
    assert ScoreResponse(score=None, explanation="n/a").get_rounded().score is None


def test_an_agent_instance_from_a_chat_session_evaluates(composo_env: ServerProcess) -> None:
    from composo import Composo
    from composo.models.api_types import AgentInstance, MultiAgentTrace

    session = {"system": "Be brief.", "messages": QA}
    instance = AgentInstance.from_chat_session(session)
    assert (instance.id, instance.name, len(instance.interactions)) == (
        "agent_instance_0",
        "default_agent",
        1,
    )
    trace = MultiAgentTrace(
        root_agent_instance_id=instance.id, agent_instance_by_id={instance.id: instance}
    )
    assert Composo().evaluate_trace(trace, criteria=CRITERION).overall_score is not None
    assert session == {"system": "Be brief.", "messages": QA}  # not changed
