"""Background tasks: recovery that does not depend on process ids, a finished task never judged
again, idempotent submissions, tasks visible only to the key that submitted them, and keys from
a file."""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from composo import APITimeoutError, Composo
from composo.server import LocalServer
from tests.support.openai_standin import OpenAIStandIn, chat_completion
from tests.support.servers import HTTP, ServerProcess, free_port

REWARD = "Reward responses that name the capital city"


def qa(marker: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"What is the capital of France? ({marker})"},
        {"role": "assistant", "content": f"Paris is the capital of France. ({marker})"},
    ]


def submit(
    srv: ServerProcess, body: dict[str, Any], key: str | None = None, **headers: str
) -> httpx.Response:
    return HTTP.post(
        srv.base_url + "/api/v1/evals/reward/background",
        json=body,
        headers={"API-Key": key or srv.api_key, **headers},
        timeout=10,
    )


def task(srv: ServerProcess, task_id: str, key: str | None = None) -> httpx.Response:
    return HTTP.get(
        f"{srv.base_url}/api/v1/evals/tasks/{task_id}",
        headers={"API-Key": key or srv.api_key},
        timeout=10,
    )


def wait_all(srv: ServerProcess, ids: list[str], timeout: float = 30) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    done: dict[str, dict[str, Any]] = {}
    while len(done) < len(ids):
        for tid in ids:
            if tid not in done:
                info = task(srv, tid).json()
                if info["status"] in ("succeeded", "failed"):
                    done[tid] = info
        assert time.monotonic() < deadline, f"{len(ids) - len(done)} task(s) never finished"
        time.sleep(0.05)
    return done


# -- recovery ------------------------------------------------------------------------------------


def test_kill_9_mid_work_resumes_everything_and_never_rejudges_a_finished_task(
    tmp_path: Path, openai_standin: OpenAIStandIn
) -> None:
    """A real server process killed with SIGKILL while judging: the next one finishes the rest
    at once, and no task that had finished is judged a second time."""

    answered = itertools.count()
    release = threading.Event()

    def verdict(body: dict[str, Any]) -> dict[str, Any]:
        if next(answered) >= 5:
            release.wait(60)  # the judge hangs after five verdicts: the rest are mid-work
        text = json.dumps({"applicable": True, "score": 0.5, "explanation": "judged"})
        return chat_completion(content=text)

    openai_standin.on_chat(verdict)
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": openai_standin.base_url}
    args = ["--judge", "openai", "--judge-model", "m", "--task-lease", "600"]
    db = tmp_path / "tasks.sqlite3"
    markers = [f"m{i:03d}-{uuid.uuid4().hex[:8]}" for i in range(20)]
    first = ServerProcess(db=db, extra_args=args, env=env).start()
    try:
        ids = [
            submit(first, {"messages": qa(m), "evaluation_criteria": REWARD}).json()["task_id"]
            for m in markers
        ]
        finished_before: set[str] = set()
        deadline = time.monotonic() + 60
        with httpx.Client(headers={"API-Key": first.api_key}, timeout=10) as http:
            while len(finished_before) < 5:
                assert time.monotonic() < deadline
                finished_before = {
                    t
                    for t in ids
                    if http.get(f"{first.base_url}/api/v1/evals/tasks/{t}").json()["status"]
                    == "succeeded"
                }
    finally:
        first.stop(kill=True)
        release.set()
    assert len(finished_before) < len(ids)  # the kill landed mid-work
    # The lease is long (600 s): only the dead server's released lock lets the next one take over.
    with ServerProcess(db=db, extra_args=args, env=env) as second:
        done = wait_all(second, ids)
    assert all(info["status"] == "succeeded" for info in done.values())
    judged = [json.dumps(r["body"]) for r in openai_standin.requests]
    runs = {m: sum(m in body for body in judged) for m in markers}
    by_id = dict(zip(ids, markers, strict=True))
    assert all(runs[by_id[t]] == 1 for t in finished_before), runs
    assert all(n >= 1 for n in runs.values())


