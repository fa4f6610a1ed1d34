"""The results file (one JSON row per item and criterion): resuming from it safely, appending to it,
and summarising it. Shared by ``composo evaluate`` and ``composo report``."""

from __future__ import annotations

import json
import logging
import os
import statistics
from array import array
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = [
    "EXIT_BAD_ROWS",
    "CheckedRows",
    "CriterionStats",
    "Resume",
    "RowProblem",
    "RowWriter",
    "RunInfo",
    "item_keys",
    "iter_rows",
    "json_object",
    "judge_text",
    "prepare_resume",
    "print_summary",
    "read_results",
    "row_problem",
    "summarize",
]

_log = logging.getLogger("composo")


def json_object(line: bytes) -> dict[str, Any] | None:
    """A JSON lines file's line as the object it holds, or ``None`` (blank, torn, not an object)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _row(line: bytes) -> dict[str, Any] | None:
    """A well-formed row, or ``None`` for anything else (a torn or foreign line)."""
    row = json_object(line)
    if row is None or not isinstance(row.get("index"), int):
        return None
    return row if isinstance(row.get("criterion"), str) else None


def iter_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a results file, streamed; malformed lines are skipped."""
    with path.open("rb") as f:
        for line in f:
            if line.strip():
                row = _row(line)
                if row is not None:
                    yield row


@dataclass
class Resume:
    """What an earlier run already scored: item index -> criteria done."""

    done: dict[int, set[str]] = field(default_factory=dict)
    kept: int = 0
    dropped_errors: int = 0
    repaired: bool = False

    def remaining(self, index: int, criteria: list[str]) -> list[str]:
        finished = self.done.get(index)
        return criteria if not finished else [c for c in criteria if c not in finished]


def prepare_resume(path: Path, criteria: Collection[str]) -> Resume:
    """Read an existing results file and leave it holding each pair once, scored ones kept.

    Error rows for ``criteria`` are removed (this run retries them; error rows for other criteria
    stay), duplicates and unreadable lines dropped, and a torn last line (a run killed
    mid-write) cut off. The rewrite goes through a temporary file
    and an atomic rename, so a kill during it leaves the previous file intact.
    """
    state = Resume()
    if not path.exists():
        return state
    rewrite = False
    good_end = 0
    with path.open("rb") as f:
        offset = 0
        for line in f:
            offset += len(line)
            if not line.endswith(b"\n"):
                state.repaired = True  # torn tail: everything after good_end goes
                break
            good_end = offset
            if not line.strip():
                continue
            row = _row(line)
            if row is None:
                rewrite = state.repaired = True
                continue
            if row.get("error") is not None and row["criterion"] in criteria:
                state.dropped_errors += 1
                rewrite = True
                continue
            pairs = state.done.setdefault(row["index"], set())
            if row["criterion"] in pairs:
                rewrite = state.repaired = True
                continue
            pairs.add(row["criterion"])
            state.kept += row.get("error") is None
    if rewrite:
        _rewrite(path, criteria)
    elif state.repaired:
        with path.open("r+b") as f:
            f.truncate(good_end)
            f.flush()
            os.fsync(f.fileno())
    return state


def _rewrite(path: Path, criteria: Collection[str]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    seen: dict[int, set[str]] = {}
    with path.open("rb") as src, tmp.open("wb") as dst:
        for line in src:
            if not line.endswith(b"\n"):
                break
            row = _row(line) if line.strip() else None
            if row is None or (row.get("error") is not None and row["criterion"] in criteria):
                continue
            pairs = seen.setdefault(row["index"], set())
            if row["criterion"] in pairs:
                continue
            pairs.add(row["criterion"])
            dst.write(line)
        dst.flush()
        os.fsync(dst.fileno())
    os.replace(tmp, path)


class RowWriter:
    """Appends one row per line, each with a single write so a kill leaves at most a torn last
    line (which the next run cuts off); nothing is buffered between rows."""

    def __init__(self, path: Path | None, stream: IO[bytes] | None = None) -> None:
        self._stream = stream
        self._fd: int | None = None
        if path is not None:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, row: dict[str, Any]) -> None:
        data = (json.dumps(row, ensure_ascii=False) + "\n").encode()
        if self._fd is not None:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        elif self._stream is not None:
            self._stream.write(data)
            self._stream.flush()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@dataclass
