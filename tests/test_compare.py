"""`composo compare` and `composo report --baseline` on results files."""

from __future__ import annotations

import random
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import conversation, page_data, read_rows, run_composo, write_rows
from tests.support.servers import ServerProcess

SCORED = "Reward answers that explain the refund policy"
BINARY = "Passes if the answer mentions the return window"
EXIT_GATE = 3


def row(i: int, criterion: str, score: float | None, explanation: str, **extra: Any) -> Any:
    return {
        "index": i,
        "id": f"q{i}",
        "criterion": criterion,
        "score": score,
        "explanation": explanation,
        "error": None,
        **extra,
    }


def known_difference(tmp_path: Path) -> tuple[Path, Path, float, list[str]]:
    """BASE and NEW over 48 shared items (plus one only in each): a third unchanged, a third up
    0.05, a third down 0.30; NEW is written in reverse order so pairing must use the ids."""
    base, new, diffs, dropped = [], [], [], []
    for i in range(48):
        b = 0.4 + (i * 7 % 13) / 40
        d = (0.0, 0.05, -0.30)[i % 3]
        diffs.append(d)
        if d < 0:
            dropped.append(f"q{i}")
        base.append(row(i, SCORED, b, f"base reason {i}"))
        new.append(row(i, SCORED, round(b + d, 6), f"new reason {i}"))
        base.append(row(i, BINARY, float(i % 2), "binary"))
        new.append(row(i, BINARY, float(i % 2), "binary"))
    base.append(row(90, SCORED, 0.0, "only in base"))
    new.append(row(91, SCORED, 1.0, "only in new"))
    new.reverse()
    for n, r in enumerate(new):
        r["index"] = n // 2
    return (
        write_rows(tmp_path / "base.jsonl", base),
        write_rows(tmp_path / "new.jsonl", new),
        statistics.fmean(diffs),
        dropped,
    )


def block(text: str, name: str) -> str:
    """The lines of the compare output for the criterion starting with ``name``."""
    start = text.index(name)
    end = text.find("\n\n", start)
    return text[start : end if end != -1 else None]


def interval(text: str) -> tuple[float, float]:
    m = re.search(r"95% interval \[([-+]\d\.\d+), ([-+]\d\.\d+)\]", text)
    assert m, text
    return float(m.group(1)), float(m.group(2))


def test_a_known_difference_is_inside_the_interval(tmp_path: Path) -> None:
    base, new, true_diff, dropped = known_difference(tmp_path)

    done = run_composo("compare", base, new)

    assert done.returncode == 0, done.stderr
    scored = block(done.stdout, SCORED)
    lo, hi = interval(scored)
    assert lo <= true_diff <= hi and hi < 0  # the drop is real: 0 lies outside
    assert hi - lo < 0.15  # and the interval is not uselessly wide
    assert f"paired difference {true_diff:+.3f} over 48 item(s)" in scored
    assert "improved 16  regressed 16  unchanged 16" in scored
    base_mean = statistics.fmean(r["score"] for r in read_rows(base) if r["criterion"] == SCORED)
    assert f"base {base_mean:.3f} (n=49)" in scored
    # the items that regressed most, each with both explanations
    shown = re.findall(r"^    (q\d+): ", scored, re.M)
    assert len(shown) == 5 and set(shown) <= set(dropped)
    first = shown[0][1:]
    assert f"base: base reason {first}" in scored and f"new:  new reason {first}" in scored
    # the binary criterion did not move
    binary = block(done.stdout, BINARY)
    assert "paired difference +0.000" in binary and "regressed 0" in binary
    assert "[+0.000, +0.000]" in binary

    again = run_composo("compare", base, new)
    assert again.stdout == done.stdout  # seeded: the same interval every time


def test_fail_on_regression_needs_a_drop_beyond_the_tolerance(tmp_path: Path) -> None:
    base, new, true_diff, _ = known_difference(tmp_path)
    failed = run_composo("compare", base, new, "--fail-on-regression", "0.05")
    assert failed.returncode == EXIT_GATE
    (line,) = [x for x in failed.stderr.splitlines() if x.startswith("regression:")]
    assert f"paired difference {true_diff:+.3f}" in line and "tolerance 0.05" in line
    assert "REGRESSION" in block(failed.stdout, SCORED)

    tolerated = run_composo("compare", base, new, "--fail-on-regression", "0.1")
    assert tolerated.returncode == 0, tolerated.stderr  # a drop of 0.083 is within 0.1


def test_identical_runs_show_no_regression(tmp_path: Path) -> None:
    base, _, _, _ = known_difference(tmp_path)
    done = run_composo("compare", base, base, "--fail-on-regression", "0")
    assert done.returncode == 0, done.stderr
    for name in (SCORED, BINARY):
        text = block(done.stdout, name)
        assert "paired difference +0.000" in text and "[+0.000, +0.000]" in text
        assert "improved 0  regressed 0" in text and "regressed most" not in text


def test_the_interval_covers_the_true_difference_most_of_the_time() -> None:
    from composo.cli._compare import compare_rows

    rng = random.Random(7)
    true_diff, trials, covered = -0.1, 60, 0
    for _ in range(trials):
        base, new = [], []
        for i in range(40):
            b = rng.uniform(0.3, 0.7)
            base.append(row(i, SCORED, b, ""))
            new.append(row(i, SCORED, b + true_diff + rng.gauss(0, 0.1), ""))
        (c,) = compare_rows(base, new, seed=rng.randrange(1000), resamples=400).criteria
        assert c.interval is not None
        covered += c.interval[0] <= true_diff <= c.interval[1]
    assert covered >= 0.85 * trials  # a 95% interval, give or take the bootstrap's optimism


