"""Limits, keys and durability of the local server: 413, 429, key handling, tasks across restarts,
data_retention="none", the in-process server and judge plugins."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from composo import Composo, RequestTooLargeError, TaskFailedError, hookimpl
from composo.plugins import get_plugin_manager
from composo.server import LocalServer
from composo.server._cases import Case
from composo.server.judges import Verdict
from tests.support.servers import HTTP, ServerProcess, free_port

QA = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]
REWARD = "Reward responses that name the capital city"


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with a small body limit and a rate limit of 3 requests a minute."""
    args = ["--max-body-bytes", "4096", "--rate-limit", "3/min"]
    db = tmp_path_factory.mktemp("strict") / "t.db"
    with ServerProcess(extra_args=args, db=db) as srv:
        yield srv


def test_body_over_the_limit_is_413(strict: ServerProcess) -> None:
    big = [{"role": "user", "content": "x" * 5000}, QA[1]]
    with (
        Composo(api_key=strict.api_key, base_url=strict.base_url, num_retries=3) as c,
        pytest.raises(RequestTooLargeError, match="4096 bytes"),
    ):
        c.evaluate(messages=big, criteria=REWARD)


def test_default_limit_is_ten_mebibytes(live: ServerProcess) -> None:
    big = [{"role": "user", "content": "x" * (10 * 1024 * 1024)}, QA[1]]
    r = HTTP.post(
        live.base_url + "/api/v1/evals/reward",
        json={"messages": big, "evaluation_criteria": REWARD},
        headers={"API-Key": live.api_key},
        timeout=30,
    )
    assert r.status_code == 413
    assert "10485760" in r.json()["detail"]


def test_rate_limit_answers_429_with_retry_after(strict: ServerProcess) -> None:
    body = {"messages": QA, "evaluation_criteria": REWARD}
    statuses = []
    for _ in range(4):
        r = HTTP.post(
            strict.base_url + "/api/v1/evals/reward", json=body, headers={"API-Key": strict.api_key}
        )
        statuses.append(r.status_code)
    assert statuses == [200, 200, 200, 429]
    assert 1 <= int(r.headers["retry-after"]) <= 20
    assert "3 requests per minute" in r.json()["detail"]
    # A bad key is refused before it can use anyone's allowance.
    r = HTTP.post(strict.base_url + "/api/v1/evals/reward", json=body, headers={"API-Key": "x"})
    assert r.status_code == 401


def test_keys_from_the_environment(tmp_path: Path) -> None:
    env = {"COMPOSO_SERVER_API_KEYS": "alpha, beta"}
    with ServerProcess(api_keys=(), env=env, db=tmp_path / "t.db") as srv:
        for key, status in (("beta", 200), ("alpha", 200), ("gamma", 401), ("alph", 401)):
            r = HTTP.post(
                srv.base_url + "/api/v1/evals/reward",
                json={"messages": QA, "evaluation_criteria": REWARD},
                headers={"API-Key": key},
            )
            assert r.status_code == status, key


def test_without_keys_any_key_is_accepted_on_loopback(tmp_path: Path) -> None:
    with (
        LocalServer(db=tmp_path / "t.db") as srv,
        Composo(api_key="whatever", base_url=srv.base_url) as c,
    ):
        assert c.evaluate(messages=QA, criteria=REWARD).score is not None


def test_non_loopback_host_without_keys_is_refused() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "composo", "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in __import__("os").environ.items() if k != "COMPOSO_SERVER_API_KEYS"},
    )
    assert out.returncode == 2
    assert "--api-key" in out.stderr