class CriterionStats:
    """Per criterion: scores (kept compactly, for the median), not-applicable and error counts."""

    scores: array[float] = field(default_factory=lambda: array("d"))
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

    def pass_rate(self) -> float | None:
        """For a binary criterion: the share of scored items that passed (score 1)."""
        return (
            statistics.fmean(1.0 if x >= 0.5 else 0.0 for x in self.scores) if self.scores else None
        )

    def add(self, row: dict[str, Any]) -> None:
        if row.get("error") is None:  # who judged it (older files: nobody said)
            from composo.cli._provenance import judge_key

            judge = judge_key(row) or "unknown"
            self.judges[judge] = self.judges.get(judge, 0) + 1
            given = row.get("source")
            source = given if given in ("fresh", "cache") and isinstance(given, str) else "unknown"
            self.sources[source] = self.sources.get(source, 0) + 1
        if row.get("error") is not None:
            self.errors += 1
        elif isinstance(row.get("score"), (int, float)):
            if _valid_score(row["score"]):
                self.scores.append(float(row["score"]))
            else:
                self.set_aside += 1
        else:
            self.not_applicable += 1

    def figures(self) -> dict[str, float | None]:
        if not self.scores:
            return {"mean": None, "median": None, "min": None, "max": None}
        return {
            "mean": statistics.fmean(self.scores),
            "median": statistics.median(self.scores),
            "min": min(self.scores),
            "max": max(self.scores),
        }


def summarize(rows: Iterator[dict[str, Any]]) -> dict[str, CriterionStats]:
    out: dict[str, CriterionStats] = {}
    for row in rows:
        out.setdefault(row["criterion"], CriterionStats()).add(row)
    return out


# -- what a run was: the judge, the model core, the criteria -----------------------------------


@dataclass
class RunInfo:
    """Who judged a run and against what: shown atop the summary and the report, and kept next
    to the results file (``OUT.jsonl.run.json``) so ``composo report`` can say it too."""

    judge: str | None = None  # the run's one judge (see judges), else what a server named
    local: bool = False  # the CLI started its own local server (--local)
    model_core: str | None = None
    criteria: list[str] = field(default_factory=list)
    input: str | None = None  # the dataset, for the report's questions, answers and tags

    judges: dict[str, int] = field(default_factory=dict)  # judge -> scores in the results
    sources: dict[str, int] = field(default_factory=dict)  # fresh / cache / resumed -> scores

    def account(
        self,
        stats: dict[str, CriterionStats],
        written: dict[str, dict[str, int]],
        earlier: RunInfo | None = None,
    ) -> None:
        """Who judged the results and how each score came: ``stats`` of the whole results file,
        ``written``: this run's rows per criterion and source (the rest were resumed);
        ``earlier``: the record of the run before, for rows that do not name their judge
        (written by an older version, whose record named one judge for the run)."""
        judges: dict[str, int] = {}
        for criterion, s in stats.items():
            for judge, n in s.judges.items():
                judges[judge] = judges.get(judge, 0) + n
            mine = written.get(criterion, {})
            resumed = sum(s.sources.values()) - sum(mine.values())
            s.sources = {**mine, **({"resumed": resumed} if resumed > 0 else {})}
        unknown = judges.pop("unknown", 0)
        if unknown:
            told = earlier.judge if earlier is not None else None
            fallback = told if told and told != "mixed" else "unknown"
            judges[fallback] = judges.get(fallback, 0) + unknown
        if judges:
            self.judges = judges
            self.judge = next(iter(judges)) if len(judges) == 1 else "mixed"
        elif earlier is not None and earlier.judge and self.judge is None:
            self.judge = earlier.judge
        self.sources = {}
        for s in stats.values():
            for source, n in s.sources.items():
                self.sources[source] = self.sources.get(source, 0) + n

    def observe(self, response: Any) -> None:
        """An httpx response hook: remember the judge a server names."""
        name = response.headers.get("x-composo-judge")
        if name:
            self.judge = name

    @staticmethod
    def sidecar(results: Path) -> Path:
        return results.with_name(results.name + ".run.json")

    def save(self, results: Path) -> None:
        data = {
            "judge": self.judge,
            "judges": self.judges,
            "sources": self.sources,
            "local": self.local,
            "model_core": self.model_core,
            "criteria": self.criteria,
            "input": self.input,
        }
        try:
            self.sidecar(results).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
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
        crit = data.get("criteria")
        return cls(
            judge=data.get("judge") if isinstance(data.get("judge"), str) else None,
            judges=_counts(data.get("judges")),
            sources=_counts(data.get("sources")),
            local=data.get("local") is True,
            model_core=data.get("model_core") if isinstance(data.get("model_core"), str) else None,
            criteria=[c for c in crit if isinstance(c, str)] if isinstance(crit, list) else [],
            input=data.get("input") if isinstance(data.get("input"), str) else None,
        )

    def header_lines(self) -> list[tuple[str, str]]:
        """(label, text) pairs: judge, model core, and how the scores came."""
        lines = [("judge", self.judge_description())]
        if self.sources:
            lines.append(("scores", sources_text(self.sources)))
        lines.append(("model core", self.model_core or "the server's default"))
        return lines

    def judge_description(self) -> str:
        """The run's judge for a reader; a run of several judges lists each with its count."""
        if len(self.judges) > 1:
            parts = [f"{judge_text(j)}: {n} score(s)" for j, n in self.judges.items()]
            return "mixed, each row names its judge; " + "; ".join(parts)
        return judge_text(self.judge, self.local)


