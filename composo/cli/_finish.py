"""The end of an evaluation run with gates: check them, say which failed by how much, and write
the CI files (``--junit-xml``, ``--summary-md``), all from the run's one
:class:`~composo.cli._summary.Summary`. Kept apart from :mod:`composo.cli._gates`, which
knows nothing of the summary, so that the summary and the JUnit writer can read the gates."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from composo.cli._gates import EXIT_GATE, Gate, GateOutcome

if TYPE_CHECKING:
    from collections.abc import Mapping

    from composo.cli._summary import CriterionStats, Summary

__all__ = ["finish"]


def finish(args: argparse.Namespace, summary: Summary) -> int:
    """After a completed run: check the gates (their outcomes join the summary), say which
    failed by how much, write the JUnit and markdown files. Returns 0, :data:`EXIT_GATE` when a
    gate failed, else ``EXIT_BAD_ROWS`` when scores were set aside."""
    from composo.cli._results import EXIT_BAD_ROWS

    summary.outcomes = evaluate_gates(getattr(args, "gates", None) or [], summary.criteria)
    for outcome in summary.outcomes:
        verdict = "passed" if outcome.passed else "FAILED"
        print(f"gate {verdict}: {outcome.describe()}", file=sys.stderr)
    failed = [o for o in summary.outcomes if not o.passed]
    if summary.set_aside:
        print(
            f"composo {args.command}: {summary.set_aside} row(s) of the results file have a "
            "score that is not a number from 0 to 1; set aside, not counted by the summary or the "
            f"gates (exit {EXIT_BAD_ROWS} unless a gate failed); `composo report` lists them",
            file=sys.stderr,
        )
    if failed:
        print(
            f"composo {args.command}: {len(failed)} of {len(summary.outcomes)} quality gate(s) "
            f"failed (exit {EXIT_GATE})",
            file=sys.stderr,
        )
    junit = getattr(args, "junit_xml", None)
    if junit is not None and args.output is not None:
        from composo.cli._junit import write_junit
        from composo.cli._results import iter_rows

        write_junit(junit, iter_rows(args.output), summary)
        print(f"wrote {junit}", file=sys.stderr)
    markdown = getattr(args, "summary_md", None)
    if markdown is not None:
        from composo.cli._summary import summary_markdown

        with markdown.open("a", encoding="utf-8") as f:
            f.write(summary_markdown(summary))
        print(f"wrote {markdown}", file=sys.stderr)
    return EXIT_GATE if failed else EXIT_BAD_ROWS if summary.set_aside else 0


def evaluate_gates(gates: list[Gate], stats: Mapping[str, CriterionStats]) -> list[GateOutcome]:
    """Each gate against the summary's figures: the criterion's mean or its pass rate."""
    from composo.cli._summary import CriterionStats

    out: list[GateOutcome] = []
    for gate in gates:
        s = stats.get(gate.criterion) or CriterionStats()
        value = s.mean if gate.kind == "fail-under" else s.pass_rate()
        # a tiny tolerance so that a mean printed as the threshold is not a failure
        passed = value is not None and value >= gate.threshold - 1e-12
        out.append(GateOutcome(gate, value, passed))
    return out
