"""The pytest plugin and composo.testing, exercised the way a user runs them: a real pytest session
in a subprocess over a test file that uses them, against the local server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from composo import Composo
from tests.support.cli import ROOT, clean_env, read_rows, run_composo
from tests.support.servers import ServerProcess

ROW_KEYS = {"index", "id", "criterion", "score", "explanation", "error"}
REFUND = "Reward answers that explain how refunds for returns work"
WINDOW = "Passes if the answer mentions the refund for returns"
GOOD = [
    {"role": "user", "content": "How do refunds work for returns?"},
    {
        "role": "assistant",
        "content": "Returns within 30 days get a full refund to your card; refunds for returns "
        "take five days.",
    },
]
BAD = [
    {"role": "user", "content": "How do refunds work for returns?"},
    {"role": "assistant", "content": "Bananas."},
]

APP_TESTS = f"""
import pytest

from composo.testing import assert_passes, assert_score

GOOD = {GOOD!r}
BAD = {BAD!r}
REFUND = {REFUND!r}
WINDOW = {WINDOW!r}


def test_good_answer():
    assert_score(GOOD, REFUND, min_score=0.5)


def test_good_answer_passes():
    assert_passes(GOOD, WINDOW)


def test_bad_answer():
    assert_score(BAD, REFUND, min_score=0.5)


def test_bad_answer_fails_the_binary_criterion():
    assert_passes(BAD, WINDOW)


def test_fixture_client(composo):
    responses = composo.evaluate(messages=GOOD, criteria=[REFUND, WINDOW])
    assert_score(responses, min_score=0.1)  # results already there: nothing evaluated again


@pytest.mark.parametrize("n", range(4))
def test_many(composo, n):
    composo.evaluate(messages=GOOD[:1] + [dict(GOOD[1], content="Refunds " * (n + 1))],
                     criteria=REFUND)


def test_a_scored_criterion_is_refused_by_assert_passes():
    with pytest.raises(ValueError, match="not a binary criterion"):
        assert_passes(GOOD, REFUND)
    with pytest.raises(ValueError, match="min_score"):
        assert_score(GOOD, REFUND, min_score=1.5)