def _counts(value: Any) -> dict[str, int]:
    """A run record's ``{name: count}``, what is well-formed of it."""
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


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
    """How a judge is named to a reader, with what its scores are worth (``platform CORE``:
    the platform with that model core)."""
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


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


_SUMMARY_HEADERS = ("criterion", "count", "mean", "median", "min", "max", "n/a", "errors")
_SUMMARY_NOTE = (
    "count = items scored; mean, median, min and max cover those only. n/a = the criterion did "
    "not apply; errors = not judged (see the error rows). Pass/fail criteria show their pass "
    "rate in the mean column."
)


def _summary_rows(stats: dict[str, CriterionStats], order: list[str]) -> list[list[str]]:
    from composo._core.wire import is_binary
    from composo.cli._criteria import label

    rows = []
    for criterion in order:
        s = stats[criterion]
        f = s.figures()
        if is_binary(criterion):
            rate = s.pass_rate()
            figures = ["-" if rate is None else f"pass {rate:.0%}", "-", "-", "-"]
        else:
            figures = [_fmt(f["mean"]), _fmt(f["median"]), _fmt(f["min"]), _fmt(f["max"])]
        rows.append(
            [label(criterion, 48), str(s.scored), *figures, str(s.not_applicable), str(s.errors)]
        )
    return rows


def _legend(order: list[str], width: int) -> list[str]:
    """Each criterion's full sentence under its short name."""
    import textwrap

    from composo.cli._criteria import label

    lines = []
    for criterion in order:
        short = label(criterion, 48)
        lines.append(f"  {short}" if short == criterion else f"  {short}:")
        if short != criterion:
            lines += textwrap.wrap(
                criterion,
                width=max(40, width - 6),
                initial_indent="      ",
                subsequent_indent="      ",
            )
    return lines


def print_summary(
    stats: dict[str, CriterionStats],
    criteria: list[str],
    info: RunInfo | None = None,
    written_to: str | None = None,
    stream: IO[str] | None = None,
) -> None:
    """The closing screen of ``composo evaluate``: who judged, the table, the criteria in full,
    and where the results went."""
    import sys

    out = stream if stream is not None else sys.stderr
    order = [c for c in criteria if c in stats] + [c for c in stats if c not in criteria]
    rows = _summary_rows(stats, order)
    width = int(os.environ.get("COLUMNS", "100") or 100)
    head = [f"{k}: {v}" for k, v in (info or RunInfo()).header_lines()]
    head.append(f"criteria: {len(order)}")
    legend = _legend(order, width)
    try:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table
    except ImportError:  # core install without the `cli` extra: a plain table
        print("composo evaluate: summary", file=out)
        for line in head:
            print(f"  {line}", file=out)
        print(_SUMMARY_NOTE, file=out)
        widths = [max(len(r[i]) for r in [list(_SUMMARY_HEADERS), *rows]) for i in range(8)]
        for row in [list(_SUMMARY_HEADERS), *rows]:
            cells = [row[0].ljust(widths[0])]
            cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
            print("  ".join(cells), file=out)
        print("criteria in full:", file=out)
        for line in legend:
            print(line, file=out)
        if written_to:
            print(f"results written to {written_to}", file=out)
        return

    console = Console(file=out, width=None if out.isatty() else width, highlight=False)
    console.print("composo evaluate: summary", style="bold")
    for line in head:
        console.print(f"  {escape(line)}")
    table = Table(caption=_SUMMARY_NOTE, caption_justify="left")
    for header in _SUMMARY_HEADERS:
        table.add_column(header, justify="left" if header == "criterion" else "right")
    for row in rows:
        errors = row[-1]
        cells = [escape(c) for c in row[:-1]]
        table.add_row(*cells, errors if errors == "0" else f"[red]{errors}[/red]")
    console.print(table)
    console.print("criteria in full:")
    for line in legend:
        console.print(escape(line))
    if written_to:
        console.print(f"results written to {escape(written_to)}")


# -- reading a results file defensively (report, compare, view, agreement) ---------------------

