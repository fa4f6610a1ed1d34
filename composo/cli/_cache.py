"""``composo cache info | clear``: where the result cache is, what it holds, and emptying it."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("info", "clear"),
        help="info: where the cache is and what it holds; clear: remove every stored answer",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help="the cache to use (default: COMPOSO_CACHE_DIR, else the user's cache directory)",
    )


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def run(args: argparse.Namespace) -> int:
    from composo._cache import ResultCache

    cache = ResultCache(args.cache_dir)
    try:
        if args.action == "clear":
            removed = cache.clear()
            print(f"removed {removed} cached answer(s) from {cache.path}")
            return 0
        info = cache.info()
        print(f"path: {info.path}")
        print(f"entries: {info.entries}")
        print(f"size: {_size(info.size_bytes)}")
        return 0
    finally:
        cache.close()
