"""The evaluate options, defined once and accepted the same way by every entry point."""

from __future__ import annotations

import inspect
import threading
import typing
from typing import Any

import pytest

from composo import AsyncComposo, Composo, ComposoValidationError
from composo.ext import BackgroundEvaluator, EvaluationRecord
from composo.types import EvaluateOptions
from tests.support.servers import ServerProcess, free_port

QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]
CRITERIA = ["Reward accurate answers", "Reward concise answers", "Penalize rambling"]


def bodies(live: ServerProcess) -> list[dict[str, Any]]:
    return [r["body"] for r in live.requests() if r["path"].startswith("/api/v1/evals/")]


def test_one_options_object_passes_through_every_method(
    live: ServerProcess, client: Composo
) -> None:
    options: EvaluateOptions = {"tags": {"run": "7"}, "data_retention": "none"}
    client.evaluate(messages=QA, criteria=CRITERIA[0], **options)
    client.evaluate_many([{"messages": QA}], CRITERIA[0], **options)
    list(client.evaluate_many_iter([{"messages": QA}], CRITERIA[0], **options))
    sent = bodies(live)
    assert len(sent) == 3
    assert all(b["tags"] == {"run": "7"} and b["data_retention"] == "none" for b in sent)


@pytest.mark.parametrize(
    ("method", "says"),
    [
        # evaluate and evaluate_trace name every option in their signatures: Python refuses it
        ("evaluate", r"evaluate\(\) got an unexpected keyword argument 'tagz'"),
        ("evaluate_trace", r"evaluate_trace\(\) got an unexpected keyword argument 'tagz'"),
        # the batch methods take **options, and list them
        ("evaluate_many", r"unexpected keyword argument 'tagz'.*tags"),
    ],
)
def test_a_misspelled_option_is_refused_like_a_keyword(method: str, says: str) -> None:
    client = Composo(api_key="k", base_url=f"http://127.0.0.1:{free_port()}")
    first: Any = [{"messages": QA}] if method == "evaluate_many" else QA
    with pytest.raises(TypeError, match=says):
        getattr(client, method)(first, criteria=CRITERIA[0], tagz={"a": "b"})


# The platform SDK's positional order, which code written for it may rely on.
PLATFORM_ORDER = {
    "evaluate": [
        "messages",
        "input",
        "system",
        "tools",
        "result",
        "criteria",
        "block",
        "tags",
        "evaluate_latest",
        "evaluator_name",
        "explanation_cleaning",
        "data_retention",
    ],
    "evaluate_trace": [
        "trace",
        "criteria",
        "model_core",
        "block",
        "tags",
        "evaluate_latest",
        "evaluator_name",
        "data_retention",
    ],
}


@pytest.mark.parametrize("cls", [Composo, AsyncComposo])
@pytest.mark.parametrize("method", sorted(PLATFORM_ORDER))
def test_evaluate_takes_the_platform_sdk_order_and_every_option_typed_once(
    cls: type[Composo | AsyncComposo], method: str
) -> None:
    function = getattr(cls, method)
    params = list(inspect.signature(function).parameters.values())[1:]  # after self
    positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert positional == PLATFORM_ORDER[method]
    assert all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)
    # Every option is a parameter, with the type EvaluateOptions gives it (its one definition).
    hints = typing.get_type_hints(function)
    option_types = typing.get_type_hints(EvaluateOptions)
    assert {name: hints[name] for name in option_types} == option_types
    assert all(inspect.signature(function).parameters[n].default is None for n in option_types)


def _public_methods(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}


def test_both_clients_methods_take_the_same_parameters() -> None:
    shared = _public_methods(Composo) & _public_methods(AsyncComposo)
    assert _public_methods(AsyncComposo) - shared == {"aclose"}  # close's async name
    assert _public_methods(Composo) - shared == set()
    for name in sorted(shared):
        sync, run_async = (inspect.signature(getattr(c, name)) for c in (Composo, AsyncComposo))
        shape = [
            [(p.name, p.kind, p.default) for p in s.parameters.values()] for s in (sync, run_async)
        ]
        assert shape[0] == shape[1], name
    # The methods code written for the platform SDK calls: annotations identical as well.
    for name in PLATFORM_ORDER:
        assert inspect.signature(getattr(Composo, name)) == inspect.signature(
            getattr(AsyncComposo, name)
        )