"""

INI = "[pytest]\naddopts = -p no:cacheprovider\n"


def project(tmp_path: Path, tests: str = APP_TESTS) -> Path:
    (tmp_path / "pytest.ini").write_text(INI)
    (tmp_path / "test_app.py").write_text(tests)
    return tmp_path


def pytest_session(
    where: Path, *args: Any, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    # Each pytest process would load every installed plugin (and rewrite its asserts): these
    # sessions load only the two they use, by their pytest11 entry point names, as autoloading
    # would (a later `-p composo` would undo a `-p no:composo` in ``args``, so it is left out).
    plugins = ["-p", "xdist"] + ([] if "no:composo" in args else ["-p", "composo"])
    # Only the options given here: the outer run's PYTEST_ADDOPTS (say --durations) is not theirs.
    session_env = clean_env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", **(env or {}))
    session_env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rN", *plugins, *map(str, args)],
        capture_output=True,
        text=True,
        env=session_env,
        cwd=where,
        timeout=timeout,
    )


def server_env(live: ServerProcess) -> dict[str, str]:
    return {"COMPOSO_API_KEY": live.api_key, "COMPOSO_BASE_URL": live.base_url}


def summary(output: str) -> dict[str, list[str]]:
    """The plugin's end-of-session table: criterion -> [count, mean, n/a, errors, passed,
    failed]."""
    lines = output.splitlines()
    start = next(i for i, x in enumerate(lines) if "composo evaluations" in x)
    assert lines[start + 1].split() == [
        "criterion", "count", "mean", "n/a", "errors", "passed", "failed",
    ]  # fmt: skip
    out: dict[str, list[str]] = {}
    for line in lines[start + 2 :]:
        if line.startswith(("composo:", "=")) or not line.strip():
            break
        cells = line.split()
        out[" ".join(cells[:-6])] = cells[-6:]
    return out


def expected_score(live: ServerProcess, messages: list[dict[str, str]], criterion: str) -> Any:
    with Composo(api_key=live.api_key, base_url=live.base_url) as c:
        return c.evaluate(messages=messages, criteria=criterion)


def check_session(done: subprocess.CompletedProcess[str], out: Path) -> list[dict[str, Any]]:
    """What a user sees from the session over APP_TESTS; returns the rows written."""
    assert done.returncode == 1, done.stdout + done.stderr  # two tests fail
    assert re.search(r"2 failed, 8 passed", done.stdout), done.stdout
    table = summary(done.stdout)
    found = read_rows(out)
    means = {
        c: f"{sum(r['score'] for r in found if r['criterion'] == c) / n:.2f}"
        for c, n in ((REFUND, 7), (WINDOW, 3))
    }
    assert table == {
        REFUND: ["7", means[REFUND], "0", "0", "2", "1"],
        WINDOW: ["3", means[WINDOW], "0", "0", "2", "1"],
    }
    assert f"composo: 10 result row(s) written to {out}" in done.stdout
    # every evaluation of the session, once, in the command line's row format
    assert len(found) == 10 and all(set(r) == ROW_KEYS for r in found)
    assert all(r["error"] is None and r["explanation"] for r in found)
    ids = {r["id"] for r in found}
    assert "test_app.py::test_bad_answer" in ids and "test_app.py::test_many[3]" in ids
    assert len({(r["id"], r["criterion"]) for r in found}) == 10
    fixture_rows = [r for r in found if r["id"] == "test_app.py::test_fixture_client"]
    assert {r["criterion"] for r in fixture_rows} == {REFUND, WINDOW}
    assert len({r["index"] for r in fixture_rows}) == 1  # one test, one item
    assert sorted({r["index"] for r in found}) == list(range(9))
    return found


@pytest.fixture(scope="module")
def serial(
    server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], Path, int]:
    """One serial session over APP_TESTS, read by the two tests below: the session, its results
    file and the reward requests the server saw from it. Sharing it is safe: neither test
    changes the project or the file, and the requests are counted before any other test runs."""
    where = project(tmp_path_factory.mktemp("serial"))
    out = where / "evals.jsonl"
    server.reset()
    done = pytest_session(where, "-n", "0", "--composo-out", out, env=server_env(server))
    reward = [r for r in server.requests() if r["path"].endswith("/reward")]
    server.reset()
    return done, out, len(reward)


def test_a_session_asserts_summarises_and_writes_every_evaluation(
    live: ServerProcess,
    tmp_path: Path,
    serial: tuple[subprocess.CompletedProcess[str], Path, int],
) -> None:
    done, out, reward = serial

    found = check_session(done, out)
    assert reward == 10  # nothing evaluated twice, nothing missed
    # the failure messages: criterion, score, threshold and the judge's explanation
    bad = expected_score(live, BAD, REFUND)
    assert bad.score < 0.5
    assert f"criterion:   {REFUND}" in done.stdout
    assert f"score:       {bad.score:.3f}, below the threshold 0.5 by {0.5 - bad.score:.3f}" in (
        done.stdout
    )
    assert f"explanation: {bad.explanation}" in done.stdout
    binary = expected_score(live, BAD, WINDOW)
    assert binary.score == 0.0
    assert f"criterion:   {WINDOW}\nE         score:       0 (fails; a pass scores 1)" in (
        done.stdout
    )
    assert f"explanation: {binary.explanation}" in done.stdout
    good = next(r for r in found if r["id"] == "test_app.py::test_good_answer")
    assert good["score"] == expected_score(live, GOOD, REFUND).score

    # the file is a results file the command line reads
    report = run_composo("report", out, "-o", tmp_path / "r.html")
    assert report.returncode == 0, report.stderr
    same = run_composo("compare", out, out, "--fail-on-regression", "0")
    assert same.returncode == 0 and "regressed 0" in same.stdout


def test_under_xdist_the_controller_merges_the_workers(
    live: ServerProcess,
    tmp_path: Path,
    serial: tuple[subprocess.CompletedProcess[str], Path, int],
) -> None:
    one, serial_out, _ = serial
    check_session(one, serial_out)
    where = project(tmp_path)
    parallel = tmp_path / "parallel.jsonl"

    two = pytest_session(
        where, "-n", "2", "-v", "-v", "--composo-out", parallel, env=server_env(live)
    )

    check_session(two, parallel)
    ran = {
        w: set(re.findall(rf"\[{w}\] \[ *\d+%\] \w+ (test_app\S+)", two.stdout))
        for w in ("gw0", "gw1")
    }
    assert ran["gw0"] and ran["gw1"]  # both workers evaluated; their rows were merged
    assert summary(two.stdout) == summary(one.stdout)
    assert parallel.read_text() == serial_out.read_text()  # one file, the same whoever ran what
    assert len([r for r in live.requests() if r["path"].endswith("/reward")]) == 10


LOCAL_TESTS = """
import os

from composo.testing import assert_score

GOOD = {good!r}


def test_one(composo):
    assert composo.base_url.startswith("http://127.0.0.1:")
    name = "url-" + os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join({where!r}, name), "w") as f:
        f.write(composo.base_url)
    assert_score(GOOD, "Reward answers that explain how refunds for returns work")


