"""Bad input is refused before any network call, with an error naming the field and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from composo import AsyncComposo, Composo, ComposoError, ComposoValidationError, criteria
from tests.support.servers import free_port

QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]


@pytest.fixture(scope="module")
def offline() -> Composo:
    # Nothing listens here: any network attempt would raise a connection error instead.
    return Composo(api_key="k", base_url=f"http://127.0.0.1:{free_port()}")


CASES: list[tuple[dict[str, Any], str]] = [
    ({"messages": QA, "criteria": "Be nice"}, r"criteria: 'Be nice' must begin with 'Reward'"),
    ({"messages": QA, "criteria": "   "}, r"criteria: a criterion cannot be blank"),
    (
        {"messages": QA, "criteria": "Reward " + "x" * 5000},
        r"criteria: a criterion is at most 4096",
    ),
    ({"messages": QA, "criteria": ["Reward a", "nope"]}, r"criteria\[1\]"),
    ({"messages": QA, "criteria": []}, r"criteria: expected a string or a non-empty list"),
    ({"messages": QA}, r"exactly one of criteria="),
    ({"messages": QA, "criteria": "Reward a", "evaluator_name": "x"}, r"exactly one of criteria="),
    ({"criteria": "Reward a"}, r"messages: give exactly one of messages= .* or input="),
    ({"messages": QA, "input": "hi", "criteria": "Reward a"}, r"exactly one of messages="),
    (
        {"messages": [{"role": "robot", "content": "x"}, QA[1]], "criteria": "Reward a"},
        r"messages\[0\]\.role is 'robot'; use one of",
    ),
    ({"messages": QA[:1], "criteria": "Reward a"}, r"messages: the conversation has 1 message"),
    (
        {"messages": [], "result": "hi", "criteria": "Reward a"},
        r"1 message\(s\) after appending result",
    ),
    (
        {"messages": QA, "criteria": "Reward a", "tags": {"a": {"b": 1}}},
        r"tags\['a'\]: values must be",
    ),
    ({"messages": QA, "criteria": "Reward a", "tags": ["env"]}, r"tags: expected a dict"),
    ({"messages": QA, "criteria": "Reward a", "tags": {"k": "v" * 65}}, r"at most 64 characters"),
    ({"messages": QA, "criteria": "Reward a", "tags": {"k" * 65: "v"}}, r"at most 64 characters"),
    (
        {"messages": QA, "criteria": "Reward a", "model_core": "gpt-5"},
        r"model_core: 'gpt-5' is not",
    ),
    (
        {"messages": QA, "criteria": "Reward a", "model_core": "align-lightning-20251127"},
        r"takes only binary criteria",
    ),
    (
        {
            "messages": QA,
            "criteria": "Passes if the answer is right",
            "model_core": "align-lightning-20250731",
            "evaluate_latest": False,
        },
        r"only evaluates the latest response",
    ),
    ({"messages": QA, "criteria": "Reward a", "data_retention": "forever"}, r"data_retention"),
    (
        {"messages": QA, "criteria": "Reward a", "explanation_cleaning": "yes"},
        r"explanation_cleaning",
    ),
    (
        {"messages": object(), "criteria": "Reward a"},
        r"messages: cannot use an object.*plugin",
    ),
    ({"messages": QA, "criteria": "Reward a", "result": 42}, r"result: cannot use an int"),
    ({"messages": QA, "criteria": "Reward a", "evaluator_name": None, "tools": "x"}, r"tools:"),
]


@pytest.mark.parametrize(("kwargs", "message"), CASES)
def test_bad_input_is_refused_before_the_network(
    offline: Composo, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ComposoValidationError, match=message) as info:
        offline.evaluate(**kwargs)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ComposoError)


@pytest.mark.parametrize(("kwargs", "message"), CASES[:6])
async def test_async_client_refuses_the_same(kwargs: dict[str, Any], message: str) -> None:
    async with AsyncComposo(api_key="k", base_url=f"http://127.0.0.1:{free_port()}") as c:
        with pytest.raises(ComposoValidationError, match=message):
            await c.evaluate(**kwargs)


TRACE_CASES: list[tuple[Any, dict[str, Any], str]] = [
    (None, {"criteria": "Reward a"}, r"trace: required"),
    (
        {
            "root_agent_instance_id": "a",
            "agent_instance_by_id": {"a": {"id": "a", "name": "x", "interactions": []}},
        },
        {"criteria": "Reward a"},
        r"no LLM interaction",
    ),
    (
        {"root_agent_instance_id": "z", "agent_instance_by_id": {}},
        {"criteria": "Reward a"},
        r"root_agent_instance_id 'z' is not a key",
    ),
    (
        {
            "root_agent_instance_id": "a",
            "agent_instance_by_id": {"a": {"id": "a", "name": "x", "interactions": ["ghost"]}},
        },
        {"criteria": "Reward a"},
        r"names sub-agent 'ghost'",
    ),
]


@pytest.mark.parametrize(("trace", "kwargs", "message"), TRACE_CASES)
def test_bad_traces_are_refused(
    offline: Composo, trace: Any, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ComposoValidationError, match=message):
        offline.evaluate_trace(trace, **kwargs)


def test_lightning_cores_refuse_traces(offline: Composo) -> None:
    from composo import trace_from_messages

    with pytest.raises(ComposoValidationError, match="cannot evaluate traces"):
        offline.evaluate_trace(
            trace_from_messages(QA),
            criteria="Passes if fine",
            model_core="align-lightning-20251127",
        )


def test_constructor_checks() -> None:
    with pytest.raises(ComposoValidationError, match="timeout"):
        Composo(api_key="k", timeout=0)
    with pytest.raises(ComposoValidationError, match="model_core"):
        Composo(api_key="k", model_core="fast")
    with pytest.raises(ComposoValidationError, match="max_concurrent_requests"):
        AsyncComposo(api_key="k", max_concurrent_requests=0)


@pytest.mark.parametrize(
    "url", ["127.0.0.1:8787", "localhost:8787", "http//example.org", "ftp://x"]
)
def test_base_url_without_http_scheme_is_refused_up_front(url: str) -> None:
    # Otherwise every call is retried with backoff and fails as a connection error.
    for cls in (Composo, AsyncComposo):
        with pytest.raises(ComposoValidationError, match=r"base_url: .*http\(s\) URL"):
            cls(api_key="k", base_url=url)


def test_base_url_from_the_environment_is_stripped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPOSO_BASE_URL", "http://127.0.0.1:8787/ \n")
    assert Composo(api_key="k").base_url == "http://127.0.0.1:8787"


@pytest.mark.parametrize("key", ["sk-secret\nvalue", "sk-secret\x00value", "sk-s\u00e9cret"])
def test_api_key_that_no_header_can_carry_is_refused_without_showing_it(key: str) -> None:
    # httpx would raise (and the client retry) an error quoting the header value, i.e. the key.
    with pytest.raises(ComposoValidationError, match="api_key") as info:
        Composo(api_key=key, base_url=f"http://127.0.0.1:{free_port()}")
    assert "secret" not in str(info.value) and "secret" not in repr(info.value)


def test_criteria_prefixes_are_case_insensitive_on_the_first_letter(offline: Composo) -> None:
    from composo._core.build import normalize_criteria

    ok, _ = normalize_criteria(["reward a", "penalize b", "passes if c", "fails if d"], None)
    assert len(ok) == 4
    with pytest.raises(ComposoValidationError):
        normalize_criteria("REWARD loud answers", None)


def test_numbers_and_booleans_in_tags_become_strings() -> None:
    from composo._core.build import normalize_tags

    assert normalize_tags({"n": 1, "ok": True, "x": 1.5}) == {"n": "1", "ok": "true", "x": "1.5"}


def test_every_library_criterion_is_valid() -> None:
    from composo._core.wire import check_criterion, is_binary

    assert criteria.ALL
    for c in criteria.ALL:
        assert check_criterion(c) == c
    assert all(is_binary(c) for c in criteria.BINARY)
    assert not any(is_binary(c) for c in criteria.RAG)
