"""How the clients reach the server: every request through httpx's public ``send``, the sync
client's own connections built from public httpx and httpcore pieces (that no private attribute
of another library is used anywhere: ``tests/test_private_access.py``)."""

from __future__ import annotations

import ast
import asyncio
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from composo import AsyncComposo, Composo
from composo._core.connections import Connections
from composo._core.network import Network
from tests.support.servers import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[1]
QA = [
    {"role": "user", "content": "What is the refund window?"},
    {"role": "assistant", "content": "Thirty days from delivery."},
]
BODY = {"messages": QA, "evaluation_criteria": "Reward answers that state the refund window"}


def counting(monkeypatch: pytest.MonkeyPatch, cls: type[Any], name: str) -> list[str]:
    """Patch ``cls.name`` (``send``) to record each request's path, then call the original."""
    seen: list[str] = []
    original = getattr(cls, name)

    if asyncio.iscoroutinefunction(original):

        async def patched(self: Any, request: httpx.Request, **kw: Any) -> Any:
            seen.append(request.url.path)
            return await original(self, request, **kw)
    else:

        def patched(self: Any, request: httpx.Request, **kw: Any) -> Any:  # type: ignore[misc]
            seen.append(request.url.path)
            return original(self, request, **kw)

    monkeypatch.setattr(cls, name, patched)
    return seen


