"""Quality gates, JUnit XML and the markdown summary of `composo evaluate`, run in the test
process (tests/support/cli.py) against the local server."""

from __future__ import annotations

import re
import statistics
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import junitparser
import pytest

from tests.support.cli import conversation, read_rows, run_composo
from tests.support.servers import ServerProcess

SCORED = "Reward answers that explain the refund policy"
BINARY = "Passes if the answer mentions the return window"
EXIT_GATE = 3


def dataset(tmp_path: Path, n: int = 8) -> Path:
    """Half good answers, half poor ones, so scores and passes vary."""
    lines = [
        conversation(i) if i % 2 == 0 else conversation(i, answer="Bananas are yellow.")
        for i in range(n)
    ]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def evaluate(live: ServerProcess, data: Path, out: Path, *extra: Any) -> Any:
    return run_composo(
        "evaluate", data, "-c", SCORED, "-c", BINARY, "-o", out,
        "--base-url", live.base_url, "--api-key", live.api_key, *extra,
    )  # fmt: skip


@pytest.fixture
def scored(live: ServerProcess, tmp_path: Path) -> tuple[Path, Path, float, float]:
    """A dataset already evaluated once: (data, out, mean of SCORED, pass rate of BINARY)."""
    data, out = dataset(tmp_path), tmp_path / "out.jsonl"
    done = evaluate(live, data, out)
    assert done.returncode == 0, done.stderr
    found = read_rows(out)
    mean = statistics.fmean(r["score"] for r in found if r["criterion"] == SCORED)
    binary = [r["score"] for r in found if r["criterion"] == BINARY]
    rate = sum(binary) / len(binary)
    assert 0 < rate < 1 and 0.05 < mean < 0.95  # the dataset has a spread to gate on
    live.reset()
    return data, out, mean, rate


def test_fail_under_passes_and_fails_on_the_mean(live: ServerProcess, scored: Any) -> None:
    data, out, mean, _ = scored
    ok = evaluate(live, data, out, "--fail-under", f"{SCORED}={mean - 0.01:.4f}")
    assert ok.returncode == 0, ok.stderr
    assert "gate passed" in ok.stderr

    # The short library-style names are accepted too; this run resumes (nothing re-sent).
    bad = evaluate(live, data, out, "--fail-under", f"{SCORED}={mean + 0.05:.4f}")
    assert bad.returncode == EXIT_GATE, bad.stderr
    (line,) = [x for x in bad.stderr.splitlines() if x.startswith("gate FAILED")]
    assert f"mean {mean:.3f} is 0.050 below {mean + 0.05:.3f}" in line
    assert "1 of 1 quality gate(s) failed (exit 3)" in bad.stderr
    assert live.requests() == []  # the gates were checked on the resumed file


def test_star_gates_every_criterion(live: ServerProcess, scored: Any) -> None:
    data, out, mean, rate = scored
    low = min(mean, rate)
    ok = evaluate(live, data, out, "--fail-under", f"*={low - 0.01:.4f}")
    assert ok.returncode == 0 and ok.stderr.count("gate passed") == 2, ok.stderr
    bad = evaluate(live, data, out, "--fail-under", f"*={max(mean, rate) + 0.01:.4f}")
    assert bad.returncode == EXIT_GATE
    assert bad.stderr.count("gate FAILED") == 2


def test_min_pass_rate_on_a_binary_criterion(live: ServerProcess, scored: Any) -> None:
    data, out, _, rate = scored
    ok = evaluate(live, data, out, "--min-pass-rate", f"{BINARY}={100 * rate:.1f}%")
    assert ok.returncode == 0, ok.stderr
    bad = evaluate(live, data, out, "--min-pass-rate", f"*={rate + 0.1:.3f}")
    assert bad.returncode == EXIT_GATE
    (line,) = [x for x in bad.stderr.splitlines() if x.startswith("gate FAILED")]
    assert f"pass rate {100 * rate:.1f}% is 10.0% below" in line


