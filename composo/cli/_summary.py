"""A run summarised once (:class:`Summary`: per criterion the counts, figures, distribution and
judges; the run's record, the rows set aside, the gates' outcomes). The terminal and markdown
summaries (here), JUnit, the page and ``composo compare`` render from it."""

from __future__ import annotations

import html
import json
import logging
import os
import statistics
import sys
import textwrap
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from composo.cli._gates import Gate, GateOutcome
from composo.cli._names import label
from composo.cli._results import RowProblem, valid_score

_log = logging.getLogger("composo")
_TEXTS = ("judge", "model_core", "input")  # a run record's fields of text
BINS = 10  # the score distribution's bins (a binary criterion uses the first and the last)


@dataclass
class CriterionStats:
    """One criterion's rows, counted (the scores kept compactly, for the median)."""

    scores: array[float] = field(default_factory=lambda: array("d"))
    bins: list[int] = field(default_factory=lambda: [0] * BINS)
    not_applicable: int = 0
    errors: int = 0
    set_aside: int = 0  # rows whose score is not a number from 0 to 1 (edited by hand?)
    judges: dict[str, int] = field(default_factory=dict)  # judge -> rows it judged
    sources: dict[str, int] = field(default_factory=dict)  # fresh / cache (/ resumed) -> rows

    @property
    def count(self) -> int:
        return len(self.scores) + self.not_applicable + self.errors

    @property
    def scored(self) -> int:
        return len(self.scores)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.scores) if self.scores else None

    def pass_rate(self) -> float | None:
        """For a binary criterion: the share of scored items that passed (score 1)."""
        return sum(x >= 0.5 for x in self.scores) / len(self.scores) if self.scores else None

    def figures(self) -> dict[str, float | None]:
        s = self.scores
        if not s:
            return {"mean": None, "median": None, "min": None, "max": None}
        return {"mean": self.mean, "median": statistics.median(s), "min": min(s), "max": max(s)}

    def page(self) -> dict[str, Any]:
        """The counts and figures as the page reads them."""
        shown = {k: getattr(self, k) for k in ("count", "scored", "errors", "bins", "judges")}
        return shown | self.figures() | {"pass_rate": self.pass_rate(), "na": self.not_applicable}

    def add(self, row: Mapping[str, Any]) -> None:
        what = kind(row)
        if what == "error":
            self.errors += 1
            return
        judge = judge_key(row) or "unknown"  # who judged it (older files: nobody said)
        self.judges[judge] = self.judges.get(judge, 0) + 1
        given = row.get("source")
        source = given if given in ("fresh", "cache") and isinstance(given, str) else "unknown"
        self.sources[source] = self.sources.get(source, 0) + 1
        if what == "n/a":
            self.not_applicable += 1
        elif what == "scored":
            self.scores.append(float(row["score"]))
            self.bins[min(int(row["score"] * BINS), BINS - 1)] += 1
        else:
            self.set_aside += 1


def kind(row: Mapping[str, Any]) -> str:
    """What a row counts as: ``error``, ``n/a``, ``scored`` or ``set aside`` (a score that is
    not a number from 0 to 1)."""
    score = row.get("score")
    if row.get("error") is not None:
        return "error"
    if not isinstance(score, (int, float)):
        return "n/a"
    return "scored" if valid_score(score) else "set aside"


def judge_key(row: Mapping[str, Any]) -> str | None:
    """One name per judge for counting: ``heuristic``, ``platform``, ``platform align-...``."""
    from composo._core.provenance import PLATFORM

    judge = row.get("judge")
    if not isinstance(judge, str) or not judge:
        return None
    core = row.get("model_core")
    return f"{judge} {core}" if judge == PLATFORM and isinstance(core, str) and core else judge


