"""Ray Data on a local Ray: every row scored once, the cluster within one request budget, and the
same results as a local run. The documented program, examples/ray_evaluate.py, runs here as
written and starts the module's Ray."""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from composo import Composo, ComposoValidationError
from tests.support.counting_proxy import CountingProxy
from tests.support.lazy import lazy_import
from tests.support.servers import ServerProcess
from tests.test_docs_examples import BLOCKS, as_shown

pd = lazy_import("pandas")
ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'composo[ray]')")
from composo.ray import ComposoBatch, RequestBudget  # noqa: E402

CRITERIA = {
    "refund": "Reward answers that explain the refund policy",
    "window": "Passes if the answer mentions the return window",
}
ROWS = 60
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ray_evaluate.py"


@pytest.fixture(scope="module")
def slow_server() -> Iterator[ServerProcess]:
    """A server that takes 20 ms per answer, so requests overlap and the budget is tested."""
    with ServerProcess(latency=0.02) as srv:
        yield srv


@pytest.fixture(scope="module")
def example(slow_server: ServerProcess) -> Iterator[dict[str, Any]]:
    """examples/ray_evaluate.py (docs/data.md shows it) run here as written, configured by the
    environment through a counting proxy. The Ray it starts is this module's: one cluster."""
    with CountingProxy(slow_server.base_url) as proxy, pytest.MonkeyPatch.context() as env:
        env.setenv("COMPOSO_API_KEY", slow_server.api_key)
        env.setenv("COMPOSO_BASE_URL", proxy.base_url)
        env.syspath_prepend(str(EXAMPLE.parent))  # its install check, examples/_install.py
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            ran = runpy.run_path(str(EXAMPLE), run_name="__main__")
        ran.update(printed=printed.getvalue(), peak=proxy.peak, total=proxy.total)
    ran["requests"] = slow_server.requests()
    yield ran
    ray.shutdown()


@pytest.fixture(scope="module")
def local_ray(example: dict[str, Any]) -> None:
    """The Ray the example started."""
    assert ray.is_initialized()


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [f"r{i}" for i in range(ROWS)],
            "question": [f"Question {i}: how do refunds work?" for i in range(ROWS)],
            "answer": [
                "Returns within 30 days get a full refund. " * (1 + i % 3) for i in range(ROWS)
            ],
        }
    )


def test_the_pages_ray_program_is_the_example() -> None:
    """The one Ray block of the pages is the program the fixture runs (so none goes untested)."""
    ray_blocks = [code.strip() for where, code in BLOCKS if "import ray" in code]
    assert ray_blocks == [as_shown(EXAMPLE.name)]


