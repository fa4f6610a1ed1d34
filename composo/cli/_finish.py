"""The end of an evaluation run with gates: check them, say which failed by how much, and write
the CI files (``--junit-xml``, ``--summary-md``). Kept apart from :mod:`composo.cli._gates` so
that the JUnit and markdown writers, which read the gates, are not imported by them."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from composo.cli._gates import EXIT_GATE, Gate, evaluate_gates

if TYPE_CHECKING:
    from composo.cli._results import CriterionStats

__all__ = ["finish"]


def finish(args: argparse.Namespace, stats: dict[str, CriterionStats], criteria: list[str]) -> int:
    """After a completed run: check the gates, say which failed by how much, write the JUnit and
    markdown files. Returns 0, :data:`EXIT_GATE` when a gate failed, else ``EXIT_BAD_ROWS`` when
    scores were set aside."""
    gates: list[Gate] = getattr(args, "gates", None) or []
    outcomes = evaluate_gates(gates, stats)
    for outcome in outcomes:
        verdict = "passed" if outcome.passed else "FAILED"
        print(f"gate {verdict}: {outcome.describe()}", file=sys.stderr)
    failed = [o for o in outcomes if not o.passed]
    from composo.cli._results import EXIT_BAD_ROWS

    bad = sum(s.set_aside for s in stats.values())
    if bad:
        print(
            f"composo evaluate: {bad} row(s) of the results file have a score that is not a "
            f"number from 0 to 1; set aside, not counted by the summary or the gates (exit "
            f"{EXIT_BAD_ROWS} unless a gate failed); `composo report` lists them",
            file=sys.stderr,
        )
    if failed:
        print(
            f"composo evaluate: {len(failed)} of {len(outcomes)} quality gate(s) failed "
            f"(exit {EXIT_GATE})",
            file=sys.stderr,
        )
    junit = getattr(args, "junit_xml", None)
    if junit is not None and args.output is not None:
        from composo.cli._junit import write_junit
        from composo.cli._results import iter_rows

        rows = (r for r in iter_rows(args.output) if r["criterion"] in criteria)
        write_junit(junit, rows, criteria, gates)
        print(f"wrote {junit}", file=sys.stderr)
    summary = getattr(args, "summary_md", None)
    if summary is not None:
        from composo.cli._summary_md import summary_markdown

        with summary.open("a", encoding="utf-8") as f:
            f.write(summary_markdown(stats, criteria, outcomes))
        print(f"wrote {summary}", file=sys.stderr)
    return EXIT_GATE if failed else EXIT_BAD_ROWS if bad else 0