@dataclass
class RunInfo:
    """Who judged a run and against what: kept next to the results file (``OUT.jsonl.run.json``)
    so that the report and the viewer can say it too."""

    judge: str | None = None  # the run's one judge (see judges), else what a server named
    judges: dict[str, int] = field(default_factory=dict)  # judge -> scores in the results
    sources: dict[str, int] = field(default_factory=dict)  # fresh / cache / resumed -> scores
    local: bool = False  # the CLI started its own local server (--local)
    model_core: str | None = None
    criteria: list[str] = field(default_factory=list)
    input: str | None = None  # the dataset, for the page's conversations and tags

    def account(
        self,
        stats: dict[str, CriterionStats],
        written: dict[str, dict[str, int]],
        earlier: RunInfo | None = None,
    ) -> None:
        """Who judged the results and how each score came: ``written``, this run's rows per
        criterion and source (the rest were resumed); ``earlier``, the previous record (its judge
        stands for rows an older version wrote without naming one)."""
        for criterion, s in stats.items():
            mine = written.get(criterion, {})
            resumed = sum(s.sources.values()) - sum(mine.values())
            s.sources = {**mine, **({"resumed": resumed} if resumed > 0 else {})}
        told = earlier.judge if earlier is not None else None
        judges = Summary(stats, RunInfo(judge=told)).judges()  # the rows', else the record's
        if judges:
            self.judges = judges
            self.judge = next(iter(judges)) if len(judges) == 1 else "mixed"
        elif told and self.judge is None:
            self.judge = told
        self.sources = _total(s.sources for s in stats.values())

    @staticmethod
    def sidecar(results: Path) -> Path:
        return results.with_name(results.name + ".run.json")

    def save(self, results: Path) -> None:
        try:
            text = json.dumps(asdict(self), indent=1) + "\n"
            self.sidecar(results).write_text(text, encoding="utf-8")
        except OSError as exc:  # the results are what matter; say so and go on
            _log.warning("could not write %s: %s", self.sidecar(results), exc)

    @classmethod
    def load(cls, results: Path) -> RunInfo | None:
        try:
            data = json.loads(cls.sidecar(results).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None

        said: dict[str, Any] = {k: _counts(data.get(k)) for k in ("judges", "sources")}
        said |= {k: data[k] for k in _TEXTS if isinstance(data.get(k), str)}
        crit = data.get("criteria")
        criteria = [c for c in crit if isinstance(c, str)] if isinstance(crit, list) else []
        return cls(**said, local=data.get("local") is True, criteria=criteria)


def _counts(value: Any) -> dict[str, int]:
    """A run record's ``{name: count}``, what is well-formed of it."""
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


def _total(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    return dict(sum(map(Counter[str], counts), Counter[str]()))  # the counts are positive


@dataclass
class Summary:
    """A run summarised once; the criteria in the run's order."""

    criteria: dict[str, CriterionStats]
    info: RunInfo = field(default_factory=RunInfo)
    name: str = ""  # the results file's name
    items: int = 0  # items (dataset lines) with a row
    problems: list[RowProblem] = field(default_factory=list)  # rows the reader set aside (first)
    bad: int = 0  # every row the reader set aside
    outcomes: list[GateOutcome] = field(default_factory=list)

    def __post_init__(self) -> None:  # the run's criteria first, in its order
        first = [c for c in self.info.criteria if c in self.criteria]
        rest = [c for c in self.criteria if c not in first]
        self.criteria = {c: self.criteria[c] for c in first + rest}

    @classmethod
    def of(
        cls,
        rows: Iterable[Mapping[str, Any]],
        info: RunInfo | None = None,
        name: str = "",
        problems: tuple[list[RowProblem], int] = ([], 0),
    ) -> Summary:
        """``rows`` counted in one pass; ``problems``: the rows the reader set aside."""
        stats: dict[str, CriterionStats] = {}
        items: set[int] = set()
        for row in rows:
            items.add(row["index"])
            stats.setdefault(row["criterion"], CriterionStats()).add(row)
        return cls(stats, info or RunInfo(), name, len(items), problems[0], problems[1])

    @property
    def errors(self) -> int:
        return sum(s.errors for s in self.criteria.values())

    def check(self, gates: list[Gate]) -> None:
        """Each gate against the figures: the criterion's mean or its pass rate."""
        for gate in gates:
            s = self.criteria.get(gate.criterion) or CriterionStats()
            value = s.mean if gate.kind == "fail-under" else s.pass_rate()
            # a tiny tolerance so that a mean printed as the threshold is not a failure
            passed = value is not None and value >= gate.threshold - 1e-12
            self.outcomes.append(GateOutcome(gate, value, passed))

    @property
    def set_aside(self) -> int:
        """Rows that are not results: set aside by the reader or, read as they are, counted."""
        return self.bad + sum(s.set_aside for s in self.criteria.values())

    def judges(self) -> dict[str, int]:
        """Scores per judge: the run record's count, else the rows' own."""
        if self.info.judges:
            return self.info.judges
        judges = _total(s.judges for s in self.criteria.values())
        told = self.info.judge
        if "unknown" in judges and told and told != "mixed":
            judges[told] = judges.get(told, 0) + judges.pop("unknown")
        return judges

    def sources(self) -> dict[str, int]:
        return self.info.sources or _total(s.sources for s in self.criteria.values())

    def judge_description(self) -> str:
        """The run's judge for a reader; a run of several judges lists each with its count."""
        judges, info = self.judges(), self.info
        if len(judges) > 1:
            parts = [f"{judge_text(j)}: {n} score(s)" for j, n in judges.items()]
            return "mixed, each row names its judge; " + "; ".join(parts)
        if judges:
            return judge_text(next(iter(judges)), info.local)
        if info.judge is None and not info.local and not info.criteria:
            return "not recorded (no run record beside the results)"
        return judge_text(info.judge, info.local)

    def header_lines(self) -> list[tuple[str, str]]:
        """(label, text) pairs: judge, how the scores came, model core."""
        lines = [("judge", self.judge_description())]
        if self.sources():
            lines.append(("scores", sources_text(self.sources())))
        lines.append(("model core", self.info.model_core or "the server's default"))
        return lines

    def page(self, problems_shown: int = 200) -> dict[str, Any]:
        """The summary as the page's script reads it (plain JSON)."""
        from composo._core.wire import is_binary

        criteria = [
            {"text": c, "label": label(c, 60), "binary": is_binary(c), **s.page()}
            for c, s in self.criteria.items()
        ]
        judges, info = self.judges(), self.info  # the heuristic stand-in is shown as such
        dev = "heuristic" in judges or (not judges and (info.local or info.judge == "heuristic"))
        return {
            "name": self.name,
            "facts": [[k, v] for k, v in self.header_lines()],
            "dev": dev,
            "items": self.items,
            "criteria": criteria,
            "set_aside": self.set_aside,
            "problems": [asdict(p) for p in self.problems[:problems_shown]],
        }


_SOURCE_WORDS = {
    "fresh": "fresh from the judge",
    "cache": "from the result cache",
    "resumed": "from an earlier run (resumed)",
    "unknown": "of unrecorded origin",
}


def sources_text(sources: dict[str, int]) -> str:
    """``3 fresh from the judge, 2 from the result cache``."""
    order = [k for k in _SOURCE_WORDS if sources.get(k)]
    order += [k for k in sources if k not in _SOURCE_WORDS and sources[k]]
    return ", ".join(f"{sources[k]} {_SOURCE_WORDS.get(k, k)}" for k in order) or "none"


def judge_text(judge: str | None, local: bool = False) -> str:
    """How a judge is named to a reader, with what its scores are worth."""
    if judge == "heuristic" or (judge is None and local):
        return "heuristic, the offline development stand-in (surface signals, not quality scores)"
    if judge is not None and (judge == "platform" or judge.startswith("platform ")):
        core = judge.removeprefix("platform").strip()
        return f"the Composo platform, model core {core or 'its default'}"
    if judge == "unknown":
        return "not recorded (rows written by an older version)"
    if judge:
        return f"{judge} (a local Composo-compatible server)"
    return "the Composo platform"


# -- the terminal summary -----------------------------------------------------------------------

_HEADERS = ("criterion", "count", "mean", "median", "min", "max", "n/a", "errors")
_NOTE = (
    "count = items scored; mean, median, min and max cover those only. n/a = the criterion did "
    "not apply; errors = not judged (see the error rows). Pass/fail criteria show their pass "
    "rate in the mean column."
)


def _fmt(value: float | None, none: str = "-") -> str:
    return none if value is None else f"{value:.2f}"


def _table(summary: Summary) -> list[list[str]]:
    from composo._core.wire import is_binary

    rows = []
    for criterion, s in summary.criteria.items():
        f = s.figures()
        if is_binary(criterion):
            rate = s.pass_rate()
            figures = ["-" if rate is None else f"pass {rate:.0%}", "-", "-", "-"]
        else:
            figures = [_fmt(f[k]) for k in ("mean", "median", "min", "max")]
        counts = [str(s.not_applicable), str(s.errors)]
        rows.append([label(criterion, 48), str(s.scored), *figures, *counts])
    return rows


def _legend(criteria: Iterable[str], width: int) -> list[str]:
    """Each criterion's full sentence under its short name."""
    wrap = textwrap.TextWrapper(max(40, width - 6), " " * 6, " " * 6)
    lines: list[str] = []
    for criterion in criteria:
        short = label(criterion, 48)
        lines += [f"  {short}"] if short == criterion else [f"  {short}:", *wrap.wrap(criterion)]
    return lines


def print_summary(summary: Summary, written_to: str, command: str) -> None:
    """The closing screen on stderr: who judged, the table, the criteria in full, and where the
    results went (rich's table, or plain text on a core install without it)."""
    out = sys.stderr
    rows = _table(summary)
    width = int(os.environ.get("COLUMNS", "100") or 100)
    head = [f"{k}: {v}" for k, v in summary.header_lines()]
    head.append(f"criteria: {len(summary.criteria)}")
    lines = ["criteria in full:", *_legend(summary.criteria, width)]
    lines.append(f"results written to {written_to}")
    try:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table
    except ImportError:  # core install without the `cli` extra: a plain table
        grid = [list(_HEADERS), *rows]
        widths = [max(len(r[i]) for r in grid) for i in range(len(_HEADERS))]
        pad = [str.ljust] + [str.rjust] * (len(_HEADERS) - 1)  # names left, figures right
        table = ["  ".join(p(c, w) for p, c, w in zip(pad, r, widths, strict=True)) for r in grid]
        body = [f"composo {command}: summary", *(f"  {x}" for x in head), _NOTE, *table, *lines]
        print("\n".join(body), file=out)
        return
    console = Console(file=out, width=None if out.isatty() else width, highlight=False)
    console.print(f"composo {command}: summary", style="bold")
    for line in head:
        console.print(f"  {escape(line)}")
    shown = Table(caption=_NOTE, caption_justify="left")
    for header in _HEADERS:
        shown.add_column(header, justify="left" if header == "criterion" else "right")
    for row in rows:
        errors = row[-1]
        shown.add_row(*map(escape, row[:-1]), errors if errors == "0" else f"[red]{errors}[/red]")
    console.print(shown)
    for line in lines:
        console.print(escape(line))


# -- the markdown summary (a CI job's page) -----------------------------------------------------


def md_cell(text: object) -> str:
    """``text`` safe inside a markdown table cell: one line, pipes and HTML characters escaped."""
    flat = " ".join(str(text).split())
    return html.escape(flat, quote=False).replace("|", "\\|").replace("`", "\\`")


def summary_markdown(summary: Summary) -> str:
    """The markdown summary; every value from the data escaped, so none breaks the table."""
    outcomes = summary.outcomes
    failed = [o for o in outcomes if not o.passed]
    verdict = ""
    if failed:
        verdict = f" — ❌ {len(failed)} of {len(outcomes)} gate(s) failed"
    elif outcomes:
        verdict = f" — ✅ {len(outcomes)} gate(s) passed"
    lines = [f"### Composo evaluation{verdict}", "", *_md_judges(summary)]
    lines += [
        "| criterion | count | mean | pass rate | min | max | n/a | errors | gate |",
        "|---|--:|--:|--:|--:|--:|--:|--:|:-:|",
    ]
    run = summary.info.criteria or list(summary.criteria)
    lines += [_md_row(summary, c) for c in run if c in summary.criteria]
    if outcomes:
        lines.append("")
        lines += [f"- {'✅' if o.passed else '❌'} {md_cell(o.describe())}" for o in outcomes]
    return "\n".join(lines) + "\n\n"


def _md_judges(summary: Summary) -> list[str]:
    judges = summary.judges()
    if not judges:
        return []
    who = md_cell(judge_text(next(iter(judges))))
    if len(judges) > 1:
        listed = [f"{md_cell(judge_text(j))} ({n})" for j, n in judges.items()]
        who = "mixed, each row names its judge: " + "; ".join(listed)
    return [f"**Judge:** {who}. **Scores:** {md_cell(sources_text(summary.sources()))}.", ""]


def _md_row(summary: Summary, criterion: str) -> str:
    from composo._core.wire import is_binary

    s = summary.criteria[criterion]
    f = s.figures()
    rate = s.pass_rate() if is_binary(criterion) else None
    mine = [o.passed for o in summary.outcomes if o.gate.criterion == criterion]
    gate = "" if not mine else ("✅" if all(mine) else "❌")
    return (
        f"| {md_cell(label(criterion, 60))} | {s.count} | {_fmt(f['mean'], '–')} | "
        f"{'–' if rate is None else f'{100 * rate:.0f}%'} | {_fmt(f['min'], '–')} | "
        f"{_fmt(f['max'], '–')} | {s.not_applicable} | {s.errors} | {gate} |"
    )
