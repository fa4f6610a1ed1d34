"""``composo cache info | prune | clear``: where the result cache is, what it holds, trimming it to
a size or an age, and emptying it."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from composo.cli import UsageError
from composo.errors import ComposoValidationError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("info", "prune", "clear"),
        help="info: where the cache is, what it holds and its limits; prune: remove what is "
        "past the limits (the cache's own, or --max-size / --max-age), oldest first; clear: "
        "remove every stored answer",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help="the cache to use (default: COMPOSO_CACHE_DIR, else the user's cache directory)",
    )
    parser.add_argument(
        "--max-size",
        metavar="SIZE",
        help="prune: keep at most this much (500MB, 2GB...; default: COMPOSO_CACHE_MAX_SIZE, "
        "else 1GB)",
    )
    parser.add_argument(
        "--max-age",
        metavar="AGE",
        help="prune: remove answers older than this (30d, 12h, 90m...; default: "
        "COMPOSO_CACHE_MAX_AGE, else 30d)",
    )


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def _age(seconds: float) -> str:
    for unit, length in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= length:
            count = seconds / length
            shown = f"{count:.0f}" if count == round(count) else f"{count:.1f}"
            return f"{shown} {unit}{'' if shown == '1' else 's'}"
    return f"{seconds:.0f} seconds"


def run(args: argparse.Namespace) -> int:
    from composo._cache import ResultCache, parse_age, parse_size

    if args.action != "prune" and (args.max_size or args.max_age):
        raise UsageError("--max-size and --max-age go with prune")
    try:
        max_bytes = parse_size(args.max_size) if args.max_size else None
    except ValueError as exc:
        raise UsageError(f"--max-size: {exc}") from None
    try:
        max_age = parse_age(args.max_age) if args.max_age else None
    except ValueError as exc:
        raise UsageError(f"--max-age: {exc}") from None
    try:
        cache = ResultCache(args.cache_dir)
    except ComposoValidationError as exc:  # a limit's environment variable
        raise UsageError(str(exc)) from None
    with contextlib.closing(cache):
        if args.action == "clear":
            removed = cache.clear()
            print(f"removed {removed} cached answer(s) from {cache.path}")
            return 0
        if args.action == "prune":
            size = cache.max_bytes if max_bytes is None else max_bytes
            age = cache.max_age if max_age is None else max_age
            pruned = cache.prune(max_bytes=size, max_age=age)
            left = cache.info()
            print(
                f"removed {pruned.entries} cached answer(s) ({_size(pruned.bytes)}) from "
                f"{cache.path}: older than {_age(age)}, then the oldest past {_size(size)}; "
                f"{left.entries} left ({_size(left.stored_bytes)})"
            )
            return 0
        info = cache.info()
        print(f"path: {info.path}")
        print(f"entries: {info.entries}")
        print(f"size: {_size(info.size_bytes)} on disk, answers {_size(info.stored_bytes)}")
        print(
            f"limits: {_size(info.max_bytes)} (oldest answers go first), {_age(info.max_age)} "
            "(COMPOSO_CACHE_MAX_SIZE, COMPOSO_CACHE_MAX_AGE)"
        )
        return 0
