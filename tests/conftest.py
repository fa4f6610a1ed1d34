"""Shared fixtures: one real local server per test session, and clients pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from composo import AsyncComposo, Composo
from tests.support.servers import ServerProcess

if TYPE_CHECKING:
    from tests.support.openai_standin import OpenAIStandIn


@pytest.fixture(autouse=True)
def _private_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test gets an empty result cache of its own (the command line caches by default), never
    the user's: XDG_CACHE_HOME is what the cache directory follows, and subprocesses inherit it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.delenv("COMPOSO_CACHE_DIR", raising=False)


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    """The local Composo server (heuristic judge, dev fault switch on), over loopback HTTP."""
    with ServerProcess() as srv:
        yield srv


@pytest.fixture
def live(server: ServerProcess) -> Iterator[ServerProcess]:
    """The session server, with faults and recorded requests cleared before and after the test."""
    server.reset()
    yield server
    server.reset()


@pytest.fixture
def composo_env(live: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> ServerProcess:
    """COMPOSO_API_KEY and COMPOSO_BASE_URL point at the local server (as the reference's
    examples expect)."""
    monkeypatch.setenv("COMPOSO_API_KEY", live.api_key)
    monkeypatch.setenv("COMPOSO_BASE_URL", live.base_url)
    return live


@pytest.fixture
def client(live: ServerProcess) -> Iterator[Composo]:
    with Composo(api_key=live.api_key, base_url=live.base_url) as c:
        yield c


@pytest.fixture
async def aclient(live: ServerProcess) -> AsyncIterator[AsyncComposo]:
    async with AsyncComposo(api_key=live.api_key, base_url=live.base_url) as c:
        yield c


@pytest.fixture(scope="session")
def _openai_standin_server() -> Iterator[OpenAIStandIn]:
    from tests.support.openai_standin import OpenAIStandIn  # FastAPI and uvicorn: only if used

    with OpenAIStandIn() as oa:
        yield oa


@pytest.fixture
def openai_standin(_openai_standin_server: OpenAIStandIn) -> OpenAIStandIn:
    """The loopback stand-in for the OpenAI HTTP API (one per session), reset for this test."""
    _openai_standin_server.reset()
    return _openai_standin_server


# The slow lane, marked ``slow`` (``-m "not slow"`` is the day-to-day lane; ``.ci/run`` runs all):
# what starts a cluster (Ray, a Spark JVM), forks or interrupts processes, or waits out a stalled
# peer; and the modules whose every test starts processes of its own (documentation blocks and
# examples run as a user runs them, nested pytest sessions, the CI workflow's steps, a browser,
# pip's resolver, servers started, killed and restarted). Single slow tests elsewhere carry
# ``@pytest.mark.slow``. The cluster modules (marked ``cluster``; they also run the documented
# Ray and Spark programs, on their own cluster) run longest: started first, the other workers'
# tests fill the time around them instead of waiting on them at the end.
_FIRST = ("tests/test_ray.py", "tests/test_spark.py")
_SLOW_MODULES = (
    *_FIRST,
    "tests/test_concurrency.py",
    "tests/test_server_process_state.py",
    "tests/test_docs_examples.py",
    "tests/test_reference_examples.py",
    "tests/test_tracing_examples.py",
    "tests/test_platform_api_docs.py",
    "tests/test_testing_plugin.py",
    "tests/test_ci_example.py",
    "tests/test_view.py",
    "tests/test_install_lines.py",
    "tests/test_import_cost.py",
    "tests/test_server_reliability.py",
    "tests/test_server_tasks.py",
    "tests/test_server_hardening.py",
    "tests/test_server_fuzz.py",
    "tests/test_provenance.py",
    "tests/test_tracing_otlp_files.py",
)


def _is_slow(item: pytest.Item) -> bool:
    return item.nodeid.startswith(_SLOW_MODULES) or "stalls" in item.name


def _fast_lane(config: pytest.Config) -> bool:
    return "not slow" in (config.getoption("markexpr") or "")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A lane does not import the modules it leaves out whole: each worker would import Ray,
    PySpark, Hypothesis and the rest only to deselect their tests."""
    if not collection_path.is_relative_to(config.rootpath):
        return None
    path = collection_path.relative_to(config.rootpath).as_posix()
    lane = (config.getoption("markexpr") or "").strip()
    if _fast_lane(config):
        return path in _SLOW_MODULES or None
    if "not cluster" in lane:
        return path in _FIRST or None
    if lane == "cluster" and collection_path.name.startswith("test_"):
        return path not in _FIRST or None
    return None


# Each module runs whole on one worker (``--dist loadfile``): a module-scoped fixture (a server
# with settings of its own, a browser, a stand-in, a nested session) starts once, and a library a
# module imports is imported by one worker, not by every worker handed some of its tests. The
# modules that take longest go next after the clusters, so the short ones even out the end.
_LONG = (
    "tests/test_docs_examples.py",
    "tests/test_concurrency.py",
    "tests/test_throttling.py",
    "tests/test_server_reliability.py",
    "tests/test_proxy.py",
    "tests/test_view.py",
    "tests/test_install_lines.py",
    "tests/test_testing_plugin.py",
)


def _order(item: pytest.Item) -> tuple[bool, int]:
    module = item.nodeid.split("::")[0]
    return module not in _FIRST, _LONG.index(module) if module in _LONG else len(_LONG)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
        if item.nodeid.startswith(_FIRST):
            item.add_marker(pytest.mark.cluster)
    items.sort(key=_order)
