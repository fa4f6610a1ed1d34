"""The local server used as a careless client would: keys in URLs, and bodies over the limit
sent to the OTLP receiver, which reads its own bodies. Raw sockets on loopback where the way the
bytes arrive matters."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.servers import HTTP, TEST_API_KEY, ServerProcess
from tests.test_server_limits import connect, head, read_response

QA = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]
REWARD = "Reward responses that name the capital city"
KEY = "hardening-key-7Qx93"
OTHER_SECRET = "not-a-configured-key-55Zt"

# Every way a key might be put in a URL, and where.
LEAKS = [
    ("GET", f"/api/v1/evals/tasks/t1?api_key={KEY}"),
    ("GET", f"/api/v1/evals/tasks/t1?key={KEY}"),
    ("GET", f"/api/v1/evals/tasks/t1?page=2&token={OTHER_SECRET}"),
    ("GET", f"/api/v1/evals/tasks/t1?API-Key={KEY}"),
    ("GET", f"/api/v1/evals/tasks/t1?apiKey={OTHER_SECRET}"),
    ("GET", f"/api/v1/evals/tasks/t1?api%5Fkey={OTHER_SECRET}"),
    ("GET", f"/api/v1/evals/tasks/t1?access_token={OTHER_SECRET}"),
    ("GET", f"/api/v1/evals/tasks/t1?q={KEY}"),  # a configured key under any name
    ("POST", f"/api/v1/evals/reward?api_key={KEY}"),
    ("GET", f"/api/healthcheck?token={OTHER_SECRET}"),
    ("GET", f"/_dev/requests?x-api-key={OTHER_SECRET}"),
]


def _leak(srv: ServerProcess, method: str, path: str) -> tuple[int, str]:
    body = {"messages": QA, "evaluation_criteria": REWARD} if method == "POST" else None
    r = HTTP.request(method, srv.base_url + path, json=body, headers={"API-Key": srv.api_key})
    return r.status_code, r.json().get("detail", "")


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with the access log on (as ``composo serve`` runs by default)."""
    db = tmp_path_factory.mktemp("logged") / "t.db"
    with ServerProcess(api_keys=(KEY,), db=db) as srv:
        yield srv


def test_keys_in_query_strings_are_refused_and_never_logged(logged: ServerProcess) -> None:
    for method, path in LEAKS:
        status, detail = _leak(logged, method, path)
        assert status == 400, path
        assert "API-Key header" in detail and KEY not in detail and OTHER_SECRET not in detail
    # A query string without a credential is served as before.
    ok = HTTP.get(logged.base_url + "/api/healthcheck?verbose=1")
    assert ok.status_code == 200
    logged.stop()  # everything it will write is written
    out = logged.output()
    assert out.count(" 400") >= len(LEAKS)  # the refused requests are in the access log...
    assert "api_key=***" in out and "token=***" in out  # ...with their keys redacted
    assert KEY not in out and OTHER_SECRET not in out


def test_the_dev_record_and_the_session_servers_log_hold_no_key(live: ServerProcess) -> None:
    """The session server (the one most tests talk to) after query-string attempts and keys in
    other headers: nothing recorded or logged carries the key."""
    for method, path in LEAKS:
        status, _ = _leak(live, method, path.replace(KEY, TEST_API_KEY))
        assert status == 400
    r = HTTP.post(
        live.base_url + "/api/v1/evals/reward",
        json={"messages": QA, "evaluation_criteria": REWARD},
        headers={"API-Key": live.api_key, "X-Api-Key": live.api_key, "Cookie": live.api_key},
    )
    assert r.status_code == 200
    recorded = live.requests()
    assert {"method": "POST", "path": "/api/v1/evals/reward", "headers": {}, "body": None,
            "refused": 400} in recorded  # fmt: skip
    assert TEST_API_KEY not in json.dumps(recorded)
    # Everything this server has logged since the session began, other tests' requests included.
    out = live.output()
    assert "GET /api/v1/evals/tasks/t1?" in out
    assert TEST_API_KEY not in out and OTHER_SECRET not in out


BODY_LIMIT = 64 * 1024


# -- the OTLP receiver reads its own bodies: the same limits hold there ----------------------


@pytest.fixture(scope="module")
def otlp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    where = tmp_path_factory.mktemp("otlp")
    args = ["--otlp", "--trace-criteria", REWARD, "--otlp-results", str(where / "r.jsonl")]
    args += ["--max-body-bytes", str(BODY_LIMIT)]
    with ServerProcess(extra_args=args, db=where / "t.db") as srv:
        yield srv


def test_otlp_bodies_over_the_limit_are_refused_compressed_or_not(otlp: ServerProcess) -> None:
    import gzip
    import zlib

    url = otlp.base_url + "/v1/traces"
    auth = {"API-Key": otlp.api_key, "Content-Type": "application/json"}
    # Declared over the limit: answered from the head.
    with connect(otlp) as sock:
        sock.sendall(head("/v1/traces", 100 * BODY_LIMIT, otlp.api_key))
        assert read_response(sock)[0] == 413
    # Sent in chunks, without a length: cut at the limit.
    pieces = (b"x" * 8192 for _ in range(4 * BODY_LIMIT // 8192))
    assert HTTP.post(url, content=pieces, headers=auth).status_code == 413
    # Small on the wire, 16 MiB once inflated.
    bomb = b'{"resourceSpans": [' + b" " * (16 * 1024 * 1024) + b"]}"
    for encoding, packed in (("gzip", gzip.compress(bomb)), ("deflate", zlib.compress(bomb))):
        assert len(packed) < BODY_LIMIT
        r = HTTP.post(url, content=packed, headers={**auth, "Content-Encoding": encoding})
        assert r.status_code == 413, encoding
    # A well-formed export under the limit is still taken, compressed too.
    empty = gzip.compress(b'{"resourceSpans": []}')
    r = HTTP.post(url, content=empty, headers={**auth, "Content-Encoding": "gzip"})
    assert r.status_code == 200
    r = HTTP.post(url, content=empty[:-8], headers={**auth, "Content-Encoding": "gzip"})
    assert r.status_code == 400  # cut short: not an export
