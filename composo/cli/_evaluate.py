"""``composo evaluate``: score a JSONL dataset against criteria, writing one row per item and
criterion as results arrive; re-running with the same ``-o`` resumes where the last run stopped."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from composo.cli import UsageError
from composo.cli import _common as common
from composo.cli._common import EXIT_FAILED

if TYPE_CHECKING:
    from composo import Composo
    from composo._core.plan import Progress
    from composo._data.readers import BadRow
    from composo.cli._data import DataRun
    from composo.types import BatchResult, EvaluateOptions

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from composo.cli._data import add_arguments as add_data_arguments  # tables, result cache

    common.add_run_arguments(
        parser,
        metavar="INPUT",
        input_help="JSONL file, one conversation per line ('messages', or 'input' and 'result'; "
        "optional 'id', 'system', 'tools', 'tags', and 'metadata': your own fields, given back "
        "on each result row), a CSV or Parquet file (columns mapped by name, see "
        "--question-column...), or - for stdin",
        output_help="results file (default: stdout). Re-running with the same INPUT and file "
        "resumes: rows are matched by line number and criterion, scored pairs are skipped, "
        "failed ones retried. A name ending .parquet also writes Parquet at the end",
        tag_help="a tag sent with every evaluation (repeatable; an item's own tags win)",
        own=add_data_arguments,
    )


def run(args: argparse.Namespace) -> int:
    from composo.cli._data import DataRun

    source = None if args.input == "-" else Path(args.input)
    criteria, options = common.prepare(args, source, "INPUT")  # a UsageError: exit 2
    data = DataRun(args, source)  # the input's reader, a Parquet -o, the result cache
    try:
        state = _Run(args, criteria, source, data)
    except UsageError:
        data.close()
        raise
    try:
        with state.client(data.transport(args.concurrency)) as client:
            state.main(client, source, options)
    except BrokenPipeError:  # the reader of stdout went away: nowhere left to write results
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("stopped: the output was closed", file=sys.stderr)
        return EXIT_FAILED
    finally:
        data.close()
    closing = functools.partial(data.finish, state.fatal, state.interrupted)
    return state.end(closing, state.fatal)


class _Pace:
    """The client's pace, for the progress line (a terminal) or a note on stderr (a log): says
    when the server throttles the run and how fast it goes then."""

    def __init__(self, client: Composo) -> None:
        self._client = client
        self._told = 0
        self._told_at = 0.0

    def status(self) -> str | None:
        return self._client.pace()

    def note(self) -> None:
        """One line on stderr per throttling episode, at most every ten seconds."""
        import time

        count = self._client.throttled
        now = time.monotonic()
        if count > self._told and now - self._told_at >= 10.0:
            self._told, self._told_at = count, now
            print(
                f"{self.status() or 'throttled'} (the server answered 429; slowing down, "
                "nothing is lost)",
                file=sys.stderr,
            )


class _Run(common.Run):
    """Feeds the dataset's records to the batch runner and writes each result."""

    def __init__(
        self, args: argparse.Namespace, criteria: list[str], source: Path | None, data: DataRun
    ) -> None:
        super().__init__(args, criteria, source)
        self.data = data
        self.fatal: str | None = None  # the input stopped being readable
        self.bar: Progress | None = None

    def main(self, client: Composo, source: Path | None, options: EvaluateOptions) -> None:
        bar = self._progress(source)
        pace = _Pace(client)
        if bar is not None:
            bar.status = pace.status
        with self.data.records as lines:
            if bar is None:
                self.drain(client, self.items(lines), options, pace.note)
                return
            bar.start()
            try:
                self.drain(client, self.items(lines), options, progress=lambda d, t: bar.advance())
            finally:
                bar.close()

    def _progress(self, source: Path | None) -> Progress | None:
        from composo._core.plan import Progress

        if not sys.stderr.isatty() or importlib.util.find_spec("rich") is None:
            return None  # no terminal, or no rich (the `cli` extra): no bar
        total = None
        if self.data.records.format != "jsonl":  # tables
            rows = self.data.records.rows
            total = None if rows is None else rows * len(self.criteria)
        elif source is not None:
            total = 0
            with source.open("rb") as f:
                for index, line in enumerate(f):
                    if line.strip():
                        total += len(self.remaining(index))
        self.bar = Progress(True, total)
        return self.bar

    def items(self, records: Iterable[tuple[int, Any]]) -> Iterator[dict[str, Any]]:
        """One item per record (a line, a table row) that still has pairs to do, carrying the
        ``criteria`` it still needs; a record that cannot be used gets its error rows here."""
        from composo._data.readers import BadRow, UnreadableInput

        stream = iter(records)
        while True:
            try:
                index, item = next(stream)
            except StopIteration:
                return
            except UnreadableInput as exc:  # what was scored so far is already written
                self.fatal = f"{exc}. Run the same command again to resume"
                return
            wanted = self.remaining(index)
            if not wanted:
                continue
            if isinstance(item, BadRow):
                self._bad(index, wanted, item)
                continue
            self.expect(index, len(wanted), self.data.records.where)
            yield {**item, "criteria": wanted}

    def _bad(self, index: int, wanted: list[str], bad: BadRow) -> None:
        from composo.errors import ComposoValidationError
        from composo.types import BatchResult

        self.notes.say(bad.message, index)
        error = ComposoValidationError(bad.message)
        for criterion in wanted:
            self.record(BatchResult(index, criterion, bad.id, None, error, bad.metadata))
            if self.bar is not None:
                self.bar.advance()

    def record(self, result: BatchResult, where: str | None = None) -> None:
        """Write one result row and say what went wrong (``where``: the record's place)."""
        row = self.write(result)
        if row is None or result.error is None:
            return
        place = where or f"line {result.index + 1}"
        if result.id is not None:
            place += f" (id {result.id})"
        self.notes.say(f"{place}: {row['error']}", result.index)
