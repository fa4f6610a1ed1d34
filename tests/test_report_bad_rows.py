"""`composo report` and `composo compare` on results files edited by hand or written by other
tools: scores that are not numbers from 0 to 1 and fields of the wrong type are set aside, listed
and counted, with their own exit status, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import conversation, page_data, run_composo
from tests.support.servers import ServerProcess

SCORED = "Reward answers that explain the refund policy"
EXIT_BAD_ROWS = 4

# Python's json writes these as the bare words NaN, Infinity, -Infinity (as other tools do)
HOSTILE: list[tuple[str, Any, str]] = [
    ("nan", float("nan"), "score NaN"),
    ("inf", float("inf"), "score inf"),
    ("-inf", float("-inf"), "score -inf"),
    ("negative", -5, "score -5"),
    ("huge", 1e308, "score 1e+308"),
    ("above one", 1.5, "score 1.5"),
    ("explanation", 0.5, "explanation 42"),
    ("id", 0.5, "id 7"),
]


def good(i: int, score: float = 0.8) -> dict[str, Any]:
    return {
        "index": i,
        "id": f"q{i}",
        "criterion": SCORED,
        "score": score,
        "explanation": f"reason {i}",
        "error": None,
    }


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def hostile_row(name: str, score: Any) -> dict[str, Any]:
    row = good(90, score)
    if name == "explanation":
        row["explanation"] = 42
    if name == "id":
        row["id"] = 7
    return row


@pytest.mark.parametrize(("name", "score", "said"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_report_lists_each_bad_row_and_exits_4(
    tmp_path: Path, name: str, score: Any, said: str
) -> None:
    rows = [good(i, 0.2 + i / 20) for i in range(10)] + [hostile_row(name, score)]
    results = write(tmp_path / "out.jsonl", rows)
    page_path = tmp_path / "report.html"

    done = run_composo("report", results, "-o", page_path)

    assert done.returncode == EXIT_BAD_ROWS, done.stderr
    assert "Traceback" not in done.stderr
    assert "1 row(s) set aside" in done.stderr and "line 11" in done.stderr
    assert said in done.stderr
    (run,) = page_data(page_path)["runs"]
    assert run["set_aside"] == 1 and run["problems"][0]["line"] == 11
    assert said in run["problems"][0]["problem"]
    # the good rows are all there and the bad one is counted nowhere else: 10 scored
    assert [(c["count"], c["scored"]) for c in run["criteria"]] == [(10, 10)]


def test_report_on_a_file_of_only_bad_rows_says_so(tmp_path: Path) -> None:
    results = tmp_path / "out.jsonl"
    results.write_text('{"index": 0, "criterion": "Reward x", "score": NaN}\n[1, 2]\n')

    done = run_composo("report", results, "-o", tmp_path / "r.html")

    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr  # one line says it all
    assert "holds no result rows (2 line(s) are not results" in done.stderr
    assert "line 1: score NaN" in done.stderr


def test_clean_results_still_exit_0(tmp_path: Path) -> None:
    results = write(tmp_path / "out.jsonl", [good(i) for i in range(3)])
    done = run_composo("report", results, "-o", tmp_path / "r.html")
    assert done.returncode == 0, done.stderr
    assert "set aside" not in done.stderr
    assert page_data(tmp_path / "r.html")["runs"][0]["set_aside"] == 0


def test_compare_sets_bad_rows_aside_and_exits_4(tmp_path: Path) -> None:
    base = write(tmp_path / "base.jsonl", [good(i, 0.5) for i in range(6)])
    rows = [good(i, 0.6) for i in range(6)]
    rows[2]["score"] = float("nan")
    rows[4]["explanation"] = {"text": "a dict"}
    new = write(tmp_path / "new.jsonl", rows)

    done = run_composo("compare", base, new)

    assert done.returncode == EXIT_BAD_ROWS and "Traceback" not in done.stderr
    assert "2 row(s) set aside" in done.stderr
    assert "over 4 item(s)" in done.stdout  # the bad rows are not paired
    assert "+0.100" in done.stdout


def test_a_failed_regression_gate_wins_over_bad_rows(tmp_path: Path) -> None:
    base = write(tmp_path / "base.jsonl", [good(i, 0.9) for i in range(20)])
    rows = [good(i, 0.1) for i in range(20)] + [good(30, 1.5)]
    new = write(tmp_path / "new.jsonl", rows)

    done = run_composo("compare", base, new, "--fail-on-regression", "0.05")

    assert done.returncode == 3 and "1 row(s) set aside" in done.stderr


def test_report_baseline_with_bad_rows(tmp_path: Path) -> None:
    base_rows = [good(i, 0.5) for i in range(6)]
    base_rows.append(good(7, float("-inf")))
    base = write(tmp_path / "base.jsonl", base_rows)
    new = write(tmp_path / "new.jsonl", [good(i, 0.7) for i in range(6)])

    done = run_composo("report", new, "--baseline", base, "-o", tmp_path / "r.html")

    assert done.returncode == EXIT_BAD_ROWS and "Traceback" not in done.stderr
    assert "base.jsonl: 1 row(s) set aside" in done.stderr


def test_a_hostile_dataset_line_does_not_break_the_report(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    item = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": 5, "tool_calls": 7},
        ],
        "tags": {"k": ["a"]},
    }
    data.write_text(json.dumps(item) + "\n" + json.dumps({"messages": "no"}) + "\n")
    results = write(tmp_path / "out.jsonl", [good(0, 0.1), good(1, 0.2)])

    done = run_composo("report", results, "--data", data, "-o", tmp_path / "r.html")

    assert done.returncode == 0, done.stderr


def test_a_resumed_run_sets_a_hand_edited_score_aside(live: ServerProcess, tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(conversation(i) + "\n" for i in range(4)))
    out = tmp_path / "out.jsonl"
    server = ["--base-url", live.base_url, "--api-key", live.api_key]
    assert run_composo("evaluate", data, "-c", SCORED, "-o", out, *server).returncode == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    rows[1]["score"] = float("nan")
    write(out, rows)

    again = run_composo("evaluate", data, "-c", SCORED, "-o", out, *server)
    gated = run_composo(
        "evaluate", data, "-c", SCORED, "-o", out, "--fail-under", f"{SCORED}=0.99", *server
    )

    assert again.returncode == EXIT_BAD_ROWS and "Traceback" not in again.stderr
    assert "1 row(s) of the results file have a score that is not a number" in again.stderr
    assert gated.returncode == 3  # a failed gate says more than the bad row


def test_a_parquet_results_file_is_read_the_same_way(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [good(i, 0.3) for i in range(4)] + [good(9, float("nan"))]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "out.parquet")

    done = run_composo("report", tmp_path / "out.parquet", "-o", tmp_path / "r.html")

    assert done.returncode == EXIT_BAD_ROWS and "Traceback" not in done.stderr
    assert "line 5 (id q9): score NaN" in done.stderr
    assert page_data(tmp_path / "r.html")["runs"][0]["criteria"][0]["scored"] == 4
