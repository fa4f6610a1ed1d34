"""The result cache: hits, misses, what is never stored, concurrent writers, the CLI's default."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from composo import AsyncComposo, Composo, ComposoValidationError
from composo._cache import ResultCache
from tests.support.cli import ROOT, clean_env, conversation, read_rows, run_composo
from tests.support.servers import ServerProcess

REFUND = "Reward answers that explain the refund policy"
MESSAGES = [
    {"role": "user", "content": "How do refunds work?"},
    {"role": "assistant", "content": "Returns within 30 days get a full refund."},
]


def sent(live: ServerProcess) -> int:
    return len([r for r in live.requests() if "/evals/" in r["path"]])


def test_a_repeated_request_is_answered_from_the_cache(live: ServerProcess, tmp_path: Path) -> None:
    with Composo(api_key=live.api_key, base_url=live.base_url, cache=tmp_path) as client:
        first = client.evaluate(MESSAGES, criteria=REFUND)
        again = client.evaluate(list(MESSAGES), criteria=REFUND)
        assert sent(live) == 1
        assert again == first
        # anything that changes the request is another entry: the criterion, an option
        client.evaluate(MESSAGES, criteria="Reward concise answers")
        client.evaluate(MESSAGES, criteria=REFUND, model_core="align-20250529")
        assert sent(live) == 3
        assert client.cache is not None and client.cache.info().entries == 3
    # a new client on the same directory (a new process would be the same) reads it too
    with Composo(api_key=live.api_key, base_url=live.base_url, cache=str(tmp_path)) as client:
        assert client.evaluate(MESSAGES, criteria=REFUND) == first
    assert sent(live) == 3


def test_without_cache_every_request_is_sent(client: Composo, live: ServerProcess) -> None:
    client.evaluate(MESSAGES, criteria=REFUND)
    client.evaluate(MESSAGES, criteria=REFUND)
    assert sent(live) == 2 and client.cache is None


def test_errors_are_not_cached(live: ServerProcess, tmp_path: Path) -> None:
    live.fault({"status": 400, "detail": "refused once"})
    with Composo(api_key=live.api_key, base_url=live.base_url, cache=tmp_path) as client:
        with pytest.raises(Exception, match="refused once"):
            client.evaluate(MESSAGES, criteria=REFUND)
        assert client.cache is not None and client.cache.info().entries == 0
        ok = client.evaluate(MESSAGES, criteria=REFUND)  # sent again, and now stored
        assert ok.score is not None and sent(live) == 2
        assert client.cache.info().entries == 1


def test_data_retention_none_is_never_stored(live: ServerProcess, tmp_path: Path) -> None:
    with Composo(api_key=live.api_key, base_url=live.base_url, cache=tmp_path) as client:
        client.evaluate(MESSAGES, criteria=REFUND, data_retention="none")
        client.evaluate(MESSAGES, criteria=REFUND, data_retention="none")
        assert sent(live) == 2
        assert client.cache is not None and client.cache.info().entries == 0


async def test_async_client_uses_the_same_cache(live: ServerProcess, tmp_path: Path) -> None:
    with Composo(api_key=live.api_key, base_url=live.base_url, cache=tmp_path) as client:
        first = client.evaluate(MESSAGES, criteria=REFUND)
    async with AsyncComposo(api_key=live.api_key, base_url=live.base_url, cache=tmp_path) as ac:
        assert await ac.evaluate(MESSAGES, criteria=REFUND) == first
        results = await ac.evaluate_many([{"messages": MESSAGES}] * 3, REFUND)
    assert sent(live) == 1 and all(r.response == first for r in results)


def test_cache_with_a_supplied_http_client_is_refused(live: ServerProcess) -> None:
    import httpx

    with (
        httpx.Client() as http,
        pytest.raises(ComposoValidationError, match="cannot be combined with http_client"),
    ):
        Composo(api_key=live.api_key, base_url=live.base_url, http_client=http, cache=True)


WRITER = textwrap.dedent(
    """
    import sys
    from composo._cache import ResultCache
    cache = ResultCache(sys.argv[1])
    me = sys.argv[2]
    for i in range(200):
        cache.put(f"{me}-{i}", f"answer {me} {i}".encode(), {"x-composo-judge": me})
        cache.put(f"shared-{i}", b"same answer")
        assert cache.get(f"{me}-{i}") == (f"answer {me} {i}".encode(), {"x-composo-judge": me})
    """
)


def test_several_processes_write_one_cache_at_once(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), f"w{n}"], cwd=ROOT)
        for n in range(4)
    ]
    assert [p.wait(60) for p in procs] == [0, 0, 0, 0]
    cache = ResultCache(tmp_path)
    assert cache.info().entries == 4 * 200 + 200
    assert cache.get("w3-199") == (b"answer w3 199", {"x-composo-judge": "w3"})
    assert cache.get("shared-7") == (b"same answer", {})
    assert cache.clear() == 1000 and cache.info().entries == 0


# -- the command line: on by default -------------------------------------------------------------


def dataset(tmp_path: Path, n: int = 4) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_text("".join(conversation(i) + "\n" for i in range(n)))
    return path


def evaluate(live: ServerProcess, *args: object) -> subprocess.CompletedProcess[str]:
    return run_composo(
        "evaluate", *args, "-c", REFUND, "--base-url", live.base_url, "--api-key", live.api_key
    )


def test_rerunning_a_dataset_into_a_new_output_makes_no_requests(
    live: ServerProcess, tmp_path: Path
) -> None:
    data = dataset(tmp_path)
    first = evaluate(live, data, "-o", tmp_path / "one.jsonl")
    assert first.returncode == 0, first.stderr
    assert "cache: 0 answer(s) from the cache, 4 request(s) sent" in first.stderr
    assert sent(live) == 4

    second = evaluate(live, data, "-o", tmp_path / "two.jsonl")
    assert second.returncode == 0, second.stderr
    assert "cache: 4 answer(s) from the cache, 0 request(s) sent" in second.stderr
    assert sent(live) == 4  # the server saw nothing new

    def by_index(name: str) -> list[dict[str, object]]:
        rows = sorted(read_rows(tmp_path / name), key=lambda r: str(r["index"]))
        return [{k: v for k, v in r.items() if k != "source"} for r in rows]

    assert by_index("two.jsonl") == by_index("one.jsonl")  # the same scores, the same judge
    assert {r["source"] for r in read_rows(tmp_path / "two.jsonl")} == {"cache"}

    fresh = evaluate(live, data, "-o", tmp_path / "three.jsonl", "--no-cache")
    assert fresh.returncode == 0 and "cache:" not in fresh.stderr
    assert sent(live) == 8


def test_cache_info_and_clear(live: ServerProcess, tmp_path: Path) -> None:
    where = tmp_path / "cache"
    data = dataset(tmp_path, 3)
    assert evaluate(live, data, "-o", tmp_path / "a.jsonl", "--cache-dir", where).returncode == 0
    info = run_composo("cache", "info", "--cache-dir", where)
    assert info.returncode == 0
    assert f"path: {where / 'results.sqlite3'}" in info.stdout and "entries: 3" in info.stdout

    cleared = run_composo("cache", "clear", "--cache-dir", where)
    assert cleared.returncode == 0 and "removed 3 cached answer(s)" in cleared.stdout
    assert "entries: 0" in run_composo("cache", "info", "--cache-dir", where).stdout
    again = evaluate(live, data, "-o", tmp_path / "b.jsonl", "--cache-dir", where)
    assert "0 answer(s) from the cache, 3 request(s) sent" in again.stderr


def test_the_default_cache_follows_the_user_cache_directory(
    live: ServerProcess, tmp_path: Path
) -> None:
    home = tmp_path / "xdg"
    env = clean_env(XDG_CACHE_HOME=str(home))
    done = subprocess.run(
        [sys.executable, "-m", "composo", "cache", "info"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and str(home / "composo" / "results.sqlite3") in done.stdout
    assert "entries: 0" in done.stdout


def test_own_http_client_caches_through_the_public_transport(
    live: ServerProcess, tmp_path: Path
) -> None:
    import httpx

    import composo

    transport = composo.CachingTransport(httpx.HTTPTransport(), composo.ResultCache(tmp_path))
    with (
        httpx.Client(transport=transport) as http,
        Composo(api_key=live.api_key, base_url=live.base_url, http_client=http) as client,
    ):
        first = client.evaluate(MESSAGES, criteria=REFUND)
        assert client.evaluate(MESSAGES, criteria=REFUND) == first
    assert sent(live) == 1 and (transport.hits, transport.misses, transport.sent) == (1, 1, 1)


# -- bounded: a size cap (oldest first) and an age ------------------------------------------------


def fill(cache: ResultCache, n: int, size: int = 1000) -> list[str]:
    """``n`` answers of about ``size`` bytes, written oldest to newest; their keys."""
    keys = [f"{i:064x}" for i in range(n)]
    for i, key in enumerate(keys):
        cache.put(key, f'{{"score": {i % 10 / 10}, "explanation": "{"x" * size}"}}'.encode())
    return keys


def test_writing_three_times_the_cap_keeps_it_under_the_cap_oldest_first(tmp_path: Path) -> None:
    cap = 512 * 1024
    cache = ResultCache(tmp_path, max_bytes=cap)
    keys = fill(cache, 3 * cap // 1000)

    info = cache.info()
    assert info.stored_bytes <= cap and info.max_bytes == cap
    assert info.stored_bytes > 0.9 * cap  # room is made as needed, not by emptying the cache
    kept = [cache.get(k) is not None for k in keys]
    assert kept == sorted(kept)  # what is left is the newest, and all of it
    assert sum(kept) == info.entries and not kept[0] and kept[-1]
    assert cache.path.stat().st_size < 1.5 * cap  # the file reuses what was freed (3x unbounded)
    assert pickle.loads(pickle.dumps(cache)).max_bytes == cap  # as it travels to a worker


def test_answers_past_their_age_are_not_served_and_go(tmp_path: Path) -> None:
    old = ResultCache(tmp_path)
    keys = fill(old, 3)
    old.close()
    time.sleep(0.2)
    cache = ResultCache(tmp_path, max_age=0.1)
    assert [cache.get(k) for k in keys] == [None] * 3 and cache.info().entries == 0
    cache.put("new", b"{}")
    assert cache.get("new") == (b"{}", {})


def test_limits_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live: ServerProcess
) -> None:
    monkeypatch.setenv("COMPOSO_CACHE_MAX_SIZE", "2MB")
    monkeypatch.setenv("COMPOSO_CACHE_MAX_AGE", "12h")
    cache = ResultCache(tmp_path)
    assert (cache.max_bytes, cache.max_age) == (2 * 1024 * 1024, 12 * 3600.0)
    assert ResultCache(tmp_path, max_bytes=1000).max_bytes == 1000  # an argument wins

    monkeypatch.setenv("COMPOSO_CACHE_MAX_SIZE", "lots")
    with pytest.raises(ComposoValidationError, match="COMPOSO_CACHE_MAX_SIZE: 'lots' is not a"):
        Composo(api_key=live.api_key, base_url=live.base_url, cache=tmp_path)
    with pytest.raises(ComposoValidationError, match="max_age: expected a number above 0"):
        ResultCache(tmp_path, max_bytes=1, max_age=0)
    assert live.requests() == []


def test_cache_prune_from_the_command_line(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    keys = fill(cache, 10)
    per_answer = cache.info().stored_bytes // 10
    cache.close()

    done = run_composo("cache", "prune", "--cache-dir", tmp_path, "--max-size", 4 * per_answer)
    assert done.returncode == 0, done.stderr
    assert f"removed 6 cached answer(s) ({(6 * per_answer / 1024):.1f} KB) from " in done.stdout
    assert "4 left" in done.stdout
    cache = ResultCache(tmp_path)
    assert [cache.get(k) is not None for k in keys] == [False] * 6 + [True] * 4
    cache.close()

    time.sleep(0.2)
    aged = run_composo("cache", "prune", "--cache-dir", tmp_path, "--max-age", "0.1s")
    assert "removed 4 cached answer(s)" in aged.stdout and "0 left" in aged.stdout
    info = run_composo("cache", "info", "--cache-dir", tmp_path).stdout
    assert "entries: 0" in info and "limits: 1.0 GB (oldest answers go first), 30 days" in info

    bad = run_composo("cache", "prune", "--cache-dir", tmp_path, "--max-size", "big")
    assert bad.returncode == 2 and "--max-size: 'big' is not a size" in bad.stderr
    misplaced = run_composo("cache", "info", "--cache-dir", tmp_path, "--max-age", "1d")
    assert misplaced.returncode == 2 and "go with prune" in misplaced.stderr


def test_a_cache_file_of_another_layout_is_started_afresh(tmp_path: Path) -> None:
    """A file left by another version (other columns) is emptied on opening, not written into
    with an error on every answer."""
    import sqlite3

    old = sqlite3.connect(tmp_path / "results.sqlite3")
    old.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, body BLOB NOT NULL)")
    old.execute("INSERT INTO answers VALUES ('k', x'00')")
    old.commit()
    old.close()
    cache = ResultCache(tmp_path)
    assert cache.get("k") is None
    cache.put("k", b'{"score": 1.0}', {})
    assert cache.get("k") == (b'{"score": 1.0}', {})
    cache.close()
