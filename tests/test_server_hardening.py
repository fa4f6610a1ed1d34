"""The local server used as an attacker or a careless client would: keys in URLs, bursts of
uploads past the memory budget, whole bodies sent before reading a refusal, and texts long
enough that the judge reads them in pieces. Raw sockets on loopback where the way the bytes
arrive matters."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator

import pytest

from composo import Composo
from composo.server import ServerConfig
from tests.support.servers import HTTP, TEST_API_KEY, ServerProcess
from tests.test_server_limits import closed_by_server, connect, head, read_response

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


# -- the budget for bodies in flight ---------------------------------------------------------

BODY_LIMIT = 64 * 1024
BUDGET = 2 * BODY_LIMIT


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Room for two 64 KiB bodies in flight at once."""
    db = tmp_path_factory.mktemp("budgeted") / "t.db"
    args = ["--max-body-bytes", str(BODY_LIMIT), "--max-inflight-bytes", str(BUDGET)]
    with ServerProcess(extra_args=args, db=db) as srv:
        yield srv


def _payload(size: int) -> bytes:
    """A legal reward body of exactly ``size`` bytes."""
    answer = {"role": "assistant", "content": ""}
    base = {"messages": [QA[0], answer], "evaluation_criteria": REWARD}
    answer["content"] = "The capital of France is Paris. " * 8
    answer["content"] += "." * (size - len(json.dumps(base).encode()))
    data = json.dumps(base).encode()
    assert len(data) == size
    return data


def test_uploads_past_the_budget_get_503_before_their_body_is_read(
    budgeted: ServerProcess,
) -> None:
    size = 60 * 1024
    payload = _payload(size)
    held = [connect(budgeted) for _ in range(2)]
    try:
        for sock in held:  # two bodies in flight, each short of its end
            sock.sendall(head("/api/v1/evals/reward", size, budgeted.api_key) + payload[:-100])
        time.sleep(0.2)  # the server has taken them from the budget
        with connect(budgeted) as third:
            third.sendall(head("/api/v1/evals/reward", size, budgeted.api_key))  # no body byte
            status, headers, body = read_response(third)
        assert status == 503 and headers["retry-after"] == "1"
        assert "--max-inflight-bytes" in json.loads(body)["detail"]
        # A request without a body does not need room: the server keeps answering.
        assert HTTP.get(budgeted.base_url + "/api/healthcheck").status_code == 200
        for sock in held:  # the held uploads finish and are judged
            sock.sendall(payload[-100:])
            status, _, body = read_response(sock)
            assert status == 200 and json.loads(body)["score"] is not None
    finally:
        for sock in held:
            sock.close()
    # Their room is given back: the next upload is admitted.
    with connect(budgeted) as again:
        again.sendall(head("/api/v1/evals/reward", size, budgeted.api_key) + payload)
        assert read_response(again)[0] == 200


def test_a_chunked_upload_past_the_budget_is_cut_with_503(budgeted: ServerProcess) -> None:
    size = 60 * 1024
    payload = _payload(size)
    held = [connect(budgeted) for _ in range(2)]
    try:
        for sock in held:  # 8 KiB of room left
            sock.sendall(head("/api/v1/evals/reward", size, budgeted.api_key) + payload[:-100])
        time.sleep(0.2)
        with connect(budgeted) as chunked:
            chunked.sendall(
                head(
                    "/api/v1/evals/reward", None, budgeted.api_key, "Transfer-Encoding: chunked\r\n"
                )
            )
            for start in range(0, 16 * 1024, 4096):  # more than the room left
                piece = payload[start : start + 4096]
                chunked.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            status, headers, _ = read_response(chunked)
            assert status == 503 and headers["retry-after"] == "1"
            assert headers.get("connection") == "close"
        for sock in held:
            sock.sendall(payload[-100:])
            assert read_response(sock)[0] == 200
    finally:
        for sock in held:
            sock.close()


