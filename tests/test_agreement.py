"""`composo agreement` and `composo.agreement`: the statistics against values worked out by hand,
labels read from each format, and the command's output."""

from __future__ import annotations

import csv
import json
import math
import random
import re
from pathlib import Path
from typing import Any

import pytest

import composo
from composo._agreement import LabelError, kendall_tau, read_labels, spearman
from tests.support.cli import run_composo, write_rows

SCORED = "Reward answers that explain the refund policy"
BINARY = "Passes if the answer mentions the return window"


def row(i: int, criterion: str, score: float | None, **extra: Any) -> dict[str, Any]:
    return {
        "index": i,
        "id": f"q{i}",
        "criterion": criterion,
        "score": score,
        "explanation": f"reason {i}",
        "error": None,
        **extra,
    }


def test_spearman_and_kendall_match_hand_computed_values() -> None:
    # judge ranks 1 3 2 4, people 1 2 3 4: sum of squared rank gaps 2, so 1 - 6*2/(4*15) = 0.8;
    # of the 6 pairs one is discordant: (5 - 1) / 6
    judge, human = [0.1, 0.4, 0.35, 0.8], [0.0, 0.5, 0.6, 0.9]
    assert spearman(judge, human) == pytest.approx(0.8)
    assert kendall_tau(judge, human) == pytest.approx(4 / 6)
    # ties: x = 1 2 2 3, y = 1 3 2 3: 4 concordant, 0 discordant, one tie each side: 4 / 5
    assert kendall_tau([1, 2, 2, 3], [1, 3, 2, 3]) == pytest.approx(0.8)
    # average ranks 1 2.5 2.5 4 against 1 3.5 2 3.5, centred -1.5 0 0 1.5 and -1.5 1 -0.5 1:
    # 3.75 / sqrt(4.5 * 4.5) = 5/6
    assert spearman([1, 2, 2, 3], [1, 3, 2, 3]) == pytest.approx(5 / 6)
    assert spearman([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]) is None  # no ranking on one side
    assert kendall_tau([0.2, 0.4], [0.9, 0.1]) == pytest.approx(-1.0)


def _kendall_by_pairs(x: list[float], y: list[float]) -> float:
    """tau-b by counting every pair (quadratic), to check the merge-sort count."""
    c = d = tx = ty = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            a, b = x[i] - x[j], y[i] - y[j]
            if a == 0 and b == 0:
                continue
            if a == 0:
                tx += 1
            elif b == 0:
                ty += 1
            elif (a > 0) == (b > 0):
                c += 1
            else:
                d += 1
    return (c - d) / math.sqrt((c + d + tx) * (c + d + ty))


def test_kendall_agrees_with_counting_every_pair() -> None:
    rng = random.Random(7)
    for n in (2, 3, 5, 17, 64):
        x = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in range(n)]
        y = [rng.choice([0.0, 0.5, 1.0]) for _ in range(n)]
        if len(set(x)) > 1 and len(set(y)) > 1:
            assert kendall_tau(x, y) == pytest.approx(_kendall_by_pairs(x, y))


def test_reward_figures_with_a_repeatable_interval() -> None:
    judge = [0.1, 0.4, 0.35, 0.8, 0.2, 0.9, 0.6, 0.55]
    human = [0.0, 0.5, 0.6, 0.9, 0.3, 1.0, 0.4, 0.7]
    rows = [row(i, SCORED, s) for i, s in enumerate(judge)]
    labels = [{"id": f"q{i}", "criterion": SCORED, "label": h} for i, h in enumerate(human)]

    result = composo.agreement(rows, labels, seed=3, resamples=500)

    c = result[SCORED]
    assert c.kind == "reward" and c.n == 8
    assert c.mean_absolute_error == pytest.approx(
        sum(abs(a - b) for a, b in zip(judge, human, strict=True)) / 8
    )
    assert c.spearman == pytest.approx(spearman(judge, human))
    assert c.spearman_interval is not None and c.kendall_interval is not None
    lo, hi = c.spearman_interval
    assert -1.0 <= lo <= hi <= 1.0
    again = composo.agreement(rows, labels, seed=3, resamples=500)[SCORED]
    assert again.spearman_interval == c.spearman_interval  # same seed, same interval
    # largest gap first: q6 (0.6 against 0.4) and q2 (0.35 against 0.6) are 0.2 and 0.25 apart
    assert [d.id for d in c.disagreements[:2]] == ["q2", "q6"]


def test_pass_fail_figures_match_hand_computed_values() -> None:
    judge = [1, 1, 0, 0, 1, 0, 1, 1]
    human = ["pass", "fail", "fail", "no", True, 1, "1", "yes"]
    rows = [row(i, BINARY, float(s)) for i, s in enumerate(judge)]
    labels = [{"id": f"q{i}", "criterion": BINARY, "label": h} for i, h in enumerate(human)]

    c = composo.agreement(rows, labels)[BINARY]

    assert c.kind == "pass/fail" and c.n == 8
    assert c.confusion is not None
    table = c.confusion
    assert (table.both_pass, table.judge_pass_human_fail) == (4, 1)
    assert (table.judge_fail_human_pass, table.both_fail) == (1, 2)
    assert c.accuracy == pytest.approx(0.75)
    # chance agreement 5/8 * 5/8 + 3/8 * 3/8 = 34/64: kappa (0.75 - 34/64) / (30/64) = 7/15
    assert c.kappa == pytest.approx(7 / 15)
    assert {d.id for d in c.disagreements} == {"q1", "q5"}