def test_files_that_cannot_be_compared_are_usage_errors(tmp_path: Path) -> None:
    a = write_rows(tmp_path / "a.jsonl", [row(i, SCORED, 0.5, "") for i in range(3)])
    b = write_rows(tmp_path / "b.jsonl", [row(i, BINARY, 1.0, "") for i in range(3)])
    c = write_rows(tmp_path / "c.jsonl", [row(i + 10, SCORED, 0.5, "") for i in range(3)])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("not a row\n")
    for args, message in [
        ((a, b), "share no criterion"),
        ((a, c), "no item is scored in both files (items are paired by id)"),
        ((a, tmp_path / "missing.jsonl"), "NEW: no such file"),
        ((empty, a), "BASE holds no result rows"),
        ((a, a, "--fail-on-regression", "2"), "outside 0 to 1"),
    ]:
        done = run_composo("compare", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
        assert done.stdout == ""


def test_runs_over_the_same_dataset_pair_by_line_without_ids(tmp_path: Path) -> None:
    base = [dict(row(i, SCORED, 0.5, ""), id=None) for i in range(4)]
    new = [dict(row(i, SCORED, 0.25, ""), id=None) for i in range(4)]
    done = run_composo(
        "compare", write_rows(tmp_path / "b.jsonl", base), write_rows(tmp_path / "n.jsonl", new)
    )
    assert done.returncode == 0, done.stderr
    assert "paired difference -0.250 over 4 item(s)" in done.stdout
    assert "line 1: 0.500 -> 0.250" in done.stdout


def test_a_real_regression_between_two_evaluations(live: ServerProcess, tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(conversation(i) for i in range(12)) + "\n")
    worse = tmp_path / "worse.jsonl"  # every other answer replaced by an unhelpful one
    worse.write_text(
        "\n".join(
            conversation(i, answer="I am not sure, sorry.") if i % 2 else conversation(i)
            for i in range(12)
        )
        + "\n"
    )
    outs = []
    for data in (good, worse):
        out = tmp_path / f"{data.stem}.out.jsonl"
        done = run_composo(
            "evaluate", data, "-c", SCORED, "-o", out,
            "--base-url", live.base_url, "--api-key", live.api_key,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        outs.append(out)

    done = run_composo("compare", *outs, "--fail-on-regression", "0.02")

    assert done.returncode == EXIT_GATE, done.stdout + done.stderr
    assert "improved 0  regressed 6  unchanged 6" in done.stdout
    assert re.search(r"^    q1: ", done.stdout, re.M)  # a replaced answer is among the worst


HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'


def parsed(page: str) -> tuple[set[str], set[str]]:
    """The element and attribute names in ``page``."""
    from html.parser import HTMLParser

    tags: set[str] = set()
    attrs: set[str] = set()

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, found: list[tuple[str, str | None]]) -> None:
            tags.add(tag)
            attrs.update(name for name, _ in found)

    Collect().feed(page)
    return tags, attrs


def test_report_with_a_baseline_shows_both_runs_escaped(tmp_path: Path) -> None:
    base, new = [], []
    for i in range(6):
        rid = f"{HOSTILE}{i}"
        base.append(row(i, SCORED, 0.8, f"base {HOSTILE} said {i}", id=rid))
        new.append(row(i, SCORED, 0.8 - 0.1 * (i % 2), f"new {HOSTILE} said {i}", id=rid))
        base.append(row(i, BINARY, 1.0, "ok", id=rid))
        new.append(row(i, BINARY, 1.0, "ok", id=rid))
    b = write_rows(tmp_path / "base.jsonl", base)
    n = write_rows(tmp_path / "new.jsonl", new)
    page_path = tmp_path / "r.html"

    done = run_composo("report", n, "--baseline", b, "-o", page_path, "--title", HOSTILE)

    assert done.returncode == 0, done.stderr
    page = page_path.read_text()
    data = page_data(page)
    assert [r["name"] for r in data["runs"]] == ["base.jsonl", "new.jsonl"]  # the baseline first
    assert all([c["text"] for c in r["criteria"]] == [SCORED, BINARY] for r in data["runs"])
    (change,) = data["changes"]
    scored = next(c for c in change["summary"] if c["criterion"] == SCORED)
    assert scored["diff"] == pytest.approx(-0.05)  # the mean change (half the items down 0.1)
    assert [c["key"] for c in change["changed"]] == [f"{HOSTILE}{i}" for i in (1, 3, 5)]
    # both explanations of a regressed item, the criteria numbered as the page lists them
    assert [c["text"] for c in data["criteria"]] == [SCORED, BINARY]
    (item,) = [i for i in data["items"] if i["key"] == f"{HOSTILE}1"]
    assert [r["0"][2] for r in item["runs"]] == [f"base {HOSTILE} said 1", f"new {HOSTILE} said 1"]
    # what a browser would see as markup: the page's two scripts (its data and its code), and
    # no element or attribute from the data (tests/test_view.py renders it: text, inert)
    tags, attrs = parsed(page)
    assert not tags & {"img", "iframe"} and not attrs & {"src", "onerror", "onload"}
    assert page.count("<script") == 2 and "<img" not in page and "onerror=alert(2)>" not in page

    missing = run_composo("report", n, "--baseline", tmp_path / "none.jsonl", "-o", page_path)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    other = write_rows(tmp_path / "other.jsonl", [row(0, "Reward brevity", 0.5, "")])
    unrelated = run_composo("report", n, "--baseline", other, "-o", page_path)
    assert unrelated.returncode == 2 and "share no criterion" in unrelated.stderr
