"""``composo.ext.BackgroundEvaluator`` directly: what its records say, runs that cannot be
prepared, the ``with`` form, and evaluators that share the process's background thread (local
server)."""

from __future__ import annotations

import gc
import logging
import threading
import weakref

import pytest

from composo import Composo
from composo.ext import BackgroundEvaluator, criterion_kind
from tests.support.servers import ServerProcess

MESSAGES = [{"role": "user", "content": "What is  the capital\nof France?"}]


def test_criterion_kind_reads_the_prefix_as_the_platform_does() -> None:
    assert criterion_kind("Reward concise answers") == "reward"
    assert criterion_kind("rewards concise answers") == "reward"
    assert criterion_kind("Penalize rambling") == "penalize"
    assert criterion_kind("Passes if polite") == "passes_if"
    assert criterion_kind("Fails if rude") == "fails_if"
    assert criterion_kind("my-saved-evaluator") == "evaluator"


@pytest.mark.slow
def test_records_carry_name_summary_and_the_arguments(client: Composo, live: ServerProcess) -> None:
    answer = "Paris. " + "It has been the capital for a long time. " * 5
    item = {"messages": MESSAGES, "result": answer}
    with BackgroundEvaluator(["Reward brevity", "Fails if rude"], client=client) as ev:
        ev.submit("r1", "evaluate", lambda: item, {"name": "geo"})
        assert ev.flush(timeout=30)
    first, second = ev.results
    assert {first.criterion_kind, second.criterion_kind} == {"reward", "fails_if"}
    for r in (first, second):
        assert r.ok and r.name == "geo" and r.run_id == "r1"
        assert r.evaluated is not None and r.evaluated["messages"] is MESSAGES  # not copied
        assert r.summary is not None
        assert r.summary.startswith("user: What is the capital of France? | answer: Paris.")
        assert len(r.summary) < 200 and r.summary.endswith("...")
    assert ev.closed


def test_a_run_that_cannot_be_prepared_is_a_failed_record_and_a_warning(
    client: Composo, live: ServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> dict[str, object]:
        raise ValueError("the run produced nothing to evaluate")

    with (
        caplog.at_level(logging.WARNING, logger="composo"),
        BackgroundEvaluator("Reward brevity", client=client) as ev,
    ):
        ev.submit("r2", "evaluate", broken, name="summariser")
        assert ev.flush(timeout=30)
    [record] = ev.results
    assert not record.ok and record.name == "summariser" and record.evaluated is None
    assert ev.stats == {"completed": 0, "failed": 1, "pending": 0}
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "r2 (summariser)" in warning.getMessage()
    assert "nothing to evaluate" in warning.getMessage()
    assert live.requests() == []


def test_evaluators_share_one_thread_and_an_idle_one_is_collected(
    client: Composo, live: ServerProcess
) -> None:
    def one(*criteria: str) -> weakref.ref[BackgroundEvaluator]:
        ev = BackgroundEvaluator(list(criteria or ["Reward brevity"]), client=client)
        ev.submit("r", "evaluate", lambda: {"messages": MESSAGES, "result": "Paris."})
        assert ev.flush(timeout=30)
        assert all(r.ok for r in ev.results)
        return weakref.ref(ev)

    # The first use starts the background thread and, two requests at once, two threads of the
    # shared executor (which may keep a spare one as calls come one after another).
    one("Reward brevity", "Fails if rude")
    gc.collect()
    before = set(threading.enumerate())
    refs = [one() for _ in range(10)]
    gc.collect()
    assert set(threading.enumerate()) - before == set()
    assert all(ref() is None for ref in refs)


def test_submit_after_close_is_refused(client: Composo) -> None:
    ev = BackgroundEvaluator("Reward brevity", client=client)
    ev.close()
    with pytest.raises(RuntimeError, match="closed"):
        ev.submit("r", "evaluate", lambda: {"messages": MESSAGES, "result": "Paris."})


def test_requests_take_the_clients_model_core_as_its_calls_do(live: ServerProcess) -> None:
    with (
        Composo(live.api_key, live.base_url, model_core="align-20250529") as client,
        BackgroundEvaluator("Reward brevity", client=client) as ev,
    ):
        ev.submit("r", "evaluate", lambda: {"messages": MESSAGES, "result": "Paris."})
        assert ev.flush(timeout=30)
    [sent] = [r["body"] for r in live.requests() if r["path"].startswith("/api/v1/evals/")]
    assert sent["model_core"] == "align-20250529"
