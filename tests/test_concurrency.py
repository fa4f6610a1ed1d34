"""The clients in real programs: forked processes, Ctrl-C, one hold per client for a
``Retry-After``, several event loops. Every verdict comes from a loopback server that echoes its
own request (``tests/support/echo.py``), so an answer delivered to the wrong caller shows; forking
and Ctrl-C happen in a program of their own (``tests/support/scenarios.py``)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from composo import AsyncComposo, Composo, ComposoError
from tests.support.cli import read_rows
from tests.support.echo import Echo, marker

ROOT = Path(__file__).resolve().parents[1]
CRITERION = "Reward accurate answers"
fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def messages(text: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": text},
    ]


def scenario(*args: str, timeout: float = 60) -> dict[str, Any]:
    """Run ``tests/support/scenarios.py`` with ``args``; what it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.scenarios", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return out


# -- os.fork() ------------------------------------------------------------------------------------


@fork_only
def test_after_a_fork_parent_and_child_each_get_their_own_verdicts() -> None:
    with Echo() as srv:
        seen = scenario("fork", srv.url)
    assert seen["parent_crossed"] == 0
    child = seen["child"]
    assert child["crossed"] == 0  # 480 calls each side, from 8 threads at once
    # The thread pool made before the fork has no threads in the child: its several-criteria
    # call still ends, with its own verdicts, well within its timeout (10 s).
    assert child["several_ok"] and child["several_seconds"] < 10


@fork_only
def test_a_fork_pool_over_a_warmed_module_level_client_gives_every_item_its_verdict() -> None:
    with Echo() as srv:
        seen = scenario("pool", srv.url)
    assert seen == {"crossed": 0, "items": 200}


@fork_only
def test_background_evaluation_goes_on_in_a_forked_child() -> None:
    with Echo() as srv:
        seen = scenario("background", srv.url)
    assert seen == {"parent_flushed": True, "child_ok": True}


@fork_only
def test_a_forked_child_uses_the_cache_on_a_connection_of_its_own(tmp_path: Path) -> None:
    with Echo() as srv:
        seen = scenario("cache", srv.url, str(tmp_path))
        asked = len(srv.arrivals)
    assert seen == {"child_ok": True, "parent_ok": True}
    assert asked == 2  # "kept" once; the child's answer came to the parent from the cache


# -- Ctrl-C ---------------------------------------------------------------------------------------


def stalled() -> Echo:
    """A server that reads every request and never answers."""
    return Echo(script=lambda number, body: "stall")


def wait_for(check: Any, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.02)


@pytest.mark.parametrize(
    "form",
    ["evaluate", "many", "iter", "dataframe", "async_evaluate", "async_many", "async_iter"],
)
def test_ctrl_c_stops_a_batch_at_once_even_against_a_server_that_never_answers(form: str) -> None:
    with stalled() as srv:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.scenarios", "interrupt", form, srv.url],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(lambda: len(srv.arrivals) >= 3)  # requests in flight, unanswered
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=5)  # the client's timeout is 30 s
        finally:
            proc.kill()
    seen = json.loads(out.splitlines()[-1])
    assert seen["interrupted"], err
    assert seen["threads"] == []  # no worker thread of ours is left


