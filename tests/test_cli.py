"""The `composo` command line against the local server: run in the test process, and as a process
of its own where the test needs one (a kill, a missing dependency)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import clean_env, page_data, run_cli
from tests.support.servers import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT / "examples" / "data" / "conversations.jsonl"
OTLP_EXPORT = ROOT / "examples" / "data" / "traces.jsonl"
CRITERIA = [
    "Reward answers that explain the refund policy",
    "Passes if the answer mentions the return window",
]
ROW_KEYS = {"index", "id", "criterion", "score", "explanation", "error", "judge", "model_core"}
ROW_KEYS |= {"judge_model", "source", "metadata"}


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSO_")}
    out["COLUMNS"] = "200"
    return out


def composo(*args: Any, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``composo ARGS`` run in this process (tests/support/cli.py)."""
    return run_cli(*args, stdin=stdin, cwd=ROOT)


def server_args(live: ServerProcess) -> list[str]:
    return ["--base-url", live.base_url, "--api-key", live.api_key]


def crit_args(criteria: list[str] = CRITERIA) -> list[str]:
    return [a for c in criteria for a in ("-c", c)]


def line(i: int, **extra: Any) -> str:
    return json.dumps(
        {
            "id": f"q{i}",
            "messages": [
                {"role": "user", "content": f"Question {i}: how do refunds work for returns?"},
                {
                    "role": "assistant",
                    "content": "Returns within 30 days get a full refund." * (1 + i % 3),
                },
            ],
            **extra,
        }
    )


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def pairs(found: list[dict[str, Any]]) -> Counter[tuple[int, str]]:
    return Counter((r["index"], r["criterion"]) for r in found)


def test_evaluates_a_file_and_summarises(live: ServerProcess, tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(line(i) for i in range(6)) + "\n")
    out = tmp_path / "out.jsonl"

    done = composo("evaluate", data, *crit_args(), "-o", out, *server_args(live))

    assert done.returncode == 0, done.stderr
    found = rows(out)
    assert all(set(r) == ROW_KEYS and r["error"] is None for r in found)
    assert pairs(found) == Counter({(i, c): 1 for i in range(6) for c in CRITERIA})
    assert {r["id"] for r in found if r["index"] == 4} == {"q4"}
    binary = [r["score"] for r in found if r["criterion"] == CRITERIA[1]]
    assert set(binary) <= {0.0, 1.0}
    # the summary: one line per criterion with count, mean, median, min, max, n/a, errors
    for header in ("count", "mean", "median", "min", "max", "n/a", "errors"):
        assert header in done.stderr
    assert re.search(r"refund policy\s*│\s*6\s*│", done.stderr)