def _forge(db: Path, task_id: str, owner: str, lease_until: float | None) -> None:
    """A task as a server that still looks alive left it: owner and lease written directly."""
    from composo._core.wire import RewardRequest
    from composo.server._store import TaskStore

    store = TaskStore(db)
    request = RewardRequest(messages=qa(task_id), evaluation_criteria=REWARD)
    store.add(task_id, "reward", request.model_dump_json(exclude_none=True))
    store.close()
    with sqlite3.connect(db) as raw:
        raw.execute(
            "UPDATE tasks SET owner = ?, lease_until = ?, status = 'running' WHERE task_id = ?",
            (owner, lease_until, task_id),
        )


def test_servers_opening_one_new_task_file_at_once_all_start(tmp_path: Path) -> None:
    """Servers started side by side on a new file bring its tables up to date in turn (one
    adding a column another has just added was an error that stopped it)."""
    from composo.server._store import TaskStore

    def open_store(db: Path, start: threading.Barrier, opened: list[Any], out: list[Any]) -> None:
        start.wait()
        try:
            opened.append(TaskStore(db))
        except BaseException as exc:
            out.append(exc)

    for attempt in range(5):  # a race: several new files, eight openers each
        db = tmp_path / f"tasks-{attempt}.sqlite3"
        start = threading.Barrier(8)
        opened: list[TaskStore] = []
        errors: list[BaseException] = []
        args = (db, start, opened, errors)
        threads = [threading.Thread(target=open_store, args=args) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == [] and len(opened) == 8
        for store in opened:
            store.close()
        with sqlite3.connect(db) as raw:
            columns = [row[1] for row in raw.execute("PRAGMA table_info(tasks)")]
        assert len(columns) == len(set(columns))
        assert {"client", "idem", "lease_until"} <= set(columns)


def test_a_predecessor_whose_pid_is_alive_does_not_keep_its_tasks(tmp_path: Path) -> None:
    db = tmp_path / "tasks.sqlite3"
    # Owners as an earlier version wrote them: this (living) process's pid, and pid 1.
    _forge(db, "alive-pid", f"{os.getpid()}:0123abcd", None)
    _forge(db, "pid-one", "1:89abcdef", None)
    # An owner with no lock file and a lease that runs out in two seconds.
    _forge(db, "short-lease", "f" * 32, time.time() + 2)
    # The shortest lease there is: the server looks for expired work every third of a second.
    with ServerProcess(db=db, api_keys=("k",), extra_args=["--task-lease", "1"]) as srv:
        done = wait_all(srv, ["alive-pid", "pid-one", "short-lease"])
    assert {tid: info["status"] for tid, info in done.items()} == dict.fromkeys(done, "succeeded")


def test_tasks_of_a_live_server_stay_with_it_until_its_lease_runs_out(tmp_path: Path) -> None:
    db = tmp_path / "tasks.sqlite3"
    _forge(db, "leased", "e" * 32, time.time() + 3600)
    # With the shortest lease the server looks for expired work every third of a second: the
    # wait below spans its start-up claim and two more looks.
    with ServerProcess(db=db, api_keys=("k",), extra_args=["--task-lease", "1"]) as srv:
        time.sleep(0.8)
        assert task(srv, "leased", "k").json()["status"] == "running"


# -- idempotency ---------------------------------------------------------------------------------


def test_a_repeated_submission_with_the_same_idempotency_key_is_one_task(
    live: ServerProcess,
) -> None:
    body = {"messages": qa("idem"), "evaluation_criteria": REWARD}
    key = f"call-{uuid.uuid4()}"
    first = submit(live, body, **{"Idempotency-Key": key}).json()["task_id"]
    again = submit(live, body, **{"Idempotency-Key": key}).json()["task_id"]
    other = submit(live, body, **{"Idempotency-Key": f"call-{uuid.uuid4()}"}).json()["task_id"]
    plain = [submit(live, body).json()["task_id"] for _ in range(2)]
    assert first == again
    assert len({first, other, *plain}) == 4
    r = submit(live, {**body, "tags": {"changed": "yes"}}, **{"Idempotency-Key": key})
    assert r.status_code == 422 and "Idempotency-Key" in r.json()["detail"]
    assert submit(live, body, **{"Idempotency-Key": "x" * 300}).status_code == 422


def test_idempotency_keys_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "tasks.sqlite3"
    body = {"messages": qa("restart"), "evaluation_criteria": REWARD}
    with ServerProcess(db=db) as srv:
        first = submit(srv, body, **{"Idempotency-Key": "k-1"}).json()["task_id"]
    with ServerProcess(db=db) as srv:
        assert submit(srv, body, **{"Idempotency-Key": "k-1"}).json()["task_id"] == first


# -- who sees a task -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_keys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("keys") / "t.db"
    with ServerProcess(api_keys=("key-alice", "key-bob"), db=db) as srv:
        yield srv


def test_a_task_is_visible_only_to_the_key_that_submitted_it(two_keys: ServerProcess) -> None:
    body = {"messages": qa("mine"), "evaluation_criteria": REWARD}
    tid = submit(two_keys, body, "key-alice").json()["task_id"]
    assert task(two_keys, tid, "key-alice").status_code == 200
    theirs = task(two_keys, tid, "key-bob")
    assert theirs.status_code == 404
    assert theirs.json() == task(two_keys, "no-such-task", "key-bob").json() | {
        "detail": theirs.json()["detail"]
    }
    # The same Idempotency-Key from another key is another client's call: another task.
    a = submit(two_keys, body, "key-alice", **{"Idempotency-Key": "shared"}).json()["task_id"]
    b = submit(two_keys, body, "key-bob", **{"Idempotency-Key": "shared"}).json()["task_id"]
    assert a != b


def test_wait_returns_what_a_blocking_call_returns(client: Composo) -> None:
    messages = qa("same")
    blocking = client.evaluate(messages=messages, criteria=REWARD)
    submitted = client.evaluate(messages=messages, criteria=REWARD, block=False)
    waited = client.wait(submitted["task_id"], timeout=10, poll_interval=0.05)
    assert waited.criterion == REWARD
    assert waited.model_dump() == blocking.model_dump()
    named = client.evaluate(messages=messages, evaluator_name="rag_relevance", block=False)
    assert client.wait(named["task_id"], timeout=10, poll_interval=0.05).criterion == (
        client.evaluate(messages=messages, evaluator_name="rag_relevance").criterion
    )


# -- keys ----------------------------------------------------------------------------------------


def test_keys_from_a_file_and_the_banner_never_shows_them(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("# who may call\nfile-key-1\n\n  file-key-2  \n")
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "composo",
            "serve",
            "--port",
            str(port),
            "--api-key-file",
            str(keys),
            "--db",
            str(tmp_path / "t.db"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "COMPOSO_SERVER_API_KEYS": "env-key"},
    )
    try:
        assert proc.stdout is not None
        banner = "".join(proc.stdout.readline() for _ in range(3))
        url = f"http://127.0.0.1:{port}/api/v1/evals/reward"
        deadline = time.monotonic() + 20
        while True:  # the banner comes just before the port is bound
            try:
                HTTP.get(f"http://127.0.0.1:{port}/api/healthcheck", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        body = {"messages": qa("keys"), "evaluation_criteria": REWARD}
        for key, status in (("file-key-1", 200), ("file-key-2", 200), ("env-key", 200), ("x", 401)):
            assert HTTP.post(url, json=body, headers={"API-Key": key}).status_code == status, key
    finally:
        proc.terminate()
        proc.wait(10)
    assert "export COMPOSO_API_KEY=" in banner and "3 key(s)" in banner
    assert "file-key" not in banner and "env-key" not in banner


def test_an_empty_key_file_is_a_one_line_error(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("# nobody yet\n")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "composo",
            "serve",
            "--port",
            str(free_port()),
            "--api-key-file",
            str(keys),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("composo serve: error: --api-key-file") and "no API key" in line


def test_wait_times_out_counting_from_the_call_even_when_a_poll_is_slow() -> None:
    """``wait(timeout=1)`` gives up about a second after it was called, however long the first
    poll's answer took (not a second after that answer)."""
    with (
        LocalServer(latency=30, dev_faults=True) as srv,
        Composo(api_key="any-key", base_url=srv.base_url) as c,
    ):
        task = c.evaluate(messages=qa("slow poll"), criteria=REWARD, block=False)["task_id"]
        faults = {"faults": [{"delay": 0.8, "path": "/tasks/"}]}
        HTTP.post(srv.base_url + "/_dev/faults", json=faults, headers={"API-Key": "k"})
        start = time.monotonic()
        with pytest.raises(APITimeoutError):
            c.wait(task, timeout=1.0, poll_interval=0.1)
        assert time.monotonic() - start < 1.7  # from the first answer it would be 1.8 s