@pytest.mark.timeout(300)  # a local Ray starts its workers first
def test_the_example_stays_within_its_budget_and_matches_a_local_run(
    example: dict[str, Any], slow_server: ServerProcess
) -> None:
    tickets, budget, result = example["tickets"], example["budget"], example["result"]
    assert example["peak"] <= budget.max_concurrent_requests  # what the server saw in flight
    assert example["total"] == len(tickets) * len(CRITERIA)
    # every row scored once
    bodies = [r["body"] for r in example["requests"] if r["path"].endswith("/reward")]
    seen = sorted((b["messages"][0]["content"], b["evaluation_criteria"]) for b in bodies)
    assert len(set(seen)) == len(seen) == len(tickets) * len(CRITERIA)
    assert sorted(result["ticket"]) == sorted(tickets["ticket"]) and result["error"].isna().all()
    assert re.search(r"^mean refund score: [01]\.\d\d$", example["printed"], re.M)
    # The workers gave every permit back as their batches ended (no settling by the driver).
    deadline = time.monotonic() + 10
    while ray.get(budget.actor.stats.remote())["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ray.get(budget.actor.stats.remote())["in_flight"] == 0
    stats = budget.stats()
    assert stats["in_flight"] == 0 and stats["granted"] == len(seen)
    assert 1 <= stats["peak"] <= budget.max_concurrent_requests

    columns = {"id": "ticket", "question": "prompt", "answer": "reply"}
    with Composo(api_key=slow_server.api_key, base_url=slow_server.base_url) as client:
        local = client.evaluate_dataframe(tickets, CRITERIA, columns=columns)
    # the same rows and values (Ray hands columns back as Arrow-backed dtypes)
    assert list(result.columns) == list(local.columns)

    def rows(f: pd.DataFrame) -> list[dict[str, object]]:
        return sorted(f.astype(object).where(f.notna(), None).to_dict("records"), key=str)

    assert rows(result) == rows(local)


def test_an_instance_works_as_a_task_function(local_ray: None, slow_server: ServerProcess) -> None:
    df = frame().head(8)
    evaluate = ComposoBatch(
        {"refund": CRITERIA["refund"]},
        budget=RequestBudget(2),
        api_key=slow_server.api_key,
        base_url=slow_server.base_url,
    )
    assert "test-key" not in repr(evaluate)
    out = ray.data.from_pandas(df).map_batches(evaluate, batch_format="pandas").to_pandas()
    assert sorted(out["id"]) == sorted(df["id"]) and out["refund_score"].notna().all()


def test_the_budget_paces_requests_per_minute(local_ray: None, slow_server: ServerProcess) -> None:
    budget = RequestBudget(4, requests_per_minute=600)  # one request every 100 ms
    evaluate = ComposoBatch(
        {"refund": CRITERIA["refund"]},
        budget=budget,
        api_key=slow_server.api_key,
        base_url=slow_server.base_url,
    )
    out = evaluate(frame().head(6))
    assert out["error"].isna().all()
    stats = budget.stats()
    assert stats["granted"] == 6 and stats["seconds"] >= 5 * 0.1


def test_bad_settings_fail_on_the_driver(local_ray: None) -> None:
    with pytest.raises(ComposoValidationError, match="max_concurrent_requests"):
        RequestBudget(0)
    with pytest.raises(ComposoValidationError, match="criteri"):
        ComposoBatch(["not a criterion"], api_key="k", base_url="http://127.0.0.1:1")


def test_threads_of_one_worker_share_its_permits_within_the_budget(local_ray: None) -> None:
    """Permits freed while other threads of the process wait are handed over locally; the
    budget still holds, every start is counted, and all permits come back."""
    import threading

    budget = RequestBudget(4)
    lock = threading.Lock()
    running = [0, 0]  # now, most at once

    def work() -> None:
        for _ in range(40):
            budget.acquire()
            with lock:
                running[0] += 1
                running[1] = max(running[1], running[0])
            time.sleep(0.001)
            with lock:
                running[0] -= 1
            budget.release()

    threads = [threading.Thread(target=work) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert running[1] <= 4
    stats = budget.stats()
    assert stats["granted"] == 12 * 40 and stats["in_flight"] == 0 and stats["peak"] <= 4


def test_permits_freed_together_go_back_in_one_call_and_none_stay_idle(local_ray: None) -> None:
    """The last requests of a batch finish within moments of each other: their permits go back
    to the actor together, and a worker with nothing to send keeps none of them."""
    import threading

    budget = RequestBudget(8)
    held = threading.Barrier(9)
    finish = threading.Event()

    def one() -> None:
        budget.acquire()
        held.wait(10)
        finish.wait(10)
        budget.release()

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    held.wait(10)  # all eight hold a permit
    before = ray.get(budget.actor.stats.remote())
    assert before["in_flight"] == 8
    finish.set()  # and all finish at once
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    deadline = time.monotonic() + 10
    while True:  # not settled by stats(): the worker itself gave them back
        after = ray.get(budget.actor.stats.remote())
        if after["in_flight"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert after["in_flight"] == 0
    assert after["calls"] - before["calls"] <= 2  # not one call per permit
    assert budget.stats()["granted"] == 8
