"""What a write to the result cache costs, below its size cap and at it, measured in one run.

1. Below the cap: ``put`` of 2 KiB answers (as the local server's are) into a cache far from
   full: the upsert, the triggers keeping the running total, and the read of that total the cap
   is checked with. Median and mean (the mean carries SQLite's checkpoints of its log).
2. At the cap: a cache capped at 16 MiB, written three times over; a write that takes it past
   the cap removes the oldest answers down to 99% of it, in one statement. The median and mean
   write (evictions included) as ratios of (1)'s, the slowest write, and what is kept against
   the cap (counted, and the file's size).

``--module PATH`` times (1) with another version of ``composo/_cache.py`` too (``git show
REV:composo/_cache.py > old.py``), for a before/after ratio on the same machine.

    python benchmarks/bench_cache.py [--module old.py]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from composo._cache import ResultCache

CAP = 16 * 1024 * 1024
BODY = json.dumps({"score": 0.8, "explanation": "The answer states the refund policy. " * 50})
HEADERS = {"x-composo-judge": "heuristic"}


def writes(cache: Any, n: int, start: int = 0) -> list[float]:
    """Seconds per ``put`` of ``n`` new answers."""
    body = BODY.encode()
    out = []
    for i in range(start, start + n):
        key = f"{i:064x}"
        t0 = time.perf_counter()
        cache.put(key, body, HEADERS)
        out.append(time.perf_counter() - t0)
    return out


def below_cap(cls: Any, n: int = 20_000) -> tuple[float, float]:
    """Median and mean seconds per write into a cache far from its cap."""
    with tempfile.TemporaryDirectory() as where:
        cache = cls(where)
        writes(cache, 200)  # the file, its pages and the statements' plans exist
        times = writes(cache, n, start=200)
        cache.close()
    return statistics.median(times), statistics.fmean(times)


def at_cap() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as where:
        cache = ResultCache(where, max_bytes=CAP)
        per_write = len(BODY) + 64 + len(json.dumps(HEADERS)) + 100
        n = 3 * CAP // per_write
        times = writes(cache, n)
        info = cache.info()
        main_file = Path(info.path).stat().st_size
        cache.close()
    return {
        "writes": n,
        "mean": statistics.fmean(times),
        "median": statistics.median(times),
        "removed": n - info.entries,
        "slowest": max(times),
        "stored_over_cap": info.stored_bytes / CAP,
        "file_over_cap": main_file / CAP,
        "entries": info.entries,
    }


def load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("composo_cache_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module.ResultCache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", help="another composo/_cache.py to time below the cap")
    args = parser.parse_args()
    os.environ.pop("COMPOSO_CACHE_MAX_SIZE", None)
    os.environ.pop("COMPOSO_CACHE_MAX_AGE", None)

    median, mean = below_cap(ResultCache)
    print(f"write below the cap: median {median * 1e6:.0f} us, mean {mean * 1e6:.0f} us")
    if args.module:
        then_median, then_mean = below_cap(load(args.module))
        print(
            f"  {args.module}: median {then_median * 1e6:.0f} us, mean {then_mean * 1e6:.0f} us;"
            f" this version / that one: {median / then_median:.2f}x median, "
            f"{mean / then_mean:.2f}x mean"
        )
    full = at_cap()
    print(
        f"at the cap ({CAP // 2**20} MiB, {full['writes']:.0f} writes = 3x the cap): median "
        f"{full['median'] * 1e6:.0f} us = {full['median'] / median:.2f}x, mean "
        f"{full['mean'] * 1e6:.0f} us = {full['mean'] / mean:.2f}x the write below the cap; "
        f"{full['removed']:.0f} answers removed, the slowest write {full['slowest'] * 1e3:.1f} ms"
    )
    print(
        f"  kept {full['entries']:.0f} answers: {full['stored_over_cap']:.3f}x the cap counted, "
        f"the file {full['file_over_cap']:.2f}x the cap"
    )


if __name__ == "__main__":
    main()
