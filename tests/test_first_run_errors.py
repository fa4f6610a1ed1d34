"""The mistakes of a first run get errors that name the fix: refused before any request where
the input alone shows the mistake, and explained where only the server can tell."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import composo
from composo import (
    APIConnectionError,
    AsyncComposo,
    AuthenticationError,
    Composo,
    ComposoValidationError,
    NotFoundError,
)
from composo.errors import UnknownArgumentError
from tests.support.servers import ServerProcess, free_port

QA = [
    {"role": "user", "content": "What is the refund window?"},
    {"role": "assistant", "content": "Thirty days from delivery."},
]
CRITERION = "Reward answers that state the refund window"


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (
            {"messages": QA, "criteria": "rag_faithfulness"},
            "pass composo.criteria.rag_faithfulness",
        ),
        ({"messages": "What is the refund window?", "criteria": CRITERION}, "got a string"),
        (
            {
                "messages": [{"role": "user", "text": "Hi"}, QA[1]],
                "criteria": CRITERION,
            },
            "messages[0]: has neither 'content' nor 'tool_calls' (its keys: 'role', 'text')",
        ),
        (
            {"messages": [QA[0], {"role": "user", "content": "Anyone?"}], "criteria": CRITERION},
            "nothing to judge",
        ),
    ],
    ids=["criterion name", "a string", "misspelled content", "no answer"],
)
def test_refused_before_any_request(live: ServerProcess, call: dict[str, Any], says: str) -> None:
    with (
        Composo(api_key=live.api_key, base_url=live.base_url) as c,
        pytest.raises(ComposoValidationError) as info,
    ):
        c.evaluate(**call)
    assert says in str(info.value)
    assert len(str(info.value)) < 250  # short enough to read at a glance
    assert live.requests() == []


def test_the_ready_made_criterion_itself_is_accepted(live: ServerProcess) -> None:
    with Composo(api_key=live.api_key, base_url=live.base_url) as c:
        result = c.evaluate(messages=QA, criteria=composo.criteria.rag_faithfulness)
    # Judged, not refused: with no source material to check against it does not apply.
    assert result.criterion == composo.criteria.rag_faithfulness
    assert result.score is None and "source material" in result.explanation


def test_an_answer_given_as_result_is_something_to_judge(live: ServerProcess) -> None:
    with Composo(api_key=live.api_key, base_url=live.base_url) as c:
        result = c.evaluate(messages=QA[:1], result=QA[1], criteria=CRITERION)
    assert result.score is not None


def test_a_base_url_holding_the_api_path_gets_the_url_and_the_fix(live: ServerProcess) -> None:
    with (
        Composo(api_key=live.api_key, base_url=live.base_url + "/api/v1") as c,
        pytest.raises(NotFoundError) as info,
    ):
        c.evaluate(messages=QA, criteria=CRITERION)
    text = str(info.value)
    assert f"POST {live.base_url}/api/v1/api/v1/evals/reward" in text
    assert f"use {live.base_url}" in text


def test_an_unknown_task_names_the_url_without_a_base_url_hint(live: ServerProcess) -> None:
    with (
        Composo(api_key=live.api_key, base_url=live.base_url) as c,
        pytest.raises(NotFoundError) as info,
    ):
        c.get_task("no-such-task")
    assert f"GET {live.base_url}/api/v1/evals/tasks/no-such-task" in str(info.value)
    assert "base_url ends" not in str(info.value)


def test_a_wrong_key_says_where_it_came_from_and_never_shows_it(
    live: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "wrong-key-0123456789"
    with (
        Composo(api_key=wrong, base_url=live.base_url) as c,
        pytest.raises(AuthenticationError) as info,
    ):
        c.evaluate(messages=QA, criteria=CRITERION)
    assert "the api_key argument" in str(info.value) and wrong not in str(info.value)
    monkeypatch.setenv("COMPOSO_API_KEY", wrong)
    with Composo(base_url=live.base_url) as c, pytest.raises(AuthenticationError) as info:
        c.evaluate(messages=QA, criteria=CRITERION)
    assert "COMPOSO_API_KEY" in str(info.value) and wrong not in str(info.value)


ROOT = Path(__file__).resolve().parents[1]


def test_messages_given_as_tuples_name_the_item_and_an_existing_doc_section(
    live: ServerProcess,
) -> None:
    with (
        Composo(api_key=live.api_key, base_url=live.base_url) as c,
        pytest.raises(ComposoValidationError) as info,
    ):
        c.evaluate(messages=[QA[0], ("assistant", "Thirty days.")], criteria=CRITERION)
    text = str(info.value)
    assert text.startswith("messages[1]: cannot use a tuple as a message; a message is a dict")
    page, section = re.search(r"\((docs/[\w/]+\.md), '([^']+)'\)", text).groups()  # type: ignore[union-attr]
    assert f"## {section}\n" in (ROOT / page).read_text(encoding="utf-8")
    assert live.requests() == []


@pytest.mark.parametrize("method", ["evaluate", "evaluate_trace"])
async def test_a_misspelled_keyword_gets_the_arguments_and_a_suggestion(
    live: ServerProcess, method: str
) -> None:
    first = QA if method == "evaluate" else {"root_agent_instance_id": "a"}
    with (
        Composo(api_key=live.api_key, base_url=live.base_url) as c,
        pytest.raises(UnknownArgumentError) as info,
    ):
        getattr(c, method)(first, criterion=CRITERION)
    async with AsyncComposo(api_key=live.api_key, base_url=live.base_url) as ac:
        with pytest.raises(UnknownArgumentError) as ainfo:
            await getattr(ac, method)(first, criterion=CRITERION)
    for error in (info.value, ainfo.value):
        # a ComposoValidationError, and a TypeError as Python's own refusal is
        assert isinstance(error, ComposoValidationError) and isinstance(error, TypeError)
        text = str(error)
        assert text.startswith(f"{method}() got an unexpected keyword argument 'criterion'")
        assert "(did you mean 'criteria'?)" in text and "evaluator_name" in text
    assert live.requests() == []


def test_https_to_the_plain_http_server_says_to_use_http(live: ServerProcess) -> None:
    tls_url = live.base_url.replace("http://", "https://")
    with (
        Composo(api_key=live.api_key, base_url=tls_url, num_retries=1) as c,
        pytest.raises(APIConnectionError) as info,
    ):
        c.evaluate(messages=QA, criteria=CRITERION)
    assert f"the server speaks plain http? use {live.base_url}" in str(info.value)
    assert live.requests() == []  # a TLS greeting is no request


def test_nothing_listening_on_this_machine_suggests_starting_the_server() -> None:
    port = free_port()
    with (
        Composo(api_key="any-key", base_url=f"http://127.0.0.1:{port}", num_retries=1) as c,
        pytest.raises(APIConnectionError) as info,
    ):
        c.evaluate(messages=QA, criteria=CRITERION)
    assert f"start a local server with `composo serve --port {port}`" in str(info.value)
