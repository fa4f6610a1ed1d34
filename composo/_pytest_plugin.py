"""The ``composo`` pytest plugin (the ``pytest11`` entry point): three options, the ``composo``
fixture and the running test's name; the client and the local server load only when used.
Under pytest-xdist the controller merges the workers' records into one summary and file.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from composo._testing_session import RecordingComposo, TestSession

_KEY = "composo"  # workeroutput / workerinput key
_session_key = pytest.StashKey["TestSession"]()


def _score(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("composo", "Composo evaluations")
    group.addoption(
        "--composo-local",
        action="store_true",
        default=False,
        help="start a local Composo server (offline heuristic judge) for the session and point "
        "the composo fixture and composo.testing at it (needs composo[server])",
    )
    group.addoption(
        "--composo-out",
        metavar="FILE",
        default=None,
        help="write every evaluation made in the session to FILE as result rows (the format of "
        "`composo evaluate -o`; readable by `composo report` and `composo compare`)",
    )
    group.addoption(
        "--composo-min-score",
        metavar="SCORE",
        type=_score,
        default=None,
        help="default threshold of composo.testing.assert_score (default 0.5)",
    )


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    from composo._testing_session import TestSession, activate, deactivate

    server: tuple[str, str] | None = None
    if _is_worker(config):
        given = config.workerinput.get(_KEY)  # type: ignore[attr-defined]
        server = (given[0], given[1]) if given else None
    elif config.getoption("composo_local"):
        server = _start_server(config)
    session = TestSession(config.getoption("composo_min_score"), server)
    config.stash[_session_key] = session
    activate(session)
    config.add_cleanup(lambda: deactivate(session))


def _start_server(config: pytest.Config) -> tuple[str, str]:
    try:
        from composo.server import LocalServer
        from composo.server._local import require_server_extra

        require_server_extra()
    except ImportError as exc:
        raise pytest.UsageError(f"--composo-local: {exc}") from None
    srv = LocalServer(judge="heuristic", latency=0.0)
    srv.__enter__()
    config.add_cleanup(lambda: srv.__exit__(None, None, None))
    return (srv.base_url, srv.api_key)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: hand the session's local server to each worker."""
    session = node.config.stash.get(_session_key, None)
    if session is not None and session.server is not None:
        node.workerinput[_KEY] = list(session.server)


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    session = _active(None)
    if session is not None:
        session.recorder.current = nodeid


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    session = _active(None)
    if session is not None:
        session.recorder.current = None


def _active(config: pytest.Config | None) -> TestSession | None:
    from composo._testing_session import active

    if config is not None:
        return config.stash.get(_session_key, None)
    return active()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist controller: take in what a finished worker recorded."""
    data = getattr(node, "workeroutput", {}).get(_KEY)
    session = node.config.stash.get(_session_key, None)
    if data and session is not None:
        session.recorder.merge(data)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = _active(config)
    if state is None:
        return
    if _is_worker(config):
        if state.recorder:
            config.workeroutput[_KEY] = state.recorder.dump()  # type: ignore[attr-defined]
        return
    out = config.getoption("composo_out")
    if out:
        state.written = state.recorder.write(Path(out))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = _active(config)
    out = config.getoption("composo_out")
    if state is None or _is_worker(config) or not (state.recorder or out):
        return
    from composo.cli._names import label

    tr = terminalreporter
    tr.write_sep("=", "composo evaluations")
    headers = ["criterion", "count", "mean", "n/a", "errors", "passed", "failed"]
    rows = [[label(r[0], 60), *r[1:]] for r in state.recorder.summary()]
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    for row in [headers, *rows]:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        tr.write_line("  ".join(cells))
    if out:
        tr.write_line(f"composo: {state.written} result row(s) written to {out}")


@pytest.fixture(scope="session")
def composo(pytestconfig: pytest.Config) -> RecordingComposo:
    """A Composo client for the session: the local server's with ``--composo-local``, else one
    configured from ``COMPOSO_API_KEY`` / ``COMPOSO_BASE_URL``. Every evaluation it makes is
    recorded for the summary and ``--composo-out``."""
    state = _active(pytestconfig)
    if state is None:  # pragma: no cover - the plugin always sets one up
        raise RuntimeError("the composo plugin is not configured")
    return state.client()
