"""What ``composo evaluate`` adds for tables and the result cache: the input's format and column
mapping, a Parquet results file, and the cache (on unless ``--no-cache``), with its hits reported
after the summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from composo.cli import UsageError

__all__ = ["DataRun", "DataUsageError", "add_arguments"]


class DataUsageError(UsageError):
    """A problem with the input, the mapping or the output, reported before any request."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


class DataRun:
    """The run's reader, cache and Parquet output, set up before any request."""

    def __init__(self, args: argparse.Namespace, source: Path | None) -> None:
        from composo._data.frames import FILE_ROLES
        from composo._data.readers import UnreadableInput, open_records
        from composo.errors import ComposoValidationError

        columns = {
            r: getattr(args, f"{r}_column") for r in FILE_ROLES if getattr(args, f"{r}_column")
        }
        try:
            self.records = open_records(source, args.format, columns)
        except (ComposoValidationError, UnreadableInput) as exc:
            raise DataUsageError(str(exc)) from None
        self.parquet: Path | None = None
        if args.output is not None and args.output.suffix.lower() == ".parquet":
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                self.records.close()
                raise DataUsageError(
                    "-o: writing Parquet needs pyarrow: pip install 'composo[parquet]'"
                ) from None
            # Rows go to a JSONL file beside it while the run lasts (so a re-run resumes).
            self.parquet = args.output
            args.output = args.output.with_name(args.output.name + ".jsonl")
        self.output: Path | None = args.output
        self.cache: Any = None
        # --local starts a server on a new port each time: its answers could never be reused.
        if not args.no_cache and not args.local:
            from composo._cache import ResultCache

            try:
                self.cache = ResultCache(args.cache_dir)
            except ComposoValidationError as exc:  # COMPOSO_CACHE_MAX_SIZE / _MAX_AGE
                self.records.close()
                raise DataUsageError(str(exc)) from None
        self._transport: Any = None

    def transport(self, concurrency: int) -> Any:
        """The caching transport for the run's client (``None`` with ``--no-cache``)."""
        if self.cache is None:
            return None
        from composo._core.network import Network
        from composo._transport import sync_transport

        # built as the clients build their own: connections on the environment's proxies and
        # CA bundle, every socket wait ending by the call's deadline, the cache over them
        self._transport = sync_transport(concurrency, Network(), self.cache)
        return self._transport

    def close(self) -> None:
        self.records.close()
        if self.cache is not None:
            self.cache.close()

    def finish(self, fatal: str | None, interrupted: bool) -> None:
        """Say how many answers came from the cache; write the Parquet file once all is done."""
        from composo._data.writers import write_parquet
        from composo.cli._results import iter_rows

        if self._transport is not None:
            hits, sent = self._transport.hits, self._transport.sent
            print(
                f"cache: {hits} answer(s) from the cache, {sent} request(s) sent", file=sys.stderr
            )
        if self.parquet is not None and self.output is not None and not (fatal or interrupted):
            write_parquet(
                iter_rows(self.output), self.parquet, schema=_schema(), json_columns=_JSON
            )
            print(f"wrote {self.parquet}", file=sys.stderr)


_JSON = ("metadata",)  # each row's own object: its keys and types vary, kept as JSON text


def _schema() -> Any:
    """The columns of a Parquet results file (``-o results.parquet``)."""
    import pyarrow as pa

    kinds = {"index": pa.int64(), "score": pa.float64()}  # the others are text
    names = ("index", "id", "criterion", "score", "explanation", "error", "judge", "model_core")
    return pa.schema([(n, kinds.get(n, pa.string())) for n in (*names, "source", *_JSON)])
