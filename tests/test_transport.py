"""The clients' connection layout (one pool per connection), against the local server over HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path

import certifi
import httpx
import pytest

from composo._core.transport import ShardedAsyncTransport, ShardedTransport
from tests.support.servers import ServerProcess, free_port

BODY = {
    "messages": [
        {"role": "user", "content": "What is the refund window?"},
        {"role": "assistant", "content": "Thirty days from delivery."},
    ],
    "evaluation_criteria": "Reward answers that state the refund window",
}


async def test_more_requests_than_connections_wait_their_turn(live: ServerProcess) -> None:
    transport = ShardedAsyncTransport(3, pool_size=2)  # two groups: 2 + 2 connections
    live.fault(*[{"delay": 0.05}] * 12)
    async with httpx.AsyncClient(transport=transport, base_url=live.base_url) as http:

        async def one() -> float:
            r = await http.post(
                "/api/v1/evals/reward", json=BODY, headers={"API-Key": live.api_key}
            )
            r.raise_for_status()
            score: float = r.json()["score"]
            return score

        scores = await asyncio.gather(*(one() for _ in range(12)))
    assert len(scores) == 12 and all(0.0 <= s <= 1.0 for s in scores)
    assert transport.busy == [0, 0]


async def test_connections_are_kept_alive_between_requests(live: ServerProcess) -> None:
    transport = ShardedAsyncTransport(4)
    async with httpx.AsyncClient(transport=transport, base_url=live.base_url) as http:
        peers = set()
        for _ in range(5):
            r = await http.get("/api/healthcheck")
            assert r.status_code == 200
            peers.add(r.extensions["network_stream"].get_extra_info("client_addr"))
    assert len(peers) == 1  # one request at a time: the same warm connection every time


async def test_a_refused_connection_gives_its_slot_back() -> None:
    transport = ShardedAsyncTransport(2)
    async with httpx.AsyncClient(transport=transport) as http:
        for _ in range(3):  # more attempts than connections: none stays counted as busy
            with pytest.raises(httpx.ConnectError):
                await http.get(f"http://127.0.0.1:{free_port()}/")
    assert transport.busy == [0]


def test_threads_each_get_a_connection_and_give_it_back(live: ServerProcess) -> None:
    from concurrent.futures import ThreadPoolExecutor

    transport = ShardedTransport(4, pool_size=2)  # two groups of two connections
    live.fault(*[{"delay": 0.2}] * 4)
    peers: set[object] = set()
    with httpx.Client(transport=transport, base_url=live.base_url) as http:

        def one(_: int) -> float:
            r = http.post("/api/v1/evals/reward", json=BODY, headers={"API-Key": live.api_key})
            r.raise_for_status()
            peers.add(r.extensions["network_stream"].get_extra_info("client_addr"))
            score: float = r.json()["score"]
            return score

        with ThreadPoolExecutor(4) as pool:
            scores = list(pool.map(one, range(4)))
            assert transport.busy == [0, 0]
            more = list(pool.map(one, range(8)))  # no delay now: warm connections come back
    assert len(scores + more) == 12 and all(0.0 <= s <= 1.0 for s in scores + more)
    assert len(peers) == 4  # four at once went out on four connections, none was opened after
    assert transport.busy == [0, 0]


def test_a_refused_sync_connection_gives_its_slot_back() -> None:
    transport = ShardedTransport(2)
    with httpx.Client(transport=transport) as http:
        for _ in range(3):
            with pytest.raises(httpx.ConnectError):
                http.get(f"http://127.0.0.1:{free_port()}/")
    assert transport.busy == [0]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_request_leaves_in_one_write(kind: str) -> None:
    """The head and a small body go out together: one packet, not a head the server must wait
    behind for the body."""
    import socket
    import threading

    from composo import AsyncComposo, Composo

    first_reads: list[bytes] = []
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            for _ in range(2):  # two requests on the kept-alive connection
                data = conn.recv(65536)  # whatever the first segment brought
                first_reads.append(data)
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(
                    next(
                        line.split(b":")[1]
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    )
                )
                while len(body) < length:
                    body += conn.recv(65536)
                answer = b'{"score": 1.0, "explanation": "ok"}'
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(answer), answer)
                )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.getsockname()[1]}"
    call = {"messages": BODY["messages"], "criteria": BODY["evaluation_criteria"]}
    if kind == "sync":
        with Composo(api_key="k", base_url=url) as client:
            for _ in range(2):
                client.evaluate(**call)
    else:

        async def twice() -> None:
            async with AsyncComposo(api_key="k", base_url=url) as client:
                for _ in range(2):
                    await client.evaluate(**call)

        asyncio.run(twice())
    thread.join(5)
    server.close()
    assert len(first_reads) == 2
    for data in first_reads:
        assert data.startswith(b"POST ") and data.endswith(b"}"), data[-40:]
        assert b"Reward answers that state the refund window" in data


def test_clients_made_one_after_another_load_the_ca_bundle_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A client made per request or per worker reuses the process's TLS context for the same
    settings (loading the CA bundle costs tens of milliseconds); other settings get their own."""

    def contexts(transport: ShardedTransport | ShardedAsyncTransport) -> set[int]:
        return {id(pool._pool._ssl_context) for pool in transport._pools}

    first, second = ShardedTransport(4), ShardedAsyncTransport(4)
    assert len(contexts(first) | contexts(second)) == 1
    unverified = ShardedTransport(2, verify=False)
    assert contexts(unverified) != contexts(first)
    assert contexts(unverified) == contexts(ShardedTransport(2, verify=False))
    # Pointing SSL_CERT_FILE elsewhere is a different CA setting, so a different context.
    bundle = tmp_path / "ca.pem"
    bundle.write_text(Path(certifi.where()).read_text())
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    assert contexts(ShardedTransport(2)) != contexts(first)