def test_bad_lines_are_reported_recorded_and_skipped(live: ServerProcess, tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(
        "\n".join(
            [
                line(0),
                '{"messages": [ oops',
                "",
                "[1, 2, 3]",
                json.dumps({"id": "lonely", "messages": [{"role": "user", "content": "hi"}]}),
                line(5),
            ]
        )
        + "\n"
    )
    out = tmp_path / "out.jsonl"

    done = composo("evaluate", data, *crit_args(), "-o", out, *server_args(live))

    assert done.returncode == 1
    assert "line 2: not valid JSON" in done.stderr
    assert "line 4: expected a JSON object, got a list" in done.stderr
    assert "line 5 (id lonely):" in done.stderr and "at least 2" in done.stderr
    found = rows(out)
    failed = {r["index"] for r in found if r["error"]}
    assert failed == {1, 3, 4}  # 0-based line numbers; the blank line 3 is skipped
    assert pairs(found) == Counter({(i, c): 1 for i in (0, 1, 3, 4, 5) for c in CRITERIA})
    assert next(r for r in found if r["index"] == 4)["id"] == "lonely"
    assert all(r["score"] is not None or r["explanation"] for r in found if r["index"] in (0, 5))


def test_metadata_comes_back_on_each_row_and_an_unknown_field_is_refused(
    live: ServerProcess, tmp_path: Path
) -> None:
    data = tmp_path / "data.jsonl"
    meta = {"customer": "c0", "tier": ["gold"]}
    data.write_text(
        "\n".join([line(0, metadata=meta), line(1), line(2, metdata={"customer": "c2"})]) + "\n"
    )
    out = tmp_path / "out.jsonl"

    done = composo("evaluate", data, *crit_args(), "-o", out, *server_args(live))

    assert done.returncode == 1
    assert "line 3 (id q2): ComposoValidationError: item: unknown field 'metdata' (did you " in (
        done.stderr
    )
    found = {(r["index"], r["criterion"]): r for r in rows(out)}
    assert all(set(r) == ROW_KEYS for r in found.values()) and len(found) == 6
    assert [found[0, c]["metadata"] for c in CRITERIA] == [meta, meta]
    assert [found[1, c]["metadata"] for c in CRITERIA] == [None, None]
    assert all(
        found[2, c]["error"] and "did you mean 'metadata'" in found[2, c]["error"] for c in CRITERIA
    )
    assert not any("customer" in json.dumps(r["body"]) for r in live.requests())


def test_reads_stdin_and_writes_stdout(live: ServerProcess) -> None:
    data = "\n".join(line(i) for i in range(3)) + "\n"
    done = composo("evaluate", "-", "-c", CRITERIA[0], *server_args(live), stdin=data)
    assert done.returncode == 0, done.stderr
    found = [json.loads(x) for x in done.stdout.splitlines()]
    assert sorted((r["index"], r["id"]) for r in found) == [(0, "q0"), (1, "q1"), (2, "q2")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-c", "be nice"], "must begin with 'Reward'"),
        (["-c", CRITERIA[0], "--concurrency", "0"], "--concurrency"),
        ([], "-c"),
        (["-c", CRITERIA[0], "--local", "--base-url", "http://127.0.0.1:9"], "--local"),
        (["-c", CRITERIA[0], "--api-key", "k", "-o", "/no/such/dir/out.jsonl"], "-o: cannot"),
        (["-c", CRITERIA[0], "--api-key", "k", "--base-url", "127.0.0.1:9"], "base_url"),
        (["-c", CRITERIA[0], "--api-key", "k", "--tag", "env"], "--tag: expected KEY=VALUE"),
        (["-c", CRITERIA[0], "--api-key", "k", "--model-core", "fast"], "model_core: 'fast'"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(line(0) + "\n")
    done = composo("evaluate", data, *args)
    assert done.returncode == 2 and message in done.stderr


def test_missing_input_and_missing_key_exit_2(tmp_path: Path) -> None:
    done = composo("evaluate", tmp_path / "nope.jsonl", "-c", CRITERIA[0])
    assert done.returncode == 2 and "no such file" in done.stderr
    data = tmp_path / "data.jsonl"
    data.write_text(line(0) + "\n")
    done = composo("evaluate", data, "-c", CRITERIA[0], "--base-url", "http://127.0.0.1:9")
    assert done.returncode == 2 and "--api-key" in done.stderr and "--local" in done.stderr


def one_line(stderr: str) -> str:
    """The single line a run the server refuses ends with (nothing else on stderr)."""
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("command", ["evaluate", "evaluate-traces"])
def test_a_wrong_key_stops_at_the_first_refusal_with_its_own_status(
    live: ServerProcess, tmp_path: Path, command: str
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(line(i) for i in range(200)) + "\n")
    source = data if command == "evaluate" else OTLP_EXPORT
    out = tmp_path / "out.jsonl"
    done = composo(
        command, source, *crit_args(), "-o", out, "--concurrency", "4",
        "--base-url", live.base_url, "--api-key", "wrong-key-0123456789",
    )  # fmt: skip
    assert done.returncode == 5
    said = one_line(done.stderr)
    assert said == (
        f"composo {command}: the server refused the API key (401: invalid API key); set the "
        "right one with --api-key"
    )
    assert len(live.requests()) == 1  # one refusal, not one per request in flight
    assert rows(out) == []  # nothing is wrong with the data: a re-run sends it all


def test_a_wrong_key_from_the_environment_names_the_variable(
    live: ServerProcess, tmp_path: Path
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(line(0) + "\n")
    environment = clean_env(COMPOSO_API_KEY="wrong-key-0123456789", COMPOSO_BASE_URL=live.base_url)
    for command in (["evaluate", data, *crit_args()], ["usage"]):
        done = run_cli(*command, env=environment)
        assert done.returncode == 5
        assert one_line(done.stderr).endswith("set the right one with COMPOSO_API_KEY")


def test_a_base_url_with_the_api_path_stops_after_one_request(
    live: ServerProcess, tmp_path: Path
) -> None:
    from tests.support.counting_proxy import CountingProxy

    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(line(i) for i in range(20)) + "\n")
    with CountingProxy(live.base_url) as proxy:  # counts what the server answers 404 too
        done = composo(
            "evaluate", data, *crit_args(), "-o", tmp_path / "out.jsonl",
            "--base-url", proxy.base_url + "/api/v1", "--api-key", live.api_key,
        )  # fmt: skip
    assert done.returncode == 5
    assert f"use {proxy.base_url}; change --base-url" in one_line(done.stderr)
    assert proxy.total == 1


def test_no_server_stops_the_run_at_once_and_says_how_to_start_one(tmp_path: Path) -> None:
    from tests.support.servers import free_port

    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(line(i) for i in range(300)) + "\n")
    port = free_port()
    out = tmp_path / "out.jsonl"
    done = composo(
        "evaluate", data, "-c", CRITERIA[0], "-o", out, "--concurrency", "4",
        "--base-url", f"http://127.0.0.1:{port}", "--api-key", "k",
    )  # fmt: skip
    assert done.returncode == 5
    said = one_line(done.stderr)
    assert said.startswith(f"composo evaluate: could not reach http://127.0.0.1:{port}/")
    assert said.endswith(f"`composo serve --port {port}`; or change --base-url")
    assert rows(out) == []


@pytest.mark.slow
def test_a_server_that_goes_away_mid_run_stops_it(live: ServerProcess, tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(line(i) for i in range(300)) + "\n")
    live.fault({"delay": 0.0}, *[{"drop": True}] * 300)  # answers once, then never again
    out = tmp_path / "out.jsonl"
    done = composo(
        "evaluate", data, "-c", CRITERIA[0], "-o", out, "--concurrency", "2", "--no-cache",
        *server_args(live),
    )  # fmt: skip
    assert done.returncode == 5
    assert "requests in a row failed; the last: could not reach" in done.stderr
    assert done.stderr.splitlines()[-1].startswith("composo evaluate: stopped: ")
    written = rows(out)
    assert written[0]["error"] is None and 10 < len(written) < 40  # stopped, not 300 failures


@pytest.mark.parametrize("command", [["usage"], ["history", "-o", "h.jsonl"]])
def test_history_and_usage_without_a_key_say_how_to_give_one(command: list[str]) -> None:
    done = composo(*command)
    assert done.returncode == 2
    assert one_line(done.stderr) == (
        f"composo {command[0]}: error: no API key: pass --api-key KEY or set COMPOSO_API_KEY"
    )


def test_requests_sent_are_counted_exactly(live: ServerProcess, tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(line(0) + "\n")
    live.fault({"status": 503})  # retried: two requests for one pair
    done = composo(
        "evaluate", data, "-c", CRITERIA[0], "-o", tmp_path / "o.jsonl", *server_args(live)
    )
    assert done.returncode == 0, done.stderr
    assert len(live.requests()) == 2
    assert "cache: 0 answer(s) from the cache, 2 request(s) sent" in done.stderr


def test_failed_pairs_are_retried_on_resume(live: ServerProcess, tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(line(i) for i in range(4)) + "\n")
    out = tmp_path / "out.jsonl"
    live.fault({"status": 400, "detail": "refused once"})

    first = composo(
        "evaluate", data, *crit_args(), "-o", out, "--concurrency", "1", *server_args(live)
    )
    assert first.returncode == 1
    (error,) = [r["error"] for r in rows(out) if r["error"]]
    assert error.startswith("BadRequestError: refused once (status 400)")

    # a run for another criterion adds its rows and leaves the earlier failure in place
    other = composo("evaluate", data, "-c", "RAG", "-o", out, *server_args(live))
    assert other.returncode == 1  # the file still holds that failure
    assert sum(1 for r in rows(out) if r["error"]) == 1 and len(rows(out)) == 8 + 4 * 4
    live.reset()

    second = composo("evaluate", data, *crit_args(), "-o", out, *server_args(live))
    assert second.returncode == 0, second.stderr
    assert "23 pair(s) already scored, 1 failed pair(s) to retry" in second.stderr
    found = [r for r in rows(out) if r["criterion"] in CRITERIA]
    assert pairs(found) == Counter({(i, c): 1 for i in range(4) for c in CRITERIA})
    assert all(r["error"] is None for r in rows(out))
    assert len(live.requests()) == 1  # the retry only; scored pairs were not sent again


@pytest.mark.slow
def test_resume_after_kill_9_writes_every_pair_exactly_once(
    live: ServerProcess, tmp_path: Path
) -> None:
    n = 60
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(line(i) for i in range(n)) + "\n")
    out = tmp_path / "out.jsonl"
    live.fault(*[{"delay": 0.03}] * (2 * n))  # slow every request down so the kill lands mid-run

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "composo",
            "evaluate",
            str(data),
            *crit_args(),
            "-o",
            str(out),
            "--concurrency",
            "4",
            *server_args(live),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env(),
        cwd=ROOT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        not out.exists() or len(out.read_bytes().splitlines()) < 20
    ):
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    before = rows(out)
    assert 20 <= len(before) < 2 * n, "the kill should land in the middle of the run"
    with out.open("ab") as f:  # as if the kill had cut a row in half
        f.write(b'{"index": 59, "id": "q59", "criterion": "Reward ans')

    done = composo("evaluate", data, *crit_args(), "-o", out, *server_args(live))

    assert done.returncode == 0, done.stderr
    assert "damaged or duplicate lines removed" in done.stderr
    found = rows(out)
    assert pairs(found) == Counter({(i, c): 1 for i in range(n) for c in CRITERIA})
    assert found[: len(before)] == before  # what was written before the kill is kept as it was


def test_local_flag_runs_the_example_dataset(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = composo(
        "evaluate", DATASET, "-c", "rag_faithfulness", "-c", "tool_selection", "-o", out, "--local"
    )
    assert done.returncode == 0, done.stderr
    found = rows(out)
    n = sum(1 for x in DATASET.read_text().splitlines() if x.strip())
    assert n >= 50 and len(found) == 2 * n
    tool_rows = [r for r in found if r["criterion"].startswith("Reward tool calls")]
    assert any(r["score"] is None for r in tool_rows) and any(
        r["score"] is not None for r in tool_rows
    )
    assert len({r["score"] for r in found}) > 5  # the dataset shows a spread


def test_report_is_one_self_contained_html_file(live: ServerProcess, tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join([line(i) for i in range(8)] + ["not json"]) + "\n")
    out = tmp_path / "out.jsonl"
    composo("evaluate", data, *crit_args(), "-o", out, *server_args(live))
    worst = min(
        (r for r in rows(out) if r["score"] is not None and r["criterion"] == CRITERIA[0]),
        key=lambda r: r["score"],
    )

    done = composo("report", out, "-o", tmp_path / "report.html")

    assert done.returncode == 0, done.stderr
    page = (tmp_path / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    # nothing fetched: no source or stylesheet to load, one link (the icon, a data: URL), and a
    # policy that lets only the page's own script run and allows no other origin
    assert not re.search(r"""src\s*=|@import|url\(|<link rel="stylesheet""", page)
    (icon,) = re.findall(r"""href="([^"]*)""", page)
    assert icon.startswith("data:image/svg+xml,")
    assert "default-src 'none'; script-src 'sha256-" in page
    shown = page_data(page)
    assert [c["count"] for c in shown["runs"][0]["criteria"]] == [9, 9]
    cells = {i["key"]: i["runs"][0]["0"] for i in shown["items"]}
    assert cells[worst["id"]][:3] == [worst["score"], None, worst["explanation"]]
    assert "not valid JSON" in cells["line 9"][1]  # the error row is listed
    assert composo("report", tmp_path / "missing.jsonl").returncode == 2


def test_criteria_lists_the_library() -> None:
    done = composo("criteria")
    assert done.returncode == 0
    from composo import criteria

    assert "rag_faithfulness" in done.stdout and "binary_cites_sources" in done.stdout
    assert criteria.tool_selection[:40] in done.stdout


def test_core_install_without_rich_prints_a_plain_summary(
    live: ServerProcess, tmp_path: Path
) -> None:
    # A core install has the `composo` command but not rich (the `cli` extra): the run must
    # still finish with its summary, as plain text.
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(line(i) for i in range(3)) + "\n")
    out = tmp_path / "out.jsonl"
    code = (
        "import sys; sys.modules['rich'] = None; from composo.cli import main; "
        "sys.exit(main(sys.argv[1:]))"
    )
    args = ["evaluate", str(src), *crit_args(), "-o", str(out), *server_args(live)]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env(), timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert len(rows(out)) == 6
    lines = done.stderr.splitlines()
    header = next(i for i, x in enumerate(lines) if x.startswith("criterion"))
    assert lines[header].split() == [
        "criterion",
        "count",
        "mean",
        "median",
        "min",
        "max",
        "n/a",
        "errors",
    ]
    assert lines[header + 1].startswith(CRITERIA[0][:40])
    assert lines[header + 1].split()[-7] == "3"  # count


def test_run_wide_tags_and_model_core_reach_every_request(
    live: ServerProcess, tmp_path: Path
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(line(0) + "\n" + line(1, tags={"env": "item-wins"}) + "\n")
    done = composo(
        "evaluate", src, "-c", CRITERIA[0], "--tag", "env=ci", "--tag", "build=42",
        "--model-core", "align-20250529", "-o", tmp_path / "out.jsonl", *server_args(live),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    bodies = sorted(
        (r["body"] for r in live.requests() if r["path"].endswith("/reward")),
        key=lambda b: b["messages"][0]["content"],
    )
    assert [b["tags"] for b in bodies] == [
        {"env": "ci", "build": "42"},
        {"env": "item-wins", "build": "42"},
    ]
    assert {b["model_core"] for b in bodies} == {"align-20250529"}
