"""Datasets streamed as records, whatever the file: JSONL, CSV or Parquet (flat memory).

An unusable row is a :class:`BadRow` naming its place and column; a file unreadable from some
point raises :class:`UnreadableInput`. Table rows become items through :class:`ColumnMap`.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from composo._data.frames import FILE_ROLES, ColumnMap, flag_spelling, plain_id
from composo.errors import ComposoValidationError

FORMATS = ("jsonl", "csv", "parquet")
_SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_PARQUET_BATCH = 512
_CONVERSATION_KEYS = ("messages", "input", "trace")


@dataclass(frozen=True)
class BadRow:
    """A row that cannot be evaluated, and why (the message names the line or row); ``id`` and
    ``metadata``: the row's own, when they could be read (its result rows carry them)."""

    message: str
    id: str | None = None
    metadata: dict[str, Any] | None = None


class UnreadableInput(Exception):
    """The input file cannot be read (at all, or from some point on)."""


def detect_format(path: Path | None, given: str | None) -> str:
    """``--format`` if given, else the file's extension; stdin is JSONL unless told otherwise.

    Raises:
        ComposoValidationError: The extension is not one of the known ones.
    """
    if given is not None:
        return given
    if path is None:
        return "jsonl"
    fmt = _SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise ComposoValidationError(
            f"INPUT: cannot tell the format of {path.name!r} from its extension; name it .jsonl, "
            ".csv or .parquet, or pass --format jsonl|csv|parquet"
        )
    return fmt