def test_labels_in_csv_jsonl_and_parquet_give_the_same_figures(tmp_path: Path) -> None:
    results = write_rows(
        tmp_path / "out.jsonl",
        [row(i, SCORED, s) for i, s in enumerate([0.1, 0.5, 0.3, 0.9])]
        + [row(4, SCORED, None), row(5, SCORED, None, error="APIError: down")],
    )
    labels = [
        {"id": f"q{i}", "criterion": SCORED, "label": h}
        for i, h in enumerate([0.2, 0.6, 0.4, 0.7, 0.5, 0.5])
    ]
    labels.append({"id": "q99", "criterion": SCORED, "label": 1})
    jsonl = write_rows(tmp_path / "labels.jsonl", labels)
    with (tmp_path / "labels.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, ["id", "criterion", "label"])
        w.writeheader()
        w.writerows(labels)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(labels), tmp_path / "labels.parquet")

    got = [
        composo.agreement(results, p)
        for p in (jsonl, tmp_path / "labels.csv", tmp_path / "labels.parquet")
    ]

    assert got[0] == got[1] == got[2]
    assert got[0][SCORED].n == 4 and got[0][SCORED].spearman == pytest.approx(1.0)
    assert got[0].unmatched_labels == 1 and got[0].not_scored == 2


def test_a_label_file_names_the_bad_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "labels.jsonl"
    bad.write_text(json.dumps({"id": "q1", "criterion": SCORED, "label": 1.5}) + "\n")
    with pytest.raises(LabelError, match=r"labels.jsonl line 1: label 1.5 is not a score"):
        read_labels(bad)
    bad.write_text(json.dumps({"criterion": SCORED, "label": 1}) + "\n")
    with pytest.raises(LabelError, match="line 1: no id"):
        read_labels(bad)
    (tmp_path / "l.csv").write_text("id,label\nq1,maybe\n")
    with pytest.raises(LabelError, match=r"l\.csv line 2: label 'maybe'"):
        read_labels(tmp_path / "l.csv")


def test_the_command_prints_both_kinds(tmp_path: Path) -> None:
    judge = [0.1, 0.4, 0.35, 0.8]
    rows = [row(i, SCORED, s) for i, s in enumerate(judge)]
    rows += [row(i, BINARY, float(i % 2)) for i in range(4)]
    results = write_rows(tmp_path / "out.jsonl", rows)
    labels = [
        {"id": f"q{i}", "criterion": SCORED, "label": h} for i, h in enumerate([0.0, 0.5, 0.6, 0.9])
    ]
    labels += [{"id": f"q{i}", "criterion": BINARY, "label": "pass"} for i in range(4)]
    labels_file = write_rows(tmp_path / "labels.jsonl", labels)

    done = run_composo("agreement", results, "--labels", labels_file)

    assert done.returncode == 0, done.stderr
    assert "(reward, n=4)" in done.stdout and "Spearman +0.800" in done.stdout
    assert "Kendall  +0.667" in done.stdout
    assert re.search(r"mean absolute error 0\.13[78]", done.stdout)  # 0.55 / 4
    assert "(pass/fail, n=4)" in done.stdout and "accuracy 0.500" in done.stdout
    assert "Cohen's kappa +0.000" in done.stdout
    data = json.loads(run_composo("agreement", results, "--labels", labels_file, "--json").stdout)
    assert {c["criterion"] for c in data["criteria"]} == {SCORED, BINARY}


def test_the_command_without_pairs_or_with_bad_labels_is_a_usage_error(tmp_path: Path) -> None:
    results = write_rows(tmp_path / "out.jsonl", [row(0, SCORED, 0.5)])
    other = write_rows(tmp_path / "labels.jsonl", [{"id": "zz", "criterion": SCORED, "label": 1}])
    done = run_composo("agreement", results, "--labels", other)
    assert done.returncode == 2 and "no label pairs" in done.stderr
    bad = write_rows(tmp_path / "bad.jsonl", [{"id": "q0", "label": "often"}])
    done = run_composo("agreement", results, "--labels", bad)
    assert done.returncode == 2 and "bad.jsonl line 1: label 'often'" in done.stderr
    assert "Traceback" not in done.stderr


def test_rows_given_in_python_are_checked_too() -> None:
    rows = [row(i, SCORED, s) for i, s in enumerate([0.1, 0.5, 0.9])]
    rows.append(row(3, SCORED, float("nan")))
    labels = [{"id": f"q{i}", "criterion": SCORED, "label": i / 3} for i in range(4)]

    result = composo.agreement(rows, labels)

    assert result.rows_set_aside == 1 and result[SCORED].n == 3
    assert result.unmatched_labels == 1  # q3's row was set aside


def test_items_sharing_an_id_are_named_by_their_line() -> None:
    rows = [row(0, SCORED, 0.2), row(1, SCORED, 0.9, id="dup"), row(2, SCORED, 0.1, id="dup")]
    labels = [
        {"id": "q0", "label": 0.3},
        {"id": "line 2", "label": 1.0},
        {"id": "line 3", "label": 0.0},
        {"id": "dup", "label": 0.5},  # names two items: matches neither
    ]

    result = composo.agreement(rows, labels)

    assert result[SCORED].n == 3 and result.unmatched_labels == 1