def test_a_library_name_names_its_criterion(tmp_path: Path) -> None:
    from composo import criteria

    data = tmp_path / "data.jsonl"  # with the source material rag_faithfulness checks against
    policy = "Refund policy: returns within 30 days get a full refund."
    data.write_text("\n".join(conversation(i, system=policy) for i in range(6)) + "\n")
    out = tmp_path / "out.jsonl"
    done = run_composo(
        "evaluate", data, "-c", "rag_faithfulness", "-o", out, "--local",
        "--fail-under", "rag_faithfulness=0.99",
    )  # fmt: skip
    assert done.returncode == EXIT_GATE, done.stderr
    assert "--fail-under rag_faithfulness=0.99: rag_faithfulness: mean" in done.stderr
    assert {r["criterion"] for r in read_rows(out)} == {criteria.rag_faithfulness}


def test_a_group_name_gates_the_group(tmp_path: Path) -> None:
    from composo import criteria

    data, out = dataset(tmp_path, 3), tmp_path / "out.jsonl"
    done = run_composo(
        "evaluate", data, "-c", "RAG", "-c", SCORED, "-o", out, "--local",
        "--fail-under", "RAG=0.99",
    )  # fmt: skip
    assert done.returncode == EXIT_GATE, done.stderr
    assert done.stderr.count("gate FAILED: --fail-under RAG=0.99") == len(criteria.RAG)
    assert "gate passed" not in done.stderr and SCORED[:30] not in _gate_lines(done.stderr)


def _gate_lines(stderr: str) -> str:
    return "\n".join(x for x in stderr.splitlines() if x.startswith("gate "))


