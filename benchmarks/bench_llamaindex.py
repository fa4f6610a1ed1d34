"""``BatchEvalRunner`` throughput with ``ComposoEvaluator``, as ratios measured in one run.

100 responses, a local server answering each request after 200 ms, ``workers=8``. The limit is
what perfect concurrency allows: 100 / 8 x 0.2 s = 2.5 s. Printed: wall time / limit
(goal <= 1.3x), with the server in this process (``LocalServer``), the same with
``show_progress=True``, and with the server in its own process; then 40 items with a default
``ComposoEvaluator`` (one criterion, default settings: the client's 5 requests in flight, so 5
workers as the docs advise) against a ``composo serve`` process (limit 40 / 5 x 0.2 s = 1.6 s),
repeated ``REPEATS`` times to show the range. The first three give the evaluator
``max_concurrent_requests=8`` to match the runner's 8 workers. An in-process
server shares the interpreter lock with the client, so its own CPU per request shows up in the
first two figures; the third isolates what the client side costs.

Run: python benchmarks/bench_llamaindex.py
"""

from __future__ import annotations

import inspect
import sys
import time
from pathlib import Path

from llama_index.core.evaluation import BatchEvalRunner
from llama_index.evaluation.composo import ComposoEvaluator, ComposoRelevancyEvaluator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composo import Composo
from composo.server import LocalServer
from tests.support.servers import ServerProcess

N, WORKERS, LATENCY = 100, 8, 0.2
# A default evaluator's client keeps the client's default in flight; the docs advise as many
# workers.
DEFAULT_WORKERS = inspect.signature(Composo).parameters["max_concurrent_requests"].default
SMALL, REPEATS = 40, 5
GOAL = 1.3


def run_batch(
    evaluator: ComposoEvaluator, show_progress: bool, n: int = N, workers: int = WORKERS
) -> tuple[float, int]:
    runner = BatchEvalRunner({"relevancy": evaluator}, workers=workers, show_progress=show_progress)
    queries = [f"What is fact number {i} about the Eiffel Tower?" for i in range(n)]
    answers = [f"Fact {i}: the Eiffel Tower is 330 metres tall." for i in range(n)]
    contexts = [["The Eiffel Tower is 330 metres tall and stands in Paris."]] * n
    start = time.perf_counter()
    results = runner.evaluate_response_strs(
        queries=queries, response_strs=answers, contexts_list=contexts
    )
    elapsed = time.perf_counter() - start
    rows = results["relevancy"]
    return elapsed, sum(1 for r in rows if not r.invalid_result and r.score is not None)


def measure(base_url: str, api_key: str, show_progress: bool) -> tuple[float, int]:
    # As the docs advise: the client allows as many requests in flight as the runner's workers.
    evaluator = ComposoRelevancyEvaluator(
        api_key=api_key, base_url=base_url, max_concurrent_requests=WORKERS
    )
    evaluator.evaluate(query="warm up", response="warm up answer")  # imports, first connect
    try:
        return run_batch(evaluator, show_progress)
    finally:
        evaluator.close()


def measure_default(base_url: str, api_key: str) -> list[tuple[float, int]]:
    """40 items, ``ComposoEvaluator`` with nothing but a criterion and the server's address."""
    evaluator = ComposoEvaluator(
        "Reward answers that address the question", api_key=api_key, base_url=base_url
    )
    evaluator.evaluate(query="warm up", response="warm up answer")
    try:
        return [run_batch(evaluator, False, SMALL, DEFAULT_WORKERS) for _ in range(REPEATS)]
    finally:
        evaluator.close()


def main() -> None:
    limit = N / WORKERS * LATENCY
    figures: list[tuple[str, float, int]] = []
    with LocalServer(latency=LATENCY) as srv:
        figures.append(("in-process server", *measure(srv.base_url, srv.api_key, False)))
        figures.append(("  + show_progress", *measure(srv.base_url, srv.api_key, True)))
    with ServerProcess(latency=LATENCY, dev_faults=False) as proc:
        figures.append(("server process", *measure(proc.base_url, proc.api_key, False)))
        small = measure_default(proc.base_url, proc.api_key)
    print(f"BatchEvalRunner, {N} responses, {WORKERS} workers, {LATENCY * 1000:.0f} ms latency")
    print(f"  limit (N / workers x latency)  {limit:6.2f} s")
    for label, elapsed, ok in figures:
        ratio = elapsed / limit
        verdict = "ok" if ratio <= GOAL and ok == N else "MISSED"
        print(
            f"  {label:<20} wall {elapsed:6.2f} s  ratio {ratio:4.2f}x "
            f"(goal <= {GOAL}x, {ok}/{N} scored)  {verdict}"
        )
    small_limit = SMALL / DEFAULT_WORKERS * LATENCY
    ratios = sorted(elapsed / small_limit for elapsed, _ in small)
    all_ok = all(ok == SMALL for _, ok in small)
    verdict = "ok" if ratios[len(ratios) // 2] <= GOAL and all_ok else "MISSED"
    print(
        f"Default ComposoEvaluator, {SMALL} items, {DEFAULT_WORKERS} workers, server process, "
        f"limit {small_limit:.2f} s, {REPEATS} runs"
    )
    print(
        f"  ratio min {ratios[0]:4.2f}x  median {ratios[len(ratios) // 2]:4.2f}x  "
        f"max {ratios[-1]:4.2f}x (goal: median <= {GOAL}x)  {verdict}"
    )


if __name__ == "__main__":
    main()
