"""``composo agreement RESULTS --labels FILE``: how well the judge agrees with the team's own
labels (or the reviews made in ``composo view``), criterion by criterion."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from composo.cli import EXIT_BAD_ROWS, UsageError
from composo.cli._compare import add_bootstrap_arguments, fig, span
from composo.cli._names import label

if TYPE_CHECKING:
    from composo._agreement import Agreement, CriterionAgreement


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, metavar="RESULTS", help="`composo evaluate` output")
    parser.add_argument(
        "--labels",
        type=Path,
        required=True,
        metavar="FILE",
        help="people's labels: CSV, JSONL or Parquet with id, criterion and label (a score "
        "from 0 to 1, or pass/fail), or the RESULTS.reviews.jsonl file `composo view` writes",
    )
    add_bootstrap_arguments(parser, "largest disagreements shown per criterion", 1000)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def _span(interval: tuple[float, float] | None) -> str:
    return "" if interval is None else f" {span(interval)}"


def _criterion_lines(c: CriterionAgreement, worst: int) -> list[str]:
    lines = [f"{label(c.criterion, 72)}  ({c.kind}, n={c.n})"]
    if c.kind == "reward":
        lines.append(f"  Spearman {fig(c.spearman, True)}{_span(c.spearman_interval)}")
        lines.append(f"  Kendall  {fig(c.kendall, True)}{_span(c.kendall_interval)}")
        lines.append(f"  mean absolute error {fig(c.mean_absolute_error)}")
    else:
        table = c.confusion
        lines.append(f"  accuracy {fig(c.accuracy)}  Cohen's kappa {fig(c.kappa, True)}")
        if table is not None:
            lines += [
                "                 human pass  human fail",
                f"    judge pass  {table.both_pass:>10}  {table.judge_pass_human_fail:>10}",
                f"    judge fail  {table.judge_fail_human_pass:>10}  {table.both_fail:>10}",
            ]
    shown = c.disagreements[: max(worst, 0)]
    if shown:
        lines.append("  largest disagreements:")
    for d in shown:
        note = f"  ({' '.join(d.comment.split())[:100]})" if d.comment else ""
        lines.append(f"    {d.id}: judge {fig(d.judge)}, human {fig(d.human)}{note}")
    return lines


def render_text(result: Agreement, worst: int) -> str:
    lines: list[str] = []
    for c in result.criteria:
        lines += [*_criterion_lines(c, worst), ""]
    lines.append(
        f"{result.unmatched_labels} label(s) name no item or criterion of the results; "
        f"{result.not_scored} labelled item(s) the judge did not score (n/a or error)"
    )
    intervals = "95% bootstrap intervals in brackets"
    return "\n".join([*lines, intervals]) + "\n"


def run(args: argparse.Namespace) -> int:
    from composo._agreement import LabelError, agreement

    if not args.results.is_file():
        raise UsageError(f"no such file: {args.results}")
    if args.resamples < 100:
        raise UsageError("--resamples: use at least 100")
    try:
        result = agreement(
            args.results,
            args.labels,
            seed=args.seed,
            resamples=args.resamples,
            worst=max(args.worst, 0),
        )
    except (LabelError, OSError) as exc:
        raise UsageError(str(exc)) from None
    if result.rows_set_aside:
        print(
            f"composo agreement: {args.results.name}: {result.rows_set_aside} row(s) set aside "
            "(not results; see `composo report`)",
            file=sys.stderr,
        )
    if not result.criteria:
        raise UsageError(
            f"no label pairs with a scored item of {args.results.name} "
            f"({result.unmatched_labels} label(s) name no item or criterion of it, "
            f"{result.not_scored} name items the judge did not score); labels name items by "
            "their id and the criterion by its text or library name"
        )
    if args.json:
        print(json.dumps(asdict(result), indent=1))
    else:
        sys.stdout.write(render_text(result, args.worst))
    return EXIT_BAD_ROWS if result.rows_set_aside else 0
