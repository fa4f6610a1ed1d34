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
    """``rows`` as Parquet, a chunk at a time, written beside ``target`` and renamed into place
    (a failed write leaves no half file). ``schema``: a ``pyarrow.Schema`` (else the first chunk's
    types); ``json_columns``: kept as JSON text (their values change shape from row to row).
    Without pyarrow, an ImportError says how to install it."""
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