def test_the_own_sync_client_sends_every_request_through_httpx_send(
    live: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = counting(monkeypatch, httpx.Client, "send")
    with Composo(api_key=live.api_key, base_url=live.base_url) as c:
        c.evaluate(messages=QA, criteria=["Reward clear answers", "Reward brevity"])
        c.evaluate_many([{"messages": QA}] * 3, "Reward clear answers")
        task = c.evaluate(messages=QA, criteria="Reward clear answers", block=False)
        c.wait(task["task_id"], timeout=30)
    assert seen.count("/api/v1/evals/reward") == 5
    assert seen.count("/api/v1/evals/reward/background") == 1
    assert any(path.startswith("/api/v1/evals/tasks/") for path in seen)


async def test_the_own_async_client_sends_every_request_through_httpx_send(
    live: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = counting(monkeypatch, httpx.AsyncClient, "send")
    async with AsyncComposo(api_key=live.api_key, base_url=live.base_url) as c:
        await c.evaluate(messages=QA, criteria=["Reward clear answers", "Reward brevity"])
        await c.evaluate_many([{"messages": QA}] * 3, "Reward clear answers")
    assert seen.count("/api/v1/evals/reward") == 5


def test_a_cached_client_still_sends_through_httpx_send(
    live: ServerProcess, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = counting(monkeypatch, httpx.Client, "send")
    for _ in range(2):
        with Composo(api_key=live.api_key, base_url=live.base_url, cache=tmp_path) as c:
            c.evaluate(messages=QA, criteria="Reward clear answers")
    assert seen.count("/api/v1/evals/reward") == 2  # the second answered by the cache below send
    assert [r["path"] for r in live.requests()].count("/api/v1/evals/reward") == 1


def test_more_requests_than_connections_wait_their_turn(live: ServerProcess) -> None:
    live.fault(*[{"delay": 0.05}] * 8)
    peers: set[Any] = set()
    lock = threading.Lock()
    with httpx.Client(transport=Connections(2), base_url=live.base_url) as http:

        def one() -> float:
            r = http.post("/api/v1/evals/reward", json=BODY, headers={"API-Key": live.api_key})
            r.raise_for_status()
            with lock:
                peers.add(r.extensions["network_stream"].get_extra_info("client_addr"))
            score: float = r.json()["score"]
            return score

        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(8) as pool:
            scores = list(pool.map(lambda _: one(), range(8)))
    assert len(scores) == 8 and all(0.0 <= s <= 1.0 for s in scores)
    assert len(peers) <= 2  # never more connections than allowed


def test_connections_are_kept_alive_between_requests(live: ServerProcess) -> None:
    with httpx.Client(transport=Connections(4), base_url=live.base_url) as http:
        peers = set()
        for _ in range(5):
            r = http.get("/api/healthcheck")
            assert r.status_code == 200
            peers.add(r.extensions["network_stream"].get_extra_info("client_addr"))
    assert len(peers) == 1  # one request at a time: the same warm connection every time


def test_a_refused_connection_is_httpx_connect_error_and_frees_its_place() -> None:
    with httpx.Client(transport=Connections(1)) as http:
        for _ in range(3):  # more attempts than connections: none stays taken
            with pytest.raises(httpx.ConnectError):
                http.get(f"http://127.0.0.1:{free_port()}/")


def test_clients_made_one_after_another_load_the_ca_bundle_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client made per request or per worker reuses the process's TLS context (loading the CA
    bundle costs milliseconds); another verify setting gets its own."""
    made: list[object] = []
    original = httpx.create_ssl_context

    def create(*args: Any, **kwargs: Any) -> Any:
        made.append(kwargs.get("verify", True))
        return original(*args, **kwargs)

    monkeypatch.setattr(httpx, "create_ssl_context", create)
    import composo._core.network as network

    monkeypatch.setattr(network, "_TLS", {})
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):  # the default bundle, not the machine's
        monkeypatch.delenv(name, raising=False)
    Connections(4), Connections(2)
    Connections(2, network=Network(verify=False)), Connections(1, network=Network(verify=False))
    assert made == [True, False]


def _declared() -> set[str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        names += extra
    return {re.split(r"[\[<>=!~; ]", n, maxsplit=1)[0].replace("-", "_").lower() for n in names}


def _imports(tree: ast.AST, inside_function: bool = False) -> Iterator[tuple[str, bool]]:
    """Every imported top-level package, and whether the import runs only inside a function."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0], inside_function
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], inside_function
        else:
            lazy = inside_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            yield from _imports(node, lazy)


def test_the_core_imports_only_the_standard_library_and_its_declared_dependencies() -> None:
    """At import, the core needs the standard library, httpx, httpcore, pydantic, tenacity and
    pluggy; an optional package (pandas for ``to_pandas()``, rich for ``progress=True``) is
    imported only inside the function that uses it, and only one the package declares."""
    core = {"httpx", "httpcore", "pydantic", "tenacity", "pluggy", "composo", "typing_extensions"}
    declared = _declared()
    assert core - {"composo", "typing_extensions"} <= declared
    eager, lazy = set(), set()
    for path in (ROOT / "composo" / "_core").rglob("*.py"):
        for name, inside in _imports(ast.parse(path.read_text())):
            if name not in sys.stdlib_module_names and name not in core:
                (lazy if inside else eager).add(f"{path.name}: {name}")
    assert eager == set()
    assert {entry.split(": ")[1] for entry in lazy} <= declared


async def test_async_shards_spread_requests_and_give_every_place_back(live: ServerProcess) -> None:
    from composo._core.connections import AsyncShards

    shards = AsyncShards(20, per_pool=7)  # three pools of at most 7 connections
    live.fault({"status": 503}, {"drop": True}, *[{"delay": 0.05}] * 30)
    peers: set[Any] = set()
    async with httpx.AsyncClient(transport=shards, base_url=live.base_url) as http:
        client = AsyncComposo(
            api_key=live.api_key, base_url=live.base_url, max_concurrent_requests=20,
            http_client=http,
        )  # fmt: skip
        results = await client.evaluate_many([{"messages": QA}] * 30, "Reward clear answers")
        for _ in range(3):
            r = await http.get("/api/healthcheck")
            peers.add(r.extensions["network_stream"].get_extra_info("client_addr"))
    assert [r.index for r in results if r.ok] == list(range(30))  # the 503 and drop retried
    # failed and answered requests all gave their place back
    assert shards._direct.load == [0, 0, 0]
    assert len(peers) == 1  # one at a time: the least busy pool's warm connection each time