# A results file with rows set aside exits with this, after doing what it could with the rest:
# 1 is "requests failed", 2 "bad command line", 3 "a quality gate failed".
EXIT_BAD_ROWS = 4
_PROBLEMS_KEPT = 1000  # listed in full up to this many; beyond it only counted


def _valid_score(value: Any) -> bool:
    import math

    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0.0 <= value <= 1.0
    )


def _shown(value: Any) -> str:
    """A field's value as a reader should see it in a problem message (short)."""
    text = repr(value) if not isinstance(value, float) else f"{value!r}".replace("nan", "NaN")
    return text if len(text) <= 60 else text[:57] + "..."


def row_problem(row: dict[str, Any]) -> str | None:
    """What makes a results row unusable, or ``None``: a line number, a criterion, a score that
    is null or a finite number from 0 to 1, and text (or null) for the id, explanation and error."""
    index = row.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        return f"index {_shown(index)} is not a line number (a whole number from 0)"
    criterion = row.get("criterion")
    if not isinstance(criterion, str) or not criterion.strip():
        return f"criterion {_shown(criterion)} is not a criterion's text"
    for name in ("id", "explanation", "error"):
        value = row.get(name)
        if value is not None and not isinstance(value, str):
            return f"{name} {_shown(value)} is not text"
    score = row.get("score")
    if row.get("error") is None and score is not None and not _valid_score(score):
        return f"score {_shown(score)} is not a number from 0 to 1 (or null: not applicable)"
    return None


@dataclass(frozen=True)
class RowProblem:
    """One row of a results file set aside, and why."""

    line: int  # the row's line in the results file (Parquet: its row), from 1
    problem: str
    id: str | None = None
    criterion: str | None = None

    def describe(self) -> str:
        where = f"line {self.line}"
        if self.id is not None:
            where += f" (id {self.id})"
        return f"{where}: {self.problem}"


class CheckedRows:
    """A results file's usable rows, streamed; each pass lists the rows it set aside in
    :attr:`problems` (the first ones) and counts all of them in :attr:`bad`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[RowProblem] = []
        self.bad = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.problems, self.bad = [], 0
        for line, row in self._raw():
            problem = "not a JSON object (a damaged line?)" if row is None else row_problem(row)
            if problem is None and row is not None:
                yield row
                continue
            self.bad += 1
            if len(self.problems) < _PROBLEMS_KEPT:
                self.problems.append(_problem(line, row, problem or ""))

    def _raw(self) -> Iterator[tuple[int, dict[str, Any] | None]]:
        if self.path.suffix.lower() in (".parquet", ".pq"):
            yield from _parquet_rows(self.path)
            return
        with self.path.open("rb") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    yield n, json_object(line)

    def report(self, command: str, stream: IO[str] | None = None, shown: int = 10) -> None:
        """Say on stderr how many rows were set aside, and the first few."""
        import sys

        if not self.bad:
            return
        out = stream if stream is not None else sys.stderr
        print(
            f"composo {command}: {self.path.name}: {self.bad} row(s) set aside (not counted; exit "
            f"{EXIT_BAD_ROWS}):",
            file=out,
        )
        for p in self.problems[:shown]:
            print(f"  {p.describe()}", file=out)
        if self.bad > shown:
            print(f"  ... and {self.bad - shown} more", file=out)


def _problem(line: int, row: dict[str, Any] | None, problem: str) -> RowProblem:
    def text(name: str) -> str | None:
        value = None if row is None else row.get(name)
        return None if value is None else _shown(value) if not isinstance(value, str) else value

    return RowProblem(line, problem, text("id"), text("criterion"))


def _parquet_rows(path: Path) -> Iterator[tuple[int, dict[str, Any] | None]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise OSError(
            f"{path.name}: reading Parquet results needs pyarrow: pip install 'composo[parquet]'"
        ) from None
    n = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
        for row in batch.to_pylist():
            n += 1
            yield n, row


def read_results(path: Path) -> tuple[list[dict[str, Any]], CheckedRows]:
    """Every usable row of a results file in memory, and the reader (its problems)."""
    checked = CheckedRows(path)
    return list(checked), checked


def item_keys(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each row's item as people name it: its id, or its line in the dataset (``line N``) when
    it has none or another item of the same criterion has the same one (two items are never
    merged under one name)."""
    from collections import Counter

    seen = Counter((r.get("id"), r["criterion"]) for r in rows if r.get("id") is not None)
    return [
        str(r["id"])
        if r.get("id") is not None and seen[(r["id"], r["criterion"])] == 1
        else f"line {int(r['index']) + 1}"
        for r in rows
    ]
