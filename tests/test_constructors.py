"""The clients' constructors: the platform SDK's positional order (code written for it runs
unchanged), every other setting by name and the same names on both, and a core that takes a
transport handed down to it, never a cache."""

from __future__ import annotations

import asyncio
import inspect
import threading

import httpx
import pytest

from composo import AsyncComposo, Composo, ComposoValidationError
from composo._core.async_client import AsyncClient
from composo._core.client import SyncClient
from tests.support.servers import ServerProcess

QA = [
    {"role": "user", "content": "What is the refund window?"},
    {"role": "assistant", "content": "Thirty days from delivery."},
]


def _kinds(cls: type) -> tuple[list[str], set[str]]:
    """A constructor's positional-or-keyword names, in order, and its keyword-only names."""
    parameters = inspect.signature(cls).parameters.values()
    positional = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
    return positional, {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}


def test_positional_arguments_follow_the_platform_sdk(live: ServerProcess) -> None:
    sync = Composo(live.api_key, live.base_url, 2, "align-20250529", 7.0)
    assert (sync.base_url, sync.num_retries, sync.model_core, sync.timeout) == (
        live.base_url, 2, "align-20250529", 7.0,
    )  # fmt: skip
    assert sync.evaluate(messages=QA, criteria="Reward brevity").score is not None
    a = AsyncComposo(live.api_key, live.base_url, 2, "align-20250529", 3, 7.0)
    assert (a.max_concurrent_requests, a.timeout) == (3, 7.0)


def test_every_other_setting_is_by_name_and_the_same_on_both() -> None:
    sync_positional, sync_named = _kinds(Composo)
    async_positional, async_named = _kinds(AsyncComposo)
    assert sync_positional == ["api_key", "base_url", "num_retries", "model_core", "timeout"]
    assert async_positional == [
        "api_key", "base_url", "num_retries", "model_core", "max_concurrent_requests", "timeout",
    ]  # fmt: skip
    # permits= is the blocking client's alone: a cluster budget's acquire() blocks
    assert sync_named - {"max_concurrent_requests", "permits"} == async_named
    assert {"http_client", "cache", "requests_per_minute", "proxy", "verify"} <= async_named
    with pytest.raises(TypeError):
        Composo("k", None, 1, None, 60.0, 5)  # type: ignore[misc]


def test_the_core_clients_take_a_transport_and_no_cache() -> None:
    for core in (SyncClient, AsyncClient):
        names = set(inspect.signature(core).parameters)
        assert "transport" in names and "cache" not in names
    with pytest.raises(TypeError):
        SyncClient(api_key="k", cache=True)  # type: ignore[call-arg]


def test_the_core_sends_through_the_transport_handed_to_it() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"score": 0.5, "explanation": "fine"})

    with SyncClient(api_key="k", transport=lambda: httpx.MockTransport(answer)) as c:
        assert c.evaluate(messages=QA, criteria="Reward brevity").score == 0.5


def test_from_client_makes_either_kind_with_the_same_settings(live: ServerProcess) -> None:
    given = Composo(live.api_key, live.base_url, 2, "align-20250529", 7.0, requests_per_minute=600)
    sibling = AsyncComposo.from_client(given, timeout=9)
    assert (sibling.base_url, sibling.num_retries, sibling.model_core) == (
        live.base_url, 2, "align-20250529",
    )  # fmt: skip
    assert (sibling.timeout, sibling.requests_per_minute) == (9.0, 600.0)
    # the key came along: the local server accepts the request
    assert asyncio.run(sibling.evaluate(messages=QA, criteria="Reward brevity")).score is not None
    assert live.requests()[-1]["body"]["model_core"] == "align-20250529"
    given.close()
    with pytest.raises(ComposoValidationError, match="client"):
        Composo.from_client("http://x")  # type: ignore[arg-type]


def test_from_client_of_the_same_kind_keeps_a_supplied_http_client(live: ServerProcess) -> None:
    seen: list[httpx.Request] = []
    with httpx.Client(event_hooks={"request": [seen.append]}) as http:
        copy = Composo.from_client(
            Composo(live.api_key, live.base_url, http_client=http), timeout=5
        )
        copy.evaluate(messages=QA, criteria="Reward brevity")
        # the other kind cannot use a blocking httpx client: it makes its own connections
        assert AsyncComposo.from_client(copy).timeout == 5.0
        copy.close()
    assert copy.timeout == 5.0 and len(seen) == 1


class CountingBudget:
    """A request budget beyond the process, as ``composo.ray.RequestBudget`` is."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.out = self.taken = 0

    def acquire(self) -> None:
        with self.lock:
            self.out += 1
            self.taken += 1

    def release(self) -> None:
        with self.lock:
            self.out -= 1


def test_every_request_holds_a_permit_of_the_budget_given(live: ServerProcess) -> None:
    budget = CountingBudget()
    with Composo(live.api_key, live.base_url, permits=budget) as client:
        results = client.evaluate_many([{"messages": QA}] * 3, ["Reward brevity", "Penalize lies"])
        assert Composo.from_client(client).permits is budget
    assert all(r.ok for r in results)
    assert (budget.taken, budget.out) == (6, 0)
