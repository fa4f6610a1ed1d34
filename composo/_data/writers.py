"""Rows written as a Parquet file: the command line's results (``-o results.parquet``) and its
history export. pyarrow is imported only when a file is written."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

_CHUNK = 10_000  # rows held in memory at once


def write_parquet(
    rows: Iterable[Mapping[str, Any]],
    target: Path,
    *,
    schema: Any = None,
    json_columns: Sequence[str] = (),
) -> None:
    """``rows`` as Parquet, a chunk at a time (flat memory), written beside ``target`` and
    renamed into place, so a failed write never leaves half a file under its name.

    Args:
        rows: Flat dicts.
        target: The file to write.
        schema: A ``pyarrow.Schema`` (its columns are taken from each row); without one, the
            first chunk's types are the file's.
        json_columns: Columns whose values differ in keys and types from row to row, kept as
            their JSON text (null stays null).

    Raises:
        ImportError: pyarrow is not installed (the message says how to install it).
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("writing Parquet needs pyarrow: pip install 'composo[parquet]'") from None

    def table(chunk: list[Mapping[str, Any]], shape: Any) -> Any:
        plain = []
        for row in chunk:
            out = dict(row) if shape is None else {name: row.get(name) for name in shape.names}
            for k in json_columns:
                out[k] = None if row.get(k) is None else json.dumps(row[k], ensure_ascii=False)
            plain.append(out)
        return pa.Table.from_pylist(plain, schema=shape)

    partial = target.with_name(target.name + ".partial")
    stream = iter(rows)
    first = table(list(islice(stream, _CHUNK)), schema)
    with pq.ParquetWriter(partial, first.schema) as writer:
        writer.write_table(first)
        while chunk := list(islice(stream, _CHUNK)):
            writer.write_table(table(chunk, first.schema))
    partial.replace(target)
