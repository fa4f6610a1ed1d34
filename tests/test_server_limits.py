"""What the local server refuses before reading a body, and how it bounds what it reads: raw
sockets on loopback, so partial and oversized requests are sent exactly as a careless client
would."""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.servers import HTTP, ServerProcess

QA = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]
REWARD = "Reward responses that name the capital city"
LIMIT = 65536


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with a 64 KiB body limit."""
    db = tmp_path_factory.mktemp("guarded") / "t.db"
    args = ["--max-body-bytes", str(LIMIT)]
    with ServerProcess(extra_args=args, db=db) as srv:
        yield srv


def connect(srv: ServerProcess, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def head(path: str, length: int | None, key: str | None, extra: str = "") -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if key is not None:
        lines.append(f"API-Key: {key}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode()


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response (status, lower-cased headers, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a full response: {data!r}")
        data += chunk
    raw_head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = raw_head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in header_lines)}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return int(status_line.split()[1]), headers, rest[:length]


def closed_by_server(sock: socket.socket) -> bool:
    """True when the server has closed the connection (reads end), within the socket timeout."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def test_no_key_is_401_before_any_body_byte(live: ServerProcess) -> None:
    with connect(live) as sock:
        sock.sendall(head("/api/v1/evals/reward", 10 * 1024 * 1024 - 1, None))
        status, _, body = read_response(sock)  # answered although no body byte was sent
    assert status == 401
    assert "API-Key" in json.loads(body)["detail"]


def test_wrong_key_is_401_and_the_connection_stays_usable(guarded: ServerProcess) -> None:
    payload = json.dumps({"messages": QA, "evaluation_criteria": REWARD}).encode()
    with connect(guarded) as sock:
        sock.sendall(head("/api/v1/evals/reward", len(payload), "wrong-key") + payload)
        assert read_response(sock)[0] == 401
        # The unread body was discarded, not mistaken for the next request.
        sock.sendall(head("/api/v1/evals/reward", len(payload), guarded.api_key) + payload)
        status, _, body = read_response(sock)
    assert status == 200 and json.loads(body)["score"] is not None


def test_declared_length_over_the_limit_is_413_at_once(guarded: ServerProcess) -> None:
    with connect(guarded) as sock:
        sock.sendall(head("/api/v1/evals/reward", 100 * LIMIT, guarded.api_key))
        status, headers, body = read_response(sock)
        assert status == 413 and str(LIMIT) in json.loads(body)["detail"]
        assert headers.get("connection") == "close"  # far over: not worth reading to the end
        assert closed_by_server(sock)