def test_request_errors_take_precedence_over_gates(live: ServerProcess, tmp_path: Path) -> None:
    data, out = dataset(tmp_path, 4), tmp_path / "out.jsonl"
    live.fault({"status": 400, "detail": "refused"})
    done = evaluate(live, data, out, "--concurrency", "1", "--fail-under", "*=1")
    assert done.returncode == 1  # requests failed: the gate figures are incomplete
    assert "gate FAILED" in done.stderr  # ...but the gates are still reported


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fail-under", "rag_noise=0.5"], "--fail-under: 'rag_noise' is not a criterion of"),
        (["--fail-under", "rag_faithfulness=0.5"], "is not a criterion of this run"),
        (["--fail-under", f"{SCORED}=high"], "'high' is not a number"),
        (["--fail-under", f"{SCORED}=1.5"], "'1.5' is outside 0 to 1"),
        (["--fail-under", "0.5"], "expected CRITERION=VALUE, got '0.5'"),
        (["--min-pass-rate", f"{SCORED}=0.9"], "not a binary criterion"),
        (["--min-pass-rate", f"{BINARY}=120%"], "'120%' is outside 0 to 1"),
        (["--junit-xml", "j.xml", "--fail-under", "*=0.1"], "--junit-xml needs -o"),
    ],
)
def test_bad_gates_are_one_line_usage_errors(
    live: ServerProcess, tmp_path: Path, args: list[str], message: str
) -> None:
    data = dataset(tmp_path, 2)
    extra = [] if "--junit-xml" in args else ["-o", tmp_path / "out.jsonl"]
    done = run_composo(
        "evaluate", data, "-c", SCORED, "-c", BINARY, *extra,
        "--base-url", live.base_url, "--api-key", live.api_key, *args,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert done.stderr.startswith("composo evaluate: error: ")
    assert live.requests() == []  # refused before any request


HOSTILE = 'x<script>alert("id")</script>]]>&\x07\x1b'


def test_junit_xml_has_one_case_per_item_and_criterion(live: ServerProcess, tmp_path: Path) -> None:
    data = dataset(tmp_path, 6)
    with data.open("a") as f:  # an item with a hostile id, and one that cannot be read
        f.write(conversation(6).replace('"q6"', _json_str(HOSTILE)) + "\n")
        f.write("not json\n")
    out, junit = tmp_path / "out.jsonl", tmp_path / "junit.xml"
    done = evaluate(live, data, out, "--fail-under", f"{SCORED}=0.6", "--junit-xml", junit)
    assert done.returncode == 1, done.stderr  # the unreadable line is a request error
    found = read_rows(out)

    xml = junitparser.JUnitXml.fromfile(str(junit))
    suites = list(xml)
    assert [s.name for s in suites] == [SCORED, BINARY]
    for suite, criterion in zip(suites, [SCORED, BINARY], strict=True):
        mine = {_item(r): r for r in found if r["criterion"] == criterion}
        cases = {case.name: case for case in suite}
        assert set(cases) == {n.translate(_CONTROL) for n in mine}  # one case per item
        assert suite.tests == len(mine) == 8
        needed = 0.6 if criterion == SCORED else 1.0
        for name, row in mine.items():
            case = cases[name.translate(_CONTROL)]
            kinds = {type(r).__name__ for r in case.result}
            if row["error"]:
                assert kinds == {"Error"} and "not valid JSON" in case.result[0].message
            elif row["score"] < needed:
                assert kinds == {"Failure"}
                assert case.result[0].text == row["explanation"]  # the judge's explanation
                assert f"score {row['score']:g} below {needed:g}" == case.result[0].message
            else:
                assert kinds == set()
        assert suite.failures == sum(
            1 for r in mine.values() if not r["error"] and r["score"] < needed
        )
        assert suite.failures > 0 and suite.errors == 1

    # the schema's required elements and attributes, read with the standard library
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    for suite in root.iter("testsuite"):
        assert {"name", "tests", "failures", "errors", "time"} <= set(suite.attrib)
        for case in suite.iter("testcase"):
            assert {"name", "classname", "time"} <= set(case.attrib)
    assert "<script>" not in junit.read_text(encoding="utf-8")


_CONTROL = {c: "\ufffd" for c in (7, 27)}


def _json_str(text: str) -> str:
    import json

    return json.dumps(text)


def _item(row: dict[str, Any]) -> str:
    return row["id"] if row["id"] is not None else f"line {row['index'] + 1}"


def test_summary_md_is_a_table_with_the_gates(live: ServerProcess, scored: Any) -> None:
    data, out, mean, _ = scored
    summary = Path(out).with_name("summary.md")
    summary.write_text("earlier step\n")
    done = evaluate(
        live, data, out, "--fail-under", f"{SCORED}={mean + 0.05:.4f}", "--summary-md", summary
    )
    assert done.returncode == EXIT_GATE
    text = summary.read_text()
    assert text.startswith("earlier step\n")  # appended, as $GITHUB_STEP_SUMMARY expects
    table = [x for x in text.splitlines() if x.startswith("|")]
    assert table[0].split("|")[1].strip() == "criterion" and len(table) == 4
    row = next(x for x in table if SCORED in x)
    assert f"| {mean:.2f} |" in row and "❌" in row
    assert re.search(r"- ❌ .*mean .* is 0\.050 below", text)


def test_summary_md_escapes_criterion_text(tmp_path: Path) -> None:
    data = dataset(tmp_path, 2)
    nasty = "Reward answers | that <b>cite</b>\nsources"
    summary = tmp_path / "s.md"
    done = run_composo(
        "evaluate", data, "-c", nasty, "-o", tmp_path / "o.jsonl", "--local",
        "--summary-md", summary,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    row = next(x for x in summary.read_text().splitlines() if "Reward answers" in x)
    assert "<b>" not in row and "&lt;b&gt;" in row and "\\|" in row
    cells = re.split(r"(?<!\\)\|", row)[1:-1]
    assert len(cells) == 9  # the criterion's pipe does not add a column
    assert cells[0].strip() == "Reward answers \\| that &lt;b&gt;cite&lt;/b&gt; sources"
