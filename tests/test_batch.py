"""evaluate_many / evaluate_many_iter on both clients, against the local server over HTTP."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import composo
from composo import AsyncComposo, Composo, ComposoValidationError
from composo._core.plan import BatchResult
from composo.errors import BadRequestError
from composo.plugins import get_plugin_manager
from tests.support.servers import ServerProcess

CRITERIA = [
    "Reward answers that explain the refund policy",
    "Passes if the answer mentions the return window",
]


def conversation(i: int) -> dict[str, Any]:
    """Items whose answers differ in length and wording, so the judge scores them differently."""
    answer = " ".join(["Returns are accepted within 30 days with a free label."] * (1 + i % 4))
    if i % 3 == 0:
        answer = "I am not sure, sorry."
    return {
        "id": f"conv-{i}",
        "messages": [
            {"role": "user", "content": f"Question {i}: what is the refund policy for returns?"},
            {"role": "assistant", "content": answer},
        ],
    }


def test_results_are_matched_to_item_and_criterion(client: Composo) -> None:
    items = [conversation(i) for i in range(12)]
    results = client.evaluate_many(items, CRITERIA, concurrency=4)

    assert [(r.index, r.criterion) for r in results] == [
        (i, c) for i in range(12) for c in CRITERIA
    ]
    for r in results:
        assert r.ok and r.id == f"conv-{r.index}"
        alone = client.evaluate(messages=items[r.index]["messages"], criteria=r.criterion)
        assert (r.score, r.explanation) == (alone.score, alone.explanation)
    assert len({r.score for r in results}) > 2  # the items really were told apart


async def test_async_results_are_matched_to_item_and_criterion(aclient: AsyncComposo) -> None:
    items = [conversation(i) for i in range(10)]
    results = await aclient.evaluate_many(items, CRITERIA, concurrency=5)

    assert [(r.index, r.criterion, r.id) for r in results] == [
        (i, c, f"conv-{i}") for i in range(10) for c in CRITERIA
    ]
    for r in results[::3]:
        alone = await aclient.evaluate(messages=items[r.index]["messages"], criteria=r.criterion)
        assert r.score == alone.score


def test_one_failure_is_recorded_and_the_rest_go_on(client: Composo, live: ServerProcess) -> None:
    live.fault({"status": 400, "detail": "refused on purpose"})  # the very first request
    items: list[Any] = [conversation(0), {"id": "broken", "result": "no question"}]
    items += [conversation(i) for i in range(2, 6)]
    items.insert(3, {"messages": conversation(3)["messages"], "mesages": []})

    results = client.evaluate_many(items, CRITERIA, concurrency=1)

    failed = [r for r in results if not r.ok]
    assert len(results) == len(items) * 2
    refused = [r for r in failed if isinstance(r.error, BadRequestError)]
    assert len(refused) == 1 and "refused on purpose" in str(refused[0].error)
    assert (refused[0].index, refused[0].criterion) == (0, CRITERIA[0])
    broken = [r for r in failed if r.index == 1]
    assert len(broken) == 2 and all(isinstance(r.error, ComposoValidationError) for r in broken)
    assert "messages" in str(broken[0].error) and broken[0].id == "broken"
    typo = [r for r in failed if r.index == 3]
    assert len(typo) == 2 and "'mesages'" in str(typo[0].error)
    assert len(failed) == 5
    assert all(r.score is not None or r.explanation for r in results if r.ok)
    row = refused[0].row()
    assert set(row) == {"index", "id", "criterion", "score", "explanation", "error", "metadata"}
    assert row["error"].startswith("BadRequestError:")


async def test_async_failure_is_isolated(aclient: AsyncComposo, live: ServerProcess) -> None:
    live.fault({"status": 422, "detail": "nope"})
    results = await aclient.evaluate_many(
        [conversation(i) for i in range(4)], CRITERIA[0], concurrency=1
    )
    assert [r.ok for r in results] == [False, True, True, True]


class Pulled:
    """A generator of conversations that counts how many were taken from it."""

    def __init__(self, limit: int | None = None) -> None:
        self.count = 0
        self.limit = limit

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in itertools.islice(itertools.count(), self.limit):
            self.count += 1
            yield conversation(i)


def test_items_are_read_lazily(live: ServerProcess) -> None:
    source = Pulled()  # endless: only laziness lets this finish
    with Composo(api_key=live.api_key, base_url=live.base_url, max_concurrent_requests=4) as c:
        stream = c.evaluate_many_iter(iter(source), CRITERIA)
        assert source.count == 0  # nothing is read before the first result is asked for
        first = list(itertools.islice(stream, 10))
        stream.close()  # type: ignore[attr-defined]
    assert len(first) == 10 and all(isinstance(r, BatchResult) and r.ok for r in first)
    # 10 results taken + at most 4 requests in flight, 2 criteria per item
    assert source.count <= (10 + 4) // 2 + 2


async def test_async_items_are_read_lazily_from_an_async_generator(live: ServerProcess) -> None:
    pulled = 0

    async def endless() -> AsyncIterator[dict[str, Any]]:
        nonlocal pulled
        for i in itertools.count():
            pulled += 1
            yield conversation(i)

    async with AsyncComposo(api_key=live.api_key, base_url=live.base_url) as c:
        seen = []
        stream = c.evaluate_many_iter(endless(), CRITERIA[0], concurrency=3)
        async for r in stream:
            seen.append(r)
            if len(seen) == 8:
                break
        await stream.aclose()  # type: ignore[attr-defined]
    assert len(seen) == 8 and pulled <= 8 + 3 + 1


def test_bad_criteria_fail_before_any_request(client: Composo, live: ServerProcess) -> None:
    with pytest.raises(ComposoValidationError, match=r"criteria\[1\].*Reward"):
        client.evaluate_many([conversation(0)], ["Reward kindness", "be nice"])
    with pytest.raises(ComposoValidationError, match="concurrency"):
        client.evaluate_many_iter([conversation(0)], CRITERIA, concurrency=0)
    with pytest.raises(ComposoValidationError, match="items"):
        client.evaluate_many(conversation(0), CRITERIA)  # one item, not a list of them
    assert live.requests() == []


def test_progress_callback_sees_every_result(client: Composo) -> None:
    seen: list[tuple[int, int | None]] = []
    client.evaluate_many(
        [conversation(i) for i in range(5)], CRITERIA, progress=lambda d, t: seen.append((d, t))
    )
    assert seen[-1] == (10, 10) and [d for d, _ in seen] == list(range(1, 11))


async def test_sync_batch_inside_a_running_event_loop(live: ServerProcess) -> None:
    # As in a notebook cell: the sync client is called while an event loop runs.
    asyncio.get_running_loop()
    with Composo(api_key=live.api_key, base_url=live.base_url) as c:
        results = c.evaluate_many([conversation(i) for i in range(3)], CRITERIA[1])
    assert [r.index for r in results] == [0, 1, 2] and all(r.score in (0.0, 1.0) for r in results)


def test_batch_options_and_tags_reach_the_server(client: Composo, live: ServerProcess) -> None:
    item = {**conversation(1), "tags": {"source": "prod"}}
    client.evaluate_many([item], CRITERIA[0], tags={"run": "nightly"}, evaluate_latest=True)
    (body,) = [r["body"] for r in live.requests()]
    assert body["tags"] == {"run": "nightly", "source": "prod"} and body["evaluate_latest"] is True
    assert "id" not in body and item["tags"] == {"source": "prod"}  # nothing mutated


class Ticket:
    """A type the SDK does not know; a plugin teaches it."""

    def __init__(self, number: int, question: str, reply: str) -> None:
        self.number, self.question, self.reply = number, question, reply


class TicketPlugin:
    @composo.hookimpl
    def composo_convert_item(self, obj: Any) -> dict[str, Any] | None:
        if not isinstance(obj, Ticket):
            return None
        return {
            "id": f"T{obj.number}",
            "messages": [{"role": "user", "content": obj.question}],
            "result": obj.reply,
        }


def test_plugin_converts_items(client: Composo) -> None:
    pm = get_plugin_manager()
    pm.register(TicketPlugin(), name="test-tickets")
    try:
        results = client.evaluate_many(
            [Ticket(7, "Can I return boots?", "Yes, within 30 days."), object()], CRITERIA[0]
        )
    finally:
        pm.unregister(name="test-tickets")
    assert results[0].ok and results[0].id == "T7"
    assert not results[1].ok and "item: cannot use an object" in str(results[1].error)


def test_trace_items(client: Composo) -> None:
    trace = {
        "root_agent_instance_id": "a1",
        "agent_instance_by_id": {
            "a1": {
                "id": "a1",
                "name": "planner",
                "interactions": [
                    {
                        "input_messages": [{"role": "user", "content": "Plan a trip to Oslo"}],
                        "output_messages": [{"content": "Day 1: museums. Day 2: fjord cruise."}],
                    }
                ],
            }
        },
    }
    (r,) = client.evaluate_many([{"id": "t", "trace": trace}], "Reward plans that are concrete")
    assert r.ok and isinstance(r.response, composo.MultiAgentTraceResponse)
    assert r.score == r.response.overall_score


# -- metadata: given back on every result, never sent ---------------------------------------------


def with_metadata(i: int) -> dict[str, Any]:
    return {**conversation(i), "metadata": {"customer": f"c{i}", "seen": [i]}}


def check_metadata(results: list[BatchResult], items: list[dict[str, Any]]) -> None:
    """Each result carries its item's metadata, as a copy of its own."""
    assert len(results) == len(items) * len(CRITERIA)
    for r in results:
        given = items[r.index].get("metadata")
        assert r.metadata == given and (given is None or r.metadata is not given)
        assert r.row()["metadata"] == given
    first = next(r for r in results if r.metadata is not None)
    first.metadata["seen"].append("changed")  # type: ignore[index]
    assert all(r.metadata["seen"] == [r.index] for r in results if r is not first and r.metadata)
    assert all(
        item["metadata"]["seen"] == [i] for i, item in enumerate(items) if "metadata" in item
    )


