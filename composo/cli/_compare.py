"""``composo compare BASE.jsonl NEW.jsonl``: did quality move between two runs, and is the move
more than noise (a seeded bootstrap interval of the paired difference, per criterion)?"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composo._agreement import RESAMPLES, bootstrap
from composo.cli import EXIT_BAD_ROWS, EXIT_GATE, UsageError
from composo.cli._names import label
from composo.cli._results import ResultsError, item_name, load_results
from composo.cli._summary import Summary, kind, md_cell

_SAME = 1e-9  # differences smaller than this count as unchanged


def add_bootstrap_arguments(
    parser: argparse.ArgumentParser, worst: str, resamples: int = RESAMPLES
) -> None:
    """``--worst N`` (``worst``: what it shows), ``--seed`` and ``--resamples``."""
    for flag, default, said in (
        ("--worst", 5, worst),
        ("--seed", 0, "bootstrap seed; same seed, same interval"),
        ("--resamples", resamples, "bootstrap resamples"),
    ):
        parser.add_argument(
            flag, type=int, default=default, metavar="N", help=f"{said} (default %(default)s)"
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", type=Path, metavar="BASE.jsonl", help="the earlier run's results")
    parser.add_argument("new", type=Path, metavar="NEW.jsonl", help="the run to judge")
    parser.add_argument(
        "--fail-on-regression",
        type=float,
        metavar="TOL",
        help="exit 3 when a criterion's mean drops by more than TOL (e.g. 0.02) and the 95%% "
        "interval of the paired difference excludes 0",
    )
    add_bootstrap_arguments(parser, "regressed items shown per criterion, with both explanations")
    parser.add_argument("--summary-md", type=Path, metavar="FILE", help="append a markdown table")


def bootstrap_interval(
    diffs: list[float], seed: int = 0, resamples: int = RESAMPLES
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``diffs`` (same seed, same interval)."""
    n = len(diffs)
    if n == 0:
        raise ValueError("no differences to resample")
    if n == 1 or max(diffs) - min(diffs) < _SAME:
        return (statistics.fmean(diffs), statistics.fmean(diffs))
    found = bootstrap(diffs, lambda d: math.fsum(d) / n, seed, resamples)
    assert found is not None  # a mean is always defined
    return found


@dataclass
class Pair:
    key: str
    base: dict[str, Any]
    new: dict[str, Any]

    @property
    def diff(self) -> float:
        return float(self.new["score"]) - float(self.base["score"])


@dataclass
class CriterionComparison:
    criterion: str
    base_mean: float | None
    new_mean: float | None
    base_count: int
    new_count: int
    pairs: list[Pair] = field(default_factory=list)
    interval: tuple[float, float] | None = None

    @property
    def mean_diff(self) -> float | None:
        return statistics.fmean(p.diff for p in self.pairs) if self.pairs else None

    @property
    def improved(self) -> int:
        return sum(1 for p in self.pairs if p.diff > _SAME)

    @property
    def regressed(self) -> int:
        return sum(1 for p in self.pairs if p.diff < -_SAME)

    @property
    def unchanged(self) -> int:
        return len(self.pairs) - self.improved - self.regressed

    def worst(self, n: int) -> list[Pair]:
        down = [p for p in self.pairs if p.diff < -_SAME]
        return sorted(down, key=lambda p: (p.diff, p.key))[: max(n, 0)]

    def regression(self, tolerance: float) -> bool:
        """The mean dropped by more than ``tolerance`` and the interval lies below 0."""
        d, interval = self.mean_diff, self.interval
        return d is not None and interval is not None and d < -tolerance and interval[1] < 0.0


@dataclass
class Comparison:
    criteria: list[CriterionComparison]
    only_base: list[str]
    only_new: list[str]
    paired_by: str  # "id" or "line"