class Records:
    """An open dataset: iterate for ``(index, record | BadRow)``; close when done."""

    def __init__(
        self, source: Path | None, fmt: str, columns: Mapping[str, str] | None = None
    ) -> None:
        self.source = source
        self.format = fmt
        self.columns = dict(columns or {})
        self.mapping: ColumnMap | None = None
        self._file: IO[Any] | None = None
        self._parquet: Any = None
        self._csv: Any = None  # a csv reader: its rows and its line_num
        self._header: list[str] = []
        self.where = ""
        """The record last yielded: ``"line N"`` (JSONL, CSV) or ``"row N"`` (Parquet)."""
        self._open()

    def _open(self) -> None:
        where = str(self.source) if self.source is not None else "stdin"
        if self.format == "parquet":
            if self.source is None:
                raise UnreadableInput("INPUT: Parquet cannot be read from stdin; give a file")
            try:
                import pyarrow.parquet as pq
            except ImportError:
                raise UnreadableInput(
                    "INPUT: reading Parquet needs pyarrow: pip install 'composo[parquet]'"
                ) from None
            try:
                self._parquet = pq.ParquetFile(self.source)
            except Exception as exc:
                raise UnreadableInput(
                    f"INPUT: {where} is not a readable Parquet file ({exc})"
                ) from None
            names = list(self._parquet.schema_arrow.names)
            self.mapping = ColumnMap.resolve(self.columns, names, flag_spelling, FILE_ROLES)
            return
        if self.format == "csv":
            named = self.source is not None
            source = self.source if self.source is not None else sys.stdin.fileno()
            # closed in close() (stdin stays open)
            self._file = open(source, encoding="utf-8-sig", newline="", closefd=named)  # noqa: SIM115
            csv.field_size_limit(2**31 - 1)
            self._csv = csv.reader(self._file)
            try:
                self._header = next(self._csv)
            except StopIteration:
                self._header = []
            except (UnicodeDecodeError, csv.Error) as exc:
                raise UnreadableInput(
                    f"INPUT: {where}: cannot read the CSV header ({exc})"
                ) from None
            self.mapping = ColumnMap.resolve(self.columns, self._header, flag_spelling, FILE_ROLES)
            return
        self._file = self.source.open("rb") if self.source is not None else None

    @property
    def rows(self) -> int | None:
        """How many rows there are, when the file says so without being read (Parquet)."""
        if self._parquet is not None:
            return int(self._parquet.metadata.num_rows)
        return None

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any] | BadRow]]:
        if self.format == "parquet":
            return self._parquet_rows()
        if self.format == "csv":
            return self._csv_rows()
        lines: Iterable[bytes] = self._file if self._file is not None else sys.stdin.buffer
        return self._jsonl_rows(lines)

    def _table_row(self, cells: Mapping[str, Any], mapping: ColumnMap) -> dict[str, Any] | BadRow:
        try:
            return mapping.item(cells, self.where)
        except ComposoValidationError as exc:
            return BadRow(str(exc), mapping.ident(cells), mapping.metadata(cells))

    def _parquet_rows(self) -> Iterator[tuple[int, dict[str, Any] | BadRow]]:
        assert self.mapping is not None
        wanted = self.mapping.required()
        index = 0
        batches = self._parquet.iter_batches(batch_size=_PARQUET_BATCH, columns=wanted)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except Exception as exc:
                raise UnreadableInput(
                    f"INPUT: cannot read the Parquet file past row {index} ({exc})"
                ) from None
            for cells in batch.to_pylist():
                self.where = f"row {index + 1}"
                yield index, self._table_row(cells, self.mapping)
                index += 1

    def _csv_rows(self) -> Iterator[tuple[int, dict[str, Any] | BadRow]]:
        assert self._csv is not None and self.mapping is not None
        reader = self._csv
        header, width = self._header, len(self._header)
        index = 0
        while True:
            start = reader.line_num + 1  # the record's first line (a cell may hold line breaks)
            try:
                cells = next(reader)
            except StopIteration:
                return
            except (UnicodeDecodeError, csv.Error) as exc:
                raise UnreadableInput(
                    f"INPUT: cannot read the CSV from line {start} on ({exc})"
                ) from None
            self.where = f"line {start}"
            if not any(c.strip() for c in cells):
                index += 1
                continue
            if len(cells) != width:
                ident = self.mapping.ident(dict(zip(header, cells, strict=False)))
                problem = f"{len(cells)} cells where the header has {width} columns"
                yield index, BadRow(f"{self.where}: {problem}", ident)
            else:
                values = {h: (c if c != "" else None) for h, c in zip(header, cells, strict=True)}
                yield index, self._table_row(values, self.mapping)
            index += 1

    def _jsonl_rows(self, lines: Iterable[bytes]) -> Iterator[tuple[int, dict[str, Any] | BadRow]]:
        """One record per non-blank line (index: the line's position); a table-shaped record
        (``question``/``answer`` fields, or any column flag given) goes through the mapping."""
        for index, raw in enumerate(lines):
            if not raw.strip():
                continue
            self.where = f"line {index + 1}"
            try:
                item: Any = json.loads(raw)
            except json.JSONDecodeError as exc:
                where = f"{exc.msg} at column {exc.colno}"
                yield index, BadRow(f"line {index + 1}: not valid JSON ({where})")
                continue
            except UnicodeDecodeError:
                yield index, BadRow(f"line {index + 1}: not UTF-8 text")
                continue
            if not isinstance(item, dict):
                found = type(item).__name__
                yield index, BadRow(f"line {index + 1}: expected a JSON object, got a {found}")
                continue
            if self.columns or (
                "question" in item and not any(k in item for k in _CONVERSATION_KEYS)
            ):
                try:
                    mapping = ColumnMap.resolve(self.columns, list(item), flag_spelling, FILE_ROLES)
                except ComposoValidationError as exc:
                    meta = item.get("metadata")
                    kept = meta if isinstance(meta, dict) else None
                    ident = plain_id(item.get("id"))
                    yield (
                        index,
                        BadRow(f"{self.where}: {exc}", None if ident is None else str(ident), kept),
                    )
                    continue
                item = self._table_row(item, mapping)
            yield index, item

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Records:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_records(
    source: Path | None, fmt: str | None = None, columns: Mapping[str, str] | None = None
) -> Records:
    """Open a dataset for streaming.

    Raises:
        ComposoValidationError: Unknown format, or the column mapping does not fit the header.
        UnreadableInput: The file cannot be opened as that format.
    """
    return Records(source, detect_format(source, fmt), columns)
