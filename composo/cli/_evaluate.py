"""``composo evaluate``: score a dataset (JSONL, CSV or Parquet) against criteria, writing one
row per item and criterion as results arrive; re-running with the same ``-o`` resumes. Answers
are cached unless ``--no-cache``; a ``.parquet`` ``-o`` is written once the run is done."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from composo.cli import EXIT_FAILED, UsageError
from composo.cli import _common as common
from composo.cli._results import iter_rows
from composo.errors import ComposoValidationError

if TYPE_CHECKING:
    from composo import Composo
    from composo._core.plan import Progress
    from composo._data.readers import BadRow
    from composo.types import BatchResult, EvaluateOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
        own=_data_arguments,
    )


def _data_arguments(parser: argparse.ArgumentParser) -> None:
    from composo._data.frames import FILE_ROLES
    from composo._data.readers import FORMATS

    group = parser.add_argument_group(
        "tables and the result cache",
        "CSV and Parquet rows (and JSONL records with question/answer fields) are read by "
        "column name: a 'messages' column, or 'question' and 'answer' (optional 'context'), "
        "plus optional 'system', 'tools', 'id', 'tags' and 'metadata' (an object or its JSON "
        "text, given back on each result row, never sent). Name yours with the flags below.",
    )
    group.add_argument(
        "--format",
        choices=FORMATS,
        help="the input's format (default: from its extension; stdin is JSONL)",
    )
    for role in FILE_ROLES:
        group.add_argument(
            f"--{role}-column",
            dest=f"{role}_column",
            metavar="NAME",
            help=f"the column holding the {role} (default: {role!r})",
        )
    group.add_argument(
        "--no-cache",
        action="store_true",
        help="send every request, even one answered before (the cache is on by default)",
    )
    group.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help="where answers are cached (default: COMPOSO_CACHE_DIR, else the user's cache "
        "directory; see `composo cache info`)",
    )


def run(args: argparse.Namespace) -> int:
    source = None if args.input == "-" else Path(args.input)
    criteria, options = common.prepare(args, source, "INPUT")  # a UsageError: exit 2
    state = _Run(args, criteria, source)
    try:
        with state.client(state.transport()) as client:
            state.main(client, source, options)
    except BrokenPipeError:  # the reader of stdout went away: nowhere left to write results
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("stopped: the output was closed", file=sys.stderr)
        return EXIT_FAILED
    finally:
        state.close()
    return state.end(state.finish, state.fatal)


class _Run(common.Run):
    """Feeds the dataset's records to the batch runner; reader, cache and Parquet set up first."""

    def __init__(self, args: argparse.Namespace, criteria: list[str], source: Path | None) -> None:
        from composo._data.frames import FILE_ROLES
        from composo._data.readers import UnreadableInput, open_records

        self.fatal: str | None = None  # the input stopped being readable
        self.bar: Progress | None = None
        self.told, self.told_at = 0, 0.0  # throttling said on stderr
        self.cache: Any = None
        self.caching: Any = None  # the caching transport
        columns = {r: c for r in FILE_ROLES if (c := getattr(args, f"{r}_column"))}
        try:
            self.records = open_records(source, args.format, columns)
        except (ComposoValidationError, UnreadableInput) as exc:
            raise UsageError(str(exc)) from None
        try:
            self.parquet = self._parquet(args)
            # --local starts a server on a new port each time: its answers could never be reused
            if not args.no_cache and not args.local:
                from composo._cache import ResultCache

                self.cache = ResultCache(args.cache_dir)
            super().__init__(args, criteria, source)
        except (ComposoValidationError, UsageError) as exc:  # or COMPOSO_CACHE_MAX_SIZE / _AGE
            self.close()
            raise UsageError(str(exc)) from None

    @staticmethod
    def _parquet(args: argparse.Namespace) -> Path | None:
        """A Parquet ``-o``: the rows go to a JSONL file beside it while the run lasts (so that a
        re-run resumes), the Parquet file is written at the end."""
        if args.output is None or args.output.suffix.lower() != ".parquet":
            return None
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise UsageError(
                "-o: writing Parquet needs pyarrow: pip install 'composo[parquet]'"
            ) from None
        parquet: Path = args.output
        args.output = parquet.with_name(parquet.name + ".jsonl")
        return parquet

    def transport(self) -> Any:
        """The caching transport (``None`` with ``--no-cache``), on the clients' own network."""
        if self.cache is not None:
            from composo._core.network import Network
            from composo._transport import sync_transport

            self.caching = sync_transport(self.args.concurrency, Network(), self.cache)
        return self.caching

    def close(self) -> None:
        self.records.close()
        if self.cache is not None:
            self.cache.close()

    def finish(self) -> None:
        """Say how many answers came from the cache; write the Parquet file once all is done."""
        from composo._data.writers import write_parquet

        if self.caching is not None:
            hits, sent = self.caching.hits, self.caching.sent
            print(
                f"cache: {hits} answer(s) from the cache, {sent} request(s) sent", file=sys.stderr
            )
        if self.parquet is not None and not (self.fatal or self.interrupted):
            rows = iter_rows(self.args.output)
            write_parquet(rows, self.parquet, schema=_schema(), json_columns=_JSON)
            print(f"wrote {self.parquet}", file=sys.stderr)

    def main(self, client: Composo, source: Path | None, options: EvaluateOptions) -> None:
        bar = self._progress(source)
        with self.records as lines:
            if bar is None:
                self.drain(client, self.items(lines), options, lambda: self._throttled(client))
                return
            bar.status = client.pace
            bar.start()
            try:
                self.drain(client, self.items(lines), options, progress=lambda d, t: bar.advance())
            finally:
                bar.close()

    def _throttled(self, client: Composo) -> None:
        """Without a progress line: one line per throttling episode, at most every ten seconds."""
        count, now = client.throttled, time.monotonic()
        if count > self.told and now - self.told_at >= 10.0:
            self.told, self.told_at = count, now
            print(
                f"{client.pace() or 'throttled'} (the server answered 429; slowing down, "
                "nothing is lost)",
                file=sys.stderr,
            )

    def _progress(self, source: Path | None) -> Progress | None:
        from composo._core.plan import Progress

        if not sys.stderr.isatty() or importlib.util.find_spec("rich") is None:
            return None  # no terminal, or no rich (the `cli` extra): no bar
        total = None
        if self.records.format != "jsonl":  # tables
            rows = self.records.rows
            total = None if rows is None else rows * len(self.criteria)
        elif source is not None:
            with source.open("rb") as f:
                total = sum(len(self.remaining(i)) for i, line in enumerate(f) if line.strip())
        self.bar = Progress(True, total)
        return self.bar

    def items(self, records: Iterable[tuple[int, Any]]) -> Iterator[dict[str, Any]]:
        """An item per record with pairs to do; a record that cannot be used gets error rows."""
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
            self.expect(index, len(wanted), self.records.where)
            yield {**item, "criteria": wanted}

    def _bad(self, index: int, wanted: list[str], bad: BadRow) -> None:
        from composo.types import BatchResult

        self.say(bad.message, index)
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
        self.say(f"{place}: {row['error']}", result.index)


_JSON = ("metadata",)  # each row's own object: its keys and types vary, kept as JSON text


def _schema() -> Any:
    """The columns of a Parquet results file (``-o results.parquet``)."""
    import pyarrow as pa

    kinds = {"index": pa.int64(), "score": pa.float64()}  # the others are text
    names = ("index", "id", "criterion", "score", "explanation", "error")
    who = ("judge", "model_core", "judge_model", "source")  # as each JSONL row carries them
    return pa.schema([(n, kinds.get(n, pa.string())) for n in (*names, *who, *_JSON)])