def test_ctrl_c_stops_the_command_line_and_the_run_resumes(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"messages": messages(f"a{i}")}) + "\n" for i in range(30)))
    out = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "composo", "evaluate", str(data), "-c", CRITERION, "-o"]
    command += [str(out), "--concurrency", "4", "--api-key", "k", "--base-url"]
    with Echo(script=lambda number, body: "stall" if number >= 10 else None) as srv:
        proc = subprocess.Popen(
            [*command, srv.url], cwd=tmp_path, stderr=subprocess.PIPE, text=True
        )
        try:
            wait_for(lambda: len(srv.arrivals) >= 14)  # 10 answered, 4 hanging
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=5)  # the client waits 30 s; the exit is far sooner
        finally:
            proc.kill()
    assert proc.returncode == 130, err
    assert "run the same command again to resume" in err
    assert len(read_rows(out)) == 10  # what was scored is kept
    with Echo() as srv:
        again = subprocess.run(
            [*command, srv.url], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        asked = len(srv.arrivals)
    assert again.returncode == 0, again.stderr
    rows = read_rows(out)
    assert asked == 20 and len(rows) == 30
    assert sorted(r["explanation"] for r in rows) == sorted(f"a{i}|{CRITERION}" for i in range(30))


# -- one hold per client --------------------------------------------------------------------------


def first_refused() -> Echo:
    """The first request is refused with ``Retry-After: 1``; the others are answered after
    50 ms."""
    return Echo(
        script=lambda number, body: (429, {"Retry-After": "1"}) if number == 0 else None,
        latency=0.05,
    )


def held(srv: Echo) -> list[str]:
    """What reached the server in the 0.9 s after the 429 (besides the refused request)."""
    refused = srv.arrivals[0]
    return [a.marker for a in srv.after(refused.at, 0.9)]


def test_a_retry_after_holds_every_thread_of_the_client() -> None:
    with (
        first_refused() as srv,
        Composo(api_key="k", base_url=srv.url, max_concurrent_requests=2, timeout=15) as client,
    ):
        results: list[Any] = [None] * 10

        def call(i: int) -> None:
            results[i] = client.evaluate(messages=messages(f"t{i}"), criteria=CRITERION)

        threads = [threading.Thread(target=call, args=(i,)) for i in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    # At most the other slot's request, already on the wire, arrives in the hold.
    assert len(held(srv)) <= 1
    assert [r.explanation for r in results] == [f"t{i}|{CRITERION}" for i in range(10)]


def test_a_retry_after_holds_every_coroutine_of_the_client() -> None:
    async def main(url: str) -> list[Any]:
        async with AsyncComposo(
            api_key="k", base_url=url, max_concurrent_requests=2, timeout=15
        ) as client:
            calls = [
                client.evaluate(messages=messages(f"c{i}"), criteria=CRITERION) for i in range(10)
            ]
            return list(await asyncio.gather(*calls))

    with first_refused() as srv:
        results = asyncio.run(main(srv.url))
    assert len(held(srv)) <= 1
    assert [r.explanation for r in results] == [f"c{i}|{CRITERION}" for i in range(10)]


def test_a_retry_after_holds_every_criterion_of_a_call() -> None:
    criteria = [f"Reward aspect {i}" for i in range(10)]
    with (
        first_refused() as srv,
        Composo(api_key="k", base_url=srv.url, max_concurrent_requests=2, timeout=15) as client,
    ):
        results = client.evaluate(messages=messages("x"), criteria=criteria)
    assert len(held(srv)) <= 1
    assert [r.explanation for r in results] == [f"x|{c}" for c in criteria]


# -- several event loops --------------------------------------------------------------------------


async def calls(client: AsyncComposo, tag: str) -> list[str]:
    """Ten calls at once; their explanations."""
    asked = [client.evaluate(messages=messages(f"{tag}{i}"), criteria=CRITERION) for i in range(10)]
    return [r.explanation for r in await asyncio.gather(*asked)]


def two_loops_at_once(client: AsyncComposo) -> dict[str, Any]:
    """``calls`` from two threads, each running its own event loop, started together."""
    start = threading.Barrier(2)
    got: dict[str, Any] = {}

    def run(tag: str) -> None:
        start.wait()
        try:
            got[tag] = asyncio.run(calls(client, tag))
        except Exception as exc:  # compared below
            got[tag] = exc

    threads = [threading.Thread(target=run, args=(tag,)) for tag in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got


def test_an_async_client_serves_event_loops_in_two_threads_at_once() -> None:
    expected = {tag: [f"{tag}{i}|{CRITERION}" for i in range(10)] for tag in "ab"}
    with Echo(latency=0.005) as srv:
        for _ in range(20):
            client = AsyncComposo(api_key="k", base_url=srv.url, max_concurrent_requests=4)
            assert two_loops_at_once(client) == expected
        # and in sequence, one loop after another
        assert asyncio.run(calls(client, "a")) == expected["a"]


def test_a_supplied_async_http_client_on_a_second_running_loop_is_refused_at_once() -> None:
    with Echo(latency=1.0) as srv:
        http = httpx.AsyncClient()
        client = AsyncComposo(api_key="k", base_url=srv.url, http_client=http)
        first = threading.Thread(
            target=asyncio.run,
            args=(client.evaluate(messages=messages("first"), criteria=CRITERION),),
        )
        first.start()
        wait_for(lambda: len(srv.arrivals) == 1)
        with pytest.raises(ComposoError, match="event loop"):
            asyncio.run(client.evaluate(messages=messages("second"), criteria=CRITERION))
        first.join()
    first_request = {"messages": messages("first"), "evaluation_criteria": CRITERION}
    assert [a.marker for a in srv.arrivals] == [marker(first_request)]
