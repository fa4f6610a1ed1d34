"""Data at scale, measured in one run against the local server.

1. Ray Data: 10,000 items through ``composo.ray.ComposoBatch`` on a local Ray (2 CPUs), with a
   cluster-wide budget of 32 requests in flight, against a server that takes 50 ms per answer.
   The limit is 32 / 0.05 s = 640 evaluations/s; goal: at least 0.8 of it. Printed both from the
   first permit to the last (the budget's own clock) and end to end (Ray's start-up of the
   workers included).
2. The cache: a dataset evaluated twice with the same cache (the second run answered from disk),
   against a server that takes 200 ms per answer (the hosted platform takes seconds); goal: the
   second run at least 20x faster. The cost of one answer from the cache is printed too.
3. Memory: peak resident memory of ``composo evaluate`` on a CSV of 10,000 and of 100,000 rows
   (each in a fresh process, no cache); goal: ratio at most 1.1.

    python benchmarks/bench_data.py [--quick] [--only ray|cache|memory]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_batch import Server

CRITERION = "Reward answers that explain the refund policy"
LATENCY = 0.05
BUDGET = 32


def frame(n: int) -> object:
    import pandas as pd

    return pd.DataFrame(
        {
            "id": [f"t{i}" for i in range(n)],
            "question": [f"Ticket {i}: how do refunds work for returned boots?" for i in range(n)],
            "answer": ["Unused items within 30 days get a full refund."] * n,
        }
    )


def local_rate(n: int) -> float:
    """The same evaluations from one local process (threads), for comparison on a busy machine."""
    from composo.dataframes import BatchEvaluator

    with Server(LATENCY) as srv:
        evaluate = BatchEvaluator(
            {"refund": CRITERION},
            api_key=srv.api_key,
            base_url=srv.base_url,
            max_concurrent_requests=BUDGET,
        )
        evaluate(frame(10))  # warm up
        start = time.perf_counter()
        evaluate(frame(n))
        return n / (time.perf_counter() - start)


def ray_run(n: int) -> None:
    import ray

    from composo.ray import ComposoBatch, RequestBudget

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    limit = BUDGET / LATENCY
    try:
        with Server(LATENCY) as srv:
            budget = RequestBudget(BUDGET)
            ds = ray.data.from_pandas(frame(n)).repartition(max(2, n // 250))
            start = time.perf_counter()
            out = ds.map_batches(
                ComposoBatch,
                fn_constructor_kwargs={
                    "criteria": {"refund": CRITERION},
                    "budget": budget,
                    "api_key": srv.api_key,
                    "base_url": srv.base_url,
                },
                compute=ray.data.ActorPoolStrategy(size=2),
                num_cpus=0.5,
                batch_size=250,
                batch_format="pandas",
            ).to_pandas()
            elapsed = time.perf_counter() - start
            stats = budget.stats()
    finally:
        ray.shutdown()
    failed = int(out["error"].notna().sum())
    assert len(out) == n and failed == 0, f"{failed} of {len(out)} rows failed"
    steady = n / stats["seconds"]
    local = local_rate(n // 4)
    print(f"Ray Data, {n} items, budget {BUDGET}, server latency 50 ms (limit {limit:.0f}/s):")
    print(f"  first permit to last: {steady:6.0f}/s = {steady / limit:.2f} of the limit "
          f"(goal >= 0.80); peak in flight {stats['peak']:.0f} of {BUDGET}")  # fmt: skip
    print(f"  end to end:           {n / elapsed:6.0f}/s = {n / elapsed / limit:.2f} of the limit "
          f"(worker start-up included)")  # fmt: skip
    print(f"  one local process, same budget, {n // 4} items: {local:6.0f}/s = "
          f"{local / limit:.2f} of the limit; Ray reaches {steady / local:.2f} of it")  # fmt: skip


CACHE_LATENCY = 0.2


def cache_run(n: int) -> None:
    from composo import Composo

    with tempfile.TemporaryDirectory() as where, Server(CACHE_LATENCY) as srv:
        times = []
        for _ in range(2):
            with Composo(
                api_key=srv.api_key, base_url=srv.base_url, max_concurrent_requests=5, cache=where
            ) as client:
                start = time.perf_counter()
                out = client.evaluate_dataframe(frame(n), {"refund": CRITERION})
                times.append(time.perf_counter() - start)
                assert out["error"].isna().all()
    print(f"cache, {n} rows at concurrency 5, server latency {CACHE_LATENCY * 1000:.0f} ms:")
    print(f"  first run {times[0]:6.2f}s, second run {times[1]:6.3f}s: "
          f"{times[0] / times[1]:.0f}x faster (goal >= 20x); "
          f"{times[1] / n * 1000:.2f} ms per row from the cache")  # fmt: skip


def csv_file(path: Path, n: int) -> Path:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "question", "answer"])
        for i in range(n):
            w.writerow([f"t{i}", f"Ticket {i}: how do refunds work?", "Full refund in 30 days."])
    return path


# The child's own high-water mark: VmHWM belongs to the process's memory map, made fresh at exec
# (ru_maxrss on Linux keeps the parent's peak across exec, which would hide the child's).
CHILD = (
    "import resource, sys\n"
    "from composo.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "try:\n"
    "    status = open('/proc/self/status').read().split('VmHWM:')[1]\n"
    "    peak = int(status.split()[0])\n"
    "except (OSError, IndexError):\n"
    "    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "print('PEAK', peak, code, file=sys.stderr)\n"
)


def peak_of(data: Path, out: Path, srv: Server) -> int:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "evaluate", str(data), "-c", CRITERION, "-o", str(out),
         "--no-cache", "--concurrency", "32", "--base-url", srv.base_url,
         "--api-key", srv.api_key],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "120"},
    )  # fmt: skip
    line = [x for x in done.stderr.splitlines() if x.startswith("PEAK")][-1]
    _, peak, code = line.split()
    assert code == "0", done.stderr[-2000:]
    return int(peak)


def memory_run(small: int, large: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, Server(0.0) as srv:
        root = Path(tmp)
        a = peak_of(csv_file(root / "small.csv", small), root / "a.jsonl", srv)
        b = peak_of(csv_file(root / "large.csv", large), root / "b.jsonl", srv)
        rows = sum(1 for _ in (root / "b.jsonl").open())
    assert rows == large, f"{large - rows} rows missing"
    print("memory, `composo evaluate` on a CSV (fresh process each):")
    print(f"  {small:>7} rows: peak RSS {a / 1024:6.1f} MiB")
    print(f"  {large:>7} rows: peak RSS {b / 1024:6.1f} MiB")
    print(f"  ratio {large} / {small}: {b / a:.3f} (goal <= 1.1)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    parser.add_argument("--only", choices=("ray", "cache", "memory"))
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    print(f"cores: {os.cpu_count()} (shared by Ray, the client and the server)")
    if args.only in (None, "ray"):
        ray_run(10_000 // scale)
    if args.only in (None, "cache"):
        cache_run(500 // scale)
    if args.only in (None, "memory"):
        memory_run(10_000 // scale, 100_000 // scale)
    print(json.dumps({"done": True}))


if __name__ == "__main__":
    main()
