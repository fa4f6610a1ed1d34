"""Quality gates (``--fail-under``, ``--min-pass-rate``) and the CI files' flags of a scoring
run. A failed gate exits 3, so CI can tell "quality dropped" from "requests
failed" (1) and "bad command line" (2)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from composo import criteria as library_criteria
from composo.cli import UsageError
from composo.cli._names import GROUPS, label, library

# Per item, a scored criterion without a --fail-under gate fails its JUnit test case below this.
DEFAULT_ITEM_THRESHOLD = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The gate and CI-file options, added to ``composo evaluate``."""
    group = parser.add_argument_group("quality gates and CI files (a failed gate exits 3)")
    group.add_argument(
        "--fail-under",
        action="append",
        default=[],
        metavar="CRITERION=SCORE",
        help="fail the run (exit 3) when the criterion's mean score is below SCORE (0 to 1); "
        "CRITERION is a name from `composo criteria`, the criterion's text, or * for every "
        "criterion of the run (or a group: RAG, TOOL_USE...); repeatable",
    )
    group.add_argument(
        "--min-pass-rate",
        action="append",
        default=[],
        metavar="CRITERION=RATE",
        help="fail the run (exit 3) when fewer than RATE (0 to 1, or a percentage like 90%%) of "
        "a binary criterion's scored items pass; * for every binary criterion; repeatable",
    )
    group.add_argument(
        "--junit-xml",
        type=Path,
        metavar="FILE",
        help="write a JUnit XML report: one test case per item and criterion (needs -o)",
    )
    group.add_argument(
        "--summary-md",
        type=Path,
        metavar="FILE",
        help='append a markdown summary table to FILE (e.g. "$GITHUB_STEP_SUMMARY")',
    )


@dataclass(frozen=True)
class Gate:
    """One threshold on one criterion of the run."""

    kind: str  # "fail-under" | "min-pass-rate"
    criterion: str
    threshold: float
    spec: str  # as written on the command line, for messages

    @property
    def option(self) -> str:
        return f"--{self.kind} {self.spec}"


@dataclass(frozen=True)
class GateOutcome:
    gate: Gate
    value: float | None  # the mean or the pass rate; None when nothing was scored
    passed: bool

    def describe(self) -> str:
        gate = self.gate
        said = f"{gate.option}: {label(gate.criterion, 48)}"
        if self.value is None:
            return f"{said}: no scored items to measure"

        def shown(x: float) -> str:
            return f"{100 * x:.1f}%" if gate.kind == "min-pass-rate" else f"{x:.3f}"

        said += f": {'mean' if gate.kind == 'fail-under' else 'pass rate'} {shown(self.value)}"
        if self.passed:
            return f"{said} meets {shown(gate.threshold)}"
        return f"{said} is {shown(gate.threshold - self.value)} below {shown(gate.threshold)}"


def parse_threshold(text: str, what: str, percent: bool = False) -> float:
    """A number in [0, 1] (or ``90%`` when ``percent``); ``ValueError`` naming ``what``."""
    raw = text.strip()
    scale = 1.0
    if percent and raw.endswith("%"):
        raw, scale = raw[:-1].strip(), 0.01
    try:
        value = float(raw) * scale
    except ValueError:
        example = "0.9 or 90%" if percent else "0.7"
        raise ValueError(f"{what}: {text!r} is not a number; write e.g. {example}") from None
    if not 0.0 <= value <= 1.0:  # NaN too
        raise ValueError(f"{what}: {text!r} is outside 0 to 1")
    return value


def _resolve_name(name: str, criteria: list[str], option: str) -> list[str]:
    """A gate's criterion (``*``, a name, a group, the text) as criteria of the run."""
    key = name.strip()
    if key == "*":
        return list(criteria)
    if key.upper() in GROUPS and " " not in key:
        group = set(getattr(library_criteria, key.upper()))
        found = [c for c in criteria if c in group]
        if found:
            return found
    text = library().get(key, key)
    for criterion in criteria:
        if text == criterion or key == criterion.strip():
            return [criterion]
    known = ", ".join(label(c, 40) for c in criteria)
    raise ValueError(
        f"{option}: {key!r} is not a criterion of this run (its criteria: {known}); use a name "
        "from `composo criteria`, the text given to -c, or *"
    )


def parse_gates(fail_under: list[str], min_pass_rate: list[str], criteria: list[str]) -> list[Gate]:
    """Every gate as (criterion, threshold); ``ValueError`` with a one-line reason."""
    from composo._core.wire import is_binary

    gates: list[Gate] = []
    for kind, specs in (("fail-under", fail_under), ("min-pass-rate", min_pass_rate)):
        option = f"--{kind}"
        for spec in specs:
            name, sep, value = spec.rpartition("=")
            if not sep or not name.strip():
                example = "rag_faithfulness=0.8" if kind == "fail-under" else "'*=0.9'"
                raise ValueError(
                    f"{option}: expected CRITERION=VALUE, got {spec!r} (e.g. {example})"
                )
            threshold = parse_threshold(value, f"{option} {spec}", percent=kind == "min-pass-rate")
            targets = _resolve_name(name, criteria, option)
            if kind == "min-pass-rate":
                if name.strip() == "*":
                    targets = [c for c in targets if is_binary(c)]
                    if not targets:
                        raise ValueError(
                            f"{option} {spec}: the run has no binary criterion ('Passes if ...' "
                            "or 'Fails if ...'); use --fail-under for scored criteria"
                        )
                elif not is_binary(targets[0]):
                    raise ValueError(
                        f"{option} {spec}: not a binary criterion ('Passes if ...' or "
                        "'Fails if ...'); use --fail-under for a mean score"
                    )
            gates.extend(Gate(kind, c, threshold, spec) for c in targets)
    return gates


def check_args(args: argparse.Namespace, criteria: list[str]) -> None:
    """Check the gate and CI-file flags against the run's ``criteria``, leaving the gates on
    ``args.gates``; ``UsageError``."""
    try:
        args.gates = parse_gates(args.fail_under, args.min_pass_rate, criteria)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.junit_xml is not None and args.output is None:
        raise UsageError(
            "--junit-xml needs -o OUT.jsonl (the test cases are read from the results file)"
        )
    for option, path in (("--junit-xml", args.junit_xml), ("--summary-md", args.summary_md)):
        if path is not None and not path.parent.is_dir():
            raise UsageError(f"{option}: no such directory: {path.parent}")


def item_threshold(criterion: str, gates: list[Gate]) -> float:
    """The score an item needs to pass for ``criterion``: binary criteria need a pass (1); scored
    ones the criterion's ``--fail-under`` value, else :data:`DEFAULT_ITEM_THRESHOLD`."""
    from composo._core.wire import is_binary

    if is_binary(criterion):
        return 1.0
    under = [g.threshold for g in gates if g.kind == "fail-under" and g.criterion == criterion]
    return max(under) if under else DEFAULT_ITEM_THRESHOLD