def test_two(composo):
    assert_score(GOOD, "Reward answers that explain how refunds for returns work")
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_composo_local_serves_the_whole_session(tmp_path: Path, workers: str) -> None:
    where = project(tmp_path, LOCAL_TESTS.format(good=GOOD, where=str(tmp_path)))
    out = tmp_path / "o.jsonl"

    done = pytest_session(where, "-n", workers, "--composo-local", "--composo-out", out)

    assert done.returncode == 0, done.stdout + done.stderr
    assert len(read_rows(out)) == 2
    urls = {p.read_text() for p in tmp_path.glob("url-*")}
    assert len(urls) == 1  # the workers share the one server the controller started


DEFAULT_TESTS = f"""
from composo.testing import assert_score


def test_default_threshold():
    assert_score({GOOD!r}, {REFUND!r})
"""


def test_min_score_option_sets_the_default_threshold(live: ServerProcess, tmp_path: Path) -> None:
    where = project(tmp_path, DEFAULT_TESTS)
    score = expected_score(live, GOOD, REFUND).score
    low = pytest_session(where, "--composo-min-score", f"{score - 0.01:.3f}", env=server_env(live))
    assert low.returncode == 0, low.stdout
    high = pytest_session(where, "--composo-min-score", f"{score + 0.01:.3f}", env=server_env(live))
    assert high.returncode == 1
    assert f"below the threshold {score + 0.01:.3f}".rstrip("0") in high.stdout
    bad = pytest_session(where, "--composo-min-score", "2")
    assert bad.returncode == 4 and "--composo-min-score" in bad.stderr


def test_a_request_that_fails_is_an_error_row_not_a_low_score(
    live: ServerProcess, tmp_path: Path
) -> None:
    where = project(tmp_path, DEFAULT_TESTS)
    out = tmp_path / "o.jsonl"
    live.fault({"status": 400, "detail": "refused once"})
    done = pytest_session(where, "--composo-out", out, env=server_env(live))
    assert done.returncode == 1
    assert "BadRequestError" in done.stdout and "below the threshold" not in done.stdout
    (found,) = read_rows(out)
    assert found["error"].startswith("BadRequestError: refused once") and found["score"] is None
    assert summary(done.stdout) == {REFUND: ["1", "-", "0", "1", "0", "0"]}


def test_without_a_server_or_key_the_fixture_says_what_to_do(tmp_path: Path) -> None:
    where = project(tmp_path, "def test_uses(composo):\n    pass\n")
    done = pytest_session(where)
    assert done.returncode == 1
    assert "COMPOSO_API_KEY" in done.stdout and "--composo-local" in done.stdout


PLAIN_TESTS = """
import json
import os
import sys


def test_passes():
    assert 1 + 1 == 2


def test_fails():
    assert 1 + 1 == 3


def test_modules():
    with open(os.environ["MODULES_OUT"] + os.environ.get("PYTEST_XDIST_WORKER", ""), "w") as f:
        json.dump(sorted(sys.modules), f)
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_session_that_does_not_use_it_is_unchanged(tmp_path: Path, workers: str) -> None:
    where = project(tmp_path, PLAIN_TESTS)
    modules: dict[str, set[str]] = {}
    outputs: dict[str, list[str]] = {}
    for mode, extra in (("on", []), ("off", ["-p", "no:composo"])):
        env = {"MODULES_OUT": str(tmp_path / f"modules-{mode}")}
        done = pytest_session(where, "-n", workers, *extra, env=env)
        assert done.returncode == 1
        # timings and which worker ran a test vary from run to run; nothing else may
        outputs[mode] = [
            "".join(sorted(x)) if re.fullmatch(r"[.F]+ +\[100%\]", x) else x  # finishing order
            for x in (
                re.sub(r"\[gw\d+\]", "[gw]", re.sub(r" in [\d.]+s", "", line))
                for line in done.stdout.splitlines()
            )
        ]
        (dump,) = tmp_path.glob(f"modules-{mode}*")
        modules[mode] = set(json.loads(dump.read_text()))
        dump.unlink()
    assert outputs["on"] == outputs["off"]  # same report, no composo section
    added = modules["on"] - modules["off"]
    optional = ("fastapi", "uvicorn", "openai", "opentelemetry", "langchain_core", "llama_index")
    ours = ("composo.server", "composo.cli", "composo.tracing", "composo.testing")
    assert not {m for m in added if m.split(".")[0] in optional or m.startswith(ours)}, added
    assert "composo._pytest_plugin" in added


def test_the_plugin_is_registered_by_the_package() -> None:
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="pytest11") if e.name == "composo"]
    assert ep.value == "composo._pytest_plugin"
    # autoloaded, as a user's pytest does (less two slow plugins unrelated to this check)
    unrelated = ("-p", "no:langsmith_plugin", "-p", "no:hypothesispytest")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *unrelated, "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=clean_env(),
        timeout=60,
    )
    for option in ("--composo-local", "--composo-out", "--composo-min-score"):
        assert option in done.stdout