def test_metadata_comes_back_on_each_result_and_is_never_sent(
    client: Composo, live: ServerProcess
) -> None:
    items = [with_metadata(0), conversation(1), with_metadata(2)]
    broken = {"id": "broken", "messages": [], "metadata": {"customer": "c3", "seen": [3]}}
    results = client.evaluate_many([*items, broken], CRITERIA, concurrency=2)

    assert [r.ok for r in results] == [True] * 6 + [False] * 2
    table = results.to_pandas()
    assert list(table["metadata"])[:4] == [items[0]["metadata"]] * 2 + [None, None]
    check_metadata(results, [*items, broken])  # a failed item keeps its metadata too
    bodies = [r["body"] for r in live.requests() if "/evals/" in r["path"]]
    assert len(bodies) == 6 and not any("customer" in str(b) for b in bodies)

    streamed = sorted(
        client.evaluate_many_iter(iter(items), CRITERIA), key=lambda r: (r.index, r.criterion)
    )
    check_metadata(streamed, items)


async def test_async_metadata_comes_back_on_each_result(aclient: AsyncComposo) -> None:
    items = [with_metadata(0), conversation(1), with_metadata(2)]
    check_metadata(await aclient.evaluate_many(items, CRITERIA, concurrency=2), items)

    async def source() -> AsyncIterator[dict[str, Any]]:
        for item in items:
            yield item

    streamed = [r async for r in aclient.evaluate_many_iter(source(), CRITERIA)]
    check_metadata(sorted(streamed, key=lambda r: (r.index, r.criterion)), items)


def test_an_unknown_field_is_refused_with_a_suggestion(
    client: Composo, live: ServerProcess
) -> None:
    misspelt = {**conversation(0), "metdata": {"customer": "c0"}}
    mine = {**conversation(1), "customer": "c1"}
    not_a_dict = {**conversation(2), "metadata": "c2"}
    results = client.evaluate_many([misspelt, mine, not_a_dict], CRITERIA[0])

    assert [r.ok for r in results] == [False, False, False]
    assert [r.id for r in results] == ["conv-0", "conv-1", "conv-2"]
    assert "unknown field 'metdata' (did you mean 'metadata'?)" in str(results[0].error)
    assert "unknown field 'customer';" in str(results[1].error)
    assert "Your own fields go in 'metadata'" in str(results[1].error)
    assert str(results[2].error).startswith("metadata: expected a dict of your own fields")
    assert live.requests() == []
