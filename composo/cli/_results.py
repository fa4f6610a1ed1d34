"""The results file (one JSON row per item and criterion): resuming from it safely, appending to it,
and summarising it. Shared by ``composo evaluate`` and ``composo report``."""

from __future__ import annotations

import json
import logging
import os
import statistics
from array import array
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["CriterionStats", "Resume", "RowWriter", "iter_rows", "prepare_resume", "summarize"]

_log = logging.getLogger("composo")


def _row(line: bytes) -> dict[str, Any] | None:
    """A well-formed row, or ``None`` for anything else (a torn or foreign line)."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    if (
        not isinstance(row, dict)
        or not isinstance(row.get("index"), int)
        or not isinstance(row.get("criterion"), str)
    ):
        return None
    return row


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

    @property
    def count(self) -> int:
        return len(self.scores) + self.not_applicable + self.errors

    def add(self, row: dict[str, Any]) -> None:
        if row.get("error") is not None:
            self.errors += 1
        elif isinstance(row.get("score"), (int, float)):
            self.scores.append(float(row["score"]))
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
