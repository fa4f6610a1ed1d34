"""``composo history``: past evaluations of the API key, filtered as the platform filters them,
written to a JSONL or Parquet file (one row per evaluation)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from composo.cli import EXIT_FAILED
from composo.cli._common import add_connection_arguments, from_platform


def _tag(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(
            f"--tag: {text!r} is not KEY=VALUE (e.g. --tag run=nightly)"
        )
    return key, value


def _since(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--since: {text!r} is not an ISO date or date-time (e.g. 2025-01-31 or "
            "2025-01-31T12:00:00Z)"
        ) from None
    return _utc(moment)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tag",
        type=_tag,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only evaluations with this tag (repeatable; the same key twice matches either value)",
    )
    parser.add_argument(
        "--criterion",
        action="append",
        default=[],
        metavar="TEXT",
        help="only evaluations against this criterion (repeatable: any of them)",
    )
    parser.add_argument(
        "--endpoint", choices=("reward", "trace"), help="only reward or only trace evaluations"
    )
    parser.add_argument(
        "--since", type=_since, metavar="WHEN", help="only evaluations made at or after this time"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        metavar="FILE",
        help="where to write: .parquet writes Parquet (needs pyarrow), anything else JSONL",
    )
    parser.add_argument(
        "--page-size", type=int, default=None, metavar="N", help="evaluations per request"
    )
    add_connection_arguments(parser)


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _write(rows: list[dict[str, Any]], path: Path) -> None:
    """JSONL, or Parquet for a ``.parquet`` name; written beside and renamed, so a failed run
    never leaves half a file under the name asked for."""
    if path.suffix.lower() == ".parquet":
        from composo._data.writers import write_parquet

        write_parquet(rows, path, json_columns=("tags",))  # tags differ from row to row
        return
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False, default=datetime.isoformat) + "\n")
    partial.replace(path)


def run(args: argparse.Namespace) -> int:
    tags: dict[str, list[str]] = {}
    for key, value in args.tag:
        tags.setdefault(key, []).append(value)
    criteria, endpoint, size = args.criterion or None, args.endpoint, args.page_size
    rows = from_platform(
        args,
        lambda client: client.list_evaluations(
            tags=tags or None, criteria=criteria, endpoint=endpoint, page_size=size
        ).to_rows(),
    )
    if isinstance(rows, int):
        return rows
    if args.since is not None:
        rows = [r for r in rows if _utc(r["created_at"]) >= args.since]
    try:
        _write(rows, args.output)
    except (OSError, ImportError) as exc:
        print(f"composo history: error: {args.output}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{len(rows)} evaluation(s) written to {args.output}", file=sys.stderr)
    return 0