async def test_the_async_client_refuses_it_too() -> None:
    async with AsyncComposo(api_key="k", base_url=f"http://127.0.0.1:{free_port()}") as c:
        with pytest.raises(TypeError, match="model_cor"):
            await c.evaluate(messages=QA, criteria=CRITERIA[0], model_cor="align-20251111")


def test_an_item_carries_the_criteria_it_still_needs(client: Composo) -> None:
    items = [
        {"id": "all", "messages": QA},
        {"id": "two", "messages": QA, "criteria": [CRITERIA[2], CRITERIA[0]]},
        {"id": "none", "messages": QA, "criteria": []},
        {"id": "bad", "messages": QA, "criteria": ["Reward something else"]},
    ]
    results = client.evaluate_many(items, CRITERIA)
    got = [(r.id, r.criterion, r.ok) for r in results]
    assert got[:3] == [("all", c, True) for c in CRITERIA]
    assert got[3:5] == [("two", CRITERIA[0], True), ("two", CRITERIA[2], True)]
    bad = results[5:]
    assert [r.id for r in bad] == ["bad"] * 3 and not any(r.ok for r in bad)
    assert "not one of this run's criteria" in str(bad[0].error)
    assert items[1]["criteria"] == [CRITERIA[2], CRITERIA[0]]  # not mutated


def test_an_item_may_set_any_option_for_itself(live: ServerProcess, client: Composo) -> None:
    items = [
        {"messages": QA, "tags": {"item": "1"}, "data_retention": "none"},
        {"messages": QA, "evaluate_latest": True},
    ]
    results = client.evaluate_many(items, CRITERIA[0], tags={"run": "r"}, concurrency=1)
    assert all(r.ok for r in results)
    first, second = bodies(live)
    assert first["tags"] == {"run": "r", "item": "1"} and first["data_retention"] == "none"
    assert second["tags"] == {"run": "r"} and second["evaluate_latest"] is True


def test_batch_options_are_checked_before_any_item(client: Composo) -> None:
    with pytest.raises(ComposoValidationError, match="data_retention"):
        client.evaluate_many([{"messages": QA}], CRITERIA[0], data_retention="forever")  # type: ignore[typeddict-item]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_background_evaluation_uses_the_options(live: ServerProcess, kind: str) -> None:
    records: list[EvaluationRecord] = []
    seen = threading.Event()
    factory = Composo if kind == "sync" else AsyncComposo
    evaluator = BackgroundEvaluator(
        CRITERIA[:2],
        client=factory(api_key=live.api_key, base_url=live.base_url),
        on_result=records.append,
        options={"tags": {"via": "background"}, "model_core": "align-20250529"},
    )
    try:
        for i in range(6):
            assert evaluator.submit(f"run-{i}", "evaluate", lambda: {"messages": QA})
        evaluator.submit("broken", "evaluate", lambda: {"mesages": QA})

        def fails() -> dict[str, Any]:
            seen.set()
            raise RuntimeError("cannot convert")

        evaluator.submit("unpreparable", "evaluate", fails)
        assert evaluator.flush(timeout=30)
    finally:
        evaluator.close()
    assert seen.is_set()
    assert evaluator.stats == {"completed": 12, "failed": 4, "pending": 0}
    by_run = {(r.run_id, r.criterion): r for r in records}
    assert len(by_run) == 16
    assert by_run[("run-0", CRITERIA[1])].score is not None
    assert "mesages" in str(by_run[("broken", CRITERIA[0])].error)
    assert "cannot convert" in str(by_run[("unpreparable", CRITERIA[1])].error)
    sent = bodies(live)
    assert len(sent) == 12
    assert all(b["tags"] == {"via": "background"} for b in sent)
    assert all(b["model_core"] == "align-20250529" for b in sent)
