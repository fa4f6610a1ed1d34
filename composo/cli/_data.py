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

_PARQUET_CHUNK = 10_000


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
        if self._transport is not None:
            hits, sent = self._transport.hits, self._transport.sent
            print(
                f"cache: {hits} answer(s) from the cache, {sent} request(s) sent", file=sys.stderr
            )
        if self.parquet is not None and self.output is not None and not (fatal or interrupted):
            write_parquet(self.output, self.parquet)
            print(f"wrote {self.parquet}", file=sys.stderr)


def write_parquet(rows_file: Path, target: Path) -> None:
    """The results file as Parquet, written a chunk at a time (flat memory); ``metadata`` is
    the JSON text of each row's object (its keys and types vary from row to row)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from composo.cli._results import iter_rows

    schema = pa.schema(
        [
            ("index", pa.int64()),
            ("id", pa.string()),
            ("criterion", pa.string()),
            ("score", pa.float64()),
            ("explanation", pa.string()),
            ("error", pa.string()),
            ("judge", pa.string()),
            ("model_core", pa.string()),
            ("source", pa.string()),
            ("metadata", pa.string()),
        ]
    )
    tmp = target.with_name(target.name + ".tmp")
    with pq.ParquetWriter(tmp, schema) as writer:
        chunk: list[dict[str, Any]] = []
        for row in iter_rows(rows_file):
            record = {name: row.get(name) for name in schema.names}
            if record["metadata"] is not None:
                record["metadata"] = json.dumps(record["metadata"], ensure_ascii=False)
            chunk.append(record)
            if len(chunk) >= _PARQUET_CHUNK:
                writer.write_table(pa.Table.from_pylist(chunk, schema=schema))
                chunk = []
        writer.write_table(pa.Table.from_pylist(chunk, schema=schema))
    tmp.replace(target)
