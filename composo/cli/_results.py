"""The results file (one JSON row per item and criterion): resuming from it safely, appending to
it, and reading it defensively (rows that are not results set aside and listed). What the rows
say is counted in :mod:`composo.cli._summary`."""

from __future__ import annotations

import json
import math
import os
import sys
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from composo.cli import EXIT_BAD_ROWS, UsageError


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
    """The rows of a results file, streamed; blank and malformed lines are skipped."""
    with path.open("rb") as f:
        yield from filter(None, map(_row, f))


@dataclass
class Resume:
    """What an earlier run already scored: item index -> criteria done."""

    done: dict[int, set[str]] = field(default_factory=dict)
    kept: int = 0
    dropped_errors: int = 0
    repaired: bool = False

    def remaining(self, index: int, criteria: list[str]) -> list[str]:
        return [c for c in criteria if c not in self.done.get(index, ())]


def _verdicts(
    f: IO[bytes], criteria: Collection[str]
) -> Iterator[tuple[bytes, str, dict[str, Any] | None]]:
    """Each whole line of a results file with what a resume makes of it: ``keep``, ``blank``,
    ``bad`` (not a row), ``retry`` (an error row of ``criteria``) or ``twice`` (a pair seen
    before); a torn last line (a run killed mid-write) ends them."""
    seen: dict[int, set[str]] = {}
    for line in f:
        if not line.endswith(b"\n"):
            return
        row = _row(line) if line.strip() else None
        if row is None:
            yield line, "bad" if line.strip() else "blank", None
        elif row.get("error") is not None and row["criterion"] in criteria:
            yield line, "retry", row
        elif row["criterion"] in seen.setdefault(row["index"], set()):
            yield line, "twice", row
        else:
            seen[row["index"]].add(row["criterion"])
            yield line, "keep", row


def prepare_resume(path: Path, criteria: Collection[str]) -> Resume:
    """Leave an existing results file holding each pair once: error rows of ``criteria`` (this
    run retries them), duplicates, unreadable lines and a torn tail removed, through a temporary
    file and an atomic rename (a kill during it leaves the previous file intact)."""
    state = Resume()
    if not path.exists():
        return state
    rewrite, whole = False, 0  # whole: the bytes up to the end of the last whole line
    with path.open("rb") as f:
        for line, verdict, row in _verdicts(f, criteria):
            whole += len(line)
            rewrite |= verdict in ("bad", "retry", "twice")
            state.repaired |= verdict in ("bad", "twice")
            state.dropped_errors += verdict == "retry"
            if verdict == "keep" and row is not None:
                state.done.setdefault(row["index"], set()).add(row["criterion"])
                state.kept += row.get("error") is None
        state.repaired |= whole < os.fstat(f.fileno()).st_size  # a torn tail
    if rewrite:
        tmp = path.with_name(path.name + ".tmp")
        with path.open("rb") as src, tmp.open("wb") as dst:
            dst.writelines(x for x, verdict, _ in _verdicts(src, criteria) if verdict == "keep")
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, path)
    elif state.repaired:
        with path.open("r+b") as f:
            f.truncate(whole)
            os.fsync(f.fileno())
    return state


class RowWriter:
    """Appends one row per line, each with a single write so a kill leaves at most a torn last
    line (which the next run cuts off); nothing is buffered between rows."""

    def __init__(self, path: Path | None, stream: IO[bytes] | None = None) -> None:
        self._stream = stream
        self._fd: int | None = None
        if path is not None:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, row: dict[str, Any], sync: bool = False) -> None:
        data = (json.dumps(row, ensure_ascii=False) + "\n").encode()
        if self._fd is not None:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            if sync:
                os.fsync(self._fd)
        elif self._stream is not None:
            self._stream.write(data)
            self._stream.flush()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


# -- reading a results file defensively (report, compare, view, agreement) ---------------------

_PROBLEMS_KEPT = 1000  # listed in full up to this many; beyond it only counted


def valid_score(value: Any) -> bool:
    """A score a results row may hold: a finite number from 0 to 1 (not a bool)."""
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
    """What makes a results row unusable, or ``None``."""
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
    if row.get("error") is None and score is not None and not valid_score(score):
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
        named = "" if self.id is None else f" (id {self.id})"
        return f"line {self.line}{named}: {self.problem}"


class CheckedRows:
    """A results file's usable rows, streamed; each pass notes the rows it sets aside."""

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

    def report(self, command: str, shown: int = 10) -> None:
        """Say on stderr how many rows were set aside, and the first few."""
        if not self.bad:
            return
        out = sys.stderr
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
    batches = pq.ParquetFile(path).iter_batches(batch_size=4096)
    yield from enumerate((row for batch in batches for row in batch.to_pylist()), 1)


def read_results(path: Path) -> tuple[list[dict[str, Any]], CheckedRows]:
    """Every usable row of a results file in memory, and the reader (its problems)."""
    checked = CheckedRows(path)
    return list(checked), checked


class ResultsError(UsageError, ValueError):
    """Results (or a review) that cannot be used: one line naming the fix, exit 2."""


def load_results(path: Path, name: str = "") -> tuple[list[dict[str, Any]], CheckedRows]:
    """:func:`read_results`, or :class:`ResultsError` (``name``: the file's role, in it)."""
    said = f"{name}: " if name else ""
    if not path.is_file():
        raise ResultsError(f"{said}no such file: {path}")
    try:
        return read_results(path)
    except OSError as exc:
        raise ResultsError(f"{said}{exc}") from None


def item_name(row: Mapping[str, Any], by_id: bool = True) -> str:
    """An item as people name it: its id, else its line in the dataset (``line N``)."""
    if by_id and row.get("id") is not None:
        return str(row["id"])
    return f"line {int(row['index']) + 1}"


def item_keys(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each row's :func:`item_name`, by line when another item of its criterion has the same id
    (two items are never merged under one name)."""
    seen = Counter((r.get("id"), r["criterion"]) for r in rows if r.get("id") is not None)
    return [item_name(r, seen[(r.get("id"), r["criterion"])] == 1) for r in rows]