def test_chunked_body_is_cut_at_the_limit(guarded: ServerProcess) -> None:
    with connect(guarded) as sock:
        sock.sendall(
            head("/api/v1/evals/reward", None, guarded.api_key, "Transfer-Encoding: chunked\r\n")
        )
        chunk = b"x" * 16384
        # A little over the limit (no length was declared), then wait for the answer.
        for _ in range(LIMIT // len(chunk) + 1):
            sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        status, headers, body = read_response(sock)
        assert status == 413 and str(LIMIT) in json.loads(body)["detail"]
        assert headers.get("connection") == "close"


HEAD_LIMIT = 16 * 1024  # what uvicorn's h11 parser buffers of an unfinished head


def test_a_head_just_under_the_limit_is_served(guarded: ServerProcess) -> None:
    payload = json.dumps({"messages": QA, "evaluation_criteria": REWARD}).encode()
    filler = "X-Trace-Note: " + "n" * (HEAD_LIMIT - 1024) + "\r\n"
    with connect(guarded) as sock:
        sock.sendall(head("/api/v1/evals/reward", len(payload), guarded.api_key, filler) + payload)
        status, _, body = read_response(sock)
    assert status == 200 and json.loads(body)["score"] is not None


def test_a_head_that_never_ends_is_refused_at_the_limit(guarded: ServerProcess) -> None:
    """A header line that keeps growing and never ends is refused once what the server holds of
    it passes the limit, and the connection is closed: the server holds no more of it."""
    with connect(guarded) as sock:
        start = b"POST /api/v1/evals/reward HTTP/1.1\r\nHost: x\r\nX-Endless: "
        sock.sendall(start)
        sent = len(start)
        # Send a kilobyte at a time until the server answers (or 4 MiB have gone).
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            while sent < 256 * HEAD_LIMIT and not select.select([sock], [], [], 0.002)[0]:
                sock.sendall(b"a" * 1024)
                sent += 1024
        try:
            status: int | None = read_response(sock)[0]
        except (ConnectionError, OSError):
            status = None  # the refusal was overtaken by the reset of what was still arriving
        assert status in (400, None)
        assert closed_by_server(sock)
    assert HEAD_LIMIT < sent < 4 * HEAD_LIMIT  # refused soon after the limit, not at the end


def test_requests_over_the_connection_cap_are_answered_503(tmp_path: Path) -> None:
    """``--max-connections`` is uvicorn's ``limit_concurrency``: past it requests get 503, and
    once connections close the server serves again."""
    args = ["--max-connections", "4"]
    with ServerProcess(extra_args=args, db=tmp_path / "t.db") as srv:
        held = [connect(srv) for _ in range(4)]
        try:
            time.sleep(0.2)  # the server has accepted them
            with connect(srv) as extra:
                extra.sendall(b"GET /api/healthcheck HTTP/1.1\r\nHost: x\r\n\r\n")
                assert read_response(extra)[0] == 503
        finally:
            for sock in held:
                sock.close()
        deadline = time.monotonic() + 10
        while True:  # once they are gone, requests are served again
            try:
                if HTTP.get(srv.base_url + "/api/healthcheck", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not recover after the cap"
            time.sleep(0.02)


def test_unauthenticated_uploads_do_not_grow_memory(live: ServerProcess) -> None:
    """Keyless uploads that declare 10 MiB and send part of it are answered at once and never
    buffered: the server's resident memory grows far less than what was sent."""
    assert live.proc is not None
    before = rss_kib(live.proc.pid)
    socks = []
    sent = 0
    try:
        for _ in range(30):
            sock = connect(live)
            sock.sendall(head("/api/v1/evals/reward", 10 * 1024 * 1024, None))
            socks.append(sock)
        for sock in socks:
            assert read_response(sock)[0] == 401
            try:
                sock.sendall(b"x" * (2 * 1024 * 1024))  # discarded by the server as it arrives
                sent += 2 * 1024 * 1024
            except (BrokenPipeError, ConnectionResetError):
                pass
        time.sleep(0.2)
        grown = rss_kib(live.proc.pid) - before
    finally:
        for sock in socks:
            sock.close()
    assert sent >= 30 * 1024 * 1024
    assert grown < sent // 1024 // 3  # KiB: a third of what arrived, had it been kept


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")  # pragma: no cover


def test_dev_routes_need_the_key_and_record_only_authenticated_requests(
    live: ServerProcess,
) -> None:
    url = live.base_url
    assert HTTP.get(url + "/_dev/requests").status_code == 401
    assert HTTP.get(url + "/_dev/requests", headers={"API-Key": "nope"}).status_code == 401
    r = HTTP.post(url + "/_dev/faults", json={"faults": [{"status": 500}]})
    assert r.status_code == 401
    body = {"messages": QA, "evaluation_criteria": REWARD}
    secret = "hidden-marker-6180"
    keyless = {**body, "tags": {"m": secret}}
    r = HTTP.post(url + "/api/v1/evals/reward", json=keyless, headers={"X-Marker": secret})
    assert r.status_code == 401  # no fault ran: the queue was never filled
    # The refused request shows where it went, nothing of what it carried.
    assert live.requests() == [
        {
            "method": "POST",
            "path": "/api/v1/evals/reward",
            "headers": {},
            "body": None,
            "refused": 401,
        }
    ]
    live.reset()
    assert (
        HTTP.post(
            url + "/api/v1/evals/reward", json=body, headers={"API-Key": live.api_key}
        ).status_code
        == 200
    )
    assert len(live.requests()) == 1


def test_the_dev_record_is_bounded(live: ServerProcess) -> None:
    from composo.server._devswitch import MAX_RECORDED_BYTES

    big = {
        "messages": [{"role": "user", "content": "y" * (1024 * 1024)}],
        "evaluation_criteria": REWARD,
    }
    n = MAX_RECORDED_BYTES // (1024 * 1024) + 8
    with httpx.Client(headers={"API-Key": live.api_key}, timeout=30) as http:
        for _ in range(n):
            assert http.post(live.base_url + "/api/v1/evals/reward", json=big).status_code == 422
    kept = live.requests()
    assert 0 < len(kept) < n  # the oldest went first
    assert sum(len(json.dumps(r["body"])) for r in kept) <= MAX_RECORDED_BYTES + 2 * 1024 * 1024


def test_answers_on_a_kept_alive_connection_are_not_held_back() -> None:
    """With Nagle's algorithm on, a body written after its head waits for the client's delayed
    ACK: about 40 ms on every request after the first on a connection. The server's listening
    socket says it is TCP, so asyncio (which uvicorn serves it with) turns Nagle off on every
    connection it accepts."""
    from composo.server._local import listening_socket

    async def accepted_nodelay() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def accepted(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        listening = listening_socket("127.0.0.1", 0)
        async with await asyncio.start_server(accepted, sock=listening):
            _, writer = await asyncio.open_connection(*listening.getsockname())
            value = await seen
            writer.close()
        return value

    assert asyncio.run(accepted_nodelay()) != 0