def test_a_budget_smaller_than_one_body_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="max_inflight_bytes: must be at least max_body_bytes"):
        ServerConfig(max_body_bytes=BODY_LIMIT, max_inflight_bytes=BODY_LIMIT - 1)
    # Unset, the budget is never smaller than one body.
    assert ServerConfig(max_body_bytes=1 << 30).inflight_budget == 1 << 30


# -- answering before the body is read, to a client that sends it all first -------------------


def _send_all_then_read(sock: socket.socket, request: bytes) -> tuple[int, dict[str, str], bytes]:
    sock.sendall(request)  # everything first, as a simple client does
    return read_response(sock)


@pytest.mark.parametrize("size_mib", [5, 9])
def test_a_keyless_body_sent_whole_with_connection_close_still_reads_its_401(
    live: ServerProcess, size_mib: int
) -> None:
    size = size_mib * 1024 * 1024
    request = head("/api/v1/evals/reward", size, None, "Connection: close\r\n") + b"x" * size
    with connect(live, timeout=30) as sock:
        status, _, body = _send_all_then_read(sock, request)
        assert status == 401 and "API-Key" in json.loads(body)["detail"]
        assert closed_by_server(sock)


def test_an_oversized_body_sent_whole_still_reads_its_413(live: ServerProcess) -> None:
    size = 12 * 1024 * 1024  # over the 10 MiB limit, under what the server discards to answer
    request = head("/api/v1/evals/reward", size, live.api_key, "Connection: close\r\n")
    with connect(live, timeout=30) as sock:
        status, _, body = _send_all_then_read(sock, request + b"x" * size)
    assert status == 413 and "limit" in json.loads(body)["detail"]


def test_a_head_over_the_limit_sent_with_its_body_still_reads_its_431(live: ServerProcess) -> None:
    filler = "X-Trace-Note: " + "n" * (32 * 1024) + "\r\n"
    body = b"x" * (8 * 1024 * 1024)
    request = head("/api/v1/evals/reward", len(body), live.api_key, filler) + body
    with connect(live, timeout=30) as sock:
        status, headers, _ = _send_all_then_read(sock, request)
        assert status == 431 and headers.get("connection") == "close"
        assert closed_by_server(sock)


def test_a_refused_client_that_keeps_sending_is_cut_off(live: ServerProcess) -> None:
    """The server discards what a refused client still sends for a short while only: a client
    that goes on sending past that finds the connection gone."""
    from composo.server._connections import DRAIN_SECONDS

    size = 9 * 1024 * 1024
    with connect(live, timeout=10) as sock:
        sock.sendall(head("/api/v1/evals/reward", size, None, "Connection: close\r\n"))
        assert read_response(sock)[0] == 401
        time.sleep(DRAIN_SECONDS + 0.5)
        with pytest.raises((BrokenPipeError, ConnectionResetError)):
            for _ in range(64):  # the first writes may still land in the system's buffers
                sock.sendall(b"x" * 65536)
                time.sleep(0.01)


# -- long texts are read in pieces, with the same verdicts -----------------------------------


def test_phrases_and_words_across_the_judges_reading_pieces_are_all_counted(
    client: Composo,
) -> None:
    """The heuristic judge reads a long answer 64 KiB at a time, cut at a space: a phrase cut
    in two ("not | sure") still counts, and no word is counted twice."""
    from composo.server.judges._heuristic import _PIECE

    head_text = "maybe " + "lorem " * ((_PIECE - 1 - 3 - 6) // 6)  # ends just before the cut
    answer = head_text + "not sure," + "y" * 20_000 + " the capital of France is Paris" * 3000
    assert answer.rfind(" ", _PIECE // 2, _PIECE) == len(head_text) + 3  # the cut: "not | sure"
    res = client.evaluate(
        messages=[QA[0], {"role": "assistant", "content": answer}], criteria=REWARD
    )
    words = len(re.findall(r"[a-z0-9]+", answer))
    assert f"answer of {words} word(s)" in res.explanation
    assert "hedging (2 hedges)" in res.explanation


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