def _table(rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(row["criterion"], []).append(row)
    return out


def _unique_ids(table: dict[str, list[dict[str, Any]]]) -> bool:
    """Every row has an id, none twice within its criterion."""
    ids = [[r.get("id") for r in rows] for rows in table.values()]
    return all(None not in each and len(set(map(str, each))) == len(each) for each in ids)


def compare_rows(
    base_rows: Iterable[dict[str, Any]],
    new_rows: Iterable[dict[str, Any]],
    seed: int = 0,
    resamples: int = RESAMPLES,
) -> Comparison:
    """Pair the two runs' rows and compare them criterion by criterion. Items pair by their
    ``id`` when every row of both runs has a unique one, otherwise by line. Raises
    :class:`ResultsError` when no criterion or no item is shared."""
    base, new = _table(base_rows), _table(new_rows)
    shared = _shared(base, new)
    by_id = _unique_ids(base) and _unique_ids(new)
    # each run's own figures come from its summary; the pairs are this command's
    before = Summary.of(r for c in shared for r in base[c]).criteria
    after = Summary.of(r for c in shared for r in new[c]).criteria
    out: list[CriterionComparison] = []
    for criterion in shared:
        pairs = _pairs(base[criterion], new[criterion], by_id)
        b, n = before[criterion], after[criterion]
        entry = CriterionComparison(criterion, b.mean, n.mean, b.count, n.count, pairs)
        if pairs:
            entry.interval = bootstrap_interval([p.diff for p in pairs], seed, resamples)
        out.append(entry)
    if not any(c.pairs for c in out):
        how = "id" if by_id else "line number"
        raise ResultsError(
            f"no item is scored in both files (items are paired by {how}); compare two runs "
            "over the same dataset"
        )
    only_base = [c for c in base if c not in new]
    only_new = [c for c in new if c not in base]
    return Comparison(out, only_base, only_new, "id" if by_id else "line")


def _shared(base: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The criteria both runs hold, in NEW's order."""
    if not base or not new:
        raise ResultsError(f"{'BASE' if not base else 'NEW'} holds no result rows")
    shared = [c for c in new if c in base]
    if not shared:
        raise ResultsError(
            "the two files share no criterion (were they evaluated against different "
            "criteria?); compare runs of the same -c criteria"
        )
    return shared


def _pairs(base: list[dict[str, Any]], new: list[dict[str, Any]], by_id: bool) -> list[Pair]:
    """One criterion's items scored in both runs, in key order."""
    old = {item_name(r, by_id): r for r in base}
    keyed = ((item_name(r, by_id), r) for r in new if kind(r) == "scored")
    pairs = [Pair(k, old[k], r) for k, r in keyed if k in old and kind(old[k]) == "scored"]
    return sorted(pairs, key=lambda p: p.key)


def fig(value: float | None, signed: bool = False) -> str:
    """A figure to three decimals (``+`` on a difference), ``-`` when there is none."""
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def span(interval: tuple[float, float] | None) -> str:
    """An interval as ``[-0.050, +0.010]`` (``[-, -]`` when there is none)."""
    lo, hi = interval or (None, None)
    return f"[{fig(lo, True)}, {fig(hi, True)}]"


def _one_line(text: Any, width: int = 160) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def render_text(result: Comparison, worst: int, tolerance: float | None) -> str:
    lines: list[str] = []
    for c in result.criteria:
        lines += [
            label(c.criterion, 72),
            f"  mean  base {fig(c.base_mean)} (n={c.base_count})  new {fig(c.new_mean)} "
            f"(n={c.new_count})",
            f"  paired difference {fig(c.mean_diff, True)} over {len(c.pairs)} item(s), "
            f"95% interval {span(c.interval)}",
            f"  improved {c.improved}  regressed {c.regressed}  unchanged {c.unchanged}",
        ]
        if tolerance is not None and c.regression(tolerance):
            lines.append(f"  REGRESSION: the mean dropped by more than {tolerance:g}")
        shown = c.worst(worst)
        if shown:
            lines.append("  regressed most:")
        for p in shown:
            lines += [
                f"    {p.key}: {fig(float(p.base['score']))} -> {fig(float(p.new['score']))} "
                f"({fig(p.diff, True)})",
                f"      base: {_one_line(p.base.get('explanation'))}",
                f"      new:  {_one_line(p.new.get('explanation'))}",
            ]
        lines.append("")
    return "\n".join(lines)


def render_markdown(result: Comparison, tolerance: float | None) -> str:
    lines = [
        "### Composo comparison",
        "",
        "| criterion | base mean | new mean | difference | 95% interval | improved | regressed "
        "| unchanged |",
        "|---|--:|--:|--:|:-:|--:|--:|--:|",
    ]
    for c in result.criteria:
        flag = " ❌" if tolerance is not None and c.regression(tolerance) else ""
        lines.append(
            f"| {md_cell(label(c.criterion, 60))} | {fig(c.base_mean)} | {fig(c.new_mean)} | "
            f"{fig(c.mean_diff, True)}{flag} | {span(c.interval)} | {c.improved} | "
            f"{c.regressed} | {c.unchanged} |"
        )
    return "\n".join(lines) + "\n\n"


def load(path: Path, name: str) -> tuple[list[dict[str, Any]], int]:
    """A results file's usable rows and how many it set aside (said on stderr)."""
    rows, checked = load_results(path, name)
    if rows:  # a file of no results at all is one usage error, said by the caller
        checked.report("compare")
    return rows, checked.bad


def run(args: argparse.Namespace) -> int:
    if args.fail_on_regression is not None and not 0.0 <= args.fail_on_regression <= 1.0:
        raise UsageError(f"--fail-on-regression: {args.fail_on_regression:g} is outside 0 to 1")
    if args.resamples < 100:
        raise UsageError("--resamples: use at least 100")
    if args.summary_md is not None and not args.summary_md.parent.is_dir():
        raise UsageError(f"--summary-md: no such directory: {args.summary_md.parent}")
    base, base_bad = load(args.base, "BASE")  # a ResultsError: exit 2
    new, new_bad = load(args.new, "NEW")
    result = compare_rows(base, new, args.seed, args.resamples)
    for name, missing in (("BASE", result.only_base), ("NEW", result.only_new)):
        for criterion in missing:
            print(f"note: only {name} has {label(criterion, 60)!r}; not compared", file=sys.stderr)
    sys.stdout.write(render_text(result, args.worst, args.fail_on_regression))
    sys.stdout.flush()
    if args.summary_md is not None:
        with args.summary_md.open("a", encoding="utf-8") as f:
            f.write(render_markdown(result, args.fail_on_regression))
    clean = EXIT_BAD_ROWS if base_bad or new_bad else 0
    if args.fail_on_regression is None:
        return clean
    dropped = [c for c in result.criteria if c.regression(args.fail_on_regression)]
    for c in dropped:
        print(
            f"regression: {label(c.criterion, 60)}: mean {fig(c.base_mean)} -> {fig(c.new_mean)}, "
            f"paired difference {fig(c.mean_diff, True)} (95% interval {span(c.interval)}), "
            f"more than the tolerance {args.fail_on_regression:g}",
            file=sys.stderr,
        )
    return EXIT_GATE if dropped else clean