def test_serve_prints_what_to_export(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "composo",
            "serve",
            "--port",
            str(port),
            "--api-key",
            "k-123",
            "--db",
            str(tmp_path / "t.db"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
    finally:
        proc.terminate()
        proc.wait(10)
    assert f"http://127.0.0.1:{port}" in lines[0]
    assert lines[1].strip() == f"export COMPOSO_BASE_URL=http://127.0.0.1:{port}"
    # The key the user chose is never printed: banners end up in logs.
    assert lines[2].strip().startswith("export COMPOSO_API_KEY=")
    assert "k-123" not in "".join(lines)


def _submit(srv: ServerProcess, **extra: Any) -> str:
    with Composo(api_key=srv.api_key, base_url=srv.base_url) as c:
        task: dict[str, str] = c.evaluate(
            messages=extra.pop("messages", QA), criteria=REWARD, block=False, **extra
        )
        assert c.get_task(task["task_id"]).status in ("pending", "running")
        return task["task_id"]


@pytest.mark.parametrize("kill", [True, False], ids=["killed", "terminated"])
def test_pending_tasks_finish_after_restart(tmp_path: Path, kill: bool) -> None:
    db = tmp_path / "tasks.sqlite3"
    first = ServerProcess(db=db, latency=60).start()
    try:
        ids = [_submit(first) for _ in range(3)]
    finally:
        first.stop(kill=kill)
    with (
        ServerProcess(db=db) as second,
        Composo(api_key=second.api_key, base_url=second.base_url) as c,
    ):
        results = [c.wait(tid, timeout=20, poll_interval=0.05) for tid in ids]
        assert all(r.score is not None for r in results)
        assert c.get_task(ids[0]).status == "succeeded"


def _disk_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def test_data_retention_none_keeps_no_content_on_disk(tmp_path: Path) -> None:
    db = tmp_path / "tasks.sqlite3"
    secret = [
        {"role": "user", "content": "zebra-marker-3141 is my password"},
        {"role": "assistant", "content": "I will remember zebra-marker-3141."},
    ]
    kept = [{"role": "user", "content": "okapi-marker-2718 please"}, QA[1]]
    srv = ServerProcess(db=db, latency=60).start()
    try:
        private = _submit(srv, messages=secret, data_retention="none")
        normal = _submit(srv, messages=kept)
        disk = _disk_bytes(db)
        assert b"okapi-marker-2718" in disk  # the check can see stored content...
        assert b"zebra-marker-3141" not in disk  # ...and none of the private request is there
    finally:
        srv.stop(kill=True)
    with (
        ServerProcess(db=db) as again,
        Composo(api_key=again.api_key, base_url=again.base_url) as c,
    ):
        assert c.wait(normal, timeout=20, poll_interval=0.05).score is not None
        with pytest.raises(TaskFailedError, match="data_retention='none'"):
            c.wait(private, timeout=20, poll_interval=0.05)
    assert b"zebra-marker-3141" not in _disk_bytes(db)


def test_data_retention_none_result_is_served_from_memory(tmp_path: Path) -> None:
    db = tmp_path / "tasks.sqlite3"
    secret = [
        {"role": "user", "content": "What is the capital of zebraland?"},
        {"role": "assistant", "content": "The capital of zebraland is Stripeton."},
    ]
    with ServerProcess(db=db) as srv, Composo(api_key=srv.api_key, base_url=srv.base_url) as c:
        tid = c.evaluate(messages=secret, criteria=REWARD, block=False, data_retention="none")
        res = c.wait(tid["task_id"], timeout=10, poll_interval=0.05)
        assert res.score is not None
        assert c.get_task(tid["task_id"]).status == "succeeded"
        assert b"zebraland" not in _disk_bytes(db)


def test_tasks_of_a_running_server_are_not_taken_over(tmp_path: Path) -> None:
    db = tmp_path / "tasks.sqlite3"
    # Both servers are up before the task exists, so how long a start takes cannot decide it.
    first = ServerProcess(db=db, latency=1.5).launch()
    second = ServerProcess(db=db).launch()  # started side by side
    with first, second:
        tid = _submit(first)
        # The second server shares the file but the first is alive: the task stays with it.
        with Composo(api_key=second.api_key, base_url=second.base_url) as c:
            assert c.get_task(tid).status in ("pending", "running")
        with Composo(api_key=first.api_key, base_url=first.base_url) as c:
            assert c.wait(tid, timeout=10, poll_interval=0.05).score is not None


def test_latency_is_added_without_blocking_other_requests(tmp_path: Path) -> None:
    with LocalServer(latency=0.3) as srv, httpx.Client(timeout=10) as http:
        import concurrent.futures as cf

        def one(_: int) -> int:
            return http.post(
                srv.base_url + "/api/v1/evals/reward",
                json={"messages": QA, "evaluation_criteria": REWARD},
                headers={"API-Key": srv.api_key},
            ).status_code

        started = time.monotonic()
        with cf.ThreadPoolExecutor(8) as pool:
            assert list(pool.map(one, range(8))) == [200] * 8
        elapsed = time.monotonic() - started
        assert elapsed >= 0.3  # every answer waited; they waited together, not one after another
        assert elapsed < 8 * 0.3


class _HalfJudge:
    name = "half"

    async def judge(self, case: Case) -> Verdict:
        return Verdict(0.5, f"half for {len(case.messages)} messages")

    async def aclose(self) -> None:
        return None


class _HalfPlugin:
    @hookimpl
    def composo_judges(self) -> dict[str, Any]:
        return {"half": lambda options: _HalfJudge()}


def test_judges_are_plugins() -> None:
    pm = get_plugin_manager()
    pm.register(_HalfPlugin(), name="test-half-judge")
    try:
        with (
            LocalServer(judge="half") as srv,
            Composo(api_key=srv.api_key, base_url=srv.base_url) as c,
        ):
            res = c.evaluate(messages=QA, criteria=REWARD)
            assert (res.score, res.explanation) == (0.5, "half for 2 messages")
            health = HTTP.get(srv.base_url + "/api/healthcheck").json()
            assert health["judge"] == "half"
    finally:
        pm.unregister(name="test-half-judge")
    with pytest.raises(ValueError, match="judge 'half' is unknown"):
        LocalServer(judge="half").start()


def test_the_judges_hook_is_declared_by_the_server() -> None:
    """A manager that knows only the server's hook checks a judge plugin against it; the core
    declares no such hook."""
    import pluggy

    from composo._core import hookspecs as core_hooks
    from composo.server import hookspecs

    assert not hasattr(core_hooks, "composo_judges")
    pm = pluggy.PluginManager("composo")
    pm.add_hookspecs(hookspecs.Hookspecs)
    pm.register(_HalfPlugin())
    pm.check_pending()
    [judges] = pm.hook.composo_judges()
    assert set(judges) == {"half"}


class _BrokenPlugin:
    @hookimpl
    def composo_judges(self) -> dict[str, Any]:
        class Broken:
            name = "broken"

            async def judge(self, case: Case) -> Verdict:
                raise RuntimeError("the judge's model file is missing")

            async def aclose(self) -> None:
                return None

        return {"broken": lambda options: Broken()}


def test_a_judge_that_raises_answers_in_the_error_shape() -> None:
    pm = get_plugin_manager()
    pm.register(_BrokenPlugin(), name="test-broken-judge")
    try:
        with LocalServer(judge="broken") as srv:
            r = HTTP.post(
                srv.base_url + "/api/v1/evals/reward",
                json={"messages": QA, "evaluation_criteria": REWARD},
                headers={"API-Key": srv.api_key},
            )
    finally:
        pm.unregister(name="test-broken-judge")
    assert r.status_code == 500
    assert "model file is missing" in r.json()["detail"]


def test_local_server_stops_cleanly() -> None:
    srv = LocalServer().start()
    url = srv.base_url
    assert HTTP.get(url + "/api/healthcheck").status_code == 200
    srv.stop()
    with pytest.raises(httpx.ConnectError):
        HTTP.get(url + "/api/healthcheck", timeout=2)


def test_request_content_never_reaches_the_log(tmp_path: Path) -> None:
    marker = "wombat-marker-1618"
    with ServerProcess(api_keys=("k",), dev_faults=False, db=tmp_path / "t.db") as srv:
        messages = [
            {"role": "user", "content": f"{marker}?"},
            {"role": "assistant", "content": marker},
        ]
        for body in (
            {"messages": messages, "evaluation_criteria": REWARD},
            {"messages": messages, "evaluation_criteria": f"Reward {marker}", marker: 1},
            {"messages": messages[:1], "evaluation_criteria": REWARD},
        ):
            HTTP.post(srv.base_url + "/api/v1/evals/reward", json=body, headers={"API-Key": "k"})
        srv.stop()
        out = srv.output()
    assert "POST /api/v1/evals/reward" in out  # the access log is there...
    assert marker not in out  # ...without any of the content


def test_tasks_resume_after_a_restart_under_the_same_pid(tmp_path: Path) -> None:
    """In a container the server is pid 1 every time: a predecessor with the same pid is gone."""
    from composo._core.wire import RewardRequest
    from composo.server._store import TaskStore

    db = tmp_path / "tasks.sqlite3"
    crashed = TaskStore(db)  # what a server killed with a task pending leaves behind
    request = RewardRequest(messages=QA, evaluation_criteria=REWARD)
    crashed.add("t-same-pid", "reward", request.model_dump_json(exclude_none=True))
    crashed.close()
    with LocalServer(db=db) as srv, Composo(api_key=srv.api_key, base_url=srv.base_url) as c:
        assert c.wait("t-same-pid", timeout=10, poll_interval=0.05).score is not None


def test_a_locked_task_database_does_not_stall_other_requests(tmp_path: Path) -> None:
    import sqlite3
    import threading

    db = tmp_path / "tasks.sqlite3"
    with ServerProcess(db=db) as srv:
        other = sqlite3.connect(db, isolation_level=None)  # e.g. a second server writing
        other.execute("BEGIN IMMEDIATE")
        answers: list[httpx.Response] = []
        worker = threading.Thread(
            target=lambda: answers.append(
                HTTP.post(
                    srv.base_url + "/api/v1/evals/reward/background",
                    json={"messages": QA, "evaluation_criteria": REWARD},
                    headers={"API-Key": srv.api_key},
                    timeout=30,
                )
            )
        )
        worker.start()
        try:
            time.sleep(0.2)  # the submission is now waiting for the database
            slowest = 0.0
            with httpx.Client(timeout=30) as http:
                for _ in range(10):
                    t0 = time.monotonic()
                    assert http.get(srv.base_url + "/api/healthcheck").status_code == 200
                    slowest = max(slowest, time.monotonic() - t0)
                    time.sleep(0.1)
        finally:
            other.execute("COMMIT")
            other.close()
            worker.join()
        assert answers[0].status_code == 200 and answers[0].json()["task_id"]
        assert slowest < 0.5


def test_rate_limit_without_keys_cannot_be_dodged_by_changing_the_key() -> None:
    body = {"messages": QA, "evaluation_criteria": REWARD}
    with LocalServer(rate_limit_per_minute=3) as srv:
        statuses = [
            HTTP.post(
                srv.base_url + "/api/v1/evals/reward", json=body, headers={"API-Key": f"k-{i}"}
            ).status_code
            for i in range(4)
        ]
    assert statuses == [200, 200, 200, 429]


def test_rate_limiter_forgets_idle_clients_and_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from composo.server import _gate as guards

    now = [1000.0]
    monkeypatch.setattr(guards.time, "monotonic", lambda: now[0])
    limiter = guards.RateLimiter(60, max_clients=50)
    for i in range(200):
        assert limiter.retry_after(f"client-{i}".encode()) == 0
    assert len(limiter._buckets) <= 50  # the least recently seen went first
    assert limiter.retry_after(b"client-199") == 0  # a recent client keeps its bucket...
    assert limiter._buckets[b"client-199"][0] == pytest.approx(58.0)
    now[0] += 61  # ...until every bucket has refilled: then none needs keeping
    assert limiter.retry_after(b"late") == 0
    assert list(limiter._buckets) == [b"late"]


def test_data_retention_none_results_in_memory_are_bounded_and_expire(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from composo.server import _tasks as tasks

    monkeypatch.setattr(tasks, "MAX_KEPT_RESULTS", 2)
    with LocalServer() as srv, Composo(api_key=srv.api_key, base_url=srv.base_url) as c:

        def finished() -> str:
            tid: str = c.evaluate(messages=QA, criteria=REWARD, block=False, data_retention="none")[
                "task_id"
            ]
            c.wait(tid, timeout=10, poll_interval=0.05)
            return tid

        first, second, third = finished(), finished(), finished()
        assert [c.get_task(t).status for t in (second, third)] == ["succeeded"] * 2
        gone = c.get_task(first)
        assert gone.status == "failed" and "data_retention='none'" in gone.error
        assert "expired" in gone.error
        monkeypatch.setattr(tasks, "KEEP_RESULTS_SECONDS", 0.3)
        time.sleep(0.4)
        assert c.get_task(third).status == "failed"


def test_serve_with_a_database_path_it_cannot_use_is_one_line_naming_db(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "composo",
            "serve",
            "--port",
            str(free_port()),
            "--db",
            str(blocker / "tasks.sqlite3"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("composo serve: error: --db") and str(blocker / "tasks.sqlite3") in line
    assert "export COMPOSO" not in out.stdout  # nothing to export from a server that never ran
